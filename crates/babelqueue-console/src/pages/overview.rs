//! `/`: every watched queue of every broker, its figures and its last hour.

use axum::extract::State;
use axum::response::Html;
use maud::html;

use super::{figure, layout, queue_path};
use crate::Console;
use crate::api::rows;
use crate::chart::chart;
use crate::sampler;

/// A rate the workers report, or why there is none.
fn per_sec(value: Option<f64>, reported: bool) -> maud::Markup {
    html! {
        @match (value, reported) {
            (Some(v), _) => (format!("{v:.1}")),
            (None, true) => span.na title="one more scrape of the workers gives a rate" { "…" },
            (None, false) => span.na title="no worker given with --worker-metrics reports this queue" { "n/a" },
        }
    }
}

pub(crate) async fn page(State(console): State<Console>) -> Html<String> {
    let rows = rows(&console).await;
    let workers = &console.inner.workers;
    let statuses = workers.statuses();
    let body = html! {
        p.muted {
            (console.sources().len()) " broker(s), " (rows.len()) " queue(s)."
            @if console.is_read_only() { " Read-only: actions are refused." }
        }
        table #queues {
            thead { tr {
                th { "Broker" } th { "Queue" } th { "Ready" } th { "In flight" } th { "Delayed" }
                th { "Dead letters" } th { "Oldest" }
                @if !workers.is_empty() { th { "Consumed/s" } th { "Failed/s" } }
                th { "Source" }
            } }
            tbody {
                @for row in &rows {
                    tr {
                        td { code { (row.url) } " (" (row.transport) ")" }
                        td { a href=(queue_path(row.source, &row.queue)) { (row.queue) } }
                        td.num { (figure(row.ready)) }
                        td.num { (figure(row.in_flight)) }
                        td.num { (figure(row.delayed)) }
                        td.num { a href=(queue_path(row.source, &row.queue)) { (figure(row.dead_letter)) } }
                        td.num {
                            @match row.oldest_age_secs {
                                Some(age) => (format!("{age:.1}s")),
                                None => span.na title="the broker does not report this figure" { "n/a" },
                            }
                        }
                        @if !workers.is_empty() {
                            td.num.rate { (per_sec(row.rates.and_then(|r| r.consumed_per_sec), row.rates.is_some())) }
                            td.num { (per_sec(row.rates.and_then(|r| r.failed_per_sec), row.rates.is_some())) }
                        }
                        td {
                            @if let Some(e) = &row.error { span.error { (e) } }
                            @else if let Some(s) = &row.stats_source { span.muted { (s) } }
                        }
                    }
                }
            }
        }
        @if !statuses.is_empty() {
            h2 { "Workers" }
            ul #workers {
                @for status in &statuses {
                    li {
                        code { (status.url) } " "
                        @if let Some(e) = &status.error { span.error { (e) } }
                        @else if status.scraped_at_ms.is_some() {
                            span.muted { (status.queues.len()) " queue(s) reported" }
                        } @else { span.muted { "not scraped yet" } }
                    }
                }
            }
        }
        @for row in &rows {
            @if let Some(index) = sampler::index(&console, row.source, &row.queue) {
                section {
                    h2 { (row.queue) " " span.muted { "(" (row.url) ")" } }
                    (chart(&console.inner.history.points(index)))
                }
            }
        }
    };
    Html(layout("Queues", &body).into_string())
}
