//! The forms' actions: each checks the form's CSRF token, then calls the same function as the
//! API (`crate::actions`), and shows what it did.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use maud::html;

use super::{error_page, layout, queue_path};
use crate::Console;
use crate::actions::{self, ActionReport, RedriveRequest, RemoveRequest, RetryRequest};
use crate::error::ConsoleError;
use crate::security::Auth;

/// A form's fields, in order (a name may repeat: the selected ids).
struct Form(Vec<(String, String)>);

impl Form {
    fn parse(body: &[u8]) -> Form {
        Form(url::form_urlencoded::parse(body).into_owned().collect())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn one(&self, name: &str) -> Option<String> {
        self.all(name).into_iter().next()
    }

    fn number(&self, name: &str) -> Result<usize, ConsoleError> {
        self.one(name).map_or(Ok(0), |v| {
            v.trim()
                .parse()
                .map_err(|_| ConsoleError::BadRequest(format!("{name} must be a whole number")))
        })
    }
}

/// The form, when its CSRF token is right.
fn checked(auth: &Auth, body: &[u8]) -> Result<Form, ConsoleError> {
    let form = Form::parse(body);
    if auth.csrf_ok(form.one("csrf").as_deref()) {
        Ok(form)
    } else {
        Err(ConsoleError::Forbidden(
            "missing or wrong CSRF token: reload the page".to_owned(),
        ))
    }
}

fn report_page(source: usize, queue: &str, report: &ActionReport) -> Response {
    let base = queue_path(source, queue);
    let body = html! {
        p #summary { (report.done) " done, " (report.kept) " kept in " code { (report.dlq) } "." }
        @if !report.missing.is_empty() {
            p.error { "Not found: " @for m in &report.missing { code { (m) } " " } }
        }
        table #report {
            thead { tr { th { "Id" } th { "URN" } th { "To" } th { "Result" } } }
            tbody { @for i in &report.items { tr {
                td { code { (i.id) } }
                td { (i.urn) }
                td { @if let Some(t) = &i.to { (t) } }
                td { @if i.done { "done" } @else if let Some(k) = &i.kept { "kept: " (k) } }
            } } }
        }
        p { a href=(base) { "Back to the dead letters" } }
    };
    Html(layout(&format!("{} on {queue}", report.action), &body).into_string()).into_response()
}

fn answer(source: usize, queue: &str, result: Result<ActionReport, ConsoleError>) -> Response {
    match result {
        Ok(report) => report_page(source, queue, &report),
        Err(e) => error_page(&e),
    }
}

async fn retry(
    State(console): State<Console>,
    Extension(auth): Extension<Auth>,
    Path((source, queue)): Path<(usize, String)>,
    body: Bytes,
) -> Response {
    let result = match checked(&auth, &body) {
        Ok(form) => {
            // A row's own button names one id; else the ticked boxes, or a cause.
            let ids = form
                .one("one")
                .map_or_else(|| form.all("ids"), |one| vec![one]);
            let request = RetryRequest {
                ids,
                cause: form.one("cause"),
            };
            actions::retry(&console, &auth.who, source, &queue, request).await
        }
        Err(e) => Err(e),
    };
    answer(source, &queue, result)
}

async fn remove(
    State(console): State<Console>,
    Extension(auth): Extension<Auth>,
    Path((source, queue)): Path<(usize, String)>,
    body: Bytes,
) -> Response {
    let result = match checked(&auth, &body) {
        Ok(form) => {
            let request = RemoveRequest {
                ids: form.all("ids"),
            };
            actions::remove(&console, &auth.who, source, &queue, request).await
        }
        Err(e) => Err(e),
    };
    answer(source, &queue, result)
}

async fn redrive(
    State(console): State<Console>,
    Extension(auth): Extension<Auth>,
    Path((source, queue)): Path<(usize, String)>,
    body: Bytes,
) -> Response {
    let result = match checked(&auth, &body).and_then(|form| {
        Ok(RedriveRequest {
            dry_run: form.one("dry_run").is_some(),
            max: form.number("max")?,
            rate: form.number("rate")?,
            urn: form.one("urn"),
        })
    }) {
        Ok(request) => actions::redrive_all(&console, &auth.who, source, &queue, request).await,
        Err(e) => Err(e),
    };
    answer(source, &queue, result)
}

pub(crate) fn routes() -> Router<Console> {
    Router::new()
        .route("/q/{source}/{queue}/retry", post(retry))
        .route("/q/{source}/{queue}/remove", post(remove))
        .route("/q/{source}/{queue}/redrive", post(redrive))
}
