//! Batch receive and batched acceptance, on the fake client.

use std::time::Duration;

use babelqueue_core::{App, BatchAcker, BatchPublisher, Consume, Context, HandlerError, Transport};

use crate::ArtemisTransport;
use crate::client::Disposition;
use crate::fake::FakeClient;

const URN: &str = "urn:babel:orders:created";
const BODY: &[u8] = br#"{"job":"urn:babel:orders:created","data":{},"attempts":0}"#;

#[tokio::test]
async fn a_receive_takes_what_is_at_hand_and_a_batch_is_accepted_together() {
    let fake = FakeClient::new();
    let t = ArtemisTransport::with_client(fake.clone(), Duration::from_millis(5));
    for _ in 0..10 {
        t.publish("orders", BODY).await.unwrap();
    }
    let first = t
        .receive("orders", 8, Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(first.len(), 8, "up to max");
    t.ack_batch(&first).await.unwrap();
    assert_eq!(fake.settle_batches(), [8], "one settle call for the batch");
    assert!(
        fake.settlements()
            .iter()
            .all(|(_, d)| *d == Disposition::Accepted)
    );
    let rest = t
        .receive("orders", 8, Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(rest.len(), 2, "what is there, not max");
    // One of them settled already: the batch reports it, and the other is still accepted.
    t.ack(&rest[0]).await.unwrap();
    assert!(t.ack_batch(&rest).await.is_err());
    assert_eq!(fake.unsettled(), 0);
    assert!(fake.is_empty("orders"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_accepts_in_batches() {
    let fake = FakeClient::new();
    let t = ArtemisTransport::with_client(fake.clone(), Duration::from_millis(5));
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
    assert_eq!(fake.unsettled(), 0);
    assert_eq!(fake.settle_batches().iter().sum::<usize>(), 64);
    assert!(
        fake.settle_batches().len() < 64,
        "{:?}",
        fake.settle_batches()
    );
}

/// A batch publish sends each body as `publish` would (same message, same projection), in
/// order, and the transport offers it to `App::publish_batch`; a refused send is the batch's
/// error.
#[tokio::test]
async fn a_batch_publish_sends_each_body_as_publish_would_in_order() {
    let fake = FakeClient::new();
    let t = ArtemisTransport::with_client(fake.clone(), Duration::from_millis(5));
    assert!(t.capabilities().batch_publisher().is_some());
    let bodies: Vec<Vec<u8>> = (0..5)
        .map(|n| format!(r#"{{"job":"{URN}","data":{{"n":{n}}},"attempts":0}}"#).into_bytes())
        .collect();
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    t.publish_batch("orders", &slices).await.unwrap();
    assert_eq!(
        fake.sent_bodies("orders"),
        bodies,
        "in order, byte for byte"
    );
    t.publish("single", &bodies[0]).await.unwrap();
    let sent = fake.sent();
    assert_eq!(
        format!("{:?}", sent[0].1),
        format!("{:?}", sent[5].1),
        "the same message as a single publish"
    );

    fake.fail_sends_to("broken", true);
    assert!(t.publish_batch("broken", &slices).await.is_err());
}
