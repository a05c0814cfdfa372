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
    /// `nats://HOST:PORT` (or `tls://HOST:PORT`).
    pub url: String,
    /// A `.creds` file (JWT and NKey seed) the server asks for.
    pub credentials: Option<PathBuf>,
    /// Require TLS.
    pub tls: bool,
    /// A PEM file of the certificate authorities to trust for the server.
    pub tls_ca: Option<PathBuf>,
    /// The client's name on the server (shown by its monitoring).
    pub name: String,
}

/// One connection to the server, for one ledger's stream.
pub struct Connection {
    rt: tokio::runtime::Runtime,
    client: async_nats::Client,
    js: jetstream::Context,
    ledger: String,
    url: String,
}

/// A message pulled from a consumer, with what acknowledges it.
pub struct Pulled {
    /// Its bytes (untrusted until parsed).
    pub payload: Vec<u8>,
    /// How many times the server delivered it (1 the first time).
    pub delivered: i64,
    message: jetstream::Message,
}

/// How long connecting may take before the server counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Connection {
    /// Connects to the server for `ledger`'s stream. An unreachable server, bad credentials or
    /// a bad URL is one line.
    pub fn connect(settings: &Settings, ledger: &str) -> Result<Connection, String> {
        let url = settings.url.trim().to_string();
        if !(url.starts_with("nats://") || url.starts_with("tls://")) {
            return Err(format!(
                "the dispatch URL {url:?} is not nats://HOST:PORT or tls://HOST:PORT"
            ));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the NATS client's runtime: {e}"))?;
        let client = rt.block_on(async {
            let mut o = async_nats::ConnectOptions::new()
                .connection_timeout(CONNECT_TIMEOUT)
                .name(&settings.name)
                .require_tls(settings.tls || url.starts_with("tls://"));
            if let Some(c) = &settings.credentials {
                o = o.credentials_file(c).await.map_err(|e| {
                    format!("cannot read the NATS credentials file {}: {e}", c.display())
                })?;
            }
            if let Some(ca) = &settings.tls_ca {
                o = o.add_root_certificates(ca.clone());
            }
            tokio::time::timeout(CONNECT_TIMEOUT * 2, o.connect(url.as_str()))
                .await
                .map_err(|_| format!("cannot reach the NATS server at {url}: timed out"))?
                .map_err(|e| {
                    format!(
                        "cannot reach the NATS server at {url}: {}",
                        one_line(&e.to_string())
                    )
                })
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
            description: Some(format!(
                "git forum: the tasks and results of ledger {}",
                self.ledger
            )),
            ..Default::default()
        };
        let url = &self.url;
        self.rt.block_on(async {
            let mut s = self
                .js
                .get_or_create_stream(config)
                .await
                .map_err(|e| format!("cannot open the stream {name} on {url}: {}", one_line(&e.to_string())))?;
            let info = s
                .info()
                .await
                .map_err(|e| format!("cannot read the stream {name} on {url}: {}", one_line(&e.to_string())))?;
            if info.config.subjects != [subjects.clone()] {
                return Err(format!(
                    "the stream {name} on {url} is not ledger {}'s: its subjects are {:?}, not [{subjects:?}]; remove it or dispatch another ledger",
                    self.ledger, info.config.subjects
                ));
            }
            Ok(())
        })
    }

    /// Publishes `bytes` on `subject` and waits for the server to store it.
    pub fn publish(&self, subject: &str, bytes: Vec<u8>) -> Result<(), String> {
        let url = &self.url;
        self.rt.block_on(async {
            let ack = self
                .js
                .publish(subject.to_string(), bytes.into())
                .await
                .map_err(|e| format!("cannot publish on {url}: {}", one_line(&e.to_string())))?;
            ack.await.map(|_| ()).map_err(|e| {
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
        let stream_name = protocol::stream_name(&self.ledger);
        let url = &self.url;
        self.rt.block_on(async {
            let s = self.js.get_stream(&stream_name).await.map_err(|e| {
                format!(
                    "cannot open the stream {stream_name} on {url}: {}",
                    one_line(&e.to_string())
                )
            })?;
            s.get_or_create_consumer(
                name,
                consumer::pull::Config {
                    durable_name: Some(name.to_string()),
                    filter_subject: filter.to_string(),
                    ack_policy: consumer::AckPolicy::Explicit,
                    deliver_policy: consumer::DeliverPolicy::All,
                    ack_wait,
                    max_deliver: -1,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| {
                format!(
                    "cannot open the consumer {name} on {url}: {}",
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
                    let delivered = message.info().map(|i| i.delivered).unwrap_or(1);
                    Ok(Some(Pulled {
                        payload: message.payload.to_vec(),
                        delivered,
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

    /// Waits until everything sent so far reached the server.
    pub fn flush(&self) {
        let _ = self.rt.block_on(self.client.flush());
    }
}

/// `s` on one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
