//! The matcher behind [`super::Scanner::scan`]: every rule of [`RULES`] found by hand-written
//! byte checks instead of by running its pattern.
//!
//! Two passes over the text name each candidate's rule as they find it, so each candidate is
//! checked once, by its own rule:
//!
//! * one Aho-Corasick search (SIMD Teddy on x86_64 and aarch64) for the fixed prefixes
//!   (`-----BEGIN`, `AKIA`/`ASIA`, `ghp_`..., `github_pat_`, `glpat-`, `xoxb-`..., `eyJ`): each
//!   prefix belongs to one rule, whose shape is then checked byte by byte (a word boundary
//!   before, a run of the rule's characters of the right length, the boundary after);
//! * one `memchr` search for `:` and `=`, the byte every assignment rule (`aws-secret-key`,
//!   `generic-secret`) needs: the keyword is looked for backwards from it (only where a keyword
//!   can end), the value forwards, and entropy is computed last, once the cheap checks passed.
//!
//! Hand-written because a regular expression spends its time here deciding, at each candidate,
//! which of the alternatives matched and where the value group is: the combined pattern ran at
//! 69 MB/s on text with a near-miss every 13 bytes, and these checks need no state beyond a few
//! bytes around the candidate. The patterns in [`super::rules`] stay the specification: the
//! unit tests compare this matcher with them compiled by `regex` on generated texts, and each
//! check below says which part of its pattern it is (`\s` is Unicode whitespace and `(?i)` folds
//! `ſ` to `s` and `K` (Kelvin) to `k`, as in the patterns).
//!
//! Every candidate is judged on its own (a candidate inside another rule's match is still
//! checked; overlapping finds are merged by the caller), and every check is bounded: a run of
//! unbounded length (a JWT's segments, a private key's body) is measured once and reused by
//! the candidates inside it, so the scan stays linear on any text.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, Input, MatchKind, packed};
use memchr::memmem;

use super::rules::RULES;
use super::{Finding, confirmed};

/// Index in [`RULES`] of each rule (checked by a unit test).
pub(super) const PRIVATE_KEY: usize = 0;
pub(super) const AWS_ACCESS_KEY: usize = 1;
pub(super) const AWS_SECRET_KEY: usize = 2;
pub(super) const GITHUB_TOKEN: usize = 3;
pub(super) const GITLAB_TOKEN: usize = 4;
pub(super) const SLACK_TOKEN: usize = 5;
pub(super) const JWT: usize = 6;
pub(super) const GENERIC_SECRET: usize = 7;

/// What a fixed prefix starts.
#[derive(Clone, Copy)]
enum Prefix {
    PrivateKey,
    AwsAccess,
    GithubClassic,
    GithubFine,
    Gitlab,
    Slack,
    Jwt,
}

/// Every fixed prefix a rule starts with, and what it starts.
const PREFIXES: &[(&str, Prefix)] = &[
    ("-----BEGIN", Prefix::PrivateKey),
    ("AKIA", Prefix::AwsAccess),
    ("ASIA", Prefix::AwsAccess),
    ("ghp_", Prefix::GithubClassic),
    ("gho_", Prefix::GithubClassic),
    ("ghu_", Prefix::GithubClassic),
    ("ghs_", Prefix::GithubClassic),
    ("ghr_", Prefix::GithubClassic),
    ("github_pat_", Prefix::GithubFine),
    ("glpat-", Prefix::Gitlab),
    ("xoxb-", Prefix::Slack),
    ("xoxa-", Prefix::Slack),
    ("xoxp-", Prefix::Slack),
    ("xoxr-", Prefix::Slack),
    ("xoxs-", Prefix::Slack),
    ("eyJ", Prefix::Jwt),
];

fn prefixes() -> &'static Literals {
    static P: OnceLock<Literals> = OnceLock::new();
    P.get_or_init(|| Literals::new(PREFIXES.iter().map(|(p, _)| p), Kind::LeftmostFirst))
}

/// A search for a set of literal strings: SIMD Teddy where the platform has it (it names the
/// match itself, with no automaton run after each candidate), Aho-Corasick otherwise or for
/// sets too large for Teddy.
pub(super) enum Literals {
    Teddy(packed::Searcher),
    Automaton(AhoCorasick),
}

/// Which match wins at one position.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    LeftmostFirst,
    LeftmostLongest,
}

impl Literals {
    pub(super) fn new<I, P>(patterns: I, kind: Kind) -> Literals
    where
        I: IntoIterator<Item = P>,
        P: AsRef<[u8]>,
    {
        let patterns: Vec<P> = patterns.into_iter().collect();
        let packed_kind = match kind {
            Kind::LeftmostFirst => packed::MatchKind::LeftmostFirst,
            Kind::LeftmostLongest => packed::MatchKind::LeftmostLongest,
        };
        let teddy = packed::Config::new()
            .match_kind(packed_kind)
            .builder()
            .extend(&patterns)
            .build();
        match teddy {
            Some(s) => Literals::Teddy(s),
            None => Literals::Automaton(
                AhoCorasick::builder()
                    .match_kind(match kind {
                        Kind::LeftmostFirst => MatchKind::LeftmostFirst,
                        Kind::LeftmostLongest => MatchKind::LeftmostLongest,
                    })
                    .build(&patterns)
                    .expect("literal strings build an automaton"),
            ),
        }
    }

    /// The first match that starts at or after `at`: (pattern, start, end).
    pub(super) fn find_at(&self, hay: &[u8], at: usize) -> Option<(usize, usize, usize)> {
        let m = match self {
            Literals::Teddy(s) => s.find_in(hay, aho_corasick::Span::from(at..hay.len()))?,
            Literals::Automaton(ac) => ac.find(Input::new(hay).span(at..hay.len()))?,
        };
        Some((m.pattern().as_usize(), m.start(), m.end()))
    }
}

// Byte classes, one bit each in `CLASS`.
/// `[A-Z0-9]`
const UPPER_DIGIT: u8 = 1;
/// `[A-Za-z0-9]`
const ALNUM: u8 = 1 << 1;
/// `[A-Za-z0-9_]`, the ASCII word characters of `(?-u:\b)`.
const WORD: u8 = 1 << 2;
/// `[A-Za-z0-9_-]`
const WORD_DASH: u8 = 1 << 3;
/// `[A-Za-z0-9-]`
const ALNUM_DASH: u8 = 1 << 4;
/// `[A-Za-z0-9/+]`
const AWS_VALUE: u8 = 1 << 5;
/// `[A-Z0-9 ]`
const HEADER: u8 = 1 << 6;
/// An ASCII byte that ends a `generic-secret` value: `\s` or one of ``"'`,;<>(){}[]\``.
const VALUE_STOP: u8 = 1 << 7;

const fn class_table() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        let upper = b.is_ascii_uppercase();
        let lower = b.is_ascii_lowercase();
        let digit = b.is_ascii_digit();
        let alnum = upper || lower || digit;
        let mut c = 0;
        if upper || digit {
            c |= UPPER_DIGIT;
        }
        if alnum {
            c |= ALNUM | WORD | WORD_DASH | ALNUM_DASH | AWS_VALUE;
        }
        if b == b'_' {
            c |= WORD | WORD_DASH;
        }
        if b == b'-' {
            c |= WORD_DASH | ALNUM_DASH;
        }
        if b == b'/' || b == b'+' {
            c |= AWS_VALUE;
        }
        if upper || digit || b == b' ' {
            c |= HEADER;
        }
        if ascii_space(b) {
            c |= VALUE_STOP;
        }
        match b {
            b'"' | b'\'' | b'`' | b',' | b';' | b'<' | b'>' | b'(' | b')' | b'{' | b'}' | b'['
            | b']' | b'\\' => c |= VALUE_STOP,
            _ => {}
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CLASS: [u8; 256] = class_table();

/// ASCII whitespace as Unicode `\s` has it (tab, newline, vertical tab, form feed, return,
/// space).
const fn ascii_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

fn is(b: u8, class: u8) -> bool {
    CLASS[b as usize] & class != 0
}

/// `(?-u:\b)` before position `p` whose byte is a word character: `p` starts the text or the
/// byte before is no ASCII word character.
fn boundary_before(t: &[u8], p: usize) -> bool {
    p == 0 || !is(t[p - 1], WORD)
}

/// How many bytes of `class` follow `from`, counting at most `cap`.
fn run(t: &[u8], from: usize, class: u8, cap: usize) -> usize {
    let end = t.len().min(from.saturating_add(cap));
    t[from.min(end)..end]
        .iter()
        .position(|&b| !is(b, class))
        .unwrap_or(end.saturating_sub(from))
}

/// The end of the run of `class` from `from`, remembered in `cache` as `(start, end)`: any
/// position inside a measured run ends where it does, so candidates inside one long run
/// measure it once.
fn run_end(t: &[u8], from: usize, class: u8, cache: &mut (usize, usize)) -> usize {
    if cache.0 <= from && from <= cache.1 {
        return cache.1;
    }
    let end = from + run(t, from, class, usize::MAX);
    *cache = (from, end);
    end
}

/// The whitespace character (Unicode `\s`) starting at `i`, as its length in bytes.
fn space_at(text: &str, i: usize) -> Option<usize> {
    let b = *text.as_bytes().get(i)?;
    if b < 0x80 {
        return ascii_space(b).then_some(1);
    }
    let c = text[i..].chars().next()?;
    c.is_whitespace().then(|| c.len_utf8())
}

/// The whitespace character ending at `i`, as its length in bytes.
fn space_before(text: &str, i: usize) -> Option<usize> {
    let b = *text.as_bytes().get(i.checked_sub(1)?)?;
    if b < 0x80 {
        return ascii_space(b).then_some(1);
    }
    let c = text[..i].chars().next_back()?;
    c.is_whitespace().then(|| c.len_utf8())
}

/// `\s{0,4}` forwards from `i`: where it ends, or `None` when a fifth whitespace character
/// follows (no match can go on from there).
fn spaces_after(text: &str, mut i: usize) -> Option<usize> {
    for _ in 0..4 {
        match space_at(text, i) {
            Some(n) => i += n,
            None => return Some(i),
        }
    }
    space_at(text, i).is_none().then_some(i)
}

/// `\s{0,4}` backwards from `i`, as [`spaces_after`].
fn spaces_before(text: &str, mut i: usize) -> Option<usize> {
    for _ in 0..4 {
        match space_before(text, i) {
            Some(n) => i -= n,
            None => return Some(i),
        }
    }
    space_before(text, i).is_none().then_some(i)
}

fn quote(b: u8) -> bool {
    b == b'"' || b == b'\''
}

/// Where `word` (lowercase ASCII) starts when it ends at `e` in `t`, compared
/// case-insensitively as `(?i)` does: ASCII case, and `ſ` (U+017F) for `s` and `K` (U+212A)
/// for `k`.
fn back(t: &[u8], e: usize, word: &[u8]) -> Option<usize> {
    let mut i = e;
    for &c in word.iter().rev() {
        let b = *t.get(i.checked_sub(1)?)?;
        if b.to_ascii_lowercase() == c {
            i -= 1;
        } else if b < 0x80 {
            return None;
        } else if c == b's' && i >= 2 && t[i - 2..i] == [0xc5, 0xbf] {
            i -= 2;
        } else if c == b'k' && i >= 3 && t[i - 3..i] == [0xe2, 0x84, 0xaa] {
            i -= 3;
        } else {
            return None;
        }
    }
    Some(i)
}

/// `_?` backwards from `i`.
fn underscore(t: &[u8], i: usize) -> usize {
    if i > 0 && t[i - 1] == b'_' { i - 1 } else { i }
}

/// Whether `(?i:aws_?secret_?access_?key|aws_?secret_?key|aws_?secret)` ends at `e`, read
/// backwards. Each `_?` is taken when it is there: no keyword ends in `_`, so the other
/// reading cannot match.
fn aws_keyword_ends(t: &[u8], e: usize) -> bool {
    let mut i = e;
    if let Some(j) = back(t, i, b"key") {
        i = underscore(t, j);
        if let Some(j) = back(t, i, b"access") {
            i = underscore(t, j);
        }
    }
    back(t, i, b"secret").is_some_and(|j| back(t, underscore(t, j), b"aws").is_some())
}

/// Whether `(?i:password|passwd|secret|token|api_?key|access_?key|auth_?key)` ends at `e`,
/// read backwards from its last letter.
fn generic_keyword_ends(t: &[u8], e: usize) -> bool {
    let Some(last) = t[..e].last() else {
        return false;
    };
    match last.to_ascii_lowercase() {
        b'd' => back(t, e, b"word")
            .or_else(|| back(t, e, b"wd"))
            .is_some_and(|j| back(t, j, b"pass").is_some()),
        b't' => back(t, e, b"secret").is_some(),
        b'n' => back(t, e, b"token").is_some(),
        b'y' => back(t, e, b"key").is_some_and(|j| {
            let j = underscore(t, j);
            [&b"api"[..], b"access", b"auth"]
                .iter()
                .any(|w| back(t, j, w).is_some())
        }),
        _ => false,
    }
}

/// The scan's state: the text, the finds so far, and the runs measured once.
struct Scan<'t> {
    text: &'t str,
    t: &'t [u8],
    found: Vec<Finding>,
    jwt_runs: [(usize, usize); 3],
    /// The last search for a private key's END line: from where, and the first END found
    /// (`None`: none to the end of the text).
    end_line: Option<(usize, Option<(usize, usize)>)>,
}

/// Every find of the built-in rules in `text`, unmerged and unsorted.
pub(super) fn rules(text: &str) -> Vec<Finding> {
    let mut s = Scan {
        text,
        t: text.as_bytes(),
        found: Vec::new(),
        jwt_runs: [(usize::MAX, 0); 3],
        end_line: None,
    };
    s.prefixed();
    s.assignments();
    s.found
}

impl Scan<'_> {
    fn push(&mut self, rule: usize, start: usize, end: usize) {
        self.found.push(Finding {
            rule: RULES[rule].id,
            start,
            end,
        });
    }

    /// Every fixed prefix, each checked by its own rule. The search goes on from the byte
    /// after each prefix found, so prefixes that overlap (`glpat-----BEGIN`) are all seen.
    fn prefixed(&mut self) {
        let ac = prefixes();
        let n = self.t.len();
        let mut at = 0;
        while at < n {
            let Some((pattern, p, _)) = ac.find_at(self.t, at) else {
                break;
            };
            at = p + 1;
            let hit = match PREFIXES[pattern].1 {
                Prefix::PrivateKey => self.private_key(p).map(|e| (PRIVATE_KEY, e)),
                Prefix::AwsAccess => self.aws_access_key(p).map(|e| (AWS_ACCESS_KEY, e)),
                Prefix::GithubClassic => self.github_classic(p).map(|e| (GITHUB_TOKEN, e)),
                Prefix::GithubFine => self.github_fine(p).map(|e| (GITHUB_TOKEN, e)),
                Prefix::Gitlab => self.gitlab(p).map(|e| (GITLAB_TOKEN, e)),
                Prefix::Slack => self.slack(p).map(|e| (SLACK_TOKEN, e)),
                Prefix::Jwt => self.jwt(p).map(|e| (JWT, e)),
            };
            if let Some((rule, end)) = hit {
                self.push(rule, p, end);
            }
        }
    }

    /// `(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)` at `p`.
    fn aws_access_key(&self, p: usize) -> Option<usize> {
        let t = self.t;
        let end = p + 20;
        (boundary_before(t, p)
            && run(t, p + 4, UPPER_DIGIT, 16) == 16
            && t.get(end).is_none_or(|&b| !is(b, WORD)))
        .then_some(end)
    }

    /// `(?-u:\b)gh[pousr]_[A-Za-z0-9]{36,255}(?-u:\b)` at `p`: the run of letters and digits
    /// is 36 to 255 long and no `_` follows it.
    fn github_classic(&self, p: usize) -> Option<usize> {
        let t = self.t;
        let n = run(t, p + 4, ALNUM, 256);
        let end = p + 4 + n;
        (boundary_before(t, p) && (36..=255).contains(&n) && t.get(end) != Some(&b'_'))
            .then_some(end)
    }

    /// `(?-u:\b)github_pat_[A-Za-z0-9_]{22,255}(?-u:\b)` at `p`: the run is every word
    /// character, so the boundary after it holds once it is 22 to 255 long.
    fn github_fine(&self, p: usize) -> Option<usize> {
        let t = self.t;
        let n = run(t, p + 11, WORD, 256);
        (boundary_before(t, p) && (22..=255).contains(&n)).then_some(p + 11 + n)
    }

    /// `(?-u:\b)glpat-[A-Za-z0-9_-]{20,64}` at `p`.
    fn gitlab(&self, p: usize) -> Option<usize> {
        let n = run(self.t, p + 6, WORD_DASH, 64);
        (boundary_before(self.t, p) && n >= 20).then_some(p + 6 + n)
    }

    /// `(?-u:\b)xox[baprs]-[A-Za-z0-9-]{10,255}` at `p`.
    fn slack(&self, p: usize) -> Option<usize> {
        let n = run(self.t, p + 5, ALNUM_DASH, 255);
        (boundary_before(self.t, p) && n >= 10).then_some(p + 5 + n)
    }

    /// `(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*` at `p`.
    fn jwt(&mut self, p: usize) -> Option<usize> {
        let t = self.t;
        if !boundary_before(t, p) {
            return None;
        }
        let a = run_end(t, p + 3, WORD_DASH, &mut self.jwt_runs[0]);
        if a - (p + 3) < 8 || t.get(a) != Some(&b'.') || !t[a + 1..].starts_with(b"eyJ") {
            return None;
        }
        let b = run_end(t, a + 4, WORD_DASH, &mut self.jwt_runs[1]);
        if b - (a + 4) < 8 || t.get(b) != Some(&b'.') {
            return None;
        }
        Some(run_end(t, b + 1, WORD_DASH, &mut self.jwt_runs[2]))
    }

    /// A private key block at `p` (`-----BEGIN`): the header, then the body to the first END
    /// line or, when there is none, to the end of the text.
    fn private_key(&mut self, p: usize) -> Option<usize> {
        let body = key_line(self.t, p + "-----BEGIN".len())?;
        Some(match self.end_line_from(body) {
            Some((_, end)) => end,
            None => self.t.len(),
        })
    }

    /// The first END line at or after `from` (its start and end). The answer of the last
    /// search is reused while `from` stays before the END it found (a key's header inside
    /// another key's body finds the same END), so each part of the text is searched once.
    fn end_line_from(&mut self, from: usize) -> Option<(usize, usize)> {
        if let Some((searched, found)) = self.end_line
            && searched <= from
            && found.is_none_or(|(start, _)| from <= start)
        {
            return found;
        }
        let t = self.t;
        let finder = memmem::Finder::new(b"-----END");
        let mut at = from;
        let found = loop {
            let Some(i) = finder.find(&t[at..]) else {
                break None;
            };
            let q = at + i;
            if let Some(end) = key_line(t, q + "-----END".len()) {
                break Some((q, end));
            }
            at = q + 1;
        };
        self.end_line = Some((from, found));
        found
    }

    /// Both assignment rules at each `:` and `=`.
    fn assignments(&mut self) {
        let t = self.t;
        for j in memchr::memchr2_iter(b':', b'=', t) {
            // `["']?\s{0,4}` before the first `[:=]`, back to where the keyword and its
            // suffix end.
            let Some(mut q) = spaces_before(self.text, j) else {
                continue;
            };
            if q > 0 && quote(t[q - 1]) {
                q -= 1;
            }
            if q == 0 || !is(t[q - 1], WORD_DASH) {
                continue;
            }
            if aws_keyword_ends(t, q)
                && let Some((s, e)) = self.aws_value(j)
                && confirmed(RULES[AWS_SECRET_KEY].confirm, &self.text[s..e])
            {
                self.push(AWS_SECRET_KEY, s, e);
            }
            if self.generic_keyword(q)
                && let Some((s, e)) = self.generic_value(j)
                && confirmed(RULES[GENERIC_SECRET].confirm, &self.text[s..e])
            {
                self.push(GENERIC_SECRET, s, e);
            }
        }
    }

    /// A `generic-secret` keyword followed by `[A-Za-z0-9_-]{0,20}` that ends at `q`.
    fn generic_keyword(&self, q: usize) -> bool {
        let t = self.t;
        let mut e = q;
        for _ in 0..=20 {
            if generic_keyword_ends(t, e) {
                return true;
            }
            if e == 0 || !is(t[e - 1], WORD_DASH) {
                return false;
            }
            e -= 1;
        }
        false
    }

    /// `[:=]{1,2}\s{0,4}["']?` from `j`: where a value starts, for each way the first part can
    /// be read (two separators first, as the greedy pattern tries them).
    fn value_starts(&self, j: usize) -> [Option<usize>; 2] {
        let t = self.t;
        let after = |k: usize| {
            let v = spaces_after(self.text, k)?;
            Some(if t.get(v).is_some_and(|&b| quote(b)) {
                v + 1
            } else {
                v
            })
        };
        if t.get(j + 1).is_some_and(|&b| b == b':' || b == b'=') {
            [after(j + 2), after(j + 1)]
        } else {
            [after(j + 1), None]
        }
    }

    /// `(?P<v>[A-Za-z0-9/+]{40})(?-u:\b)` after the separator at `j`.
    fn aws_value(&self, j: usize) -> Option<(usize, usize)> {
        let t = self.t;
        // A value never starts with `:` or `=`, so only the greedy reading can match.
        let v = self.value_starts(j)[0]?;
        let e = v + 40;
        if run(t, v, AWS_VALUE, 40) != 40 {
            return None;
        }
        let last_word = is(t[e - 1], WORD);
        let next_word = t.get(e).is_some_and(|&b| is(b, WORD));
        (last_word != next_word).then_some((v, e))
    }

    /// `(?P<v>[^\s"'`,;<>(){}\[\]\\]{12,256})` after the separator at `j`.
    fn generic_value(&self, j: usize) -> Option<(usize, usize)> {
        self.value_starts(j)
            .into_iter()
            .flatten()
            .find_map(|v| self.generic_run(v).map(|e| (v, e)))
    }

    /// The end of a `generic-secret` value starting at `v`: at most 256 characters, at least 12.
    fn generic_run(&self, v: usize) -> Option<usize> {
        let t = self.t;
        let mut i = v;
        let mut chars = 0;
        while chars < 256 && i < t.len() {
            let b = t[i];
            if b < 0x80 {
                if is(b, VALUE_STOP) {
                    break;
                }
                i += 1;
            } else {
                let c = self.text[i..].chars().next()?;
                if c.is_whitespace() {
                    break;
                }
                i += c.len_utf8();
            }
            chars += 1;
        }
        (chars >= 12).then_some(i)
    }
}

/// The rest of a BEGIN or END line from `at` (just after `-----BEGIN` or `-----END`):
/// `[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----`, the longest reading first, as the greedy
/// pattern has it. Its end.
fn key_line(t: &[u8], at: usize) -> Option<usize> {
    let n = run(t, at, HEADER, 40);
    (0..=n).rev().find_map(|k| {
        // The ` PRIVATE KEY` that follows starts with a space: skip the other bytes at once.
        if t.get(at + k) != Some(&b' ') {
            return None;
        }
        let rest = t.get(at + k..)?;
        let rest = rest.strip_prefix(b" PRIVATE KEY")?;
        let tail = at + k + " PRIVATE KEY".len();
        if rest.starts_with(b" BLOCK-----") {
            Some(tail + " BLOCK-----".len())
        } else if rest.starts_with(b"-----") {
            Some(tail + "-----".len())
        } else {
            None
        }
    })
}
