//! The verification tier of a seat (tiers as Aesop has them), pure: how hard the
//! changes of a `--work` run are checked, from what the seat's executor table says.
//!
//! | tier | who | every change gated | checks required | intent judge |
//! |---|---|---|---|---|
//! | 3 | small or local (`is_local = true`, or `tier = 3`) | yes | yes | on |
//! | 2 | the default for a hosted seat | yes | no | as asked |
//! | 1 + `verify = "light"` | a hosted frontier seat that opts out | only changes without a passing check | no | as asked |
//!
//! A tier-3 seat cannot be lightened (`verify = "light"` there is refused when the file is
//! read); `light` is for a seat that says it is a hosted frontier model (`tier = 1`). A run
//! whose tasks may land on several executors is checked at the heaviest of their tiers.

use serde::Serialize;

use super::{ExecutorSpec, Runtime};
use crate::roster::Roster;

/// How a seat's changes are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verify {
    /// Only changes whose checks did not all pass (or that had none) go to the pre-ship gate.
    Light,
    /// Every change goes to the pre-ship gate.
    Standard,
    /// Every change is gated, checks are required, the intent judge is on.
    Full,
}

impl Verify {
    /// The level named `s` (`full`, `standard`, `light`).
    pub(crate) fn parse(s: &str) -> Option<Verify> {
        match s {
            "full" => Some(Verify::Full),
            "standard" => Some(Verify::Standard),
            "light" => Some(Verify::Light),
            _ => None,
        }
    }

    /// Its name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verify::Full => "full",
            Verify::Standard => "standard",
            Verify::Light => "light",
        }
    }
}

/// What an executor table says about verification: `tier = 1..3` and `verify = "..."`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeatVerify {
    /// `tier = N`, when written.
    pub(crate) tier: Option<u8>,
    /// `verify = "..."`, when written.
    pub(crate) verify: Option<Verify>,
}

/// A seat's tier and what it implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// 3 small or local, 2 hosted (the default), 1 hosted frontier.
    pub(crate) tier: u8,
    /// The level its changes are checked at.
    pub(crate) verify: Verify,
    /// Whether every change goes to the pre-ship gate.
    pub(crate) gate_every_change: bool,
    /// Whether a `--work` run must have at least one check.
    pub(crate) checks_required: bool,
    /// Whether the intent judge is on whatever the flags say.
    pub(crate) judge_intent: bool,
}

impl Verification {
    /// The implications of `verify` at `tier`.
    pub(crate) fn of(tier: u8, verify: Verify) -> Verification {
        Verification {
            tier,
            verify,
            gate_every_change: verify != Verify::Light,
            checks_required: verify == Verify::Full,
            judge_intent: verify == Verify::Full,
        }
    }

    /// The heavier of two (a run whose tasks may land on either is checked at this one).
    pub(crate) fn heavier(self, other: Verification) -> Verification {
        if other.verify > self.verify || (other.verify == self.verify && other.tier > self.tier) {
            other
        } else {
            self
        }
    }

    /// One line for people: `tier 3: every change gated, checks required, intent judge on`.
    pub(crate) fn describe(&self) -> String {
        let gate = if self.gate_every_change {
            "every change gated"
        } else {
            "changes with passing checks merge without the gate"
        };
        let checks = if self.checks_required {
            "checks required"
        } else {
            "checks optional"
        };
        let judge = if self.judge_intent {
            "intent judge on"
        } else {
            "intent judge as asked"
        };
        format!(
            "tier {} ({}): {gate}, {checks}, {judge}",
            self.tier,
            self.verify.as_str()
        )
    }
}

/// Why a table's `tier`/`verify` pair is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SeatRefusal {
    /// A tier outside 1..=3.
    #[error("tier = {0}: give 1 (hosted frontier), 2 (hosted) or 3 (small or local)")]
    Tier(u8),
    /// A lighter level than full on a tier-3 seat.
    #[error(
        "verify = \"{}\": a small or local seat (tier 3) is always checked in full; remove verify",
        .0.as_str()
    )]
    LighterOnTier3(Verify),
    /// `light` on a seat that is not tier 1.
    #[error("verify = \"light\" is for a hosted frontier seat: add tier = 1, or remove verify")]
    LightNeedsTier1,
}

/// Why a table's `tier`/`verify` pair is refused, if it is.
pub(crate) fn check(is_local: bool, v: SeatVerify) -> Result<(), SeatRefusal> {
    if let Some(t) = v.tier
        && !(1..=3).contains(&t)
    {
        return Err(SeatRefusal::Tier(t));
    }
    let tier = resolve(is_local, SeatVerify { verify: None, ..v }).tier;
    match v.verify {
        Some(l @ (Verify::Light | Verify::Standard)) if tier == 3 => {
            Err(SeatRefusal::LighterOnTier3(l))
        }
        Some(Verify::Light) if tier != 1 => Err(SeatRefusal::LightNeedsTier1),
        _ => Ok(()),
    }
}

/// The tier of a seat and its implications: `tier` when written, else 3 for `is_local`,
/// else 2; a tier-3 seat is checked in full, others at their `verify` (default standard).
pub(crate) fn resolve(is_local: bool, v: SeatVerify) -> Verification {
    let tier = v.tier.unwrap_or(if is_local { 3 } else { 2 });
    let verify = if tier == 3 {
        Verify::Full
    } else {
        v.verify.unwrap_or(Verify::Standard)
    };
    Verification::of(tier, verify)
}

/// The verification of one executor.
pub(crate) fn of_spec(spec: &ExecutorSpec) -> Verification {
    resolve(spec.is_local, spec.verify)
}

/// The verification of a run under `rt` and `roster`: the heaviest of the executors its tasks
/// may land on (each lane's, through the worker seat when it is pinned). An executor that does
/// not resolve counts as nothing here (the run is refused for it elsewhere); with none at
/// all, the default's level (tier 2, standard).
pub(crate) fn for_run(rt: &Runtime, roster: &Roster) -> Verification {
    roster
        .agents()
        .iter()
        .filter_map(|a| rt.for_task(roster, &a.name).ok())
        .map(|(_, spec)| of_spec(&spec))
        .reduce(Verification::heavier)
        .unwrap_or_else(|| resolve(false, SeatVerify::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_seat_is_tier_three_and_checked_in_full() {
        let v = resolve(true, SeatVerify::default());
        assert_eq!(
            v,
            Verification {
                tier: 3,
                verify: Verify::Full,
                gate_every_change: true,
                checks_required: true,
                judge_intent: true
            }
        );
        let t3 = resolve(
            false,
            SeatVerify {
                tier: Some(3),
                verify: None,
            },
        );
        assert_eq!(t3, v);
        assert_eq!(
            v.describe(),
            "tier 3 (full): every change gated, checks required, intent judge on"
        );
    }

    #[test]
    fn a_hosted_seat_is_standard_and_a_frontier_one_may_lighten() {
        let std = resolve(false, SeatVerify::default());
        assert_eq!((std.tier, std.verify), (2, Verify::Standard));
        assert!(std.gate_every_change && !std.checks_required && !std.judge_intent);
        let light = SeatVerify {
            tier: Some(1),
            verify: Some(Verify::Light),
        };
        assert!(check(false, light).is_ok());
        let l = resolve(false, light);
        assert!(!l.gate_every_change && !l.checks_required);
        // The heavier one wins.
        assert_eq!(l.heavier(std), std);
        assert_eq!(std.heavier(resolve(true, SeatVerify::default())).tier, 3);
    }

    #[test]
    fn a_local_seat_cannot_be_lightened_and_light_needs_tier_one() {
        let e = check(
            true,
            SeatVerify {
                tier: None,
                verify: Some(Verify::Light),
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("always checked in full"), "{e}");
        let e = check(
            false,
            SeatVerify {
                tier: None,
                verify: Some(Verify::Light),
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("add tier = 1"), "{e}");
        assert!(
            check(
                false,
                SeatVerify {
                    tier: Some(4),
                    verify: None
                }
            )
            .unwrap_err()
            .to_string()
            .contains("tier = 4")
        );
        assert_eq!(Verify::parse("full"), Some(Verify::Full));
        assert_eq!(Verify::parse("heavy"), None);
    }
}
