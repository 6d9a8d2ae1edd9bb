//! Interop with the reference Python SDK (babelqueue 1.24.0, pika) over `amqp://`, both
//! directions, each side retrying and dead-lettering what the other produced.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, Headers};
use babelqueue_transport_amqp::AmqpTransport;
use serde_json::{Value, json};

use crate::common::{self, Raw, json};

const OK: &str = "urn:babel:interop:ok";
const BROKEN: &str = "urn:babel:interop:broken";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The URL as the Python side spells it (pika reads `%2F` as vhost `/`).
fn python_url(url: &str) -> String {
    url.replace("%2f", "%2F")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_publishes_python_consumes_retries_and_dead_letters() {
    let Some(url) = common::broker().await else {
        return;
    };
    let Some(py) = common::python() else { return };
    let _shared = common::shared().await;
    common::init_tracing();
    let q = common::queue("rs2py");
    let dlq = format!("{q}.dlq");
    let peek = common::queue("rs2py-props");
    let raw = Raw::new(&url).await;
    let app = App::builder(AmqpTransport::connect(&url).await.unwrap())
        .queue(&q)
        .build()
        .unwrap();
    let headers = Headers::from([("traceparent".to_owned(), TRACEPARENT.to_owned())]);
    let ok = Envelope::builder(OK)
        .queue(&q)
        .trace_id("rs-trace-ok")
        .data(&json!({"order_id": 1, "name": "Zoë"}))
        .build()
        .unwrap();
    app.publish_envelope(&q, &ok, &headers).await.unwrap();
    let broken_id = app.publish(BROKEN, &json!({"order_id": 2})).await.unwrap();
    app.publish_envelope(&peek, &ok, &headers).await.unwrap();

    // pika sees the contract properties with native types.
    let seen = py.run(&["drain", &python_url(&url), &peek]).await;
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0]["properties"],
        json!({"type": OK, "correlation_id": "rs-trace-ok", "message_id": ok.message_id().unwrap(),
            "app_id": "babelqueue", "content_type": "application/json", "delivery_mode": 2})
    );
    assert_eq!(
        seen[0]["header_types"],
        json!({"x-schema-version": "int", "x-source-lang": "str", "x-attempts": "int", "traceparent": "str"})
    );
    assert_eq!(
        seen[0]["body"]["data"],
        json!({"order_id": 1, "name": "Zoë"})
    );

    // The Python worker handles one, retries the other once, then dead-letters it.
    let calls = py
        .run(&[
            "consume",
            &python_url(&url),
            &q,
            "--urn",
            OK,
            "--fail-urn",
            BROKEN,
            "--max-attempts",
            "2",
            "--dead-letter",
            "--max",
            "3",
            "--timeout",
            "2",
        ])
        .await;
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[0]["urn"], OK);
    assert_eq!(calls[0]["data"], json!({"order_id": 1, "name": "Zoë"}));
    assert_eq!(calls[0]["meta"]["lang"], "rust");
    assert_eq!(calls[0]["trace_id"], "rs-trace-ok");
    assert_eq!(calls[0]["headers"]["traceparent"], TRACEPARENT);
    let broken: Vec<&Value> = calls.iter().filter(|c| c["urn"] == BROKEN).collect();
    assert_eq!(
        broken
            .iter()
            .map(|c| c["attempts"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![0, 1],
        "Python retried the Rust message once"
    );

    // Rust reads Python's dead-letter record.
    assert_eq!(raw.wait_depth(&q, 0, Duration::from_secs(5)).await, 0);
    let records = raw.drain(&dlq).await;
    assert_eq!(records.len(), 1);
    let record = json(&records[0].0);
    let decoded = Envelope::decode(&records[0].0).expect("the Python record decodes in Rust");
    assert_eq!(decoded.envelope.urn(), BROKEN);
    assert_eq!(record["meta"]["id"], broken_id.as_str());
    assert_eq!(record["meta"]["lang"], "rust");
    assert_eq!(record["attempts"], 2);
    let block = &record["dead_letter"];
    assert_eq!(block["reason"], "failed");
    assert_eq!(block["lang"], "python");
    assert_eq!(block["exception"], "RuntimeError");
    assert_eq!(block["original_queue"], q.as_str());
    raw.delete(&[&q, &dlq, &peek]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_publishes_rust_consumes_retries_and_dead_letters() {
    let Some(url) = common::broker().await else {
        return;
    };
    let Some(py) = common::python() else { return };
    let _shared = common::shared().await;
    common::init_tracing();
    let q = common::queue("py2rs");
    let dlq = format!("{q}.dlq");
    let raw = Raw::new(&url).await;
    let purl = python_url(&url);
    let ok_id = py
        .run(&[
            "publish",
            &purl,
            &q,
            OK,
            r#"{"order_id": 3, "name": "Zoë"}"#,
            "--trace-id",
            "py-trace-ok",
            "--header",
            &format!("traceparent={TRACEPARENT}"),
        ])
        .await[0]["published"]
        .as_str()
        .unwrap()
        .to_owned();
    let broken_id = py
        .run(&["publish", &purl, &q, BROKEN, r#"{"order_id": 4}"#])
        .await[0]["published"]
        .as_str()
        .unwrap()
        .to_owned();

    let calls = Arc::new(Mutex::new(Vec::new()));
    let (c1, c2) = (calls.clone(), calls.clone());
    let app = App::builder(AmqpTransport::connect(&url).await.unwrap())
        .queue(&q)
        .max_attempts(2)
        .dead_letter(true)
        .poll_timeout(Duration::from_secs(2))
        .handle(OK, move |ctx: Context| {
            let c = c1.clone();
            async move {
                c.lock().unwrap().push((
                    OK,
                    ctx.envelope().attempts(),
                    ctx.data_as::<Value>()?,
                    ctx.headers().clone(),
                    ctx.envelope().lang().unwrap_or_default().into_owned(),
                ));
                Ok::<(), HandlerError>(())
            }
        })
        .handle(BROKEN, move |ctx: Context| {
            let c = c2.clone();
            async move {
                c.lock().unwrap().push((
                    BROKEN,
                    ctx.envelope().attempts(),
                    ctx.data_as::<Value>()?,
                    ctx.headers().clone(),
                    ctx.envelope().lang().unwrap_or_default().into_owned(),
                ));
                Err::<(), _>(
                    HandlerError::new("rust handler failed on purpose")
                        .with_exception("InteropError"),
                )
            }
        })
        .build()
        .unwrap();
    let summary = app
        .consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 3);
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 3);
    let (urn, attempts, data, headers, lang) = &calls[0];
    assert_eq!((*urn, *attempts), (OK, 0));
    assert_eq!(*data, json!({"order_id": 3, "name": "Zoë"}));
    assert_eq!(headers["traceparent"], TRACEPARENT);
    assert_eq!(headers["x-source-lang"], "python");
    assert_eq!(lang, "python");
    let broken: Vec<i64> = calls
        .iter()
        .filter(|c| c.0 == BROKEN)
        .map(|c| c.1)
        .collect();
    assert_eq!(broken, vec![0, 1], "Rust retried the Python message once");
    let _ = ok_id;

    // Python reads Rust's dead-letter record with its own codec.
    assert_eq!(raw.wait_depth(&q, 0, Duration::from_secs(5)).await, 0);
    let records = py.run(&["drain", &purl, &dlq]).await;
    assert_eq!(records.len(), 1);
    let body = &records[0]["body"];
    assert_eq!(body["meta"]["id"], broken_id.as_str());
    assert_eq!(body["meta"]["lang"], "python");
    assert_eq!(body["attempts"], 2);
    assert_eq!(body["data"], json!({"order_id": 4}));
    let block = &body["dead_letter"];
    assert_eq!(block["reason"], "failed");
    assert_eq!(block["lang"], "rust");
    assert_eq!(block["error"], "rust handler failed on purpose");
    assert_eq!(block["exception"], "InteropError");
    assert_eq!(block["original_queue"], q.as_str());
    assert_eq!(records[0]["properties"]["type"], BROKEN);
    assert_eq!(records[0]["header_types"]["x-attempts"], "int");
    assert_eq!(records[0]["headers"]["x-attempts"], 2);
    raw.delete(&[&q, &dlq]).await;
}
