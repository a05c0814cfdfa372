//! A resumed run replayed across its resumes: the record split where each `resume` entry
//! starts, the first part replayed through `submit` and each later one through `resume`, as
//! the run was driven. A part ends where something outside the run stopped it (an operator's
//! halt, a signal, a killed process, a gate that paused it): the engine is let write as many
//! entries as the record holds for that part and no more, then what the record witnessed from
//! outside (`halted`, `interrupted`, a person's decision on the gate) is copied into the
//! scratch ledger as the world's doing, not the run's.

use crate::ledger::canonical::Value;
use crate::ledger::{Entry, MemoryStorage, NewEntry, Storage, StorageError, kind};

use super::Recorded;

/// One part of a run: what the engine wrote, then what stopped it from outside.
pub(super) struct Phase<'a> {
    /// The entries the engine wrote in this part.
    pub(super) written: &'a [Recorded],
    /// The entries that record an outside stop at its end (none for a part that ended by
    /// itself).
    pub(super) stopped: &'a [Recorded],
    /// Whether the part is a resume (every part but the first).
    pub(super) resumed: bool,
    /// Whether it ends where the record ends; a part a resume follows was stopped, by a
    /// recorded stop or by a process that was killed and wrote nothing more.
    pub(super) last: bool,
}

/// Entries that record a stop, or a decision, from outside the run.
fn outside(e: &Recorded) -> bool {
    e.kind == kind::HALTED || e.kind == kind::INTERRUPTED || super::gates::decided_by_a_person(e)
}

/// The run's parts, split before each `resume` entry.
pub(super) fn phases(run: &[Recorded]) -> Vec<Phase<'_>> {
    let mut starts: Vec<usize> = run
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == kind::RESUME)
        .map(|(i, _)| i)
        .collect();
    starts.insert(0, 0);
    starts.push(run.len());
    starts
        .windows(2)
        .enumerate()
        .map(|(k, w)| (k, w, k + 2 == starts.len()))
        .map(|(k, w, last)| {
            let part = &run[w[0]..w[1]];
            let kept = part.len() - part.iter().rev().take_while(|e| outside(e)).count();
            Phase {
                written: &part[..kept],
                stopped: &part[kept..],
                resumed: k > 0,
                last,
            }
        })
        .collect()
}

/// The entries a part's replies are read from: the plan and task entries of the parts before
/// it (a resume continues their plan and tasks) and the part's own.
pub(super) fn view(run: &[Recorded], phase: &Phase<'_>) -> Vec<Recorded> {
    let first = phase.written.first().map_or(0, |e| e.seq);
    run.iter()
        .filter(|e| e.seq < first && (e.kind == kind::PLAN || e.kind == kind::TASK))
        .chain(phase.written.iter())
        .cloned()
        .collect()
}

/// The scratch ledger, taking at most `left` more entries when a part must end where the
/// record says it was stopped.
pub(super) struct Bounded<'s> {
    pub(super) inner: &'s mut MemoryStorage,
    pub(super) left: Option<usize>,
    /// How many entries the part has written so far (read by a dispatcher that holds a task
    /// until the part has written what the record holds of it).
    pub(super) written: Written,
}

/// A count of the entries a part wrote, shared with whoever waits on it.
pub(super) type Written = std::sync::Arc<std::sync::atomic::AtomicUsize>;

impl Storage for Bounded<'_> {
    fn len(&self) -> Result<u64, StorageError> {
        self.inner.len()
    }

    fn head(&self) -> Result<Option<Entry>, StorageError> {
        self.inner.head()
    }

    fn get(&self, seq: u64) -> Result<Option<Entry>, StorageError> {
        self.inner.get(seq)
    }

    fn payload(&self, payload_hash: &str) -> Result<Option<Value>, StorageError> {
        self.inner.payload(payload_hash)
    }

    fn append(&mut self, new: NewEntry) -> Result<Entry, StorageError> {
        match &mut self.left {
            Some(0) => Err(StorageError::Io(
                "the record was stopped from outside here".into(),
            )),
            Some(n) => {
                *n -= 1;
                self.inner.append(new)
            }
            None => self.inner.append(new),
        }
        .inspect(|_| {
            self.written
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
    }
}

/// Copies the recorded stop of a part into the scratch ledger, each entry's causal parent the
/// replayed entry standing where the recorded one stands in the run (`run`, recorded;
/// `replayed`, the scratch's entries of the run so far).
pub(super) fn copy_stop(
    scratch: &mut MemoryStorage,
    run: &[Recorded],
    replayed: &[Recorded],
    stopped: &[Recorded],
) -> Result<(), StorageError> {
    for e in stopped {
        let parent = e.parent.map(|p| {
            run.iter()
                .position(|r| r.seq == p)
                .and_then(|i| replayed.get(i))
                .map_or(p, |r| r.seq)
        });
        scratch.append(NewEntry {
            actor: e.actor.clone(),
            kind: e.kind.clone(),
            causal_parent: parent.map(|p| p as i64),
            payload: Value::from_serde(&e.payload),
            ts: e.ts,
        })?;
    }
    Ok(())
}
