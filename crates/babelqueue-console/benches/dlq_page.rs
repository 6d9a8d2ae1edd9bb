//! The console's dead-letter browser on a 100 000-entry dead-letter queue on Redis: how long
//! the first page takes, through the JSON API and as the HTML page (goal: under 300 ms each),
//! and a page at the far end and a filtered page for comparison. Then retry-one and remove-one
//! (one entry of the same DLQ): through the API, which takes the entry in place (a paged browse
//! and one script), and through `babelqueue::redrive` with the drain forced (`Access::Drain`,
//! every other entry drained and restored: the path before the in-place one, and still the path
//! of a transport without a `Taker`), in the same run. Printed, not asserted, except that
//! each action took exactly its entry.
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
use babelqueue::redrive::{self, Access, Redrive};
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

/// POSTs `json` to the API with the session's CSRF token; the time it took.
async fn post(router: &axum::Router, path: &str, json: &str) -> Duration {
    let session = router
        .clone()
        .oneshot(Request::get("/api/v1/session").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let session = session.into_body().collect().await.unwrap().to_bytes();
    let session: serde_json::Value = serde_json::from_slice(&session).unwrap();
    let csrf = session["csrf"].as_str().unwrap().to_owned();
    let request = Request::post(path)
        .header("x-csrf-token", csrf)
        .header("content-type", "application/json")
        .body(Body::from(json.to_owned()))
        .unwrap();
    let started = Instant::now();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let took = started.elapsed();
    assert!(status.is_success(), "{path}: {status}");
    let report: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(report["done"], 1, "{path} {json}: {report}");
    took
}

fn median(mut took: Vec<Duration>) -> Duration {
    took.sort();
    took[took.len() / 2]
}

/// Retry-one and remove-one, in place through the API (`runs` times each) and with the drain
/// forced (once each); returns how many entries left the DLQ.
async fn actions(
    router: &axum::Router,
    url: &str,
    queue: &str,
    entries: usize,
    runs: usize,
) -> usize {
    let dlq = format!("{queue}.dlq");
    let mut next = entries / 2;
    let mut id = || {
        next += 1;
        format!("bench-{next}")
    };
    let (mut retry, mut remove) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let body = format!(r#"{{"ids":["{}"]}}"#, id());
        retry.push(post(router, &format!("/api/v1/queues/0/{queue}/retry"), &body).await);
        let body = format!(r#"{{"ids":["{}"]}}"#, id());
        remove.push(post(router, &format!("/api/v1/queues/0/{queue}/remove"), &body).await);
    }
    let (retry, remove) = (median(retry), median(remove));
    // The drain path, on a transport whose reservations never lapse: a drain of the whole DLQ
    // may outlast the default 90 s, and a swept reservation would be restored twice.
    let draining = RedisTransport::connect(&format!("{url}?retry_after=null"))
        .await
        .unwrap();
    let one = id();
    let started = Instant::now();
    let report = redrive::redrive(
        &draining,
        &dlq,
        &Redrive::new().ids([one]).access(Access::Drain),
        &mut |_| {},
    )
    .await
    .unwrap();
    let drain_retry = started.elapsed();
    assert_eq!(report.redriven, 1);
    let one = id();
    let started = Instant::now();
    let gone = redrive::remove_with(&draining, &dlq, &[one], Access::Drain, &mut |_| {})
        .await
        .unwrap();
    let drain_remove = started.elapsed();
    assert_eq!(gone.len(), 1);
    for (label, before, after) in [
        ("retry_one", drain_retry, retry),
        ("remove_one", drain_remove, remove),
    ] {
        println!(
            "BQ-FIGURE console {label} drain_ms {:.1} in_place_median_ms {:.1} ratio {:.0}",
            ms(before),
            ms(after),
            before.as_secs_f64() / after.as_secs_f64()
        );
    }
    2 * runs + 2
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
    let acted = actions(&router, &url, &queue, entries, if full { 5 } else { 3 }).await;
    let len: usize = filler.llen(key.as_slice()).await.unwrap();
    assert_eq!(len, entries - acted, "each action took exactly its entry");
    let ready = RedisTransport::connect(&url).await.unwrap();
    let ready = ready.options().ready(&queue).into_bytes();
    let _: i64 = filler.del(key.as_slice()).await.unwrap();
    let _: i64 = filler.del(ready.as_slice()).await.unwrap();
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
