//! C2SP tlog-cosignature/v1: the Ed25519 cosignature a witness adds to a checkpoint note.
//!
//! Each rule below was checked against the text of the spec, `tlog-cosignature.md` in the
//! C2SP/C2SP repository (section "Format" and "Ed25519 signed message"):
//!
//! * the signature line is the ordinary signed-note line, `— <name> base64(key ID || signature)`;
//! * the key ID is `SHA-256(<name> || "\n" || 0x04 || 32-byte Ed25519 public key)[:4]`, which
//!   is the signed-note key ID of the encoded key `0x04 || public key`, so
//!   [`signed_note::key_id`] computes it;
//! * the signature is a `timestamped_signature`: the timestamp as a big-endian `u64` (POSIX
//!   seconds, at most 2^63 - 1), then the 64-byte Ed25519 signature;
//! * the signed message is `cosignature/v1\n`, then `time <decimal, no leading zeroes>\n`,
//!   then the whole note body with its final newline and without any signature line;
//! * a cosigner's public key may be written as a vkey of signature type 0x04:
//!   `<name>+<hex key ID>+base64(0x04 || public key)`.
//!
//! The spec's example line (`witness.example.com/w1 jWbPPwAAAABkGFDL...`) decodes to a key ID,
//! then `00 00 00 00 64 18 50 cb` = 1679315147, the time of its example message; the unit tests
//! check that layout. Go's `golang.org/x/mod/sumdb/note` as installed (Debian's
//! golang-golang-x-mod-dev) knows only signature type 0x01 and has no cosignature verifier, so
//! the independent check (tests/integration/data/cosigcheck) is a type-0x04 `note.Verifier`
//! written from the spec on Go's standard library, plugged into x/mod's `note.Open`.
//!
//! The witness keeps its private key in Go's note format (`PRIVATE+KEY+name+hash+base64`,
//! type 0x01, as `git forum keygen` writes); the same Ed25519 key signs cosignatures under the
//! type-0x04 key ID. Everything here is pure: the caller passes the time.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signer as _, SigningKey, Verifier as _, VerifyingKey};
use signed_note::{Note, Signature};

/// The signature type byte of an Ed25519 cosignature/v1 key.
pub(crate) const COSIGNATURE_TYPE: u8 = 0x04;
/// The signature type byte of an ordinary Ed25519 note key.
const NOTE_TYPE: u8 = 0x01;
/// The header line of the signed message.
pub(crate) const HEADER: &str = "cosignature/v1";
/// The largest timestamp the spec allows (2^63 - 1).
pub(crate) const MAX_TIME: u64 = (1 << 63) - 1;

/// The message a cosignature signs: header line, time line, then the note body.
pub(crate) fn message(body: &str, time: u64) -> String {
    format!("{HEADER}\ntime {time}\n{body}")
}

/// The key ID of a cosigner: `SHA-256(name || "\n" || 0x04 || public key)[:4]`.
pub(crate) fn key_id(name: &str, public: &[u8; 32]) -> u32 {
    let mut k = vec![COSIGNATURE_TYPE];
    k.extend_from_slice(public);
    signed_note::key_id(name, &k)
}

/// A cosigner's verifier key: `name+hex key ID+base64(0x04 || public key)`.
pub(crate) fn vkey(name: &str, public: &[u8; 32]) -> String {
    let mut k = vec![COSIGNATURE_TYPE];
    k.extend_from_slice(public);
    format!("{name}+{:08x}+{}", key_id(name, public), B64.encode(k))
}

/// Why a cosignature key could not be read, a note not cosigned, or a cosignature not checked.
#[derive(Debug, thiserror::Error)]
pub enum CosignError {
    #[error("the witness key is not a signed-note signer key: {0}")]
    WitnessKey(#[source] signed_note::SignerError),
    #[error("the witness key's base64 does not decode")]
    WitnessKeyBase64,
    #[error("the witness key is not an Ed25519 seed")]
    WitnessKeySeed,
    #[error("the witness key is not an Ed25519 note key")]
    WitnessKeyType,
    #[error("cosignature time {0} exceeds 2^63 - 1")]
    TimeTooLarge(u64),
    #[error("malformed note: {0}")]
    MalformedNote(#[source] signed_note::NoteError),
    #[error("the note is not UTF-8")]
    NotUtf8,
    #[error("not a signed note (text, empty line, signatures)")]
    NotSignedNote,
    #[error("{0:?} is not a cosignature verifier key (name+hash+base64 of type 0x04)")]
    NotCosignKey(String),
    #[error(
        "{0:?} is a note verifier key (type 0x01), not a cosignature key (type 0x04): use the witness's cosignature key (`git forum keygen NAME --witness`)"
    )]
    NoteKeyNotCosignKey(String),
    #[error("{0:?}: the key ID does not match the name and key")]
    KeyIdMismatch(String),
    #[error("signature line {line:?} is malformed: {source}")]
    MalformedLine {
        line: String,
        #[source]
        source: signed_note::NoteError,
    },
    #[error("signature line {0:?} is not canonical base64")]
    NonCanonicalLine(String),
    /// A line of a trusted witness whose signature does not verify (the witness's name).
    #[error("the cosignature of {0} does not verify over this checkpoint")]
    DoesNotVerify(String),
    #[error("{key:?} is not a signed-note verifier key: {source}")]
    NoteVerifierKey {
        key: String,
        #[source]
        source: signed_note::VerifierError,
    },
    #[error("{0:?}: bad base64")]
    NoteVerifierBase64(String),
    #[error("{0:?} is not an Ed25519 key")]
    NotEd25519(String),
}

/// The message as text, for the callers whose errors are still text.
impl From<CosignError> for String {
    fn from(e: CosignError) -> String {
        e.to_string()
    }
}

/// A witness's signing key, read from a note signer key.
pub(crate) struct Cosigner {
    name: String,
    key: SigningKey,
}

impl Cosigner {
    /// Reads a signer key in Go's note format (`PRIVATE+KEY+name+hash+base64(0x01 || seed)`).
    pub(crate) fn from_note_key(text: &str) -> Result<Cosigner, CosignError> {
        let text = text.trim();
        signed_note::StandardSigner::new(text).map_err(CosignError::WitnessKey)?;
        let mut parts = text.splitn(5, '+');
        let (_, _, name, _, b64) = (
            parts.next(),
            parts.next(),
            parts.next().unwrap_or(""),
            parts.next(),
            parts.next().unwrap_or(""),
        );
        let raw = B64.decode(b64).map_err(|_| CosignError::WitnessKeyBase64)?;
        let seed: [u8; 32] = match raw.split_first() {
            Some((&NOTE_TYPE, seed)) => seed.try_into().map_err(|_| CosignError::WitnessKeySeed)?,
            _ => return Err(CosignError::WitnessKeyType),
        };
        Ok(Cosigner {
            name: name.to_string(),
            key: SigningKey::from_bytes(&seed),
        })
    }

    pub(crate) fn public(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    /// This cosigner's verifier key (type 0x04).
    pub(crate) fn vkey(&self) -> String {
        vkey(&self.name, &self.public())
    }

    /// The `timestamped_signature` bytes over `body` at `time`.
    pub(crate) fn sign(&self, body: &str, time: u64) -> Result<[u8; 72], CosignError> {
        if time > MAX_TIME {
            return Err(CosignError::TimeTooLarge(time));
        }
        let sig = self.key.sign(message(body, time).as_bytes());
        let mut out = [0u8; 72];
        out[..8].copy_from_slice(&time.to_be_bytes());
        out[8..].copy_from_slice(&sig.to_bytes());
        Ok(out)
    }

    /// The whole signature line over `body` at `time`, with its newline.
    pub(crate) fn line(&self, body: &str, time: u64) -> Result<String, CosignError> {
        let mut payload = key_id(&self.name, &self.public()).to_be_bytes().to_vec();
        payload.extend_from_slice(&self.sign(body, time)?);
        Ok(format!("\u{2014} {} {}\n", self.name, B64.encode(payload)))
    }

    /// `note` with this cosigner's line added (an older line of the same key is replaced), the
    /// other signatures kept in order.
    pub(crate) fn cosign(&self, note: &str, time: u64) -> Result<String, CosignError> {
        let n = Note::from_bytes(note.as_bytes()).map_err(CosignError::MalformedNote)?;
        let body = std::str::from_utf8(n.text()).map_err(|_| CosignError::NotUtf8)?;
        let line = self.line(body, time)?;
        let id = key_id(&self.name, &self.public());
        let (text, sigs) = note.split_once("\n\n").ok_or(CosignError::NotSignedNote)?;
        let mut out = format!("{text}\n\n");
        for l in sigs.lines() {
            let same = Signature::from_bytes(l.as_bytes())
                .map(|s| s.name() == self.name && s.id() == id)
                .unwrap_or(false);
            if !same {
                out.push_str(l);
                out.push('\n');
            }
        }
        out.push_str(&line);
        Ok(out)
    }
}

/// A trusted cosigner's verifier key.
#[derive(Debug, Clone)]
pub struct CosignVerifier {
    name: String,
    id: u32,
    key: VerifyingKey,
}

impl CosignVerifier {
    /// Parses `name+hex key ID+base64(0x04 || public key)`.
    pub fn new(text: &str) -> Result<CosignVerifier, CosignError> {
        let text = text.trim();
        let bad = || CosignError::NotCosignKey(text.to_string());
        let mut parts = text.splitn(3, '+');
        let (name, id16, b64) = match (parts.next(), parts.next(), parts.next()) {
            (Some(n), Some(i), Some(b)) => (n, i, b),
            _ => return Err(bad()),
        };
        if !signed_note::is_key_name_valid(name) || id16.len() != 8 {
            return Err(bad());
        }
        let id = u32::from_str_radix(id16, 16).map_err(|_| bad())?;
        let raw = crate::store::note::strict_b64(b64).ok_or_else(bad)?;
        let public: [u8; 32] = match raw.split_first() {
            Some((&COSIGNATURE_TYPE, k)) => k.try_into().map_err(|_| bad())?,
            Some((&NOTE_TYPE, _)) => {
                return Err(CosignError::NoteKeyNotCosignKey(text.to_string()));
            }
            _ => return Err(bad()),
        };
        if id != key_id(name, &public) {
            return Err(CosignError::KeyIdMismatch(text.to_string()));
        }
        let key = VerifyingKey::from_bytes(&public).map_err(|_| bad())?;
        Ok(CosignVerifier {
            name: name.to_string(),
            id,
            key,
        })
    }

    /// Checks `timestamped_signature` bytes over `body`; returns the timestamp.
    pub(crate) fn check(&self, body: &str, sig: &[u8]) -> Option<u64> {
        let (t, s) = (sig.get(..8)?, sig.get(8..)?);
        let time = u64::from_be_bytes(t.try_into().ok()?);
        let s: [u8; 64] = s.try_into().ok()?;
        if time > MAX_TIME {
            return None;
        }
        self.key
            .verify(
                message(body, time).as_bytes(),
                &ed25519_dalek::Signature::from_bytes(&s),
            )
            .ok()
            .map(|_| time)
    }
}

/// A cosignature that verified: the cosigner's name and its time.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Cosigned {
    pub witness: String,
    pub(crate) time: u64,
}

/// Checks the cosignature lines of `note` against `trusted`. Lines of other keys are ignored
/// (as the spec says clients do); a line whose name and key ID match a trusted key but whose
/// signature does not verify is an error. Returns the cosignatures that verified.
pub fn verify(note: &str, trusted: &[CosignVerifier]) -> Result<Vec<Cosigned>, CosignError> {
    let (text, sigs) = note.split_once("\n\n").ok_or(CosignError::NotSignedNote)?;
    let body = format!("{text}\n");
    let mut out: Vec<Cosigned> = Vec::new();
    for l in sigs.lines() {
        let s =
            Signature::from_bytes(l.as_bytes()).map_err(|source| CosignError::MalformedLine {
                line: l.to_string(),
                source,
            })?;
        let b64 = l.rsplit(' ').next().unwrap_or("");
        if crate::store::note::strict_b64(b64).is_none() {
            return Err(CosignError::NonCanonicalLine(l.to_string()));
        }
        let Some(v) = trusted
            .iter()
            .find(|v| v.name == s.name() && v.id == s.id())
        else {
            continue;
        };
        let time = v
            .check(&body, s.signature())
            .ok_or_else(|| CosignError::DoesNotVerify(v.name.clone()))?;
        if !out.iter().any(|c| c.witness == v.name) {
            out.push(Cosigned {
                witness: v.name.clone(),
                time,
            });
        }
    }
    Ok(out)
}

/// Parses several cosignature verifier keys.
pub fn verifiers(keys: &[String]) -> Result<Vec<CosignVerifier>, CosignError> {
    keys.iter().map(|k| CosignVerifier::new(k)).collect()
}

/// The type-0x04 verifier key of the same Ed25519 key as a note verifier key (type 0x01).
pub fn vkey_of_note_vkey(note_vkey: &str) -> Result<String, CosignError> {
    let text = note_vkey.trim();
    signed_note::StandardVerifier::new(text).map_err(|source| CosignError::NoteVerifierKey {
        key: text.to_string(),
        source,
    })?;
    let mut parts = text.splitn(3, '+');
    let name = parts.next().unwrap_or("");
    let raw = B64
        .decode(parts.nth(1).unwrap_or(""))
        .map_err(|_| CosignError::NoteVerifierBase64(text.to_string()))?;
    let public: [u8; 32] = raw
        .get(1..)
        .and_then(|k| k.try_into().ok())
        .ok_or_else(|| CosignError::NotEd25519(text.to_string()))?;
    Ok(vkey(name, &public))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed key: the Ed25519 seed 0x01 0x02 ... 0x20, named `witness.example/w1`.
    fn fixed() -> Cosigner {
        let seed: Vec<u8> = (1..=32).collect();
        let mut k = vec![NOTE_TYPE];
        k.extend_from_slice(&seed);
        let mut public = vec![NOTE_TYPE];
        public.extend_from_slice(
            &SigningKey::from_bytes(&seed.clone().try_into().unwrap())
                .verifying_key()
                .to_bytes(),
        );
        let name = "witness.example/w1";
        let id = signed_note::key_id(name, &public);
        let text = format!("PRIVATE+KEY+{name}+{id:08x}+{}", B64.encode(k));
        Cosigner::from_note_key(&text).unwrap()
    }

    const BODY: &str =
        "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
    const TIME: u64 = 1679315147;

    #[test]
    fn the_cosignature_bytes_are_the_ones_the_spec_lays_out() {
        let c = fixed();
        // The message, spelled out by hand from the spec's "Ed25519 signed message" section.
        let msg = "cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
        assert_eq!(message(BODY, TIME), msg);
        let line = c.line(BODY, TIME).unwrap();
        let b64 = line
            .strip_prefix("\u{2014} witness.example/w1 ")
            .and_then(|l| l.strip_suffix('\n'))
            .unwrap();
        let raw = B64.decode(b64).unwrap();
        assert_eq!(raw.len(), 4 + 8 + 64);
        // Key ID: SHA-256(name || 0x0A || 0x04 || public key)[:4], hashed here directly.
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(b"witness.example/w1");
        h.update([0x0a, 0x04]);
        h.update(c.public());
        assert_eq!(&raw[..4], &h.finalize()[..4]);
        // The timestamp, big-endian: 1679315147 = 0x641850cb (the spec example's bytes).
        assert_eq!(&raw[4..12], &[0, 0, 0, 0, 0x64, 0x18, 0x50, 0xcb]);
        let spec_example = B64
            .decode("jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==")
            .unwrap();
        assert_eq!(&spec_example[4..12], &raw[4..12]);
        // The signature: Ed25519 over the message, made here with the key directly.
        let seed: [u8; 32] = (1..=32).collect::<Vec<u8>>().try_into().unwrap();
        let direct = SigningKey::from_bytes(&seed)
            .sign(msg.as_bytes())
            .to_bytes();
        assert_eq!(&raw[12..], &direct[..]);
        // The verifier key: name + hex key ID + base64(0x04 || public key).
        let vk = c.vkey();
        let mut enc = vec![0x04];
        enc.extend_from_slice(&c.public());
        assert_eq!(
            vk,
            format!(
                "witness.example/w1+{}+{}",
                raw[..4]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
                B64.encode(enc)
            )
        );
    }

    #[test]
    fn a_cosigned_note_verifies_and_any_changed_byte_is_refused() {
        let c = fixed();
        let note = format!(
            "{BODY}\n\u{2014} example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
        );
        let cosigned = c.cosign(&note, TIME).unwrap();
        assert!(cosigned.starts_with(&note));
        let v = verifiers(&[c.vkey()]).unwrap();
        assert_eq!(
            verify(&cosigned, &v).unwrap(),
            vec![Cosigned {
                witness: "witness.example/w1".into(),
                time: TIME
            }]
        );
        // Cosigning again replaces the line of the same key.
        let again = c.cosign(&cosigned, TIME + 1).unwrap();
        assert_eq!(again.matches("witness.example/w1").count(), 1);
        assert_eq!(verify(&again, &v).unwrap()[0].time, TIME + 1);
        // Every byte of the body and of the cosignature line, changed: refused or unrecognised.
        let line_start = cosigned.rfind('\u{2014}').unwrap();
        for i in (0..BODY.len()).chain(line_start + 3..cosigned.len() - 1) {
            let mut b = cosigned.clone().into_bytes();
            b[i] ^= 0x01;
            let Ok(s) = String::from_utf8(b) else {
                continue;
            };
            assert!(
                verify(&s, &v).map(|c| c.is_empty()).unwrap_or(true),
                "byte {i} changed still verifies"
            );
        }
        // A note verifier key (type 0x01) is not a cosignature key.
        let seed: [u8; 32] = (1..=32).collect::<Vec<u8>>().try_into().unwrap();
        let nv = signed_note::new_ed25519_verifier_key(
            "witness.example/w1",
            &SigningKey::from_bytes(&seed).verifying_key(),
        );
        assert!(
            CosignVerifier::new(&nv)
                .unwrap_err()
                .to_string()
                .contains("type 0x01")
        );
        assert_eq!(vkey_of_note_vkey(&nv).unwrap(), c.vkey());
        assert!(c.sign(BODY, MAX_TIME + 1).is_err());
    }
}
