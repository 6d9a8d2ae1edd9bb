//! A full dead-letter address on the real broker: an address setting (through the management
//! address) caps `<queue>.dlq` at 1 KiB with `address-full-policy` FAIL, and one filler message
//! fills it. Artemis then gives a sender link to it no credit at all.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, Event, HandlerError, Observer, Outcome, Transport};
use babelqueue_envelope::Envelope;
use babelqueue_transport_artemis::{ArtemisError, ArtemisTransport};

use crate::common::{broker, drain, json, queue, transport, url};

const OK: &str = "urn:babel:orders:created";
const FAIL: &str = "urn:babel:orders:fails";

fn with_options(url: &str, options: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{options}")
}

/// Runs a broker management operation: a message to `activemq.management` naming the resource
/// and operation in application properties, with the parameters as a JSON array body.
async fn manage(operation: &str, params: serde_json::Value) {
    // The management address is MULTICAST: no `queue` capability on this link.
    let t = ArtemisTransport::connect(&with_options(&url(), "queue_capability=false"))
        .await
        .expect("connect for management");
    let mut headers = babelqueue_core::Headers::new();
    headers.insert("_AMQ_ResourceName".into(), "broker".into());
    headers.insert("_AMQ_OperationName".into(), operation.into());
    assert!(t.capabilities().send_parts().headers);
    let body = params.to_string();
    t.send(
        &babelqueue_core::Outgoing::new("activemq.management", body.as_bytes()).headers(&headers),
    )
    .await
    .unwrap_or_else(|e| panic!("management {operation}: {e}"));
    t.close().await.expect("close");
    // The broker runs the operation when it routes the message.
    tokio::time::sleep(Duration::from_millis(300)).await;
}

async fn address_settings(address: &str, max_size_bytes: u64) {
    let settings = serde_json::json!({
        "maxSizeBytes": max_size_bytes,
        "pageSizeBytes": (max_size_bytes / 2).max(512),
        "addressFullMessagePolicy": "FAIL",
    });
    manage(
        "addAddressSettings",
        serde_json::json!([address, settings.to_string()]),
    )
    .await;
}

fn envelope(queue: &str, urn: &str, n: u64) -> Vec<u8> {
    Envelope::builder(urn)
        .queue(queue)
        .data(&serde_json::json!({ "n": n }))
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes()
}

/// Remembers how each delivery ended.
#[derive(Default)]
struct Outcomes(Mutex<Vec<(String, Outcome, Instant)>>);

impl Observer for Outcomes {
    fn on_event(&self, event: &Event<'_>) {
        self.0
            .lock()
            .unwrap()
            .push((event.urn.to_owned(), event.outcome, Instant::now()));
    }
}

impl Outcomes {
    fn count(&self, urn: &str, outcome: Outcome) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(u, o, _)| u == urn && *o == outcome)
            .count()
    }
}

async fn eventually(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

/// With the dead-letter address full, a send to it fails within `send_credit_timeout` instead of
/// hanging for the 30 s answer timeout and breaking the connection; the runtime moves the failing
/// message behind the good one, which is handled promptly. Once the address has room again, the
/// same worker (same connection) dead-letters the failing message, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_dead_letter_address_holds_up_nothing() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("dlq-full");
    let dlq = format!("{q}.dlq");
    address_settings(&dlq, 1024).await;
    let publisher = transport().await;
    let filler = format!("{{\"filler\":\"{}\"}}", "x".repeat(2048)).into_bytes();
    publisher
        .publish(&dlq, &filler)
        .await
        .expect("the filler goes in while the address is below its limit");

    // The address is full now: a send there gets no credit, and fails fast on its own.
    let probe = ArtemisTransport::connect(&with_options(&url(), "send_credit_timeout_ms=1000"))
        .await
        .unwrap();
    let started = Instant::now();
    let refused = probe
        .client()
        .send(
            &dlq,
            babelqueue_transport_artemis::projection::message(b"{}"),
        )
        .await
        .expect_err("the address is full");
    println!(
        "a send to the full address failed in {:?}: {refused}",
        started.elapsed()
    );
    assert!(
        matches!(refused, ArtemisError::AddressBlocked { .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains(&dlq), "{refused}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    probe.close().await.unwrap();

    publisher.publish(&q, &envelope(&q, FAIL, 0)).await.unwrap();
    publisher.publish(&q, &envelope(&q, OK, 1)).await.unwrap();

    let worker = ArtemisTransport::connect(&with_options(&url(), "send_credit_timeout_ms=1500"))
        .await
        .unwrap();
    let outcomes = Arc::new(Outcomes::default());
    let app = App::builder(worker.clone())
        .queue(&q)
        .max_attempts(1)
        .dead_letter(true)
        .concurrency(1)
        .rewind_pause(Duration::from_millis(200))
        .observer(outcomes.clone())
        .handle(OK, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .handle(FAIL, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("always fails"))
        })
        .build()
        .unwrap();
    let stop = app.stop_handle();
    let running = {
        let app = app.clone();
        tokio::spawn(async move { app.consume(Consume::new().handle_signals(false)).await })
    };

    // The good message behind the failing one is handled well before the 30 s answer timeout.
    let took = eventually("the good message handled", Duration::from_secs(12), || {
        outcomes.count(OK, Outcome::Acked) == 1
    })
    .await;
    println!("the good message was handled {took:?} after the worker started, with the DLQ full");
    assert!(outcomes.count(FAIL, Outcome::Unsettled) >= 1);
    assert_eq!(outcomes.count(FAIL, Outcome::DeadLettered), 0);
    let amqp = worker.amqp().expect("an AMQP client");
    assert_eq!(
        amqp.connections_opened(),
        1,
        "the connection was not replaced"
    );

    // Room again: the same worker dead-letters the failing message.
    let fixed = Instant::now();
    address_settings(&dlq, 100 * 1024 * 1024).await;
    eventually(
        "the failing message dead-lettered",
        Duration::from_secs(20),
        || outcomes.count(FAIL, Outcome::DeadLettered) == 1,
    )
    .await;
    println!(
        "dead-lettered {:?} after asking the broker to give the address room",
        fixed.elapsed()
    );
    // Time for a duplicate to show, were there one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.stop();
    running.await.unwrap().unwrap();
    assert_eq!(amqp.connections_opened(), 1, "still the first connection");
    worker.close().await.unwrap();

    let records: Vec<serde_json::Value> = drain(&publisher, &dlq, Duration::from_secs(2))
        .await
        .iter()
        .filter(|r| **r != filler)
        .map(|r| json(r))
        .collect();
    assert_eq!(records.len(), 1, "exactly one record: {records:?}");
    assert_eq!(records[0]["data"], serde_json::json!({ "n": 0 }));
    assert_eq!(records[0]["job"], FAIL);
    assert_eq!(outcomes.count(FAIL, Outcome::DeadLettered), 1);
    assert_eq!(outcomes.count(OK, Outcome::Acked), 1);
    assert!(
        drain(&publisher, &q, Duration::from_millis(500))
            .await
            .is_empty()
    );
    manage("removeAddressSettings", serde_json::json!([dlq])).await;
    publisher.close().await.unwrap();
}
