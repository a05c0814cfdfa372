//! The idempotency keys of one ledger, as a file of JSON lines (see the parent module).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::ledger::Entry;

/// One line of the key file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(super) key: String,
    pub(super) actor: String,
    pub(super) kind: String,
    pub(super) causal_parent: Option<i64>,
    pub(super) payload_hash: String,
    /// The ledger's length when the append began: its entry is at this seq or later.
    pub(super) from: u64,
    /// The seq written, once known.
    pub(super) seq: Option<u64>,
}

impl Record {
    pub(super) fn same_entry(&self, other: &Record) -> bool {
        self.actor == other.actor
            && self.kind == other.kind
            && self.causal_parent == other.causal_parent
            && self.payload_hash == other.payload_hash
    }

    pub(super) fn matches(&self, e: &Entry) -> bool {
        e.actor == self.actor
            && e.kind == self.kind
            && e.causal_parent == self.causal_parent
            && e.payload_hash == self.payload_hash
    }
}

/// The keys of one ledger: the file, and what has been read of it.
pub(crate) struct Keys {
    pub(super) path: PathBuf,
    pub(super) read: u64,
    pub(super) map: HashMap<String, Record>,
}

impl Keys {
    pub(super) fn open(path: PathBuf) -> Keys {
        Keys {
            path,
            read: 0,
            map: HashMap::new(),
        }
    }

    /// Reads the lines added since the last read (by this server or another process).
    pub(super) fn refresh(&mut self) -> std::io::Result<()> {
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let len = f.metadata()?.len();
        if len < self.read {
            self.map.clear();
            self.read = 0;
        }
        f.seek(SeekFrom::Start(self.read))?;
        let mut buf = Vec::new();
        f.take(len - self.read).read_to_end(&mut buf)?;
        // Only whole lines: a line being written is read next time.
        let whole = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for line in buf[..whole].split(|&b| b == b'\n') {
            if let Ok(r) = serde_json::from_slice::<Record>(line) {
                self.map.insert(r.key.clone(), r);
            }
        }
        self.read += whole as u64;
        Ok(())
    }

    pub(super) fn write(&mut self, r: &Record, fsync: bool) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut line = serde_json::to_vec(r).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        f.write_all(&line)?;
        if fsync {
            f.sync_data()?;
        }
        self.refresh()
    }
}
