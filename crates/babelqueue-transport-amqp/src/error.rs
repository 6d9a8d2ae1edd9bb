//! The crate's one error type, [`AmqpError`], and how it maps onto the runtime's
//! [`TransportError`](babelqueue_core::TransportError).

use babelqueue_core::{BrokerError, TransportErrorKind};

use crate::topology::QueueType;

/// Everything the AMQP transport can report.
///
/// `Display` is for people and logs; code branches on [`AmqpError::kind`] or
/// [`AmqpError::is_transient`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AmqpError {
    /// The broker URL cannot be used.
    #[error("invalid AMQP URL: {0}")]
    Url(String),
    /// The TLS settings cannot be used (an unreadable CA file, one without a certificate).
    #[error("AMQP TLS configuration: {0}")]
    Tls(String),
    /// A property the contract carries in an AMQP short string (`type`, `correlation_id`,
    /// `message_id` …) is longer than the 255 bytes AMQP 0-9-1 allows. Nothing is truncated.
    #[error(
        "the AMQP property `{property}` would be {len} bytes, above the 255-byte limit of an AMQP short string; the message was not sent"
    )]
    PropertyTooLong {
        /// The AMQP property name.
        property: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// The broker cannot be reached, or the connection or channel dropped.
    #[error("RabbitMQ connection: {0}")]
    Connection(String),
    /// The broker did not answer in time.
    #[error("RabbitMQ did not answer in time: {0}")]
    Timeout(String),
    /// A delivery whose channel has closed since it was received: it cannot be acknowledged any
    /// more, and the broker has already put it back in its queue.
    #[error(
        "the channel this delivery came on has closed (it cannot be settled any more; RabbitMQ requeued it and will deliver it again)"
    )]
    StaleDelivery,
    /// The broker refused a publish (a negative publisher confirm).
    #[error("RabbitMQ refused the message (negative publisher confirm) on queue {queue:?}")]
    Nacked {
        /// The target queue.
        queue: String,
    },
    /// The broker returned a mandatory publish: no queue of that name exists.
    #[error("RabbitMQ returned the message as unroutable: no queue {queue:?} exists")]
    Unroutable {
        /// The target queue.
        queue: String,
    },
    /// The queue exists with other arguments (a dead-letter exchange or a TTL set by another
    /// framework, another delivery limit …): RabbitMQ refused the declaration.
    #[error(
        "queue {queue:?} already exists with different arguments (x-dead-letter-exchange, TTL, x-delivery-limit …); BabelQueue declares durable queues with the arguments of its queue_type only (none for classic queues, so every SDK can share them): {detail}"
    )]
    DeclareMismatch {
        /// The queue.
        queue: String,
        /// RabbitMQ's reply text.
        detail: String,
    },
    /// The queue exists with another type than the transport declares (`queue_type`), and
    /// RabbitMQ refused the declaration (`PRECONDITION_FAILED`). A configuration error: the
    /// option, or the queue, has to change.
    #[error(
        "queue {queue:?} already exists as a {existing} queue, but this transport declares {wanted} queues (queue_type={wanted}); {}",
        mismatch_fix(existing)
    )]
    QueueTypeMismatch {
        /// The queue.
        queue: String,
        /// Its type on the broker (`classic`, `quorum`, `stream` …).
        existing: String,
        /// The type the transport declares.
        wanted: QueueType,
    },
    /// The broker refused the login or the user's access (`ACCESS_REFUSED`, reply code 403): a
    /// wrong user name or password, or a user without the permission. Not transient: a consume
    /// loop stops with it.
    #[error("RabbitMQ refused the credentials (ACCESS_REFUSED): {0}")]
    Auth(String),
    /// The broker refused an operation (not found, precondition failed, …).
    #[error("RabbitMQ refused the operation: {0}")]
    Refused(String),
    /// Any other client failure.
    #[error("AMQP client: {0}")]
    Other(String),
}

impl AmqpError {
    /// The runtime's class of the error.
    pub fn kind(&self) -> TransportErrorKind {
        match self {
            AmqpError::Url(_) | AmqpError::Tls(_) | AmqpError::QueueTypeMismatch { .. } => {
                TransportErrorKind::Config
            }
            AmqpError::PropertyTooLong { .. } => TransportErrorKind::Unsupported,
            AmqpError::Connection(_) | AmqpError::StaleDelivery => TransportErrorKind::Connection,
            AmqpError::Timeout(_) => TransportErrorKind::Timeout,
            AmqpError::Nacked { .. }
            | AmqpError::Unroutable { .. }
            | AmqpError::DeclareMismatch { .. }
            | AmqpError::Refused(_) => TransportErrorKind::Rejected,
            AmqpError::Auth(_) => TransportErrorKind::Auth,
            AmqpError::Other(_) => TransportErrorKind::Other,
        }
    }

    /// Whether retrying the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            TransportErrorKind::Connection | TransportErrorKind::Timeout
        )
    }

    /// Whether the error means the connection itself is gone (the supervisor then reconnects).
    pub(crate) fn connection_lost(&self) -> bool {
        matches!(self, AmqpError::Connection(_) | AmqpError::Timeout(_))
    }
}

/// What to do about a queue of another type.
fn mismatch_fix(existing: &str) -> String {
    match QueueType::parse(existing) {
        Some(t) => format!(
            "set queue_type={t} in the URL (or AmqpOptions::queue_type) to use it as it is, or declare=0 to leave it as it was provisioned"
        ),
        None => "BabelQueue declares classic or quorum queues only: use another queue, or declare=0 to consume it as it was provisioned".to_owned(),
    }
}

impl From<lapin::Error> for AmqpError {
    fn from(e: lapin::Error) -> Self {
        use lapin::ErrorKind as K;
        match e.kind() {
            K::IOError(_)
            | K::InvalidConnectionState(_)
            | K::InvalidChannelState(..)
            | K::InvalidChannel(_)
            | K::MissingHeartbeatError
            | K::RuntimeShutdownError(_) => AmqpError::Connection(e.to_string()),
            K::ProtocolError(amqp) => match amqp.get_id() {
                // CONNECTION_FORCED (broker shutdown or restart), CHANNEL_ERROR, internal errors
                320 | 504 | 541 => AmqpError::Connection(e.to_string()),
                // ACCESS_REFUSED: the login (connection.close during the handshake) or the
                // user's permission on a resource.
                403 => AmqpError::Auth(e.to_string()),
                _ => AmqpError::Refused(e.to_string()),
            },
            K::AuthProviderError(_) => AmqpError::Auth(e.to_string()),
            _ => AmqpError::Other(e.to_string()),
        }
    }
}

// The conversion into the runtime's `TransportError` is the contract's one blanket `From`:
// the transport's name as the message, this error as the source.
impl BrokerError for AmqpError {
    const NAME: &'static str = "amqp";
    fn transport_kind(&self) -> TransportErrorKind {
        self.kind()
    }
}

#[cfg(test)]
mod tests {
    use babelqueue_core::TransportError;

    use super::*;

    #[test]
    fn kinds_map_onto_the_runtime_kinds() {
        let cases = [
            (
                AmqpError::Connection("x".into()),
                TransportErrorKind::Connection,
                true,
            ),
            (
                AmqpError::StaleDelivery,
                TransportErrorKind::Connection,
                true,
            ),
            (
                AmqpError::Timeout("x".into()),
                TransportErrorKind::Timeout,
                true,
            ),
            (
                AmqpError::Nacked { queue: "q".into() },
                TransportErrorKind::Rejected,
                false,
            ),
            (
                AmqpError::Url("x".into()),
                TransportErrorKind::Config,
                false,
            ),
            (AmqpError::Auth("x".into()), TransportErrorKind::Auth, false),
            (
                AmqpError::Tls("x".into()),
                TransportErrorKind::Config,
                false,
            ),
            (
                AmqpError::QueueTypeMismatch {
                    queue: "q".into(),
                    existing: "quorum".into(),
                    wanted: QueueType::Classic,
                },
                TransportErrorKind::Config,
                false,
            ),
            (
                AmqpError::PropertyTooLong {
                    property: "type",
                    len: 300,
                },
                TransportErrorKind::Unsupported,
                false,
            ),
        ];
        for (error, kind, transient) in cases {
            assert_eq!(error.is_transient(), transient, "{error}");
            let text = error.to_string();
            let mapped = TransportError::from(error);
            assert_eq!(mapped.kind(), kind);
            assert_eq!(mapped.is_transient(), transient);
            assert!(mapped.to_string().contains(&text), "{mapped}");
        }
    }

    #[test]
    fn a_converted_error_shows_its_cause_once() {
        let cause = "cause-7f3a";
        for error in [
            AmqpError::Url(cause.into()),
            AmqpError::Tls(cause.into()),
            AmqpError::Connection(cause.into()),
            AmqpError::Timeout(cause.into()),
            AmqpError::DeclareMismatch {
                queue: "orders".into(),
                detail: cause.into(),
            },
            AmqpError::Auth(cause.into()),
            AmqpError::Refused(cause.into()),
            AmqpError::Other(cause.into()),
        ] {
            let own = error.to_string();
            let shown = TransportError::from(error).to_string();
            assert_eq!(shown.matches(cause).count(), 1, "{shown}");
            assert_eq!(shown.matches(own.as_str()).count(), 1, "{shown}");
        }
    }

    #[test]
    fn access_refused_is_an_auth_error() {
        use lapin::protocol::{AMQPError, AMQPErrorKind, AMQPSoftError};
        let refused = lapin::Error::from(lapin::ErrorKind::ProtocolError(AMQPError::new(
            AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED),
            "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN".into(),
        )));
        let error = AmqpError::from(refused);
        assert!(matches!(error, AmqpError::Auth(_)), "{error:?}");
        assert_eq!(error.kind(), TransportErrorKind::Auth);
        assert!(!error.is_transient());
        assert!(
            error.to_string().contains("refused the credentials"),
            "{error}"
        );
        let mapped = TransportError::from(error);
        assert_eq!(mapped.kind(), TransportErrorKind::Auth);
        assert!(!mapped.is_transient());
        // Other refusals stay refusals.
        let not_found = lapin::Error::from(lapin::ErrorKind::ProtocolError(AMQPError::new(
            AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND),
            "NOT_FOUND - no queue 'q'".into(),
        )));
        assert_eq!(
            AmqpError::from(not_found).kind(),
            TransportErrorKind::Rejected
        );
    }

    /// A port on 127.0.0.1 that nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        drop(listener);
        port
    }

    fn assert_hidden(error: &AmqpError, secret: &str) {
        let display = error.to_string();
        let debug = format!("{error:?}");
        assert!(
            !display.contains(secret),
            "Display shows {secret}: {display}"
        );
        assert!(!debug.contains(secret), "Debug shows {secret}: {debug}");
        let runtime = TransportError::from(AmqpError::Other(display.clone()));
        assert!(!runtime.to_string().contains(secret), "{runtime}");
    }

    #[test]
    fn a_bad_url_option_never_shows_the_password() {
        for url in [
            "amqp://guest:hunter2@127.0.0.1:5672/%2f?prefetch=0",
            "amqp://guest:hunter2@127.0.0.1:5672/%2f?declare=maybe",
            "amqp://guest:hunter2@127.0.0.1:5672/%zz",
            "amqp://guest:hun@ter2@127.0.0.1:5672/?prefetch=x",
            "amqp://guest:hunter2@[::1]:5672/?heartbeat=x",
            "amqp://guest:hunter2@127.0.0.1:notaport/",
            "amqp:/guest:hunter2@127.0.0.1",
            "amqp:guest:hunter2@127.0.0.1",
            "guest:hunter2@127.0.0.1:5672",
            "AMQP://guest:hunter2@127.0.0.1",
        ] {
            let error = crate::AmqpUrl::parse(url).unwrap_err();
            assert_eq!(error.kind(), TransportErrorKind::Config, "{url}: {error}");
            for secret in ["hunter2", "ter2"] {
                assert_hidden(&error, secret);
            }
            let runtime = TransportError::from(error);
            assert!(
                !format!("{runtime} {runtime:?}").contains("ter2"),
                "{runtime:?}"
            );
        }
        // The URL itself keeps its password out of `Debug`.
        let parsed = crate::AmqpUrl::parse("amqp://guest:hunter2@127.0.0.1/%2f").unwrap();
        assert!(!format!("{parsed:?}").contains("hunter2"), "{parsed:?}");
    }

    #[tokio::test]
    async fn a_refused_connection_never_shows_the_password() {
        let url = format!("amqp://guest:hunter2@127.0.0.1:{}/%2f", closed_port());
        let error = crate::AmqpTransport::connect(&url).await.unwrap_err();
        assert!(error.is_transient(), "{error:?}");
        assert_hidden(&error, "hunter2");
        let runtime = TransportError::from(error);
        assert_eq!(runtime.kind(), TransportErrorKind::Connection);
        assert!(
            !format!("{runtime} {runtime:?}").contains("hunter2"),
            "{runtime:?}"
        );
    }
}
