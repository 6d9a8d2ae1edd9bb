//! Interop with the reference Python SDK (babelqueue 1.24.0, its own SqsTransport on boto3) over
//! the same `sqs://…?endpoint=…` URL, both directions.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, HandlerError, Headers, Outcome, Transport};
use babelqueue_testkit::PythonPeer;
use babelqueue_transport_sqs::projection;
use serde_json::{Value, json};

use crate::support::{self, Env};

const URN: &str = "urn:babel:orders:created";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The peer's command: `PythonPeer::run` cannot set the child's environment, and the peer
/// needs the static test credentials (`Env::child_env`), so the command is built here from the
/// interpreter and script the testkit found and checked.
fn peer(python: &PythonPeer, env: &Env, command: &str, queue: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(python.python());
    cmd.arg(python.script())
        .args([command, "--url", &env.url, "--queue", queue]);
    for (k, v) in env.child_env() {
        cmd.env(k, v);
    }
    cmd
}

fn lines(output: &[String]) -> Vec<Value> {
    babelqueue_testkit::json_lines(output.join("\n").as_bytes(), "the Python SQS peer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_reads_what_rust_writes() {
    let Some(env) = support::env().await else {
        return;
    };
    let Some(python) = support::python() else {
        return;
    };
    let queue = support::unique("rust-to-py");
    let url = env.create_queue(&queue, &[]).await;
    let (_, transport) = env.transport(env.config.clone());
    let app = App::builder(transport)
        .queue(queue.clone())
        .build()
        .unwrap();
    let mut published = Vec::new();
    for seq in 0..3 {
        let envelope = app
            .envelope(URN)
            .data(&json!({"seq": seq, "note": "café / ü", "big": 12_345_678_901_234_i64}))
            .build()
            .unwrap();
        let headers: Headers = if seq == 0 {
            [("traceparent".to_owned(), TRACEPARENT.to_owned())].into()
        } else {
            Headers::new()
        };
        app.publish_envelope(&queue, &envelope, &headers)
            .await
            .unwrap();
        published.push(envelope.encode().unwrap());
    }

    let out = lines(
        &support::run(peer(&python, &env, "consume", &queue).args(["--count", "3", "--urn", URN]))
            .await,
    );
    let calls = &out[..out.len() - 1];
    assert_eq!(out.last().unwrap()["processed"], 3);
    assert_eq!(calls.len(), 3);
    for (call, body) in calls.iter().zip(&published) {
        let sent: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            call["envelope"], sent,
            "Python decodes exactly what Rust encoded"
        );
        assert_eq!(call["urn"], URN);
        assert_eq!(call["data"], sent["data"]);
        assert_eq!(call["meta"], sent["meta"]);
        assert_eq!(call["trace_id"], sent["trace_id"]);
        assert_eq!(call["attempts"], 0);
        // The Python consumer sees the bq-* attributes Rust projected.
        for (name, value) in projection::attributes(body.as_bytes()) {
            assert_eq!(
                call["headers"][&name].as_str(),
                value.string_value.as_deref(),
                "{name}"
            );
        }
    }
    assert_eq!(calls[0]["headers"]["traceparent"], TRACEPARENT);
    assert!(calls[1]["headers"].get("traceparent").is_none());
    assert_eq!(
        env.depth(&url).await,
        0,
        "Python acknowledged (deleted) all three"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_reads_what_the_python_sdk_writes() {
    let Some(env) = support::env().await else {
        return;
    };
    let Some(python) = support::python() else {
        return;
    };
    let queue = support::unique("py-to-rust");
    let url = env.create_queue(&queue, &[]).await;
    let out = lines(
        &support::run(peer(&python, &env, "publish", &queue).args([
            "--count",
            "3",
            "--urn",
            URN,
            "--header",
            &format!("traceparent={TRACEPARENT}"),
        ]))
        .await,
    );
    let bodies: Vec<String> = out
        .iter()
        .map(|l| l["body"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(bodies.len(), 3);

    let (calls, transport) = env.transport(env.config.clone());
    let seen: Arc<Mutex<Vec<(Value, i64, Headers)>>> = Arc::default();
    let sink = seen.clone();
    let app = App::builder(transport)
        .queue(queue.clone())
        .handle(URN, move |ctx: Context| {
            let sink = sink.clone();
            async move {
                let data: Value = ctx.data_as()?;
                sink.lock()
                    .unwrap()
                    .push((data, ctx.attempts(), ctx.headers().clone()));
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    for body in &bodies {
        let delivery = app
            .transport()
            .pop(&queue, Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a message from Python");
        assert_eq!(
            std::str::from_utf8(delivery.body()).unwrap(),
            body,
            "the bytes Python sent, unchanged"
        );
        // Both SDKs project the same attributes from the same body.
        let ours = projection::attributes(body.as_bytes());
        assert_eq!(ours.len(), 6);
        for (name, value) in &ours {
            assert_eq!(
                delivery.headers().get(name),
                value.string_value.as_ref(),
                "{name}"
            );
        }
        assert_eq!(delivery.headers()["bq-source-lang"], "python");
        assert_eq!(delivery.headers()["traceparent"], TRACEPARENT);
        assert_eq!(app.dispatch(delivery).await, Outcome::Acked);
    }
    let seen = seen.lock().unwrap().clone();
    let seqs: Vec<i64> = seen
        .iter()
        .map(|(d, _, _)| d["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [0, 1, 2]);
    assert!(
        seen.iter()
            .all(|(d, n, h)| d["note"] == "café / ü" && *n == 0 && h["traceparent"] == TRACEPARENT)
    );
    assert_eq!(calls.deletes(), 3);
    assert_eq!(env.depth(&url).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_and_dead_letters_cross_the_sdks() {
    let Some(env) = support::env().await else {
        return;
    };
    let Some(python) = support::python() else {
        return;
    };
    let queue = support::unique("cross-retry");
    let url = env.create_queue(&queue, &[]).await;
    let dlq_url = env.create_queue(&format!("{queue}-dlq"), &[]).await;

    // Python publishes; a Rust worker fails it once and releases it with ChangeMessageVisibility.
    let body = lines(
        &support::run(peer(&python, &env, "publish", &queue).args(["--count", "1", "--urn", URN]))
            .await,
    )[0]["body"]
        .as_str()
        .unwrap()
        .to_owned();
    let (calls, transport) = env.transport(env.config.clone());
    let app = App::builder(transport)
        .queue(queue.clone())
        .max_attempts(5)
        .poll_timeout(Duration::from_secs(3))
        .handle(URN, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("rust worker fails once"))
        })
        .build()
        .unwrap();
    app.consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(calls.visibility_changes(), [0]);

    // The Python worker sees attempts 1 (from ApproximateReceiveCount), fails twice more and
    // dead-letters it to <queue>-dlq: the same name the Rust namer gives.
    let out = lines(
        &support::run(peer(&python, &env, "consume", &queue).args([
            "--count",
            "2",
            "--fail-urn",
            URN,
            "--max-attempts",
            "3",
            "--dead-letter",
        ]))
        .await,
    );
    let attempts: Vec<i64> = out[..out.len() - 1]
        .iter()
        .map(|c| c["attempts"].as_i64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2], "the Rust release counted as a delivery");
    assert_eq!(env.depth(&url).await, 0);

    // The Rust side reads Python's dead-letter record from the queue its own namer names.
    let (_, transport) = env.transport(env.config.clone());
    let dlq = babelqueue_core::dead_letter_queue(
        app.policy(),
        &queue,
        transport.capabilities().dead_letter_namer(),
    );
    assert_eq!(dlq, format!("{queue}-dlq"));
    let record = transport
        .pop(&dlq, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("Python's dead-letter record");
    let parsed: Value = serde_json::from_slice(record.body()).unwrap();
    let sent: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(parsed["dead_letter"]["reason"], "failed");
    assert_eq!(parsed["dead_letter"]["lang"], "python");
    assert_eq!(parsed["dead_letter"]["attempts"], 3);
    assert_eq!(parsed["dead_letter"]["original_queue"], queue.as_str());
    assert_eq!(parsed["meta"]["id"], sent["meta"]["id"]);
    assert_eq!(record.headers()["bq-job"], URN);
    transport.ack(&record).await.unwrap();
    assert_eq!(env.depth(&dlq_url).await, 0);
}
