//! How a run ended, as one outcome: the one table ([`TABLE`]) whose name, exit code and
//! meaning the exit code of `submit` and `resume`, `git forum runs`, the room, the receipts, the
//! command line's last line, the daemon and the MCP tools all give.
//!
//! Exit 0 means the request's work was delivered: for a `--work` run, at least one change
//! passed its checks and the pre-ship gate and is on the run branch, and no task the plan
//! needed failed; for a text run, an answer that no verifier refuted. Every other way a run
//! ends has its own code; when several hold, the first in the table wins. Pure: the outcome
//! is a fold over the run's entries ([`Fold`]), so a run read back from the ledger ends the
//! same way it ended when it ran.

use std::collections::BTreeMap;

use super::field;
use super::work_report::WorkFold;
use crate::ledger::canonical::Value;
use crate::ledger::{Entry, kind};

/// The ways a run ends, each with its name and exit code in [`TABLE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunExit {
    /// The request's work was delivered (a text run: answered, and nothing refuted it).
    Answered,
    /// An operator's halt or a signal stopped it.
    Halted,
    /// A spend ceiling (tokens or cost) stopped it.
    StoppedOnCeiling,
    /// Its call or seconds budget stopped it.
    StoppedOnBudget,
    /// It waits at a gate for a decision (or a resume was refused for that).
    Gated,
    /// A gate was rejected.
    Rejected,
    /// A task of its `--work` run failed and nothing was delivered.
    Failed,
    /// `--verify-cmd` refuted the answer or a check failed on the run branch.
    Refuted,
    /// The pre-ship gate blocked (quarantined) a change, and nothing was delivered.
    Blocked,
    /// A `--work` run that put no change on its run branch.
    NothingDelivered,
    /// A `--work` run that delivered some changes while another task failed, was blocked or
    /// waits for a person.
    Partial,
    /// A task's worker of a `--work` run hit its deadline.
    TimedOut,
    /// A change of a wave that was marked degraded (no task of it passed validation, or no
    /// ship decision could be made) is on the run branch.
    Degraded,
}

/// One row of the table: the outcome, its name (the label every surface shows), its exit code
/// and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) end: RunExit,
    pub(crate) name: &'static str,
    pub(crate) code: u8,
    pub(crate) meaning: &'static str,
}

/// The exit code of a spend-ceiling stop (`--max-tokens`, `--max-cost-usd`).
pub(crate) const EXIT_CEILING: u8 = 4;

const fn row(end: RunExit, name: &'static str, code: u8, meaning: &'static str) -> Row {
    Row {
        end,
        name,
        code,
        meaning,
    }
}

/// Every outcome in precedence order: the first that holds is how the run ended.
pub(crate) const TABLE: &[Row] = &[
    row(
        RunExit::Halted,
        "halted",
        5,
        "halted by `git forum halt` or SIGINT/SIGTERM (resume continues it)",
    ),
    row(
        RunExit::StoppedOnCeiling,
        "stopped_on_ceiling",
        EXIT_CEILING,
        "stopped on --max-tokens or --max-cost-usd (resume continues it)",
    ),
    row(
        RunExit::StoppedOnBudget,
        "stopped_on_budget",
        3,
        "stopped on --max-model-calls or --max-seconds (resume continues it)",
    ),
    row(
        RunExit::Gated,
        "gated",
        8,
        "paused at a gate not approved yet (gate approve, then resume)",
    ),
    row(
        RunExit::Rejected,
        "rejected",
        9,
        "stopped: a gate was rejected",
    ),
    row(
        RunExit::TimedOut,
        "timed_out",
        13,
        "a task's worker hit its deadline",
    ),
    row(
        RunExit::Failed,
        "failed",
        10,
        "a task failed (its worker, or its change's checks); nothing delivered",
    ),
    row(
        RunExit::Refuted,
        "refuted",
        6,
        "--verify-cmd refuted the answer, or a --check failed on the run branch",
    ),
    row(
        RunExit::Degraded,
        "degraded",
        14,
        "a change of a wave marked degraded is on the run branch",
    ),
    row(
        RunExit::Partial,
        "partial",
        12,
        "some changes delivered, but another task failed, was blocked or waits",
    ),
    row(
        RunExit::Blocked,
        "blocked",
        7,
        "the pre-ship gate blocked a change, and nothing was delivered",
    ),
    row(
        RunExit::NothingDelivered,
        "nothing_delivered",
        11,
        "no change of the --work run is on its run branch",
    ),
    row(
        RunExit::Answered,
        "answered",
        0,
        "delivered: changes on the run branch, or a text answer not refuted",
    ),
];

impl RunExit {
    fn row(self) -> &'static Row {
        TABLE
            .iter()
            .find(|r| r.end == self)
            .unwrap_or(&TABLE[TABLE.len() - 1])
    }

    /// Its exit code.
    pub(crate) fn code(self) -> u8 {
        self.row().code
    }

    /// Its name, the label every surface shows.
    pub(crate) fn name(self) -> &'static str {
        self.row().name
    }

    /// What it means, in one line.
    pub(crate) fn meaning(self) -> &'static str {
        self.row().meaning
    }
}

/// Where a run stands as its entries tell it, before its checks and changes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum End {
    /// No ending witnessed: killed or still running.
    #[default]
    Interrupted,
    /// It has an answer.
    Answered,
    Halted,
    StoppedOnBudget,
    StoppedOnCeiling,
    /// A gate waits (or was decided and the run not yet resumed).
    Paused,
    Rejected,
    /// Planning or synthesis failed (`run_stopped`): an error, not an outcome.
    Error,
    /// Its worker could not start (`run_stopped` at stage `start`): a failed run.
    NotStarted,
}

/// What a run's entries say about its work and its checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// It is a `--work` run.
    pub(crate) work: bool,
    /// The verifier refuted its latest answer, or a check on its run branch failed (the latest
    /// run of each command counts).
    pub(crate) refuted: bool,
    /// Tasks whose change is on the run branch (the gate merged it and it did not conflict).
    pub(crate) delivered: u64,
    /// A task whose latest result is a failure, or whose latest run of a check on its change
    /// failed (the checks of a task that changed nothing do not count).
    pub(crate) failed: bool,
    /// A task whose latest result is its worker's deadline (`error: "timeout"`).
    pub(crate) timed_out: bool,
    /// A task whose change the gate blocked last.
    pub(crate) blocked: bool,
    /// A task whose change waits for a person (escalate, undetermined) or conflicted.
    pub(crate) waiting: bool,
    /// A delivered task belongs to a wave witnessed as `degraded`.
    pub(crate) degraded: bool,
}

/// The outcome of a run that stands at `end` with `facts`; `None` for a run with no outcome
/// (interrupted, or stopped on an error).
pub(crate) fn outcome(end: End, facts: &Facts) -> Option<RunExit> {
    if matches!(end, End::Interrupted | End::Error) {
        return None;
    }
    let answered = end == End::Answered;
    let work = answered && facts.work;
    let nothing = facts.delivered == 0;
    TABLE.iter().map(|r| r.end).find(|e| match e {
        RunExit::Halted => end == End::Halted,
        RunExit::StoppedOnCeiling => end == End::StoppedOnCeiling,
        RunExit::StoppedOnBudget => end == End::StoppedOnBudget,
        RunExit::Gated => end == End::Paused,
        RunExit::Rejected => end == End::Rejected,
        RunExit::TimedOut => work && facts.timed_out,
        RunExit::Failed => (work && facts.failed && nothing) || end == End::NotStarted,
        RunExit::Refuted => answered && facts.refuted,
        RunExit::Degraded => work && facts.degraded,
        RunExit::Partial => work && !nothing && (facts.failed || facts.blocked || facts.waiting),
        RunExit::Blocked => work && facts.blocked,
        RunExit::NothingDelivered => work && nothing,
        RunExit::Answered => answered,
    })
}

/// The fold of one run's entries, in seq order, into its [`End`] and [`Facts`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Fold {
    end: End,
    /// A `budget` entry not yet followed by its stop answer: the end that answer gives.
    budget_pending: Option<End>,
    work: bool,
    verified: Option<bool>,
    run_checks: BTreeMap<String, bool>,
    task_checks: BTreeMap<(String, String), bool>,
    /// Each task's latest result: ok, and its error code.
    results: BTreeMap<String, (bool, String)>,
    /// The tasks of each wave witnessed as degraded.
    degraded: Vec<Vec<String>>,
    changes: WorkFold,
}

fn text(b: Option<&Value>, k: &str) -> String {
    match field(b, k) {
        Some(Value::Str(s)) => s.clone(),
        _ => String::new(),
    }
}

fn is_true(b: Option<&Value>, k: &str) -> bool {
    field(b, k) == Some(&Value::Bool(true))
}

impl Fold {
    /// Reads the run's next entry `e` with its body `b` (`None`: absent).
    pub(crate) fn push(&mut self, e: &Entry, b: Option<&Value>) {
        self.changes.push(e, b);
        match e.kind.as_str() {
            kind::REQUEST => {
                self.work = matches!(field(b, "work"), Some(Value::Object(_)));
            }
            kind::RESUME => self.end = End::Interrupted,
            kind::RESULT if field(b, "answer").is_some() => {
                // A new answer is checked again.
                self.verified = None;
                self.end = self.budget_pending.take().unwrap_or(End::Answered);
            }
            kind::RESULT if field(b, "id").is_some() => {
                let ok = is_true(b, "ok");
                self.results.insert(text(b, "id"), (ok, text(b, "error")));
            }
            kind::VERIFICATION => match field(b, "ok") {
                Some(Value::Bool(ok)) => self.verified = Some(*ok),
                _ => self.verified = None,
            },
            kind::CHECK if text(b, "task") == "run" => {
                self.run_checks.insert(text(b, "command"), is_true(b, "ok"));
            }
            kind::CHECK => {
                let key = (text(b, "task"), text(b, "command"));
                self.task_checks.insert(key, is_true(b, "ok"));
            }
            kind::DEGRADED => {
                let tasks = match field(b, "tasks") {
                    Some(Value::Array(t)) => t
                        .iter()
                        .filter_map(|v| match v {
                            Value::Str(s) => Some(s.clone()),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                self.degraded.push(tasks);
            }
            kind::BUDGET => {
                // A spend ceiling's stop names it (`ceiling`); a call or seconds budget's does not.
                let ceiling = field(b, "ceiling").is_some_and(|c| !matches!(c, Value::Null));
                self.budget_pending = Some(if ceiling {
                    End::StoppedOnCeiling
                } else {
                    End::StoppedOnBudget
                });
            }
            kind::GATE_PENDING => self.end = End::Paused,
            kind::GATE_STOPPED => self.end = End::Rejected,
            kind::HALTED => self.end = End::Halted,
            kind::RUN_STOPPED if text(b, "stage") == "start" => self.end = End::NotStarted,
            kind::RUN_STOPPED => self.end = End::Error,
            _ => {}
        }
    }

    /// What its entries say about its work and checks.
    pub(crate) fn facts(&self) -> Facts {
        let work = self.changes.finish();
        let tasks = work.as_ref().map(|w| w.tasks.as_slice()).unwrap_or(&[]);
        // A task whose worker changed nothing: its checks ran on the base, so a failure there
        // is the repository's, not the task's.
        let unchanged: Vec<&str> = tasks
            .iter()
            .filter(|t| t.state() == "no change")
            .map(|t| t.id.as_str())
            .collect();
        let delivered: Vec<&str> = tasks
            .iter()
            .filter(|t| t.state() == "merged")
            .map(|t| t.id.as_str())
            .collect();
        Facts {
            work: self.work,
            refuted: self.verified == Some(false) || self.run_checks.values().any(|ok| !ok),
            delivered: delivered.len() as u64,
            failed: self.results.values().any(|(ok, _)| !ok)
                || self
                    .task_checks
                    .iter()
                    .any(|((task, _), ok)| !ok && !unchanged.contains(&task.as_str())),
            timed_out: self
                .results
                .values()
                .any(|(ok, code)| !ok && code == "timeout"),
            blocked: tasks.iter().any(|t| t.state() == "blocked"),
            waiting: tasks
                .iter()
                .any(|t| matches!(t.state(), "waiting" | "conflict")),
            degraded: self
                .degraded
                .iter()
                .any(|wave| wave.iter().any(|t| delivered.contains(&t.as_str()))),
        }
    }

    /// The run's outcome (`None`: interrupted, or stopped on an error).
    pub(crate) fn outcome(&self) -> Option<RunExit> {
        outcome(self.end, &self.facts())
    }
}

/// The fold of the entries `items` that belong to run `run` (the seq of its request).
pub(crate) fn fold_run<'a>(
    items: impl IntoIterator<Item = &'a (Entry, Option<Value>)>,
    run: u64,
) -> Fold {
    let items: Vec<&(Entry, Option<Value>)> = items.into_iter().collect();
    let plain: Vec<Entry> = items.iter().map(|(e, _)| e.clone()).collect();
    let roots = super::run_roots(&plain);
    let mut fold = Fold::default();
    for (e, b) in items {
        if roots.get(&e.seq) == Some(&run) {
            fold.push(e, b.as_ref());
        }
    }
    fold
}

/// The table as `submit --help` and `resume --help` show it: 0, the error codes, then each
/// other outcome by code, with its name.
pub(crate) fn help() -> String {
    let mut rows: Vec<&Row> = TABLE.iter().collect();
    rows.sort_by_key(|r| r.code);
    let mut out = String::from(
        "Exit codes (--json prints the run's report for each but 1, 2 and a refused resume):\n",
    );
    for r in rows.iter().filter(|r| r.code == 0) {
        out.push_str(&format!("  {:>2}  {:<18}  {}\n", r.code, r.name, r.meaning));
    }
    out.push_str(&format!(
        "  {:>2}  {:<18}  the run could not go on (an error, said on stderr)\n  {:>2}  {:<18}  a usage error\n",
        1, "", 2, ""
    ));
    for r in rows.iter().filter(|r| r.code != 0) {
        out.push_str(&format!("  {:>2}  {:<18}  {}\n", r.code, r.name, r.meaning));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::canonical::parse;

    /// The table, exactly: precedence order, names and codes.
    #[test]
    fn the_table_holds_its_names_codes_and_order() {
        let rows: Vec<(&str, u8)> = TABLE.iter().map(|r| (r.name, r.code)).collect();
        assert_eq!(
            rows,
            [
                ("halted", 5),
                ("stopped_on_ceiling", 4),
                ("stopped_on_budget", 3),
                ("gated", 8),
                ("rejected", 9),
                ("timed_out", 13),
                ("failed", 10),
                ("refuted", 6),
                ("degraded", 14),
                ("partial", 12),
                ("blocked", 7),
                ("nothing_delivered", 11),
                ("answered", 0),
            ]
        );
        for r in TABLE {
            // The serialized name is the table's name, and each code maps back to its row.
            assert_eq!(
                serde_json::to_value(r.end).unwrap(),
                serde_json::json!(r.name)
            );
            let by_code: Vec<RunExit> = TABLE
                .iter()
                .filter(|x| x.code == r.code)
                .map(|x| x.end)
                .collect();
            assert_eq!(by_code, [r.end]);
            assert_eq!((r.end.code(), r.end.name()), (r.code, r.name));
        }
        assert_eq!(RunExit::StoppedOnCeiling.code(), EXIT_CEILING);
    }

    #[test]
    fn every_outcome_has_one_distinct_code_and_errors_keep_theirs() {
        let mut codes: Vec<u8> = TABLE.iter().map(|r| r.code).collect();
        codes.sort();
        let n = codes.len();
        codes.dedup();
        assert_eq!(codes.len(), n, "two outcomes share a code");
        assert!(!codes.contains(&1) && !codes.contains(&2));
        assert!(codes.iter().all(|c| *c < 126));
        let h = help();
        for r in TABLE {
            assert!(
                h.contains(&format!("  {:>2}  {:<18}  {}", r.code, r.name, r.meaning)),
                "{h}"
            );
        }
        assert_eq!(
            h.lines().nth(1).unwrap(),
            format!("   0  answered            {}", RunExit::Answered.meaning())
        );
    }

    fn work(delivered: u64) -> Facts {
        Facts {
            work: true,
            delivered,
            ..Facts::default()
        }
    }

    /// Precedence, one pair at a time: each outcome against the ones below it.
    #[test]
    fn the_first_outcome_that_holds_wins() {
        let all = Facts {
            work: true,
            refuted: true,
            delivered: 1,
            failed: true,
            timed_out: true,
            blocked: true,
            waiting: true,
            degraded: true,
        };
        let cases: [(End, Facts, Option<RunExit>); 21] = [
            (End::Halted, all.clone(), Some(RunExit::Halted)),
            (
                End::StoppedOnCeiling,
                all.clone(),
                Some(RunExit::StoppedOnCeiling),
            ),
            (
                End::StoppedOnBudget,
                all.clone(),
                Some(RunExit::StoppedOnBudget),
            ),
            (End::Paused, all.clone(), Some(RunExit::Gated)),
            (End::Rejected, all.clone(), Some(RunExit::Rejected)),
            (End::Interrupted, all.clone(), None),
            (End::Error, all.clone(), None),
            // A worker that could not start fails the run, whatever else holds.
            (End::NotStarted, Facts::default(), Some(RunExit::Failed)),
            (End::Answered, all.clone(), Some(RunExit::TimedOut)),
            // A failure with something delivered is partial; with nothing, failed, even
            // when the verifier refuted the answer too.
            (
                End::Answered,
                Facts {
                    timed_out: false,
                    delivered: 0,
                    ..all.clone()
                },
                Some(RunExit::Failed),
            ),
            (
                End::Answered,
                Facts {
                    timed_out: false,
                    ..all.clone()
                },
                Some(RunExit::Refuted),
            ),
            (
                End::Answered,
                Facts {
                    timed_out: false,
                    refuted: false,
                    ..all.clone()
                },
                Some(RunExit::Degraded),
            ),
            (
                End::Answered,
                Facts {
                    failed: true,
                    ..work(1)
                },
                Some(RunExit::Partial),
            ),
            (
                End::Answered,
                Facts {
                    waiting: true,
                    ..work(2)
                },
                Some(RunExit::Partial),
            ),
            (
                End::Answered,
                Facts {
                    blocked: true,
                    ..work(1)
                },
                Some(RunExit::Partial),
            ),
            (
                End::Answered,
                Facts {
                    blocked: true,
                    ..work(0)
                },
                Some(RunExit::Blocked),
            ),
            (
                End::Answered,
                Facts {
                    waiting: true,
                    ..work(0)
                },
                Some(RunExit::NothingDelivered),
            ),
            (End::Answered, work(0), Some(RunExit::NothingDelivered)),
            (End::Answered, work(1), Some(RunExit::Answered)),
            // A text run: a task's failure is Forum's business; only the verifier refutes.
            (
                End::Answered,
                Facts {
                    failed: true,
                    timed_out: true,
                    ..Facts::default()
                },
                Some(RunExit::Answered),
            ),
            (
                End::Answered,
                Facts {
                    refuted: true,
                    ..Facts::default()
                },
                Some(RunExit::Refuted),
            ),
        ];
        for (end, facts, want) in cases {
            assert_eq!(outcome(end, &facts), want, "{end:?} {facts:?}");
        }
    }

    fn item(seq: u64, parent: Option<i64>, kind: &str, body: &str) -> (Entry, Option<Value>) {
        let e = Entry {
            seq,
            ts: 0.0,
            actor: "a".into(),
            kind: kind.into(),
            causal_parent: parent,
            payload_hash: String::new(),
            prev_hash: String::new(),
            entry_hash: String::new(),
        };
        (e, Some(parse(body).unwrap()))
    }

    /// The fold reads a work run's entries: what is on the run branch, what failed, what a
    /// later answer or resume changes.
    #[test]
    fn the_fold_reads_a_work_run_from_its_entries() {
        let mut items = vec![
            item(
                0,
                None,
                kind::REQUEST,
                r#"{"text":"fix","work":{"base":"b"}}"#,
            ),
            item(1, Some(0), kind::PLAN, r#"{"tasks":[]}"#),
            item(2, Some(1), kind::RESULT, r#"{"id":"T1","ok":true}"#),
            item(
                3,
                Some(2),
                kind::CHANGE,
                r#"{"task":"T1","commit":"c1","files":[]}"#,
            ),
            item(
                4,
                Some(3),
                kind::CHECK,
                r#"{"task":"T1","command":"t","ok":true}"#,
            ),
            item(
                5,
                Some(4),
                kind::SHIP,
                r#"{"task":"T1","decision":"merge","reason":"r"}"#,
            ),
            item(
                6,
                Some(1),
                kind::RESULT,
                r#"{"id":"T2","ok":false,"error":"timeout"}"#,
            ),
            item(7, Some(0), kind::RESULT, r#"{"answer":"done"}"#),
            // Another run's entry is not this run's.
            item(8, None, kind::REQUEST, r#"{"text":"other"}"#),
        ];
        let f = fold_run(&items, 0);
        assert_eq!(f.end, End::Answered);
        assert_eq!(
            f.facts(),
            Facts {
                work: true,
                delivered: 1,
                failed: true,
                timed_out: true,
                ..Facts::default()
            }
        );
        assert_eq!(f.outcome(), Some(RunExit::TimedOut));
        // T2 retried and succeeded without a change: T1's change is delivered, nothing failed.
        items.insert(
            7,
            item(9, Some(1), kind::RESULT, r#"{"id":"T2","ok":true}"#),
        );
        assert_eq!(fold_run(&items, 0).outcome(), Some(RunExit::Answered));
        // The validator marked T1's wave degraded.
        items.push(item(
            10,
            Some(1),
            kind::DEGRADED,
            r#"{"wave":0,"tasks":["T1"]}"#,
        ));
        assert_eq!(fold_run(&items, 0).outcome(), Some(RunExit::Degraded));
        // A budget stop's answer is a budget stop; a resume is interrupted until it ends.
        items.push(item(11, Some(0), kind::BUDGET, r#"{"ceiling":null}"#));
        items.push(item(12, Some(0), kind::RESULT, r#"{"answer":"stopped"}"#));
        assert_eq!(
            fold_run(&items, 0).outcome(),
            Some(RunExit::StoppedOnBudget)
        );
        items.push(item(13, Some(0), kind::RESUME, r#"{}"#));
        assert_eq!(fold_run(&items, 0).outcome(), None);
        // The other run is a text run with an answer of its own.
        items.push(item(14, Some(8), kind::RESULT, r#"{"answer":"x"}"#));
        assert_eq!(fold_run(&items, 8).outcome(), Some(RunExit::Answered));
        assert!(!fold_run(&items, 8).facts().work);
    }

    #[test]
    fn a_work_run_with_no_change_delivered_nothing_and_a_refuted_text_run_is_refuted() {
        let items = vec![
            item(0, None, kind::REQUEST, r#"{"text":"fix","work":{}}"#),
            item(1, Some(0), kind::RESULT, r#"{"id":"T1","ok":true}"#),
            item(2, Some(1), kind::CHANGE, r#"{"task":"T1","commit":null}"#),
            item(3, Some(0), kind::RESULT, r#"{"answer":"Fixed it"}"#),
            item(4, None, kind::REQUEST, r#"{"text":"say"}"#),
            item(5, Some(4), kind::RESULT, r#"{"answer":"said"}"#),
            item(6, Some(5), kind::VERIFICATION, r#"{"ok":false}"#),
        ];
        assert_eq!(
            fold_run(&items, 0).outcome(),
            Some(RunExit::NothingDelivered)
        );
        assert_eq!(fold_run(&items, 4).outcome(), Some(RunExit::Refuted));
    }
}
