//! The daemon's campaign routes (`POST /campaign/declare|status|next|ingest-status|run`),
//! each a thin call into [`crate::surface::campaign`]. A declaration comes in the body as
//! the campaign object itself: the server never reads a file a client names.

use super::*;
use crate::surface::campaign::{IngestAsk, Items};
use crate::surface::request::{self, work as rq};
use crate::surface::run::prepare::{Prepared, RunSetup, Shape, prepare};

impl Dispatcher {
    /// Every entry of the served ledger with its body, as the campaign reduction reads them.
    fn campaign_items(&self) -> Result<Items, Reply> {
        let view = self.snapshot()?;
        let reader = self.reader()?;
        let mut items = Items::with_capacity(view.entries.len());
        for e in view.entries.iter() {
            let body = Self::body_in(&reader, &view, e.seq)?.map(|v| v.to_serde());
            items.push((e.clone(), body));
        }
        Ok(items)
    }

    /// Whether the served ledger verifies deeply (every body), as the room reports it.
    fn campaign_verified(&self) -> Result<bool, Reply> {
        let reader = self.reader()?;
        Ok(reader.exists()? && reader.verify(true)?.passed())
    }

    pub(crate) fn campaign_declare(&self, req: &Request<'_>) -> Res {
        let a: rq::CampaignDeclare = request::decode(req.body)?;
        let campaign = J::Object(a.campaign);
        let mut store = Shared {
            d: self,
            reader: self.reader()?,
        };
        answer(surface::campaign::declare(
            &mut store,
            &campaign.to_string(),
            self.now(),
        ))
    }

    pub(crate) fn campaign_status(&self, req: &Request<'_>) -> Res {
        let a: rq::CampaignStatus = request::decode(req.body)?;
        let items = self.campaign_items()?;
        answer(surface::campaign::status(
            &items,
            a.campaign_id.as_deref(),
            self.campaign_verified()?,
        ))
    }

    pub(crate) fn campaign_next(&self, req: &Request<'_>) -> Res {
        let a: rq::CampaignNext = request::decode(req.body)?;
        let items = self.campaign_items()?;
        answer(surface::campaign::next(&items, a.campaign_id.as_deref()))
    }

    pub(crate) fn campaign_ingest(&self, req: &Request<'_>) -> Res {
        let a: rq::CampaignIngest = request::decode(req.body)?;
        let ask = IngestAsk {
            campaign_id: a.campaign_id,
            project_id: a.project,
            feature_id: a.feature,
            status: a.status,
            reason: a.reason.unwrap_or_default(),
            source: a.source,
        };
        let mut items = self.campaign_items()?;
        let mut store = Shared {
            d: self,
            reader: self.reader()?,
        };
        answer(surface::campaign::ingest(
            &mut store,
            &mut items,
            &ask,
            self.now(),
        ))
    }

    /// Runs the campaign with the server's executors to a fixed point and answers its room.
    pub(crate) fn campaign_run(&self, req: &Request<'_>) -> Res {
        let a: rq::CampaignRun = request::decode(req.body)?;
        let id = a.campaign_id.as_deref();
        let mut items = self.campaign_items()?;
        surface::campaign::resolve(&items, id).map_err(reply_of)?;
        let limit = self.cfg.submit_seconds;
        let spec = RunOptions {
            max_model_calls: a.max_model_calls,
            max_seconds: a.max_seconds,
            work: a.work,
            checks: a.checks.clone(),
            // The daemon's `[dispatch]` table gives the remote, credentials and TLS settings.
            dispatch: a
                .dispatch
                .as_ref()
                .map(|url| crate::surface::worker::DispatchSpec::at(url)),
            ..RunOptions::default()
        };
        let setup = RunSetup {
            spec,
            resumed: None,
            roster: &self.roster,
            dir: &self.cfg.dir,
            ledger: &self.cfg.ledger,
            shape: Shape::CampaignRound,
            repo_choice: None,
            max_seconds_cap: Some(limit),
            recorded_executors: false,
            refuse_unready: false,
        };
        let runtime = || Ok(self.executors.loaded.as_ref().map(|l| l.runtime.clone()));
        let Prepared { mut opts, .. } =
            prepare(setup, || Ok(self.policy.clone()), runtime, &|_| {}).map_err(reply_of)?;
        if let Some(n) = a.max_parallel {
            opts.policy.max_parallel = n as usize;
        }
        opts.interrupt = req.hooks.interrupt.clone();
        let seats = self.seats()?;
        let clock = RunClock::new(self.cfg.timestamp).draining_with(self.draining.clone());
        let env = Env {
            roster: &self.roster,
            seats: seats.as_ref(),
            clock: &clock,
            progress: req.hooks.progress.unwrap_or(&run::Silent),
        };
        let mut store = Shared {
            d: self,
            reader: self.reader()?,
        };
        surface::campaign::run(&mut store, &mut items, &env, &opts, id).map_err(reply_of)?;
        let items = self.campaign_items()?;
        answer(surface::campaign::status(
            &items,
            id,
            self.campaign_verified()?,
        ))
    }
}
