//! The crate's error type and its mapping into the runtime's [`TransportError`](babelqueue_core::TransportError).

use babelqueue_core::{BrokerError, TransportErrorKind};

/// What can go wrong talking to Pulsar.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PulsarError {
    /// The URL or an option is not usable.
    #[error("invalid Pulsar configuration: {0}")]
    Config(String),
    /// The broker cannot be reached, or the connection dropped.
    #[error("Pulsar connection failed: {0}")]
    Connection(String),
    /// The broker did not answer in time.
    #[error("Pulsar operation timed out: {0}")]
    Timeout(String),
    /// The broker refused the credentials (an authentication error: a wrong or expired token,
    /// a failed authentication exchange). Not transient: a consume loop stops with it.
    #[error("Pulsar refused the credentials: {0}")]
    Auth(String),
    /// The broker refused the operation (an unknown topic, an authorisation failure, a
    /// rejected send).
    #[error("Pulsar refused the operation: {0}")]
    Rejected(String),
    /// A settle handle that does not belong to this transport's client.
    #[error("not a Pulsar delivery of this transport: {0}")]
    ForeignDelivery(String),
    /// Anything else the client reported.
    #[error("Pulsar client error: {0}")]
    Client(String),
}

impl PulsarError {
    /// The runtime's class of the error.
    pub fn kind(&self) -> TransportErrorKind {
        match self {
            PulsarError::Config(_) => TransportErrorKind::Config,
            PulsarError::Connection(_) => TransportErrorKind::Connection,
            PulsarError::Timeout(_) => TransportErrorKind::Timeout,
            PulsarError::Rejected(_) => TransportErrorKind::Rejected,
            PulsarError::Auth(_) => TransportErrorKind::Auth,
            PulsarError::ForeignDelivery(_) | PulsarError::Client(_) => TransportErrorKind::Other,
        }
    }

    /// The same error with every secret of `url` masked in its text (for errors of a client
    /// that was given the URL).
    pub(crate) fn scrubbed(self, url: &str) -> PulsarError {
        use babelqueue_core::redact::scrub;
        match self {
            PulsarError::Config(t) => PulsarError::Config(scrub(&t, url)),
            PulsarError::Connection(t) => PulsarError::Connection(scrub(&t, url)),
            PulsarError::Timeout(t) => PulsarError::Timeout(scrub(&t, url)),
            PulsarError::Rejected(t) => PulsarError::Rejected(scrub(&t, url)),
            PulsarError::Auth(t) => PulsarError::Auth(scrub(&t, url)),
            PulsarError::ForeignDelivery(t) => PulsarError::ForeignDelivery(scrub(&t, url)),
            PulsarError::Client(t) => PulsarError::Client(scrub(&t, url)),
        }
    }

    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            TransportErrorKind::Connection | TransportErrorKind::Timeout
        )
    }

    /// Classifies an error of the `pulsar` crate. The text is
    /// [`redact`](babelqueue_core::redact::redact)ed.
    pub(crate) fn from_client(context: &str, e: &pulsar::Error) -> PulsarError {
        use pulsar::error::{AuthenticationError, ConnectionError, ConsumerError, ProducerError};
        use pulsar::proto::ServerError;
        let text = babelqueue_core::redact::redact(&format!("{context}: {e}"));
        let authentication = |a: &AuthenticationError| match a {
            // A token provider that may succeed on the next try.
            AuthenticationError::Retriable(_) => PulsarError::Connection(text.clone()),
            AuthenticationError::Custom(_) => PulsarError::Auth(text.clone()),
        };
        let connection = |c: &ConnectionError| match c {
            ConnectionError::Authentication(a) => authentication(a),
            ConnectionError::PulsarError(Some(ServerError::AuthenticationError), _) => {
                PulsarError::Auth(text.clone())
            }
            ConnectionError::Io(_)
            | ConnectionError::Disconnected
            | ConnectionError::Canceled
            | ConnectionError::Shutdown
            | ConnectionError::Tls(_)
            | ConnectionError::SocketAddr(_)
            | ConnectionError::NotFound => PulsarError::Connection(text.clone()),
            // The outbound queue stayed full: the broker did not keep up in time.
            ConnectionError::SlowDown => PulsarError::Timeout(text.clone()),
            ConnectionError::Unexpected(_)
            | ConnectionError::Decoding(_)
            | ConnectionError::Encoding(_) => PulsarError::Client(text.clone()),
            _ => PulsarError::Rejected(text.clone()),
        };
        match e {
            pulsar::Error::Authentication(a) => authentication(a),
            pulsar::Error::Connection(c) => connection(c),
            pulsar::Error::Consumer(ConsumerError::Connection(c))
            | pulsar::Error::Producer(ProducerError::Connection(c)) => connection(c),
            pulsar::Error::ServiceDiscovery(_) => PulsarError::Connection(text),
            pulsar::Error::Consumer(_) | pulsar::Error::Producer(_) => PulsarError::Rejected(text),
            _ => PulsarError::Client(text),
        }
    }
}

// The conversion into the runtime's `TransportError` is the contract's one blanket `From`:
// the transport's name as the message, this error as the source.
impl BrokerError for PulsarError {
    const NAME: &'static str = "pulsar";
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
        let e: TransportError = PulsarError::Connection("down".into()).into();
        assert_eq!(e.kind(), TransportErrorKind::Connection);
        assert!(e.is_transient());
        let e: TransportError = PulsarError::Rejected("no".into()).into();
        assert_eq!(e.kind(), TransportErrorKind::Rejected);
        assert!(!e.is_transient());
        assert!(PulsarError::Timeout("t".into()).is_transient());
        assert!(!PulsarError::Config("c".into()).is_transient());
        let e: TransportError = PulsarError::Config("bad url".into()).into();
        assert_eq!(e.kind(), TransportErrorKind::Config);
    }

    #[test]
    fn a_converted_error_shows_its_cause_once() {
        let cause = "cause-7f3a";
        for error in [
            PulsarError::Config(cause.into()),
            PulsarError::Connection(cause.into()),
            PulsarError::Timeout(cause.into()),
            PulsarError::Auth(cause.into()),
            PulsarError::Rejected(cause.into()),
            PulsarError::ForeignDelivery(cause.into()),
            PulsarError::Client(cause.into()),
        ] {
            let own = error.to_string();
            let shown = TransportError::from(error).to_string();
            assert_eq!(shown.matches(cause).count(), 1, "{shown}");
            assert_eq!(shown.matches(own.as_str()).count(), 1, "{shown}");
        }
    }

    #[test]
    fn refused_credentials_are_auth_errors() {
        use pulsar::error::{AuthenticationError, ConnectionError};
        use pulsar::proto::ServerError;
        let context = "connecting to pulsar://127.0.0.1:6650";
        for e in [
            pulsar::Error::Connection(ConnectionError::PulsarError(
                Some(ServerError::AuthenticationError),
                Some("Unable to authenticate".into()),
            )),
            pulsar::Error::Connection(ConnectionError::Authentication(
                AuthenticationError::Custom("the token was refused".into()),
            )),
            pulsar::Error::Authentication(AuthenticationError::Custom("no".into())),
        ] {
            let error = PulsarError::from_client(context, &e);
            assert_eq!(error.kind(), TransportErrorKind::Auth, "{error:?}");
            assert!(!error.is_transient());
            let text = error.to_string();
            assert!(
                text.contains("refused the credentials") && text.contains("127.0.0.1:6650"),
                "{text}"
            );
            let mapped = TransportError::from(error);
            assert_eq!(mapped.kind(), TransportErrorKind::Auth);
            assert!(!mapped.is_transient());
        }
        // A permission refusal of valid credentials stays a refusal.
        let denied = pulsar::Error::Connection(ConnectionError::PulsarError(
            Some(ServerError::AuthorizationError),
            None,
        ));
        assert_eq!(
            PulsarError::from_client(context, &denied).kind(),
            TransportErrorKind::Rejected
        );
    }

    #[test]
    fn an_outbound_queue_that_stays_full_is_a_transient_timeout() {
        use pulsar::error::{ConnectionError, ProducerError};
        let full = pulsar::Error::Producer(ProducerError::Connection(ConnectionError::SlowDown));
        let error = PulsarError::from_client("sending to orders", &full);
        assert_eq!(error.kind(), TransportErrorKind::Timeout, "{error:?}");
        assert!(error.is_transient());
    }

    /// A port on 127.0.0.1 that nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        drop(listener);
        port
    }

    fn shown(error: PulsarError) -> String {
        let text = format!("{error}\n{error:?}");
        let runtime = TransportError::from(error);
        format!("{text}\n{runtime}\n{runtime:?}")
    }

    #[test]
    fn a_bad_url_never_shows_the_password() {
        for url in [
            "pulsar://bq:hunter2@/",
            "pulsar://bq:hunter2@?token=x",
            "pulsar:/bq:hunter2@127.0.0.1:6650",
            "bq:hunter2@127.0.0.1:6650",
            "http://bq:hunter2@127.0.0.1:6650",
        ] {
            let error = crate::PulsarTransport::builder(url).unwrap_err();
            assert_eq!(error.kind(), TransportErrorKind::Config, "{url}: {error}");
            let text = shown(error);
            assert!(!text.contains("hunter2"), "{url}: {text}");
        }
        let builder =
            crate::PulsarTransport::builder("pulsar://bq:hunter2@h:6650?token=t0k3n").unwrap();
        let shown = format!("{builder:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("t0k3n"),
            "{shown}"
        );
    }

    #[tokio::test]
    async fn a_refused_connection_never_shows_the_password() {
        let port = closed_port();
        for url in [
            format!("pulsar://bq:hunter2@127.0.0.1:{port}"),
            format!("pulsar://127.0.0.1:{port}?token=hunter2"),
        ] {
            let error = crate::PulsarTransport::builder(&url)
                .unwrap()
                .connect_timeout(std::time::Duration::from_secs(2))
                .connect()
                .await
                .unwrap_err();
            assert!(error.to_string().contains("127.0.0.1"), "{error}");
            let text = shown(error);
            assert!(!text.contains("hunter2"), "{url}: {text}");
        }
    }
}
