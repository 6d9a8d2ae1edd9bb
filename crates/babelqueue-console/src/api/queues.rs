//! `GET /api/v1/queues`: every watched queue of every broker with what its broker says.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::Console;
use crate::scan;
use crate::workers::QueueRates;

/// One watched queue. A figure the broker does not report is `null`, never 0.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct QueueRow {
    /// The broker's index (its place among the URLs given).
    pub(crate) source: usize,
    /// The broker URL, secrets masked.
    pub(crate) url: String,
    /// The transport's name.
    pub(crate) transport: String,
    /// The queue.
    pub(crate) queue: String,
    /// Its dead-letter queue.
    pub(crate) dlq: String,
    /// Ready messages.
    pub(crate) ready: Option<u64>,
    /// Messages handed out and not settled.
    pub(crate) in_flight: Option<u64>,
    /// Delayed messages.
    pub(crate) delayed: Option<u64>,
    /// Dead letters.
    pub(crate) dead_letter: Option<u64>,
    /// Consumers attached.
    pub(crate) consumers: Option<u64>,
    /// Age of the oldest ready message, seconds.
    pub(crate) oldest_age_secs: Option<f64>,
    /// What the broker reported (`LLEN`, `GetQueueAttributes` …).
    pub(crate) stats_source: Option<String>,
    /// Why there are no figures, when there are none.
    pub(crate) error: Option<String>,
    /// What the workers report of this queue (`--worker-metrics`); `null` when none does.
    pub(crate) rates: Option<QueueRates>,
}

/// Every watched queue, in order, with its stats read now.
pub(crate) async fn rows(console: &Console) -> Vec<QueueRow> {
    let mut out = Vec::new();
    for (i, source) in console.sources().iter().enumerate() {
        for queue in source.queues() {
            let mut row = QueueRow {
                source: i,
                url: source.label().to_owned(),
                transport: source.transport().name().to_owned(),
                queue: queue.name.clone(),
                dlq: queue.dlq.clone(),
                ready: None,
                in_flight: None,
                delayed: None,
                dead_letter: None,
                consumers: None,
                oldest_age_secs: None,
                stats_source: None,
                error: None,
                rates: console.inner.workers.queue(&queue.name),
            };
            match scan::stats(source, queue).await {
                Ok(Some(stats)) => {
                    row.ready = stats.ready;
                    row.in_flight = stats.in_flight;
                    row.delayed = stats.delayed;
                    row.dead_letter = stats.dead_letter;
                    row.consumers = stats.consumers;
                    row.oldest_age_secs = stats.oldest_ready_age.map(|a| a.as_secs_f64());
                    row.stats_source = Some(stats.source.clone());
                }
                Ok(None) => {
                    row.error = Some(format!(
                        "the {} transport does not report queue stats",
                        source.transport().name()
                    ));
                }
                Err(e) => row.error = Some(e.to_string()),
            }
            out.push(row);
        }
    }
    out
}

/// Every watched queue of every broker, with its depths.
#[utoipa::path(get, path = "/api/v1/queues", tag = "queues",
    responses((status = 200, body = [QueueRow])))]
pub(crate) async fn list_queues(State(console): State<Console>) -> Json<Vec<QueueRow>> {
    Json(rows(&console).await)
}
