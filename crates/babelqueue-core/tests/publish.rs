//! The producer runs the verdict its consumers run: on every publish path, a body a consumer
//! would dead-letter as poison is refused with the member named, and nothing is sent.

use std::time::Duration;

use babelqueue_core::redrive::{Redrive, redrive};
use babelqueue_core::{
    App, Consume, Context, Envelope, ErrorKind, HandlerError, Headers, MemoryTransport, RawJson,
    Transport,
};

const URN: &str = "urn:babel:orders:created";

fn poisoned(app: &App) -> Envelope {
    app.envelope(URN)
        .data_raw(RawJson::parse(r#"{"lines":[{"price":1e400}]}"#).expect("JSON"))
        .build()
        .expect("the codec itself accepts any JSON object as data")
}

fn assert_refused(error: &babelqueue_core::Error) {
    assert_eq!(error.kind(), ErrorKind::InvalidMessage, "{error}");
    assert!(!error.is_transient());
    assert!(
        error
            .to_string()
            .ends_with("data.lines[0].price: 1e400 is not a finite number"),
        "{error}"
    );
}

#[tokio::test]
async fn every_publish_path_refuses_a_body_its_consumers_would_dead_letter() {
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue("orders")
        .build()
        .expect("app");
    let bad = poisoned(&app);

    assert_refused(
        &app.publish_envelope("orders", &bad, &Headers::new())
            .await
            .unwrap_err(),
    );
    let traced = Headers::from([("traceparent".to_owned(), "00-a-b-01".to_owned())]);
    assert_refused(
        &app.publish_envelope("orders", &bad, &traced)
            .await
            .unwrap_err(),
    );
    assert_refused(
        &app.publish_delayed("orders", &bad, Duration::from_secs(1))
            .await
            .unwrap_err(),
    );
    // A batch is refused whole, before its first envelope is sent.
    let mut batch: Vec<Envelope> = (0..3)
        .map(|n| {
            app.envelope(URN)
                .data(&serde_json::json!({ "n": n }))
                .build()
                .expect("envelope")
        })
        .collect();
    batch.push(bad.clone());
    assert_refused(&app.publish_batch("orders", &batch).await.unwrap_err());
    assert_eq!(memory.len("orders"), 0, "nothing was sent");

    // A readable body still goes out, 20-digit integers and all.
    let fine = app
        .envelope(URN)
        .data_raw(RawJson::parse(r#"{"id":12345678901234567890,"tiny":1e-400}"#).expect("JSON"))
        .build()
        .expect("envelope");
    app.publish_envelope("orders", &fine, &Headers::new())
        .await
        .expect("published");
    assert_eq!(memory.len("orders"), 1);
}

#[tokio::test]
async fn a_handler_that_publishes_poison_gets_the_refusal() {
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue("orders")
        .max_attempts(1)
        .handle(URN, |ctx: Context| async move {
            let app = ctx.app().expect("an app").clone();
            let bad = poisoned(&app);
            let refused = app
                .publish_envelope("mail", &bad, &Headers::new())
                .await
                .unwrap_err();
            assert_refused(&refused);
            Ok::<(), HandlerError>(())
        })
        .build()
        .expect("app");
    app.publish(URN, &serde_json::json!({}))
        .await
        .expect("sent");
    let summary = app
        .consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .expect("consumed");
    assert_eq!(summary.processed, 1);
    assert_eq!(memory.len("mail"), 0);
}

#[tokio::test]
async fn a_retry_from_the_dead_letter_queue_names_why_a_poison_entry_stays() {
    let memory = MemoryTransport::new();
    // Another SDK's dead-letter record of a body with a number no consumer can read.
    let record = br#"{"job":"urn:babel:orders:created","data":{"x":1e400},"meta":{"id":"m-9","queue":"orders"},"attempts":3,"dead_letter":{"reason":"poison","original_queue":"orders"}}"#;
    memory.publish("orders.dlq", record).await.expect("seeded");
    let report = redrive(
        &memory,
        "orders.dlq",
        &Redrive::new().ids(["m-9"]),
        &mut |_| {},
    )
    .await
    .expect("ran");
    assert_eq!((report.redriven, report.skipped), (0, 1));
    let item = &report.items[0];
    assert_eq!((item.id.as_str(), item.message_id.as_str()), ("m-9", "m-9"));
    let why = item.skipped.as_deref().unwrap_or_default();
    assert!(
        why.contains("data.x: 1e400 is not a finite number"),
        "{why}"
    );
    assert_eq!(memory.bodies("orders.dlq"), vec![record.to_vec()]);
    assert_eq!(memory.len("orders"), 0);
}
