//! After `fetch`: show each configured witness the remote's latest checkpoint note, record the
//! cosignatures they return, and report a split view when a witness holds another tree of the
//! same log.
//!
//! git forum signs nothing here. For each adopted remote ledger that carries a note (on
//! `refs/forum/checkpoints/NAME`, fetched beside it), and each `forum.witness` entry:
//!
//! * the offer is the bare note on first contact with that witness, else a consistency proof
//!   (`prove --consistency-from M --tlog` form) from the size M the witness last cosigned for
//!   us, built from the verified remote entries;
//! * the witness is `cmd:COMMAND` (run by `sh -c`, the offer on stdin; stdout is the cosigned
//!   note, or the `--json` report of `git forum witness`) or an `http(s)://` URL of a `git forum
//!   serve` (`POST URL/witness`); each has a deadline (`forum.witnessTimeout` seconds, 10 by
//!   default) and its answer is read up to [`MAX_ANSWER`] bytes;
//! * a witness that refuses because it holds a larger size gets one more offer from that size
//!   when the remote's tree at that size has the witness's root; when it has another root, the
//!   log signed two different trees (a split view): both notes are recorded as evidence and
//!   the fetch reports it.
//!
//! Before the witnesses are asked, the remote's note is held against the local ledger of the
//! same name: when the local ledger carries a note of the same origin and one tree does not
//! have the other's root at its size, that is a split view too, recorded `by local ledger`.
//!
//! Records are commits on `refs/forum/cosignatures/NAME`, one per answer, oldest first:
//! subject `cosigned SIZE by ENTRY` with a `note` blob (the note with the witness's line), or
//! `split-view SIZE by ENTRY` with blobs `held` (the witness's note) and `offered`. `verify`
//! reads them back ([`GitStore::witness_findings`]).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

mod error;

use self::error::{AskError, Held, SplitView};
use super::git::{GitStore, Options, StoreError};
use super::note::{self, NoteCheckpoint, git_config_all};
use crate::ledger::tlog::Tree;

/// Where the witnesses' answers about ledger NAME are recorded.
pub(crate) const COSIGNATURES_PREFIX: &str = "refs/forum/cosignatures/";
/// The largest answer read from a witness.
pub(crate) const MAX_ANSWER: u64 = 1 << 20;
/// The default deadline of one witness, in seconds.
pub(crate) const DEFAULT_TIMEOUT: f64 = 10.0;

/// What one witness said about one ledger.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Asked {
    /// The `forum.witness` entry.
    pub(crate) witness: String,
    /// `cosigned`, `failed`, `split-view` or `no-note`.
    pub(crate) status: &'static str,
    /// The size offered.
    pub(crate) size: Option<u64>,
    /// One line: what happened.
    pub(crate) message: String,
    /// For a split view: the note the witness holds and the one the remote serves.
    pub(crate) held: Option<String>,
    pub(crate) offered: Option<String>,
}

/// A witness's answer, from either transport.
#[derive(Debug, Default, serde::Deserialize)]
struct WitnessAnswer {
    #[serde(default)]
    ok: bool,
    cosigned: Option<String>,
    problem: Option<String>,
    error: Option<String>,
    #[serde(default)]
    conflict: bool,
    accepted: Option<String>,
}

fn split_keys(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(|c: char| c.is_whitespace() || c == ','))
        .filter(|k| !k.is_empty())
        .map(String::from)
        .collect()
}

fn checkpoint_of(n: &str) -> Option<NoteCheckpoint> {
    let (text, _) = n.split_once("\n\n")?;
    note::parse_checkpoint(&format!("{text}\n")).ok()
}

/// Asks every configured witness about each adopted ledger of `names` fetched from `remote`.
/// Returns, per ledger name, what each witness said. Nothing here fails the fetch; a store
/// error while recording is reported as that witness's failure.
pub(crate) fn ask_witnesses(
    dir: &Path,
    remote: &str,
    names: &[String],
) -> Result<Vec<(String, Vec<Asked>)>, StoreError> {
    let repo = super::git::open_repo(dir)?;
    let gd = repo.git_dir().to_path_buf();
    let entries = git_config_all(&gd, "forum.witness");
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let timeout = git_config_all(&gd, "forum.witnessTimeout")
        .pop()
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|t| t.is_finite() && *t > 0.0 && *t < 1e6)
        .unwrap_or(DEFAULT_TIMEOUT);
    let mut out = Vec::new();
    for name in names {
        let copy = GitStore::at_ref(
            repo.clone(),
            &format!("{}{remote}/{name}", super::handle::REMOTES_PREFIX),
            Options::default(),
        )?
        .with_signatures(
            name,
            &format!("{}{remote}/{name}", super::handle::REMOTE_SIGNATURES_PREFIX),
        );
        let latest = copy
            .stored_notes()?
            .into_iter()
            .rev()
            .find_map(|n| checkpoint_of(&n).map(|c| (n, c)));
        let Some((new_note, new_cp)) = latest else {
            let asked = entries
                .iter()
                .map(|w| Asked {
                    witness: w.clone(),
                    status: "no-note",
                    size: None,
                    message: format!(
                        "{remote} carries no signed note of ledger {name} (refs/forum/checkpoints/{name}): there is nothing to show the witnesses"
                    ),
                    held: None,
                    offered: None,
                })
                .collect();
            out.push((name.clone(), asked));
            continue;
        };
        let hashes: Vec<String> = copy.entries()?.into_iter().map(|e| e.entry_hash).collect();
        let tree = Tree::from_entry_hashes(hashes.iter().map(String::as_str))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let record = CosignatureLog {
            gd: &gd,
            refname: format!("{COSIGNATURES_PREFIX}{name}"),
        };
        let mut asked = Vec::new();
        if let Some(a) = local_split(&repo, &record, name, &tree, &new_note, &new_cp)? {
            asked.push(a);
        }
        for w in &entries {
            let a =
                ask_one(w, &record, &tree, &new_note, &new_cp, timeout).unwrap_or_else(|e| Asked {
                    witness: w.clone(),
                    status: "failed",
                    size: Some(new_cp.size),
                    message: format!("recording the answer failed: {e}"),
                    held: None,
                    offered: None,
                });
            asked.push(a);
        }
        out.push((name.clone(), asked));
    }
    Ok(out)
}

/// The local ledger of the same name against the remote's copy: when both carry notes of one
/// origin (each opening with `forum.noteVerifiers`, when set) and one tree does not have the
/// other's root at its size, the log showed two trees, here and there: a split view.
fn local_split(
    repo: &gix::Repository,
    record: &CosignatureLog<'_>,
    name: &str,
    remote_tree: &Tree,
    remote_note: &str,
    remote_cp: &NoteCheckpoint,
) -> Result<Option<Asked>, StoreError> {
    let local = GitStore::new(repo.clone(), name, Options::default())?;
    if !local.exists()? {
        return Ok(None);
    }
    let Some((local_note, local_cp)) = local.stored_notes()?.into_iter().rev().find_map(|n| {
        checkpoint_of(&n)
            .filter(|c| c.origin == remote_cp.origin)
            .map(|c| (n, c))
    }) else {
        return Ok(None);
    };
    let keys = local.note_verifier_keys();
    if !keys.is_empty() {
        let Ok(v) = note::verifiers(&keys) else {
            return Ok(None);
        };
        if note::open(&local_note, &v).is_err() || note::open(remote_note, &v).is_err() {
            return Ok(None);
        }
    }
    let (small, have, big_is_local) = if local_cp.size <= remote_cp.size {
        (&local_cp, remote_tree.root(local_cp.size).ok(), false)
    } else {
        let hashes: Vec<String> = local.entries()?.into_iter().map(|e| e.entry_hash).collect();
        let t = Tree::from_entry_hashes(hashes.iter().map(String::as_str))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        (remote_cp, t.root(remote_cp.size).ok(), true)
    };
    if have == Some(small.root) {
        return Ok(None);
    }
    let size = small.size;
    let why = format!(
        "the local ledger's note and the remote's note are of one log ({}), but at size {size} the {} tree has root {} where the other note says {}",
        remote_cp.origin,
        if big_is_local { "local" } else { "remote" },
        have.map(|h| note::b64(&h))
            .unwrap_or_else(|| "(none)".into()),
        note::b64(&small.root)
    );
    record.add(
        &format!("split-view {size} by local ledger"),
        &[
            ("held", local_note.as_bytes()),
            ("offered", remote_note.as_bytes()),
        ],
    )?;
    Ok(Some(Asked {
        witness: "local ledger".into(),
        status: "split-view",
        size: Some(size),
        message: format!(
            "SPLIT VIEW between the local ledger and the remote: {why}; both notes are kept on {}",
            record.refname
        ),
        held: Some(local_note),
        offered: Some(remote_note.to_string()),
    }))
}

/// The records of one ledger.
struct CosignatureLog<'a> {
    gd: &'a Path,
    refname: String,
}

impl CosignatureLog<'_> {
    fn gd(&self) -> String {
        self.gd.to_string_lossy().to_string()
    }

    /// `(commit, subject)` of each record, oldest first.
    fn list(&self) -> Result<Vec<(String, String)>, StoreError> {
        if super::sign::ref_target(self.gd, &self.refname)?.is_none() {
            return Ok(Vec::new());
        }
        Ok(super::sign::ref_history(&self.gd(), &self.refname)?
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(c, s)| (c.to_string(), s.to_string()))
            .collect())
    }

    fn blob(&self, commit: &str, file: &str) -> Result<String, StoreError> {
        super::sign::git_ok(
            Path::new("."),
            &[
                "--git-dir",
                &self.gd(),
                "cat-file",
                "blob",
                &format!("{commit}:{file}"),
            ],
            None,
        )
        .map(|s| format!("{}\n", s.trim_end_matches('\n')))
    }

    /// The note this witness last cosigned for `origin`.
    fn last_cosigned(&self, witness: &str, origin: &str) -> Result<Option<String>, StoreError> {
        let suffix = format!(" by {witness}");
        for (c, s) in self.list()?.into_iter().rev() {
            if s.starts_with("cosigned ") && s.ends_with(&suffix) {
                let n = self.blob(&c, "note")?;
                if checkpoint_of(&n).is_some_and(|cp| cp.origin == origin) {
                    return Ok(Some(n));
                }
            }
        }
        Ok(None)
    }

    fn add(&self, subject: &str, files: &[(&str, &[u8])]) -> Result<(), StoreError> {
        super::sign::commit_on_ref(
            &self.gd(),
            &self.refname,
            files,
            &format!("{subject}\n"),
            "forum: witness record",
        )
    }
}

/// A witness's cosigning answer (`answer`, the note it returned) to the offer of `new_note`:
/// checked to be the note offered, cosigned by a key in `forum.witnessVerifiers` when any are
/// set, and recorded unless it repeats the last note `from` this witness cosigned.
fn cosigned(
    w: &str,
    record: &CosignatureLog<'_>,
    from: Option<&str>,
    new_note: &str,
    new_cp: &NoteCheckpoint,
    answer: Option<String>,
    mut asked: Asked,
) -> Result<Asked, StoreError> {
    let Some(cosigned) =
        answer.filter(|c| c.starts_with(new_note.split("\n\n").next().unwrap_or("")))
    else {
        asked.message = format!("witness {w} answered without the cosigned note offered");
        return Ok(asked);
    };
    if let Err(why) = check_cosignature(record.gd, &cosigned) {
        asked.message = format!("witness {w}: {why}");
        return Ok(asked);
    }
    // A note cosigned again (a fetch with nothing new) adds no record.
    let body = |n: &str| n.split("\n\n").next().map(String::from);
    if from.and_then(body) != body(&cosigned) {
        record.add(
            &format!("cosigned {} by {w}", new_cp.size),
            &[("note", cosigned.as_bytes())],
        )?;
    }
    asked.status = "cosigned";
    asked.message = format!(
        "witness {w} cosigned {} at size {}",
        new_cp.origin, new_cp.size
    );
    Ok(asked)
}
impl Asked {
    /// What asking witness `w` to cosign at `size` did, until it does better: it failed.
    fn failed(w: &str, size: u64) -> Asked {
        Asked {
            witness: w.to_string(),
            status: "failed",
            size: Some(size),
            message: String::new(),
            held: None,
            offered: None,
        }
    }
}

fn ask_one(
    w: &str,
    record: &CosignatureLog<'_>,
    tree: &Tree,
    new_note: &str,
    new_cp: &NoteCheckpoint,
    timeout: f64,
) -> Result<Asked, StoreError> {
    let mut asked = Asked::failed(w, new_cp.size);
    let from = record.last_cosigned(w, &new_cp.origin)?;
    let mut offer = match from
        .as_deref()
        .and_then(|n| checkpoint_of(n).map(|c| (n, c)))
    {
        Some((old, cp)) => match proof_from(tree, old, &cp, new_note, new_cp) {
            Ok(p) => p,
            Err(split) => return split_view(record, asked, w, old, new_note, &split),
        },
        None => new_note.to_string(),
    };
    let deadline = Duration::from_secs_f64(timeout);
    for attempt in 0..2 {
        let answer = match send(w, &offer, deadline) {
            Ok(a) => a,
            Err(why) => {
                asked.message = format!("witness {w} failed: {why}");
                return Ok(asked);
            }
        };
        if answer.ok {
            return cosigned(
                w,
                record,
                from.as_deref(),
                new_note,
                new_cp,
                answer.cosigned,
                asked,
            );
        }
        let why = answer
            .problem
            .or(answer.error)
            .unwrap_or_else(|| "no reason given".into());
        // What the witness holds decides: a tree the remote extends gets one more offer from
        // it; another tree at a size the remote has is a split view.
        let held = answer
            .accepted
            .filter(|a| checkpoint_of(a).is_some_and(|c| c.origin == new_cp.origin));
        if let Some(held) = held {
            let cp = checkpoint_of(&held).expect("filtered");
            if cp.size <= tree.len() {
                match proof_from(tree, &held, &cp, new_note, new_cp) {
                    Err(split) => {
                        return split_view(record, asked, w, &held, new_note, &split);
                    }
                    Ok(p) if attempt == 0 && !answer.conflict => {
                        offer = p;
                        continue;
                    }
                    Ok(_) => {}
                }
            } else {
                asked.message = format!(
                    "witness {w} refused: it holds {} at size {}, larger than the {} entries the remote serves (the remote is behind, or shows another view): {why}",
                    cp.origin,
                    cp.size,
                    tree.len()
                );
                return Ok(asked);
            }
        }
        asked.message = format!("witness {w} refused: {why}");
        return Ok(asked);
    }
    Ok(asked)
}

/// The consistency proof from the witness's note `old` to the remote's `new`; `Err` with why
/// when the remote's tree at the old size does not have the old root (a split view).
fn proof_from(
    tree: &Tree,
    old: &str,
    old_cp: &NoteCheckpoint,
    new_note: &str,
    new_cp: &NoteCheckpoint,
) -> Result<String, SplitView> {
    let have = (old_cp.size <= tree.len())
        .then(|| tree.root(old_cp.size).ok())
        .flatten();
    if old_cp.size > new_cp.size || have != Some(old_cp.root) {
        let held = Held {
            origin: old_cp.origin.clone(),
            size: old_cp.size,
            root: note::b64(&old_cp.root),
        };
        return Err(match have {
            Some(r) => SplitView::OtherRoot {
                held,
                remote_root: note::b64(&r),
            },
            None => SplitView::Shorter {
                held,
                len: tree.len(),
            },
        });
    }
    if old_cp.size == new_cp.size {
        return Ok(new_note.to_string());
    }
    let path = tree.consistency_proof(old_cp.size, new_cp.size)?;
    // The witness opens both notes with the log's keys; its own old cosignature line is a key
    // it skips.
    Ok(note::consistency_text(
        old_cp.size,
        new_cp.size,
        &path,
        old,
        new_note,
    ))
}

fn split_view(
    record: &CosignatureLog<'_>,
    mut asked: Asked,
    w: &str,
    held: &str,
    offered: &str,
    why: &SplitView,
) -> Result<Asked, StoreError> {
    let size = checkpoint_of(held).map(|c| c.size).unwrap_or(0);
    record.add(
        &format!("split-view {size} by {w}"),
        &[("held", held.as_bytes()), ("offered", offered.as_bytes())],
    )?;
    asked.status = "split-view";
    asked.message = format!(
        "SPLIT VIEW through witness {w}: {why}; both notes are kept on {}",
        record.refname
    );
    asked.held = Some(held.to_string());
    asked.offered = Some(offered.to_string());
    Ok(asked)
}

/// A returned cosignature must verify under `forum.witnessVerifiers` when any are configured.
fn check_cosignature(gd: &Path, cosigned: &str) -> Result<(), AskError> {
    let keys: Vec<String> = git_config_all(gd, "forum.witnessVerifiers")
        .iter()
        .flat_map(|v| {
            v.split(|c: char| c.is_whitespace() || c == ',')
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .filter(|k| !k.is_empty())
        .collect();
    if keys.is_empty() {
        return Ok(());
    }
    let v = super::cosign::verifiers(&keys)?;
    match super::cosign::verify(cosigned, &v)? {
        c if c.is_empty() => Err(AskError::NoTrustedCosignature),
        _ => Ok(()),
    }
}

/// Sends the offer to one witness and reads its answer.
fn send(w: &str, offer: &str, deadline: Duration) -> Result<WitnessAnswer, AskError> {
    if let Some(cmd) = w.strip_prefix("cmd:") {
        return send_cmd(cmd, offer, deadline);
    }
    if w.starts_with("http://") || w.starts_with("https://") {
        return send_http(w, offer, deadline);
    }
    Err(AskError::NotAWitness(w.to_string()))
}

fn read_bounded(r: impl Read) -> Result<(Vec<u8>, bool), std::io::Error> {
    let mut buf = Vec::new();
    r.take(MAX_ANSWER + 1).read_to_end(&mut buf)?;
    let over = buf.len() as u64 > MAX_ANSWER;
    buf.truncate(MAX_ANSWER as usize);
    Ok((buf, over))
}

fn send_cmd(cmd: &str, offer: &str, deadline: Duration) -> Result<WitnessAnswer, AskError> {
    let mut child = Command::new("sh")
        .args(["-c", cmd])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(AskError::CannotRun)?;
    let mut stdin = child.stdin.take().expect("piped");
    let input = offer.to_string();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || read_bounded(stdout));
    let err = std::thread::spawn(move || read_bounded(stderr));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(AskError::Timeout(deadline.as_secs_f64()));
            }
            Err(e) => return Err(AskError::Waiting(e)),
        }
    };
    let _ = writer.join();
    let (stdout, over) = out
        .join()
        .map_err(|_| AskError::AnswerLost)?
        .map_err(AskError::ReadAnswer)?;
    let (stderr, _) = err
        .join()
        .map_err(|_| AskError::ErrorsLost)?
        .unwrap_or_default();
    if over {
        return Err(AskError::TooLarge);
    }
    let text = String::from_utf8_lossy(&stdout).to_string();
    if let Ok(a) = serde_json::from_str::<WitnessAnswer>(&text) {
        return Ok(a);
    }
    if status.success() {
        return Ok(WitnessAnswer {
            ok: true,
            cosigned: Some(text),
            ..WitnessAnswer::default()
        });
    }
    let last = String::from_utf8_lossy(&stderr)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string();
    Err(AskError::Exited { status, last })
}

fn send_http(url: &str, offer: &str, deadline: Duration) -> Result<WitnessAnswer, AskError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let target = if url.trim_end_matches('/').ends_with("/witness") {
        url.to_string()
    } else {
        format!("{}/witness", url.trim_end_matches('/'))
    };
    let client = reqwest::blocking::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(deadline)
        .build()
        .map_err(AskError::Client)?;
    let field = if offer.starts_with(note::CONSISTENCY_HEADER) {
        "proof"
    } else {
        "note"
    };
    let resp = client
        .post(&target)
        .header("content-type", "application/json")
        .body(serde_json::json!({ field: offer }).to_string())
        .send()
        .map_err(|e| AskError::Post {
            target: target.clone(),
            source: e.without_url(),
        })?;
    let status = resp.status().as_u16();
    let (body, over) = read_bounded(resp).map_err(|source| AskError::ReadHttp {
        target: target.clone(),
        source,
    })?;
    if over {
        return Err(AskError::TooLarge);
    }
    let Ok(a) = serde_json::from_slice::<WitnessAnswer>(&body) else {
        return Err(AskError::NoReport { target, status });
    };
    match status {
        200 | 409 => Ok(a),
        _ => Err(AskError::Refused {
            target,
            status,
            error: a.error.unwrap_or_default(),
        }),
    }
}

/// What `verify` finds in the witness records of a ledger.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct Findings {
    /// Cosigned notes recorded.
    pub(crate) cosigned: usize,
    /// Cosignatures that verified under the trusted witness keys.
    pub(crate) verified: usize,
    /// One line per problem: a split view recorded, two recorded notes of one origin and size
    /// with different roots, or a cosignature that does not verify.
    pub(crate) problems: Vec<String>,
}

impl GitStore {
    /// The trusted cosignature verifier keys (`forum.witnessVerifiers`, one or more values,
    /// each may hold several keys separated by whitespace or commas).
    pub(crate) fn witness_verifier_keys(&self) -> Vec<String> {
        split_keys(&git_config_all(
            self.repo().git_dir(),
            "forum.witnessVerifiers",
        ))
    }

    /// [`Self::witness_verifier_keys`] as the repository's config read when it was opened, with
    /// no git spawned: for a process that opened the store just now (the `verify` command); a
    /// long-lived daemon asks git, so that it sees a later `git config`.
    pub fn witness_verifier_keys_as_opened(&self) -> Vec<String> {
        let values: Vec<String> = self
            .repo()
            .config_snapshot()
            .strings("forum.witnessVerifiers")
            .unwrap_or_default()
            .iter()
            .map(|v| v.to_string())
            .collect();
        split_keys(&values)
    }

    /// Reads the witness records of this ledger (`refs/forum/cosignatures/NAME`), checking
    /// cosignatures with `witness_keys` (type-0x04 verifier keys; none: they are counted
    /// unchecked).
    pub(crate) fn witness_findings(&self, witness_keys: &[String]) -> Result<Findings, StoreError> {
        let gd = self.repo().git_dir().to_path_buf();
        let record = CosignatureLog {
            gd: &gd,
            refname: format!("{COSIGNATURES_PREFIX}{}", self.signature_ledger()),
        };
        let trusted = super::cosign::verifiers(witness_keys)
            .map_err(|e| StoreError::Invalid(format!("forum.witnessVerifiers: {e}")))?;
        let mut f = Findings::default();
        if !self.has_ref(&record.refname)? {
            return Ok(f);
        }
        let mut seen: Vec<NoteCheckpoint> = Vec::new();
        for (c, subject) in record.list()? {
            if subject.starts_with("split-view ") {
                let held = record.blob(&c, "held")?;
                let offered = record.blob(&c, "offered")?;
                let (h, o) = (checkpoint_of(&held), checkpoint_of(&offered));
                f.problems.push(format!(
                    "split view recorded by fetch ({}): the witness held size {} root {}, a remote served size {} root {} (both notes in commit {c} of {})",
                    subject.split_once(" by ").map(|(_, w)| w).unwrap_or(""),
                    h.as_ref().map(|c| c.size).unwrap_or(0),
                    h.as_ref().map(|c| note::b64(&c.root)).unwrap_or_default(),
                    o.as_ref().map(|c| c.size).unwrap_or(0),
                    o.as_ref().map(|c| note::b64(&c.root)).unwrap_or_default(),
                    record.refname
                ));
                continue;
            }
            if !subject.starts_with("cosigned ") {
                continue;
            }
            let n = record.blob(&c, "note")?;
            f.cosigned += 1;
            if !trusted.is_empty() {
                match super::cosign::verify(&n, &trusted) {
                    Ok(v) if !v.is_empty() => f.verified += 1,
                    Ok(_) => f.problems.push(format!(
                        "the cosigned note in commit {c} of {} has no cosignature by a trusted witness key",
                        record.refname
                    )),
                    Err(why) => f.problems.push(format!(
                        "commit {c} of {}: {why}",
                        record.refname
                    )),
                }
            }
            let Some(cp) = checkpoint_of(&n) else {
                continue;
            };
            if let Some(other) = seen
                .iter()
                .find(|s| s.origin == cp.origin && s.size == cp.size && s.root != cp.root)
            {
                f.problems.push(format!(
                    "split view: witnesses cosigned two trees of {} at size {}: roots {} and {}",
                    cp.origin,
                    cp.size,
                    note::b64(&other.root),
                    note::b64(&cp.root)
                ));
            }
            seen.push(cp);
        }
        Ok(f)
    }
}
