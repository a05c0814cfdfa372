//! The daemon's cached projections: `GET /verify` and `GET /summary` answer from state kept
//! across requests, so a ledger of 100,000 entries is read whole once, and each later request
//! reads only what was appended since.
//!
//! * **verify**: what the last deep verify that passed read ([`Verified`]: 88 bytes an entry),
//!   resumed when the new tip descends from its tip; the chain pass and the witnesses are
//!   checked again over every record, the objects only for the new entries
//!   ([`crate::surface::store::GitStore::verify_from`]). A resumed verify that fails is done again
//!   from the root.
//! * **summary**: the summary's fold over every entry ([`SummaryFold`]: counts, one key per
//!   distinct body, no body kept), extended with the bodies of the new entries; its
//!   `verified` is a chain verify resumed the same way, and its checkpoint the entry cache's
//!   Merkle root.
//!
//! Both are keyed by commits, never trusted across a rewrite: the fold is extended only when
//! the commit it last read is still the commit at its seq in the chain just read (so a
//! redaction, which rewrites commits, or a rewound ref starts it again from seq 0), and a
//! verify resumes only from a tip the new walk meets. Each is behind its own lock, held for the
//! whole computation: two requests at once do the work once, the second answering from what
//! the first kept.

pub(crate) mod cache;

use cache::Folded;

use super::dispatch::{Dispatcher, Reply, lock};
use crate::report::summary::SummaryFold;

impl Dispatcher {
    /// Verifies the served ledger (deep or not), resuming from what the last verify that
    /// passed read.
    pub(crate) fn verify_cached(
        &self,
        deep: bool,
    ) -> Result<crate::surface::verify::VerifyReport, Reply> {
        let store = self.reader()?;
        if !store.exists()? {
            return Ok(crate::surface::verify::VerifyReport::empty(
                &self.cfg.ledger,
                deep,
            ));
        }
        let slot = if deep {
            &self.projections.deep
        } else {
            &self.projections.chain
        };
        let mut kept = lock(slot);
        let (report, next) =
            crate::surface::verify::verify_resumed(&store, &self.cfg.ledger, deep, kept.take())?;
        *kept = next;
        Ok(report)
    }

    /// The summary of the served ledger (`git forum summary --json`), from the fold kept
    /// across requests.
    pub(crate) fn summary_cached(&self) -> Result<crate::surface::reports::SummaryReport, Reply> {
        let view = self.snapshot()?;
        let verified = self.verify_cached(false)?.ok;
        let mut kept = lock(&self.projections.summary);
        let n = view.entries.len();
        let extends = kept.as_ref().is_some_and(|f| {
            f.len <= n && (f.len == 0 || view.commits.get(f.len - 1) == f.tip.as_ref())
        });
        if !extends {
            *kept = Some(Folded {
                len: 0,
                tip: None,
                fold: SummaryFold::default(),
            });
        }
        let folded = kept.as_mut().expect("set above");
        if folded.len < n {
            let store = self.reader()?;
            for seq in folded.len..n {
                let body = Self::body_in(&store, &view, seq as u64)?;
                folded.fold.push(&view.entries[seq], body.as_ref());
                // Counted so far, should the next body fail to read.
                folded.len = seq + 1;
                folded.tip = view.commits.get(seq).copied();
            }
        }
        Ok(crate::surface::reports::SummaryReport {
            label: format!("ledger {}", self.cfg.ledger),
            summary: folded.fold.summary(&view.root, verified),
        })
    }
}
