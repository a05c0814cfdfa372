//! The order a dispatched wave's tasks go out in. Each task of a wave runs on a thread of its
//! own, and without an order the threads reach the stream in whatever order they are woken:
//! workers then take the tasks in that order, results come back in it, and a run that ships
//! early ([`super::Run::ships_early`]) can ship nothing until the first task in plan order is
//! back, so most merges are left to the wave's end. With a [`SendOrder`] a task is witnessed
//! as dispatched and published only after every task before it in the wave went out or ended
//! without going out; the pushes of their bases still go together.
//!
//! Tasks are taken by the wave's threads in the same order, so a task waits only for tasks a
//! thread already holds, and each of those goes out or ends without waiting for a later one.
//! A [`Sent`] guard lets a task's turn go when it is dropped, whatever path the task took.

use std::sync::{Arc, Condvar, Mutex};

use super::lock;

/// A wave's tasks in the order they go out, and which of them went (or will not go).
pub(super) struct SendOrder {
    ids: Vec<String>,
    gone: Mutex<Vec<bool>>,
    changed: Condvar,
}

impl SendOrder {
    /// The order of `ids`, none gone yet.
    pub(super) fn new(ids: Vec<String>) -> SendOrder {
        let gone = Mutex::new(vec![false; ids.len()]);
        SendOrder {
            ids,
            gone,
            changed: Condvar::new(),
        }
    }

    /// Waits until every task before `id` went out or ended (at once for a task not in the
    /// order).
    pub(super) fn wait(&self, id: &str) {
        let Some(i) = self.ids.iter().position(|t| t == id) else {
            return;
        };
        let mut gone = lock(&self.gone);
        while !gone[..i].iter().all(|g| *g) {
            gone = self
                .changed
                .wait(gone)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// `id` went out (or will not): the tasks after it may go.
    pub(super) fn release(&self, id: &str) {
        if let Some(i) = self.ids.iter().position(|t| t == id) {
            lock(&self.gone)[i] = true;
            self.changed.notify_all();
        }
    }

    /// A guard that releases `id` when dropped.
    pub(super) fn guard(self: &Arc<Self>, id: &str) -> Sent {
        Sent {
            order: Arc::clone(self),
            id: id.to_string(),
        }
    }
}

/// Releases its task's turn when dropped.
pub(super) struct Sent {
    order: Arc<SendOrder>,
    id: String,
}

impl Drop for Sent {
    fn drop(&mut self) {
        self.order.release(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_go_out_in_the_order_given_whatever_order_their_threads_come_in() {
        let ids: Vec<String> = (1..=6).map(|i| format!("T{i}")).collect();
        let order = Arc::new(SendOrder::new(ids.clone()));
        let sent = Mutex::new(Vec::new());
        // The threads start last first; each goes out only in its turn.
        std::thread::scope(|s| {
            for id in ids.iter().rev() {
                let (order, sent) = (&order, &sent);
                s.spawn(move || {
                    let _gone = order.guard(id);
                    order.wait(id);
                    lock(sent).push(id.clone());
                });
            }
        });
        assert_eq!(*lock(&sent), ids);
    }

    #[test]
    fn a_task_that_ends_without_going_out_lets_the_next_go_and_one_not_in_the_order_never_waits() {
        let order = Arc::new(SendOrder::new(vec!["T1".into(), "T2".into()]));
        {
            let _t1 = order.guard("T1");
        }
        // T1 ended: T2 does not wait; T3 is not in the order and does not either.
        order.wait("T2");
        order.wait("T3");
        assert_eq!(*lock(&order.gone), vec![true, false]);
    }
}
