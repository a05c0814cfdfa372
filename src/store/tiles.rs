//! The standard tree as C2SP tlog-tiles (height 8) kept in git: one commit on
//! `refs/forum/tiles/NAME` whose tree is the static layout (`tile/L/N[.p/W]` hash tiles and
//! `tile/entries/N[.p/W]` data tiles holding each entry hash), and `tiles export DIR` writing the
//! same layout plus `checkpoint` (the signed note) for any static web host.
//!
//! Tiles are a published copy, never a source of truth: each time they are written they are
//! re-derived from the ledger's entries, and a ref whose tree differs from the re-derived one
//! (missing, stale or tampered) is replaced. `verify` never reads them.

use std::path::Path;

use tlog_tiles::Tile;

use super::git::{GitStore, StoreError};
use crate::ledger::tlog::{Hash, HashReader, Tree};

/// The tile height C2SP tlog-tiles fixes.
pub const HEIGHT: u8 = 8;

/// Where a ledger's tiles live.
pub fn tiles_ref(ledger: &str) -> String {
    format!("refs/forum/tiles/{ledger}")
}

struct Stored<'a>(&'a [Hash]);

impl HashReader for Stored<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        indexes
            .iter()
            .map(|&i| {
                self.0
                    .get(i as usize)
                    .copied()
                    .ok_or(tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }
}

/// A tile's C2SP path: Go's path without its height component.
fn c2sp_path(t: &Tile) -> String {
    let p = t.path();
    p.strip_prefix(&format!("tile/{HEIGHT}/"))
        .map(|rest| format!("tile/{rest}"))
        .unwrap_or(p)
}

/// Every tile file of the tree of the first `size` entries of `tree`, with `entry_hashes` (raw)
/// for the data tiles: `(path, bytes)`, paths in the C2SP layout. Pure.
pub fn tile_files(
    tree: &Tree,
    size: u64,
    entry_hashes: &[[u8; 32]],
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let reader = Stored(tree.stored_hashes());
    for t in Tile::new_tiles(HEIGHT, 0, size) {
        let data = t
            .read_data(&reader)
            .map_err(|e| format!("reading tile {}: {e:?}", t.path()))?;
        out.push((c2sp_path(&t), data));
        if t.level() == 0 {
            // The data tile beside each level-0 tile: each entry as a big-endian u16 length and
            // its bytes (the entry's 32-byte hash, the leaf's input).
            let start = t.level_index() << HEIGHT;
            let mut bytes = Vec::with_capacity(t.width() as usize * 34);
            for i in start..start + u64::from(t.width()) {
                let h = entry_hashes
                    .get(i as usize)
                    .ok_or_else(|| format!("no entry {i}"))?;
                bytes.extend_from_slice(&32u16.to_be_bytes());
                bytes.extend_from_slice(h);
            }
            let mut d = t;
            d.set_is_data();
            out.push((
                c2sp_path(&d).replacen("tile/data/", "tile/entries/", 1),
                bytes,
            ));
        }
    }
    Ok(out)
}

/// Writes `files` (and `extra`) under `dir`, creating directories.
pub fn write_layout(dir: &Path, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    for (p, bytes) in files {
        let path = dir.join(p);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
    }
    Ok(())
}

fn git(gd: &str, args: &[&str], env: &[(&str, &Path)]) -> Result<String, StoreError> {
    let mut c = std::process::Command::new("git");
    c.args(["--git-dir", gd]).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c
        .output()
        .map_err(|e| StoreError::Git(format!("cannot run git: {e}")))?;
    if !o.status.success() {
        return Err(StoreError::Git(format!(
            "git {} failed: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or("")
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

impl GitStore {
    /// Writes the tiles of the first `size` entries to `refs/forum/tiles/NAME`, re-derived from
    /// `tree`; leaves the ref alone when it already holds exactly them. Returns the tiles.
    pub fn update_tiles(
        &self,
        tree: &Tree,
        size: u64,
        entry_hashes: &[[u8; 32]],
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let files = tile_files(tree, size, entry_hashes).map_err(StoreError::Corrupt)?;
        let gd = self.repo().git_dir().to_string_lossy().to_string();
        let tmp = tempfile::tempdir()
            .map_err(|e| StoreError::Git(format!("no temporary directory: {e}")))?;
        let work = tmp.path().join("work");
        write_layout(&work, &files)
            .map_err(|e| StoreError::Git(format!("writing tiles to a temporary directory: {e}")))?;
        let index = tmp.path().join("index");
        let env = [("GIT_INDEX_FILE", index.as_path())];
        // Blobs written byte for byte (no filters, no ignore rules), then one index of them.
        let paths: String = files
            .iter()
            .map(|(p, _)| format!("{}\n", work.join(p).display()))
            .collect();
        let ids = super::sign::git_ok(
            Path::new("."),
            &[
                "--git-dir",
                &gd,
                "hash-object",
                "-w",
                "--no-filters",
                "--stdin-paths",
            ],
            Some(paths.as_bytes()),
        )?;
        let info: String = ids
            .lines()
            .zip(&files)
            .map(|(id, (p, _))| format!("100644 blob {id}\t{p}\n"))
            .collect();
        let mut c = std::process::Command::new("git");
        c.args(["--git-dir", &gd, "update-index", "--add", "--index-info"])
            .env("GIT_INDEX_FILE", &index);
        let o = {
            use std::io::Write;
            let mut child = c
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| StoreError::Git(format!("cannot run git update-index: {e}")))?;
            child
                .stdin
                .take()
                .expect("piped")
                .write_all(info.as_bytes())
                .map_err(|e| StoreError::Git(format!("git update-index: {e}")))?;
            child
                .wait_with_output()
                .map_err(|e| StoreError::Git(format!("git update-index: {e}")))?
        };
        if !o.status.success() {
            return Err(StoreError::Git(format!(
                "git update-index failed: {}",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .next()
                    .unwrap_or("")
            )));
        }
        let tree_id = git(&gd, &["write-tree"], &env)?;
        let refname = tiles_ref(self.signature_ledger());
        let old = super::sign::ref_target(self.repo().git_dir(), &refname)?;
        if let Some(old) = &old
            && git(&gd, &["rev-parse", &format!("{old}^{{tree}}")], &[]).ok()
                == Some(tree_id.clone())
        {
            return Ok(files);
        }
        let root = tree
            .root(size)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let msg = format!(
            "tiles {size} {}",
            root.0
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        // Each tiles commit stands alone: tiles are re-derived, so no history is kept.
        let commit = git(
            &gd,
            &[
                "-c",
                "user.name=git-forum",
                "-c",
                "user.email=ledger@git-forum.invalid",
                "commit-tree",
                &tree_id,
                "-m",
                &msg,
            ],
            &[],
        )?;
        git(
            &gd,
            &["update-ref", "-m", "forum: tiles", &refname, &commit],
            &[],
        )?;
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_of_a_tree_hold_its_hashes_in_the_c2sp_layout() {
        let hashes: Vec<String> = (0..300u32).map(|i| format!("{i:064x}")).collect();
        let raw: Vec<[u8; 32]> = hashes
            .iter()
            .map(|h| crate::ledger::tlog::entry_hash_bytes(h).unwrap())
            .collect();
        let tree = Tree::from_entry_hashes(hashes.iter().map(String::as_str)).unwrap();
        let files = tile_files(&tree, 300, &raw).unwrap();
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "tile/0/000",
                "tile/entries/000",
                "tile/0/001.p/44",
                "tile/entries/001.p/44",
                "tile/1/000.p/1"
            ]
        );
        assert_eq!(files[0].1.len(), 256 * 32);
        assert_eq!(&files[0].1[..32], &tree.stored_hashes()[0].0);
        assert_eq!(files[1].1.len(), 256 * 34);
        assert_eq!(&files[1].1[2..34], &raw[0]);
        // The one level-1 hash is the root of the first 256 entries.
        assert_eq!(files[4].1, tree.root(256).unwrap().0.to_vec());
    }
}
