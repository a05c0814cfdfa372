//! What a sandbox shows a command in a task's worktree of the repository's git metadata: enough
//! for `git status`, `git diff` and `git log` there, read-only, and nothing else of the git
//! dir (no hooks, no `forum/` state, no reflogs, no other task's admin directory).
//!
//! * the worktree's admin directory (`COMMON/worktrees/NAME`: its `HEAD`, index, `gitdir`);
//! * the objects (and every alternate object directory `objects/info/alternates` names), the
//!   refs (`refs/`, `packed-refs`, `reftable/`), `HEAD`, `info/` (the user's excludes) and
//!   `shallow`;
//! * in place of the repository's `config`, a copy that keeps only what reading the repository
//!   needs ([`reading_config`]: the format, its extensions, how files are compared and line
//!   endings converted): the user's configuration may hold credentials (`http.extraHeader`,
//!   remote URLs with tokens), hook and filter commands, none of which a worker needs.

use std::path::{Path, PathBuf};

use super::git;
use super::hostile::read_plain;
use crate::run::WorkError;

/// The name of the stripped configuration in the run's private directory.
pub(super) const CONFIG: &str = "sandbox-config";

/// The `core` keys a sandbox's configuration keeps (lower case, as `git config --list` prints).
const CORE_KEYS: &[&str] = &[
    "repositoryformatversion",
    "bare",
    "filemode",
    "symlinks",
    "ignorecase",
    "precomposeunicode",
    "autocrlf",
    "eol",
    "safecrlf",
    "checkstat",
    "trustctime",
    "quotepath",
];

/// One value as git's configuration syntax writes it: quoted, with `\`, `"` and line breaks
/// escaped.
fn quoted(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The configuration a sandbox shows, from the repository's `git config --list -z` output
/// (`key\nvalue\0` records): `core` keys of [`CORE_KEYS`], every `extensions.*` and
/// `index.version`, in the order listed; everything else dropped.
pub(super) fn reading_config(listed: &[u8]) -> String {
    let mut core = String::new();
    let mut extensions = String::new();
    let mut index = String::new();
    for record in listed.split(|b| *b == 0) {
        let text = String::from_utf8_lossy(record);
        let (key, value) = text.split_once('\n').unwrap_or((&text, "true"));
        let Some((section, name)) = key.split_once('.') else {
            continue;
        };
        if name.contains('.') || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        let line = format!("\t{name} = {}\n", quoted(value));
        match section {
            "core" if CORE_KEYS.contains(&name) => core.push_str(&line),
            "extensions" => extensions.push_str(&line),
            "index" if name == "version" => index.push_str(&line),
            _ => {}
        }
    }
    let mut out =
        String::from("# What git forum's sandbox shows of this repository's configuration.\n");
    for (section, body) in [("core", core), ("extensions", extensions), ("index", index)] {
        if !body.is_empty() {
            out.push_str(&format!("[{section}]\n{body}"));
        }
    }
    out
}

/// Writes the stripped configuration of the repository whose common dir is `common` into
/// `private` (the run's private directory); returns its path.
pub(crate) fn write_config(common: &Path, private: &Path) -> Result<PathBuf, WorkError> {
    let file = common.join("config");
    let shown = file.to_string_lossy().into_owned();
    let out = git::run(common, &["config", "--file", &shown, "--list", "-z"])?;
    git::ensure(&out, &["config"])?;
    let path = private.join(CONFIG);
    std::fs::write(&path, reading_config(&out.stdout))
        .map_err(|e| WorkError::Io(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}

/// The object directories `objects/info/alternates` of `objects` names (absolute, existing),
/// one level deep.
fn alternates(objects: &Path) -> Vec<PathBuf> {
    let Ok(Some(bytes)) = read_plain(&objects.join("info").join("alternates"), 64 << 10) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let p = Path::new(l.trim_matches('"'));
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                objects.join(p)
            }
        })
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| p.is_dir())
        .collect()
}

/// The read-only binds (`(source, where it appears)`) a sandbox shows a command in the
/// worktree whose admin directory is `admin`, in the repository whose common dir is `common`,
/// with `config` (from [`write_config`]) in place of the repository's configuration.
pub(crate) fn binds(common: &Path, admin: &Path, config: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let mut same = |p: PathBuf| {
        if p.symlink_metadata().is_ok() {
            out.push((p.clone(), p));
        }
    };
    let objects = common.join("objects");
    for alt in alternates(&objects) {
        same(alt);
    }
    same(objects);
    for name in ["refs", "packed-refs", "reftable", "HEAD", "info", "shallow"] {
        same(common.join(name));
    }
    same(admin.to_path_buf());
    out.push((config.to_path_buf(), common.join("config")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_config_keeps_the_format_and_drops_credentials_and_commands() {
        let listed = b"core.repositoryformatversion\n1\0core.filemode\ntrue\0core.bare\nfalse\0\
core.hookspath\n/evil\0core.fsmonitor\nrm -rf /\0extensions.objectformat\nsha256\0\
extensions.refstorage\nreftable\0http.https://x.extraheader\nAuthorization: Bearer s3cr3t\0\
remote.origin.url\nhttps://u:tok@host/r\0filter.x.clean\ntouch /tmp/p\0index.version\n4\0\
core.autocrlf\nin\"put\0";
        let c = reading_config(listed);
        assert_eq!(
            c,
            "# What git forum's sandbox shows of this repository's configuration.\n\
[core]\n\trepositoryformatversion = \"1\"\n\tfilemode = \"true\"\n\tbare = \"false\"\n\
\tautocrlf = \"in\\\"put\"\n\
[extensions]\n\tobjectformat = \"sha256\"\n\trefstorage = \"reftable\"\n\
[index]\n\tversion = \"4\"\n"
        );
        for gone in [
            "hookspath",
            "fsmonitor",
            "Bearer",
            "tok@",
            "filter",
            "remote",
        ] {
            assert!(!c.contains(gone), "{gone} in {c}");
        }
    }
}
