//! Parsing `amqp://` / `amqps://` URLs (pure, no network).
//!
//! `amqp://user:pass@host:port/vhost?heartbeat=..&connection_timeout=..&prefetch=..`
//!
//! * The vhost follows pika (the reference): an absent, empty or `/` path is vhost `/`;
//!   `%2f` is `/`; any other path is percent-decoded (`/orders` is vhost `orders`). lapin's own
//!   parser turns a trailing `/` into vhost `""`, which RabbitMQ refuses, hence this layer.
//! * Client keys lapin understands (`heartbeat`, `connection_timeout` in milliseconds,
//!   `frame_max`, `channel_max`, `auth_mechanism`) go to lapin.
//! * BabelQueue keys: `prefetch` (a fixed `basic_qos` prefetch, 1..=65535; without it the
//!   prefetch follows the runtime's concurrency), `declare` (boolean, default on; off skips
//!   the queue declarations for queues that are provisioned elsewhere); the TLS files every
//!   TLS transport names alike: `ca_file` (a PEM file of CA certificates to trust beside the
//!   platform's roots), `cert_file` and `key_file` (a client certificate for mutual TLS).
//! * Other keys (pika options such as `socket_timeout`) are ignored with a warning, so a URL
//!   shared with a Python worker keeps working.

use std::fmt;
use std::str::FromStr;

use babelqueue_core::options::{self, BOOLEAN_WORDS, Component};
use babelqueue_core::redact::{redact, scrub};
use lapin::uri::{AMQPScheme, AMQPUri};

use crate::error::AmqpError;

/// A parsed broker URL: what lapin connects to, and the BabelQueue options it carried.
///
/// `Debug` leaves the password out.
#[derive(Clone)]
pub struct AmqpUrl {
    /// What lapin connects to, vhost fixed.
    pub uri: AMQPUri,
    /// A fixed prefetch, when the URL set one.
    pub prefetch: Option<u16>,
    /// Whether queues are declared before use (default `true`).
    pub declare: bool,
    /// `ca_file=`: a PEM file of CA certificates to trust for `amqps://`.
    pub ca_file: Option<std::path::PathBuf>,
    /// `cert_file=`: a PEM file of the client certificate for `amqps://` (mutual TLS).
    pub cert_file: Option<std::path::PathBuf>,
    /// `key_file=`: a PEM file of the client certificate's private key.
    pub key_file: Option<std::path::PathBuf>,
}

impl fmt::Debug for AmqpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let authority = &self.uri.authority;
        f.debug_struct("AmqpUrl")
            .field("tls", &self.is_tls())
            .field("host", &authority.host)
            .field("port", &authority.port)
            .field("user", &authority.userinfo.username)
            .field("password", &"<redacted>")
            .field("vhost", &self.uri.vhost)
            .field("prefetch", &self.prefetch)
            .field("declare", &self.declare)
            .field("ca_file", &self.ca_file)
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .finish_non_exhaustive()
    }
}

const LAPIN_KEYS: [&str; 5] = [
    "heartbeat",
    "connection_timeout",
    "frame_max",
    "channel_max",
    "auth_mechanism",
];

/// Parses a broker URL.
///
/// ```
/// use babelqueue_transport_amqp::AmqpUrl;
///
/// for url in ["amqp://guest:guest@localhost:5672/", "amqp://localhost/%2f", "amqp://localhost"] {
///     assert_eq!(AmqpUrl::parse(url)?.uri.vhost, "/");
/// }
/// assert_eq!(AmqpUrl::parse("amqp://localhost/orders%2Feu")?.uri.vhost, "orders/eu");
/// assert_eq!(AmqpUrl::parse("amqp://h?prefetch=8")?.prefetch, Some(8));
/// # Ok::<(), babelqueue_transport_amqp::AmqpError>(())
/// ```
impl AmqpUrl {
    /// Parses `url` (scheme `amqp` or `amqps`).
    pub fn parse(url: &str) -> Result<AmqpUrl, AmqpError> {
        let bad = |why: String| Err(AmqpError::Url(format!("{why} (in {})", redact(url))));
        let Some((scheme, rest)) = url.split_once("://") else {
            return bad("expected amqp://… or amqps://…".into());
        };
        if scheme != "amqp" && scheme != "amqps" {
            return bad(format!(
                "scheme {:?} is not amqp or amqps (case-sensitive)",
                redact(scheme)
            ));
        }
        let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = match before_query.find('/') {
            Some(i) => (&before_query[..i], &before_query[i + 1..]),
            None => (before_query, ""),
        };
        let vhost = if path.is_empty() || path == "/" {
            "/".to_owned()
        } else {
            match options::decode(path, Component::Path) {
                Some(v) => v,
                None => {
                    return bad(format!(
                        "the vhost {:?} is not valid percent-encoding",
                        redact(path)
                    ));
                }
            }
        };

        let mut lapin_query = Vec::new();
        let mut prefetch = None;
        let mut declare = true;
        let (mut ca_file, mut cert_file, mut key_file) = (None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "prefetch" => match value.parse::<u16>() {
                    Ok(n) if n > 0 => prefetch = Some(n),
                    _ => {
                        return bad(format!(
                            "prefetch must be 1..=65535, got {:?}",
                            redact(value)
                        ));
                    }
                },
                "declare" => match options::parse_bool(value) {
                    Some(b) => declare = b,
                    None => {
                        return bad(format!(
                            "declare must be a boolean ({BOOLEAN_WORDS}), got {:?}",
                            redact(value)
                        ));
                    }
                },
                "ca_file" | "cert_file" | "key_file" => {
                    let path = options::decode_lossy(value, Component::Query);
                    if path.is_empty() {
                        return bad(format!("{key} must name a PEM file"));
                    }
                    let path = Some(std::path::PathBuf::from(path));
                    match key {
                        "ca_file" => ca_file = path,
                        "cert_file" => cert_file = path,
                        _ => key_file = path,
                    }
                }
                k if LAPIN_KEYS.contains(&k) => lapin_query.push(pair),
                other => {
                    tracing::warn!(target: "babelqueue::amqp", key = other, "Ignoring an unknown AMQP URL option");
                }
            }
        }
        // lapin parses everything but the vhost; the path is left out and set afterwards.
        let mut for_lapin = format!("{scheme}://{authority}");
        if !lapin_query.is_empty() {
            for_lapin.push('?');
            for_lapin.push_str(&lapin_query.join("&"));
        }
        let mut uri = match AMQPUri::from_str(&for_lapin) {
            Ok(uri) => uri,
            // lapin's messages may quote the text it was given.
            Err(e) => return bad(scrub(&e, url)),
        };
        uri.vhost = vhost;
        if scheme == "amqps" {
            debug_assert!(matches!(uri.scheme, AMQPScheme::AMQPS));
        }
        if cert_file.is_some() != key_file.is_some() {
            return bad("cert_file and key_file go together (mutual TLS)".into());
        }
        Ok(AmqpUrl {
            uri,
            prefetch,
            declare,
            ca_file,
            cert_file,
            key_file,
        })
    }

    /// Whether the connection uses TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.uri.scheme, AMQPScheme::AMQPS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vhosts_follow_pika() {
        let vhost = |url: &str| AmqpUrl::parse(url).unwrap().uri.vhost;
        assert_eq!(vhost("amqp://guest:guest@localhost:5672/"), "/");
        assert_eq!(vhost("amqp://guest:guest@localhost:5672"), "/");
        assert_eq!(vhost("amqp://guest:guest@127.0.0.1:5672/%2f"), "/");
        assert_eq!(vhost("amqp://guest:guest@127.0.0.1:5672/%2F"), "/");
        assert_eq!(vhost("amqp://h/orders"), "orders");
        assert_eq!(vhost("amqp://h/a%20b?heartbeat=5"), "a b");
        assert!(AmqpUrl::parse("amqp://h/%zz").is_err());
    }

    #[test]
    fn authority_query_and_tls() {
        let url = AmqpUrl::parse(
            "amqps://alice:s%40cret@broker.example:5671/%2f?heartbeat=7&connection_timeout=2500&prefetch=16&declare=off&socket_timeout=3",
        )
        .unwrap();
        assert!(url.is_tls());
        assert_eq!(url.uri.authority.userinfo.username, "alice");
        assert_eq!(url.uri.authority.userinfo.password, "s@cret");
        assert_eq!(url.uri.authority.host, "broker.example");
        assert_eq!(url.uri.authority.port, 5671);
        assert_eq!(url.uri.query.heartbeat, Some(7));
        assert_eq!(url.uri.query.connection_timeout, Some(2500));
        assert_eq!(url.prefetch, Some(16));
        assert!(!url.declare);

        let plain = AmqpUrl::parse("amqp://localhost").unwrap();
        assert!(!plain.is_tls());
        assert_eq!(plain.uri.authority.port, 5672);
        assert_eq!(plain.uri.authority.userinfo.username, "guest");
        assert_eq!(plain.prefetch, None);
        assert!(plain.declare);
        assert_eq!(
            AmqpUrl::parse("amqps://h").unwrap().uri.authority.port,
            5671
        );
    }

    #[test]
    fn debug_of_the_url_the_client_and_the_transport_never_shows_the_password() {
        let url = "amqps://alice:hunter2@broker.example:5671/orders?prefetch=4";
        let parsed = AmqpUrl::parse(url).unwrap();
        assert_eq!(parsed.uri.authority.userinfo.password, "hunter2");
        let client = crate::LapinClient::new(parsed.uri.clone(), "worker");
        let transport = crate::AmqpTransport::lazy(url).unwrap();
        for shown in [
            format!("{parsed:?}"),
            format!("{parsed:#?}"),
            format!("{client:?}"),
            format!("{transport:?}"),
        ] {
            assert!(!shown.contains("hunter2"), "{shown}");
        }
        // What Debug does show: enough to tell which broker.
        assert!(format!("{parsed:?}").contains("broker.example"));
        assert!(format!("{client:?}").contains("broker.example"));
    }

    #[test]
    fn plus_in_the_vhost_is_a_plus_sign() {
        assert_eq!(
            AmqpUrl::parse("amqp://h/a+b%2Bc").unwrap().uri.vhost,
            "a+b+c"
        );
        // The password (read by lapin) keeps its plus sign too.
        let parsed = AmqpUrl::parse("amqp://u:p+w@h").unwrap();
        assert_eq!(parsed.uri.authority.userinfo.password, "p+w");
    }

    #[test]
    fn bad_urls_say_why_without_the_password() {
        for (url, fragment) in [
            ("redis://h", "not amqp or amqps"),
            ("AMQP://h", "not amqp or amqps"),
            ("localhost:5672", "expected amqp://"),
            ("amqp://u:hunter2@h?prefetch=0", "prefetch must be"),
            ("amqp://u:hunter2@h?prefetch=x", "prefetch must be"),
            ("amqp://u:hunter2@h?declare=maybe", "declare must be"),
        ] {
            let err = AmqpUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(fragment), "{url}: {err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
    }
}
