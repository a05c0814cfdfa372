//! Object lookups that survive gix panicking while `git repack` or `git gc` changes the packs.
//!
//! A lookup that misses makes gix-odb read the pack directory again and rebuild its map of
//! index slots. In gix-odb 0.87 that rebuild can end in an `assert!` ("if the generation
//! changed, the slot index must have changed for sure") when a concurrent repack replaced a
//! pack and the new one was given the slot of the one it replaced: the daemon's heavy test beside
//! repack loops met it once. The panic says nothing about the object asked for, so every
//! lookup of the store that can make gix look again runs here: when gix panics, the object is
//! asked for once more through a new handle on the same object store, which reads the
//! directory as it now is. The panic's message is kept off stderr (a panic hook that stays quiet
//! on a thread inside [`unpanicked`] and otherwise calls the hook it replaced).

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use gix::ObjectId;
use gix::objs::{Exists as _, Find as _, Kind};

thread_local! {
    /// True while this thread runs a closure given to [`unpanicked`].
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

#[cfg(test)]
thread_local! {
    /// Tests set it to make this thread's next lookup through a long-lived handle panic, as
    /// gix does in the race described above.
    static PANIC_NEXT: Cell<bool> = const { Cell::new(false) };
}

/// Panics when a test asked for it (see `PANIC_NEXT`); nothing outside tests.
fn injected_panic() {
    #[cfg(test)]
    if PANIC_NEXT.with(|p| p.replace(false)) {
        panic!("a test stands in for gix's assert");
    }
}

/// Runs `f`, giving `None` when it panics (without printing the panic). Only for calls into
/// gix whose panics leave nothing of ours half-done.
pub(crate) fn unpanicked<T>(f: impl FnOnce() -> T) -> Option<T> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                before(info);
            }
        }));
    });
    let was = QUIET.with(|q| q.replace(true));
    let out = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    out.ok()
}

/// A new handle on the object store of `repo`, or `None` when it cannot be opened.
fn fresh(repo: &gix::Repository) -> Option<gix::Repository> {
    gix::open(repo.common_dir()).ok()
}

/// Object `id` read into `buf` through `repo`, or through a new handle when gix panics.
pub(crate) fn try_find(
    repo: &gix::Repository,
    id: &ObjectId,
    buf: &mut Vec<u8>,
) -> Result<Option<Kind>, gix::Error> {
    let first = unpanicked(|| {
        injected_panic();
        repo.objects.try_find(id, buf).map(|d| d.map(|d| d.kind))
    });
    if let Some(found) = first {
        return found;
    }
    let Some(again) = fresh(repo) else {
        return Ok(None);
    };
    unpanicked(|| again.objects.try_find(id, buf).map(|d| d.map(|d| d.kind))).unwrap_or(Ok(None))
}

/// True when the object store of `repo` has object `id`, asked through a new handle when gix
/// panics.
pub(crate) fn exists(repo: &gix::Repository, id: &ObjectId) -> bool {
    unpanicked(|| {
        injected_panic();
        repo.objects.exists(id)
    })
    .or_else(|| fresh(repo).and_then(|again| unpanicked(|| again.objects.exists(id))))
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_is_caught_and_a_value_outside_is_given() {
        assert_eq!(unpanicked(|| 7), Some(7));
        assert_eq!(
            unpanicked(|| -> u8 { panic!("stands for gix's assert") }),
            None
        );
        // The thread is loud again afterwards: the flag is restored.
        assert!(!QUIET.with(Cell::get));
        // Nested use keeps the outer quiet until the outer ends.
        let nested = unpanicked(|| {
            let inner = unpanicked(|| -> u8 { panic!("inner") });
            (inner, QUIET.with(Cell::get))
        });
        assert_eq!(nested, Some((None, true)));
        assert!(!QUIET.with(Cell::get));
    }

    #[test]
    fn a_lookup_gix_panics_in_is_answered_through_a_new_handle() {
        for init in [
            &[][..],
            &["--object-format=sha256"],
            &["--ref-format=reftable"],
        ] {
            answered_through_a_new_handle(init);
        }
    }

    fn answered_through_a_new_handle(init: &[&str]) {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str], input: &[u8]| {
            use std::io::Write as _;
            let mut child = crate::gitproc::in_dir(dir.path())
                .args(args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(input).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "git {args:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        git(&[&["init", "-q"][..], init].concat(), b"");
        // The handle is opened before the object exists, as the daemon's is.
        let repo = gix::open(dir.path()).unwrap();
        let id = git(&["hash-object", "-w", "--stdin"], b"kept body\n");
        let id = ObjectId::from_hex(id.as_bytes()).unwrap();
        // Packed, so the answer comes from a pack the handle has not seen.
        git(&["repack", "-a", "-d", "-q"], b"");
        let absent = ObjectId::from_hex(&vec![b'7'; id.kind().len_in_hex()]).unwrap();
        let mut buf = Vec::new();
        for (asked, want) in [(id, Some(Kind::Blob)), (absent, None)] {
            PANIC_NEXT.with(|p| p.set(true));
            buf.clear();
            assert_eq!(try_find(&repo, &asked, &mut buf).unwrap(), want, "{init:?}");
            assert!(
                !PANIC_NEXT.with(Cell::get),
                "the injected panic was reached"
            );
            if want.is_some() {
                assert_eq!(buf, b"kept body\n");
            }
            PANIC_NEXT.with(|p| p.set(true));
            assert_eq!(exists(&repo, &asked), want.is_some(), "{init:?}");
            assert!(!PANIC_NEXT.with(Cell::get));
        }
    }
}
