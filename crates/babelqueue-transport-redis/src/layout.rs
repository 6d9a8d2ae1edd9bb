//! The pure part of the binding: URL options, key names, scores, the header frame, and what a
//! reserved value says about its attempt. No network; unit-tested here and by the conformance
//! runner.

use std::borrow::Cow;
use std::time::Duration;

use babelqueue_core::Headers;
use babelqueue_core::options;
use babelqueue_envelope::{JsonKind, Object, RawJson};

use crate::error::RedisError;

/// The default reservation lifetime: a delivery not settled within it is recovered.
pub const DEFAULT_RETRY_AFTER: u64 = 90;

/// The Laravel key prefix.
pub const DEFAULT_PREFIX: &str = "queues:";

/// The suffix of the default layout's in-flight list.
pub const DEFAULT_PROCESSING_SUFFIX: &str = ":processing";

/// How long a publish waits for its replicas when `wait_replicas` is set and `wait_timeout_ms`
/// is not.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(1);

/// The key of the header frame a value carries when it was published with headers (a wire
/// envelope never has it).
pub const FRAME_KEY: &str = "__bq_frame";

/// How messages are kept in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// `Q` ready list, `Q:processing` in-flight list, `Q:processing:deadlines` reservations
    /// (`<token>:<raw>` scored by deadline); settles are gated on the reservation token.
    #[default]
    Reliable,
    /// Laravel's keys (`queues:Q`, `:reserved`, `:delayed`, `:notify`) and scripts, so a Laravel
    /// worker and a Rust worker share one queue.
    Laravel,
}

/// What a publish on the Laravel layout does with a body that Laravel's own scripts would
/// change (`laravel_safe=off|warn|refuse`).
///
/// A Laravel worker's pop decodes and re-encodes the job with Redis's Lua cjson, and its release
/// and its recovery of an expired reservation put that re-encoded text back: integers of 15 or
/// more significant digits are rounded, `[]` becomes `{}`, repeated members collapse, and a
/// number beyond a double or a lone surrogate escape makes the pop fail after it has taken the
/// job off the list (the job is lost). [`babelqueue_envelope::cjson_changes`] is the rule;
/// docs/transports/redis.md has the measured table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LaravelSafe {
    /// No check (the default): every body is published as it is.
    #[default]
    Off,
    /// Publish every body, and log one warning per body Laravel would change, naming its
    /// members.
    Warn,
    /// Refuse the publish (a batch: the whole batch, before anything is sent) when a body
    /// holds anything Laravel would change, with [`RedisError::LaravelUnsafe`].
    Refuse,
}

impl LaravelSafe {
    /// The URL value: `off`, `warn` or `refuse`.
    pub fn as_str(self) -> &'static str {
        match self {
            LaravelSafe::Off => "off",
            LaravelSafe::Warn => "warn",
            LaravelSafe::Refuse => "refuse",
        }
    }

    /// Reads a URL value (ASCII case-insensitive; empty is `off`).
    pub fn parse(value: &str) -> Result<LaravelSafe, RedisError> {
        match value.to_ascii_lowercase().as_str() {
            "" | "off" => Ok(LaravelSafe::Off),
            "warn" => Ok(LaravelSafe::Warn),
            "refuse" => Ok(LaravelSafe::Refuse),
            _ => Err(RedisError::Config(format!(
                "laravel_safe must be off, warn or refuse; got {value:?}"
            ))),
        }
    }
}

/// The transport's options (from the URL query, the builder, or set in code for
/// [`RedisTransport::connect_with`](crate::RedisTransport::connect_with)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisOptions {
    /// The key layout.
    pub layout: Layout,
    /// The Laravel key prefix (default `queues:`).
    pub prefix: String,
    /// Seconds before an unsettled reservation is recovered; `None` disables recovery.
    pub retry_after: Option<u64>,
    /// How many due items one migrate or sweep moves (-1 = all).
    pub migration_batch_size: i64,
    /// The default layout's in-flight list suffix (default `:processing`).
    pub processing_suffix: String,
    /// How long a pop waits for work, overriding the runtime's poll timeout.
    pub block_for: Option<Duration>,
    /// Laravel layout only: what a publish does with a body Laravel's scripts would change
    /// (default [`LaravelSafe::Off`]).
    pub laravel_safe: LaravelSafe,
    /// How many replicas must confirm each publish (`WAIT` after the write) before it returns;
    /// 0 (the default) waits for none. See [`RedisError::NotReplicated`].
    pub wait_replicas: u32,
    /// How long a publish waits for `wait_replicas` confirmations (default
    /// [`DEFAULT_WAIT_TIMEOUT`]; at least 1 ms).
    pub wait_timeout: Duration,
    /// How long past the server's own wait (a blocking wait's timeout, `WAIT`'s) a reply may
    /// come before the call fails (a transient [`RedisError::Connection`]) and its connection is
    /// replaced: what notices a connection whose packets vanish without a reset or a close.
    /// Default [`DEFAULT_REPLY_TIMEOUT`](crate::liveness::DEFAULT_REPLY_TIMEOUT) (5 s); `None`
    /// (URL `reply_timeout_ms=0`) waits for ever. See [`liveness`](crate::liveness).
    pub reply_timeout: Option<Duration>,
    /// Keys laid out for Redis Cluster, every script's keys in one slot: set by a
    /// `redis+cluster://` URL. The reliable layout wraps a queue name without a hash tag in
    /// braces (`{orders}`, `{orders}:processing`, …); the Laravel layout refuses a queue whose
    /// key has no hash tag ([`RedisError::MissingHashTag`]).
    pub cluster: bool,
}

/// The old name of [`RedisOptions`].
#[deprecated(note = "renamed to RedisOptions")]
pub type Options = RedisOptions;

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            layout: Layout::Reliable,
            prefix: DEFAULT_PREFIX.to_owned(),
            retry_after: Some(DEFAULT_RETRY_AFTER),
            migration_batch_size: -1,
            processing_suffix: DEFAULT_PROCESSING_SUFFIX.to_owned(),
            block_for: None,
            laravel_safe: LaravelSafe::Off,
            wait_replicas: 0,
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
            reply_timeout: Some(crate::liveness::DEFAULT_REPLY_TIMEOUT),
            cluster: false,
        }
    }
}

/// A query value percent-decoded, `+` read as a space, leniently: the reference SDK's
/// `parse_qs` (see [`babelqueue_core::options`]).
fn query_decode(text: &str) -> String {
    options::decode_lossy(text, options::Component::Query)
}

impl RedisOptions {
    /// Splits a `redis://` / `rediss://` URL (or `redis+sentinel://`, `redis+cluster://` and
    /// their `rediss+` forms, see [`topology`](crate::topology)) into the URL for the client
    /// (without BabelQueue's query keys) and the options those keys set: `laravel` /
    /// `laravel_compat` (boolean: `1`, `true`, `yes`, `on`), `prefix`, `retry_after` (whole
    /// seconds, or `null`/`none`), `laravel_safe` (`off`, `warn`, `refuse`; see
    /// [`LaravelSafe`]), `wait_replicas` (a whole number of replicas), `wait_timeout_ms` and
    /// `reply_timeout_ms` (0: off; see [`reply_timeout`](RedisOptions::reply_timeout)). A
    /// `+cluster` scheme sets [`cluster`](RedisOptions::cluster).
    pub fn from_url(url: &str) -> Result<(String, RedisOptions), RedisError> {
        RedisOptions::from_url_onto(url, RedisOptions::default())
    }

    /// [`from_url`](RedisOptions::from_url) starting from `options` instead of the defaults:
    /// the URL's keys override them.
    pub(crate) fn from_url_onto(
        url: &str,
        options: RedisOptions,
    ) -> Result<(String, RedisOptions), RedisError> {
        let (scheme, _) = url.split_once("://").ok_or_else(|| {
            RedisError::Config(format!(
                "{:?} is not a redis:// or rediss:// URL",
                babelqueue_core::redact::redact(url)
            ))
        })?;
        if !crate::topology::is_scheme(scheme) {
            return Err(RedisError::Config(format!(
                "scheme {:?} is not redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster or rediss+cluster",
                babelqueue_core::redact::redact(scheme)
            )));
        }
        let mut options = options;
        options.cluster |= crate::topology::is_cluster_scheme(scheme);
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = query_decode(value);
            match key {
                "laravel" | "laravel_compat" => {
                    if options::is_true(&value) {
                        options.layout = Layout::Laravel;
                    }
                }
                "prefix" => {
                    if !value.is_empty() {
                        options.prefix = value;
                    }
                }
                "retry_after" => options.retry_after = parse_retry_after(&value)?,
                "laravel_safe" => options.laravel_safe = LaravelSafe::parse(&value)?,
                "wait_replicas" => {
                    options.wait_replicas = value.parse::<u32>().map_err(|_| {
                        RedisError::Config(format!(
                            "wait_replicas must be a whole number of replicas >= 0; got {value:?}"
                        ))
                    })?;
                }
                "wait_timeout_ms" => {
                    options.wait_timeout = value
                        .parse::<u64>()
                        .map(Duration::from_millis)
                        .map_err(|_| {
                            RedisError::Config(format!(
                                "wait_timeout_ms must be a whole number of milliseconds >= 1; got {value:?}"
                            ))
                        })?;
                }
                "reply_timeout_ms" => {
                    let ms = value.parse::<u64>().map_err(|_| {
                        RedisError::Config(format!(
                            "reply_timeout_ms must be a whole number of milliseconds (0: off); got {value:?}"
                        ))
                    })?;
                    options.reply_timeout = (ms > 0).then(|| Duration::from_millis(ms));
                }
                _ => kept.push(pair),
            }
        }
        let client_url = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Ok((client_url, options))
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<(), RedisError> {
        if self.migration_batch_size == 0 || self.migration_batch_size < -1 {
            return Err(RedisError::Config(format!(
                "migration_batch_size must be -1 (all) or at least 1, got {}",
                self.migration_batch_size
            )));
        }
        if self.processing_suffix.is_empty() {
            return Err(RedisError::Config(
                "processing_suffix must not be empty".into(),
            ));
        }
        if self.wait_replicas > 0 && self.wait_timeout < Duration::from_millis(1) {
            return Err(RedisError::Config(
                "wait_timeout_ms must be at least 1 (WAIT with 0 would block for ever)".into(),
            ));
        }
        if self.laravel_safe != LaravelSafe::Off && self.layout != Layout::Laravel {
            return Err(RedisError::Config(format!(
                "laravel_safe={} applies to the Laravel layout only (laravel=1); this transport uses the reliable layout, whose scripts never re-encode a body",
                self.laravel_safe.as_str()
            )));
        }
        Ok(())
    }

    /// Checks that `queue` can be used with these options: on Redis Cluster
    /// ([`cluster`](RedisOptions::cluster)) the Laravel layout's key for it must carry a hash
    /// tag ([`RedisError::MissingHashTag`]), and no queue name may be empty (its keys would
    /// hash to different slots).
    pub fn check_queue(&self, queue: &str) -> Result<(), RedisError> {
        if !self.cluster {
            return Ok(());
        }
        if queue.is_empty() {
            return Err(RedisError::Config(
                "an empty queue name on Redis Cluster: its keys would not share a slot".into(),
            ));
        }
        if self.layout == Layout::Laravel && hash_tag(&self.ready(queue)).is_none() {
            return Err(RedisError::MissingHashTag {
                queue: queue.to_owned(),
                key: self.ready(queue),
            });
        }
        Ok(())
    }

    /// The reliable layout's base key of `queue`: the name itself, or on Redis Cluster the name
    /// in braces (`{orders}`) unless it already carries a hash tag, so that every key of the
    /// queue hashes to one slot.
    fn base(&self, queue: &str) -> String {
        if self.cluster && hash_tag(queue).is_none() {
            format!("{{{queue}}}")
        } else {
            queue.to_owned()
        }
    }

    /// The ready list of `queue`.
    pub fn ready(&self, queue: &str) -> String {
        match self.layout {
            Layout::Reliable => self.base(queue),
            Layout::Laravel => format!("{}{queue}", self.prefix),
        }
    }

    /// The default layout's in-flight list.
    pub fn processing(&self, queue: &str) -> String {
        format!("{}{}", self.base(queue), self.processing_suffix)
    }

    /// The default layout's reservation set.
    pub fn deadlines(&self, queue: &str) -> String {
        format!("{}:deadlines", self.processing(queue))
    }

    /// The Laravel delayed set.
    pub fn delayed(&self, queue: &str) -> String {
        format!("{}:delayed", self.ready(queue))
    }

    /// The Laravel reservation set.
    pub fn reserved(&self, queue: &str) -> String {
        format!("{}:reserved", self.ready(queue))
    }

    /// The Laravel wake-up list.
    pub fn notify(&self, queue: &str) -> String {
        format!("{}:notify", self.ready(queue))
    }
}

/// The hash tag of `key` as Redis Cluster reads it: the text between the first `{` and the
/// first `}` after it, when that is not empty. Keys with the same tag share a slot.
pub fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')?;
    Some(&key[open + 1..open + 1 + close]).filter(|tag| !tag.is_empty())
}

/// The Redis Cluster slot of `key` (CRC16 of its hash tag, or of the whole key, mod 16384).
pub fn slot(key: &[u8]) -> u16 {
    fred::util::redis_keyslot(key)
}

fn parse_retry_after(value: &str) -> Result<Option<u64>, RedisError> {
    if value.is_empty() {
        return Ok(Some(DEFAULT_RETRY_AFTER));
    }
    if value.eq_ignore_ascii_case("null") || value.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    value.parse::<u64>().map(Some).map_err(|_| {
        RedisError::Config(format!(
            "retry_after must be a whole number of seconds >= 0, or null; got {value:?}"
        ))
    })
}

/// Whole epoch seconds: `floor(now)`, the unit of every score.
pub fn whole_seconds(now: f64) -> i64 {
    if now.is_finite() {
        now.floor() as i64
    } else {
        0
    }
}

/// The score of a delayed message: `floor(now) + ceil(delay)`, a negative delay counting as 0.
pub fn available_at(now: f64, delay: f64) -> i64 {
    let delay = if delay.is_finite() && delay > 0.0 {
        delay.ceil() as i64
    } else {
        0
    };
    whole_seconds(now).saturating_add(delay)
}

/// The score of a reservation: `floor(now) + retry_after`, or `+inf` when recovery is off.
pub fn deadline_score(now: f64, retry_after: Option<u64>) -> String {
    score_of(deadline(now, retry_after))
}

/// When a reservation made at `now` lapses: `floor(now) + retry_after` (whole epoch seconds),
/// `None` when recovery is off.
pub fn deadline(now: f64, retry_after: Option<u64>) -> Option<i64> {
    retry_after.map(|s| whole_seconds(now).saturating_add(i64::try_from(s).unwrap_or(i64::MAX)))
}

/// The deadline a held delivery reserved at `now` is checked against before it starts
/// ([`lapsed`]): its reservation's, or none when recovery is off or when the reservation
/// lapses in the second it is made (`retry_after=0`: refusing those would refuse every one).
pub fn hold_deadline(now: f64, retry_after: Option<u64>) -> Option<i64> {
    deadline(now, retry_after).filter(|d| *d > whole_seconds(now))
}

/// A deadline as the reservation's score (`+inf` for none).
pub fn score_of(deadline: Option<i64>) -> String {
    deadline.map_or_else(|| "+inf".to_owned(), |d| d.to_string())
}

/// Whether a reservation with `deadline` has lapsed at `now`: a sweep at `now` returns every
/// reservation scored up to `floor(now)`.
pub fn lapsed(deadline: Option<i64>, now: f64) -> bool {
    deadline.is_some_and(|d| d <= whole_seconds(now))
}

/// Headers without blank keys or values.
pub fn sanitize_headers<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Headers {
    headers
        .into_iter()
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The value to store for `body` with `headers`: the body itself when no header survives (or
/// the body is not UTF-8 text, which a frame cannot carry), else the frame
/// `{"__bq_frame":1,"headers":{…},"body":"<body>"}`.
pub fn frame<'a>(body: &'a [u8], headers: &Headers) -> Cow<'a, [u8]> {
    let clean = sanitize_headers(headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let Ok(text) = std::str::from_utf8(body) else {
        return Cow::Borrowed(body);
    };
    if clean.is_empty() {
        return Cow::Borrowed(body);
    }
    let mut out = String::with_capacity(body.len() + 64);
    out.push_str("{\"");
    out.push_str(FRAME_KEY);
    out.push_str("\":1,\"headers\":{");
    for (i, (k, v)) in clean.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(RawJson::string(k).as_str());
        out.push(':');
        out.push_str(RawJson::string(v).as_str());
    }
    out.push_str("},\"body\":");
    out.push_str(RawJson::string(text).as_str());
    out.push('}');
    Cow::Owned(out.into_bytes())
}

fn truthy_json(value: &RawJson) -> bool {
    match value.kind() {
        JsonKind::Null => false,
        JsonKind::Bool => value.as_bool() == Some(true),
        JsonKind::Number => !is_zero(value.as_str()),
        JsonKind::String => value.as_str() != "\"\"",
        JsonKind::Array => value.as_str() != "[]",
        JsonKind::Object => value.as_str() != "{}",
    }
}

fn is_zero(literal: &str) -> bool {
    literal.parse::<f64>().is_ok_and(|f| f == 0.0)
}

/// Reads a stored value: `(body, headers)`. A value is a frame only when it is a JSON object with
/// a truthy `__bq_frame` and a string `body`; anything else is a bare body with no headers.
pub fn unframe(value: &[u8]) -> (Cow<'_, [u8]>, Headers) {
    let bare = || (Cow::Borrowed(value), Headers::new());
    if value.first() != Some(&b'{') || !contains(value, b"\"__bq_frame\"") {
        return bare();
    }
    let Ok(text) = std::str::from_utf8(value) else {
        return bare();
    };
    let Ok(object) = Object::parse(text) else {
        return bare();
    };
    if !object.get(FRAME_KEY).is_some_and(truthy_json) {
        return bare();
    }
    let Some(body) = object.get("body").and_then(RawJson::as_string) else {
        return bare();
    };
    let mut headers = Headers::new();
    if let Some(raw) = object
        .get("headers")
        .filter(|h| h.kind() == JsonKind::Object)
        && let Ok(map) = Object::parse(raw.as_str())
    {
        for (key, value) in map.iter() {
            let value = match value.as_string() {
                Some(s) => s.into_owned(),
                None if value.is_null() => continue,
                None => value.as_str().to_owned(),
            };
            let key = key.name();
            if !key.is_empty() && !value.is_empty() {
                headers.insert(key.into_owned(), value);
            }
        }
    }
    (Cow::Owned(body.into_owned().into_bytes()), headers)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Whether the Laravel reserve script counted the attempt into the reserved member: it
/// reserves the raw job (`member == job`) when cjson could not read a numeric `attempts`, and
/// the runtime then treats the delivery as poison whatever the body says.
pub fn laravel_counted(job: &[u8], member: &[u8]) -> bool {
    job != member
}

/// A fresh reservation token: 32 lowercase hex digits from 16 random bytes.
pub fn new_token() -> String {
    format!("{:032x}", fastrand::u128(..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_delivery_lapses_with_its_reservation_by_the_sweeps_rule() {
        // (reserved at, retry_after, checked at, lapsed): a sweep at `now` returns every
        // reservation scored up to floor(now), and the score is floor(reserved at) + retry_after.
        let rows: [(f64, Option<u64>, f64, bool); 8] = [
            (100.2, Some(90), 100.2, false),
            (100.2, Some(90), 189.999, false),
            (100.2, Some(90), 190.0, true),
            (100.9, Some(1), 100.99, false),
            (100.9, Some(1), 101.0, true),
            (100.2, None, 1.0e12, false),
            // retry_after=0 lapses in the second it is made: never checked.
            (100.2, Some(0), 100.2, false),
            (100.2, Some(0), 500.0, false),
        ];
        for (reserved, retry_after, now, expected) in rows {
            let held = hold_deadline(reserved, retry_after);
            assert_eq!(
                lapsed(held, now),
                expected,
                "reserved {reserved}, retry_after {retry_after:?}, at {now}"
            );
        }
        // The check and the score agree wherever a deadline is checked.
        assert_eq!(hold_deadline(100.2, Some(90)), Some(190));
        assert_eq!(deadline_score(100.2, Some(90)), "190");
        assert_eq!(score_of(hold_deadline(100.2, None)), "+inf");
        assert_eq!(deadline_score(100.2, Some(0)), "100");
    }

    #[test]
    fn url_keys_override_the_options_they_start_from() {
        let base = RedisOptions {
            layout: Layout::Laravel,
            prefix: "app:".into(),
            block_for: Some(Duration::from_secs(2)),
            ..RedisOptions::default()
        };
        let (client, o) =
            RedisOptions::from_url_onto("redis://h:6379?prefix=other%3A", base).unwrap();
        assert_eq!(client, "redis://h:6379");
        assert_eq!(o.layout, Layout::Laravel);
        assert_eq!(o.prefix, "other:");
        assert_eq!(o.block_for, Some(Duration::from_secs(2)));
    }

    #[test]
    fn the_reply_timeout_defaults_to_5_s_and_the_url_sets_or_disables_it() {
        let (_, o) = RedisOptions::from_url("redis://h").unwrap();
        assert_eq!(o.reply_timeout, Some(Duration::from_secs(5)));
        let (client, o) = RedisOptions::from_url("redis://h?reply_timeout_ms=1500&x=1").unwrap();
        assert_eq!(client, "redis://h?x=1", "read, not passed to the client");
        assert_eq!(o.reply_timeout, Some(Duration::from_millis(1500)));
        let (_, o) = RedisOptions::from_url("redis://h?reply_timeout_ms=0").unwrap();
        assert_eq!(o.reply_timeout, None, "0 turns it off");
        let error = RedisOptions::from_url("redis://h?reply_timeout_ms=soon").unwrap_err();
        assert!(error.to_string().contains("reply_timeout_ms"), "{error}");
    }

    #[test]
    fn query_values_read_plus_as_a_space_and_booleans_as_the_reference_sdk() {
        // `parse_qs`: `+` is a space, `%2B` a plus; a bad escape is kept as written.
        let (_, o) = RedisOptions::from_url("redis://h?prefix=a+b%2Bc%:").unwrap();
        assert_eq!(o.prefix, "a b+c%:");
        // The password keeps its `+` (the client reads the userinfo).
        let (client, _) = RedisOptions::from_url("redis://u:p+w@h?laravel=1").unwrap();
        assert_eq!(client, "redis://u:p+w@h");
        for (word, laravel) in [("ON", true), ("yes", true), ("maybe", false), ("0", false)] {
            let (_, o) = RedisOptions::from_url(&format!("redis://h?laravel={word}")).unwrap();
            assert_eq!(o.layout == Layout::Laravel, laravel, "{word}");
        }
    }

    #[test]
    fn url_options_are_read_and_stripped() {
        let (client, o) = RedisOptions::from_url(
            "redis://u:p@127.0.0.1:6379/2?laravel=Yes&prefix=app_queues%3A&retry_after=null&x=1",
        )
        .unwrap();
        assert_eq!(client, "redis://u:p@127.0.0.1:6379/2?x=1");
        assert_eq!(
            (o.layout, o.prefix.as_str(), o.retry_after),
            (Layout::Laravel, "app_queues:", None)
        );
        let (client, o) =
            RedisOptions::from_url("rediss://h?laravel_compat=0&prefix=&retry_after=30").unwrap();
        assert_eq!(client, "rediss://h");
        assert_eq!(
            (o.layout, o.prefix.as_str(), o.retry_after),
            (Layout::Reliable, "queues:", Some(30))
        );
        assert_eq!(
            RedisOptions::from_url("redis://h?retry_after=NONE")
                .unwrap()
                .1
                .retry_after,
            None
        );
        for bad in [
            "redis://h?retry_after=-1",
            "redis://h?retry_after=1.5",
            "amqp://h",
            "h:6379",
        ] {
            assert!(RedisOptions::from_url(bad).is_err(), "{bad}");
        }
        assert!(
            RedisOptions {
                migration_batch_size: 0,
                ..RedisOptions::default()
            }
            .validate()
            .is_err()
        );
    }

    #[test]
    fn laravel_safe_is_read_from_the_url_and_only_allowed_on_the_laravel_layout() {
        for (query, want) in [
            ("laravel=1", LaravelSafe::Off),
            ("laravel=1&laravel_safe=off", LaravelSafe::Off),
            ("laravel=1&laravel_safe=", LaravelSafe::Off),
            ("laravel=1&laravel_safe=warn", LaravelSafe::Warn),
            ("laravel=1&laravel_safe=REFUSE", LaravelSafe::Refuse),
            ("laravel_safe=refuse&laravel=1", LaravelSafe::Refuse),
        ] {
            let (client, o) = RedisOptions::from_url(&format!("redis://h?{query}")).unwrap();
            assert_eq!(client, "redis://h", "{query}");
            assert_eq!(o.laravel_safe, want, "{query}");
            o.validate().unwrap();
        }
        let bad = RedisOptions::from_url("redis://h?laravel=1&laravel_safe=yes").unwrap_err();
        assert_eq!(bad.kind(), babelqueue_core::TransportErrorKind::Config);
        assert!(
            bad.to_string()
                .contains("laravel_safe must be off, warn or refuse"),
            "{bad}"
        );
        for mode in ["warn", "refuse"] {
            let (_, o) = RedisOptions::from_url(&format!("redis://h?laravel_safe={mode}")).unwrap();
            let e = o.validate().unwrap_err();
            assert_eq!(e.kind(), babelqueue_core::TransportErrorKind::Config);
            let text = e.to_string();
            assert!(text.contains(&format!("laravel_safe={mode}")), "{text}");
            assert!(text.contains("reliable layout"), "{text}");
        }
        let (_, off) = RedisOptions::from_url("redis://h?laravel_safe=off").unwrap();
        off.validate().unwrap();
    }

    #[test]
    fn key_names() {
        let laravel = RedisOptions {
            layout: Layout::Laravel,
            ..RedisOptions::default()
        };
        assert_eq!(laravel.ready("emails.high"), "queues:emails.high");
        assert_eq!(laravel.delayed("emails.high"), "queues:emails.high:delayed");
        assert_eq!(
            laravel.reserved("emails.high"),
            "queues:emails.high:reserved"
        );
        assert_eq!(laravel.notify("emails.high"), "queues:emails.high:notify");
        let reliable = RedisOptions::default();
        assert_eq!(reliable.ready("orders"), "orders");
        assert_eq!(reliable.processing("orders"), "orders:processing");
        assert_eq!(reliable.deadlines("orders"), "orders:processing:deadlines");
    }

    #[test]
    fn hash_tags_are_read_as_redis_cluster_reads_them() {
        for (key, tag) in [
            ("{orders}", Some("orders")),
            ("queues:{default}:reserved", Some("default")),
            ("{a}{b}", Some("a")),
            ("{}orders", None),
            ("{}{orders}", None),
            ("orders}{", None),
            ("{orders", None),
            ("orders", None),
            ("a{b{c}d}", Some("b{c")),
        ] {
            assert_eq!(hash_tag(key), tag, "{key}");
        }
        // CRC16 mod 16384, of the tag when there is one (the values Redis's CLUSTER KEYSLOT gives).
        assert_eq!(slot(b"orders"), slot(b"{orders}:processing:deadlines"));
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
    }

    #[test]
    fn cluster_keys_of_the_reliable_layout_share_the_queues_slot() {
        let cluster = RedisOptions {
            cluster: true,
            ..RedisOptions::default()
        };
        // (queue, ready, processing, deadlines)
        for (queue, ready, processing, deadlines) in [
            (
                "orders",
                "{orders}",
                "{orders}:processing",
                "{orders}:processing:deadlines",
            ),
            (
                "orders.dlq",
                "{orders.dlq}",
                "{orders.dlq}:processing",
                "{orders.dlq}:processing:deadlines",
            ),
            // a name that carries a tag keeps it: its dead-letter queue `{orders}.dlq` then
            // shares the slot of `{orders}`
            (
                "{orders}.dlq",
                "{orders}.dlq",
                "{orders}.dlq:processing",
                "{orders}.dlq:processing:deadlines",
            ),
            (
                "a}b",
                "{a}b}",
                "{a}b}:processing",
                "{a}b}:processing:deadlines",
            ),
        ] {
            assert_eq!(cluster.ready(queue), ready, "{queue}");
            assert_eq!(cluster.processing(queue), processing, "{queue}");
            assert_eq!(cluster.deadlines(queue), deadlines, "{queue}");
            let one = slot(ready.as_bytes());
            assert_eq!(slot(processing.as_bytes()), one, "{queue}");
            assert_eq!(slot(deadlines.as_bytes()), one, "{queue}");
            cluster.check_queue(queue).unwrap();
        }
        // A queue and its default dead-letter queue hash apart; a tagged pair does not.
        assert_ne!(
            slot(cluster.ready("orders").as_bytes()),
            slot(cluster.ready("orders.dlq").as_bytes())
        );
        assert_eq!(
            slot(cluster.ready("{orders}").as_bytes()),
            slot(cluster.ready("{orders}.dlq").as_bytes())
        );
        assert!(cluster.check_queue("").is_err());
        // Off the cluster, nothing changes.
        assert_eq!(RedisOptions::default().ready("{x}"), "{x}");
        assert_eq!(RedisOptions::default().processing("x"), "x:processing");
    }

    #[test]
    fn the_laravel_layout_on_a_cluster_needs_a_hash_tag_and_says_what_to_write() {
        let laravel = RedisOptions {
            cluster: true,
            layout: Layout::Laravel,
            ..RedisOptions::default()
        };
        for queue in ["{default}", "{orders}.dlq", "{a}b"] {
            laravel.check_queue(queue).unwrap();
            let one = slot(laravel.ready(queue).as_bytes());
            for key in [
                laravel.reserved(queue),
                laravel.delayed(queue),
                laravel.notify(queue),
            ] {
                assert_eq!(slot(key.as_bytes()), one, "{key}");
            }
        }
        for (queue, write) in [
            ("default", "\"{default}\""),
            ("orders.dlq", "\"{orders.dlq}\""),
            ("{}x", "\"{{}x}\""),
        ] {
            let error = laravel.check_queue(queue).unwrap_err();
            assert_eq!(error.kind(), babelqueue_core::TransportErrorKind::Config);
            let text = error.to_string();
            assert!(text.contains("hash tag"), "{text}");
            assert!(
                text.contains(&format!("use the queue name {write}")),
                "{text}"
            );
            assert!(text.contains(&format!("queues:{queue}")), "{text}");
        }
        // A prefix that carries the tag puts every queue in its slot.
        let prefixed = RedisOptions {
            prefix: "{app}:queues:".into(),
            ..laravel.clone()
        };
        prefixed.check_queue("default").unwrap();
        // Off the cluster, any name goes.
        RedisOptions {
            layout: Layout::Laravel,
            ..RedisOptions::default()
        }
        .check_queue("default")
        .unwrap();
    }

    #[test]
    fn wait_replicas_and_the_cluster_come_from_the_url() {
        for (url, replicas, timeout, cluster, client) in [
            ("redis://h", 0, 1000, false, "redis://h"),
            (
                "redis+sentinel://h1,h2/m?wait_replicas=1",
                1,
                1000,
                false,
                "redis+sentinel://h1,h2/m",
            ),
            (
                "rediss+sentinel://h/m/2?wait_replicas=2&wait_timeout_ms=250&sentinel_password=x",
                2,
                250,
                false,
                "rediss+sentinel://h/m/2?sentinel_password=x",
            ),
            (
                "redis+cluster://h:7000,h:7001?laravel=1",
                0,
                1000,
                true,
                "redis+cluster://h:7000,h:7001",
            ),
            (
                "rediss+cluster://h:7000",
                0,
                1000,
                true,
                "rediss+cluster://h:7000",
            ),
        ] {
            let (got, o) = RedisOptions::from_url(url).unwrap();
            assert_eq!(got, client, "{url}");
            assert_eq!(o.wait_replicas, replicas, "{url}");
            assert_eq!(o.wait_timeout, Duration::from_millis(timeout), "{url}");
            assert_eq!(o.cluster, cluster, "{url}");
            o.validate().unwrap();
        }
        for (url, needle) in [
            ("redis://h?wait_replicas=-1", "wait_replicas must be"),
            ("redis://h?wait_replicas=one", "wait_replicas must be"),
            ("redis://h?wait_timeout_ms=1.5", "wait_timeout_ms must be"),
            ("redis-sentinel://h/m", "is not redis"),
        ] {
            let error = RedisOptions::from_url(url).unwrap_err();
            assert!(error.to_string().contains(needle), "{url}: {error}");
        }
        let (_, zero) =
            RedisOptions::from_url("redis://h?wait_replicas=1&wait_timeout_ms=0").unwrap();
        let error = zero.validate().unwrap_err();
        assert!(error.to_string().contains("block for ever"), "{error}");
    }

    #[test]
    fn scores() {
        assert_eq!(available_at(1000.7, 1.5), 1002);
        assert_eq!(available_at(1000.2, 0.1), 1001);
        assert_eq!(available_at(1000.5, 3.0), 1003);
        assert_eq!(available_at(1000.5, -4.0), 1000);
        assert_eq!(deadline_score(1000.9, Some(30)), "1030");
        assert_eq!(deadline_score(1000.9, None), "+inf");
    }

    #[test]
    fn frames_round_trip_and_bare_values_stay_bare() {
        let body = r#"{"job":"urn:x","data":{"s":"é"}}"#.as_bytes();
        assert_eq!(frame(body, &Headers::new()), Cow::Borrowed(body));
        let blank = Headers::from([
            ("".to_owned(), "x".to_owned()),
            ("k".to_owned(), String::new()),
        ]);
        assert_eq!(frame(body, &blank), Cow::Borrowed(body));
        let headers = Headers::from([("traceparent".to_owned(), "00-a-b-01".to_owned())]);
        let framed = frame(body, &headers);
        assert_eq!(
            std::str::from_utf8(&framed).unwrap(),
            r#"{"__bq_frame":1,"headers":{"traceparent":"00-a-b-01"},"body":"{\"job\":\"urn:x\",\"data\":{\"s\":\"é\"}}"}"#
        );
        let (unframed, got) = unframe(&framed);
        assert_eq!((&*unframed, got), (body, headers.clone()));
        for bare in [
            &br#"{"job":"urn:x"}"#[..],
            br#"{"__bq_frame":0,"body":"x"}"#,
            br#"{"__bq_frame":1,"body":5}"#,
            b"\"__bq_frame\"",
            b"{\"__bq_frame\":1",
        ] {
            assert_eq!(unframe(bare).0, Cow::Borrowed(bare));
        }
        assert_eq!(frame(b"\xff", &headers), Cow::Borrowed(&b"\xff"[..]));
    }

    #[test]
    fn a_reserved_raw_job_was_not_counted() {
        assert!(laravel_counted(
            br#"{"job":"urn:x","attempts":0}"#,
            br#"{"job":"urn:x","attempts":1}"#
        ));
        assert!(!laravel_counted(
            br#"{"job":"urn:x"}"#,
            br#"{"job":"urn:x"}"#
        ));
    }

    #[test]
    fn tokens_are_32_lowercase_hex_and_fresh() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }
}
