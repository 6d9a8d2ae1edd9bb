//! The crate's one error type, and how it maps onto the runtime's [`TransportError`](babelqueue_core::TransportError).

use babelqueue_core::{BrokerError, TransportErrorKind};

/// Everything the Artemis transport can fail with.
///
/// Code branches on [`ArtemisError::kind`] (or [`ArtemisError::is_transient`]), never on the
/// message text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtemisError {
    /// The broker URL or one of its options is wrong.
    #[error("invalid Artemis URL: {0}")]
    Url(String),
    /// The TLS configuration cannot be built (an unreadable CA file, no certificate in it …).
    #[error("Artemis TLS configuration: {0}")]
    Tls(String),
    /// The broker could not be reached, or the connection, its session or a link dropped.
    #[error("Artemis connection to {endpoint} failed: {reason}")]
    Connection {
        /// `host:port` of the broker.
        endpoint: String,
        /// What happened, as the AMQP client reported it.
        reason: String,
    },
    /// The broker refused the credentials (the SASL exchange failed): a wrong user name or
    /// password. Not transient: a consume loop stops with it.
    #[error("Artemis at {endpoint} refused the credentials: {reason}")]
    Authentication {
        /// `host:port` of the broker.
        endpoint: String,
        /// What the SASL exchange reported.
        reason: String,
    },
    /// The broker refused to attach a link to an address (unknown address with auto-create
    /// off, no permission …).
    #[error("Artemis refused a link to {address:?}: {reason}")]
    LinkRefused {
        /// The address.
        address: String,
        /// The broker's error condition.
        reason: String,
    },
    /// The broker did not accept a message it was sent (rejected, released or modified).
    #[error("Artemis did not accept a message sent to {address:?}: {outcome}")]
    NotAccepted {
        /// The address.
        address: String,
        /// The outcome the broker returned.
        outcome: String,
    },
    /// Artemis granted no link credit for a send to `address` within the client's
    /// `send_credit_timeout`: the address is full (`max-size-bytes` reached under the `BLOCK` or
    /// `FAIL` address-full-policy) or the broker is short of memory. The message was not
    /// transferred and never will be (a later send transfers its own message only); the
    /// connection is fine and stays in use. Transient: the send may succeed once the address has
    /// room again.
    #[error(
        "Artemis gave no credit to send to {address:?} within {waited:?}: the address is full or \
         blocked (max-size-bytes reached, or the broker is short of memory); the message was not sent"
    )]
    AddressBlocked {
        /// The address.
        address: String,
        /// How long this send waited for credit.
        waited: std::time::Duration,
    },
    /// An operation did not finish in time.
    #[error("Artemis did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// A delivery can no longer be settled: the connection that received it dropped, and the
    /// broker has taken the message back to deliver it again.
    #[error(
        "the delivery from {address:?} belongs to a connection that dropped; Artemis delivers it again"
    )]
    Stale {
        /// The address it was received from.
        address: String,
    },
    /// The transport was closed.
    #[error("the Artemis transport is closed")]
    Closed,
    /// The client cannot do what was asked (a client behind the seam without management
    /// requests).
    #[error("the Artemis client does not support {0}")]
    Unsupported(&'static str),
    /// The management address answered a request with a failure or with a body that cannot be
    /// read (no permission to manage, an unknown attribute …).
    #[error("Artemis management request {request}: {reason}")]
    Management {
        /// The resource and the attribute asked for.
        request: String,
        /// What the reply said, or why it could not be read.
        reason: String,
    },
}

impl ArtemisError {
    /// The runtime's class of the error. A full address
    /// ([`AddressBlocked`](ArtemisError::AddressBlocked)) is a `Timeout`: the broker would not
    /// take the message in time, nothing else is wrong; match the variant to tell it apart.
    pub fn kind(&self) -> TransportErrorKind {
        match self {
            ArtemisError::Url(_) | ArtemisError::Tls(_) => TransportErrorKind::Config,
            ArtemisError::Authentication { .. } => TransportErrorKind::Auth,
            ArtemisError::Connection { .. } | ArtemisError::Stale { .. } => {
                TransportErrorKind::Connection
            }
            ArtemisError::Timeout(_) | ArtemisError::AddressBlocked { .. } => {
                TransportErrorKind::Timeout
            }
            ArtemisError::LinkRefused { .. } | ArtemisError::NotAccepted { .. } => {
                TransportErrorKind::Rejected
            }
            ArtemisError::Closed | ArtemisError::Management { .. } => TransportErrorKind::Other,
            ArtemisError::Unsupported(_) => TransportErrorKind::Unsupported,
        }
    }

    /// Whether the same call may succeed later (a broker that is restarting, a dropped
    /// connection, an address that is full for now): the runtime then retries after a short
    /// pause.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            TransportErrorKind::Connection | TransportErrorKind::Timeout
        )
    }
}

// The conversion into the runtime's `TransportError` is the contract's one blanket `From`:
// the transport's name as the message, this error as the source.
impl BrokerError for ArtemisError {
    const NAME: &'static str = "artemis";
    fn transport_kind(&self) -> TransportErrorKind {
        self.kind()
    }
}

#[cfg(test)]
mod tests {
    use babelqueue_core::TransportError;

    use super::*;

    #[test]
    fn kinds_map_onto_the_runtime() {
        let cases = [
            (
                ArtemisError::Url("x".into()),
                TransportErrorKind::Config,
                false,
            ),
            (
                ArtemisError::Connection {
                    endpoint: "127.0.0.1:5673".into(),
                    reason: "refused".into(),
                },
                TransportErrorKind::Connection,
                true,
            ),
            (
                ArtemisError::Stale {
                    address: "orders".into(),
                },
                TransportErrorKind::Connection,
                true,
            ),
            (
                ArtemisError::Timeout(std::time::Duration::from_secs(1)),
                TransportErrorKind::Timeout,
                true,
            ),
            (
                ArtemisError::AddressBlocked {
                    address: "orders.dlq".into(),
                    waited: std::time::Duration::from_secs(2),
                },
                TransportErrorKind::Timeout,
                true,
            ),
            (
                ArtemisError::NotAccepted {
                    address: "orders".into(),
                    outcome: "rejected".into(),
                },
                TransportErrorKind::Rejected,
                false,
            ),
            (
                ArtemisError::Authentication {
                    endpoint: "h:1".into(),
                    reason: "bad password".into(),
                },
                TransportErrorKind::Auth,
                false,
            ),
        ];
        let blocked = ArtemisError::AddressBlocked {
            address: "orders.dlq".into(),
            waited: std::time::Duration::from_secs(2),
        };
        assert_eq!(blocked.kind(), TransportErrorKind::Timeout);
        let text = blocked.to_string();
        assert!(
            text.contains("\"orders.dlq\"") && text.contains("full") && text.contains("not sent"),
            "{text}"
        );
        for (error, kind, transient) in cases {
            assert_eq!(error.is_transient(), transient, "{error}");
            let text = error.to_string();
            let mapped = TransportError::from(error);
            assert_eq!(mapped.kind(), kind, "{text}");
            assert_eq!(mapped.is_transient(), transient, "{text}");
            assert!(mapped.to_string().contains(&text), "{mapped}");
        }
    }

    /// A port on 127.0.0.1 that nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        drop(listener);
        port
    }

    #[tokio::test]
    async fn a_refused_connection_never_shows_the_password() {
        let url = format!("artemis://bq:hunter2@127.0.0.1:{}", closed_port());
        let error = crate::ArtemisTransport::connect(&url).await.unwrap_err();
        assert!(error.is_transient(), "{error:?}");
        assert!(error.to_string().contains("127.0.0.1"), "{error}");
        let text = format!("{error}\n{error:?}");
        let runtime = TransportError::from(error);
        let text = format!("{text}\n{runtime}\n{runtime:?}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn a_converted_error_shows_its_cause_once() {
        let cause = "cause-7f3a";
        for error in [
            ArtemisError::Url(cause.into()),
            ArtemisError::Tls(cause.into()),
            ArtemisError::Connection {
                endpoint: "127.0.0.1:5672".into(),
                reason: cause.into(),
            },
            ArtemisError::Authentication {
                endpoint: "127.0.0.1:5672".into(),
                reason: cause.into(),
            },
            ArtemisError::LinkRefused {
                address: "orders".into(),
                reason: cause.into(),
            },
            ArtemisError::NotAccepted {
                address: "orders".into(),
                outcome: cause.into(),
            },
            ArtemisError::AddressBlocked {
                address: cause.into(),
                waited: std::time::Duration::from_secs(2),
            },
            ArtemisError::Stale {
                address: cause.into(),
            },
        ] {
            let own = error.to_string();
            let shown = TransportError::from(error).to_string();
            assert_eq!(shown.matches(cause).count(), 1, "{shown}");
            assert_eq!(shown.matches(own.as_str()).count(), 1, "{shown}");
        }
    }
}
