//! Reading a command's output: to the end, keeping at most a cap of it while the rest is
//! drained and dropped, and (for an agent's progress) handing each line on as it comes.

use std::io::Read;

/// Reads `r` to the end, keeping at most `cap` bytes. Returns the bytes and whether more came.
pub(super) fn drain<R: Read>(r: R, cap: usize) -> (Vec<u8>, bool) {
    drain_lines(r, cap, None)
}

/// The longest line handed to a line watcher: a longer one is cut (its start is handed on,
/// the rest dropped as it comes), so a watcher never holds more than this.
pub(crate) const LINE_CAP: usize = 1024 * 1024;

/// Something handed each line of a command's stdout as it comes (see [`run_watching`]).
pub(crate) type OnLine<'a> = &'a mut (dyn FnMut(&str) + Send);

/// [`drain`], handing each line of the bytes kept to `on_line` as soon as it is complete (its
/// newline read, or the end reached), without its line end; a line longer than [`LINE_CAP`]
/// is handed on cut. Only the kept bytes are read as lines, so a flood past `cap` shows
/// nothing more.
pub(super) fn drain_lines<R: Read>(
    mut r: R,
    cap: usize,
    mut on_line: Option<OnLine<'_>>,
) -> (Vec<u8>, bool) {
    let mut kept = Vec::with_capacity(cap.min(64 * 1024));
    let mut buf = [0u8; 64 * 1024];
    let mut over = false;
    let mut line = Line::default();
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                let new = &buf[..n.min(room)];
                kept.extend_from_slice(new);
                over |= n > room;
                if let Some(f) = on_line.as_deref_mut() {
                    line.feed(new, f);
                }
            }
        }
    }
    if let Some(f) = on_line {
        line.end(f);
    }
    (kept, over)
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
