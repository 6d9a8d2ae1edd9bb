/// Everything the outbox can fail with.
///
/// `Display` is for people and logs; code branches on [`Error::kind`] or
/// [`Error::is_transient`]. A broker failure during a relay pass is not an error of the pass:
/// it is recorded on the row (see [`OutboxRelay`](crate::OutboxRelay)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The codec refused the envelope (a forbidden key, the `urn` alias): nothing was stored.
    #[error("the envelope cannot be written to the outbox: {0}")]
    InvalidMessage(#[from] babelqueue_envelope::Error),
    /// The store failed (a database error, a lost connection).
    #[error("outbox store: {message}")]
    Store {
        /// What failed.
        message: String,
        /// Whether trying again later may succeed (a lost connection, a serialization
        /// conflict).
        transient: bool,
        /// The underlying error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The configuration cannot work.
    #[error("invalid outbox configuration: {0}")]
    Config(String),
}

/// The broad class of an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The envelope cannot be encoded.
    InvalidMessage,
    /// The store failed; see [`Error::is_transient`].
    Store,
    /// A configuration that cannot work.
    Config,
}

impl Error {
    /// A store failure that will not go away by itself (a missing table, a permission, a
    /// constraint).
    pub fn store(message: impl Into<String>) -> Error {
        Error::Store {
            message: message.into(),
            transient: false,
            source: None,
        }
    }

    /// A store failure worth retrying (the database is unreachable or busy).
    pub fn transient(message: impl Into<String>) -> Error {
        Error::Store {
            message: message.into(),
            transient: true,
            source: None,
        }
    }

    /// Attaches the underlying error (store errors only; other variants are returned as is).
    #[must_use]
    pub fn with_source(self, cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        match self {
            Error::Store {
                message, transient, ..
            } => Error::Store {
                message,
                transient,
                source: Some(cause.into()),
            },
            other => other,
        }
    }

    /// The class of the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidMessage(_) => ErrorKind::InvalidMessage,
            Error::Store { .. } => ErrorKind::Store,
            Error::Config(_) => ErrorKind::Config,
        }
    }

    /// Whether the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Store {
                transient: true,
                ..
            }
        )
    }
}

/// A `Result` with the outbox [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_transience() {
        let e = Error::transient("connection reset").with_source(std::io::Error::other("eof"));
        assert_eq!(e.kind(), ErrorKind::Store);
        assert!(e.is_transient());
        assert!(std::error::Error::source(&e).is_some());
        let e = Error::store("relation \"babelqueue_outbox\" does not exist");
        assert!(!e.is_transient());
        assert_eq!(
            e.to_string(),
            "outbox store: relation \"babelqueue_outbox\" does not exist"
        );
        let e = Error::Config("batch_size must be at least 1".into());
        assert_eq!(e.kind(), ErrorKind::Config);
        assert!(!e.with_source(std::io::Error::other("x")).is_transient());
    }
}
