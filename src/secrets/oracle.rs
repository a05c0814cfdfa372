//! Test oracles for the hand-written matcher: the ruleset's patterns run by `regex`, two ways.
//!
//! [`previous`] is the scanner as it was before `scan.rs` (one combined pattern, the first rule
//! winning at each position, a value that is itself a secret found again from its start), so a
//! test can show that nothing it found is lost. [`per_rule`] runs each rule's pattern alone
//! over the whole text, so a find one rule's match would have hidden from another still counts.
//! A rule's search goes on from the end of its secret (its `v`), so the delimiter after one
//! Azure AD client secret can be the delimiter before the next.

use std::sync::OnceLock;

use regex::{Regex, RegexSet};

use super::rules::{Confirm, RULES};
use super::{Find, confirmed};

struct Compiled {
    combined: Regex,
    set: RegexSet,
    anchored: Vec<Regex>,
    alone: Vec<Regex>,
}

fn compiled() -> &'static Compiled {
    static C: OnceLock<Compiled> = OnceLock::new();
    C.get_or_init(|| {
        let alone: Vec<String> = RULES.iter().map(|r| format!("(?:{})", r.pattern)).collect();
        let combined = alone
            .iter()
            .map(|p| p.replace("(?P<v>", "(?:"))
            .collect::<Vec<_>>()
            .join("|");
        let anchored: Vec<String> = alone.iter().map(|p| format!("^{p}$")).collect();
        Compiled {
            combined: Regex::new(&combined).unwrap(),
            set: RegexSet::new(&anchored).unwrap(),
            anchored: anchored.iter().map(|p| Regex::new(p).unwrap()).collect(),
            alone: alone.iter().map(|p| Regex::new(p).unwrap()).collect(),
        }
    })
}

/// The secret's span of a match: its `v` group when the rule has one and it took part.
fn value_span(whole: (usize, usize), v: Option<regex::Match<'_>>) -> (usize, usize) {
    match v {
        Some(v) => (v.start(), v.end()),
        None => whole,
    }
}

/// What the scanner found before `scan.rs` (built-in rules only, unmerged).
pub(super) fn previous(text: &str) -> Vec<Find> {
    let c = compiled();
    let mut found = Vec::new();
    let mut at = 0;
    while at <= text.len() {
        let Some(m) = c.combined.find_at(text, at) else {
            break;
        };
        let span = m.as_str();
        if let Some(i) = c.set.matches(span).iter().next() {
            let g = c.anchored[i].captures(span).unwrap();
            let (s, e) = value_span((0, span.len()), g.name("v"));
            let (s, e) = (m.start() + s, m.start() + e);
            let ok = confirmed(RULES[i].confirm, &text[s..e]);
            // (Only an assignment's value can be a secret of its own; a rule whose `v` is
            // cut out of its delimiters would match its own `v` again.)
            let assignment = matches!(RULES[i].confirm, Confirm::Entropy { .. });
            if ok && assignment && s > m.start() && c.combined.is_match(&text[s..e]) {
                at = s;
                continue;
            }
            if ok {
                found.push(Find {
                    rule: RULES[i].id,
                    start: s,
                    end: e,
                });
            }
        }
        at = m.end().max(m.start() + 1);
        while !text.is_char_boundary(at.min(text.len())) {
            at += 1;
        }
    }
    found
}

/// Each rule's pattern alone over the whole text, its confirmed matches (unmerged).
pub(super) fn per_rule(text: &str) -> Vec<Find> {
    let c = compiled();
    let mut found = Vec::new();
    for (i, re) in c.alone.iter().enumerate() {
        let mut at = 0;
        while at <= text.len() {
            let Some(g) = re.captures_at(text, at) else {
                break;
            };
            let m = g.get(0).unwrap();
            let (s, e) = value_span((m.start(), m.end()), g.name("v"));
            if confirmed(RULES[i].confirm, &text[s..e]) {
                found.push(Find {
                    rule: RULES[i].id,
                    start: s,
                    end: e,
                });
            }
            at = e.max(m.start() + 1);
            while !text.is_char_boundary(at.min(text.len())) {
                at += 1;
            }
        }
    }
    found
}
