//! The crate's error type and its mapping onto the runtime's [`TransportError`](babelqueue_core::TransportError).

use std::time::Duration;

use babelqueue_core::{BrokerError, TransportErrorKind};
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};

/// Everything the Kafka transport and the re-injector can fail with.
///
/// `Display` is for people and logs; code branches on [`KafkaError::kind`] or
/// [`KafkaError::is_transient`], never on the text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KafkaError {
    /// The configuration cannot work (a bad URL, a bad tier list, a client option librdkafka
    /// refuses).
    #[error("invalid Kafka configuration: {0}")]
    Config(String),
    /// librdkafka reported an error while `operation` ran.
    #[error("Kafka {operation} failed: {source}")]
    Client {
        /// What was being done (`poll`, `commit`, `create the consumer` …).
        operation: &'static str,
        /// The librdkafka error.
        #[source]
        source: RdError,
    },
    /// The broker refused a confirmed write, or the producer gave up on it.
    #[error("Kafka delivery to {topic:?} failed: {source}")]
    Delivery {
        /// The topic written to.
        topic: String,
        /// The delivery report's error.
        #[source]
        source: RdError,
    },
    /// A write made with `acks=all` was not confirmed while too few replicas of its partition
    /// were in sync: the broker refused it (`NOT_ENOUGH_REPLICAS`, or
    /// `NOT_ENOUGH_REPLICAS_AFTER_APPEND` when the leader had appended it), or it timed out
    /// while the topic's metadata showed a partition with fewer replicas in sync than it has
    /// (librdkafka retries the refusal until the delivery timeout). Transient:
    /// it succeeds again once enough replicas are back in sync (or with a lower
    /// `min.insync.replicas`, which weakens what a confirmed write survives).
    #[error(
        "Kafka delivery to {topic:?} was not confirmed: a write with acks=all needs the topic's \
         min.insync.replicas replicas in sync ({detail}); publish again once the replicas are \
         back"
    )]
    NotEnoughReplicas {
        /// The topic written to.
        topic: String,
        /// The broker's refusal, or the partitions short of replicas.
        detail: String,
    },
    /// No delivery report arrived within the delivery timeout: the write is unconfirmed (it may
    /// still land later, a duplicate that at-least-once processing absorbs).
    #[error("Kafka delivery to {topic:?} was not confirmed within {timeout:?}")]
    DeliveryTimeout {
        /// The topic written to.
        topic: String,
        /// The delivery timeout.
        timeout: Duration,
    },
    /// Seeking a partition back to an unsettled record failed; a later commit on that partition
    /// may skip the record.
    #[error("Kafka seek back to {topic}[{partition}]@{offset} failed: {reason}")]
    Seek {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
        /// Why.
        reason: String,
    },
    /// A retry or a delayed publish needs retry tiers and none are configured.
    #[error(
        "Kafka {operation} needs retry tiers: configure them (e.g. DEFAULT_RETRY_TIERS_MS, or \
         `?retry_tiers_ms=default` in the URL)"
    )]
    NoRetryTiers {
        /// `retry` or `delayed publish`.
        operation: &'static str,
    },
    /// A delayed publish asked for more than the largest tier (nothing is clamped).
    #[error("requested delay {requested_ms} ms exceeds the largest retry tier ({largest_ms} ms)")]
    DelayTooLong {
        /// The requested delay.
        requested_ms: u128,
        /// The largest tier.
        largest_ms: u64,
    },
    /// A delayed publish asked for a delay that is not a whole number of milliseconds.
    #[error("a Kafka delay must be a whole number of milliseconds, got {0:?}")]
    DelayNotWholeMillis(Duration),
    /// The broker refused the credentials (a SASL handshake that failed: a wrong user or
    /// password, a mechanism the listener does not offer). Not transient: polling again does
    /// not heal it, so [`App::consume`](babelqueue_core::App::consume) stops with it.
    #[error("the Kafka broker at {brokers} refused the credentials: {reason}")]
    Auth {
        /// The bootstrap servers (never the credentials).
        brokers: String,
        /// librdkafka's account of it, secrets masked.
        reason: String,
    },
    /// No bootstrap broker could be reached before a confirmed write was answered: librdkafka
    /// reported every broker down (a refused connection, a name that does not resolve) and
    /// none has answered since the client was created. Transient. Once a broker has answered,
    /// an outage is left to librdkafka's reconnects and the delivery timeout instead.
    #[error("cannot reach the Kafka broker at {brokers}: {reason}")]
    Unreachable {
        /// The bootstrap servers (never the credentials).
        brokers: String,
        /// librdkafka's account of the last failed connection, secrets masked.
        reason: String,
    },
    /// A browse (`babelqueue dlq list`) did not reach the end of a partition it captured at its
    /// start: no record came for a while (a broker that is slow or down). Nothing was
    /// consumed or committed. Transient.
    #[error(
        "Kafka browse of {topic}[{partition}] stopped at offset {reached} short of {end}: {reason}"
    )]
    BrowseIncomplete {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The offset the browse had reached.
        reached: i64,
        /// The high watermark captured at the start.
        end: i64,
        /// Why it stopped.
        reason: String,
    },
    /// A simulated broker failure (the `fake` client).
    #[error("injected Kafka failure: {message}")]
    Injected {
        /// How the failure should be classified.
        kind: TransportErrorKind,
        /// What failed.
        message: String,
    },
}

impl KafkaError {
    /// The runtime's class of this error.
    pub fn kind(&self) -> TransportErrorKind {
        match self {
            KafkaError::Config(_) => TransportErrorKind::Config,
            KafkaError::Client { source, .. } | KafkaError::Delivery { source, .. } => {
                classify(source)
            }
            KafkaError::NotEnoughReplicas { .. } => TransportErrorKind::Connection,
            KafkaError::DeliveryTimeout { .. } | KafkaError::BrowseIncomplete { .. } => {
                TransportErrorKind::Timeout
            }
            KafkaError::Seek { .. } => TransportErrorKind::Other,
            KafkaError::Auth { .. } => TransportErrorKind::Auth,
            KafkaError::Unreachable { .. } => TransportErrorKind::Connection,
            KafkaError::NoRetryTiers { .. } => TransportErrorKind::Config,
            KafkaError::DelayTooLong { .. } | KafkaError::DelayNotWholeMillis(_) => {
                TransportErrorKind::Unsupported
            }
            KafkaError::Injected { kind, .. } => *kind,
        }
    }

    /// Whether the same call may succeed later (a broker that is down, slow or rebalancing).
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            TransportErrorKind::Connection | TransportErrorKind::Timeout
        )
    }

    /// The error of a write to `topic` that librdkafka reported failed: a refusal for too few
    /// in-sync replicas is [`KafkaError::NotEnoughReplicas`], anything else
    /// [`KafkaError::Delivery`].
    pub(crate) fn delivery(topic: impl Into<String>, source: RdError) -> KafkaError {
        let topic = topic.into();
        match source.rdkafka_error_code() {
            Some(RDKafkaErrorCode::NotEnoughReplicas)
            | Some(RDKafkaErrorCode::NotEnoughReplicasAfterAppend) => {
                KafkaError::NotEnoughReplicas {
                    topic,
                    detail: format!("the broker answered: {source}"),
                }
            }
            _ => KafkaError::Delivery { topic, source },
        }
    }

    pub(crate) fn client(operation: &'static str) -> impl FnOnce(RdError) -> KafkaError {
        move |source| KafkaError::Client { operation, source }
    }

    /// Like [`KafkaError::client`], for creating a client from a configuration: librdkafka's
    /// complaint about an option names the option and its value, so the value of a secret
    /// option, and any secret anywhere in the text, is masked before the error is kept.
    pub(crate) fn client_config(
        operation: &'static str,
        secrets: &[String],
    ) -> impl FnOnce(RdError) -> KafkaError {
        move |source| {
            let source = match source {
                RdError::ClientConfig(code, description, key, value) => {
                    let value = if crate::config::is_secret_option(&key) {
                        crate::config::MASK.to_owned()
                    } else {
                        crate::config::scrub(&value, secrets)
                    };
                    RdError::ClientConfig(
                        code,
                        crate::config::scrub(&description, secrets),
                        crate::config::scrub(&key, secrets),
                        value,
                    )
                }
                other => other,
            };
            KafkaError::Client { operation, source }
        }
    }
}

/// Whether a librdkafka error code says the broker refused the credentials.
pub(crate) fn is_auth_code(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SaslAuthenticationFailed
    )
}

/// The runtime class of a librdkafka error, from its error code (never its text).
fn classify(error: &RdError) -> TransportErrorKind {
    use RDKafkaErrorCode as C;
    match error {
        RdError::ClientConfig(..) => return TransportErrorKind::Config,
        RdError::ClientCreation(_) | RdError::Subscription(_) => {
            return TransportErrorKind::Config;
        }
        RdError::Canceled => return TransportErrorKind::Connection,
        // A fatal consumer error (e.g. fenced by another member with the same static id): the
        // consumer never recovers, polling again does not help.
        RdError::MessageConsumptionFatal(_) => return TransportErrorKind::Config,
        _ => {}
    }
    match error.rdkafka_error_code() {
        Some(code) if is_auth_code(code) => TransportErrorKind::Auth,
        // Another live consumer uses the same static member id (group_instance_id).
        Some(C::FencedInstanceId | C::UnreleasedInstanceId) => TransportErrorKind::Config,
        Some(C::MessageTimedOut | C::RequestTimedOut | C::OperationTimedOut | C::TimedOutQueue) => {
            TransportErrorKind::Timeout
        }
        Some(
            C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::Resolve
            | C::WaitingForCoordinator
            | C::NetworkException
            | C::BrokerNotAvailable
            | C::LeaderNotAvailable
            | C::NotLeaderForPartition
            | C::CoordinatorNotAvailable
            | C::NotCoordinator
            | C::CoordinatorLoadInProgress
            | C::RebalanceInProgress
            | C::QueueFull
            | C::NotEnoughReplicas
            | C::NotEnoughReplicasAfterAppend
            | C::KafkaStorageError
            | C::PreferredLeaderNotAvailable,
        ) => TransportErrorKind::Connection,
        Some(
            C::UnknownTopicOrPartition
            | C::UnknownTopic
            | C::UnknownPartition
            | C::InvalidTopic
            | C::TopicAuthorizationFailed
            | C::GroupAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::MessageSizeTooLarge
            | C::InvalidRecord
            | C::IllegalGeneration
            | C::UnknownMemberId
            | C::AssignmentLost
            | C::InvalidArgument,
        ) => TransportErrorKind::Rejected,
        _ => TransportErrorKind::Other,
    }
}

// The conversion into the runtime's `TransportError` is the contract's one blanket `From`:
// the transport's name as the message, this error as the source.
impl BrokerError for KafkaError {
    const NAME: &'static str = "kafka";
    fn transport_kind(&self) -> TransportErrorKind {
        self.kind()
    }
}

#[cfg(test)]
mod tests {
    use babelqueue_core::TransportError;

    use super::*;

    #[test]
    fn kinds_come_from_codes_not_text() {
        let timeout = KafkaError::Delivery {
            topic: "orders".into(),
            source: RdError::MessageProduction(RDKafkaErrorCode::MessageTimedOut),
        };
        assert_eq!(timeout.kind(), TransportErrorKind::Timeout);
        assert!(timeout.is_transient());
        let down = KafkaError::Client {
            operation: "poll",
            source: RdError::MessageConsumption(RDKafkaErrorCode::AllBrokersDown),
        };
        assert_eq!(down.kind(), TransportErrorKind::Connection);
        let refused = KafkaError::Delivery {
            topic: "bad topic".into(),
            source: RdError::MessageProduction(RDKafkaErrorCode::InvalidTopic),
        };
        assert_eq!(refused.kind(), TransportErrorKind::Rejected);
        assert!(!refused.is_transient());
        assert_eq!(
            KafkaError::NoRetryTiers { operation: "retry" }.kind(),
            TransportErrorKind::Config
        );
        assert_eq!(
            KafkaError::DelayTooLong {
                requested_ms: 2,
                largest_ms: 1
            }
            .kind(),
            TransportErrorKind::Unsupported
        );
    }

    #[test]
    fn too_few_in_sync_replicas_is_transient_and_names_the_setting() {
        for code in [
            RDKafkaErrorCode::NotEnoughReplicas,
            RDKafkaErrorCode::NotEnoughReplicasAfterAppend,
        ] {
            let error = KafkaError::delivery("orders", RdError::MessageProduction(code));
            assert!(
                matches!(error, KafkaError::NotEnoughReplicas { .. }),
                "{error:?}"
            );
            assert_eq!(error.kind(), TransportErrorKind::Connection);
            assert!(error.is_transient());
            let text = TransportError::from(error).to_string();
            for needle in ["min.insync.replicas", "acks=all", "not confirmed", "orders"] {
                assert!(text.contains(needle), "{needle}: {text}");
            }
        }
        let other = KafkaError::delivery(
            "orders",
            RdError::MessageProduction(RDKafkaErrorCode::InvalidTopic),
        );
        assert!(matches!(other, KafkaError::Delivery { .. }), "{other:?}");
    }

    #[test]
    fn maps_into_the_runtime_error_keeping_the_text() {
        let error: TransportError = KafkaError::DeliveryTimeout {
            topic: "orders.dlq".into(),
            timeout: Duration::from_secs(30),
        }
        .into();
        assert_eq!(error.kind(), TransportErrorKind::Timeout);
        assert!(error.is_transient());
        assert!(error.to_string().contains("orders.dlq"), "{error}");
    }

    #[test]
    fn a_converted_error_shows_its_cause_once() {
        let cause = "cause-7f3a";
        for error in [
            KafkaError::Config(cause.into()),
            KafkaError::Seek {
                topic: "orders".into(),
                partition: 0,
                offset: 7,
                reason: cause.into(),
            },
            KafkaError::Auth {
                brokers: "127.0.0.1:9092".into(),
                reason: cause.into(),
            },
            KafkaError::Unreachable {
                brokers: "127.0.0.1:9092".into(),
                reason: cause.into(),
            },
            KafkaError::Injected {
                kind: TransportErrorKind::Connection,
                message: cause.into(),
            },
            KafkaError::Client {
                operation: "poll",
                source: RdError::ClientCreation(cause.into()),
            },
        ] {
            let own = error.to_string();
            let shown = TransportError::from(error).to_string();
            assert_eq!(shown.matches(cause).count(), 1, "{shown}");
            assert_eq!(shown.matches(own.as_str()).count(), 1, "{shown}");
        }
    }
}
