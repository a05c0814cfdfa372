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
    use std::fmt::Write as _;
    let mut out = String::with_capacity(200 + actor.len() + kind.len());
    let _ = write!(out, "{seq}{SEP}");
    push_python_fixed6(&mut out, ts);
    out.push(SEP);
    out.push_str(actor);
    out.push(SEP);
    out.push_str(kind);
    out.push(SEP);
    if let Some(p) = causal_parent {
        let _ = write!(out, "{p}");
    }
    out.push(SEP);
    out.push_str(payload_hash);
    out.push(SEP);
    out.push_str(prev_hash);
    out
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
