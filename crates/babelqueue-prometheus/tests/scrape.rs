//! A worker's metrics as a scraper sees them: `GET /metrics` over HTTP, parsed line by line.
//!
//! * `memory://`: three orders handled, one payment that fails and is dead-lettered, one
//!   poison body; every counter, the histogram's count, the in-flight gauge back to zero and
//!   the lag gauge are checked by value.
//! * Redis (`BQ_REDIS_URL`): the lag and oldest-age gauges follow the broker's `Stats`. With
//!   `BQ_REQUIRE_BROKERS` set a missing Redis fails the test; otherwise it prints `SKIPPED`.
//!
//! The recorder is per process, so each test uses queues of its own.

use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport, Transport};
use babelqueue_prometheus::{CONTENT_TYPE, Prometheus, watch_lag};
use babelqueue_testkit::{broker_or_skip, unique_queue};

/// The value of the series `name` whose labels include every pair of `labels`.
fn value(scrape: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
            (metric == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
            .then(|| value.parse().ok())?
        })
        .reduce(|a, b| a + b)
}

/// `base` and one more label.
fn with<'a>(base: &[(&'a str, &'a str)], extra: (&'a str, &'a str)) -> Vec<(&'a str, &'a str)> {
    let mut all = base.to_vec();
    all.push(extra);
    all
}

async fn scrape(url: &str) -> String {
    let response = reqwest::get(url).await.expect("a scrape");
    assert!(response.status().is_success(), "{}", response.status());
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    assert_eq!(content_type.as_deref(), Some(CONTENT_TYPE));
    response.text().await.expect("a body")
}

#[tokio::test]
async fn a_scrape_counts_what_the_worker_did() {
    let prometheus = Prometheus::install().expect("installed");
    let server = prometheus
        .serve("127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("serving");
    let memory = MemoryTransport::new();
    let queue = unique_queue("metrics");
    let app = App::builder(memory.clone())
        .queue(&queue)
        .max_attempts(1)
        .dead_letter(true)
        .observer(prometheus.observer())
        .handle("urn:babel:orders:created", |_ctx: Context| async {
            Ok::<(), HandlerError>(())
        })
        .handle("urn:babel:payments:captured", |_ctx: Context| async {
            Err::<(), HandlerError>(HandlerError::new("card declined"))
        })
        .build()
        .expect("app");
    for n in 0..3 {
        app.publish("urn:babel:orders:created", &serde_json::json!({ "n": n }))
            .await
            .expect("publish");
    }
    app.publish("urn:babel:payments:captured", &serde_json::json!({}))
        .await
        .expect("publish");
    memory
        .publish(&queue, b"not an envelope")
        .await
        .expect("publish poison");
    let lag = watch_lag(
        Arc::new(memory.clone()),
        vec![queue.clone()],
        Duration::from_millis(50),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = scrape(&server.url()).await;
    let on_queue = [("messaging_destination_name", queue.as_str())];
    assert_eq!(
        value(&before, "babelqueue_queue_lag_messages", &on_queue),
        Some(5.0),
        "{before}"
    );

    app.consume(Consume::new().max_messages(5).handle_signals(false))
        .await
        .expect("consume");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = scrape(&server.url()).await;
    drop(lag);
    let orders = [
        ("messaging_destination_name", queue.as_str()),
        ("messaging_babelqueue_urn", "urn:babel:orders:created"),
    ];
    let payments = [
        ("messaging_destination_name", queue.as_str()),
        ("messaging_babelqueue_urn", "urn:babel:payments:captured"),
    ];
    let sent = "messaging_client_sent_messages_total";
    let consumed = "messaging_client_consumed_messages_total";
    assert_eq!(value(&after, sent, &orders), Some(3.0), "{after}");
    assert_eq!(value(&after, sent, &payments), Some(1.0), "{after}");
    let acked = ("messaging_babelqueue_outcome", "acked");
    let dead = ("messaging_babelqueue_outcome", "dead_lettered");
    assert_eq!(value(&after, consumed, &with(&orders, acked)), Some(3.0));
    assert_eq!(value(&after, consumed, &with(&payments, dead)), Some(1.0));
    // poison has no URN label, and is dead-lettered too
    assert_eq!(value(&after, consumed, &with(&on_queue, dead)), Some(2.0));
    assert_eq!(
        value(&after, "babelqueue_messages_failed_total", &payments),
        Some(1.0)
    );
    assert_eq!(
        value(&after, "babelqueue_messages_dead_lettered_total", &on_queue),
        Some(2.0)
    );
    assert_eq!(
        value(
            &after,
            "messaging_process_duration_seconds_count",
            &on_queue
        ),
        Some(4.0),
        "four handler runs: {after}"
    );
    assert_eq!(
        value(
            &after,
            "messaging_process_duration_seconds_bucket",
            &with(&payments, ("le", "+Inf"))
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&after, "babelqueue_worker_in_flight_messages", &on_queue),
        Some(0.0)
    );
    assert!(after.contains("messaging_system=\"babelqueue\""));
}

#[tokio::test]
async fn the_lag_gauges_follow_the_brokers_stats() {
    let url = std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let Some(transport) = broker_or_skip(
        &format!("Redis at {url}"),
        babelqueue_transport_redis::RedisTransport::connect(&url),
    )
    .await
    else {
        return;
    };
    let prometheus = Prometheus::install().expect("installed");
    let transport: Arc<dyn Transport> = Arc::new(transport);
    let queue = unique_queue("metrics-lag");
    let app = App::builder_arc(transport.clone())
        .queue(&queue)
        .build()
        .expect("app");
    for n in 0..4 {
        app.publish("urn:babel:orders:created", &serde_json::json!({ "n": n }))
            .await
            .expect("publish");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let lag = watch_lag(
        transport.clone(),
        vec![queue.clone()],
        Duration::from_millis(50),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let scrape = prometheus.render();
    drop(lag);
    let on_queue = [("messaging_destination_name", queue.as_str())];
    assert_eq!(
        value(&scrape, "babelqueue_queue_lag_messages", &on_queue),
        Some(4.0),
        "{scrape}"
    );
    let age = value(&scrape, "babelqueue_queue_oldest_age_seconds", &on_queue)
        .expect("an oldest age on Redis");
    assert!((0.25..60.0).contains(&age), "{age}");
    while let Some(d) = transport
        .pop(&queue, Duration::from_millis(100))
        .await
        .expect("pop")
    {
        transport.ack(&d).await.expect("ack");
    }
}
