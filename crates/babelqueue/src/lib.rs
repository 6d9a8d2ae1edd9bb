//! BabelQueue for Rust.
//!
//! One frozen JSON envelope, `{job, trace_id, data, meta, attempts}`, that every BabelQueue SDK
//! produces and consumes (PHP/Laravel, Symfony, Go, Python, Java, .NET, Node), routed by URN
//! instead of a class name. This crate re-exports the runtime ([`babelqueue_core`]) and the codec
//! ([`envelope`]), and picks a transport from a broker URL with [`connect`]; each broker's
//! transport is an optional feature.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue::Error> {
//! use babelqueue::{App, Consume, Context, HandlerError};
//!
//! let transport = babelqueue::connect("memory://").await?;
//! let app = App::builder_arc(transport)
//!     .queue("orders")
//!     .handle("urn:babel:orders:created", |ctx: Context| async move {
//!         println!("order {}", ctx.data());
//!         Ok::<(), HandlerError>(())
//!     })
//!     .build()?;
//! app.publish("urn:babel:orders:created", &serde_json::json!({"order_id": 1042})).await?;
//! app.consume(Consume::new().max_messages(1).handle_signals(false)).await?;
//! # Ok(()) }
//! ```
//!
//! # Feature flags
//!
//! | feature | scheme(s) | crate |
//! |---|---|---|
//! | (always) | `memory://` | `babelqueue-core` |
//! | `redis` | `redis://`, `rediss://`, `redis+sentinel://`, `rediss+sentinel://`, `redis+cluster://`, `rediss+cluster://` | `babelqueue-transport-redis` |
//! | `amqp` | `amqp://`, `amqps://` | `babelqueue-transport-amqp` |
//! | `sqs` | `sqs://` | `babelqueue-transport-sqs` |
//! | `asb` | `sb://`, `servicebus://`, `azureservicebus://` | `babelqueue-transport-asb` |
//! | `pulsar` | `pulsar://`, `pulsar+ssl://` | `babelqueue-transport-pulsar` |
//! | `kafka` | `kafka://` | `babelqueue-transport-kafka` |
//! | `artemis` | `artemis://`, `artemis+ssl://` | `babelqueue-transport-artemis` |
//! | `nats` | `nats://` | `babelqueue-transport-nats` (JetStream) |
//! | `full` | all of the above | |
//! | `otel` | (any) | `babelqueue-otel`: `traceparent` propagation, spans, metrics (`babelqueue::otel`) |
//! | `otel-tracing` | (any) | `otel`, plus `babelqueue::otel::TracingParent`: the runtime's `babelqueue.handle` span joins the message's trace under tracing-opentelemetry |
//! | `prometheus` | (any) | `babelqueue-prometheus`: worker metrics for Prometheus, `/metrics`, queue-lag gauges (`babelqueue::prometheus`) |
//! | `outbox` | (any) | `babelqueue-outbox`: the transactional outbox and its relay (`babelqueue::outbox`) |
//! | `postgres` | (any) | `babelqueue-postgres`: PostgreSQL outbox and idempotency stores (`babelqueue::postgres`) |
//! | `gdpr` | (any) | `babelqueue-gdpr`: `x-gdpr-sensitive` field encryption (`babelqueue::gdpr`) |
//!
//! On docs.rs every feature is on, and each feature-gated item says which feature it needs.

// docs.rs builds with `--cfg docsrs` on nightly: label the feature-gated items.
#![cfg_attr(docsrs, feature(doc_cfg))]

use std::sync::Arc;

pub use babelqueue_core::*;

/// GDPR field encryption: [`protect`](babelqueue_gdpr::protect) and
/// [`unprotect`](babelqueue_gdpr::unprotect) of the `x-gdpr-sensitive` leaves of a message.
#[cfg(feature = "gdpr")]
#[cfg_attr(docsrs, doc(cfg(feature = "gdpr")))]
pub use babelqueue_gdpr as gdpr;
/// OpenTelemetry: W3C `traceparent` across broker hops, PRODUCER/CONSUMER spans, metrics.
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub use babelqueue_otel as otel;
/// The transactional outbox: [`Outbox`](babelqueue_outbox::Outbox) and
/// [`OutboxRelay`](babelqueue_outbox::OutboxRelay).
#[cfg(feature = "outbox")]
#[cfg_attr(docsrs, doc(cfg(feature = "outbox")))]
pub use babelqueue_outbox as outbox;
/// The PostgreSQL outbox store and idempotency store.
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use babelqueue_postgres as postgres;
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub use babelqueue_prometheus as prometheus;
/// The RabbitMQ (AMQP 0-9-1) transport (`amqp://`, `amqps://`).
#[cfg(feature = "amqp")]
#[cfg_attr(docsrs, doc(cfg(feature = "amqp")))]
pub use babelqueue_transport_amqp as amqp;
/// The ActiveMQ Artemis transport (`artemis://`, `artemis+ssl://`).
#[cfg(feature = "artemis")]
#[cfg_attr(docsrs, doc(cfg(feature = "artemis")))]
pub use babelqueue_transport_artemis as artemis;
/// The Azure Service Bus transport (`sb://`, `servicebus://`, `azureservicebus://`).
#[cfg(feature = "asb")]
#[cfg_attr(docsrs, doc(cfg(feature = "asb")))]
pub use babelqueue_transport_asb as asb;
/// The Apache Kafka transport (`kafka://`).
#[cfg(feature = "kafka")]
#[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
pub use babelqueue_transport_kafka as kafka;
/// The NATS JetStream transport (`nats://`).
#[cfg(feature = "nats")]
#[cfg_attr(docsrs, doc(cfg(feature = "nats")))]
pub use babelqueue_transport_nats as nats;
/// The Apache Pulsar transport (`pulsar://`, `pulsar+ssl://`).
#[cfg(feature = "pulsar")]
#[cfg_attr(docsrs, doc(cfg(feature = "pulsar")))]
pub use babelqueue_transport_pulsar as pulsar;
/// The Redis transport (`redis://`, `rediss://`; Sentinel `redis+sentinel://`, Cluster
/// `redis+cluster://`, and their `rediss+` forms).
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use babelqueue_transport_redis as redis;
/// The Amazon SQS transport (`sqs://`).
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
pub use babelqueue_transport_sqs as sqs;

/// One row of the URL scheme table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheme {
    /// The scheme, as written before `://`.
    pub scheme: &'static str,
    /// The feature of this crate that carries it (`""`: always built in).
    pub feature: &'static str,
    /// The transport crate.
    pub krate: &'static str,
}

/// Every scheme BabelQueue knows, and which feature carries it.
pub const SCHEMES: &[Scheme] = &[
    Scheme {
        scheme: "memory",
        feature: "",
        krate: "babelqueue-core",
    },
    Scheme {
        scheme: "redis",
        feature: "redis",
        krate: "babelqueue-transport-redis",
    },
    Scheme {
        scheme: "rediss",
        feature: "redis",
        krate: "babelqueue-transport-redis",
    },
    Scheme {
        scheme: "redis+sentinel",
        feature: "redis",
        krate: "babelqueue-transport-redis",
    },
    Scheme {
        scheme: "rediss+sentinel",
        feature: "redis",
        krate: "babelqueue-transport-redis",
    },
    Scheme {
        scheme: "redis+cluster",
        feature: "redis",
        krate: "babelqueue-transport-redis",
    },
    Scheme {
        scheme: "rediss+cluster",
        feature: "redis",
        krate: "babelqueue-transport-redis",
    },
    Scheme {
        scheme: "amqp",
        feature: "amqp",
        krate: "babelqueue-transport-amqp",
    },
    Scheme {
        scheme: "amqps",
        feature: "amqp",
        krate: "babelqueue-transport-amqp",
    },
    Scheme {
        scheme: "sqs",
        feature: "sqs",
        krate: "babelqueue-transport-sqs",
    },
    Scheme {
        scheme: "sb",
        feature: "asb",
        krate: "babelqueue-transport-asb",
    },
    Scheme {
        scheme: "servicebus",
        feature: "asb",
        krate: "babelqueue-transport-asb",
    },
    Scheme {
        scheme: "azureservicebus",
        feature: "asb",
        krate: "babelqueue-transport-asb",
    },
    Scheme {
        scheme: "pulsar",
        feature: "pulsar",
        krate: "babelqueue-transport-pulsar",
    },
    Scheme {
        scheme: "pulsar+ssl",
        feature: "pulsar",
        krate: "babelqueue-transport-pulsar",
    },
    Scheme {
        scheme: "kafka",
        feature: "kafka",
        krate: "babelqueue-transport-kafka",
    },
    Scheme {
        scheme: "artemis",
        feature: "artemis",
        krate: "babelqueue-transport-artemis",
    },
    Scheme {
        scheme: "artemis+ssl",
        feature: "artemis",
        krate: "babelqueue-transport-artemis",
    },
    Scheme {
        scheme: "nats",
        feature: "nats",
        krate: "babelqueue-transport-nats",
    },
];

/// The scheme of a broker URL: the text before `://`, or the whole string when there is none
/// (so `""` is `memory`). Case-sensitive.
pub fn scheme_of(url: &str) -> &str {
    url.split_once("://").map_or(url, |(scheme, _)| scheme)
}

/// The scheme-looking start of a text without `://` (`amqp` in `amqp:/guest:pw@host`): the
/// letters, digits, `+`, `-` and `.` before its first `:`, or `""` when it has none.
fn scheme_prefix(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        .unwrap_or(text.len());
    let prefix = &text[..end];
    let starts_with_letter = prefix.starts_with(|c: char| c.is_ascii_alphabetic());
    if starts_with_letter && text[end..].starts_with(':') {
        prefix
    } else {
        ""
    }
}

/// The error for a URL without `://`: it names the scheme-looking prefix, never the rest of the
/// text (a typo such as `amqp:/guest:pw@host` still holds a password).
fn no_separator(url: &str) -> Error {
    let prefix = scheme_prefix(url);
    let hint = if prefix.is_empty() {
        "the broker URL has no scheme and no \"://\" (expected, for example, \
         redis://localhost:6379); it is not shown, as it may hold a password"
            .to_owned()
    } else {
        format!(
            "the broker URL has no \"://\" after {prefix:?} (expected {prefix}://…); the rest \
             of it is not shown, as it may hold a password"
        )
    };
    Error::UnsupportedScheme {
        scheme: prefix.to_owned(),
        hint,
    }
}

/// A transport's connect error, with the broker's host named when it refused the credentials
/// and the transport's own message did not say where.
#[allow(dead_code)] // unused in a build without any transport feature
fn connect_error(url: &str, error: impl Into<TransportError>) -> Error {
    let error = error.into();
    if error.kind() != TransportErrorKind::Auth {
        return Error::Transport(error);
    }
    match redact::host(url) {
        Some(host) if !error.to_string().contains(&host) => Error::Transport(
            TransportError::auth(format!(
                "the {} broker at {host} refused the credentials",
                scheme_of(url)
            ))
            .with_source(error),
        ),
        _ => Error::Transport(error),
    }
}

/// Builds the transport a broker URL names.
///
/// An unknown scheme, or one whose transport is not compiled into this build, is an
/// [`Error::UnsupportedScheme`] that says which feature to enable. A URL without `://` is one
/// too; its message names only the scheme-looking prefix, never the rest (which may hold a
/// password). Credentials the broker refuses are a [`TransportErrorKind::Auth`] error that
/// names the host. No error message shows a password: URLs are [`redact`]ed.
pub async fn connect(url: &str) -> Result<Arc<dyn Transport>> {
    if !url.contains("://") {
        return match url {
            "" | "memory" => Ok(Arc::new(MemoryTransport::new())),
            _ => Err(no_separator(url)),
        };
    }
    let scheme = scheme_of(url);
    match scheme {
        "memory" => Ok(Arc::new(MemoryTransport::new())),
        #[cfg(feature = "redis")]
        "redis" | "rediss" | "redis+sentinel" | "rediss+sentinel" | "redis+cluster"
        | "rediss+cluster" => Ok(Arc::new(
            babelqueue_transport_redis::RedisTransport::connect(url)
                .await
                .map_err(|e| connect_error(url, e))?,
        )),
        #[cfg(feature = "kafka")]
        "kafka" => Ok(Arc::new(
            babelqueue_transport_kafka::KafkaTransport::connect(url)
                .await
                .map_err(|e| connect_error(url, e))?,
        )),
        #[cfg(feature = "artemis")]
        "artemis" | "artemis+ssl" => Ok(Arc::new(
            babelqueue_transport_artemis::ArtemisTransport::connect(url)
                .await
                .map_err(|e| connect_error(url, e))?,
        )),
        #[cfg(feature = "pulsar")]
        "pulsar" | "pulsar+ssl" => Ok(Arc::new(
            babelqueue_transport_pulsar::PulsarTransport::connect(url)
                .await
                .map_err(|e| connect_error(url, e))?,
        )),
        #[cfg(feature = "asb")]
        "sb" | "servicebus" | "azureservicebus" => Ok(Arc::new(
            babelqueue_transport_asb::AsbTransport::connect(url)
                .await
                .map_err(|e| connect_error(url, e))?,
        )),
        #[cfg(feature = "amqp")]
        "amqp" | "amqps" => Ok(Arc::new(
            babelqueue_transport_amqp::AmqpTransport::connect(url)
                .await
                .map_err(|e| connect_error(url, e))?,
        )),
        #[cfg(feature = "sqs")]
        "sqs" => Ok(Arc::new(
            babelqueue_transport_sqs::SqsTransport::connect(url)
                .await
                .map_err(|e| connect_error(url, e))?,
        )),
        #[cfg(feature = "nats")]
        "nats" => Ok(Arc::new(
            babelqueue_transport_nats::NatsTransport::connect(url)
                .await
                .map_err(|e| connect_error(url, e))?,
        )),
        _ => match SCHEMES.iter().find(|s| s.scheme == scheme) {
            Some(row) => Err(Error::UnsupportedScheme {
                scheme: scheme.to_owned(),
                hint: format!(
                    "this build does not include the {} transport; enable the `{}` feature of the `babelqueue` crate",
                    row.krate, row.feature
                ),
            }),
            None => Err(Error::UnsupportedScheme {
                scheme: redact::redact(scheme),
                hint: format!(
                    "use one of {} (or build an App over your own Transport)",
                    SCHEMES
                        .iter()
                        .map(|s| format!("{}://", s.scheme))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_and_the_empty_scheme_connect() {
        assert_eq!(connect("memory://").await.unwrap().name(), "memory");
        assert_eq!(connect("").await.unwrap().name(), "memory");
    }

    #[tokio::test]
    async fn unknown_schemes_name_the_accepted_ones() {
        let err = connect("mqtt://localhost").await.unwrap_err().to_string();
        assert!(
            err.contains("\"mqtt\"") && err.contains("redis://") && err.contains("artemis+ssl://"),
            "{err}"
        );
        let err = connect("Redis://localhost").await.unwrap_err().to_string();
        assert!(
            err.contains("\"Redis\""),
            "schemes are case-sensitive: {err}"
        );
    }

    #[cfg(feature = "kafka")]
    #[tokio::test]
    async fn kafka_urls_connect_lazily_and_bad_options_are_config_errors() {
        let transport = connect("kafka://127.0.0.1:9092?retry_tiers_ms=default")
            .await
            .unwrap();
        assert_eq!(transport.name(), "kafka");
        assert!(matches!(
            transport.capabilities().redelivery_mode(),
            babelqueue_core::Redelivery::Native(_)
        ));
        let err = connect("kafka://127.0.0.1:9092?retry_tiers_ms=5000,1000")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    }

    #[cfg(feature = "artemis")]
    #[tokio::test]
    async fn artemis_urls_reach_the_artemis_transport() {
        for url in ["artemis://h?credit=0", "artemis+ssl://h?nope=1"] {
            let err = connect(url).await.unwrap_err();
            assert!(
                matches!(&err, Error::Transport(e) if e.kind() == TransportErrorKind::Config),
                "{url}: {err}"
            );
            assert_eq!(err.kind(), ErrorKind::Config, "{url}: {err}");
        }
    }

    #[cfg(feature = "pulsar")]
    #[tokio::test]
    async fn pulsar_urls_reach_the_pulsar_transport() {
        let err = connect("pulsar://").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(err.to_string().contains("names no host"), "{err}");
    }

    #[cfg(feature = "asb")]
    #[tokio::test]
    async fn service_bus_urls_reach_the_asb_transport() {
        for scheme in ["sb", "servicebus", "azureservicebus"] {
            let err = connect(&format!("{scheme}://")).await.unwrap_err();
            assert!(err.to_string().contains("Azure Service Bus"), "{err}");
        }
    }

    #[cfg(feature = "sqs")]
    #[tokio::test]
    async fn sqs_urls_connect_without_touching_the_network() {
        let transport = connect("sqs://us-east-1?endpoint=http://127.0.0.1:9&max_messages=4")
            .await
            .unwrap();
        assert_eq!(transport.name(), "sqs");
        let capabilities = transport.capabilities();
        assert!(matches!(
            capabilities.redelivery_mode(),
            babelqueue_core::Redelivery::Native(_)
        ));
        assert!(capabilities.native_settler().is_some());
        let err = connect("sqs://us-east-1?bogus=1").await.unwrap_err();
        assert!(err.to_string().contains("unknown option"), "{err}");
    }

    #[cfg(feature = "nats")]
    #[tokio::test]
    async fn nats_urls_reach_the_nats_transport() {
        for url in ["nats://", "nats://u:hunter2@h?nope=1"] {
            let err = connect(url).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Config, "{url}: {err}");
            assert!(!format!("{err} {err:?}").contains("hunter2"), "{err}");
        }
    }

    /// `Display` and `Debug` of `err`, for checks that a secret is in neither.
    fn shown(err: &Error) -> String {
        format!("{err}\n{err:?}")
    }

    #[tokio::test]
    async fn a_url_without_the_separator_names_only_its_scheme() {
        for (url, scheme) in [
            ("amqp:/guest:hunter2@127.0.0.1", "amqp"),
            ("amqp:guest:hunter2@127.0.0.1:5672", "amqp"),
            ("redis:hunter2@127.0.0.1", "redis"),
            ("amqps:\\\\guest:hunter2@h", "amqps"),
            ("guest:hunter2@127.0.0.1", "guest"),
            ("hunter2@127.0.0.1", ""),
            ("hunter2", ""),
            ("//guest:hunter2@h", ""),
        ] {
            let err = connect(url).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Config, "{url}: {err}");
            assert!(
                matches!(&err, Error::UnsupportedScheme { scheme: s, .. } if s == scheme),
                "{url}: {err:?}"
            );
            let text = shown(&err);
            assert!(!text.contains("hunter2"), "{url}: {text}");
            assert!(text.contains("://"), "says what is missing: {text}");
            assert!(
                !text.contains("127.0.0.1"),
                "{url}: nothing past the scheme: {text}"
            );
        }
    }

    #[tokio::test]
    async fn an_unknown_scheme_with_credentials_shows_no_password() {
        let err = connect("mqtt://guest:hunter2@127.0.0.1").await.unwrap_err();
        assert!(!shown(&err).contains("hunter2"), "{err:?}");
        let err = connect("guest:hunter2@h://x").await.unwrap_err();
        assert!(!shown(&err).contains("hunter2"), "{err:?}");
    }

    #[test]
    fn refused_credentials_name_the_host() {
        let refused = TransportError::auth("the broker said no");
        let err = connect_error("amqp://guest:hunter2@127.0.0.1:5672/%2f", refused);
        assert_eq!(err.kind(), ErrorKind::Transport);
        assert!(
            matches!(&err, Error::Transport(e) if e.kind() == TransportErrorKind::Auth),
            "{err:?}"
        );
        let text = shown(&err);
        assert!(
            text.contains("127.0.0.1:5672") && text.contains("refused the credentials"),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
        // A message that already names the host is left as it is.
        let named = TransportError::auth("Redis at 127.0.0.1:6379 refused the credentials");
        let err = connect_error("redis://u:pw@127.0.0.1:6379", named);
        assert_eq!(
            err.to_string(),
            "Redis at 127.0.0.1:6379 refused the credentials"
        );
        // Other kinds pass through.
        let down = TransportError::connection("refused");
        assert_eq!(connect_error("redis://h", down).to_string(), "refused");
    }

    #[test]
    fn scheme_parsing() {
        assert_eq!(scheme_of("pulsar+ssl://h:6651"), "pulsar+ssl");
        assert_eq!(scheme_of("memory"), "memory");
        assert_eq!(scheme_of(""), "");
    }
}

/// The repository README: its Rust blocks (the quick start) are compiled as doc tests of this
/// crate (`cargo test --doc -p babelqueue`), so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
