//! The transport against a live SQS endpoint (moto's server on 127.0.0.1 in CI).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{
    App, Consume, Context, Declared, Envelope, HandlerError, Headers, Outcome, Outgoing, Transport,
    TransportErrorKind,
};
use babelqueue_transport_sqs::aws_sdk_sqs::config::retry::RetryConfig;
use babelqueue_transport_sqs::aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use babelqueue_transport_sqs::aws_sdk_sqs::types::QueueAttributeName;
use babelqueue_transport_sqs::projection;
use babelqueue_transport_sqs::{AwsSqs, SqsOptions, SqsTransport, aws_sdk_sqs};
use serde_json::{Value, json};

use crate::support::{self, Call};

const URN: &str = "urn:babel:orders:created";
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("a JSON body")
}

/// The calls a recorded run made, without the queue URL lookups.
fn wire(calls: &support::Calls) -> Vec<&'static str> {
    calls
        .all()
        .iter()
        .filter_map(|c| match c {
            Call::Send(_) => Some("send"),
            Call::Delete(_) => Some("delete"),
            Call::Visibility(..) => Some("visibility"),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_keeps_the_body_the_attributes_and_the_traceparent() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("round-trip");
    let url = env.create_queue(&queue, &[]).await;
    let (calls, transport) = env.transport(env.config.clone());
    let seen: Arc<Mutex<Vec<(Value, Headers, i64)>>> = Arc::default();
    let sink = seen.clone();
    let app = App::builder(transport)
        .queue(queue.clone())
        .handle(URN, move |ctx: Context| {
            let sink = sink.clone();
            async move {
                let envelope: Value =
                    serde_json::from_str(&ctx.envelope().encode().unwrap()).unwrap();
                sink.lock()
                    .unwrap()
                    .push((envelope, ctx.headers().clone(), ctx.attempts()));
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let envelope = app
        .envelope(URN)
        .data(&json!({"order_id": 1042, "note": "café / ü", "ratio": 1.5}))
        .build()
        .unwrap();
    let body = envelope.encode().unwrap();
    let headers: Headers = [("traceparent".to_owned(), TRACEPARENT.to_owned())].into();
    app.publish_envelope(&queue, &envelope, &headers)
        .await
        .unwrap();
    app.publish_envelope(&queue, &envelope, &Headers::new())
        .await
        .unwrap();

    // The bytes SQS hands back are the bytes published, with the projection beside them.
    let delivery = app
        .transport()
        .pop(&queue, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the first message");
    assert_eq!(delivery.body(), body.as_bytes());
    assert_eq!(delivery.headers()["traceparent"], TRACEPARENT);
    for (name, value) in projection::attributes(body.as_bytes()) {
        assert_eq!(
            delivery.headers().get(&name),
            value.string_value.as_ref(),
            "{name}"
        );
    }
    assert_eq!(app.dispatch(delivery).await, Outcome::Acked);
    let summary = app
        .consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 1);

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for (got, _, attempts) in &seen {
        assert_eq!(got, &json(body.as_bytes()));
        assert_eq!(*attempts, 0);
    }
    assert_eq!(
        seen[0].1.get("traceparent").map(String::as_str),
        Some(TRACEPARENT)
    );
    assert!(!seen[1].1.contains_key("traceparent"));
    assert_eq!(env.depth(&url).await, 0, "both messages deleted");
    assert_eq!(calls.lookups(), 1, "the queue URL is resolved once");
    assert_eq!(wire(&calls), ["send", "send", "delete", "delete"]);
}

/// The Inspector shows SQS's `MessageId` (the one `SendMessage` answered with) and its receive
/// count: a message released through the visibility timeout comes back redelivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_shows_the_message_id_and_a_redelivery_by_the_receive_count() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("inspect");
    let url = env.create_queue(&queue, &[]).await;
    let sent = env
        .sdk
        .send_message()
        .queue_url(&url)
        .message_body(r#"{"job":"urn:babel:orders:created","data":{},"attempts":0}"#)
        .send()
        .await
        .expect("send");
    let id = sent.message_id().expect("a MessageId").to_owned();
    let (_calls, transport) = env.transport(env.config.clone());
    let inspector = transport.capabilities().inspector().expect("an Inspector");
    let first = transport
        .pop(&queue, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the message");
    let view = inspector.inspect(&first);
    assert_eq!(view.id.as_deref(), Some(id.as_str()));
    assert_eq!(view.redelivered, Some(false));
    assert_eq!(
        view.properties,
        [("ApproximateReceiveCount".to_owned(), "1".to_owned())]
    );
    let babelqueue_core::Redelivery::Native(release) = transport.capabilities().redelivery_mode()
    else {
        panic!("SQS releases through the visibility timeout")
    };
    release
        .redeliver(
            &first,
            babelqueue_core::Redeliver::new(first.body(), None, None),
        )
        .await
        .unwrap();
    let again = transport
        .pop(&queue, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the released message");
    let view = inspector.inspect(&again);
    assert_eq!(view.id.as_deref(), Some(id.as_str()));
    assert_eq!(view.redelivered, Some(true), "received twice");
    assert_eq!(
        view.properties,
        [("ApproximateReceiveCount".to_owned(), "2".to_owned())]
    );
    transport.ack(&again).await.unwrap();
    assert_eq!(env.depth(&url).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_handler_is_retried_through_visibility_never_by_a_copy() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("retry");
    let url = env.create_queue(&queue, &[]).await;
    let (calls, transport) = env.transport(env.config.clone());
    let attempts: Arc<Mutex<Vec<(i64, String, Instant)>>> = Arc::default();
    let log = attempts.clone();
    let app = App::builder(transport)
        .queue(queue.clone())
        .max_attempts(3)
        .retry_backoff(Duration::from_secs(1))
        .poll_timeout(Duration::from_secs(3))
        .handle(URN, move |ctx: Context| {
            let log = log.clone();
            async move {
                let id = ctx.envelope().message_id().unwrap_or_default().into_owned();
                log.lock()
                    .unwrap()
                    .push((ctx.attempts(), id, Instant::now()));
                if ctx.attempts() < 2 {
                    Err(HandlerError::new("not yet"))
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    let id = app.publish(URN, &json!({"order_id": 7})).await.unwrap();
    let summary = app
        .consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 3);
    let attempts = attempts.lock().unwrap().clone();
    let counts: Vec<i64> = attempts.iter().map(|(n, _, _)| *n).collect();
    assert_eq!(
        counts,
        [0, 1, 2],
        "attempts come from ApproximateReceiveCount - 1"
    );
    assert!(
        attempts.iter().all(|(_, got, _)| *got == id),
        "the same message each time"
    );
    for pair in attempts.windows(2) {
        let gap = pair[1].2 - pair[0].2;
        assert!(
            gap >= Duration::from_millis(900),
            "the 1 s back-off was honoured: {gap:?}"
        );
    }
    assert_eq!(wire(&calls), ["send", "visibility", "visibility", "delete"]);
    assert_eq!(calls.visibility_changes(), [1, 1]);
    assert_eq!(env.depth(&url).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_messages_go_to_the_dash_dlq_with_their_reason() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("exhaust");
    let url = env.create_queue(&queue, &[]).await;
    let dlq_url = env.create_queue(&format!("{queue}-dlq"), &[]).await;
    let (calls, transport) = env.transport(env.config.clone());
    let app = App::builder(transport)
        .queue(queue.clone())
        .max_attempts(2)
        .dead_letter(true)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("payment service down").with_exception("PaymentError"))
        })
        .build()
        .unwrap();
    let envelope = app
        .envelope(URN)
        .data(&json!({"order_id": 9}))
        .build()
        .unwrap();
    app.publish_envelope(&queue, &envelope, &Headers::new())
        .await
        .unwrap();
    let summary = app
        .consume(Consume::new().max_messages(2).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 2);
    assert_eq!(env.depth(&url).await, 0);
    assert_eq!(wire(&calls), ["send", "visibility", "send", "delete"]);
    let dlq_send = &calls.sends()[1];
    assert_eq!(dlq_send.queue_url, dlq_url);

    let records = env.drain(&dlq_url, Duration::from_secs(5)).await;
    assert_eq!(records.len(), 1);
    let record = json(records[0].body().unwrap().as_bytes());
    let block = &record["dead_letter"];
    assert_eq!(block["reason"], "failed");
    assert_eq!(block["error"], "payment service down");
    assert_eq!(block["exception"], "PaymentError");
    assert_eq!(block["attempts"], 2);
    assert_eq!(block["original_queue"], queue.as_str());
    assert_eq!(block["lang"], "rust");
    assert_eq!(record["attempts"], 2);
    assert_eq!(
        record["meta"]["id"],
        json(envelope.encode().unwrap().as_bytes())["meta"]["id"]
    );
    // The record carries its own projection.
    let attrs = records[0].message_attributes().unwrap();
    assert_eq!(attrs["bq-job"].string_value(), Some(URN));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_bodies_reach_the_dlq_with_their_bytes() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("poison");
    let url = env.create_queue(&queue, &[]).await;
    let dlq_url = env.create_queue(&format!("{queue}-dlq"), &[]).await;
    let text = "not an envelope: café \t {";
    let typed = r#"{"job":"urn:babel:orders:created","attempts":"3","data":{"n":1.50}}"#;
    env.send_raw(&url, text, &[]).await;
    env.send_raw(&url, typed, &[]).await;
    let (calls, transport) = env.transport(env.config.clone());
    let handled = Arc::new(AtomicUsize::new(0));
    let h = handled.clone();
    let app = App::builder(transport)
        .queue(queue.clone())
        .dead_letter(true)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, move |_ctx: Context| {
            h.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    let summary = app
        .consume(Consume::new().max_messages(2).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 2);
    assert_eq!(
        handled.load(Ordering::SeqCst),
        0,
        "poison never reaches a handler"
    );
    assert_eq!(env.depth(&url).await, 0);
    assert_eq!(calls.deletes(), 2);

    let mut records: Vec<String> = env
        .drain(&dlq_url, Duration::from_secs(5))
        .await
        .iter()
        .map(|m| m.body().unwrap().to_owned())
        .collect();
    records.sort();
    assert_eq!(records.len(), 2);
    let wrapped = records
        .iter()
        .find(|r| r.starts_with(r#"{"raw""#))
        .expect("the wrapper");
    let wrapped = json(wrapped.as_bytes());
    assert_eq!(wrapped["raw"], text, "the text body is carried whole");
    assert_eq!(wrapped["dead_letter"]["reason"], "poison");
    assert_eq!(wrapped["dead_letter"]["original_queue"], queue.as_str());
    let spliced = records
        .iter()
        .find(|r| !r.starts_with(r#"{"raw""#))
        .unwrap();
    assert!(
        spliced.starts_with(&typed[..typed.len() - 1]),
        "an object body is spliced byte for byte: {spliced}"
    );
    assert!(spliced.contains(r#""reason":"poison""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_policy_takes_poison_and_gated_messages_when_dead_lettering_is_off() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("redrive");
    let native_url = env.create_queue(&format!("{queue}-native"), &[]).await;
    let arn = env.arn(&native_url).await;
    let policy = json!({"deadLetterTargetArn": arn, "maxReceiveCount": "2"}).to_string();
    let url = env
        .create_queue(
            &queue,
            &[
                (QueueAttributeName::RedrivePolicy, policy.as_str()),
                (QueueAttributeName::VisibilityTimeout, "1"),
            ],
        )
        .await;
    let poison = "{\"job\": \"urn:babel:orders:created\", \"data\": [1, 2]}";
    let gated =
        "{\n  \"job\": \"urn:babel:orders:created\",\n  \"meta\": {\"schema_version\": 2}\n}";
    env.send_raw(&url, poison, &[]).await;
    env.send_raw(&url, gated, &[("bq-schema-version", "Number", "2")])
        .await;

    let (calls, transport) = env.transport(env.config.clone());
    let handled = Arc::new(AtomicUsize::new(0));
    let h = handled.clone();
    let app = App::builder(transport)
        .queue(queue.clone())
        .dead_letter(false)
        .max_attempts(2)
        .handle(URN, move |_ctx: Context| {
            h.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    app.consume(
        Consume::new()
            .idle_timeout(Duration::from_secs(4))
            .handle_signals(false),
    )
    .await
    .unwrap();

    assert_eq!(handled.load(Ordering::SeqCst), 0);
    assert_eq!(
        wire(&calls),
        Vec::<&str>::new(),
        "native settle: no delete, no visibility change, no copy"
    );
    let received: usize = calls.received_batches().iter().sum();
    assert_eq!(
        received, 4,
        "each message was received maxReceiveCount (2) times"
    );
    let moved = env.drain(&native_url, Duration::from_secs(5)).await;
    let mut bodies: Vec<&str> = moved.iter().map(|m| m.body().unwrap()).collect();
    bodies.sort_unstable();
    let mut want = vec![poison, gated];
    want.sort_unstable();
    assert_eq!(
        bodies, want,
        "SQS moved both, byte for byte, to the queue's own DLQ"
    );
    assert_eq!(env.depth(&url).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gated_messages_are_dead_lettered_as_their_raw_bytes() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("gate");
    let url = env.create_queue(&queue, &[]).await;
    let dlq_url = env.create_queue(&format!("{queue}-dlq"), &[]).await;
    let body = "{\"meta\": {\"schema_version\": 2}, \"data\": {\"big\": 12345678901234567890, \"r\": 1.50}, \"job\": \"urn:babel:orders:created\"}";
    env.send_raw(&url, body, &[("bq-schema-version", "Number", "2")])
        .await;
    let (calls, transport) = env.transport(env.config.clone());
    let app = App::builder(transport)
        .queue(queue.clone())
        .dead_letter(true)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let delivery = app
        .transport()
        .pop(&queue, Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap();
    // The Number attribute is reported as carried; the runtime's gate rejects it.
    assert_eq!(
        delivery.facts().declared_version,
        Declared::Text("2".into())
    );
    assert_eq!(
        delivery.facts().declared_version.rejected().as_deref(),
        Some("2")
    );
    assert_eq!(delivery.body(), body.as_bytes(), "handed over raw");
    assert_eq!(app.dispatch(delivery).await, Outcome::DeadLettered);
    assert_eq!(wire(&calls), ["send", "delete"]);
    let records = env.drain(&dlq_url, Duration::from_secs(5)).await;
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].body(),
        Some(body),
        "the raw record, byte for byte"
    );
    let attrs = records[0].message_attributes().unwrap();
    assert_eq!(attrs["bq-schema-version"].string_value(), Some("2"));
    assert_eq!(env.depth(&url).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_keeps_the_order_of_a_group_across_a_retry_and_deduplicates_by_message_id() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("order.fifo");
    let url = env
        .create_queue(&queue, &[(QueueAttributeName::FifoQueue, "true")])
        .await;
    let (calls, transport) = env.transport(env.config.clone().fifo(true));
    let order: Arc<Mutex<Vec<i64>>> = Arc::default();
    let log = order.clone();
    let app = App::builder(transport)
        .queue(queue.clone())
        .max_attempts(3)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, move |ctx: Context| {
            let log = log.clone();
            async move {
                let seq = ctx.data_as::<Value>().unwrap()["seq"].as_i64().unwrap();
                log.lock().unwrap().push(seq);
                if seq == 3 && ctx.attempts() == 0 {
                    return Err(HandlerError::new("3 fails once"));
                }
                Ok(())
            }
        })
        .build()
        .unwrap();
    let mut first = None;
    for seq in 0..8 {
        let envelope = app
            .envelope(URN)
            .data(&json!({"seq": seq}))
            .build()
            .unwrap();
        app.publish_envelope(&queue, &envelope, &Headers::new())
            .await
            .unwrap();
        first.get_or_insert(envelope);
    }
    // The same envelope again: same meta.id, so SQS drops the duplicate.
    app.publish_envelope(&queue, first.as_ref().unwrap(), &Headers::new())
        .await
        .unwrap();
    let sends = calls.sends();
    assert_eq!(sends.len(), 9);
    assert!(
        sends
            .iter()
            .all(|s| s.group_id.as_deref() == Some(queue.as_str()))
    );
    assert_eq!(sends[0].deduplication_id, sends[8].deduplication_id);

    let summary = app
        .consume(Consume::new().max_messages(9).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 9);
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 3, 4, 5, 6, 7]);
    assert_eq!(env.depth(&url).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_dead_letters_go_to_the_dlq_fifo_queue() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("dl.fifo");
    let base = queue.strip_suffix(".fifo").unwrap();
    env.create_queue(&queue, &[(QueueAttributeName::FifoQueue, "true")])
        .await;
    let dlq_url = env
        .create_queue(
            &format!("{base}-dlq.fifo"),
            &[(QueueAttributeName::FifoQueue, "true")],
        )
        .await;
    let url = env
        .sdk
        .get_queue_url()
        .queue_name(&queue)
        .send()
        .await
        .unwrap();
    // A poison body has no meta.id: the record's dedup id is the SHA-256 of the record.
    env.sdk
        .send_message()
        .queue_url(url.queue_url().unwrap())
        .message_body("not json")
        .message_group_id("g")
        .message_deduplication_id("d1")
        .send()
        .await
        .unwrap();
    let (calls, transport) = env.transport(env.config.clone());
    let app = App::builder(transport)
        .queue(queue.clone())
        .dead_letter(true)
        .poll_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    app.consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    let send = &calls.sends()[0];
    assert_eq!(send.queue_url, dlq_url);
    assert_eq!(
        send.group_id.as_deref(),
        Some(format!("{base}-dlq.fifo").as_str())
    );
    assert_eq!(send.deduplication_id.as_ref().map(String::len), Some(64));
    let records = env.drain(&dlq_url, Duration::from_secs(5)).await;
    assert_eq!(records.len(), 1);
    assert_eq!(
        json(records[0].body().unwrap().as_bytes())["raw"],
        "not json"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_publishes_wait_and_out_of_range_delays_are_refused() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("delay");
    let url = env.create_queue(&queue, &[]).await;
    let fifo = support::unique("delay.fifo");
    env.create_queue(&fifo, &[(QueueAttributeName::FifoQueue, "true")])
        .await;
    let (calls, transport) = env.transport(env.config.clone());
    let body = Envelope::builder(URN).build().unwrap().encode().unwrap();
    let sent = Instant::now();
    assert!(transport.capabilities().send_parts().delay);
    transport
        .send(&Outgoing::new(&queue, body.as_bytes()).delay(Duration::from_secs(2)))
        .await
        .unwrap();
    assert!(
        transport
            .pop(&queue, Duration::ZERO)
            .await
            .unwrap()
            .is_none(),
        "not visible before its delay"
    );
    let delivery = transport
        .pop(&queue, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("visible after its delay");
    assert!(
        sent.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        sent.elapsed()
    );
    transport.ack(&delivery).await.unwrap();
    assert_eq!(calls.sends()[0].delay_seconds, Some(2));

    for (target, delay) in [(&queue, 901), (&queue, 3600), (&fifo, 30)] {
        let err = transport
            .send(&Outgoing::new(target, body.as_bytes()).delay(Duration::from_secs(delay)))
            .await
            .unwrap_err();
        assert_eq!(
            err.kind(),
            TransportErrorKind::Unsupported,
            "{target} {delay}: {err}"
        );
    }
    assert_eq!(calls.sends().len(), 1, "a refused delay sends nothing");
    assert_eq!(env.depth(&url).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_receive_feeds_concurrent_handlers() {
    let Some(env) = support::env().await else {
        return;
    };
    let queue = support::unique("batch");
    let url = env.create_queue(&queue, &[]).await;
    let (calls, transport) = env.transport(env.config.clone().max_messages(4));
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let app = App::builder(transport)
        .queue(queue.clone())
        .concurrency(4)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, move |_ctx: Context| {
            let (r, p) = (r.clone(), p.clone());
            async move {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                r.fetch_sub(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    for n in 0..8 {
        app.publish(URN, &json!({"n": n})).await.unwrap();
    }
    let summary = app
        .consume(Consume::new().max_messages(8).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 8);
    assert_eq!(peak.load(Ordering::SeqCst), 4, "four handlers ran at once");
    let batches = calls.received_batches();
    assert_eq!(batches.iter().sum::<usize>(), 8);
    assert!(
        batches.iter().any(|n| *n > 1),
        "one ReceiveMessage took several: {batches:?}"
    );
    assert_eq!(env.depth(&url).await, 0);
}

#[tokio::test]
async fn a_missing_queue_is_a_clear_error() {
    let Some(env) = support::env().await else {
        return;
    };
    let (_, transport) = env.transport(env.config.clone());
    let missing = support::unique("missing");
    let err = transport.publish(&missing, b"{}").await.unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Rejected);
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(!err.is_transient());
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_transient_error() {
    let Some(_env) = support::env().await else {
        return;
    };
    // Nothing listens on port 9 of the loopback.
    let config = SqsOptions::from_url(
        "sqs://us-east-1?endpoint=http://127.0.0.1:9&prefix=http://127.0.0.1:9/1",
    )
    .unwrap();
    let client = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .credentials_provider(Credentials::new("test", "test", None, None, "tests"))
            .retry_config(RetryConfig::disabled())
            .build(),
    );
    let transport = SqsTransport::new(AwsSqs::new(client), config);
    let err = transport.pop("q", Duration::ZERO).await.unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Connection, "{err}");
    assert!(err.is_transient());
}
