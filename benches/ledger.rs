//! The allocator that measures peak heap needs `unsafe` (a `GlobalAlloc` impl).
#![allow(unsafe_code)]
//! Ledger benchmark: `cargo bench --bench ledger` (add `-- --quick` for N = 1,000 and 10,000).
//!
//! Prints, for each N, figures and ratios against baselines measured in the same run:
//! batched append vs `git fast-import` writing the identical commits (the tips must match),
//! cold open + one append, `verify --deep` on loose and on packed objects (entries/s and peak
//! RSS of a child process, median of three runs), and durable single appends vs a JSONL
//! baseline that does per entry what Forum does (open, append a line, fsync, close; payload
//! file then entry file), and durable appends from several processes at once (see
//! [`concurrent`]; `--concurrent-only` runs that part alone).
//! Nothing here asserts a time: the machine is shared and noisy, so read medians and ratios.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use git_forum::ledger::{NewEntry, Value};
use git_forum::store::git::{FlushMethod, GitStore, Options, commit_bytes};

#[path = "support/busy.rs"]
mod busy;
#[path = "support/writers.rs"]
mod writers;
use writers::{children_cpu, entries, filesystem_of, median, pct, run_writers, serve_child};

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .args(args)
        .output()
        .expect("git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn fresh_repo(root: &Path, name: &str) -> PathBuf {
    let p = root.join(name);
    std::fs::create_dir_all(&p).unwrap();
    git(&p, &["init", "-q", "."]);
    p
}

/// The same entries with every body made distinct (a counter added), so deep verify cannot
/// share work between entries: the bench ledger's bodies repeat (a few tens of thousands of
/// distinct bodies per 100,000 entries), as real ledgers' verdicts and notes often do.
fn entries_distinct(n: usize) -> Vec<NewEntry> {
    let mut news = entries(n);
    for (i, e) in news.iter_mut().enumerate() {
        if let Value::Object(fields) = &mut e.payload {
            fields.push(("n".to_string(), Value::int(i as i64)));
        }
    }
    news
}

/// Writes the same commits through `git fast-import`; returns (seconds, tip).
fn fast_import(repo: &Path, news: &[NewEntry]) -> (f64, String) {
    let mut stream = Vec::with_capacity(news.len() * 900);
    let mut head: Option<git_forum::ledger::Entry> = None;
    for n in news {
        let body = n.payload.canonical();
        let e = git_forum::ledger::Entry::next(
            head.as_ref(),
            n,
            git_forum::ledger::hash::sha256_hex(body.as_bytes()),
        );
        // Reuse our own commit serialisation for the header lines, so both sides agree on bytes.
        let fake = gix::ObjectId::null(gix::hash::Kind::Sha1);
        let raw = String::from_utf8(commit_bytes(&e, &fake, None)).unwrap();
        let mut lines = raw.lines();
        lines.next();
        let author = lines.next().unwrap().to_string();
        let committer = lines.next().unwrap().to_string();
        let message = git_forum::store::git::commit_message(&e);
        write!(
            stream,
            "commit refs/forum/ledgers/main\n{author}\n{committer}\ndata {}\n{message}",
            message.len()
        )
        .unwrap();
        write!(
            stream,
            "M 100644 inline payload.json\ndata {}\n{body}\n",
            body.len()
        )
        .unwrap();
        head = Some(e);
    }
    stream.extend_from_slice(b"done\n");
    let t = Instant::now();
    let mut child = Command::new("git")
        .current_dir(repo)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(["fast-import", "--quiet", "--done"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&stream).unwrap();
    assert!(child.wait().unwrap().success());
    let secs = t.elapsed().as_secs_f64();
    (secs, git(repo, &["rev-parse", "refs/forum/ledgers/main"]))
}

/// What a child `verify --deep` reported.
struct ChildVerify {
    secs: f64,
    /// Peak resident set (VmHWM), KiB: heap plus the mapped pages of the pack files read.
    rss_kib: u64,
    /// Peak live heap, bytes.
    heap: u64,
}

/// Runs `verify --deep` in a child process three times: the median time, the largest peaks.
fn child_verify(repo: &Path) -> ChildVerify {
    let runs: Vec<ChildVerify> = (0..3).map(|_| child_verify_once(repo)).collect();
    ChildVerify {
        secs: median(runs.iter().map(|r| r.secs).collect()),
        rss_kib: runs.iter().map(|r| r.rss_kib).max().unwrap_or(0),
        heap: runs.iter().map(|r| r.heap).max().unwrap_or(0),
    }
}

/// Runs `verify --deep` in a child process once.
fn child_verify_once(repo: &Path) -> ChildVerify {
    let exe = std::env::current_exe().unwrap();
    let t = Instant::now();
    let o = Command::new(exe)
        .args(["--child-verify", repo.to_str().unwrap()])
        .output()
        .unwrap();
    let secs = t.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && text.contains("ok"),
        "child verify: {text} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let nums: Vec<u64> = text
        .split_whitespace()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    ChildVerify {
        secs,
        rss_kib: nums.get(1).copied().unwrap_or(0),
        heap: nums.get(2).copied().unwrap_or(0),
    }
}

fn print_verify(label: &str, n: usize, c: &ChildVerify, objects: &Path) {
    let pack_bytes: u64 = std::fs::read_dir(objects.join("pack"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    println!(
        "verify --deep, {label}: {:.3}s = {:.0} entries/s; peak RSS {:.1} MiB (the pack files, read through the page cache, are {:.1} MiB), peak heap {:.1} MiB (child process, includes exec)",
        c.secs,
        n as f64 / c.secs,
        c.rss_kib as f64 / 1024.0,
        pack_bytes as f64 / 1048576.0,
        c.heap as f64 / 1048576.0
    );
}

fn child_main(repo: &str) {
    let store = GitStore::open(Path::new(repo), "main", Options::default()).unwrap();
    let r = store.verify(true).unwrap();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("0");
    let heap = PEAK.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "{} {} {hwm} {heap}",
        if r.passed() { "ok" } else { "FAILED" },
        r.entries
    );
}

/// One Forum-style durable append: open, append a line, fsync, close, for the payload file and
/// then the entry file.
fn jsonl_append(dir: &Path, head: &mut Option<git_forum::ledger::Entry>, n: &NewEntry) {
    *head = Some(jsonl_lines(dir, head.as_ref(), n, true));
}

/// Appends the entry after `head` as Forum writes it: its payload line, then its entry line,
/// each file opened, appended (flushed when `sync`) and closed. Returns the entry.
fn jsonl_lines(
    dir: &Path,
    head: Option<&git_forum::ledger::Entry>,
    n: &NewEntry,
    sync: bool,
) -> git_forum::ledger::Entry {
    let body = n.payload.canonical();
    let ph = git_forum::ledger::hash::sha256_hex(body.as_bytes());
    let e = git_forum::ledger::Entry::next(head, n, ph.clone());
    for (file, line) in [
        (
            "payloads.jsonl",
            format!(
                "{{\"hash\": \"{ph}\", \"body\": {}}}\n",
                n.payload.python_dumps()
            ),
        ),
        (
            "entries.jsonl",
            format!("{}\n", e.to_value().python_dumps()),
        ),
    ] {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(file))
            .unwrap();
        f.write_all(line.as_bytes()).unwrap();
        if sync {
            f.sync_all().unwrap();
        }
    }
    e
}

/// A writer in the durable comparison.
enum Writer {
    Git(Box<GitStore>),
    Jsonl {
        dir: PathBuf,
        head: Option<git_forum::ledger::Entry>,
    },
    /// Creates four small files per entry and flushes nothing: what creating an append's three
    /// loose objects and its ref lock costs on this filesystem, before any git work or flush.
    Files {
        dir: PathBuf,
        next: usize,
    },
}

impl Writer {
    fn git(root: &Path, name: &str, method: Option<FlushMethod>) -> Writer {
        let repo = fresh_repo(root, name);
        let opts = match method {
            Some(method) => Options {
                fsync: true,
                method,
                ..Options::default()
            },
            None => Options {
                fsync: false,
                ..Options::default()
            },
        };
        Writer::Git(Box::new(GitStore::open(&repo, "main", opts).unwrap()))
    }

    fn append(&mut self, e: &NewEntry) {
        match self {
            Writer::Git(store) => {
                store.append_entry(e).unwrap();
            }
            Writer::Jsonl { dir, head } => jsonl_append(dir, head, e),
            Writer::Files { dir, next } => {
                for _ in 0..4 {
                    let sub = dir.join(format!("{:02x}", *next % 256));
                    std::fs::create_dir_all(&sub).unwrap();
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(sub.join(format!("f{next}")))
                        .unwrap();
                    f.write_all(&[b'x'; 300]).unwrap();
                    *next += 1;
                }
            }
        }
    }
}

fn run_n(root: &Path, n: usize) {
    println!("\n== N = {n} ==");
    let news = entries(n);
    // Batched append vs fast-import, 3 rounds, fresh repositories.
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut ratios = Vec::new();
    let mut packed_repo = PathBuf::new();
    for round in 0..3 {
        let a = fresh_repo(root, &format!("batch-{n}-{round}"));
        let mut store = GitStore::open(&a, "main", Options::default()).unwrap();
        let t = Instant::now();
        let done = store.append_entries(&news).unwrap();
        let s = t.elapsed().as_secs_f64();
        let b = fresh_repo(root, &format!("fi-{n}-{round}"));
        let (fs, tip) = fast_import(&b, &news);
        assert_eq!(
            tip,
            done.last().unwrap().commit.to_string(),
            "fast-import and git forum must write identical commits"
        );
        ours.push(s);
        theirs.push(fs);
        ratios.push(s / fs);
        if round == 0 {
            packed_repo = a;
        } else {
            std::fs::remove_dir_all(&b).ok();
        }
    }
    println!(
        "batched append (one pack, fsync): median {:.3}s = {:.0} entries/s; git fast-import {:.3}s = {:.0} entries/s; ratio ours/fast-import {:.2} (identical tips)",
        median(ours.clone()),
        n as f64 / median(ours),
        median(theirs.clone()),
        n as f64 / median(theirs),
        median(ratios)
    );
    // Deep verify, packed (the pack the batch wrote) and loose (the same objects unpacked).
    let c = child_verify(&packed_repo);
    print_verify("packed", n, &c, &packed_repo.join(".git/objects"));
    // The same with no two bodies alike.
    let distinct = fresh_repo(root, &format!("distinct-{n}"));
    GitStore::open(&distinct, "main", Options::default())
        .unwrap()
        .append_entries(&entries_distinct(n))
        .unwrap();
    let c = child_verify(&distinct);
    print_verify(
        "packed, every body distinct",
        n,
        &c,
        &distinct.join(".git/objects"),
    );
    std::fs::remove_dir_all(&distinct).ok();
    // The packed ledger is kept for the cold-open comparison at the end, made on every size in
    // turn so the disk's state (ext4 is slow to create files for minutes after mass deletes)
    // weighs on each size alike.
    let batch_tip = git(&packed_repo, &["rev-parse", "refs/forum/ledgers/main"]);
    PACKED.with(|m| m.borrow_mut().push((n, packed_repo.clone())));
    let loose = fresh_repo(root, &format!("loose-{n}"));
    let pack_dir = packed_repo.join(".git/objects/pack");
    let pack = std::fs::read_dir(&pack_dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "pack"))
        .unwrap();
    let mut child = Command::new("git")
        .current_dir(&loose)
        .args(["unpack-objects", "-q"])
        .stdin(std::fs::File::open(&pack).unwrap())
        .spawn()
        .unwrap();
    assert!(child.wait().unwrap().success());
    let tip = batch_tip;
    git(&loose, &["update-ref", "refs/forum/ledgers/main", &tip]);
    let c = child_verify(&loose);
    print_verify("loose", n, &c, &loose.join(".git/objects"));
    std::fs::remove_dir_all(&loose).ok();
}

thread_local! {
    static PACKED: std::cell::RefCell<Vec<(usize, PathBuf)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Flushes everything dirty so the next measurement does not pay for earlier work.
fn settle() {
    let _ = Command::new("sync").status();
}

/// Cold open plus one durable append on each kept ledger, the sizes interleaved over 7 rounds:
/// opening reads the tip only, so the figure must not grow with the ledger.
fn cold_open(template: &NewEntry) {
    let repos = PACKED.with(|m| m.borrow().clone());
    if repos.len() < 2 {
        return;
    }
    println!(
        "\n== cold open (open, read the tip) and cold open + one durable append, sizes interleaved =="
    );
    settle();
    let mut open_only: Vec<Vec<f64>> = vec![Vec::new(); repos.len()];
    let mut with_append: Vec<Vec<f64>> = vec![Vec::new(); repos.len()];
    for round in 0..7 {
        for (k, (_, repo)) in repos.iter().enumerate() {
            let t = Instant::now();
            let store = GitStore::open(repo, "main", Options::default()).unwrap();
            store.tip().unwrap().expect("the ledger exists");
            open_only[k].push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let mut store = GitStore::open(repo, "main", Options::default()).unwrap();
            let mut one = template.clone();
            one.payload = Value::int(round);
            store.append_entry(&one).unwrap();
            with_append[k].push(t.elapsed().as_secs_f64());
        }
    }
    for (k, (n, _)) in repos.iter().enumerate() {
        println!(
            "N = {n}: open {:.2} ms, open + append {:.2} ms (medians of 7)",
            median(open_only[k].clone()) * 1e3,
            median(with_append[k].clone()) * 1e3
        );
    }
    let last = repos.len() - 1;
    println!(
        "ratio N = {} to N = {}: open {:.2}, open + append {:.2}",
        repos[last].0,
        repos[0].0,
        median(open_only[last].clone()) / median(open_only[0].clone()),
        median(with_append[last].clone()) / median(with_append[0].clone())
    );
}

/// Durable single appends by each flush method (and `--no-fsync`, and a floor that only creates
/// files), each against its own JSONL baseline: after the disk settles, five rounds of n/5
/// appends alternate between the method and a fresh JSONL writer, so the two meet the disk in
/// the same states. Methods run one at a time so that none pays for another's files.
///
/// Settling is a `sync` and a 65-second pause: on ext4 without a journal, creating a file
/// scans past every free inode of its block group deleted in the last 60 seconds (360 while
/// the inode's table block is dirty; `sync` cleans it), so files deleted just before (an
/// earlier run's repositories) would be charged to whoever creates files next.
fn durable(root: &Path, n: usize, only: Option<&str>) {
    const ROUNDS: usize = 5;
    println!(
        "\n== durable single appends, {n} entries per writer ({ROUNDS} rounds alternating with a JSONL writer; 65 s settle before each) =="
    );
    let news = entries(n);
    type Make = Box<dyn Fn(&Path) -> Writer>;
    let writers: Vec<(&str, Make)> = vec![
        (
            "git forum, forum.fsyncMethod=wal (default)",
            Box::new(|r| Writer::git(r, "durable-wal", Some(FlushMethod::Wal))),
        ),
        (
            "git forum, forum.fsyncMethod=batch",
            Box::new(|r| Writer::git(r, "durable-batch", Some(FlushMethod::Batch))),
        ),
        (
            "git forum, forum.fsyncMethod=fsync",
            Box::new(|r| Writer::git(r, "durable-fsync", Some(FlushMethod::PerFile))),
        ),
        (
            "git forum, forum.fsyncMethod=syncfs",
            Box::new(|r| Writer::git(r, "durable-syncfs", Some(FlushMethod::Syncfs))),
        ),
        (
            "git forum --no-fsync (for reference)",
            Box::new(|r| Writer::git(r, "no-fsync", None)),
        ),
        (
            "four new files per entry, no flush (floor)",
            Box::new(|r| Writer::Files {
                dir: r.join("files"),
                next: 0,
            }),
        ),
    ];
    let per = n / ROUNDS;
    for (k, (label, make)) in writers.iter().enumerate() {
        if only.is_some_and(|o| !label.contains(o)) {
            continue;
        }
        let dir = root.join(format!("durable-{k}"));
        std::fs::create_dir_all(dir.join("jsonl")).unwrap();
        let mut pair = [
            make(&dir),
            Writer::Jsonl {
                dir: dir.join("jsonl"),
                head: None,
            },
        ];
        settle();
        std::thread::sleep(Duration::from_secs(65));
        let mut secs = [0.0f64; 2];
        let mut lat: Vec<f64> = Vec::with_capacity(n);
        for round in 0..ROUNDS {
            for j in 0..2 {
                let w = (j + round) % 2;
                let t = Instant::now();
                for e in &news[round * per..(round + 1) * per] {
                    let s = Instant::now();
                    pair[w].append(e);
                    if w == 0 {
                        lat.push(s.elapsed().as_secs_f64());
                    }
                }
                secs[w] += t.elapsed().as_secs_f64();
            }
        }
        let done = (per * ROUNDS) as f64;
        println!(
            "{label:<44} {:>6.0} entries/s, p50 {:.2} ms, p99 {:.2} ms; JSONL beside it {:>5.0}/s; throughput ratio to JSONL {:.2}",
            done / secs[0],
            pct(&lat, 0.5) * 1e3,
            pct(&lat, 0.99) * 1e3,
            done / secs[1],
            secs[1] / secs[0]
        );
    }
}

/// Durable appends from `procs` processes at once to one ledger, `per` entries each, against
/// two JSONL baselines fed the same entries by the same number of processes, each append under
/// an exclusive `flock`: Forum's way (open, append, fsync and close the payload file then the
/// entry file, per append) and the same writers with group commit (append both lines under the
/// lock, then one flush of both files covers every writer waiting on it).
///
/// The writers are real processes: this bench run again with `--child-append`. Each opens its
/// ledger (or files), says it is ready and waits; the clock starts when all are told to go, so
/// process start and open are not counted. A git forum append here is what `git forum append`
/// does once the store is open: the entry's checks (labels, timestamp, size cap), the secret
/// scan of its body, then the durable append (`forum.fsyncMethod=wal`). The JSONL writers make
/// no checks. Each line also gives the writers' CPU per append, user and system apart.
/// Rounds rotate the order of the three writers, each on fresh files; afterwards the
/// ledgers must hold every acknowledged entry (count, and `verify --deep` passes).
fn concurrent(root: &Path, procs: usize, per: usize, rounds: usize) {
    println!(
        "\n== durable appends from {procs} processes at once, {per} entries each, {rounds} rounds (order rotated; a `sync` before each run) =="
    );
    let uptime = Command::new("uptime")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("uptime: {uptime}");
    let modes = ["git", "jsonl-each", "jsonl-group"];
    let labels = [
        "git forum, fsyncMethod=wal, checks + secret scan",
        "JSONL under a lock, fsync per append (Forum's way)",
        "JSONL under a lock, group commit",
    ];
    let mut secs = [0.0f64; 3];
    let mut lat: [Vec<f64>; 3] = Default::default();
    let mut cpu = [(0.0f64, 0.0f64); 3];
    let mut ledgers = Vec::new();
    for round in 0..rounds {
        for k in 0..3 {
            let m = (k + round) % 3;
            let target = root.join(format!("concurrent-{}-{round}", modes[m]));
            if m == 0 {
                fresh_repo(root, &format!("concurrent-{}-{round}", modes[m]));
                ledgers.push(target.clone());
            } else {
                std::fs::create_dir_all(&target).unwrap();
            }
            settle();
            let before = children_cpu();
            let (wall, mut l) = run_writers("--child-append", modes[m], &target, procs, per);
            let after = children_cpu();
            cpu[m].0 += after.0 - before.0;
            cpu[m].1 += after.1 - before.1;
            secs[m] += wall;
            lat[m].append(&mut l);
        }
    }
    let done = (procs * per * rounds) as f64;
    let rate: Vec<f64> = secs.iter().map(|s| done / s).collect();
    for m in 0..3 {
        let ratios = if m == 0 {
            format!(
                "; {:.2}x Forum's way, {:.2}x JSONL with group commit",
                rate[0] / rate[1],
                rate[0] / rate[2]
            )
        } else {
            String::new()
        };
        println!(
            "{:<52} {:>6.0} appends/s, p50 {:.2} ms, p99 {:.2} ms{ratios}; CPU an append {:.0} µs user, {:.0} µs system",
            labels[m],
            rate[m],
            pct(&lat[m], 0.5) * 1e3,
            pct(&lat[m], 0.99) * 1e3,
            cpu[m].0 / done * 1e6,
            cpu[m].1 / done * 1e6
        );
    }
    println!(
        "group commit alone (JSONL with it / without): {:.2}x",
        rate[2] / rate[1]
    );
    for repo in &ledgers {
        let store = GitStore::open(repo, "main", Options::default()).unwrap();
        let r = store.verify(true).unwrap();
        assert!(r.passed(), "verify --deep after the concurrent run failed");
        assert_eq!(
            r.entries as usize,
            procs * per,
            "every acknowledged append is in the ledger"
        );
    }
    println!(
        "every acknowledged append is in its ledger: {} ledgers of {} entries, verify --deep passed",
        ledgers.len(),
        procs * per
    );
}

/// `--child-append MODE TARGET W N`: one writer of [`concurrent`], of git forum or of
/// [`JsonlShared`] (`jsonl-group` with group commit).
fn child_append(args: &[String]) {
    serve_child(
        args,
        |mode, target| JsonlShared::open(target, mode == "jsonl-group"),
        JsonlShared::append,
    );
}

/// JSONL writers sharing one directory: `lock` (an exclusive `flock`; it holds the head, and
/// with group commit the count of appends written), `flush` (group commit's flush lock and
/// count of appends on disk), `payloads.jsonl` and `entries.jsonl`.
struct JsonlShared {
    dir: PathBuf,
    lock: std::fs::File,
    flush: std::fs::File,
    group: bool,
}

impl JsonlShared {
    fn open(dir: &Path, group: bool) -> JsonlShared {
        let file = |name: &str| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(dir.join(name))
                .unwrap()
        };
        JsonlShared {
            dir: dir.to_path_buf(),
            lock: file("lock"),
            flush: file("flush"),
            group,
        }
    }

    fn read_u64(f: &std::fs::File, at: u64) -> u64 {
        use std::os::unix::fs::FileExt;
        let mut b = [0u8; 8];
        match f.read_exact_at(&mut b, at) {
            Ok(()) => u64::from_le_bytes(b),
            Err(_) => 0,
        }
    }

    fn write_u64(f: &std::fs::File, at: u64, v: u64) {
        use std::os::unix::fs::FileExt;
        f.write_all_at(&v.to_le_bytes(), at).unwrap();
    }

    /// One append: under the lock, the next entry on the head the lock file holds, its payload
    /// line then its entry line (each file opened, appended, flushed and closed, as Forum
    /// does; with group commit the flushes wait until after the lock).
    fn append(&self, n: &NewEntry) {
        use std::os::unix::fs::FileExt;
        self.lock.lock().unwrap();
        let mut head = [0u8; 73];
        let head = match self.lock.read_exact_at(&mut head, 0) {
            Ok(()) if head[0] == 1 => Some(git_forum::ledger::Entry {
                seq: u64::from_le_bytes(head[1..9].try_into().unwrap()),
                ts: 0.0,
                actor: String::new(),
                kind: String::new(),
                causal_parent: None,
                payload_hash: String::new(),
                prev_hash: String::new(),
                entry_hash: String::from_utf8(head[9..73].to_vec()).unwrap(),
            }),
            _ => None,
        };
        let e = jsonl_lines(&self.dir, head.as_ref(), n, !self.group);
        let mut next = [0u8; 73];
        next[0] = 1;
        next[1..9].copy_from_slice(&e.seq.to_le_bytes());
        next[9..73].copy_from_slice(e.entry_hash.as_bytes());
        self.lock.write_all_at(&next, 0).unwrap();
        if !self.group {
            self.lock.unlock().unwrap();
            return;
        }
        let ticket = Self::read_u64(&self.lock, 128) + 1;
        Self::write_u64(&self.lock, 128, ticket);
        self.lock.unlock().unwrap();
        self.flush.lock().unwrap();
        if Self::read_u64(&self.flush, 0) < ticket {
            let written = Self::read_u64(&self.lock, 128).max(ticket);
            for file in ["payloads.jsonl", "entries.jsonl"] {
                std::fs::File::open(self.dir.join(file))
                    .unwrap()
                    .sync_all()
                    .unwrap();
            }
            Self::write_u64(&self.flush, 0, written);
        }
        self.flush.unlock().unwrap();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child-verify") {
        child_main(&args[i + 1]);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--child-append") {
        child_append(&args[i + 1..]);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--make-ledger") {
        // `--make-ledger DIR N`: a packed N-entry ledger to profile or inspect by hand.
        let dir = PathBuf::from(&args[i + 1]);
        let n: usize = args[i + 2].parse().expect("N is a number");
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q", "."]);
        let mut store = GitStore::open(&dir, "main", Options::default()).unwrap();
        let news = if args.iter().any(|a| a == "--distinct") {
            entries_distinct(n)
        } else {
            entries(n)
        };
        store.append_entries(&news).unwrap();
        println!("wrote {n} entries to {}", dir.display());
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[10_000, 100_000]
    };
    // `--dir PATH`: where the repositories go (the filesystem under test; default: the temp dir).
    let root = match args.iter().position(|a| a == "--dir") {
        Some(i) => tempfile::tempdir_in(&args[i + 1]).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    println!(
        "git forum ledger benchmark ({}; load {}; in {} on {})",
        if quick { "quick" } else { "full" },
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim(),
        root.path().display(),
        filesystem_of(root.path())
    );
    let busy = busy::Busy::from_args(&args);
    println!("mode: {}", busy::Busy::label(&busy));
    // `--procs P` and `--per N`: the concurrent part's writers and entries per writer.
    let num = |flag: &str, default: usize| {
        args.iter()
            .position(|a| a == flag)
            .map_or(default, |i| args[i + 1].parse().expect("a number"))
    };
    let (procs, per) = (
        num("--procs", 8),
        num("--per", if quick { 100 } else { 250 }),
    );
    if args.iter().any(|a| a == "--concurrent-only") {
        concurrent(root.path(), procs, per, 3);
        return;
    }
    // `--only TEXT`: run only the durable writers whose label contains TEXT (e.g. `=wal`).
    let only = args
        .iter()
        .position(|a| a == "--only")
        .map(|i| args[i + 1].as_str());
    durable(root.path(), 1_000, only);
    concurrent(root.path(), procs, per, 3);
    if args.iter().any(|a| a == "--durable-only") {
        return;
    }
    for &n in sizes {
        run_n(root.path(), n);
    }
    cold_open(&entries(1)[0]);
    let _ = Duration::ZERO;
}

/// Counts live heap bytes so the verify child can report its peak heap next to its peak RSS
/// (which also counts the pages of the pack file it maps).
struct PeakAlloc;

static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static PEAK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

unsafe impl std::alloc::GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = unsafe { std::alloc::System.alloc(layout) };
        if !p.is_null() {
            let now =
                LIVE.fetch_add(layout.size(), std::sync::atomic::Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, std::sync::atomic::Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { std::alloc::System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), std::sync::atomic::Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;
