//! `git forum worker`: pulls dispatched tasks of one ledger from the stream, does each in a
//! worktree of its own clone (the task's base fetched from the git remote, the worker seat of
//! its own runtime config called there as a local `--work` task calls it, the checks run),
//! pushes the change commit under `refs/forum/results/`, publishes the result and acknowledges
//! the task. While it works it extends the task's lease, so a worker that dies stops renewing
//! and the task goes to another after the lease. A worker never writes the ledger.
//!
//! The seat and the checks run under the worker's sandbox ([`confine`]), as a local `--work`
//! task's do; the result says how they were confined. The change is then committed outside
//! the sandbox on git forum's terms (the worktree's admin directory and work tree named
//! explicitly, no hooks or fsmonitor, attributes from the task's base), and pushed with the
//! push option `forum-worker=NAME`, by which the server-side hook holds the push to the
//! task's results ref (`crate::policy::worker_push`).

pub(crate) mod confine;
mod deliver;
mod open;
mod wait;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::nats::{Connection, Made, Pulled, Settings};
use super::protocol::{self, CheckClaim, ModelCall, RESULT_SCHEMA, ResultMessage, TaskMessage};
use super::writer::{git_line, git_output};
use crate::exec::command::{in_jail, in_workdir};
use crate::exec::sandbox::probe::Jail;
use crate::exec::{Call, Executor, Seats};
use crate::roster::Roster;
use async_nats::jetstream::consumer::PullConsumer;

/// How many tasks a worker does between two runs of `git maintenance run --auto` in its
/// clone (its fetches and commits do not start it each time, as plain git would).
const MAINTENANCE_EVERY: u64 = 32;

/// The most bytes of a check's output a worker keeps (it reports only the exit).
const CHECK_OUTPUT_CAP: usize = 64 * 1024;

/// What one worker process serves.
pub(crate) struct WorkerOptions {
    pub(crate) settings: Settings,
    pub(crate) ledger: String,
    /// The worker's clone.
    pub(crate) repo: PathBuf,
    /// The git remote the writer pushes bases to and this worker pushes results to.
    pub(crate) remote: String,
    /// Its name in results (and so in the record).
    pub(crate) name: String,
    /// Tasks at a time.
    pub(crate) concurrency: usize,
    /// The lease: how long a task may go without progress before it is delivered again.
    pub(crate) lease: Duration,
    /// The slot to run every task on (`--seat`; `None`: the roster's worker seat for its lane).
    pub(crate) seat: Option<String>,
    pub(crate) seats: Arc<dyn Seats>,
    pub(crate) roster: Roster,
    /// Stop after this many tasks (`None`: run until killed).
    pub(crate) max_tasks: Option<u64>,
    /// Publish every result twice (a fault for the tests: the writer must witness the second
    /// as a duplicate and never merge it).
    pub(crate) answer_twice: bool,
    /// The sandbox every task's seat and checks run in (`None`: unconfined, by the user's
    /// `--no-sandbox` or `[work] sandbox = false`).
    pub(crate) jail: Option<Arc<Jail>>,
    /// What results say of it ([`confine::claim`]).
    pub(crate) confinement: String,
    /// How it is told to stop, and what it counts (watched by whoever started it).
    pub(crate) control: Arc<Control>,
}

/// A running worker's switch and count, shared with whoever started it (the daemon watches
/// the workers it owns through it).
#[derive(Debug, Default)]
pub(crate) struct Control {
    /// Set to stop: the worker finishes the tasks it holds and pulls no more.
    pub(crate) stop: AtomicBool,
    /// Tasks it handled so far.
    pub(crate) done: AtomicU64,
}

/// A worker connected to its server, its consumer and halt subject there, not yet pulling.
pub(crate) struct Ready {
    o: WorkerOptions,
    conn: Connection,
    /// `None` until a writer has made the ledger's stream.
    consumer: Option<PullConsumer>,
    halts: async_nats::Subscriber,
}

/// Serves tasks until killed (or `max_tasks` are done, or its control says stop). Fails in
/// one line when the server cannot be reached or the stream is not this ledger's.
pub(crate) fn serve(o: WorkerOptions) -> Result<u64, String> {
    ready(o)?.run()
}

/// Connects the worker of `o`: its remote named, the server reached, the ledger's stream and
/// the workers' consumer there, the halt subject heard. Fails in one line, before any task.
pub(crate) fn ready(o: WorkerOptions) -> Result<Ready, String> {
    git_line(&o.repo, &["remote", "get-url", &o.remote]).map_err(|_| {
        format!(
            "no git remote named {:?} in this repository: a worker fetches task bases from it and pushes results to it",
            o.remote
        )
    })?;
    let conn = Connection::connect(&o.settings, &o.ledger)?;
    // The stream and the progress stream are the writer's to make (see
    // `Connection::stream_made`): a worker started first waits for them in `run`.
    let consumer = match conn.stream_made()? {
        Made::Yes => Some(wait::tasks_consumer(&o, &conn)?),
        Made::No => None,
        Made::Unknown(e) => return Err(e),
    };
    let halts = conn.listen(&protocol::halt_filter(&o.ledger))?;
    Ok(Ready {
        o,
        conn,
        consumer,
        halts,
    })
}

impl Ready {
    /// Serves tasks until `max_tasks` are done or the control says stop (waiting first for
    /// the ledger's stream when no writer has made it yet); returns how many.
    pub(crate) fn run(self) -> Result<u64, String> {
        let Ready {
            o,
            conn,
            consumer,
            mut halts,
        } = self;
        // What workers killed outright (SIGKILL, a crash) left: their tasks' directories, and
        // this clone's records of those worktrees.
        let swept = crate::scratch::sweep(TASK_DIR_PREFIX);
        if swept > 0 {
            let _ = git_line(&o.repo, &["worktree", "prune"]);
            eprintln!(
                "git forum worker: removed the directories of {swept} task(s) left by workers killed outright (in {})",
                std::env::temp_dir().display()
            );
        }
        let consumer = match consumer {
            Some(c) => c,
            None => match wait::await_stream(&o, &conn)? {
                Some(c) => c,
                None => return Ok(o.control.done.load(Ordering::SeqCst)),
            },
        };
        serve_ready(&o, &conn, &consumer, &mut halts);
        Ok(o.control.done.load(Ordering::SeqCst))
    }
}

fn serve_ready(
    o: &WorkerOptions,
    conn: &Connection,
    consumer: &PullConsumer,
    halts: &mut async_nats::Subscriber,
) {
    let done = &o.control.done;
    let turn = Mutex::new(());
    let w = Worker {
        o,
        conn,
        turn: &turn,
        halts: Halts::default(),
        plain_push: AtomicBool::new(false),
    };
    let over = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !over.load(Ordering::SeqCst) {
                if let Some(bytes) = conn.heard(halts, Duration::from_millis(200)) {
                    w.heard_halt(&bytes);
                }
            }
        });
        let mut serving = Vec::new();
        for _ in 0..o.concurrency.max(1) {
            let w = &w;
            serving.push(s.spawn(move || {
                // The slot's delivery under way: at most one, so a slot holds at most two
                // tasks (the one it works on, the one it delivers).
                let mut delivering: Option<std::thread::ScopedJoinHandle<()>> = None;
                loop {
                    if o.max_tasks
                        .is_some_and(|m| done.load(Ordering::SeqCst) >= m)
                        || o.control.stop.load(Ordering::SeqCst)
                    {
                        break;
                    }
                    match conn.pull(consumer, Duration::from_secs(1)) {
                        Ok(Some(p)) => {
                            if let Some(d) = w.handle(p, s) {
                                if let Some(h) = delivering.take() {
                                    let _ = h.join();
                                }
                                delivering = Some(s.spawn(move || w.deliver_result(d)));
                            }
                            let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                            if n.is_multiple_of(MAINTENANCE_EVERY) {
                                w.maintain();
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            eprintln!("git forum worker: {e}");
                            std::thread::sleep(Duration::from_secs(1));
                        }
                    }
                }
                if let Some(h) = delivering {
                    let _ = h.join();
                }
            }));
        }
        for h in serving {
            let _ = h.join();
        }
        over.store(true, Ordering::SeqCst);
    });
}

struct Worker<'a> {
    o: &'a WorkerOptions,
    conn: &'a Connection,
    /// Held around `git worktree` steps (git races when two run at once in one repository).
    turn: &'a Mutex<()>,
    halts: Halts,
    /// Set once the remote refused a push option (it has no git forum server hook): later
    /// pushes go without one at once instead of trying it first each time.
    plain_push: AtomicBool,
}

/// How a task's directory in the temporary folder is named: by it `scratch::sweep` finds the
/// ones that workers killed outright left.
const TASK_DIR_PREFIX: &str = "forum-worker-";

/// The most halted runs a worker remembers (the oldest is forgotten first).
const REMEMBERED_HALTS: usize = 1024;

/// What a worker knows of halts: the runs halted while it listened, and the tasks it is doing
/// now, each with its kill scope and whether a halt stopped it.
#[derive(Default)]
struct Halts {
    runs: Mutex<std::collections::VecDeque<u64>>,
    doing: Mutex<Vec<Doing>>,
}

struct Doing {
    run: u64,
    task: String,
    scope: u64,
    stopped: Arc<AtomicBool>,
}

impl Worker<'_> {
    /// A halt heard: the run is remembered as halted, and every task of it this worker is
    /// doing is stopped (its commands killed with their process groups).
    fn heard_halt(&self, bytes: &[u8]) {
        let h = match protocol::HaltMessage::parse(bytes) {
            Ok(h) if h.ledger == self.o.ledger => h,
            Ok(_) => return,
            Err(e) => {
                eprintln!("git forum worker: ignored a message on the halt subject: {e}");
                return;
            }
        };
        {
            let mut runs = self.halts.runs.lock().unwrap_or_else(|p| p.into_inner());
            if h.lifted {
                // Resumed: the run's tasks from now on are to be done.
                runs.retain(|r| *r != h.run);
                return;
            }
            if !runs.contains(&h.run) {
                if runs.len() >= REMEMBERED_HALTS {
                    runs.pop_front();
                }
                runs.push_back(h.run);
            }
        }
        for d in self
            .halts
            .doing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|d| d.run == h.run)
        {
            d.stopped.store(true, Ordering::SeqCst);
            crate::exec::command::stop_scope(d.scope);
            eprintln!(
                "git forum worker: stopped task {} of run {}: {} halted it ({})",
                d.task, h.run, h.by, h.reason
            );
        }
    }

    /// Whether run `run` was halted while this worker listened.
    fn is_halted(&self, run: u64) -> bool {
        self.halts
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&run)
    }

    /// Does `task` under a kill scope of its own, so that a halt of its run stops it; returns
    /// its result, or `None` when a halt stopped it.
    fn work_haltable(&self, task: &TaskMessage) -> Option<(ResultMessage, deliver::Left)> {
        let scope = crate::exec::command::new_scope();
        let stopped = Arc::new(AtomicBool::new(false));
        self.halts
            .doing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Doing {
                run: task.run,
                task: task.task.clone(),
                scope,
                stopped: Arc::clone(&stopped),
            });
        // A halt heard between the pull and the line above.
        if self.is_halted(task.run) {
            stopped.store(true, Ordering::SeqCst);
        }
        let r = if stopped.load(Ordering::SeqCst) {
            None
        } else {
            Some(crate::exec::command::in_scope(scope, || {
                self.work(task, &stopped)
            }))
        };
        self.halts
            .doing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|d| d.scope != scope);
        crate::exec::command::forget_scope(scope);
        let (r, left) = r?;
        if stopped.load(Ordering::SeqCst) {
            self.clear(left);
            return None;
        }
        Some((r, left))
    }

    /// One message of the tasks consumer: refused in one line when it is not a task of this
    /// ledger; else done, its lease extended meanwhile, and handed back to be delivered (its
    /// change pushed, its result published, the message acknowledged, by
    /// [`Worker::deliver_result`]) while the slot takes its next task.
    fn handle<'s>(
        &'s self,
        p: Pulled,
        s: &'s std::thread::Scope<'s, '_>,
    ) -> Option<deliver::Delivery> {
        let task = match TaskMessage::parse(&p.payload) {
            Ok(t) if t.ledger == self.o.ledger => t,
            Ok(t) => {
                eprintln!(
                    "git forum worker: refused a task of ledger {:?} (this worker serves {:?})",
                    t.ledger, self.o.ledger
                );
                let _ = self.conn.term(&p);
                return None;
            }
            Err(e) => {
                eprintln!("git forum worker: refused a message: {e}");
                let _ = self.conn.term(&p);
                return None;
            }
        };
        if p.delivered > 1 {
            eprintln!(
                "git forum worker: task {} of run {} (attempt {}) came again (delivery {}): the worker that had it let its lease run out",
                task.task, task.run, task.attempt, p.delivered
            );
        }
        self.report(&task, "working");
        // The renewing thread wakes every third of the lease until the result is out, and at
        // once when its sender drops: the result goes out without waiting for a tick.
        let p = Arc::new(p);
        let (finished, ended) = std::sync::mpsc::channel::<()>();
        {
            let (p, task) = (Arc::clone(&p), task.clone());
            s.spawn(move || {
                let every = (self.o.lease / 3).max(Duration::from_millis(200));
                while let Err(RecvTimeoutError::Timeout) = ended.recv_timeout(every) {
                    if !renewal_suppressed() {
                        let _ = self.conn.progress(&p);
                    }
                    self.report(&task, "working");
                }
            });
        }
        let Some((result, left)) = self.work_haltable(&task) else {
            // Halted: nothing pushed, nothing answered, and the task is not given out again.
            drop(finished);
            let _ = self.conn.term(&p);
            self.report(&task, "halted");
            return None;
        };
        Some(deliver::Delivery {
            task,
            pulled: p,
            result,
            left,
            renewing: finished,
        })
    }

    /// Lets git pack the worker's clone when it needs it, as git's own commands would have
    /// after their fetches and commits (best effort: a failure is only said).
    fn maintain(&self) {
        let _guard = self.turn.lock();
        if let Err(e) = git_line(&self.o.repo, &["maintenance", "run", "--auto", "--quiet"]) {
            eprintln!("git forum worker: git maintenance in the clone failed: {e}");
        }
    }

    /// Says on the ledger's progress stream what this worker is doing (best effort: people
    /// watching read it, nothing depends on it).
    fn report(&self, task: &TaskMessage, state: &str) {
        let m = protocol::ProgressMessage {
            schema: protocol::PROGRESS_SCHEMA.into(),
            worker: self.o.name.clone(),
            run: task.run,
            task: task.task.clone(),
            attempt: task.attempt.clone(),
            state: state.to_string(),
        };
        let subject = protocol::progress_subject(&self.o.ledger, &self.o.name);
        let _ = self.conn.publish(&subject, m.to_bytes());
    }

    /// Does `task` and says how it went (a failure is a result too), with what is left to
    /// deliver and clear; `stopped` is raised when a halt stops it (then nothing is pushed).
    fn work(&self, task: &TaskMessage, stopped: &AtomicBool) -> (ResultMessage, deliver::Left) {
        let mut r = ResultMessage {
            schema: RESULT_SCHEMA.into(),
            ledger: task.ledger.clone(),
            run: task.run,
            task: task.task.clone(),
            attempt: task.attempt.clone(),
            worker: self.o.name.clone(),
            ok: false,
            output: String::new(),
            model: String::new(),
            commit: None,
            error: None,
            tool_calls: Vec::new(),
            model_calls: Vec::new(),
            checks: Vec::new(),
            confinement: self.o.confinement.clone(),
            found_in_ref: false,
        };
        let dir = match crate::scratch::tracked(TASK_DIR_PREFIX) {
            Ok(d) => d,
            Err(e) => {
                let r = failed(r, "work", format!("no directory for the worktree: {e}"));
                return (r, deliver::Left::default());
            }
        };
        let tree = dir.path().join("tree");
        let mut left = deliver::Left {
            tree: Some((dir, tree.clone())),
            push: None,
        };
        if let Err(e) = self.open(task, &tree) {
            return (failed(r, "work", e), left);
        }
        // Read before the seat runs, so the admin directory is the one git made.
        let out = open::admin_dir(&tree)
            .map_err(|e| ("work", e))
            .and_then(|admin| {
                let private = tree.with_file_name("private");
                let jail =
                    confine::jail_for(self.o.jail.as_ref(), &self.o.repo, &tree, &admin, &private)
                        .map_err(|e| ("sandbox", format!("cannot confine the task: {e}")))?;
                self.run_task(task, &tree, &admin, jail, &mut r, stopped)
            });
        match out {
            Ok(push) => {
                left.push = push;
                (r, left)
            }
            Err((code, why)) => (failed(r, code, why), left),
        }
    }

    /// Calls the worker seat in `tree` (whose admin directory is `admin`) in `jail`, commits
    /// what it changed and runs the checks there, filling `r`; returns the commit to push and
    /// the results ref to push it to, when it made one.
    fn run_task(
        &self,
        task: &TaskMessage,
        tree: &Path,
        admin: &Path,
        jail: Option<Arc<Jail>>,
        r: &mut ResultMessage,
        stopped: &AtomicBool,
    ) -> Result<Option<(String, String)>, (&'static str, String)> {
        let exec: Arc<dyn Executor> = match self.o.seat.as_deref().or(task.seat.as_deref()) {
            Some(slot) => self.o.seats.slot(slot).ok_or_else(|| {
                (
                    "seat",
                    format!("this worker has no seat {slot:?} in its runtime config"),
                )
            })?,
            None => self.o.seats.worker(&self.o.roster, &task.agent),
        };
        let category = self.o.roster.get(&task.agent).map(|a| a.category.clone());
        let (system, prompt) =
            crate::run::remote_prompt(&task.agent, category.as_deref(), &task.instruction);
        let call = Call {
            system: Some(&system),
            prompt: &prompt,
            schema: None,
            max_tokens: Some(512),
        };
        r.model = exec.model();
        let reply = in_jail(jail.clone(), || in_workdir(tree, || exec.call(&call)))
            .map_err(|e| (e.code(), format!("error: {e}")))?;
        if reply.text.trim().is_empty() {
            return Err(("empty", "error: the model returned an empty answer".into()));
        }
        r.model = reply.model.clone();
        if let Some(u) = &reply.usage {
            r.model_calls.push(ModelCall {
                model: reply.model.clone(),
                prompt_tokens: u.input_tokens,
                completion_tokens: u.output_tokens,
            });
        }
        r.output = truncate(&reply.text, protocol::MAX_TEXT_BYTES);
        r.commit = self
            .commit(task, tree, admin, &r.output)
            .map_err(|e| ("work", e))?;
        let deadline = Duration::from_secs(task.check_seconds);
        for cmd in task
            .checks
            .iter()
            .take_while(|_| !stopped.load(Ordering::SeqCst))
        {
            r.checks
                .push(in_jail(jail.clone(), || check(tree, cmd, deadline)));
        }
        if stopped.load(Ordering::SeqCst) {
            return Err(("halted", "error: the run was halted".into()));
        }
        r.ok = true;
        Ok(r.commit.clone().map(|c| {
            let to = protocol::result_ref(&task.ledger, task.run, &task.task_ref, &task.attempt);
            (c, to)
        }))
    }

    /// Commits everything changed in `tree` on the base, with trailers tying it to the task's
    /// attempt; `None` when nothing changed.
    fn commit(
        &self,
        task: &TaskMessage,
        tree: &Path,
        admin: &Path,
        report: &str,
    ) -> Result<Option<String>, String> {
        let git = |args: &[&str]| {
            let mut cmd = own_terms(tree, admin, &task.base);
            cmd.args(args);
            cmd
        };
        run_git(git(&["add", "-A"]), None)?;
        let status = run_git(
            git(&["status", "--porcelain", "--untracked-files=no"]),
            None,
        )?;
        if status.is_empty() {
            return Ok(None);
        }
        let subject = report.lines().next().unwrap_or("").trim();
        let subject = if subject.is_empty() {
            "change"
        } else {
            subject
        };
        let message = format!(
            "{}\n\nForum-Ledger: {}\nForum-Run: {}\nForum-Task-Ref: {}\nForum-Attempt: {}\nForum-Worker: {}\n",
            truncate(subject, 200),
            task.ledger,
            task.run,
            task.task_ref,
            task.attempt,
            self.o.name
        );
        // No auto maintenance after each commit: the worker runs it every
        // `MAINTENANCE_EVERY` tasks instead (see `serve_ready`).
        let mut cmd = git(&[
            "-c",
            "maintenance.auto=false",
            "commit",
            "--quiet",
            "--no-verify",
            "--no-gpg-sign",
            "-F",
            "-",
        ]);
        cmd.env(
            "GIT_AUTHOR_NAME",
            format!("{} (git forum worker)", task.agent),
        )
        .env("GIT_AUTHOR_EMAIL", "worker@git-forum.invalid")
        .env("GIT_COMMITTER_NAME", "git forum worker")
        .env("GIT_COMMITTER_EMAIL", "worker@git-forum.invalid");
        run_git(cmd, Some(message.as_bytes()))?;
        open::detached_head(admin, || run_git(git(&["rev-parse", "HEAD"]), None)).map(Some)
    }
}

/// `git` on the worktree `tree` on git forum's terms: its admin directory and work tree
/// named (a `.git` the seat wrote there is never followed), attributes from the task's base
/// (`base`: a `.gitattributes` the seat wrote selects no filter), no hooks, no fsmonitor.
fn own_terms(tree: &Path, admin: &Path, base: &str) -> std::process::Command {
    let mut cmd = crate::gitproc::in_dir(tree);
    cmd.env("GIT_DIR", admin)
        .env("GIT_WORK_TREE", tree)
        .env("GIT_ATTR_SOURCE", base)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
        ]);
    cmd
}

/// Runs a git command (with `input` on stdin), its output read to a bound; its stdout, or the
/// first line of its stderr.
fn run_git(cmd: std::process::Command, input: Option<&[u8]>) -> Result<String, String> {
    git_output(cmd, input, "git").map(|out| out.trim().to_string())
}

/// `r` as a failure with error `code` and output `why`.
fn failed(mut r: ResultMessage, code: &str, why: String) -> ResultMessage {
    r.ok = false;
    r.error = Some(code.to_string());
    r.output = truncate(&why, protocol::MAX_FIELD_BYTES);
    r.commit = None;
    r
}

/// At most `max` bytes of `s`, cut on a character boundary.
fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Runs one check command with `sh -c` in `tree` (confined when this thread is in the
/// worker's jail), killed after `deadline`.
fn check(tree: &Path, cmd: &str, deadline: Duration) -> CheckClaim {
    let start = Instant::now();
    let (ok, exit) = match crate::work::run_check(tree, cmd, deadline, CHECK_OUTPUT_CAP) {
        Ok(ran) => (ran.ok, ran.exit),
        Err(_) => (false, None),
    };
    CheckClaim {
        command: cmd.to_string(),
        ok,
        exit,
        seconds: (start.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
    }
}

/// A test hook: with `GIT_FORUM_TEST_NO_LEASE_RENEWAL=1` in a worker's environment it never
/// extends a task's lease, so the server gives the task to another worker after the lease
/// while this one still works on it (how a worker starved of time behaves, made certain).
fn renewal_suppressed() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| std::env::var("GIT_FORUM_TEST_NO_LEASE_RENEWAL").is_ok_and(|v| v == "1"))
}

/// The worker's default name: the host's and the process id.
pub(crate) fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into());
    format!("{host}-{}", std::process::id())
}
