//! The crate's error type and its mapping into the runtime's [`TransportError`].

use babelqueue_core::{TransportError, TransportErrorKind};

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

/// The broad class of a [`PulsarError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PulsarErrorKind {
    /// Configuration.
    Config,
    /// Connection lost or refused. Transient.
    Connection,
    /// Timed out. Transient.
    Timeout,
    /// Refused by the broker.
    Rejected,
    /// Anything else.
    Other,
}

impl PulsarError {
    /// The class of the error.
    pub fn kind(&self) -> PulsarErrorKind {
        match self {
            PulsarError::Config(_) => PulsarErrorKind::Config,
            PulsarError::Connection(_) => PulsarErrorKind::Connection,
            PulsarError::Timeout(_) => PulsarErrorKind::Timeout,
            PulsarError::Rejected(_) => PulsarErrorKind::Rejected,
            PulsarError::ForeignDelivery(_) | PulsarError::Client(_) => PulsarErrorKind::Other,
        }
    }

    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            PulsarErrorKind::Connection | PulsarErrorKind::Timeout
        )
    }

    /// Classifies an error of the `pulsar` crate.
    pub(crate) fn from_client(context: &str, e: &pulsar::Error) -> PulsarError {
        use pulsar::error::{ConnectionError, ConsumerError, ProducerError};
        let text = format!("{context}: {e}");
        let connection = |c: &ConnectionError| match c {
            ConnectionError::Io(_)
            | ConnectionError::Disconnected
            | ConnectionError::Canceled
            | ConnectionError::Shutdown
            | ConnectionError::Tls(_)
            | ConnectionError::SocketAddr(_)
            | ConnectionError::NotFound => PulsarError::Connection(text.clone()),
            ConnectionError::Unexpected(_)
            | ConnectionError::Decoding(_)
            | ConnectionError::Encoding(_) => PulsarError::Client(text.clone()),
            _ => PulsarError::Rejected(text.clone()),
        };
        match e {
            pulsar::Error::Connection(c) => connection(c),
            pulsar::Error::Consumer(ConsumerError::Connection(c))
            | pulsar::Error::Producer(ProducerError::Connection(c)) => connection(c),
            pulsar::Error::ServiceDiscovery(_) => PulsarError::Connection(text),
            pulsar::Error::Consumer(_) | pulsar::Error::Producer(_) => PulsarError::Rejected(text),
            _ => PulsarError::Client(text),
        }
    }
}

impl From<PulsarError> for TransportError {
    fn from(e: PulsarError) -> TransportError {
        let kind = match e.kind() {
            PulsarErrorKind::Config => TransportErrorKind::Config,
            PulsarErrorKind::Connection => TransportErrorKind::Connection,
            PulsarErrorKind::Timeout => TransportErrorKind::Timeout,
            PulsarErrorKind::Rejected => TransportErrorKind::Rejected,
            PulsarErrorKind::Other => TransportErrorKind::Other,
        };
        TransportError::new(kind, e.to_string())
    }
}

#[cfg(test)]
mod tests {
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
}
