//! The admin API on live brokers: Redis, RabbitMQ, Kafka and NATS (`BQ_REDIS_URL`,
//! `BQ_AMQP_URL`, `BQ_KAFKA_URL`, `BQ_NATS_URL`, else their local defaults). Three messages are
//! dead-lettered by the real runtime; the API lists them, groups them under one cause, and
//! retries one back to its queue, where the broker hands it out again. A broker that cannot
//! be reached skips the test, or fails it with `BQ_REQUIRE_BROKERS=1`.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use babelqueue::{App, Consume, HandlerError, Transport};
use babelqueue_console::{Console, Source};
use babelqueue_testkit::{broker_or_skip, unique_queue};
use common::*;

const URN: &str = "urn:console:live";

/// A fresh queue of the broker at `url` whose dead-letter queue holds three messages failed
/// out of it by the runtime, and their ids.
async fn dead_lettered(
    label: &str,
    url: &str,
) -> Option<(Arc<dyn Transport>, String, Vec<String>)> {
    let transport = broker_or_skip(label, babelqueue::connect(url)).await?;
    let queue = unique_queue("console");
    let app = App::builder_arc(transport.clone())
        .queue(queue.clone())
        .max_attempts(1)
        .dead_letter(true)
        .handle(URN, |ctx: babelqueue::Context| async move {
            Err(HandlerError::new(format!("order {} failed", ctx.data())))
        })
        .build()
        .unwrap();
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(
            app.publish(URN, &serde_json::json!({ "n": n }))
                .await
                .unwrap(),
        );
    }
    let summary = app
        .consume(
            Consume::new()
                .max_messages(3)
                .idle_timeout(Duration::from_secs(30))
                .handle_signals(false),
        )
        .await
        .unwrap();
    assert_eq!(summary.processed, 3, "{label}: {summary:?}");
    // The console runs on a transport of its own, as `babelqueue serve` does: on Kafka one
    // more consumer in a group whose other member sits idle would wait for it to rejoin.
    transport.close().await.unwrap();
    let transport = babelqueue::connect(url).await.unwrap();
    Some((transport, queue, ids))
}

/// Polls `path` until `done` accepts its JSON, for up to 20 s.
async fn until(
    router: &axum::Router,
    path: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = get(router, path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.body);
        let json = answer.json();
        if done(&json) {
            return json;
        }
        assert!(Instant::now() < deadline, "{path}: {json}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn the_api_lists_groups_and_retries_on(label: &str, env: &str, default: &str) {
    let mut url = std::env::var(env).unwrap_or_else(|_| default.to_owned());
    if label == "Kafka" {
        // A consumer group of its own: another test's members never hold up its rebalance.
        let sep = if url.contains('?') { '&' } else { '?' };
        url = format!("{url}{sep}group_id={}", unique_queue("group"));
    }
    let Some((transport, queue, ids)) = dead_lettered(label, &url).await else {
        return;
    };
    let console = Console::new(vec![
        Source::new(&url, transport.clone(), [queue.clone()]).unwrap(),
    ]);
    let router = console.router();
    let base = format!("/api/v1/queues/0/{queue}");
    let queues = until(&router, "/api/v1/queues", |q| q[0]["dead_letter"] == 3).await;
    assert_eq!(queues[0]["queue"], queue.as_str());
    let page = until(&router, &format!("{base}/dead-letters"), |p| {
        p["entries"].as_array().is_some_and(|e| e.len() == 3)
    })
    .await;
    let listed: Vec<&str> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected, "{label}");
    assert_eq!(page["entries"][0]["reason"], "failed");
    assert_eq!(page["entries"][0]["cause"], "order {\"n\":#} failed");
    // A page further in: one entry from position 1 (`Browser::browse_page`).
    let second = get(&router, &format!("{base}/dead-letters?from=1&limit=1"))
        .await
        .json();
    assert_eq!(
        second["entries"].as_array().unwrap().len(),
        1,
        "{label}: {second}"
    );
    assert_eq!(second["entries"][0]["id"], listed[1], "{label}");
    assert_eq!(second["entries"][0]["position"], 1);
    assert_eq!(second["next"], 2);
    let groups = get(&router, &format!("{base}/groups")).await.json();
    assert_eq!(groups["groups"].as_array().unwrap().len(), 1, "{groups}");
    assert_eq!(groups["groups"][0]["count"], 3);
    let token = csrf(&router).await;
    let retried = post_json(
        &router,
        &format!("{base}/retry"),
        &token,
        serde_json::json!({"ids": [listed[0]]}),
    )
    .await;
    assert_eq!(retried.status, StatusCode::OK, "{label}: {}", retried.body);
    assert_eq!(retried.json()["done"], 1, "{}", retried.body);
    until(&router, &format!("{base}/dead-letters"), |p| {
        p["entries"].as_array().is_some_and(|e| e.len() == 2)
    })
    .await;
    let removed = post_json(
        &router,
        &format!("{base}/remove"),
        &token,
        serde_json::json!({"ids": [listed[2]]}),
    )
    .await;
    assert_eq!(removed.status, StatusCode::OK, "{label}: {}", removed.body);
    assert_eq!(removed.json()["done"], 1, "{label}: {}", removed.body);
    until(&router, &format!("{base}/dead-letters"), |p| {
        p["entries"]
            .as_array()
            .is_some_and(|e| e.len() == 1 && e[0]["id"] == listed[1])
    })
    .await;
    // The broker hands the retried message out again, on its original queue (read by a
    // worker of its own).
    transport.close().await.unwrap();
    let transport = babelqueue::connect(&url).await.unwrap();
    let delivery = transport
        .pop(&queue, Duration::from_secs(15))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{label}: the retried message is not on {queue}"));
    let body = String::from_utf8_lossy(delivery.body()).into_owned();
    assert!(
        body.contains(listed[0]) && !body.contains("dead_letter"),
        "{body}"
    );
    transport.ack(&delivery).await.unwrap();
    transport.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis() {
    the_api_lists_groups_and_retries_on("Redis", "BQ_REDIS_URL", "redis://127.0.0.1:6379").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq() {
    the_api_lists_groups_and_retries_on(
        "RabbitMQ",
        "BQ_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka() {
    the_api_lists_groups_and_retries_on("Kafka", "BQ_KAFKA_URL", "kafka://127.0.0.1:9092").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats() {
    the_api_lists_groups_and_retries_on("NATS", "BQ_NATS_URL", "nats://127.0.0.1:4222").await;
}
