//! `/metrics`: the broker-side gauges in the Prometheus text format, through the `metrics`
//! facade and `metrics-exporter-prometheus` (the console's own recorder, not the process's
//! global one, so a service that embeds the console keeps its own).
//!
//! - `babelqueue_queue_messages{messaging_destination_name, state="ready|in_flight|delayed|dead_letter", transport}`
//! - `babelqueue_queue_oldest_age_seconds{messaging_destination_name, transport}`
//!
//! Every series carries `messaging_system="babelqueue"`; the names and labels are the workers'
//! (`babelqueue::prometheus::names`), so one dashboard joins both. A figure the broker does not
//! report is absent, never 0.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use babelqueue::QueueStats;
use babelqueue::prometheus::names::{
    LABEL_DESTINATION, LABEL_SYSTEM, OLDEST_AGE, QUEUE_MESSAGES, SYSTEM,
};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

use crate::Console;

/// The console's recorder and its handle.
pub(crate) struct Gauges {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Gauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gauges")
    }
}

impl Gauges {
    pub(crate) fn new() -> Gauges {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        Gauges { recorder, handle }
    }

    /// Sets the gauges of `queue` from `stats`.
    pub(crate) fn set(&self, transport: &str, queue: &str, stats: &QueueStats) {
        metrics::with_local_recorder(&self.recorder, || {
            let states = [
                ("ready", stats.ready),
                ("in_flight", stats.in_flight),
                ("delayed", stats.delayed),
                ("dead_letter", stats.dead_letter),
            ];
            for (state, value) in states {
                if let Some(v) = value {
                    #[allow(clippy::cast_precision_loss)]
                    metrics::gauge!(
                        QUEUE_MESSAGES,
                        LABEL_SYSTEM => SYSTEM,
                        LABEL_DESTINATION => queue.to_owned(),
                        "state" => state,
                        "transport" => transport.to_owned()
                    )
                    .set(v as f64);
                }
            }
            if let Some(age) = stats.oldest_ready_age {
                metrics::gauge!(
                    OLDEST_AGE,
                    LABEL_SYSTEM => SYSTEM,
                    LABEL_DESTINATION => queue.to_owned(),
                    "transport" => transport.to_owned()
                )
                .set(age.as_secs_f64());
            }
        });
    }

    pub(crate) fn render(&self) -> String {
        self.handle.render()
    }
}

/// Reads every queue's stats (a scrape is a fresh reading) and renders the gauges.
async fn metrics_page(State(console): State<Console>) -> impl IntoResponse {
    crate::sampler::sample(&console).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        console.inner.metrics.render(),
    )
}

pub(crate) fn routes() -> axum::Router<Console> {
    axum::Router::new().route("/metrics", get(metrics_page))
}
