//! The admin API and the pages on memory://, offline: paging, filters, cause groups, retry
//! and remove (API and forms), CSRF, read-only, the admin token, escaping, redaction, the
//! OpenAPI document, `/metrics`.

use crate::common;

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use babelqueue::{MemoryTransport, Transport as _};
use babelqueue_console::{Console, Source};
use common::*;

async fn console_with(dlq: &[Vec<u8>]) -> (Arc<MemoryTransport>, Console) {
    let memory = Arc::new(MemoryTransport::new());
    for body in dlq {
        memory.publish("orders.dlq", body).await.unwrap();
    }
    let source = Source::new("memory://", memory.clone(), ["orders"]).unwrap();
    (memory, Console::new(vec![source]))
}

fn three() -> Vec<Vec<u8>> {
    vec![
        record(
            "m-1",
            "urn:babel:orders:created",
            "failed",
            "order 11 timed out after 30s",
            7200,
        ),
        record(
            "m-2",
            "urn:babel:orders:created",
            "failed",
            "order 12 timed out after 5s",
            60,
        ),
        record(
            "m-3",
            "urn:babel:billing:charge",
            "unknown_urn",
            "No handler mapped for URN [urn:babel:billing:charge].",
            10,
        ),
    ]
}

#[tokio::test]
async fn the_overview_lists_every_queue_with_na_for_what_the_broker_does_not_say() {
    let (_memory, console) = console_with(&three()).await;
    let router = console.router();
    let queues = get(&router, "/api/v1/queues").await;
    assert_eq!(queues.status, StatusCode::OK);
    let row = &queues.json()[0];
    assert_eq!(row["queue"], "orders");
    assert_eq!(row["dlq"], "orders.dlq");
    assert_eq!(row["dead_letter"], 3);
    assert_eq!(row["ready"], 0);
    assert!(row["oldest_age_secs"].is_null(), "{row}");
    let page = get(&router, "/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("href=\"/q/0/orders\""), "{}", page.body);
    assert!(
        page.body.contains(">n/a<"),
        "the oldest age is n/a, never 0"
    );
}

#[tokio::test]
async fn the_dead_letters_come_a_page_at_a_time() {
    let dlq: Vec<Vec<u8>> = (0..120)
        .map(|n| record(&format!("m-{n}"), "urn:a", "failed", "boom", 5))
        .collect();
    let (_memory, console) = console_with(&dlq).await;
    let router = console.router();
    let first = get(&router, "/api/v1/queues/0/orders/dead-letters?limit=50")
        .await
        .json();
    assert_eq!(first["entries"].as_array().unwrap().len(), 50);
    assert_eq!(first["entries"][0]["id"], "m-0");
    assert_eq!(first["next"], 50);
    let last = get(
        &router,
        "/api/v1/queues/0/orders/dead-letters?from=100&limit=50",
    )
    .await
    .json();
    assert_eq!(last["entries"].as_array().unwrap().len(), 20);
    assert_eq!(last["entries"][0]["id"], "m-100");
    assert_eq!(last["entries"][0]["position"], 100);
    assert!(last["next"].is_null());
    let html = get(&router, "/q/0/orders?limit=50").await;
    assert_eq!(html.body.matches("class=\"entry\"").count(), 50);
    assert!(html.body.contains("from=50"), "a next-page link");
    let bad = get(&router, "/api/v1/queues/0/orders/dead-letters?limit=x").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        get(&router, "/api/v1/queues/0/nope/dead-letters")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_filters_hold_urn_reason_cause_and_age() {
    let (_memory, console) = console_with(&three()).await;
    let router = console.router();
    let ids = |v: serde_json::Value| -> Vec<String> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let rows = [
        ("urn=billing", vec!["m-3"]),
        ("reason=failed", vec!["m-1", "m-2"]),
        (
            "cause=order%20%23%20timed%20out%20after%20%23s",
            vec!["m-1", "m-2"],
        ),
        ("older_than=3600", vec!["m-1"]),
        ("newer_than=120", vec!["m-2", "m-3"]),
        ("urn=orders&newer_than=120", vec!["m-2"]),
        ("urn=&reason=", vec!["m-1", "m-2", "m-3"]),
    ];
    for (query, expected) in rows {
        let page = get(
            &router,
            &format!("/api/v1/queues/0/orders/dead-letters?{query}"),
        )
        .await
        .json();
        assert_eq!(ids(page), expected, "{query}");
    }
    let html = get(&router, "/q/0/orders?reason=unknown_urn").await;
    assert_eq!(html.body.matches("class=\"entry\"").count(), 1);
}

#[tokio::test]
async fn failures_are_grouped_by_cause_and_a_group_is_retried_whole() {
    let (memory, console) = console_with(&three()).await;
    let router = console.router();
    let groups = get(&router, "/api/v1/queues/0/orders/groups").await.json();
    assert_eq!(groups["groups"][0]["cause"], "order # timed out after #s");
    assert_eq!(groups["groups"][0]["count"], 2);
    assert_eq!(groups["groups"][1]["count"], 1);
    let page = get(&router, "/q/0/orders/groups").await;
    assert!(page.body.contains("Retry all 2"));
    let token = csrf(&router).await;
    let retried = post_json(
        &router,
        "/api/v1/queues/0/orders/retry",
        &token,
        serde_json::json!({"cause": "order # timed out after #s"}),
    )
    .await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.body);
    assert_eq!(retried.json()["done"], 2);
    assert_eq!((memory.len("orders"), memory.len("orders.dlq")), (2, 1));
}

#[tokio::test]
async fn retry_and_remove_by_id_through_the_api_need_the_csrf_token() {
    let (memory, console) = console_with(&three()).await;
    let router = console.router();
    let refused = call(
        &router,
        Method::POST,
        "/api/v1/queues/0/orders/retry",
        &[],
        Some(("application/json", r#"{"ids":["m-1"]}"#.to_owned())),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(memory.len("orders.dlq"), 3);
    let token = csrf(&router).await;
    let retried = post_json(
        &router,
        "/api/v1/queues/0/orders/retry",
        &token,
        serde_json::json!({"ids": ["m-1", "nope"]}),
    )
    .await
    .json();
    assert_eq!(retried["done"], 1);
    assert_eq!(retried["missing"], serde_json::json!(["nope"]));
    assert_eq!(memory.len("orders"), 1);
    let back = String::from_utf8(memory.bodies("orders")[0].clone()).unwrap();
    assert!(
        back.contains("\"m-1\"") && !back.contains("dead_letter"),
        "{back}"
    );
    let removed = post_json(
        &router,
        "/api/v1/queues/0/orders/remove",
        &token,
        serde_json::json!({"ids": ["m-3"]}),
    )
    .await
    .json();
    assert_eq!(removed["done"], 1);
    assert_eq!(memory.len("orders.dlq"), 1);
    let dry = post_json(
        &router,
        "/api/v1/queues/0/orders/redrive",
        &token,
        serde_json::json!({"dry_run": true}),
    )
    .await
    .json();
    assert_eq!(
        (dry["done"].as_u64(), dry["kept"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(memory.len("orders.dlq"), 1);
}

#[tokio::test]
async fn the_forms_need_the_csrf_token_and_retry_one_row() {
    let (memory, console) = console_with(&three()).await;
    let router = console.router();
    let page = get(&router, "/q/0/orders").await.body;
    let token = csrf(&router).await;
    assert!(
        page.contains(&format!("name=\"csrf\" value=\"{token}\"")),
        "the form carries it"
    );
    let refused = post_form(&router, "/q/0/orders/retry", &[], "one=m-2").await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let wrong = post_form(&router, "/q/0/orders/remove", &[], "csrf=wrong&ids=m-2").await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    assert_eq!(memory.len("orders.dlq"), 3);
    // The row's own button wins over the ticked boxes.
    let done = post_form(
        &router,
        "/q/0/orders/retry",
        &[],
        &format!("csrf={token}&ids=m-1&one=m-2"),
    )
    .await;
    assert_eq!(done.status, StatusCode::OK);
    assert!(done.body.contains("1 done"), "{}", done.body);
    assert_eq!(memory.len("orders"), 1);
    let removed = post_form(
        &router,
        "/q/0/orders/remove",
        &[],
        &format!("csrf={token}&ids=m-1&ids=m-3"),
    )
    .await;
    assert!(removed.body.contains("2 done"), "{}", removed.body);
    assert_eq!(memory.len("orders.dlq"), 0);
}

#[tokio::test]
async fn read_only_refuses_every_action() {
    let (memory, console) = console_with(&three()).await;
    let router = console.read_only(true).router();
    let token = csrf(&router).await;
    for (path, json) in [
        ("retry", serde_json::json!({"ids": ["m-1"]})),
        ("remove", serde_json::json!({"ids": ["m-1"]})),
        ("redrive", serde_json::json!({"dry_run": false})),
    ] {
        let answer = post_json(
            &router,
            &format!("/api/v1/queues/0/orders/{path}"),
            &token,
            json,
        )
        .await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{path}");
        assert!(answer.body.contains("read-only"), "{}", answer.body);
        let form = post_form(
            &router,
            &format!("/q/0/orders/{path}"),
            &[],
            &format!("csrf={token}&ids=m-1"),
        )
        .await;
        assert_eq!(form.status, StatusCode::FORBIDDEN, "{path}");
    }
    assert_eq!(memory.len("orders.dlq"), 3);
    let page = get(&router, "/q/0/orders").await.body;
    assert!(!page.contains("Retry selected") && !page.contains("retry-one"));
}

#[tokio::test]
async fn with_a_token_the_api_wants_a_bearer_and_the_pages_a_login() {
    let (memory, console) = console_with(&three()).await;
    let router = console.token(Some("t0ken-xyz".to_owned())).router();
    assert_eq!(
        get(&router, "/api/v1/queues").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get(&router, "/metrics").await.status,
        StatusCode::UNAUTHORIZED
    );
    let wrong = call(
        &router,
        Method::GET,
        "/api/v1/queues",
        &[("authorization", "Bearer nope")],
        None,
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let bearer = [("authorization", "Bearer t0ken-xyz")];
    assert_eq!(
        call(&router, Method::GET, "/api/v1/queues", &bearer, None)
            .await
            .status,
        StatusCode::OK
    );
    // A bearer request needs no CSRF token: no browser sends one by itself.
    let retried = call(
        &router,
        Method::POST,
        "/api/v1/queues/0/orders/retry",
        &bearer,
        Some(("application/json", r#"{"ids":["m-1"]}"#.to_owned())),
    )
    .await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.body);
    assert_eq!(memory.len("orders"), 1);
    let page = get(&router, "/").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.headers["location"], "/login");
    assert_eq!(
        post_form(&router, "/login", &[], "token=nope").await.status,
        StatusCode::UNAUTHORIZED
    );
    let login = post_form(&router, "/login", &[], "token=t0ken-xyz").await;
    let cookie = login.headers["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    assert!(
        login.headers["set-cookie"]
            .to_str()
            .unwrap()
            .contains("HttpOnly")
    );
    let with_cookie = [("cookie", cookie.as_str())];
    let overview = call(&router, Method::GET, "/", &with_cookie, None).await;
    assert_eq!(overview.status, StatusCode::OK);
    assert!(
        !overview.body.contains("t0ken-xyz"),
        "the token is never shown"
    );
    let session = call(&router, Method::GET, "/api/v1/session", &with_cookie, None)
        .await
        .json();
    let csrf = session["csrf"].as_str().unwrap().to_owned();
    let no_csrf = post_form(&router, "/q/0/orders/remove", &with_cookie, "ids=m-2").await;
    assert_eq!(no_csrf.status, StatusCode::FORBIDDEN);
    let removed = post_form(
        &router,
        "/q/0/orders/remove",
        &with_cookie,
        &format!("csrf={csrf}&ids=m-2"),
    )
    .await;
    assert_eq!(removed.status, StatusCode::OK);
    assert_eq!(memory.len("orders.dlq"), 1);
}

#[tokio::test]
async fn a_non_loopback_listener_without_a_token_is_refused() {
    let (_memory, console) = console_with(&[]).await;
    let err = console
        .check_listen("0.0.0.0:8025".parse().unwrap())
        .unwrap_err();
    assert_eq!(err.kind(), babelqueue_console::ErrorKind::Insecure);
    assert!(err.to_string().contains("BABELQUEUE_ADMIN_TOKEN"), "{err}");
    assert!(
        console
            .check_listen("127.0.0.1:8025".parse().unwrap())
            .is_ok()
    );
    let guarded = console.token(Some("x".repeat(32)));
    assert!(
        guarded
            .check_listen("0.0.0.0:8025".parse().unwrap())
            .is_ok()
    );
}

#[tokio::test]
async fn hostile_bodies_render_inert() {
    let hostile = serde_json::json!({
        "job": "urn:x:<script>alert('urn')</script>",
        "data": {"html": "<script>alert('data')</script>", "img": "<img src=x onerror=alert(1)>"},
        "meta": {"id": "<script>alert('id')</script>", "schema_version": 1, "note": "<script>alert('meta')</script>"},
        "attempts": 1,
        "dead_letter": {"reason": "failed", "error": "<script>alert('error')</script>", "original_queue": "orders"}
    })
    .to_string()
    .into_bytes();
    let (_memory, console) =
        console_with(&[hostile, b"\xff<script>alert('raw')</script>".to_vec()]).await;
    let router = console.router();
    let list = get(&router, "/q/0/orders").await;
    let entry = get(
        &router,
        "/q/0/orders/entry/%3Cscript%3Ealert('id')%3C%2Fscript%3E?at=0",
    )
    .await;
    assert_eq!(entry.status, StatusCode::OK, "{}", entry.body);
    let groups = get(&router, "/q/0/orders/groups").await;
    let raw_id = get(&router, "/api/v1/queues/0/orders/dead-letters")
        .await
        .json()["entries"][1]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let raw = get(&router, &format!("/q/0/orders/entry/{raw_id}?at=1")).await;
    for page in [&list, &entry, &groups, &raw] {
        assert!(!page.body.contains("<script"), "{}", page.body);
        assert!(!page.body.contains("<img"), "{}", page.body);
        assert!(
            page.headers["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("default-src 'none'")
        );
    }
    assert!(
        list.body.contains("&lt;script&gt;alert('urn')"),
        "{}",
        list.body
    );
    assert!(entry.body.contains("&lt;script&gt;alert('meta')"));
    assert!(entry.body.contains("&lt;script&gt;alert('error')"));
    assert!(entry.body.contains("&lt;script&gt;alert('data')"));
    assert!(
        raw.body.contains("ff3c736372697074"),
        "the raw bytes in hex"
    );
}

#[tokio::test]
async fn no_page_or_answer_shows_a_broker_password() {
    let memory = Arc::new(MemoryTransport::new());
    memory.publish("orders.dlq", &three()[0]).await.unwrap();
    let source = Source::new(
        "redis://admin:hunter2secret@127.0.0.1:6379/0",
        memory,
        ["orders"],
    )
    .unwrap();
    assert!(!format!("{source:?}").contains("hunter2secret"));
    let router = Console::new(vec![source]).router();
    for path in [
        "/",
        "/api/v1/queues",
        "/q/0/orders",
        "/api/v1/queues/0/orders/dead-letters",
        "/metrics",
        "/q/0/orders/groups",
    ] {
        let answer = get(&router, path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}");
        assert!(
            !answer.body.contains("hunter2secret"),
            "{path}: {}",
            answer.body
        );
    }
    assert!(
        get(&router, "/")
            .await
            .body
            .contains("redis://admin:***@127.0.0.1:6379/0")
    );
}

#[tokio::test]
async fn metrics_are_prometheus_gauges_without_invented_zeros() {
    let (_memory, console) = console_with(&three()).await;
    let router = console.router();
    let metrics = get(&router, "/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(
        metrics.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let line = metrics
        .body
        .lines()
        .find(|l| {
            l.starts_with("babelqueue_queue_messages{") && l.contains("state=\"dead_letter\"")
        })
        .unwrap_or_else(|| panic!("{}", metrics.body));
    assert!(
        line.contains("messaging_destination_name=\"orders\"")
            && line.contains("messaging_system=\"babelqueue\"")
            && line.ends_with(" 3"),
        "{line}"
    );
    assert!(
        metrics
            .body
            .contains("# TYPE babelqueue_queue_messages gauge")
    );
    // memory:// does not say the oldest message's age: no series, rather than a 0.
    assert!(
        !metrics
            .body
            .contains("babelqueue_queue_oldest_age_seconds{")
    );
}

#[tokio::test]
async fn the_chart_draws_the_sampled_history() {
    let (_memory, console) = console_with(&three()).await;
    console.sample().await;
    console.sample().await;
    let router = console.router();
    let history = get(&router, "/api/v1/queues/0/orders/history").await.json();
    assert_eq!(history.as_array().unwrap().len(), 2);
    assert_eq!(history[0]["dead_letter"], 3);
    let page = get(&router, "/").await.body;
    assert!(
        page.contains("<svg") && page.contains("class=\"dead\""),
        "{page}"
    );
}

#[tokio::test]
async fn the_committed_openapi_document_is_the_generated_one() {
    let (_memory, console) = console_with(&[]).await;
    let served = get(&console.router(), "/api/v1/openapi.json").await;
    assert_eq!(served.status, StatusCode::OK);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
    if std::env::var_os("BQ_BLESS").is_some() {
        std::fs::write(path, format!("{}\n", served.body)).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed.trim_end() == served.body,
        "docs/openapi.json differs from the generated document: run \
         `BQ_BLESS=1 cargo test -p babelqueue-console --test it api::the_committed_openapi` and commit it"
    );
    let doc = served.json();
    assert!(doc["paths"]["/api/v1/queues/{source}/{queue}/retry"]["post"].is_object());
}

#[tokio::test]
async fn a_rate_limited_redrive_takes_a_batch_a_second() {
    let dlq: Vec<Vec<u8>> = (0..5)
        .map(|n| record(&format!("m-{n}"), "urn:a", "failed", "boom", 5))
        .collect();
    let (memory, console) = console_with(&dlq).await;
    let router = console.router();
    let token = csrf(&router).await;
    let started = std::time::Instant::now();
    let report = post_json(
        &router,
        "/api/v1/queues/0/orders/redrive",
        &token,
        serde_json::json!({"rate": 2}),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);
    assert_eq!(report.json()["done"], 5, "{}", report.body);
    assert_eq!((memory.len("orders"), memory.len("orders.dlq")), (5, 0));
    // Batches of 2, 2 and 1: two waits of a second between them.
    assert!(took >= std::time::Duration::from_secs(2), "{took:?}");
    assert!(took < std::time::Duration::from_secs(6), "{took:?}");
}
