//! The live descendants of this process, found in `/proc` without allocating (so the cloned
//! reaper, which may not, can use it): each process's parent is read from `/proc/PID/stat`
//! into an `mmap`ed table, and the descendants are marked from this process down. Every system
//! call is rustix's, so libc's `errno` is never written (the reaper shares git forum's memory).

// The cloned reaper may not allocate: its table comes from `mmap`.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::mem::MaybeUninit;

/// The most processes one walk looks at: Linux's largest `pid_max`.
const MAX_PIDS: usize = 1 << 22;

/// Anonymous memory, unmapped when dropped.
struct Mapped {
    at: *mut std::ffi::c_void,
    len: usize,
}

impl Mapped {
    fn new(len: usize) -> Option<Mapped> {
        // SAFETY: a fresh private anonymous mapping; only pages touched are backed.
        use rustix::mm::{MapFlags, ProtFlags};
        let at = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        };
        at.ok().map(|at| Mapped { at, len })
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        let _ = unsafe { rustix::mm::munmap(self.at, self.len) };
    }
}

/// Calls `each` with every live descendant (zombies left out) of this process.
pub(crate) fn each_descendant(mut each: impl FnMut(i32)) {
    // (pid, parent) of every live process, then one bit per pid: a descendant or this one.
    let pairs_len = MAX_PIDS * 8;
    let Some(map) = Mapped::new(pairs_len + MAX_PIDS / 8) else {
        return;
    };
    // SAFETY: the mapping is ours, zeroed, and these two views do not overlap.
    let pairs: &mut [[i32; 2]] = unsafe { std::slice::from_raw_parts_mut(map.at.cast(), MAX_PIDS) };
    let marks: &mut [u8] =
        unsafe { std::slice::from_raw_parts_mut(map.at.cast::<u8>().add(pairs_len), MAX_PIDS / 8) };
    let n = read_parents(pairs);
    let marked = |marks: &[u8], p: i32| {
        let p = p as usize;
        p < MAX_PIDS && marks[p / 8] & (1 << (p % 8)) != 0
    };
    let me = rustix::process::getpid().as_raw_nonzero().get() as usize;
    marks[me / 8] |= 1 << (me % 8);
    // Parents usually have smaller pids, so one pass mostly finds all; more follow until
    // none finds another (a tree that wrapped around the pid space).
    loop {
        let mut found = false;
        for &[pid, parent] in &pairs[..n] {
            if marked(marks, parent) && !marked(marks, pid) {
                let p = pid as usize;
                marks[p / 8] |= 1 << (p % 8);
                found = true;
            }
        }
        if !found {
            break;
        }
    }
    for &[pid, _] in &pairs[..n] {
        if pid as usize != me && marked(marks, pid) {
            each(pid);
        }
    }
}

/// Fills `pairs` with (pid, parent) of every live process: how many.
fn read_parents(pairs: &mut [[i32; 2]]) -> usize {
    use rustix::fs::{Mode, OFlags};
    let Ok(dir) = rustix::fs::openat(
        rustix::fs::CWD,
        c"/proc",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return 0;
    };
    let mut buf = [MaybeUninit::<u8>::uninit(); 8192];
    let mut entries = rustix::fs::RawDir::new(&dir, &mut buf);
    let mut n = 0;
    while let Some(Ok(e)) = entries.next() {
        let Some(pid) = number(e.file_name().to_bytes()) else {
            continue;
        };
        if n < pairs.len()
            && let Some((state, parent)) = stat_of(pid)
            && state != b'Z'
            && (0..MAX_PIDS as i32).contains(&pid)
            && (0..MAX_PIDS as i32).contains(&parent)
        {
            pairs[n] = [pid, parent];
            n += 1;
        }
    }
    n
}

/// A name that is a pid (or a descriptor number).
pub(super) fn number(name: &[u8]) -> Option<i32> {
    if name.is_empty() || name.len() > 9 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(name.iter().fold(0, |n, d| n * 10 + i32::from(d - b'0')))
}

/// The state and the parent of `pid`, from `/proc/PID/stat`.
fn stat_of(pid: i32) -> Option<(u8, i32)> {
    use rustix::fs::{Mode, OFlags};
    let mut path = [0u8; 32];
    let mut len = 0;
    let mut push = |bytes: &[u8]| {
        path[len..len + bytes.len()].copy_from_slice(bytes);
        len += bytes.len();
    };
    push(b"/proc/");
    let mut digits = [0u8; 10];
    let mut d = digits.len();
    let mut v = pid;
    loop {
        d -= 1;
        digits[d] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    push(&digits[d..]);
    push(b"/stat\0");
    let path = CStr::from_bytes_with_nul(&path[..len]).ok()?;
    let fd = rustix::fs::openat(
        rustix::fs::CWD,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut line = [0u8; 512];
    let got = rustix::io::read(&fd, &mut line).ok()?;
    parse_stat(&line[..got])
}

/// The state and the parent's pid from a `/proc/PID/stat` line (`PID (COMM) S PPID ...`; the
/// command may hold spaces and parentheses, so it is read up to the last `)`).
fn parse_stat(stat: &[u8]) -> Option<(u8, i32)> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let mut fields = stat[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    let state = *fields.next()?.first()?;
    let parent = number(fields.next()?)?;
    Some((state, parent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_state_and_parent_whatever_the_command_holds() {
        assert_eq!(
            parse_stat(b"123 (sleep) S 45 123 45 0 -1"),
            Some((b'S', 45))
        );
        assert_eq!(parse_stat(b"7 (a) b (c)) Z 1 7 7 0"), Some((b'Z', 1)));
        assert_eq!(parse_stat(b"garbage"), None);
    }

    #[test]
    fn this_process_has_its_children_and_their_children_as_descendants() {
        let mut c = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(c.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let mut found = Vec::new();
        each_descendant(|p| found.push(p));
        unsafe { libc::kill(grandchild, libc::SIGKILL) };
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(found.contains(&(c.id() as i32)), "{found:?}");
        assert!(found.contains(&grandchild), "{found:?}");
        assert!(!found.contains(&(std::process::id() as i32)));
    }
}
