//! The NATS JetStream side of dispatch: one connection with its own small runtime, the
//! ledger's work-queue stream (created when missing, file storage), publishing with the
//! server's acknowledgement, and the pull consumers of workers and of the writer.
//!
//! Only what a 2.9 server understands is used: one filter subject per consumer, no stream or
//! consumer metadata.

use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer, stream};
use futures_util::StreamExt;

use super::protocol;

/// Where the server is and how to reach it (`--dispatch`, `[dispatch]` in runtime.toml).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `nats://HOST:PORT` (or `tls://HOST:PORT`), or several servers of one cluster separated
    /// by commas: the client connects to one and moves to another when it goes away.
    pub url: String,
    /// A `.creds` file (JWT and NKey seed) the server asks for.
    pub credentials: Option<PathBuf>,
    /// Require TLS.
    pub tls: bool,
    /// A PEM file of the certificate authorities to trust for the server.
    pub tls_ca: Option<PathBuf>,
    /// The client's name on the server (shown by its monitoring).
    pub name: String,
    /// How long connecting may take (`None`: 5 seconds).
    pub timeout: Option<Duration>,
    /// How many copies a clustered server keeps of the ledger's streams it creates here (0 or
    /// 1: one; at most 5). A stream that exists keeps what it has.
    pub replicas: usize,
}

/// Whether a ledger's stream is there ([`Connection::stream_made`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Made {
    Yes,
    No,
    /// The server could not say (the line why): it may be restarting.
    Unknown(String),
}

/// One connection to the server, for one ledger's stream.
pub struct Connection {
    rt: tokio::runtime::Runtime,
    client: async_nats::Client,
    js: jetstream::Context,
    ledger: String,
    url: String,
    replicas: usize,
}

/// A message pulled from a consumer, with what acknowledges it.
pub struct Pulled {
    /// Its bytes (untrusted until parsed).
    pub payload: Vec<u8>,
    /// How many times the server delivered it (1 the first time).
    pub delivered: i64,
    /// Its sequence in the stream: the same however often it is delivered.
    pub stream_seq: u64,
    message: jetstream::Message,
}

/// How long the ledger's stream remembers the id of each message published with one
/// ([`Connection::publish_once`]): a task published again under the same attempt id within
/// this time is dropped by the server. Set on the stream explicitly (the server's default is
/// the same, but a stream made by hand may have another).
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// How long connecting may take before the server counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a task or result is published again when the server does not confirm it (a
/// clustered stream choosing a new leader after a node went away takes seconds).
const PUBLISH_RETRY: Duration = Duration::from_secs(30);

/// The most workers whose progress a status shows.
pub const MAX_WORKERS_SHOWN: usize = 256;

/// What the server holds of a dispatched run ([`Connection::figures`]).
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// The run's tasks still on the stream (waiting for a worker, or in flight).
    pub run_tasks: u64,
    /// The workers' consumer (every run of the ledger): tasks not yet given to a worker.
    pub pending: u64,
    /// ... tasks given to a worker and not yet acknowledged.
    pub in_flight: u64,
    /// ... tasks given out more than once and not yet acknowledged.
    pub redelivered: u64,
    /// Results of the run on the stream that its writer has not yet witnessed.
    pub results_waiting: u64,
    /// Each worker's last progress message (untrusted bytes) and when the server got it
    /// (Unix seconds).
    pub progress: Vec<(Vec<u8>, i64)>,
}

impl Connection {
    /// Connects to the server for `ledger`'s stream. An unreachable server, bad credentials or
    /// a bad URL is one line.
    pub fn connect(settings: &Settings, ledger: &str) -> Result<Connection, String> {
        let (url, user) = split_userinfo(settings.url.trim())?;
        let servers: Vec<&str> = url.split(',').collect();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the NATS client's runtime: {e}"))?;
        let timeout = settings.timeout.unwrap_or(CONNECT_TIMEOUT);
        let client = rt.block_on(async {
            let mut o = async_nats::ConnectOptions::new()
                .connection_timeout(timeout)
                .name(&settings.name)
                .require_tls(settings.tls || url.starts_with("tls://"));
            if let Some((name, password)) = user {
                o = o.user_and_password(name, password);
            }
            if let Some(c) = &settings.credentials {
                o = o.credentials_file(c).await.map_err(|e| {
                    format!("cannot read the NATS credentials file {}: {e}", c.display())
                })?;
            }
            if let Some(ca) = &settings.tls_ca {
                o = o.add_root_certificates(ca.clone());
            }
            tokio::time::timeout(timeout * 2, o.connect(servers.as_slice()))
                .await
                .map_err(|_| format!("cannot reach the NATS server at {url}: timed out"))?
                .map_err(|e| connect_error(&url, &e))
        })?;
        // The JetStream context starts its acknowledgement task on the runtime.
        let js = {
            let _inside = rt.enter();
            jetstream::new(client.clone())
        };
        Ok(Connection {
            rt,
            client,
            js,
            ledger: ledger.to_string(),
            url,
            replicas: settings.replicas.clamp(1, 5),
        })
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The ledger's stream, created when missing (work queue, file storage). A stream of that
    /// name whose subjects are not this ledger's is refused in one line.
    pub fn ensure_stream(&self) -> Result<(), String> {
        let name = protocol::stream_name(&self.ledger);
        let subjects = protocol::stream_subjects(&self.ledger);
        let config = stream::Config {
            name: name.clone(),
            subjects: vec![subjects.clone()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            duplicate_window: DUPLICATE_WINDOW,
            num_replicas: self.replicas,
            description: Some(format!(
                "git forum: the tasks and results of ledger {}",
                self.ledger
            )),
            ..Default::default()
        };
        let url = &self.url;
        self.rt.block_on(async {
            // The stream's description as the server answered the create (or lookup): no
            // second request, which a busy cluster may let time out.
            let s = raced(
                patiently(|| self.js.get_or_create_stream(config.clone())),
                || self.js.get_stream(&name),
            )
            .await
            .map_err(|e| {
                format!(
                    "cannot open the stream {name} on {url}: {}",
                    one_line(&e.to_string())
                )
            })?;
            let info = s.cached_info();
            self.is_ours(&info.config)?;
            // A stream made with a shorter window (by hand, or by an older git forum) is
            // given ours, so a task published again on `resume` is still recognised.
            if info.config.duplicate_window < DUPLICATE_WINDOW {
                let mut wider = info.config.clone();
                wider.duplicate_window = DUPLICATE_WINDOW;
                patiently(|| self.js.update_stream(wider.clone()))
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot set the duplicate window of the stream {name} on {url}: {}",
                            one_line(&e.to_string())
                        )
                    })?;
            }
            Ok(())
        })
    }

    /// Whether the ledger's stream has been made (by a writer: a worker never makes it),
    /// refusing in one line a stream of that name that is not this ledger's.
    ///
    /// Why workers never make it: nats-server before 2.9.16 (Debian ships 2.9.10) can answer
    /// two creates of one stream that arrive together by making it twice (fixed upstream by
    /// commit e6447c9), and a consumer made on the copy it drops then hears no pull request
    /// again (the task stays in flight to it and is redelivered into the void). A worker
    /// started beside its writer met that.
    pub fn stream_made(&self) -> Result<Made, String> {
        let name = protocol::stream_name(&self.ledger);
        let url = &self.url;
        self.rt.block_on(async {
            match patiently(|| self.js.get_stream(&name)).await {
                Ok(s) => {
                    self.is_ours(&s.cached_info().config)?;
                    // The server lists a stream while its create is still under way, and a
                    // consumer made then never answers either. The writer makes the progress
                    // stream only once the task stream's create was answered: when it is
                    // there, the task stream is whole.
                    let progress = protocol::progress_stream(&self.ledger);
                    Ok(match patiently(|| self.js.get_stream(&progress)).await {
                        Ok(_) => Made::Yes,
                        Err(e) if not_found(&e) => Made::No,
                        Err(e) => Made::Unknown(format!(
                            "cannot open the stream {progress} on {url}: {}",
                            one_line(&e.to_string())
                        )),
                    })
                }
                Err(e) if not_found(&e) => Ok(Made::No),
                Err(e) => Ok(Made::Unknown(format!(
                    "cannot open the stream {name} on {url}: {}",
                    one_line(&e.to_string())
                ))),
            }
        })
    }

    /// Refuses in one line a stream named as this ledger's whose subjects are another's.
    fn is_ours(&self, config: &stream::Config) -> Result<(), String> {
        let subjects = protocol::stream_subjects(&self.ledger);
        if config.subjects == [subjects.clone()] {
            return Ok(());
        }
        Err(format!(
            "the stream {} on {} is not ledger {}'s: its subjects are {:?}, not [{subjects:?}]; remove it or dispatch another ledger",
            config.name, self.url, self.ledger, config.subjects
        ))
    }

    /// Publishes `bytes` on `subject` and waits for the server to store it.
    pub fn publish(&self, subject: &str, bytes: Vec<u8>) -> Result<(), String> {
        self.send(
            subject,
            jetstream::message::PublishMessage::build().payload(bytes.into()),
        )
        .map(|_| ())
    }

    /// Publishes `bytes` on `subject` with the message id `id` (the `Nats-Msg-Id` header) and
    /// waits for the server's answer: `true` when it already had a message of that id within
    /// the stream's duplicate window (it drops the second), `false` when it stored this one.
    /// When the server does not confirm (a node went away, a clustered stream is choosing a new
    /// leader) it publishes again for up to [`PUBLISH_RETRY`]: the id keeps a retry from being
    /// stored twice.
    pub fn publish_once(&self, subject: &str, bytes: Vec<u8>, id: &str) -> Result<bool, String> {
        let start = std::time::Instant::now();
        loop {
            let m = jetstream::message::PublishMessage::build()
                .payload(bytes.clone().into())
                .message_id(id);
            match self.send(subject, m) {
                Err(_) if start.elapsed() < PUBLISH_RETRY => {
                    std::thread::sleep(Duration::from_millis(500));
                }
                done => return done,
            }
        }
    }

    /// Sends `m` on `subject`; whether the server counted it a duplicate.
    fn send(&self, subject: &str, m: jetstream::message::PublishMessage) -> Result<bool, String> {
        let url = &self.url;
        self.rt.block_on(async {
            let ack = self
                .js
                .send_publish(subject.to_string(), m)
                .await
                .map_err(|e| format!("cannot publish on {url}: {}", one_line(&e.to_string())))?;
            ack.await.map(|a| a.duplicate).map_err(|e| {
                format!(
                    "the NATS server did not store the message: {}",
                    one_line(&e.to_string())
                )
            })
        })
    }

    /// The durable pull consumer `name` on `filter` (created when missing) with a lease of
    /// `ack_wait`: a message not acknowledged (nor its lease extended) in that time is
    /// delivered again.
    pub fn consumer(
        &self,
        name: &str,
        filter: &str,
        ack_wait: Duration,
    ) -> Result<consumer::PullConsumer, String> {
        self.rt.block_on(async {
            let s = self.ledger_stream().await?;
            let config = consumer::pull::Config {
                durable_name: Some(name.to_string()),
                filter_subject: filter.to_string(),
                ack_policy: consumer::AckPolicy::Explicit,
                deliver_policy: consumer::DeliverPolicy::All,
                ack_wait,
                max_deliver: -1,
                ..Default::default()
            };
            raced(
                patiently(|| s.get_or_create_consumer(name, config.clone())),
                || s.get_consumer(name),
            )
            .await
            .map_err(|e| {
                format!(
                    "cannot open the consumer {name} on {}: {}",
                    self.url,
                    one_line(&e.to_string())
                )
            })
        })
    }

    /// The next message of `consumer`, waiting at most `wait` (`None`: none came).
    pub fn pull(
        &self,
        consumer: &consumer::PullConsumer,
        wait: Duration,
    ) -> Result<Option<Pulled>, String> {
        self.rt.block_on(async {
            let mut batch = consumer
                .fetch()
                .max_messages(1)
                .expires(wait)
                .messages()
                .await
                .map_err(|e| {
                    format!("cannot pull from the stream: {}", one_line(&e.to_string()))
                })?;
            match batch.next().await {
                None => Ok(None),
                Some(Err(e)) => Err(format!(
                    "cannot pull from the stream: {}",
                    one_line(&e.to_string())
                )),
                Some(Ok(message)) => {
                    let (delivered, stream_seq) = message
                        .info()
                        .map(|i| (i.delivered, i.stream_sequence))
                        .unwrap_or((1, 0));
                    Ok(Some(Pulled {
                        payload: message.payload.to_vec(),
                        delivered,
                        stream_seq,
                        message,
                    }))
                }
            }
        })
    }

    /// Acknowledges `p` (done: the server forgets it), waiting for the server to confirm.
    pub fn ack(&self, p: &Pulled) -> Result<(), String> {
        self.rt
            .block_on(p.message.double_ack())
            .map_err(|e| format!("cannot acknowledge: {}", one_line(&e.to_string())))
    }

    /// Refuses `p` for good (it is never delivered again).
    pub fn term(&self, p: &Pulled) -> Result<(), String> {
        self.rt
            .block_on(p.message.ack_with(AckKind::Term))
            .map_err(|e| format!("cannot refuse a message: {}", one_line(&e.to_string())))
    }

    /// Extends `p`'s lease by another ack wait (the worker is still at it).
    pub fn progress(&self, p: &Pulled) -> Result<(), String> {
        self.rt
            .block_on(p.message.ack_with(AckKind::Progress))
            .map_err(|e| format!("cannot extend a lease: {}", one_line(&e.to_string())))
    }

    /// Publishes `bytes` on `subject` outside JetStream (heard by whoever listens now) and
    /// waits until it reached the server.
    pub fn announce(&self, subject: &str, bytes: Vec<u8>) -> Result<(), String> {
        let url = &self.url;
        self.rt.block_on(async {
            self.client
                .publish(subject.to_string(), bytes.into())
                .await
                .map_err(|e| format!("cannot publish on {url}: {}", one_line(&e.to_string())))?;
            self.client
                .flush()
                .await
                .map_err(|e| format!("cannot publish on {url}: {}", one_line(&e.to_string())))
        })
    }

    /// Listens on `subject` (wildcards allowed) outside JetStream.
    pub fn listen(&self, subject: &str) -> Result<async_nats::Subscriber, String> {
        let url = &self.url;
        self.rt
            .block_on(self.client.subscribe(subject.to_string()))
            .map_err(|e| format!("cannot listen on {url}: {}", one_line(&e.to_string())))
    }

    /// The next message `sub` hears within `wait` (its bytes), if any.
    pub fn heard(&self, sub: &mut async_nats::Subscriber, wait: Duration) -> Option<Vec<u8>> {
        self.rt
            .block_on(async { tokio::time::timeout(wait, sub.next()).await })
            .ok()
            .flatten()
            .map(|m| m.payload.to_vec())
    }

    /// The ledger's work-queue stream, or one line naming it and the server.
    async fn ledger_stream(&self) -> Result<stream::Stream, String> {
        let stream_name = protocol::stream_name(&self.ledger);
        patiently(|| self.js.get_stream(&stream_name))
            .await
            .map_err(|e| {
                format!(
                    "cannot open the stream {stream_name} on {}: {}",
                    self.url,
                    one_line(&e.to_string())
                )
            })
    }

    /// Removes from the ledger's stream every message on `subject` (tasks no worker took yet);
    /// returns how many.
    pub fn purge(&self, subject: &str) -> Result<u64, String> {
        self.rt.block_on(async {
            let s = self.ledger_stream().await?;
            s.purge()
                .filter(subject.to_string())
                .await
                .map(|r| r.purged)
                .map_err(|e| {
                    format!(
                        "cannot purge {subject} on {}: {}",
                        self.url,
                        one_line(&e.to_string())
                    )
                })
        })
    }

    /// The ledger's stream of worker progress (created when missing): one message kept per
    /// worker, its last, for a day.
    pub fn ensure_progress_stream(&self) -> Result<(), String> {
        let name = protocol::progress_stream(&self.ledger);
        let config = stream::Config {
            name: name.clone(),
            subjects: vec![protocol::progress_filter(&self.ledger)],
            retention: stream::RetentionPolicy::Limits,
            storage: stream::StorageType::File,
            max_messages_per_subject: 1,
            max_messages: MAX_WORKERS_SHOWN as i64 * 4,
            max_age: Duration::from_secs(24 * 3600),
            num_replicas: self.replicas,
            description: Some(format!(
                "git forum: the last progress of each worker of ledger {}",
                self.ledger
            )),
            ..Default::default()
        };
        let url = &self.url;
        self.rt
            .block_on(raced(
                patiently(|| self.js.get_or_create_stream(config.clone())),
                || self.js.get_stream(&name),
            ))
            .map(|_| ())
            .map_err(|e| {
                format!(
                    "cannot open the stream {name} on {url}: {}",
                    one_line(&e.to_string())
                )
            })
    }

    /// What the server holds of a dispatched run: the tasks of run `run` still on the stream,
    /// the workers' consumer's and the run's results consumer's figures, and the last
    /// progress of each worker (at most [`MAX_WORKERS_SHOWN`]).
    pub fn figures(&self, run: u64) -> Result<Figures, String> {
        let url = &self.url;
        let err = |what: &str, e: &dyn std::fmt::Display| {
            format!("cannot read {what} on {url}: {}", one_line(&e.to_string()))
        };
        self.rt.block_on(async {
            let name = protocol::stream_name(&self.ledger);
            let s = self
                .js
                .get_stream(&name)
                .await
                .map_err(|e| err(&name, &e))?;
            let mut f = Figures::default();
            let subject = protocol::task_subject(&self.ledger, run);
            let mut info = Box::pin(
                s.info_with_subjects(&subject)
                    .await
                    .map_err(|e| err(&name, &e))?,
            );
            while let Some(row) = info.next().await {
                let (_, n) = row.map_err(|e| err(&name, &e))?;
                f.run_tasks += n as u64;
            }
            let workers = protocol::worker_consumer(&self.ledger);
            if let Ok(c) = s.consumer_info(&workers).await {
                f.pending = c.num_pending;
                f.in_flight = c.num_ack_pending as u64;
                f.redelivered = c.num_redelivered as u64;
            }
            let writer = protocol::writer_consumer(&self.ledger, run);
            if let Ok(c) = s.consumer_info(&writer).await {
                f.results_waiting = c.num_pending + c.num_ack_pending as u64;
            }
            let progress = protocol::progress_stream(&self.ledger);
            if let Ok(p) = self.js.get_stream(&progress).await {
                let filter = protocol::progress_filter(&self.ledger);
                let mut subjects = Vec::new();
                if let Ok(info) = p.info_with_subjects(&filter).await {
                    let mut info = Box::pin(info);
                    while let Some(Ok((subject, _))) = info.next().await {
                        subjects.push(subject);
                    }
                }
                subjects.sort();
                for subject in subjects.into_iter().take(MAX_WORKERS_SHOWN) {
                    if let Ok(m) = p.get_last_raw_message_by_subject(&subject).await {
                        f.progress
                            .push((m.payload.to_vec(), m.time.unix_timestamp()));
                    }
                }
            }
            Ok(f)
        })
    }

    /// Waits until everything sent so far reached the server.
    pub fn flush(&self) {
        let _ = self.rt.block_on(self.client.flush());
    }
}

/// `op` again while it times out, for at most [`PUBLISH_RETRY`]: a clustered server placing a
/// stream's copies, or choosing a new leader, can take longer than one request's wait.
async fn patiently<T, E, F, Fut>(mut op: F) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let start = std::time::Instant::now();
    loop {
        match op().await {
            Err(e) if e.to_string().contains("timed out") && start.elapsed() < PUBLISH_RETRY => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            done => return done,
        }
    }
}

/// Whether `e` says the stream asked for does not exist.
fn not_found(e: &jetstream::context::GetStreamError) -> bool {
    matches!(
        e.kind(),
        jetstream::context::GetStreamErrorKind::JetStream(j)
            if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
    )
}

/// A get-or-create (`made`) that survives two processes starting at once: both find the
/// stream or consumer missing and both create it, and the server refuses the later create (a
/// stream's as subjects overlapping an existing stream). When `made` fails, a `lookup` that
/// finds it now wins; else `made`'s error stands. A worker started beside its writer, or a
/// fleet's workers started together, lost this race about one time in ten and exited.
async fn raced<T, E, LE, Fut>(
    made: impl std::future::Future<Output = Result<T, E>>,
    lookup: impl FnOnce() -> Fut,
) -> Result<T, E>
where
    Fut: std::future::Future<Output = Result<T, LE>>,
{
    match made.await {
        Ok(t) => Ok(t),
        Err(e) => lookup().await.map_err(|_| e),
    }
}

/// One line for a failed connection: a refusal of the credentials says so (and where they
/// come from); anything else is an unreachable server.
fn connect_error(url: &str, e: &async_nats::ConnectError) -> String {
    use async_nats::ConnectErrorKind as K;
    match e.kind() {
        K::AuthorizationViolation | K::Authentication => format!(
            "the NATS server at {url} refused the credentials ({}): check the user and password in the dispatch URL or the [dispatch] credentials file",
            one_line(&e.to_string())
        ),
        _ => format!(
            "cannot reach the NATS server at {url}: {}",
            one_line(&e.to_string())
        ),
    }
}

/// A dispatch URL, or a comma-separated list of a cluster's servers, without its user and
/// password (which a message or the record may show), and the user and password it carried.
/// A server that is not `nats://` or `tls://`, an empty item, or servers that carry different
/// users or passwords are refused.
pub fn split_userinfo(raw: &str) -> Result<(String, Option<(String, String)>), String> {
    let mut urls = Vec::new();
    let mut user: Option<Option<(String, String)>> = None;
    for one in raw.split(',') {
        let one = one.trim();
        if one.is_empty() {
            return Err(format!(
                "the dispatch URL {:?} has an empty server between its commas",
                redacted(raw)
            ));
        }
        let (url, u) = split_one(one)?;
        if user.as_ref().is_some_and(|seen| *seen != u) {
            return Err(format!(
                "the servers of the dispatch URL {:?} carry different users or passwords: give every server the same, or none",
                redacted(raw)
            ));
        }
        urls.push(url);
        user = Some(u);
    }
    Ok((urls.join(","), user.flatten()))
}

/// [`split_userinfo`] of one server.
fn split_one(raw: &str) -> Result<(String, Option<(String, String)>), String> {
    let shown = redacted(raw);
    if !(raw.starts_with("nats://") || raw.starts_with("tls://")) {
        return Err(format!(
            "the dispatch URL {shown:?} is not nats://HOST:PORT or tls://HOST:PORT"
        ));
    }
    let Some((scheme, rest)) = raw.split_once("://") else {
        return Err(format!("the dispatch URL {shown:?} has no scheme"));
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return Ok((raw.to_string(), None));
    };
    let decode = |v: &str| {
        percent_decoded(v).ok_or_else(|| {
            format!(
                "the user or password of the dispatch URL {shown:?} is not percent-encoded UTF-8"
            )
        })
    };
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    Ok((
        format!("{scheme}://{host}"),
        Some((decode(user)?, decode(password)?)),
    ))
}

/// `v` with its `%XX` escapes decoded; `None` when an escape is cut short or the bytes are not
/// UTF-8.
fn percent_decoded(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `raw` (one server or a comma-separated list) with each password replaced by `***`, for
/// messages and the record.
pub fn redacted(raw: &str) -> String {
    raw.split(',')
        .map(redacted_one)
        .collect::<Vec<_>>()
        .join(",")
}

/// [`redacted`] of one server.
fn redacted_one(raw: &str) -> String {
    let Some((scheme, rest)) = raw.split_once("://") else {
        return raw.to_string();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}://{user}:***@{host}")
        }
        None => raw.to_string(),
    }
}

/// `s` on one line.
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::raced;

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_create_another_process_won_is_found_by_the_second_lookup() {
        let made = async { Err::<u8, _>("subjects overlap with an existing stream") };
        assert_eq!(run(raced(made, || async { Ok::<_, ()>(7) })), Ok(7));
    }

    #[test]
    fn a_create_that_failed_for_another_reason_keeps_its_error() {
        let made = async { Err::<u8, _>("insufficient resources") };
        let found = run(raced(made, || async { Err::<u8, _>("stream not found") }));
        assert_eq!(found, Err("insufficient resources"));
        let made = async { Ok::<u8, &str>(3) };
        assert_eq!(run(raced(made, || async { Ok::<_, ()>(9) })), Ok(3));
    }
}
