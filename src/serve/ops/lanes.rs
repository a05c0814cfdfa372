//! `POST /lane/check` and `POST /lane/gaps`: thin calls into [`crate::surface::lanes`], the
//! functions `git forum lane check|gaps` run. A rejected claim answers 422 with the report
//! (its `lane_rejection` entry already written) and its one line as `error`.

use super::*;
use crate::surface::lanes;
use crate::surface::request::lanes as rq;

impl Dispatcher {
    pub(crate) fn lane_check(&self, req: &Request<'_>) -> Res {
        let a: rq::LaneCheck = request::decode(req.body)?;
        let mut store = Shared {
            d: self,
            reader: self.reader()?,
        };
        let r = lanes::check(&mut store, &a, self.now()).map_err(reply_of)?;
        let body = answer(Ok(&r))?;
        match r.refusal() {
            None => Ok(body),
            Some(e) => Err(Reply {
                status: e.class.http_status(),
                body,
                text: None,
            }),
        }
    }

    pub(crate) fn lane_gaps(&self, req: &Request<'_>) -> Res {
        let a: rq::LaneGaps = request::decode(req.body)?;
        let mut store = Shared {
            d: self,
            reader: self.reader()?,
        };
        answer(lanes::gaps(
            &mut store,
            &a,
            self.policy.min_escalations,
            self.now(),
        ))
    }
}
