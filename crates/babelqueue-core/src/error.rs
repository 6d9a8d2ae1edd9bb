pub use babelqueue_transport::{BrokerError, TransportError, TransportErrorKind};

/// Everything the runtime can report to its caller.
///
/// `Display` is for people and logs; code branches on [`Error::kind`] or
/// [`Error::is_transient`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The codec refused the message (blank URN, forbidden key, non-object `data` …).
    #[error(transparent)]
    Envelope(#[from] babelqueue_envelope::Error),
    /// The broker failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The configuration cannot work.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A setting (an environment variable, a key of a settings file) whose value is not of
    /// the form it expects: `BABELQUEUE_MAX_ATTEMPTS: expected a whole number ≥ 1, got "three"`.
    #[error("{name}: expected {expected}, got {got:?}")]
    Setting {
        /// The variable (`BABELQUEUE_MAX_ATTEMPTS`) or key (`max_attempts`, after the file).
        name: String,
        /// The form a value must have.
        expected: String,
        /// The value given (a URL with its password masked).
        got: String,
    },
    /// The broker URL names a scheme this build does not carry.
    #[error("unsupported broker URL scheme {scheme:?}: {hint}")]
    UnsupportedScheme {
        /// The scheme found.
        scheme: String,
        /// What to do about it.
        hint: String,
    },
    /// `data` does not match the JSON schema registered for its URN.
    #[error("data for {urn:?} does not match its URN schema: {violation}")]
    InvalidPayload {
        /// The URN.
        urn: String,
        /// The first violation, `<path>: <reason>`.
        violation: String,
    },
    /// A schema provider could not load a schema.
    #[error("schema provider: {0}")]
    Schema(String),
    /// Redrive stopped early (the message it was on was restored to the DLQ first).
    #[error("redrive stopped: {0}")]
    Redrive(String),
}

/// The broad class of an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A message the contract does not allow.
    InvalidMessage,
    /// A broker failure; see [`Error::is_transient`].
    Transport,
    /// A configuration that cannot work (including unsupported schemes).
    Config,
    /// A payload that fails its schema.
    InvalidPayload,
    /// Redrive stopped early.
    Redrive,
}

impl Error {
    /// The class of the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Envelope(_) => ErrorKind::InvalidMessage,
            // A transport that refuses its own URL or options is a configuration problem,
            // whichever layer reports it.
            Error::Transport(e) if e.kind() == TransportErrorKind::Config => ErrorKind::Config,
            Error::Transport(_) => ErrorKind::Transport,
            Error::Config(_)
            | Error::Setting { .. }
            | Error::UnsupportedScheme { .. }
            | Error::Schema(_) => ErrorKind::Config,
            Error::InvalidPayload { .. } => ErrorKind::InvalidPayload,
            Error::Redrive(_) => ErrorKind::Redrive,
        }
    }

    /// Whether retrying the same call later may succeed (a broker that is down or busy).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Transport(e) => e.is_transient(),
            Error::Redrive(_) => true,
            _ => false,
        }
    }
}

/// A `Result` with the runtime's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transport_refusing_its_configuration_is_a_config_error() {
        let err = Error::from(TransportError::config("unknown option `nope`"));
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(!err.is_transient());
        let err = Error::from(TransportError::connection("refused"));
        assert_eq!(err.kind(), ErrorKind::Transport);
        assert!(err.is_transient());
    }
}
