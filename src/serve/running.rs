//! The runs a daemon is driving now, each by its interrupt: a submit or resume registers its
//! interrupt for as long as it drives the run, and the interrupt knows the run's request seq
//! once it has one. The daemon's heartbeat names them (`heartbeat.rs`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::surface::run::Interrupt;

/// The runs in flight.
#[derive(Default)]
pub(crate) struct Running {
    next: AtomicU64,
    runs: Mutex<BTreeMap<u64, Arc<Interrupt>>>,
    /// Bumped whenever a run starts or ends (what the heartbeat calls activity).
    changes: AtomicU64,
}

/// A run registered in [`Running`]; dropping it takes the run off.
pub(crate) struct OnList<'r> {
    running: &'r Running,
    id: u64,
}

impl Drop for OnList<'_> {
    fn drop(&mut self) {
        self.running.runs().remove(&self.id);
        self.running.changes.fetch_add(1, Ordering::Relaxed);
    }
}

impl Running {
    /// Registers a run (by its interrupt) until the returned value is dropped.
    pub(crate) fn add(&self, interrupt: Arc<Interrupt>) -> OnList<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.runs().insert(id, interrupt);
        self.changes.fetch_add(1, Ordering::Relaxed);
        OnList { running: self, id }
    }

    /// How many times a run started or ended so far.
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// The request seqs of the runs in flight that have one, and how many are still opening
    /// (no request witnessed yet).
    pub(crate) fn seqs(&self) -> (Vec<u64>, usize) {
        let runs = self.runs();
        let mut seqs: Vec<u64> = runs.values().filter_map(|i| i.run()).collect();
        seqs.sort_unstable();
        let opening = runs.len() - seqs.len();
        (seqs, opening)
    }

    /// The list, recovered from a poisoned lock (it holds no half-done state).
    fn runs(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<Interrupt>>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }
}
