//! The transport and the runtime against the real broker: round trip, the wire projection,
//! retry and dead-letter, poison, delivery-count, the gate, link credit, failed settle writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{
    App, Capabilities, Consume, Context, Delivery, HandlerError, Outgoing, Transport,
    TransportError,
};
use babelqueue_envelope::Envelope;
use babelqueue_transport_artemis::amqp_types::messaging::annotations::OwnedKey;
use babelqueue_transport_artemis::amqp_types::messaging::{Body, MessageId};
use babelqueue_transport_artemis::amqp_types::primitives::{SimpleValue, Symbol, Value};
use babelqueue_transport_artemis::fake::incoming;
use babelqueue_transport_artemis::{
    AmqpClient, ArtemisOptions, ArtemisTransport, Client, Disposition,
};
use tokio::sync::Notify;

use crate::common::{self, broker, drain, json, queue, transport, url};

const URN: &str = "urn:babel:orders:created";
const SHORT: Duration = Duration::from_millis(500);

fn client() -> AmqpClient {
    AmqpClient::new(ArtemisOptions::parse(&url()).unwrap()).unwrap()
}

fn envelope(queue: &str, order: i64) -> Vec<u8> {
    Envelope::builder(URN)
        .queue(queue)
        .trace_id(format!("trace-{order}"))
        .data(&serde_json::json!({"order_id": order}))
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("round-trip");
    let t = transport().await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = App::builder(t.clone())
        .queue(&q)
        .handle(URN, move |ctx: Context| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push((
                    ctx.data_as::<serde_json::Value>()?,
                    ctx.trace_id().map(|t| t.into_owned()),
                    ctx.attempts(),
                ));
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    for order in 0..3 {
        t.publish(&q, &envelope(&q, order)).await.unwrap();
    }
    app.publish(URN, &serde_json::json!({"order_id": 3}))
        .await
        .unwrap();
    let summary = app
        .consume(Consume::new().max_messages(4).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 4);
    let seen = seen.lock().unwrap().clone();
    let orders: Vec<i64> = seen
        .iter()
        .map(|(d, _, _)| d["order_id"].as_i64().unwrap())
        .collect();
    assert_eq!(orders, [0, 1, 2, 3], "FIFO, each handled once");
    assert_eq!(seen[0].1.as_deref(), Some("trace-0"));
    assert!(seen.iter().all(|(_, _, a)| *a == 0));
    assert!(
        drain(&t, &q, SHORT).await.is_empty(),
        "everything was accepted"
    );
}

/// What another AMQP/JMS peer receives: the projection, on the wire, through Artemis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projection_on_the_wire() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("projection");
    let t = transport().await;
    let body = br#"{"job":"urn:babel:orders:created","trace_id":"7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b","data":{"order_id":1042,"note":"caf\u00e9 \u2603"},"meta":{"id":"f1e2","queue":"orders","lang":"php","schema_version":1,"created_at":1749132727000},"attempts":0}"#;
    t.publish(&q, body).await.unwrap();
    let raw = client();
    let received = raw
        .receive(&q, Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    let m = &received.message;
    assert_eq!(
        m.body,
        Body::Value(
            babelqueue_transport_artemis::amqp_types::messaging::AmqpValue(Value::String(
                String::from_utf8(body.to_vec()).unwrap()
            ))
        ),
        "the body is one amqp-value string, byte for byte"
    );
    let annotations = m.message_annotations.as_ref().expect("annotations");
    assert_eq!(
        annotations.get(&OwnedKey::Symbol(Symbol::from("x-opt-jms-type"))),
        Some(&Value::String(URN.into())),
        "x-opt-jms-type under a symbol key"
    );
    let props = m.properties.as_ref().expect("properties");
    assert_eq!(
        props.correlation_id,
        Some(MessageId::String(
            "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b".into()
        ))
    );
    assert_eq!(
        props.creation_time.as_ref().map(|t| t.milliseconds()),
        Some(1_749_132_727_000)
    );
    let app = &m
        .application_properties
        .as_ref()
        .expect("application properties")
        .0;
    let strings: Vec<(String, String)> = app
        .iter()
        .filter(|(k, _)| k.starts_with("bq_"))
        .map(|(k, v)| match v {
            SimpleValue::String(s) => (k.clone(), s.clone()),
            other => panic!("{k} is not a string: {other:?}"),
        })
        .collect();
    assert_eq!(
        strings,
        [
            ("bq_schema_version".into(), "1".into()),
            ("bq_source_lang".into(), "php".into()),
            ("bq_attempts".into(), "0".into()),
            ("bq_app_id".into(), "babelqueue".into()),
        ]
    );
    assert!(m.header.as_ref().is_some_and(|h| h.durable), "sent durable");
    raw.settle(&received.token, Disposition::Accepted)
        .await
        .unwrap();
    raw.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_then_dead_letter() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("retry");
    let t = transport().await;
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let a = attempts.clone();
    let app = App::builder(t.clone())
        .queue(&q)
        .max_attempts(3)
        .dead_letter(true)
        .handle(URN, move |ctx: Context| {
            let a = a.clone();
            async move {
                a.lock().unwrap().push(ctx.attempts());
                Err::<(), _>(HandlerError::new("payment service down").with_exception("Down"))
            }
        })
        .build()
        .unwrap();
    let original = envelope(&q, 7);
    t.publish(&q, &original).await.unwrap();
    let summary = app
        .consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 3);
    assert_eq!(
        *attempts.lock().unwrap(),
        [0, 1, 2],
        "each retry counted once"
    );
    assert!(
        drain(&t, &q, SHORT).await.is_empty(),
        "nothing left on the queue"
    );
    let records = drain(&t, &format!("{q}.dlq"), Duration::from_secs(2)).await;
    assert_eq!(records.len(), 1, "exactly one dead-letter record");
    let record = json(&records[0]);
    let dl = &record["dead_letter"];
    assert_eq!(dl["reason"], "failed");
    assert_eq!(dl["error"], "payment service down");
    assert_eq!(dl["exception"], "Down");
    assert_eq!(dl["attempts"], 3);
    assert_eq!(dl["original_queue"], q.as_str());
    assert_eq!(record["attempts"], 3);
    assert_eq!(record["data"], serde_json::json!({"order_id": 7}));
    assert_eq!(record["trace_id"], "trace-7");
}

/// A body that is not an envelope never reaches a handler and lands in the DLQ intact; a body
/// that is not even UTF-8 (carried as a data section) keeps its exact bytes (base64).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_bodies_reach_the_dead_letter_queue_intact() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("poison");
    let t = transport().await;
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let app = App::builder(t.clone())
        .queue(&q)
        .dead_letter(true)
        .handle(URN, move |_ctx: Context| {
            c.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    let bodies: [&[u8]; 4] = [
        b"plain text, not JSON  \t ",
        br#"{"job":"urn:babel:orders:created","attempts":1.5}"#,
        b"[1,2,3]",
        b"\xff\xfe{\"job\":\"urn:x\"}",
    ];
    for body in bodies {
        t.publish(&q, body).await.unwrap();
    }
    let summary = app
        .consume(Consume::new().max_messages(4).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 4);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no handler ran");
    let records = drain(&t, &format!("{q}.dlq"), Duration::from_secs(2)).await;
    assert_eq!(records.len(), 4);
    for (record, body) in records.iter().zip(bodies) {
        let record = json(record);
        assert_eq!(record["dead_letter"]["reason"], "poison", "{record}");
        assert_eq!(record["dead_letter"]["original_queue"], q.as_str());
        match std::str::from_utf8(body) {
            Ok(text) if record.get("raw").is_some() => assert_eq!(record["raw"], text),
            Ok(_) => {
                // an object body is spliced: its own members are kept
                assert_eq!(record["job"], "urn:babel:orders:created");
                assert_eq!(record["attempts"], 1.5);
            }
            Err(_) => {
                assert_eq!(record["raw_encoding"], "base64");
                let raw = record["raw"].as_str().unwrap();
                assert_eq!(raw, base64(body), "the exact bytes, base64");
            }
        }
    }
}

fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(TABLE[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A peer whose deliveries fail (`modified` with `delivery-failed`, as a JMS rollback) makes
/// Artemis raise `delivery-count`; the worker then sees `attempts` = delivery-count (0-based, no
/// −1), and those broker redeliveries count towards `max_attempts`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_count_rising_on_redelivery() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("delivery-count");
    let t = transport().await;
    t.publish(&q, &envelope(&q, 1)).await.unwrap();
    let peer = client();
    let mut counts = Vec::new();
    for _ in 0..2 {
        let r = peer
            .receive(&q, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        counts.push(r.message.header.as_ref().map_or(0, |h| h.delivery_count));
        peer.settle(&r.token, Disposition::Failed).await.unwrap();
    }
    peer.close().await.unwrap();
    assert_eq!(
        counts,
        [0, 1],
        "delivery-count is 0-based and rises per failed delivery"
    );

    // `released` is not a failed delivery: the count stays.
    let r = client();
    let d = r
        .receive(&q, Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.message.header.as_ref().map_or(0, |h| h.delivery_count), 2);
    r.settle(&d.token, Disposition::Released).await.unwrap();
    r.close().await.unwrap();

    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = App::builder(t.clone())
        .queue(&q)
        .max_attempts(3)
        .dead_letter(true)
        .handle(URN, move |ctx: Context| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(ctx.attempts());
                Err::<(), _>(HandlerError::new("still failing"))
            }
        })
        .build()
        .unwrap();
    app.consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [2],
        "attempts = max(body 0, delivery-count 2)"
    );
    let records = drain(&t, &format!("{q}.dlq"), Duration::from_secs(2)).await;
    assert_eq!(
        records.len(),
        1,
        "2 broker redeliveries + 1 failure = max_attempts 3"
    );
    assert_eq!(json(&records[0])["dead_letter"]["attempts"], 3);
}

/// The Inspector shows what the broker delivered: the `message-id` a JMS-style producer set,
/// the header (durable, delivery-count), the properties and the annotations; a delivery that
/// failed once comes back to another consumer redelivered, with the same id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_shows_the_message_id_the_header_and_a_redelivery() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("inspect");
    let peer = client();
    let mut message = babelqueue_transport_artemis::projection::message(&envelope(&q, 7));
    message
        .properties
        .get_or_insert_with(Default::default)
        .message_id = Some(MessageId::String("ID:inspect-7".into()));
    peer.send(&q, message).await.unwrap();

    let first = transport().await;
    let d = first
        .pop(&q, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the message");
    let view = first
        .capabilities()
        .inspector()
        .expect("an Inspector")
        .inspect(&d);
    assert_eq!(view.id.as_deref(), Some("ID:inspect-7"));
    assert_eq!(view.redelivered, Some(false));
    let shown: std::collections::HashMap<&str, &str> = view
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(shown["durable"], "true");
    assert_eq!(shown["delivery-count"], "0");
    assert_eq!(shown["correlation-id"], "trace-7");
    assert_eq!(shown["x-opt-jms-type"], URN);
    // Its consumer goes away, another fails it once: the next delivery is a redelivery.
    first.close().await.unwrap();
    drop(d);
    let r = peer
        .receive(&q, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("back on the queue");
    peer.settle(&r.token, Disposition::Failed).await.unwrap();
    peer.close().await.unwrap();
    let second = transport().await;
    let again = second
        .pop(&q, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("redelivered");
    let view = second
        .capabilities()
        .inspector()
        .expect("an Inspector")
        .inspect(&again);
    assert_eq!(view.id.as_deref(), Some("ID:inspect-7"));
    assert_eq!(view.redelivered, Some(true));
    let count = view
        .properties
        .iter()
        .find(|(k, _)| k == "delivery-count")
        .map(|(_, v)| v.parse::<u32>().unwrap());
    assert!(count >= Some(1), "{view:?}");
    second.ack(&again).await.unwrap();
    second.close().await.unwrap();
}

/// The `bq_schema_version` gate on messages that crossed the real broker: "2" is dead-lettered
/// raw and byte-identical without being decoded; a present-but-null property and an integer 1
/// are not gated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_version_gate_on_the_wire() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("gate");
    let t = transport().await;
    let peer = client();
    let gated_body = b"{\n  \"job\": \"urn:babel:orders:created\",\n  \"data\": { \"name\": \"caf\\u00e9\" },\n  \"meta\": { \"schema_version\": 2 }\n}\n";
    peer.send(
        &q,
        incoming(
            gated_body,
            &[("bq_schema_version", SimpleValue::String("2".into()))],
            0,
        ),
    )
    .await
    .unwrap();
    let null_body = envelope(&q, 2);
    peer.send(
        &q,
        incoming(&null_body, &[("bq_schema_version", SimpleValue::Null)], 0),
    )
    .await
    .unwrap();
    let int_body = envelope(&q, 3);
    peer.send(
        &q,
        incoming(&int_body, &[("bq_schema_version", SimpleValue::Long(1))], 0),
    )
    .await
    .unwrap();
    peer.close().await.unwrap();

    let handled = Arc::new(std::sync::Mutex::new(Vec::new()));
    let h = handled.clone();
    let app = App::builder(t.clone())
        .queue(&q)
        .dead_letter(true)
        .handle(URN, move |ctx: Context| {
            let h = h.clone();
            async move {
                h.lock()
                    .unwrap()
                    .push(ctx.data_as::<serde_json::Value>()?["order_id"].clone());
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    app.consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(
        *handled.lock().unwrap(),
        [serde_json::json!(2), serde_json::json!(3)]
    );
    let records = drain(&t, &format!("{q}.dlq"), Duration::from_secs(2)).await;
    assert_eq!(
        records,
        [gated_body.to_vec()],
        "the raw body, byte for byte, no dead_letter block"
    );
}

/// The window follows the runtime's concurrency: with 3 handlers busy the worker holds exactly
/// 3 messages, and a second consumer gets all the others at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credit_follows_concurrency() {
    let Some(_broker) = broker().await else {
        return;
    };
    for concurrency in [1_usize, 3] {
        let q = queue(&format!("credit-{concurrency}"));
        let t = transport().await;
        for order in 0..10 {
            t.publish(&q, &envelope(&q, order)).await.unwrap();
        }
        let running = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Notify::new());
        let (r, rel) = (running.clone(), release.clone());
        let app = App::builder(t.clone())
            .queue(&q)
            .concurrency(concurrency)
            .handle(URN, move |_ctx: Context| {
                let (r, rel) = (r.clone(), rel.clone());
                async move {
                    let wait = rel.notified();
                    r.fetch_add(1, Ordering::SeqCst);
                    wait.await;
                    Ok::<(), HandlerError>(())
                }
            })
            .build()
            .unwrap();
        let worker = tokio::spawn({
            let app = app.clone();
            async move {
                app.consume(
                    Consume::new()
                        .max_messages(concurrency as u64)
                        .handle_signals(false),
                )
                .await
            }
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while running.load(Ordering::SeqCst) < concurrency {
            assert!(
                tokio::time::Instant::now() < deadline,
                "handlers did not start"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            running.load(Ordering::SeqCst),
            concurrency,
            "no more handlers than concurrency"
        );
        // Everything the worker does not hold goes to another consumer.
        let other = client();
        let mut taken = Vec::new();
        while let Some(r) = other.receive(&q, Duration::from_millis(700)).await.unwrap() {
            taken.push(r);
        }
        assert_eq!(
            taken.len(),
            10 - concurrency,
            "the worker holds exactly `concurrency` deliveries (concurrency {concurrency})"
        );
        for r in &taken {
            other.settle(&r.token, Disposition::Accepted).await.unwrap();
        }
        other.close().await.unwrap();
        release.notify_waiters();
        let summary = worker.await.unwrap().unwrap();
        assert_eq!(summary.processed, concurrency as u64);
        assert!(drain(&t, &q, SHORT).await.is_empty());
    }
}

/// A transport whose dead-letter writes fail until healed (everything else is the real one).
#[derive(Debug, Clone)]
struct BrokenDeadLetters {
    inner: ArtemisTransport,
    failures_left: Arc<AtomicUsize>,
}

#[async_trait]
impl Transport for BrokenDeadLetters {
    fn name(&self) -> &'static str {
        "artemis-broken-dlq"
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        if queue.ends_with(".dlq")
            && self
                .failures_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(TransportError::connection(
                "dead-letter queue down (injected)",
            ));
        }
        self.inner.publish(queue, body).await
    }
    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        self.inner.pop(queue, timeout).await
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        self.inner.ack(delivery).await
    }
    fn capabilities(&self) -> Capabilities<'_> {
        match self.inner.capabilities().rewinder() {
            Some(rewinder) => Capabilities::none().rewind(rewinder),
            None => Capabilities::none(),
        }
    }
}

/// A failed dead-letter write gives the delivery back (`released`) at once: it comes straight
/// back on the same worker and the write is tried again, instead of sitting unsettled until the
/// link closes. Nothing is lost, acknowledged early, or counted as an attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_dead_letter_write_releases_the_delivery() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("dlq-fails");
    let inner = transport().await;
    let broken = BrokenDeadLetters {
        inner: inner.clone(),
        failures_left: Arc::new(AtomicUsize::new(2)),
    };
    let app = App::builder(broken.clone())
        .queue(&q)
        .dead_letter(true)
        .rewind_pause(Duration::from_millis(50))
        .build()
        .unwrap();
    inner.publish(&q, b"not an envelope").await.unwrap();
    let started = std::time::Instant::now();
    let summary = app
        .consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(
        summary.processed, 3,
        "two unsettled rounds, then dead-lettered"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "released deliveries come back at once ({:?})",
        started.elapsed()
    );
    assert_eq!(broken.failures_left.load(Ordering::SeqCst), 0);
    let records = drain(&inner, &format!("{q}.dlq"), Duration::from_secs(2)).await;
    assert_eq!(records.len(), 1);
    let record = json(&records[0]);
    assert_eq!(record["raw"], "not an envelope");
    assert_eq!(
        record["dead_letter"]["attempts"], 0,
        "a release is not a failed delivery"
    );
    assert!(drain(&inner, &q, SHORT).await.is_empty());
}

/// A wrong password is an Auth error that names the broker and never shows the password, at
/// connect and for a worker that consumes through `App::consume` (it stops instead of polling).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_are_an_auth_error() {
    let Some(_broker) = broker().await else {
        return;
    };
    let config = ArtemisOptions::parse(&url()).unwrap();
    let user = config.username.clone().unwrap_or_else(|| "bq".to_owned());
    let bad = format!("artemis://{user}:not-the-password@{}", config.endpoint());
    let started = std::time::Instant::now();
    let err = ArtemisTransport::connect(&bad).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        err.kind(),
        babelqueue_core::TransportErrorKind::Auth,
        "{err:?}"
    );
    assert!(!err.is_transient());
    let text = format!("{err}\n{err:?}");
    assert!(
        text.contains(&config.host) && text.contains("refused the credentials"),
        "{text}"
    );
    let runtime = babelqueue_core::TransportError::from(err);
    assert_eq!(runtime.kind(), babelqueue_core::TransportErrorKind::Auth);
    let text = format!("{text}\n{runtime}\n{runtime:?}");
    assert!(!text.contains("not-the-password"), "{text}");

    // A worker over a transport that connects on first use stops with the same error.
    let lazy = AmqpClient::new(ArtemisOptions::parse(&bad).unwrap()).unwrap();
    let app = App::builder(ArtemisTransport::with_client(Arc::new(lazy), SHORT))
        .queue(queue("auth"))
        .handle_any(|_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let consumed = tokio::time::timeout(
        Duration::from_secs(20),
        app.consume(
            Consume::new()
                .idle_timeout(Duration::from_secs(15))
                .handle_signals(false),
        ),
    )
    .await
    .expect("the worker stops at once");
    let err = consumed.expect_err("wrong credentials stop the worker");
    assert!(
        matches!(&err, babelqueue_core::Error::Transport(e) if e.kind() == babelqueue_core::TransportErrorKind::Auth),
        "{err:?}"
    );
    assert!(
        !format!("{err}\n{err:?}").contains("not-the-password"),
        "{err:?}"
    );
    let unreachable = ArtemisTransport::connect("artemis://127.0.0.1:1")
        .await
        .unwrap_err();
    assert!(unreachable.is_transient(), "{unreachable}");
    let _ = common::required();
}

/// Delays use Artemis scheduled delivery: a delayed publish is not deliverable before its time,
/// and the runtime's retry back-off is honoured between deliveries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delays_use_scheduled_delivery() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("delay");
    let t = transport().await;
    assert!(t.capabilities().send_parts().delay);
    let started = std::time::Instant::now();
    let body = envelope(&q, 1);
    t.send(&Outgoing::new(&q, &body).delay(Duration::from_millis(1500)))
        .await
        .unwrap();
    assert!(
        t.pop(&q, Duration::from_millis(500))
            .await
            .unwrap()
            .is_none(),
        "not deliverable yet"
    );
    let d = t
        .pop(&q, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("delivered later");
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );
    t.ack(&d).await.unwrap();

    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let c = calls.clone();
    let stop = Arc::new(std::sync::OnceLock::<babelqueue_core::StopHandle>::new());
    let s = stop.clone();
    let app = App::builder(t.clone())
        .queue(&q)
        .retry_backoff(Duration::from_secs(1))
        .handle(URN, move |_ctx: Context| {
            let (c, s) = (c.clone(), s.clone());
            async move {
                let mut calls = c.lock().unwrap();
                calls.push(std::time::Instant::now());
                if calls.len() == 1 {
                    return Err(HandlerError::new("try again later"));
                }
                if let Some(stop) = s.get() {
                    stop.stop();
                }
                Ok(())
            }
        })
        .build()
        .unwrap();
    let _ = stop.set(app.stop_handle());
    t.publish(&q, &envelope(&q, 2)).await.unwrap();
    app.consume(
        Consume::new()
            .idle_timeout(Duration::from_secs(5))
            .handle_signals(false),
    )
    .await
    .unwrap();
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    let gap = calls[1] - calls[0];
    assert!(
        gap >= Duration::from_millis(950),
        "the 1 s back-off was honoured ({gap:?})"
    );
}

/// Bodies larger than an AMQP frame (and than Artemis' large-message threshold, 100 KiB) cross
/// the broker intact both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_round_trip() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("large");
    let t = transport().await;
    let blob: String = (0..2_000_000)
        .map(|i: u32| char::from(b'a' + u8::try_from(i % 26).unwrap()))
        .collect();
    let body = Envelope::builder(URN)
        .queue(&q)
        .data(&serde_json::json!({"blob": blob, "note": "café ☃"}))
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes();
    t.publish(&q, &body).await.unwrap();
    let d = t
        .pop(&q, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("delivered");
    assert_eq!(d.body().len(), body.len());
    assert!(d.body() == body.as_slice(), "byte for byte");
    t.ack(&d).await.unwrap();
}

/// A receive hands out what the link already holds after the first delivery; a batch is
/// accepted together (range dispositions) and none of it comes back after a reconnect, while
/// the one delivery left out of the batch does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_received_and_accepted_together() {
    use babelqueue_core::BatchAcker as _;
    let Some(_guard) = broker().await else { return };
    let q = queue("batch");
    let t = transport().await;
    for n in 0..20 {
        t.publish(&q, &envelope(&q, n)).await.unwrap();
    }
    let mut got: Vec<Delivery> = Vec::new();
    let mut most = 0;
    while got.len() < 20 {
        let batch = t.receive(&q, 20 - got.len(), SHORT * 4).await.unwrap();
        assert!(!batch.is_empty(), "{} of 20 received", got.len());
        most = most.max(batch.len());
        got.extend(batch);
    }
    assert!(most > 1, "never more than one per receive");
    let kept = got.remove(7);
    t.ack_batch(&got).await.unwrap();
    t.close().await.unwrap();

    let again = transport().await;
    let left = drain(&again, &q, SHORT * 4).await;
    assert_eq!(
        left,
        [kept.body().to_vec()],
        "only the delivery left out comes back"
    );
}

/// A batch publish keeps a window of transfers in flight and lands in order, byte for byte,
/// more messages than one window holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_publish_lands_in_order() {
    use babelqueue_core::BatchPublisher as _;
    let Some(_guard) = broker().await else { return };
    let q = queue("batch-publish");
    let t = transport().await;
    let bodies: Vec<Vec<u8>> = (0..600).map(|n| envelope(&q, n)).collect();
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    t.publish_batch(&q, &slices).await.unwrap();
    assert_eq!(
        drain(&t, &q, SHORT * 4).await,
        bodies,
        "in order, byte for byte"
    );
    t.close().await.unwrap();
}
