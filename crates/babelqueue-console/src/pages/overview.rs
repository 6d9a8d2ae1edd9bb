//! `/`: every watched queue of every broker, its figures and its last hour.

use axum::extract::State;
use axum::response::Html;
use maud::html;

use super::{figure, layout, queue_path};
use crate::Console;
use crate::api::rows;
use crate::chart::chart;
use crate::sampler;

pub(crate) async fn page(State(console): State<Console>) -> Html<String> {
    let rows = rows(&console).await;
    let body = html! {
        p.muted {
            (console.sources().len()) " broker(s), " (rows.len()) " queue(s)."
            @if console.is_read_only() { " Read-only: actions are refused." }
        }
        table #queues {
            thead { tr {
                th { "Broker" } th { "Queue" } th { "Ready" } th { "In flight" } th { "Delayed" }
                th { "Dead letters" } th { "Oldest" } th { "Source" }
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
                        td {
                            @if let Some(e) = &row.error { span.error { (e) } }
                            @else if let Some(s) = &row.stats_source { span.muted { (s) } }
                        }
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
