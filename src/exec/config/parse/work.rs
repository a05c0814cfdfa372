//! The `[work]` and `[spend]` tables of a runtime config file: what a run that changes the
//! repository may do and must pass, and the ceilings of a run whose command gives none.

use super::super::raw::{RawAttempts, RawSpend, RawWork};
use super::super::{ChangeLimits, ConfigError, MAX_ATTEMPTS, Slot, SpendConfig, WorkConfig};
use super::{MAX_CHECK_BYTES, Src};

/// The `[work]` table: sandbox, change limits (none may be 0) and checks.
pub(super) fn parse_work(
    src: &Src<'_>,
    work: RawWork,
    out: &mut WorkConfig,
) -> Result<(), ConfigError> {
    out.enabled = work.enabled.unwrap_or(false);
    out.sandbox = work.sandbox;
    out.sandbox_net = work.sandbox_net.unwrap_or(false);
    out.sandbox_read = work
        .sandbox_read
        .unwrap_or_default()
        .into_iter()
        .map(std::path::PathBuf::from)
        .collect();
    out.sandbox_allow_host = work.sandbox_allow_host.unwrap_or_default();
    let limits = ChangeLimits::default();
    let limit = |v: Option<u64>, name: &str, default: u64| match v {
        Some(0) => Err(src.err(
            "work",
            Some(name),
            None,
            format!("{name} = 0 would refuse every change: give a number above 0"),
        )),
        Some(n) => Ok(n),
        None => Ok(default),
    };
    out.limits = ChangeLimits {
        max_file_bytes: limit(work.max_file_bytes, "max_file_bytes", limits.max_file_bytes)?,
        max_change_bytes: limit(
            work.max_change_bytes,
            "max_change_bytes",
            limits.max_change_bytes,
        )?,
        max_files: limit(work.max_files, "max_files", limits.max_files)?,
        max_disk_bytes: limit(work.max_disk_bytes, "max_disk_bytes", limits.max_disk_bytes)?,
    };
    if let Some(attempts) = work.attempts {
        parse_attempts(src, attempts, out)?;
    }
    if let Some(checks) = work.checks {
        out.checks = check_list(src, "checks", checks)?;
    }
    if let Some(checks) = work.default_checks {
        out.default_checks = check_list(src, "default_checks", checks)?;
    }
    Ok(())
}

/// `[work] checks` or `default_checks`: shell commands, none empty or too long.
fn check_list(
    src: &Src<'_>,
    key: &str,
    checks: toml::Spanned<Vec<String>>,
) -> Result<Vec<String>, ConfigError> {
    let span = checks.span();
    for c in checks.get_ref() {
        if c.trim().is_empty() || c.contains('\0') || c.len() > MAX_CHECK_BYTES {
            return Err(src.err(
                "work",
                Some(key),
                Some(span),
                format!(
                    "each check must be a non-empty shell command of at most {MAX_CHECK_BYTES} bytes"
                ),
            ));
        }
    }
    Ok(checks.into_inner())
}

/// `[spend]`: each ceiling above 0 (a ceiling of 0 would stop every run before its first call).
pub(super) fn parse_spend(src: &Src<'_>, s: RawSpend) -> Result<SpendConfig, ConfigError> {
    let mut out = SpendConfig::default();
    if let Some(x) = s.max_cost_usd {
        let usd = *x.get_ref();
        let pico = crate::spend::usd_to_pico(usd);
        if !(usd.is_finite() && usd > 0.0 && pico > 0) {
            return Err(src.at(
                "spend",
                "max_cost_usd",
                &x,
                format!("max_cost_usd = {usd}: give a number of dollars above 0 (or leave the key out for no ceiling)"),
            ));
        }
        out.max_cost_pico = Some(pico);
    }
    if let Some(n) = s.max_tokens {
        if *n.get_ref() == 0 {
            return Err(src.at(
                "spend",
                "max_tokens",
                &n,
                "max_tokens = 0 leaves nothing to spend: give a number of tokens above 0".into(),
            ));
        }
        out.max_tokens = Some(*n.get_ref());
    }
    Ok(out)
}

/// `[work] attempts`: a count from 1 to 8, or one slot name per attempt (1 to 8 of them).
fn parse_attempts(
    src: &Src<'_>,
    attempts: toml::Spanned<RawAttempts>,
    out: &mut WorkConfig,
) -> Result<(), ConfigError> {
    let span = attempts.span();
    let max = MAX_ATTEMPTS;
    let wrong = |m: String| src.err("work", Some("attempts"), Some(span.clone()), m);
    match attempts.into_inner() {
        RawAttempts::Count(n) if (1..=i64::from(max)).contains(&n) => {
            out.attempts = Some(n as u32);
        }
        RawAttempts::Count(n) => {
            return Err(wrong(format!(
                "attempts = {n}: give a number from 1 to {max}"
            )));
        }
        RawAttempts::Slots(names) => {
            if names.is_empty() || names.len() > max as usize {
                return Err(wrong(format!(
                    "attempts names {} slots: give 1 to {max} (one attempt on each)",
                    names.len()
                )));
            }
            for s in &names {
                let slot = Slot::parse(s).ok_or_else(|| {
                    wrong(format!(
                        "unknown slot {s:?}: name default, cheap, capable or frontier for each attempt"
                    ))
                })?;
                out.attempt_slots.push(slot);
            }
            out.attempts = Some(names.len() as u32);
        }
    }
    Ok(())
}
