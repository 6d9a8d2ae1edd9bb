//! The transport and the re-injector against the real broker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, Headers, Transport};
use babelqueue_envelope::Envelope;
use babelqueue_transport_kafka::projection::project;
use babelqueue_transport_kafka::{KafkaOptions, KafkaTransport, RetryReinjector, RetryTiers};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::{
    assert_exactly, broker, committed, create_topics, eventually, header, produce_raw, read_raw,
    unique, worker_url,
};

const URN: &str = "urn:babel:orders:created";
const WAIT: Duration = Duration::from_secs(60);

/// One handler call.
#[derive(Debug, Clone)]
struct Call {
    attempts: i64,
    id: String,
    data: Value,
    headers: Headers,
    at: Instant,
}

type Calls = Arc<Mutex<Vec<Call>>>;

fn record_call(calls: &Calls, ctx: &Context) -> Call {
    let call = Call {
        attempts: ctx.attempts(),
        id: ctx.message_id().unwrap_or_default().into_owned(),
        data: ctx.data_as().unwrap_or(Value::Null),
        headers: ctx.headers().clone(),
        at: Instant::now(),
    };
    calls.lock().unwrap().push(call.clone());
    call
}

fn transport(group: &str, extra: &str) -> KafkaTransport {
    // `connect` is async; this helper is not, and `new` does the same from parsed options.
    KafkaTransport::new(
        KafkaOptions::from_url(&worker_url(&format!("&group_id={group}{extra}")))
            .expect("a transport"),
    )
}

fn body(n: i64, topic: &str) -> Vec<u8> {
    Envelope::builder(URN)
        .queue(topic)
        .data(&json!({ "n": n }))
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes()
}

async fn consume_max(app: &App, max: u64) {
    // A run with `max_messages` also ends on an empty poll (e.g. while the group is still
    // forming), so run again until `max` deliveries are settled.
    let deadline = Instant::now() + WAIT;
    let mut settled = 0;
    while settled < max {
        assert!(
            Instant::now() < deadline,
            "only {settled} of {max} deliveries settled in time"
        );
        let summary = tokio::time::timeout(
            WAIT,
            app.consume(
                Consume::new()
                    .max_messages(max - settled)
                    .handle_signals(false),
            ),
        )
        .await
        .expect("the consume run ends in time")
        .expect("the consume run succeeds");
        settled += summary.processed;
    }
}

/// Runs `app` in the background until `done` holds (or the wait runs out), then stops it.
async fn consume_until(app: &App, mut done: impl FnMut() -> bool) -> bool {
    let running = tokio::spawn({
        let app = app.clone();
        async move { app.consume(Consume::new().handle_signals(false)).await }
    });
    let ok = eventually(WAIT, &mut done).await;
    app.stop_handle().stop();
    running.await.unwrap().unwrap();
    ok
}

fn n_of(call: &Call) -> i64 {
    call.data["n"].as_i64().unwrap_or(-1)
}

/// Pops one delivery of `topic`, waiting for the group to form.
async fn pop_one(t: &KafkaTransport, topic: &str) -> babelqueue_core::Delivery {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(d) = t.pop(topic, Duration::from_secs(1)).await.unwrap() {
            return d;
        }
        assert!(Instant::now() < deadline, "nothing came on {topic}");
    }
}

/// The Inspector shows a record's position, its timestamp and its key; a record sought back
/// comes again at the same position, and Kafka says nothing of a redelivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_shows_the_position_the_timestamp_and_the_key() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("inspect"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    let t = transport(&group, "");
    let envelope = body(1, &topic);
    let created_at = Envelope::decode(&envelope).unwrap().envelope.created_at();
    t.publish(&topic, &envelope).await.unwrap();
    produce_raw(&topic, b"{}", Some(b"acme"), &[]).await;
    let inspector = t.capabilities().inspector().expect("an Inspector");

    let first = pop_one(&t, &topic).await;
    let view = inspector.inspect(&first);
    assert_eq!(view.id, Some(format!("{topic}/0@0")));
    assert_eq!(view.redelivered, None);
    assert_eq!(
        view.properties,
        [
            ("timestamp".to_owned(), created_at.unwrap().to_string()),
            ("timestamp_type".to_owned(), "CreateTime".to_owned()),
        ]
    );
    // Sought back: the same record comes again, at the same position.
    t.capabilities()
        .rewinder()
        .expect("a Rewinder")
        .rewind(&first)
        .await
        .unwrap();
    drop(first);
    let again = pop_one(&t, &topic).await;
    let view = inspector.inspect(&again);
    assert_eq!(view.id, Some(format!("{topic}/0@0")));
    assert_eq!(view.redelivered, None, "Kafka does not say");
    t.ack(&again).await.unwrap();

    let keyed = pop_one(&t, &topic).await;
    let view = inspector.inspect(&keyed);
    assert_eq!(view.id, Some(format!("{topic}/0@1")));
    let shown: std::collections::HashMap<&str, &str> = view
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(shown["key"], "acme");
    assert_eq!(
        shown["timestamp_type"], "CreateTime",
        "stamped by the producer"
    );
    assert!(shown["timestamp"].parse::<i64>().unwrap() > 0);
    t.ack(&keyed).await.unwrap();
    t.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("roundtrip"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let t = transport(&group, "");
    let app = App::builder(t.clone())
        .queue(topic.clone())
        .handle(URN, move |ctx: Context| {
            record_call(&seen, &ctx);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    let envelope = app
        .envelope(URN)
        .data(&json!({"order_id": 1042, "note": "h\u{e9}llo \u{2713} / \"q\"", "big": 12345678901234567890_u64}))
        .trace_id("7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b")
        .build()
        .unwrap();
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let headers = Headers::from([("traceparent".to_owned(), traceparent.to_owned())]);
    app.publish_envelope(&topic, &envelope, &headers)
        .await
        .unwrap();
    consume_max(&app, 1).await;

    let call = calls.lock().unwrap()[0].clone();
    assert_eq!(call.attempts, 0);
    assert_eq!(call.data["order_id"], 1042);
    assert_eq!(call.data["note"], "h\u{e9}llo \u{2713} / \"q\"");
    assert_eq!(call.id, envelope.message_id().unwrap());
    assert_eq!(
        call.headers.get("traceparent").map(String::as_str),
        Some(traceparent)
    );

    let stored = read_raw(&topic, 1, WAIT).await.remove(0);
    let body = envelope.encode().unwrap();
    assert_eq!(
        stored.value.as_deref(),
        Some(body.as_bytes()),
        "the value is the envelope byte for byte"
    );
    assert_eq!(stored.key, None, "a plain publish has no key");
    assert_eq!(
        stored.timestamp,
        envelope.created_at(),
        "the timestamp is meta.created_at"
    );
    let mut want = project(body.as_bytes());
    want.push(babelqueue_transport_kafka::RecordHeader::text(
        "traceparent",
        traceparent,
    ));
    assert_eq!(stored.headers, want);
    assert_eq!(header(&stored, "bq-job"), Some(URN));
    assert_eq!(header(&stored, "bq-source-lang"), Some("rust"));
    assert_eq!(header(&stored, "bq-attempts"), Some("0"));
    assert_eq!(committed(&group, &topic), Some(1));
}

/// A failed handler's record is parked on tier 1 with its key, the re-injector brings it back
/// after the tier's delay, and the second delivery counts one attempt; a delayed publish takes
/// the same road.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_through_a_tier_and_the_reinjector() {
    let Some(config) = broker() else { return };
    let (topic, group, reinject_group) = (unique("retry"), unique("group"), unique("reinject"));
    let tier = format!("{topic}.retry.1");
    create_topics(&config, &[&topic, &tier], 1).await;
    let original = body(1, &topic);
    produce_raw(
        &topic,
        &original,
        Some(b"customer-0042"),
        &project(&original),
    )
    .await;

    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let t = transport(&group, "&retry_tiers_ms=1000");
    let app = App::builder(t.clone())
        .queue(topic.clone())
        .max_attempts(3)
        .handle(URN, move |ctx: Context| {
            let call = record_call(&seen, &ctx);
            async move {
                if call.data["n"] == 1 && call.attempts == 0 {
                    Err(HandlerError::new("the first delivery fails"))
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    let delayed = app.envelope(URN).data(&json!({"n": 2})).build().unwrap();
    app.publish_delayed(&topic, &delayed, Duration::from_millis(500))
        .await
        .unwrap();

    let tiers = KafkaOptions::from_url(&crate::common::url())
        .unwrap()
        .with_retry_tiers(RetryTiers::new(vec![1000]).unwrap());
    let client = babelqueue_transport_kafka::RdKafkaClient::new(tiers.clone());
    let mut reinjector = RetryReinjector::with_client(
        &client,
        &tiers,
        std::slice::from_ref(&topic),
        &reinject_group,
    )
    .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let reinjecting = tokio::spawn(async move {
        reinjector.run(async { stop_rx.await.unwrap_or(()) }).await;
    });

    let done = consume_until(&app, || {
        let calls = calls.lock().unwrap();
        calls.iter().filter(|c| n_of(c) == 1).count() >= 2 && calls.iter().any(|c| n_of(c) == 2)
    })
    .await;
    stop_tx.send(()).ok();
    reinjecting.await.unwrap();
    assert!(done, "calls: {:?}", calls.lock().unwrap());

    let calls = calls.lock().unwrap().clone();
    let first: Vec<&Call> = calls.iter().filter(|c| n_of(c) == 1).collect();
    assert_eq!(first.len(), 2, "{calls:?}");
    assert_eq!((first[0].attempts, first[1].attempts), (0, 1));
    let waited = first[1].at - first[0].at;
    assert!(
        waited >= Duration::from_millis(900),
        "the tier delay held: {waited:?}"
    );
    let second: Vec<&Call> = calls.iter().filter(|c| n_of(c) == 2).collect();
    assert_eq!((second.len(), second[0].attempts), (1, 0));

    let parked = assert_exactly(&tier, 2, Duration::from_secs(3)).await;
    let retried = parked
        .iter()
        .find(|r| r.key.is_some())
        .expect("the retry copy");
    assert_eq!(retried.key.as_deref(), Some(&b"customer-0042"[..]));
    assert_eq!(header(retried, "bq-attempts"), Some("1"));
    assert_eq!(header(retried, "bq-delay"), Some("1000"));
    assert_eq!(header(retried, "bq-original-topic"), Some(topic.as_str()));
    let retried_body = Envelope::decode(retried.value.as_deref().unwrap())
        .unwrap()
        .envelope;
    assert_eq!(retried_body.attempts(), 1);
    let parked_delay = parked
        .iter()
        .find(|r| r.key.is_none())
        .expect("the delayed record");
    assert_eq!(header(parked_delay, "bq-delay"), Some("500"));

    let work = assert_exactly(&topic, 3, Duration::from_secs(3)).await;
    for back in &work[1..] {
        assert!(header(back, "bq-delay").is_none() && header(back, "bq-original-topic").is_none());
        let from = parked
            .iter()
            .find(|p| p.value == back.value)
            .expect("copied byte for byte");
        assert_eq!(from.key, back.key, "the key is copied byte for byte");
    }
    assert_eq!(committed(&group, &topic), Some(3));
    assert_eq!(committed(&reinject_group, &tier), Some(2));
}

/// Exhausted records go to `<topic>.dlq` with their key as consumed: empty, null, bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_keeps_the_key() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("dlq"), unique("group"));
    let dlq = format!("{topic}.dlq");
    create_topics(&config, &[&topic, &dlq], 1).await;
    let keys: [Option<&[u8]>; 3] = [Some(b""), None, Some(&[0x00, 0xff, b'k'])];
    for (n, key) in keys.iter().enumerate() {
        let value = body(i64::try_from(n).unwrap(), &topic);
        produce_raw(&topic, &value, *key, &project(&value)).await;
    }
    let t = transport(&group, "");
    let app = App::builder(t.clone())
        .queue(topic.clone())
        .max_attempts(1)
        .dead_letter(true)
        .handle(URN, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("payment service down").with_exception("PaymentError"))
        })
        .build()
        .unwrap();
    consume_max(&app, 3).await;
    let records = assert_exactly(&dlq, 3, Duration::from_secs(3)).await;
    for (record, key) in records.iter().zip(keys) {
        assert_eq!(record.key.as_deref(), key, "the key is kept byte for byte");
        let text = String::from_utf8(record.value.clone().unwrap()).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["dead_letter"]["reason"], "failed");
        assert_eq!(doc["dead_letter"]["error"], "payment service down");
        assert_eq!(doc["dead_letter"]["exception"], "PaymentError");
        assert_eq!(doc["dead_letter"]["original_queue"], topic.as_str());
        assert_eq!(doc["dead_letter"]["attempts"], 1);
        assert_eq!(header(record, "bq-job"), Some(URN));
        assert_eq!(header(record, "bq-attempts"), Some("1"));
    }
    assert_eq!(committed(&group, &topic), Some(3));
}

/// Poison and gated records never reach a handler: with dead-lettering on they land in the
/// DLQ (ADR-0035 record; gated ones raw) with their keys; with it off and no tiers they are
/// committed and dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_and_gated_records() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("poison"), unique("group"));
    let dlq = format!("{topic}.dlq");
    create_topics(&config, &[&topic, &dlq], 1).await;
    let gated = body(7, &topic);
    let inputs: Vec<(Vec<u8>, Vec<babelqueue_transport_kafka::RecordHeader>)> = vec![
        (vec![0xff, 0xfe, 0x00], vec![]),
        (
            b"not json".to_vec(),
            vec![babelqueue_transport_kafka::RecordHeader::text(
                "bq-attempts",
                "2",
            )],
        ),
        (br#"{"x":1}"#.to_vec(), vec![]),
        (
            gated.clone(),
            vec![babelqueue_transport_kafka::RecordHeader::text(
                "bq-schema-version",
                "2",
            )],
        ),
    ];
    for (i, (value, headers)) in inputs.iter().enumerate() {
        produce_raw(&topic, value, Some(format!("k{i}").as_bytes()), headers).await;
    }
    let handled = Arc::new(AtomicUsize::new(0));
    let h = handled.clone();
    let app = App::builder(transport(&group, ""))
        .queue(topic.clone())
        .dead_letter(true)
        .handle(URN, move |_ctx: Context| {
            h.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    consume_max(&app, 4).await;
    assert_eq!(
        handled.load(Ordering::SeqCst),
        0,
        "poison never reaches a handler"
    );
    let records = assert_exactly(&dlq, 4, Duration::from_secs(3)).await;
    let text = |i: usize| String::from_utf8(records[i].value.clone().unwrap()).unwrap();
    assert!(
        text(0).starts_with(
            r#"{"raw":"//4A","raw_encoding":"base64","dead_letter":{"reason":"poison""#
        ),
        "{}",
        text(0)
    );
    assert!(
        text(1).starts_with(r#"{"raw":"not json","dead_letter":{"reason":"poison""#),
        "{}",
        text(1)
    );
    assert!(
        text(1).contains(r#""attempts":2,"lang":"rust"}"#),
        "the bq-attempts header counts: {}",
        text(1)
    );
    assert!(
        text(2).starts_with(r#"{"x":1,"dead_letter":{"reason":"poison""#),
        "{}",
        text(2)
    );
    assert_eq!(
        records[3].value.as_deref(),
        Some(&gated[..]),
        "a gated record goes raw"
    );
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record.key.as_deref(), Some(format!("k{i}").as_bytes()));
    }
    assert_eq!(committed(&group, &topic), Some(4));

    // Dead-lettering off, no tiers: degrade to delete (committed, nothing written).
    let (topic, group) = (unique("poison-off"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    produce_raw(&topic, b"not json", None, &[]).await;
    let app = App::builder(transport(&group, ""))
        .queue(topic.clone())
        .max_attempts(1)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    consume_max(&app, 1).await;
    assert_eq!(committed(&group, &topic), Some(1));
    assert_exactly(&format!("{topic}.dlq"), 0, Duration::from_secs(2)).await;
}

/// A dead-letter write the broker refuses commits nothing and seeks back: the record comes
/// again; once the write can succeed it is dead-lettered and committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_settle_write_commits_nothing_and_the_record_comes_again() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("settle-fail"), unique("group"));
    let dlq = format!("{topic}.dlq");
    create_topics(&config, &[&topic, &dlq], 1).await;
    let value = body(1, &topic);
    produce_raw(&topic, &value, Some(b"key"), &project(&value)).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let failing = move |_ctx: Context| {
        c.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), _>(HandlerError::new("boom")) }
    };
    let broken = App::builder(transport(&group, "&delivery_timeout_ms=5000"))
        .queue(topic.clone())
        .max_attempts(1)
        .dead_letter(true)
        .dead_letter_queue("bq-it invalid topic name!")
        .rewind_pause(Duration::from_millis(200))
        .handle(URN, failing.clone())
        .build()
        .unwrap();
    assert!(
        consume_until(&broken, || calls.load(Ordering::SeqCst) >= 3).await,
        "the record comes again"
    );
    assert_eq!(
        committed(&group, &topic),
        None,
        "nothing is committed while the write fails"
    );
    // Leave the group, so the next worker gets the partition at once.
    broken.transport().close().await.unwrap();
    drop(broken);

    let fixed = App::builder(transport(&group, ""))
        .queue(topic.clone())
        .max_attempts(1)
        .dead_letter(true)
        .handle(URN, failing)
        .build()
        .unwrap();
    consume_max(&fixed, 1).await;
    let records = assert_exactly(&dlq, 1, Duration::from_secs(3)).await;
    assert_eq!(records[0].key.as_deref(), Some(&b"key"[..]));
    assert_eq!(committed(&group, &topic), Some(1));
}

/// With 8 handlers at once on one partition, a slow record keeps the committed offset at its
/// own offset while every later record finishes; its completion moves the commit to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_8_never_commits_past_an_unfinished_record() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("watermark"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    let t = transport(&group, "");
    for n in 0..24 {
        t.publish(&topic, &body(n, &topic)).await.unwrap();
    }
    let release = Arc::new(tokio::sync::Notify::new());
    let done = Arc::new(AtomicUsize::new(0));
    let (r, d) = (release.clone(), done.clone());
    let app = App::builder(t.clone())
        .queue(topic.clone())
        .concurrency(8)
        .handle(URN, move |ctx: Context| {
            let (r, d) = (r.clone(), d.clone());
            async move {
                let data: Value = ctx.data_as()?;
                if data["n"] == 5 {
                    r.notified().await;
                } else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                d.fetch_add(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let running = tokio::spawn({
        let app = app.clone();
        async move { app.consume(Consume::new().handle_signals(false)).await }
    });
    assert!(
        eventually(WAIT, || done.load(Ordering::SeqCst) == 23).await,
        "23 handlers finish"
    );
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let at = committed(&group, &topic);
        assert_eq!(at, Some(5), "committed {at:?} while record 5 is unfinished");
    }
    assert_eq!(
        t.held(&topic),
        19,
        "record 5 in flight, 18 acknowledgements deferred"
    );
    release.notify_one();
    assert!(
        eventually(WAIT, || committed(&group, &topic) == Some(24)).await,
        "the deferred commits follow once record 5 finishes"
    );
    app.stop_handle().stop();
    running.await.unwrap().unwrap();
}

const CHILD_ENV: &str = "BQ_KAFKA_SIGKILL_CHILD";

/// The worker process of `a_worker_killed_mid_handler_loses_nothing` (the test binary
/// re-executes itself with this test selected); a no-op in a normal run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_child_worker() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (topic, group) = spec.split_once(' ').expect("`topic group`");
    let app = App::builder(transport(group, ""))
        .queue(topic)
        .handle(URN, |ctx: Context| async move {
            use std::io::Write as _;
            println!("HANDLING {}", ctx.message_id().unwrap_or_default());
            std::io::stdout().flush().ok();
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok::<(), HandlerError>(())
        })
        .build()
        .unwrap();
    app.consume(Consume::new().handle_signals(false))
        .await
        .unwrap();
}

/// A worker process killed with SIGKILL while its handler runs commits nothing; after the
/// group rebalances, another worker receives the same record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_handler_loses_nothing() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("sigkill"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    let t = transport(&group, "");
    let envelope = Envelope::builder(URN)
        .queue(&topic)
        .data(&json!({"n": 1}))
        .build()
        .unwrap();
    let id = envelope.message_id().unwrap().into_owned();
    t.publish(&topic, envelope.encode().unwrap().as_bytes())
        .await
        .unwrap();

    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "live::sigkill_child_worker",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, format!("{topic} {group}"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker process starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let handling = tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            // libtest may print `test … ... ` on the same line first.
            if let Some((_, got)) = line.split_once("HANDLING ") {
                return got.trim().to_owned();
            }
        }
        panic!("the worker exited before handling the record");
    })
    .await
    .expect("the worker picks the record up");
    assert_eq!(handling, id);
    assert_eq!(
        committed(&group, &topic),
        None,
        "nothing committed mid-handler"
    );
    child.kill().await.expect("SIGKILL");
    let killed_at = Instant::now();

    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let survivor = App::builder(transport(&group, ""))
        .queue(topic.clone())
        .handle(URN, move |ctx: Context| {
            record_call(&seen, &ctx);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    assert!(
        consume_until(&survivor, || !calls.lock().unwrap().is_empty()).await,
        "the record is consumed again after the rebalance"
    );
    println!("redelivered {:?} after the SIGKILL", killed_at.elapsed());
    assert_eq!(calls.lock().unwrap()[0].id, id);
    assert!(
        eventually(Duration::from_secs(10), || committed(&group, &topic)
            == Some(1))
        .await
    );
}

/// Redrive on Kafka: dead-lettered envelopes go back to work with their keys (attempts reset,
/// block removed); a poison record is restored to the DLQ byte for byte, never re-wrapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_keeps_keys_and_restores_poison_unchanged() {
    use babelqueue_core::redrive::{Redrive, redrive};
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("redrive"), unique("group"));
    let dlq = format!("{topic}.dlq");
    create_topics(&config, &[&topic, &dlq], 1).await;
    let keys: [Option<&[u8]>; 2] = [Some(b"customer-1"), None];
    for (n, key) in keys.iter().enumerate() {
        let value = body(i64::try_from(n).unwrap(), &topic);
        produce_raw(&topic, &value, *key, &project(&value)).await;
    }
    produce_raw(&topic, b"not json", Some(b"poison-key"), &[]).await;
    let t = transport(&group, "");
    let app = App::builder(t.clone())
        .queue(topic.clone())
        .max_attempts(1)
        .dead_letter(true)
        .handle(URN, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("down"))
        })
        .build()
        .unwrap();
    consume_max(&app, 3).await;
    let dead = assert_exactly(&dlq, 3, Duration::from_secs(3)).await;
    // The redrive tool runs on its own transport, as `babelqueue dlq redrive` does: one more
    // consumer in a group whose other member sits idle would wait for that member to rejoin.
    t.close().await.unwrap();
    let t = transport(&group, "");

    let report = redrive(
        &t,
        &dlq,
        &Redrive::new().timeout(Duration::from_secs(10)),
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!((report.redriven, report.skipped), (2, 1), "{report:?}");
    let work = assert_exactly(&topic, 5, Duration::from_secs(3)).await;
    for (back, key) in work[3..].iter().zip(keys) {
        assert_eq!(back.key.as_deref(), key, "the key survives the redrive");
        let envelope = Envelope::decode(back.value.as_deref().unwrap())
            .unwrap()
            .envelope;
        assert_eq!(envelope.attempts(), 0);
        assert!(envelope.dead_letter().is_none());
    }
    let dlq_now = assert_exactly(&dlq, 4, Duration::from_secs(3)).await;
    assert_eq!(
        dlq_now[3].value, dead[2].value,
        "the poison record is restored byte for byte"
    );
    assert_eq!(dlq_now[3].key.as_deref(), Some(&b"poison-key"[..]));
    assert_eq!(committed(t.group_id(), &dlq), Some(3));
}

/// With no broker listening, a publish fails with a transient error once its delivery timeout
/// passes, and a pop waits out its timeout and returns nothing (no busy loop, no panic).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_broker_gives_transient_errors_and_empty_polls() {
    let t = KafkaTransport::connect("kafka://127.0.0.1:1?delivery_timeout_ms=1500")
        .await
        .unwrap();
    let started = Instant::now();
    let err = t.publish("orders", &body(1, "orders")).await.unwrap_err();
    assert!(err.is_transient(), "{err} ({:?})", err.kind());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded by the delivery timeout"
    );
    for _ in 0..3 {
        let started = Instant::now();
        let popped = t.pop("orders", Duration::from_millis(300)).await.unwrap();
        assert!(popped.is_none());
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "the pop waited"
        );
    }
}

/// The runtime's retry delay on Kafka: the first handler call fails as `fail` says, and the time
/// from that call to the second one, through the retry tiers `1000,2000,3000,10000` and the
/// re-injector. The delay the runtime computes picks the smallest tier at least that long
/// (`RetryTiers::for_redelivery`), and the re-injector holds the record for that tier's delay
/// (the reference's due time, bindings-spec 7.5): with a tier equal to the delay, the retry
/// waits exactly the delay. `tier` is the 1-based tier the record must be parked on.
async fn retried_after(
    label: &str,
    tier: usize,
    configure: impl FnOnce(babelqueue_core::AppBuilder) -> babelqueue_core::AppBuilder,
    fail: fn() -> HandlerError,
) -> Duration {
    let config = broker().expect("the broker was checked");
    let (topic, group, reinject_group) = (unique(label), unique("group"), unique("reinject"));
    let tiers_ms = [1000, 2000, 3000, 10_000];
    let tier_topics: Vec<String> = (1..=tiers_ms.len())
        .map(|n| format!("{topic}.retry.{n}"))
        .collect();
    let mut topics: Vec<&str> = vec![&topic];
    topics.extend(tier_topics.iter().map(String::as_str));
    create_topics(&config, &topics, 1).await;

    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let t = transport(&group, "&retry_tiers_ms=1000,2000,3000,10000");
    let app = configure(App::builder(t.clone()))
        .queue(topic.clone())
        .max_attempts(2)
        .handle(URN, move |ctx: Context| {
            let call = record_call(&seen, &ctx);
            async move {
                if call.attempts == 0 {
                    Err(fail())
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    app.publish(URN, &json!({"n": 1})).await.unwrap();

    let options = KafkaOptions::from_url(&crate::common::url())
        .unwrap()
        .with_retry_tiers(RetryTiers::new(tiers_ms.to_vec()).unwrap());
    let client = babelqueue_transport_kafka::RdKafkaClient::new(options.clone());
    let mut reinjector = RetryReinjector::with_client(
        &client,
        &options,
        std::slice::from_ref(&topic),
        &reinject_group,
    )
    .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let reinjecting = tokio::spawn(async move {
        reinjector.run(async { stop_rx.await.unwrap_or(()) }).await;
    });
    let done = consume_until(&app, || calls.lock().unwrap().len() >= 2).await;
    stop_tx.send(()).ok();
    reinjecting.await.unwrap();
    assert!(done, "calls: {:?}", calls.lock().unwrap());

    let calls = calls.lock().unwrap().clone();
    assert_eq!(
        calls.iter().map(|c| c.attempts).collect::<Vec<_>>(),
        vec![0, 1],
        "{calls:?}"
    );
    let parked = assert_exactly(&tier_topics[tier - 1], 1, Duration::from_secs(3)).await;
    assert_eq!(header(&parked[0], "bq-attempts"), Some("1"));
    calls[1].at - calls[0].at
}

/// `retry_backoff(2 s)` on Kafka: the retry is handled 2 s after the failure (the runtime
/// computes the delay for every broker; Kafka maps it onto a tier).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_backoff_is_waited_through_the_tiers() {
    if broker().is_none() {
        return;
    }
    let waited = retried_after(
        "backoff",
        2,
        |b| b.retry_backoff(Duration::from_secs(2)),
        || HandlerError::new("fails once"),
    )
    .await;
    println!("retry_backoff(2 s): the retry came {waited:?} after the failure");
    assert!(
        waited >= Duration::from_millis(1900) && waited < Duration::from_millis(3500),
        "retry_backoff(2 s) waited {waited:?}"
    );
}

/// `HandlerError::retry_after(3 s)` on Kafka: the retry is handled 3 s after the failure, not
/// after the back-off (none here) or the attempt-to-tier rule (tier 1, 1 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handlers_retry_after_is_waited_through_the_tiers() {
    if broker().is_none() {
        return;
    }
    let waited = retried_after(
        "retryafter",
        3,
        |b| b,
        || HandlerError::retry_after("not yet", Duration::from_secs(3)),
    )
    .await;
    println!("retry_after(3 s): the retry came {waited:?} after the failure");
    assert!(
        waited >= Duration::from_millis(2900) && waited < Duration::from_millis(4500),
        "retry_after(3 s) waited {waited:?}"
    );
}

/// A batch publish keeps its delivery reports in flight together and lands in order; the
/// batches a worker acknowledges are committed from the background within the commit
/// interval (a few commits, not one per batch), never past a record still in flight, and
/// what is still owed at close is committed then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_publish_lands_in_order_and_batched_acks_commit_on_an_interval() {
    use babelqueue_core::{BatchAcker as _, BatchPublisher as _};
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("batched"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    let t = transport(&group, "");
    let bodies: Vec<Vec<u8>> = (0..300).map(|n| body(n, &topic)).collect();
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    t.publish_batch(&topic, &slices).await.unwrap();
    let on_wire = read_raw(&topic, 300, WAIT).await;
    let values: Vec<&[u8]> = on_wire
        .iter()
        .map(|r| r.value.as_deref().unwrap_or_default())
        .collect();
    assert_eq!(values, slices, "in order, byte for byte");

    t.set_commit_interval(Duration::from_secs(30));
    let mut got = Vec::new();
    let mut largest = 0;
    let deadline = Instant::now() + WAIT;
    while got.len() < 300 {
        assert!(Instant::now() < deadline, "{} of 300 received", got.len());
        let batch = t.receive(&topic, 64, Duration::from_secs(1)).await.unwrap();
        largest = largest.max(batch.len());
        got.extend(batch);
    }
    // What the consumer had fetched came out several records per receive, never more than
    // asked, and in the partition's order.
    assert!(
        (2..=64).contains(&largest),
        "largest receive: {largest} records"
    );
    let received: Vec<&[u8]> = got.iter().map(|d| d.body()).collect();
    assert_eq!(received, slices, "received in order, byte for byte");
    // The first batch commits at once; record 100 stays in flight; every later batch is owed.
    t.ack_batch(&got[..50]).await.unwrap();
    assert!(eventually(WAIT, || committed(&group, &topic) == Some(50)).await);
    for chunk in [&got[50..100], &got[101..200], &got[200..300]] {
        t.ack_batch(chunk).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(committed(&group, &topic), Some(50), "owed for the interval");
    // Settling record 100 alone commits at once, past the owed batches.
    t.ack(&got[100]).await.unwrap();
    assert_eq!(committed(&group, &topic), Some(300));
    t.close().await.unwrap();
}

/// `dlq list` on Kafka: a browse reads the records the group has not consumed, byte for byte
/// and in order, twice alike, without joining the group or committing; the group's consumer
/// still gets all three afterwards, and a browse while it holds a record neither rebalances it
/// nor moves its position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browse_reads_in_place_without_touching_the_group() {
    use babelqueue_core::Browser;
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("browse"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    let t = transport(&group, "");
    let bodies = vec![
        body(1, &topic),
        b"not an envelope \xff".to_vec(),
        body(3, &topic),
    ];
    t.publish(&topic, &bodies[0]).await.unwrap();
    produce_raw(&topic, &bodies[1], Some(b"k"), &[]).await;
    t.publish(&topic, &bodies[2]).await.unwrap();

    let browser = t.capabilities().browser().expect("Kafka browses");
    assert_eq!(browser.browse(&topic, 0).await.unwrap(), bodies);
    assert_eq!(browser.browse(&topic, 0).await.unwrap(), bodies);
    assert_eq!(browser.browse(&topic, 2).await.unwrap(), bodies[..2]);
    assert_eq!(
        committed(&group, &topic),
        None,
        "the browse committed nothing"
    );

    // The group's consumer takes the first record and holds it; a browse from another
    // transport of the same group meanwhile starts at the committed position and leaves the
    // member's assignment alone.
    let first = t
        .pop(&topic, WAIT)
        .await
        .unwrap()
        .expect("the first record");
    assert_eq!(first.body(), &bodies[0][..]);
    t.ack(&first).await.unwrap();
    let tool = transport(&group, "");
    assert_eq!(tool.browse(&topic, 0).await.unwrap(), bodies[1..]);
    assert_eq!(committed(&group, &topic), Some(1));
    let mut rest = Vec::new();
    while rest.len() < 2 {
        let d = t
            .pop(&topic, Duration::from_secs(10))
            .await
            .unwrap()
            .expect("the rest, with no rebalance in between");
        rest.push(d.body().to_vec());
        t.ack(&d).await.unwrap();
    }
    assert_eq!(rest, bodies[1..], "nothing was taken by the browses");
    assert_eq!(committed(&group, &topic), Some(3));
    assert!(tool.browse(&topic, 0).await.unwrap().is_empty());
    assert!(
        tool.browse(&unique("missing"), 0).await.unwrap().is_empty(),
        "a topic that does not exist is empty"
    );
    t.close().await.unwrap();
}
