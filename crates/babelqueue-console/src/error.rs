//! The console's one error type.

use std::net::SocketAddr;

/// What can go wrong starting or serving the console.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// A non-loopback `--listen` without `BABELQUEUE_ADMIN_TOKEN`.
    #[error(
        "refusing to listen on {addr} without an admin token: anyone who can reach it could \
         retry and remove dead letters; set BABELQUEUE_ADMIN_TOKEN (a long random secret) or \
         listen on a loopback address such as 127.0.0.1:8025"
    )]
    TokenRequired {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A queue or source that is not configured.
    #[error("no such queue: {0}")]
    NotFound(String),
    /// The console runs with `--read-only`.
    #[error("the console is read-only (--read-only): {0} is refused")]
    ReadOnly(String),
    /// A request without the right CSRF token.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// A request the console refuses (a bad parameter).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// A broker call failed (its text is scrubbed of the broker URL's secrets).
    #[error("broker: {0}")]
    Broker(String),
    /// Binding or serving the listener failed.
    #[error("serving {addr}: {message}")]
    Serve {
        /// The address.
        addr: String,
        /// What failed.
        message: String,
    },
}

/// The kinds of [`ConsoleError`], to branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`ConsoleError::TokenRequired`].
    Insecure,
    /// [`ConsoleError::NotFound`].
    NotFound,
    /// [`ConsoleError::ReadOnly`].
    ReadOnly,
    /// [`ConsoleError::Forbidden`].
    Forbidden,
    /// [`ConsoleError::BadRequest`].
    BadRequest,
    /// [`ConsoleError::Broker`].
    Broker,
    /// [`ConsoleError::Serve`].
    Serve,
}

impl ConsoleError {
    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ConsoleError::TokenRequired { .. } => ErrorKind::Insecure,
            ConsoleError::NotFound(_) => ErrorKind::NotFound,
            ConsoleError::ReadOnly(_) => ErrorKind::ReadOnly,
            ConsoleError::Forbidden(_) => ErrorKind::Forbidden,
            ConsoleError::BadRequest(_) => ErrorKind::BadRequest,
            ConsoleError::Broker(_) => ErrorKind::Broker,
            ConsoleError::Serve { .. } => ErrorKind::Serve,
        }
    }

    /// Whether trying again later may succeed (a broker call).
    pub fn is_transient(&self) -> bool {
        matches!(self, ConsoleError::Broker(_))
    }

    /// The HTTP status the error answers with.
    pub(crate) fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self.kind() {
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::ReadOnly | ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::Broker => StatusCode::BAD_GATEWAY,
            ErrorKind::Insecure | ErrorKind::Serve => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}
