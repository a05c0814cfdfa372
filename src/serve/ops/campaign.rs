//! The daemon's campaign routes (`POST /campaign/declare|status|next|ingest-status|run`),
//! each a thin call into [`crate::surface::campaign`]. A declaration comes in the body as
//! the campaign object itself: the server never reads a file a client names.

use super::*;
use crate::surface::campaign::{IngestAsk, Items};
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
        let a = Args::new(req.body, &["campaign"])?;
        let campaign = match a.get("campaign") {
            Some(c @ J::Object(_)) => c,
            _ => {
                return Err(bad(
                    "field \"campaign\" must be the campaign object {campaign_id, title, projects}",
                ));
            }
        };
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
        let a = Args::new(req.body, &["campaign_id"])?;
        let items = self.campaign_items()?;
        answer(surface::campaign::status(
            &items,
            a.str("campaign_id")?,
            self.campaign_verified()?,
        ))
    }

    pub(crate) fn campaign_next(&self, req: &Request<'_>) -> Res {
        let a = Args::new(req.body, &["campaign_id"])?;
        let items = self.campaign_items()?;
        answer(surface::campaign::next(&items, a.str("campaign_id")?))
    }

    pub(crate) fn campaign_ingest(&self, req: &Request<'_>) -> Res {
        let a = Args::new(
            req.body,
            &[
                "campaign_id",
                "project",
                "feature",
                "status",
                "source",
                "reason",
            ],
        )?;
        let ask = IngestAsk {
            campaign_id: a.str("campaign_id")?.map(str::to_string),
            project_id: a.text("project")?.to_string(),
            feature_id: a.str("feature")?.map(str::to_string),
            status: a.text("status")?.to_string(),
            reason: a.str("reason")?.unwrap_or("").to_string(),
            source: a.text("source")?.to_string(),
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
        let a = Args::new(
            req.body,
            &[
                "campaign_id",
                "max_parallel",
                "max_model_calls",
                "max_seconds",
                "work",
                "checks",
            ],
        )?;
        let id = a.str("campaign_id")?;
        let mut items = self.campaign_items()?;
        surface::campaign::resolve(&items, id).map_err(reply_of)?;
        let limit = self.cfg.submit_seconds;
        let spec = RunOptions {
            max_model_calls: a.int("max_model_calls")?,
            max_seconds: a.seconds("max_seconds")?,
            work: a.bool("work")?.unwrap_or(false),
            checks: super::runs::checks_of(&a)?,
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
        if let Some(n) = a.int("max_parallel")? {
            if n == 0 {
                return Err(bad("max_parallel must be at least 1"));
            }
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
