//! The server-rendered pages: readable without JavaScript, actions as plain HTML forms, every
//! value escaped by `maud` (message bodies are hostile input).

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, html};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

use crate::Console;
use crate::error::ConsoleError;
use crate::security::{COOKIE, cookie};

mod actions;
mod dlq;
mod overview;

/// The stylesheet (served from `/static/console.css`: the policy allows no inline style).
const CSS: &str = include_str!("console.css");

/// A path segment, percent-encoded.
pub(crate) fn seg(text: &str) -> String {
    utf8_percent_encode(text, NON_ALPHANUMERIC).to_string()
}

/// The page of queue `queue` of source `source`.
pub(crate) fn queue_path(source: usize, queue: &str) -> String {
    format!("/q/{source}/{}", seg(queue))
}

/// A figure, or `n/a` when the broker does not report it (never 0).
pub(crate) fn figure(n: Option<u64>) -> Markup {
    html! {
        @match n {
            Some(n) => (n),
            None => span.na title="the broker does not report this figure" { "n/a" },
        }
    }
}

/// The frame of every page.
pub(crate) fn layout(title: &str, body: &Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · BabelQueue console" }
                link rel="stylesheet" href="/static/console.css";
            }
            body {
                header {
                    a.brand href="/" { "BabelQueue console" }
                    nav { a href="/" { "Queues" } " " a href="/api/v1/openapi.json" { "API" } " " a href="/metrics" { "Metrics" } }
                }
                main { h1 { (title) } (body) }
            }
        }
    }
}

/// An error as a page.
pub(crate) fn error_page(e: &ConsoleError) -> Response {
    (
        e.status(),
        Html(
            layout(
                "Error",
                &html! { p.error { (e.to_string()) } p { a href="/" { "Back to the queues" } } },
            )
            .into_string(),
        ),
    )
        .into_response()
}

async fn css() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS)
}

fn login_form(message: Option<&str>) -> Markup {
    layout(
        "Log in",
        &html! {
            @if let Some(m) = message { p.error { (m) } }
            form method="post" action="/login" {
                label { "Admin token " input type="password" name="token" autocomplete="current-password" required; }
                " "
                button type="submit" { "Log in" }
            }
        },
    )
}

async fn login_page() -> Html<String> {
    Html(login_form(None).into_string())
}

async fn login(State(console): State<Console>, body: Bytes) -> Response {
    let offered = url::form_urlencoded::parse(&body)
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    match &console.inner.token {
        Some(token) if token.matches(&offered) => {
            let (id, _) = console.inner.sessions.open();
            (
                [(
                    header::SET_COOKIE,
                    format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/"),
                )],
                Redirect::to("/"),
            )
                .into_response()
        }
        Some(_) => (
            StatusCode::UNAUTHORIZED,
            Html(login_form(Some("Wrong token.")).into_string()),
        )
            .into_response(),
        None => Redirect::to("/").into_response(),
    }
}

async fn logout(State(console): State<Console>, headers: axum::http::HeaderMap) -> Response {
    if let Some(id) = cookie(&headers, COOKIE) {
        console.inner.sessions.close(&id);
    }
    (
        [(header::SET_COOKIE, format!("{COOKIE}=; Max-Age=0; Path=/"))],
        Redirect::to("/login"),
    )
        .into_response()
}

pub(crate) fn routes() -> Router<Console> {
    Router::new()
        .route("/", get(overview::page))
        .route("/static/console.css", get(css))
        .route("/login", get(login_page).post(login))
        .route("/logout", axum::routing::post(logout))
        .merge(dlq::routes())
        .merge(actions::routes())
}
