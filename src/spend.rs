//! Spend ceilings: a pure ledger of the tokens and money a run may still spend (issue 19,
//! point 4). Pure: no I/O, no clock; the run holds one [`Spend`] behind a mutex that its
//! parallel workers share.
//!
//! A call first *reserves* its worst case ([`Spend::reserve`]): the prompt tokens (estimated
//! from the prompt's bytes, conservatively) plus its output cap, at its executor's price.
//! A reservation that does not fit in what is left is refused ([`CeilingHit`]) and the call
//! never starts, so however many calls run at once, the sum of what they may spend never passes
//! the ceiling. When the call returns, [`Spend::settle`] replaces the reservation with what the
//! call really used and releases the rest.
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

impl Reservation {
    /// What it holds.
    // Unused once `pub` was narrowed to what outside code needs (issue 16 point 8).
    #[allow(dead_code)]
    pub(crate) fn held(&self) -> Amount {
        self.held
    }
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
}

/// The spend of one run (this time: a resumed run starts a fresh one).
#[derive(Debug, Clone, Default)]
pub(crate) struct Spend {
    ceilings: Ceilings,
    spent: Amount,
    reserved: Amount,
    hit: Option<CeilingHit>,
}

impl Spend {
    /// A ledger with nothing spent under `ceilings`.
    pub(crate) fn new(ceilings: Ceilings) -> Spend {
        Spend {
            ceilings,
            ..Spend::default()
        }
    }

    /// The ceilings.
    // Unused once `pub` was narrowed to what outside code needs (issue 16 point 8).
    #[allow(dead_code)]
    pub(crate) fn ceilings(&self) -> Ceilings {
        self.ceilings
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
                };
                self.hit = Some(hit);
                return Err(hit);
            }
        }
        self.reserved.tokens += worst.tokens;
        self.reserved.pico += worst.pico;
        Ok(Reservation { held: worst })
    }

    /// Ends a reservation with what the call really used (`None`: it did not say, so the
    /// whole reservation is charged). A call that used more than it reserved (a provider that
    /// ignored the output cap, a command's estimate) is charged in full and closes the ledger
    /// to new reservations if that reached a ceiling.
    pub(crate) fn settle(&mut self, r: Reservation, actual: Option<Amount>) -> Amount {
        let charged = actual.unwrap_or(r.held);
        self.reserved.tokens = self.reserved.tokens.saturating_sub(r.held.tokens);
        self.reserved.pico = self.reserved.pico.saturating_sub(r.held.pico);
        self.spent.tokens = self.spent.tokens.saturating_add(charged.tokens);
        self.spent.pico = self.spent.pico.saturating_add(charged.pico);
        if self.hit.is_none() {
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
                    });
                    break;
                }
            }
        }
        charged
    }

    /// What settled calls spent.
    pub(crate) fn spent(&self) -> Amount {
        self.spent
    }

    /// What running calls hold.
    // Unused once `pub` was narrowed to what outside code needs (issue 16 point 8).
    #[allow(dead_code)]
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
                left: 40
            }
        );
        // Closed: even a small call is refused now.
        assert!(s.reserve(Amount { tokens: 1, pico: 0 }).is_err());
        let charged = s.settle(
            a,
            Some(Amount {
                tokens: 20,
                pico: 0,
            }),
        );
        assert_eq!(charged.tokens, 20);
        assert_eq!(s.spent().tokens, 20);
        assert_eq!(s.reserved().tokens, 0);
    }

    #[test]
    fn the_unused_part_is_released_when_a_call_settles() {
        let mut s = Spend::new(Ceilings {
            max_tokens: None,
            max_cost_pico: Some(1000),
        });
        let a = s.reserve(cost(800)).unwrap();
        s.settle(a, Some(cost(100)));
        let b = s.reserve(cost(800)).unwrap();
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
        s.settle(
            a,
            Some(Amount {
                tokens: 100,
                pico: 0,
            }),
        );
        assert!(s.reserve(Amount { tokens: 0, pico: 0 }).is_err());
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
        s.settle(r, Some(Amount { tokens: 5, pico: 7 }));
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
                        let actual = Amount::of(40 + i, (round * 7 + i) % 129, price);
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
