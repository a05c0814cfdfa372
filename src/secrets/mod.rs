//! Secret scanning: finds credentials in text before it is hashed into a ledger, committed or
//! pushed, and replaces each with a marker naming its rule (`[REDACTED:aws-access-key]`).
//!
//! The [`Scanner`] finds every rule of [`rules::RULES`] with hand-written byte checks
//! (`scan.rs`: one SIMD search for the rules' fixed prefixes, one for the `:`, `=` and `~` of
//! assignments and Azure secrets, each candidate confirmed by its own rule, entropy last), and
//! looks for the literal values handed in at runtime with one more such search (Teddy, or
//! Aho-Corasick for many). [`Scanner::scan_text`] scans a string, [`Scanner::scan_bytes`] a
//! file's bytes (invalid UTF-8 hides nothing). Each [`Finding`] names its rule, its line and
//! its [`Fingerprint`]: a name for the secret that does not reveal it, which a policy may list
//! to accept that one secret and no other.
//!
//! The [`Guard`] applies a policy ([`SecretsPolicy`]: mode, per-rule `allow` and
//! `allow_fingerprints`) to a whole JSON body: every string in it is scanned, and the answer is
//! the body as it may be written ([`Screened::Redacted`]) or a refusal ([`Screened::Blocked`]),
//! each with the [`Hit`]s that say where and which, never what.
//!
//! Pure: no I/O. The runtime values are read by the caller (the adapter that loads the runtime
//! config) and passed to [`Scanner::with_literals`].

mod error;
pub mod rules;
mod scan;

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::ledger::canonical::Value;
use crate::ledger::{Entry, NewEntry, kind};
pub use error::FingerprintError;
pub(crate) use error::SecretsConfigError;
pub(crate) use rules::{API_KEY_ENV, Confirm, RULES};

/// Literal values shorter than this are not looked for: a two-letter "key" would redact every
/// word that holds it.
pub(crate) const MIN_LITERAL_BYTES: usize = 8;

/// The marker that replaces a secret found by `rule`.
pub(crate) fn marker(rule: &str) -> String {
    format!("[REDACTED:{rule}]")
}

/// One match of a rule, before overlapping matches are merged: the rule and the byte span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Find {
    pub(crate) rule: &'static str,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// A name for one secret that does not reveal it: the first 8 bytes (16 hex digits) of
/// SHA-256 over the rule id, a NUL byte and the secret's bytes.
///
/// The same secret found by the same rule has the same fingerprint in every text, on every
/// machine, so a policy can accept exactly that secret (`[secrets] allow_fingerprints`) and
/// records and messages can name it. Going back from a fingerprint to the secret means guessing
/// secrets until one hashes to it: SHA-256 has no known shortcut, and a key a provider issues
/// carries 80 bits of randomness or more (an AWS key id's 16 characters; 200 and more for
/// most tokens), far beyond any search. A value a person chose (a `password=` the
/// `generic-secret` rule finds) is only as hard to guess as the value itself, as with any
/// unsalted hash: rotate such a secret rather than allow it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint([u8; 8]);

impl Fingerprint {
    /// The fingerprint of `secret` found by `rule`.
    pub fn of(rule: &str, secret: &[u8]) -> Fingerprint {
        let mut h = Sha256::new();
        h.update(rule.as_bytes());
        h.update([0u8]);
        h.update(secret);
        let digest = h.finalize();
        let mut b = [0u8; 8];
        b.copy_from_slice(&digest[..8]);
        Fingerprint(b)
    }

    /// Reads 16 hex digits (either case).
    pub fn parse(s: &str) -> Result<Fingerprint, FingerprintError> {
        let bad = || FingerprintError(s.to_string());
        if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut b = [0u8; 8];
        for (i, byte) in b.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Fingerprint(b))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// One secret in a text: the rule that found it, its byte span, its line and its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub(crate) rule: &'static str,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) line: usize,
    pub(crate) fingerprint: Fingerprint,
}

impl Finding {
    /// The id of the rule that found it ([`API_KEY_ENV`] for a runtime value).
    pub fn rule(&self) -> &'static str {
        self.rule
    }

    /// The line it starts on, counting from 1 (a line ends at each `\n`).
    pub fn line(&self) -> usize {
        self.line
    }

    /// The fingerprint of the secret (see [`Fingerprint`]).
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Its byte span in the text scanned.
    pub fn span(&self) -> Range<usize> {
        self.start..self.end
    }
}

/// Shannon entropy of `s` in bits per byte.
pub(crate) fn entropy(s: &str) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// Kinds of character in `s`: lower, upper, digit, anything else.
fn classes(s: &str) -> usize {
    let (mut l, mut u, mut d, mut o) = (false, false, false, false);
    for b in s.bytes() {
        match b {
            b'a'..=b'z' => l = true,
            b'A'..=b'Z' => u = true,
            b'0'..=b'9' => d = true,
            _ => o = true,
        }
    }
    [l, u, d, o].iter().filter(|x| **x).count()
}

/// Words that mark a value as an example to replace rather than a secret
/// (`sk-ant-api03-your-key-goes-here`, `<replace-me>`, `changeme123`, `xxxx`). A random value
/// holds one of them about once in a million.
const PLACEHOLDER_WORDS: [&[u8]; 5] = [b"your", b"replace", b"placeholder", b"changeme", b"xxxx"];

/// A value that only stands for a secret: a variable reference, a template, a run of one
/// character, a value with a placeholder word.
fn placeholder(v: &str) -> bool {
    v.starts_with('$')
        || v.starts_with('%')
        || (v.bytes().any(|b| b == b'{') && (v.contains("${") || v.contains("{{")))
        || v.bytes().all(|b| b == b'x' || b == b'X' || b == b'*')
        || PLACEHOLDER_WORDS.iter().any(|w| {
            v.as_bytes()
                .windows(w.len())
                .any(|x| x.eq_ignore_ascii_case(w))
        })
}

/// Whether an identifier reads as people name things in code: words in lower, Capitalized or
/// CAPITAL case (split at humps, `_` and digits), at most one word of one letter and at most two
/// runs of up to three digits (`accessToken`, `GitHubToken`, `API_TOKEN_V2`, `oauth2Token`).
/// Any identifier of one or two characters does (what a minifier names things). A random
/// string splits into many one-letter words and long digit runs, so it does not.
fn word_like(id: &[u8]) -> bool {
    if id.len() <= 2 {
        return true;
    }
    let n = id.len();
    let (mut single, mut digit_runs) = (0, 0);
    let mut i = 0;
    while i < n {
        let b = id[i];
        let s = i;
        if b == b'_' || b == b'$' {
            i += 1;
            continue;
        }
        if b.is_ascii_digit() {
            while i < n && id[i].is_ascii_digit() {
                i += 1;
            }
            digit_runs += 1;
            if i - s > 3 {
                return false;
            }
            continue;
        }
        if b.is_ascii_uppercase() {
            while i < n && id[i].is_ascii_uppercase() {
                i += 1;
            }
            if i < n && id[i].is_ascii_lowercase() {
                if i - s > 1 {
                    // `HTTPServer`: the last capital starts the next word.
                    i -= 1;
                } else {
                    while i < n && id[i].is_ascii_lowercase() {
                        i += 1;
                    }
                }
            }
        } else {
            while i < n && id[i].is_ascii_lowercase() {
                i += 1;
            }
        }
        single += usize::from(i - s == 1);
    }
    single <= 1 && digit_runs <= 2
}

/// A value that is code naming where a secret lives, not the secret: identifiers joined by
/// member access (`session.accessToken`, `process.env.SECRET_KEY`, `cfg.GitHubToken`,
/// `Config::API_KEY`, `this->token`), such paths joined by `||`, `&&` or `??`, a `!` or `?`
/// after the last one. Every identifier must be [`word_like`], so a random value with a dot
/// in it (`hvs.CAESIJ...`) is still a secret.
fn code_path(v: &str) -> bool {
    const SEPARATORS: [&[u8]; 8] = [b".", b"?.", b"!.", b"::", b"->", b"||", b"&&", b"??"];
    let b = v.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$';
    let mut i = 0;
    let mut access = false;
    loop {
        let s = i;
        if !b
            .get(i)
            .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_' || c == b'$')
        {
            return false;
        }
        while b.get(i).is_some_and(|&c| ident(c)) {
            i += 1;
        }
        if !word_like(&b[s..i]) {
            return false;
        }
        let rest = &b[i..];
        if rest.is_empty() || rest == b"!" || rest == b"?" {
            return access;
        }
        let Some(sep) = SEPARATORS.iter().find(|p| rest.starts_with(p)) else {
            return false;
        };
        access |= !matches!(*sep, b"||" | b"&&" | b"??");
        i += sep.len();
    }
}

/// A web address with no credentials in it (no `user@`, no query): what a `token_uri` or an
/// `auth_endpoint` holds, not a secret.
fn plain_url(v: &str) -> bool {
    (v.starts_with("https://") || v.starts_with("http://"))
        && !v.bytes().any(|b| b == b'@' || b == b'?')
}

fn confirmed(confirm: Confirm, value: &str) -> bool {
    match confirm {
        Confirm::Shape => true,
        Confirm::Random { bits } => entropy(value) >= bits,
        Confirm::Entropy { bits, classes: k } => {
            // Words joined by dashes (`from-the-vault`) are two kinds of character too; a
            // generated secret has a digit or a third kind.
            // The cheap checks first; most candidates in code fail them.
            let kinds = classes(value);
            kinds >= k
                && (kinds >= 3 || value.bytes().any(|b| b.is_ascii_digit()))
                && entropy(value) >= bits
                && !placeholder(value)
                && !plain_url(value)
                && !code_path(value)
        }
    }
}

/// The rules and the runtime's literal values, ready to scan.
#[derive(Clone, Default)]
pub struct Scanner {
    literals: Option<Arc<scan::Literals>>,
    /// How many literal values are looked for (never the values).
    literal_count: usize,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("rules", &RULES.len())
            .field("literals", &self.literal_count)
            .finish()
    }
}

/// Every built-in rule: its id (what markers, records and `allow` name) and what it finds.
pub fn rules() -> impl Iterator<Item = (&'static str, &'static str)> {
    RULES.iter().map(|r| (r.id, r.what))
}

impl Scanner {
    /// The built-in rules only.
    pub fn new() -> Scanner {
        Scanner::default()
    }

    /// The built-in rules and `values` (each found wherever it occurs, as [`API_KEY_ENV`]);
    /// values shorter than [`MIN_LITERAL_BYTES`] are skipped.
    pub fn with_literals<I, S>(values: I) -> Scanner
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut kept: Vec<String> = values
            .into_iter()
            .map(|v| v.as_ref().trim().to_string())
            .filter(|v| v.len() >= MIN_LITERAL_BYTES)
            .collect();
        kept.sort();
        kept.dedup();
        if kept.is_empty() {
            return Scanner::default();
        }
        let ac = scan::Literals::new(&kept, scan::Kind::LeftmostLongest);
        Scanner {
            literal_count: kept.len(),
            literals: Some(Arc::new(ac)),
        }
    }

    /// How many runtime values this scanner looks for (the tests check the count).
    #[cfg(test)]
    pub(crate) fn literal_count(&self) -> usize {
        self.literal_count
    }

    /// Every secret in `text`, in order, overlapping finds merged (a merged find that holds a
    /// runtime value is reported as [`API_KEY_ENV`]; otherwise it is named by the find that
    /// starts first, the earlier rule of [`RULES`] when two start together, so
    /// `AWS_ACCESS_KEY_ID=AKIA...` is an `aws-access-key`).
    pub fn scan_text(&self, text: &str) -> Vec<Finding> {
        finish(self.finds(text), text.as_bytes())
    }

    /// Every secret in `bytes`, as [`Scanner::scan_text`] finds them, for a file's content:
    /// bytes that are not UTF-8 hide nothing around them. Each such byte is read as a NUL (no
    /// rule's character, no word character, no space), so the spans, lines and fingerprints are
    /// those of the bytes given.
    pub fn scan_bytes(&self, bytes: &[u8]) -> Vec<Finding> {
        if let Ok(text) = std::str::from_utf8(bytes) {
            return self.scan_text(text);
        }
        let mut clean = Vec::with_capacity(bytes.len());
        for chunk in bytes.utf8_chunks() {
            clean.extend_from_slice(chunk.valid().as_bytes());
            clean.resize(clean.len() + chunk.invalid().len(), 0);
        }
        let text = String::from_utf8(clean).expect("invalid bytes were replaced by NUL");
        finish(self.finds(&text), bytes)
    }

    /// The merged finds of the rules and the runtime values in `text`.
    fn finds(&self, text: &str) -> Vec<Find> {
        let mut found = scan::rules(text);
        if let Some(ac) = &self.literals {
            let mut at = 0;
            while let Some((_, start, end)) = ac.find_at(text.as_bytes(), at) {
                found.push(Find {
                    rule: API_KEY_ENV,
                    start,
                    end,
                });
                at = end;
            }
        }
        merge(found)
    }
}

/// The findings of `finds` (sorted, disjoint) in `bytes`: each with its line and fingerprint.
fn finish(finds: Vec<Find>, bytes: &[u8]) -> Vec<Finding> {
    let mut line = 1;
    let mut at = 0;
    finds
        .into_iter()
        .map(|f| {
            line += memchr::memchr_iter(b'\n', &bytes[at..f.start]).count();
            at = f.start;
            Finding {
                rule: f.rule,
                start: f.start,
                end: f.end,
                line,
                fingerprint: Fingerprint::of(f.rule, &bytes[f.start..f.end]),
            }
        })
        .collect()
}

/// Sorts finds and merges the ones that overlap.
fn merge(mut found: Vec<Find>) -> Vec<Find> {
    if found.len() > 1 {
        found.sort_by_key(|f| (f.start, rank(f.rule), std::cmp::Reverse(f.end)));
    }
    let mut out: Vec<Find> = Vec::with_capacity(found.len());
    for f in found {
        match out.last_mut() {
            Some(last) if f.start < last.end => {
                last.end = last.end.max(f.end);
                if f.rule == API_KEY_ENV {
                    last.rule = API_KEY_ENV;
                }
            }
            _ => out.push(f),
        }
    }
    out
}

/// Where `rule` stands in [`RULES`] (runtime values after every rule).
fn rank(rule: &str) -> usize {
    RULES
        .iter()
        .position(|r| r.id == rule)
        .unwrap_or(RULES.len())
}

/// `text` with each of `found` (sorted, disjoint) replaced by its marker; also the span of
/// each marker in the result.
pub(crate) fn redact_text(text: &str, found: &[Finding]) -> (String, Vec<(usize, usize)>) {
    let mut out = String::with_capacity(text.len());
    let mut spans = Vec::with_capacity(found.len());
    let mut at = 0;
    for f in found {
        out.push_str(&text[at..f.start]);
        let start = out.len();
        out.push_str(&marker(f.rule));
        spans.push((start, out.len()));
        at = f.end;
    }
    out.push_str(&text[at..]);
    (out, spans)
}

/// What a policy does with a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Mode {
    /// Replace it with a marker before hashing, and witness where (`secret_redacted`).
    #[default]
    Redact,
    /// Refuse the entry; a run stops with a witnessed reason.
    Block,
    /// Write it as it is (runtime key values are still redacted).
    Allow,
}

impl Mode {
    /// Reads `redact`, `block` or `allow`.
    pub(crate) fn parse(s: &str) -> Result<Mode, SecretsConfigError> {
        match s {
            "redact" => Ok(Mode::Redact),
            "block" => Ok(Mode::Block),
            "allow" => Ok(Mode::Allow),
            other => Err(SecretsConfigError::UnknownMode(other.to_string())),
        }
    }

    /// The mode's name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Redact => "redact",
            Mode::Block => "block",
            Mode::Allow => "allow",
        }
    }
}

/// The `[secrets]` table of `.forum/policy.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SecretsPolicy {
    /// What a secret found in a body does.
    pub(crate) mode: Mode,
    /// Rules whose finds are written as they are ([`API_KEY_ENV`] cannot be allowed).
    pub(crate) allow: BTreeSet<String>,
    /// Single secrets accepted by their fingerprint, whatever rule finds them (except
    /// [`API_KEY_ENV`]): another secret of the same rule still counts.
    pub(crate) allow_fingerprints: BTreeSet<Fingerprint>,
}

impl SecretsPolicy {
    /// Reads the `[secrets]` table: `mode`, `allow` (rule ids) and `allow_fingerprints`
    /// (fingerprints as findings print them), every key optional.
    pub(crate) fn from_toml(table: &toml::Table) -> Result<SecretsPolicy, SecretsConfigError> {
        let mut p = SecretsPolicy::default();
        for (key, value) in table {
            match (key.as_str(), value) {
                ("mode", toml::Value::String(s)) => p.mode = Mode::parse(s)?,
                ("allow", toml::Value::Array(items)) => {
                    for item in items {
                        let Some(id) = item.as_str() else {
                            return Err(SecretsConfigError::AllowNotString(item.type_str()));
                        };
                        check_rule_id(id)?;
                        p.allow.insert(id.to_string());
                    }
                }
                ("allow_fingerprints", toml::Value::Array(items)) => {
                    for item in items {
                        let Some(fp) = item.as_str() else {
                            return Err(SecretsConfigError::FingerprintNotString(item.type_str()));
                        };
                        let fp = Fingerprint::parse(fp).map_err(SecretsConfigError::Fingerprint)?;
                        p.allow_fingerprints.insert(fp);
                    }
                }
                ("mode" | "allow" | "allow_fingerprints", other) => {
                    return Err(SecretsConfigError::WrongType {
                        key: key.clone(),
                        found: other.type_str(),
                    });
                }
                (other, _) => {
                    return Err(SecretsConfigError::UnknownKey(other.to_string()));
                }
            }
        }
        Ok(p)
    }

    /// Whether a find counts under this policy's lists (its mode aside): a runtime value
    /// always does; another find unless its rule or its fingerprint is allowed.
    pub(crate) fn counts(&self, f: &Finding) -> bool {
        f.rule == API_KEY_ENV
            || !(self.allow.contains(f.rule) || self.allow_fingerprints.contains(&f.fingerprint))
    }
}

/// Refuses an id that is no rule, and [`API_KEY_ENV`], which is never allowed.
pub(crate) fn check_rule_id(id: &str) -> Result<(), SecretsConfigError> {
    if id == API_KEY_ENV {
        return Err(SecretsConfigError::RuntimeKeyAllowed);
    }
    if !RULES.iter().any(|r| r.id == id) {
        return Err(SecretsConfigError::UnknownRule(id.to_string()));
    }
    Ok(())
}

/// Where one secret was in a body: the rule, the JSON pointer of the string that held it, the
/// byte span (of the marker, once redacted; of the secret, in a refusal) and the secret's
/// fingerprint (what `allow_fingerprints` takes to accept it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub(crate) rule: &'static str,
    pub(crate) path: String,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) fingerprint: Fingerprint,
}

impl Hit {
    /// The hit as JSON (what `secret_redacted` and `secret_blocked` record).
    pub(crate) fn to_value(&self) -> Value {
        Value::Object(vec![
            ("rule".into(), Value::str(self.rule)),
            ("path".into(), Value::str(&self.path)),
            ("start".into(), Value::int(self.start as i64)),
            ("end".into(), Value::int(self.end as i64)),
            (
                "fingerprint".into(),
                Value::str(self.fingerprint.to_string()),
            ),
        ])
    }
}

/// The distinct rules of `hits`, in order.
pub(crate) fn rules_of(hits: &[Hit]) -> Vec<&'static str> {
    let mut rules: Vec<&'static str> = Vec::new();
    for h in hits {
        if !rules.contains(&h.rule) {
            rules.push(h.rule);
        }
    }
    rules
}

/// The `secret_redacted` entry that follows `entry`, whose body was written with markers: it
/// names the entry (seq, hash, kind), its rules and where each marker is, is parented on the
/// entry and carries its timestamp. The run, `append` and campaign rounds all write this one.
pub(crate) fn redaction_entry(entry: &Entry, hits: &[Hit]) -> NewEntry {
    NewEntry {
        actor: "secrets".into(),
        kind: kind::SECRET_REDACTED.into(),
        causal_parent: Some(entry.seq as i64),
        payload: Value::Object(vec![
            ("seq".into(), Value::Int(entry.seq.into())),
            ("entry_hash".into(), Value::str(&entry.entry_hash)),
            ("entry_kind".into(), Value::str(&entry.kind)),
            (
                "rules".into(),
                Value::Array(rules_of(hits).into_iter().map(Value::str).collect()),
            ),
            (
                "findings".into(),
                Value::Array(hits.iter().map(Hit::to_value).collect()),
            ),
        ]),
        ts: entry.ts,
    }
}

/// What a body may become.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Screened {
    /// Nothing to change.
    Clean,
    /// Write this body instead (secrets replaced by markers); the hits give the markers' spans.
    Redacted(Value, Vec<Hit>),
    /// Refuse the body; the hits give the secrets' spans.
    Blocked(Vec<Hit>),
}

/// A scanner under a policy: what a writer asks before a body is hashed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Guard {
    pub(crate) scanner: Scanner,
    pub(crate) policy: SecretsPolicy,
}

impl Guard {
    /// The guard of `policy` with `scanner`.
    pub(crate) fn new(scanner: Scanner, policy: SecretsPolicy) -> Guard {
        Guard { scanner, policy }
    }

    /// Whether a find counts under the policy: a runtime value always does; another unless
    /// the mode is `allow` or the policy allows its rule or its fingerprint.
    pub(crate) fn counts(&self, f: &Finding) -> bool {
        f.rule == API_KEY_ENV || (self.policy.mode != Mode::Allow && self.policy.counts(f))
    }

    /// Scans every string of `body` and says what may be written.
    pub(crate) fn check(&self, body: &Value) -> Screened {
        let mut hits = Vec::new();
        let mut finds = Vec::new();
        let mut path = String::new();
        self.walk(body, &mut path, &mut finds);
        if finds.is_empty() {
            return Screened::Clean;
        }
        let block = self.policy.mode == Mode::Block;
        if block {
            for (p, fs) in &finds {
                for f in fs {
                    hits.push(Hit {
                        rule: f.rule,
                        path: p.clone(),
                        start: f.start,
                        end: f.end,
                        fingerprint: f.fingerprint,
                    });
                }
            }
            return Screened::Blocked(hits);
        }
        let mut out = body.clone();
        for (p, fs) in &finds {
            if let Some(Value::Str(s)) = pointer_mut(&mut out, p) {
                let (redacted, spans) = redact_text(s, fs);
                *s = redacted;
                for (f, (start, end)) in fs.iter().zip(spans) {
                    hits.push(Hit {
                        rule: f.rule,
                        path: p.clone(),
                        start,
                        end,
                        fingerprint: f.fingerprint,
                    });
                }
            }
        }
        Screened::Redacted(out, hits)
    }

    /// The counted finds of every string under `v`, by JSON pointer.
    fn walk(&self, v: &Value, path: &mut String, out: &mut Vec<(String, Vec<Finding>)>) {
        match v {
            Value::Str(s) => {
                let fs: Vec<Finding> = self
                    .scanner
                    .scan_text(s)
                    .into_iter()
                    .filter(|f| self.counts(f))
                    .collect();
                if !fs.is_empty() {
                    out.push((path.clone(), fs));
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&i.to_string());
                    self.walk(item, path, out);
                    path.truncate(len);
                }
            }
            Value::Object(pairs) => {
                for (k, item) in pairs {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    self.walk(item, path, out);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }
}

/// The value at JSON pointer `p` (as [`Guard`] writes them) in `v`.
fn pointer_mut<'a>(v: &'a mut Value, p: &str) -> Option<&'a mut Value> {
    if p.is_empty() {
        return Some(v);
    }
    let mut cur = v;
    for token in p.strip_prefix('/')?.split('/') {
        let key = token.replace("~1", "/").replace("~0", "~");
        cur = match cur {
            Value::Array(items) => items.get_mut(key.parse::<usize>().ok()?)?,
            // The last pair of a repeated key is the one that counts, as the walk saw it first.
            Value::Object(pairs) => &mut pairs.iter_mut().find(|(k, _)| *k == key)?.1,
            _ => return None,
        };
    }
    Some(cur)
}

#[cfg(test)]
mod oracle;
#[cfg(test)]
mod scan_tests;
#[cfg(test)]
mod tests;
