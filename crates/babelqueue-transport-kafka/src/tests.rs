//! The transport and the re-injector on the in-memory Kafka, through the real runtime.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use babelqueue_core::{
    App, Consume, Context, Count, HandlerError, Headers, Outgoing, Redelivery, Transport,
    TransportErrorKind,
};
use babelqueue_envelope::Envelope;
use babelqueue_testkit::reading::{Class, classify};

use crate::client::{Record, RecordHeader, TimestampType, TopicPartition};
use crate::config::{KafkaOptions, RetryTiers};
use crate::fake::FakeKafka;
use crate::{KafkaTransport, RetryReinjector};

const URN: &str = "urn:babel:orders:created";
const GROUP: &str = "babelqueue";

fn transport(kafka: &FakeKafka, tiers: &[u64]) -> KafkaTransport {
    let config = KafkaOptions::default().with_retry_tiers(RetryTiers::new(tiers.to_vec()).unwrap());
    KafkaTransport::with_client(Arc::new(kafka.clone()), &config)
}

fn envelope(n: i64) -> Vec<u8> {
    Envelope::builder(URN)
        .queue("orders")
        .data(&serde_json::json!({ "n": n }))
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes()
}

fn record(value: &[u8], key: Option<&[u8]>, headers: Vec<RecordHeader>) -> Record {
    Record {
        topic: String::new(),
        partition: 0,
        offset: 0,
        key: key.map(<[u8]>::to_vec),
        value: Some(value.to_vec()),
        headers,
        timestamp: None,
        timestamp_type: TimestampType::CreateTime,
    }
}

fn header<'a>(record: &'a Record, name: &str) -> Option<&'a str> {
    crate::projection::header(&record.headers, name)
        .flatten()
        .map(|v| std::str::from_utf8(v).unwrap())
}

fn builder(transport: &KafkaTransport) -> babelqueue_core::AppBuilder {
    App::builder(transport.clone())
        .queue("orders")
        .poll_timeout(Duration::from_millis(20))
        .rewind_pause(Duration::from_millis(10))
}

/// The position `group` has committed on `topic[0]` once it equals `want`, or after 2 s: a
/// batch's commit goes out from a background task within the commit interval.
pub(crate) async fn committed_soon(
    kafka: &FakeKafka,
    group: &str,
    topic: &str,
    want: i64,
) -> Option<i64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let now = kafka.committed(group, topic, 0);
        if now == Some(want) || tokio::time::Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn consume(app: &App, max: u64) {
    tokio::time::timeout(
        Duration::from_secs(10),
        app.consume(Consume::new().max_messages(max).handle_signals(false)),
    )
    .await
    .expect("the consume run ends")
    .expect("the consume run succeeds");
}

#[tokio::test]
async fn publish_projects_headers_and_timestamp_and_ack_commits() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    let body = envelope(1);
    t.publish("orders", &body).await.unwrap();
    let stored = kafka.records("orders").remove(0);
    assert_eq!(stored.value.as_deref(), Some(&body[..]));
    assert_eq!(stored.key, None);
    let keys: Vec<&str> = stored.headers.iter().map(|h| &*h.key).collect();
    assert_eq!(
        keys,
        [
            "bq-job",
            "bq-trace-id",
            "bq-message-id",
            "bq-schema-version",
            "bq-source-lang",
            "bq-attempts"
        ]
    );
    let created_at = Envelope::decode(&body).unwrap().envelope.created_at();
    assert_eq!(stored.timestamp, created_at);

    let delivery = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
    assert_eq!(delivery.body(), &body[..]);
    assert_eq!(kafka.committed(GROUP, "orders", 0), None);
    t.ack(&delivery).await.unwrap();
    assert_eq!(kafka.committed(GROUP, "orders", 0), Some(1));
    assert_eq!(t.held("orders"), 0);
}

/// With 8 handlers at once, a slow record holds the commit of its partition below it while
/// every later record finishes; its completion releases the deferred commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_commits_only_up_to_the_lowest_unfinished_record() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    for n in 0..16 {
        t.publish("orders", &envelope(n)).await.unwrap();
    }
    let release = Arc::new(tokio::sync::Notify::new());
    let done = Arc::new(AtomicUsize::new(0));
    let (r, d) = (release.clone(), done.clone());
    let app = builder(&t)
        .concurrency(8)
        .handle(URN, move |ctx: Context| {
            let (r, d) = (r.clone(), d.clone());
            async move {
                let n: serde_json::Value = ctx.data_as()?;
                if n["n"] == 3 {
                    r.notified().await;
                }
                d.fetch_add(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let run = tokio::spawn({
        let app = app.clone();
        async move { consume(&app, 16).await }
    });
    tokio::time::timeout(Duration::from_secs(10), async {
        while done.load(Ordering::SeqCst) < 15 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("15 handlers finish");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(kafka.committed(GROUP, "orders", 0), Some(3));
    assert!(
        kafka.commits().iter().all(|(_, _, at)| *at <= 3),
        "{:?}",
        kafka.commits()
    );
    assert_eq!(t.held("orders"), 13, "record 3 in flight, 4..15 deferred");
    release.notify_one();
    run.await.unwrap();
    assert_eq!(committed_soon(&kafka, GROUP, "orders", 16).await, Some(16));
    let positions: Vec<i64> = kafka.commits().iter().map(|(_, _, at)| *at).collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "commits only move forward: {positions:?}"
    );
}

/// A dead-letter write that fails commits nothing and seeks back; once the topic is writable
/// again the record is dead-lettered with its key and committed.
#[tokio::test]
async fn a_failed_settle_write_commits_nothing_and_seeks_back() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    kafka.append(
        "orders",
        0,
        record(&envelope(1), Some(b"customer-7"), vec![]),
    );
    kafka.fail_writes_to("orders.dlq", true);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let app = builder(&t)
        .max_attempts(1)
        .dead_letter(true)
        .handle(URN, move |_ctx: Context| {
            c.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>(HandlerError::new("boom")) }
        })
        .build()
        .unwrap();
    consume(&app, 1).await;
    assert_eq!(kafka.committed(GROUP, "orders", 0), None);
    assert_eq!(kafka.seeks(), vec![(TopicPartition::new("orders", 0), 0)]);
    assert!(kafka.records("orders.dlq").is_empty());

    kafka.fail_writes_to("orders.dlq", false);
    consume(&app, 1).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the record came again");
    let dlq = kafka.records("orders.dlq");
    assert_eq!(dlq.len(), 1);
    assert_eq!(dlq[0].key.as_deref(), Some(&b"customer-7"[..]));
    assert!(
        String::from_utf8_lossy(dlq[0].value.as_deref().unwrap()).contains(r#""reason":"failed""#)
    );
    assert_eq!(kafka.committed(GROUP, "orders", 0), Some(1));
}

#[tokio::test]
async fn retries_go_through_the_tiers_keeping_the_key() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[1000, 60000]);
    kafka.append(
        "orders",
        0,
        record(
            &envelope(1),
            Some(b""),
            vec![RecordHeader::text("bq-attempts", "1")],
        ),
    );
    let app = builder(&t)
        .max_attempts(5)
        .handle(URN, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("later"))
        })
        .build()
        .unwrap();
    consume(&app, 1).await;
    let parked = kafka.records("orders.retry.2");
    assert_eq!(parked.len(), 1, "attempts_before 1 goes to tier 2");
    assert_eq!(
        parked[0].key.as_deref(),
        Some(&b""[..]),
        "an empty key stays empty"
    );
    assert_eq!(header(&parked[0], "bq-attempts"), Some("2"));
    assert_eq!(header(&parked[0], "bq-delay"), Some("60000"));
    assert_eq!(header(&parked[0], "bq-original-topic"), Some("orders"));
    assert_eq!(parked[0].timestamp, None, "the broker stamps tier records");
    let body = Envelope::decode(parked[0].value.as_deref().unwrap())
        .unwrap()
        .envelope;
    assert_eq!(body.attempts(), 2);
    assert_eq!(kafka.committed(GROUP, "orders", 0), Some(1));
}

#[tokio::test]
async fn without_tiers_a_retry_fails_in_place() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    assert!(matches!(
        t.capabilities().redelivery_mode(),
        Redelivery::Impossible
    ));
    t.publish("orders", &envelope(1)).await.unwrap();
    let app = builder(&t)
        .max_attempts(3)
        .handle(URN, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("no"))
        })
        .build()
        .unwrap();
    consume(&app, 1).await;
    assert_eq!(kafka.topics_written(), vec!["orders".to_owned()]);
    assert_eq!(kafka.committed(GROUP, "orders", 0), None);
    assert_eq!(kafka.seeks(), vec![(TopicPartition::new("orders", 0), 0)]);
    let body = envelope(2);
    let err = t
        .send(&Outgoing::new("orders", &body).delay(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), babelqueue_core::TransportErrorKind::Config);
}

#[tokio::test]
async fn poison_degrades_to_delete_without_tiers_and_retries_bare_with_them() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    kafka.append(
        "orders",
        0,
        record(
            b"not json",
            None,
            vec![RecordHeader::text("bq-attempts", "0")],
        ),
    );
    let app = builder(&t)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    consume(&app, 1).await;
    assert_eq!(kafka.committed(GROUP, "orders", 0), Some(1));
    assert_eq!(kafka.topics_written(), vec!["orders".to_owned()]);

    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[1000]);
    kafka.append("orders", 0, record(&[0xff, 0xfe], Some(b"k"), vec![]));
    let app = builder(&t)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    consume(&app, 1).await;
    let parked = kafka.records("orders.retry.1");
    assert_eq!(parked[0].value.as_deref(), Some(&br#"{"attempts":1}"#[..]));
    assert_eq!(header(&parked[0], "bq-attempts"), Some("1"));
    assert_eq!(parked[0].key.as_deref(), Some(&b"k"[..]));
    assert_eq!(kafka.committed(GROUP, "orders", 0), Some(1));
}

#[tokio::test]
async fn poison_and_gated_records_are_dead_lettered() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    kafka.append(
        "orders",
        0,
        record(
            &[b'{', 0xff, b'}'],
            Some(b"k1"),
            vec![RecordHeader::text("bq-attempts", "2")],
        ),
    );
    let gated_body = b" {\"job\": \"urn:babel:orders:created\"} ";
    kafka.append(
        "orders",
        0,
        record(
            gated_body,
            None,
            vec![RecordHeader::text("bq-schema-version", "2")],
        ),
    );
    let app = builder(&t)
        .dead_letter(true)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    consume(&app, 2).await;
    let dlq = kafka.records("orders.dlq");
    assert_eq!(dlq.len(), 2);
    let poison = String::from_utf8(dlq[0].value.clone().unwrap()).unwrap();
    assert!(
        poison.starts_with(
            r#"{"raw":"e/99","raw_encoding":"base64","dead_letter":{"reason":"poison""#
        ),
        "{poison}"
    );
    assert!(
        poison.contains(r#""original_queue":"orders","attempts":2"#),
        "{poison}"
    );
    assert_eq!(dlq[0].key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(
        dlq[1].value.as_deref(),
        Some(&gated_body[..]),
        "the gated record goes raw"
    );
    assert_eq!(
        header(&dlq[1], "bq-job"),
        Some(URN),
        "its headers are projected from the raw body"
    );
    assert_eq!(kafka.committed(GROUP, "orders", 0), Some(2));
}

#[tokio::test]
async fn a_dropped_delivery_is_sought_back_and_revoked_partitions_are_not_committed() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    t.publish("orders", &envelope(1)).await.unwrap();
    let first = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
    drop(first);
    let again = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
    assert_eq!(kafka.seeks(), vec![(TopicPartition::new("orders", 0), 0)]);
    assert_eq!(again.body(), &envelope_body_of(&kafka)[..]);

    kafka.consumers()[0].revoke(&[TopicPartition::new("orders", 0)]);
    t.ack(&again).await.unwrap();
    assert!(
        kafka.commits().is_empty(),
        "a revoked partition belongs to the next owner"
    );
}

fn envelope_body_of(kafka: &FakeKafka) -> Vec<u8> {
    kafka.records("orders")[0].value.clone().unwrap()
}

#[tokio::test]
async fn delayed_publish_picks_the_covering_tier_and_refuses_the_rest() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[5000, 30000]);
    let body = envelope(1);
    t.send(&Outgoing::new("orders", &body).delay(Duration::from_millis(5001)))
        .await
        .unwrap();
    let parked = kafka.records("orders.retry.2");
    assert_eq!(header(&parked[0], "bq-delay"), Some("5001"));
    assert_eq!(header(&parked[0], "bq-original-topic"), Some("orders"));
    for bad in [Duration::from_millis(30001), Duration::from_micros(1500)] {
        assert!(
            t.send(&Outgoing::new("orders", &body).delay(bad))
                .await
                .is_err()
        );
    }
    assert_eq!(
        kafka.records("orders.retry.1").len() + kafka.records("orders.retry.2").len(),
        1
    );
}

/// Headers, a delay and a key in one request: the tier record carries all three, and the
/// projection wins over a header named like a contract header.
#[tokio::test]
async fn one_request_carries_headers_a_delay_and_a_key_together() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[5000]);
    let body = envelope(1);
    let headers = Headers::from([
        ("traceparent".to_owned(), "00-1-2-01".to_owned()),
        ("bq-delay".to_owned(), "1".to_owned()),
    ]);
    let request = Outgoing::new("orders", &body)
        .headers(&headers)
        .delay(Duration::from_millis(200))
        .key(Some(b"order-1"));
    t.send(&request).await.unwrap();
    let parked = kafka.records("orders.retry.1");
    assert_eq!(parked.len(), 1);
    assert_eq!(header(&parked[0], "traceparent"), Some("00-1-2-01"));
    assert_eq!(header(&parked[0], "bq-delay"), Some("200"));
    assert_eq!(parked[0].key.as_deref(), Some(&b"order-1"[..]));
}

#[tokio::test]
async fn the_reinjector_waits_for_the_tier_then_copies_byte_for_byte() {
    let kafka = FakeKafka::new();
    let config = KafkaOptions::default().with_retry_tiers(RetryTiers::new(vec![1000]).unwrap());
    let now = Arc::new(AtomicI64::new(1_000_000));
    kafka.set_clock_ms(1_000_000);
    let value = envelope(9);
    kafka.append(
        "orders.retry.1",
        0,
        Record {
            timestamp: Some(1_000_000),
            ..record(
                &value,
                Some(b"key-1"),
                vec![
                    RecordHeader::text("bq-job", URN),
                    RecordHeader::text("bq-delay", "1000"),
                    RecordHeader {
                        key: "traceparent".into(),
                        value: None,
                    },
                    RecordHeader::text("bq-original-topic", "orders"),
                    RecordHeader::text("bq-attempts", "1"),
                ],
            )
        },
    );
    let clock = now.clone();
    let mut reinjector = RetryReinjector::with_client(
        &kafka,
        &config,
        &["orders".to_owned()],
        "babelqueue-retry-reinject",
    )
    .unwrap()
    .with_clock(Arc::new(move || clock.load(Ordering::SeqCst)));
    assert_eq!(reinjector.topics(), ["orders.retry.1"]);
    assert_eq!(reinjector.run_once(Some(Duration::ZERO)).await, 0);
    assert_eq!(reinjector.held(), 1);
    assert_eq!(
        kafka.consumers()[0].paused(),
        vec![TopicPartition::new("orders.retry.1", 0)]
    );
    now.store(1_000_999, Ordering::SeqCst);
    assert_eq!(reinjector.run_once(Some(Duration::ZERO)).await, 0);
    now.store(1_001_000, Ordering::SeqCst);
    assert_eq!(reinjector.run_once(Some(Duration::ZERO)).await, 1);
    let back = kafka.records("orders").remove(0);
    assert_eq!(back.value.as_deref(), Some(&value[..]));
    assert_eq!(back.key.as_deref(), Some(&b"key-1"[..]));
    let keys: Vec<&str> = back.headers.iter().map(|h| &*h.key).collect();
    assert_eq!(keys, ["bq-job", "traceparent", "bq-attempts"]);
    assert_eq!(
        back.headers[1].value, None,
        "a null header value stays null"
    );
    assert_eq!(
        kafka.committed("babelqueue-retry-reinject", "orders.retry.1", 0),
        Some(1)
    );
    assert!(kafka.consumers()[0].paused().is_empty());
}

#[tokio::test]
async fn a_failed_reinjection_commits_nothing_and_comes_again_in_order() {
    let kafka = FakeKafka::new();
    let config = KafkaOptions::default().with_retry_tiers(RetryTiers::new(vec![10]).unwrap());
    for n in 0..2 {
        kafka.append(
            "orders.retry.1",
            0,
            Record {
                timestamp: Some(1),
                ..record(&envelope(n), None, vec![])
            },
        );
    }
    let now = Arc::new(AtomicI64::new(5_000));
    let clock = now.clone();
    let mut reinjector = RetryReinjector::with_client(&kafka, &config, &["orders".to_owned()], "r")
        .unwrap()
        .with_clock(Arc::new(move || clock.load(Ordering::SeqCst)));
    kafka.fail_writes_to("orders", true);
    assert_eq!(reinjector.run_once(Some(Duration::ZERO)).await, 0);
    assert_eq!(kafka.committed("r", "orders.retry.1", 0), None);
    assert_eq!(
        kafka.seeks(),
        vec![(TopicPartition::new("orders.retry.1", 0), 0)]
    );
    kafka.fail_writes_to("orders", false);
    // the partition is left alone for a second after a failure
    assert_eq!(reinjector.run_once(Some(Duration::ZERO)).await, 0);
    now.store(6_001, Ordering::SeqCst);
    let mut written = 0;
    for _ in 0..4 {
        written += reinjector.run_once(Some(Duration::ZERO)).await;
    }
    assert_eq!(written, 2);
    let back: Vec<Vec<u8>> = kafka
        .records("orders")
        .into_iter()
        .map(|r| r.value.unwrap())
        .collect();
    assert_eq!(back, vec![envelope_n(&back[0], 0), envelope_n(&back[1], 1)]);
    assert_eq!(kafka.committed("r", "orders.retry.1", 0), Some(2));
}

fn envelope_n(body: &[u8], n: i64) -> Vec<u8> {
    let decoded = Envelope::decode(body).unwrap().envelope;
    let data: serde_json::Value = decoded.data_as().unwrap();
    assert_eq!(data["n"], n, "re-injected in order");
    body.to_vec()
}

#[tokio::test]
async fn poison_route_carries_header_attempts_and_original_topic() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    kafka.append(
        "orders",
        0,
        record(
            b"{}",
            None,
            vec![
                RecordHeader::text("bq-attempts", "3"),
                RecordHeader::text("bq-original-topic", "payments"),
            ],
        ),
    );
    let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
    assert_eq!(d.facts().count, Some(Count::Carried(3)));
    assert_eq!(d.facts().original_queue.as_deref(), Some("payments"));
    let Class::Poison(p) = classify(d.body(), d.facts(), d.queue()) else {
        panic!("{d:?}")
    };
    assert_eq!((p.attempts, p.original_queue.as_str()), (3, "payments"));
    assert_eq!(d.body(), b"{}");
}

/// A settle write's commit waits for the write's delivery report: while the report is
/// outstanding nothing is committed, and the commit follows the confirmed write.
#[tokio::test]
async fn the_commit_waits_for_the_settle_writes_delivery_report() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[1000]);
    t.publish("orders", &envelope(1)).await.unwrap();
    t.publish("orders", &envelope(2)).await.unwrap();
    kafka.set_write_delay(Duration::from_millis(300));
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let app = builder(&t)
        .max_attempts(2)
        .dead_letter(true)
        .handle(URN, move |ctx: Context| {
            c.fetch_add(1, Ordering::SeqCst);
            let n: serde_json::Value = ctx.data_as().unwrap_or_default();
            async move {
                // record 1 is retried through the tier, record 2 is dead-lettered
                if n["n"] == 1 {
                    Err(HandlerError::new("retry me"))
                } else {
                    Err(HandlerError::reject("dead-letter me"))
                }
            }
        })
        .build()
        .unwrap();
    let run = tokio::spawn({
        let app = app.clone();
        async move { consume(&app, 2).await }
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the handler ran");
    assert!(
        kafka.commits().is_empty(),
        "no commit before the delivery report"
    );
    run.await.unwrap();
    assert_eq!(
        kafka.events()[2..],
        [
            "write orders.retry.1",
            "commit orders[0]@1",
            "write orders.dlq",
            "commit orders[0]@2"
        ]
    );
}

/// A broker that refuses the credentials: `publish` fails with an `Auth` error naming the
/// broker, and `App::consume` stops with it (so a CLI worker exits non-zero) instead of
/// polling forever.
#[tokio::test]
async fn refused_credentials_fail_publish_and_stop_consume() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    kafka.refuse_credentials(true);
    let err = t.publish("orders", &envelope(1)).await.unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Auth, "{err}");
    assert!(!err.is_transient());
    assert!(err.to_string().contains("refused the credentials"), "{err}");
    assert!(err.to_string().contains("fake:9092"), "{err}");

    let app = builder(&t)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let stopped = tokio::time::timeout(
        Duration::from_secs(10),
        app.consume(Consume::new().handle_signals(false)),
    )
    .await
    .expect("consume stops by itself");
    let err = stopped.expect_err("consume returns the refusal");
    match &err {
        babelqueue_core::Error::Transport(e) => assert_eq!(e.kind(), TransportErrorKind::Auth),
        other => panic!("not a transport error: {other:?}"),
    }

    kafka.refuse_credentials(false);
    t.publish("orders", &envelope(2)).await.unwrap();
    consume(&app, 1).await;
    assert_eq!(committed_soon(&kafka, GROUP, "orders", 1).await, Some(1));
}

/// A transient poll error (a broker that is down) is swallowed: `pop` waits out its timeout
/// and returns nothing, and the worker goes on once the broker is back.
#[tokio::test]
async fn transient_poll_errors_are_waited_out_not_returned() {
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    t.publish("orders", &envelope(1)).await.unwrap();
    kafka.fail_polls(Some(TransportErrorKind::Connection));
    let started = tokio::time::Instant::now();
    assert!(
        t.pop("orders", Duration::from_millis(50))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "the pop waited"
    );
    kafka.fail_polls(None);
    assert!(
        t.pop("orders", Duration::from_millis(50))
            .await
            .unwrap()
            .is_some()
    );
}

/// `attempts` as written by a broken producer: negative, down to `i64::MIN`.
const NEGATIVE_ATTEMPTS: [i64; 2] = [-5, i64::MIN];

/// A failing handler on a record whose body says `attempts` < 0 (no `bq-attempts` header, so
/// the body stands; or a negative header, read as 0): with no tiers and `max_attempts(1)` it
/// is settled at once (dead-lettered, or dropped with dead-lettering off), never retried in
/// place forever.
#[tokio::test]
async fn negative_attempts_are_settled_without_tiers() {
    for attempts in NEGATIVE_ATTEMPTS {
        for with_header in [false, true] {
            for dead_letter in [true, false] {
                let case = format!("attempts {attempts}, header {with_header}, dlq {dead_letter}");
                let kafka = FakeKafka::new();
                let t = transport(&kafka, &[]);
                let body = babelqueue_testkit::reading::reconcile(
                    &envelope(1),
                    Some(Count::Carried(attempts)),
                )
                .into_owned();
                assert!(
                    String::from_utf8_lossy(&body).contains(&format!("\"attempts\":{attempts}")),
                    "{case}"
                );
                let headers = if with_header {
                    vec![RecordHeader::text("bq-attempts", attempts.to_string())]
                } else {
                    vec![]
                };
                kafka.append("orders", 0, record(&body, Some(b"k"), headers));
                let calls = Arc::new(AtomicUsize::new(0));
                let seen = calls.clone();
                let app = builder(&t)
                    .max_attempts(1)
                    .dead_letter(dead_letter)
                    .handle(URN, move |_ctx: Context| {
                        seen.fetch_add(1, Ordering::SeqCst);
                        async { Err::<(), _>(HandlerError::new("down")) }
                    })
                    .build()
                    .unwrap();
                consume(&app, 1).await;
                assert_eq!(calls.load(Ordering::SeqCst), 1, "{case}");
                assert_eq!(kafka.committed(GROUP, "orders", 0), Some(1), "{case}");
                assert!(kafka.seeks().is_empty(), "{case}: not rewound");
                let dlq = kafka.records("orders.dlq");
                if dead_letter {
                    assert_eq!(dlq.len(), 1, "{case}");
                    assert_eq!(dlq[0].key.as_deref(), Some(&b"k"[..]), "{case}");
                } else {
                    assert!(dlq.is_empty(), "{case}: dropped");
                    assert_eq!(kafka.topics_written(), ["orders"], "{case}");
                }
            }
        }
    }
}

/// With tiers and `max_attempts(3)`, a record whose body says `attempts` < 0 runs its handler
/// exactly 3 times (tier 1, tier 2, then the dead letter), through the re-injector.
#[tokio::test]
async fn negative_attempts_with_tiers_run_the_handler_max_attempts_times() {
    for attempts in NEGATIVE_ATTEMPTS {
        let kafka = FakeKafka::new();
        let t = transport(&kafka, &[1000, 2000]);
        let body =
            babelqueue_testkit::reading::reconcile(&envelope(1), Some(Count::Carried(attempts)))
                .into_owned();
        kafka.append("orders", 0, record(&body, None, vec![]));
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let app = builder(&t)
            .max_attempts(3)
            .dead_letter(true)
            .handle(URN, move |_ctx: Context| {
                seen.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>(HandlerError::new("down")) }
            })
            .build()
            .unwrap();
        let now = Arc::new(AtomicI64::new(1_000_000));
        let clock = now.clone();
        let config =
            KafkaOptions::default().with_retry_tiers(RetryTiers::new(vec![1000, 2000]).unwrap());
        let mut reinjector = RetryReinjector::with_client(
            &kafka,
            &config,
            &["orders".to_owned()],
            "babelqueue-retry-reinject",
        )
        .unwrap()
        .with_clock(Arc::new(move || clock.load(Ordering::SeqCst)));
        for round in 0..10 {
            consume(&app, 1).await;
            if !kafka.records("orders.dlq").is_empty() {
                break;
            }
            assert!(
                round < 5,
                "attempts {attempts}: still retrying after {round} rounds"
            );
            // Take the parked copy, let its tier pass, and move it back.
            reinjector.run_once(Some(Duration::ZERO)).await;
            now.fetch_add(10_000, Ordering::SeqCst);
            assert_eq!(
                reinjector.run_once(Some(Duration::ZERO)).await,
                1,
                "attempts {attempts}, round {round}"
            );
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3, "attempts {attempts}");
        assert_eq!(
            kafka.records("orders.retry.1").len(),
            1,
            "attempts {attempts}"
        );
        assert_eq!(
            kafka.records("orders.retry.2").len(),
            1,
            "attempts {attempts}"
        );
        assert_eq!(kafka.records("orders.dlq").len(), 1, "attempts {attempts}");
        let firsts: Vec<String> = ["orders.retry.1", "orders.retry.2"]
            .iter()
            .map(|topic| {
                header(&kafka.records(topic)[0], "bq-attempts")
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(firsts, ["1", "2"], "attempts {attempts}: counted from 0");
    }
}

#[tokio::test]
async fn a_batch_of_acknowledgements_commits_each_partition_once() {
    use babelqueue_core::BatchAcker as _;
    let kafka = FakeKafka::new();
    let t = transport(&kafka, &[]);
    // Each batch commits before ack_batch returns (the background interval is tested in
    // commit_tests).
    t.set_commit_interval(Duration::ZERO);
    for n in 0..6 {
        t.publish("orders", &envelope(n)).await.unwrap();
    }
    let mut received = Vec::new();
    while received.len() < 6 {
        let got = t
            .receive("orders", 4, Duration::from_secs(1))
            .await
            .unwrap();
        assert!(!got.is_empty() && got.len() <= 4, "{}", got.len());
        received.extend(got);
    }
    let before = kafka.commits().len();
    // The last four first: the first two are still in flight, so nothing can be committed.
    t.ack_batch(&received[2..]).await.unwrap();
    assert_eq!(
        kafka.commits().len(),
        before,
        "held back by records in flight"
    );
    // Then the first two: one commit covers all six.
    t.ack_batch(&received[..2]).await.unwrap();
    let commits = kafka.commits();
    assert_eq!(commits.len(), before + 1, "{commits:?}");
    assert_eq!(kafka.committed("babelqueue", "orders", 0), Some(6));
}
