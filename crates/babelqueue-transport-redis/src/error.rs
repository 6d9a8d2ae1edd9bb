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
    /// The server refused the credentials (`WRONGPASS`, `NOAUTH`): a wrong user name or
    /// password, or none where one is required. Not transient: a consume loop stops with it.
    #[error("Redis{} refused the credentials: {reason}", at(.endpoint))]
    Auth {
        /// `host:port` of the server, when known.
        endpoint: Option<String>,
        /// What the server answered.
        reason: String,
    },
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
    /// The server refused the credentials.
    Auth,
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
            Error::Auth { .. } => ErrorKind::Auth,
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
            F::Auth => Error::Auth {
                endpoint: None,
                reason: e.details().to_owned(),
            },
            F::Config | F::Url => Error::Config(e.to_string()),
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
            ErrorKind::Auth => TransportErrorKind::Auth,
            ErrorKind::Server => TransportErrorKind::Rejected,
            ErrorKind::Protocol => TransportErrorKind::Other,
            ErrorKind::Unsupported => TransportErrorKind::Unsupported,
        };
        // `Display` of a `TransportError` appends its source: the message only names the
        // transport, so the text is not said twice.
        TransportError::new(kind, "redis").with_source(e)
    }
}

/// ` at <endpoint>`, or nothing.
fn at(endpoint: &Option<String>) -> String {
    endpoint
        .as_deref()
        .map_or_else(String::new, |e| format!(" at {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_credentials_are_auth_errors() {
        for reply in [
            "WRONGPASS invalid username-password pair or user is disabled.",
            "NOAUTH Authentication required.",
        ] {
            let fred = fred::error::Error::new(fred::error::ErrorKind::Auth, reply);
            let error = Error::from(fred);
            assert_eq!(error.kind(), ErrorKind::Auth, "{error:?}");
            assert!(!error.is_transient());
            assert_eq!(
                error.to_string(),
                format!("Redis refused the credentials: {reply}")
            );
            let text = error.to_string();
            let mapped = TransportError::from(error);
            assert_eq!(mapped.kind(), TransportErrorKind::Auth);
            assert!(!mapped.is_transient());
            assert_eq!(mapped.to_string(), format!("redis: {text}"), "said once");
        }
        let named = Error::Auth {
            endpoint: Some("127.0.0.1:6379".into()),
            reason: "WRONGPASS".into(),
        };
        assert_eq!(
            named.to_string(),
            "Redis at 127.0.0.1:6379 refused the credentials: WRONGPASS"
        );
        // Other configuration errors stay configuration errors.
        let config = Error::from(fred::error::Error::new(
            fred::error::ErrorKind::Config,
            "Invalid or missing host.",
        ));
        assert_eq!(config.kind(), ErrorKind::Config);
    }
}
