//! What the console's tests share: dead-letter bodies and a client for the router.
#![allow(dead_code, unreachable_pub)]

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt as _;
use tower::ServiceExt as _;

/// A dead-letter record of `urn`, id `id`, failed with `error` `age_secs` ago.
pub fn record(id: &str, urn: &str, reason: &str, error: &str, age_secs: u64) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    serde_json::json!({
        "job": urn,
        "trace_id": "t-1",
        "data": {"n": 1},
        "meta": {"id": id, "schema_version": 1, "queue": "orders"},
        "attempts": 3,
        "dead_letter": {
            "reason": reason, "error": error, "exception": "Boom",
            "failed_at": now - age_secs * 1000, "original_queue": "orders", "attempts": 3, "lang": "rust"
        }
    })
    .to_string()
    .into_bytes()
}

/// An answer: status, headers, body as text.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends one request to `router`.
pub async fn call(
    router: &Router,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, String)>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let request = match body {
        Some((content_type, body)) => request
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap(),
        None => request.body(Body::empty()).unwrap(),
    };
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

pub async fn get(router: &Router, path: &str) -> Answer {
    call(router, Method::GET, path, &[], None).await
}

/// The CSRF token of the token-less console.
pub async fn csrf(router: &Router) -> String {
    get(router, "/api/v1/session").await.json()["csrf"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// POSTs `json` to the API with the CSRF header.
pub async fn post_json(router: &Router, path: &str, csrf: &str, json: serde_json::Value) -> Answer {
    call(
        router,
        Method::POST,
        path,
        &[("x-csrf-token", csrf)],
        Some(("application/json", json.to_string())),
    )
    .await
}

/// POSTs an HTML form.
pub async fn post_form(
    router: &Router,
    path: &str,
    headers: &[(&str, &str)],
    form: &str,
) -> Answer {
    call(
        router,
        Method::POST,
        path,
        headers,
        Some(("application/x-www-form-urlencoded", form.to_owned())),
    )
    .await
}
