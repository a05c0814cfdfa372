//! `--wrk`: the daemon's reads against a hello-world axum server, both under wrk, in one run.
//!
//! The bench starts (a) a hello-world axum server: this same bench binary again with
//! `--hello-server`, in its own process, on the daemon's runtime configuration (tokio's
//! multi-thread runtime with 2 workers) and the daemon's axum, answering `GET /` with a short
//! static body; and (b) `git forum serve` on a ledger of `--entries` entries (imported as one
//! Forum directory). `--appenders` threads (default 8) append to the daemon (`POST /append`,
//! with its token) for the whole run, through the hello-world rounds as well as the daemon's,
//! so both sides meet the same load. For each read route, `--rounds` times (default 2), wrk
//! runs against hello-world and then against the route (`wrk -t T -c C -d S --latency`, the same
//! T, C and S both times, and the daemon's token in both requests; `--routes A,B` names other
//! read paths to run instead). Each line prints the route's
//! requests/s, p50, p99 and non-2xx count, and the ratio of its requests/s to the hello-world
//! round just before it; then the medians over the rounds. It prints the daemon's resident size
//! (`VmRSS`, sampled every 100 ms during the rounds, and `VmHWM` after), the appends' rate and
//! latency during the rounds, the secret scan's cost per append (the scan `POST /append` makes,
//! timed in this process over the appenders' bodies: the median of 20,000), and `uptime`.
//! Nothing is asserted about time.
//!
//! `--hello-sized` makes the other side of each comparison an answer as long as the route's:
//! the hello-world server also answers `GET /bytes/N` with N bytes of JSON text, and each
//! route's hello rounds ask it for the length of the route's own answer (read once before its
//! rounds). That separates what the daemon's own path costs from what moving a longer answer
//! through HTTP, the loopback and wrk costs any server: the comparison stays the
//! default.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Conn, Daemon, append_body, imported, memory_kib, opt_u64, start_daemon, stats_ms};

/// Where wrk is looked for.
const WRK: &str = "wrk";

/// `--hello-server`: a hello-world axum server on the daemon's runtime configuration; prints
/// `listening http://ADDR` and serves until killed.
pub(crate) fn hello_server() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64 + 8)
        .enable_all()
        .build()
        .expect("start the runtime");
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("listening http://{}", listener.local_addr().unwrap());
        let sized = |axum::extract::Path(n): axum::extract::Path<usize>| async move {
            // A JSON array of spaces, N bytes long (N ≥ 2).
            let n = n.clamp(2, 1 << 20);
            let mut body = vec![b' '; n];
            (body[0], body[n - 1]) = (b'[', b']');
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                body,
            )
        };
        let app = axum::Router::new()
            .route("/", axum::routing::get(|| async { "Hello, World!" }))
            .route("/bytes/{n}", axum::routing::get(sized));
        axum::serve(listener, app).await.unwrap();
    });
}

/// One wrk run's figures.
#[derive(Clone, Copy, Default)]
struct Wrk {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    non_2xx: u64,
    errors: u64,
}

/// A wrk latency such as `220.00us`, `1.23ms` or `1.01s`, in milliseconds.
fn latency_ms(text: &str) -> Option<f64> {
    let (num, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic())?);
    let n: f64 = num.parse().ok()?;
    Some(match unit {
        "us" => n / 1e3,
        "ms" => n,
        "s" => n * 1e3,
        "m" => n * 60e3,
        _ => return None,
    })
}

/// Runs wrk against `url` and reads its figures.
fn wrk(url: &str, token: &str, threads: u64, conns: u64, seconds: u64) -> Wrk {
    let out = Command::new(WRK)
        .args([
            "-t",
            &threads.to_string(),
            "-c",
            &conns.to_string(),
            "-d",
            &format!("{seconds}s"),
            "--latency",
            "-H",
            &format!("Authorization: Bearer {token}"),
            url,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run wrk");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut w = Wrk::default();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", v] => w.rps = v.parse().unwrap_or(0.0),
            ["50%", v] => w.p50_ms = latency_ms(v).unwrap_or(0.0),
            ["99%", v] => w.p99_ms = latency_ms(v).unwrap_or(0.0),
            ["Non-2xx", "or", "3xx", "responses:", n] => w.non_2xx = n.parse().unwrap_or(0),
            ["Socket", "errors:", rest @ ..] => {
                w.errors = rest
                    .iter()
                    .filter_map(|x| x.trim_end_matches(',').parse::<u64>().ok())
                    .sum();
            }
            _ => {}
        }
    }
    if w.rps == 0.0 {
        eprintln!(
            "wrk gave no figures for {url}:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    w
}

fn uptime() -> String {
    Command::new("uptime")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// The appenders' shared state: which round is on (0: none, 1: hello-world, 2: the daemon),
/// and when to stop.
struct Appenders {
    round: AtomicU64,
    stop: AtomicBool,
}

/// The median time of the secret scan `POST /append` makes, over `n` of the appenders' bodies.
fn scan_cost(n: usize) -> Duration {
    use git_forum::ledger::canonical;
    let bodies: Vec<_> = (0..n)
        .map(|i| {
            let v = canonical::parse(&append_body(i % 8, i)).unwrap();
            v.get("payload").cloned().unwrap()
        })
        .collect();
    let mut times = Vec::with_capacity(n);
    for b in &bodies {
        let t = Instant::now();
        let clean = git_forum::serve::dispatch::scan_append_body(std::hint::black_box(b));
        times.push(t.elapsed());
        assert!(clean, "the bench's bodies carry no secret");
    }
    times.sort();
    times[times.len() / 2]
}

/// `--wrk`: see the module doc.
pub(crate) fn run(args: &[String]) {
    if Command::new(WRK).arg("--version").output().is_err() {
        println!(
            "wrk is not installed: this part needs it (`apt-get install wrk`, or build it from https://github.com/wg/wrk); skipped"
        );
        return;
    }
    let busy = super::busy::Busy::from_args(args);
    let entries = opt_u64(args, "--entries", 1000).max(1);
    let seconds = opt_u64(args, "--seconds", 10).max(1);
    let rounds = opt_u64(args, "--rounds", 2).max(1);
    let appenders = opt_u64(args, "--appenders", 8) as usize;
    let threads = opt_u64(args, "--threads", 2).max(1);
    let conns = opt_u64(args, "--connections", 32).max(threads);
    println!("mode: {}", super::busy::Busy::label(&busy));
    println!("uptime at start: {}", uptime());

    let dir = imported(entries);
    let (mut daemon, addr) = start_daemon(dir.path(), &[], &["--concurrency", "64"]);
    let token = super::TOKEN.get().cloned().unwrap_or_default();
    let pid = daemon.0.id();
    let mut hello = Command::new(std::env::current_exe().unwrap());
    hello
        .arg("--hello-server")
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut hello = Daemon(hello.spawn().expect("start the hello-world server"));
    let hello_addr = {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(hello.0.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        line.trim()
            .strip_prefix("listening http://")
            .expect("the hello-world server's address")
            .to_string()
    };
    // Load the ledger before the first round.
    let (code, _) = Conn::open(&addr).send_for_body("GET", "/status", "");
    assert_eq!(code, 200, "GET /status before the rounds");
    let (hwm0, rss0) = memory_kib(pid);
    println!(
        "git forum serve on {addr} (pid {pid}), {entries} entries; hello-world axum on {hello_addr}"
    );
    println!("daemon memory before the rounds: VmRSS {rss0} KiB, VmHWM {hwm0} KiB");
    println!(
        "wrk -t{threads} -c{conns} -d{seconds}s --latency, {rounds} rounds (hello-world, then the route), {appenders} appender threads on POST /append throughout\n"
    );

    let state = Arc::new(Appenders {
        round: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let workers: Vec<_> = (0..appenders)
        .map(|c| {
            let (addr, state) = (addr.clone(), state.clone());
            std::thread::spawn(move || {
                let mut conn = Conn::open(&addr);
                let mut lat: [Vec<Duration>; 3] = Default::default();
                let mut bad = 0u64;
                let mut i = 0;
                while !state.stop.load(Ordering::Relaxed) {
                    let round = state.round.load(Ordering::Relaxed) as usize;
                    let t = Instant::now();
                    let code = conn.send("POST", "/append", &append_body(c, 1_000_000 + i));
                    lat[round.min(2)].push(t.elapsed());
                    bad += u64::from(!(200..300).contains(&code));
                    i += 1;
                }
                (lat, bad)
            })
        })
        .collect();
    // The daemon's resident size, sampled during the daemon's rounds.
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (sampling, state) = (sampling.clone(), state.clone());
        std::thread::spawn(move || {
            let mut max = 0;
            while sampling.load(Ordering::Relaxed) {
                if state.round.load(Ordering::Relaxed) == 2 {
                    max = max.max(memory_kib(pid).1);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            max
        })
    };

    let mid = entries / 2;
    let mut routes = vec![
        "/health".to_string(),
        "/status".to_string(),
        "/checkpoint".to_string(),
        format!("/ledger/{mid}"),
        format!("/payload/{mid}"),
        "/log?limit=10".to_string(),
    ];
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    // `--only A,B`: only the routes that start with one of these (to profile one route).
    if let Some(only) = value("--only") {
        let wanted: Vec<&str> = only.split(',').collect();
        routes.retain(|r| wanted.iter().any(|w| r.starts_with(w)));
    }
    // `--routes A,B`: these read paths instead (to compare answers of other sizes).
    if let Some(list) = value("--routes") {
        routes = list.split(',').map(str::to_string).collect();
    }
    println!(
        "{:<16} {:>5} {:>10} {:>8} {:>8} {:>7} {:>10} {:>8} {:>8} {:>7}",
        "route",
        "round",
        "req/s",
        "p50 ms",
        "p99 ms",
        "non2xx",
        "hello r/s",
        "p50 ms",
        "p99 ms",
        "ratio"
    );
    let mut summary = Vec::new();
    let mut failed = false;
    let mut round_secs = Vec::new();
    let sized = args.iter().any(|a| a == "--hello-sized");
    for route in &routes {
        let mut ratios = Vec::new();
        let mut ours = Vec::new();
        let hello_path = if sized {
            let (code, body) = Conn::open(&addr).send_for_body("GET", route, "");
            assert_eq!(code, 200, "GET {route}");
            println!("{route}: {} bytes; hello-world answers as many", body.len());
            format!("/bytes/{}", body.len())
        } else {
            "/".to_string()
        };
        for r in 0..rounds {
            state.round.store(1, Ordering::Relaxed);
            let h = wrk(
                &format!("http://{hello_addr}{hello_path}"),
                &token,
                threads,
                conns,
                seconds,
            );
            state.round.store(2, Ordering::Relaxed);
            let t = Instant::now();
            let d = wrk(
                &format!("http://{addr}{route}"),
                &token,
                threads,
                conns,
                seconds,
            );
            round_secs.push(t.elapsed().as_secs_f64());
            state.round.store(0, Ordering::Relaxed);
            let ratio = if h.rps > 0.0 { d.rps / h.rps } else { 0.0 };
            failed |= d.non_2xx > 0 || d.rps == 0.0 || h.rps == 0.0;
            println!(
                "{:<16} {:>5} {:>10.0} {:>8.2} {:>8.2} {:>7} {:>10.0} {:>8.2} {:>8.2} {:>6.0}%{}",
                route,
                r + 1,
                d.rps,
                d.p50_ms,
                d.p99_ms,
                d.non_2xx,
                h.rps,
                h.p50_ms,
                h.p99_ms,
                ratio * 100.0,
                if d.errors + h.errors > 0 {
                    format!("  (socket errors: ours {}, hello {})", d.errors, h.errors)
                } else {
                    String::new()
                }
            );
            ratios.push(ratio);
            ours.push(d.rps);
        }
        summary.push((route.clone(), median(ours), median(ratios)));
    }
    state.stop.store(true, Ordering::Relaxed);
    let mut lat: [Vec<Duration>; 3] = Default::default();
    let mut bad = 0;
    for w in workers {
        let (l, b) = w.join().unwrap();
        for (all, mine) in lat.iter_mut().zip(l) {
            all.extend(mine);
        }
        bad += b;
    }
    sampling.store(false, Ordering::Relaxed);
    let rss_max = sampler.join().unwrap();
    let (hwm, rss) = memory_kib(pid);

    println!("\nmedians over the rounds:");
    for (route, rps, ratio) in &summary {
        println!(
            "  {route:<16} {rps:>10.0} req/s  {:>5.0}% of hello-world",
            ratio * 100.0
        );
    }
    let seconds_of = |round: usize| {
        if round == 2 {
            round_secs.iter().sum::<f64>()
        } else {
            // The hello-world rounds took as long as wrk's duration each.
            (routes.len() as u64 * rounds * seconds) as f64
        }
    };
    for (round, name) in [(1usize, "hello-world rounds"), (2, "daemon rounds")] {
        let n = lat[round].len();
        let (p50, p99, max) = stats_ms(&mut lat[round]);
        println!(
            "appends during the {name}: {n} ({:.0}/s), p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.1} ms",
            n as f64 / seconds_of(round)
        );
    }
    println!("appends answered other than 2xx: {bad}");
    failed |= bad > 0;
    let mut daemon_lat = lat[2].clone();
    let (append_p50, _, _) = stats_ms(&mut daemon_lat);
    let scan = scan_cost(20_000);
    println!(
        "secret scan per append (the scan POST /append makes, in process, median of 20,000 of these bodies): {:.2} µs, {:.3}% of the median append ({append_p50:.2} ms)",
        scan.as_secs_f64() * 1e6,
        scan.as_secs_f64() * 1e3 / append_p50.max(1e-9) * 100.0
    );
    println!(
        "daemon memory: VmRSS max {rss_max} KiB sampled during the daemon's rounds; after: VmRSS {rss} KiB, VmHWM {hwm} KiB"
    );
    println!("uptime at the end: {}", uptime());
    drop(hello);
    let p = rustix::process::Pid::from_child(&daemon.0);
    rustix::process::kill_process(p, rustix::process::Signal::TERM).unwrap();
    let status = daemon.0.wait().unwrap();
    println!("SIGTERM: the daemon exited with {status}");
    // Stopped here: `exit` below runs no destructor.
    drop(busy);
    if failed || !status.success() {
        eprintln!("FAILED: a non-2xx answer, a wrk run without figures, or an unclean exit");
        std::process::exit(1);
    }
}
