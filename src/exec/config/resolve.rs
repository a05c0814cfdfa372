//! Resolution: which configured executor the control roles, each roster tier and each task end
//! up on, and why (Forum's capable, frontier, cheap fallback included), or why none.

use std::fmt;

use super::{DEFAULT_FALLBACK, ExecutorSpec, Runtime, SeatChoice, Slot};
use crate::roster::{Roster, Tier};

// ---- resolution ----

/// Which configured executor a role ends up on, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Via {
    /// The slot itself is configured.
    Slot(Slot),
    /// A tier with no executor of its own falls back to the default slot.
    TierFallsBackToDefault(Tier),
    /// No default: the first configured tier among capable, frontier, cheap stands in.
    DefaultFromTier(Tier),
    /// A tier without an executor, and no default, falls back to the tier standing in for the
    /// default.
    TierFallsBackToTier(Tier, Tier),
    /// A seat's own executor table.
    Seat(&'static str),
}

impl Via {
    /// The slot whose executor is used (`None` for an inline seat).
    pub(crate) fn slot(&self) -> Option<Slot> {
        match self {
            Via::Slot(s) => Some(*s),
            Via::TierFallsBackToDefault(_) => Some(Slot::Default),
            Via::DefaultFromTier(t) | Via::TierFallsBackToTier(_, t) => Some(Slot::Tier(*t)),
            Via::Seat(_) => None,
        }
    }

    /// A short explanation.
    pub(crate) fn explain(&self) -> String {
        match self {
            Via::Slot(s) => format!("{s}"),
            Via::TierFallsBackToDefault(t) => format!("{t} has no executor: falls back to default"),
            Via::DefaultFromTier(t) => {
                format!("no default: {t} stands in (first configured of capable, frontier, cheap)")
            }
            Via::TierFallsBackToTier(t, d) => format!(
                "{t} has no executor and there is no default: falls back to {d} (first configured of capable, frontier, cheap)"
            ),
            Via::Seat(name) => format!("the {name} seat's own executor"),
        }
    }
}

/// Why a role has no executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unresolved {
    /// Nothing is configured at all.
    NothingConfigured,
    /// A seat names a slot that has no executor.
    SeatNamesEmptySlot(&'static str, Slot),
}

impl fmt::Display for Unresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unresolved::NothingConfigured => f.write_str(
                "no executor is configured: pass --cmd, --chat-url, --api, --claude, --codex or --aider, or write .forum/runtime.toml",
            ),
            Unresolved::SeatNamesEmptySlot(seat, slot) => write!(
                f,
                "the {seat} seat names {slot}, which has no executor: configure [{}] or name another slot",
                slot.table()
            ),
        }
    }
}

impl Runtime {
    /// Whether any executor is configured.
    pub(crate) fn is_empty(&self) -> bool {
        self.default.is_none()
            && self.tiers.is_empty()
            && !matches!(self.seats.worker, SeatChoice::Inline(_))
            && !matches!(self.seats.orchestrator, SeatChoice::Inline(_))
    }

    /// The executor standing in for the default slot: the default, else the first configured
    /// tier among capable, frontier, cheap (what Forum's submit does).
    pub(crate) fn effective_default(&self) -> Option<(Via, &ExecutorSpec)> {
        if let Some(d) = &self.default {
            return Some((Via::Slot(Slot::Default), d));
        }
        DEFAULT_FALLBACK
            .iter()
            .find_map(|t| self.tiers.get(t).map(|s| (Via::DefaultFromTier(*t), s)))
    }

    /// The executor for a roster tier: the tier's, else the effective default.
    pub(crate) fn for_tier(&self, tier: Tier) -> Option<(Via, &ExecutorSpec)> {
        if let Some(s) = self.tiers.get(&tier) {
            return Some((Via::Slot(Slot::Tier(tier)), s));
        }
        match self.effective_default()? {
            (Via::Slot(_), s) => Some((Via::TierFallsBackToDefault(tier), s)),
            (Via::DefaultFromTier(d), s) => Some((Via::TierFallsBackToTier(tier, d), s)),
            (v, s) => Some((v, s)),
        }
    }

    /// The executor a slot names, as it resolves (an empty default falls back to a tier).
    pub(crate) fn slot(&self, slot: Slot) -> Option<(Via, &ExecutorSpec)> {
        match slot {
            Slot::Default => self.effective_default(),
            Slot::Tier(t) => self.tiers.get(&t).map(|s| (Via::Slot(slot), s)),
        }
    }

    pub(super) fn seat(
        &self,
        name: &'static str,
        choice: &'_ SeatChoice,
    ) -> Option<Result<(Via, ExecutorSpec), Unresolved>> {
        match choice {
            SeatChoice::Unset => None,
            SeatChoice::Inline(s) => Some(Ok((Via::Seat(name), s.clone()))),
            SeatChoice::Slot(slot) => Some(
                self.slot(*slot)
                    .map(|(v, s)| (v, s.clone()))
                    .ok_or(Unresolved::SeatNamesEmptySlot(name, *slot)),
            ),
        }
    }

    /// The executor of the control roles: the orchestrator seat, else the effective default.
    pub(crate) fn for_control(&self) -> Result<(Via, ExecutorSpec), Unresolved> {
        if let Some(r) = self.seat("orchestrator", &self.seats.orchestrator) {
            return r;
        }
        self.effective_default()
            .map(|(v, s)| (v, s.clone()))
            .ok_or(Unresolved::NothingConfigured)
    }

    /// The executor of a task routed to `agent`: the worker seat if it is set; else the tier
    /// executor of the agent's `model_tier`; else (an unknown agent) the effective default.
    pub(crate) fn for_task(
        &self,
        roster: &Roster,
        agent: &str,
    ) -> Result<(Via, ExecutorSpec), Unresolved> {
        if let Some(r) = self.seat("worker", &self.seats.worker) {
            return r;
        }
        let found = match roster.get(agent) {
            Some(a) => self.for_tier(a.model_tier),
            None => self.effective_default(),
        };
        found
            .map(|(v, s)| (v, s.clone()))
            .ok_or(Unresolved::NothingConfigured)
    }

    /// Every distinct executor a run may call, with the places it serves, in a stable order.
    pub(crate) fn in_use(&self) -> Vec<(String, ExecutorSpec)> {
        let mut out: Vec<(String, ExecutorSpec)> = Vec::new();
        if let Some(d) = &self.default {
            out.push(("default".into(), d.clone()));
        }
        for (t, s) in &self.tiers {
            out.push((t.as_str().into(), s.clone()));
        }
        for (name, c) in [
            ("worker seat", &self.seats.worker),
            ("orchestrator seat", &self.seats.orchestrator),
        ] {
            if let SeatChoice::Inline(s) = c {
                out.push((name.into(), s.clone()));
            }
        }
        out
    }
}
