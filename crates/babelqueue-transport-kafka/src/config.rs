//! Transport configuration: the `kafka://` URL, the consumer group, the delivery timeout, the
//! retry tiers, and the librdkafka options passed through to the client.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use babelqueue_core::options::{self, Component};

use crate::error::KafkaError;
use crate::replication::{self, Acks};

/// The recommended retry tiers, in milliseconds: 5 s, 30 s, 5 min, 30 min. Tiers are opt-in: a
/// transport without them cannot retry or delay (see [`RetryTiers`]).
pub const DEFAULT_RETRY_TIERS_MS: [u64; 4] = [5_000, 30_000, 300_000, 1_800_000];

/// The consumer group of the work-topic consumers.
pub const DEFAULT_GROUP_ID: &str = "babelqueue";

/// The consumer group of the re-injector.
pub const DEFAULT_REINJECT_GROUP_ID: &str = "babelqueue-retry-reinject";

/// How long a confirmed write waits for its delivery report.
pub const DEFAULT_DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The bootstrap servers used when the URL names none.
pub const DEFAULT_BROKERS: &str = "localhost:9092";

/// The retry topic of tier `n` (1-based) of `work_topic`: `<work_topic>.retry.<n>`. `n` is the
/// tier's index, never its delay.
///
/// ```
/// assert_eq!(babelqueue_transport_kafka::retry_topic("orders.v2", 2), "orders.v2.retry.2");
/// ```
pub fn retry_topic(work_topic: &str, n: usize) -> String {
    format!("{work_topic}.retry.{n}")
}

/// The work topic and tier index of a retry topic name (`^(.+)\.retry\.([0-9]+)$`).
///
/// ```
/// use babelqueue_transport_kafka::parse_retry_topic;
/// assert_eq!(parse_retry_topic("orders.v2.retry.3"), Some(("orders.v2", 3)));
/// assert_eq!(parse_retry_topic("orders"), None);
/// ```
pub fn parse_retry_topic(topic: &str) -> Option<(&str, usize)> {
    let (work, n) = topic.rsplit_once(".retry.")?;
    if work.is_empty() || n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((work, n.parse().ok()?))
}

/// A validated list of retry tiers: positive milliseconds, strictly ascending. Empty = no
/// tiers (retries and delayed publishes are refused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetryTiers(Vec<u64>);

impl RetryTiers {
    /// Checks `tiers_ms`: every tier positive, strictly ascending.
    pub fn new(tiers_ms: impl Into<Vec<u64>>) -> Result<RetryTiers, KafkaError> {
        let tiers = tiers_ms.into();
        if tiers.contains(&0) {
            return Err(KafkaError::Config(format!(
                "retry tiers must be positive milliseconds, got {tiers:?}"
            )));
        }
        if tiers.windows(2).any(|w| w[1] <= w[0]) {
            return Err(KafkaError::Config(format!(
                "retry tiers must be strictly ascending, got {tiers:?}"
            )));
        }
        Ok(RetryTiers(tiers))
    }

    /// No tiers.
    pub fn none() -> RetryTiers {
        RetryTiers(Vec::new())
    }

    /// [`DEFAULT_RETRY_TIERS_MS`].
    pub fn recommended() -> RetryTiers {
        RetryTiers(DEFAULT_RETRY_TIERS_MS.to_vec())
    }

    /// The tiers, in milliseconds.
    pub fn as_millis(&self) -> &[u64] {
        &self.0
    }

    /// Whether no tier is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of tiers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The delay of tier `n` (1-based).
    pub fn tier_ms(&self, n: usize) -> Option<u64> {
        n.checked_sub(1).and_then(|i| self.0.get(i)).copied()
    }

    /// The REQUESTED-DELAY rule: the smallest tier whose delay is at least `delay_ms`, as
    /// `(n, tier_ms)`; `None` when there are no tiers or the delay exceeds the largest one.
    pub fn for_delay(&self, delay_ms: u128) -> Option<(usize, u64)> {
        self.0
            .iter()
            .position(|&tier| u128::from(tier) >= delay_ms)
            .map(|i| (i + 1, self.0[i]))
    }

    /// The RETRY rule: tier `n = min(attempts_before, N-1) + 1` (the last tier once they run
    /// out), as `(n, tier_ms)`; `None` when there are no tiers. A negative count is read as 0.
    pub fn for_retry(&self, attempts_before: i64) -> Option<(usize, u64)> {
        let last = self.0.len().checked_sub(1)?;
        let before = usize::try_from(attempts_before.max(0)).unwrap_or(usize::MAX);
        let n = before.min(last) + 1;
        Some((n, self.0[n - 1]))
    }

    /// Where a redelivery the runtime asked for is parked: `(tier n, bq-delay ms)`; `None` when
    /// there are no tiers. The runtime computes the delay exactly as for every other broker;
    /// this maps it onto a tier:
    ///
    /// * a delay (back-off, `retry_after`, a release delay): the REQUESTED-DELAY rule, the
    ///   smallest tier at least that long (the largest tier when none is), `bq-delay` = the
    ///   request;
    /// * no delay configured and an attempt counted (`attempts` = the new count): the RETRY
    ///   rule on `attempts - 1`, `bq-delay` = the tier's own delay, which is what the reference
    ///   SDK writes (conformance `retry_republish`);
    /// * no delay and nothing counted (an unknown-URN release): the first tier, as for a zero
    ///   delay.
    pub fn for_redelivery(
        &self,
        delay: Option<std::time::Duration>,
        attempts: Option<i64>,
    ) -> Option<(usize, u128)> {
        match (delay, attempts) {
            (Some(delay), _) => {
                let requested = delay.as_millis();
                let n = match self.for_delay(requested) {
                    Some((n, _)) => n,
                    None if !self.0.is_empty() => self.0.len(),
                    None => return None,
                };
                Some((n, requested))
            }
            (None, Some(counted)) => self
                .for_retry(counted.saturating_sub(1))
                .map(|(n, tier)| (n, u128::from(tier))),
            (None, None) => self.for_delay(0).map(|(n, tier)| (n, u128::from(tier))),
        }
    }

    /// Parses `default`, `none`, or a comma-separated list of milliseconds.
    pub fn parse(text: &str) -> Result<RetryTiers, KafkaError> {
        match text.trim() {
            "default" | "recommended" => return Ok(RetryTiers::recommended()),
            "" | "none" => return Ok(RetryTiers::none()),
            _ => {}
        }
        let tiers = text
            .split(',')
            .map(|t| {
                t.trim().parse::<u64>().map_err(|_| {
                    KafkaError::Config(format!(
                        "retry tiers must be a comma-separated list of milliseconds, got {text:?}"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        RetryTiers::new(tiers)
    }
}

impl fmt::Display for RetryTiers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

/// Everything a Kafka transport needs to know.
///
/// Built from a `kafka://` URL ([`KafkaOptions::from_url`]) or by hand. The BabelQueue settings
/// (group, static member id, delivery timeout, retry tiers) never reach librdkafka as they
/// are; [`KafkaOptions::client`] holds the librdkafka options that do.
///
/// `Debug` masks every secret option (`sasl.password`, `ssl.key.password`, …: see
/// [`is_secret_option`]).
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaOptions {
    /// `bootstrap.servers`.
    pub brokers: String,
    /// The work-topic consumers' group.
    pub group_id: String,
    /// Static group membership (KIP-345): a stable id of this worker (one per worker process,
    /// e.g. a StatefulSet pod name), from which each work-topic consumer gets its
    /// `group.instance.id` (`<id>-<topic>`). A restarted worker with the same id takes its
    /// partitions back at once, without a rebalance; a worker that is gone keeps them until
    /// `session.timeout.ms` passes, and two live workers with the same id fence each other.
    /// Not with `group.protocol=consumer` (KIP-848), where the broker refuses a restarted
    /// member's id until the old session expires. `None` (the default): dynamic membership.
    pub group_instance_id: Option<String>,
    /// How long a confirmed write waits for its delivery report (also the producer's
    /// `message.timeout.ms`, so a write that timed out here cannot still land later unnoticed).
    pub delivery_timeout: Duration,
    /// The retry tiers.
    pub retry_tiers: RetryTiers,
    /// What a confirmed write waits for (`acks`, default [`Acks::All`]; see [`Acks`] for what
    /// each setting can lose).
    pub acks: Acks,
    /// The replication factor of the topics [`RdKafkaClient::create_topics`] creates;
    /// `None` (the default): the broker's `default.replication.factor`. The topics the broker
    /// creates on first use (work, retry tiers, dead letters) always get the broker's.
    ///
    /// [`RdKafkaClient::create_topics`]: crate::RdKafkaClient::create_topics
    pub replication_factor: Option<u16>,
    /// The `min.insync.replicas` of the topics [`RdKafkaClient::create_topics`] creates;
    /// `None` (the default): the broker's.
    ///
    /// [`RdKafkaClient::create_topics`]: crate::RdKafkaClient::create_topics
    pub min_insync_replicas: Option<u16>,
    /// librdkafka options for both the producer and the consumers (`linger.ms`,
    /// `session.timeout.ms`, `security.protocol` …).
    pub client: BTreeMap<String, String>,
}

/// The old name of [`KafkaOptions`].
#[deprecated(note = "renamed to KafkaOptions")]
pub type KafkaConfig = KafkaOptions;

impl fmt::Debug for KafkaOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secrets = self.secrets();
        let client: BTreeMap<&str, String> = self
            .client
            .iter()
            .map(|(k, v)| {
                let shown = if is_secret_option(k) {
                    MASK.to_owned()
                } else {
                    // a secret given (by mistake) as the value of another option
                    scrub(v, &secrets)
                };
                (k.as_str(), shown)
            })
            .collect();
        f.debug_struct("KafkaOptions")
            .field("brokers", &self.brokers)
            .field("group_id", &self.group_id)
            .field("group_instance_id", &self.group_instance_id)
            .field("delivery_timeout", &self.delivery_timeout)
            .field("retry_tiers", &self.retry_tiers)
            .field("acks", &self.acks)
            .field("replication_factor", &self.replication_factor)
            .field("min_insync_replicas", &self.min_insync_replicas)
            .field("client", &client)
            .finish()
    }
}

impl Default for KafkaOptions {
    fn default() -> Self {
        KafkaOptions {
            brokers: DEFAULT_BROKERS.to_owned(),
            group_id: DEFAULT_GROUP_ID.to_owned(),
            group_instance_id: None,
            delivery_timeout: DEFAULT_DELIVERY_TIMEOUT,
            retry_tiers: RetryTiers::none(),
            acks: Acks::All,
            replication_factor: None,
            min_insync_replicas: None,
            client: BTreeMap::new(),
        }
    }
}

/// What a secret is replaced with wherever a URL, an option or a librdkafka message is shown.
pub(crate) const MASK: &str = babelqueue_core::redact::MASK;

/// Whether a librdkafka option holds a secret, so that its value is never shown (in `Debug`,
/// errors or logs): every name the shared rule masks
/// ([`babelqueue_core::redact::is_secret_key`]: `sasl.password`, `ssl.key.password`,
/// `sasl.oauthbearer.client.secret` …), and the Kafka options that carry secrets under other
/// names (`ssl.key.pem`, `sasl.jaas.config`, `sasl.oauthbearer.config`), or a misspelt
/// password option (`sasl.pasword`: any name containing `pass`, `pasw`, `pwd`, `secret`,
/// `token` or `credential`).
pub fn is_secret_option(key: &str) -> bool {
    if babelqueue_core::redact::is_secret_key(key) {
        return true;
    }
    let key = key.to_ascii_lowercase();
    [
        "pass",
        "pasw",
        "pwd",
        "secret",
        "token",
        "jaas",
        "credential",
        "key.pem",
        "ssl_key",
        "oauthbearer.config",
    ]
    .iter()
    .any(|part| key.contains(part))
}

/// The librdkafka option behind one of the TLS file keys every TLS transport shares.
fn tls_option(key: &str) -> &'static str {
    match key {
        "cert_file" => "ssl.certificate.location",
        "key_file" => "ssl.key.location",
        _ => "ssl.ca.location",
    }
}

/// `url` with its secrets masked: the password of `user:password@` and every secret query
/// value ([`babelqueue_core::redact::redact`]), and the value of every other option that
/// [`is_secret_option`] names. For logs and error messages.
///
/// ```
/// use babelqueue_transport_kafka::config::redact_url;
/// assert_eq!(
///     redact_url("kafka://bq:s3cret@k1:9094?sasl.password=s3cret&ssl.key.pem=PEM&linger.ms=1"),
///     "kafka://bq:***@k1:9094?sasl.password=***&ssl.key.pem=***&linger.ms=1"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let url = babelqueue_core::redact::redact(url);
    let Some((head, query)) = url.split_once('?') else {
        return url;
    };
    format!("{head}?{}", redact_query(query))
}

/// A URL query with the value of every secret option replaced by [`MASK`].
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if is_secret_option(&query_decode(key)) => {
                format!("{key}={MASK}")
            }
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// A query key or value percent-decoded, `+` read as a space (a plus sign is `%2B`), leniently;
/// in the userinfo a `+` is a plus sign (see [`babelqueue_core::options`]).
fn query_decode(text: &str) -> String {
    options::decode_lossy(text, Component::Query)
}

/// `text` with every occurrence of each secret (of at least
/// [`babelqueue_core::redact::SCRUB_MIN_LEN`] characters) replaced by [`MASK`], then
/// [`babelqueue_core::redact::redact`]ed: the last line of defence for text that comes from
/// elsewhere (librdkafka's error and log lines).
pub(crate) fn scrub(text: &str, secrets: &[String]) -> String {
    let mut secrets: Vec<&String> = secrets
        .iter()
        .filter(|s| s.chars().count() >= babelqueue_core::redact::SCRUB_MIN_LEN)
        .collect();
    // Longest first, so a secret that contains another is masked whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_owned();
    for secret in secrets {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), MASK);
        }
    }
    babelqueue_core::redact::redact(&out)
}

impl KafkaOptions {
    /// The defaults, with these bootstrap servers.
    pub fn new(brokers: impl Into<String>) -> KafkaOptions {
        KafkaOptions {
            brokers: brokers.into(),
            ..KafkaOptions::default()
        }
    }

    /// The values of the secret options ([`is_secret_option`]), to be masked wherever text
    /// from librdkafka is shown.
    pub(crate) fn secrets(&self) -> Vec<String> {
        self.client
            .iter()
            .filter(|(k, v)| is_secret_option(k) && !v.is_empty())
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Parses `kafka://[user:password@]host:9092[,host2:9092][/][?key=value&…]`.
    ///
    /// The bootstrap servers are everything between `kafka://` (and the `user:password@` part)
    /// and the first `/` or `?` (default `localhost:9092`). Query keys: `group_id`,
    /// `group_instance_id` (static membership, see [`KafkaOptions::group_instance_id`]; the
    /// librdkafka spelling `group.instance.id` means the same), `delivery_timeout_ms`,
    /// `retry_tiers_ms` (`default`, `none` or `5000,30000,…`), `acks` (`all`, `1` or `0`; the
    /// librdkafka spelling `request.required.acks` means the same; see [`Acks`]),
    /// `replication_factor` and `min_insync_replicas` (of the topics
    /// [`RdKafkaClient::create_topics`](crate::RdKafkaClient::create_topics) creates); any
    /// other key is a librdkafka option passed to the client as is (`linger.ms=1`,
    /// `session.timeout.ms=6000`). Keys and values are percent-decoded, and a `+` in them is a
    /// space (a plus sign is `%2B`). Several bootstrap servers are separated by commas.
    ///
    /// SASL: `user:password@` sets `sasl.username` and `sasl.password` (percent-decoded; a `+`
    /// there is a plus sign), and
    /// `sasl.mechanism=PLAIN` unless the query names a mechanism; the query must then say
    /// `security.protocol=SASL_PLAINTEXT` or `SASL_SSL` (nothing is guessed). The same
    /// options can be given as query keys instead. Errors never show a secret.
    ///
    /// ```
    /// use babelqueue_transport_kafka::KafkaOptions;
    ///
    /// let config = KafkaOptions::from_url("kafka://k1:9092,k2:9092?retry_tiers_ms=default&linger.ms=1")?;
    /// assert_eq!(config.brokers, "k1:9092,k2:9092");
    /// assert_eq!(config.retry_tiers.as_millis(), &[5_000, 30_000, 300_000, 1_800_000]);
    /// assert_eq!(config.client["linger.ms"], "1");
    ///
    /// let sasl = KafkaOptions::from_url("kafka://bq:p%40ss@k1:9094?security.protocol=SASL_SSL")?;
    /// assert_eq!(sasl.brokers, "k1:9094");
    /// assert_eq!(sasl.client["sasl.username"], "bq");
    /// assert_eq!(sasl.client["sasl.password"], "p@ss");
    /// assert_eq!(sasl.client["sasl.mechanism"], "PLAIN");
    /// assert!(!format!("{sasl:?}").contains("p@ss"));
    /// # Ok::<(), babelqueue_transport_kafka::KafkaError>(())
    /// ```
    pub fn from_url(url: &str) -> Result<KafkaOptions, KafkaError> {
        KafkaOptions::from_url_onto(url, KafkaOptions::default())
    }

    /// [`from_url`](KafkaOptions::from_url) starting from `options` instead of the defaults:
    /// what the URL names (bootstrap servers, credentials, query keys) overrides them.
    pub(crate) fn from_url_onto(
        url: &str,
        options: KafkaOptions,
    ) -> Result<KafkaOptions, KafkaError> {
        let rest = match url.split_once("://") {
            Some(("kafka", rest)) => rest,
            Some((scheme, _)) => {
                return Err(KafkaError::Config(format!(
                    "a Kafka URL starts with kafka://, got the scheme {scheme:?}"
                )));
            }
            None => url,
        };
        let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
        let authority = location.split('/').next().unwrap_or_default();
        let (userinfo, brokers) = match authority.rsplit_once('@') {
            Some((userinfo, brokers)) => (Some(userinfo), brokers),
            None => (None, authority),
        };
        let mut config = options;
        if !brokers.is_empty() {
            brokers.clone_into(&mut config.brokers);
        }
        if let Some(userinfo) = userinfo {
            let (user, password) = match userinfo.split_once(':') {
                Some((user, password)) => (user, Some(password)),
                None => (userinfo, None),
            };
            let user = options::decode_lossy(user, Component::Userinfo);
            if user.is_empty() {
                return Err(KafkaError::Config(
                    "the user name before '@' in a Kafka URL must not be empty".into(),
                ));
            }
            config.client.insert("sasl.username".into(), user);
            if let Some(password) = password {
                config.client.insert(
                    "sasl.password".into(),
                    options::decode_lossy(password, Component::Userinfo),
                );
            }
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = query_decode(key);
            let value = query_decode(value);
            match key.as_str() {
                "group_id" => {
                    if value.is_empty() {
                        return Err(KafkaError::Config("group_id must not be empty".into()));
                    }
                    config.group_id = value;
                }
                "group_instance_id" | "group.instance.id" => {
                    if value.is_empty() {
                        config.group_instance_id = None;
                    } else {
                        config.group_instance_id = Some(checked_instance_id(value)?);
                    }
                }
                "delivery_timeout_ms" => {
                    let ms = value
                        .parse::<u64>()
                        .ok()
                        .filter(|ms| *ms > 0)
                        .ok_or_else(|| {
                            KafkaError::Config(format!(
                                "delivery_timeout_ms must be a positive integer, got {value:?}"
                            ))
                        })?;
                    config.delivery_timeout = Duration::from_millis(ms);
                }
                "retry_tiers_ms" => config.retry_tiers = RetryTiers::parse(&value)?,
                "acks" | "request.required.acks" => config.acks = Acks::parse(&value)?,
                "replication_factor" => {
                    config.replication_factor = Some(replication::replica_count(&key, &value)?);
                }
                "min_insync_replicas" => {
                    config.min_insync_replicas = Some(replication::replica_count(&key, &value)?);
                }
                "ca_file" | "cert_file" | "key_file" => {
                    if value.is_empty() {
                        return Err(KafkaError::Config(format!("{key} must not be empty")));
                    }
                    config.client.insert(tls_option(&key).into(), value);
                }
                _ if key.is_empty() => {
                    return Err(KafkaError::Config(format!(
                        "empty option name in the URL query {:?}",
                        redact_query(query)
                    )));
                }
                _ => {
                    config.client.insert(key, value);
                }
            }
        }
        config.check_tls()?;
        replication::check(config.acks, &config.client)?;
        if userinfo.is_some() {
            let protocol = config
                .client
                .get("security.protocol")
                .map(|p| p.to_ascii_uppercase());
            if !matches!(protocol.as_deref(), Some("SASL_PLAINTEXT" | "SASL_SSL")) {
                return Err(KafkaError::Config(
                    "a Kafka URL with user:password@ needs security.protocol=SASL_PLAINTEXT or \
                     SASL_SSL in its query"
                        .into(),
                ));
            }
            if !config.client.contains_key("sasl.mechanism")
                && !config.client.contains_key("sasl.mechanisms")
            {
                config
                    .client
                    .insert("sasl.mechanism".into(), "PLAIN".into());
            }
        }
        Ok(config)
    }

    /// Trusts the CA certificates of the PEM file `path` (librdkafka's `ssl.ca.location`; the
    /// URL query key `ca_file` does the same). TLS itself is `security.protocol=SSL` or
    /// `SASL_SSL`.
    #[must_use]
    pub fn ca_file(mut self, path: impl AsRef<std::path::Path>) -> KafkaOptions {
        self.client.insert(
            "ssl.ca.location".into(),
            path.as_ref().to_string_lossy().into_owned(),
        );
        self
    }

    /// Presents the client certificate of the PEM file `cert` with the private key of the PEM
    /// file `key` (mutual TLS: librdkafka's `ssl.certificate.location` and
    /// `ssl.key.location`; the URL query keys `cert_file` and `key_file` do the same).
    ///
    /// ```
    /// use babelqueue_transport_kafka::KafkaOptions;
    /// let url = "kafka://k1:9093?security.protocol=SSL&ca_file=/ca.pem&cert_file=/me.pem&key_file=/me.key";
    /// let options = KafkaOptions::from_url(url)?;
    /// assert_eq!(options.client["ssl.ca.location"], "/ca.pem");
    /// assert_eq!(options.client["ssl.certificate.location"], "/me.pem");
    /// assert_eq!(options.client["ssl.key.location"], "/me.key");
    /// assert_eq!(
    ///     options.client,
    ///     KafkaOptions::from_url("kafka://k1:9093?security.protocol=SSL")?
    ///         .ca_file("/ca.pem")
    ///         .client_certificate("/me.pem", "/me.key")
    ///         .client
    /// );
    /// # Ok::<(), babelqueue_transport_kafka::KafkaError>(())
    /// ```
    #[must_use]
    pub fn client_certificate(
        mut self,
        cert: impl AsRef<std::path::Path>,
        key: impl AsRef<std::path::Path>,
    ) -> KafkaOptions {
        for (name, path) in [("cert_file", cert.as_ref()), ("key_file", key.as_ref())] {
            self.client
                .insert(tls_option(name).into(), path.to_string_lossy().into_owned());
        }
        self
    }

    /// A CA file or a client certificate needs a TLS protocol, and a certificate its key.
    fn check_tls(&self) -> Result<(), KafkaError> {
        let has = |name: &str| self.client.contains_key(tls_option(name));
        if has("cert_file") != has("key_file") {
            return Err(KafkaError::Config(
                "cert_file and key_file go together (mutual TLS)".into(),
            ));
        }
        if has("ca_file") || has("cert_file") {
            let protocol = self
                .client
                .get("security.protocol")
                .map(|p| p.to_ascii_uppercase());
            if !matches!(protocol.as_deref(), Some("SSL" | "SASL_SSL")) {
                return Err(KafkaError::Config(
                    "ca_file, cert_file and key_file need security.protocol=SSL or SASL_SSL".into(),
                ));
            }
        }
        Ok(())
    }

    /// Sets static group membership (see [`KafkaOptions::group_instance_id`]).
    pub fn with_group_instance_id(
        mut self,
        id: impl Into<String>,
    ) -> Result<KafkaOptions, KafkaError> {
        self.group_instance_id = Some(checked_instance_id(id.into())?);
        Ok(self)
    }

    /// Sets the retry tiers.
    #[must_use]
    pub fn with_retry_tiers(mut self, tiers: RetryTiers) -> KafkaOptions {
        self.retry_tiers = tiers;
        self
    }

    /// Sets the work-topic consumers' group.
    #[must_use]
    pub fn with_group_id(mut self, group_id: impl Into<String>) -> KafkaOptions {
        self.group_id = group_id.into();
        self
    }

    /// Sets what a confirmed write waits for (see [`Acks`]).
    #[must_use]
    pub fn with_acks(mut self, acks: Acks) -> KafkaOptions {
        self.acks = acks;
        self
    }

    /// Sets the delivery timeout of confirmed writes.
    #[must_use]
    pub fn with_delivery_timeout(mut self, timeout: Duration) -> KafkaOptions {
        self.delivery_timeout = timeout;
        self
    }

    /// Adds a librdkafka option.
    #[must_use]
    pub fn with_client_option(
        mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> KafkaOptions {
        self.client.insert(key.into(), value.into());
        self
    }
}

/// Kafka's rule for a `group.instance.id`: 1 to 249 of `[A-Za-z0-9._-]`.
fn checked_instance_id(id: String) -> Result<String, KafkaError> {
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if id.is_empty() || id.len() > 249 || !id.chars().all(legal) {
        return Err(KafkaError::Config(format!(
            "group_instance_id must be 1 to 249 of [A-Za-z0-9._-], got {id:?}"
        )));
    }
    Ok(id)
}

/// The `group.instance.id` of the consumer of `topics` in a worker whose static id is `id`:
/// `<id>-<topic>` (each queue has its own consumer, and two consumers sharing one id would
/// fence each other), or `<id>-<hash>` when that would pass Kafka's 249 characters.
pub(crate) fn member_instance_id(id: &str, topics: &[String]) -> String {
    let joined = topics.join("+");
    let full = format!("{id}-{joined}");
    if full.len() <= 249 && !joined.contains('+') {
        return full;
    }
    // FNV-1a: stable across runs and Rust versions (the id must not change on a restart).
    let hash = joined.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let suffix = format!("-{hash:016x}");
    let keep = id.len().min(249 - suffix.len());
    format!("{}{suffix}", id.get(..keep).unwrap_or(id))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn url_parts_override_the_options_they_start_from() {
        let base = KafkaOptions::new("base:9092")
            .with_group_id("workers")
            .with_client_option("linger.ms", "5");
        let c = KafkaOptions::from_url_onto("kafka://k1:9092?linger.ms=1", base.clone()).unwrap();
        assert_eq!(c.brokers, "k1:9092");
        assert_eq!(c.group_id, "workers");
        assert_eq!(c.client["linger.ms"], "1");
        let c = KafkaOptions::from_url_onto("kafka://", base).unwrap();
        assert_eq!(
            c.brokers, "base:9092",
            "a URL without servers keeps the options' ones"
        );
    }

    #[test]
    fn a_runtime_delay_maps_onto_a_tier_and_no_delay_keeps_the_attempt_rule() {
        let tiers = RetryTiers::new([5_000, 30_000, 300_000]).unwrap();
        let at = |delay_ms: Option<u64>, attempts| {
            tiers.for_redelivery(delay_ms.map(Duration::from_millis), attempts)
        };
        // A requested delay: the smallest tier at least that long, bq-delay the request.
        assert_eq!(at(Some(2_000), Some(1)), Some((1, 2_000)));
        assert_eq!(at(Some(5_000), Some(3)), Some((1, 5_000)));
        assert_eq!(at(Some(5_001), Some(1)), Some((2, 5_001)));
        // Above the largest tier: the largest tier.
        assert_eq!(at(Some(3_600_000), Some(1)), Some((3, 3_600_000)));
        // No delay configured: the attempt rule, bq-delay the tier's own.
        assert_eq!(at(None, Some(1)), Some((1, 5_000)));
        assert_eq!(at(None, Some(2)), Some((2, 30_000)));
        assert_eq!(at(None, Some(9)), Some((3, 300_000)));
        // A release that counts nothing: the first tier.
        assert_eq!(at(None, None), Some((1, 5_000)));
        assert_eq!(RetryTiers::none().for_redelivery(None, Some(1)), None);
    }

    use super::*;

    #[test]
    fn urls() {
        let c = KafkaOptions::from_url("kafka://127.0.0.1:9092").unwrap();
        assert_eq!(c.brokers, "127.0.0.1:9092");
        assert_eq!(c.group_id, "babelqueue");
        assert!(c.retry_tiers.is_empty());
        assert!(c.client.is_empty());
        assert_eq!(
            KafkaOptions::from_url("kafka://").unwrap().brokers,
            "localhost:9092"
        );
        assert_eq!(
            KafkaOptions::from_url("kafka:///x").unwrap().brokers,
            "localhost:9092"
        );
        let c = KafkaOptions::from_url(
            "kafka://a:1,b:2/ignored?group_id=g&retry_tiers_ms=1000,60000&delivery_timeout_ms=500&session.timeout.ms=6000&sasl.password=p%26w",
        )
        .unwrap();
        assert_eq!(c.brokers, "a:1,b:2");
        assert_eq!(c.group_id, "g");
        assert_eq!(c.retry_tiers.as_millis(), &[1000, 60000]);
        assert_eq!(c.delivery_timeout, Duration::from_millis(500));
        assert_eq!(c.client["session.timeout.ms"], "6000");
        assert_eq!(c.client["sasl.password"], "p&w");
        assert!(!c.client.contains_key("retry_tiers_ms"));
        for bad in [
            "redis://x",
            "kafka://x?retry_tiers_ms=5,5",
            "kafka://x?retry_tiers_ms=0",
            "kafka://x?retry_tiers_ms=a",
            "kafka://x?delivery_timeout_ms=0",
            "kafka://x?group_id=",
            "kafka://x?=1",
        ] {
            assert!(KafkaOptions::from_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shared_tls_keys_become_librdkafka_options() {
        let c = KafkaOptions::from_url(
            "kafka://k1:9093?security.protocol=ssl&ca_file=%2Fetc%2Fca.pem\
             &cert_file=/etc/me.pem&key_file=/etc/me.key",
        )
        .unwrap();
        assert_eq!(c.client["ssl.ca.location"], "/etc/ca.pem");
        assert_eq!(c.client["ssl.certificate.location"], "/etc/me.pem");
        assert_eq!(c.client["ssl.key.location"], "/etc/me.key");
        assert!(!c.client.contains_key("ca_file"));
        // the librdkafka spelling still passes through as it is
        let c = KafkaOptions::from_url("kafka://k1?security.protocol=SSL&ssl.ca.location=/x.pem")
            .unwrap();
        assert_eq!(c.client["ssl.ca.location"], "/x.pem");
        for (url, needle) in [
            ("kafka://k1?ca_file=/ca.pem", "security.protocol=SSL"),
            (
                "kafka://k1?security.protocol=PLAINTEXT&ca_file=/ca.pem",
                "security.protocol=SSL",
            ),
            (
                "kafka://k1?security.protocol=SSL&cert_file=/c.pem",
                "go together",
            ),
            (
                "kafka://k1?security.protocol=SSL&ca_file=",
                "must not be empty",
            ),
        ] {
            let err = KafkaOptions::from_url(url).unwrap_err();
            assert!(err.to_string().contains(needle), "{url}: {err}");
        }
    }

    #[test]
    fn credentials_in_the_url() {
        let c = KafkaOptions::from_url(
            "kafka://bq:p%40ss%3Aw@k1:9094,k2:9094/?security.protocol=sasl_plaintext",
        )
        .unwrap();
        assert_eq!(c.brokers, "k1:9094,k2:9094");
        assert_eq!(c.client["sasl.username"], "bq");
        assert_eq!(c.client["sasl.password"], "p@ss:w");
        assert_eq!(c.client["sasl.mechanism"], "PLAIN");
        let debug = format!("{c:?}");
        assert!(!debug.contains("p@ss"), "{debug}");
        assert!(debug.contains("\"sasl.password\": \"***\""), "{debug}");
        // an explicit mechanism is kept; the query may override the user
        let c = KafkaOptions::from_url(
            "kafka://bq:pw@k1:9094?security.protocol=SASL_SSL&sasl.mechanism=SCRAM-SHA-512",
        )
        .unwrap();
        assert_eq!(c.client["sasl.mechanism"], "SCRAM-SHA-512");
        // `+` is a plus sign in the userinfo, a space in the query (`%2B` is a plus sign)
        let c = KafkaOptions::from_url(
            "kafka://b+q:p+w@k1:9094?security.protocol=SASL_SSL&client.id=a+b%2Bc",
        )
        .unwrap();
        assert_eq!(c.client["sasl.username"], "b+q");
        assert_eq!(c.client["sasl.password"], "p+w");
        assert_eq!(c.client["client.id"], "a b+c");
        // nothing is guessed: credentials need a SASL protocol
        for bad in [
            "kafka://bq:pw@k1:9094",
            "kafka://bq:pw@k1:9094?security.protocol=SSL",
            "kafka://:pw@k1:9094?security.protocol=SASL_SSL",
        ] {
            let err = KafkaOptions::from_url(bad).unwrap_err();
            assert!(!err.to_string().contains("pw"), "{err}");
        }
        assert_eq!(
            redact_url("kafka://bq:pw@k1:9094?security.protocol=SASL_SSL&sasl.jaas.config=x"),
            "kafka://bq:***@k1:9094?security.protocol=SASL_SSL&sasl.jaas.config=***"
        );
        for secret in [
            "sasl.password",
            "SASL.PASSWORD",
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.key.pem",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.config",
            "sasl.pasword",
        ] {
            assert!(is_secret_option(secret), "{secret}");
        }
        for plain in [
            "sasl.username",
            "sasl.mechanism",
            "linger.ms",
            "ssl.ca.location",
        ] {
            assert!(!is_secret_option(plain), "{plain}");
        }
    }

    #[test]
    fn static_membership() {
        assert_eq!(KafkaOptions::default().group_instance_id, None);
        let c = KafkaOptions::from_url("kafka://k?group_instance_id=worker-1").unwrap();
        assert_eq!(c.group_instance_id.as_deref(), Some("worker-1"));
        assert!(!c.client.contains_key("group.instance.id"));
        let c = KafkaOptions::from_url("kafka://k?group.instance.id=w.2").unwrap();
        assert_eq!(c.group_instance_id.as_deref(), Some("w.2"));
        assert!(!c.client.contains_key("group.instance.id"));
        assert!(KafkaOptions::from_url("kafka://k?group_instance_id=a%20b").is_err());
        assert!(
            KafkaOptions::default()
                .with_group_instance_id("x/y")
                .is_err()
        );
        assert_eq!(
            member_instance_id("worker-1", &["orders".to_owned()]),
            "worker-1-orders"
        );
        let two = member_instance_id("w", &["a".to_owned(), "b".to_owned()]);
        assert!(two.starts_with("w-") && two.len() == 2 + 16, "{two}");
        assert_eq!(
            two,
            member_instance_id("w", &["a".to_owned(), "b".to_owned()])
        );
        let long = member_instance_id(&"w".repeat(249), &["orders".to_owned()]);
        assert_eq!(long.len(), 249);
    }

    #[test]
    fn tiers() {
        let t = RetryTiers::recommended();
        assert_eq!(t.for_delay(1000), Some((1, 5000)));
        assert_eq!(t.for_delay(5000), Some((1, 5000)));
        assert_eq!(t.for_delay(5001), Some((2, 30000)));
        assert_eq!(t.for_delay(1_800_000), Some((4, 1_800_000)));
        assert_eq!(t.for_delay(1_800_001), None);
        assert_eq!(t.for_retry(0), Some((1, 5000)));
        assert_eq!(t.for_retry(3), Some((4, 1_800_000)));
        assert_eq!(t.for_retry(10), Some((4, 1_800_000)));
        assert_eq!(t.for_retry(-2), Some((1, 5000)));
        assert_eq!(RetryTiers::none().for_retry(0), None);
        assert_eq!(RetryTiers::none().for_delay(0), None);
        assert!(RetryTiers::new(vec![3, 2]).is_err());
        assert_eq!(RetryTiers::parse("none").unwrap(), RetryTiers::none());
        assert_eq!(t.to_string(), "5000,30000,300000,1800000");
        assert_eq!(t.tier_ms(0), None);
        assert_eq!(t.tier_ms(2), Some(30000));
    }

    #[test]
    fn retry_topic_names() {
        assert_eq!(retry_topic("orders", 1), "orders.retry.1");
        assert_eq!(
            parse_retry_topic("a.retry.b.retry.2"),
            Some(("a.retry.b", 2))
        );
        assert_eq!(parse_retry_topic(".retry.2"), None);
        assert_eq!(parse_retry_topic("orders.retry."), None);
        assert_eq!(parse_retry_topic("orders.retry.x"), None);
    }
}
