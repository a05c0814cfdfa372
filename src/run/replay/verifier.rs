//! The verifier of a replayed run: each `verification` entry's verdict handed back in turn,
//! so no verifier command runs again. What the run witnesses of it is the verdict itself, so
//! a replay shows that the verifier was asked where the record says, on the delivered answer.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::ledger::kind;
use crate::run::{Verification, Verifier, VerifierConclusion, lock};

use super::Recorded;

/// Verdicts answered from the record.
pub(super) struct ReplayVerifier {
    verdicts: Mutex<VecDeque<Verification>>,
    source: String,
}

impl ReplayVerifier {
    /// The verifier of a run whose entries hold `verification`; `None` when none was asked.
    pub(super) fn read(run: &[Recorded]) -> Option<ReplayVerifier> {
        let verdicts: VecDeque<Verification> = run
            .iter()
            .filter(|e| e.kind == kind::VERIFICATION)
            .map(|e| {
                let b = &e.payload;
                Verification {
                    outcome: match b["ok"].as_bool() {
                        Some(true) => VerifierConclusion::Verified,
                        Some(false) => VerifierConclusion::Refuted,
                        None => VerifierConclusion::Undecided,
                    },
                    detail: b["detail"].as_str().unwrap_or_default().to_string(),
                    source: b["source"].as_str().unwrap_or_default().to_string(),
                }
            })
            .collect();
        let source = verdicts.front()?.source.clone();
        Some(ReplayVerifier {
            verdicts: Mutex::new(verdicts),
            source,
        })
    }
}

impl Verifier for ReplayVerifier {
    fn verify(&self, _: &str, _: &str) -> Verification {
        lock(&self.verdicts)
            .pop_front()
            .unwrap_or_else(|| Verification {
                outcome: VerifierConclusion::Undecided,
                detail: "the record holds no verdict for this verifier call".into(),
                source: self.source.clone(),
            })
    }

    fn source(&self) -> String {
        self.source.clone()
    }
}
