//! Standard checkpoints and proofs: C2SP tlog-checkpoint bodies in C2SP signed notes, signed with
//! Ed25519 keys in the format of Go's `golang.org/x/mod/sumdb/note` (`PRIVATE+KEY+name+hash+base64`,
//! verifier `name+hash+base64`), C2SP tlog-proofs and our consistency proof between two notes.
//!
//! A checkpoint note says, one item a line: the origin (`forum.origin`, or derived from the
//! repository and the ledger), the tree size, the base64 RFC 6962 root of the standard tree
//! ([`crate::ledger::tlog`]), and one extension line `forum-root HEX` carrying Forum's own root of
//! the same entries, so one signature covers both. Notes are kept on the ledger's signatures ref
//! (`refs/forum/checkpoints/NAME`) as commits whose tree holds one `note` blob, beside the ssh and
//! openpgp signatures, so they travel with push and fetch exactly as those do.
//!
//! Notes are made and opened by the `signed_note` crate (a port of Go's package); this module adds
//! the checkpoint body, the proof texts and the storage.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use signed_note::{Note, StandardSigner, StandardVerifier, VerifierList};

use super::git::{GitStore, StoreError};
use crate::ledger::tlog::Hash;

/// The extension line that carries Forum's root.
pub(crate) const FORUM_ROOT_PREFIX: &str = "forum-root ";
/// The first line of a C2SP tlog-proof.
pub(crate) const TLOG_PROOF_HEADER: &str = "c2sp.org/tlog-proof@v1";
/// The first line of our consistency proof between two checkpoint notes.
pub(crate) const CONSISTENCY_HEADER: &str = "git-forum tlog-consistency v1";
/// The subject that marks a note commit on the signatures ref.
pub(crate) const NOTE_SUBJECT_PREFIX: &str = "note ";

/// A checkpoint read from a note's text.
#[derive(Debug, Clone, PartialEq)]
pub struct NoteCheckpoint {
    pub(crate) origin: String,
    pub size: u64,
    pub(crate) root: Hash,
    /// Forum's root of the same entries (hex), when the note carries it.
    pub(crate) forum_root: Option<String>,
}

/// The tlog-checkpoint body: origin, size, base64 root, then Forum's root as an extension line.
pub(crate) fn checkpoint_text(origin: &str, size: u64, root: &Hash, forum_root: &str) -> String {
    format!(
        "{origin}\n{size}\n{}\n{FORUM_ROOT_PREFIX}{forum_root}\n",
        B64.encode(root.0)
    )
}

/// Decodes base64 only in its one canonical spelling (re-encoding gives the same text), so a
/// changed character can never decode to the same bytes.
pub(crate) fn strict_b64(s: &str) -> Option<Vec<u8>> {
    let bytes = B64.decode(s).ok()?;
    (B64.encode(&bytes) == s).then_some(bytes)
}

/// A hash in standard base64, as notes and proofs spell it.
pub fn b64(h: &Hash) -> String {
    B64.encode(h.0)
}

fn hash_b64(s: &str) -> Option<Hash> {
    let b = strict_b64(s)?;
    Some(Hash(b.try_into().ok()?))
}

/// Why a checkpoint body does not read: each variant is one rule of the tlog-checkpoint format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("a checkpoint ends with a newline")]
    NoFinalNewline,
    #[error("a checkpoint starts with its origin line")]
    NoOrigin,
    #[error("a checkpoint's second line is its size")]
    NoSize,
    #[error("checkpoint size {0:?} is not a decimal number")]
    BadSize(String),
    #[error("a checkpoint's third line is its root")]
    NoRoot,
    #[error("checkpoint root {0:?} is not a base64 SHA-256 hash")]
    BadRoot(String),
    #[error("a checkpoint has no empty lines")]
    EmptyLine,
}

/// Why the text of a tlog-proof or of a consistency proof does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofTextError {
    #[error("not a tlog-proof (its first line is not c2sp.org/tlog-proof@v1)")]
    NotTlogProof,
    #[error("the tlog-proof has no empty line before its checkpoint")]
    TlogProofNoEmptyLine,
    #[error("the tlog-proof's index line {0:?} is not `index N`")]
    BadIndexLine(String),
    #[error("proof line {0:?} is not a base64 hash")]
    BadPathLine(String),
    #[error("not a tlog consistency proof")]
    NotConsistencyProof,
    #[error("the consistency proof has no empty line before its notes")]
    ConsistencyNoEmptyLine,
    /// The `old N` or `new N` line (the key with its space) is missing or not a number.
    #[error("the consistency proof lacks its `{0}N` line")]
    NoSizeLine(&'static str),
    #[error("the consistency proof's first note is not whole")]
    FirstNoteNotWhole,
}

/// Why a note could not be signed or opened, or a key not read or made.
#[derive(Debug, thiserror::Error)]
pub enum NoteError {
    #[error("the note key is not a signed-note signer key: {0}")]
    SignerKey(#[source] signed_note::SignerError),
    #[error("bad note text: {0}")]
    BadText(#[source] signed_note::NoteError),
    #[error("signing the note failed: {0}")]
    Signing(#[source] signed_note::NoteError),
    #[error("the note is not UTF-8")]
    NotUtf8,
    #[error("{key:?} is not a signed-note verifier key: {source}")]
    VerifierKey {
        key: String,
        #[source]
        source: signed_note::VerifierError,
    },
    #[error("not a signed note (text, empty line, signatures)")]
    NotSignedNote,
    #[error("signature line {0:?} is not canonical base64")]
    NonCanonicalSignature(String),
    #[error("malformed note: {0}")]
    Malformed(#[source] signed_note::NoteError),
    #[error("the note is not signed by any trusted key")]
    Untrusted,
    #[error("the note's signature does not verify: {0}")]
    BadSignature(#[source] signed_note::NoteError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("key name {0:?} is not valid: it must be non-empty, without spaces or '+'")]
    BadKeyName(String),
}

/// The message as text, for the callers whose errors are still text (the proof check's
/// refusals mix these with their own words).
impl From<NoteError> for String {
    fn from(e: NoteError) -> String {
        e.to_string()
    }
}

impl From<CheckpointError> for String {
    fn from(e: CheckpointError) -> String {
        e.to_string()
    }
}

impl From<ProofTextError> for String {
    fn from(e: ProofTextError) -> String {
        e.to_string()
    }
}

/// Reads a checkpoint body (the text of a note, without its signatures).
pub(crate) fn parse_checkpoint(text: &str) -> Result<NoteCheckpoint, CheckpointError> {
    let body = text
        .strip_suffix('\n')
        .ok_or(CheckpointError::NoFinalNewline)?;
    let mut lines = body.split('\n');
    let origin = lines
        .next()
        .filter(|l| !l.is_empty())
        .ok_or(CheckpointError::NoOrigin)?;
    let size_line = lines.next().ok_or(CheckpointError::NoSize)?;
    let size: u64 = size_line
        .parse()
        .ok()
        .filter(|n: &u64| n.to_string() == size_line)
        .ok_or_else(|| CheckpointError::BadSize(size_line.to_string()))?;
    let root_line = lines.next().ok_or(CheckpointError::NoRoot)?;
    let root =
        hash_b64(root_line).ok_or_else(|| CheckpointError::BadRoot(root_line.to_string()))?;
    let mut forum_root = None;
    for l in lines {
        if l.is_empty() {
            return Err(CheckpointError::EmptyLine);
        }
        if let Some(r) = l.strip_prefix(FORUM_ROOT_PREFIX) {
            forum_root = Some(r.to_string());
        }
    }
    Ok(NoteCheckpoint {
        origin: origin.to_string(),
        size,
        root,
        forum_root,
    })
}

/// Signs `text` (a note text ending in a newline) with a signer key in Go's format; returns the
/// whole signed note.
pub fn sign_text(text: &str, signer_key: &str) -> Result<String, NoteError> {
    let signer = StandardSigner::new(signer_key.trim()).map_err(NoteError::SignerKey)?;
    let mut note = Note::new(text.as_bytes(), &[]).map_err(NoteError::BadText)?;
    note.add_sigs(&[&signer]).map_err(NoteError::Signing)?;
    String::from_utf8(note.to_bytes()).map_err(|_| NoteError::NotUtf8)
}

/// Parses verifier keys (`name+hash+base64`), one per item.
pub fn verifiers(keys: &[String]) -> Result<VerifierList, NoteError> {
    let mut list: Vec<Box<dyn signed_note::Verifier>> = Vec::new();
    for k in keys {
        let v = StandardVerifier::new(k.trim()).map_err(|source| NoteError::VerifierKey {
            key: k.trim().to_string(),
            source,
        })?;
        list.push(Box::new(v));
    }
    Ok(VerifierList::new(list))
}

/// A note opened with trusted keys.
#[derive(Debug, Clone)]
pub struct OpenedNote {
    pub checkpoint: NoteCheckpoint,
    /// The names of the trusted keys whose signatures verified.
    pub signers: Vec<String>,
}

/// Opens a signed checkpoint note: at least one signature by a key in `keys` must verify, every
/// signature line must be canonical, and the text must be a checkpoint.
pub fn open(note: &str, keys: &VerifierList) -> Result<OpenedNote, NoteError> {
    let (text, sigs) = split_note(note).ok_or(NoteError::NotSignedNote)?;
    for line in sigs.lines() {
        let b64 = line.rsplit(' ').next().unwrap_or("");
        if strict_b64(b64).is_none() {
            return Err(NoteError::NonCanonicalSignature(line.to_string()));
        }
    }
    let n = Note::from_bytes(note.as_bytes()).map_err(NoteError::Malformed)?;
    let (good, _) = n.verify(keys).map_err(|e| match e {
        signed_note::NoteError::UnverifiedNote => NoteError::Untrusted,
        e => NoteError::BadSignature(e),
    })?;
    let checkpoint = parse_checkpoint(text)?;
    Ok(OpenedNote {
        checkpoint,
        signers: good.iter().map(|s| s.name().to_string()).collect(),
    })
}

/// Splits a note into its text (with its final newline) and its signature lines.
fn split_note(note: &str) -> Option<(&str, &str)> {
    let i = note.find("\n\n")?;
    Some((&note[..=i], &note[i + 2..]))
}

/// Splits the start of `s` holding one whole note from what follows it: the note's signature
/// lines are the lines after its empty line that start with an em dash.
fn take_note(s: &str) -> Option<(&str, &str)> {
    let i = s.find("\n\n")? + 2;
    let mut end = i;
    while s[end..].starts_with("\u{2014} ") {
        end += s[end..].find('\n')? + 1;
    }
    (end > i).then(|| (&s[..end], &s[end..]))
}

/// Generates a signer and verifier key pair named `name`, in Go's note format.
pub(crate) fn keygen(name: &str) -> Result<(String, String), NoteError> {
    if !signed_note::is_key_name_valid(name) {
        return Err(NoteError::BadKeyName(name.to_string()));
    }
    Ok(signed_note::generate_key(&mut rand_core::OsRng, name))
}

/// A C2SP tlog-proof: the index, the audit path and the signed checkpoint note.
pub fn tlog_proof_text(index: u64, path: &[Hash], note: &str) -> String {
    let mut s = format!("{TLOG_PROOF_HEADER}\nindex {index}\n");
    for h in path {
        s.push_str(&B64.encode(h.0));
        s.push('\n');
    }
    s.push('\n');
    s.push_str(note);
    s
}

/// Reads a C2SP tlog-proof: (index, audit path, note).
pub(crate) fn parse_tlog_proof(text: &str) -> Result<(u64, Vec<Hash>, &str), ProofTextError> {
    let rest = text
        .strip_prefix(TLOG_PROOF_HEADER)
        .and_then(|r| r.strip_prefix('\n'))
        .ok_or(ProofTextError::NotTlogProof)?;
    let (head, note) = rest
        .split_once("\n\n")
        .ok_or(ProofTextError::TlogProofNoEmptyLine)?;
    let mut lines = head.split('\n');
    let idx_line = lines.next().unwrap_or("");
    let index = idx_line
        .strip_prefix("index ")
        .and_then(|n| n.parse::<u64>().ok().filter(|v| v.to_string() == n))
        .ok_or_else(|| ProofTextError::BadIndexLine(idx_line.to_string()))?;
    let path = lines
        .map(|l| hash_b64(l).ok_or_else(|| ProofTextError::BadPathLine(l.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((index, path, note))
}

/// Our consistency proof: the two sizes, the path, then the old note and the new note.
pub fn consistency_text(
    old: u64,
    new: u64,
    path: &[Hash],
    old_note: &str,
    new_note: &str,
) -> String {
    let mut s = format!("{CONSISTENCY_HEADER}\nold {old}\nnew {new}\n");
    for h in path {
        s.push_str(&B64.encode(h.0));
        s.push('\n');
    }
    s.push('\n');
    s.push_str(old_note);
    s.push_str(new_note);
    s
}

/// A consistency proof read back.
#[derive(Debug)]
pub struct ParsedConsistency<'a> {
    pub(crate) old: u64,
    pub(crate) new: u64,
    pub(crate) path: Vec<Hash>,
    pub old_note: &'a str,
    pub new_note: &'a str,
}

pub fn parse_consistency(text: &str) -> Result<ParsedConsistency<'_>, ProofTextError> {
    let rest = text
        .strip_prefix(CONSISTENCY_HEADER)
        .and_then(|r| r.strip_prefix('\n'))
        .ok_or(ProofTextError::NotConsistencyProof)?;
    let (head, notes) = rest
        .split_once("\n\n")
        .ok_or(ProofTextError::ConsistencyNoEmptyLine)?;
    let mut lines = head.split('\n');
    let num = |l: Option<&str>, key: &'static str| {
        l.and_then(|l| l.strip_prefix(key))
            .and_then(|n| n.parse::<u64>().ok().filter(|v| v.to_string() == n))
            .ok_or(ProofTextError::NoSizeLine(key))
    };
    let old = num(lines.next(), "old ")?;
    let new = num(lines.next(), "new ")?;
    let path = lines
        .map(|l| hash_b64(l).ok_or_else(|| ProofTextError::BadPathLine(l.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let (old_note, new_note) = take_note(notes).ok_or(ProofTextError::FirstNoteNotWhole)?;
    Ok(ParsedConsistency {
        old,
        new,
        path,
        old_note,
        new_note,
    })
}

/// What a witness decides about an offered checkpoint.
#[derive(Debug)]
pub(crate) enum WitnessDecision {
    /// Cosign this note (the offered new checkpoint); it becomes the origin's accepted one.
    Cosign {
        note: String,
        checkpoint: NoteCheckpoint,
    },
    /// Refuse, with why; `conflict` when the offer contradicts the accepted checkpoint (a
    /// rewritten ledger or a split view), so both notes are evidence.
    Refuse { why: String, conflict: bool },
}

/// The witness rule, pure: given the note it last accepted for the origin (if any) and an offer
/// (a consistency proof from that size, or a bare note on first contact), cosign only a tree
/// that extends the accepted one. `keys` are the log's verifier keys.
pub(crate) fn witness_decide(
    accepted: Option<&str>,
    offer: &str,
    keys: &VerifierList,
) -> WitnessDecision {
    let refuse = |why: String, conflict: bool| WitnessDecision::Refuse { why, conflict };
    let accepted = match accepted.map(|a| open(a, keys)) {
        None => None,
        Some(Ok(a)) => Some(a.checkpoint),
        Some(Err(e)) => return refuse(format!("the accepted note no longer opens: {e}"), false),
    };
    let offered = if offer.starts_with(CONSISTENCY_HEADER) {
        offered_by_proof(offer, accepted.as_ref(), keys)
    } else {
        offered_note(offer, accepted.as_ref(), keys)
    };
    let (new_note, new) = match offered {
        Ok(o) => o,
        Err(refused) => return refused,
    };
    if let Some(a) = &accepted
        && new.size < a.size
    {
        return refuse(
            format!(
                "the offered size {} is below the accepted size {}",
                new.size, a.size
            ),
            true,
        );
    }
    WitnessDecision::Cosign {
        note: new_note,
        checkpoint: new,
    }
}

/// A witness's view of an offered consistency proof from the note it `accepted`: the new note
/// and its checkpoint when the proof holds, else the refusal.
fn offered_by_proof(
    offer: &str,
    accepted: Option<&NoteCheckpoint>,
    keys: &VerifierList,
) -> Result<(String, NoteCheckpoint), WitnessDecision> {
    let refuse = |why: String, conflict: bool| Err(WitnessDecision::Refuse { why, conflict });
    let p = match parse_consistency(offer) {
        Ok(p) => p,
        Err(e) => return refuse(e.to_string(), false),
    };
    let (old, new) = match (open(p.old_note, keys), open(p.new_note, keys)) {
        (Ok(o), Ok(n)) => (o.checkpoint, n.checkpoint),
        (Err(e), _) | (_, Err(e)) => return refuse(e.to_string(), false),
    };
    if old.origin != new.origin || (old.size, new.size) != (p.old, p.new) {
        return refuse(
            "the proof's notes do not match its sizes and origin".into(),
            false,
        );
    }
    if let Some(a) = &accepted {
        if a.origin != old.origin {
            return refuse("the proof is for another origin".into(), false);
        }
        if a.size == old.size && a.root != old.root {
            return refuse(
                format!(
                    "the offered tree of size {} is not the one accepted at that size: the ledger was rewritten or shows another view",
                    old.size
                ),
                true,
            );
        }
        if a.size != old.size {
            return refuse(
                format!(
                    "the consistency proof starts at size {}, but the last accepted checkpoint has size {}: prove from {}",
                    old.size, a.size, a.size
                ),
                false,
            );
        }
    }
    if !crate::ledger::tlog::check_consistency(&p.path, new.size, new.root, old.size, old.root) {
        return refuse(
            format!(
                "the tree of size {} does not extend the accepted tree of size {}",
                new.size, old.size
            ),
            true,
        );
    }
    Ok((p.new_note.to_string(), new))
}

/// A witness's view of an offered note alone, given the note it `accepted`: the note and its
/// checkpoint when it is the first or the same, else the refusal.
fn offered_note(
    offer: &str,
    accepted: Option<&NoteCheckpoint>,
    keys: &VerifierList,
) -> Result<(String, NoteCheckpoint), WitnessDecision> {
    let refuse = |why: String, conflict: bool| Err(WitnessDecision::Refuse { why, conflict });
    let n = match open(offer, keys) {
        Ok(n) => n.checkpoint,
        Err(e) => return refuse(e.to_string(), false),
    };
    match &accepted {
        None => {}
        Some(a) if a.origin == n.origin && a.size == n.size && a.root == n.root => {}
        Some(a) if a.size == n.size => {
            return refuse(
                format!(
                    "the offered tree of size {} is not the one accepted at that size: the ledger was rewritten or shows another view",
                    n.size
                ),
                true,
            );
        }
        Some(a) => {
            return refuse(
                format!(
                    "a checkpoint of size {} was accepted before: offer a consistency proof from it (`prove --consistency-from {} --tlog`)",
                    a.size, a.size
                ),
                false,
            );
        }
    }
    Ok((offer.to_string(), n))
}

fn git_config(dir: &Path, key: &str) -> Option<String> {
    let mut cmd = crate::gitproc::at_git_dir(dir);
    cmd.args(["config", "--get", key]);
    let o = crate::gitproc::output(cmd, None, crate::gitproc::OUTPUT_LIMIT).ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Every value of a multi-valued git config key, trimmed, empty ones dropped (none when unset).
pub(crate) fn git_config_all(dir: &Path, key: &str) -> Vec<String> {
    let mut cmd = crate::gitproc::at_git_dir(dir);
    cmd.args(["config", "--get-all", key]);
    crate::gitproc::output(cmd, None, crate::gitproc::OUTPUT_LIMIT)
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The origin a remote URL names: scheme, user and a trailing `.git` dropped.
fn origin_of_url(url: &str) -> String {
    let s = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let s = s.rsplit_once('@').map(|(_, r)| r).unwrap_or(s);
    let s = s.replacen(':', "/", 1);
    s.trim_end_matches('/').trim_end_matches(".git").to_string()
}

impl GitStore {
    fn note_git_dir(&self) -> std::path::PathBuf {
        self.repo().git_dir().to_path_buf()
    }

    /// The origin line of this ledger's checkpoints: `forum.origin`, else the repository's
    /// `origin` remote (or its directory name) followed by `/NAME`.
    pub(crate) fn note_origin(&self) -> String {
        let gd = self.note_git_dir();
        if let Some(o) = git_config(&gd, "forum.origin") {
            return o;
        }
        let repo = git_config(&gd, "remote.origin.url")
            .map(|u| origin_of_url(&u))
            .unwrap_or_else(|| {
                let dir = self.repo().workdir().unwrap_or(self.repo().git_dir());
                let name = dir
                    .canonicalize()
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .unwrap_or_else(|| "repository".into());
                format!("git-forum/{name}")
            });
        format!("{repo}/{}", self.signature_ledger())
    }

    /// The trusted note verifier keys (`forum.noteVerifiers`, one or more values, each may hold
    /// several keys separated by whitespace or commas).
    pub(crate) fn note_verifier_keys(&self) -> Vec<String> {
        git_config_all(&self.note_git_dir(), "forum.noteVerifiers")
            .iter()
            .flat_map(|v| {
                v.split(|c: char| c.is_whitespace() || c == ',')
                    .filter(|k| !k.is_empty())
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The configured signing key file (`forum.noteKey`), if any.
    pub(crate) fn note_key_file(&self) -> Option<std::path::PathBuf> {
        git_config(&self.note_git_dir(), "forum.noteKey").map(std::path::PathBuf::from)
    }

    /// Appends a signed checkpoint note to the ledger's signatures ref.
    pub(crate) fn store_note(&self, note: &str, cp: &NoteCheckpoint) -> Result<(), StoreError> {
        let gd = self.note_git_dir().to_string_lossy().to_string();
        let message = format!(
            "{NOTE_SUBJECT_PREFIX}{} {} ({})\n",
            cp.size,
            B64.encode(cp.root.0),
            cp.origin
        );
        super::side_refs::commit_on_ref(
            &gd,
            &self.signatures_ref(),
            &[("note", note.as_bytes())],
            &message,
            "forum: signed checkpoint note",
        )?;
        Ok(())
    }

    /// Every checkpoint note stored for this ledger, oldest first.
    pub(crate) fn stored_notes(&self) -> Result<Vec<String>, StoreError> {
        let refname = self.signatures_ref();
        if !self.has_ref(&refname)? {
            return Ok(Vec::new());
        }
        let gd = self.note_git_dir().to_string_lossy().to_string();
        let list = super::side_refs::ref_history(&gd, &refname)?;
        let wanted: Vec<&str> = list
            .lines()
            .filter_map(|l| l.split_once(' '))
            .filter(|(_, subject)| subject.starts_with(NOTE_SUBJECT_PREFIX))
            .map(|(c, _)| c)
            .collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        // One `cat-file --batch` for every note, not one process per note.
        let input: String = wanted.iter().map(|c| format!("{c}:note\n")).collect();
        let mut cmd = crate::gitproc::at_git_dir(Path::new(&gd));
        cmd.args(["cat-file", "--batch"]);
        let o = crate::gitproc::output(cmd, Some(input.as_bytes()), crate::gitproc::OUTPUT_LIMIT)?;
        let mut rest: &[u8] = &o.stdout;
        let mut out = Vec::new();
        for commit in wanted {
            let corrupt =
                || StoreError::Corrupt(format!("{refname}: commit {commit} does not hold a note"));
            let nl = rest.iter().position(|&b| b == b'\n').ok_or_else(corrupt)?;
            let header = String::from_utf8_lossy(&rest[..nl]).to_string();
            let mut f = header.split(' ');
            let (_, kind, size) = (f.next(), f.next(), f.next());
            let size: usize = match (kind, size.and_then(|s| s.parse().ok())) {
                (Some("blob"), Some(n)) => n,
                _ => return Err(corrupt()),
            };
            let body = rest.get(nl + 1..nl + 1 + size).ok_or_else(corrupt)?;
            out.push(String::from_utf8_lossy(body).into_owned());
            rest = rest.get(nl + 2 + size..).unwrap_or(&[]);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_checkpoint_opens_with_its_verifier_and_not_another() {
        let (skey, vkey) = keygen("example.com/log").unwrap();
        let (_, other) = keygen("example.com/log").unwrap();
        let root = Hash([7; 32]);
        let text = checkpoint_text("example.com/log/main", 3, &root, &"ab".repeat(32));
        let note = sign_text(&text, &skey).unwrap();
        assert!(note.starts_with(&text));
        let opened = open(&note, &verifiers(&[vkey]).unwrap()).unwrap();
        assert_eq!(opened.checkpoint.size, 3);
        assert_eq!(opened.checkpoint.root, root);
        assert_eq!(opened.checkpoint.forum_root, Some("ab".repeat(32)));
        assert_eq!(opened.signers, vec!["example.com/log".to_string()]);
        assert!(open(&note, &verifiers(&[other]).unwrap()).is_err());
        let changed = note.replacen("\n3\n", "\n4\n", 1);
        assert!(open(&changed, &verifiers(&[keygen("x").unwrap().1]).unwrap()).is_err());
    }

    #[test]
    fn proofs_read_back_what_was_written() {
        let (skey, _) = keygen("k").unwrap();
        let note = |n: u64| {
            sign_text(&checkpoint_text("o", n, &Hash([n as u8; 32]), "00"), &skey).unwrap()
        };
        let path = vec![Hash([1; 32]), Hash([2; 32])];
        let t = tlog_proof_text(5, &path, &note(9));
        let (i, p, n) = parse_tlog_proof(&t).unwrap();
        assert_eq!((i, p.clone(), n), (5, path.clone(), note(9).as_str()));
        let c = consistency_text(3, 9, &path, &note(3), &note(9));
        let pc = parse_consistency(&c).unwrap();
        assert_eq!((pc.old, pc.new, pc.path), (3, 9, path));
        assert_eq!(
            (pc.old_note, pc.new_note),
            (note(3).as_str(), note(9).as_str())
        );
    }

    #[test]
    fn bad_key_names_and_bodies_are_refused() {
        assert!(keygen("has space").is_err());
        assert!(keygen("a+b").is_err());
        assert!(parse_checkpoint("o\n01\nAAAA\n").is_err());
        assert!(parse_checkpoint("o\n1\n").is_err());
        assert!(strict_b64("AB==").is_none() || B64.encode(strict_b64("AB==").unwrap()) == "AB==");
    }

    #[test]
    fn origins_of_remote_urls() {
        assert_eq!(
            origin_of_url("https://example.com/team/repo.git"),
            "example.com/team/repo"
        );
        assert_eq!(
            origin_of_url("git@example.com:team/repo.git"),
            "example.com/team/repo"
        );
    }
}
