//! Settings from the environment and from a TOML file, so a service configures its worker
//! without code.
//!
//! ```
//! use std::time::Duration;
//! use babelqueue_core::{App, MemoryTransport, Settings};
//!
//! // What a container's environment would hold (`Settings::from_env()` reads the real one).
//! let from_env = Settings::from_vars([
//!     ("BABELQUEUE_URL", "memory://"),
//!     ("BABELQUEUE_QUEUE", "orders"),
//!     ("BABELQUEUE_MAX_ATTEMPTS", "5"),
//!     ("BABELQUEUE_RETRY_BACKOFF", "2.5"),
//! ])?
//! .settings;
//! let from_file = Settings::from_toml("queue = \"payments\"\ndead_letter = true\n")?;
//! let settings = from_env.over(from_file); // the environment wins over the file
//! assert_eq!(settings.queue.as_deref(), Some("orders"));
//! assert_eq!(settings.dead_letter, Some(true));
//! assert_eq!(settings.retry_backoff, Some(Duration::from_millis(2500)));
//!
//! // An explicit builder call wins over the settings, whichever comes first.
//! let app = App::builder(MemoryTransport::new())
//!     .max_attempts(2)
//!     .settings(settings)
//!     .build()?;
//! assert_eq!(app.queue(), "orders");
//! assert_eq!(app.policy().max_attempts, 2);
//!
//! // A bad value names the variable and the form it expects.
//! let err = Settings::from_vars([("BABELQUEUE_MAX_ATTEMPTS", "three")]).unwrap_err();
//! assert_eq!(err.to_string(), r#"BABELQUEUE_MAX_ATTEMPTS: expected a whole number ≥ 1, got "three""#);
//! # Ok::<(), babelqueue_core::Error>(())
//! ```
//!
//! The full list of variables and keys is in `docs/settings.md`; [`ROWS`] is the same list in
//! code.
//!
//! * Precedence: an explicit [`AppBuilder`](crate::AppBuilder) call, then the environment, then
//!   the file, then the builder's defaults. [`Settings::load`] reads the file named by
//!   `BABELQUEUE_CONFIG` (when set) and the environment over it.
//! * A bad value is an error naming the variable (or key) and the expected form, never a
//!   silent default.
//! * An unknown `BABELQUEUE_*` variable is a warning, not an error: other tools share the
//!   prefix (the CLI's `BABELQUEUE_LOG`), and a worker must not stop because its environment
//!   carries a variable a newer version reads. [`Settings::from_env`] logs each one with
//!   `tracing` (target `babelqueue::settings`); [`Settings::from_vars`] returns them.
//! * An unknown key in a settings file is an error: the file is written for this SDK, so a key
//!   it does not know is a typo.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::policy::{Jitter, UnknownUrn};

mod parse;

pub use parse::{FromVars, NOT_SETTINGS, PREFIX, ROWS, Row};

/// Every setting a worker can take from its environment or a file; `None` leaves the builder's
/// value (its default, or what code set). Field names are the reference SDK's configuration
/// names; each field's environment variable is `BABELQUEUE_` and the name in capitals, except
/// `broker_url` (`BABELQUEUE_URL`).
#[derive(Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Settings {
    /// `BABELQUEUE_URL`: the broker URL. The builder already holds a transport and does not
    /// read it: connect with it (`babelqueue::connect`). Never shown by `Debug` unredacted.
    pub broker_url: Option<String>,
    /// `BABELQUEUE_QUEUE`: the queue to publish to and consume from (default `default`).
    pub queue: Option<String>,
    /// `BABELQUEUE_MAX_ATTEMPTS`: deliveries allowed, the first included (default 3).
    pub max_attempts: Option<i64>,
    /// `BABELQUEUE_DEAD_LETTER`: dead-letter exhausted and poison messages (default off).
    pub dead_letter: Option<bool>,
    /// `BABELQUEUE_DEAD_LETTER_QUEUE`: an explicit dead-letter queue.
    pub dead_letter_queue: Option<String>,
    /// `BABELQUEUE_DEAD_LETTER_SUFFIX`: the derived dead-letter queue's suffix (default `.dlq`).
    pub dead_letter_suffix: Option<String>,
    /// `BABELQUEUE_ON_UNKNOWN_URN`: `fail`, `delete`, `release` or `dead_letter` (default
    /// `fail`).
    pub on_unknown_urn: Option<UnknownUrn>,
    /// `BABELQUEUE_UNKNOWN_URN_RELEASE_DELAY`: seconds before a released unknown URN comes back.
    pub unknown_urn_release_delay: Option<Duration>,
    /// `BABELQUEUE_RETRY_BACKOFF`: the retry back-off base, seconds (default 0).
    pub retry_backoff: Option<Duration>,
    /// `BABELQUEUE_RETRY_BACKOFF_MULTIPLIER`: growth per attempt (default 1).
    pub retry_backoff_multiplier: Option<f64>,
    /// `BABELQUEUE_RETRY_BACKOFF_MAX`: the back-off cap, seconds (default 0: none).
    pub retry_backoff_max: Option<Duration>,
    /// `BABELQUEUE_RETRY_JITTER`: `none` or `full` (default `none`).
    pub retry_jitter: Option<Jitter>,
    /// `BABELQUEUE_SHUTDOWN_TIMEOUT`: seconds running handlers get after a shutdown signal
    /// (default 30).
    pub shutdown_timeout: Option<Duration>,
    /// `BABELQUEUE_CONCURRENCY`: handlers in flight at once (default 1).
    pub concurrency: Option<usize>,
    /// `BABELQUEUE_PREFETCH`: deliveries held at once (default: the transport's rule).
    pub prefetch: Option<usize>,
    /// `BABELQUEUE_POLL_TIMEOUT`: seconds one receive waits for a message (default 1).
    pub poll_timeout: Option<Duration>,
    /// `BABELQUEUE_REWIND_PAUSE`: seconds paused after rewinding an unsettled message
    /// (default 1).
    pub rewind_pause: Option<Duration>,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field(
                "broker_url",
                &self.broker_url.as_deref().map(crate::redact::redact),
            )
            .field("queue", &self.queue)
            .field("max_attempts", &self.max_attempts)
            .field("dead_letter", &self.dead_letter)
            .field("dead_letter_queue", &self.dead_letter_queue)
            .field("dead_letter_suffix", &self.dead_letter_suffix)
            .field("on_unknown_urn", &self.on_unknown_urn)
            .field("unknown_urn_release_delay", &self.unknown_urn_release_delay)
            .field("retry_backoff", &self.retry_backoff)
            .field("retry_backoff_multiplier", &self.retry_backoff_multiplier)
            .field("retry_backoff_max", &self.retry_backoff_max)
            .field("retry_jitter", &self.retry_jitter)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("concurrency", &self.concurrency)
            .field("prefetch", &self.prefetch)
            .field("poll_timeout", &self.poll_timeout)
            .field("rewind_pause", &self.rewind_pause)
            .finish()
    }
}

impl From<parse::Bad> for Error {
    fn from(bad: parse::Bad) -> Error {
        Error::Setting {
            name: bad.name,
            expected: bad.expected.to_owned(),
            got: bad.got,
        }
    }
}

/// A scalar of a settings file, before its row reads it as text.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    /// A table or an array: never a valid setting; its row says what it expects.
    Other(serde::de::IgnoredAny),
}

impl Scalar {
    /// The value as its environment variable would hold it; `None` for a table or an array.
    fn text(&self) -> Option<String> {
        Some(match self {
            Scalar::Bool(b) => b.to_string(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(x) => x.to_string(),
            Scalar::Text(s) => s.clone(),
            Scalar::Other(_) => return None,
        })
    }
}

/// Settings from keys and values, each key a [`Row::key`]; `origin` prefixes error names.
fn from_keys(pairs: BTreeMap<String, Scalar>, origin: &str) -> Result<Settings> {
    let mut settings = Settings::default();
    for (key, value) in pairs {
        let Some(row) = parse::row_of_key(&key) else {
            let known: Vec<&str> = ROWS.iter().map(|r| r.key).collect();
            return Err(Error::Config(format!(
                "{origin}unknown setting `{key}`; the settings are {}",
                known.join(", ")
            )));
        };
        let name = format!("{origin}{key}");
        let Some(text) = value.text() else {
            return Err(Error::Setting {
                name,
                expected: row.expected.to_owned(),
                got: "a table or an array".to_owned(),
            });
        };
        parse::apply(row, &mut settings, &name, &text)?;
    }
    Ok(settings)
}

/// Any self-describing format (TOML, JSON, YAML): a map of the keys of [`ROWS`] to scalars,
/// each read exactly as its environment variable would be.
impl<'de> serde::Deserialize<'de> for Settings {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let pairs = BTreeMap::<String, Scalar>::deserialize(deserializer)?;
        from_keys(pairs, "").map_err(serde::de::Error::custom)
    }
}

impl Settings {
    /// Settings from `vars` (name, value pairs): the pure form of [`Settings::from_env`]. Only
    /// `BABELQUEUE_*` names are read; the unknown ones come back in [`FromVars::unknown`].
    pub fn from_vars<I, K, V>(vars: I) -> Result<FromVars>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Ok(parse::from_vars(vars)?)
    }

    /// Settings from this process's environment. Each unknown `BABELQUEUE_*` variable is
    /// logged as a warning; a variable that is not valid UTF-8 is an error.
    pub fn from_env() -> Result<Settings> {
        let mut vars = Vec::new();
        for (k, v) in std::env::vars_os() {
            let Some(k) = k.to_str().filter(|k| k.starts_with(PREFIX)) else {
                continue;
            };
            let v = v
                .into_string()
                .map_err(|_| Error::Config(format!("{k}: the value is not valid UTF-8")))?;
            vars.push((k.to_owned(), v));
        }
        let read = Settings::from_vars(vars)?;
        for name in &read.unknown {
            tracing::warn!(
                target: "babelqueue::settings",
                variable = %name,
                "{name} is not a BabelQueue setting and is ignored (see docs/settings.md)"
            );
        }
        Ok(read.settings)
    }

    /// Settings from the text of a TOML file (keys as in [`ROWS`], top level).
    pub fn from_toml(text: &str) -> Result<Settings> {
        let pairs: BTreeMap<String, Scalar> = toml::from_str(text)
            .map_err(|e| Error::Config(format!("settings file: {}", e.to_string().trim_end())))?;
        from_keys(pairs, "")
    }

    /// Settings from a TOML file; errors name the file.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Settings> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("settings file {}: {e}", path.display())))?;
        let pairs: BTreeMap<String, Scalar> = toml::from_str(&text).map_err(|e| {
            Error::Config(format!(
                "settings file {}: {}",
                path.display(),
                e.to_string().trim_end()
            ))
        })?;
        from_keys(pairs, &format!("{}: ", path.display()))
    }

    /// The file named by `BABELQUEUE_CONFIG` (when set), then the environment over it.
    pub fn load() -> Result<Settings> {
        let env = Settings::from_env()?;
        match std::env::var_os("BABELQUEUE_CONFIG") {
            Some(path) if !path.is_empty() => Ok(env.over(Settings::from_toml_file(path)?)),
            _ => Ok(env),
        }
    }

    /// These settings, with `base` filling the fields they leave unset.
    #[must_use]
    pub fn over(self, base: Settings) -> Settings {
        Settings {
            broker_url: self.broker_url.or(base.broker_url),
            queue: self.queue.or(base.queue),
            max_attempts: self.max_attempts.or(base.max_attempts),
            dead_letter: self.dead_letter.or(base.dead_letter),
            dead_letter_queue: self.dead_letter_queue.or(base.dead_letter_queue),
            dead_letter_suffix: self.dead_letter_suffix.or(base.dead_letter_suffix),
            on_unknown_urn: self.on_unknown_urn.or(base.on_unknown_urn),
            unknown_urn_release_delay: self
                .unknown_urn_release_delay
                .or(base.unknown_urn_release_delay),
            retry_backoff: self.retry_backoff.or(base.retry_backoff),
            retry_backoff_multiplier: self
                .retry_backoff_multiplier
                .or(base.retry_backoff_multiplier),
            retry_backoff_max: self.retry_backoff_max.or(base.retry_backoff_max),
            retry_jitter: self.retry_jitter.or(base.retry_jitter),
            shutdown_timeout: self.shutdown_timeout.or(base.shutdown_timeout),
            concurrency: self.concurrency.or(base.concurrency),
            prefetch: self.prefetch.or(base.prefetch),
            poll_timeout: self.poll_timeout.or(base.poll_timeout),
            rewind_pause: self.rewind_pause.or(base.rewind_pause),
        }
    }
}

#[cfg(test)]
mod tests;
