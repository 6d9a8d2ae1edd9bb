//! [`RedisError`]: what the Redis transport can fail with, and its mapping onto the runtime's
//! [`TransportError`](babelqueue_core::TransportError).

use babelqueue_core::{BrokerError, TransportErrorKind};
use babelqueue_envelope::CjsonFinding;

/// What the Redis transport can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisError {
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
    /// `laravel_safe=refuse` refused a publish on the Laravel layout: a Laravel worker's pop
    /// would change what a body says (or lose it, when cjson fails on it). Nothing of the
    /// publish was sent (of a batch, no body). Not transient: the same body is refused again.
    #[error("{}", laravel_unsafe(.queue, .index, .findings))]
    LaravelUnsafe {
        /// The queue of the publish.
        queue: String,
        /// The body's position in the batch (`None` for a single publish).
        index: Option<usize>,
        /// What a Laravel pop would change in it, in document order (never empty).
        findings: Vec<CjsonFinding>,
    },
    /// `wait_replicas=N`: the write was made on the master, but fewer than `N` replicas
    /// confirmed it (`WAIT`) within `wait_timeout_ms`. Redis replicates asynchronously, so a
    /// failover now could drop it. Transient: a retry may land on a healthy master, and may
    /// store the message twice (the first write can survive), which at-least-once delivery
    /// allows.
    #[error("{}", not_replicated(.what, *.acked, *.wanted, *.timeout_ms, .cause))]
    NotReplicated {
        /// What was written (`a publish to "orders"`).
        what: String,
        /// How many replicas confirmed it.
        acked: i64,
        /// How many `wait_replicas` asks for.
        wanted: u32,
        /// How long the publish waited.
        timeout_ms: u64,
        /// The error `WAIT` itself failed with, if it did.
        cause: Option<String>,
    },
    /// Redis Cluster, Laravel layout: the queue's key has no hash tag, so its keys
    /// (`queues:Q`, `:reserved`, `:delayed`, `:notify`) may live in different slots and no
    /// script could touch them together. Laravel's own rule on a cluster. Not transient.
    #[error(
        "queue {queue:?} has no hash tag: on Redis Cluster the Laravel layout keeps a queue's keys ({key}, {key}:reserved, {key}:delayed, {key}:notify) in one slot only when the key carries a hash tag, as Laravel's own cluster setup requires; use the queue name \"{{{queue}}}\""
    )]
    MissingHashTag {
        /// The queue as given.
        queue: String,
        /// Its ready key.
        key: String,
    },
    /// The server cannot serve the command now and says so (`TRYAGAIN` during a slot
    /// migration, `CLUSTERDOWN`, `LOADING`, `MASTERDOWN`, `READONLY` from a master that became
    /// a replica, `UNBLOCKED` when a failover ends a blocking wait). Transient.
    #[error("Redis is not available for this command now (a failover or a resharding): {0}")]
    Unavailable(String),
}

impl RedisError {
    /// The runtime's class of the error.
    pub fn kind(&self) -> TransportErrorKind {
        match self {
            RedisError::Config(_) => TransportErrorKind::Config,
            RedisError::Connection(_) => TransportErrorKind::Connection,
            RedisError::Auth { .. } => TransportErrorKind::Auth,
            RedisError::Server(_) => TransportErrorKind::Rejected,
            RedisError::Protocol(_) => TransportErrorKind::Other,
            RedisError::Unsupported(_) | RedisError::LaravelUnsafe { .. } => {
                TransportErrorKind::Unsupported
            }
            RedisError::NotReplicated { .. } => TransportErrorKind::Timeout,
            RedisError::MissingHashTag { .. } => TransportErrorKind::Config,
            RedisError::Unavailable(_) => TransportErrorKind::Connection,
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

/// The old name of [`RedisError`].
#[deprecated(note = "renamed to RedisError")]
pub type Error = RedisError;

impl From<fred::error::Error> for RedisError {
    fn from(e: fred::error::Error) -> Self {
        use fred::error::ErrorKind as F;
        match e.kind() {
            F::IO | F::Timeout | F::Canceled | F::Backpressure | F::Tls => {
                RedisError::Connection(e.to_string())
            }
            F::Auth => RedisError::Auth {
                endpoint: None,
                reason: e.details().to_owned(),
            },
            F::Config | F::Url => RedisError::Config(e.to_string()),
            F::Parse | F::Protocol => RedisError::Protocol(e.to_string()),
            F::Cluster | F::Sentinel | F::Routing => RedisError::Unavailable(e.to_string()),
            _ if unavailable(e.details()) => RedisError::Unavailable(e.to_string()),
            _ => RedisError::Server(e.to_string()),
        }
    }
}

/// Whether a server error reply says "not now": the command may succeed once a failover or a
/// slot migration is over.
pub(crate) fn unavailable(reply: &str) -> bool {
    const NOT_NOW: [&str; 8] = [
        "TRYAGAIN",
        "CLUSTERDOWN",
        "LOADING",
        "MASTERDOWN",
        "READONLY",
        "UNBLOCKED",
        "NOREPLICAS",
        "MOVED",
    ];
    let reply = reply.trim_start();
    // A script error quotes the command's reply after its own words.
    NOT_NOW.iter().any(|code| {
        reply.starts_with(code)
            || reply.contains(&format!(": {code} "))
            || reply.contains(&format!("-{code} "))
    })
}

/// The message of [`RedisError::NotReplicated`].
fn not_replicated(
    what: &str,
    acked: i64,
    wanted: u32,
    timeout_ms: u64,
    cause: &Option<String>,
) -> String {
    let answer = match cause {
        Some(cause) => format!("WAIT failed ({cause})"),
        None => format!("{acked} of the {wanted} replicas wait_replicas asks for confirmed it"),
    };
    format!(
        "{what} was written on the Redis master, but not confirmed by its replicas within wait_timeout_ms={timeout_ms}: {answer}; a failover could still drop it, and a retry may store it twice"
    )
}

// The conversion into the runtime's `TransportError` is the contract's one blanket `From`:
// the transport's name as the message, this error as the source.
impl BrokerError for RedisError {
    const NAME: &'static str = "redis";
    fn transport_kind(&self) -> TransportErrorKind {
        self.kind()
    }
}

/// What a fred error says, readable. fred keeps an I/O error only as its `Debug` text
/// (`Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }`); that becomes
/// `connection refused (os error 111)`. Other errors keep their `Display`.
pub(crate) fn cause(e: &fred::error::Error) -> String {
    if *e.kind() != fred::error::ErrorKind::IO {
        return e.to_string();
    }
    io_cause(e.details())
}

/// The readable form of the `Debug` text of an `std::io::Error` (see [`cause`]).
fn io_cause(details: &str) -> String {
    let quoted = |key: &str| {
        let start = details.find(key)? + key.len();
        let end = details[start..].find('"')?;
        Some(&details[start..start + end])
    };
    let lower_first = |text: &str| {
        let mut chars = text.chars();
        chars.next().map_or_else(String::new, |c| {
            c.to_lowercase().chain(chars).collect::<String>()
        })
    };
    if let Some(message) = quoted("message: \"") {
        let code = details
            .split_once("code: ")
            .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
            .filter(|code| !code.is_empty());
        return match code {
            Some(code) => format!("{} (os error {code})", lower_first(message)),
            None => lower_first(message),
        };
    }
    if let Some(error) = quoted("error: \"") {
        return error.to_owned();
    }
    // `Custom { kind: InvalidData, error: AlertReceived(CertificateRequired) }`: a TLS alert
    // the server sent (rustls), in words.
    if let Some(alert) = details
        .split_once("error: AlertReceived(")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(alert, _)| alert)
    {
        return tls_alert(alert);
    }
    // `Kind(TimedOut)`: the kind, in words.
    if let Some(kind) = details
        .strip_prefix("Kind(")
        .and_then(|k| k.strip_suffix(')'))
    {
        return words(kind);
    }
    details.to_owned()
}

/// A TLS alert the server ended the handshake with (rustls' name of it), in words, with what the
/// alerts about the client certificate usually mean.
fn tls_alert(alert: &str) -> String {
    let hint = match alert {
        "CertificateRequired" => {
            " (the server requires a client certificate: cert_file and key_file)"
        }
        "UnknownCA"
        | "BadCertificate"
        | "UnsupportedCertificate"
        | "CertificateUnknown"
        | "CertificateExpired"
        | "CertificateRevoked"
        | "AccessDenied" => " (the server does not accept the client certificate)",
        _ => "",
    };
    format!("the server ended the TLS handshake: {}{hint}", words(alert))
}

/// `TimedOut` as `timed out`, `UnknownCA` as `unknown ca`.
fn words(camel: &str) -> String {
    let mut words = String::new();
    let mut lower_before = false;
    for c in camel.chars() {
        if c.is_ascii_uppercase() && lower_before {
            words.push(' ');
        }
        lower_before = c.is_ascii_lowercase();
        words.push(c.to_ascii_lowercase());
    }
    words
}

/// The message of [`RedisError::LaravelUnsafe`]: the body, its first finding (the first that
/// loses the job, if one does), how many more.
fn laravel_unsafe(queue: &str, index: &Option<usize>, findings: &[CjsonFinding]) -> String {
    let failing = findings.iter().find(|f| f.change.fails());
    let lost = failing.is_some();
    let body = match index {
        Some(i) => format!("body {i} of the batch"),
        None => "the body".to_owned(),
    };
    let mut text = format!(
        "laravel_safe=refuse: a Laravel worker's pop would {} {body} for queue {queue:?}",
        if lost { "lose" } else { "change" }
    );
    if let Some(first) = failing.or(findings.first()) {
        text.push_str(": ");
        text.push_str(&first.to_string());
    }
    if findings.len() > 1 {
        text.push_str(&format!(" (and {} more)", findings.len() - 1));
    }
    text.push_str("; nothing was sent");
    text
}

/// ` at <endpoint>`, or nothing.
fn at(endpoint: &Option<String>) -> String {
    endpoint
        .as_deref()
        .map_or_else(String::new, |e| format!(" at {e}"))
}

#[cfg(test)]
mod tests {
    use babelqueue_core::TransportError;

    use super::*;

    #[test]
    fn refused_credentials_are_auth_errors() {
        for reply in [
            "WRONGPASS invalid username-password pair or user is disabled.",
            "NOAUTH Authentication required.",
        ] {
            let fred = fred::error::Error::new(fred::error::ErrorKind::Auth, reply);
            let error = RedisError::from(fred);
            assert_eq!(error.kind(), TransportErrorKind::Auth, "{error:?}");
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
        let named = RedisError::Auth {
            endpoint: Some("127.0.0.1:6379".into()),
            reason: "WRONGPASS".into(),
        };
        assert_eq!(
            named.to_string(),
            "Redis at 127.0.0.1:6379 refused the credentials: WRONGPASS"
        );
        // Other configuration errors stay configuration errors.
        let config = RedisError::from(fred::error::Error::new(
            fred::error::ErrorKind::Config,
            "Invalid or missing host.",
        ));
        assert_eq!(config.kind(), TransportErrorKind::Config);
    }

    #[test]
    fn io_errors_read_as_their_cause() {
        let io = |e: std::io::Error| cause(&fred::error::Error::from(e));
        assert_eq!(
            io(std::io::Error::from_raw_os_error(111)),
            "connection refused (os error 111)"
        );
        assert_eq!(
            io(std::io::Error::from(std::io::ErrorKind::TimedOut)),
            "timed out"
        );
        assert_eq!(
            io(std::io::Error::other("no route to 10.0.0.1")),
            "no route to 10.0.0.1"
        );
        // a TLS alert of the server (a refused client certificate), as rustls reports it
        let alert = |a| {
            io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                fred::rustls::Error::AlertReceived(a),
            ))
        };
        assert_eq!(
            alert(fred::rustls::AlertDescription::CertificateRequired),
            "the server ended the TLS handshake: certificate required (the server requires a client certificate: cert_file and key_file)"
        );
        assert_eq!(
            alert(fred::rustls::AlertDescription::UnknownCA),
            "the server ended the TLS handshake: unknown ca (the server does not accept the client certificate)"
        );
        assert_eq!(
            alert(fred::rustls::AlertDescription::HandshakeFailure),
            "the server ended the TLS handshake: handshake failure"
        );
        let other = fred::error::Error::new(fred::error::ErrorKind::Timeout, "took too long");
        assert_eq!(cause(&other), "Timeout Error: took too long");
    }

    #[test]
    fn a_refused_laravel_publish_names_the_body_and_its_first_finding() {
        let refused = |index, body: &[u8]| RedisError::LaravelUnsafe {
            queue: "orders".into(),
            index,
            findings: babelqueue_envelope::cjson_changes(body),
        };
        let one = refused(None, br#"{"data":{"n":123456789012345}}"#);
        assert_eq!(
            one.to_string(),
            r#"laravel_safe=refuse: a Laravel worker's pop would change the body for queue "orders": data.n: 123456789012345 becomes 1.2345678901234e+14; nothing was sent"#
        );
        // The first finding that loses the job is named before the others.
        let lost = refused(Some(2), br#"{"data":{"a":[],"b":[],"n":1e400}}"#);
        assert_eq!(
            lost.to_string(),
            r#"laravel_safe=refuse: a Laravel worker's pop would lose body 2 of the batch for queue "orders": data.n: 1e400 is beyond a double; cjson cannot encode it (the round trip fails) (and 2 more); nothing was sent"#
        );
        assert_eq!(lost.kind(), TransportErrorKind::Unsupported);
        assert!(!lost.is_transient());
        let mapped = TransportError::from(lost);
        assert_eq!(mapped.kind(), TransportErrorKind::Unsupported);
        assert!(!mapped.is_transient());
    }

    #[test]
    fn failover_and_resharding_replies_are_transient_and_others_are_not() {
        for (kind, reply, transient) in [
            (
                fred::error::ErrorKind::Unknown,
                "TRYAGAIN Multiple keys request during rehashing of slot",
                true,
            ),
            (
                fred::error::ErrorKind::Unknown,
                "READONLY You can't write against a read only replica.",
                true,
            ),
            (
                fred::error::ErrorKind::Unknown,
                "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
                true,
            ),
            (
                fred::error::ErrorKind::Unknown,
                "LOADING Redis is loading the dataset in memory",
                true,
            ),
            (
                fred::error::ErrorKind::Cluster,
                "CLUSTERDOWN The cluster is down",
                true,
            ),
            (
                fred::error::ErrorKind::Routing,
                "Too many redirections.",
                true,
            ),
            (
                fred::error::ErrorKind::Sentinel,
                "Failed to connect to all sentinel nodes.",
                true,
            ),
            (
                fred::error::ErrorKind::Unknown,
                "CROSSSLOT Keys in request don't hash to the same slot",
                false,
            ),
            (
                fred::error::ErrorKind::Unknown,
                "BQWRONGTYPE key q holds a string where a list is expected; nothing was moved",
                false,
            ),
        ] {
            let error = RedisError::from(fred::error::Error::new(kind, reply));
            assert_eq!(error.is_transient(), transient, "{reply}: {error:?}");
            assert!(error.to_string().contains(reply), "{error}");
        }
        let not_replicated = RedisError::NotReplicated {
            what: "a publish to \"orders\"".into(),
            acked: 1,
            wanted: 2,
            timeout_ms: 250,
            cause: None,
        };
        assert_eq!(not_replicated.kind(), TransportErrorKind::Timeout);
        assert!(not_replicated.is_transient());
        assert_eq!(
            not_replicated.to_string(),
            "a publish to \"orders\" was written on the Redis master, but not confirmed by its replicas within wait_timeout_ms=250: 1 of the 2 replicas wait_replicas asks for confirmed it; a failover could still drop it, and a retry may store it twice"
        );
        assert!(TransportError::from(not_replicated).is_transient());
        let hash_tag = RedisError::MissingHashTag {
            queue: "orders".into(),
            key: "queues:orders".into(),
        };
        assert_eq!(hash_tag.kind(), TransportErrorKind::Config);
        assert!(!hash_tag.is_transient());
    }

    #[test]
    fn a_converted_error_shows_its_cause_once() {
        let cause = "cause-7f3a";
        for error in [
            RedisError::Config(cause.into()),
            RedisError::Connection(cause.into()),
            RedisError::Auth {
                endpoint: Some("127.0.0.1:6379".into()),
                reason: cause.into(),
            },
            RedisError::Server(cause.into()),
            RedisError::Protocol(cause.into()),
            RedisError::Unsupported(cause.into()),
            RedisError::LaravelUnsafe {
                queue: cause.into(),
                index: None,
                findings: babelqueue_envelope::cjson_changes(br#"{"n":[]}"#),
            },
        ] {
            let own = error.to_string();
            let shown = TransportError::from(error).to_string();
            assert_eq!(shown.matches(cause).count(), 1, "{shown}");
            assert_eq!(shown.matches(own.as_str()).count(), 1, "{shown}");
        }
    }
}
