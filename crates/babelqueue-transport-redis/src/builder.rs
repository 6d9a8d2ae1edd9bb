//! [`RedisBuilder`]: a [`RedisTransport`] configured in code, over the options its URL sets.

use super::*;

/// Configures a [`RedisTransport`]; the URL's query keys are read first, then these override them.
#[derive(Clone)]
#[must_use]
pub struct RedisBuilder {
    pub(crate) url: String,
    pub(crate) layout: Option<Layout>,
    pub(crate) prefix: Option<String>,
    pub(crate) retry_after: Option<Option<u64>>,
    pub(crate) migration_batch_size: Option<i64>,
    pub(crate) processing_suffix: Option<String>,
    pub(crate) block_for: Option<Duration>,
    pub(crate) laravel_safe: Option<LaravelSafe>,
    pub(crate) reply_timeout: Option<Option<Duration>>,
    pub(crate) tls: TlsFiles,
}

impl fmt::Debug for RedisBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: only its redacted form is shown.
        f.debug_struct("RedisBuilder")
            .field("url", &babelqueue_core::redact::redact(&self.url))
            .field("layout", &self.layout)
            .field("prefix", &self.prefix)
            .field("retry_after", &self.retry_after)
            .field("migration_batch_size", &self.migration_batch_size)
            .field("processing_suffix", &self.processing_suffix)
            .field("block_for", &self.block_for)
            .field("laravel_safe", &self.laravel_safe)
            .field("reply_timeout", &self.reply_timeout)
            .field("tls", &self.tls)
            .finish()
    }
}

impl RedisBuilder {
    /// For `rediss://`: trust the CA certificates in this PEM file instead of the system roots
    /// (a private CA). The URL query key `ca_file` does the same.
    pub fn ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls.ca_file = Some(path.into());
        self
    }

    /// The old name of [`RedisBuilder::ca_file`].
    #[deprecated(note = "renamed to ca_file, the name every TLS transport uses")]
    pub fn tls_ca_file(self, path: impl Into<std::path::PathBuf>) -> Self {
        self.ca_file(path)
    }

    /// For `rediss://`: present the client certificate of the PEM file `cert` with the private
    /// key of the PEM file `key` (mutual TLS). The URL query keys `cert_file` and `key_file` do
    /// the same.
    pub fn client_certificate(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.tls.cert_file = Some(cert.into());
        self.tls.key_file = Some(key.into());
        self
    }
    /// Selects the Laravel-compatible layout (`true`) or the reliable one (`false`).
    pub fn laravel(mut self, on: bool) -> Self {
        self.layout = Some(if on {
            Layout::Laravel
        } else {
            Layout::Reliable
        });
        self
    }
    /// The Laravel key prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }
    /// The reservation lifetime (whole seconds); `None` disables recovery.
    pub fn retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = Some(retry_after.map(|d| d.as_secs()));
        self
    }
    /// How many due items one migrate or sweep moves (-1 = all).
    pub fn migration_batch_size(mut self, n: i64) -> Self {
        self.migration_batch_size = Some(n);
        self
    }
    /// The reliable layout's in-flight list suffix.
    pub fn processing_suffix(mut self, suffix: impl Into<String>) -> Self {
        self.processing_suffix = Some(suffix.into());
        self
    }
    /// How long a pop waits for work, instead of the runtime's poll timeout.
    pub fn block_for(mut self, block: Duration) -> Self {
        self.block_for = Some(block);
        self
    }
    /// How long past the server's own wait a reply may come before the call fails and the
    /// connection is replaced ([`RedisOptions::reply_timeout`]; `None`: wait for ever). The URL
    /// query key `reply_timeout_ms` does the same.
    pub fn reply_timeout(mut self, margin: Option<Duration>) -> Self {
        self.reply_timeout = Some(margin);
        self
    }
    /// Laravel layout only: what a publish does with a body that Laravel's own scripts would
    /// change ([`LaravelSafe`]; the URL query key `laravel_safe` does the same). On the
    /// reliable layout anything but [`LaravelSafe::Off`] is a configuration error.
    pub fn laravel_safe(mut self, mode: LaravelSafe) -> Self {
        self.laravel_safe = Some(mode);
        self
    }

    /// The options this builder ends up with, and the client URL.
    pub fn options(&self) -> Result<(String, RedisOptions), RedisError> {
        let (url, mut o) = RedisOptions::from_url(&self.url)?;
        if let Some(layout) = self.layout {
            o.layout = layout;
        }
        if let Some(prefix) = self.prefix.clone().filter(|p| !p.is_empty()) {
            o.prefix = prefix;
        }
        if let Some(retry_after) = self.retry_after {
            o.retry_after = retry_after;
        }
        if let Some(n) = self.migration_batch_size {
            o.migration_batch_size = n;
        }
        if let Some(suffix) = self.processing_suffix.clone() {
            o.processing_suffix = suffix;
        }
        if self.block_for.is_some() {
            o.block_for = self.block_for;
        }
        if let Some(mode) = self.laravel_safe {
            o.laravel_safe = mode;
        }
        if let Some(margin) = self.reply_timeout {
            o.reply_timeout = margin;
        }
        o.validate()?;
        Ok((url, o))
    }

    /// Connects.
    pub async fn connect(self) -> Result<RedisTransport, RedisError> {
        let (url, options) = self.options()?;
        let (url, files) = tls::take_tls_files(&url, self.tls.clone());
        let client = FredClient::connect_with_tls(&url, &files)
            .await?
            .with_reply_timeout(options.reply_timeout);
        Ok(RedisTransport::with_client(Arc::new(client), options))
    }
}
