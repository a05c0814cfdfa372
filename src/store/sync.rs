//! Sharing ledgers through ordinary git remotes: `push`, `fetch` with consistency checks against
//! the last checkpoint seen from each remote, and the checks behind the pre-push and server-side
//! hooks.
//!
//! Network work is done by spawning `git` (gix cannot push, and spawning git keeps credential
//! helpers, ssh config and `insteadOf` exactly as the user has them). Refs involved:
//!
//! * `refs/forum/ledgers/NAME`: the local ledger, pushed without `+` (fast-forward only);
//! * `refs/forum/incoming/REMOTE/NAME`: a staging copy fetched with `+`, so a rewritten remote
//!   ledger can be looked at instead of being refused by git unseen; deleted after every fetch;
//! * `refs/forum/remotes/REMOTE/NAME`: the remote's ledger as last adopted (by `fetch` only);
//! * `refs/forum/unverified/REMOTE/NAME`: where plain `git fetch` puts it (the refspec `init`
//!   adds), unverified and read by nothing;
//! * `refs/forum/seen/REMOTE/NAME`: the tip commit of the last copy that verified and was
//!   consistent; its size and Merkle root are the checkpoint the next fetch is held to.
//!
//! "Consistent" means the entry chain extends the seen one entry for entry. A copy whose commit
//! ids differ but whose entry hashes are identical is a redaction-only rewrite (a redaction
//! changes trees, never entries) and is accepted; a shorter copy (truncated) or one whose first
//! entries hash differently (rewritten or forked) is reported with both checkpoints and never
//! adopted.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::{Find as _, Kind};

use super::git::{
    GitStore, LEDGER_PREFIX, Options, StoreError, commit_bytes, entry_from_message, git_err,
    parse_commit, validate_ledger_name,
};
use crate::ledger::Entry;
use crate::ledger::canonical;
use crate::ledger::hash::{self, GENESIS};
use crate::ledger::merkle::merkle_root;

/// Where fetched copies wait while they are checked.
pub const INCOMING_PREFIX: &str = "refs/forum/incoming/";
/// Where a remote's signed checkpoints are staged while its ledgers are checked.
pub const INCOMING_SIGNATURES_PREFIX: &str = "refs/forum/incoming-checkpoints/";
/// Where the signed checkpoints of adopted remote ledgers are kept.
pub const REMOTE_SIGNATURES_PREFIX: &str = "refs/forum/remote-checkpoints/";
/// Where a repository keeps its own signed checkpoints.
pub const CHECKPOINTS_PREFIX: &str = "refs/forum/checkpoints/";
/// Where adopted remote copies live.
pub const REMOTES_PREFIX: &str = "refs/forum/remotes/";
/// Where plain `git fetch` leaves a remote's ledgers (the refspec `init` adds): copies nobody
/// verified, which nothing reads; only `git forum fetch` adopts into [`REMOTES_PREFIX`].
pub const UNVERIFIED_PREFIX: &str = "refs/forum/unverified/";
/// Where the pre-push hook briefly points a ref at a pushed commit that is not a ledger's tip,
/// to verify it.
pub const PRE_PUSH_PREFIX: &str = "refs/forum/pre-push/";
/// Where the last verified checkpoint of each remote ledger is kept (as its tip commit).
pub const SEEN_PREFIX: &str = "refs/forum/seen/";

// ----- running git -----

/// The most of git's standard output or error read from one command (a hostile remote can make
/// `git push` or `git fetch` print `remote:` lines without end).
pub const GIT_OUTPUT_LIMIT: u64 = 256 << 20;

/// Waits for `child`, reading its stdout and stderr up to [`GIT_OUTPUT_LIMIT`] each; past that
/// the child is killed and the command fails with one line.
fn bounded_output(mut child: Child, args: &[&str]) -> Result<Output, StoreError> {
    // `GIT_FORUM_GIT_OUTPUT_LIMIT` (bytes) lowers it, for tests.
    let limit = std::env::var("GIT_FORUM_GIT_OUTPUT_LIMIT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(GIT_OUTPUT_LIMIT)
        .min(GIT_OUTPUT_LIMIT);
    let pid = rustix::process::Pid::from_child(&child);
    let read = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(r) = r {
                let _ = r.take(limit + 1).read_to_end(&mut buf);
            }
            if buf.len() as u64 > limit {
                // Stop it now: otherwise it blocks on this full pipe and never closes the other.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            buf
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if stdout.len() as u64 > limit || stderr.len() as u64 > limit {
        let _ = child.kill();
        let _ = child.wait();
        return Err(StoreError::Git(format!(
            "git {} printed more than {} MiB; stopped it (a remote that talks without end?)",
            args.iter().find(|a| !a.starts_with('-')).unwrap_or(&""),
            (limit >> 20).max(1)
        )));
    }
    let status = child.wait().map_err(spawn_error)?;
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// Runs the `git` binary against one repository.
pub struct Git {
    git_dir: PathBuf,
}

impl Git {
    /// Runs git for `repo` (its own git dir, so worktrees and hooks resolve as git would).
    pub fn for_repo(repo: &gix::Repository) -> Git {
        Git {
            git_dir: repo.git_dir().to_path_buf(),
        }
    }

    /// A `git --git-dir DIR` command with stdin closed.
    pub fn command(&self) -> Command {
        let mut c = Command::new("git");
        c.arg("--git-dir")
            .arg(&self.git_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Runs `git ARGS` and returns its output, whatever its exit status.
    pub fn run(&self, args: &[&str]) -> Result<Output, StoreError> {
        let child = self
            .command()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        bounded_output(child, args)
    }

    /// Runs `git ARGS` with `input` on stdin.
    pub fn run_with_input(&self, args: &[&str], input: &[u8]) -> Result<Output, StoreError> {
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        let stdin = child.stdin.take();
        let input = input.to_vec();
        // Written on its own thread, so that git's output is read while it reads its input.
        let writer = std::thread::spawn(move || {
            stdin
                .map(|mut s| s.write_all(&input))
                .transpose()
                .map(|_| ())
        });
        let out = bounded_output(child, args);
        writer
            .join()
            .unwrap_or(Ok(()))
            .map_err(|e| git_err("writing to git", e))?;
        out
    }

    /// Runs `git ARGS`; a non-zero exit becomes one line naming `what` and git's reason.
    pub fn run_ok(&self, args: &[&str], what: &str) -> Result<String, StoreError> {
        let o = self.run(args)?;
        if !o.status.success() {
            return Err(StoreError::Git(format!(
                "{what} failed: {}",
                failure_line(&o)
            )));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Full names of the refs under `prefix` (which ends in `/`).
    pub fn refs_under(&self, prefix: &str) -> Result<Vec<(String, String)>, StoreError> {
        let out = self.run_ok(
            &[
                "for-each-ref",
                "--format=%(refname) %(objectname)",
                "--",
                prefix,
            ],
            "listing refs",
        )?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(r, o)| (r.to_string(), o.to_string()))
            .collect())
    }

    /// One atomic ref transaction (`git update-ref --stdin`).
    pub fn update_refs(&self, message: &str, lines: &str) -> Result<(), StoreError> {
        let o = self.run_with_input(&["update-ref", "-m", message, "--stdin"], lines.as_bytes())?;
        if !o.status.success() {
            return Err(StoreError::Git(format!(
                "updating refs failed: {}; nothing was changed",
                failure_line(&o)
            )));
        }
        Ok(())
    }

    /// The URL configured for remote `name`, if any.
    pub fn remote_url(&self, name: &str) -> Result<Option<String>, StoreError> {
        let key = format!("remote.{name}.url");
        let o = self.run(&["config", "--get", &key])?;
        if o.status.success() {
            Ok(Some(String::from_utf8_lossy(&o.stdout).trim().to_string()))
        } else {
            Ok(None)
        }
    }

    /// Names of the configured remotes.
    pub fn remotes(&self) -> Result<Vec<String>, StoreError> {
        let out = self.run_ok(&["remote"], "listing remotes")?;
        Ok(out.lines().map(|l| l.trim().to_string()).collect())
    }
}

fn spawn_error(e: std::io::Error) -> StoreError {
    StoreError::Git(format!(
        "cannot run git ({e}); install git and make sure it is on PATH"
    ))
}

/// The one line of git's stderr that says what went wrong.
pub fn failure_line(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let pick = lines
        .iter()
        .find(|l| l.starts_with("fatal:"))
        .or_else(|| lines.iter().find(|l| l.starts_with("error:")))
        .or_else(|| lines.first());
    match pick {
        Some(l) => l
            .trim_start_matches("fatal:")
            .trim_start_matches("error:")
            .trim()
            .to_string(),
        None => format!("git exited with {}", o.status),
    }
}

/// Checks that `remote` names a configured remote that can serve as a ref-name component.
pub fn check_remote_name(git: &Git, remote: &str) -> Result<(), StoreError> {
    let bad = |why: &str| {
        Err(StoreError::Invalid(format!(
            "invalid remote name {remote:?}: {why}"
        )))
    };
    if remote.is_empty() {
        return bad("it is empty");
    }
    if remote.starts_with('-') {
        return bad("it starts with '-'");
    }
    if gix::refs::FullName::try_from(format!("{SEEN_PREFIX}{remote}/x")).is_err()
        || remote.contains(':')
        || remote.ends_with('/')
    {
        return bad("it cannot be part of a ref name; use the name of a configured remote");
    }
    if git.remote_url(remote)?.is_none() {
        return Err(StoreError::Invalid(format!(
            "no remote named {remote:?} is configured; add it with `git remote add {remote} URL` (see `git remote -v`)"
        )));
    }
    Ok(())
}

fn zero_oid(hash: HashKind) -> String {
    ObjectId::null(hash).to_string()
}

fn is_zero(oid: &str) -> bool {
    !oid.is_empty() && oid.bytes().all(|b| b == b'0')
}

// ----- reading entry chains without a ref -----

/// Reads objects: from the repository itself, or through `git cat-file --batch` (which sees a
/// server's quarantined incoming objects).
pub trait Objects {
    /// The object `id`, or `None` when it is absent.
    fn read(&mut self, id: &ObjectId) -> Result<Option<(Kind, Vec<u8>)>, StoreError>;
}

/// Objects read with gix.
pub struct RepoObjects<'a>(pub &'a gix::Repository);

impl Objects for RepoObjects<'_> {
    fn read(&mut self, id: &ObjectId) -> Result<Option<(Kind, Vec<u8>)>, StoreError> {
        let mut buf = Vec::new();
        match self.0.objects.try_find(id, &mut buf) {
            Ok(Some(d)) => Ok(Some((d.kind, d.data.to_vec()))),
            Ok(None) => Ok(None),
            Err(e) => Err(git_err(&format!("reading object {id}"), e)),
        }
    }
}

/// Objects read through one long-running `git cat-file --batch`.
pub struct CatFile {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl CatFile {
    pub fn start(git: &Git) -> Result<CatFile, StoreError> {
        let mut child = git
            .command()
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(spawn_error)?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(CatFile {
            child,
            stdin,
            stdout,
        })
    }
}

impl Objects for CatFile {
    fn read(&mut self, id: &ObjectId) -> Result<Option<(Kind, Vec<u8>)>, StoreError> {
        let broken = |e: &dyn std::fmt::Display| git_err("reading objects with git cat-file", e);
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| broken(&"it was closed"))?;
        writeln!(stdin, "{id}")
            .and_then(|_| stdin.flush())
            .map_err(|e| broken(&e))?;
        let mut header = String::new();
        self.stdout.read_line(&mut header).map_err(|e| broken(&e))?;
        let mut parts = header.split_whitespace();
        let _name = parts.next();
        let kind = match parts.next() {
            Some("missing") | None => return Ok(None),
            Some(k) => Kind::from_bytes(k.as_bytes()).map_err(|e| broken(&e))?,
        };
        let size: usize = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| broken(&format!("unexpected reply {header:?}")))?;
        let mut data = vec![0u8; size + 1];
        self.stdout.read_exact(&mut data).map_err(|e| broken(&e))?;
        data.pop();
        Ok(Some((kind, data)))
    }
}

impl Drop for CatFile {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// One entry of a chain and the commit holding it.
#[derive(Debug, Clone)]
pub struct Link {
    pub commit: ObjectId,
    pub tree: ObjectId,
    pub entry: Entry,
}

/// Reads the chain ending at `tip`, root first. With `check`, also checks what makes it a
/// ledger: seq from 0 without gaps, each `prev_hash` naming the previous entry, each entry
/// hashing to its `entry_hash`, each commit being exactly the one its entry defines. `Ok(Err)`
/// is a chain problem in one line; `Err` is a failure to read.
pub fn read_chain(
    objects: &mut dyn Objects,
    hash: HashKind,
    tip: ObjectId,
    check: bool,
) -> Result<Result<Vec<Link>, String>, StoreError> {
    let mut links = Vec::new();
    let mut cur = Some(tip);
    while let Some(id) = cur {
        let Some((kind, data)) = objects.read(&id)? else {
            return Ok(Err(format!("commit {id} is missing from the object store")));
        };
        if kind != Kind::Commit {
            return Ok(Err(format!("object {id} is a {kind}, not a ledger commit")));
        }
        let Some(raw) = parse_commit(&data, hash) else {
            return Ok(Err(format!("commit {id} cannot be parsed")));
        };
        let entry = match entry_from_message(raw.message) {
            Ok(e) => e,
            Err(why) => return Ok(Err(format!("commit {id}: {why}"))),
        };
        let parent = raw.parents.first().copied();
        if check {
            if raw.parents.len() > 1 {
                return Ok(Err(format!(
                    "commit {id} has {} parents; ledger commits have one",
                    raw.parents.len()
                )));
            }
            if commit_bytes(&entry, &raw.tree, parent.as_ref()) != data {
                return Ok(Err(format!(
                    "commit {id} (seq {}) is not the commit its entry defines",
                    entry.seq
                )));
            }
            if entry.computed_hash() != entry.entry_hash {
                return Ok(Err(format!(
                    "entry seq {} does not hash to its entry_hash: it was edited",
                    entry.seq
                )));
            }
        }
        links.push(Link {
            commit: id,
            tree: raw.tree,
            entry,
        });
        cur = parent;
    }
    links.reverse();
    if check {
        let mut prev = GENESIS.to_string();
        for (i, l) in links.iter().enumerate() {
            if l.entry.seq != i as u64 {
                return Ok(Err(format!(
                    "seq {} found where seq {i} belongs: entries were removed or reordered",
                    l.entry.seq
                )));
            }
            if l.entry.prev_hash != prev {
                return Ok(Err(format!(
                    "entry seq {i} does not link to the entry before it (prev_hash)"
                )));
            }
            prev = l.entry.entry_hash.clone();
        }
    }
    Ok(Ok(links))
}

/// A ledger's size and Merkle root, and the commit at its tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub size: u64,
    pub root: String,
    pub commit: Option<ObjectId>,
}

impl Checkpoint {
    /// The checkpoint of the first `size` links of `chain`.
    pub fn of(chain: &[Link], size: usize) -> Checkpoint {
        let size = size.min(chain.len());
        let hashes: Vec<&str> = chain[..size]
            .iter()
            .map(|l| l.entry.entry_hash.as_str())
            .collect();
        Checkpoint {
            size: size as u64,
            root: merkle_root(&hashes),
            commit: size.checked_sub(1).map(|i| chain[i].commit),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "size": self.size,
            "root": self.root,
            "commit": self.commit.map(|c| c.to_string()),
        })
    }
}

impl std::fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "size {} root {}", self.size, self.root)
    }
}

/// How a newer copy of a ledger relates to an older one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// There was no older copy.
    New,
    /// Same commits, same length.
    UpToDate,
    /// The older copy's commits, then more entries.
    Extends,
    /// The same entries (and maybe more) in different commits: bodies were redacted.
    RedactionRewrite,
    /// Fewer entries than the older copy.
    Truncated,
    /// The first entries hash differently: history was rewritten, or the ledger forked.
    Rewritten,
}

impl Relation {
    /// Whether a copy in this relation may replace the older one.
    pub fn acceptable(self) -> bool {
        !matches!(self, Relation::Truncated | Relation::Rewritten)
    }
}

/// How `new` relates to `old` (both root first).
pub fn relate(old: &[Link], new: &[Link]) -> Relation {
    let Some(last) = old.last() else {
        return Relation::New;
    };
    if new.len() < old.len() {
        return Relation::Truncated;
    }
    if old
        .iter()
        .zip(new)
        .any(|(a, b)| a.entry.entry_hash != b.entry.entry_hash)
    {
        return Relation::Rewritten;
    }
    if new[old.len() - 1].commit != last.commit {
        Relation::RedactionRewrite
    } else if new.len() == old.len() {
        Relation::UpToDate
    } else {
        Relation::Extends
    }
}

/// The payload hashes named by the redaction entries of `chain` (read from their bodies).
fn redaction_targets(
    objects: &mut dyn Objects,
    hash: HashKind,
    chain: &[Link],
) -> Result<HashSet<String>, StoreError> {
    let mut out = HashSet::new();
    for l in chain.iter().filter(|l| l.entry.kind == "redaction") {
        if l.tree == ObjectId::empty_tree(hash) {
            continue;
        }
        let Some((Kind::Tree, tree)) = objects.read(&l.tree)? else {
            continue;
        };
        let prefix = format!("100644 {}\0", super::git::PAYLOAD_FILE);
        let Some(blob) = tree
            .strip_prefix(prefix.as_bytes())
            .filter(|b| b.len() == hash.len_in_bytes())
            .map(ObjectId::from_bytes_or_panic)
        else {
            continue;
        };
        let Some((Kind::Blob, body)) = objects.read(&blob)? else {
            continue;
        };
        let target = std::str::from_utf8(&body)
            .ok()
            .and_then(|t| canonical::parse(t).ok())
            .and_then(|v| v.get("payload_hash")?.as_str().map(str::to_string));
        if let Some(t) = target.filter(|t| hash::is_hash(t)) {
            out.insert(t);
        }
    }
    Ok(out)
}

/// Checks every body of `chain` as `verify --deep` does: each entry's tree is the empty tree
/// (the body is absent) or a ledger entry tree whose one blob hashes (SHA-256) to the entry's
/// `payload_hash`; an absent body must be named by a redaction entry of the chain (whose own
/// body is present and checked). A tree already checked is not read again. `Ok(Err)` is the
/// problem in one line.
pub fn check_bodies(
    objects: &mut dyn Objects,
    hash: HashKind,
    chain: &[Link],
) -> Result<Result<(), String>, StoreError> {
    let empty = ObjectId::empty_tree(hash);
    let prefix = format!("100644 {}\0", super::git::PAYLOAD_FILE);
    let mut checked: std::collections::HashMap<ObjectId, &str> = std::collections::HashMap::new();
    let mut named = HashSet::new();
    let mut absent = Vec::new();
    for l in chain {
        let seq = l.entry.seq;
        let want = l.entry.payload_hash.as_str();
        let redaction = l.entry.kind == "redaction";
        if l.tree == empty {
            absent.push(l);
            continue;
        }
        if !redaction && let Some(had) = checked.get(&l.tree) {
            if *had != want {
                return Ok(Err(format!(
                    "the body of seq {seq} does not hash to its payload_hash: it was replaced"
                )));
            }
            continue;
        }
        let tree = match objects.read(&l.tree)? {
            Some((Kind::Tree, t)) => t,
            Some((k, _)) => {
                return Ok(Err(format!("seq {seq}: {} is a {k}, not a tree", l.tree)));
            }
            None => {
                return Ok(Err(format!(
                    "seq {seq}: tree {} is missing from the object store",
                    l.tree
                )));
            }
        };
        let Some(blob) = tree
            .strip_prefix(prefix.as_bytes())
            .filter(|b| b.len() == hash.len_in_bytes())
            .map(ObjectId::from_bytes_or_panic)
        else {
            return Ok(Err(format!(
                "seq {seq}: tree {} is not a ledger entry tree",
                l.tree
            )));
        };
        let body = match objects.read(&blob)? {
            Some((Kind::Blob, b)) => b,
            Some((k, _)) => {
                return Ok(Err(format!("seq {seq}: {blob} is a {k}, not a blob")));
            }
            None => {
                return Ok(Err(format!(
                    "the body of seq {seq} (blob {blob}) is missing from the object store"
                )));
            }
        };
        if hash::sha256_hex(&body) != want {
            return Ok(Err(format!(
                "the body of seq {seq} (blob {blob}) does not hash to its payload_hash: it was replaced"
            )));
        }
        checked.insert(l.tree, want);
        if redaction
            && let Some(t) = std::str::from_utf8(&body)
                .ok()
                .and_then(|t| canonical::parse(t).ok())
                .and_then(|v| v.get("payload_hash")?.as_str().map(str::to_string))
                .filter(|t| hash::is_hash(t))
        {
            named.insert(t);
        }
    }
    if let Some(l) = absent
        .iter()
        .find(|l| !named.contains(&l.entry.payload_hash))
    {
        return Ok(Err(format!(
            "the body of seq {} is absent and no redaction entry names its payload hash {}",
            l.entry.seq, l.entry.payload_hash
        )));
    }
    Ok(Ok(()))
}

/// For a redaction-only rewrite: every commit that changed may only have lost its body, and
/// only a body a redaction entry of the new chain names.
fn check_redaction_rewrite(
    objects: &mut dyn Objects,
    hash: HashKind,
    old: &[Link],
    new: &[Link],
) -> Result<Result<(), String>, StoreError> {
    let named = redaction_targets(objects, hash, new)?;
    for (a, b) in old.iter().zip(new) {
        if a.tree == b.tree {
            continue;
        }
        if b.tree != ObjectId::empty_tree(hash) {
            return Ok(Err(format!(
                "seq {} has a different tree than before, not an empty one: only a redaction may change a published entry's commit",
                b.entry.seq
            )));
        }
        if !named.contains(&b.entry.payload_hash) {
            return Ok(Err(format!(
                "the body of seq {} was removed but no redaction entry names its payload hash {}",
                b.entry.seq, b.entry.payload_hash
            )));
        }
    }
    Ok(Ok(()))
}

// ----- push -----

/// What happened to one ledger in a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushStatus {
    /// The remote had it; it now has the new entries.
    Pushed,
    /// The remote did not have it.
    Created,
    UpToDate,
    /// git or the remote refused the update; the reason as git gave it.
    Rejected(String),
    /// It does not verify locally, so nothing was pushed.
    Refused(String),
    /// Not pushed because another ledger of the same push does not verify.
    Held,
}

impl PushStatus {
    pub fn label(&self) -> &'static str {
        match self {
            PushStatus::Pushed => "pushed",
            PushStatus::Created => "created",
            PushStatus::UpToDate => "up-to-date",
            PushStatus::Rejected(_) => "rejected",
            PushStatus::Refused(_) => "does-not-verify",
            PushStatus::Held => "held",
        }
    }

    pub fn ok(&self) -> bool {
        matches!(
            self,
            PushStatus::Pushed | PushStatus::Created | PushStatus::UpToDate
        )
    }
}

/// One ledger's outcome.
#[derive(Debug, Clone)]
pub struct PushResult {
    pub ledger: String,
    pub status: PushStatus,
    pub entries: u64,
    pub checkpoint: String,
}

/// Names of every local ledger.
pub fn local_ledgers(git: &Git) -> Result<Vec<String>, StoreError> {
    Ok(git
        .refs_under(LEDGER_PREFIX)?
        .into_iter()
        .filter_map(|(r, _)| r.strip_prefix(LEDGER_PREFIX).map(str::to_string))
        .collect())
}

/// Verifies `ledgers` (deep) and, when every one verifies, pushes them to `remote` without
/// force. When one does not verify nothing is pushed.
pub fn push(
    repo: &gix::Repository,
    remote: &str,
    ledgers: &[String],
) -> Result<Vec<PushResult>, StoreError> {
    let git = Git::for_repo(repo);
    check_push_remote(&git, remote)?;
    let mut results = Vec::with_capacity(ledgers.len());
    for name in ledgers {
        let store = GitStore::new(repo.clone(), name, Options::default())?;
        if !store.exists()? {
            return Err(StoreError::NoLedger(name.clone()));
        }
        let r = store.verify(true)?;
        let status = if r.passed() {
            PushStatus::Pushed
        } else {
            let at = r
                .first_bad_seq
                .map(|s| format!(" at seq {s}"))
                .unwrap_or_default();
            PushStatus::Refused(format!(
                "it does not verify{at}: {} [{}]; run `git forum --ledger {name} verify --deep`",
                r.problem.as_deref().unwrap_or("unknown problem"),
                r.code.map_or("", |c| c.as_str())
            ))
        };
        results.push(PushResult {
            ledger: name.clone(),
            status,
            entries: r.entries,
            checkpoint: r.checkpoint,
        });
    }
    if results.iter().any(|r| !r.status.ok()) {
        for r in &mut results {
            if r.status.ok() {
                r.status = PushStatus::Held;
            }
        }
        return Ok(results);
    }
    let mut refspecs: Vec<String> = ledgers
        .iter()
        .map(|n| format!("{LEDGER_PREFIX}{n}:{LEDGER_PREFIX}{n}"))
        .collect();
    // Signed checkpoints travel with their ledger (fast-forward only, like the ledger).
    for n in ledgers {
        let sigs = super::sign::checkpoints_ref(n);
        if super::sign::ref_target(repo.git_dir(), &sigs)?.is_some() {
            refspecs.push(format!("{sigs}:{sigs}"));
        }
    }
    let mut args = vec!["push", "--porcelain", "--", remote];
    args.extend(refspecs.iter().map(String::as_str));
    let o = git.run(&args)?;
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let remote_says: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("remote:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut seen_any = false;
    for line in stdout.lines() {
        let mut parts = line.splitn(3, '\t');
        let (Some(flag), Some(spec), Some(summary)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Some((_, to)) = spec.split_once(':') else {
            continue;
        };
        let Some(name) = to.strip_prefix(LEDGER_PREFIX) else {
            continue;
        };
        let Some(r) = results.iter_mut().find(|r| r.ledger == name) else {
            continue;
        };
        seen_any = true;
        r.status = match flag {
            "*" => PushStatus::Created,
            "=" => PushStatus::UpToDate,
            " " | "+" => PushStatus::Pushed,
            _ => {
                let mut reason = summary.to_string();
                if let Some(extra) = remote_says.iter().find(|l| l.contains(to)) {
                    reason.push_str(&format!(": {extra}"));
                } else if let Some(first) = remote_says.first() {
                    reason.push_str(&format!(": {first}"));
                }
                PushStatus::Rejected(reason)
            }
        };
    }
    if !seen_any {
        let why = stderr
            .lines()
            .map(str::trim)
            .find(|l| l.contains("git forum"))
            .map(str::to_string)
            .unwrap_or_else(|| failure_line(&o));
        return Err(StoreError::Git(format!(
            "git push to {remote} failed: {why}"
        )));
    }
    Ok(results)
}

/// A push target may be a configured remote or a URL; a bare word must be configured.
fn check_push_remote(git: &Git, remote: &str) -> Result<(), StoreError> {
    if remote.is_empty() || remote.starts_with('-') {
        return Err(StoreError::Invalid(format!(
            "invalid remote {remote:?}; name a configured remote or a URL"
        )));
    }
    let looks_like_url = remote.contains(':') || remote.contains('/');
    if !looks_like_url && git.remote_url(remote)?.is_none() {
        return Err(StoreError::Invalid(format!(
            "no remote named {remote:?} is configured; add it with `git remote add {remote} URL` (see `git remote -v`)"
        )));
    }
    Ok(())
}

// ----- fetch -----

/// What `fetch` decided about one remote ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchStatus {
    New,
    UpToDate,
    Updated,
    RedactionRewrite,
    DoesNotVerify,
    Truncated,
    Rewritten,
    /// Another remote was last seen with a different history of the same ledger.
    SplitView,
    Deleted,
}

impl FetchStatus {
    pub fn label(self) -> &'static str {
        match self {
            FetchStatus::New => "new",
            FetchStatus::UpToDate => "up-to-date",
            FetchStatus::Updated => "updated",
            FetchStatus::RedactionRewrite => "redaction-rewrite",
            FetchStatus::DoesNotVerify => "does-not-verify",
            FetchStatus::Truncated => "truncated",
            FetchStatus::Rewritten => "rewritten",
            FetchStatus::SplitView => "split-view",
            FetchStatus::Deleted => "deleted",
        }
    }

    pub fn adopted(self) -> bool {
        matches!(
            self,
            FetchStatus::New
                | FetchStatus::UpToDate
                | FetchStatus::Updated
                | FetchStatus::RedactionRewrite
        )
    }
}

/// One remote ledger's outcome, with the evidence.
#[derive(Debug, Clone)]
pub struct FetchResult {
    pub ledger: String,
    pub status: FetchStatus,
    /// The remote copy's checkpoint (size 0 when the remote no longer has the ledger).
    pub remote: Option<Checkpoint>,
    /// The checkpoint last seen from this remote, before this fetch.
    pub seen: Option<Checkpoint>,
    /// For a rewrite: the root the remote's first `seen.size` entries give now.
    pub remote_prefix_root: Option<String>,
    /// For a split view: the other remote and the checkpoint last seen from it, which this
    /// copy contradicts.
    pub conflict: Option<(String, Checkpoint)>,
    pub problem: Option<String>,
    pub code: Option<&'static str>,
}

/// Removes the staging refs of `remote`, whatever happens to the fetch.
struct Staging<'a> {
    git: &'a Git,
    prefix: String,
}

impl Staging<'_> {
    fn clear(&self) -> Result<(), StoreError> {
        let refs = self.git.refs_under(&self.prefix)?;
        if refs.is_empty() {
            return Ok(());
        }
        let lines: String = refs.iter().map(|(r, _)| format!("delete {r}\n")).collect();
        self.git.update_refs("forum fetch: clear staging", &lines)
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        let _ = self.clear();
    }
}

/// Fetches every ledger of `remote` into a staging namespace, verifies each copy (deep), checks
/// it against the checkpoint last seen from that remote, and adopts the consistent ones
/// (`refs/forum/remotes/REMOTE/NAME` and `refs/forum/seen/REMOTE/NAME` move together). Refused
/// copies change nothing.
pub fn fetch(dir: &Path, remote: &str) -> Result<Vec<FetchResult>, StoreError> {
    let repo = super::git::open_repo(dir)?;
    let hash = repo.object_hash();
    let git = Git::for_repo(&repo);
    check_remote_name(&git, remote)?;
    let incoming = format!("{INCOMING_PREFIX}{remote}/");
    let staging = Staging {
        git: &git,
        prefix: incoming.clone(),
    };
    staging.clear()?;
    let refspec = format!("+{LEDGER_PREFIX}*:{incoming}*");
    let incoming_sigs = format!("{INCOMING_SIGNATURES_PREFIX}{remote}/");
    let sig_staging = Staging {
        git: &git,
        prefix: incoming_sigs.clone(),
    };
    sig_staging.clear()?;
    let sig_refspec = format!("+{CHECKPOINTS_PREFIX}*:{incoming_sigs}*");
    // `--refmap=` keeps git from also moving refs by the remote's configured fetch refspecs
    // (which `init` may have pointed at refs/forum/remotes/) before the copies are checked.
    let o = git.run(&[
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--refmap=",
        "--",
        remote,
        &refspec,
        &sig_refspec,
    ])?;
    if !o.status.success() {
        return Err(StoreError::Git(format!(
            "git fetch from {remote} failed: {}; nothing was changed",
            failure_line(&o)
        )));
    }
    // A fresh handle sees the refs and objects the fetch wrote.
    let repo = super::git::open_repo(dir)?;
    let fetched = git.refs_under(&incoming)?;
    let seen_prefix = format!("{SEEN_PREFIX}{remote}/");
    let seen_refs = git.refs_under(&seen_prefix)?;
    // What every other configured remote was last seen serving: a copy must agree with each.
    let every_seen = git.refs_under(SEEN_PREFIX)?;
    let others: Vec<String> = git
        .remotes()?
        .into_iter()
        .filter(|r| r != remote && check_remote_name(&git, r).is_ok())
        .collect();
    let mut results = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (refname, _) in &fetched {
        let Some(name) = refname.strip_prefix(&incoming) else {
            continue;
        };
        names.push(name.to_string());
        let seen_ref = format!("{seen_prefix}{name}");
        let seen_tip = seen_refs
            .iter()
            .find(|(r, _)| *r == seen_ref)
            .map(|(_, o)| o.clone());
        let others_seen: Vec<(String, String)> = others
            .iter()
            .filter_map(|o| {
                let r = format!("{SEEN_PREFIX}{o}/{name}");
                every_seen
                    .iter()
                    .find(|(x, _)| *x == r)
                    .map(|(_, oid)| (o.clone(), oid.clone()))
            })
            .collect();
        results.push(judge_fetched(
            &repo,
            &git,
            hash,
            remote,
            name,
            refname,
            seen_tip,
            &others_seen,
        )?);
    }
    for (seen_ref, oid) in &seen_refs {
        let Some(name) = seen_ref.strip_prefix(&seen_prefix) else {
            continue;
        };
        if names.iter().any(|n| n == name) {
            continue;
        }
        let seen = seen_checkpoint(&repo, hash, oid)?;
        results.push(FetchResult {
            ledger: name.to_string(),
            status: FetchStatus::Deleted,
            remote: Some(Checkpoint {
                size: 0,
                root: GENESIS.to_string(),
                commit: None,
            }),
            problem: Some(format!(
                "{remote} no longer has ledger {name}; it had {} entries when last fetched",
                seen.as_ref().map(|s| s.size).unwrap_or(0)
            )),
            seen,
            remote_prefix_root: None,
            conflict: None,
            code: Some("deleted"),
        });
    }
    drop(staging);
    drop(sig_staging);
    results.sort_by(|a, b| a.ledger.cmp(&b.ledger));
    Ok(results)
}

fn seen_checkpoint(
    repo: &gix::Repository,
    hash: HashKind,
    oid: &str,
) -> Result<Option<Checkpoint>, StoreError> {
    let Ok(id) = ObjectId::from_hex(oid.as_bytes()) else {
        return Ok(None);
    };
    match read_chain(&mut RepoObjects(repo), hash, id, false)? {
        Ok(chain) => Ok(Some(Checkpoint::of(&chain, chain.len()))),
        Err(_) => Ok(None),
    }
}

#[allow(clippy::too_many_arguments)]
fn judge_fetched(
    repo: &gix::Repository,
    git: &Git,
    hash: HashKind,
    remote: &str,
    name: &str,
    staged_ref: &str,
    seen_tip: Option<String>,
    others_seen: &[(String, String)],
) -> Result<FetchResult, StoreError> {
    let mut result = FetchResult {
        ledger: name.to_string(),
        status: FetchStatus::DoesNotVerify,
        remote: None,
        seen: None,
        remote_prefix_root: None,
        conflict: None,
        problem: None,
        code: None,
    };
    if let Err(e) = validate_ledger_name(name) {
        result.problem = Some(format!("the remote offers a ledger with a bad name: {e}"));
        result.code = Some("invalid-name");
        return Ok(result);
    }
    // The remote's signed checkpoints, fetched beside the copy, are checked with it.
    let staged_sigs = format!("{INCOMING_SIGNATURES_PREFIX}{remote}/{name}");
    let store = GitStore::at_ref(repo.clone(), staged_ref, Options::default())?
        .with_signatures(name, &staged_sigs);
    let report = store.verify(true)?;
    let tip = store.tip_id()?;
    let mut objects = RepoObjects(repo);
    let chain = match tip {
        Some(t) => read_chain(&mut objects, hash, t, false)?.ok(),
        None => None,
    };
    result.remote = chain.as_ref().map(|c| Checkpoint::of(c, c.len()));
    let seen_chain = match &seen_tip {
        Some(oid) => {
            let id = ObjectId::from_hex(oid.as_bytes())
                .map_err(|e| StoreError::Corrupt(format!("{SEEN_PREFIX}{remote}/{name}: {e}")))?;
            match read_chain(&mut objects, hash, id, false)? {
                Ok(c) => Some(c),
                Err(why) => {
                    return Err(StoreError::Corrupt(format!(
                        "{SEEN_PREFIX}{remote}/{name} is unreadable ({why}); delete it with `git update-ref -d {SEEN_PREFIX}{remote}/{name}` to trust the remote afresh"
                    )));
                }
            }
        }
        None => None,
    };
    result.seen = seen_chain.as_ref().map(|c| Checkpoint::of(c, c.len()));
    if !report.passed() {
        let at = report
            .first_bad_seq
            .map(|s| format!(" at seq {s}"))
            .unwrap_or_default();
        result.problem = Some(format!(
            "{remote}'s copy does not verify{at}: {}",
            report.problem.as_deref().unwrap_or("unknown problem")
        ));
        result.code = report.code.map(|c| c.as_str()).or(Some("does-not-verify"));
        return Ok(result);
    }
    let chain = chain.ok_or_else(|| {
        StoreError::Corrupt(format!(
            "{staged_ref} verified but its chain cannot be read"
        ))
    })?;
    // What is adopted must be what was verified: the staged ref is read twice (by verify, then
    // here), and another fetch of the same remote may have moved it in between.
    let judged = Checkpoint::of(&chain, chain.len());
    if judged.size != report.entries || judged.root != report.checkpoint {
        return Err(StoreError::Contended(format!(
            "{staged_ref} moved while it was being checked (another fetch from {remote}?); nothing was adopted: run `git forum fetch {remote}` again"
        )));
    }
    let old = seen_chain.unwrap_or_default();
    let relation = relate(&old, &chain);
    let seen = result.seen.clone();
    let now = result.remote.clone().expect("set above");
    match relation {
        Relation::Truncated => {
            result.status = FetchStatus::Truncated;
            result.code = Some("truncated");
            result.problem = Some(format!(
                "{remote}'s copy has {} entries but {} were seen before (seen: {}; now: {}): entries were removed from the tail",
                now.size,
                old.len(),
                seen.as_ref().expect("seen"),
                now
            ));
            return Ok(result);
        }
        Relation::Rewritten => {
            let prefix = Checkpoint::of(&chain, old.len());
            let first = old
                .iter()
                .zip(&chain)
                .position(|(a, b)| a.entry.entry_hash != b.entry.entry_hash)
                .unwrap_or(0);
            result.status = FetchStatus::Rewritten;
            result.code = Some("rewritten");
            result.remote_prefix_root = Some(prefix.root.clone());
            result.problem = Some(format!(
                "{remote}'s first {} entries hash to {}, not to the seen root {} (first difference at seq {first}; seen: {}; now: {}): history was rewritten or forked",
                old.len(),
                prefix.root,
                seen.as_ref().expect("seen").root,
                seen.as_ref().expect("seen"),
                now
            ));
            return Ok(result);
        }
        Relation::New => result.status = FetchStatus::New,
        Relation::UpToDate => result.status = FetchStatus::UpToDate,
        Relation::Extends => result.status = FetchStatus::Updated,
        Relation::RedactionRewrite => result.status = FetchStatus::RedactionRewrite,
    }
    // Split views: the copy must agree, entry for entry over their common length, with what
    // every other remote was last seen serving of this ledger.
    for (other, oid) in others_seen {
        let seen_ref = format!("{SEEN_PREFIX}{other}/{name}");
        let id = ObjectId::from_hex(oid.as_bytes())
            .map_err(|e| StoreError::Corrupt(format!("{seen_ref}: {e}")))?;
        let their = match read_chain(&mut objects, hash, id, false)? {
            Ok(c) => c,
            Err(why) => {
                return Err(StoreError::Corrupt(format!(
                    "{seen_ref} is unreadable ({why}); delete it with `git update-ref -d {seen_ref}` to trust {other} afresh"
                )));
            }
        };
        let Some(first) = their
            .iter()
            .zip(&chain)
            .position(|(a, b)| a.entry.entry_hash != b.entry.entry_hash)
        else {
            continue;
        };
        let theirs = Checkpoint::of(&their, their.len());
        result.status = FetchStatus::SplitView;
        result.code = Some("split-view");
        result.problem = Some(format!(
            "{remote} and {other} serve different histories of ledger {name} (first difference at seq {first}; {remote} now: {now}; {other} last seen: {theirs}): one of them forked it; if it was {other}, drop its view with `git update-ref -d {seen_ref}` and fetch again"
        ));
        result.conflict = Some((other.clone(), theirs));
        return Ok(result);
    }
    // Adopt: both refs move in one transaction, the seen ref only from the value it was judged
    // against.
    let tip = chain.last().expect("a verified ledger has entries").commit;
    let old_seen = seen_tip.unwrap_or_else(|| zero_oid(hash));
    let mut lines = format!(
        "update {REMOTES_PREFIX}{remote}/{name} {tip}\nupdate {SEEN_PREFIX}{remote}/{name} {tip} {old_seen}\n"
    );
    if let Some((_, sigs)) = git
        .refs_under(&staged_sigs)?
        .into_iter()
        .find(|(r, _)| *r == staged_sigs)
    {
        lines.push_str(&format!(
            "update {REMOTE_SIGNATURES_PREFIX}{remote}/{name} {sigs}\n"
        ));
    }
    git.update_refs(
        &format!("forum fetch {remote}: {}", result.status.label()),
        &lines,
    )?;
    Ok(result)
}

// ----- hooks -----

/// One ref update a hook was told about.
#[derive(Debug, Clone)]
pub struct RefUpdate {
    pub refname: String,
    pub old: String,
    pub new: String,
}

/// Checks one update of a ledger ref on the receiving side: no deletion; the new chain must be
/// a well-formed ledger; and it must extend the old chain entry for entry, allowing a
/// redaction-only rewrite. `Ok(Err)` is the refusal in one line.
pub fn check_server_update(
    objects: &mut dyn Objects,
    hash: HashKind,
    update: &RefUpdate,
) -> Result<Result<(), String>, StoreError> {
    if !update.refname.starts_with(LEDGER_PREFIX) {
        return Ok(Ok(()));
    }
    if is_zero(&update.new) {
        return Ok(Err(
            "ledgers are append-only; deleting one is not allowed".into()
        ));
    }
    let parse =
        |s: &str| ObjectId::from_hex(s.as_bytes()).map_err(|e| git_err("reading an object id", e));
    let new_id = parse(&update.new)?;
    let new = match read_chain(objects, hash, new_id, true)? {
        Ok(c) => c,
        Err(why) => return Ok(Err(format!("the pushed ledger is not valid: {why}"))),
    };
    // Bodies too, as `verify --deep` checks them: a commit rebuilt around another blob keeps
    // its message, so the entry chain alone does not show it.
    if let Err(why) = check_bodies(objects, hash, &new)? {
        return Ok(Err(format!("the pushed ledger is not valid: {why}")));
    }
    if is_zero(&update.old) {
        return Ok(Ok(()));
    }
    let old = match read_chain(objects, hash, parse(&update.old)?, false)? {
        Ok(c) => c,
        // The current value is not a readable ledger (it predates the hook, or is damaged):
        // nothing to hold the update to.
        Err(_) => return Ok(Ok(())),
    };
    Ok(match relate(&old, &new) {
        Relation::New | Relation::UpToDate | Relation::Extends => Ok(()),
        Relation::RedactionRewrite => check_redaction_rewrite(objects, hash, &old, &new)?,
        Relation::Truncated => Err(format!(
            "the update would shorten the ledger from {} to {} entries; ledgers are append-only",
            old.len(),
            new.len()
        )),
        Relation::Rewritten => {
            let first = old
                .iter()
                .zip(&new)
                .position(|(a, b)| a.entry.entry_hash != b.entry.entry_hash)
                .unwrap_or(0);
            Err(format!(
                "the update rewrites published entries (first difference at seq {first}); ledgers are append-only"
            ))
        }
    })
}

/// Checks what a pre-push hook was told: each ledger ref about to be published must verify
/// (deep) at the pushed commit and must not rewind or rewrite what the remote has (a
/// redaction-only rewrite excepted). Code refs are never looked at. Returns the refusals, one
/// line each.
pub fn check_pre_push(
    repo: &gix::Repository,
    updates: &[(String, String, String, String)],
) -> Result<Vec<String>, StoreError> {
    let hash = repo.object_hash();
    let git = Git::for_repo(repo);
    let mut refusals = Vec::new();
    for (local_ref, local_oid, remote_ref, remote_oid) in updates {
        let Some(name) = remote_ref.strip_prefix(LEDGER_PREFIX) else {
            continue;
        };
        if is_zero(local_oid) {
            refusals.push(format!(
                "ledger {name}: deleting a published ledger is not allowed; ledgers are append-only"
            ));
            continue;
        }
        let local_id = ObjectId::from_hex(local_oid.as_bytes())
            .map_err(|e| git_err("reading the pushed object id", e))?;
        // Verify the local ledger itself when its ref is what is pushed (so its reflog and
        // recorded checkpoints count); otherwise the pushed commit through a temporary ref.
        let named = local_ref
            .strip_prefix(LEDGER_PREFIX)
            .filter(|n| validate_ledger_name(n).is_ok())
            .map(|n| GitStore::new(repo.clone(), n, Options::default()))
            .transpose()?
            .filter(|s| s.tip_id().ok().flatten() == Some(local_id));
        let report = match named {
            Some(store) => store.verify(true)?,
            None => {
                let temp = format!("{PRE_PUSH_PREFIX}{}-{local_oid}", std::process::id());
                git.update_refs(
                    "forum pre-push: verify",
                    &format!("update {temp} {local_oid}\n"),
                )?;
                let r = GitStore::at_ref(repo.clone(), &temp, Options::default())
                    .and_then(|s| s.verify(true));
                let _ = git.update_refs("forum pre-push: done", &format!("delete {temp}\n"));
                r?
            }
        };
        if !report.passed() {
            let at = report
                .first_bad_seq
                .map(|s| format!(" at seq {s}"))
                .unwrap_or_default();
            refusals.push(format!(
                "ledger {name} does not verify{at}: {} [{}]",
                report.problem.as_deref().unwrap_or("unknown problem"),
                report.code.map_or("", |c| c.as_str())
            ));
            continue;
        }
        if is_zero(remote_oid) {
            continue;
        }
        let remote_id = ObjectId::from_hex(remote_oid.as_bytes())
            .map_err(|e| git_err("reading the remote object id", e))?;
        let mut objects = RepoObjects(repo);
        let old = match read_chain(&mut objects, hash, remote_id, false)? {
            Ok(c) => c,
            Err(_) => {
                refusals.push(format!(
                    "ledger {name}: the remote is at {remote_oid}, which this repository does not have; run `git forum fetch` first"
                ));
                continue;
            }
        };
        let new = match read_chain(&mut objects, hash, local_id, false)? {
            Ok(c) => c,
            Err(why) => {
                refusals.push(format!("ledger {name}: {why}"));
                continue;
            }
        };
        match relate(&old, &new) {
            Relation::New | Relation::UpToDate | Relation::Extends => {}
            Relation::RedactionRewrite => {
                if let Err(why) = check_redaction_rewrite(&mut objects, hash, &old, &new)? {
                    refusals.push(format!("ledger {name}: {why}"));
                }
            }
            Relation::Truncated => refusals.push(format!(
                "ledger {name}: the push would rewind the remote's ledger from {} to {} entries",
                old.len(),
                new.len()
            )),
            Relation::Rewritten => refusals.push(format!(
                "ledger {name}: the push would rewrite entries the remote already has (its checkpoint {} is not a prefix of what is pushed)",
                Checkpoint::of(&old, old.len())
            )),
        }
    }
    Ok(refusals)
}
