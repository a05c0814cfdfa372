//! The matcher behind [`super::Scanner::scan_text`]: every rule of [`RULES`] found by
//! hand-written byte checks instead of by running its pattern.
//!
//! Two passes over the text name each candidate's rule as they find it, so each candidate is
//! checked once, by its own rule:
//!
//! * one Aho-Corasick search (SIMD Teddy on x86_64 and aarch64) for the fixed prefixes
//!   (`-----BEGIN`, `sk-`, `AKIA`..., `AIza`, `ghp_`..., `glpat-`..., `xox`, `npm_`, `eyJ`, ...):
//!   each prefix belongs to one rule (`sk-` to the Anthropic and OpenAI rules, told apart by
//!   the bytes after it), whose shape is then checked byte by byte (a word boundary before, a
//!   run of the rule's characters of the right length, the boundary after);
//! * one `memchr` search for `:`, `=` and `~`: `:` and `=` are the byte every assignment rule
//!   (`aws-secret-key`, `azure-storage-key`, `generic-secret`) needs, whose keyword is looked
//!   for backwards from it (only where a keyword can end) and whose value forwards; `~` is the
//!   middle of an Azure AD client secret (`…8Q~…`), checked both ways from it.
//!
//! Entropy is computed last, once the cheap checks passed.
//!
//! Hand-written because a regular expression spends its time here deciding, at each candidate,
//! which of the alternatives matched and where the value group is: the combined pattern ran at
//! 69 MB/s on text with a near-miss every 13 bytes, and these checks need no state beyond a few
//! bytes around the candidate. The patterns in [`super::rules`](mod@super::rules) stay the specification: the
//! unit tests compare this matcher with them compiled by `regex` on generated texts, and each
//! check below says which part of its pattern it is (`\s` is Unicode whitespace and `(?i)` folds
//! `ſ` to `s` and `K` (Kelvin) to `k`, as in the patterns).
//!
//! Every candidate is judged on its own (a candidate inside another rule's match is still
//! checked; overlapping finds are merged by the caller), and every check is bounded: a run of
//! unbounded or long length (a JWT's segments, a private key's body, a token's characters) is
//! measured once and reused by the candidates inside it, so the scan stays linear on any text.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, Input, MatchKind, packed};
use memchr::memmem;

use super::rules::RULES;
use super::{Find, confirmed};

mod bytes;

use bytes::*;

/// Index in [`RULES`] of each rule (checked by a unit test).
pub(super) const PRIVATE_KEY: usize = 0;
pub(super) const PUTTY_KEY: usize = 1;
pub(super) const ANTHROPIC_API: usize = 2;
pub(super) const ANTHROPIC_ADMIN: usize = 3;
pub(super) const OPENAI: usize = 4;
pub(super) const AWS_ACCESS_KEY: usize = 5;
pub(super) const AWS_SECRET_KEY: usize = 6;
pub(super) const AWS_BEDROCK: usize = 7;
pub(super) const AZURE_STORAGE: usize = 8;
pub(super) const AZURE_AD: usize = 9;
pub(super) const GOOGLE_API: usize = 10;
pub(super) const GOOGLE_OAUTH: usize = 11;
pub(super) const GITHUB_TOKEN: usize = 12;
pub(super) const GITLAB_TOKEN: usize = 13;
pub(super) const SLACK_TOKEN: usize = 14;
pub(super) const SLACK_WEBHOOK: usize = 15;
pub(super) const STRIPE: usize = 16;
pub(super) const NPM: usize = 17;
pub(super) const PYPI: usize = 18;
pub(super) const JWT: usize = 19;
pub(super) const GENERIC_SECRET: usize = 20;

/// What a fixed prefix starts.
#[derive(Clone, Copy)]
enum Prefix {
    PrivateKey,
    Putty,
    /// `sk-`: Anthropic or OpenAI.
    Sk,
    AwsAccess,
    AwsA3t,
    BedrockLong,
    BedrockShort,
    GoogleApi,
    GoogleOauth,
    GithubClassic,
    GithubFine,
    /// `gl...-`: the token's characters start right after the prefix.
    Gitlab,
    GitlabRunner,
    GitlabSession,
    /// `xox`: the kind letter (or `e.xoxb`/`e.xoxp`) follows.
    Slack,
    SlackApp,
    SlackHook,
    Stripe,
    Npm,
    NpmAuth,
    Pypi,
    Jwt,
}

/// Every fixed prefix a rule starts with, and what it starts. No prefix is shorter than three
/// bytes, so Teddy keeps its three-byte fingerprints; no two can start at the same position.
const PREFIXES: &[(&str, Prefix)] = &[
    ("-----BEGIN", Prefix::PrivateKey),
    ("PuTTY-User-Key-File-", Prefix::Putty),
    ("sk-", Prefix::Sk),
    ("AKIA", Prefix::AwsAccess),
    ("ASIA", Prefix::AwsAccess),
    ("ABIA", Prefix::AwsAccess),
    ("ACCA", Prefix::AwsAccess),
    ("A3T", Prefix::AwsA3t),
    ("ABSK", Prefix::BedrockLong),
    (
        "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t",
        Prefix::BedrockShort,
    ),
    ("AIza", Prefix::GoogleApi),
    ("GOCSPX-", Prefix::GoogleOauth),
    ("ghp_", Prefix::GithubClassic),
    ("gho_", Prefix::GithubClassic),
    ("ghu_", Prefix::GithubClassic),
    ("ghs_", Prefix::GithubClassic),
    ("ghr_", Prefix::GithubClassic),
    ("github_pat_", Prefix::GithubFine),
    ("glpat-", Prefix::Gitlab),
    ("gldt-", Prefix::Gitlab),
    ("glrt-", Prefix::Gitlab),
    ("glptt-", Prefix::Gitlab),
    ("glcbt-", Prefix::Gitlab),
    ("gloas-", Prefix::Gitlab),
    ("glft-", Prefix::Gitlab),
    ("glimt-", Prefix::Gitlab),
    ("glagent-", Prefix::Gitlab),
    ("glffct-", Prefix::Gitlab),
    ("glsoat-", Prefix::Gitlab),
    ("GR1348941", Prefix::GitlabRunner),
    ("_gitlab_session=", Prefix::GitlabSession),
    ("xox", Prefix::Slack),
    ("xapp-", Prefix::SlackApp),
    ("hooks.slack.com/", Prefix::SlackHook),
    ("sk_", Prefix::Stripe),
    ("rk_", Prefix::Stripe),
    ("npm_", Prefix::Npm),
    ("_authToken", Prefix::NpmAuth),
    ("pypi-Ag", Prefix::Pypi),
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

/// The first place at or after a position where a closing line of a block starts (a private
/// key's END line, a PuTTY key's `Private-MAC:`), remembered: the answer of the last search is
/// reused while the position stays before what it found (a header inside another block's body
/// finds the same close), so each part of the text is searched once.
#[derive(Default)]
struct Close {
    /// From where the last search ran, and what it found (start and end), `None` for nothing
    /// to the end of the text.
    last: Option<(usize, Option<(usize, usize)>)>,
}

impl Close {
    /// The first `needle` at or after `from` that `line` accepts (it gives the close's end).
    fn find(
        &mut self,
        t: &[u8],
        from: usize,
        needle: &[u8],
        line: impl Fn(&[u8], usize) -> Option<usize>,
    ) -> Option<(usize, usize)> {
        if let Some((searched, found)) = self.last
            && searched <= from
            && found.is_none_or(|(start, _)| from <= start)
        {
            return found;
        }
        let finder = memmem::Finder::new(needle);
        let mut at = from;
        let found = loop {
            let Some(i) = finder.find(&t[at..]) else {
                break None;
            };
            let q = at + i;
            if let Some(end) = line(t, q) {
                break Some((q, end));
            }
            at = q + 1;
        };
        self.last = Some((from, found));
        found
    }
}

/// The scan's state: the text, the finds so far, and the runs measured once.
struct Scan<'t> {
    text: &'t str,
    t: &'t [u8],
    found: Vec<Find>,
    jwt_runs: [(usize, usize); 3],
    /// The last measured run of each class, by the class's bit.
    runs: [(usize, usize); 32],
    end_line: Close,
    putty_mac: Close,
}

/// Every find of the built-in rules in `text`, unmerged and unsorted.
pub(super) fn rules(text: &str) -> Vec<Find> {
    let mut s = Scan {
        text,
        t: text.as_bytes(),
        found: Vec::new(),
        jwt_runs: [(usize::MAX, 0); 3],
        runs: [(usize::MAX, 0); 32],
        end_line: Close::default(),
        putty_mac: Close::default(),
    };
    s.prefixed();
    s.separators();
    s.found
}

impl Scan<'_> {
    /// Records a find of `rule` over `start..end` if its confirmation passes.
    fn push(&mut self, rule: usize, start: usize, end: usize) {
        if confirmed(RULES[rule].confirm, &self.text[start..end]) {
            self.found.push(Find {
                rule: RULES[rule].id,
                start,
                end,
            });
        }
    }

    /// `[class]{min,cap}` from `from` (greedy, no anchor after it): its end, or `None` when
    /// fewer than `min` bytes of `class` follow. The run is measured once for every candidate
    /// inside it.
    fn body(&mut self, from: usize, class: u32, min: usize, cap: usize) -> Option<usize> {
        let slot = class.trailing_zeros() as usize;
        let end = run_end(self.t, from, class, &mut self.runs[slot]);
        let n = (end - from).min(cap);
        (n >= min).then_some(from + n)
    }

    /// Every fixed prefix, each checked by its own rule. The search goes on from the byte
    /// after each prefix found, so prefixes that overlap (`glpat-----BEGIN`) are all seen.
    fn prefixed(&mut self) {
        let ac = prefixes();
        let n = self.t.len();
        let mut at = 0;
        while at < n {
            let Some((pattern, p, e)) = ac.find_at(self.t, at) else {
                break;
            };
            at = p + 1;
            let hit = match PREFIXES[pattern].1 {
                Prefix::PrivateKey => self.private_key(p).map(|e| (PRIVATE_KEY, p, e)),
                Prefix::Putty => self.putty(e).map(|e| (PUTTY_KEY, p, e)),
                Prefix::Sk => self.sk(p),
                Prefix::AwsAccess => self.aws_access_key(p, e, 16),
                Prefix::AwsA3t => self.aws_access_key(p, e, 17),
                Prefix::BedrockLong => self.bedrock_long(p, e),
                Prefix::BedrockShort => {
                    let end = padding(self.t, e + run(self.t, e, B64, 4096));
                    Some((AWS_BEDROCK, p, end))
                }
                Prefix::GoogleApi => self.token(GOOGLE_API, p, e, WORD_DASH, 35, 64),
                Prefix::GoogleOauth => self.token(GOOGLE_OAUTH, p, e, WORD_DASH, 28, 64),
                Prefix::GithubClassic => self.github_classic(p, e),
                Prefix::GithubFine => self.github_fine(p, e),
                Prefix::Gitlab => self.gitlab(p, e),
                Prefix::GitlabRunner => self.token(GITLAB_TOKEN, p, e, WORD_DASH, 20, 64),
                Prefix::GitlabSession => {
                    (run(self.t, e, LOWER_DIGIT, 32) == 32).then_some((GITLAB_TOKEN, e, e + 32))
                }
                Prefix::Slack => self.slack(p),
                Prefix::SlackApp => self.token(SLACK_TOKEN, p, e, ALNUM_DASH, 10, 255),
                Prefix::SlackHook => self.slack_hook(e),
                Prefix::Stripe => self.stripe(p, e),
                Prefix::Npm => self.npm(p, e),
                Prefix::NpmAuth => self.npm_auth(e),
                Prefix::Pypi => self.pypi(p, e),
                Prefix::Jwt => self.jwt(p).map(|e| (JWT, p, e)),
            };
            if let Some((rule, start, end)) = hit {
                self.push(rule, start, end);
            }
        }
    }

    /// `(?-u:\b)PREFIX[class]{min,cap}`, the prefix at `p` ending at `e`.
    fn token(
        &mut self,
        rule: usize,
        p: usize,
        e: usize,
        class: u32,
        min: usize,
        cap: usize,
    ) -> Option<(usize, usize, usize)> {
        if !boundary_before(self.t, p) {
            return None;
        }
        self.body(e, class, min, cap).map(|end| (rule, p, end))
    }

    /// After `sk-` at `p`: `sk-ant-(?:api|oat|ort|sid)[0-9]{2}-[A-Za-z0-9_-]{32,255}`,
    /// `sk-ant-admin[0-9]{2}-[A-Za-z0-9_-]{32,255}`, `sk-(?:proj|svcacct|admin|None)-`
    /// `[A-Za-z0-9_-]{40,255}` or `sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}(?-u:\b)`, each
    /// after `(?-u:\b)`.
    fn sk(&mut self, p: usize) -> Option<(usize, usize, usize)> {
        let t = self.t;
        if !boundary_before(t, p) {
            return None;
        }
        let rest = &t[p + 3..];
        if let Some(kind) = rest.strip_prefix(b"ant-") {
            let (rule, word) = if kind.starts_with(b"admin") {
                (ANTHROPIC_ADMIN, 5)
            } else if [&b"api"[..], b"oat", b"ort", b"sid"]
                .iter()
                .any(|w| kind.starts_with(w))
            {
                (ANTHROPIC_API, 3)
            } else {
                return None;
            };
            let version = p + 7 + word;
            if run(t, version, DIGIT, 2) != 2 || t.get(version + 2) != Some(&b'-') {
                return None;
            }
            return self
                .body(version + 3, WORD_DASH, 32, 255)
                .map(|e| (rule, p, e));
        }
        for kind in [&b"proj-"[..], b"svcacct-", b"admin-", b"None-"] {
            if rest.starts_with(kind) {
                return self
                    .body(p + 3 + kind.len(), WORD_DASH, 40, 255)
                    .map(|e| (OPENAI, p, e));
            }
        }
        let end = p + 51;
        (run(t, p + 3, ALNUM, 49) == 48
            && &t[p + 23..p + 31] == b"T3BlbkFJ"
            && t.get(end) != Some(&b'_'))
        .then_some((OPENAI, p, end))
    }

    /// `(?-u:\b)(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?-u:\b)` at `p`: `n` more
    /// `[A-Z0-9]` after the prefix that ends at `e` (17 after `A3T`, 16 after the others).
    fn aws_access_key(&self, p: usize, e: usize, n: usize) -> Option<(usize, usize, usize)> {
        let t = self.t;
        let end = e + n;
        (boundary_before(t, p) && run(t, e, UPPER_DIGIT, n) == n && boundary_after(t, end))
            .then_some((AWS_ACCESS_KEY, p, end))
    }

    /// `(?-u:\b)ABSK[A-Za-z0-9+/]{109,269}={0,2}` at `p`.
    fn bedrock_long(&self, p: usize, e: usize) -> Option<(usize, usize, usize)> {
        let n = run(self.t, e, B64, 269);
        (boundary_before(self.t, p) && n >= 109).then(|| (AWS_BEDROCK, p, padding(self.t, e + n)))
    }

    /// `(?-u:\b)gh[pousr]_[A-Za-z0-9]{36,255}(?-u:\b)` at `p`: the run of letters and digits
    /// is 36 to 255 long and no `_` follows it.
    fn github_classic(&self, p: usize, e: usize) -> Option<(usize, usize, usize)> {
        let t = self.t;
        let n = run(t, e, ALNUM, 256);
        let end = e + n;
        (boundary_before(t, p) && (36..=255).contains(&n) && t.get(end) != Some(&b'_')).then_some((
            GITHUB_TOKEN,
            p,
            end,
        ))
    }

    /// `(?-u:\b)github_pat_[A-Za-z0-9_]{22,255}(?-u:\b)` at `p`: the run is every word
    /// character, so the boundary after it holds once it is 22 to 255 long.
    fn github_fine(&self, p: usize, e: usize) -> Option<(usize, usize, usize)> {
        let n = run(self.t, e, WORD, 256);
        (boundary_before(self.t, p) && (22..=255).contains(&n)).then_some((GITHUB_TOKEN, p, e + n))
    }

    /// `(?-u:\b)gl(?:pat|dt|...)-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{9})?` at `p`: the routable
    /// form's `.` and nine characters are taken when they follow.
    fn gitlab(&mut self, p: usize, e: usize) -> Option<(usize, usize, usize)> {
        let (_, _, mut end) = self.token(GITLAB_TOKEN, p, e, WORD_DASH, 20, 300)?;
        if self.t.get(end) == Some(&b'.') && run(self.t, end + 1, LOWER_DIGIT, 9) == 9 {
            end += 10;
        }
        Some((GITLAB_TOKEN, p, end))
    }

    /// `(?-u:\b)(?:xox[abeoprs]|xoxe\.xox[bp])-[A-Za-z0-9-]{10,255}` at `p` (`xox`).
    fn slack(&mut self, p: usize) -> Option<(usize, usize, usize)> {
        let t = self.t;
        let rest = &t[p + 3..];
        let body = match rest {
            [b'a' | b'b' | b'e' | b'o' | b'p' | b'r' | b's', b'-', ..] => p + 5,
            [b'e', b'.', b'x', b'o', b'x', b'b' | b'p', b'-', ..] => p + 10,
            _ => return None,
        };
        self.token(SLACK_TOKEN, p, body, ALNUM_DASH, 10, 255)
    }

    /// `hooks\.slack\.com/(?P<v>(?:services|workflows|triggers)/[A-Za-z0-9_/+]{43,120})`
    /// after the host ending at `e`: the path.
    fn slack_hook(&self, e: usize) -> Option<(usize, usize, usize)> {
        let rest = &self.t[e..];
        let kind = [&b"services/"[..], b"workflows/", b"triggers/"]
            .into_iter()
            .find(|k| rest.starts_with(k))?;
        let n = run(self.t, e + kind.len(), HOOK, 120);
        (n >= 43).then_some((SLACK_WEBHOOK, e, e + kind.len() + n))
    }

    /// `(?-u:\b)[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,255}` at `p` (`sk_` or `rk_`).
    fn stripe(&self, p: usize, e: usize) -> Option<(usize, usize, usize)> {
        let rest = &self.t[e..];
        if !boundary_before(self.t, p)
            || ![&b"live_"[..], b"test_", b"prod_"]
                .iter()
                .any(|k| rest.starts_with(k))
        {
            return None;
        }
        let n = run(self.t, e + 5, ALNUM, 255);
        (n >= 10).then_some((STRIPE, p, e + 5 + n))
    }

    /// `(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)` at `p`.
    fn npm(&self, p: usize, e: usize) -> Option<(usize, usize, usize)> {
        let end = e + 36;
        (boundary_before(self.t, p)
            && run(self.t, e, ALNUM, 37) == 36
            && self.t.get(end) != Some(&b'_'))
        .then_some((NPM, p, end))
    }

    /// `_authToken\s{0,4}=\s{0,4}(?P<v>[A-Za-z0-9._~+/=-]{16,512})` after `_authToken`
    /// ending at `e`: the value.
    fn npm_auth(&self, e: usize) -> Option<(usize, usize, usize)> {
        let k = spaces_after(self.text, e)?;
        if self.t.get(k) != Some(&b'=') {
            return None;
        }
        let v = spaces_after(self.text, k + 1)?;
        let n = run(self.t, v, NPM_VALUE, 512);
        (n >= 16).then_some((NPM, v, v + n))
    }

    /// `(?-u:\b)pypi-Ag(?:EIcHlwaS5vcmc|ENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,1000}` at `p`.
    fn pypi(&mut self, p: usize, e: usize) -> Option<(usize, usize, usize)> {
        let rest = &self.t[e..];
        let host = [&b"EIcHlwaS5vcmc"[..], b"ENdGVzdC5weXBpLm9yZw"]
            .into_iter()
            .find(|h| rest.starts_with(h))?;
        self.token(PYPI, p, e + host.len(), WORD_DASH, 50, 1000)
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
        let end = self
            .end_line
            .find(self.t, body, b"-----END", |t, q| key_line(t, q + 8));
        Some(end.map_or(self.t.len(), |(_, e)| e))
    }

    /// A PuTTY key after `PuTTY-User-Key-File-` (ending at `e`): `[0-9]{1,3}: `, then the
    /// body to the first `Private-MAC: ` and up to 128 hex digits after it, or to the end of
    /// the text.
    fn putty(&mut self, e: usize) -> Option<usize> {
        let n = run(self.t, e, DIGIT, 3);
        if n == 0 || !self.t[e + n..].starts_with(b": ") {
            return None;
        }
        let mac = b"Private-MAC: ";
        let end = self.putty_mac.find(self.t, e + n + 2, mac, |t, q| {
            Some(q + mac.len() + run(t, q + mac.len(), HEX, 128))
        });
        Some(end.map_or(self.t.len(), |(_, e)| e))
    }

    /// The assignment rules at each `:` and `=`, and Azure AD client secrets at each `~`.
    fn separators(&mut self) {
        let t = self.t;
        for j in memchr::memchr3_iter(b':', b'=', b'~', t) {
            if t[j] == b'~' {
                if let Some((s, e)) = self.azure_ad(j) {
                    self.push(AZURE_AD, s, e);
                }
                continue;
            }
            // `["']?\s{0,4}` before the first `[:=]`, back to where the keyword and its
            // suffix end.
            let Some(mut q) = spaces_before(self.text, j) else {
                continue;
            };
            if q > 0 && quote(t[q - 1]) {
                q -= 1;
            }
            // Every keyword ends in a letter (a generic one may take name characters after
            // it); `aws...pass` may end in `ſ`, which `(?i)` reads as `s`.
            let long_s = q >= 2 && t[q - 2..q] == [0xc5, 0xbf];
            if q == 0 || !(is(t[q - 1], WORD_DASH) || long_s) {
                continue;
            }
            let last = if long_s {
                b's'
            } else {
                t[q - 1].to_ascii_lowercase()
            };
            if aws_keyword_ends(t, q, last)
                && let Some((s, e)) = self.b64_value(j, 40)
                && boundary_after_value(t, e)
            {
                self.push(AWS_SECRET_KEY, s, e);
            }
            if last == b'y'
                && azure_keyword_ends(t, q)
                && let Some((s, e)) = self.b64_value(j, 86)
                && t[e..].starts_with(b"==")
            {
                self.push(AZURE_STORAGE, s, e + 2);
            }
            if !long_s
                && self.generic_keyword(q)
                && let Some((s, e)) = self.generic_value(j)
            {
                self.push(GENERIC_SECRET, s, e);
            }
        }
    }

    /// The `azure-ad-client-secret` pattern around the `~` at `j`: `[A-Za-z0-9_~.]{3}`, a
    /// digit, `Q~` and `[A-Za-z0-9_~.-]{31,34}`, with the start of the text, a space or one of
    /// the delimiters the pattern lists before it and the end, a space or a delimiter after:
    /// the secret's span.
    fn azure_ad(&self, j: usize) -> Option<(usize, usize)> {
        let t = self.t;
        let s = j.checked_sub(5)?;
        if t[j - 1] != b'Q' || !is(t[j - 2], DIGIT) || run(t, s, AZ_LEAD, 3) != 3 {
            return None;
        }
        if s > 0 && !is(t[s - 1], AZ_BEFORE) && space_before(self.text, s).is_none() {
            return None;
        }
        let n = run(t, j + 1, AZ_BODY, 35);
        let e = j + 1 + n;
        let after = e == t.len() || is(t[e], AZ_AFTER) || space_at(self.text, e).is_some();
        ((31..=34).contains(&n) && after).then_some((s, e))
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

    /// `[A-Za-z0-9/+]{n}` after the separator at `j`: its span. A value never starts with `:`
    /// or `=`, so only the greedy reading of the separators can match.
    fn b64_value(&self, j: usize, n: usize) -> Option<(usize, usize)> {
        let v = self.value_starts(j)[0]?;
        (run(self.t, v, B64, n) == n).then_some((v, v + n))
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
