//! The metrics observer after a scripted run on the in-memory transport, read back through the
//! SDK's in-memory metric exporter.

use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport, Transport};
use babelqueue_otel::Metrics;
use babelqueue_otel::metrics::{DEAD_LETTERED, FAILED, HANDLED, PROCESS_DURATION, RETRIED};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, SdkMeterProvider};

const OK: &str = "urn:babel:orders:created";
const FAILS: &str = "urn:babel:payments:captured";
const QUEUE: &str = "orders";
const SLEEP: Duration = Duration::from_millis(20);

/// One data point: its attributes and (sum or count, histogram sum).
type Point = (Vec<KeyValue>, u64, f64);

fn points(all: &[ResourceMetrics], name: &str) -> Vec<Point> {
    let last = all.last().expect("at least one export");
    let mut out = Vec::new();
    for scope in last.scope_metrics() {
        for metric in scope.metrics().filter(|m| m.name() == name) {
            match metric.data() {
                AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                    assert!(sum.is_monotonic(), "{name} is a counter");
                    for p in sum.data_points() {
                        out.push((p.attributes().cloned().collect(), p.value(), 0.0));
                    }
                }
                AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                    for p in h.data_points() {
                        out.push((p.attributes().cloned().collect(), p.count(), p.sum()));
                    }
                }
                other => panic!("{name}: unexpected data {other:?}"),
            }
        }
    }
    out
}

fn get(attributes: &[KeyValue], key: &str) -> Option<Value> {
    attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn urn_of(point: &Point) -> Option<String> {
    get(&point.0, "messaging.babelqueue.urn").map(|v| v.to_string())
}

fn total(points: &[Point]) -> u64 {
    points.iter().map(|p| p.1).sum()
}

#[tokio::test]
async fn counters_and_the_duration_histogram_after_a_scripted_run() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_periodic_exporter(exporter.clone())
        .build();
    let metrics = Metrics::new(&provider.meter("test"));

    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue(QUEUE)
        .max_attempts(2)
        .dead_letter(true)
        .observer(Arc::new(metrics))
        .handle(OK, |_ctx: Context| async {
            tokio::time::sleep(SLEEP).await;
            Ok::<(), HandlerError>(())
        })
        .handle(FAILS, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("card declined"))
        })
        .build()
        .unwrap();

    // Three that succeed, one that fails twice (a retry, then the dead-letter queue), and one
    // poison body (dead-lettered at once, no handler).
    for n in 0..3 {
        app.publish(OK, &serde_json::json!({"order_id": n}))
            .await
            .unwrap();
    }
    app.publish(FAILS, &serde_json::json!({"payment_id": 7}))
        .await
        .unwrap();
    memory.publish(QUEUE, b"not an envelope").await.unwrap();
    let summary = app
        .consume(Consume::new().max_messages(6).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 6);
    assert_eq!(memory.len("orders.dlq"), 2);

    provider.force_flush().unwrap();
    let exported = exporter.get_finished_metrics().unwrap();

    let handled = points(&exported, HANDLED);
    assert_eq!(total(&handled), 3);
    assert!(handled.iter().all(|p| urn_of(p).as_deref() == Some(OK)));
    assert!(handled.iter().all(|p| {
        get(&p.0, "messaging.destination.name") == Some(Value::from(QUEUE))
            && get(&p.0, "messaging.system") == Some(Value::from("babelqueue"))
    }));

    let failed = points(&exported, FAILED);
    assert_eq!(total(&failed), 2);
    assert!(failed.iter().all(|p| urn_of(p).as_deref() == Some(FAILS)));

    let retried = points(&exported, RETRIED);
    assert_eq!(total(&retried), 1);
    assert_eq!(urn_of(&retried[0]).as_deref(), Some(FAILS));

    // One exhausted message (with its URN) and one poison body (no URN to report).
    let dead = points(&exported, DEAD_LETTERED);
    assert_eq!(total(&dead), 2);
    let mut urns: Vec<Option<String>> = dead.iter().map(urn_of).collect();
    urns.sort();
    assert_eq!(urns, vec![None, Some(FAILS.to_owned())]);

    let durations = points(&exported, PROCESS_DURATION);
    let by_outcome = |outcome: &str| {
        durations
            .iter()
            .filter(|p| {
                get(&p.0, "messaging.babelqueue.outcome") == Some(Value::from(outcome.to_owned()))
            })
            .fold((0, 0.0), |(c, s), p| (c + p.1, s + p.2))
    };
    let (ok_count, ok_sum) = by_outcome("success");
    let (failed_count, _) = by_outcome("failure");
    assert_eq!((ok_count, failed_count), (3, 2));
    // Each successful handler slept SLEEP: the recorded seconds cannot be less.
    assert!(
        ok_sum >= 3.0 * SLEEP.as_secs_f64(),
        "histogram sum {ok_sum} s for three handlers that slept {SLEEP:?} each"
    );
}

#[tokio::test]
async fn the_urn_attribute_can_be_turned_off() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_periodic_exporter(exporter.clone())
        .build();
    let metrics = Metrics::new(&provider.meter("test")).with_urn(false);
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue(QUEUE)
        .observer(Arc::new(metrics))
        .handle(OK, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    app.publish(OK, &serde_json::json!({})).await.unwrap();
    app.consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    provider.force_flush().unwrap();
    let handled = points(&exporter.get_finished_metrics().unwrap(), HANDLED);
    assert_eq!(total(&handled), 1);
    assert_eq!(urn_of(&handled[0]), None);
}
