//! The crate's error type and its mapping into the runtime's [`TransportError`](babelqueue_core::TransportError).

use babelqueue_core::{BrokerError, TransportErrorKind};

/// What can go wrong talking to Azure Service Bus.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AsbError {
    /// The URL, the connection string or an option is not usable (no credentials, say).
    #[error("invalid Azure Service Bus configuration: {0}")]
    Config(String),
    /// The namespace cannot be reached, or the connection dropped.
    #[error("Azure Service Bus connection failed: {0}")]
    Connection(String),
    /// The namespace refused the credentials (the SAS token made from the shared access key was
    /// not accepted: a wrong key or key name). Not transient: a consume loop stops with it.
    #[error("Azure Service Bus refused the credentials: {0}")]
    Auth(String),
    /// The namespace did not answer in time.
    #[error("Azure Service Bus operation timed out: {0}")]
    Timeout(String),
    /// The namespace refused the operation (an unknown entity, an authorisation failure, a
    /// lost lock).
    #[error("Azure Service Bus refused the operation: {0}")]
    Rejected(String),
    /// The message cannot be sent as it is (an id longer than 128 characters).
    #[error("message not sendable to Azure Service Bus: {0}")]
    Invalid(String),
    /// A settle handle that does not belong to this transport's client.
    #[error("not a Service Bus delivery of this transport: {0}")]
    ForeignDelivery(String),
    /// Anything else the client reported.
    #[error("Azure Service Bus client error: {0}")]
    Client(String),
}

impl AsbError {
    /// The runtime's class of the error.
    pub fn kind(&self) -> TransportErrorKind {
        match self {
            AsbError::Config(_) => TransportErrorKind::Config,
            AsbError::Connection(_) => TransportErrorKind::Connection,
            AsbError::Timeout(_) => TransportErrorKind::Timeout,
            AsbError::Rejected(_) => TransportErrorKind::Rejected,
            AsbError::Auth(_) => TransportErrorKind::Auth,
            AsbError::Invalid(_) => TransportErrorKind::Unsupported,
            AsbError::ForeignDelivery(_) | AsbError::Client(_) => TransportErrorKind::Other,
        }
    }

    /// The same kind of error, its detail rewritten by `f` (to say where it came from).
    pub(crate) fn map_detail(self, f: impl FnOnce(&str) -> String) -> AsbError {
        let detail = f(self.detail());
        match self {
            AsbError::Config(_) => AsbError::Config(detail),
            AsbError::Connection(_) => AsbError::Connection(detail),
            AsbError::Auth(_) => AsbError::Auth(detail),
            AsbError::Timeout(_) => AsbError::Timeout(detail),
            AsbError::Rejected(_) => AsbError::Rejected(detail),
            AsbError::Invalid(_) => AsbError::Invalid(detail),
            AsbError::ForeignDelivery(_) => AsbError::ForeignDelivery(detail),
            AsbError::Client(_) => AsbError::Client(detail),
        }
    }

    /// What went wrong, without the variant's "Azure Service Bus …" prefix (for an error that
    /// lists several causes).
    pub(crate) fn detail(&self) -> &str {
        match self {
            AsbError::Config(s)
            | AsbError::Connection(s)
            | AsbError::Auth(s)
            | AsbError::Timeout(s)
            | AsbError::Rejected(s)
            | AsbError::Invalid(s)
            | AsbError::ForeignDelivery(s)
            | AsbError::Client(s) => s,
        }
    }

    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            TransportErrorKind::Connection | TransportErrorKind::Timeout
        )
    }
}

// The conversion into the runtime's `TransportError` is the contract's one blanket `From`:
// the transport's name as the message, this error as the source.
impl BrokerError for AsbError {
    const NAME: &'static str = "asb";
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
        for (e, kind, transient) in [
            (
                AsbError::Connection("x".into()),
                TransportErrorKind::Connection,
                true,
            ),
            (
                AsbError::Timeout("x".into()),
                TransportErrorKind::Timeout,
                true,
            ),
            (
                AsbError::Rejected("x".into()),
                TransportErrorKind::Rejected,
                false,
            ),
            (
                AsbError::Config("x".into()),
                TransportErrorKind::Config,
                false,
            ),
            (AsbError::Auth("x".into()), TransportErrorKind::Auth, false),
            (
                AsbError::Invalid("x".into()),
                TransportErrorKind::Unsupported,
                false,
            ),
            (
                AsbError::Client("x".into()),
                TransportErrorKind::Other,
                false,
            ),
        ] {
            assert_eq!(e.is_transient(), transient);
            let t: TransportError = e.into();
            assert_eq!(t.kind(), kind);
        }
    }

    #[test]
    fn a_converted_error_shows_its_cause_once() {
        let cause = "cause-7f3a";
        for error in [
            AsbError::Config(cause.into()),
            AsbError::Connection(cause.into()),
            AsbError::Auth(cause.into()),
            AsbError::Timeout(cause.into()),
            AsbError::Rejected(cause.into()),
            AsbError::Invalid(cause.into()),
            AsbError::ForeignDelivery(cause.into()),
            AsbError::Client(cause.into()),
        ] {
            let own = error.to_string();
            let shown = TransportError::from(error).to_string();
            assert_eq!(shown.matches(cause).count(), 1, "{shown}");
            assert_eq!(shown.matches(own.as_str()).count(), 1, "{shown}");
        }
    }
}
