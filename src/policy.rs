//! Policy: which categories of work may run, how many tasks run at a time, and how large a
//! plan may be. A plan that breaks the policy is refused with the reason before anything runs.
//!
//! Forum defines the same two knobs (`allowed_categories`, `max_parallel` = 6) but never
//! enforces them; here [`Policy::check_plan`] does.
//!
//! Policy TOML (for example `.forum/policy.toml`), every key optional:
//!
//! ```toml
//! allowed_categories = ["engineering", "quality"]  # absent: every category may run
//! max_parallel = 4                                 # tasks of one wave running at once (6)
//! max_tasks = 40                                   # largest plan accepted (no limit)
//!
//! [secrets]                 # what a secret found in a body does (src/secrets)
//! mode = "redact"           # "redact" (the default), "block" or "allow"
//! allow = ["jwt"]           # rules whose finds are written as they are
//! allow_fingerprints = ["3f9a0c2e7b41d856"]  # single secrets accepted, as a find names them
//!
//! [push]                    # what the pre-push hook lets through (src/policy/push.rs)
//! protected = ["main"]      # absent: the remote's default branch
//! allow_force = false
//!
//! [lanes]                   # the vocabulary gap (src/route/gap.rs)
//! min_escalations = 3       # undecided routes in a row that make a vocabulary_gap (3)
//! ```
//!
//! Pure: [`Policy::from_toml_str`] takes text and a display name.

use std::collections::BTreeSet;

pub(crate) mod push;
pub(crate) mod worker_push;

use crate::plan::Plan;
use crate::roster::{AgentSpec, Roster};

/// Tasks of one wave run at most this many at a time unless the policy says otherwise.
pub(crate) const DEFAULT_MAX_PARALLEL: usize = 6;

/// The keys a policy file may carry.
pub(crate) const POLICY_KEYS: [&str; 6] = [
    "allowed_categories",
    "max_parallel",
    "max_tasks",
    "secrets",
    "push",
    "lanes",
];

/// What may run, and how much at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Categories allowed to run; `None` allows every category.
    pub(crate) allowed_categories: Option<BTreeSet<String>>,
    /// How many tasks of one wave may run at the same time (at least 1).
    pub max_parallel: usize,
    /// The most tasks a plan may have; `None` for no limit.
    pub(crate) max_tasks: Option<usize>,
    /// What a secret found in a body does (`[secrets]`).
    pub(crate) secrets: crate::secrets::SecretsPolicy,
    /// The branch rules the pre-push hook holds a push to (`[push]`).
    pub(crate) push: push::PushRules,
    /// SHA-256 (hex) of the TOML text the policy was read from (of the empty text, which reads
    /// as this default, when there is no file). Each `ship` entry names it, so an attestation
    /// can say which policy let a change through.
    pub(crate) digest: String,
    /// The TOML text it was read from (empty for the default), so a run can record the
    /// policy it ran under.
    pub(crate) text: std::sync::Arc<str>,
    /// How many undecided routes in a row make a `vocabulary_gap` (`[lanes] min_escalations`).
    pub(crate) min_escalations: u64,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            allowed_categories: None,
            max_parallel: DEFAULT_MAX_PARALLEL,
            max_tasks: None,
            secrets: crate::secrets::SecretsPolicy::default(),
            push: push::PushRules::default(),
            digest: crate::ledger::hash::sha256_hex(b""),
            text: "".into(),
            min_escalations: crate::route::gap::DEFAULT_MIN_ESCALATIONS,
        }
    }
}

/// Why a policy could not be read, or why a plan breaks it. One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PolicyError {
    /// The policy file is malformed.
    #[error("{source_name}: {message}")]
    Invalid {
        /// Display name of the policy (usually its path).
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// A task's lane is in a category the policy does not allow.
    #[error(
        "policy refuses task {task:?}: agent {agent:?} is in category {category:?}, which is not allowed (allowed: {allowed})"
    )]
    CategoryNotAllowed {
        /// The task id.
        task: String,
        /// Its lane.
        agent: String,
        /// The lane's category.
        category: String,
        /// The allowed categories, comma-separated.
        allowed: String,
    },
    /// A task names a lane the roster does not have, so its category is unknown.
    #[error("policy refuses task {task:?}: agent {agent:?} is not in the roster")]
    UnknownAgent {
        /// The task id.
        task: String,
        /// Its lane.
        agent: String,
    },
    /// The plan has more tasks than allowed.
    #[error("policy refuses the plan: it has {tasks} tasks and at most {max} are allowed")]
    TooManyTasks {
        /// Tasks in the plan.
        tasks: usize,
        /// The limit.
        max: usize,
    },
}

/// A TOML error as one line, with its line and column when it has a place.
fn toml_error_text(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().replace('\n', "; ");
    match e.span() {
        Some(span) => {
            let before = &text[..floor_boundary(text, span.start)];
            let line = before.matches('\n').count() + 1;
            let col = before[before.rfind('\n').map_or(0, |p| p + 1)..]
                .chars()
                .count()
                + 1;
            format!("invalid TOML at line {line}, column {col}: {msg}")
        }
        None => format!("invalid TOML: {msg}"),
    }
}

/// Why `allowed_categories` is refused (the message of a [`PolicyError::Invalid`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum CategoriesError {
    /// Not a list.
    #[error("\"allowed_categories\" must be a list of strings, found {0}")]
    NotAList(&'static str),
    /// Item `n` (from 1) is not a non-empty string.
    #[error("\"allowed_categories\" item {n} must be a non-empty string, found {found}")]
    BadItem { n: usize, found: &'static str },
}

/// `allowed_categories`: a list of non-empty strings.
fn allowed_categories(value: &toml::Value) -> Result<BTreeSet<String>, CategoriesError> {
    let toml::Value::Array(items) = value else {
        return Err(CategoriesError::NotAList(value.type_str()));
    };
    let mut set = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            toml::Value::String(s) if !s.trim().is_empty() => {
                set.insert(s.clone());
            }
            other => {
                return Err(CategoriesError::BadItem {
                    n: i + 1,
                    found: other.type_str(),
                });
            }
        }
    }
    Ok(set)
}

impl Policy {
    /// Reads a policy from TOML text; `source_name` prefixes every error.
    pub(crate) fn from_toml_str(text: &str, source_name: &str) -> Result<Policy, PolicyError> {
        let err = |message: String| PolicyError::Invalid {
            source_name: source_name.to_string(),
            message,
        };
        let table: toml::Table =
            toml::from_str(text).map_err(|e| err(toml_error_text(text, &e)))?;
        let mut policy = Policy {
            digest: crate::ledger::hash::sha256_hex(text.as_bytes()),
            text: text.into(),
            ..Policy::default()
        };
        for (key, value) in &table {
            match key.as_str() {
                "allowed_categories" => {
                    policy.allowed_categories =
                        Some(allowed_categories(value).map_err(|e| err(e.to_string()))?);
                }
                "max_parallel" | "max_tasks" => {
                    let n = match value {
                        toml::Value::Integer(n) if *n >= 1 => *n as usize,
                        toml::Value::Integer(n) => {
                            return Err(err(format!("{key:?} must be at least 1, found {n}")));
                        }
                        other => {
                            return Err(err(format!(
                                "{key:?} must be an integer, found {}",
                                other.type_str()
                            )));
                        }
                    };
                    if key == "max_parallel" {
                        policy.max_parallel = n;
                    } else {
                        policy.max_tasks = Some(n);
                    }
                }
                "secrets" => {
                    let toml::Value::Table(t) = value else {
                        return Err(err(format!(
                            "\"secrets\" must be a table ([secrets]), found {}",
                            value.type_str()
                        )));
                    };
                    policy.secrets = crate::secrets::SecretsPolicy::from_toml(t)
                        .map_err(|e| err(e.to_string()))?;
                }
                "push" => {
                    let toml::Value::Table(t) = value else {
                        return Err(err(format!(
                            "\"push\" must be a table ([push]), found {}",
                            value.type_str()
                        )));
                    };
                    policy.push = push::PushRules::from_toml(t).map_err(err)?;
                }
                "lanes" => {
                    let toml::Value::Table(t) = value else {
                        return Err(err(format!(
                            "\"lanes\" must be a table ([lanes]), found {}",
                            value.type_str()
                        )));
                    };
                    policy.min_escalations =
                        crate::route::gap::min_escalations_from_toml(t).map_err(err)?;
                }
                other => {
                    return Err(err(format!(
                        "unknown key {other:?} (expected one of: {})",
                        POLICY_KEYS.join(", ")
                    )));
                }
            }
        }
        Ok(policy)
    }

    /// True when the lane's category may run.
    pub(crate) fn permits(&self, spec: &AgentSpec) -> bool {
        self.allowed_categories
            .as_ref()
            .is_none_or(|allowed| allowed.contains(&spec.category))
    }

    /// Splits a wave into batches of at most `max_parallel` tasks, keeping order.
    pub(crate) fn cap_wave<T: Clone>(&self, wave: &[T]) -> Vec<Vec<T>> {
        wave.chunks(self.max_parallel.max(1))
            .map(<[T]>::to_vec)
            .collect()
    }

    /// Refuses a plan that breaks the policy: too many tasks, or a task whose lane is
    /// unknown or in a category that is not allowed (the first such task in plan order).
    pub(crate) fn check_plan(&self, plan: &Plan, roster: &Roster) -> Result<(), PolicyError> {
        if let Some(max) = self.max_tasks
            && plan.tasks.len() > max
        {
            return Err(PolicyError::TooManyTasks {
                tasks: plan.tasks.len(),
                max,
            });
        }
        for t in &plan.tasks {
            let Some(spec) = roster.get(&t.agent) else {
                return Err(PolicyError::UnknownAgent {
                    task: t.id.clone(),
                    agent: t.agent.clone(),
                });
            };
            if !self.permits(spec) {
                let allowed = self
                    .allowed_categories
                    .as_ref()
                    .map(|a| a.iter().cloned().collect::<Vec<_>>().join(", "))
                    .unwrap_or_default();
                return Err(PolicyError::CategoryNotAllowed {
                    task: t.id.clone(),
                    agent: t.agent.clone(),
                    category: spec.category.clone(),
                    allowed: if allowed.is_empty() {
                        "none".into()
                    } else {
                        allowed
                    },
                });
            }
        }
        Ok(())
    }
}

fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Task;

    fn plan(agents: &[&str]) -> Plan {
        Plan {
            tasks: agents
                .iter()
                .enumerate()
                .map(|(i, a)| Task::new(format!("T{i}"), *a, "x"))
                .collect(),
        }
    }

    #[test]
    fn default_allows_everything_six_at_a_time() {
        let p = Policy::default();
        let r = Roster::default_roster();
        assert!(r.agents().iter().all(|a| p.permits(a)));
        assert!(
            p.check_plan(&plan(&["backend", "docs", "release"]), &r)
                .is_ok()
        );
        let wave: Vec<u32> = (0..14).collect();
        let batches = p.cap_wave(&wave);
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), [6, 6, 2]);
        assert_eq!(batches.concat(), wave);
    }

    #[test]
    fn categories_are_enforced_with_the_reason() {
        let p = Policy::from_toml_str(
            "allowed_categories = [\"engineering\", \"quality\"]\nmax_parallel = 2\n",
            "policy.toml",
        )
        .unwrap();
        assert_eq!(p.max_parallel, 2);
        let r = Roster::default_roster();
        assert!(p.check_plan(&plan(&["backend", "tests"]), &r).is_ok());
        let e = p
            .check_plan(&plan(&["backend", "release"]), &r)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "policy refuses task \"T1\": agent \"release\" is in category \"operations\", which is \
             not allowed (allowed: engineering, quality)"
        );
        let none = Policy::from_toml_str("allowed_categories = []", "p").unwrap();
        let e = none.check_plan(&plan(&["backend"]), &r).unwrap_err();
        assert!(e.to_string().ends_with("(allowed: none)"), "{e}");
        let e = p.check_plan(&plan(&["ghost"]), &r).unwrap_err();
        assert!(matches!(e, PolicyError::UnknownAgent { .. }));
    }

    #[test]
    fn plan_size_limit() {
        let p = Policy::from_toml_str("max_tasks = 2", "p").unwrap();
        let r = Roster::default_roster();
        let e = p.check_plan(&plan(&["backend"; 3]), &r).unwrap_err();
        assert_eq!(
            e.to_string(),
            "policy refuses the plan: it has 3 tasks and at most 2 are allowed"
        );
    }

    #[test]
    fn bad_policy_files() {
        let e = |t: &str| Policy::from_toml_str(t, "p.toml").unwrap_err().to_string();
        assert!(e("max_parallel = 0").contains("at least 1"));
        assert!(e("max_parallel = \"4\"").contains("must be an integer"));
        assert!(e("allowed_categories = \"x\"").contains("must be a list"));
        assert!(e("allowed_categories = [1]").contains("item 1"));
        assert!(e("max_paralel = 3").contains("unknown key \"max_paralel\""));
        let m = e("max_parallel = \n");
        assert!(
            m.starts_with("p.toml: invalid TOML at line 1, column"),
            "{m}"
        );
        assert!(!m.contains('\n'));
        assert_eq!(Policy::from_toml_str("", "p").unwrap(), Policy::default());
    }
}
