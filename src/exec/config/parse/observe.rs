//! The `[observe]` table of a runtime config file: how often a run and the daemon witness a
//! heartbeat (`heartbeat`) and how long a worker may stay quiet before the watchdog ends it
//! (`stall`). Each is a duration (`"200ms"`, `"30s"`, `"10m"`, `"1h"`) or `"off"`.

use std::time::Duration;

use super::super::raw::RawObserve;
use super::super::{ConfigError, ObserveConfig};
use super::Src;

/// The shortest duration either key takes: shorter would make a heartbeat or a stall check
/// run more often than it can be honoured.
const MIN_DURATION: Duration = Duration::from_millis(100);

/// The longest duration either key takes (a day, as the longest deadline).
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// `[observe]`: both keys, each a duration within bounds or `"off"`.
pub(super) fn parse_observe(src: &Src<'_>, o: RawObserve) -> Result<ObserveConfig, ConfigError> {
    let key = |name: &str, v: Option<toml::Spanned<String>>| match v {
        None => Ok(None),
        Some(v) => match duration(v.get_ref()) {
            Ok(d) => Ok(d),
            Err(why) => Err(src.at("observe", name, &v, why)),
        },
    };
    Ok(ObserveConfig {
        heartbeat: key("heartbeat", o.heartbeat)?,
        stall: key("stall", o.stall)?,
    })
}

/// A duration as `[observe]` writes it: a whole number and a unit (`ms`, `s`, `m`, `h`), or
/// `off` (`None`).
pub(crate) fn duration(text: &str) -> Result<Option<Duration>, String> {
    let t = text.trim();
    if t == "off" {
        return Ok(None);
    }
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(digits);
    let bad = || {
        format!(
            "{text:?} is not a duration: write a whole number and a unit (\"200ms\", \"30s\", \"10m\", \"1h\") or \"off\""
        )
    };
    let n: u64 = n.parse().map_err(|_| bad())?;
    let d = match unit.trim() {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(bad()),
    };
    if !(MIN_DURATION..=MAX_DURATION).contains(&d) {
        return Err(format!(
            "{text:?} is out of range: give at least 100ms and at most 24h, or \"off\""
        ));
    }
    Ok(Some(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_or_off_and_stay_in_bounds() {
        assert_eq!(duration("30s"), Ok(Some(Duration::from_secs(30))));
        assert_eq!(duration("10m"), Ok(Some(Duration::from_secs(600))));
        assert_eq!(duration("200ms"), Ok(Some(Duration::from_millis(200))));
        assert_eq!(duration("1h"), Ok(Some(Duration::from_secs(3600))));
        assert_eq!(duration("off"), Ok(None));
        for bad in ["30", "s", "-1s", "1.5s", "10 minutes", "", "5ms", "25h"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_table_parses_and_a_bad_value_is_one_line_naming_the_key_and_place() {
        use crate::exec::config::parse_runtime_config;
        use crate::exec::endpoint::Origin;
        let ok = parse_runtime_config(
            "[observe]\nheartbeat = \"30s\"\nstall = \"off\"\n",
            "runtime.toml",
            Origin::RepoConfig,
        )
        .unwrap();
        assert_eq!(ok.observe.heartbeat, Some(Duration::from_secs(30)));
        assert_eq!(ok.observe.stall, None);
        let e = parse_runtime_config(
            "[observe]\nstall = \"10 minutes\"\n",
            "runtime.toml",
            Origin::RepoConfig,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("runtime.toml:2:"), "{e}");
        assert!(
            e.contains("[observe] stall: \"10 minutes\" is not a duration"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
        let e = parse_runtime_config(
            "[observe]\nbeat = \"1s\"\n",
            "runtime.toml",
            Origin::RepoConfig,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown field"), "{e}");
    }
}
