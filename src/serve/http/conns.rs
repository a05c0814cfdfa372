//! The open connections: the cap with idle-first eviction, and the watch that closes a
//! connection whose client has gone quiet.
//!
//! **The idle watch.** hyper can close a connection that has not sent a whole request head
//! within a time (`header_read_timeout`), but it arms a timer in the runtime's timer wheel for
//! every request head it reads and clears it again, a cost every request of a busy keep-alive
//! connection pays (about a tenth of the server's time per `/health` on the development
//! machine). Instead a task beside each connection wakes a few times per read timeout and looks
//! at two counters the requests keep anyway: how many requests the connection has started and
//! how many are in the engine. A connection that started none since the last look, with none
//! in the engine, for the whole read timeout, is evicted as at the cap (its task drops it,
//! which closes its socket), so a client that sends nothing, drips its head or sits idle
//! between requests is closed between one and one and a quarter read timeouts after its last
//! request began or left the engine.
//! A long request in the engine (a submit) keeps its connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;

/// One open connection, as the accept loop tracks it for the cap.
pub(crate) struct Conn {
    /// Requests of this connection the engine has (0: it waits on its client).
    busy: std::sync::atomic::AtomicUsize,
    /// When it last started waiting on its client, in milliseconds since the server started.
    idle_since: std::sync::atomic::AtomicU64,
    /// Requests this connection has started (the idle watch's sign of life).
    started: AtomicU64,
    /// Raised to close it.
    evict: tokio::sync::Notify,
    /// The tracker's clock.
    epoch: tokio::time::Instant,
    /// Wakes the accept loop when this connection stops being busy.
    changed: Arc<tokio::sync::Notify>,
}

impl Conn {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Marks a request of this connection as in the engine until the guard drops.
    pub(super) fn busy(self: &Arc<Conn>) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self.clone())
    }
}

/// A request in the engine (see [`Conn::busy`]).
pub(super) struct Busy(Arc<Conn>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.idle_since.store(self.0.now(), Ordering::SeqCst);
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_one();
    }
}

/// The open connections, for the cap and for choosing which one to close at it.
struct Conns {
    open: std::sync::Mutex<std::collections::HashMap<u64, Arc<Conn>>>,
    next: std::sync::atomic::AtomicU64,
    epoch: tokio::time::Instant,
    /// Raised when a connection closes or stops being busy.
    changed: Arc<tokio::sync::Notify>,
    max: usize,
}

impl Conns {
    fn new(max: usize) -> Conns {
        Conns {
            open: Default::default(),
            next: Default::default(),
            epoch: tokio::time::Instant::now(),
            changed: Arc::new(tokio::sync::Notify::new()),
            max: max.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, Arc<Conn>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes room for one more connection: at once when under the cap; else by closing the
    /// connection that has waited longest on its client; else (every one is busy in the
    /// engine) by waiting until one closes or stops being busy.
    async fn make_room(&self) {
        loop {
            let wait = self.changed.notified();
            {
                let mut open = self.lock();
                if open.len() < self.max {
                    return;
                }
                let oldest = open
                    .iter()
                    .filter(|(_, c)| c.busy.load(Ordering::SeqCst) == 0)
                    .min_by_key(|(id, c)| (c.idle_since.load(Ordering::SeqCst), **id))
                    .map(|(id, _)| *id);
                if let Some(id) = oldest
                    && let Some(c) = open.remove(&id)
                {
                    // Counted out now; its task closes the socket when it sees this.
                    c.evict.notify_one();
                    continue;
                }
            }
            wait.await;
        }
    }

    /// Registers a new connection; it counts until [`Conns::close`] or an eviction.
    fn add(&self) -> (u64, Arc<Conn>) {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let c = Arc::new(Conn {
            busy: Default::default(),
            started: AtomicU64::new(0),
            idle_since: std::sync::atomic::AtomicU64::new(self.epoch.elapsed().as_millis() as u64),
            evict: tokio::sync::Notify::new(),
            epoch: self.epoch,
            changed: self.changed.clone(),
        });
        self.lock().insert(id, c.clone());
        (id, c)
    }

    /// A connection ended.
    fn close(&self, id: u64) {
        self.lock().remove(&id);
        self.changed.notify_one();
    }
}

/// What answers a request on the connection's own task, before the router, when it can
/// (the cached reads: `fast.rs`); `None` hands the request to the router.
pub(super) type Fast = Arc<
    dyn Fn(&hyper::Request<hyper::body::Incoming>) -> Option<axum::response::Response>
        + Send
        + Sync,
>;

/// Accepts connections until `stop` turns true, then waits for every open connection to end
/// (each is asked to finish its request in flight and close). At most `max_connections` are
/// open at once; at the cap, the one waiting longest on its client is closed to make room (see
/// the module doc). A connection that starts no request for `idle_timeout` while none of its
/// requests is in the engine is closed ([`quiet_for`]).
pub(super) async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: Router,
    fast: Fast,
    max_connections: usize,
    idle_timeout: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use futures_util::future::Either;
    use hyper::service::Service as _;
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;
    let conns = Arc::new(Conns::new(max_connections));
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(stream) = next_stream(&listener, &mut stop).await {
        tokio::select! {
            _ = conns.make_room() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        while tasks.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        let (id, conn) = conns.add();
        let tracked = conn.clone();
        let app = app.clone();
        let fast = fast.clone();
        // A read the cache answers is answered here; any other request goes to the router,
        // carrying its connection so the handler can mark it busy.
        let service =
            hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                tracked.started.fetch_add(1, Ordering::Relaxed);
                if let Some(r) = fast(&req) {
                    return Either::Left(std::future::ready(Ok(r)));
                }
                req.extensions_mut().insert(tracked.clone());
                Either::Right(TowerToHyperService::new(app.clone()).call(req))
            });
        let mut stop = stop.clone();
        let conns = conns.clone();
        // The idle watch runs beside the connection, not in the future polled at each of its
        // requests, and raises the same eviction.
        let watch = {
            let conn = conn.clone();
            tokio::spawn(async move {
                quiet_for(&conn, idle_timeout).await;
                conn.evict.notify_one();
            })
        };
        tasks.spawn(async move {
            let http = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            let mut http = std::pin::pin!(http);
            let stopping = tokio::select! {
                _ = http.as_mut() => false,
                // Evicted, or quiet too long: dropping the connection closes its socket.
                _ = conn.evict.notified() => false,
                _ = stop.wait_for(|s| *s) => true,
            };
            if stopping {
                http.as_mut().graceful_shutdown();
                let _ = http.await;
            }
            watch.abort();
            conns.close(id);
        });
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
}

/// The next connection accepted, or `None` once `stop` turns true.
async fn next_stream(
    listener: &tokio::net::TcpListener,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<tokio::net::TcpStream> {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait_for(|s| *s) => return None,
        };
        match accepted {
            Ok((stream, _)) => return Some(stream),
            Err(e) => {
                // Out of descriptors and the like: wait a little instead of spinning.
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
                ) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// How often, per read timeout, the idle watch looks at a connection.
const LOOKS_PER_TIMEOUT: u32 = 4;

/// Completes once `conn` has started no request and had none in the engine for `limit`, as
/// seen by looks a quarter of `limit` apart (see the module doc).
async fn quiet_for(conn: &Conn, limit: Duration) {
    let every = (limit / LOOKS_PER_TIMEOUT).max(Duration::from_millis(1));
    let mut seen = conn.started.load(Ordering::Relaxed);
    let mut quiet_since = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(every).await;
        let now = tokio::time::Instant::now();
        let started = conn.started.load(Ordering::Relaxed);
        if started != seen || conn.busy.load(Ordering::SeqCst) > 0 {
            seen = started;
            quiet_since = now;
            continue;
        }
        // A request that left the engine since the last look counts from when it left.
        let left = conn.epoch + Duration::from_millis(conn.idle_since.load(Ordering::SeqCst));
        if now.duration_since(quiet_since.max(left)) >= limit {
            return;
        }
    }
}
