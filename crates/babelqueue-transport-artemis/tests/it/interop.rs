//! Interop with the reference Python SDK 1.24.0 (`babelqueue[artemis]`, python-qpid-proton) on
//! the same broker, both directions, through each SDK's real runtime.

use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, HandlerError};
use babelqueue_transport_artemis::amqp_types::messaging::MessageId;
use babelqueue_transport_artemis::amqp_types::messaging::annotations::OwnedKey;
use babelqueue_transport_artemis::amqp_types::primitives::{SimpleValue, Symbol, Value};
use babelqueue_transport_artemis::{AmqpClient, ArtemisOptions, Client, Disposition};

use crate::common::{broker, python, queue, run_python, transport, url};

const URN: &str = "urn:babel:orders:created";

type Seen = Arc<std::sync::Mutex<Vec<(serde_json::Value, Option<String>, i64, Option<String>)>>>;

fn recording_app(
    t: babelqueue_transport_artemis::ArtemisTransport,
    q: &str,
    fail: bool,
) -> (App, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = App::builder(t)
        .queue(q)
        .max_attempts(3)
        .handle(URN, move |ctx: Context| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push((
                    ctx.data_as::<serde_json::Value>()?,
                    ctx.trace_id().map(|t| t.into_owned()),
                    ctx.attempts(),
                    ctx.envelope().lang().map(|l| l.into_owned()),
                ));
                if fail {
                    Err(HandlerError::new("failing on purpose"))
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    (app, seen)
}

/// Python publishes through its SDK; the Rust worker handles every message with the same data,
/// trace id and attempts, and reads the projection Python wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_publishes_rust_consumes() {
    let Some(_broker) = broker().await else {
        return;
    };
    let Some(py) = python() else { return };
    let q = queue("py-to-rust");
    let data = r#"{"order_id":1042,"note":"café ☃","nested":{"big":12345678901234,"ratio":1.5}}"#;
    let out = run_python(&py, &["publish", &url(), &q, URN, "3", data, "py-trace-1"]).await;
    assert_eq!(out[0]["ids"].as_array().map(Vec::len), Some(3));

    // The AMQP projection Python wrote is the one this crate writes and reads.
    let raw = AmqpClient::new(ArtemisOptions::parse(&url()).unwrap()).unwrap();
    let first = raw
        .receive(&q, Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    let m = &first.message;
    assert_eq!(
        m.message_annotations
            .as_ref()
            .and_then(|a| a.get(&OwnedKey::Symbol(Symbol::from("x-opt-jms-type")))),
        Some(&Value::String(URN.into()))
    );
    assert_eq!(
        m.properties.as_ref().and_then(|p| p.correlation_id.clone()),
        Some(MessageId::String("py-trace-1".into()))
    );
    let props = &m.application_properties.as_ref().unwrap().0;
    assert_eq!(
        props.get("bq_schema_version"),
        Some(&SimpleValue::String("1".into()))
    );
    assert_eq!(
        props.get("bq_source_lang"),
        Some(&SimpleValue::String("python".into()))
    );
    raw.settle(&first.token, Disposition::Released)
        .await
        .unwrap();
    raw.close().await.unwrap();

    let (app, seen) = recording_app(transport().await, &q, false);
    let summary = app
        .consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 3);
    let seen = seen.lock().unwrap().clone();
    let want: serde_json::Value = serde_json::from_str(data).unwrap();
    for (got, trace, attempts, lang) in &seen {
        assert_eq!(got, &want);
        assert_eq!(trace.as_deref(), Some("py-trace-1"));
        assert_eq!(*attempts, 0);
        assert_eq!(lang.as_deref(), Some("python"));
    }
}

/// The Rust SDK publishes; the Python SDK's worker handles every message (its own
/// `bq_schema_version` gate accepts them) with the same data and trace id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_publishes_python_consumes() {
    let Some(_broker) = broker().await else {
        return;
    };
    let Some(py) = python() else { return };
    let q = queue("rust-to-py");
    let t = transport().await;
    let app = App::builder(t).queue(&q).build().unwrap();
    let data = serde_json::json!({"order_id": 7, "note": "café ☃", "path": "a/b"});
    let mut traces = Vec::new();
    for _ in 0..3 {
        let envelope = app.envelope(URN).data(&data).build().unwrap();
        traces.push(envelope.trace_id().unwrap().into_owned());
        app.publish_envelope(&q, &envelope, &Default::default())
            .await
            .unwrap();
    }
    let lines = run_python(&py, &["consume", &url(), &q, "3", "--urn", URN]).await;
    let handled: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l.get("urn").is_some()).collect();
    assert_eq!(handled.len(), 3, "{lines:?}");
    for (line, trace) in handled.iter().zip(&traces) {
        assert_eq!(line["urn"], URN);
        assert_eq!(line["data"], data);
        assert_eq!(line["trace_id"], trace.as_str());
        assert_eq!(line["attempts"], 0);
        assert_eq!(line["meta"]["lang"], "rust");
        assert_eq!(line["meta"]["queue"], q.as_str());
    }
    assert_eq!(lines.last().unwrap()["processed"], 3);
}

/// A retry one SDK makes is continued by the other: attempts travel in the body (and in
/// `bq_attempts`), whichever SDK re-published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_continue_across_sdks() {
    let Some(_broker) = broker().await else {
        return;
    };
    let Some(py) = python() else { return };
    let q = queue("retry-across");
    let t = transport().await;
    // Python publishes and fails once: its runtime re-publishes a copy with attempts 1.
    run_python(&py, &["publish", &url(), &q, URN, "1", r#"{"order_id":1}"#]).await;
    let lines = run_python(&py, &["consume", &url(), &q, "1", "--fail-urn", URN]).await;
    assert_eq!(lines[0]["attempts"], 0);
    // Rust picks the copy up at attempts 1, fails too, and re-publishes attempts 2.
    let (failing, seen) = recording_app(t.clone(), &q, true);
    failing
        .consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(seen.lock().unwrap()[0].2, 1);
    // Python sees attempts 2.
    let lines = run_python(&py, &["consume", &url(), &q, "1", "--urn", URN]).await;
    assert_eq!(lines[0]["attempts"], 2, "{lines:?}");
    assert_eq!(lines[0]["data"], serde_json::json!({"order_id": 1}));
}
