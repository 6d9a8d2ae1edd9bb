//! The one table of settings: each row's names (TOML key, environment variable), the form it
//! expects and how a text becomes a field. Pure: no environment, no file; `super` feeds it.

use std::time::Duration;

use super::Settings;
use crate::policy::{Jitter, UnknownUrn};

/// The prefix of every variable.
pub const PREFIX: &str = "BABELQUEUE_";

/// Variables with the prefix that are not settings and are never reported as unknown: the path
/// of the TOML file [`Settings::load`] reads, the CLI's log filter, the metrics address of
/// `babelqueue consume`, and the token of `babelqueue serve`.
pub const NOT_SETTINGS: &[&str] = &[
    "BABELQUEUE_CONFIG",
    "BABELQUEUE_LOG",
    "BABELQUEUE_METRICS_LISTEN",
    "BABELQUEUE_ADMIN_TOKEN",
];

/// One setting.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The key in a TOML file and the field of [`Settings`] (the reference SDK's name).
    pub key: &'static str,
    /// The environment variable.
    pub env: &'static str,
    /// What a value must look like, as error messages say it.
    pub expected: &'static str,
    set: fn(&mut Settings, &str) -> Option<()>,
}

impl Row {
    /// Parses `value` into `settings`; `None` when it is not of the [`expected`](Row::expected)
    /// form (the field is then unchanged).
    pub fn apply(&self, settings: &mut Settings, value: &str) -> Option<()> {
        (self.set)(settings, value)
    }
}

const WHOLE: &str = "a whole number ≥ 1";
const SECONDS: &str = "a number of seconds ≥ 0 (such as 30 or 0.5)";

fn whole(v: &str) -> Option<u64> {
    v.trim().parse::<u64>().ok().filter(|n| *n >= 1)
}

fn seconds(v: &str) -> Option<Duration> {
    let s: f64 = v.trim().parse().ok()?;
    (s.is_finite() && s >= 0.0)
        .then(|| Duration::try_from_secs_f64(s).ok())
        .flatten()
}

fn flag(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn name(v: &str) -> Option<String> {
    let v = v.trim();
    (!v.is_empty()).then(|| v.to_owned())
}

/// Every setting, in the order the documentation lists them.
pub const ROWS: &[Row] = &[
    Row {
        key: "broker_url",
        env: "BABELQUEUE_URL",
        expected: "a broker URL such as redis://host:6379 or memory://",
        set: |s, v| {
            let v = name(v).filter(|v| v.contains("://"))?;
            s.broker_url = Some(v);
            Some(())
        },
    },
    Row {
        key: "queue",
        env: "BABELQUEUE_QUEUE",
        expected: "a queue name (not empty)",
        set: |s, v| {
            s.queue = Some(name(v)?);
            Some(())
        },
    },
    Row {
        key: "max_attempts",
        env: "BABELQUEUE_MAX_ATTEMPTS",
        expected: WHOLE,
        set: |s, v| {
            s.max_attempts = Some(i64::try_from(whole(v)?).ok()?);
            Some(())
        },
    },
    Row {
        key: "dead_letter",
        env: "BABELQUEUE_DEAD_LETTER",
        expected: "true or false (or 1/0, yes/no, on/off)",
        set: |s, v| {
            s.dead_letter = Some(flag(v)?);
            Some(())
        },
    },
    Row {
        key: "dead_letter_queue",
        env: "BABELQUEUE_DEAD_LETTER_QUEUE",
        expected: "a queue name (not empty)",
        set: |s, v| {
            s.dead_letter_queue = Some(name(v)?);
            Some(())
        },
    },
    Row {
        key: "dead_letter_suffix",
        env: "BABELQUEUE_DEAD_LETTER_SUFFIX",
        expected: "a suffix such as .dlq (not empty)",
        set: |s, v| {
            s.dead_letter_suffix = Some(name(v)?);
            Some(())
        },
    },
    Row {
        key: "on_unknown_urn",
        env: "BABELQUEUE_ON_UNKNOWN_URN",
        expected: "one of fail, delete, release, dead_letter",
        set: |s, v| {
            s.on_unknown_urn = Some(v.trim().parse::<UnknownUrn>().ok()?);
            Some(())
        },
    },
    Row {
        key: "unknown_urn_release_delay",
        env: "BABELQUEUE_UNKNOWN_URN_RELEASE_DELAY",
        expected: SECONDS,
        set: |s, v| {
            s.unknown_urn_release_delay = Some(seconds(v)?);
            Some(())
        },
    },
    Row {
        key: "retry_backoff",
        env: "BABELQUEUE_RETRY_BACKOFF",
        expected: SECONDS,
        set: |s, v| {
            s.retry_backoff = Some(seconds(v)?);
            Some(())
        },
    },
    Row {
        key: "retry_backoff_multiplier",
        env: "BABELQUEUE_RETRY_BACKOFF_MULTIPLIER",
        expected: "a number ≥ 0 (such as 2)",
        set: |s, v| {
            let m: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|m: &f64| m.is_finite() && *m >= 0.0)?;
            s.retry_backoff_multiplier = Some(m);
            Some(())
        },
    },
    Row {
        key: "retry_backoff_max",
        env: "BABELQUEUE_RETRY_BACKOFF_MAX",
        expected: "a number of seconds ≥ 0 (0: no cap)",
        set: |s, v| {
            s.retry_backoff_max = Some(seconds(v)?);
            Some(())
        },
    },
    Row {
        key: "retry_jitter",
        env: "BABELQUEUE_RETRY_JITTER",
        expected: "none or full",
        set: |s, v| {
            s.retry_jitter = Some(v.trim().parse::<Jitter>().ok()?);
            Some(())
        },
    },
    Row {
        key: "shutdown_timeout",
        env: "BABELQUEUE_SHUTDOWN_TIMEOUT",
        expected: SECONDS,
        set: |s, v| {
            s.shutdown_timeout = Some(seconds(v)?);
            Some(())
        },
    },
    Row {
        key: "concurrency",
        env: "BABELQUEUE_CONCURRENCY",
        expected: WHOLE,
        set: |s, v| {
            s.concurrency = Some(usize::try_from(whole(v)?).ok()?);
            Some(())
        },
    },
    Row {
        key: "prefetch",
        env: "BABELQUEUE_PREFETCH",
        expected: WHOLE,
        set: |s, v| {
            s.prefetch = Some(usize::try_from(whole(v)?).ok()?);
            Some(())
        },
    },
    Row {
        key: "poll_timeout",
        env: "BABELQUEUE_POLL_TIMEOUT",
        expected: SECONDS,
        set: |s, v| {
            s.poll_timeout = Some(seconds(v)?);
            Some(())
        },
    },
    Row {
        key: "rewind_pause",
        env: "BABELQUEUE_REWIND_PAUSE",
        expected: SECONDS,
        set: |s, v| {
            s.rewind_pause = Some(seconds(v)?);
            Some(())
        },
    },
];

/// What the table made of a set of variables.
#[derive(Debug, Default)]
pub struct FromVars {
    /// The settings the known variables give.
    pub settings: Settings,
    /// The variables with the prefix that are not settings (sorted), for a warning.
    pub unknown: Vec<String>,
}

/// A bad value: which name, what was expected, what was given (masked for the URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Bad {
    /// The variable or key.
    pub(super) name: String,
    /// The expected form.
    pub(super) expected: &'static str,
    /// The value as given ([`redact`](crate::redact::redact)ed).
    pub(super) got: String,
}

/// Applies `value` for `row` to `settings`, or says why not; `name` is how the error names it.
pub(super) fn apply(
    row: &Row,
    settings: &mut Settings,
    name: &str,
    value: &str,
) -> Result<(), Bad> {
    row.apply(settings, value).ok_or_else(|| Bad {
        name: name.to_owned(),
        expected: row.expected,
        got: crate::redact::redact(value),
    })
}

/// Reads every `BABELQUEUE_*` variable of `vars`; other variables are ignored. The first bad
/// value (in table order) is the error.
pub(super) fn from_vars<I, K, V>(vars: I) -> Result<FromVars, Bad>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut given: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(k, _)| k.as_ref().starts_with(PREFIX))
        .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
        .collect();
    given.sort();
    let mut out = FromVars::default();
    for row in ROWS {
        if let Some((_, value)) = given.iter().find(|(k, _)| k == row.env) {
            apply(row, &mut out.settings, row.env, value)?;
        }
    }
    out.unknown = given
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| !ROWS.iter().any(|r| r.env == k) && !NOT_SETTINGS.contains(&k.as_str()))
        .collect();
    Ok(out)
}

/// The row of a TOML key.
pub(super) fn row_of_key(key: &str) -> Option<&'static Row> {
    ROWS.iter().find(|r| r.key == key)
}
