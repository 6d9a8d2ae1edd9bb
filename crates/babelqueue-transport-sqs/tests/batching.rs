//! Batches over the in-memory [`FakeSqs`], counting the SQS requests: `App::publish_batch`
//! sends `SendMessageBatch` of 10, and a worker receives 10 per `ReceiveMessage` and deletes
//! with `DeleteMessageBatch` of 10, so consuming costs at most 0.25 requests per message.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{App, BatchAcker, Consume, Context, Envelope, HandlerError, Transport};
use babelqueue_transport_sqs::fake::FakeSqs;
use babelqueue_transport_sqs::{SqsOptions, SqsTransport};

const URN: &str = "urn:babel:orders:created";

#[tokio::test]
async fn a_batch_native_worker_needs_at_most_a_quarter_request_per_message() {
    let fake = FakeSqs::new();
    let transport = SqsTransport::new(fake.clone(), SqsOptions::default());
    let seen: Arc<Mutex<Vec<i64>>> = Arc::default();
    let s = seen.clone();
    let app = App::builder(transport)
        .queue("orders")
        .concurrency(10)
        .poll_timeout(Duration::from_millis(50))
        .handle(URN, move |ctx: Context| {
            let data: serde_json::Value = ctx.data_as().unwrap();
            s.lock().unwrap().push(data["n"].as_i64().unwrap());
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    let envelopes: Vec<Envelope> = (0..200)
        .map(|n| {
            app.envelope(URN)
                .data(&serde_json::json!({ "n": n }))
                .build()
                .unwrap()
        })
        .collect();
    app.publish_batch("orders", &envelopes).await.unwrap();
    let published = fake.requests();
    assert_eq!(
        published.get("SendMessageBatch"),
        Some(&20),
        "{published:?}"
    );
    assert_eq!(published.get("SendMessage"), None, "{published:?}");
    assert_eq!(fake.sent().len(), 200);

    let summary = app
        .consume(Consume::new().max_messages(200).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 200);
    let mut all = seen.lock().unwrap().clone();
    all.sort_unstable();
    assert_eq!(all, (0..200).collect::<Vec<_>>(), "each exactly once");
    assert_eq!(fake.in_flight(), 0, "every message deleted");

    let requests = fake.requests();
    let consuming: usize = ["ReceiveMessage", "DeleteMessage", "DeleteMessageBatch"]
        .iter()
        .map(|api| requests.get(api).copied().unwrap_or(0))
        .sum();
    let per_message = consuming as f64 / 200.0;
    assert!(
        per_message <= 0.25,
        "{consuming} requests to consume 200 messages ({per_message:.2} per message): {requests:?}"
    );
    assert_eq!(requests.get("DeleteMessage"), None, "{requests:?}");
}

#[tokio::test]
async fn a_batch_acknowledgement_is_split_into_tens() {
    let fake = FakeSqs::new();
    let transport = SqsTransport::new(fake.clone(), SqsOptions::default());
    for n in 0..25 {
        transport
            .publish("orders", format!(r#"{{"n":{n}}}"#).as_bytes())
            .await
            .unwrap();
    }
    let mut received = Vec::new();
    while received.len() < 25 {
        let got = transport
            .receive("orders", 10, Duration::ZERO)
            .await
            .unwrap();
        assert!(!got.is_empty() && got.len() <= 10);
        received.extend(got);
    }
    transport.ack_batch(&received).await.unwrap();
    assert_eq!(fake.requests().get("DeleteMessageBatch"), Some(&3));
    assert_eq!(fake.deleted().len(), 25);
    assert_eq!(fake.in_flight(), 0);
}
