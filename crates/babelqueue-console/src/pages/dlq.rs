//! The queue page and its dead-letter browser: a page of entries (filtered by URN, reason,
//! cause, age), the cause groups, one entry in full.

use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use maud::{Markup, html};

use super::{error_page, figure, layout, queue_path, seg};
use crate::api::{At, ListQuery, Scan};
use crate::chart::chart;
use crate::security::Auth;
use crate::view::human_age;
use crate::{Console, sampler, scan};

/// The hidden CSRF field of a form.
pub(crate) fn csrf_field(auth: &Auth) -> Markup {
    html! { @if let Some(token) = &auth.csrf { input type="hidden" name="csrf" value=(token); } }
}

fn link(base: &str, query: &ListQuery, from: usize) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in [
        ("urn", &query.urn),
        ("reason", &query.reason),
        ("cause", &query.cause),
        ("older_than", &query.older_than),
        ("newer_than", &query.newer_than),
        ("limit", &query.limit),
    ] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            q.append_pair(k, v);
        }
    }
    q.append_pair("from", &from.to_string());
    format!("{base}?{}", q.finish())
}

fn filters(base: &str, query: &ListQuery) -> Markup {
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    let reason = value(&query.reason);
    html! {
        form.filters method="get" action=(base) {
            label { "URN contains" input type="text" name="urn" value=(value(&query.urn)); }
            label { "Reason" select name="reason" {
                @for (v, shown) in [("", "any"), ("failed", "failed"), ("unknown_urn", "unknown_urn"), ("poison", "poison")] {
                    option value=(v) selected[reason == v] { (shown) }
                }
            } }
            label { "Cause" input type="text" name="cause" value=(value(&query.cause)); }
            label { "Older than (s)" input type="number" min="0" name="older_than" value=(value(&query.older_than)); }
            label { "Newer than (s)" input type="number" min="0" name="newer_than" value=(value(&query.newer_than)); }
            label { "Per page" input type="number" min="1" max="500" name="limit" value=(value(&query.limit)); }
            button type="submit" { "Filter" }
            a href=(base) { "Clear" }
        }
    }
}

async fn queue_page(
    State(console): State<Console>,
    Extension(auth): Extension<Auth>,
    Path((source, queue)): Path<(usize, String)>,
    Query(query): Query<ListQuery>,
) -> Response {
    let (src, watched) = match console.queue(source, &queue) {
        Ok(found) => found,
        Err(e) => return error_page(&e),
    };
    let page = match query.page(&console, source, &queue).await {
        Ok(page) => page,
        Err(e) => return error_page(&e),
    };
    let stats = scan::stats(src, watched).await.ok().flatten();
    let base = queue_path(source, &queue);
    let points = sampler::index(&console, source, &queue)
        .map(|i| console.inner.history.points(i))
        .unwrap_or_default();
    let writable = !console.is_read_only();
    let body = html! {
        p.muted { "Broker " code { (src.label()) } " · dead-letter queue " code { (watched.dlq) } }
        table.figures { tr {
            th { "Ready" } td.num { (figure(stats.as_ref().and_then(|s| s.ready))) }
            th { "In flight" } td.num { (figure(stats.as_ref().and_then(|s| s.in_flight))) }
            th { "Delayed" } td.num { (figure(stats.as_ref().and_then(|s| s.delayed))) }
            th { "Dead letters" } td.num #dead-letters { (figure(stats.as_ref().and_then(|s| s.dead_letter))) }
        } }
        (chart(&points))
        h2 { "Dead letters" }
        p { a href={ (base) "/groups" } { "Group the failures by cause" } }
        (filters(&base, &query))
        form #entries method="post" action={ (base) "/retry" } {
            (csrf_field(&auth))
            table #dead-letter-list {
                thead { tr {
                    th { "" } th { "#" } th { "Id" } th { "URN" } th { "Reason" } th { "Cause" }
                    th { "Age" } th { "Attempts" } th { "" }
                } }
                tbody {
                    @for e in &page.entries {
                        tr.entry {
                            td { @if writable { input type="checkbox" name="ids" value=(e.id) aria-label="select"; } }
                            td.num { (e.position) }
                            td { a href={ (base) "/entry/" (seg(&e.id)) "?at=" (e.position) } { code { (e.id) } } }
                            td.urn { (e.urn) }
                            td { @if let Some(r) = &e.reason { (r) } @else { span.na { "none" } } }
                            td { a href=(link(&base, &ListQuery { cause: Some(e.cause.clone()), ..ListQuery::default() }, 0)) { code { (e.cause) } } }
                            td { @if let Some(a) = e.age_secs { (human_age(a)) } @else { span.na { "n/a" } } }
                            td.num { @if let Some(a) = &e.attempts { (a) } }
                            td { @if writable {
                                button.retry-one type="submit" name="one" value=(e.id) { "Retry" }
                            } }
                        }
                    }
                }
            }
            @if page.entries.is_empty() { p.muted { "No dead letter here" @if page.from > 0 { " past position " (page.from) } "." } }
            @if writable && !page.entries.is_empty() {
                button type="submit" { "Retry selected" } " "
                button.danger type="submit" formaction={ (base) "/remove" } { "Remove selected" }
            }
        }
        p.pager {
            "Looked at " (page.scanned) " entries from position " (page.from) ". "
            @if page.from > 0 { a href=(link(&base, &query, 0)) { "First page" } " " }
            @if let Some(next) = page.next { a.next href=(link(&base, &query, next)) { "Next page" } }
        }
        @if writable {
            h2 { "Redrive" }
            form.filters method="post" action={ (base) "/redrive" } {
                (csrf_field(&auth))
                label { "Max (0 = all)" input type="number" min="0" name="max" value="0"; }
                label { "Per second (0 = no limit)" input type="number" min="0" name="rate" value="0"; }
                label { "Only URN" input type="text" name="urn"; }
                label { "Dry run" input type="checkbox" name="dry_run" value="1" checked; }
                button type="submit" { "Redrive" }
            }
        }
    };
    Html(layout(&format!("Queue {queue}"), &body).into_string()).into_response()
}

async fn groups_page(
    State(console): State<Console>,
    Extension(auth): Extension<Auth>,
    Path((source, queue)): Path<(usize, String)>,
    Query(scan): Query<Scan>,
) -> Response {
    let groups = match console.queue(source, &queue) {
        Ok((src, watched)) => scan::groups(src, watched, scan.value()).await,
        Err(e) => Err(e),
    };
    let groups = match groups {
        Ok(g) => g,
        Err(e) => return error_page(&e),
    };
    let base = queue_path(source, &queue);
    let writable = !console.is_read_only();
    let body = html! {
        p { a href=(base) { "Back to the dead letters" } }
        p.muted {
            (groups.scanned) " entries of " code { (groups.dlq) } " looked at"
            @if groups.truncated { " (the queue goes on: " a href={ (base) "/groups?scan=100000" } { "look at 100 000" } ")" }
            "."
        }
        table #groups {
            thead { tr { th { "Count" } th { "Cause" } th { "Reasons" } th { "Example" } th { "" } } }
            tbody {
                @for g in &groups.groups {
                    tr {
                        td.num { (g.count) }
                        td { a href=(link(&base, &ListQuery { cause: Some(g.cause.clone()), ..ListQuery::default() }, 0)) { code { (g.cause) } } }
                        td { @for (r, n) in &g.reasons { (r) " × " (n) br; } }
                        td { (g.example) }
                        td { @if writable {
                            form.inline method="post" action={ (base) "/retry" } {
                                (csrf_field(&auth))
                                input type="hidden" name="cause" value=(g.cause);
                                button type="submit" { "Retry all " (g.count) }
                            }
                        } }
                    }
                }
            }
        }
    };
    Html(layout(&format!("Causes in {}", groups.dlq), &body).into_string()).into_response()
}

async fn entry_page(
    State(console): State<Console>,
    Extension(auth): Extension<Auth>,
    Path((source, queue, id)): Path<(usize, String, String)>,
    Query(at): Query<At>,
) -> Response {
    let found = match console.queue(source, &queue) {
        Ok((src, watched)) => scan::find(src, watched, &id, at.at).await,
        Err(e) => Err(e),
    };
    let d = match found {
        Ok(d) => d,
        Err(e) => return error_page(&e),
    };
    let base = queue_path(source, &queue);
    let e = &d.entry;
    let body = html! {
        p { a href=(base) { "Back to the dead letters" } }
        table #entry {
            tr { th { "URN" } td.urn { (e.urn) } }
            tr { th { "Message id" } td { @if let Some(m) = &e.message_id { code { (m) } } } }
            tr { th { "Position" } td { (e.position) } }
            tr { th { "Cause" } td { code { (e.cause) } } }
            tr { th { "Poison" } td { @if let Some(p) = &e.poison { span.error { (p) } } @else { "no: a consumer accepts it" } } }
            tr { th { "Size" } td { (e.size) " bytes" } }
        }
        h2 { "Failure (dead_letter)" }
        table #facts { @for m in &d.facts { tr { th { (m.name) } td { (m.value) } } } }
        h2 { "Headers (meta)" }
        table #meta { @for m in &d.meta { tr { th { (m.name) } td { (m.value) } } } }
        p.muted { "Broker headers are not shown: browsing reads bodies only." }
        h2 { "Envelope" }
        @if let Some(p) = &d.pretty { pre #pretty { (p) } }
        @else if let Some(t) = &d.text { pre #text { (t) } }
        @else { p.muted { "Not text: see the raw bytes." } }
        details open[e.poison.is_some()] {
            summary { "Raw bytes" }
            h3 { "Base64" } pre #base64 { (d.base64) }
            h3 { "Hex (first 4 KiB)" } pre #hex { (d.hex) }
        }
        @if !console.is_read_only() {
            form.inline method="post" action={ (base) "/retry" } {
                (csrf_field(&auth))
                input type="hidden" name="ids" value=(e.id);
                button type="submit" { "Retry" }
            }
            " "
            form.inline method="post" action={ (base) "/remove" } {
                (csrf_field(&auth))
                input type="hidden" name="ids" value=(e.id);
                button.danger type="submit" { "Remove" }
            }
        }
    };
    Html(layout(&format!("Dead letter {id}"), &body).into_string()).into_response()
}

pub(crate) fn routes() -> Router<Console> {
    Router::new()
        .route("/q/{source}/{queue}", get(queue_page))
        .route("/q/{source}/{queue}/groups", get(groups_page))
        .route("/q/{source}/{queue}/entry/{id}", get(entry_page))
}
