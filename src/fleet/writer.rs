//! The writer's side of dispatch: the [`Dispatch`] the run engine hands tasks to. It pushes
//! each task's base to the git remote, publishes the task with an attempt id it issued, and
//! listens on the run's durable results consumer: a result is accepted only when it parses,
//! names this ledger and run, and answers an attempt this writer issued; the first result of an
//! attempt goes to the task waiting for it, a later one is kept as a duplicate for the record.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::nats::{Connection, Pulled, Settings};
use super::protocol::{self, ResultMessage, TaskMessage};
use crate::run::{Arrived, Dispatch, Duplicate, Prior};

/// How long the writer's results consumer lets a result go unacknowledged before the server
/// delivers it again. The writer acknowledges a result once it is witnessed, so a writer that
/// dies between receiving and witnessing gets it back after this (on `resume`).
const WRITER_ACK_WAIT: Duration = Duration::from_secs(10);

/// One attempt the writer issued (or, on `resume`, that its record says it issued).
struct Issued {
    /// The seq of its `task_dispatched` entry.
    parent: u64,
    /// Where its first result goes (`None` once it came, or when it has one on record).
    first: Option<Sender<Arrived>>,
}

/// An attempt a resumed run finds in flight: dispatched, no result witnessed.
struct InFlight {
    attempt: String,
    base: String,
    parent: u64,
    tries: u32,
}

struct Inner {
    conn: Connection,
    ledger: String,
    repo: PathBuf,
    remote: String,
    issued: Mutex<HashMap<String, Issued>>,
    waiting: Mutex<HashMap<String, Receiver<Arrived>>>,
    duplicates: Mutex<Vec<Duplicate>>,
    /// Messages routed but not yet witnessed, by stream sequence: acknowledged by `settle`.
    held: Mutex<HashMap<u64, Pulled>>,
    /// Stream sequences already witnessed (here or, on `resume`, in the record): a redelivery
    /// of one is acknowledged and nothing more.
    known: Mutex<HashSet<u64>>,
    /// A resumed run's attempts in flight, by task id.
    in_flight: Mutex<HashMap<String, InFlight>>,
    /// The runs whose halt went to the workers.
    halted: Mutex<HashSet<u64>>,
    /// Bases waiting to be pushed, pushed together by one `git push` (see `push_base`).
    pushes: Batches,
    /// Results refs waiting to be fetched, fetched together by one `git fetch` (see
    /// `fetch_result`).
    fetches: Batches,
    closing: AtomicBool,
}

/// Refspecs that go to the remote (or come from it) together: the ones waiting (each with
/// its ticket), whether a batch is under way, and how each ended, by ticket.
#[derive(Default)]
struct Queue {
    next: u64,
    waiting: Vec<(u64, String)>,
    busy: bool,
    ended: HashMap<u64, Result<(), String>>,
}

/// A [`Queue`] and the condition told when a batch of it ends.
#[derive(Default)]
struct Batches {
    queue: Mutex<Queue>,
    ended: Condvar,
}

impl Batches {
    /// Hands `spec` to the next batch and returns how it went for `spec`: whichever caller
    /// finds no batch under way runs `run` on every spec waiting then (it answers each by
    /// ticket), and the others wait for it, so callers that come together cost one git
    /// process rather than one each.
    fn go(
        &self,
        spec: String,
        run: impl Fn(&[(u64, String)]) -> Vec<(u64, Result<(), String>)>,
    ) -> Result<(), String> {
        let mut q = lock(&self.queue);
        let ticket = q.next;
        q.next += 1;
        q.waiting.push((ticket, spec));
        loop {
            if let Some(r) = q.ended.remove(&ticket) {
                return r;
            }
            if q.busy {
                q = self.ended.wait(q).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            q.busy = true;
            let batch = std::mem::take(&mut q.waiting);
            drop(q);
            let mut answers: HashMap<u64, Result<(), String>> = run(&batch).into_iter().collect();
            q = lock(&self.queue);
            q.busy = false;
            for (t, _) in batch {
                let r = answers
                    .remove(&t)
                    .unwrap_or_else(|| Err("the batch gave no answer for it".into()));
                q.ended.insert(t, r);
            }
            self.ended.notify_all();
        }
    }
}

/// Dispatch through NATS JetStream, with the repository's git remote as the shared store.
/// One dispatcher serves every run handed to it in turn (a campaign's rounds are a run
/// each): each run's results are heard on its own durable consumer.
pub(crate) struct NatsDispatch {
    inner: Arc<Inner>,
    /// A listener on each run's results consumer, by run.
    listeners: Mutex<HashMap<u64, std::thread::JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl NatsDispatch {
    /// Connects to the server for `ledger` and makes sure its stream is there; `repo` is the
    /// repository whose remote `remote` workers fetch from.
    pub(crate) fn open(
        settings: &Settings,
        ledger: &str,
        repo: &Path,
        remote: &str,
    ) -> Result<NatsDispatch, String> {
        git_line(repo, &["remote", "get-url", remote]).map_err(|_| {
            format!("no git remote named {remote:?} in this repository: workers fetch tasks from it; add one (git remote add) or name another with --dispatch-remote")
        })?;
        let conn = Connection::connect(settings, ledger)?;
        make_streams(&conn, repo, ledger)?;
        Ok(NatsDispatch {
            inner: Arc::new(Inner {
                conn,
                ledger: ledger.to_string(),
                repo: repo.to_path_buf(),
                remote: remote.to_string(),
                issued: Mutex::new(HashMap::new()),
                waiting: Mutex::new(HashMap::new()),
                duplicates: Mutex::new(Vec::new()),
                held: Mutex::new(HashMap::new()),
                known: Mutex::new(HashSet::new()),
                in_flight: Mutex::new(HashMap::new()),
                halted: Mutex::new(HashSet::new()),
                pushes: Batches::default(),
                fetches: Batches::default(),
                closing: AtomicBool::new(false),
            }),
            listeners: Mutex::new(HashMap::new()),
        })
    }

    /// Starts listening on run `run`'s results, once for each run. A listener stays until
    /// the dispatcher is dropped, so a result that comes after its run's last wave (a slow
    /// worker's duplicate) is still heard, and witnessed after the next wave of any run.
    fn listen(&self, run: u64) -> Result<(), String> {
        let mut l = lock(&self.listeners);
        if l.contains_key(&run) {
            return Ok(());
        }
        let name = protocol::writer_consumer(&self.inner.ledger, run);
        let filter = protocol::result_subject(&self.inner.ledger, run);
        let consumer = self.inner.conn.consumer(&name, &filter, WRITER_ACK_WAIT)?;
        let inner = Arc::clone(&self.inner);
        let handle = std::thread::spawn(move || {
            while !inner.closing.load(Ordering::SeqCst) {
                match inner.conn.pull(&consumer, Duration::from_millis(500)) {
                    Ok(Some(p)) => inner.route(run, p),
                    Ok(None) => {}
                    // The server went away: try again (it may come back).
                    Err(_) => std::thread::sleep(Duration::from_millis(500)),
                }
            }
        });
        l.insert(run, handle);
        Ok(())
    }
}

impl Inner {
    /// Tells the workers listening that run `run` was halted (`lifted`: that its halt is
    /// over).
    fn announce_halt(&self, run: u64, by: &str, reason: &str, lifted: bool) -> Result<(), String> {
        let m = protocol::HaltMessage {
            schema: protocol::HALT_SCHEMA.into(),
            ledger: self.ledger.clone(),
            run,
            by: by.to_string(),
            reason: reason.to_string(),
            lifted,
        };
        self.conn
            .announce(&protocol::halt_subject(&self.ledger, run), m.to_bytes())
    }

    /// Routes one message of the results consumer: refused (terminated, one line on standard
    /// error) unless it is a result of this run for an attempt issued here. A message already
    /// witnessed is acknowledged; one routed but not yet witnessed waits for `settle`.
    fn route(&self, run: u64, p: Pulled) {
        if lock(&self.known).contains(&p.stream_seq) {
            let _ = self.conn.ack(&p);
            return;
        }
        let mut held = lock(&self.held);
        if let Some(h) = held.get_mut(&p.stream_seq) {
            // Delivered again before it was witnessed: the newer delivery is the one to answer.
            *h = p;
            return;
        }
        let refuse = |why: String| {
            eprintln!("git forum: refused a message on the results stream: {why}");
            let _ = self.conn.term(&p);
        };
        let r = match ResultMessage::parse(&p.payload) {
            Ok(r) => r,
            Err(e) => return refuse(e),
        };
        if r.ledger != self.ledger || r.run != run {
            return refuse(format!(
                "a result for ledger {:?} run {}, not ledger {:?} run {run}",
                r.ledger, r.run, self.ledger
            ));
        }
        let mut issued = lock(&self.issued);
        let Some(i) = issued.get_mut(&r.attempt) else {
            drop(issued);
            return refuse(format!(
                "a result for attempt {}, which this run never issued",
                r.attempt
            ));
        };
        let stream_seq = p.stream_seq;
        match i.first.take() {
            Some(tx) => {
                let _ = tx.send(Arrived {
                    result: r,
                    stream_seq,
                });
            }
            None => lock(&self.duplicates).push(Duplicate {
                result: r,
                parent: i.parent,
                stream_seq,
            }),
        }
        held.insert(stream_seq, p);
    }
}

impl Inner {
    /// Pushes the refspecs of `specs` (`+COMMIT:BASE_REF` each, beside its ticket) to the
    /// remote in one `git push`.
    fn push_bases(&self, specs: &[(u64, String)]) -> Result<(), String> {
        let mut args = vec!["push", "--quiet", "--no-verify", self.remote.as_str()];
        args.extend(specs.iter().map(|(_, spec)| spec.as_str()));
        git_line(&self.repo, &args).map(|_| ()).map_err(|e| {
            format!(
                "cannot push the task's base to the remote {:?}: {e}",
                self.remote
            )
        })
    }
}

impl Inner {
    /// Fetches the refspecs of `specs` (`+REF:REF` each, beside its ticket) from the remote
    /// in one `git fetch`.
    fn fetch_refs(&self, specs: &[(u64, String)]) -> Result<(), String> {
        let mut args = vec![
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-auto-maintenance",
            self.remote.as_str(),
        ];
        args.extend(specs.iter().map(|(_, spec)| spec.as_str()));
        git_line(&self.repo, &args).map(|_| ())
    }
}

impl Drop for NatsDispatch {
    fn drop(&mut self) {
        self.inner.closing.store(true, Ordering::SeqCst);
        let listeners = std::mem::take(&mut *lock(&self.listeners));
        for (_, h) in listeners {
            let _ = h.join();
        }
    }
}

impl Dispatch for NatsDispatch {
    fn describe(&self) -> String {
        self.inner.conn.url().to_string()
    }

    fn record(&self) -> serde_json::Value {
        serde_json::json!({"server": self.inner.conn.url(), "remote": self.inner.remote})
    }

    fn resume(&self, run: u64, prior: &[Prior], witnessed: &[u64]) -> Result<(), String> {
        let i = &self.inner;
        lock(&i.known).extend(witnessed.iter().copied());
        for p in prior {
            let first = if p.answered {
                None
            } else {
                let (tx, rx) = channel();
                lock(&i.waiting).insert(p.attempt.clone(), rx);
                let earlier = lock(&i.in_flight).insert(
                    p.task.clone(),
                    InFlight {
                        attempt: p.attempt.clone(),
                        base: p.base.clone(),
                        parent: p.parent,
                        tries: p.tries,
                    },
                );
                // Two attempts of one task in flight: the later is taken up, the earlier's
                // result is a duplicate.
                if let Some(e) = earlier {
                    lock(&i.waiting).remove(&e.attempt);
                    if let Some(x) = lock(&i.issued).get_mut(&e.attempt) {
                        x.first = None;
                    }
                }
                Some(tx)
            };
            lock(&i.issued).insert(
                p.attempt.clone(),
                Issued {
                    parent: p.parent,
                    first,
                },
            );
        }
        // Workers that heard the run halted forget it: what the resumed run sends is theirs.
        if let Err(e) = i.announce_halt(run, "resume", "the run was resumed", true) {
            eprintln!("git forum: workers that heard the run's halt were not told it is over: {e}");
        }
        self.listen(run)
    }

    fn adopt(&self, task: &str, base: &str) -> Option<(String, u64, u32)> {
        let i = &self.inner;
        let f = lock(&i.in_flight).remove(task)?;
        if f.base == base {
            return Some((f.attempt, f.parent, f.tries));
        }
        // Dispatched on another base: whatever it answers is witnessed and never merged.
        if let Some(issued) = lock(&i.issued).get_mut(&f.attempt) {
            issued.first = None;
        }
        lock(&i.waiting).remove(&f.attempt);
        None
    }

    fn halt(&self, run: u64, by: &str, reason: &str) {
        let i = &self.inner;
        if !lock(&i.halted).insert(run) {
            return;
        }
        // The tasks no worker took yet go first, so none is started after the halt.
        if let Err(e) = i.conn.purge(&protocol::task_subject(&i.ledger, run)) {
            eprintln!("git forum: {e}");
        }
        if let Err(e) = i.announce_halt(run, by, reason, false) {
            eprintln!("git forum: the halt did not reach the workers: {e}");
        }
    }

    fn settle(&self, stream_seq: u64) {
        let i = &self.inner;
        lock(&i.known).insert(stream_seq);
        if let Some(p) = lock(&i.held).remove(&stream_seq) {
            let _ = i.conn.ack(&p);
        }
    }

    fn attempt_id(&self, _: &str) -> String {
        use rand_core::RngCore;
        let mut b = [0u8; 16];
        rand_core::OsRng.fill_bytes(&mut b);
        protocol::attempt_from(b)
    }

    fn push_base(&self, base_ref: &str, commit: &str) -> Result<(), String> {
        // The tasks of a wave push their bases at once: a wave of N tasks costs a few
        // pushes rather than N. When one push fails, every base in it failed.
        let i = &self.inner;
        i.pushes.go(format!("+{commit}:{base_ref}"), |batch| {
            let r = i.push_bases(batch);
            batch.iter().map(|(t, _)| (*t, r.clone())).collect()
        })
    }

    fn publish(&self, task: &TaskMessage) -> Result<(), String> {
        self.listen(task.run)?;
        let (tx, rx) = channel();
        lock(&self.inner.issued).insert(
            task.attempt.clone(),
            Issued {
                parent: task.task_seq,
                first: Some(tx),
            },
        );
        lock(&self.inner.waiting).insert(task.attempt.clone(), rx);
        self.republish(task).map(|_| ())
    }

    fn republish(&self, task: &TaskMessage) -> Result<bool, String> {
        self.listen(task.run)?;
        let subject = protocol::task_subject(&self.inner.ledger, task.run);
        // The attempt id is the message id: a second copy within the stream's duplicate
        // window is dropped by the server.
        self.inner
            .conn
            .publish_once(&subject, task.to_bytes(), &task.attempt)
    }

    fn wait(&self, attempt: &str, stop: &dyn Fn() -> bool) -> Result<Option<Arrived>, String> {
        let Some(rx) = lock(&self.inner.waiting).remove(attempt) else {
            return Err(format!("attempt {attempt} was never published"));
        };
        loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(r) => return Ok(Some(r)),
                Err(RecvTimeoutError::Timeout) if stop() => return Ok(None),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("the results listener stopped".into());
                }
            }
        }
    }

    fn take_duplicates(&self) -> Vec<Duplicate> {
        std::mem::take(&mut *lock(&self.inner.duplicates))
    }

    fn fetch_result(&self, result_ref: &str, result: &ResultMessage) -> Result<(), String> {
        let i = &self.inner;
        if result.commit.is_none() {
            return Ok(());
        }
        // Results that come together are fetched together (one `git fetch`, one pack from
        // the remote); a batch that fails is fetched again one ref at a time, so each result
        // gets its own line and one missing ref spoils no other.
        i.fetches
            .go(format!("+{result_ref}:{result_ref}"), |batch| {
                alone_on_failure(batch, |specs| i.fetch_refs(specs))
            })
            .map_err(|e| format!("cannot fetch the worker's commit from {result_ref}: {e}"))
    }

    fn bring(
        &self,
        result_ref: &str,
        result: &ResultMessage,
        base: &str,
        worktree: Option<&Path>,
    ) -> Result<(), String> {
        let i = &self.inner;
        let Some(commit) = &result.commit else {
            return Ok(());
        };
        let got = git_line(
            &i.repo,
            &["rev-parse", "--verify", &format!("{result_ref}^{{commit}}")],
        )?;
        if &got != commit {
            return Err(format!(
                "{result_ref} holds {got}, not the commit {commit} the result names"
            ));
        }
        // The same checks a strict replay makes again of the commit.
        let facts = crate::work::merge::worker_commit(&i.repo, commit)
            .ok_or_else(|| format!("git cannot read the worker's commit {commit}"))?;
        crate::run::replay::check_worker_commit(commit, &facts, base, &result.attempt)?;
        let Some(worktree) = worktree else {
            return Ok(());
        };
        git_line(worktree, &["read-tree", "-u", "--reset", commit])
            .map(|_| ())
            .map_err(|e| format!("cannot put the worker's change in the task's worktree: {e}"))
    }
}

/// Answers each spec of `batch` (by ticket) with what `run` gave for the whole batch when it
/// worked, else with what `run` gives for that spec alone: one spec that fails (a results ref
/// gone) fails no other, and each failure is its own.
fn alone_on_failure(
    batch: &[(u64, String)],
    run: impl Fn(&[(u64, String)]) -> Result<(), String>,
) -> Vec<(u64, Result<(), String>)> {
    let all = run(batch);
    if all.is_ok() || batch.len() == 1 {
        return batch.iter().map(|(t, _)| (*t, all.clone())).collect();
    }
    batch
        .iter()
        .map(|one| (one.0, run(std::slice::from_ref(one))))
        .collect()
}

/// Runs git in `dir` and returns its standard output's first line, or its error in one line.
/// Makes the ledger's stream and its progress stream, which only a writer makes (see
/// `Connection::stream_made`), one writer of this repository at a time: two runs of one
/// ledger dispatched together would otherwise both create the stream at once.
fn make_streams(conn: &Connection, repo: &Path, ledger: &str) -> Result<(), String> {
    let common = git_line(
        repo,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    let dir = Path::new(&common).join("forum").join("locks");
    let path = dir.join(format!("{}.stream", protocol::stream_name(ledger)));
    let held = std::fs::create_dir_all(&dir)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
        })
        .and_then(|f| f.lock().map(|()| f))
        .map_err(|e| format!("cannot take the lock {}: {e}", path.display()))?;
    conn.ensure_stream()?;
    // Made second, and always: workers take it as the sign that the task stream is whole
    // (see `Connection::stream_made`).
    conn.ensure_progress_stream()?;
    drop(held);
    Ok(())
}

pub(crate) fn git_line(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut cmd = crate::gitproc::in_dir(dir);
    cmd.args(args);
    let out = git_output(cmd, None, &format!("git {}", args[0]))?;
    Ok(out.lines().next().unwrap_or("").trim().to_string())
}

/// Runs the git command `cmd` (with `input` on stdin), its output read to a bound, and returns
/// its standard output, or the first line of its error after `what` (`git add: ...`).
pub(crate) fn git_output(
    cmd: std::process::Command,
    input: Option<&[u8]>,
    what: &str,
) -> Result<String, String> {
    let out = crate::gitproc::output(cmd, input, 16 << 20).map_err(|e| e.to_string())?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("failed");
        return Err(format!("{what}: {}", line.trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of specs that fails when any of them is `bad`, counting its calls.
    fn fails_on_bad(calls: &Mutex<Vec<usize>>) -> impl Fn(&[(u64, String)]) -> Result<(), String> {
        move |specs| {
            lock(calls).push(specs.len());
            match specs.iter().find(|(_, s)| s.starts_with("bad")) {
                Some((_, s)) => Err(format!("no {s}")),
                None => Ok(()),
            }
        }
    }

    #[test]
    fn a_batch_that_fails_is_run_again_one_spec_at_a_time_and_each_gets_its_own_answer() {
        let calls = Mutex::new(Vec::new());
        let batch: Vec<(u64, String)> = ["a", "bad-b", "c"]
            .iter()
            .enumerate()
            .map(|(i, s)| (i as u64, s.to_string()))
            .collect();
        let answers = alone_on_failure(&batch, fails_on_bad(&calls));
        assert_eq!(
            answers,
            [(0, Ok(())), (1, Err("no bad-b".to_string())), (2, Ok(()))]
        );
        assert_eq!(*lock(&calls), [3, 1, 1, 1]);
        // A batch that works is one call for all.
        lock(&calls).clear();
        let good = [(7, "a".to_string()), (8, "c".to_string())];
        assert_eq!(
            alone_on_failure(&good, fails_on_bad(&calls)),
            [(7, Ok(())), (8, Ok(()))]
        );
        assert_eq!(*lock(&calls), [2]);
    }

    #[test]
    fn callers_that_come_while_a_batch_runs_go_in_the_next_one_together() {
        let batches = Arc::new(Batches::default());
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let (entered, first_runs) = channel::<()>();
        let (let_go, hold) = channel::<()>();
        let hold = Arc::new(Mutex::new(hold));
        let call = |spec: &str| {
            let (b, sizes, entered, hold) = (
                Arc::clone(&batches),
                Arc::clone(&sizes),
                entered.clone(),
                Arc::clone(&hold),
            );
            let spec = spec.to_string();
            std::thread::spawn(move || {
                b.go(spec, |batch| {
                    lock(&sizes).push(batch.len());
                    // The first batch holds until the test lets it go.
                    if lock(&sizes).len() == 1 {
                        let _ = entered.send(());
                        let _ = lock(&hold).recv();
                    }
                    alone_on_failure(batch, |specs| {
                        if specs.iter().any(|(_, s)| s == "bad") {
                            Err("bad".into())
                        } else {
                            Ok(())
                        }
                    })
                })
            })
        };
        let first = call("first");
        first_runs.recv().unwrap();
        // Three more come while the first batch runs: they wait, all three, for the next.
        let rest: Vec<_> = ["a", "bad", "c"].iter().map(|s| call(s)).collect();
        while lock(&batches.queue).waiting.len() < 3 {
            std::thread::yield_now();
        }
        let_go.send(()).unwrap();
        assert_eq!(first.join().unwrap(), Ok(()));
        let got: Vec<Result<(), String>> = rest.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(got, [Ok(()), Err("bad".to_string()), Ok(())]);
        assert_eq!(*lock(&sizes), [1, 3]);
    }
}
