//! The standard tree's operations as every transport asks them: a C2SP proof as an answer, a
//! signed note as an answer, and one file of the tlog-tiles layout of the latest signed note
//! (what `tiles export` writes whole), so the daemon can serve the layout to tlog clients.
//!
//! A file is read from the ledger at the latest signed note, never from a stored copy: the note
//! is checked against the ledger first ([`super::tlog::note_for`]), hash tiles are read through
//! tiles authenticated against the tiled root, and data tiles from the entries themselves.

use serde::Serialize;
use tlog_tiles::Tile;

use super::tlog::{self as st, NoteSigned, TlogAsk};
use super::{Error, Result};
use crate::store::git::GitStore;
use crate::store::tiles::HEIGHT;

/// The content type of a tile.
pub(crate) const TILE_TYPE: &str = "application/octet-stream";
/// The content type of the checkpoint (a signed note is UTF-8 text).
pub(crate) const NOTE_TYPE: &str = "text/plain; charset=utf-8";

/// A file of the tlog-tiles layout, by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LayoutPath {
    /// `checkpoint`: the signed note.
    Checkpoint,
    /// `tile/L/N[.p/W]` or (a data tile) `tile/entries/N[.p/W]`.
    Tile(Tile),
}

impl LayoutPath {
    /// Reads a C2SP layout path; anything else is refused in one line saying what is taken.
    pub(crate) fn parse(path: &str) -> Result<LayoutPath> {
        if path == "checkpoint" {
            return Ok(LayoutPath::Checkpoint);
        }
        let refuse = || {
            Error::usage(format!(
                "{path:?} is not a file of the tlog-tiles layout: give checkpoint, tile/L/N[.p/W] or tile/entries/N[.p/W] (N in groups of three digits, the leading ones x-prefixed: tile/0/x001/234)"
            ))
        };
        let rest = path
            .strip_prefix("tile/")
            .filter(|r| !r.starts_with("data/"))
            .ok_or_else(refuse)?;
        // The parser below panics on a level over 63 or a width of 0: those are refused first.
        let level = rest.split('/').next().unwrap_or("");
        let level_ok = level == "entries"
            || (level.len() <= 2
                && level.bytes().all(|b| b.is_ascii_digit())
                && level.parse::<u8>().is_ok_and(|l| l < 64));
        let width_ok = match rest.rsplit_once(".p/") {
            Some((_, w)) => !w.starts_with('0') && w.bytes().all(|b| b.is_ascii_digit()),
            None => true,
        };
        if !level_ok || !width_ok {
            return Err(refuse());
        }
        // C2SP's path is Go's without the height, and names data tiles `entries`.
        let go = match rest.strip_prefix("entries/") {
            Some(n) => format!("tile/{HEIGHT}/data/{n}"),
            None => format!("tile/{HEIGHT}/{rest}"),
        };
        let tile = Tile::from_path(&go).map_err(|_| refuse())?;
        if tile.width() == 0 {
            return Err(refuse());
        }
        Ok(LayoutPath::Tile(tile))
    }
}

/// One file of the layout and the note it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LayoutFile {
    /// The ledger.
    pub(crate) ledger: String,
    /// The file's path in the layout.
    pub(crate) path: String,
    /// The size of the signed note whose tree it belongs to.
    pub(crate) size: u64,
    /// How it is served over HTTP.
    pub(crate) content_type: &'static str,
    /// Its bytes, base64.
    pub(crate) base64: String,
    /// The note's text, for `checkpoint`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) text: Option<String>,
}

impl LayoutFile {
    /// The file's bytes.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(&self.base64)
            .unwrap_or_default()
    }
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The hashes a level of the tree of `size` entries holds whole.
fn level_width(size: u64, level: u8) -> u64 {
    size.checked_shr(u32::from(level) * u32::from(HEIGHT))
        .unwrap_or(0)
}

/// The file at `path` of the layout of the latest signed note of `store`'s ledger. A tile the
/// note's tree does not hold whole is not found.
pub(crate) fn read(store: &GitStore, ledger: &str, path: &str) -> Result<LayoutFile> {
    let at = LayoutPath::parse(path)?;
    let (note, cp, tiled) = st::note_for(store, None, ledger)?;
    let file = |content_type, bytes: &[u8], text| LayoutFile {
        ledger: ledger.to_string(),
        path: path.to_string(),
        size: cp.size,
        content_type,
        base64: b64(bytes),
        text,
    };
    let tile = match at {
        LayoutPath::Checkpoint => return Ok(file(NOTE_TYPE, note.as_bytes(), Some(note.clone()))),
        LayoutPath::Tile(t) => t,
    };
    let start = tile.level_index().checked_mul(1 << HEIGHT);
    let end = start.and_then(|s| s.checked_add(u64::from(tile.width())));
    if end.is_none_or(|e| e > level_width(cp.size, tile.level())) {
        return Err(Error::not_found(format!(
            "{path} is beyond the tree of ledger {ledger:?}'s latest signed note (size {})",
            cp.size
        )));
    }
    let (start, end) = (start.unwrap_or(0), end.unwrap_or(0));
    let bytes = if tile.is_data() {
        // Each entry as a big-endian u16 length and its bytes (its 32-byte hash), as exported.
        let mut bytes = Vec::with_capacity(tile.width() as usize * 34);
        for seq in start..end {
            let (e, _) = store
                .get_with_commit(seq)?
                .ok_or_else(|| Error::fail(format!("ledger {ledger:?} has no entry {seq}")))?;
            let h = crate::ledger::tlog::entry_hash_bytes(&e.entry_hash)
                .map_err(|e| Error::fail(e.to_string()))?;
            bytes.extend_from_slice(&32u16.to_be_bytes());
            bytes.extend_from_slice(&h);
        }
        bytes
    } else {
        st::from_tiles(store, tiled, |t| t.tile_data(store, &tile))?
    };
    Ok(file(TILE_TYPE, &bytes, None))
}

/// A C2SP proof as an answer: its text, and for an inclusion proof the entry and its hash (a
/// tlog-proof names only its index).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ProofAnswer {
    /// The ledger.
    pub(crate) ledger: String,
    /// `tlog-inclusion` or `tlog-consistency`.
    pub(crate) kind: &'static str,
    /// The proof's text, as `prove --tlog-proof` (or `--consistency-from M --tlog`) prints it.
    pub(crate) proof: String,
    /// The entry proved included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seq: Option<u64>,
    /// Its entry hash, which `verify-proof --entry-hash` takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) entry_hash: Option<String>,
}

/// Proves `ask` against the ledger's stored signed note of size `size` (the latest when `None`).
pub(crate) fn prove(
    store: &GitStore,
    ledger: &str,
    ask: TlogAsk,
    size: Option<u64>,
) -> Result<ProofAnswer> {
    let p = st::prove(store, ledger, size, ask, true)?;
    let (seq, entry_hash) = p.entry.map_or((None, None), |(s, h)| (Some(s), Some(h)));
    Ok(ProofAnswer {
        ledger: ledger.to_string(),
        kind: match ask {
            TlogAsk::Inclusion(_) => "tlog-inclusion",
            TlogAsk::Consistency(_) => "tlog-consistency",
        },
        proof: p.text,
        seq,
        entry_hash,
    })
}

/// A signed note as `checkpoint --note --json` prints it.
pub(crate) fn note_answer(ledger: &str, signed: &NoteSigned) -> serde_json::Value {
    serde_json::json!({"ledger": ledger, "size": signed.size,
        "root": signed.forum_root, "note": signed.note})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_paths_are_c2sps_and_nothing_else() {
        assert_eq!(
            LayoutPath::parse("checkpoint").unwrap(),
            LayoutPath::Checkpoint
        );
        let LayoutPath::Tile(t) = LayoutPath::parse("tile/0/x001/234.p/7").unwrap() else {
            panic!("a tile path read as the checkpoint");
        };
        assert_eq!(
            (t.level(), t.level_index(), t.width(), t.is_data()),
            (0, 1234, 7, false)
        );
        let LayoutPath::Tile(t) = LayoutPath::parse("tile/entries/000").unwrap() else {
            panic!("a data tile path read as the checkpoint");
        };
        assert!(t.is_data() && t.width() == 256);
        for bad in [
            "",
            "tile",
            "tile/0",
            "tile/0/1",
            "tile/0/001.p/0",
            "tile/0/001.p/256",
            "tile/8/0/000",
            "tile/data/000",
            "tile/entries/x000/001",
            "checkpoint/",
            "../checkpoint",
        ] {
            let e = LayoutPath::parse(bad).unwrap_err();
            assert!(
                e.message.contains("is not a file of the tlog-tiles layout"),
                "{bad}: {}",
                e.message
            );
        }
    }

    #[test]
    fn a_level_holds_the_hashes_of_its_whole_subtrees() {
        assert_eq!(level_width(300, 0), 300);
        assert_eq!(level_width(300, 1), 1);
        assert_eq!(level_width(255, 1), 0);
        assert_eq!(level_width(u64::MAX, 9), 0);
    }
}
