//! `GET /metrics` over HTTP/1.1, on an address the crate binds itself (port 0 works).

use std::net::SocketAddr;

use axum::Router;
use axum::http::header;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::error::PrometheusError;

/// The content type of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A running metrics endpoint; dropping it stops the server.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    /// The address it listens on (the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The scrape URL (`http://ADDR/metrics`).
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds `addr` and serves `handle`'s rendering at `/metrics` on the current tokio runtime.
pub(crate) async fn serve(
    handle: PrometheusHandle,
    addr: SocketAddr,
) -> Result<MetricsServer, PrometheusError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| PrometheusError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| PrometheusError::Bind { addr, source })?;
    let router = Router::new().route(
        "/metrics",
        get(move || {
            let handle = handle.clone();
            async move {
                // Histograms and idle series are maintained at scrape time.
                handle.run_upkeep();
                ([(header::CONTENT_TYPE, CONTENT_TYPE)], handle.render())
            }
        }),
    );
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::warn!(target: "babelqueue::prometheus", error = %e, "the metrics server stopped");
        }
    });
    tracing::info!(target: "babelqueue::prometheus", %bound, "serving Prometheus metrics at /metrics");
    Ok(MetricsServer { addr: bound, task })
}
