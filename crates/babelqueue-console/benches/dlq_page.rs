//! The console's dead-letter browser on a 100 000-entry dead-letter queue on Redis: how long
//! the first page takes, through the JSON API and as the HTML page (goal: under 300 ms each),
//! and a page at the far end and a filtered page for comparison. Printed, not asserted.
//!
//! `cargo bench -p babelqueue-console --bench dlq_page` (Redis at `BQ_REDIS_URL`, default
//! `redis://127.0.0.1:6379`). Under `cargo test --benches` (no `--bench` argument) it runs as a
//! smoke test on 1 000 entries and prints no verdict. The entries are written with `RPUSH`es of 1 000 and deleted at the
//! end, through a client of their own.
#![allow(clippy::print_stdout, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use babelqueue::redis::RedisTransport;
use babelqueue_console::{Console, Source};
use fred::interfaces::{ClientLike as _, KeysInterface as _, ListInterface as _};
use http_body_util::BodyExt as _;
use tower::ServiceExt as _;

const GOAL: Duration = Duration::from_millis(300);

const BODY: &str = r#"{"job":"urn:babel:orders:created","trace_id":"0192c1d2-7a0e-7c3f-9b1a-5d4e3f2a1b0c","data":{"order_id":__N__,"amount":"42.00","currency":"EUR"},"meta":{"id":"bench-__N__","schema_version":1,"queue":"bq-console-bench","lang":"rust"},"attempts":3,"dead_letter":{"reason":"failed","error":"order __N__ failed: payment service timed out after 30s","exception":"Timeout","failed_at":1764806400000,"original_queue":"bq-console-bench","attempts":3,"lang":"rust"}}"#;

async fn time(router: &axum::Router, path: &str) -> (Duration, usize) {
    let started = Instant::now();
    let response = router
        .clone()
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (started.elapsed(), body.len())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn measure(router: &axum::Router, runs: usize, label: &str, path: &str) -> Duration {
    for _ in 0..3 {
        time(router, path).await;
    }
    let mut took = Vec::new();
    let mut size = 0;
    for _ in 0..runs {
        let (one, len) = time(router, path).await;
        took.push(one);
        size = len;
    }
    took.sort();
    let median = took[runs / 2];
    println!(
        "BQ-FIGURE console {label} median_ms {:.1} max_ms {:.1} bytes {size}",
        ms(median),
        ms(took[runs - 1])
    );
    median
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (entries, runs) = if full { (100_000, 15) } else { (1_000, 3) };
    let url = std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let redis = match RedisTransport::connect(&url).await {
        Ok(redis) => redis,
        Err(e) => {
            let required = std::env::var_os("BQ_REQUIRE_BROKERS").is_some_and(|v| !v.is_empty());
            assert!(
                !required,
                "Redis at {url} is unreachable ({e}) and BQ_REQUIRE_BROKERS is set"
            );
            println!("SKIPPED: Redis at {url} is unreachable ({e})");
            return;
        }
    };
    let queue = format!("bq-console-bench-{}", std::process::id());
    let key = redis.options().ready(&format!("{queue}.dlq")).into_bytes();
    let filler =
        fred::prelude::Builder::from_config(fred::prelude::Config::from_url(&url).unwrap())
            .build()
            .unwrap();
    filler.init().await.unwrap();
    let started = Instant::now();
    for chunk in (1..=entries).collect::<Vec<_>>().chunks(1000) {
        let values: Vec<String> = chunk
            .iter()
            .map(|n| BODY.replace("__N__", &n.to_string()))
            .collect();
        let _: i64 = filler.rpush(key.as_slice(), values).await.unwrap();
    }
    let len: usize = filler.llen(key.as_slice()).await.unwrap();
    assert_eq!(len, entries, "the dead-letter queue holds every entry");
    println!(
        "filled {entries} dead letters in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let console = Console::new(vec![
        Source::new(&url, Arc::new(redis), [queue.clone()]).unwrap(),
    ]);
    let router = console.router();
    let api = measure(
        &router,
        runs,
        "api_first_page",
        &format!("/api/v1/queues/0/{queue}/dead-letters?limit=50"),
    )
    .await;
    let html = measure(
        &router,
        runs,
        "html_first_page",
        &format!("/q/0/{queue}?limit=50"),
    )
    .await;
    measure(
        &router,
        runs,
        "api_last_page",
        &format!(
            "/api/v1/queues/0/{queue}/dead-letters?from={}&limit=50",
            entries - 50
        ),
    )
    .await;
    measure(
        &router,
        runs,
        "api_filtered_page",
        &format!("/api/v1/queues/0/{queue}/dead-letters?urn=orders&reason=failed&limit=50"),
    )
    .await;
    let _: i64 = filler.del(key.as_slice()).await.unwrap();
    filler.quit().await.unwrap();

    if !full {
        return;
    }
    for (label, took) in [("API", api), ("HTML page", html)] {
        let verdict = if took < GOAL { "met" } else { "MISSED" };
        println!(
            "console first page of a {entries}-entry DLQ, {label}: {:.1} ms median (goal < {} ms): {verdict}",
            ms(took),
            GOAL.as_millis()
        );
    }
}
