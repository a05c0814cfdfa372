//! Spend ceilings: a pure ledger of the tokens and money a run may still spend. Pure: no I/O, no clock; the run holds one [`Spend`] behind a mutex that its
//! parallel workers share.
//!
//! A call first *reserves* its worst case ([`Spend::reserve`]): the prompt tokens (estimated
//! from the prompt's bytes, conservatively; a command, charged an estimate of its own, reserves
//! that estimate) plus its output cap, at its executor's price.
//! A reservation that does not fit in what is left is refused ([`CeilingHit`]) and the call
//! never starts, so however many calls run at once, the sum of what they may spend never passes
//! the ceiling. When the call returns, [`Spend::settle`] replaces the reservation with what the
//! call really used and releases the rest.
//!
//! A call that reports more than it reserved (a provider that ignored the output cap, an agent
//! CLI that worked many turns, a worker that lies) is an [`Overrun`]: it is charged only what
//! the ceilings allow (what is left of each, net of the other calls' reservations, so the spend
//! never passes a ceiling), the overrun is kept for the record (what was reserved, reported and
//! charged), and the ledger closes: every later reservation is refused, so the run stops as a
//! ceiling stop. Without a ceiling there is nothing to hold a call to, so nothing is clamped.
//!
//! Money is counted in integer pico-dollars (10^-12 USD): prices are rounded up to whole
//! micro-dollars per million tokens and the ceiling down to whole pico-dollars, so no sum of
//! floats can drift past a ceiling.

use serde::Serialize;

/// Pico-dollars in one dollar.
const PICO_PER_USD: f64 = 1e12;
/// Micro-dollars in one dollar.
const MICRO_PER_USD: f64 = 1e6;
/// The highest price per million tokens accepted (USD).
pub(crate) const MAX_PRICE_PER_MTOK: f64 = 1e6;
/// Tokens added to every prompt estimate for the chat template's framing (roles, separators).
pub(crate) const PROMPT_FRAMING_TOKENS: u64 = 32;

/// What one executor charges, in micro-dollars per million tokens (so `1_500_000` is $1.50).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Price {
    pub(crate) in_micro_per_mtok: u64,
    pub(crate) out_micro_per_mtok: u64,
}

impl Price {
    /// A price from dollars per million tokens (`price_in_per_mtok`, `price_out_per_mtok`),
    /// rounded up to a whole micro-dollar. `None` for a negative, non-finite or absurd price.
    pub(crate) fn from_usd_per_mtok(input: f64, output: f64) -> Option<Price> {
        Some(Price {
            in_micro_per_mtok: micro(input)?,
            out_micro_per_mtok: micro(output)?,
        })
    }

    /// The price in dollars per million input and output tokens (as the metering forwarder
    /// takes it).
    pub(crate) fn usd_per_mtok(&self) -> (f64, f64) {
        (
            self.in_micro_per_mtok as f64 / MICRO_PER_USD,
            self.out_micro_per_mtok as f64 / MICRO_PER_USD,
        )
    }

    /// What `prompt` input tokens and `completion` output tokens cost, in pico-dollars
    /// (one micro-dollar per million tokens is one pico-dollar per token).
    pub(crate) fn cost_pico(&self, prompt: u64, completion: u64) -> u64 {
        let c = u128::from(prompt) * u128::from(self.in_micro_per_mtok)
            + u128::from(completion) * u128::from(self.out_micro_per_mtok);
        u64::try_from(c).unwrap_or(u64::MAX)
    }
}

fn micro(usd_per_mtok: f64) -> Option<u64> {
    if !usd_per_mtok.is_finite() || !(0.0..=MAX_PRICE_PER_MTOK).contains(&usd_per_mtok) {
        return None;
    }
    Some((usd_per_mtok * MICRO_PER_USD).ceil() as u64)
}

/// A ceiling in dollars as whole pico-dollars, rounded down (so staying under it in
/// pico-dollars stays under it in dollars).
pub(crate) fn usd_to_pico(usd: f64) -> u64 {
    if !usd.is_finite() || usd <= 0.0 {
        return 0;
    }
    let p = (usd * PICO_PER_USD).floor();
    if p >= u64::MAX as f64 {
        u64::MAX
    } else {
        p as u64
    }
}

/// Pico-dollars as dollars, for reports.
pub(crate) fn pico_to_usd(pico: u64) -> f64 {
    pico as f64 / PICO_PER_USD
}

/// A conservative count of the tokens a prompt of `bytes` bytes can be: byte-level tokenizers
/// never make more tokens than bytes, and the chat framing adds a few.
pub(crate) fn prompt_tokens_upper_bound(bytes: usize) -> u64 {
    bytes as u64 + PROMPT_FRAMING_TOKENS
}

/// The usage estimate of a command worker, whose program reports none: four bytes a token,
/// rounded up. Marked `estimated` wherever it is witnessed.
pub(crate) fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// The two ceilings of a run; `None` is no ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Ceilings {
    /// `--max-tokens`: prompt plus completion tokens over every model call.
    pub(crate) max_tokens: Option<u64>,
    /// `--max-cost-usd`, in pico-dollars.
    pub(crate) max_cost_pico: Option<u64>,
}

impl Ceilings {
    /// True when there is at least one ceiling.
    pub(crate) fn any(&self) -> bool {
        self.max_tokens.is_some() || self.max_cost_pico.is_some()
    }
}

/// Which ceiling stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Ceiling {
    MaxTokens,
    MaxCostUsd,
}

impl Ceiling {
    /// The ceiling's name as the flag and the record spell it (`max_tokens`, `max_cost_usd`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Ceiling::MaxTokens => "max_tokens",
            Ceiling::MaxCostUsd => "max_cost_usd",
        }
    }
}

/// What a call may spend or did spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Amount {
    pub(crate) tokens: u64,
    pub(crate) pico: u64,
}

impl Amount {
    /// `prompt` plus `completion` tokens at `price`.
    pub(crate) fn of(prompt: u64, completion: u64, price: Price) -> Amount {
        Amount {
            tokens: prompt.saturating_add(completion),
            pico: price.cost_pico(prompt, completion),
        }
    }
}

/// A call's reservation: held while the call runs, given back to [`Spend::settle`]. Not
/// `Clone`, so it is settled once.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Reservation {
    held: Amount,
}

/// A reservation that did not fit: the call must not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CeilingHit {
    /// The ceiling it would have passed (tokens first when both would).
    pub(crate) ceiling: Ceiling,
    /// What the call asked for in that ceiling's unit (tokens or pico-dollars).
    pub(crate) needed: u64,
    /// What was left of that ceiling, net of running reservations.
    pub(crate) left: u64,
    /// Set when the ledger closed because a call reported more than it reserved
    /// ([`Spend::overrun`] says which), not because a ceiling was reached.
    pub(crate) overrun: bool,
}

/// A call that reported more than it reserved: what it reserved, what it reported (prompt and
/// completion tokens) and what it was charged (tokens as reported, cut to what the ceilings
/// allowed, completion first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overrun {
    pub(crate) reserved: Amount,
    pub(crate) reported_prompt: u64,
    pub(crate) reported_completion: u64,
    pub(crate) reported: Amount,
    pub(crate) charged_prompt: u64,
    pub(crate) charged_completion: u64,
    pub(crate) charged: Amount,
}

impl Overrun {
    /// Tokens reported beyond the reservation.
    pub(crate) fn over_tokens(&self) -> u64 {
        self.reported.tokens.saturating_sub(self.reserved.tokens)
    }

    /// Pico-dollars reported beyond the reservation.
    pub(crate) fn over_pico(&self) -> u64 {
        self.reported.pico.saturating_sub(self.reserved.pico)
    }
}

/// What a call reported: its prompt and completion tokens at its price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Reported {
    pub(crate) prompt: u64,
    pub(crate) completion: u64,
    pub(crate) price: Price,
}

impl Reported {
    /// `prompt` and `completion` tokens at `price`.
    pub(crate) fn of(prompt: u64, completion: u64, price: Price) -> Reported {
        Reported {
            prompt,
            completion,
            price,
        }
    }

    fn amount(&self) -> Amount {
        Amount::of(self.prompt, self.completion, self.price)
    }
}

/// How a call was settled: what it was charged, and its overrun when it reported more than
/// it reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settled {
    pub(crate) charged: Amount,
    pub(crate) overrun: Option<Overrun>,
}

/// `prompt` and `completion` tokens cut, completion first, so that they stay within `tokens`
/// tokens and `pico` pico-dollars at `price` (`None`: no bound).
fn clamp(
    prompt: u64,
    completion: u64,
    price: Price,
    tokens: Option<u64>,
    pico: Option<u64>,
) -> (u64, u64) {
    let (mut p, mut c) = (prompt, completion);
    if let Some(t) = tokens {
        p = p.min(t);
        c = c.min(t - p);
    }
    if let Some(room) = pico
        && price.cost_pico(p, c) > room
    {
        let for_prompt = price.cost_pico(p, 0);
        if for_prompt <= room {
            // Completion tokens cost something here, or the sum would fit.
            c = c.min((room - for_prompt) / price.out_micro_per_mtok.max(1));
        } else {
            c = 0;
            p = p.min(room / price.in_micro_per_mtok.max(1));
        }
    }
    (p, c)
}

/// The spend of one run (this time: a resumed run starts a fresh one).
#[derive(Debug, Clone, Default)]
pub(crate) struct Spend {
    ceilings: Ceilings,
    spent: Amount,
    reserved: Amount,
    hit: Option<CeilingHit>,
    /// The first call that reported more than it reserved.
    overrun: Option<Overrun>,
}

impl Spend {
    /// A ledger with nothing spent under `ceilings`.
    pub(crate) fn new(ceilings: Ceilings) -> Spend {
        Spend {
            ceilings,
            ..Spend::default()
        }
    }

    /// Reserves `worst` (the call's worst case) if it fits in what is left of every ceiling,
    /// net of the reservations still running. Once one reservation is refused every later one
    /// is too: the run stops there instead of letting smaller calls through.
    pub(crate) fn reserve(&mut self, worst: Amount) -> Result<Reservation, CeilingHit> {
        if let Some(hit) = self.hit {
            return Err(hit);
        }
        let committed = Amount {
            tokens: self.spent.tokens.saturating_add(self.reserved.tokens),
            pico: self.spent.pico.saturating_add(self.reserved.pico),
        };
        let checks = [
            (
                Ceiling::MaxTokens,
                self.ceilings.max_tokens,
                committed.tokens,
                worst.tokens,
            ),
            (
                Ceiling::MaxCostUsd,
                self.ceilings.max_cost_pico,
                committed.pico,
                worst.pico,
            ),
        ];
        for (ceiling, max, used, needed) in checks {
            if let Some(max) = max
                && used.saturating_add(needed) > max
            {
                let hit = CeilingHit {
                    ceiling,
                    needed,
                    left: max.saturating_sub(used),
                    overrun: false,
                };
                self.hit = Some(hit);
                return Err(hit);
            }
        }
        self.reserved.tokens += worst.tokens;
        self.reserved.pico += worst.pico;
        Ok(Reservation { held: worst })
    }

    /// What is left of the token ceiling, net of what is spent and reserved (`None`: no token
    /// ceiling). For an agent metered while it runs: its forwarder refuses past this.
    pub(crate) fn tokens_left(&self) -> Option<u64> {
        self.ceilings
            .max_tokens
            .map(|max| max.saturating_sub(self.spent.tokens.saturating_add(self.reserved.tokens)))
    }

    /// What is left of the dollar ceiling in pico-dollars, net of what is spent and reserved
    /// (`None`: no dollar ceiling). For an agent metered while it runs: its forwarder refuses
    /// past this, at the seat's prices.
    pub(crate) fn cost_left_pico(&self) -> Option<u64> {
        self.ceilings
            .max_cost_pico
            .map(|max| max.saturating_sub(self.spent.pico.saturating_add(self.reserved.pico)))
    }

    /// Ends the reservation of a call metered while it ran (an agent behind git forum's
    /// metering forwarder) with what the forwarder counted. That count is charged whole, even
    /// past a ceiling: the forwarder let each request through only while the totals were under
    /// what was left, so what passes the ceiling is the one model turn that was in flight when
    /// it was reached, and the record says so rather than cutting it. A ceiling reached closes
    /// the ledger. `None` (nothing counted) charges the reservation, as [`Spend::settle`].
    pub(crate) fn settle_metered(&mut self, r: Reservation, actual: Option<Reported>) -> Amount {
        self.reserved.tokens = self.reserved.tokens.saturating_sub(r.held.tokens);
        self.reserved.pico = self.reserved.pico.saturating_sub(r.held.pico);
        let charged = actual.map_or(r.held, |a| a.amount());
        self.spent.tokens = self.spent.tokens.saturating_add(charged.tokens);
        self.spent.pico = self.spent.pico.saturating_add(charged.pico);
        self.close_at_ceiling();
        charged
    }

    /// Closes the ledger on `ceiling`: a call metered while it ran was stopped there (its
    /// forwarder refused the request that would have passed it).
    pub(crate) fn close_on(&mut self, ceiling: Ceiling) {
        if self.hit.is_none() {
            self.hit = Some(CeilingHit {
                ceiling,
                needed: 0,
                left: 0,
                overrun: false,
            });
        }
    }

    /// Ends a reservation with what the call really used (`None`: it did not say, so the
    /// whole reservation is charged). Under a ceiling, a call that reported more than it
    /// reserved is an [`Overrun`]: charged only what the ceilings allow, and the ledger closes
    /// to new reservations (see the module doc). A call that reached a ceiling closes it too.
    pub(crate) fn settle(&mut self, r: Reservation, actual: Option<Reported>) -> Settled {
        self.reserved.tokens = self.reserved.tokens.saturating_sub(r.held.tokens);
        self.reserved.pico = self.reserved.pico.saturating_sub(r.held.pico);
        let mut charged = actual.map_or(r.held, |a| a.amount());
        let mut overrun = None;
        if let Some(a) = actual
            && self.ceilings.any()
            && (charged.tokens > r.held.tokens || charged.pico > r.held.pico)
        {
            // What is left of each ceiling for this call, net of the other calls' reservations
            // (never less than this call's own reservation, which fitted).
            let room = |max: Option<u64>, spent: u64, reserved: u64, held: u64| {
                max.map(|m| m.saturating_sub(spent.saturating_add(reserved)).max(held))
            };
            let tokens = room(
                self.ceilings.max_tokens,
                self.spent.tokens,
                self.reserved.tokens,
                r.held.tokens,
            );
            let pico = room(
                self.ceilings.max_cost_pico,
                self.spent.pico,
                self.reserved.pico,
                r.held.pico,
            );
            let (p, c) = clamp(a.prompt, a.completion, a.price, tokens, pico);
            let reported = charged;
            charged = Amount::of(p, c, a.price);
            let o = Overrun {
                reserved: r.held,
                reported_prompt: a.prompt,
                reported_completion: a.completion,
                reported,
                charged_prompt: p,
                charged_completion: c,
                charged,
            };
            overrun = Some(o);
            self.overrun.get_or_insert(o);
            if self.hit.is_none() {
                // The ceiling whose unit the call overran, else the one the run has.
                let ceiling = if reported.tokens > r.held.tokens && tokens.is_some() {
                    Ceiling::MaxTokens
                } else if pico.is_some() {
                    Ceiling::MaxCostUsd
                } else {
                    Ceiling::MaxTokens
                };
                self.hit = Some(CeilingHit {
                    ceiling,
                    needed: 0,
                    left: 0,
                    overrun: true,
                });
            }
        }
        self.spent.tokens = self.spent.tokens.saturating_add(charged.tokens);
        self.spent.pico = self.spent.pico.saturating_add(charged.pico);
        self.close_at_ceiling();
        Settled { charged, overrun }
    }

    /// Closes the ledger at the first ceiling what was spent has reached, unless one already
    /// closed it.
    fn close_at_ceiling(&mut self) {
        if self.hit.is_some() {
            return;
        }
        let over = [
            (
                Ceiling::MaxTokens,
                self.ceilings.max_tokens,
                self.spent.tokens,
            ),
            (
                Ceiling::MaxCostUsd,
                self.ceilings.max_cost_pico,
                self.spent.pico,
            ),
        ];
        for (ceiling, max, used) in over {
            if let Some(max) = max
                && used >= max
            {
                self.hit = Some(CeilingHit {
                    ceiling,
                    needed: 0,
                    left: 0,
                    overrun: false,
                });
                break;
            }
        }
    }

    /// The first call that reported more than it reserved, if one did.
    pub(crate) fn overrun(&self) -> Option<Overrun> {
        self.overrun
    }

    /// What settled calls spent.
    pub(crate) fn spent(&self) -> Amount {
        self.spent
    }

    /// What running calls hold (the tests check that settling releases it).
    #[cfg(test)]
    pub(crate) fn reserved(&self) -> Amount {
        self.reserved
    }

    /// The refusal that closed the ledger, if one did.
    pub(crate) fn hit(&self) -> Option<CeilingHit> {
        self.hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn cost(pico: u64) -> Amount {
        Amount { tokens: 0, pico }
    }

    #[test]
    fn prices_round_up_and_ceilings_round_down() {
        let p = Price::from_usd_per_mtok(0.15, 0.6).unwrap();
        assert_eq!(p.in_micro_per_mtok, 150_000);
        assert_eq!(p.out_micro_per_mtok, 600_000);
        // 1000 input tokens at $0.15/Mtok = $0.00015 = 150_000_000 pico.
        assert_eq!(p.cost_pico(1000, 0), 150_000_000);
        assert_eq!(usd_to_pico(0.01), 10_000_000_000);
        assert_eq!(Price::from_usd_per_mtok(-1.0, 0.0), None);
        assert_eq!(Price::from_usd_per_mtok(f64::NAN, 0.0), None);
        assert_eq!(usd_to_pico(-3.0), 0);
    }

    #[test]
    fn a_reservation_that_does_not_fit_is_refused_and_closes_the_ledger() {
        let mut s = Spend::new(Ceilings {
            max_tokens: Some(100),
            max_cost_pico: None,
        });
        let a = s
            .reserve(Amount {
                tokens: 60,
                pico: 0,
            })
            .unwrap();
        let hit = s
            .reserve(Amount {
                tokens: 50,
                pico: 0,
            })
            .unwrap_err();
        assert_eq!(
            hit,
            CeilingHit {
                ceiling: Ceiling::MaxTokens,
                needed: 50,
                left: 40,
                overrun: false
            }
        );
        // Closed: even a small call is refused now.
        assert!(s.reserve(Amount { tokens: 1, pico: 0 }).is_err());
        let settled = s.settle(a, Some(Reported::of(20, 0, Price::default())));
        assert_eq!(settled.charged.tokens, 20);
        assert_eq!(settled.overrun, None);
        assert_eq!(s.spent().tokens, 20);
        assert_eq!(s.reserved().tokens, 0);
    }

    #[test]
    fn the_unused_part_is_released_when_a_call_settles() {
        let mut s = Spend::new(Ceilings {
            max_tokens: None,
            max_cost_pico: Some(1000),
        });
        // A token at one micro-dollar per million: one pico-dollar.
        let one = Price {
            in_micro_per_mtok: 1,
            out_micro_per_mtok: 1,
        };
        let a = s.reserve(Amount::of(800, 0, one)).unwrap();
        s.settle(a, Some(Reported::of(100, 0, one)));
        let b = s.reserve(Amount::of(800, 0, one)).unwrap();
        assert_eq!(s.reserved().pico, 800);
        s.settle(b, None);
        assert_eq!(s.spent().pico, 900);
        assert_eq!(s.hit(), None);
        assert_eq!(
            s.reserve(cost(101)).unwrap_err().ceiling,
            Ceiling::MaxCostUsd
        );
    }

    #[test]
    fn a_call_that_used_more_than_it_reserved_closes_the_ledger_at_the_ceiling() {
        let mut s = Spend::new(Ceilings {
            max_tokens: Some(100),
            max_cost_pico: None,
        });
        let a = s
            .reserve(Amount {
                tokens: 10,
                pico: 0,
            })
            .unwrap();
        s.settle(a, Some(Reported::of(100, 0, Price::default())));
        assert!(s.reserve(Amount { tokens: 0, pico: 0 }).is_err());
    }

    /// 15,000,000 tokens reported against a 50,000-token ceiling (the review's case): charged
    /// what the ceiling left (completion cut first), flagged with what was reserved and
    /// reported, and the ledger closed; the other call's reservation still fits.
    #[test]
    fn a_call_reporting_more_than_it_reserved_is_clamped_flagged_and_closes_the_ledger() {
        let mut s = Spend::new(Ceilings {
            max_tokens: Some(50_000),
            max_cost_pico: None,
        });
        let other = s
            .reserve(Amount {
                tokens: 8_000,
                pico: 0,
            })
            .unwrap();
        let a = s
            .reserve(Amount {
                tokens: 4_200,
                pico: 0,
            })
            .unwrap();
        let settled = s.settle(a, Some(Reported::of(40_000, 14_960_000, Price::default())));
        let o = settled.overrun.expect("an overrun");
        assert_eq!(o.reserved.tokens, 4_200);
        assert_eq!(o.reported.tokens, 15_000_000);
        assert_eq!(o.over_tokens(), 15_000_000 - 4_200);
        // 50,000 less the other call's 8,000: the prompt's 40,000, then 2,000 of completion.
        assert_eq!((o.charged_prompt, o.charged_completion), (40_000, 2_000));
        assert_eq!(settled.charged.tokens, 42_000);
        assert_eq!(s.spent().tokens, 42_000);
        assert_eq!(s.overrun(), Some(o));
        let hit = s.hit().expect("closed");
        assert!(hit.overrun && hit.ceiling == Ceiling::MaxTokens, "{hit:?}");
        assert!(s.reserve(Amount { tokens: 1, pico: 0 }).is_err());
        s.settle(other, Some(Reported::of(8_000, 0, Price::default())));
        assert_eq!(s.spent().tokens, 50_000);
    }

    /// Under a cost ceiling the charge is cut to the money left; without a ceiling nothing is
    /// clamped or flagged.
    #[test]
    fn an_overrun_under_a_cost_ceiling_is_cut_to_the_money_left_and_none_without_ceilings() {
        let price = Price {
            in_micro_per_mtok: 1_000_000,
            out_micro_per_mtok: 2_000_000,
        };
        // $0.01 = 10^10 pico; a token in costs 10^6 pico, a token out 2*10^6.
        let mut s = Spend::new(Ceilings {
            max_tokens: None,
            max_cost_pico: Some(usd_to_pico(0.01)),
        });
        let a = s.reserve(Amount::of(100, 100, price)).unwrap();
        let settled = s.settle(a, Some(Reported::of(1_000, 1_000_000, price)));
        let o = settled.overrun.expect("an overrun");
        assert_eq!((o.charged_prompt, o.charged_completion), (1_000, 4_500));
        assert_eq!(s.spent().pico, usd_to_pico(0.01));
        assert_eq!(s.hit().map(|h| h.ceiling), Some(Ceiling::MaxCostUsd));
        let mut free = Spend::new(Ceilings::default());
        let r = free.reserve(Amount::of(10, 0, price)).unwrap();
        let settled = free.settle(r, Some(Reported::of(1_000, 1_000_000, price)));
        assert_eq!(settled.overrun, None);
        assert_eq!(settled.charged.tokens, 1_001_000);
        assert_eq!(free.hit(), None);
    }

    #[test]
    fn a_metered_call_is_charged_what_its_forwarder_counted_and_closes_at_the_ceiling() {
        let price = Price::from_usd_per_mtok(3.0, 15.0).unwrap();
        let mut s = Spend::new(Ceilings {
            max_tokens: Some(2000),
            max_cost_pico: Some(usd_to_pico(1.0)),
        });
        let r = s.reserve(Amount::of(300, 0, price)).unwrap();
        assert_eq!(s.tokens_left(), Some(1700));
        assert_eq!(
            s.cost_left_pico(),
            Some(usd_to_pico(1.0) - price.cost_pico(300, 0))
        );
        // One turn of 2,500 tokens was in flight when the forwarder's allowance ran out.
        let charged = s.settle_metered(r, Some(Reported::of(2000, 500, price)));
        assert_eq!(charged.tokens, 2500);
        assert_eq!(s.spent().tokens, 2500);
        assert_eq!(s.reserved(), Amount::default());
        assert_eq!(s.overrun(), None);
        let hit = s.hit().expect("closed at the token ceiling");
        assert_eq!((hit.ceiling, hit.overrun), (Ceiling::MaxTokens, false));
        assert!(s.reserve(Amount::of(1, 0, price)).is_err());
        // Under the ceilings, it stays open; nothing counted charges the reservation.
        let mut s = Spend::new(Ceilings {
            max_tokens: Some(2000),
            max_cost_pico: None,
        });
        let r = s.reserve(Amount::of(100, 0, price)).unwrap();
        s.settle_metered(r, None);
        assert_eq!((s.spent().tokens, s.hit()), (100, None));
        assert_eq!(s.cost_left_pico(), None);
    }

    #[test]
    fn without_ceilings_everything_fits() {
        let mut s = Spend::new(Ceilings::default());
        let r = s
            .reserve(Amount {
                tokens: u64::MAX,
                pico: u64::MAX,
            })
            .unwrap();
        let price = Price {
            in_micro_per_mtok: 1,
            out_micro_per_mtok: 2,
        };
        s.settle(r, Some(Reported::of(3, 2, price)));
        assert_eq!(s.spent(), Amount { tokens: 5, pico: 7 });
    }

    /// 64 threads reserve and settle worst cases against one ceiling at once: at no moment do
    /// the settled spend and the running reservations together pass it.
    #[test]
    fn sixty_four_threads_reserving_at_once_never_pass_the_ceiling() {
        let max_tokens = 10_000;
        let max_pico = 7_777_777;
        let spend = Arc::new(Mutex::new(Spend::new(Ceilings {
            max_tokens: Some(max_tokens),
            max_cost_pico: Some(max_pico),
        })));
        let price = Price {
            in_micro_per_mtok: 150,
            out_micro_per_mtok: 600,
        };
        let peaks = Arc::new(Mutex::new((0u64, 0u64, 0usize)));
        let threads: Vec<_> = (0..64u64)
            .map(|i| {
                let spend = spend.clone();
                let peaks = peaks.clone();
                std::thread::spawn(move || {
                    for round in 0..50u64 {
                        let worst = Amount::of(40 + i, 128, price);
                        let r = {
                            let mut s = spend.lock().unwrap();
                            let r = s.reserve(worst);
                            let used = (
                                s.spent().tokens + s.reserved().tokens,
                                s.spent().pico + s.reserved().pico,
                            );
                            let mut p = peaks.lock().unwrap();
                            p.0 = p.0.max(used.0);
                            p.1 = p.1.max(used.1);
                            r
                        };
                        let Ok(r) = r else { break };
                        std::thread::yield_now();
                        let actual = Reported::of(40 + i, (round * 7 + i) % 129, price);
                        spend.lock().unwrap().settle(r, Some(actual));
                        peaks.lock().unwrap().2 += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = spend.lock().unwrap();
        let (peak_tokens, peak_pico, calls) = *peaks.lock().unwrap();
        assert!(peak_tokens <= max_tokens, "{peak_tokens} > {max_tokens}");
        assert!(peak_pico <= max_pico, "{peak_pico} > {max_pico}");
        assert!(s.spent().tokens <= max_tokens);
        assert!(s.spent().pico <= max_pico);
        assert_eq!(s.reserved(), Amount::default());
        assert!(s.hit().is_some(), "the ceiling should have been reached");
        assert!(calls > 10, "only {calls} calls ran");
    }
}
