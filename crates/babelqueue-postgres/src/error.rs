use babelqueue_core::idempotency::StoreError;

/// What the PostgreSQL stores can fail with.
///
/// `Display` is for people and logs; code branches on [`Error::kind`] or
/// [`Error::is_transient`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL, a table name or a TLS file is invalid.
    #[error("invalid PostgreSQL configuration: {0}")]
    Config(String),
    /// The server could not be reached, or the connection was lost.
    #[error("PostgreSQL connection: {message}")]
    Connection {
        /// What failed.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<tokio_postgres::Error>,
    },
    /// The server refused the credentials (SQLSTATE `28P01` invalid password, `28000` invalid
    /// authorization: a wrong password, an unknown role, no `pg_hba.conf` entry). Not
    /// transient.
    #[error("PostgreSQL{} refused the credentials: {message}", at(.endpoint))]
    Auth {
        /// `host:port` of the server, when known.
        endpoint: Option<String>,
        /// The server's message (with its SQLSTATE code).
        message: String,
        /// The SQLSTATE code.
        code: String,
        /// The underlying error.
        #[source]
        source: Option<tokio_postgres::Error>,
    },
    /// The server refused a statement.
    #[error("PostgreSQL: {message}")]
    Database {
        /// The server's message (with its SQLSTATE code).
        message: String,
        /// The SQLSTATE code, when the server sent one.
        code: Option<String>,
        /// Whether the same statement may succeed later (a serialization failure, a deadlock,
        /// a server shutting down …).
        transient: bool,
        /// The underlying error.
        #[source]
        source: Option<tokio_postgres::Error>,
    },
    /// The server answered something this crate cannot read.
    #[error("unexpected PostgreSQL answer: {0}")]
    Protocol(String),
}

/// The class of an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bad configuration.
    Config,
    /// Network trouble; worth retrying.
    Connection,
    /// The server refused the credentials.
    Auth,
    /// The server refused a statement; see [`Error::is_transient`].
    Database,
    /// An unreadable answer.
    Protocol,
}

impl Error {
    /// The class of the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Config(_) => ErrorKind::Config,
            Error::Connection { .. } => ErrorKind::Connection,
            Error::Auth { .. } => ErrorKind::Auth,
            Error::Database { .. } => ErrorKind::Database,
            Error::Protocol(_) => ErrorKind::Protocol,
        }
    }

    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Connection { .. } => true,
            Error::Database { transient, .. } => *transient,
            _ => false,
        }
    }

    /// The SQLSTATE code of a [`Error::Database`] error (`42P01` for a missing table …).
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            Error::Database { code, .. } => code.as_deref(),
            Error::Auth { code, .. } => Some(code),
            _ => None,
        }
    }

    pub(crate) fn connection(message: impl Into<String>) -> Error {
        Error::Connection {
            message: message.into(),
            source: None,
        }
    }
}

/// SQLSTATE codes of refused credentials: `28P01` invalid password, `28000` invalid
/// authorization specification.
const AUTH_SQLSTATES: &[&str] = &["28P01", "28000"];

/// ` at <endpoint>`, or nothing.
fn at(endpoint: &Option<String>) -> String {
    endpoint
        .as_deref()
        .map_or_else(String::new, |e| format!(" at {e}"))
}

/// SQLSTATE classes and codes that describe a condition that passes: connection exceptions
/// (08), serialization failures and deadlocks (40001, 40P01), insufficient resources (53),
/// operator intervention such as a shutdown (57), a lock not available (55P03).
fn transient_sqlstate(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("53")
        || code.starts_with("57")
        || matches!(code, "40001" | "40P01" | "55P03")
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Error {
        if let Some(db) = e.as_db_error() {
            let code = db.code().code().to_owned();
            if AUTH_SQLSTATES.contains(&code.as_str()) {
                return Error::Auth {
                    endpoint: None,
                    message: format!("{} ({code})", db.message()),
                    code,
                    source: Some(e),
                };
            }
            return Error::Database {
                message: format!("{} ({code})", db.message()),
                transient: transient_sqlstate(&code),
                code: Some(code),
                source: Some(e),
            };
        }
        // No server error: the connection is closed, an I/O or TLS failure, a timeout.
        let message = match std::error::Error::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        };
        Error::Connection {
            message,
            source: Some(e),
        }
    }
}

impl From<Error> for babelqueue_outbox::Error {
    fn from(e: Error) -> babelqueue_outbox::Error {
        match e {
            Error::Config(message) => babelqueue_outbox::Error::Config(message),
            other => {
                let base = if other.is_transient() {
                    babelqueue_outbox::Error::transient(format!("postgres: {other}"))
                } else {
                    babelqueue_outbox::Error::store(format!("postgres: {other}"))
                };
                base.with_source(other)
            }
        }
    }
}

impl From<Error> for StoreError {
    fn from(e: Error) -> StoreError {
        StoreError::with_source(format!("postgres: {e}"), e)
    }
}
