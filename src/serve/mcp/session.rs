//! The stdio loop of the MCP server: one thread reads lines, tool calls run concurrently on
//! up to [`MAX_CALLS`] threads (more calls wait in a queue, in the order they came), and every
//! message goes out as one whole line through one locked writer, in the order it is ready.
//! Every other request is answered by the reader at once. `notifications/cancelled` raises the
//! named call's [`Interrupt`] (which also kills its commands) or drops it, when it is still
//! queued. JSON-RPC orders nothing between requests in flight: a client that needs one call's
//! effect before the next waits for its reply.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, Write};
use std::sync::{Arc, Condvar, Mutex};

use serde_json::Value as J;

use super::out::Out;
use super::progress::Notifier;
use super::{Call, Incoming, MAX_LINE, Mcp, error, read};
use crate::serve::dispatch::{RunHooks, lock};
use crate::surface::run::Interrupt;

/// What the `interrupted` entry of a cancelled run names as its cause.
pub(super) const CANCELLED: &str = "notifications/cancelled";

/// Most tool calls running at once; further calls wait in the queue.
pub(super) const MAX_CALLS: usize = 8;

/// The queue of tool calls and what cancellation needs to know of them.
#[derive(Default)]
struct State {
    queue: VecDeque<Call>,
    /// Call threads started, and how many of them wait for a call.
    threads: usize,
    idle: usize,
    /// No more calls will come (end of input).
    closed: bool,
    /// The running calls' ids (as JSON text) and their interrupts.
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
    /// Queues `call`; returns whether a new call thread is wanted to run it (none is idle and
    /// fewer than [`MAX_CALLS`] run). The caller then starts one, which counts itself.
    fn queue(&self, call: Call) -> bool {
        let mut st = lock(&self.state);
        st.queue.push_back(call);
        let spawn = st.idle == 0 && st.threads < MAX_CALLS;
        if spawn {
            st.threads += 1;
        } else {
            self.wake.notify_one();
        }
        spawn
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
        } else if st.queue.iter().any(|c| c.id == *id) {
            st.cancelled.insert(key);
        }
    }

    fn close(&self) {
        lock(&self.state).closed = true;
        self.wake.notify_all();
    }

    /// One call thread: runs queued calls until input has ended and none is left.
    fn work(&self, mcp: &Mcp<'_>) {
        loop {
            let call = {
                let mut st = lock(&self.state);
                loop {
                    if let Some(call) = st.queue.pop_front() {
                        break call;
                    }
                    if st.closed {
                        return;
                    }
                    st.idle += 1;
                    st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                    st.idle -= 1;
                }
            };
            self.run(mcp, call);
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
            progress: notifier
                .as_ref()
                .map(|n| n as &dyn crate::surface::run::Progress),
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
        let shared = &shared;
        let read = pump(mcp, &mut input, shared, &|| {
            s.spawn(|| shared.work(mcp));
        });
        shared.close();
        read
    })
}

/// Reads lines until input ends (or the client stops reading), handing each on; `spawn`
/// starts one more call thread.
fn pump(
    mcp: &Mcp<'_>,
    input: &mut impl BufRead,
    shared: &Shared<'_>,
    spawn: &dyn Fn(),
) -> std::io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let (more, too_long) = read_line(input, &mut line, MAX_LINE)?;
        if !more && line.is_empty() {
            return Ok(());
        }
        if too_long {
            shared.out.send(&error(
                J::Null,
                -32600,
                &format!("Invalid Request: the message is longer than {MAX_LINE} bytes"),
            ));
        } else if !line.trim_ascii().is_empty() {
            match read(line.trim_ascii()) {
                Incoming::Reply(r) => shared.out.send(&r),
                Incoming::Quiet => {}
                Incoming::Notice { method, params } => {
                    if method == CANCELLED {
                        shared.cancel(&params);
                    }
                }
                Incoming::Request(call) => match call.method.as_str() {
                    "tools/call" => {
                        if shared.queue(call) {
                            spawn();
                        }
                    }
                    // The rest reads no ledger: answered at once, whatever runs.
                    _ => shared.out.send(&mcp.answer(&call, RunHooks::default())),
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
pub(crate) fn read_line(
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
