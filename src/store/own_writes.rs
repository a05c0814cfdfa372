//! The objects one handle wrote, kept in memory for reading back once its writing is done. A
//! run ends by reading its own entries again (its exit code and its closing checkpoint are
//! computed from the record, not from what the run remembers); each of those reads was a loose
//! object opened and inflated, about a sixth of git forum's own CPU in a short run. An object
//! id is the hash of the object's content, so the bytes kept under an id are the bytes the
//! file holds.
//!
//! Off unless asked for, and in two phases so that no check is ever answered from memory:
//! while a handle records, every read still goes to the object store (an append's checks that
//! its objects survived a concurrent `git prune` see the disk); only once the caller switches
//! to reading back (its appends are over) are reads answered from here first. `verify` never
//! switches, and a fresh handle (every other command) never records.

use std::collections::HashMap;
use std::sync::Mutex;

use gix::ObjectId;
use gix::objs::Kind;

use super::pack::Obj;

/// The most bytes of objects kept; past it, later objects are read from the store.
const MAX_BYTES: usize = 8 << 20;
/// The largest object kept.
const MAX_OBJECT: usize = 1 << 20;

/// Objects by id, and how many bytes they hold.
#[derive(Default)]
struct Kept {
    objects: HashMap<ObjectId, (Kind, Vec<u8>)>,
    bytes: usize,
}

#[derive(Default)]
enum Phase {
    #[default]
    Off,
    Recording(Kept),
    Reading(Kept),
}

/// A handle's own writes (see the module).
#[derive(Default)]
pub(crate) struct OwnWrites(Mutex<Phase>);

impl OwnWrites {
    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts keeping the objects written from now on.
    pub(crate) fn record(&self) {
        let mut p = self.phase();
        if matches!(*p, Phase::Off) {
            *p = Phase::Recording(Kept::default());
        }
    }

    /// Stops keeping objects and answers reads from those kept.
    pub(crate) fn read_back(&self) {
        let mut p = self.phase();
        if let Phase::Recording(kept) = std::mem::take(&mut *p) {
            *p = Phase::Reading(kept);
        }
    }

    /// Keeps `objs`, now in the object store, while recording.
    pub(crate) fn wrote(&self, objs: &[Obj]) {
        let mut p = self.phase();
        let Phase::Recording(kept) = &mut *p else {
            return;
        };
        for o in objs {
            if o.data.len() > MAX_OBJECT
                || kept.bytes + o.data.len() > MAX_BYTES
                || kept.objects.contains_key(&o.id)
            {
                continue;
            }
            kept.bytes += o.data.len();
            kept.objects.insert(o.id, (o.kind, o.data.clone()));
        }
    }

    /// Object `id` into `buf`, when reading back and it was kept.
    pub(crate) fn read(&self, id: &ObjectId, buf: &mut Vec<u8>) -> Option<Kind> {
        let p = self.phase();
        let Phase::Reading(kept) = &*p else {
            return None;
        };
        let (kind, data) = kept.objects.get(id)?;
        buf.clear();
        buf.extend_from_slice(data);
        Some(*kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::object;

    #[test]
    fn objects_are_answered_only_between_read_back_and_never_when_off_or_recording() {
        let hash = gix::hash::Kind::Sha1;
        let a = object(hash, Kind::Blob, b"a".to_vec()).unwrap();
        let b = object(hash, Kind::Blob, b"b".to_vec()).unwrap();
        let big = object(hash, Kind::Blob, vec![b'x'; MAX_OBJECT + 1]).unwrap();
        let own = OwnWrites::default();
        let mut buf = Vec::new();
        // Off: nothing is kept.
        own.wrote(std::slice::from_ref(&a));
        own.read_back();
        assert_eq!(own.read(&a.id, &mut buf), None);
        let own = OwnWrites::default();
        own.record();
        own.wrote(&[a.clone(), big.clone()]);
        // Recording: reads go to the store.
        assert_eq!(own.read(&a.id, &mut buf), None);
        own.read_back();
        // Written after the switch: not kept.
        own.wrote(std::slice::from_ref(&b));
        assert_eq!(own.read(&a.id, &mut buf), Some(Kind::Blob));
        assert_eq!(buf, b"a");
        assert_eq!(own.read(&b.id, &mut buf), None);
        assert_eq!(own.read(&big.id, &mut buf), None);
        // Recording again after reading back changes nothing.
        own.record();
        assert_eq!(own.read(&a.id, &mut buf), Some(Kind::Blob));
    }
}
