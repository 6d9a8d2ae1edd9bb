//! Parsing `amqp://` / `amqps://` URLs (pure, no network).
//!
//! `amqp://user:pass@host:port[,host:port…]/vhost?heartbeat=..&prefetch=..&queue_type=..&host=..`
//!
//! * Hosts: one, or several separated by commas (`amqp://u:p@h1:5672,h2:5673/vhost`), and any
//!   number of `host=h3:5674` query keys after them (percent-encoded if need be). All share the
//!   user, the password, the vhost and the TLS settings; a host without a port gets the
//!   scheme's (5672, or 5671 for `amqps`); an IPv6 address goes in brackets (`[::1]:5672`); a
//!   host named twice is kept once. No host at all is `localhost`. The connection goes to the
//!   first host that answers, in this order (see [`LapinClient`](crate::LapinClient)).
//! * The vhost follows pika (the reference): an absent, empty or `/` path is vhost `/`;
//!   `%2f` is `/`; any other path is percent-decoded (`/orders` is vhost `orders`). lapin's own
//!   parser turns a trailing `/` into vhost `""`, which RabbitMQ refuses, hence this layer.
//! * Client keys lapin understands (`heartbeat`, `connection_timeout` in milliseconds, for each
//!   host tried; `frame_max`, `channel_max`, `auth_mechanism`) go to lapin. Without
//!   `heartbeat`, the transport asks for [`DEFAULT_HEARTBEAT`] (10 s) instead of taking the 60 s
//!   RabbitMQ proposes; `heartbeat=0` takes the server's value.
//! * BabelQueue keys: `prefetch` (a fixed `basic_qos` prefetch, 1..=65535; without it the
//!   prefetch follows the runtime's concurrency), `declare` (boolean, default on; off skips
//!   the queue declarations for queues that are provisioned elsewhere), `queue_type`
//!   (`classic`, the default, or `quorum`: see [`topology`](crate::topology)); the TLS files
//!   every TLS transport names alike: `ca_file` (a PEM file of CA certificates to trust beside
//!   the platform's roots), `cert_file` and `key_file` (a client certificate for mutual TLS).
//! * Other keys (pika options such as `socket_timeout`) are ignored with a warning, so a URL
//!   shared with a Python worker keeps working.

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

use babelqueue_core::options::{self, BOOLEAN_WORDS, Component};
use babelqueue_core::redact::{redact, scrub};
use lapin::uri::{AMQPScheme, AMQPUri};

use crate::error::AmqpError;
use crate::topology::QueueType;

/// The heartbeat timeout (seconds) the transport asks for when the URL names none. The heartbeat
/// is what notices a connection whose packets vanish without a reset or a close: lapin closes
/// one after two timeouts without a byte from the broker (at 10 s: 20 s; at RabbitMQ's proposed
/// 60 s: two minutes, during which a worker on it handles nothing). RabbitMQ's guide to
/// heartbeats puts the values that suit most environments at 5 to 20 s (lower risks false
/// positives on a busy broker or a loaded client); 10 s is within it.
pub const DEFAULT_HEARTBEAT: u16 = 10;

/// A parsed broker URL: what lapin connects to, and the BabelQueue options it carried.
///
/// `Debug` leaves the password out.
#[derive(Clone)]
pub struct AmqpUrl {
    /// What lapin connects to, vhost fixed; its host and port are the first of
    /// [`hosts`](AmqpUrl::hosts).
    pub uri: AMQPUri,
    /// Every host of the URL, in order (at least one).
    pub hosts: Vec<AmqpHost>,
    /// A fixed prefetch, when the URL set one.
    pub prefetch: Option<u16>,
    /// Whether queues are declared before use (default `true`).
    pub declare: bool,
    /// `queue_type=`: the type of the queues the transport declares, when the URL set one.
    pub queue_type: Option<QueueType>,
    /// `ca_file=`: a PEM file of CA certificates to trust for `amqps://`.
    pub ca_file: Option<std::path::PathBuf>,
    /// `cert_file=`: a PEM file of the client certificate for `amqps://` (mutual TLS).
    pub cert_file: Option<std::path::PathBuf>,
    /// `key_file=`: a PEM file of the client certificate's private key.
    pub key_file: Option<std::path::PathBuf>,
}

/// One broker address of a URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AmqpHost {
    /// The host name or IP address (an IPv6 address without its brackets).
    pub host: String,
    /// The port.
    pub port: u16,
}

impl fmt::Display for AmqpHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl AmqpHost {
    /// Reads `host`, `host:port`, `[v6]` or `[v6]:port`; `default_port` when none is given.
    fn parse(text: &str, default_port: u16) -> Result<AmqpHost, String> {
        if text.is_empty() {
            return Err("an empty host in the host list".to_owned());
        }
        let (host, port) = if let Some(bracketed) = text.strip_prefix('[') {
            let Some((v6, rest)) = bracketed.split_once(']') else {
                return Err(format!("{text:?} opens a bracket it does not close"));
            };
            if v6.parse::<Ipv6Addr>().is_err() {
                return Err(format!("{v6:?} in brackets is not an IPv6 address"));
            }
            match rest {
                "" => (v6, None),
                _ => match rest.strip_prefix(':') {
                    Some(port) => (v6, Some(port)),
                    None => return Err(format!("{text:?}: expected [address]:port")),
                },
            }
        } else {
            match text.split_once(':') {
                Some((_, rest)) if rest.contains(':') => {
                    return Err(format!(
                        "{text:?}: an IPv6 address goes in brackets, as in [::1]:5672"
                    ));
                }
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            }
        };
        if host.is_empty() {
            return Err(format!("{text:?} names no host"));
        }
        if host.contains(['/', '?', '#', '@', ' ']) {
            return Err(format!("{host:?} is not a host name"));
        }
        let port = match port {
            None => default_port,
            Some(port) => match port.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(format!(
                        "the port of {host:?} must be 1..=65535, got {port:?}"
                    ));
                }
            },
        };
        Ok(AmqpHost {
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Debug for AmqpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let authority = &self.uri.authority;
        let hosts: Vec<String> = self.hosts.iter().map(ToString::to_string).collect();
        f.debug_struct("AmqpUrl")
            .field("tls", &self.is_tls())
            .field("hosts", &hosts)
            .field("user", &authority.userinfo.username)
            .field("password", &"<redacted>")
            .field("vhost", &self.uri.vhost)
            .field("prefetch", &self.prefetch)
            .field("declare", &self.declare)
            .field("queue_type", &self.queue_type)
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
/// use babelqueue_transport_amqp::topology::QueueType;
///
/// for url in ["amqp://guest:guest@localhost:5672/", "amqp://localhost/%2f", "amqp://localhost"] {
///     assert_eq!(AmqpUrl::parse(url)?.uri.vhost, "/");
/// }
/// assert_eq!(AmqpUrl::parse("amqp://localhost/orders%2Feu")?.uri.vhost, "orders/eu");
/// assert_eq!(AmqpUrl::parse("amqp://h?prefetch=8")?.prefetch, Some(8));
///
/// let cluster = AmqpUrl::parse("amqp://u:p@h1:5672,h2:5673/%2f?queue_type=quorum&host=h3")?;
/// let hosts: Vec<String> = cluster.hosts.iter().map(ToString::to_string).collect();
/// assert_eq!(hosts, ["h1:5672", "h2:5673", "h3:5672"]);
/// assert_eq!(cluster.queue_type, Some(QueueType::Quorum));
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
        let default_port = if scheme == "amqps" { 5671 } else { 5672 };
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
        // The user information ends at the last `@`; a host never holds one.
        let (userinfo, host_list) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let mut hosts = Vec::new();
        if !host_list.is_empty() {
            for item in host_list.split(',') {
                match AmqpHost::parse(item, default_port) {
                    Ok(host) => hosts.push(host),
                    Err(why) => return bad(why),
                }
            }
        }

        let mut lapin_query = Vec::new();
        let mut prefetch = None;
        let mut declare = true;
        let mut queue_type = None;
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
                "queue_type" => match QueueType::parse(value) {
                    Some(t) => queue_type = Some(t),
                    None => {
                        return bad(format!(
                            "queue_type must be classic or quorum, got {:?}",
                            redact(value)
                        ));
                    }
                },
                "host" => {
                    let text = options::decode_lossy(value, Component::Query);
                    match AmqpHost::parse(&text, default_port) {
                        Ok(host) => hosts.push(host),
                        Err(why) => return bad(format!("host={}: {why}", redact(value))),
                    }
                }
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
        let mut seen = std::collections::HashSet::new();
        hosts.retain(|h| seen.insert(h.clone()));
        if hosts.is_empty() {
            hosts.push(AmqpHost {
                host: "localhost".to_owned(),
                port: default_port,
            });
        }
        // lapin reads the user information and its own query keys; the hosts (its parser has no
        // host for an IPv6 address, and would connect to `localhost`) and the vhost are this
        // layer's.
        let mut for_lapin = format!("{scheme}://");
        if let Some(userinfo) = userinfo {
            for_lapin.push_str(userinfo);
            for_lapin.push('@');
        }
        for_lapin.push_str("localhost");
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
        if uri.query.heartbeat.is_none() {
            uri.query.heartbeat = Some(DEFAULT_HEARTBEAT);
        }
        if let Some(first) = hosts.first() {
            uri.authority.host.clone_from(&first.host);
            uri.authority.port = first.port;
        }
        if scheme == "amqps" {
            debug_assert!(matches!(uri.scheme, AMQPScheme::AMQPS));
        }
        if cert_file.is_some() != key_file.is_some() {
            return bad("cert_file and key_file go together (mutual TLS)".into());
        }
        Ok(AmqpUrl {
            uri,
            hosts,
            prefetch,
            declare,
            queue_type,
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

    fn hosts(url: &str) -> Vec<String> {
        AmqpUrl::parse(url)
            .unwrap()
            .hosts
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn host_lists_row_by_row() {
        let rows: [(&str, &[&str]); 12] = [
            ("amqp://h", &["h:5672"]),
            ("amqps://h", &["h:5671"]),
            ("amqp://", &["localhost:5672"]),
            ("amqp://u:p@/%2f", &["localhost:5672"]),
            (
                "amqp://u:p@h1:5681,h2:5682,h3/%2f",
                &["h1:5681", "h2:5682", "h3:5672"],
            ),
            (
                "amqp://u:p@h1?host=h2:5682&host=h3",
                &["h1:5672", "h2:5682", "h3:5672"],
            ),
            (
                "amqp://u:p@h1,h2?host=h3%3A5683",
                &["h1:5672", "h2:5672", "h3:5683"],
            ),
            ("amqp://?host=h2:5682", &["h2:5682"]),
            ("amqp://h1,h1:5672?host=h1", &["h1:5672"]),
            (
                "amqp://[::1]:5682,[fe80::1]",
                &["[::1]:5682", "[fe80::1]:5672"],
            ),
            (
                "amqp://127.0.0.1:5681,10.1.2.3/",
                &["127.0.0.1:5681", "10.1.2.3:5672"],
            ),
            ("amqp://u:p%2Cw@h1,h2", &["h1:5672", "h2:5672"]),
        ];
        for (url, expected) in rows {
            assert_eq!(hosts(url), expected, "{url}");
        }
        // The first host is what lapin's URI names; an IP address stays itself (lapin's own
        // parser has no host for an IPv6 one, and would reach `localhost`).
        let parsed = AmqpUrl::parse("amqp://u:p@10.1.2.3:5681,h2/v?heartbeat=5").unwrap();
        assert_eq!(parsed.uri.authority.host, "10.1.2.3");
        assert_eq!(parsed.uri.authority.port, 5681);
        assert_eq!(parsed.uri.authority.userinfo.password, "p");
        assert_eq!(parsed.uri.vhost, "v");
        assert_eq!(parsed.uri.query.heartbeat, Some(5));
        let v6 = AmqpUrl::parse("amqp://[::1]:5682").unwrap();
        assert_eq!(v6.uri.authority.host, "::1");
    }

    #[test]
    fn the_heartbeat_defaults_to_10_s_and_the_url_wins() {
        // The URI parsed here is what lapin connects with (`connect_uri_with_config`), whose
        // negotiation keeps the lower of the client's and the server's non-zero values.
        let parsed = AmqpUrl::parse("amqp://u:p@127.0.0.1:5672/%2f").unwrap();
        assert_eq!(parsed.uri.query.heartbeat, Some(DEFAULT_HEARTBEAT));
        assert_eq!(DEFAULT_HEARTBEAT, 10);
        let client = crate::LapinClient::new(parsed.uri, "t");
        assert!(
            format!("{client:?}").contains("heartbeat: Some(10)"),
            "{client:?}"
        );
        for (url, wanted) in [
            ("amqp://h/%2f?heartbeat=5", 5),
            ("amqp://h/%2f?heartbeat=30", 30),
            ("amqp://h/%2f?heartbeat=0", 0),
            ("amqp://h,h2/v?prefetch=4", DEFAULT_HEARTBEAT),
        ] {
            assert_eq!(
                AmqpUrl::parse(url).unwrap().uri.query.heartbeat,
                Some(wanted),
                "{url}"
            );
        }
    }

    #[test]
    fn queue_type_option() {
        use crate::topology::QueueType;
        for (url, expected) in [
            ("amqp://h", None),
            ("amqp://h?queue_type=classic", Some(QueueType::Classic)),
            ("amqp://h?queue_type=quorum", Some(QueueType::Quorum)),
            (
                "amqp://h?queue_type=QUORUM&prefetch=4",
                Some(QueueType::Quorum),
            ),
        ] {
            assert_eq!(AmqpUrl::parse(url).unwrap().queue_type, expected, "{url}");
        }
        let shown = format!(
            "{:?}",
            AmqpUrl::parse("amqp://u:hunter2@h1,h2?queue_type=quorum").unwrap()
        );
        assert!(
            shown.contains("h1:5672") && shown.contains("h2:5672"),
            "{shown}"
        );
        assert!(
            shown.contains("Quorum") && !shown.contains("hunter2"),
            "{shown}"
        );
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
            (
                "amqp://u:hunter2@h?queue_type=stream",
                "queue_type must be classic or quorum",
            ),
            ("amqp://u:hunter2@h1,,h2", "an empty host"),
            ("amqp://u:hunter2@h1,", "an empty host"),
            ("amqp://u:hunter2@h1:0", "must be 1..=65535"),
            ("amqp://u:hunter2@h1,h2:x", "must be 1..=65535"),
            ("amqp://u:hunter2@::1", "goes in brackets"),
            ("amqp://u:hunter2@[::1", "does not close"),
            ("amqp://u:hunter2@[nope]:1", "not an IPv6 address"),
            ("amqp://u:hunter2@h?host=", "host=: an empty host"),
            ("amqp://u:hunter2@h?host=h2:99999", "must be 1..=65535"),
            ("amqp://u:hunter2@:5672", "names no host"),
        ] {
            let err = AmqpUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(fragment), "{url}: {err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
    }
}
