//! The ref that keeps an imported Forum ledger's rows in Forum's key order, so that `export`
//! writes `payloads.jsonl` back byte for byte (see `forum_dir::order` for why and what).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::error::StoreError;
use super::forum_dir::order::{KeptRows, ROWS_FILE, row_line, rows_ref};
use super::handle::GitStore;
use super::side_refs::git_ok;
use crate::ledger::canonical::{self, Value};

enum Source<'a> {
    File(&'a Path),
    Bytes(&'a [u8]),
}

/// Writes the rows blob and points the rows ref at a parentless commit of it (replacing what
/// was there, so a dropped row is not kept reachable by the ref's history).
fn store_rows(gd: &Path, ledger: &str, rows: Source<'_>) -> Result<(), StoreError> {
    let gd_s = gd.to_string_lossy().to_string();
    let git = |args: &[&str], input: Option<&[u8]>| {
        let mut all = vec!["--git-dir", gd_s.as_str()];
        all.extend_from_slice(args);
        git_ok(Path::new("."), &all, input)
    };
    let blob = match rows {
        Source::File(p) => git(&["hash-object", "-w", "--", &p.to_string_lossy()], None)?,
        Source::Bytes(b) => git(&["hash-object", "-w", "--stdin"], Some(b))?,
    };
    let tree = git(
        &["mktree"],
        Some(format!("100644 blob {blob}\t{ROWS_FILE}\n").as_bytes()),
    )?;
    let commit = git(
        &[
            "-c",
            "user.name=git-forum",
            "-c",
            "user.email=ledger@git-forum.invalid",
            "commit-tree",
            &tree,
        ],
        Some(b"forum: Forum's rows of an imported ledger, in Forum's key order"),
    )?;
    git(&["update-ref", &rows_ref(ledger), &commit], None)?;
    Ok(())
}

/// The kept rows text of `ledger`, `None` when it has none.
fn kept_text(gd: &Path, ledger: &str) -> Result<Option<String>, StoreError> {
    if super::side_refs::ref_target(gd, &rows_ref(ledger))?.is_none() {
        return Ok(None);
    }
    let gd_s = gd.to_string_lossy().to_string();
    let spec = format!("{}:{ROWS_FILE}", rows_ref(ledger));
    let mut cmd = crate::gitproc::in_dir(Path::new("."));
    cmd.args(["--git-dir", &gd_s, "cat-file", "blob", &spec]);
    // As large as the rows an import kept (each bounded by the import's own limits).
    let out = crate::gitproc::output(cmd, None, 1 << 40)?;
    if !out.status.success() {
        return Err(StoreError::Git(format!(
            "cannot read {spec}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    String::from_utf8(out.stdout)
        .map(Some)
        .map_err(|_| StoreError::Corrupt(format!("{spec} is not UTF-8")))
}

impl GitStore {
    fn rows_git_dir(&self) -> PathBuf {
        self.repo.git_dir().to_path_buf()
    }

    /// Keeps Forum's rows of this ledger's import (see `forum_dir::order`).
    pub(crate) fn keep_forum_rows(&self, rows: KeptRows) -> Result<(), StoreError> {
        let gd = self.rows_git_dir();
        rows.finish(|path| store_rows(&gd, &self.name, Source::File(path)))
    }

    /// The bodies kept in Forum's key order by this ledger's import, by payload hash (empty
    /// when it kept none). A row that does not parse is skipped: export then writes that body
    /// from the ledger, in sorted order.
    pub fn kept_forum_bodies(&self) -> Result<HashMap<String, Value>, StoreError> {
        let Some(text) = kept_text(&self.rows_git_dir(), &self.name)? else {
            return Ok(HashMap::new());
        };
        let mut out = HashMap::new();
        for line in text.lines() {
            if let Ok(Value::Object(mut members)) = canonical::parse(line)
                && members.len() == 2
                && let (_, Value::Str(hash)) = &members[0]
            {
                let hash = hash.clone();
                let (_, body) = members.swap_remove(1);
                out.entry(hash).or_insert(body);
            }
        }
        Ok(out)
    }

    /// Drops the kept row of `payload_hash` (a redacted body), rewriting the rows ref without
    /// history so the body's text is no longer reachable from it.
    pub(crate) fn forget_forum_row(&self, payload_hash: &str) -> Result<(), StoreError> {
        let gd = self.rows_git_dir();
        let Some(text) = kept_text(&gd, &self.name)? else {
            return Ok(());
        };
        let prefix = row_line(payload_hash, "");
        let prefix = &prefix[..prefix.len() - 1];
        let kept: String = text
            .lines()
            .filter(|l| !l.starts_with(prefix))
            .map(|l| format!("{l}\n"))
            .collect();
        if kept.len() == text.len() {
            return Ok(());
        }
        if kept.is_empty() {
            let gd_s = gd.to_string_lossy().to_string();
            git_ok(
                Path::new("."),
                &[
                    "--git-dir",
                    &gd_s,
                    "update-ref",
                    "-d",
                    &rows_ref(&self.name),
                ],
                None,
            )?;
            return Ok(());
        }
        store_rows(&gd, &self.name, Source::Bytes(kept.as_bytes()))
    }
}
