use babelqueue_core::{TransportError, TransportErrorKind};

/// What the Redis transport can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL or an option is invalid.
    #[error("invalid Redis transport configuration: {0}")]
    Config(String),
    /// The server could not be reached, or the connection dropped.
    #[error("Redis connection: {0}")]
    Connection(String),
    /// The server answered with an error (a script error, a wrong type, a cluster CROSSSLOT …).
    #[error("Redis replied with an error: {0}")]
    Server(String),
    /// The server answered something the transport cannot read.
    #[error("unexpected Redis reply: {0}")]
    Protocol(String),
    /// The operation does not exist in this layout (a delayed publish on the default layout).
    #[error("{0}")]
    Unsupported(String),
}

/// The class of an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bad URL or option.
    Config,
    /// Network trouble; worth retrying.
    Connection,
    /// The server refused the command.
    Server,
    /// An unreadable reply.
    Protocol,
    /// Not possible in this layout.
    Unsupported,
}

impl Error {
    /// The class of the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Config(_) => ErrorKind::Config,
            Error::Connection(_) => ErrorKind::Connection,
            Error::Server(_) => ErrorKind::Server,
            Error::Protocol(_) => ErrorKind::Protocol,
            Error::Unsupported(_) => ErrorKind::Unsupported,
        }
    }

    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        self.kind() == ErrorKind::Connection
    }
}

impl From<fred::error::Error> for Error {
    fn from(e: fred::error::Error) -> Self {
        use fred::error::ErrorKind as F;
        match e.kind() {
            F::IO | F::Timeout | F::Canceled | F::Backpressure | F::Tls => {
                Error::Connection(e.to_string())
            }
            F::Config | F::Url | F::Auth => Error::Config(e.to_string()),
            F::Parse | F::Protocol => Error::Protocol(e.to_string()),
            _ => Error::Server(e.to_string()),
        }
    }
}

impl From<Error> for TransportError {
    fn from(e: Error) -> Self {
        let kind = match e.kind() {
            ErrorKind::Config => TransportErrorKind::Config,
            ErrorKind::Connection => TransportErrorKind::Connection,
            ErrorKind::Server => TransportErrorKind::Rejected,
            ErrorKind::Protocol => TransportErrorKind::Other,
            ErrorKind::Unsupported => TransportErrorKind::Unsupported,
        };
        TransportError::new(kind, format!("redis: {e}")).with_source(e)
    }
}
