//! Prometheus metrics for BabelQueue workers.
//!
//! [`Prometheus::install`] installs a Prometheus recorder for the `metrics` facade (one per
//! process); [`Prometheus::observer`] is the [`Observer`](babelqueue_core::Observer) an app
//! reports its deliveries and publishes to; [`Prometheus::serve`] answers scrapes at
//! `/metrics`; [`watch_lag`] samples the broker's queue depth into gauges.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport};
//! use babelqueue_prometheus::Prometheus;
//!
//! let prometheus = Prometheus::install()?;
//! let app = App::builder(MemoryTransport::new())
//!     .queue("orders")
//!     .observer(prometheus.observer())
//!     .handle("urn:babel:orders:created", |_ctx: Context| async { Ok::<(), HandlerError>(()) })
//!     .build()?;
//! let server = prometheus.serve("127.0.0.1:0".parse()?).await?; // scrape server.url()
//!
//! app.publish("urn:babel:orders:created", &serde_json::json!({"order_id": 1042})).await?;
//! app.consume(Consume::new().max_messages(1).handle_signals(false)).await?;
//!
//! let scrape = prometheus.render();
//! assert!(scrape.contains("messaging_client_sent_messages_total"));
//! assert!(scrape.contains(r#"messaging_babelqueue_outcome="acked""#));
//! # drop(server);
//! # Ok(()) }
//! ```
//!
//! # What is recorded
//!
//! | metric | kind | labels | counts |
//! |---|---|---|---|
//! | `messaging_client_consumed_messages_total` | counter | queue, URN, outcome (`acked`, `retried`, `dead_lettered`, `released`, `dropped`, `native`, `unsettled`, `interrupted`) | every settled delivery |
//! | `messaging_client_sent_messages_total` | counter | queue, URN | what the app and its handlers published (not the runtime's retry and dead-letter copies) |
//! | `messaging_process_duration_seconds` | histogram | queue, URN, outcome (`success`, `failure`) | handler run time |
//! | `babelqueue_messages_failed_total` | counter | queue, URN | handler failed (an error or a panic) |
//! | `babelqueue_messages_retried_total` | counter | queue, URN | given back for a retry |
//! | `babelqueue_messages_dead_lettered_total` | counter | queue, URN | written to the dead-letter queue |
//! | `babelqueue_worker_in_flight_messages` | gauge | queue | deliveries being worked on |
//! | `babelqueue_queue_lag_messages` | gauge | queue | messages waiting, where the broker reports it ([`watch_lag`]) |
//! | `babelqueue_queue_oldest_age_seconds` | gauge | queue | age of the oldest waiting message, where the broker reports it |
//!
//! Every series carries `messaging_system="babelqueue"`; the queue is
//! `messaging_destination_name`, the URN `messaging_babelqueue_urn` (left out for poison and
//! gated bodies, or everywhere with [`WorkerMetrics::with_urn`]`(false)`). The names follow the
//! OpenTelemetry messaging conventions as Prometheus spells them ([`names`]).
//! `docs/grafana-dashboard.json` in the repository charts them.

mod error;
mod lag;
pub mod names;
mod observer;
mod serve;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub use error::PrometheusError;
pub use lag::{LagWatch, watch_lag};
pub use observer::WorkerMetrics;
pub use serve::{CONTENT_TYPE, MetricsServer};

/// The handle of the recorder this crate installed, if it did.
static INSTALLED: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// The process's Prometheus recorder. Cheap to clone.
#[derive(Clone)]
pub struct Prometheus {
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prometheus").finish_non_exhaustive()
    }
}

impl Prometheus {
    /// Installs the Prometheus recorder as the process's `metrics` recorder, or returns the
    /// one this crate installed before. Fails when another recorder is installed.
    pub fn install() -> Result<Prometheus, PrometheusError> {
        let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(handle) = installed.as_ref() {
            return Ok(Prometheus {
                handle: handle.clone(),
            });
        }
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full(names::PROCESS_DURATION.to_owned()),
                &names::DURATION_BUCKETS,
            )
            .map_err(|e| PrometheusError::Config(e.to_string()))?
            .build_recorder();
        let handle = recorder.handle();
        metrics::set_global_recorder(recorder).map_err(|_| PrometheusError::AlreadyInstalled)?;
        *installed = Some(handle.clone());
        Ok(Prometheus { handle })
    }

    /// The observer to give [`AppBuilder::observer`](babelqueue_core::AppBuilder::observer).
    pub fn observer(&self) -> Arc<dyn babelqueue_core::Observer> {
        Arc::new(WorkerMetrics::new())
    }

    /// Everything recorded, in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        self.handle.run_upkeep();
        self.handle.render()
    }

    /// Serves [`render`](Prometheus::render) at `http://ADDR/metrics` on the current tokio
    /// runtime until the returned server is dropped. Port 0 picks a free port
    /// ([`MetricsServer::local_addr`]).
    pub async fn serve(&self, addr: SocketAddr) -> Result<MetricsServer, PrometheusError> {
        serve::serve(self.handle.clone(), addr).await
    }
}
