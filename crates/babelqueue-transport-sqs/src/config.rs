//! [`SqsOptions`]: the transport's options, from an `sqs://` URL or set in code.

use std::fmt;

use babelqueue_core::options::{Component, is_true};
use babelqueue_core::redact::{redact, scrub};

use crate::error::SqsError;
use crate::projection::{MAX_RECEIVE_BATCH, MAX_VISIBILITY_TIMEOUT, MAX_WAIT_TIME};

/// The options of an [`SqsTransport`](crate::SqsTransport).
///
/// ```
/// use babelqueue_transport_sqs::SqsOptions;
///
/// let config = SqsOptions::from_url(
///     "sqs://us-east-1?endpoint=http://127.0.0.1:5000&wait_time=5&max_messages=4",
/// )?;
/// assert_eq!(config.region.as_deref(), Some("us-east-1"));
/// assert_eq!(config.endpoint.as_deref(), Some("http://127.0.0.1:5000"));
/// assert_eq!((config.wait_time, config.max_messages), (Some(5), Some(4)));
/// # Ok::<(), babelqueue_transport_sqs::SqsError>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqsOptions {
    /// The AWS region (the URL host); `None` = the default provider chain.
    pub region: Option<String>,
    /// A custom endpoint (moto, LocalStack, ElasticMQ, a VPC endpoint).
    pub endpoint: Option<String>,
    /// A queue URL prefix: the queue URL is `<prefix>/<name>` and `GetQueueUrl` is skipped.
    pub prefix: Option<String>,
    /// FIFO mode for every queue: `MessageGroupId` and `MessageDeduplicationId` on each send. A
    /// queue whose name ends in `.fifo` is treated as FIFO even without it.
    pub fifo: bool,
    /// The FIFO `MessageGroupId`; `None` = the target queue's name.
    pub group_id: Option<String>,
    /// Upper bound of the long poll, 0..=20 s (`None` = the runtime's poll timeout, capped at 20).
    pub wait_time: Option<i32>,
    /// `VisibilityTimeout` sent on ReceiveMessage, 0..=43200 s (`None` = the queue's setting).
    pub visibility_timeout: Option<i32>,
    /// FIFO: rely on the queue's content-based deduplication (no `MessageDeduplicationId`).
    pub content_dedup: bool,
    /// Messages taken per ReceiveMessage, 1..=10. `None` (the default) follows the runtime's
    /// `concurrency`, which `App::consume` announces before its first receive; the extra
    /// messages of a batch wait in the transport, already received, until a handler slot is
    /// free.
    pub max_messages: Option<usize>,
}

/// The URL options [`SqsOptions::from_url`] accepts.
pub const URL_OPTIONS: &[&str] = &[
    "endpoint",
    "prefix",
    "fifo",
    "group_id",
    "wait_time",
    "visibility_timeout",
    "content_dedup",
    "max_messages",
];

/// The old name of [`SqsOptions`].
#[deprecated(note = "renamed to SqsOptions")]
pub type SqsConfig = SqsOptions;

impl fmt::Debug for SqsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqsOptions")
            .field("region", &self.region)
            .field("endpoint", &self.endpoint.as_deref().map(redact))
            .field("prefix", &self.prefix.as_deref().map(redact))
            .field("fifo", &self.fifo)
            .field("group_id", &self.group_id)
            .field("wait_time", &self.wait_time)
            .field("visibility_timeout", &self.visibility_timeout)
            .field("content_dedup", &self.content_dedup)
            .field("max_messages", &self.max_messages)
            .finish()
    }
}

impl SqsOptions {
    /// Parses `sqs://[region][?endpoint=URL&prefix=URL&fifo=1&group_id=ID&wait_time=N&
    /// visibility_timeout=N&content_dedup=1&max_messages=N]`.
    ///
    /// Booleans accept `1`, `true`, `yes`, `on` (case-insensitive); anything else is false.
    /// Values are percent-decoded. An unknown option, or a number out of range, is an error.
    pub fn from_url(url: &str) -> Result<SqsOptions, SqsError> {
        SqsOptions::from_url_onto(url, SqsOptions::default())
    }

    /// [`from_url`](SqsOptions::from_url) starting from `options` instead of the defaults: the
    /// URL's region (when it names one) and its query options override them.
    pub(crate) fn from_url_onto(url: &str, options: SqsOptions) -> Result<SqsOptions, SqsError> {
        // Neither the URL nor a value quoted in the reason shows a secret of the URL.
        let bad = |reason: String| {
            SqsError::Config(format!("{:?}: {}", redact(url), scrub(&reason, url)))
        };
        let rest = url
            .strip_prefix("sqs://")
            .ok_or_else(|| bad("the scheme must be sqs://".into()))?;
        let (authority, query) = rest.split_once('?').unwrap_or((rest, ""));
        let authority = authority.trim_end_matches('/');
        if authority.contains(['/', '@', ':']) {
            return Err(bad(format!(
                "the host part must be a bare AWS region such as us-east-1, got {:?}",
                redact(authority)
            )));
        }
        let mut config = options;
        if !authority.is_empty() {
            config.region = Some(authority.to_owned());
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = query_decode(key).map_err(&bad)?;
            let value = query_decode(value).map_err(&bad)?;
            let text = || (!value.is_empty()).then(|| value.clone());
            let int = |max: i64| -> Result<i64, SqsError> {
                value
                    .parse::<i64>()
                    .ok()
                    .filter(|n| (0..=max).contains(n))
                    .ok_or_else(|| {
                        bad(format!(
                            "{key} must be an integer in 0..={max}, got {value:?}"
                        ))
                    })
            };
            match key.as_str() {
                "endpoint" => config.endpoint = text(),
                "prefix" => config.prefix = text(),
                "group_id" => config.group_id = text(),
                "fifo" => config.fifo = is_true(&value),
                "content_dedup" => config.content_dedup = is_true(&value),
                "wait_time" => config.wait_time = Some(to_i32(int(MAX_WAIT_TIME.into())?)),
                "visibility_timeout" => {
                    config.visibility_timeout = Some(to_i32(int(MAX_VISIBILITY_TIMEOUT.into())?));
                }
                "max_messages" => {
                    let n = int(i64::try_from(MAX_RECEIVE_BATCH).unwrap_or(10))?;
                    if n == 0 {
                        return Err(bad("max_messages must be at least 1".into()));
                    }
                    config.max_messages = Some(usize::try_from(n).unwrap_or(1));
                }
                other => {
                    return Err(bad(format!(
                        "unknown option {other:?}; the options are {}",
                        URL_OPTIONS.join(", ")
                    )));
                }
            }
        }
        Ok(config)
    }

    /// Sets the region.
    #[must_use]
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Sets a custom endpoint.
    #[must_use]
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Sets the queue URL prefix (no `GetQueueUrl`).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Turns FIFO mode on or off.
    #[must_use]
    pub fn fifo(mut self, on: bool) -> Self {
        self.fifo = on;
        self
    }

    /// Sets the FIFO `MessageGroupId`.
    #[must_use]
    pub fn group_id(mut self, group_id: impl Into<String>) -> Self {
        self.group_id = Some(group_id.into());
        self
    }

    /// Caps the long poll (clamped to 0..=20 s).
    #[must_use]
    pub fn wait_time(mut self, seconds: i32) -> Self {
        self.wait_time = Some(seconds.clamp(0, MAX_WAIT_TIME));
        self
    }

    /// Sets the `VisibilityTimeout` sent on ReceiveMessage (clamped to 0..=43200 s).
    #[must_use]
    pub fn visibility_timeout(mut self, seconds: i32) -> Self {
        self.visibility_timeout = Some(seconds.clamp(0, MAX_VISIBILITY_TIMEOUT));
        self
    }

    /// Relies on the FIFO queue's content-based deduplication.
    #[must_use]
    pub fn content_dedup(mut self, on: bool) -> Self {
        self.content_dedup = on;
        self
    }

    /// A fixed number of messages per ReceiveMessage (clamped to 1..=10), instead of the
    /// runtime's `concurrency`.
    #[must_use]
    pub fn max_messages(mut self, n: usize) -> Self {
        self.max_messages = Some(n.clamp(1, MAX_RECEIVE_BATCH));
        self
    }
}

fn to_i32(n: i64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// A query key or value percent-decoded, `+` read as a space (the reference SDK's `parse_qs`;
/// see [`babelqueue_core::options`]).
fn query_decode(text: &str) -> Result<String, String> {
    babelqueue_core::options::decode(text, Component::Query)
        .ok_or_else(|| format!("bad percent-escape or invalid UTF-8 in {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_overrides_the_options_it_starts_from() {
        let base = SqsOptions::default()
            .region("eu-west-1")
            .endpoint("http://127.0.0.1:5000")
            .wait_time(5);
        let o = SqsOptions::from_url_onto("sqs://?wait_time=2", base.clone()).unwrap();
        assert_eq!(o.region.as_deref(), Some("eu-west-1"));
        assert_eq!(o.endpoint.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(o.wait_time, Some(2));
        let o = SqsOptions::from_url_onto("sqs://us-east-1", base).unwrap();
        assert_eq!(o.region.as_deref(), Some("us-east-1"));
    }

    #[test]
    fn every_option() {
        let c = SqsOptions::from_url(
            "sqs://eu-west-1?endpoint=http%3A%2F%2F127.0.0.1%3A5000&prefix=http://h/123/&fifo=TRUE\
             &group_id=g+1&wait_time=20&visibility_timeout=43200&content_dedup=yes&max_messages=10",
        )
        .unwrap();
        assert_eq!(c.region.as_deref(), Some("eu-west-1"));
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(c.prefix.as_deref(), Some("http://h/123/"));
        assert!(c.fifo && c.content_dedup);
        assert_eq!(c.group_id.as_deref(), Some("g 1"));
        assert_eq!(
            (c.wait_time, c.visibility_timeout, c.max_messages),
            (Some(20), Some(43200), Some(10))
        );
    }

    #[test]
    fn defaults_and_the_empty_host() {
        for url in ["sqs://", "sqs:///", "sqs://?fifo=0"] {
            let c = SqsOptions::from_url(url).unwrap();
            assert_eq!(c, SqsOptions::default(), "{url}");
        }
        assert_eq!(SqsOptions::default().max_messages, None);
        assert!(!SqsOptions::from_url("sqs://?fifo=no").unwrap().fifo);
    }

    #[test]
    fn bad_urls_say_why() {
        for (url, needle) in [
            ("redis://x", "scheme"),
            (
                "sqs://us-east-1?wait_time=21",
                "wait_time must be an integer in 0..=20",
            ),
            ("sqs://us-east-1?wait_time=x", "wait_time"),
            (
                "sqs://us-east-1?visibility_timeout=-1",
                "visibility_timeout",
            ),
            ("sqs://us-east-1?max_messages=0", "at least 1"),
            ("sqs://us-east-1?max_messages=11", "max_messages"),
            ("sqs://us-east-1?waittime=1", "unknown option \"waittime\""),
            ("sqs://host:4566", "bare AWS region"),
            ("sqs://us-east-1?endpoint=%zz", "percent-escape"),
        ] {
            let err = SqsOptions::from_url(url).unwrap_err();
            assert!(err.to_string().contains(needle), "{url}: {err}");
        }
    }

    #[test]
    fn setters_clamp() {
        let c = SqsOptions::default()
            .wait_time(99)
            .visibility_timeout(-5)
            .max_messages(50);
        assert_eq!(
            (c.wait_time, c.visibility_timeout, c.max_messages),
            (Some(20), Some(0), Some(10))
        );
    }
}
