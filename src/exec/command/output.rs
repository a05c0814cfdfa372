//! Reading a command's output: to the end, keeping at most a cap of it while the rest is
//! drained and dropped, and (for an agent's progress) handing each line on as it comes.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use super::watchdog::Watch;

/// The longest line handed to a line watcher: a longer one is cut (its start is handed on,
/// the rest dropped as it comes), so a watcher never holds more than this.
pub(crate) const LINE_CAP: usize = 1024 * 1024;

/// Something handed each line of a command's stdout as it comes (see [`run_watching`]).
pub(crate) type OnLine<'a> = &'a mut (dyn FnMut(&str) + Send);

/// The most reads of one pipe between two looks of the waiting thread (a pipe holds 64 KiB
/// by default, one read's worth).
const READS_AT_ONCE: usize = 16;

/// One output of a command (its stdout or stderr pipe), read by the thread that waits for the
/// command as the pipe has bytes, without a thread of its own: at most a cap of it is kept
/// while the rest is read and dropped, and when it has a line watcher each line of the kept
/// bytes is handed on as soon as it is complete (its newline read, or the end reached),
/// without its line end; a line longer than [`LINE_CAP`] is handed on cut. Only the kept
/// bytes are read as lines, so a flood past the cap shows nothing more.
pub(super) struct Stream<'a> {
    fd: OwnedFd,
    open: bool,
    kept: Vec<u8>,
    cap: usize,
    over: bool,
    line: Line,
    on_line: Option<OnLine<'a>>,
}

impl<'a> Stream<'a> {
    /// The read end `fd` of a pipe, made non-blocking (it is this process's alone).
    pub(super) fn new(fd: OwnedFd, cap: usize, on_line: Option<OnLine<'a>>) -> Stream<'a> {
        use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
        let _ = fcntl_getfl(&fd).and_then(|f| fcntl_setfl(&fd, f | OFlags::NONBLOCK));
        Stream {
            fd,
            open: true,
            kept: Vec::with_capacity(cap.min(4096)),
            cap,
            over: false,
            line: Line::default(),
            on_line,
        }
    }

    /// Whether its end has not been read yet.
    pub(super) fn is_open(&self) -> bool {
        self.open
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Reads what the pipe holds now (into `buf`, then kept or dropped), at most
    /// [`READS_AT_ONCE`] reads, so that a writer that never lets the pipe empty cannot keep
    /// the waiting thread from its looks at the deadline and the stop request: whether bytes
    /// came. The end of the pipe, or an error, closes the stream.
    pub(super) fn read_now(&mut self, buf: &mut [u8]) -> bool {
        let mut came = false;
        for _ in 0..READS_AT_ONCE {
            if !self.open {
                break;
            }
            match rustix::io::read(&self.fd, &mut *buf) {
                Ok(0) => self.open = false,
                Ok(n) => {
                    self.take(&buf[..n]);
                    came = true;
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => break,
                Err(_) => self.open = false,
            }
        }
        came
    }

    fn take(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.kept.len());
        let new = &bytes[..bytes.len().min(room)];
        self.kept.extend_from_slice(new);
        self.over |= bytes.len() > room;
        if let Some(f) = self.on_line.as_deref_mut() {
            self.line.feed(new, f);
        }
    }

    /// The bytes kept and whether more came; the last line goes to the watcher.
    pub(super) fn finish(self) -> (Vec<u8>, bool) {
        if let Some(f) = self.on_line {
            self.line.end(f);
        }
        (self.kept, self.over)
    }
}

/// A pidfd of the process `child` (a child of this one), readable once it has ended (nothing is reaped by it), so that a wait
/// ends when the child does rather than at its next look, without a thread to wait for it.
/// `None` when the kernel gives none: the caller then only looks.
pub(super) fn exit_notice(child: u32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(child as i32)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Waits until a stream that is still open has bytes or its end, `exited` (see
/// [`exit_notice`]) says the child has ended, or `pause` has passed (never, without one), and
/// reads what the streams hold, each read keeping `watch` awake.
pub(super) fn pump(
    streams: &mut [Stream<'_>],
    exited: Option<&OwnedFd>,
    pause: Option<Duration>,
    watch: &Watch,
    buf: &mut [u8],
) {
    use rustix::event::{PollFd, PollFlags, poll};
    let timeout = pause.map(|p| rustix::time::Timespec {
        tv_sec: p.as_secs() as _,
        tv_nsec: p.subsec_nanos() as _,
    });
    let mut fds: Vec<PollFd<'_>> = exited
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .into_iter()
        .chain(
            streams
                .iter()
                .filter(|s| s.is_open())
                .map(|s| PollFd::from_borrowed_fd(s.fd(), PollFlags::IN)),
        )
        .collect();
    if fds.is_empty() {
        // Nothing to wait on: only the pause.
        if let Some(p) = pause {
            std::thread::sleep(p);
        }
        return;
    }
    // An interruption ends the wait early: the caller looks again and comes back.
    let _ = poll(&mut fds, timeout.as_ref());
    let ready: Vec<bool> = fds
        .iter()
        .skip(usize::from(exited.is_some()))
        .map(|f| !f.revents().is_empty())
        .collect();
    drop(fds);
    let open = streams.iter_mut().filter(|s| s.is_open());
    for (stream, ready) in open.zip(ready) {
        if ready && stream.read_now(buf) {
            watch.touch();
        }
    }
}

/// The line being read for a line watcher: at most [`LINE_CAP`] bytes of it.
#[derive(Default)]
struct Line {
    bytes: Vec<u8>,
}

impl Line {
    /// Takes in `chunk`, handing every line it completes to `f`.
    fn feed(&mut self, mut chunk: &[u8], f: &mut (dyn FnMut(&str) + Send)) {
        while let Some(at) = chunk.iter().position(|&b| b == b'\n') {
            self.take(&chunk[..at]);
            self.hand(f);
            chunk = &chunk[at + 1..];
        }
        self.take(chunk);
    }

    fn take(&mut self, part: &[u8]) {
        let room = LINE_CAP.saturating_sub(self.bytes.len());
        self.bytes.extend_from_slice(&part[..part.len().min(room)]);
    }

    fn hand(&mut self, f: &mut (dyn FnMut(&str) + Send)) {
        let text = String::from_utf8_lossy(&self.bytes);
        f(text.strip_suffix('\r').unwrap_or(&text));
        self.bytes.clear();
    }

    /// Hands on the last line when the output did not end with a newline.
    fn end(mut self, f: &mut (dyn FnMut(&str) + Send)) {
        if !self.bytes.is_empty() {
            self.hand(f);
        }
    }
}

/// What a failed program said, on one line: its first few non-empty stderr lines (where a CLI
/// names what went wrong) and, when it said more, its last (where a backtrace ends), joined by
/// ` | `, each line cut to 200 characters.
pub(super) fn tail(stderr: &str) -> String {
    const FIRST: usize = 3;
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let cut = |l: &str| -> String { l.chars().take(200).collect() };
    let mut kept: Vec<String> = lines.iter().take(FIRST).map(|l| cut(l)).collect();
    if lines.len() > FIRST + 1 {
        kept.push("...".into());
    }
    if lines.len() > FIRST {
        kept.push(cut(lines[lines.len() - 1]));
    }
    format!(": {}", kept.join(" | "))
}

/// The program's stdout as text. A cut can split a character: only a bad byte before the last
/// few counts.
pub(super) fn stdout_text(
    stdout: Vec<u8>,
    truncated: bool,
    program: &str,
) -> Result<String, super::CommandError> {
    match String::from_utf8(stdout) {
        Ok(s) => Ok(s),
        Err(e) if truncated && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            Ok(String::from_utf8(bytes).expect("prefix is valid"))
        }
        Err(e) => Err(super::CommandError::NotUtf8 {
            program: program.to_string(),
            offset: e.utf8_error().valid_up_to(),
        }),
    }
}
