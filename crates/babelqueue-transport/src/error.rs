use std::fmt;

/// A broker failure, as a transport reports it.
#[derive(Debug)]
pub struct TransportError {
    kind: TransportErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// The class of a [`TransportError`]; the runtime decides retry and reconnect on it, never on
/// the message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportErrorKind {
    /// The broker cannot be reached or the connection dropped. Transient.
    Connection,
    /// The broker did not answer in time. Transient.
    Timeout,
    /// The broker refused the operation (a nack, an unknown queue, a permission). Not transient.
    Rejected,
    /// The broker refused the credentials (a wrong password, an expired token, a SASL
    /// handshake that failed). Not transient: a consume loop that meets it stops with it, so
    /// a worker started with wrong credentials exits with an error instead of polling forever.
    Auth,
    /// The transport's own configuration is wrong (bad URL, an unsupported option). Not
    /// transient: a consume loop whose receive reports it stops with it.
    Config,
    /// The operation is not possible for this message or configuration (a FIFO delay, a delay
    /// above the broker's limit). Not transient.
    Unsupported,
    /// Anything else.
    Other,
}

impl TransportError {
    /// A new error of `kind`.
    pub fn new(kind: TransportErrorKind, message: impl Into<String>) -> TransportError {
        TransportError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// Attaches the underlying error.
    #[must_use]
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> TransportError {
        self.source = Some(source.into());
        self
    }

    /// A [`TransportErrorKind::Connection`] error.
    pub fn connection(message: impl Into<String>) -> TransportError {
        TransportError::new(TransportErrorKind::Connection, message)
    }

    /// A [`TransportErrorKind::Rejected`] error.
    pub fn rejected(message: impl Into<String>) -> TransportError {
        TransportError::new(TransportErrorKind::Rejected, message)
    }

    /// A [`TransportErrorKind::Config`] error.
    pub fn config(message: impl Into<String>) -> TransportError {
        TransportError::new(TransportErrorKind::Config, message)
    }

    /// A [`TransportErrorKind::Auth`] error.
    pub fn auth(message: impl Into<String>) -> TransportError {
        TransportError::new(TransportErrorKind::Auth, message)
    }

    /// A [`TransportErrorKind::Unsupported`] error.
    pub fn unsupported(message: impl Into<String>) -> TransportError {
        TransportError::new(TransportErrorKind::Unsupported, message)
    }

    /// A [`TransportErrorKind::Other`] error.
    pub fn other(message: impl Into<String>) -> TransportError {
        TransportError::new(TransportErrorKind::Other, message)
    }

    /// The class of the error.
    pub fn kind(&self) -> TransportErrorKind {
        self.kind
    }

    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            TransportErrorKind::Connection | TransportErrorKind::Timeout
        )
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// A transport crate's own error type, which converts into a [`TransportError`] with `?`.
///
/// Every transport keeps its broker's failures in an enum of its own (what went wrong, in the
/// broker's terms) and says which [`TransportErrorKind`] each is; the one blanket
/// `From<E: BrokerError>` below makes the conversion, so it is written, and changed, once:
/// the converted error's message is the transport's [`NAME`](BrokerError::NAME) and its
/// source is the broker error itself. `Display` of a [`TransportError`] appends its source,
/// so the cause is shown once, after the name.
///
/// ```
/// use babelqueue_transport::{BrokerError, TransportError, TransportErrorKind};
///
/// #[derive(Debug)]
/// struct Refused;
///
/// impl std::fmt::Display for Refused {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("the broker said no")
///     }
/// }
///
/// impl std::error::Error for Refused {}
///
/// impl BrokerError for Refused {
///     const NAME: &'static str = "toy";
///     fn transport_kind(&self) -> TransportErrorKind {
///         TransportErrorKind::Rejected
///     }
/// }
///
/// let e = TransportError::from(Refused);
/// assert_eq!(e.kind(), TransportErrorKind::Rejected);
/// assert_eq!(e.to_string(), "toy: the broker said no");
/// ```
// `TransportError` itself must never implement this trait: the blanket conversion would then
// overlap the standard `From<T> for T`.
pub trait BrokerError: std::error::Error + Send + Sync + 'static {
    /// The transport's name (`"redis"`, `"kafka"`, …): the converted error's message.
    const NAME: &'static str;

    /// The class the runtime decides retry and reconnect on.
    fn transport_kind(&self) -> TransportErrorKind;
}

impl<E: BrokerError> From<E> for TransportError {
    fn from(error: E) -> TransportError {
        TransportError::new(error.transport_kind(), E::NAME).with_source(error)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[derive(Debug)]
    enum ToyError {
        Down(&'static str),
        Refused,
    }

    impl fmt::Display for ToyError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                ToyError::Down(why) => write!(f, "the broker is down: {why}"),
                ToyError::Refused => f.write_str("the broker refused"),
            }
        }
    }

    impl std::error::Error for ToyError {}

    impl BrokerError for ToyError {
        const NAME: &'static str = "toy";
        fn transport_kind(&self) -> TransportErrorKind {
            match self {
                ToyError::Down(_) => TransportErrorKind::Connection,
                ToyError::Refused => TransportErrorKind::Rejected,
            }
        }
    }

    #[test]
    fn a_broker_error_converts_with_its_kind_the_transport_name_and_itself_as_source() {
        let e = TransportError::from(ToyError::Down("refused"));
        assert_eq!(e.kind(), TransportErrorKind::Connection);
        assert!(e.is_transient());
        assert_eq!(e.message(), "toy");
        assert_eq!(e.to_string(), "toy: the broker is down: refused");
        let source = e.source().expect("the broker error is the source");
        assert_eq!(source.to_string(), "the broker is down: refused");
        assert!(matches!(
            source.downcast_ref::<ToyError>(),
            Some(ToyError::Down("refused"))
        ));

        let refused: TransportError = ToyError::Refused.into();
        assert_eq!(refused.kind(), TransportErrorKind::Rejected);
        assert!(!refused.is_transient());
        assert_eq!(refused.to_string(), "toy: the broker refused");
    }

    #[test]
    fn question_mark_converts() {
        fn publish() -> Result<(), TransportError> {
            Err(ToyError::Refused)?;
            Ok(())
        }
        let e = publish().unwrap_err();
        assert_eq!(
            (e.kind(), e.message()),
            (TransportErrorKind::Rejected, "toy")
        );
    }
}
