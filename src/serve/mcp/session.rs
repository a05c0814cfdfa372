//! The stdio loop of the MCP server: one thread reads lines, one worker runs the tool calls
//! in the order they came, and every message goes out as one whole line through one locked
//! writer. `ping` is answered by the reader at once; `notifications/cancelled` raises the
//! named call's [`Interrupt`] (or drops it, when it has not started); any other reply waits
//! behind the tool calls before it, so replies keep the order of their requests.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use serde_json::Value as J;

use super::progress::Notifier;
use super::{Call, Incoming, MAX_LINE, Mcp, error, read};
use crate::run::Interrupt;
use crate::serve::dispatch::{RunHooks, lock};

/// What the `interrupted` entry of a cancelled run names as its cause.
pub const CANCELLED: &str = "notifications/cancelled";

/// The one writer: each message is one line, written and flushed whole under its lock. After
/// a write error (the client went away) it writes nothing more.
pub(super) struct Out<'w> {
    w: Mutex<Box<dyn Write + Send + 'w>>,
    broken: AtomicBool,
}

impl<'w> Out<'w> {
    fn new(w: impl Write + Send + 'w) -> Out<'w> {
        Out {
            w: Mutex::new(Box::new(w)),
            broken: AtomicBool::new(false),
        }
    }

    /// Writes `msg` as one line.
    pub(super) fn send(&self, msg: &J) {
        let mut text = msg.to_string();
        text.push('\n');
        let mut w = lock(&self.w);
        if self.broken.load(Ordering::SeqCst) {
            return;
        }
        if w.write_all(text.as_bytes())
            .and_then(|_| w.flush())
            .is_err()
        {
            self.broken.store(true, Ordering::SeqCst);
        }
    }

    fn is_broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
    }
}

/// What the worker does next, in order.
enum Job {
    /// Run a tool call and answer it.
    Call(Call),
    /// Send a reply already made (it waited for the calls before it).
    Ready(J),
}

/// The worker's queue and what cancellation needs to know of the calls.
#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Jobs queued or running: while there are any, replies the reader makes wait behind them.
    pending: usize,
    /// No more jobs will come (end of input).
    closed: bool,
    /// The running call's id (as JSON text) and its interrupt.
    running: HashMap<String, Arc<Interrupt>>,
    /// Ids cancelled before their reply went out: they get none.
    cancelled: HashSet<String>,
}

struct Shared<'w> {
    state: Mutex<State>,
    wake: Condvar,
    out: Out<'w>,
}

impl Shared<'_> {
    /// Sends `reply` now when nothing is queued before it, or else after what is.
    fn in_order(&self, reply: J) {
        let mut st = lock(&self.state);
        if st.pending == 0 {
            self.out.send(&reply);
        } else {
            st.pending += 1;
            st.jobs.push_back(Job::Ready(reply));
            self.wake.notify_all();
        }
    }

    fn queue(&self, call: Call) {
        let mut st = lock(&self.state);
        st.pending += 1;
        st.jobs.push_back(Job::Call(call));
        self.wake.notify_all();
    }

    /// `notifications/cancelled {requestId}`: a running call's run is interrupted, a queued
    /// call is dropped, and neither is answered. An id that is not in flight is ignored.
    fn cancel(&self, params: &J) {
        let Some(id) = params
            .get("requestId")
            .filter(|i| i.is_string() || i.is_number())
        else {
            return;
        };
        let key = id.to_string();
        let mut st = lock(&self.state);
        if let Some(interrupt) = st.running.get(&key) {
            interrupt.raise(CANCELLED);
            st.cancelled.insert(key);
        } else if st
            .jobs
            .iter()
            .any(|j| matches!(j, Job::Call(c) if c.id == *id))
        {
            st.cancelled.insert(key);
        }
    }

    fn close(&self) {
        lock(&self.state).closed = true;
        self.wake.notify_all();
    }

    /// Runs the jobs in order until input has ended and none is left.
    fn work(&self, mcp: &Mcp<'_>) {
        loop {
            let job = {
                let mut st = lock(&self.state);
                loop {
                    if let Some(job) = st.jobs.pop_front() {
                        break job;
                    }
                    if st.closed {
                        return;
                    }
                    st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            };
            match job {
                Job::Ready(reply) => self.out.send(&reply),
                Job::Call(call) => self.run(mcp, call),
            }
            lock(&self.state).pending -= 1;
        }
    }

    fn run(&self, mcp: &Mcp<'_>, call: Call) {
        let key = call.id.to_string();
        let interrupt = Arc::new(Interrupt::new());
        {
            let mut st = lock(&self.state);
            if st.cancelled.remove(&key) || self.out.is_broken() {
                return;
            }
            st.running.insert(key.clone(), interrupt.clone());
        }
        let notifier = call
            .progress_token()
            .map(|token| Notifier::new(token, &self.out, interrupt.clone()));
        let hooks = RunHooks {
            interrupt: Some(interrupt),
            progress: notifier.as_ref().map(|n| n as &dyn crate::run::Progress),
        };
        let reply = mcp.answer(&call, hooks);
        let cancelled = {
            let mut st = lock(&self.state);
            st.running.remove(&key);
            st.cancelled.remove(&key)
        };
        if !cancelled {
            self.out.send(&reply);
        }
    }
}

/// Serves `mcp` until `input` ends, then waits for the calls in flight and answers them.
pub(super) fn serve(
    mcp: &Mcp<'_>,
    mut input: impl BufRead,
    output: impl Write + Send,
) -> std::io::Result<()> {
    let shared = Shared {
        state: Mutex::new(State::default()),
        wake: Condvar::new(),
        out: Out::new(output),
    };
    std::thread::scope(|s| {
        s.spawn(|| shared.work(mcp));
        let read = pump(mcp, &mut input, &shared);
        shared.close();
        read
    })
}

/// Reads lines until input ends (or the client stops reading), handing each on.
fn pump(mcp: &Mcp<'_>, input: &mut impl BufRead, shared: &Shared<'_>) -> std::io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let (more, too_long) = read_line(input, &mut line, MAX_LINE)?;
        if !more && line.is_empty() {
            return Ok(());
        }
        if too_long {
            shared.in_order(error(
                J::Null,
                -32600,
                &format!("Invalid Request: the message is longer than {MAX_LINE} bytes"),
            ));
        } else if !line.trim_ascii().is_empty() {
            match read(line.trim_ascii()) {
                Incoming::Reply(r) => shared.in_order(r),
                Incoming::Quiet => {}
                Incoming::Notice { method, params } => {
                    if method == CANCELLED {
                        shared.cancel(&params);
                    }
                }
                Incoming::Request(call) => match call.method.as_str() {
                    // Liveness is answered at once, whatever runs.
                    "ping" => shared.out.send(&mcp.answer(&call, RunHooks::default())),
                    "tools/call" => shared.queue(call),
                    _ => shared.in_order(mcp.answer(&call, RunHooks::default())),
                },
            }
        }
        if !more || shared.out.is_broken() {
            return Ok(());
        }
    }
}

/// Reads one line (without its `\n`) into `buf`, keeping at most `cap` bytes and discarding
/// the rest of a longer one. Returns (whether input may go on, whether the line was cut).
fn read_line(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<(bool, bool)> {
    let mut cut = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok((false, cut));
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !cut {
            if buf.len() + take > cap {
                cut = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        input.consume(if done { take + 1 } else { take });
        if done {
            return Ok((true, cut));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_and_the_next_line_still_reads() {
        let data = b"aaaaaaaaaa\nbb\ncc";
        let mut input = &data[..];
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut input, &mut buf, 4).unwrap(), (true, true));
        buf.clear();
        assert_eq!(read_line(&mut input, &mut buf, 4).unwrap(), (true, false));
        assert_eq!(buf, b"bb");
        buf.clear();
        assert_eq!(read_line(&mut input, &mut buf, 4).unwrap(), (false, false));
        assert_eq!(buf, b"cc");
    }
}
