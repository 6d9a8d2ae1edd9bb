//! Behaviour tests of the Azure Service Bus binding through its client trait.
//!
//! No Service Bus namespace or emulator can run on the project's machines (the emulator is a
//! container image and there is no container engine), so these tests drive the real
//! [`AsbTransport`] and the real runtime over the in-memory [`FakeServiceBus`], which keeps
//! PeekLock semantics (complete, abandon with `DeliveryCount` + 1, native dead-letter).

#![allow(missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{
    App, Capabilities, Consume, Context, Count, Declared, HandlerError, Redelivery, Transport,
    UnknownUrn,
};
use babelqueue_testkit::reading::{Class, classify};
use babelqueue_transport_asb::fake::FakeServiceBus;
use babelqueue_transport_asb::{AmqpValue, AsbTransport};
use serde_json::Value;

const URN: &str = "urn:babel:orders:created";

fn setup() -> (Arc<FakeServiceBus>, AsbTransport) {
    let fake = Arc::new(FakeServiceBus::new());
    (fake.clone(), AsbTransport::with_client(fake))
}

fn builder(transport: AsbTransport) -> babelqueue_core::AppBuilder {
    App::builder(transport)
        .queue("orders")
        .poll_timeout(Duration::from_millis(5))
        .rewind_pause(Duration::ZERO)
}

async fn run(app: &App, n: u64) {
    app.consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .unwrap();
}

#[tokio::test]
async fn publish_projects_native_fields_and_typed_properties() {
    let (fake, transport) = setup();
    let app = builder(transport).build().unwrap();
    app.publish(URN, &serde_json::json!({"order_id": 1}))
        .await
        .unwrap();
    let sent = fake.sent();
    let (queue, message) = &sent[0];
    assert_eq!(queue, "orders");
    let doc: Value = serde_json::from_slice(&message.body).unwrap();
    assert_eq!(message.subject.as_deref(), Some(URN));
    assert_eq!(message.correlation_id.as_deref(), doc["trace_id"].as_str());
    assert_eq!(message.message_id.as_deref(), doc["meta"]["id"].as_str());
    assert_eq!(message.content_type, "application/json");
    let props = &message.application_properties;
    assert_eq!(
        props[0],
        ("bq-schema-version".to_owned(), AmqpValue::Int(1))
    );
    assert_eq!(
        props[1],
        (
            "bq-source-lang".to_owned(),
            AmqpValue::String("rust".into())
        )
    );
    assert!(
        matches!(props[2], (ref k, AmqpValue::Long(ms)) if k == "bq-created-at" && ms > 1_700_000_000_000)
    );
}

#[tokio::test]
async fn a_failed_handler_is_retried_as_a_copy_then_dead_lettered_to_the_dlq_entity() {
    let (fake, transport) = setup();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let a = attempts.clone();
    let app = builder(transport)
        .max_attempts(2)
        .dead_letter(true)
        .handle(URN, move |ctx: Context| {
            let a = a.clone();
            async move {
                a.lock().unwrap().push(ctx.attempts());
                Err::<(), _>(HandlerError::new("smtp relay is down"))
            }
        })
        .build()
        .unwrap();
    app.publish(URN, &serde_json::json!({"n": 1}))
        .await
        .unwrap();
    run(&app, 2).await;
    assert_eq!(*attempts.lock().unwrap(), vec![0, 1]);
    let sent = fake.sent();
    let queues: Vec<&str> = sent.iter().map(|(q, _)| q.as_str()).collect();
    assert_eq!(
        queues,
        ["orders", "orders", "orders.dlq"],
        "publish, retry copy, DLQ record"
    );
    let record: Value = serde_json::from_slice(&sent[2].1.body).unwrap();
    assert_eq!(record["dead_letter"]["reason"], "failed");
    assert_eq!(record["dead_letter"]["attempts"], 2);
    assert_eq!(fake.completed().len(), 2, "each delivery completed once");
    assert_eq!(fake.locked(), 0);
    assert!(fake.dead_lettered().is_empty());
}

#[tokio::test]
async fn the_delivery_count_raises_attempts_and_counts_toward_the_limit() {
    let (fake, transport) = setup();
    let body = br#"{"job":"urn:babel:orders:created","data":{},"attempts":0}"#;
    // redelivered by the broker four times already (lock expiries): DeliveryCount 5
    fake.deliver("orders", body.to_vec(), Vec::new(), 5);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = builder(transport)
        .max_attempts(5)
        .dead_letter(true)
        .handle(URN, move |ctx: Context| {
            let s = s.clone();
            async move {
                s.lock()
                    .unwrap()
                    .push((ctx.attempts(), ctx.native_attempts()));
                Err::<(), _>(HandlerError::new("no"))
            }
        })
        .build()
        .unwrap();
    run(&app, 1).await;
    assert_eq!(*seen.lock().unwrap(), vec![(4, 4)]);
    let sent = fake.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "orders.dlq", "4 + 1 reaches max_attempts 5");
}

#[tokio::test]
async fn pop_hands_over_the_raw_body_with_the_property_and_the_count() {
    let (fake, transport) = setup();
    let body = br#"{"job":"urn:babel:orders:created","data":{"r":1.50},"attempts":0}"#;
    fake.deliver(
        "orders",
        body.to_vec(),
        vec![("bq-schema-version".into(), AmqpValue::Int(1))],
        3,
    );
    let d = transport
        .pop("orders", Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.body(), body, "never rewritten by the transport");
    assert_eq!(d.facts().declared_version, Declared::Integer(1));
    assert_eq!(d.facts().count, Some(Count::Redelivered(2)));
    let Class::Readable { body: read, .. } = classify(d.body(), d.facts(), d.queue()) else {
        panic!("a readable envelope")
    };
    assert_eq!(
        &*read,
        br#"{"job":"urn:babel:orders:created","data":{"r":1.50},"attempts":2}"#
    );
    transport.ack(&d).await.unwrap();

    // A first delivery reports no count; a gated one keeps its raw body and its typed value.
    let raw = b"{ \"job\": \"urn:x\", \"attempts\": -1 }";
    fake.deliver(
        "orders",
        raw.to_vec(),
        vec![("bq-schema-version".into(), AmqpValue::Double(1.0))],
        1,
    );
    let d = transport
        .pop("orders", Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((d.body(), d.facts().count), (&raw[..], None));
    assert_eq!(d.facts().declared_version, Declared::Float(1.0));
    assert_eq!(
        classify(d.body(), d.facts(), d.queue()),
        Class::Gated {
            declared: "1.0".into()
        }
    );
}

/// The Inspector shows the system properties the namespace stamped: the `MessageId` the
/// projection sent, the sequence number, enqueue time and lock expiry, the delivery count; an
/// abandoned message comes back redelivered, the same message.
#[tokio::test]
async fn the_inspector_shows_the_message_id_the_system_properties_and_a_redelivery() {
    let (_fake, transport) = setup();
    let app = builder(transport.clone()).build().unwrap();
    app.publish(URN, &serde_json::json!({"order_id": 7}))
        .await
        .unwrap();
    let inspector = transport.capabilities().inspector().expect("an Inspector");
    let first = transport
        .pop("orders", Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    let meta_id = serde_json::from_slice::<Value>(first.body()).unwrap()["meta"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let view = inspector.inspect(&first);
    assert_eq!(
        view.id.as_deref(),
        Some(meta_id.as_str()),
        "MessageId = meta.id"
    );
    assert_eq!(view.redelivered, Some(false));
    let names: Vec<&str> = view.properties.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "x-opt-sequence-number",
            "x-opt-enqueued-time",
            "x-opt-locked-until",
            "delivery-count"
        ]
    );
    let value = |view: &babelqueue_core::BrokerView, name: &str| -> i64 {
        view.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.parse().unwrap())
            .unwrap()
    };
    assert_eq!(value(&view, "x-opt-sequence-number"), 1);
    assert_eq!(value(&view, "delivery-count"), 1);
    assert!(value(&view, "x-opt-locked-until") > value(&view, "x-opt-enqueued-time"));

    transport
        .capabilities()
        .abandoner()
        .unwrap()
        .abandon(&first)
        .await
        .unwrap();
    let again = transport
        .pop("orders", Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    let view = inspector.inspect(&again);
    assert_eq!(view.id.as_deref(), Some(meta_id.as_str()));
    assert_eq!(view.redelivered, Some(true), "DeliveryCount 2");
    assert_eq!(value(&view, "delivery-count"), 2);
    assert_eq!(value(&view, "x-opt-sequence-number"), 1, "the same message");
    transport.ack(&again).await.unwrap();
}

#[test]
fn the_capabilities_are_abandon_the_native_dead_letter_and_browse() {
    let (_, transport) = setup();
    let c: Capabilities<'_> = transport.capabilities();
    assert!(c.abandoner().is_some() && c.native_settler().is_some());
    assert!(c.browser().is_some(), "dlq list peeks in place");
    assert!(matches!(c.redelivery_mode(), Redelivery::Copy));
    assert!(c.rewinder().is_none(), "ASB is deliberately not a rewinder");
    assert_eq!(
        c.send_parts(),
        babelqueue_core::Sends::body_only(),
        "the body alone"
    );
    assert!(c.dead_letter_writer().is_none() && c.dead_letter_namer().is_none());
}

#[tokio::test]
async fn a_poison_record_counts_the_deliveries_service_bus_reported() {
    let (fake, transport) = setup();
    fake.deliver("orders", b"not json".to_vec(), Vec::new(), 3);
    let app = builder(transport).dead_letter(true).build().unwrap();
    run(&app, 1).await;
    let sent = fake.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "orders.dlq");
    let record: Value = serde_json::from_slice(&sent[0].1.body).unwrap();
    assert_eq!(record["dead_letter"]["reason"], "poison");
    assert_eq!(record["dead_letter"]["attempts"], 2, "DeliveryCount 3 - 1");
    assert_eq!(record["raw"], "not json");
    assert_eq!(fake.completed().len(), 1);
}

#[tokio::test]
async fn poison_and_gated_messages_are_dead_lettered_natively_when_dead_lettering_is_off() {
    let (fake, transport) = setup();
    fake.deliver("orders", b"\xff not json".to_vec(), Vec::new(), 1);
    fake.deliver(
        "orders",
        b"{\"job\":\"urn:babel:orders:created\"}".to_vec(),
        vec![("bq-schema-version".into(), AmqpValue::Double(1.0))],
        1,
    );
    let handled = Arc::new(AtomicUsize::new(0));
    let h = handled.clone();
    let app = builder(transport)
        .handle(URN, move |_ctx: Context| {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    run(&app, 2).await;
    assert_eq!(handled.load(Ordering::SeqCst), 0);
    let native = fake.dead_lettered();
    assert_eq!(native.len(), 2);
    assert_eq!(native[0].reason, "poison");
    assert!(
        native[0]
            .description
            .starts_with("the body does not decode into a valid envelope")
    );
    assert_eq!(native[0].message.body, b"\xff not json", "body unchanged");
    assert_eq!(native[1].reason, "unsupported schema version");
    assert_eq!(
        native[1].description,
        "the message declares a schema version this consumer does not support"
    );
    assert!(fake.completed().is_empty() && fake.sent().is_empty());
}

#[tokio::test]
async fn browsing_reads_in_place_and_consuming_still_takes_everything() {
    let (fake, transport) = setup();
    let bodies: [&[u8]; 3] = [
        br#"{"job":"urn:babel:orders:created","trace_id":"t-1","data":{"n":1},"meta":{"id":"a"},"attempts":0}"#,
        b"\xff not an envelope",
        br#"{"job":"urn:babel:orders:created","trace_id":"t-3","data":{"n":3},"meta":{"id":"c"},"attempts":2}"#,
    ];
    for body in bodies {
        transport.publish("orders", body).await.unwrap();
    }
    let browser = transport.capabilities().browser().expect("a browser");
    let expected: Vec<Vec<u8>> = bodies.iter().map(|b| b.to_vec()).collect();
    for _ in 0..2 {
        assert_eq!(browser.browse("orders", 0).await.unwrap(), expected);
    }
    assert_eq!(browser.browse("orders", 2).await.unwrap(), expected[..2]);
    assert_eq!(fake.queued("orders"), 3, "nothing taken");
    assert_eq!(fake.locked(), 0, "nothing locked");
    assert!(fake.completed().is_empty());
    // consuming afterwards takes all three, in order, each at its first delivery
    for body in &expected {
        let delivery = transport
            .pop("orders", Duration::from_millis(10))
            .await
            .unwrap()
            .expect("still there");
        assert_eq!(delivery.body(), body.as_slice());
        assert_eq!(delivery.facts().count, None, "first delivery");
        transport.ack(&delivery).await.unwrap();
    }
    assert_eq!(fake.completed().len(), 3);
    assert!(browser.browse("orders", 0).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_native_dead_letter_sub_queue_is_browsable() {
    let (fake, transport) = setup();
    fake.deliver("orders", b"\xff poison".to_vec(), Vec::new(), 1);
    fake.deliver("other", b"\xff elsewhere".to_vec(), Vec::new(), 1);
    let app = builder(transport.clone()).build().unwrap();
    run(&app, 1).await;
    assert_eq!(fake.dead_lettered().len(), 1);
    let browser = transport.capabilities().browser().expect("a browser");
    let path = babelqueue_transport_asb::peek::dead_letter_path("orders");
    for _ in 0..2 {
        assert_eq!(
            browser.browse(&path, 0).await.unwrap(),
            [b"\xff poison".to_vec()]
        );
    }
    assert_eq!(
        browser.browse("orders/$DeadLetterQueue", 0).await.unwrap(),
        [b"\xff poison".to_vec()],
        "the sub-queue's name is not case-sensitive"
    );
    assert!(
        browser
            .browse("other/$deadletterqueue", 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(browser.browse("other", 0).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_gated_message_whose_dlq_write_fails_is_abandoned_and_comes_back() {
    let (fake, transport) = setup();
    fake.fail_sends_to("orders.dlq");
    fake.deliver(
        "orders",
        b"plain".to_vec(),
        vec![("bq-schema-version".into(), AmqpValue::String("2".into()))],
        1,
    );
    let app = builder(transport).dead_letter(true).build().unwrap();
    run(&app, 1).await;
    assert_eq!(fake.abandoned().len(), 1);
    assert!(fake.completed().is_empty());
    assert_eq!(
        fake.queued("orders"),
        1,
        "abandoned: back on the queue at once"
    );
}

#[tokio::test]
async fn a_poison_message_whose_dlq_write_fails_stays_locked_and_is_not_abandoned() {
    let (fake, transport) = setup();
    fake.fail_sends_to("orders.dlq");
    fake.deliver("orders", b"not json".to_vec(), Vec::new(), 1);
    let app = builder(transport).dead_letter(true).build().unwrap();
    run(&app, 1).await;
    assert!(fake.abandoned().is_empty(), "ASB is not a rewinder");
    assert!(fake.completed().is_empty());
    assert_eq!(fake.locked(), 1, "left to the lock expiry");
}

#[tokio::test]
async fn unknown_urn_strategies_settle_through_complete_and_copies() {
    for (strategy, completed, sent_to) in [
        (UnknownUrn::Delete, 1, vec![]),
        (UnknownUrn::Release, 1, vec!["orders"]),
        (UnknownUrn::DeadLetter, 1, vec!["orders.dlq"]),
    ] {
        let (fake, transport) = setup();
        fake.deliver(
            "orders",
            br#"{"job":"urn:babel:nobody","data":{},"attempts":0}"#.to_vec(),
            Vec::new(),
            1,
        );
        let app = builder(transport).on_unknown_urn(strategy).build().unwrap();
        run(&app, 1).await;
        assert_eq!(fake.completed().len(), completed, "{strategy}");
        let queues: Vec<String> = fake.sent().into_iter().map(|(q, _)| q).collect();
        assert_eq!(queues, sent_to, "{strategy}");
    }
}

#[tokio::test]
async fn an_id_over_128_characters_is_refused_before_sending() {
    let (fake, transport) = setup();
    let body = format!(
        r#"{{"job":"urn:x","trace_id":"{}","data":{{}}}}"#,
        "t".repeat(200)
    );
    let err = transport
        .publish("orders", body.as_bytes())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), babelqueue_core::TransportErrorKind::Unsupported);
    assert!(err.to_string().contains("at most 128"), "{err}");
    assert!(fake.sent().is_empty());
}

#[tokio::test]
async fn a_lost_lock_on_complete_is_logged_and_nothing_is_retried() {
    let (fake, transport) = setup();
    fake.deliver(
        "orders",
        br#"{"job":"urn:babel:orders:created","data":{},"attempts":0}"#.to_vec(),
        Vec::new(),
        1,
    );
    let delivery = transport
        .pop("orders", Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    transport.ack(&delivery).await.unwrap();
    let err = transport.ack(&delivery).await.unwrap_err();
    assert_eq!(err.kind(), babelqueue_core::TransportErrorKind::Rejected);
    assert!(err.to_string().contains("lost"), "{err}");
}
