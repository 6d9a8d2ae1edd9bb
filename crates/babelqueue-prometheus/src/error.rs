//! The crate's error.

use std::net::SocketAddr;

/// What can go wrong installing or serving the metrics.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrometheusError {
    /// Another `metrics` recorder is installed in this process (there is one per process).
    #[error(
        "another metrics recorder is already installed in this process; install this crate's first, or record through the one installed"
    )]
    AlreadyInstalled,
    /// The exporter's configuration was refused.
    #[error("Prometheus exporter configuration: {0}")]
    Config(String),
    /// The metrics address could not be bound.
    #[error("cannot listen for metrics scrapes on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

impl PrometheusError {
    /// Whether trying again later may succeed (never: each is a configuration or a port
    /// another process holds).
    pub fn is_transient(&self) -> bool {
        false
    }
}
