//! The NATS transport against a real nats-server with JetStream (`BQ_NATS_URL`, default
//! `nats://127.0.0.1:4222`; `scripts/brokers.sh up nats` starts one).
//!
//! With `BQ_REQUIRE_BROKERS` set, an unreachable server fails every test; without it the tests
//! print `SKIPPED` and return. Every test uses queues of its own and deletes their streams.

#![allow(clippy::print_stdout)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{
    App, AppBuilder, Consume, Context, Count, Delivery, HandlerError, Headers, Outgoing,
    Redelivery, Sends, Transport, TransportErrorKind, UnknownUrn,
};
use babelqueue_envelope::{Envelope, RawJson};
use babelqueue_transport_nats::{NatsError, NatsTransport};
use serde_json::{Value, json};

const URN: &str = "urn:babel:orders:created";

fn base_url() -> String {
    std::env::var("BQ_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

fn with_options(options: &str) -> String {
    let base = base_url();
    let separator = if base.contains('?') { '&' } else { '?' };
    format!("{base}{separator}{options}")
}

/// A connected transport, or `None` (skip) when the server is down and not required.
async fn nats_with(options: &str) -> Option<NatsTransport> {
    let url = if options.is_empty() {
        base_url()
    } else {
        with_options(options)
    };
    match tokio::time::timeout(Duration::from_secs(5), NatsTransport::connect(&url)).await {
        Ok(Ok(t)) => Some(t),
        other => {
            let why = match other {
                Ok(Err(e)) => e.to_string(),
                _ => "timed out".into(),
            };
            assert!(
                std::env::var_os("BQ_REQUIRE_BROKERS").is_none(),
                "NATS at {} is required but not reachable: {why}",
                base_url()
            );
            println!("SKIPPED: NATS not reachable at {} ({why})", base_url());
            None
        }
    }
}

async fn nats() -> Option<NatsTransport> {
    nats_with("").await
}

fn queue(name: &str) -> String {
    format!("bq-it.{name}-{:08x}", fastrand::u32(..))
}

/// Deletes the streams of `q` and of its dead-letter queue.
async fn purge(t: &NatsTransport, q: &str) {
    for queue in [q.to_owned(), format!("{q}.dlq")] {
        let name = t.options().stream_name(&queue).unwrap();
        let _ = t.jetstream().delete_stream(&name).await;
    }
}

/// Messages stored on the stream of `q` since it was created (published, copies included).
async fn published(t: &NatsTransport, q: &str) -> u64 {
    let mut stream = t.ensure_stream(q).await.unwrap();
    stream.info().await.unwrap().state.last_sequence
}

async fn browse(t: &NatsTransport, q: &str) -> Vec<Vec<u8>> {
    t.capabilities()
        .browser()
        .unwrap()
        .browse(q, 0)
        .await
        .unwrap()
}

fn app(t: &NatsTransport, q: &str) -> AppBuilder {
    App::builder(t.clone())
        .queue(q)
        .poll_timeout(Duration::from_millis(200))
        .rewind_pause(Duration::from_millis(50))
}

fn idle(ms: u64) -> Consume {
    Consume::new()
        .idle_timeout(Duration::from_millis(ms))
        .handle_signals(false)
}

/// One handler call: (attempts, native attempts, meta.id, data as raw text, headers).
type Call = (i64, i64, String, String, Headers);

#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<Call>>>);

impl Calls {
    fn record(&self, ctx: &Context) {
        self.0.lock().unwrap().push((
            ctx.attempts(),
            ctx.native_attempts(),
            ctx.message_id().unwrap_or_default().into_owned(),
            ctx.data().as_str().to_owned(),
            ctx.headers().clone(),
        ));
    }
    fn all(&self) -> Vec<Call> {
        self.0.lock().unwrap().clone()
    }
    fn attempts(&self) -> Vec<(i64, i64)> {
        self.all().iter().map(|c| (c.0, c.1)).collect()
    }
}

fn recording(calls: &Calls, fail: bool) -> impl babelqueue_core::Handler + Clone {
    let calls = calls.clone();
    move |ctx: Context| {
        let calls = calls.clone();
        async move {
            calls.record(&ctx);
            if fail {
                Err(HandlerError::new("boom").with_exception("RuntimeError"))
            } else {
                Ok(())
            }
        }
    }
}

async fn pop(t: &NatsTransport, q: &str, ms: u64) -> Option<Delivery> {
    t.pop(q, Duration::from_millis(ms)).await.unwrap()
}

#[tokio::test]
async fn the_round_trip_is_byte_for_byte() {
    let Some(t) = nats().await else { return };
    let q = queue("roundtrip");
    // 2^64 and -(2^64), beyond any machine integer; U+2028 raw and escaped; a float as written.
    let data = "{\"big\":18446744073709551616,\"neg\":-18446744073709551616,\
                \"ls\":\"a\u{2028}b\",\"esc\":\"\\u2028\",\"f\":1.50}";
    let calls = Calls::default();
    let a = app(&t, &q)
        .handle(URN, recording(&calls, false))
        .build()
        .unwrap();
    let envelope = a
        .envelope(URN)
        .data_raw(RawJson::parse(data).unwrap())
        .build()
        .unwrap();
    let headers = Headers::from([(
        "traceparent".to_owned(),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
    )]);
    a.publish_envelope(&q, &envelope, &headers).await.unwrap();
    let encoded = envelope.encode().unwrap().into_bytes();
    assert_eq!(
        browse(&t, &q).await,
        vec![encoded.clone()],
        "stored byte for byte"
    );

    let summary = a.consume(idle(500)).await.unwrap();
    assert_eq!(summary.processed, 1);
    let seen = calls.all();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].3, data, "data byte for byte");
    assert_eq!(seen[0].4, headers, "headers ride as NATS headers");
    assert_eq!((seen[0].0, seen[0].1), (0, 0));
    assert!(browse(&t, &q).await.is_empty(), "acknowledged: gone");

    // Any bytes at all go through the transport unchanged.
    let raw: &[u8] = b"\x00\xff\xfe not json \xe2\x80\xa8";
    t.publish(&q, raw).await.unwrap();
    let d = pop(&t, &q, 2000).await.unwrap();
    assert_eq!(d.body(), raw);
    assert_eq!(d.facts().count, Some(Count::Redelivered(0)));
    t.ack(&d).await.unwrap();
    assert!(pop(&t, &q, 0).await.is_none());
    purge(&t, &q).await;
}

#[tokio::test]
async fn a_failed_handler_is_retried_by_nak_with_attempts_plus_one_then_dead_lettered() {
    let Some(t) = nats().await else { return };
    let q = queue("retry");
    let calls = Calls::default();
    let a = app(&t, &q)
        .max_attempts(3)
        .dead_letter(true)
        .retry_backoff(Duration::from_millis(200))
        .handle(URN, recording(&calls, true))
        .build()
        .unwrap();
    let envelope = a
        .envelope(URN)
        .data(&json!({"n": [1, {}], "s": "é"}))
        .meta("ext", &json!({"acme": 1}))
        .build()
        .unwrap();
    let headers = Headers::from([("traceparent".to_owned(), "00-x-y-01".to_owned())]);
    let started = std::time::Instant::now();
    a.publish_envelope(&q, &envelope, &headers).await.unwrap();
    // The idle timeout leaves room for a loaded machine (CI runs this file's tests at once on
    // two cores): a redelivery 200 ms after its NAK once took over 1.5 s to be pulled there.
    a.consume(idle(5000)).await.unwrap();
    // attempts counted by the runtime from JetStream's num_delivered, one more each time
    assert_eq!(calls.attempts(), [(0, 0), (1, 1), (2, 2)]);
    assert!(
        calls.all().iter().all(|c| c.4 == headers),
        "the headers survive every redelivery"
    );
    // back-off 200 ms then 400 ms, honoured by the delayed -NAK
    assert!(started.elapsed() >= Duration::from_millis(600));
    // never a copy: the one message was redelivered
    assert_eq!(published(&t, &q).await, 1);
    assert!(browse(&t, &q).await.is_empty());

    let dlq = browse(&t, &format!("{q}.dlq")).await;
    assert_eq!(dlq.len(), 1);
    let record: Value = serde_json::from_slice(&dlq[0]).unwrap();
    assert_eq!(record["attempts"], 3);
    assert_eq!(record["data"], json!({"n": [1, {}], "s": "é"}));
    assert_eq!(record["meta"]["ext"], json!({"acme": 1}));
    assert_eq!(record["dead_letter"]["reason"], "failed");
    assert_eq!(record["dead_letter"]["error"], "boom");
    assert_eq!(record["dead_letter"]["original_queue"], json!(q));
    purge(&t, &q).await;
}

#[tokio::test]
async fn a_body_ahead_of_the_count_is_retried_by_a_copy_with_exact_attempts() {
    let Some(t) = nats().await else { return };
    let q = queue("ahead");
    let calls = Calls::default();
    let a = app(&t, &q)
        .max_attempts(6)
        .dead_letter(true)
        .handle(URN, recording(&calls, true))
        .build()
        .unwrap();
    // Another SDK re-published this one after four attempts.
    let body = format!(r#"{{"job":"{URN}","data":{{"n":1}},"attempts":4}}"#);
    let headers = Headers::from([("traceparent".to_owned(), "00-a-b-01".to_owned())]);
    t.send(&Outgoing::new(&q, body.as_bytes()).headers(&headers))
        .await
        .unwrap();
    a.consume(idle(1000)).await.unwrap();
    assert_eq!(
        calls.all().iter().map(|c| c.0).collect::<Vec<_>>(),
        [4, 5],
        "the sixth attempt dead-letters"
    );
    assert!(calls.all().iter().all(|c| c.4 == headers));
    assert_eq!(published(&t, &q).await, 2, "the retry was a copy");
    let dlq = browse(&t, &format!("{q}.dlq")).await;
    assert_eq!(dlq.len(), 1);
    let record: Value = serde_json::from_slice(&dlq[0]).unwrap();
    assert_eq!(record["attempts"], 6);
    purge(&t, &q).await;
}

#[tokio::test]
async fn poison_is_dead_lettered_byte_for_byte() {
    let Some(t) = nats().await else { return };
    let bodies: [&[u8]; 4] = [
        b"\xff\xfe{garbage",
        b"not json \xe2\x80\xa8",
        br#"{"job":"urn:babel:orders:created","attempts":1.5}"#,
        br#"{"data":{"big":18446744073709551616}}"#,
    ];
    let q = queue("poison");
    let calls = Calls::default();
    let a = app(&t, &q)
        .dead_letter(true)
        .handle_any(recording(&calls, false))
        .build()
        .unwrap();
    for body in bodies {
        t.publish(&q, body).await.unwrap();
    }
    a.consume(idle(500)).await.unwrap();
    assert!(calls.all().is_empty(), "poison never reaches a handler");
    let records = browse(&t, &format!("{q}.dlq")).await;
    assert_eq!(records.len(), 4);
    for (record, body) in records.iter().zip(bodies) {
        let text = String::from_utf8(record.clone()).unwrap();
        assert!(text.contains(r#""reason":"poison""#), "{text}");
        let parsed = Envelope::parse_object(record).unwrap();
        match (parsed.get("raw"), std::str::from_utf8(body)) {
            (Some(r), Err(_)) => {
                assert!(text.contains(r#""raw_encoding":"base64""#), "{text}");
                assert!(r.as_string().is_some());
            }
            (Some(r), Ok(original)) => assert_eq!(r.as_string().unwrap(), original),
            (None, Ok(original)) => {
                assert!(text.starts_with(&original[..original.len() - 1]), "{text}")
            }
            (None, Err(_)) => panic!("non-UTF-8 must be wrapped: {text}"),
        }
    }
    assert!(browse(&t, &q).await.is_empty());
    purge(&t, &q).await;

    // Dead-lettering off: the bounded retry keeps the poison bytes (the -NAK redelivers the
    // original) and JetStream's count carries the attempts until max_attempts drops it.
    let q = queue("poison-retry");
    let a = app(&t, &q)
        .max_attempts(3)
        .on_unknown_urn(UnknownUrn::Fail)
        .handle_any(recording(&calls, false))
        .build()
        .unwrap();
    t.publish(&q, b"\xffpoison").await.unwrap();
    let summary = a.consume(idle(800)).await.unwrap();
    assert_eq!(summary.processed, 3, "three deliveries, then dropped");
    assert_eq!(published(&t, &q).await, 1, "no copy, no bare body");
    assert!(browse(&t, &q).await.is_empty());
    purge(&t, &q).await;
}

#[tokio::test]
async fn a_gated_delivery_is_dead_lettered_as_it_came() {
    let Some(t) = nats().await else { return };
    let q = queue("gated");
    let calls = Calls::default();
    let a = app(&t, &q)
        .dead_letter(true)
        .handle(URN, recording(&calls, false))
        .build()
        .unwrap();
    let body = format!(r#"{{"job":"{URN}","data":{{}},"attempts":0}}"#);
    let headers = Headers::from([("bq-schema-version".to_owned(), "2".to_owned())]);
    t.send(&Outgoing::new(&q, body.as_bytes()).headers(&headers))
        .await
        .unwrap();
    a.consume(idle(500)).await.unwrap();
    assert!(calls.all().is_empty(), "never decoded, never handled");
    let dlq = format!("{q}.dlq");
    assert_eq!(
        browse(&t, &dlq).await,
        [body.as_bytes().to_vec()],
        "the raw bytes"
    );
    // ... with the header it came with, so it stays gated wherever it goes next
    let record = pop(&t, &dlq, 2000).await.unwrap();
    assert_eq!(record.headers(), &headers);
    assert_eq!(
        record.facts().declared_version,
        babelqueue_core::Declared::Text("2".into())
    );
    t.ack(&record).await.unwrap();
    assert!(browse(&t, &q).await.is_empty());
    purge(&t, &q).await;
}

#[tokio::test]
async fn an_unsettled_delivery_comes_back_after_the_consumer_goes_away() {
    let Some(first) = nats_with("ack_wait=1").await else {
        return;
    };
    let q = queue("unsettled");
    first.publish(&q, b"{\"job\":\"urn:x\"}").await.unwrap();
    let held = pop(&first, &q, 2000).await.unwrap();
    assert_eq!(held.facts().count, Some(Count::Redelivered(0)));
    // The worker dies without settling.
    drop(held);
    first.close().await.unwrap();
    drop(first);

    let second = nats_with("ack_wait=1").await.unwrap();
    assert!(
        pop(&second, &q, 300).await.is_none(),
        "reserved until ack_wait"
    );
    let back = pop(&second, &q, 3000).await.expect("back after ack_wait");
    assert_eq!(back.body(), b"{\"job\":\"urn:x\"}");
    assert_eq!(back.facts().count, Some(Count::Redelivered(1)));
    second.ack(&back).await.unwrap();
    assert!(
        pop(&second, &q, 1500).await.is_none(),
        "acknowledged for good"
    );
    purge(&second, &q).await;
}

#[tokio::test]
async fn two_consumers_never_handle_one_delivery_twice() {
    let Some(t) = nats().await else { return };
    let Some(other) = nats().await else { return };
    let q = queue("competing");
    let n = 60;
    let publisher = app(&t, &q).build().unwrap();
    for i in 0..n {
        publisher.publish(URN, &json!({ "i": i })).await.unwrap();
    }
    let (one, two) = (Calls::default(), Calls::default());
    let a = app(&t, &q)
        .concurrency(4)
        .handle(URN, recording(&one, false))
        .build()
        .unwrap();
    let b = app(&other, &q)
        .concurrency(4)
        .handle(URN, recording(&two, false))
        .build()
        .unwrap();
    let (ra, rb) = tokio::join!(a.consume(idle(800)), b.consume(idle(800)));
    ra.unwrap();
    rb.unwrap();
    let ids: Vec<String> = one
        .all()
        .into_iter()
        .chain(two.all())
        .map(|c| c.2)
        .collect();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(ids.len(), n, "every message handled once");
    assert_eq!(unique.len(), n, "none twice");
    println!(
        "consumer one handled {}, consumer two {}",
        one.all().len(),
        two.all().len()
    );
    assert!(browse(&t, &q).await.is_empty());
    purge(&t, &q).await;
}

#[tokio::test]
async fn rewind_comes_back_first_and_rewind_behind_after_the_waiting_ones() {
    let Some(t) = nats().await else {
        return;
    };
    let q = queue("rewind");
    t.publish(&q, b"a").await.unwrap();
    t.publish(&q, b"b").await.unwrap();
    let rewinder = t.capabilities().rewinder().unwrap();

    let a = pop(&t, &q, 2000).await.unwrap();
    assert_eq!(a.body(), b"a");
    rewinder.rewind(&a).await.unwrap();
    let again = pop(&t, &q, 2000).await.unwrap();
    assert_eq!(again.body(), b"a", "a rewind comes back first");
    assert_eq!(again.facts().count, Some(Count::Redelivered(1)));

    // The runtime hands over the body with the attempts counted so far (its reconciliation);
    // an unreadable body is that body.
    rewinder.rewind_behind(&again, again.body()).await.unwrap();
    let b = pop(&t, &q, 2000).await.unwrap();
    assert_eq!(b.body(), b"b", "behind the waiting one");
    t.ack(&b).await.unwrap();
    let last = pop(&t, &q, 3000).await.unwrap();
    assert_eq!(
        last.body(),
        b"a",
        "an unreadable body is copied byte for byte"
    );
    assert_eq!(last.facts().count, Some(Count::Redelivered(0)), "a copy");
    t.ack(&last).await.unwrap();
    assert_eq!(published(&t, &q).await, 3, "the two, and one copy");
    assert!(
        pop(&t, &q, 300).await.is_none(),
        "the original was acknowledged"
    );

    // An envelope's copy carries the attempts JetStream counted (the body the runtime
    // reconciled with the count), and its headers.
    let envelope = br#"{"job":"urn:x","data":{},"attempts":0}"#;
    let mut headers = babelqueue_core::Headers::new();
    headers.insert(
        "traceparent".into(),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
    );
    t.send(&Outgoing::new(&q, envelope).headers(&headers))
        .await
        .unwrap();
    let first = pop(&t, &q, 2000).await.unwrap();
    rewinder.rewind(&first).await.unwrap();
    let second = pop(&t, &q, 2000).await.unwrap();
    assert_eq!(second.facts().count, Some(Count::Redelivered(1)));
    let counted = br#"{"job":"urn:x","data":{},"attempts":1}"#;
    rewinder.rewind_behind(&second, counted).await.unwrap();
    let copy = pop(&t, &q, 2000).await.unwrap();
    assert_eq!(copy.body(), br#"{"job":"urn:x","data":{},"attempts":1}"#);
    assert_eq!(
        copy.headers().get("traceparent"),
        headers.get("traceparent")
    );
    t.ack(&copy).await.unwrap();
    purge(&t, &q).await;
}

/// The Inspector shows what the ack subject said: the stream sequence as the id, and a
/// delivery given back with -NAK comes again with the same id, delivered twice.
#[tokio::test]
async fn the_inspector_shows_the_stream_sequence_and_a_redelivery() {
    let Some(t) = nats().await else {
        return;
    };
    let q = queue("inspect");
    t.publish(&q, b"first").await.unwrap();
    t.publish(&q, b"second").await.unwrap();
    let inspector = t.capabilities().inspector().expect("an Inspector");
    let stream = t.options().stream_name(&q).unwrap();

    let first = pop(&t, &q, 2000).await.unwrap();
    let view = inspector.inspect(&first);
    assert_eq!(
        view.id.as_deref(),
        Some("1"),
        "the first message of its stream"
    );
    assert_eq!(view.redelivered, Some(false));
    let shown: std::collections::HashMap<&str, &str> = view
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(shown["stream"], stream);
    assert_eq!(shown["consumer"], t.options().consumer);
    assert_eq!(shown["consumer_sequence"], "1");
    assert_eq!(shown["delivered"], "1");
    assert_eq!(shown["pending"], "1", "the second message waits");
    assert!(shown["published"].parse::<i128>().unwrap() > 0);

    t.capabilities()
        .rewinder()
        .unwrap()
        .rewind(&first)
        .await
        .unwrap();
    let again = pop(&t, &q, 2000).await.unwrap();
    assert_eq!(again.body(), b"first");
    let view = inspector.inspect(&again);
    assert_eq!(view.id.as_deref(), Some("1"), "the same stored message");
    assert_eq!(
        view.redelivered,
        Some(true),
        "JetStream delivered it before"
    );
    assert!(
        view.properties
            .contains(&("delivered".to_owned(), "2".to_owned()))
    );
    t.ack(&again).await.unwrap();
    let second = pop(&t, &q, 2000).await.unwrap();
    assert_eq!(inspector.inspect(&second).id.as_deref(), Some("2"));
    t.ack(&second).await.unwrap();
    purge(&t, &q).await;
}

#[tokio::test]
async fn capabilities_and_browse() {
    let Some(t) = nats().await else { return };
    let c = t.capabilities();
    assert!(matches!(c.redelivery_mode(), Redelivery::Native(_)));
    assert_eq!(c.send_parts(), Sends::body_only().headers().facts());
    assert!(c.rewinder().is_some() && c.browser().is_some());
    assert!(c.dead_letter_writer().is_none() && c.native_settler().is_none());

    let q = queue("browse");
    assert!(browse(&t, &q).await.is_empty(), "no stream yet: empty");
    for body in [&b"1"[..], b"2", b"3"] {
        t.publish(&q, body).await.unwrap();
    }
    let browser = c.browser().unwrap();
    assert_eq!(
        browser.browse(&q, 2).await.unwrap(),
        [b"1".to_vec(), b"2".to_vec()]
    );
    let first = pop(&t, &q, 2000).await.unwrap();
    t.ack(&first).await.unwrap();
    assert_eq!(
        browse(&t, &q).await,
        [b"2".to_vec(), b"3".to_vec()],
        "a gap is skipped"
    );
    purge(&t, &q).await;
}

#[tokio::test]
async fn bad_urls_and_headers_are_refused_before_anything_is_sent() {
    let Some(t) = nats().await else { return };
    let err = NatsTransport::connect(&with_options("bogus=1"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Config, "{err}");
    let q = queue("headers");
    let headers = Headers::from([("k".to_owned(), "line\r\nbreak".to_owned())]);
    let err = t
        .send(&Outgoing::new(&q, b"x").headers(&headers))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Unsupported);
    assert!(browse(&t, &q).await.is_empty());
    purge(&t, &q).await;
}

/// A nats-server of our own on a free port (with a user and a password, or with JetStream):
/// the binary `BQ_NATS_SERVER` names (`scripts/brokers.sh env` exports the one it built), else
/// `nats-server` on the PATH. Its log goes to a file of its own (the end of it says why a start
/// failed); dropping it kills the server (SIGKILL) and removes its log and its store.
struct Guarded {
    child: std::process::Child,
    port: u16,
    log: std::path::PathBuf,
    store: Option<std::path::PathBuf>,
}

impl Guarded {
    /// The last lines of its log.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
        if let Some(store) = &self.store {
            let _ = std::fs::remove_dir_all(store);
        }
    }
}

fn nats_server_binary() -> std::ffi::OsString {
    std::env::var_os("BQ_NATS_SERVER").unwrap_or_else(|| "nats-server".into())
}

/// Starts the server on `port` and waits (10 s at most) until its log says it listens there
/// and the port accepts a connection. A port someone else holds is a
/// [`StartError::PortTaken`](babelqueue_testkit::StartError); every failure names the port and
/// ends with the server's own log.
async fn start_guarded(port: u16) -> Result<Guarded, babelqueue_testkit::StartError> {
    start_server(port, false).await
}

/// [`start_guarded`] with JetStream (a store of its own under the temporary directory) and
/// without credentials.
async fn start_jetstream(port: u16) -> Result<Guarded, babelqueue_testkit::StartError> {
    start_server(port, true).await
}

async fn start_server(
    port: u16,
    jetstream: bool,
) -> Result<Guarded, babelqueue_testkit::StartError> {
    use babelqueue_testkit::StartError;
    let at = format!("nats-server on 127.0.0.1:{port}");
    let log =
        std::env::temp_dir().join(format!("bq-nats-guarded-{}-{port}.log", std::process::id()));
    let file = std::fs::File::create(&log)
        .map_err(|e| StartError::Failed(format!("{at}: {}: {e}", log.display())))?;
    let binary = nats_server_binary();
    let store = jetstream
        .then(|| std::env::temp_dir().join(format!("bq-nats-js-{}-{port}", std::process::id())));
    let mut command = std::process::Command::new(&binary);
    command.args(["-a", "127.0.0.1", "-p", &port.to_string()]);
    match &store {
        Some(store) => command.arg("--jetstream").arg("--store_dir").arg(store),
        None => command.args(["--user", "app", "--pass", "s3cret-pw"]),
    };
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(file)
        .spawn()
        .map_err(|e| StartError::Failed(format!("{at}: cannot run {binary:?}: {e}")))?;
    let mut server = Guarded {
        child,
        port,
        log,
        store,
    };
    let listening = format!("Listening for client connections on 127.0.0.1:{port}");
    for _ in 0..100 {
        if let Ok(Some(status)) = server.child.try_wait() {
            let why = format!("{at} exited with {status}: {}", server.log_tail());
            return Err(
                if why.contains("address already in use") || babelqueue_testkit::port_taken(port) {
                    StartError::PortTaken(why)
                } else {
                    StartError::Failed(why)
                },
            );
        }
        let ours = std::fs::read_to_string(&server.log).is_ok_and(|l| l.contains(&listening));
        if ours && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(server);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(StartError::Failed(format!(
        "{at} did not listen within 10 s: {}",
        server.log_tail()
    )))
}

/// Whether there is a nats-server binary; without one, `SKIPPED` (a failure with
/// `BQ_REQUIRE_BROKERS` set).
fn nats_server_or_skip() -> bool {
    let binary = nats_server_binary();
    match std::process::Command::new(&binary)
        .arg("--version")
        .output()
    {
        Ok(_) => true,
        Err(e) => {
            babelqueue_testkit::skip_or_fail(format!("no nats-server binary {binary:?} ({e})"));
            false
        }
    }
}

/// [`start_guarded`] on a free port (another one when it was taken before the server bound
/// it); `None` (skip) when there is no binary and brokers are not required.
async fn guarded_server() -> Option<Guarded> {
    if !nats_server_or_skip() {
        return None;
    }
    match babelqueue_testkit::on_free_port(3, start_guarded).await {
        Ok(server) => Some(server),
        Err(e) => panic!("no nats-server of our own: {e}"),
    }
}

/// A start on a port something else holds says which port and why, in the server's words.
#[tokio::test]
async fn a_guarded_server_on_a_taken_port_names_the_port_and_why() {
    if !nats_server_or_skip() {
        return;
    }
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let started = std::time::Instant::now();
    let Err(err) = start_guarded(port).await else {
        panic!("started on a port a listener holds");
    };
    assert!(started.elapsed() < Duration::from_secs(10), "{err:?}");
    let babelqueue_testkit::StartError::PortTaken(message) = err else {
        panic!("not a collision: {err:?}");
    };
    assert!(
        message.contains(&format!("nats-server on 127.0.0.1:{port} exited")),
        "{message}"
    );
    assert!(message.contains("address already in use"), "{message}");
}

#[tokio::test]
async fn refused_credentials_are_an_auth_error_naming_the_host_not_the_password() {
    let Some(server) = guarded_server().await else {
        return;
    };
    let port = server.port;
    let url = format!("nats://app:wrong-hunter2@127.0.0.1:{port}?timeout=3");
    let err = NatsTransport::connect(&url).await.unwrap_err();
    assert!(matches!(err, NatsError::Auth { .. }), "{err:?}");
    assert_eq!(err.kind(), TransportErrorKind::Auth);
    assert!(!err.is_transient());
    let shown = format!("{err} {err:?}");
    assert!(shown.contains(&format!("127.0.0.1:{port}")), "{shown}");
    assert!(!shown.contains("wrong-hunter2"), "{shown}");

    // The right password connects; this server has no JetStream: a configuration error.
    let url = format!("nats://app:s3cret-pw@127.0.0.1:{port}?timeout=3");
    let err = NatsTransport::connect(&url).await.unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Config, "{err}");
    assert!(!format!("{err} {err:?}").contains("s3cret-pw"));
}

/// A pull waiting when the connection drops (the server killed under it) ends at once, with a
/// transient connection error, instead of waiting out its expiry: its request and any answer
/// went with the connection, and the next pull goes out once the client reconnected.
#[tokio::test]
async fn a_pull_waiting_when_the_connection_drops_ends_at_once() {
    if !nats_server_or_skip() {
        return;
    }
    let server = match babelqueue_testkit::on_free_port(3, start_jetstream).await {
        Ok(server) => server,
        Err(e) => panic!("no nats-server of our own: {e}"),
    };
    let url = format!("nats://127.0.0.1:{}?timeout=2", server.port);
    let t = NatsTransport::connect(&url).await.unwrap();
    let q = queue("dropped");
    t.prepare_consume(&q, 1).await.unwrap();
    let pull = tokio::spawn({
        let t = t.clone();
        async move { t.pop(&q, Duration::from_secs(30)).await }
    });
    // The pull is waiting on the empty queue.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!pull.is_finished());
    let killed = std::time::Instant::now();
    drop(server);
    let popped = tokio::time::timeout(Duration::from_secs(10), pull)
        .await
        .expect("the pull ended within 10 s, not after its 30 s expiry")
        .unwrap();
    let err = popped.expect_err("a pull whose connection dropped");
    assert_eq!(err.kind(), TransportErrorKind::Connection, "{err}");
    assert!(err.is_transient());
    assert!(err.to_string().contains("connection"), "{err}");
    assert!(
        killed.elapsed() < Duration::from_secs(2),
        "{:?}",
        killed.elapsed()
    );
}

#[tokio::test]
async fn a_receive_takes_what_is_at_hand_and_a_batch_ack_confirms_them_all() {
    let Some(t) = nats_with("ack_wait=1").await else {
        return;
    };
    let q = queue("receive");
    purge(&t, &q).await;
    for n in 0..10 {
        t.publish(&q, format!("{{\"n\":{n}}}").as_bytes())
            .await
            .unwrap();
    }
    let caps = t.capabilities();
    assert_eq!(caps.default_prefetch_per_slot(), 4);
    // The first waits; the other seven are what the consumer has at hand (one no-wait pull).
    let first = t.receive(&q, 8, Duration::from_secs(2)).await.unwrap();
    let bodies: Vec<String> = first
        .iter()
        .map(|d| String::from_utf8_lossy(d.body()).into_owned())
        .collect();
    let want: Vec<String> = (0..8).map(|n| format!("{{\"n\":{n}}}")).collect();
    assert_eq!(bodies, want, "in stream order");
    let rest = t.receive(&q, 8, Duration::from_secs(2)).await.unwrap();
    assert_eq!(
        rest.len(),
        2,
        "never more than there is, and no wait to fill the batch"
    );
    // Nothing left: an empty receive after its wait, and no pull left behind that would take
    // the next message away from the next receive.
    assert!(
        t.receive(&q, 8, Duration::from_millis(200))
            .await
            .unwrap()
            .is_empty()
    );
    let hold = caps.hold_checker().expect("a hold checker");
    assert!(first.iter().chain(&rest).all(|d| hold.still_held(d)));
    caps.batch_acker()
        .expect("a batch acker")
        .ack_batch(&first)
        .await
        .unwrap();
    // The last two wait past ack_wait: no longer held, and JetStream delivers them again.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(rest.iter().all(|d| !hold.still_held(d)));
    let again = t.receive(&q, 8, Duration::from_secs(3)).await.unwrap();
    assert_eq!(again.len(), 2, "{again:?}");
    assert!(
        again
            .iter()
            .all(|d| d.facts().count == Some(Count::Redelivered(1))),
        "{again:?}"
    );
    caps.batch_acker().unwrap().ack_batch(&again).await.unwrap();
    assert!(
        t.receive(&q, 8, Duration::from_millis(1500))
            .await
            .unwrap()
            .is_empty(),
        "every message acknowledged, none redelivered"
    );
    purge(&t, &q).await;
}

#[tokio::test]
async fn publish_batch_keeps_the_order_over_windows_and_survives_a_deleted_stream() {
    let Some(t) = nats().await else {
        return;
    };
    let q = queue("publish-batch");
    purge(&t, &q).await;
    let bodies: Vec<Vec<u8>> = (0..600)
        .map(|n| format!("{{\"n\":{n}}}").into_bytes())
        .collect();
    let refs: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    let batch = t
        .capabilities()
        .batch_publisher()
        .expect("a batch publisher");
    batch.publish_batch(&q, &refs).await.unwrap();
    assert_eq!(
        browse(&t, &q).await,
        bodies,
        "every body, in order, byte for byte"
    );

    // The stream deleted behind the transport's back: the publishes it refused are sent again
    // once the stream is set up again.
    purge(&t, &q).await;
    batch.publish_batch(&q, &refs[..3]).await.unwrap();
    assert_eq!(browse(&t, &q).await, bodies[..3].to_vec());
    purge(&t, &q).await;
}
