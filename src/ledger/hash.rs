//! Forum's hashes: payload hash, entry hash and GENESIS (forum-spec §1–2).

use sha2::{Digest, Sha256};

use super::canonical::{Value, push_python_fixed6};

/// The `prev_hash` of seq 0 and the checkpoint of an empty ledger: 64 ASCII zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The separator between entry-hash preimage parts (U+001F, unit separator).
pub(crate) const SEP: char = '\u{1f}';

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

/// Appends the lowercase hex of `bytes` to `out`.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // Written a chunk at a time as ASCII bytes, not a char at a time.
    let mut buf = [0u8; 128];
    for chunk in bytes.chunks(64) {
        for (pair, b) in buf.chunks_exact_mut(2).zip(chunk) {
            pair[0] = DIGITS[(b >> 4) as usize];
            pair[1] = DIGITS[(b & 15) as usize];
        }
        out.push_str(std::str::from_utf8(&buf[..chunk.len() * 2]).expect("hex digits are ASCII"));
    }
}

/// True when `s` is 64 lowercase hex digits, the shape of every hash in the ledger.
pub(crate) fn is_hash(s: &str) -> bool {
    // A fold without an early exit, which the compiler turns into a few vector compares
    // (verify checks three hashes per entry).
    s.len() == 64
        && s.bytes().fold(true, |ok, b| {
            ok & ((b.wrapping_sub(b'0') < 10) | (b.wrapping_sub(b'a') < 6))
        })
}

/// `payload_hash = sha256hex(canonical(payload))`.
pub fn payload_hash(payload: &Value) -> String {
    sha256_hex(payload.canonical().as_bytes())
}

/// The exact entry-hash preimage (forum-spec §2): seven parts joined by U+001F.
pub fn entry_preimage(
    seq: u64,
    ts: f64,
    actor: &str,
    kind: &str,
    causal_parent: Option<i64>,
    payload_hash: &str,
    prev_hash: &str,
) -> String {
    let mut out = String::with_capacity(200 + actor.len() + kind.len());
    push_entry_preimage(
        &mut out,
        seq,
        ts,
        actor,
        kind,
        causal_parent,
        payload_hash,
        prev_hash,
    );
    out
}

/// Appends the entry-hash preimage ([`entry_preimage`]) to `out`.
#[allow(clippy::too_many_arguments)]
fn push_entry_preimage(
    out: &mut String,
    seq: u64,
    ts: f64,
    actor: &str,
    kind: &str,
    causal_parent: Option<i64>,
    payload_hash: &str,
    prev_hash: &str,
) {
    out.push_str(itoa::Buffer::new().format(seq));
    out.push(SEP);
    push_python_fixed6(out, ts);
    out.push(SEP);
    out.push_str(actor);
    out.push(SEP);
    out.push_str(kind);
    out.push(SEP);
    if let Some(p) = causal_parent {
        out.push_str(itoa::Buffer::new().format(p));
    }
    out.push(SEP);
    out.push_str(payload_hash);
    out.push(SEP);
    out.push_str(prev_hash);
}

/// Whether `entry_hash` is the entry hash of these fields: [`entry_hash`] compared without
/// writing the digest out in hex (verify and import check one per entry). A text that is not
/// 64 lowercase hex digits never equals the computed hash, as the comparison of texts says.
#[allow(clippy::too_many_arguments)]
pub(crate) fn entry_hash_matches(
    seq: u64,
    ts: f64,
    actor: &str,
    kind: &str,
    causal_parent: Option<i64>,
    payload_hash: &str,
    prev_hash: &str,
    entry_hash: &str,
    scratch: &mut String,
) -> bool {
    if !is_hash(entry_hash) {
        return false;
    }
    scratch.clear();
    push_entry_preimage(
        scratch,
        seq,
        ts,
        actor,
        kind,
        causal_parent,
        payload_hash,
        prev_hash,
    );
    let digest = Sha256::digest(scratch.as_bytes());
    let want = entry_hash.as_bytes();
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    digest.iter().zip(want.chunks_exact(2)).all(|(b, pair)| {
        pair[0] == DIGITS[(b >> 4) as usize] && pair[1] == DIGITS[(b & 15) as usize]
    })
}

/// `entry_hash = sha256hex(utf8(preimage))`.
pub fn entry_hash(
    seq: u64,
    ts: f64,
    actor: &str,
    kind: &str,
    causal_parent: Option<i64>,
    payload_hash: &str,
    prev_hash: &str,
) -> String {
    sha256_hex(
        entry_preimage(seq, ts, actor, kind, causal_parent, payload_hash, prev_hash).as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The comparison without hex agrees with comparing [`entry_hash`]'s text, for the hash
    /// itself, a hash one digit off, the same in capitals, and texts that are not hashes.
    #[test]
    fn entry_hash_matches_agrees_with_comparing_the_hex() {
        for (seq, ts, parent) in [
            (0u64, 1001.0, None),
            (7, 1.5e9, Some(6i64)),
            (123_456, 0.25, Some(-1)),
        ] {
            // The scratch buffer is cleared before use: what it held does not count.
            let mut scratch = String::from("left over from the last entry");
            let args = (seq, ts, "bench", "note", parent, GENESIS, GENESIS);
            let good = entry_hash(args.0, args.1, args.2, args.3, args.4, args.5, args.6);
            let mut off = good.clone().into_bytes();
            off[63] = if off[63] == b'0' { b'1' } else { b'0' };
            let off = String::from_utf8(off).unwrap();
            for candidate in [
                good.clone(),
                off,
                good.to_uppercase(),
                String::new(),
                "zz".repeat(32),
            ] {
                assert_eq!(
                    entry_hash_matches(
                        args.0,
                        args.1,
                        args.2,
                        args.3,
                        args.4,
                        args.5,
                        args.6,
                        &candidate,
                        &mut scratch,
                    ),
                    candidate == good,
                    "{candidate:?}"
                );
            }
        }
    }
}
