//! The branch rules a pre-push hook (and, where a server opts in, its pre-receive hook) holds a
//! push to: no update of a protected branch, and no push that rewrites a ref (not a fast
//! forward) without an explicit allowance. Pure: the adapter finds each update's facts (is it a
//! fast forward, which branch is the remote's default) with git and hands them in.
//!
//! `.forum/policy.toml`:
//!
//! ```toml
//! [push]
//! protected = ["main", "release/*"]  # absent: the remote's default branch; [] protects none
//! allow_force = false                # true lets a push rewrite a branch
//! ```
//!
//! One push may pass a rule with `GIT_FORUM_ALLOW_PROTECTED=1` or `GIT_FORUM_ALLOW_FORCE=1` in
//! the environment of `git push`; each refusal names the rule and both ways past it.

/// `[push]` of the policy file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PushRules {
    /// Branches a push may not update (a name, or `prefix/*`); `None`: the remote's default
    /// branch.
    pub(crate) protected: Option<Vec<String>>,
    /// Whether a push may rewrite a ref.
    pub(crate) allow_force: bool,
}

/// The variable that lets one push update a protected branch.
pub(crate) const ALLOW_PROTECTED_ENV: &str = "GIT_FORUM_ALLOW_PROTECTED";
/// The variable that lets one push rewrite a ref.
pub(crate) const ALLOW_FORCE_ENV: &str = "GIT_FORUM_ALLOW_FORCE";

/// What the adapter found out about one ref a push updates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PushedRef {
    /// The ref on the remote (`refs/heads/main`).
    pub(crate) remote_ref: String,
    /// The push deletes it.
    pub(crate) deletes: bool,
    /// The push creates it (the remote has no such ref).
    pub(crate) creates: bool,
    /// The new commit descends from the remote's (false when the remote's commit is not
    /// known here: then the new one cannot descend from it).
    pub(crate) fast_forward: bool,
}

/// The allowances of one push, from its environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Allowances {
    pub(crate) protected: bool,
    pub(crate) force: bool,
}

/// Where the rules come from, for the refusal's words: a client's policy file, or a server's
/// git config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RulesFrom {
    Client,
    Server,
}

impl PushRules {
    /// Reads `[push]`.
    pub(crate) fn from_toml(t: &toml::Table) -> Result<PushRules, String> {
        let mut rules = PushRules::default();
        for (key, value) in t {
            match key.as_str() {
                "protected" => {
                    let toml::Value::Array(items) = value else {
                        return Err(format!(
                            "[push] protected must be a list of branch names, found {}",
                            value.type_str()
                        ));
                    };
                    let mut names = Vec::new();
                    for item in items {
                        let Some(name) = item.as_str().filter(|n| valid_pattern(n)) else {
                            return Err(format!(
                                "[push] protected: {item} is not a branch name (a name such as \"main\", or \"prefix/*\")"
                            ));
                        };
                        names.push(name.to_string());
                    }
                    rules.protected = Some(names);
                }
                "allow_force" => {
                    rules.allow_force = value.as_bool().ok_or_else(|| {
                        format!(
                            "[push] allow_force must be true or false, found {}",
                            value.type_str()
                        )
                    })?;
                }
                other => {
                    return Err(format!(
                        "[push]: unknown key {other:?} (expected protected or allow_force)"
                    ));
                }
            }
        }
        Ok(rules)
    }

    /// The branch patterns protected when the remote's default branch is `default` (if known).
    pub(crate) fn protected_with(&self, default: Option<&str>) -> Vec<String> {
        match &self.protected {
            Some(p) => p.clone(),
            None => default.map(|d| vec![d.to_string()]).unwrap_or_default(),
        }
    }
}

/// A branch pattern: a ref name's last part without spaces or control characters, or
/// `prefix/*`.
fn valid_pattern(p: &str) -> bool {
    let name = p.strip_suffix("/*").unwrap_or(p);
    !name.is_empty()
        && !name.starts_with('/')
        && !name.ends_with('/')
        && !name.contains("..")
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "~^:?*[\\".contains(c))
}

/// Whether `branch` (without `refs/heads/`) is one `patterns` names.
pub(crate) fn is_protected(branch: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix("/*") {
        Some(prefix) => branch
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1),
        None => p == branch,
    })
}

/// Why the push of `refs` is refused, one line each (none: let it through). `protected` is
/// the list [`PushRules::protected_with`] gave; `remote` names the remote for the words. The
/// adapters hand in code refs only: ledger refs have their own rules (append-only, verified).
pub(crate) fn refusals(
    rules: &PushRules,
    protected: &[String],
    refs: &[PushedRef],
    allow: Allowances,
    remote: &str,
    from: RulesFrom,
) -> Vec<String> {
    let (where_protected, where_force) = match from {
        RulesFrom::Client => (
            "[push] protected in .forum/policy.toml, by default the remote's default branch",
            "[push] allow_force = true in .forum/policy.toml allows it",
        ),
        RulesFrom::Server => (
            "the server's forum.protectedBranch",
            "the server's forum.denyForcePush",
        ),
    };
    let mut out = Vec::new();
    for r in refs {
        if let Some(branch) = r.remote_ref.strip_prefix("refs/heads/")
            && !allow.protected
            && is_protected(branch, protected)
        {
            let what = if r.deletes { "delete" } else { "update" };
            out.push(match from {
                RulesFrom::Client => format!(
                    "{} on {remote} is protected ({where_protected}): this push would {what} it; \
                     to push it once, run the push again with {ALLOW_PROTECTED_ENV}=1 in its environment",
                    r.remote_ref
                ),
                RulesFrom::Server => format!(
                    "{} is protected ({where_protected}): this push would {what} it",
                    r.remote_ref
                ),
            });
            continue;
        }
        let rewrites = !r.deletes && !r.creates && !r.fast_forward;
        if rewrites && !rules.allow_force && !allow.force {
            out.push(match from {
                RulesFrom::Client => format!(
                    "{} on {remote}: this push rewrites it (not a fast forward), and force pushes are refused \
                     ({where_force}); to push it once, run the push again with {ALLOW_FORCE_ENV}=1 in its environment",
                    r.remote_ref
                ),
                RulesFrom::Server => format!(
                    "{}: this push rewrites it (not a fast forward), and force pushes are refused ({where_force})",
                    r.remote_ref
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upd(r: &str, deletes: bool, creates: bool, ff: bool) -> PushedRef {
        PushedRef {
            remote_ref: r.into(),
            deletes,
            creates,
            fast_forward: ff,
        }
    }

    #[test]
    fn the_table_is_read_and_bad_values_are_named() {
        let t: toml::Table =
            toml::from_str("protected = [\"main\", \"release/*\"]\nallow_force = true\n").unwrap();
        assert_eq!(
            PushRules::from_toml(&t).unwrap(),
            PushRules {
                protected: Some(vec!["main".into(), "release/*".into()]),
                allow_force: true
            }
        );
        for (text, says) in [
            (
                "protected = \"main\"",
                "[push] protected must be a list of branch names, found string",
            ),
            (
                "protected = [\"a b\"]",
                "[push] protected: \"a b\" is not a branch name",
            ),
            ("protected = [\"*\"]", "is not a branch name"),
            (
                "allow_force = 1",
                "[push] allow_force must be true or false, found integer",
            ),
            ("force = true", "[push]: unknown key \"force\""),
        ] {
            let t: toml::Table = toml::from_str(text).unwrap();
            let e = PushRules::from_toml(&t).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn protected_defaults_to_the_remotes_default_branch_and_globs_take_a_prefix() {
        let unset = PushRules::default();
        assert_eq!(unset.protected_with(Some("trunk")), ["trunk"]);
        assert!(unset.protected_with(None).is_empty());
        let none = PushRules {
            protected: Some(vec![]),
            ..PushRules::default()
        };
        assert!(none.protected_with(Some("main")).is_empty());
        let p = vec!["main".to_string(), "release/*".to_string()];
        assert!(is_protected("main", &p));
        assert!(is_protected("release/1.0", &p));
        assert!(!is_protected("release", &p));
        assert!(!is_protected("release/", &p));
        assert!(!is_protected("mainline", &p));
    }

    #[test]
    fn protected_branches_and_rewrites_are_refused_unless_allowed() {
        let rules = PushRules::default();
        let p = rules.protected_with(Some("main"));
        let refs = [
            upd("refs/heads/main", false, false, true),
            upd("refs/heads/topic", false, false, false),
            upd("refs/heads/new", false, true, false),
            upd("refs/heads/old", true, false, false),
            upd("refs/tags/v1", false, false, false),
        ];
        let got = refusals(
            &rules,
            &p,
            &refs,
            Allowances::default(),
            "origin",
            RulesFrom::Client,
        );
        assert_eq!(
            got,
            [
                "refs/heads/main on origin is protected ([push] protected in .forum/policy.toml, by default the remote's default branch): this push would update it; to push it once, run the push again with GIT_FORUM_ALLOW_PROTECTED=1 in its environment",
                "refs/heads/topic on origin: this push rewrites it (not a fast forward), and force pushes are refused ([push] allow_force = true in .forum/policy.toml allows it); to push it once, run the push again with GIT_FORUM_ALLOW_FORCE=1 in its environment",
                "refs/tags/v1 on origin: this push rewrites it (not a fast forward), and force pushes are refused ([push] allow_force = true in .forum/policy.toml allows it); to push it once, run the push again with GIT_FORUM_ALLOW_FORCE=1 in its environment",
            ]
        );
        let both = Allowances {
            protected: true,
            force: true,
        };
        assert!(refusals(&rules, &p, &refs, both, "origin", RulesFrom::Client).is_empty());
        let forced = PushRules {
            allow_force: true,
            ..PushRules::default()
        };
        assert_eq!(
            refusals(
                &forced,
                &p,
                &refs,
                Allowances::default(),
                "origin",
                RulesFrom::Client
            )
            .len(),
            1
        );
        let deleting_main = [upd("refs/heads/main", true, false, false)];
        let got = refusals(
            &rules,
            &p,
            &deleting_main,
            Allowances::default(),
            "o",
            RulesFrom::Server,
        );
        assert_eq!(
            got,
            [
                "refs/heads/main is protected (the server's forum.protectedBranch): this push would delete it"
            ]
        );
    }
}
