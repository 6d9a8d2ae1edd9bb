//! `artemis://` and `artemis+ssl://` URLs, and the transport's options.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use babelqueue_core::options;
use babelqueue_core::redact::{redact, scrub};

use crate::error::ArtemisError;

/// The AMQP port `artemis://` uses when the URL names none (the IANA AMQP port).
pub const DEFAULT_PORT: u16 = 5672;
/// The AMQP port `artemis+ssl://` uses when the URL names none (the IANA AMQPS port).
pub const DEFAULT_TLS_PORT: u16 = 5671;
/// How long a send waits for link credit by default (`send_credit_timeout_ms`).
pub const DEFAULT_SEND_CREDIT_TIMEOUT: Duration = Duration::from_secs(2);

/// The query options a URL may carry (anything else is refused).
pub const OPTIONS: &[&str] = &[
    "credit",
    "receive_timeout_ms",
    "reconnect_timeout_ms",
    "send_credit_timeout_ms",
    "queue_capability",
    "ca_file",
    "cert_file",
    "key_file",
    "ca",
];

/// Where and how to connect: parsed from a URL ([`ArtemisOptions::parse`]), or [`Default`] and
/// the fields, for [`ArtemisTransport::connect_with`](crate::ArtemisTransport::connect_with).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArtemisOptions {
    /// The broker host (a name, an IPv4 address, or an IPv6 address without brackets).
    pub host: String,
    /// The AMQP port.
    pub port: u16,
    /// TLS (`artemis+ssl://`, spoken as `amqps`).
    pub tls: bool,
    /// SASL PLAIN user; `None` = SASL ANONYMOUS.
    pub username: Option<String>,
    /// SASL PLAIN password.
    pub password: Option<String>,
    /// The smallest receiver link credit (`credit=N`, default 1). The credit grows on its own
    /// up to the runtime's `concurrency`; raise this floor only to prefetch beyond it.
    pub credit: u32,
    /// How long a `pop` waits when the runtime passes a zero timeout (`receive_timeout_ms`,
    /// default 1000).
    pub receive_timeout: Duration,
    /// How long a publish keeps reconnecting to a broker that went away before it gives up
    /// (`reconnect_timeout_ms`, default 30000).
    pub reconnect_timeout: Duration,
    /// How long a send waits for Artemis to grant link credit before it fails with
    /// [`ArtemisError::AddressBlocked`] (`send_credit_timeout_ms`, default 2000, at least 1).
    /// Artemis grants a sender no credit while its address is full (`max-size-bytes` reached
    /// under the `BLOCK` or `FAIL` address-full-policy); nothing is transferred then, and the
    /// connection stays in use. Separate from the 30 s the client waits for the outcome of a
    /// message it did transfer.
    pub send_credit_timeout: Duration,
    /// Ask for point-to-point (ANYCAST) addresses with the AMQP `queue` capability on every
    /// link (`queue_capability`, default true).
    pub queue_capability: bool,
    /// A PEM file of extra trust anchors for `artemis+ssl://` (`ca_file=/path/ca.pem`; `ca=`
    /// is its deprecated older name); the webpki roots are always trusted.
    pub ca_file: Option<PathBuf>,
    /// A PEM file of the client certificate (chain) for mutual TLS (`cert_file=`), with
    /// [`key_file`](Self::key_file).
    pub cert_file: Option<PathBuf>,
    /// A PEM file of the client certificate's private key (`key_file=`).
    pub key_file: Option<PathBuf>,
}

/// The old name of [`ArtemisOptions`].
#[deprecated(note = "renamed to ArtemisOptions")]
pub type ArtemisConfig = ArtemisOptions;

/// `artemis://localhost:5672`, anonymous, with every option at its default.
impl Default for ArtemisOptions {
    fn default() -> ArtemisOptions {
        ArtemisOptions {
            host: "localhost".to_owned(),
            port: DEFAULT_PORT,
            tls: false,
            username: None,
            password: None,
            credit: 1,
            receive_timeout: Duration::from_millis(1000),
            reconnect_timeout: Duration::from_millis(30_000),
            send_credit_timeout: DEFAULT_SEND_CREDIT_TIMEOUT,
            queue_capability: true,
            ca_file: None,
            cert_file: None,
            key_file: None,
        }
    }
}

impl fmt::Debug for ArtemisOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArtemisOptions")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("credit", &self.credit)
            .field("receive_timeout", &self.receive_timeout)
            .field("reconnect_timeout", &self.reconnect_timeout)
            .field("send_credit_timeout", &self.send_credit_timeout)
            .field("queue_capability", &self.queue_capability)
            .field("ca_file", &self.ca_file)
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .finish()
    }
}

impl ArtemisOptions {
    /// Parses `artemis://[user[:password]@]host[:port][?option=value&…]` or the same with
    /// `artemis+ssl://`. User and password are percent-decoded. See [`OPTIONS`].
    pub fn parse(url: &str) -> Result<ArtemisOptions, ArtemisError> {
        ArtemisOptions::parse_onto(url, ArtemisOptions::default())
    }

    /// [`parse`](ArtemisOptions::parse) starting from `options` instead of the defaults: the
    /// URL's scheme, host and port, its credentials (when it has any) and its query options
    /// override them.
    pub(crate) fn parse_onto(
        url: &str,
        options: ArtemisOptions,
    ) -> Result<ArtemisOptions, ArtemisError> {
        let bad = |m: String| Err(ArtemisError::Url(m));
        let Some((scheme, _)) = url.split_once("://") else {
            return bad(format!(
                "{:?} has no scheme; use artemis://host:port or artemis+ssl://host:port",
                redact(url)
            ));
        };
        let tls = match scheme {
            "artemis" => false,
            "artemis+ssl" => true,
            other => {
                return bad(format!(
                    "scheme {:?} is not an Artemis scheme; use artemis:// or artemis+ssl://",
                    redact(other)
                ));
            }
        };
        // `url` only parses "special" schemes' hosts strictly; parse as http(s) to get them.
        let rest = &url[scheme.len() + 3..];
        let parsed = url::Url::parse(&format!("http://{rest}")).map_err(|e| {
            ArtemisError::Url(format!("{:?}: {}", redact(url), scrub(&e.to_string(), url)))
        })?;
        if !matches!(parsed.path(), "" | "/") {
            return bad(format!(
                "{:?} has a path ({:?}); an Artemis URL names a broker, not a queue",
                redact(url),
                redact(parsed.path())
            ));
        }
        let host = match parsed.host() {
            Some(url::Host::Domain(d)) if !d.is_empty() => d.to_owned(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            _ => return bad(format!("{:?} names no host", redact(url))),
        };
        // `http://` drops the port when it equals 80, so read it back from the text.
        let port = match parsed.port() {
            Some(p) => p,
            None if explicit_port_80(rest) => 80,
            None if tls => DEFAULT_TLS_PORT,
            None => DEFAULT_PORT,
        };
        // `+` in the userinfo is a plus sign; `query_pairs` below reads `+` in the query as a
        // space (see babelqueue_core::options).
        let decode = |s: &str| options::decode_lossy(s, options::Component::Userinfo);
        let username = (!parsed.username().is_empty()).then(|| decode(parsed.username()));
        let password = parsed.password().map(decode);
        let mut config = ArtemisOptions {
            host,
            port,
            tls,
            ..options
        };
        // Credentials in the URL replace the options' as a pair; a URL without any keeps them.
        if username.is_some() || password.is_some() {
            config.username = username;
            config.password = password;
        }
        for (key, value) in parsed.query_pairs() {
            match key.as_ref() {
                "credit" => {
                    config.credit = match value.parse::<u32>() {
                        Ok(n) if n >= 1 => n,
                        _ => {
                            return bad(format!(
                                "credit must be an integer >= 1, got {:?}",
                                redact(&value)
                            ));
                        }
                    }
                }
                "receive_timeout_ms" => {
                    config.receive_timeout = Duration::from_millis(millis(&key, &value)?)
                }
                "reconnect_timeout_ms" => {
                    config.reconnect_timeout = Duration::from_millis(millis(&key, &value)?)
                }
                "send_credit_timeout_ms" => match millis(&key, &value)? {
                    0 => {
                        return bad(
                            "send_credit_timeout_ms must be at least 1 (with 0 no send could \
                             wait for the credit Artemis grants when a link attaches)"
                                .into(),
                        );
                    }
                    ms => config.send_credit_timeout = Duration::from_millis(ms),
                },
                "queue_capability" => config.queue_capability = boolean(&key, &value)?,
                "ca_file" | "ca" | "cert_file" | "key_file" if value.is_empty() => {
                    return bad(format!("{key} is empty; give the path of a PEM file"));
                }
                "ca_file" | "ca" => config.ca_file = Some(PathBuf::from(value.as_ref())),
                "cert_file" => config.cert_file = Some(PathBuf::from(value.as_ref())),
                "key_file" => config.key_file = Some(PathBuf::from(value.as_ref())),
                other => {
                    return bad(format!(
                        "unknown option {:?} in {:?}; the accepted options are {}",
                        redact(other),
                        redact(url),
                        OPTIONS.join(", ")
                    ));
                }
            }
        }
        if (config.ca_file.is_some() || config.cert_file.is_some()) && !config.tls {
            return bad("ca_file, cert_file and key_file only apply to artemis+ssl://".into());
        }
        if config.cert_file.is_some() != config.key_file.is_some() {
            return bad("cert_file and key_file go together (mutual TLS)".into());
        }
        Ok(config)
    }

    /// `host:port`, for messages (IPv6 hosts in brackets).
    pub fn endpoint(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URL the AMQP client connects to: `amqp://host:port` or `amqps://host:port`, the
    /// reference SDK's rewrite of `artemis://` and `artemis+ssl://`. Credentials are passed
    /// separately, never in this URL.
    pub fn amqp_url(&self) -> String {
        let scheme = if self.tls { "amqps" } else { "amqp" };
        format!("{scheme}://{}", self.endpoint())
    }
}

fn explicit_port_80(rest: &str) -> bool {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host_port.ends_with(":80")
}

fn millis(key: &str, value: &str) -> Result<u64, ArtemisError> {
    value.parse::<u64>().map_err(|_| {
        ArtemisError::Url(format!(
            "{key} must be a whole number of milliseconds, got {value:?}"
        ))
    })
}

fn boolean(key: &str, value: &str) -> Result<bool, ArtemisError> {
    options::parse_bool(value).ok_or_else(|| {
        ArtemisError::Url(format!(
            "{key} must be a boolean ({}), got {value:?}",
            options::BOOLEAN_WORDS
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_overrides_the_options_it_starts_from() {
        let base = ArtemisOptions {
            username: Some("app".into()),
            password: Some("secret".into()),
            credit: 8,
            receive_timeout: Duration::from_millis(250),
            ..ArtemisOptions::default()
        };
        let c = ArtemisOptions::parse_onto("artemis://h:5673?credit=2", base.clone()).unwrap();
        assert_eq!((c.host.as_str(), c.port), ("h", 5673));
        assert_eq!(
            (c.username.as_deref(), c.password.as_deref()),
            (Some("app"), Some("secret"))
        );
        assert_eq!(
            (c.credit, c.receive_timeout),
            (2, Duration::from_millis(250))
        );
        let c = ArtemisOptions::parse_onto("artemis://other@h", base).unwrap();
        assert_eq!((c.username.as_deref(), c.password), (Some("other"), None));
    }

    #[test]
    fn defaults_and_rewrite() {
        let c = ArtemisOptions::parse("artemis://127.0.0.1:5673").unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.tls, c.credit),
            ("127.0.0.1", 5673, false, 1)
        );
        assert_eq!(c.amqp_url(), "amqp://127.0.0.1:5673");
        assert_eq!((c.username, c.password), (None, None));
        assert_eq!(c.receive_timeout, Duration::from_secs(1));
        assert_eq!(c.send_credit_timeout, DEFAULT_SEND_CREDIT_TIMEOUT);
        assert!(c.queue_capability);
        let c = ArtemisOptions::parse("artemis+ssl://broker.example").unwrap();
        assert_eq!(c.amqp_url(), "amqps://broker.example:5671");
        assert_eq!(
            ArtemisOptions::parse("artemis://h").unwrap().amqp_url(),
            "amqp://h:5672"
        );
        assert_eq!(ArtemisOptions::parse("artemis://h:80").unwrap().port, 80);
        let v6 = ArtemisOptions::parse("artemis://[::1]:5673").unwrap();
        assert_eq!(v6.amqp_url(), "amqp://[::1]:5673");
    }

    #[test]
    fn credentials_are_decoded_and_redacted() {
        let c = ArtemisOptions::parse("artemis://us%40er:p%3Ass+w@host:1").unwrap();
        assert_eq!(c.username.as_deref(), Some("us@er"));
        assert_eq!(c.password.as_deref(), Some("p:ss+w"));
        let shown = format!("{c:?}");
        assert!(!shown.contains("p:ss"), "{shown}");
        assert_eq!(
            redact("artemis://u:secret@h:1?credit=2"),
            "artemis://u:***@h:1?credit=2"
        );
        assert!(
            !format!(
                "{:?}",
                ArtemisOptions::parse("artemis://u:secret@h").unwrap()
            )
            .contains("secret")
        );
        let user_only = ArtemisOptions::parse("artemis://admin@h").unwrap();
        assert_eq!(
            (user_only.username.as_deref(), user_only.password),
            (Some("admin"), None)
        );
    }

    #[test]
    fn options() {
        let c = ArtemisOptions::parse(
            "artemis+ssl://h?credit=8&receive_timeout_ms=250&reconnect_timeout_ms=0&send_credit_timeout_ms=750&queue_capability=off&ca=certs/ca.pem",
        )
        .unwrap();
        assert_eq!(c.credit, 8);
        assert_eq!(c.receive_timeout, Duration::from_millis(250));
        assert_eq!(c.reconnect_timeout, Duration::ZERO);
        assert_eq!(c.send_credit_timeout, Duration::from_millis(750));
        assert!(!c.queue_capability);
        assert_eq!(c.ca_file, Some(PathBuf::from("certs/ca.pem")));
    }

    #[test]
    fn ca_file_and_a_client_certificate() {
        let c = ArtemisOptions::parse(
            "artemis+ssl://h?ca_file=/etc/ca.pem&cert_file=/etc/me.pem&key_file=/etc/me.key",
        )
        .unwrap();
        assert_eq!(c.ca_file, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(c.cert_file, Some(PathBuf::from("/etc/me.pem")));
        assert_eq!(c.key_file, Some(PathBuf::from("/etc/me.key")));
        for (url, needle) in [
            ("artemis+ssl://h?cert_file=/c.pem", "go together"),
            ("artemis+ssl://h?key_file=/k.pem", "go together"),
            (
                "artemis://h?cert_file=/c.pem&key_file=/k.pem",
                "only apply to artemis+ssl",
            ),
            ("artemis+ssl://h?ca_file=", "ca_file is empty"),
        ] {
            let err = ArtemisOptions::parse(url).unwrap_err();
            assert!(err.to_string().contains(needle), "{url}: {err}");
        }
    }

    #[test]
    fn refusals_say_why() {
        for (url, needle) in [
            ("amqp://h", "not an Artemis scheme"),
            ("h:5672", "no scheme"),
            ("artemis://h/orders", "has a path"),
            ("artemis://h?credit=0", "credit must be"),
            ("artemis://h?credit=x", "credit must be"),
            ("artemis://h?prefetch=2", "unknown option \"prefetch\""),
            ("artemis://h?queue_capability=maybe", "must be a boolean"),
            ("artemis://h?receive_timeout_ms=1.5", "whole number"),
            ("artemis://h?send_credit_timeout_ms=0", "at least 1"),
            ("artemis://h?send_credit_timeout_ms=-1", "whole number"),
            ("artemis://h?ca=/x.pem", "only apply to artemis+ssl"),
            ("artemis://u:pw@:5672", "host"),
        ] {
            let err = ArtemisOptions::parse(url).unwrap_err();
            assert!(err.to_string().contains(needle), "{url}: {err}");
            assert!(!err.to_string().contains(":pw@"), "{url}: {err}");
        }
    }

    /// `Display` and `Debug` of the error and of the runtime error it becomes.
    fn shown(error: ArtemisError) -> String {
        let text = format!("{error}\n{error:?}");
        let runtime = babelqueue_core::TransportError::from(error);
        format!("{text}\n{runtime}\n{runtime:?}")
    }

    #[test]
    fn a_bad_url_option_never_shows_the_password() {
        for url in [
            "artemis://bq:hunter2@127.0.0.1:5673?credit=0",
            "artemis://bq:hunter2@127.0.0.1:5673?nope=1",
            "artemis://bq:hunter2@127.0.0.1:5673?password=hunter2",
            "artemis://bq:hun@ter2@[::1]:5673?credit=x",
            "artemis+ssl://bq:hunter2@h?receive_timeout_ms=soon",
            "artemis://bq:hunter2@127.0.0.1:5673/orders",
            "artemis://bq:hunter2@:5673",
            "artemis://bq:hunter2@h:notaport",
            "artemis:/bq:hunter2@127.0.0.1:5673",
            "bq:hunter2@127.0.0.1:5673",
            "amqp://bq:hunter2@127.0.0.1:5673",
        ] {
            let error = ArtemisOptions::parse(url).unwrap_err();
            let text = shown(error);
            assert!(
                !text.contains("hunter2") && !text.contains("ter2"),
                "{url}: {text}"
            );
        }
    }
}
