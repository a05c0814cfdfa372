//! The roster: the lanes (agents) work can be routed to, read from TOML in Forum's format
//! (forum-features §5).
//!
//! A roster file is an array of tables named `agent`:
//!
//! ```toml
//! [[agent]]
//! name = "backend"              # unique lane id
//! category = "engineering"      # free text; the policy can allow or refuse categories
//! domain = "Server-side code"   # free text for people
//! keywords = ["api", "server"]  # non-empty; matched as whole lowercase [a-z0-9]+ tokens
//! model_tier = "capable"        # cheap | capable | frontier
//! executor = "cli"              # free text, echoed into route frames
//! max_turns = 10                # optional, default 10
//! ```
//!
//! Forum's roster files load unchanged. Loading is stricter than Forum about mistakes inside an
//! agent: every field has a type and unknown fields are refused (a misspelt `keyword` would
//! otherwise be silently ignored); each error is one line naming the file, the agent and the
//! field. Top-level keys other than `agent`, which Forum ignores, load with a warning.
//!
//! This module is pure: [`Roster::from_toml_str`] takes the text and a display name; reading
//! the file is the caller's job.

use std::collections::BTreeSet;
use std::fmt;

/// The default roster shipped in the binary: lanes for work in a software repository.
pub(crate) const DEFAULT_ROSTER_TOML: &str = include_str!("../roster.toml");

/// Display name of the embedded default roster in error messages.
pub(crate) const DEFAULT_ROSTER_NAME: &str = "<built-in roster.toml>";

/// `max_turns` when a row does not set it (Forum's default).
pub(crate) const DEFAULT_MAX_TURNS: u32 = 10;

/// The keys an `[[agent]]` table may carry.
pub(crate) const AGENT_KEYS: [&str; 7] = [
    "name",
    "category",
    "domain",
    "keywords",
    "model_tier",
    "executor",
    "max_turns",
];

/// An abstract model size; an executor maps each tier to a concrete model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// Small, fast, inexpensive models.
    Cheap,
    /// General-purpose models.
    Capable,
    /// The strongest models available.
    Frontier,
}

impl Tier {
    /// Every tier, cheapest first.
    pub(crate) const ALL: [Tier; 3] = [Tier::Cheap, Tier::Capable, Tier::Frontier];

    /// The tier's name as written in a roster (`cheap`, `capable`, `frontier`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Tier::Cheap => "cheap",
            Tier::Capable => "capable",
            Tier::Frontier => "frontier",
        }
    }

    /// Parses a tier name exactly as written in a roster (case-sensitive, like Forum).
    pub(crate) fn parse(s: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One lane of the roster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    /// Lane id, unique within the roster.
    pub(crate) name: String,
    /// Category of work (free text); the [policy](crate::policy) may allow or refuse it.
    pub(crate) category: String,
    /// Human description of the lane.
    pub(crate) domain: String,
    /// Routing keywords, in file order (a keyword listed twice counts twice when scoring).
    pub keywords: Vec<String>,
    /// Which tier of model runs this lane.
    pub model_tier: Tier,
    /// Which executor runs this lane (free text, echoed into route frames).
    pub executor: String,
    /// Turn limit for the lane (stored; Forum never uses it).
    pub max_turns: u32,
}

/// A validated list of lanes, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Roster {
    agents: Vec<AgentSpec>,
    warnings: Vec<String>,
    /// SHA-256 (hex) of the TOML text it was read from; `None` for a roster built from agents
    /// in code. Each `ship` entry names it, so an attestation can say which roster decided.
    digest: Option<String>,
    /// The TOML text it was read from, so a run can record the roster it ran under.
    text: Option<std::sync::Arc<str>>,
}

/// Why a roster could not be loaded. The message is one line and names the file (and, where
/// there is one, the agent and field).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct RosterError {
    /// The display name of the roster (usually its path).
    pub(crate) source_name: String,
    /// What is wrong, naming the agent and field.
    pub(crate) message: String,
}

impl Roster {
    /// Builds a roster from agents, refusing duplicate names. An empty list is allowed here
    /// (the router then escalates everything); files with no agents are refused by
    /// [`Roster::from_toml_str`].
    pub fn new(agents: Vec<AgentSpec>) -> Result<Roster, RosterError> {
        let mut seen = BTreeSet::new();
        for a in &agents {
            if !seen.insert(a.name.as_str()) {
                return Err(RosterError {
                    source_name: "<roster>".into(),
                    message: format!("duplicate agent name {:?}", a.name),
                });
            }
        }
        Ok(Roster {
            agents,
            warnings: Vec::new(),
            digest: None,
            text: None,
        })
    }

    /// SHA-256 (hex) of the TOML text the roster was read from, if it was read from one.
    pub(crate) fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// The TOML text it was read from, if it was read from one.
    pub(crate) fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// The embedded default roster (`roster.toml` at the top of the repository).
    pub fn default_roster() -> Roster {
        Roster::from_toml_str(DEFAULT_ROSTER_TOML, DEFAULT_ROSTER_NAME)
            .expect("the embedded default roster is valid (checked by tests)")
    }

    /// Parses and validates roster TOML. `source_name` (usually the path) prefixes every
    /// error message.
    pub fn from_toml_str(text: &str, source_name: &str) -> Result<Roster, RosterError> {
        let err = |message: String| RosterError {
            source_name: source_name.to_string(),
            message,
        };
        let table: toml::Table = match toml::from_str(text) {
            Ok(t) => t,
            Err(e) => {
                let msg = e.message().trim().replace('\n', "; ");
                return Err(err(match e.span() {
                    Some(span) => {
                        let (line, col) = line_col(text, span.start);
                        format!("invalid TOML at line {line}, column {col}: {msg}")
                    }
                    None => format!("invalid TOML: {msg}"),
                }));
            }
        };
        // Forum ignores everything but [[agent]]; so do we, but say so.
        let mut warnings: Vec<String> = table
            .keys()
            .filter(|k| *k != "agent")
            .map(|k| {
                format!(
                    "{source_name}: ignoring top-level key {k:?} (a roster holds [[agent]] tables)"
                )
            })
            .collect();
        let rows = match table.get("agent") {
            None => return Err(err("no agents: add at least one [[agent]] table".into())),
            Some(toml::Value::Array(rows)) => rows,
            Some(other) => {
                return Err(err(format!(
                    "\"agent\" must be an array of tables ([[agent]]), found {}",
                    other.type_str()
                )));
            }
        };
        if rows.is_empty() {
            return Err(err("no agents: add at least one [[agent]] table".into()));
        }
        let mut agents: Vec<AgentSpec> = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let n = i + 1;
            let toml::Value::Table(row) = row else {
                return Err(err(format!(
                    "agent #{n} must be a table ([[agent]]), found {}",
                    row.type_str()
                )));
            };
            let spec = spec_from_row(n, row).map_err(|e| err(e.to_string()))?;
            if let Some(prev) = agents.iter().position(|a| a.name == spec.name) {
                return Err(err(format!(
                    "agent #{n} {:?}: duplicate name (agent #{} has the same name)",
                    spec.name,
                    prev + 1
                )));
            }
            for kw in &spec.keywords {
                if !is_single_token(kw) {
                    warnings.push(format!(
                        "{source_name}: agent {:?}: keyword {kw:?} is not a single lowercase \
                         [a-z0-9]+ token and can never match a request",
                        spec.name
                    ));
                }
            }
            agents.push(spec);
        }
        Ok(Roster {
            agents,
            warnings,
            digest: Some(crate::ledger::hash::sha256_hex(text.as_bytes())),
            text: Some(text.into()),
        })
    }

    /// The lanes in file order.
    pub fn agents(&self) -> &[AgentSpec] {
        &self.agents
    }

    /// The lane called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&AgentSpec> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// Lane names in file order.
    pub fn names(&self) -> Vec<&str> {
        self.agents.iter().map(|a| a.name.as_str()).collect()
    }

    /// Number of lanes.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// True when the roster has no lanes.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// Non-fatal findings from loading, one line each (for example a keyword that can never
    /// match because it is not a single lowercase token).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// True when `kw`, lowercased, is exactly one `[a-z0-9]+` token: the only keywords the
/// router can ever match.
pub(crate) fn is_single_token(kw: &str) -> bool {
    let lower = kw.to_lowercase();
    !lower.is_empty()
        && lower
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// What is wrong with one `[[agent]]` row. `who` names the row: `agent #N`, and its name
/// once that has been read (`agent #2 "a"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AgentRowError {
    #[error("{who}: missing required field {field:?}")]
    Missing { who: String, field: &'static str },
    #[error("{who}: field {field:?} must not be empty")]
    Empty { who: String, field: &'static str },
    /// A field of the wrong TOML type: `want` says what it must be, `found` what it is.
    #[error("{who}: field {field:?} must be {want}, found {found}")]
    WrongType {
        who: String,
        field: &'static str,
        want: &'static str,
        found: &'static str,
    },
    /// Item `item` (1-based) of `keywords` is blank.
    #[error("{who}: field \"keywords\" item {item} is an empty string")]
    BlankKeyword { who: String, item: usize },
    #[error("{who}: field \"keywords\" item {item} must be a string, found {found}")]
    KeywordNotString {
        who: String,
        item: usize,
        found: &'static str,
    },
    #[error("{who}: unknown field {key:?} (expected one of: {keys})", keys = AGENT_KEYS.join(", "))]
    UnknownField { who: String, key: String },
    #[error("{who}: field \"model_tier\" is {tier:?}; expected one of: cheap, capable, frontier")]
    UnknownTier { who: String, tier: String },
    #[error("{who}: field \"keywords\" is empty; a lane needs at least one keyword")]
    NoKeywords { who: String },
    #[error("{who}: field \"max_turns\" must be between 0 and {max}, found {found}", max = u32::MAX)]
    MaxTurnsRange { who: String, found: i64 },
}

/// An agent row's `name` (row `n`, 1-based): a string that is not blank.
fn agent_name(n: usize, row: &toml::Table) -> Result<String, AgentRowError> {
    let who = || format!("agent #{n}");
    match row.get("name") {
        None => Err(AgentRowError::Missing {
            who: who(),
            field: "name",
        }),
        Some(toml::Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(toml::Value::String(_)) => Err(AgentRowError::Empty {
            who: who(),
            field: "name",
        }),
        Some(other) => Err(AgentRowError::WrongType {
            who: who(),
            field: "name",
            want: "a string",
            found: other.type_str(),
        }),
    }
}

/// An agent row's `keywords`: an array of strings, none blank.
fn agent_keywords(who: &str, row: &toml::Table) -> Result<Vec<String>, AgentRowError> {
    let who = || who.to_string();
    match row.get("keywords") {
        None => Err(AgentRowError::Missing {
            who: who(),
            field: "keywords",
        }),
        Some(toml::Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (j, item) in items.iter().enumerate() {
                match item {
                    toml::Value::String(s) if !s.trim().is_empty() => out.push(s.clone()),
                    toml::Value::String(_) => {
                        return Err(AgentRowError::BlankKeyword {
                            who: who(),
                            item: j + 1,
                        });
                    }
                    other => {
                        return Err(AgentRowError::KeywordNotString {
                            who: who(),
                            item: j + 1,
                            found: other.type_str(),
                        });
                    }
                }
            }
            Ok(out)
        }
        Some(other) => Err(AgentRowError::WrongType {
            who: who(),
            field: "keywords",
            want: "an array of strings",
            found: other.type_str(),
        }),
    }
}

fn spec_from_row(n: usize, row: &toml::Table) -> Result<AgentSpec, AgentRowError> {
    // Name first, so later messages can say which agent they are about.
    let name = agent_name(n, row)?;
    let who = format!("agent #{n} {name:?}");
    for key in row.keys() {
        if !AGENT_KEYS.contains(&key.as_str()) {
            return Err(AgentRowError::UnknownField {
                who,
                key: key.clone(),
            });
        }
    }
    let string_field = |field: &'static str| -> Result<String, AgentRowError> {
        match row.get(field) {
            None => Err(AgentRowError::Missing {
                who: who.clone(),
                field,
            }),
            Some(toml::Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(AgentRowError::WrongType {
                who: who.clone(),
                field,
                want: "a string",
                found: other.type_str(),
            }),
        }
    };
    let category = string_field("category")?;
    let domain = string_field("domain")?;
    let executor = string_field("executor")?;
    let tier_text = string_field("model_tier")?;
    let model_tier = Tier::parse(&tier_text).ok_or_else(|| AgentRowError::UnknownTier {
        who: who.clone(),
        tier: tier_text.clone(),
    })?;
    let keywords = agent_keywords(&who, row)?;
    if keywords.is_empty() {
        return Err(AgentRowError::NoKeywords { who });
    }
    let max_turns = match row.get("max_turns") {
        None => DEFAULT_MAX_TURNS,
        Some(toml::Value::Integer(i)) => {
            u32::try_from(*i).map_err(|_| AgentRowError::MaxTurnsRange { who, found: *i })?
        }
        Some(other) => {
            return Err(AgentRowError::WrongType {
                who,
                field: "max_turns",
                want: "an integer",
                found: other.type_str(),
            });
        }
    };
    Ok(AgentSpec {
        name,
        category,
        domain,
        keywords,
        model_tier,
        executor,
        max_turns,
    })
}

/// 1-based line and column (in characters) of byte offset `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
[[agent]]
name = "a"
category = "engineering"
domain = "A lane"
keywords = ["x", "y"]
model_tier = "cheap"
executor = "cli"
"#;

    fn load(text: &str) -> Result<Roster, RosterError> {
        Roster::from_toml_str(text, "r.toml")
    }

    fn load_err(text: &str) -> String {
        load(text).unwrap_err().to_string()
    }

    #[test]
    fn loads_a_minimal_roster_with_default_max_turns() {
        let r = load(ONE).unwrap();
        assert_eq!(r.len(), 1);
        let a = &r.agents()[0];
        assert_eq!(a.name, "a");
        assert_eq!(a.model_tier, Tier::Cheap);
        assert_eq!(a.max_turns, DEFAULT_MAX_TURNS);
        assert_eq!(a.keywords, vec!["x", "y"]);
        assert!(r.warnings().is_empty());
    }

    #[test]
    fn default_roster_is_valid_and_all_keywords_are_tokens() {
        let r = Roster::default_roster();
        assert!(r.len() >= 10);
        assert!(r.warnings().is_empty(), "{:?}", r.warnings());
        for a in r.agents() {
            let mut seen = BTreeSet::new();
            for kw in &a.keywords {
                assert!(
                    kw.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                );
                assert!(seen.insert(kw), "{} repeats keyword {kw}", a.name);
            }
        }
    }

    #[test]
    fn malformed_toml_names_line_and_column() {
        let e = load_err("[[agent]]\nname = \"a\"\nkeywords = [\"x\",\n");
        assert!(e.starts_with("r.toml: invalid TOML at line "), "{e}");
        assert!(!e.contains('\n'));
        let e = load_err("[[agent]]\nname = = 1\n");
        assert!(e.contains("line 2, column"), "{e}");
    }

    #[test]
    fn no_agents_is_an_error() {
        assert_eq!(
            load_err(""),
            "r.toml: no agents: add at least one [[agent]] table"
        );
        assert!(load_err("agent = []").contains("no agents"));
        assert!(load_err("agent = 3").contains("array of tables"));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let e = load_err(&ONE.replace("executor", "keyword = [\"z\"]\nexecutor"));
        assert!(
            e.contains("agent #1 \"a\": unknown field \"keyword\""),
            "{e}"
        );
        // Forum ignores top-level keys other than [[agent]]; we load and warn.
        let r = load(&format!("title = \"t\"\n{ONE}")).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            r.warnings(),
            ["r.toml: ignoring top-level key \"title\" (a roster holds [[agent]] tables)"]
        );
        let e = load_err("[[agents]]\nname = \"a\"\n");
        assert!(e.contains("no agents"), "{e}");
    }

    #[test]
    fn duplicate_names_are_refused() {
        let e = load_err(&format!("{ONE}{ONE}"));
        assert_eq!(
            e,
            "r.toml: agent #2 \"a\": duplicate name (agent #1 has the same name)"
        );
    }

    #[test]
    fn field_errors_name_agent_and_field() {
        let e = load_err(&ONE.replace("[\"x\", \"y\"]", "[]"));
        assert!(
            e.contains("agent #1 \"a\": field \"keywords\" is empty"),
            "{e}"
        );
        let e = load_err(&ONE.replace("[\"x\", \"y\"]", "\"x\""));
        assert!(e.contains("field \"keywords\" must be an array"), "{e}");
        let e = load_err(&ONE.replace("[\"x\", \"y\"]", "[\"x\", 2]"));
        assert!(
            e.contains("\"keywords\" item 2 must be a string, found integer"),
            "{e}"
        );
        let e = load_err(&ONE.replace("\"cheap\"", "\"huge\""));
        assert!(e.contains("field \"model_tier\" is \"huge\""), "{e}");
        let e = load_err(&ONE.replace("\"cheap\"", "\"Cheap\""));
        assert!(e.contains("model_tier"), "{e}");
        let e = load_err(&ONE.replace("executor = \"cli\"", "executor = 1"));
        assert!(
            e.contains("field \"executor\" must be a string, found integer"),
            "{e}"
        );
        let e = load_err(&ONE.replace("category = \"engineering\"\n", ""));
        assert!(e.contains("missing required field \"category\""), "{e}");
        let e = load_err(&ONE.replace("name = \"a\"", "name = 5"));
        assert!(
            e.contains("agent #1: field \"name\" must be a string"),
            "{e}"
        );
        let e = load_err(&format!("{ONE}max_turns = -1\n"));
        assert!(e.contains("max_turns"), "{e}");
        let e = load_err(&format!("{ONE}max_turns = \"5\"\n"));
        assert!(e.contains("max_turns\" must be an integer"), "{e}");
        let ok = load(&format!("{ONE}max_turns = 3\n")).unwrap();
        assert_eq!(ok.agents()[0].max_turns, 3);
    }

    #[test]
    fn unmatchable_keywords_warn_but_load() {
        let r = load(&ONE.replace("[\"x\", \"y\"]", "[\"ci-cd\", \"Upper\"]")).unwrap();
        assert_eq!(r.warnings().len(), 1);
        assert!(r.warnings()[0].contains("\"ci-cd\""));
    }

    #[test]
    fn errors_are_single_lines() {
        for bad in [
            "[[agent]\n",
            "x = \"\n",
            "[[agent]]\nname=\"a\"\nname=\"b\"\n",
        ] {
            let e = load_err(bad);
            assert!(!e.contains('\n'), "{e}");
            assert!(e.starts_with("r.toml: "), "{e}");
        }
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncdé", 7), (2, 4));
        assert_eq!(line_col("ab\ncdé", 6), (2, 3));
        assert_eq!(line_col("", 0), (1, 1));
        assert_eq!(line_col("é", 1), (1, 1));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            #[test]
            fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
                let text = String::from_utf8_lossy(&bytes);
                if let Err(e) = Roster::from_toml_str(&text, "fuzz") {
                    prop_assert!(!e.to_string().contains('\n'));
                }
            }

            #[test]
            fn roster_like_text_never_panics(
                parts in proptest::collection::vec(
                    prop_oneof![
                        Just("[[agent]]\n".to_string()),
                        Just("name = \"n\"\n".to_string()),
                        Just("keywords = [\"a\", 1]\n".to_string()),
                        Just("keywords = []\n".to_string()),
                        Just("model_tier = \"cheap\"\n".to_string()),
                        Just("max_turns = 99999999999\n".to_string()),
                        Just("agent = 1\n".to_string()),
                        "[a-z_]{1,8} = \"[^\"\\\\]{0,8}\"\n",
                        ".{0,12}",
                    ],
                    0..12,
                )
            ) {
                let text: String = parts.concat();
                let _ = Roster::from_toml_str(&text, "fuzz");
            }
        }
    }
}
