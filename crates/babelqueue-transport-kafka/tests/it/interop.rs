//! Interop with the reference Python SDK 1.24.0 (`babelqueue[kafka]`), both directions, on the
//! same broker: plain records, retry tiers and the re-injector across SDKs, and the poison
//! dead-letter records.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, HandlerError, Transport};
use babelqueue_envelope::Envelope;
use babelqueue_transport_kafka::projection::project;
use babelqueue_transport_kafka::{KafkaOptions, RdKafkaClient, RetryReinjector, RetryTiers};
use serde_json::{Value, json};

use crate::common::{
    assert_exactly, broker, brokers, committed, create_topics, eventually, header, produce_raw,
    python_driver, read_raw, unique, worker_url,
};

const URN: &str = "urn:babel:orders:created";
const WAIT: Duration = Duration::from_secs(60);

type Seen = Arc<Mutex<Vec<(i64, String, Value, Value)>>>;

fn recording_app(topic: &str, group: &str, extra: &str, seen: &Seen, fail_first: bool) -> App {
    let seen = seen.clone();
    let url = worker_url(&format!("&group_id={group}{extra}"));
    // `connect` is async; this helper is not, and `new` does the same from parsed options.
    App::builder(babelqueue_transport_kafka::KafkaTransport::new(
        KafkaOptions::from_url(&url).unwrap(),
    ))
    .queue(topic)
    .max_attempts(3)
    .handle(URN, move |ctx: Context| {
        let attempts = ctx.attempts();
        seen.lock().unwrap().push((
            attempts,
            ctx.message_id().unwrap_or_default().into_owned(),
            ctx.data_as().unwrap_or(Value::Null),
            serde_json::from_str(ctx.meta().to_raw().as_str()).unwrap_or(Value::Null),
        ));
        async move {
            if fail_first && attempts == 0 {
                Err(HandlerError::new("the first delivery fails"))
            } else {
                Ok::<(), HandlerError>(())
            }
        }
    })
    .build()
    .unwrap()
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_publishes_rust_consumes() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("py2rs"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    let published = python_driver(&["publish", &brokers(), &topic, "3"]).await;
    let ids: Vec<String> = published
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 3);

    let seen: Seen = Arc::default();
    let app = recording_app(&topic, &group, "", &seen, false);
    assert!(consume_until(&app, || seen.lock().unwrap().len() >= 3).await);
    let seen = seen.lock().unwrap().clone();
    for (n, (attempts, id, data, meta)) in seen.iter().enumerate() {
        assert_eq!(*attempts, 0);
        assert_eq!(id, &ids[n]);
        assert_eq!(data["n"], n);
        assert_eq!(data["who"], "python");
        assert_eq!(data["text"], "h\u{e9}llo \u{2713} / \"q\"");
        assert_eq!(meta["lang"], "python");
        assert_eq!(meta["queue"], topic.as_str());
    }
    // Python's header projection of its own bodies is the one this crate computes.
    for record in read_raw(&topic, 3, WAIT).await {
        let value = record.value.clone().unwrap();
        assert_eq!(
            record.headers,
            project(&value),
            "same bq-* headers, same order"
        );
        assert_eq!(
            record.timestamp,
            Envelope::decode(&value).unwrap().envelope.created_at()
        );
        assert_eq!(record.key, None);
    }
    assert_eq!(committed(&group, &topic), Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_publishes_python_consumes() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("rs2py"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    let transport = babelqueue_transport_kafka::KafkaTransport::connect(&crate::common::url())
        .await
        .unwrap();
    let mut bodies = Vec::new();
    for n in 0..3 {
        let envelope = Envelope::builder(URN)
            .queue(&topic)
            .data(&json!({"n": n, "who": "rust", "text": "h\u{e9}llo \u{2713} / \"q\"", "big": 12345678901234567890_u64}))
            .build()
            .unwrap();
        let body = envelope.encode().unwrap();
        transport.publish(&topic, body.as_bytes()).await.unwrap();
        bodies.push(body);
    }
    let lines = python_driver(&["consume", &brokers(), &topic, "3", &group]).await;
    assert_eq!(lines.len(), 3, "{lines:?}");
    for (n, line) in lines.iter().enumerate() {
        assert_eq!(line["urn"], URN);
        assert_eq!(
            line["body"],
            bodies[n].as_str(),
            "Python received the exact bytes"
        );
        assert_eq!(line["data"]["n"], n);
        assert_eq!(line["data"]["big"], 12345678901234567890_u64);
        assert_eq!(line["meta"]["lang"], "rust");
    }
}

/// A Python worker parks a failed record on its tier; the Rust re-injector brings it back and
/// a Rust worker sees attempts 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_retry_tier_rust_reinjector() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("py-tier"), unique("group"));
    let tier = format!("{topic}.retry.1");
    create_topics(&config, &[&topic, &tier], 1).await;
    let published = python_driver(&["publish", &brokers(), &topic, "1"]).await;
    let id = published[0]["id"].as_str().unwrap().to_owned();
    python_driver(&["fail-once", &brokers(), &topic, &group, "1000"]).await;
    let parked = assert_exactly(&tier, 1, Duration::from_secs(5)).await;
    assert_eq!(header(&parked[0], "bq-attempts"), Some("1"));
    assert_eq!(header(&parked[0], "bq-delay"), Some("1000"));
    assert_eq!(
        header(&parked[0], "bq-original-topic"),
        Some(topic.as_str())
    );

    let tiers = KafkaOptions::from_url(&crate::common::url())
        .unwrap()
        .with_retry_tiers(RetryTiers::new(vec![1000]).unwrap());
    let mut reinjector = RetryReinjector::with_client(
        &RdKafkaClient::new(tiers.clone()),
        &tiers,
        std::slice::from_ref(&topic),
        &unique("reinject"),
    )
    .unwrap();
    let mut written = 0;
    let deadline = std::time::Instant::now() + WAIT;
    while written == 0 && std::time::Instant::now() < deadline {
        written += reinjector.run_once(Some(Duration::from_millis(500))).await;
    }
    reinjector.close().await;
    assert_eq!(written, 1);

    let seen: Seen = Arc::default();
    let app = recording_app(&topic, &group, "&retry_tiers_ms=1000", &seen, false);
    assert!(consume_until(&app, || !seen.lock().unwrap().is_empty()).await);
    let (attempts, got, _, _) = seen.lock().unwrap()[0].clone();
    assert_eq!((attempts, got), (1, id));
}

/// A Rust worker parks a failed keyed record on its tier; the Python re-injector brings it
/// back (key and value byte for byte) and the Rust worker sees attempts 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_retry_tier_python_reinjector() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("rs-tier"), unique("group"));
    let tier = format!("{topic}.retry.1");
    create_topics(&config, &[&topic, &tier], 1).await;
    let envelope = Envelope::builder(URN)
        .queue(&topic)
        .data(&json!({"n": 1}))
        .build()
        .unwrap();
    let body = envelope.encode().unwrap();
    produce_raw(
        &topic,
        body.as_bytes(),
        Some(b"customer-0042"),
        &project(body.as_bytes()),
    )
    .await;

    let seen: Seen = Arc::default();
    let app = recording_app(&topic, &group, "&retry_tiers_ms=1000", &seen, true);
    assert!(consume_until(&app, || !seen.lock().unwrap().is_empty()).await);
    let parked = assert_exactly(&tier, 1, Duration::from_secs(5)).await;
    assert_eq!(parked[0].key.as_deref(), Some(&b"customer-0042"[..]));

    let out = python_driver(&[
        "reinject",
        &brokers(),
        &topic,
        &unique("reinject"),
        "1000",
        "60",
    ])
    .await;
    assert_eq!(out[0]["reinjected"], 1);
    assert!(consume_until(&app, || seen.lock().unwrap().len() >= 2).await);
    assert_eq!(
        seen.lock().unwrap()[1].0,
        1,
        "the second delivery counts one attempt"
    );
    let work = assert_exactly(&topic, 2, Duration::from_secs(3)).await;
    assert_eq!(work[1].key.as_deref(), Some(&b"customer-0042"[..]));
    assert_eq!(
        work[1].value, parked[0].value,
        "the value is copied byte for byte"
    );
}

/// The same poison records, dead-lettered by the Rust runtime and by the Python SDK: the
/// records agree byte for byte up to the `dead_letter` block, and the blocks agree field by
/// field except `failed_at`, `lang` and the cause text after `Undecodable BabelQueue body: `.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_dead_letter_records_agree_with_python() {
    let Some(config) = broker() else { return };
    let (rust_topic, py_topic) = (unique("poison-rs"), unique("poison-py"));
    let (rust_dlq, py_dlq) = (format!("{rust_topic}.dlq"), format!("{py_topic}.dlq"));
    create_topics(&config, &[&rust_topic, &py_topic, &rust_dlq, &py_dlq], 1).await;
    let bodies: Vec<Vec<u8>> = vec![
        vec![0xff, 0xfe, 0x00],
        b"not json".to_vec(),
        br#"{"x":1}"#.to_vec(),
        b" {\"job\":\"urn:x\",\"attempts\":\"3\"}\n".to_vec(),
        br#"{"a":1e400,"n":123456789012345678901234567890}"#.to_vec(),
        br#"{"job":5}"#.to_vec(),
        b"null".to_vec(),
        b"[1,2]".to_vec(),
        br#"{"s":"\ud800"}"#.to_vec(),
        "{\"t\":\"caf\u{e9} \u{2713}\",\"job\":\"\"}"
            .as_bytes()
            .to_vec(),
        b"{}".to_vec(),
    ];
    // Both carry the headers a re-injected poison record would: its count and its topic.
    let headers = [
        babelqueue_transport_kafka::RecordHeader::text("bq-attempts", "1"),
        babelqueue_transport_kafka::RecordHeader::text("bq-original-topic", "orders"),
    ];
    for body in &bodies {
        produce_raw(&rust_topic, body, Some(b"k"), &headers).await;
        produce_raw(&py_topic, body, Some(b"k"), &headers).await;
    }
    let count = bodies.len().to_string();
    let url = worker_url(&format!("&group_id={}", unique("group")));
    let app = App::builder(
        babelqueue_transport_kafka::KafkaTransport::connect(&url)
            .await
            .unwrap(),
    )
    .queue(rust_topic.clone())
    .dead_letter(true)
    .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
    .build()
    .unwrap();
    tokio::time::timeout(
        WAIT,
        app.consume(
            Consume::new()
                .max_messages(bodies.len() as u64)
                .handle_signals(false),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    python_driver(&[
        "dead-letter",
        &brokers(),
        &py_topic,
        &count,
        &unique("group"),
    ])
    .await;
    let ours = assert_exactly(&rust_dlq, bodies.len(), Duration::from_secs(3)).await;
    let theirs = assert_exactly(&py_dlq, bodies.len(), Duration::from_secs(3)).await;
    let mut causes = Vec::new();
    for ((ours, theirs), body) in ours.iter().zip(&theirs).zip(&bodies) {
        let (a, b) = (ours.value.clone().unwrap(), theirs.value.clone().unwrap());
        let (a, b) = (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
        let split = |s: &str| -> (String, Value) {
            let at = s
                .rfind(",\"dead_letter\":")
                .or_else(|| s.find("\"dead_letter\":"))
                .unwrap();
            let block_start = s[at..].find('{').unwrap() + at;
            (
                s[..block_start].to_owned(),
                serde_json::from_str(&s[block_start..s.len() - 1]).unwrap(),
            )
        };
        let ((a_head, a_block), (b_head, b_block)) = (split(&a), split(&b));
        assert_eq!(
            a_head,
            b_head,
            "the record before the block differs for {:?}",
            String::from_utf8_lossy(body)
        );
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&a_block), keys(&b_block), "block members and order");
        for field in ["reason", "exception", "original_queue", "attempts"] {
            assert_eq!(a_block[field], b_block[field], "dead_letter.{field}");
        }
        assert_eq!(a_block["original_queue"], "orders");
        assert_eq!(a_block["attempts"], 1);
        let prefix = "Undecodable BabelQueue body: ";
        assert!(a_block["error"].as_str().unwrap().starts_with(prefix));
        assert!(b_block["error"].as_str().unwrap().starts_with(prefix));
        assert_eq!(
            (a_block["lang"].as_str(), b_block["lang"].as_str()),
            (Some("rust"), Some("python"))
        );
        assert_eq!(ours.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(theirs.key.as_deref(), Some(&b"k"[..]));
        causes.push(format!(
            "{:?}\n    rust:   {}\n    python: {}",
            String::from_utf8_lossy(body),
            a_block["error"],
            b_block["error"]
        ));
    }
    println!(
        "poison causes (the only wording that differs):\n  {}",
        causes.join("\n  ")
    );
}
