//! [`NatsError`]: everything the NATS transport can fail with, and its class.

use std::error::Error as StdError;

use async_nats::jetstream::consumer::pull::BatchErrorKind;
use async_nats::jetstream::context::{CreateStreamErrorKind, GetStreamErrorKind, PublishErrorKind};
use async_nats::jetstream::stream::{ConsumerErrorKind, LastRawMessageErrorKind};
use async_nats::{ConnectError, ConnectErrorKind};
use babelqueue_transport::{BrokerError, TransportErrorKind, redact};

/// What the NATS transport can fail with. Each variant is one [`TransportErrorKind`]
/// ([`NatsError::kind`]); no message shows a password or a token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// The URL, an option, a queue name or the server's set-up (no JetStream) cannot work.
    #[error("invalid NATS transport configuration: {0}")]
    Config(String),
    /// The server refused the credentials (an authorization violation). Not transient: a
    /// consume loop stops with it.
    #[error("the NATS server at {host} refused the credentials")]
    Auth {
        /// `host:port` of the server.
        host: String,
    },
    /// The server cannot be reached, or the connection dropped.
    #[error("NATS connection: {0}")]
    Connection(String),
    /// The server did not answer in time (a publish acknowledgement, a JetStream request).
    #[error("NATS timed out: {0}")]
    Timeout(String),
    /// JetStream refused the operation (an API error, a delivery already settled).
    #[error("NATS JetStream refused: {0}")]
    Rejected(String),
    /// The operation is not possible for this message (a header NATS cannot carry, a body
    /// above the server's `max_payload`).
    #[error("{0}")]
    Unsupported(String),
    /// Anything else.
    #[error("NATS: {0}")]
    Other(String),
}

impl NatsError {
    /// The class of the error, as the runtime reads it.
    pub fn kind(&self) -> TransportErrorKind {
        match self {
            NatsError::Config(_) => TransportErrorKind::Config,
            NatsError::Auth { .. } => TransportErrorKind::Auth,
            NatsError::Connection(_) => TransportErrorKind::Connection,
            NatsError::Timeout(_) => TransportErrorKind::Timeout,
            NatsError::Rejected(_) => TransportErrorKind::Rejected,
            NatsError::Unsupported(_) => TransportErrorKind::Unsupported,
            NatsError::Other(_) => TransportErrorKind::Other,
        }
    }

    /// Whether retrying later may succeed (a connection or a timeout).
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            TransportErrorKind::Connection | TransportErrorKind::Timeout
        )
    }

    /// A failed connect to `host`; `secrets` (the password, the token) are masked in the
    /// client's message, whatever it quoted.
    pub(crate) fn connect(error: &ConnectError, host: &str, secrets: &[String]) -> NatsError {
        let mut reason = redact::redact(&error.to_string());
        for secret in secrets.iter().filter(|s| !s.is_empty()) {
            reason = reason.replace(secret.as_str(), "***");
        }
        match error.kind() {
            ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => {
                NatsError::Auth {
                    host: host.to_owned(),
                }
            }
            ConnectErrorKind::TimedOut => {
                NatsError::Timeout(format!("connecting to {host}: {reason}"))
            }
            ConnectErrorKind::ServerParse | ConnectErrorKind::Tls => {
                NatsError::Config(format!("connecting to {host}: {reason}"))
            }
            ConnectErrorKind::Dns | ConnectErrorKind::Io | ConnectErrorKind::MaxReconnects => {
                NatsError::Connection(format!("cannot reach {host}: {reason}"))
            }
        }
    }

    /// A JetStream publish (or its acknowledgement) to `subject` that failed.
    pub(crate) fn publish(
        error: &async_nats::jetstream::context::PublishError,
        subject: &str,
    ) -> NatsError {
        let what = format!("publishing to {subject:?}: {error}");
        match error.kind() {
            PublishErrorKind::TimedOut => NatsError::Timeout(what),
            PublishErrorKind::BrokenPipe => NatsError::Connection(what),
            PublishErrorKind::MaxPayloadExceeded => NatsError::Unsupported(what),
            PublishErrorKind::StreamNotFound
            | PublishErrorKind::WrongLastMessageId
            | PublishErrorKind::WrongLastSequence
            | PublishErrorKind::MaxAckPending => NatsError::Rejected(what),
            PublishErrorKind::Other => NatsError::Other(what),
        }
    }

    /// Creating (or looking up) the stream `stream` failed.
    pub(crate) fn stream(
        error: &async_nats::jetstream::context::CreateStreamError,
        stream: &str,
    ) -> NatsError {
        let what = format!("stream {stream:?}: {error}");
        match error.kind() {
            CreateStreamErrorKind::TimedOut => NatsError::Timeout(what),
            CreateStreamErrorKind::JetStreamUnavailable => NatsError::Config(format!(
                "{what} (is JetStream enabled on the server? nats-server --jetstream)"
            )),
            CreateStreamErrorKind::EmptyStreamName
            | CreateStreamErrorKind::InvalidStreamName
            | CreateStreamErrorKind::DomainAndExternalSet => NatsError::Config(what),
            CreateStreamErrorKind::JetStream(_) | CreateStreamErrorKind::NotFound => {
                NatsError::Rejected(what)
            }
            CreateStreamErrorKind::Response | CreateStreamErrorKind::ResponseParse => {
                NatsError::Other(what)
            }
        }
    }

    /// Looking up the stream `stream` failed (not for "not found", which callers handle).
    pub(crate) fn get_stream(
        error: &async_nats::jetstream::context::GetStreamError,
        stream: &str,
    ) -> NatsError {
        let what = format!("stream {stream:?}: {error}");
        match error.kind() {
            GetStreamErrorKind::Request => NatsError::Connection(what),
            GetStreamErrorKind::EmptyName | GetStreamErrorKind::InvalidStreamName => {
                NatsError::Config(what)
            }
            GetStreamErrorKind::JetStream(_) => NatsError::Rejected(what),
        }
    }

    /// Creating the durable consumer on `stream` failed.
    pub(crate) fn consumer(
        error: &async_nats::jetstream::stream::ConsumerError,
        stream: &str,
    ) -> NatsError {
        let what = format!("the consumer on stream {stream:?}: {error}");
        match error.kind() {
            ConsumerErrorKind::TimedOut => NatsError::Timeout(what),
            ConsumerErrorKind::Request => NatsError::Connection(what),
            ConsumerErrorKind::InvalidConsumerType | ConsumerErrorKind::InvalidName => {
                NatsError::Config(what)
            }
            ConsumerErrorKind::JetStream(_) => NatsError::Rejected(what),
            ConsumerErrorKind::Other => NatsError::Other(what),
        }
    }

    /// A pull request on `stream` that could not be sent.
    pub(crate) fn pull(
        error: &async_nats::jetstream::consumer::pull::BatchError,
        stream: &str,
    ) -> NatsError {
        let what = format!("pulling from stream {stream:?}: {error}");
        match error.kind() {
            BatchErrorKind::Serialize => NatsError::Other(what),
            _ => NatsError::Connection(what),
        }
    }

    /// A pull request that the server answered with an error status. The consumer's leader
    /// changed (`409 Leadership Change`: the pull was dropped, the new leader takes the next
    /// one) or nobody answers for the consumer yet (`503`, no responders, during an election):
    /// a [`NatsError::Connection`]. Anything else (a deleted consumer, too many waiting pulls …)
    /// is [`NatsError::Rejected`].
    pub(crate) fn pulled(
        error: &(dyn StdError + Send + Sync + 'static),
        stream: &str,
    ) -> NatsError {
        let what = format!("pulling from stream {stream:?}: {error}");
        // async-nats reports the status only in the text: "…: 409, Some(\"Leadership Change\")".
        let text = error.to_string();
        if text.contains("Leadership Change") || text.contains(": 503") {
            NatsError::Connection(what)
        } else {
            NatsError::Rejected(what)
        }
    }

    /// A pull request on `stream` whose connection dropped while it waited.
    pub(crate) fn dropped_pull(stream: &str) -> NatsError {
        NatsError::Connection(format!(
            "pulling from stream {stream:?}: the connection to the server dropped; pulling again \
             once reconnected"
        ))
    }

    /// A pull request on `stream` with no answer within `within` (its expiry and the request
    /// timeout): it went to a consumer leader that died, or its connection dropped.
    pub(crate) fn unanswered_pull(stream: &str, within: std::time::Duration) -> NatsError {
        NatsError::Timeout(format!(
            "pulling from stream {stream:?}: no answer within {within:?} (the consumer's leader \
             or the connection went away)"
        ))
    }

    /// An acknowledgement (`+ACK`, `-NAK`) that was not confirmed.
    pub(crate) fn ack(what: &str, error: &(dyn StdError + Send + Sync + 'static)) -> NatsError {
        let timed_out = error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut);
        let what = format!("{what}: {error}");
        if timed_out {
            NatsError::Timeout(what)
        } else {
            NatsError::Connection(what)
        }
    }

    /// The JetStream account request at connect (`$JS.API.INFO`) that failed.
    pub(crate) fn account(error: &async_nats::RequestError, host: &str) -> NatsError {
        let what = format!("the JetStream account at {host}: {error}");
        match error.kind() {
            async_nats::RequestErrorKind::TimedOut => NatsError::Timeout(what),
            async_nats::RequestErrorKind::NoResponders => NatsError::Config(format!(
                "{what} (JetStream is not enabled on the server: nats-server --jetstream)"
            )),
            _ => NatsError::Connection(what),
        }
    }

    /// The JetStream account request answered with an error (JetStream disabled for the
    /// account, …).
    pub(crate) fn account_refused(reply: &[u8], host: &str) -> NatsError {
        NatsError::Config(format!(
            "the JetStream account at {host} is not usable: {}",
            String::from_utf8_lossy(reply)
        ))
    }

    /// Reading a stored message of `stream` failed.
    pub(crate) fn read(
        error: &async_nats::jetstream::stream::RawMessageError,
        stream: &str,
    ) -> NatsError {
        let what = format!("reading stream {stream:?}: {error}");
        match error.kind() {
            LastRawMessageErrorKind::InvalidSubject => NatsError::Config(what),
            LastRawMessageErrorKind::JetStream(_) | LastRawMessageErrorKind::NoMessageFound => {
                NatsError::Rejected(what)
            }
            LastRawMessageErrorKind::Other => NatsError::Other(what),
        }
    }
}

// The conversion into the runtime's `TransportError` is the contract's one blanket `From`:
// the transport's name as the message, this error as the source.
impl BrokerError for NatsError {
    const NAME: &'static str = "nats";
    fn transport_kind(&self) -> TransportErrorKind {
        self.kind()
    }
}

#[cfg(test)]
mod tests {
    use babelqueue_transport::TransportError;

    use super::*;

    #[test]
    fn kinds_and_transience() {
        let cases = [
            (
                NatsError::Config("x".into()),
                TransportErrorKind::Config,
                false,
            ),
            (
                NatsError::Auth {
                    host: "h:4222".into(),
                },
                TransportErrorKind::Auth,
                false,
            ),
            (
                NatsError::Connection("x".into()),
                TransportErrorKind::Connection,
                true,
            ),
            (
                NatsError::Timeout("x".into()),
                TransportErrorKind::Timeout,
                true,
            ),
            (
                NatsError::Rejected("x".into()),
                TransportErrorKind::Rejected,
                false,
            ),
            (
                NatsError::Unsupported("x".into()),
                TransportErrorKind::Unsupported,
                false,
            ),
            (
                NatsError::Other("x".into()),
                TransportErrorKind::Other,
                false,
            ),
        ];
        for (error, kind, transient) in cases {
            assert_eq!((error.kind(), error.is_transient()), (kind, transient));
            let shown = error.to_string();
            let t = TransportError::from(error);
            assert_eq!((t.kind(), t.is_transient()), (kind, transient));
            assert_eq!(t.to_string(), format!("nats: {shown}"));
        }
    }

    #[test]
    fn refused_credentials_name_the_host_and_nothing_else() {
        let refused = ConnectError::new(ConnectErrorKind::AuthorizationViolation);
        let secrets = ["hunter2".to_owned()];
        let e = NatsError::connect(&refused, "10.0.0.7:4222", &secrets);
        assert_eq!(e.kind(), TransportErrorKind::Auth);
        assert_eq!(
            e.to_string(),
            "the NATS server at 10.0.0.7:4222 refused the credentials"
        );
        let down = ConnectError::new(ConnectErrorKind::Io);
        let e = NatsError::connect(&down, "h:1", &secrets);
        assert!(e.is_transient());
        assert!(!format!("{e} {e:?}").contains("hunter2"));
    }

    #[test]
    fn a_pull_ended_by_a_leader_change_is_transient_and_other_statuses_are_not() {
        // The text async-nats 0.51 gives a pull that ends with an error status.
        let status = |code: u16, description: &str| {
            std::io::Error::other(format!(
                "error while processing messages from the stream: {code}, Some({description:?})"
            ))
        };
        let changed = NatsError::pulled(&status(409, "Leadership Change"), "BQ_q");
        assert_eq!(changed.kind(), TransportErrorKind::Connection, "{changed}");
        assert!(changed.is_transient());
        let nobody = NatsError::pulled(&status(503, "No Responders"), "BQ_q");
        assert!(nobody.is_transient(), "{nobody}");
        for (code, description) in [(409, "Consumer Deleted"), (409, "Exceeded MaxWaiting")] {
            let e = NatsError::pulled(&status(code, description), "BQ_q");
            assert_eq!(e.kind(), TransportErrorKind::Rejected, "{e}");
            assert!(e.to_string().contains("\"BQ_q\""), "{e}");
        }
        assert!(NatsError::dropped_pull("BQ_q").is_transient());
        let lost = NatsError::unanswered_pull("BQ_q", std::time::Duration::from_secs(6));
        assert_eq!(lost.kind(), TransportErrorKind::Timeout);
        assert!(lost.to_string().contains("6s"), "{lost}");
    }

    #[test]
    fn a_converted_error_shows_its_cause_once() {
        let cause = "cause-7f3a";
        for error in [
            NatsError::Config(cause.into()),
            NatsError::Connection(cause.into()),
            NatsError::Timeout(cause.into()),
            NatsError::Rejected(cause.into()),
            NatsError::Unsupported(cause.into()),
            NatsError::Other(cause.into()),
        ] {
            let own = error.to_string();
            let shown = TransportError::from(error).to_string();
            assert_eq!(shown.matches(cause).count(), 1, "{shown}");
            assert_eq!(shown.matches(own.as_str()).count(), 1, "{shown}");
        }
    }
}
