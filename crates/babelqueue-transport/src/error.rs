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
