//! `babelqueue stats`: in process on a shared memory:// transport, on a transport without the
//! capability, and the binary against a live Redis (`BQ_REDIS_URL`; skipped when unreachable,
//! a failure with `BQ_REQUIRE_BROKERS` set).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue::{Delivery, MemoryTransport, Transport, TransportError};
use common::{babelqueue, json_lines, printed, publish_n, redis_url, run_memory, run_on, stdout};

#[tokio::test]
async fn one_json_line_per_queue_with_what_the_broker_says() {
    let memory = MemoryTransport::new();
    for _ in 0..3 {
        memory.publish("orders", b"{}").await.unwrap();
    }
    memory.publish("orders.dlq", b"{}").await.unwrap();
    let _held = memory.pop("orders", Duration::ZERO).await.unwrap().unwrap();
    let ran = run_memory(
        &memory,
        &[
            "stats",
            "memory://",
            "--queue",
            "orders",
            "--queue",
            "empty",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let lines = json_lines(&ran.stdout);
    assert_eq!(lines.len(), 2, "{ran:?}");
    assert_eq!(lines[0]["queue"], "orders");
    assert_eq!(lines[0]["transport"], "memory");
    assert_eq!(
        (
            &lines[0]["ready"],
            &lines[0]["in_flight"],
            &lines[0]["delayed"],
            &lines[0]["dead_letter"]
        ),
        (&2.into(), &1.into(), &0.into(), &1.into())
    );
    assert!(lines[0]["consumers"].is_null(), "{ran:?}");
    assert_eq!(lines[1]["ready"], 0);
    // --json is the same as the default
    let json = run_memory(
        &memory,
        &["stats", "memory://", "--queue", "orders", "--json"],
    )
    .await;
    assert_eq!(json_lines(&json.stdout)[0], lines[0]);
}

#[tokio::test]
async fn human_output_is_one_row_per_queue_with_a_dash_where_unknown() {
    let memory = MemoryTransport::new();
    memory.publish("orders", b"{}").await.unwrap();
    let ran = run_memory(
        &memory,
        &[
            "stats",
            "memory://",
            "--queue",
            "orders",
            "--output",
            "human",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    assert!(ran.stdout.contains("READY"), "{ran:?}");
    let row = ran
        .stdout
        .lines()
        .find(|l| l.contains("orders"))
        .expect("a row for orders");
    assert!(row.contains(" 1 "), "{row}");
    assert!(row.contains(" - "), "consumers and age are unknown: {row}");
}

/// A transport that reports nothing about its queues.
#[derive(Debug)]
struct Mute;

#[async_trait]
impl Transport for Mute {
    fn name(&self) -> &'static str {
        "mute"
    }
    async fn publish(&self, _: &str, _: &[u8]) -> Result<(), TransportError> {
        Ok(())
    }
    async fn pop(&self, _: &str, _: Duration) -> Result<Option<Delivery>, TransportError> {
        Ok(None)
    }
    async fn ack(&self, _: &Delivery) -> Result<(), TransportError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_transport_without_stats_is_an_error_naming_it() {
    let ran = run_on(Arc::new(Mute), &["stats", "mute://", "--queue", "orders"]).await;
    assert_eq!(ran.status, 1, "{ran:?}");
    assert!(ran.stdout.is_empty(), "{ran:?}");
    assert!(
        ran.stderr
            .contains("the mute transport does not report queue stats"),
        "{ran:?}"
    );
}

#[tokio::test]
async fn a_queue_is_required() {
    let ran = run_memory(&MemoryTransport::new(), &["stats", "memory://"]).await;
    assert_eq!(ran.status, 2, "{ran:?}");
}

#[test]
fn the_binary_reports_a_redis_queue() {
    let Some(url) = redis_url() else { return };
    let queue = babelqueue_testkit::unique_queue("cli-stats");
    publish_n(&url, &queue, "urn:babel:orders:created", "{}", 3);
    let out = babelqueue(&["stats", &url, "--queue", &queue], None);
    assert!(out.status.success(), "{}", printed(&out));
    let line = &json_lines(&stdout(&out))[0];
    assert_eq!(line["transport"], "redis");
    assert_eq!((&line["ready"], &line["in_flight"]), (&3.into(), &0.into()));
    // the queue's keys go away with its messages
    let drained = babelqueue(
        &[
            "consume",
            &url,
            "--queue",
            &queue,
            "--urn",
            "urn:babel:orders:created",
            "--max",
            "3",
            "--idle-timeout",
            "2",
        ],
        None,
    );
    assert!(drained.status.success(), "{}", printed(&drained));
}
