//! The trailing checksum of a pack or pack index that git forum writes.
//!
//! Object ids are computed by gix with SHA-1 collision detection (sha1dc), which an id needs:
//! it names content that may come from anyone. A pack's trailing checksum only guards the
//! file's bytes against damage; git itself computes it with its fast, non-detecting SHA-1
//! since 2.47. So does git forum: plain SHA-1 (the `sha1` crate, which uses the CPU's SHA
//! instructions where it has them) or SHA-256 in a SHA-256 repository. On a 100,000-entry
//! import the detecting hasher spent about 6.5 % of the CPU on this checksum alone.

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use sha1::Digest as _;

/// A running checksum in the repository's hash.
pub(crate) enum Checksum {
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl Checksum {
    pub(crate) fn new(hash: HashKind) -> Checksum {
        match hash {
            HashKind::Sha256 => Checksum::Sha256(sha2::Sha256::new()),
            _ => Checksum::Sha1(sha1::Sha1::new()),
        }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        match self {
            Checksum::Sha1(h) => h.update(bytes),
            Checksum::Sha256(h) => h.update(bytes),
        }
    }

    pub(crate) fn finish(self) -> ObjectId {
        match self {
            Checksum::Sha1(h) => ObjectId::from_bytes_or_panic(h.finalize().as_slice()),
            Checksum::Sha256(h) => ObjectId::from_bytes_or_panic(h.finalize().as_slice()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_the_plain_hash_of_the_bytes_in_either_kind() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for hash in [HashKind::Sha1, HashKind::Sha256] {
            let mut c = Checksum::new(hash);
            // Fed in uneven pieces, as the pack writer does.
            for piece in data.chunks(7_919) {
                c.update(piece);
            }
            let mut want = gix::hash::hasher(hash);
            want.update(&data);
            assert_eq!(c.finish(), want.try_finalize().unwrap(), "{hash:?}");
        }
        // Known answers: the empty input.
        assert_eq!(
            Checksum::new(HashKind::Sha1).finish().to_string(),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
        assert_eq!(
            Checksum::new(HashKind::Sha256).finish().to_string(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
