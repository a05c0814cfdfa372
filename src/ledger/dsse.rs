//! DSSE (Dead Simple Signing Envelope, v1.0) over an in-toto Statement, signed with the
//! ledger's Ed25519 note key.
//!
//! The envelope is `{"payload": base64(body), "payloadType": TYPE, "signatures": [{"keyid",
//! "sig"}]}`, each `sig` the base64 Ed25519 signature of the pre-authentication encoding
//! [`pae`]: `"DSSEv1" SP LEN(TYPE) SP TYPE SP LEN(body) SP body`, lengths as ASCII decimals of
//! byte counts. Signing over the encoding rather than the body binds the type to the bytes, so
//! a payload cannot be re-read as another type under the same signature.
//!
//! The key is the one `git forum keygen` writes and `checkpoint --note` signs with: Go's
//! signed-note format, `PRIVATE+KEY+NAME+HASH+base64(0x01 || seed)` for the signer and
//! `NAME+HASH+base64(0x01 || public key)` for the verifier. The envelope's `keyid` is
//! `NAME+HASH`: the key's name and its signed-note key ID (eight hex digits, the first four
//! bytes of `SHA-256(NAME || "\n" || 0x01 || public key)`), the same two items that open its
//! verifier key and name it on a checkpoint note's signature line, so a reader can tell from
//! the envelope which verifier key to use.
//!
//! Pure: the caller reads the key files.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};

/// The payload type of an in-toto Statement in JSON.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// The signature type byte of an Ed25519 signed-note key.
const ED25519_NOTE_TYPE: u8 = 0x01;

/// The pre-authentication encoding DSSE signs.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// One signature of an envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// Which key signed: `NAME+HASH` of its note key.
    pub keyid: String,
    /// The base64 Ed25519 signature of [`pae`].
    pub sig: String,
}

/// A DSSE envelope as JSON carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The body, base64.
    pub payload: String,
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub signatures: Vec<Signature>,
}

/// Why a key could not be read or an envelope does not open. One line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DsseError {
    #[error(
        "not a signed-note signer key (PRIVATE+KEY+NAME+HASH+BASE64, as `git forum keygen` writes)"
    )]
    SignerKey,
    #[error("{0:?} is not a signed-note verifier key (NAME+HASH+BASE64, a keygen .pub file)")]
    VerifierKey(String),
    #[error("{0:?}: its key ID does not match its name and key")]
    KeyIdMismatch(String),
    #[error("the envelope's payload is not canonical base64")]
    PayloadBase64,
    #[error("the envelope's payloadType is {0:?}, not {IN_TOTO_PAYLOAD_TYPE}")]
    PayloadType(String),
    #[error("the envelope has no signature")]
    Unsigned,
    #[error("no signature of the envelope is by a trusted key (signed by {0})")]
    Untrusted(String),
    #[error("the envelope's signature by {0} does not verify over its payload")]
    BadSignature(String),
}

/// Splits `NAME+HASH+BASE64` (after any `PRIVATE+KEY+` prefix) into the key ID `NAME+HASH`
/// and the key bytes after the type byte; the hash is checked against the public key by the
/// caller.
fn split_key(text: &str) -> Option<(String, String, Vec<u8>)> {
    // The base64 may itself hold `+`: only the first two are separators.
    let mut parts = text.trim().splitn(3, '+');
    let (name, hash, b64) = (parts.next()?, parts.next()?, parts.next()?);
    if name.is_empty() || hash.len() != 8 {
        return None;
    }
    let raw = B64.decode(b64).ok()?;
    (B64.encode(&raw) == b64).then_some(())?;
    match raw.split_first() {
        Some((&ED25519_NOTE_TYPE, key)) if key.len() == 32 => {
            Some((name.to_string(), hash.to_string(), key.to_vec()))
        }
        _ => None,
    }
}

/// The signed-note key ID (eight hex digits) of an Ed25519 public key named `name`.
fn note_key_hash(name: &str, public: &[u8; 32]) -> String {
    let mut k = vec![ED25519_NOTE_TYPE];
    k.extend_from_slice(public);
    format!("{:08x}", signed_note::key_id(name, &k))
}

/// A signing key read from a signer key file.
pub struct SignerKey {
    keyid: String,
    key: SigningKey,
}

impl SignerKey {
    /// Reads `PRIVATE+KEY+NAME+HASH+base64(0x01 || seed)`.
    pub fn from_note_key(text: &str) -> Result<SignerKey, DsseError> {
        let rest = text
            .trim()
            .strip_prefix("PRIVATE+KEY+")
            .ok_or(DsseError::SignerKey)?;
        let (name, hash, seed) = split_key(rest).ok_or(DsseError::SignerKey)?;
        let seed: [u8; 32] = seed.try_into().map_err(|_| DsseError::SignerKey)?;
        let key = SigningKey::from_bytes(&seed);
        if note_key_hash(&name, &key.verifying_key().to_bytes()) != hash {
            return Err(DsseError::SignerKey);
        }
        Ok(SignerKey {
            keyid: format!("{name}+{hash}"),
            key,
        })
    }

    /// `NAME+HASH`.
    pub fn keyid(&self) -> &str {
        &self.keyid
    }

    /// The verifier key that opens this key's signatures.
    pub fn verifier(&self) -> VerifierKey {
        VerifierKey {
            keyid: self.keyid.clone(),
            key: self.key.verifying_key(),
        }
    }
}

/// A verifying key read from a verifier key file.
#[derive(Debug, Clone)]
pub struct VerifierKey {
    keyid: String,
    key: VerifyingKey,
}

impl VerifierKey {
    /// Reads `NAME+HASH+base64(0x01 || public key)`.
    pub fn from_note_vkey(text: &str) -> Result<VerifierKey, DsseError> {
        let bad = || DsseError::VerifierKey(text.trim().to_string());
        let (name, hash, public) = split_key(text).ok_or_else(bad)?;
        let public: [u8; 32] = public.try_into().map_err(|_| bad())?;
        if note_key_hash(&name, &public) != hash {
            return Err(DsseError::KeyIdMismatch(text.trim().to_string()));
        }
        let key = VerifyingKey::from_bytes(&public).map_err(|_| bad())?;
        Ok(VerifierKey {
            keyid: format!("{name}+{hash}"),
            key,
        })
    }

    /// `NAME+HASH`.
    pub fn keyid(&self) -> &str {
        &self.keyid
    }

    /// The raw Ed25519 public key.
    pub fn public(&self) -> [u8; 32] {
        self.key.to_bytes()
    }
}

/// Wraps `payload` in an envelope of type [`IN_TOTO_PAYLOAD_TYPE`], signed by `key`.
pub fn sign(payload: &[u8], key: &SignerKey) -> Envelope {
    let sig = key.key.sign(&pae(IN_TOTO_PAYLOAD_TYPE, payload));
    Envelope {
        payload: B64.encode(payload),
        payload_type: IN_TOTO_PAYLOAD_TYPE.to_string(),
        signatures: vec![Signature {
            keyid: key.keyid.clone(),
            sig: B64.encode(sig.to_bytes()),
        }],
    }
}

/// Opens an envelope: its type must be in-toto's, its payload canonical base64, and at least
/// one signature must be by a key of `keys` and verify (a signature of a trusted key ID that
/// does not verify is refused outright). Returns the payload and the key ID that verified.
pub fn open(env: &Envelope, keys: &[VerifierKey]) -> Result<(Vec<u8>, String), DsseError> {
    if env.payload_type != IN_TOTO_PAYLOAD_TYPE {
        return Err(DsseError::PayloadType(env.payload_type.clone()));
    }
    let payload = B64
        .decode(&env.payload)
        .ok()
        .filter(|p| B64.encode(p) == env.payload)
        .ok_or(DsseError::PayloadBase64)?;
    if env.signatures.is_empty() {
        return Err(DsseError::Unsigned);
    }
    let message = pae(&env.payload_type, &payload);
    for s in &env.signatures {
        let Some(key) = keys.iter().find(|k| k.keyid == s.keyid) else {
            continue;
        };
        let sig = B64
            .decode(&s.sig)
            .ok()
            .and_then(|b| <[u8; 64]>::try_from(b.as_slice()).ok())
            .map(|b| ed25519_dalek::Signature::from_bytes(&b));
        match sig {
            Some(sig) if key.key.verify(&message, &sig).is_ok() => {
                return Ok((payload, s.keyid.clone()));
            }
            _ => return Err(DsseError::BadSignature(s.keyid.clone())),
        }
    }
    let by: Vec<&str> = env.signatures.iter().map(|s| s.keyid.as_str()).collect();
    Err(DsseError::Untrusted(by.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed key pair in Go's note format (seed 0x07 repeated), so the tests need no
    /// randomness.
    fn fixed() -> (SignerKey, String) {
        fixed_from(7)
    }

    fn fixed_from(byte: u8) -> (SignerKey, String) {
        let seed = [byte; 32];
        let public = SigningKey::from_bytes(&seed).verifying_key().to_bytes();
        let hash = note_key_hash("attest-test", &public);
        let mut s = vec![ED25519_NOTE_TYPE];
        s.extend_from_slice(&seed);
        let mut p = vec![ED25519_NOTE_TYPE];
        p.extend_from_slice(&public);
        let skey = format!("PRIVATE+KEY+attest-test+{hash}+{}", B64.encode(s));
        let vkey = format!("attest-test+{hash}+{}", B64.encode(p));
        (SignerKey::from_note_key(&skey).unwrap(), vkey)
    }

    #[test]
    fn pae_is_the_spec_encoding() {
        // The example of the DSSE protocol text: type "http://example.com/HelloWorld",
        // body "hello world".
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }

    #[test]
    fn keys_in_note_format_agree_with_signed_note() {
        let (k, vkey) = fixed();
        // The verifier key this module writes is one signed_note accepts as its own.
        signed_note::StandardVerifier::new(&vkey).unwrap();
        let v = VerifierKey::from_note_vkey(&vkey).unwrap();
        assert_eq!(v.keyid(), k.keyid());
        assert!(k.keyid().starts_with("attest-test+"));
        let (name, hash) = k.keyid().split_once('+').unwrap();
        assert_eq!((name, hash.len()), ("attest-test", 8));
        // A key whose hash was changed is refused.
        let bad = vkey.replacen(hash, "00000000", 1);
        assert!(matches!(
            VerifierKey::from_note_vkey(&bad),
            Err(DsseError::KeyIdMismatch(_))
        ));
        assert!(SignerKey::from_note_key(&vkey).is_err());
        // Base64 may hold `+`, the keys' separator: a key whose encoding has one reads too.
        let (k, vkey) = (0..=255u8)
            .map(fixed_from)
            .find(|(_, v)| v.splitn(3, '+').nth(2).is_some_and(|b| b.contains('+')))
            .unwrap();
        assert_eq!(
            VerifierKey::from_note_vkey(&vkey).unwrap().keyid(),
            k.keyid()
        );
    }

    #[test]
    fn an_envelope_opens_with_its_key_and_not_after_a_change() {
        let (k, vkey) = fixed();
        let body = br#"{"_type":"https://in-toto.io/Statement/v1"}"#;
        let env = sign(body, &k);
        let keys = [VerifierKey::from_note_vkey(&vkey).unwrap()];
        let (got, by) = open(&env, &keys).unwrap();
        assert_eq!((got.as_slice(), by.as_str()), (&body[..], k.keyid()));
        // Ed25519 is deterministic: the same body gives the same envelope.
        assert_eq!(sign(body, &k), env);
        // One byte of the payload changed.
        let mut changed = body.to_vec();
        changed[3] ^= 1;
        let mut bad = env.clone();
        bad.payload = B64.encode(&changed);
        assert_eq!(
            open(&bad, &keys),
            Err(DsseError::BadSignature(k.keyid().into()))
        );
        // Another type under the same signature.
        let mut retyped = env.clone();
        retyped.payload_type = "application/json".into();
        assert!(matches!(
            open(&retyped, &keys),
            Err(DsseError::PayloadType(_))
        ));
        // Another key.
        let other = SigningKey::from_bytes(&[9u8; 32])
            .verifying_key()
            .to_bytes();
        let mut p = vec![ED25519_NOTE_TYPE];
        p.extend_from_slice(&other);
        let okey = format!("other+{}+{}", note_key_hash("other", &other), B64.encode(p));
        let others = [VerifierKey::from_note_vkey(&okey).unwrap()];
        assert!(matches!(open(&env, &others), Err(DsseError::Untrusted(_))));
        let mut unsigned = env;
        unsigned.signatures.clear();
        assert_eq!(open(&unsigned, &keys), Err(DsseError::Unsigned));
    }
}
