//! Signed checkpoints: `(ledger, size, root)` signed with the user's own git signing setup
//! (`gpg.format` ssh or openpgp, `user.signingKey`) in the `git-forum-checkpoint` namespace, so
//! the signature cannot pass as a commit or tag signature. Signatures are kept as a chain of
//! commits on `refs/forum/checkpoints/NAME` (each tree: `checkpoint`, the signed text, and
//! `signature`), which travels with the ledger. Signing and checking run `ssh-keygen` or `gpg`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::git::{GitStore, StoreError};
use crate::ledger::proof::{Checkpoint, CheckpointSignature, SIGNATURE_NAMESPACE, signed_text};

pub(crate) use super::handle::checkpoints_ref;
pub(crate) use super::side_refs::{commit_on_ref, git_ok, ref_history, ref_target};

/// A signed checkpoint read back from the repository.
#[derive(Debug, Clone)]
pub(crate) struct StoredSignature {
    pub(crate) ledger: String,
    pub(crate) checkpoint: Checkpoint,
    pub(crate) signature: CheckpointSignature,
}

/// What checking a signature found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SignatureCheck {
    /// Good, by this signer (an ssh principal, or gpg's "Good signature from" name).
    Good(String),
    /// The signature does not verify, or its key is not an allowed signer.
    Bad(String),
    /// It could not be checked here (no allowed-signers file, no gpg key), which is not proof of
    /// anything either way.
    Unchecked(String),
}

/// Why a signing program (ssh-keygen, gpg) could not be run to its end.
#[derive(Debug, thiserror::Error)]
enum SignerRunError {
    #[error("cannot run {program:?}: {source}")]
    Spawn {
        program: std::ffi::OsString,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Io(#[source] std::io::Error),
}

fn run(cmd: &mut Command, input: &[u8]) -> Result<std::process::Output, SignerRunError> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| SignerRunError::Spawn {
            program: cmd.get_program().to_os_string(),
            source,
        })?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(input)
        .map_err(SignerRunError::Io)?;
    child.wait_with_output().map_err(SignerRunError::Io)
}

fn git_config(dir: &Path, key: &str) -> Option<String> {
    let mut cmd = crate::gitproc::in_dir(dir);
    cmd.args(["config", "--get", key]);
    let o = crate::gitproc::output(cmd, None, crate::gitproc::OUTPUT_LIMIT).ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(p),
    }
}

/// Signs `text` with the repository's git signing setup.
pub(crate) fn sign(worktree: &Path, text: &str) -> Result<CheckpointSignature, StoreError> {
    let format = git_config(worktree, "gpg.format").unwrap_or_else(|| "openpgp".into());
    let key = git_config(worktree, "user.signingKey").ok_or_else(|| {
        StoreError::Invalid(
            "no signing key configured: set `git config user.signingKey` (and `gpg.format ssh` for an SSH key)".into(),
        )
    })?;
    let out = match format.as_str() {
        "ssh" => {
            let program =
                git_config(worktree, "gpg.ssh.program").unwrap_or_else(|| "ssh-keygen".into());
            let key = expand_home(&key);
            run(
                Command::new(program)
                    .args(["-Y", "sign", "-n", SIGNATURE_NAMESPACE, "-f"])
                    .arg(&key),
                text.as_bytes(),
            )
        }
        "openpgp" => {
            let program = git_config(worktree, "gpg.program").unwrap_or_else(|| "gpg".into());
            run(
                Command::new(program).args(["--batch", "--detach-sign", "--armor", "-u", &key]),
                text.as_bytes(),
            )
        }
        other => {
            return Err(StoreError::Invalid(format!(
                "gpg.format {other:?} is not supported for checkpoints; use ssh or openpgp"
            )));
        }
    }
    .map_err(|e| StoreError::Git(e.to_string()))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(StoreError::Git(format!(
            "signing the checkpoint failed: {}",
            why.lines()
                .next()
                .unwrap_or("the signing program exited with an error")
        )));
    }
    Ok(CheckpointSignature {
        format,
        signature: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}

/// Checks a checkpoint signature with the repository's trust setup (`gpg.ssh.allowedSignersFile`
/// for ssh, gpg's keyring for openpgp).
pub(crate) fn check(
    worktree: &Path,
    text: &str,
    sig: &CheckpointSignature,
    allowed_signers: Option<&Path>,
) -> SignatureCheck {
    let dir = match crate::scratch::dir("git-forum-sig-") {
        Ok(d) => d,
        Err(e) => return SignatureCheck::Unchecked(format!("no temporary directory: {e}")),
    };
    let sig_path = dir.path().join("checkpoint.sig");
    if std::fs::write(&sig_path, &sig.signature).is_err() {
        return SignatureCheck::Unchecked("cannot write the signature to a temporary file".into());
    }
    match sig.format.as_str() {
        "ssh" => check_ssh(worktree, text, &sig_path, allowed_signers),
        "openpgp" => check_openpgp(worktree, text, &sig_path, dir.path()),
        other => SignatureCheck::Bad(format!("unknown signature format {other:?}")),
    }
}

/// Checks an ssh signature (in `sig_path`) of `text` against the allowed signers file.
fn check_ssh(
    worktree: &Path,
    text: &str,
    sig_path: &Path,
    allowed_signers: Option<&Path>,
) -> SignatureCheck {
    let allowed = allowed_signers
        .map(Path::to_path_buf)
        .or_else(|| git_config(worktree, "gpg.ssh.allowedSignersFile").map(|p| expand_home(&p)));
    let Some(allowed) = allowed else {
        return SignatureCheck::Unchecked("no gpg.ssh.allowedSignersFile configured".into());
    };
    let program = git_config(worktree, "gpg.ssh.program").unwrap_or_else(|| "ssh-keygen".into());
    let found = Command::new(&program)
        .args(["-Y", "find-principals", "-s"])
        .arg(sig_path)
        .arg("-f")
        .arg(&allowed)
        .output();
    let principal = match found {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_string(),
        Ok(_) => {
            return SignatureCheck::Bad(
                "signed by a key that is not in the allowed signers".into(),
            );
        }
        Err(e) => return SignatureCheck::Unchecked(format!("cannot run {program}: {e}")),
    };
    let verified = run(
        Command::new(&program)
            .args([
                "-Y",
                "verify",
                "-n",
                SIGNATURE_NAMESPACE,
                "-I",
                &principal,
                "-s",
            ])
            .arg(sig_path)
            .arg("-f")
            .arg(&allowed),
        text.as_bytes(),
    );
    match verified {
        Ok(o) if o.status.success() => SignatureCheck::Good(principal),
        Ok(_) => SignatureCheck::Bad(format!(
            "the signature claimed by {principal} does not verify"
        )),
        Err(e) => SignatureCheck::Unchecked(e.to_string()),
    }
}

/// Checks an openpgp signature (in `sig_path`) of `text` with gpg, writing the text beside it
/// in `dir`.
fn check_openpgp(worktree: &Path, text: &str, sig_path: &Path, dir: &Path) -> SignatureCheck {
    let program = git_config(worktree, "gpg.program").unwrap_or_else(|| "gpg".into());
    let data = dir.join("checkpoint.txt");
    if std::fs::write(&data, text).is_err() {
        return SignatureCheck::Unchecked("cannot write the checkpoint to a temporary file".into());
    }
    match Command::new(&program)
        .args(["--batch", "--verify"])
        .arg(sig_path)
        .arg(&data)
        .output()
    {
        Ok(o) if o.status.success() => {
            let err = String::from_utf8_lossy(&o.stderr);
            let who = err
                .lines()
                .find_map(|l| l.split("Good signature from ").nth(1))
                .map(|s| {
                    s.trim_matches(['"', ' '])
                        .split('"')
                        .next()
                        .unwrap_or("")
                        .to_string()
                })
                .unwrap_or_else(|| "an openpgp key".into());
            SignatureCheck::Good(who)
        }
        Ok(o) => SignatureCheck::Bad(
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("gpg refused the signature")
                .to_string(),
        ),
        Err(e) => SignatureCheck::Unchecked(format!("cannot run {program}: {e}")),
    }
}

impl GitStore {
    fn git_dir_path(&self) -> PathBuf {
        self.repo().git_dir().to_path_buf()
    }

    /// Signs the checkpoint `(self, checkpoint)` and appends it to the ledger's signed
    /// checkpoints.
    pub(crate) fn sign_checkpoint(
        &self,
        checkpoint: &Checkpoint,
    ) -> Result<CheckpointSignature, StoreError> {
        let dir = self
            .repo()
            .workdir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.git_dir_path());
        let text = signed_text(self.signature_ledger(), checkpoint);
        let sig = sign(&dir, &text)?;
        let git_dir = self.git_dir_path();
        let gd = git_dir.to_string_lossy().to_string();
        let message = format!(
            "checkpoint {} {} ({})\n",
            checkpoint.size, checkpoint.root, sig.format
        );
        commit_on_ref(
            &gd,
            &self.signatures_ref(),
            &[
                ("checkpoint", text.as_bytes()),
                ("signature", sig.signature.as_bytes()),
            ],
            &message,
            "forum: signed checkpoint",
        )?;
        Ok(sig)
    }

    /// Whether `refname` exists. Most ledgers have no signatures, notes or witness records: in
    /// a files repository gix answers that without spawning git (a `verify` used to spawn three
    /// gits just to learn so); any other ref storage, or a ref gix cannot read, is asked
    /// through git.
    pub(crate) fn has_ref(&self, refname: &str) -> Result<bool, StoreError> {
        if !self.refs_via_git() {
            match self.repo().try_find_reference(refname) {
                Ok(Some(_)) => return Ok(true),
                Ok(None) => return Ok(false),
                Err(_) => {}
            }
        }
        Ok(ref_target(&self.git_dir_path(), refname)?.is_some())
    }

    /// Every signed checkpoint of this ledger, oldest first.
    pub(crate) fn signed_checkpoints(&self) -> Result<Vec<StoredSignature>, StoreError> {
        let refname = self.signatures_ref();
        if !self.has_ref(&refname)? {
            return Ok(Vec::new());
        }
        let gd = self.git_dir_path().to_string_lossy().to_string();
        let Ok(list) = ref_history(&gd, &refname) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        // Checkpoint notes (src/store/note.rs) share this ref; they are read there.
        for commit in list.lines().filter_map(|l| {
            let (c, subject) = l.split_once(' ').unwrap_or((l, ""));
            (!c.is_empty() && !subject.starts_with(super::note::NOTE_SUBJECT_PREFIX)).then_some(c)
        }) {
            let text = git_ok(
                Path::new("."),
                &[
                    "--git-dir",
                    &gd,
                    "cat-file",
                    "blob",
                    &format!("{commit}:checkpoint"),
                ],
                None,
            )?;
            let signature = git_ok(
                Path::new("."),
                &[
                    "--git-dir",
                    &gd,
                    "cat-file",
                    "blob",
                    &format!("{commit}:signature"),
                ],
                None,
            )?;
            let (ledger, checkpoint) =
                parse_signed_text(&format!("{text}\n")).ok_or_else(|| {
                    StoreError::Corrupt(format!(
                        "{refname}: commit {commit} does not hold a checkpoint"
                    ))
                })?;
            let format = if signature.contains("SSH SIGNATURE") {
                "ssh"
            } else {
                "openpgp"
            };
            out.push(StoredSignature {
                ledger,
                checkpoint,
                signature: CheckpointSignature {
                    format: format.into(),
                    signature: format!("{signature}\n"),
                },
            });
        }
        Ok(out)
    }

    /// [`Self::signed_checkpoints`] followed by the checkpoint notes (src/store/note.rs), each as
    /// a signature of format `note` over Forum's root its `forum-root` line carries, so verify
    /// holds notes to the same truncation and rewrite checks.
    pub(crate) fn signed_checkpoints_and_notes(&self) -> Result<Vec<StoredSignature>, StoreError> {
        let mut out = self.signed_checkpoints()?;
        for n in self.stored_notes()? {
            let text = n.split_once("\n\n").map(|(t, _)| format!("{t}\n"));
            let Some(cp) = text.and_then(|t| super::note::parse_checkpoint(&t).ok()) else {
                return Err(StoreError::Corrupt(format!(
                    "{}: a stored note is not a checkpoint",
                    self.signatures_ref()
                )));
            };
            let Some(root) = cp.forum_root else { continue };
            out.push(StoredSignature {
                ledger: self.signature_ledger().to_string(),
                checkpoint: Checkpoint {
                    size: cp.size,
                    root,
                },
                signature: CheckpointSignature {
                    format: "note".into(),
                    signature: n,
                },
            });
        }
        Ok(out)
    }

    /// Checks a signature in this repository's trust setup (notes: `forum.noteVerifiers`).
    pub(crate) fn check_signature(&self, s: &StoredSignature) -> SignatureCheck {
        if s.signature.format == "note" {
            let keys = self.note_verifier_keys();
            if keys.is_empty() {
                return SignatureCheck::Unchecked("no forum.noteVerifiers configured".into());
            }
            return match super::note::verifiers(&keys)
                .and_then(|v| super::note::open(&s.signature.signature, &v))
            {
                Ok(n) => SignatureCheck::Good(format!("note key {}", n.signers.join(", "))),
                Err(why) => SignatureCheck::Bad(format!("checkpoint note: {why}")),
            };
        }
        let dir = self
            .repo()
            .workdir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.git_dir_path());
        check(
            &dir,
            &signed_text(&s.ledger, &s.checkpoint),
            &s.signature,
            None,
        )
    }
}

/// Reads back the text [`signed_text`] writes.
pub(crate) fn parse_signed_text(text: &str) -> Option<(String, Checkpoint)> {
    let mut lines = text.lines();
    if lines.next()? != "git-forum checkpoint v1" {
        return None;
    }
    let ledger = lines.next()?.strip_prefix("ledger ")?.to_string();
    let size = lines.next()?.strip_prefix("size ")?.parse().ok()?;
    let root = lines.next()?.strip_prefix("root ")?.to_string();
    let cp = Checkpoint { size, root };
    (signed_text(&ledger, &cp) == text).then_some((ledger, cp))
}
