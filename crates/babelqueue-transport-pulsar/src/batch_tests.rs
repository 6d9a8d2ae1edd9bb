//! Batch receive and batched acknowledgements, on the fake client.

use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::{
    App, BatchAcker, BatchPublisher, Consume, Context, HandlerError, Transport, TransportErrorKind,
};

use crate::PulsarTransport;
use crate::fake::FakePulsar;

const URN: &str = "urn:babel:orders:created";
const BODY: &[u8] = br#"{"job":"urn:babel:orders:created","data":{},"attempts":0}"#;

fn setup() -> (Arc<FakePulsar>, PulsarTransport) {
    let fake = Arc::new(FakePulsar::new());
    (fake.clone(), PulsarTransport::with_client(fake))
}

#[tokio::test]
async fn a_receive_takes_up_to_max_in_one_request_and_a_batch_is_acked_together() {
    let (fake, t) = setup();
    for _ in 0..10 {
        t.publish("orders", BODY).await.unwrap();
    }
    let first = t
        .receive("orders", 8, Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(first.len(), 8);
    assert_eq!(fake.receive_calls(), 1);
    t.ack_batch(&first).await.unwrap();
    assert_eq!(fake.ack_calls(), [8]);
    assert_eq!(fake.acked().len(), 8);
    assert_eq!(fake.in_flight(), 0);

    let rest = t
        .receive("orders", 8, Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(rest.len(), 2, "what is there, not max");
    // A delivery acknowledged twice fails the batch; the other is still acknowledged.
    t.ack(&rest[0]).await.unwrap();
    assert!(t.ack_batch(&rest).await.is_err());
    assert_eq!(fake.acked().len(), 10);
    assert_eq!(fake.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_receives_and_acknowledges_in_batches() {
    let (fake, t) = setup();
    for _ in 0..64 {
        t.publish("orders", BODY).await.unwrap();
    }
    let app = App::builder(t)
        .queue("orders")
        .concurrency(8)
        .poll_timeout(Duration::from_millis(20))
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        app.consume(Consume::new().max_messages(64).handle_signals(false)),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(fake.acked().len(), 64);
    assert_eq!(fake.ack_calls().iter().sum::<usize>(), 64);
    assert!(
        fake.ack_calls().len() < 64 && fake.receive_calls() < 64,
        "batched: {} ack calls, {} receive calls",
        fake.ack_calls().len(),
        fake.receive_calls()
    );
}

/// A batch publish sends each body as `publish` would (same topic, same properties), in order;
/// the transport offers it to `App::publish_batch`; a refused send is the batch's error.
#[tokio::test]
async fn a_batch_publish_sends_each_body_as_publish_would_in_order() {
    let (fake, t) = setup();
    assert!(t.capabilities().batch_publisher().is_some());
    let bodies: Vec<Vec<u8>> = (0..5)
        .map(|n| format!(r#"{{"job":"{URN}","data":{{"n":{n}}},"attempts":0}}"#).into_bytes())
        .collect();
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    t.publish_batch("orders", &slices).await.unwrap();
    t.publish("single", &bodies[0]).await.unwrap();
    let sent = fake.sent();
    let (batch, single) = sent.split_at(5);
    let payloads: Vec<&[u8]> = batch.iter().map(|s| s.payload.as_slice()).collect();
    assert_eq!(payloads, slices, "in order, byte for byte");
    assert!(
        batch
            .iter()
            .all(|s| s.topic == single[0].topic.replace("single", "orders"))
    );
    assert_eq!(
        batch[0].properties, single[0].properties,
        "the same projection"
    );
    assert!(batch.iter().all(|s| s.deliver_at.is_none()));

    let failing = sent[0].topic.replace("orders", "broken");
    fake.fail_sends_to(&failing);
    let e = t.publish_batch("broken", &slices).await.unwrap_err();
    assert_ne!(e.kind(), TransportErrorKind::Config, "{e}");
    assert!(fake.sent_to(&failing).is_empty());
}
