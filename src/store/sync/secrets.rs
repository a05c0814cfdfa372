//! The secret gate of `push` and the pre-push hook: every body of a ledger about to leave is
//! scanned ([`scan_ledger`]), and with `--scan-code` the lines that pushed code commits add
//! ([`scan_code`]). Each find is one line naming the ref, the seq (or commit, path and line),
//! the rule, the secret's fingerprint, and the command that fixes it. A scan that cannot read
//! what it should (a missing object, a body over the size limit, text that is not a ledger
//! body) fails closed: the push is refused with that reason.
//!
//! The gate refuses whatever the write path would have redacted or blocked; the policy's
//! per-rule `allow` and its `allow_fingerprints` are honoured, its `mode` is not (a gate that
//! lets secrets out is no gate).

use gix::ObjectId;
use gix::hash::Kind as HashKind;

use super::chain::{Objects, read_chain};
use super::consistency::entry_body;
use super::git_cli::{Git, is_zero};
use crate::ledger::MAX_PAYLOAD_BYTES;
use crate::ledger::canonical;
use crate::secrets::{Guard, Mode, Scanner, Screened, SecretsPolicy};
use crate::store::git::{PAYLOAD_FILE, StoreError};

/// The guard the gate scans with: every find counts but those whose rule or fingerprint
/// `policy` allows.
pub(crate) fn gate_guard(policy: &SecretsPolicy) -> Guard {
    Guard::new(
        Scanner::new(),
        SecretsPolicy {
            mode: Mode::Block,
            allow: policy.allow.clone(),
            allow_fingerprints: policy.allow_fingerprints.clone(),
        },
    )
}

/// How a find that should not leave can be accepted instead of removed.
fn accept_hint(fingerprint: impl std::fmt::Display) -> String {
    format!(
        "or, if it is no secret, accept this one with allow_fingerprints = [\"{fingerprint}\"] under [secrets] in .forum/policy.toml"
    )
}

fn closed(what: String) -> StoreError {
    StoreError::Corrupt(format!(
        "{what}; the secret scan cannot read it, so the push is refused (fetch or repair the ledger, then push again)"
    ))
}

/// Scans every body of the ledger `name` whose tip is `tip`: one line per find. Redacted
/// bodies (an empty tree) are skipped. `Err` when a body cannot be read or parsed.
pub(super) fn scan_ledger(
    objects: &mut dyn Objects,
    hash: HashKind,
    name: &str,
    refname: &str,
    tip: ObjectId,
    guard: &Guard,
) -> Result<Vec<String>, StoreError> {
    let chain = match read_chain(objects, hash, tip, false)? {
        Ok(c) => c,
        Err(why) => return Err(closed(format!("ledger {name}: {why}"))),
    };
    let empty = ObjectId::empty_tree(hash);
    let prefix = format!("100644 {PAYLOAD_FILE}\0");
    let mut lines = Vec::new();
    for l in &chain {
        let seq = l.entry.seq;
        if l.tree == empty {
            continue;
        }
        let (blob, body) = match entry_body(objects, hash, &prefix, l)? {
            Ok(b) => b,
            Err(why) => return Err(closed(format!("ledger {name}: {why}"))),
        };
        if body.len() > MAX_PAYLOAD_BYTES {
            return Err(closed(format!(
                "ledger {name} seq {seq}: body {blob} is {} bytes, over the {MAX_PAYLOAD_BYTES} byte limit",
                body.len()
            )));
        }
        let value = std::str::from_utf8(&body)
            .map_err(|_| closed(format!("ledger {name} seq {seq}: body {blob} is not UTF-8")))
            .and_then(|t| {
                canonical::parse(t).map_err(|e| {
                    closed(format!(
                        "ledger {name} seq {seq}: body {blob} is not JSON ({e})"
                    ))
                })
            })?;
        if let Screened::Blocked(hits) | Screened::Redacted(_, hits) = guard.check(&value) {
            for h in hits {
                let path = if h.path.is_empty() { "/" } else { &h.path };
                lines.push(format!(
                    "{refname} seq {seq} ({}) {path}: {} found (fingerprint {}); fix: git forum --ledger {name} redact {seq} --reason \"secret ({})\", {}",
                    l.entry.kind,
                    h.rule,
                    h.fingerprint,
                    h.rule,
                    accept_hint(h.fingerprint)
                ));
            }
        }
    }
    Ok(lines)
}

/// The most lines one code scan reads from `git log -p`; past it the scan fails closed.
pub(super) const MAX_CODE_SCAN_BYTES: u64 = 64 << 20;

/// Scans the lines that the commits of `local_oid` not yet on the remote add (`remote_oid..`
/// when the remote has the ref, else everything not on any of `remote`'s tracking refs): one
/// line per find naming the ref, the commit, the path and line, the rule and the fingerprint.
pub(super) fn scan_code(
    git: &Git,
    remote: &str,
    refname: &str,
    local_oid: &str,
    remote_oid: &str,
    guard: &Guard,
) -> Result<Vec<String>, StoreError> {
    if is_zero(local_oid) {
        return Ok(Vec::new());
    }
    let diff = pushed_diff(git, remote, refname, local_oid, remote_oid)?;
    let text = String::from_utf8_lossy(&diff);
    let mut lines = Vec::new();
    let mut commit = "";
    let mut path = "";
    // The new file's line of the next added line, from the last hunk header.
    let mut new_line = 0usize;
    // Inside a hunk a line that starts with `+` is an added line, even `+++ ...` (an added
    // line that starts with `++ `); before the first hunk of a file it is the file's name.
    let mut in_hunk = false;
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("commit ") {
            commit = c.trim();
            in_hunk = false;
        } else if line.starts_with("diff --git ") {
            in_hunk = false;
        } else if let Some(hunk) = line.strip_prefix("@@ ") {
            new_line = hunk_start(hunk).unwrap_or(0);
            in_hunk = true;
        } else if !in_hunk {
            if let Some(p) = line.strip_prefix("+++ ") {
                path = p.strip_prefix("b/").unwrap_or(p);
            }
        } else if let Some(added) = line.strip_prefix('+') {
            for f in guard.scanner.scan_text(added) {
                if !guard.counts(&f) {
                    continue;
                }
                let short = &commit[..commit.len().min(12)];
                lines.push(format!(
                    "{refname} commit {short} {path}:{new_line}: {} found in an added line (fingerprint {}); fix: rewrite the commit without it (git commit --amend, or git rebase -i {short}^) and push again, {}",
                    f.rule(),
                    f.fingerprint(),
                    accept_hint(f.fingerprint())
                ));
            }
            new_line += 1;
        }
    }
    Ok(lines)
}

/// What the commits of `local_oid` not yet on the remote add, as `git log -p` prints it
/// (`remote_oid..` when the remote has the ref, else everything not on any of `remote`'s
/// tracking refs), within [`MAX_CODE_SCAN_BYTES`].
fn pushed_diff(
    git: &Git,
    remote: &str,
    refname: &str,
    local_oid: &str,
    remote_oid: &str,
) -> Result<Vec<u8>, StoreError> {
    let not_remote = format!("--remotes={remote}");
    let range = format!("{remote_oid}..{local_oid}");
    let mut args = vec![
        "log",
        "-p",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--unified=0",
        "--format=commit %H",
    ];
    if is_zero(remote_oid) {
        args.extend([local_oid, "--not", not_remote.as_str()]);
    } else {
        args.push(range.as_str());
    }
    args.push("--");
    let o = git.run(&args).map_err(|e| {
        closed(format!(
            "the commits pushed to {refname} could not be listed ({e})"
        ))
    })?;
    if !o.status.success() {
        return Err(closed(format!(
            "the commits pushed to {refname} could not be listed: {}",
            super::failure_line(&o)
        )));
    }
    if o.stdout.len() as u64 > MAX_CODE_SCAN_BYTES {
        return Err(closed(format!(
            "the diff pushed to {refname} is over {} MiB; push fewer commits at a time",
            MAX_CODE_SCAN_BYTES >> 20
        )));
    }
    Ok(o.stdout)
}

/// The first new line of a hunk from its header after `@@ ` (`-a,b +c,d @@ ...`): `c`.
fn hunk_start(hunk: &str) -> Option<usize> {
    let new = hunk.split(' ').find_map(|w| w.strip_prefix('+'))?;
    new.split(',').next()?.parse().ok()
}
