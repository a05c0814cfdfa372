//! The repository context's `git ls-files -z` and `git grep -l -z -I -i -F -e TERM --`
//! answered in this process, when that gives git's answer: a run's context otherwise starts a
//! `git` for the paths and one for each term, about a millisecond of CPU each, most of it
//! starting git, on a small repository where the search itself takes microseconds.
//!
//! What git does, and what is done here the same way:
//!
//! - `ls-files` prints the path of every index entry, in index order, an unmerged path once
//!   per stage. Here the index is decoded with `gix-index` and its entries' paths are printed.
//! - `grep` on the work tree looks at each regular-file entry of the index (an unmerged path
//!   once), reads the file from the work tree when it is still a regular file there, skips it
//!   as binary when a NUL byte is in its first 8,000 bytes (`-I`), and with `LC_ALL=C` (as
//!   every git that git forum starts, `crate::gitproc`) matches a fixed ASCII string with ASCII
//!   letters folded (`-i -F`). Here each such file is read and searched the same way.
//!
//! What would make git answer otherwise is left to git: an index that does not decode, a
//! split or sparse index, an entry git reads from the object store or skips
//! (assume-unchanged, skip-worktree), a term that is not ASCII, and any attributes source
//! (the `diff` attribute decides what `-I` calls binary): a `.gitattributes` file tracked or
//! in a directory of a tracked file, `info/attributes`, the global and system attributes
//! files where git looks for them (the system's beside the `git` on `PATH`, and in `/etc` and
//! `/usr/local/etc`), and any configuration that could name another (`core.attributesFile`,
//! an `include`, or settings given in the environment). A repository whose tracked files
//! weigh more than [`MAX_BYTES`] (or number more than [`MAX_FILES`]) is left to git too, whose
//! threads search it faster than one pass here.
//!
//! What both read is read when it is asked for, as the `git` they replace would: the index
//! when the paths are first asked for, a file each time a term is looked for.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::work::git::Out;

/// The most bytes of tracked files (as the index records their sizes) searched here.
pub(crate) const MAX_BYTES: u64 = 8 << 20;
/// The most index entries searched here.
pub(crate) const MAX_FILES: usize = 4_000;
/// How far into a file git looks for a NUL byte to call it binary.
const BINARY_PROBE: usize = 8_000;

/// Where a work tree's git files are, as `git rev-parse` printed them.
#[derive(Debug, Clone)]
pub(crate) struct GitDirs {
    /// The repository's (or linked work tree's) own directory, absolute.
    pub(crate) git_dir: PathBuf,
    /// Its object format.
    pub(crate) kind: gix::hash::Kind,
}

/// One index read, and what `ls-files` and `grep` answer from it.
#[derive(Debug)]
pub(crate) struct Scan {
    top: PathBuf,
    /// Every entry's path, in index order (`ls-files`).
    listed: Vec<Vec<u8>>,
    /// The regular files `grep` looks at, each path once, in index order.
    searched: Vec<Vec<u8>>,
}

impl Scan {
    /// The index of the work tree `top` when this process can answer for git, else `None`.
    pub(crate) fn read(top: &Path, dirs: &GitDirs) -> Option<Scan> {
        Scan::read_in(top, dirs, &Env::current())
    }

    /// [`Scan::read`] with git's configuration and attributes looked for where `env` says.
    fn read_in(top: &Path, dirs: &GitDirs, env: &Env) -> Option<Scan> {
        let options = gix::index::decode::Options {
            thread_limit: Some(1),
            ..Default::default()
        };
        let file =
            gix::index::File::at(dirs.git_dir.join("index"), dirs.kind, true, options).ok()?;
        if file.link().is_some() || file.entries().len() > MAX_FILES {
            return None;
        }
        use gix::index::entry::{Flags, Mode};
        let left_to_git = Flags::ASSUME_VALID | Flags::SKIP_WORKTREE;
        let mut listed = Vec::with_capacity(file.entries().len());
        let mut searched: Vec<Vec<u8>> = Vec::new();
        let mut bytes = 0u64;
        for e in file.entries() {
            if e.mode == Mode::DIR || e.flags.intersects(left_to_git) {
                return None;
            }
            let path = e.path(&file).to_vec();
            if (e.mode == Mode::FILE || e.mode == Mode::FILE_EXECUTABLE)
                && searched.last() != Some(&path)
            {
                bytes += u64::from(e.stat.size);
                searched.push(path.clone());
            }
            listed.push(path);
        }
        if bytes > MAX_BYTES || !attributes_free(top, &dirs.git_dir, &listed, env) {
            return None;
        }
        Some(Scan {
            top: top.to_path_buf(),
            listed,
            searched,
        })
    }

    /// What `git ls-files -z` prints, read up to `limit` bytes.
    pub(crate) fn ls_files(&self, limit: usize) -> Out {
        printed(self.listed.iter(), limit, true)
    }

    /// What `git grep -l -z -I -i -F -e TERM --` prints, read up to `limit` bytes; `None`
    /// when `term` is not ASCII (or empty), which git's own matching is left to.
    /// Whether [`grep`](Self::grep) answers for `term` (else git must).
    pub(crate) fn greps(&self, term: &str) -> bool {
        !term.is_empty() && term.is_ascii()
    }

    /// How many files a [`grep`](Self::grep) reads.
    pub(crate) fn searched_files(&self) -> usize {
        self.searched.len()
    }

    pub(crate) fn grep(&self, term: &str, limit: usize) -> Option<Out> {
        if !self.greps(term) {
            return None;
        }
        let needle = term.to_ascii_lowercase();
        let finder = memchr::memmem::Finder::new(needle.as_bytes());
        let mut buf = Vec::new();
        // The files are read as they are now, not as the index sized them: past
        // [`MAX_BYTES`] read in all, the search is git's.
        let mut left = MAX_BYTES;
        let mut hits = Vec::new();
        for p in &self.searched {
            if holds(&self.top, p, &finder, &mut buf, &mut left)? {
                hits.push(p);
            }
        }
        Some(printed(hits.into_iter(), limit, false))
    }
}

/// The NUL-ended `paths` as git prints them, read up to `limit` bytes as
/// [`crate::work::git::run_limited`] reads a git's output: past it, `cut`. `listing`: git
/// exits 0 when nothing is printed (`ls-files`), else 1 (`grep`: no match).
fn printed<'a>(paths: impl Iterator<Item = &'a Vec<u8>>, limit: usize, listing: bool) -> Out {
    let mut stdout = Vec::new();
    let mut cut = false;
    for p in paths {
        stdout.extend_from_slice(p);
        stdout.push(0);
        if stdout.len() > limit {
            stdout.truncate(limit);
            cut = true;
            break;
        }
    }
    let found = listing || !stdout.is_empty();
    Out {
        ok: found && !cut,
        code: Some(if found { 0 } else { 1 }),
        stdout,
        cut,
        message: String::new(),
    }
}

/// Whether the tracked file `path` under `top` is, in the work tree, a regular text file
/// holding `finder`'s (lower-case ASCII) needle with ASCII letters folded; `None` when it
/// holds more than the `left` bytes this scan may still read (which it takes from).
fn holds(
    top: &Path,
    path: &[u8],
    finder: &memchr::memmem::Finder<'_>,
    buf: &mut Vec<u8>,
    left: &mut u64,
) -> Option<bool> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    let full = top.join(std::ffi::OsStr::from_bytes(path));
    match std::fs::symlink_metadata(&full) {
        Ok(m) if m.file_type().is_file() => {}
        _ => return Some(false),
    }
    // Not through a symbolic link put there since the look above.
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&full)
    else {
        return Some(false);
    };
    buf.clear();
    if file.take(*left + 1).read_to_end(buf).is_err() {
        return Some(false);
    }
    *left = left.checked_sub(buf.len() as u64)?;
    if memchr::memchr(0, &buf[..buf.len().min(BINARY_PROBE)]).is_some() {
        return Some(false);
    }
    buf.make_ascii_lowercase();
    Some(finder.find(buf).is_some())
}

/// Where git looks for its configuration and attributes outside the repository, as the
/// environment says.
#[derive(Debug, Clone, Default)]
struct Env {
    /// `$HOME`.
    home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`, else `$HOME/.config`.
    xdg: Option<PathBuf>,
    /// `$GIT_CONFIG_GLOBAL`, which replaces the global files when set.
    global: Option<PathBuf>,
    /// `$GIT_CONFIG_SYSTEM`, which replaces the system file when set.
    system: Option<PathBuf>,
    /// Whether configuration is given in the environment (`git -c`, `GIT_CONFIG_COUNT`).
    params: bool,
    /// Where a system configuration or attributes file may be ([`system_dirs`]).
    etcs: Vec<PathBuf>,
}

impl Env {
    fn current() -> Env {
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let home = env("HOME").map(PathBuf::from);
        Env {
            xdg: env("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".config"))),
            home,
            global: env("GIT_CONFIG_GLOBAL").map(PathBuf::from),
            system: env("GIT_CONFIG_SYSTEM").map(PathBuf::from),
            params: env("GIT_CONFIG_PARAMETERS").is_some() || env("GIT_CONFIG_COUNT").is_some(),
            etcs: system_dirs(),
        }
    }
}

/// Whether no attributes source git would read for the work tree `top` (its git directory
/// `git_dir`, its index's `paths`) can exist, as far as can be told without git.
fn attributes_free(top: &Path, git_dir: &Path, paths: &[Vec<u8>], env: &Env) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let is_attrs = |p: &[u8]| p == b".gitattributes" || p.ends_with(b"/.gitattributes");
    if env.params || paths.iter().any(|p| is_attrs(p)) {
        return false;
    }
    // An untracked `.gitattributes` beside a tracked file counts for git too.
    let mut dirs: Vec<&[u8]> = paths
        .iter()
        .map(|p| {
            p.iter()
                .rposition(|b| *b == b'/')
                .map_or(&p[..0], |i| &p[..i])
        })
        .collect();
    dirs.sort_unstable();
    dirs.dedup();
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    let beside = |d: &&[u8]| {
        top.join(std::ffi::OsStr::from_bytes(d))
            .join(".gitattributes")
    };
    if dirs.iter().any(|d| exists(&beside(d))) {
        return false;
    }
    let common = common_dir(git_dir);
    if exists(&common.join("info/attributes")) {
        return false;
    }
    let mut configs = vec![common.join("config"), git_dir.join("config.worktree")];
    match &env.global {
        Some(g) => configs.push(g.clone()),
        None => {
            configs.extend(env.home.as_ref().map(|h| h.join(".gitconfig")));
            configs.extend(env.xdg.as_ref().map(|x| x.join("git/config")));
        }
    }
    match &env.system {
        Some(s) => configs.push(s.clone()),
        None => configs.extend(env.etcs.iter().map(|e| e.join("gitconfig"))),
    }
    if configs.iter().any(|c| names_another_file(c)) {
        return false;
    }
    let mut attributes: Vec<PathBuf> = env.etcs.iter().map(|e| e.join("gitattributes")).collect();
    attributes.extend(env.xdg.as_ref().map(|x| x.join("git/attributes")));
    !attributes.iter().any(|a| exists(a))
}

/// The common directory of `git_dir` (a linked work tree's `commondir` file names it).
fn common_dir(git_dir: &Path) -> PathBuf {
    match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(c) => git_dir.join(c.trim_end_matches(['\n', '\r'])),
        Err(_) => git_dir.to_path_buf(),
    }
}

/// Where a system configuration or attributes file of git may be: `/etc`, `/usr/local/etc`,
/// and `etc` under the prefix of the `git` on `PATH`.
fn system_dirs() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("/etc"), PathBuf::from("/usr/local/etc")];
    if let Some(path) = std::env::var_os("PATH") {
        let found = std::env::split_paths(&path)
            .map(|d| d.join("git"))
            .find(|g| g.is_file());
        if let Some(prefix) = found
            .as_deref()
            .and_then(Path::parent)
            .and_then(Path::parent)
        {
            let etc = prefix.join("etc");
            if !out.contains(&etc) {
                out.push(etc);
            }
        }
    }
    out
}

/// Whether the configuration file `path` could point git at another file (an attributes
/// file, or an included configuration that could): it mentions either, in any case. A file
/// that cannot be read but exists is taken to.
fn names_another_file(path: &Path) -> bool {
    match std::fs::read(path) {
        Ok(text) => {
            let lower = text.to_ascii_lowercase();
            memchr::memmem::find(&lower, b"attributesfile").is_some()
                || memchr::memmem::find(&lower, b"include").is_some()
        }
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

#[cfg(test)]
mod tests;
