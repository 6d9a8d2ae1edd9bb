//! The pure part of the binding: the URL and its options ([`NatsOptions`]), the names a queue
//! gets on the server (stream, subject), the facts a JetStream delivery reports, and whether a
//! `Nak` gives the runtime exactly the redelivery it asked for. No network; unit-tested here.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use async_nats::{HeaderMap, HeaderName, HeaderValue};
use babelqueue_transport::{Count, Declared, Facts, Headers, options, redact};

use crate::error::NatsError;
use crate::servers;

/// The port of a URL that names none.
pub const DEFAULT_PORT: u16 = 4222;

/// The header that carries the schema version, reported to the runtime's gate as carried.
pub const SCHEMA_VERSION_HEADER: &str = "bq-schema-version";

/// The most replicas a JetStream stream can have (`replicas=`).
pub const MAX_REPLICAS: usize = 5;

/// Stream names longer than this are refused (the file store makes a directory of each).
pub const MAX_STREAM_NAME: usize = 255;

/// Where a stream keeps its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Storage {
    /// On disk (JetStream's `file` storage): survives a server restart.
    #[default]
    File,
    /// In memory: lost when the server stops.
    Memory,
}

/// Everything a `nats://` URL configures. Build it with [`NatsOptions::from_url`] (or
/// [`Default`] and the fields).
///
/// `Debug` never shows the password or the token.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct NatsOptions {
    /// The server, `nats://host:port`, without credentials or options: the first one of a
    /// cluster URL.
    pub server: String,
    /// The cluster's other servers, `nats://host:port` each, that a cluster URL names after the
    /// first (`nats://h1:4222,h2:4223,h3:4224`): the client connects to any one of all of them
    /// that answers, and when that one goes away reconnects to another (the servers the cluster
    /// announces too). Empty for a URL of one server.
    pub other_servers: Vec<String>,
    /// The user name of the URL's userinfo (percent-decoded).
    pub user: Option<String>,
    /// The password of the URL's userinfo (percent-decoded).
    pub password: Option<String>,
    /// An authentication token (`token=`).
    pub token: Option<String>,
    /// Prepended to the stream name of every queue (`stream_prefix=`, default `BQ_`).
    pub stream_prefix: String,
    /// The first tokens of every queue's subject (`subject_prefix=`, default `bq`).
    pub subject_prefix: String,
    /// The durable consumer's name on every stream (`consumer=`, default `babelqueue`).
    pub consumer: String,
    /// How long a delivery stays reserved before JetStream redelivers it (`ack_wait=` seconds,
    /// default 30): the visibility timeout of an unsettled message.
    pub ack_wait: Duration,
    /// The storage of the streams the transport creates (`storage=file|memory`).
    pub storage: Storage,
    /// The replicas of the streams the transport creates (`replicas=`, 1..=5, default 1), and
    /// the fewest an existing stream may have: a stream with fewer is a configuration error,
    /// never changed (see [`NatsTransport::ensure_stream`](crate::NatsTransport::ensure_stream)).
    /// More than 1 needs a JetStream cluster of at least that many servers.
    pub replicas: usize,
    /// The connect timeout, and how long a JetStream request, a publish acknowledgement or a
    /// confirmed ack may take (`timeout=` seconds, default 5).
    pub timeout: Duration,
    /// How often the client pings the server (`ping_interval=` seconds, default
    /// [`DEFAULT_PING_INTERVAL`]): async-nats reconnects when a third ping finds two still
    /// unanswered, so this is what notices a connection whose packets vanish without a reset or
    /// a close, after two to three intervals (async-nats' own default is 60 s: two to three
    /// minutes of a worker handling nothing).
    pub ping_interval: Duration,
    /// Require TLS (`tls=1`).
    pub tls: bool,
    /// A PEM file of root certificates to trust (`ca_file=`, or its deprecated older name
    /// `tls_ca=`; implies `tls`).
    pub ca_file: Option<PathBuf>,
    /// A PEM file of the client certificate for mutual TLS (`cert_file=`; with `key_file`,
    /// implies `tls`).
    pub cert_file: Option<PathBuf>,
    /// A PEM file of the client certificate's private key (`key_file=`).
    pub key_file: Option<PathBuf>,
}

/// The default [`NatsOptions::ping_interval`]: a silently dead connection is left within 20 to
/// 30 s, at the cost of one `PING`/`PONG` pair (a dozen bytes) every 10 s per connection.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(10);

impl Default for NatsOptions {
    fn default() -> NatsOptions {
        NatsOptions {
            server: format!("nats://127.0.0.1:{DEFAULT_PORT}"),
            other_servers: Vec::new(),
            user: None,
            password: None,
            token: None,
            stream_prefix: "BQ_".to_owned(),
            subject_prefix: "bq".to_owned(),
            consumer: "babelqueue".to_owned(),
            ack_wait: Duration::from_secs(30),
            storage: Storage::File,
            replicas: 1,
            timeout: Duration::from_secs(5),
            ping_interval: DEFAULT_PING_INTERVAL,
            tls: false,
            ca_file: None,
            cert_file: None,
            key_file: None,
        }
    }
}

impl fmt::Debug for NatsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let masked = |secret: &Option<String>| secret.as_ref().map(|_| "***");
        f.debug_struct("NatsOptions")
            .field("server", &self.server)
            .field("other_servers", &self.other_servers)
            .field("user", &self.user)
            .field("password", &masked(&self.password))
            .field("token", &masked(&self.token))
            .field("stream_prefix", &self.stream_prefix)
            .field("subject_prefix", &self.subject_prefix)
            .field("consumer", &self.consumer)
            .field("ack_wait", &self.ack_wait)
            .field("storage", &self.storage)
            .field("replicas", &self.replicas)
            .field("timeout", &self.timeout)
            .field("ping_interval", &self.ping_interval)
            .field("tls", &self.tls)
            .field("ca_file", &self.ca_file)
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .finish()
    }
}

impl NatsOptions {
    /// Parses `nats://[user[:password]@]host[:port][?option=value&…]`, or for a cluster
    /// `nats://[user[:password]@]host1[:port1],host2[:port2],…[?option=value&…]` (a further server
    /// may repeat the scheme: `nats://h1:4222,nats://h2:4222`); the credentials and the options
    /// apply to every server.
    ///
    /// Options: `stream_prefix`, `subject_prefix`, `consumer`, `ack_wait`,
    /// `timeout` and `ping_interval` (seconds, decimals allowed), `storage` (`file`, `memory`), `replicas`, `token`,
    /// `tls` (`1`/`true`/`yes`/`on`, `0`/`false`/`no`/`off`), `ca_file` (a path; `tls_ca` is its deprecated
    /// older name), `cert_file` and `key_file` (paths, for mutual TLS). An unknown
    /// option, a repeated one or a value out of range is a [`NatsError::Config`]; no error
    /// shows a password or a token.
    pub fn from_url(url: &str) -> Result<NatsOptions, NatsError> {
        NatsOptions::from_url_onto(url, NatsOptions::default())
    }

    /// [`from_url`](NatsOptions::from_url) starting from `options` instead of the defaults:
    /// the URL's server, its credentials (when it has any) and its query options override them.
    pub(crate) fn from_url_onto(url: &str, options: NatsOptions) -> Result<NatsOptions, NatsError> {
        let shown = redact::redact(url);
        let (url, other_servers) = servers::split(url, &shown)?;
        let parsed = url::Url::parse(&url).map_err(|e| {
            NatsError::Config(format!("{shown:?} is not a valid nats:// URL ({e})"))
        })?;
        if parsed.scheme() != "nats" {
            return Err(NatsError::Config(format!(
                "{shown:?}: the scheme must be nats://"
            )));
        }
        let host = parsed.host_str().filter(|h| !h.is_empty()).ok_or_else(|| {
            NatsError::Config(format!("{shown:?} names no host (nats://host:port)"))
        })?;
        if !matches!(parsed.path(), "" | "/") || parsed.fragment().is_some() {
            return Err(NatsError::Config(format!(
                "{shown:?}: a nats:// URL has no path or fragment; options go in the query"
            )));
        }
        let port = parsed.port().unwrap_or(DEFAULT_PORT);
        // `+` in the userinfo is a plus sign; `query_pairs` below reads `+` in the query as a
        // space (see babelqueue_transport::options).
        let decode = |text: &str| options::decode_lossy(text, options::Component::Userinfo);
        let mut options = options;
        options.server = format!("nats://{host}:{port}");
        options.other_servers = other_servers;
        // Credentials in the URL replace the options' as a pair; a URL without any keeps them.
        if !parsed.username().is_empty() || parsed.password().is_some() {
            options.user = Some(decode(parsed.username())).filter(|u| !u.is_empty());
            options.password = parsed.password().map(decode);
        }
        let mut seen = Vec::new();
        for (key, value) in parsed.query_pairs() {
            if seen.contains(&key) {
                return Err(NatsError::Config(format!(
                    "{shown:?}: the option `{key}` is given twice"
                )));
            }
            options.set(&key, &value).map_err(|why| {
                let value = if redact::is_secret_key(&key) {
                    "***"
                } else {
                    &value
                };
                NatsError::Config(format!("{shown:?}: `{key}={value}`: {why}"))
            })?;
            seen.push(key);
        }
        options.check_client_certificate()?;
        Ok(options)
    }

    /// `cert_file` and `key_file` go together.
    pub(crate) fn check_client_certificate(&self) -> Result<(), NatsError> {
        if self.cert_file.is_some() != self.key_file.is_some() {
            return Err(NatsError::Config(
                "cert_file and key_file go together (mutual TLS)".to_owned(),
            ));
        }
        Ok(())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "stream_prefix" => {
                if !value.bytes().all(plain) {
                    return Err(
                        "a stream prefix may hold only ASCII letters, digits, `-` and `_`"
                            .to_owned(),
                    );
                }
                self.stream_prefix = value.to_owned();
            }
            "subject_prefix" => {
                if !valid_subject(value) {
                    return Err(
                        "not a subject: dot-separated tokens, none empty, no whitespace, \
                                no `*` or `>`"
                            .to_owned(),
                    );
                }
                self.subject_prefix = value.to_owned();
            }
            "consumer" => {
                if value.is_empty() || !value.bytes().all(plain) {
                    return Err(
                        "a consumer name is ASCII letters, digits, `-` and `_`, not empty"
                            .to_owned(),
                    );
                }
                self.consumer = value.to_owned();
            }
            "ack_wait" => {
                self.ack_wait = seconds(value)?;
                if self.ack_wait < Duration::from_millis(1) {
                    return Err("the ack wait must be at least 0.001 s".to_owned());
                }
            }
            "timeout" => {
                self.timeout = seconds(value)?;
                if self.timeout < Duration::from_millis(1) {
                    return Err("the timeout must be at least 0.001 s".to_owned());
                }
            }
            "ping_interval" => {
                self.ping_interval = seconds(value)?;
                if self.ping_interval < Duration::from_millis(100) {
                    return Err("the ping interval must be at least 0.1 s".to_owned());
                }
            }
            "storage" => {
                self.storage = match value {
                    "file" => Storage::File,
                    "memory" => Storage::Memory,
                    _ => return Err("expected `file` or `memory`".to_owned()),
                }
            }
            "replicas" => {
                self.replicas = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_REPLICAS).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "expected a number of replicas from 1 to {MAX_REPLICAS} \
                             (JetStream keeps at most {MAX_REPLICAS} copies of a stream)"
                        )
                    })?;
            }
            "token" => {
                if value.is_empty() {
                    return Err("an empty token".to_owned());
                }
                self.token = Some(value.to_owned());
            }
            "tls" => self.tls = boolean(value)?,
            "ca_file" | "tls_ca" | "cert_file" | "key_file" => {
                if value.is_empty() {
                    return Err("an empty path".to_owned());
                }
                let path = Some(PathBuf::from(value));
                match key {
                    "cert_file" => self.cert_file = path,
                    "key_file" => self.key_file = path,
                    _ => self.ca_file = path,
                }
                self.tls = true;
            }
            _ => {
                return Err(
                    "unknown option (known: stream_prefix, subject_prefix, consumer, \
                            ack_wait, timeout, storage, replicas, token, tls, ca_file, cert_file, \
                            key_file)"
                        .to_owned(),
                );
            }
        }
        Ok(())
    }

    /// The `host:port` of the (first) server, for messages.
    pub fn host(&self) -> &str {
        self.server.strip_prefix("nats://").unwrap_or(&self.server)
    }

    /// Every server, `nats://host:port` each: [`server`](NatsOptions::server), then
    /// [`other_servers`](NatsOptions::other_servers).
    pub fn servers(&self) -> Vec<&str> {
        std::iter::once(&self.server)
            .chain(&self.other_servers)
            .map(String::as_str)
            .collect()
    }

    /// The `host:port` of every server, comma-separated, for messages.
    pub fn hosts(&self) -> String {
        self.servers()
            .iter()
            .map(|s| s.strip_prefix("nats://").unwrap_or(s))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The name of the stream that holds `queue`: the stream prefix and the queue's
    /// [`token`].
    pub fn stream_name(&self, queue: &str) -> Result<String, NatsError> {
        let name = format!("{}{}", self.stream_prefix, token(queue)?);
        if name.len() > MAX_STREAM_NAME {
            return Err(NatsError::Config(format!(
                "the queue name {queue:?} makes a stream name of {} bytes (at most {MAX_STREAM_NAME})",
                name.len()
            )));
        }
        Ok(name)
    }

    /// The subject `queue` is published on: `<subject_prefix>.<token>`, one subject per stream.
    pub fn subject(&self, queue: &str) -> Result<String, NatsError> {
        Ok(format!("{}.{}", self.subject_prefix, token(queue)?))
    }
}

/// ASCII letters, digits and `-`: kept as they are in a [`token`].
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// A queue name as one token that is valid both in a stream name and in a subject, and that
/// names one queue only: ASCII letters, digits and `-` stay, `_` becomes `__`, every other
/// byte (of the UTF-8 name) `_XX` in upper-case hex. `orders.dlq` → `orders_2Edlq`,
/// `my_queue` → `my__queue`. An empty name is refused.
pub fn token(queue: &str) -> Result<String, NatsError> {
    if queue.is_empty() {
        return Err(NatsError::Config("an empty queue name".to_owned()));
    }
    let mut out = String::with_capacity(queue.len());
    for b in queue.bytes() {
        match b {
            b'_' => out.push_str("__"),
            b if plain(b) => out.push(char::from(b)),
            b => out.push_str(&format!("_{b:02X}")),
        }
    }
    Ok(out)
}

/// The queue name a [`token`] stands for (`None` when it is not one).
pub fn queue_of(token: &str) -> Option<String> {
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'_' if bytes.get(i + 1) == Some(&b'_') => {
                out.push(b'_');
                i += 2;
            }
            b'_' => {
                let hex = token.get(i + 1..i + 3)?;
                if !hex
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c))
                {
                    return None;
                }
                let byte = u8::from_str_radix(hex, 16).ok()?;
                if plain(byte) {
                    return None; // not the one spelling of this byte
                }
                out.push(byte);
                i += 3;
            }
            b if plain(b) => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok().filter(|q| !q.is_empty())
}

/// Whether `subject` is a literal subject: dot-separated tokens, none empty, no whitespace, no
/// wildcard.
pub fn valid_subject(subject: &str) -> bool {
    !subject.is_empty()
        && subject.split('.').all(|t| {
            !t.is_empty() && t != "*" && t != ">" && !t.contains(|c: char| c.is_whitespace())
        })
}

fn seconds(value: &str) -> Result<Duration, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0 && *s <= 31_536_000.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| "expected a number of seconds from 0 to 31536000".to_owned())
}

fn boolean(value: &str) -> Result<bool, String> {
    options::parse_bool(value).ok_or_else(|| format!("expected {}", options::BOOLEAN_WORDS))
}

/// The broker's delivery count as the runtime reads it: JetStream's `num_delivered` is 1 on the
/// first delivery, so earlier deliveries are `num_delivered - 1`.
pub fn count(num_delivered: i64) -> Count {
    Count::Redelivered(num_delivered.saturating_sub(1).max(0))
}

/// Whether a header is JetStream's own (`Nats-Msg-Id`, `Nats-Expected-Stream`, …): never handed
/// to the runtime, never copied onto a re-published message (a copied `Nats-Msg-Id` would be
/// dropped as a duplicate).
pub fn is_server_header(name: &str) -> bool {
    name.get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("nats-"))
}

/// The out-of-band headers of a delivery: every header but JetStream's own; the last value of a
/// repeated one.
pub fn headers_of(map: Option<&HeaderMap>) -> Headers {
    let mut out = Headers::new();
    for (name, values) in map.into_iter().flat_map(HeaderMap::iter) {
        let name: &str = name.as_ref();
        if is_server_header(name) {
            continue;
        }
        if let Some(value) = values.last() {
            out.insert(name.to_owned(), value.as_str().to_owned());
        }
    }
    out
}

/// The schema-version header as carried ([`SCHEMA_VERSION_HEADER`]; NATS headers are text):
/// [`Declared::Absent`] without one.
pub fn declared(headers: &Headers) -> Declared {
    headers
        .get(SCHEMA_VERSION_HEADER)
        .map_or(Declared::Absent, |v| Declared::Text(v.clone()))
}

/// The headers a copy published on behalf of a delivery carries
/// ([`Sends::facts`](babelqueue_transport::Sends::facts)): the schema-version header as it was
/// carried (NATS headers are text, so only [`Declared::Text`] comes from this transport; other
/// forms are written as their JSON text, a JSON `null` as no header).
pub fn routed_headers(facts: &Facts) -> Headers {
    let value = match &facts.declared_version {
        Declared::Text(text) => Some(text.clone()),
        Declared::Integer(n) => Some(n.to_string()),
        Declared::Float(f) => Some(f.to_string()),
        Declared::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    value
        .map(|v| Headers::from([(SCHEMA_VERSION_HEADER.to_owned(), v)]))
        .unwrap_or_default()
}

/// NATS headers for `headers`, JetStream's own left out. A name or a value NATS cannot carry
/// (a control character, `:`, a line break) is an error and nothing is sent.
pub fn header_map(headers: &Headers) -> Result<HeaderMap, NatsError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if is_server_header(name) {
            continue;
        }
        let header: HeaderName =
            name.parse()
                .ok()
                .filter(|_| !name.is_empty())
                .ok_or_else(|| {
                    NatsError::Unsupported(format!("NATS cannot carry the header name {name:?}"))
                })?;
        let value: HeaderValue = value.parse().map_err(|_| {
            NatsError::Unsupported(format!(
                "NATS cannot carry the value of the header {name:?} (a line break)"
            ))
        })?;
        map.insert(header, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelqueue_testkit::reading as attempts;

    #[test]
    fn defaults_and_every_option() {
        let o = NatsOptions::from_url("nats://127.0.0.1").unwrap();
        assert_eq!(o, NatsOptions::default());
        assert_eq!(o.host(), "127.0.0.1:4222");
        assert_eq!(
            o.ping_interval,
            Duration::from_secs(10),
            "not async-nats' 60 s"
        );
        let o = NatsOptions::from_url("nats://h?ping_interval=2.5").unwrap();
        assert_eq!(o.ping_interval, Duration::from_millis(2500));
        let err = NatsOptions::from_url("nats://h?ping_interval=0").unwrap_err();
        assert!(err.to_string().contains("ping interval"), "{err}");

        let o = NatsOptions::from_url(
            "nats://app:s%40cret@nats.example:4333/?stream_prefix=Q-&subject_prefix=babel.q\
             &consumer=workers&ack_wait=2.5&timeout=3&storage=memory&replicas=3\
             &ca_file=/etc/ca.pem",
        )
        .unwrap();
        assert_eq!(o.server, "nats://nats.example:4333");
        assert_eq!(o.user.as_deref(), Some("app"));
        assert_eq!(o.password.as_deref(), Some("s@cret"));
        assert_eq!(
            (o.stream_prefix.as_str(), o.subject_prefix.as_str()),
            ("Q-", "babel.q")
        );
        assert_eq!(o.consumer, "workers");
        assert_eq!(o.ack_wait, Duration::from_millis(2500));
        assert_eq!(o.timeout, Duration::from_secs(3));
        assert_eq!((o.storage, o.replicas), (Storage::Memory, 3));
        assert!(o.tls, "a CA file implies TLS");
        assert_eq!(o.ca_file, Some(PathBuf::from("/etc/ca.pem")));
        // the deprecated older name still works
        let o = NatsOptions::from_url("nats://h:1?tls_ca=/old/ca.pem").unwrap();
        assert_eq!(
            (o.ca_file, o.tls),
            (Some(PathBuf::from("/old/ca.pem")), true)
        );
        // a client certificate for mutual TLS: both files, and TLS
        let o = NatsOptions::from_url("nats://h:1?cert_file=/c.pem&key_file=/k.pem").unwrap();
        assert_eq!(o.cert_file, Some(PathBuf::from("/c.pem")));
        assert_eq!(o.key_file, Some(PathBuf::from("/k.pem")));
        assert!(o.tls);
        let err = NatsOptions::from_url("nats://h:1?cert_file=/c.pem").unwrap_err();
        assert!(err.to_string().contains("go together"), "{err}");
        assert!(NatsOptions::from_url("nats://h:1?key_file=").is_err());

        let o = NatsOptions::from_url("nats://h:1?token=t0k&tls=yes").unwrap();
        assert_eq!((o.token.as_deref(), o.tls), (Some("t0k"), true));
    }

    #[test]
    fn the_url_overrides_the_options_it_starts_from() {
        let base = NatsOptions {
            user: Some("app".into()),
            password: Some("secret".into()),
            consumer: "workers".into(),
            replicas: 3,
            ..NatsOptions::default()
        };
        let o = NatsOptions::from_url_onto("nats://h:4223?replicas=2", base.clone()).unwrap();
        assert_eq!(o.server, "nats://h:4223");
        assert_eq!(
            (o.user.as_deref(), o.password.as_deref()),
            (Some("app"), Some("secret"))
        );
        assert_eq!((o.consumer.as_str(), o.replicas), ("workers", 2));
        let o = NatsOptions::from_url_onto("nats://other@h", base).unwrap();
        assert_eq!(
            (o.user.as_deref(), o.password.as_deref()),
            (Some("other"), None)
        );
    }

    #[test]
    fn a_cluster_url_names_every_server_and_they_share_credentials_and_options() {
        let o = NatsOptions::from_url(
            "nats://app:hunter2@127.0.0.1:4222,127.0.0.1:4223,nats://127.0.0.1:4224\
             ?replicas=3&ack_wait=5",
        )
        .unwrap();
        assert_eq!(
            o.servers(),
            [
                "nats://127.0.0.1:4222",
                "nats://127.0.0.1:4223",
                "nats://127.0.0.1:4224"
            ]
        );
        assert_eq!(o.server, "nats://127.0.0.1:4222");
        assert_eq!(o.hosts(), "127.0.0.1:4222,127.0.0.1:4223,127.0.0.1:4224");
        assert_eq!(
            (o.user.as_deref(), o.password.as_deref()),
            (Some("app"), Some("hunter2"))
        );
        assert_eq!((o.replicas, o.ack_wait), (3, Duration::from_secs(5)));
        let shown = format!("{o:?}");
        assert!(
            shown.contains("127.0.0.1:4224") && !shown.contains("hunter2"),
            "{shown}"
        );

        // One server: no others, and the URL's list replaces the one the options held.
        let one = NatsOptions::from_url("nats://h").unwrap();
        assert_eq!(
            (one.servers(), one.hosts()),
            (vec!["nats://h:4222"], "h:4222".to_owned())
        );
        let o = NatsOptions::from_url_onto("nats://h:7", o).unwrap();
        assert_eq!(o.servers(), ["nats://h:7"]);

        for (url, why) in [
            ("nats://u:hunter2@h1,,h2", "an empty server"),
            ("nats://u:hunter2@h1,h2?replicas=6", "from 1 to 5"),
            ("nats://u:hunter2@h1,h2:x", "not host:port"),
            ("redis://h1,h2", "nats://"),
        ] {
            let err = NatsOptions::from_url(url).unwrap_err();
            let shown = format!("{err} {err:?}");
            assert!(matches!(err, NatsError::Config(_)), "{url}: {err}");
            assert!(shown.contains(why), "{url}: {shown}");
            assert!(!shown.contains("hunter2"), "{url}: {shown}");
        }
    }

    #[test]
    fn replicas_go_from_1_to_5() {
        for n in 1..=MAX_REPLICAS {
            let o = NatsOptions::from_url(&format!("nats://h?replicas={n}")).unwrap();
            assert_eq!(o.replicas, n);
        }
        for bad in ["0", "6", "-1", "3.0", "three", ""] {
            let err = NatsOptions::from_url(&format!("nats://h?replicas={bad}")).unwrap_err();
            assert!(
                err.to_string()
                    .contains("expected a number of replicas from 1 to 5"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn bad_urls_are_config_errors_that_show_no_secret() {
        for url in [
            "nats://",
            "redis://h",
            "nats://h?nope=1",
            "nats://h?ack_wait=0",
            "nats://h?ack_wait=-1",
            "nats://h?ack_wait=NaN",
            "nats://h?replicas=0",
            "nats://h?replicas=6",
            "nats://h?storage=disk",
            "nats://h?tls=maybe",
            "nats://h?subject_prefix=a..b",
            "nats://h?subject_prefix=a.>",
            "nats://h?stream_prefix=a.b",
            "nats://h?consumer=",
            "nats://h/vhost",
            "nats://h?ack_wait=1&ack_wait=2",
            "not a url",
        ] {
            let err = NatsOptions::from_url(url).unwrap_err();
            assert!(matches!(err, NatsError::Config(_)), "{url}: {err}");
            assert_eq!(
                err.kind(),
                babelqueue_transport::TransportErrorKind::Config,
                "{url}"
            );
        }
        for url in [
            "nats://u:hunter2@h?nope=1",
            "nats://u:hunter2@h?token=hunter2&token=x",
            "nats://u:hunter2@h?token=hunter2&tls=maybe",
        ] {
            let err = NatsOptions::from_url(url).unwrap_err();
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("hunter2"), "{shown}");
        }
        let o = NatsOptions::from_url("nats://u:hunter2@h?token=hunter2").unwrap();
        assert!(!format!("{o:?}").contains("hunter2"));
    }

    #[test]
    fn queue_names_make_one_token_that_names_one_queue() {
        for (queue, token_) in [
            ("orders", "orders"),
            ("orders.dlq", "orders_2Edlq"),
            ("my_queue", "my__queue"),
            ("Jobs-2", "Jobs-2"),
            ("a b*>", "a_20b_2A_3E"),
            ("café", "caf_C3_A9"),
            ("_2E", "__2E"),
        ] {
            assert_eq!(token(queue).unwrap(), token_, "{queue}");
            assert_eq!(queue_of(token_).as_deref(), Some(queue), "{token_}");
        }
        assert!(token("").is_err());
        for not_a_token in ["a.b", "_zz", "_41", "_2", "", "a b"] {
            assert_eq!(queue_of(not_a_token), None, "{not_a_token:?}");
        }
        let o = NatsOptions::default();
        assert_eq!(o.stream_name("orders.dlq").unwrap(), "BQ_orders_2Edlq");
        assert_eq!(o.subject("orders.dlq").unwrap(), "bq.orders_2Edlq");
        assert!(valid_subject(&o.subject("a b.c*").unwrap()));
        let long = "x".repeat(MAX_STREAM_NAME);
        assert!(matches!(o.stream_name(&long), Err(NatsError::Config(_))));
    }

    #[test]
    fn the_delivery_count_and_the_declared_version_are_facts() {
        assert_eq!(count(1), Count::Redelivered(0));
        assert_eq!(count(4), Count::Redelivered(3));
        assert_eq!(count(0), Count::Redelivered(0));
        // The runtime raises attempts to the count, never lowers it.
        let body = br#"{"job":"urn:x","attempts":1}"#;
        assert_eq!(
            &*attempts::reconcile(body, Some(count(4))),
            br#"{"job":"urn:x","attempts":3}"#
        );
        assert_eq!(&*attempts::reconcile(body, Some(count(1))), &body[..]);

        let mut headers = Headers::new();
        assert_eq!(declared(&headers), Declared::Absent);
        headers.insert(SCHEMA_VERSION_HEADER.into(), " 2".into());
        assert_eq!(declared(&headers), Declared::Text(" 2".into()));
        assert_eq!(declared(&headers).rejected().as_deref(), Some(" 2"));

        // A copy on behalf of the delivery carries the header back, as carried.
        let mut facts = Facts::default();
        assert!(routed_headers(&facts).is_empty());
        facts.declared_version = declared(&headers);
        assert_eq!(routed_headers(&facts), headers);
        facts.declared_version = Declared::Integer(2);
        assert_eq!(routed_headers(&facts)[SCHEMA_VERSION_HEADER], "2");
        facts.declared_version = Declared::Null;
        assert!(routed_headers(&facts).is_empty());
    }

    #[test]
    fn headers_round_trip_without_the_servers_own() {
        let headers = Headers::from([
            ("traceparent".to_owned(), "00-abc-def-01".to_owned()),
            ("bq-replay-bypass".to_owned(), "1".to_owned()),
            ("Nats-Msg-Id".to_owned(), "x".to_owned()),
        ]);
        let map = header_map(&headers).unwrap();
        assert_eq!(map.len(), 2);
        let back = headers_of(Some(&map));
        assert_eq!(back.len(), 2);
        assert_eq!(back["traceparent"], "00-abc-def-01");
        assert!(headers_of(None).is_empty());

        let mut repeated = HeaderMap::new();
        repeated.append("k", "first");
        repeated.append("k", "last");
        repeated.insert("nats-expected-stream", "s");
        assert_eq!(
            headers_of(Some(&repeated)),
            Headers::from([("k".to_owned(), "last".to_owned())])
        );

        for bad in [("a:b", "v"), ("k", "line\r\nbreak"), ("", "v")] {
            let headers = Headers::from([(bad.0.to_owned(), bad.1.to_owned())]);
            let err = header_map(&headers).unwrap_err();
            assert_eq!(
                err.kind(),
                babelqueue_transport::TransportErrorKind::Unsupported,
                "{bad:?}"
            );
        }
    }
}
