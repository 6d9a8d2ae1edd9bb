//! The Redis transport against a real redis-server (`BQ_REDIS_URL`, default
//! `redis://127.0.0.1:6379`; `scripts/brokers.sh up redis` starts one), in both layouts, and
//! against the Python reference SDK (`BQ_PYTHON`) on the same server.
//!
//! With `BQ_REQUIRE_BROKERS` set, an unreachable Redis fails every test; without it the tests
//! print `SKIPPED` and return.

#![allow(clippy::print_stdout)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{
    App, AppBuilder, Consume, Context, HandlerError, Headers, Transport, UnknownUrn,
};
use babelqueue_envelope::Envelope;
use babelqueue_testkit::{PythonPeer, broker_or_skip, skip_or_fail, unique_queue};
use babelqueue_transport_redis::fred::interfaces::{KeysInterface, ListInterface};
use babelqueue_transport_redis::{FredClient, RedisTransport};
use serde_json::{Value, json};

const URN: &str = "urn:babel:orders:created";

/// The Redis idempotency store.
#[path = "it/idempotency.rs"]
mod idempotency;

/// Reserve, acknowledge and publish in batches.
#[path = "it/batching.rs"]
mod batching;

/// Settle scripts that never lose a message, and a Laravel reserve that keeps the bytes.
#[path = "it/reliability.rs"]
mod reliability;

/// Mutual TLS against a server that requires a client certificate.
#[path = "it/mtls.rs"]
mod mtls;

/// What Laravel's scripts do to a job (Redis's cjson), and the `laravel_safe` check.
#[path = "it/laravel_safe.rs"]
mod laravel_safe;

fn base_url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn url(laravel: bool) -> String {
    if laravel {
        format!("{}?laravel=1", base_url())
    } else {
        base_url()
    }
}

/// A connected raw client, or `None` (skip) when Redis is down and not required.
async fn redis() -> Option<FredClient> {
    let url = base_url();
    broker_or_skip(&format!("Redis at {url}"), FredClient::connect(&url)).await
}

fn queue(name: &str) -> String {
    unique_queue(&format!("it-{name}"))
}

async fn transport(laravel: bool, retry_after: Option<u64>) -> RedisTransport {
    let mut builder = RedisTransport::builder(url(laravel));
    if let Some(s) = retry_after {
        builder = builder.retry_after(Some(Duration::from_secs(s)));
    }
    builder.connect().await.expect("connect")
}

fn app(t: &RedisTransport, q: &str) -> AppBuilder {
    App::builder(t.clone())
        .queue(q)
        .poll_timeout(Duration::from_millis(100))
        .rewind_pause(Duration::from_millis(50))
}

fn idle(ms: u64) -> Consume {
    Consume::new()
        .idle_timeout(Duration::from_millis(ms))
        .handle_signals(false)
}

async fn list(raw: &FredClient, key: &str) -> Vec<Vec<u8>> {
    raw.raw().lrange(key, 0, -1).await.unwrap()
}

async fn purge(raw: &FredClient, q: &str) {
    for key in [
        q.to_owned(),
        format!("{q}:processing"),
        format!("{q}:processing:deadlines"),
        format!("{q}.dlq"),
        format!("{q}.dlq:processing"),
        format!("{q}.dlq:processing:deadlines"),
        format!("queues:{q}"),
        format!("queues:{q}:reserved"),
        format!("queues:{q}:delayed"),
        format!("queues:{q}:notify"),
        format!("queues:{q}.dlq"),
        format!("queues:{q}.dlq:notify"),
    ] {
        let _: i64 = raw.raw().del(key).await.unwrap_or(0);
    }
}

fn dlq_key(laravel: bool, q: &str) -> String {
    if laravel {
        format!("queues:{q}.dlq")
    } else {
        format!("{q}.dlq")
    }
}

/// One handler call: (urn, attempts, meta.id, headers).
type Call = (String, i64, String, Headers);

/// Records every handler call.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<Call>>>);

impl Calls {
    fn record(&self, ctx: &Context) {
        self.0.lock().unwrap().push((
            ctx.urn().into_owned(),
            ctx.attempts(),
            ctx.message_id().unwrap_or_default().into_owned(),
            ctx.headers().clone(),
        ));
    }
    fn attempts(&self) -> Vec<i64> {
        self.0.lock().unwrap().iter().map(|c| c.1).collect()
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
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

#[tokio::test]
async fn publish_consume_ack_in_both_layouts() {
    let Some(raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("roundtrip");
        let t = transport(laravel, None).await;
        let calls = Calls::default();
        let a = app(&t, &q)
            .handle(URN, recording(&calls, false))
            .build()
            .unwrap();
        let data = babelqueue_envelope::RawJson::parse(
            r#"{"order_id":1042,"big":123456789012345678901234}"#,
        )
        .unwrap();
        let envelope = a.envelope(URN).data_raw(data).build().unwrap();
        a.publish_envelope(&q, &envelope, &Headers::new())
            .await
            .unwrap();
        let stored = list(&raw, &t.options().ready(&q)).await;
        assert_eq!(
            stored,
            vec![envelope.encode().unwrap().into_bytes()],
            "stored byte for byte"
        );
        let summary = a.consume(idle(300)).await.unwrap();
        assert_eq!(summary.processed, 1, "laravel={laravel}");
        assert_eq!(calls.attempts(), [0]);
        // settled: nothing in flight anywhere
        assert!(list(&raw, &t.options().ready(&q)).await.is_empty());
        assert!(list(&raw, &format!("{q}:processing")).await.is_empty());
        let reserved: i64 = raw.raw().exists(t.options().reserved(&q)).await.unwrap();
        assert_eq!(reserved, 0);
        purge(&raw, &q).await;
    }
}

/// The Inspector shows the reservation Redis holds: its keys and the deadline that is its score
/// there (and the token before the `:` of the reliable layout's member); no id, no redelivery.
#[tokio::test]
async fn the_inspector_shows_the_reservation_redis_holds_in_both_layouts() {
    use babelqueue_transport_redis::fred::interfaces::SortedSetsInterface;
    let Some(raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("inspect");
        let t = transport(laravel, Some(90)).await;
        t.publish(&q, br#"{"job":"urn:babel:orders:created","attempts":0}"#)
            .await
            .unwrap();
        let d = t
            .pop(&q, Duration::from_secs(2))
            .await
            .unwrap()
            .expect("the message");
        let view = t
            .capabilities()
            .inspector()
            .expect("an Inspector")
            .inspect(&d);
        assert_eq!(
            (&view.id, view.redelivered),
            (&None, None),
            "laravel={laravel}"
        );
        let shown: HashMap<&str, &str> = view
            .properties
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let reserved = RedisTransport::reservation_of(&d).unwrap().to_vec();
        let (set, member) = if laravel {
            assert_eq!(shown["layout"], "laravel");
            assert_eq!(shown["reserved_set"], t.options().reserved(&q));
            (t.options().reserved(&q), reserved)
        } else {
            assert_eq!(shown["layout"], "reliable");
            assert_eq!(shown["processing_list"], t.options().processing(&q));
            assert_eq!(shown["deadlines_set"], t.options().deadlines(&q));
            assert_eq!(
                list(&raw, &t.options().processing(&q)).await,
                std::slice::from_ref(&reserved)
            );
            let mut member = format!("{}:", shown["reservation_token"]).into_bytes();
            member.extend_from_slice(&reserved);
            (t.options().deadlines(&q), member)
        };
        let score: Option<f64> = raw.raw().zscore(&set, member).await.unwrap();
        let score = score.expect("the reservation is scored in Redis");
        assert_eq!(
            shown["reservation_deadline"],
            format!("{score}"),
            "laravel={laravel}: the deadline is the reservation's score"
        );
        t.ack(&d).await.unwrap();
        purge(&raw, &q).await;
    }
}

#[tokio::test]
async fn retry_then_dead_letter_in_both_layouts() {
    let Some(raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("retry");
        let t = transport(laravel, None).await;
        let calls = Calls::default();
        let a = app(&t, &q)
            .max_attempts(3)
            .dead_letter(true)
            .handle(URN, recording(&calls, true))
            .build()
            .unwrap();
        let envelope = a
            .envelope(URN)
            .data(&json!({"n": [1, {}], "s": "é"}))
            .meta("ext", &json!({"acme": 1}))
            .build()
            .unwrap();
        a.publish_envelope(&q, &envelope, &Headers::new())
            .await
            .unwrap();
        a.consume(idle(400)).await.unwrap();
        assert_eq!(calls.attempts(), [0, 1, 2], "laravel={laravel}");
        let dlq = list(&raw, &dlq_key(laravel, &q)).await;
        assert_eq!(dlq.len(), 1);
        let record: Value = serde_json::from_slice(&dlq[0]).unwrap();
        assert_eq!(record["attempts"], 3);
        assert_eq!(record["data"], json!({"n": [1, {}], "s": "é"}));
        assert_eq!(record["meta"]["ext"], json!({"acme": 1}));
        assert_eq!(record["dead_letter"]["reason"], "failed");
        assert_eq!(record["dead_letter"]["original_queue"], json!(q));
        assert!(list(&raw, &t.options().ready(&q)).await.is_empty());
        purge(&raw, &q).await;
    }
}

#[tokio::test]
async fn poison_is_dead_lettered_byte_for_byte_in_every_configuration() {
    let Some(raw) = redis().await else { return };
    let bodies: [&[u8]; 4] = [
        b"\xff\xfe{garbage",
        b"not json",
        br#"{"job":"urn:babel:orders:created","attempts":1.5}"#,
        br#"{"data":{}}"#,
    ];
    for laravel in [false, true] {
        for (strategy, dead_letter) in [
            (UnknownUrn::Delete, false),
            (UnknownUrn::Fail, false),
            (UnknownUrn::Fail, true),
        ] {
            let q = queue("poison");
            let t = transport(laravel, None).await;
            let calls = Calls::default();
            let a = app(&t, &q)
                .on_unknown_urn(strategy)
                .dead_letter(dead_letter)
                .handle_any(recording(&calls, false))
                .build()
                .unwrap();
            for body in bodies {
                t.publish(&q, body).await.unwrap();
            }
            a.consume(idle(300)).await.unwrap();
            assert_eq!(calls.len(), 0, "poison never reaches a handler");
            let records = list(&raw, &dlq_key(laravel, &q)).await;
            assert_eq!(
                records.len(),
                4,
                "laravel={laravel} {strategy} dlq={dead_letter}"
            );
            for (record, body) in records.iter().zip(bodies) {
                let text = String::from_utf8(record.clone()).unwrap();
                let parsed = Envelope::parse_object(record).unwrap();
                assert!(text.contains(r#""reason":"poison""#), "{text}");
                match (parsed.get("raw"), std::str::from_utf8(body)) {
                    (Some(r), Err(_)) => {
                        assert_eq!(r.as_str(), "\"//57Z2FyYmFnZQ==\"");
                        assert!(text.contains(r#""raw_encoding":"base64""#));
                    }
                    (Some(r), Ok(original)) => assert_eq!(r.as_string().unwrap(), original),
                    (None, Ok(original)) => {
                        assert!(text.starts_with(&original[..original.len() - 1]))
                    }
                    (None, Err(_)) => panic!("non-UTF-8 must be wrapped"),
                }
            }
            assert!(list(&raw, &t.options().ready(&q)).await.is_empty());
            assert!(list(&raw, &format!("{q}:processing")).await.is_empty());
            let reserved: i64 = raw.raw().exists(t.options().reserved(&q)).await.unwrap();
            assert_eq!(reserved, 0);
            purge(&raw, &q).await;
        }
    }
}

#[tokio::test]
async fn headers_ride_beside_the_envelope_and_survive_a_retry() {
    let Some(raw) = redis().await else { return };
    let q = queue("headers");
    let t = transport(false, None).await;
    let calls = Calls::default();
    let c = calls.clone();
    let a = app(&t, &q)
        .handle(URN, move |ctx: Context| {
            let c = c.clone();
            async move {
                c.record(&ctx);
                if ctx.attempts() == 0 {
                    Err(HandlerError::new("once"))
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    let headers = Headers::from([(
        "traceparent".to_owned(),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
    )]);
    let envelope = a.envelope(URN).build().unwrap();
    a.publish_envelope(&q, &envelope, &headers).await.unwrap();
    let stored = String::from_utf8(list(&raw, &q).await.remove(0)).unwrap();
    assert!(
        stored.starts_with(r#"{"__bq_frame":1,"headers":{"traceparent":"#),
        "{stored}"
    );
    a.consume(idle(300)).await.unwrap();
    let seen = calls.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|c| c.3 == headers), "{seen:?}");
    purge(&raw, &q).await;
}

#[tokio::test]
async fn laravel_layout_delays_and_backs_off_through_the_delayed_set() {
    let Some(raw) = redis().await else { return };
    let q = queue("delay");
    let t = transport(true, None).await;
    let calls = Calls::default();
    let c = calls.clone();
    let a = app(&t, &q)
        .max_attempts(5)
        .retry_backoff(Duration::from_secs(1))
        .handle(URN, move |ctx: Context| {
            let c = c.clone();
            async move {
                c.record(&ctx);
                if ctx.attempts() == 0 {
                    Err(HandlerError::new("later"))
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    let envelope = a.envelope(URN).build().unwrap();
    a.publish_delayed(&q, &envelope, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(
        list(&raw, &t.options().ready(&q)).await.is_empty(),
        "delayed, not ready"
    );
    let started = std::time::Instant::now();
    a.consume(idle(2500)).await.unwrap();
    assert_eq!(calls.attempts(), [0, 1]);
    // one delayed publish and one back-off, each at least a whole second away
    assert!(started.elapsed() >= Duration::from_secs(1));
    // the reliable layout refuses a delayed publish instead of dropping the delay
    let reliable = transport(false, None).await;
    let refused = App::builder(reliable)
        .build()
        .unwrap()
        .publish_delayed(&q, &envelope, Duration::from_secs(1))
        .await;
    assert!(refused.is_err());
    purge(&raw, &q).await;
}

#[tokio::test]
async fn two_workers_never_handle_one_delivery_twice() {
    let Some(raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("two");
        let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let make = |seen: Arc<Mutex<HashMap<String, usize>>>, q: String| async move {
            let t = transport(laravel, Some(600)).await;
            app(&t, &q)
                .concurrency(4)
                .handle(URN, move |ctx: Context| {
                    let seen = seen.clone();
                    async move {
                        *seen
                            .lock()
                            .unwrap()
                            .entry(ctx.message_id().unwrap().into_owned())
                            .or_default() += 1;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        Ok::<(), HandlerError>(())
                    }
                })
                .build()
                .unwrap()
        };
        let (one, two) = (
            make(seen.clone(), q.clone()).await,
            make(seen.clone(), q.clone()).await,
        );
        const N: usize = 300;
        for i in 0..N {
            one.publish(URN, &json!({"i": i})).await.unwrap();
        }
        let (a, b) = tokio::join!(one.consume(idle(500)), two.consume(idle(500)));
        let (a, b) = (a.unwrap().processed, b.unwrap().processed);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), N, "laravel={laravel}");
        assert!(
            seen.values().all(|n| *n == 1),
            "a delivery was handled twice: {seen:?}"
        );
        assert_eq!(a + b, N as u64);
        assert!(a > 0 && b > 0, "both workers took part ({a}/{b})");
        purge(&raw, &q).await;
    }
}

/// Set in the child process [`a_worker_killed_mid_handler_loses_nothing`] starts: the test
/// binary re-runs that one test, which then acts as a worker (URL and queue in the value)
/// instead of as the parent. This keeps the crash test free of any other build artefact.
const CHILD_WORKER: &str = "BQ_IT_CHILD_WORKER";

/// The child's side: consume `queue` on `url`, print `handling <id> attempts=<n>` and then
/// hold the message for a minute, so the parent can kill it mid-handler.
async fn child_worker(spec: &str) {
    use std::io::Write as _;
    let (url, queue) = spec
        .split_once(' ')
        .expect("BQ_IT_CHILD_WORKER is 'URL QUEUE'");
    let app = App::builder(RedisTransport::connect(url).await.expect("child connects"))
        .queue(queue)
        .handle_any(|ctx: Context| async move {
            let id = ctx.message_id().unwrap_or_default().into_owned();
            {
                let mut out = std::io::stdout().lock();
                writeln!(out, "handling {id} attempts={}", ctx.attempts())?;
                out.flush()?;
            }
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<(), HandlerError>(())
        })
        .build()
        .unwrap();
    app.run().await.unwrap();
}

#[tokio::test]
async fn a_worker_killed_mid_handler_loses_nothing() {
    if let Ok(spec) = std::env::var(CHILD_WORKER) {
        return child_worker(&spec).await;
    }
    let Some(raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("sigkill");
        let t = transport(laravel, Some(1)).await;
        let a = app(&t, &q).build().unwrap();
        let id = a.publish(URN, &json!({"order_id": 7})).await.unwrap();
        let url = format!(
            "{}{}retry_after=1",
            url(laravel),
            if laravel { "&" } else { "?" }
        );
        // The same test binary, running only this test, in worker mode.
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "a_worker_killed_mid_handler_loses_nothing",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_WORKER, format!("{url} {q}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines
            .by_ref()
            .map(Result::unwrap)
            // libtest prints `test <name> ... ` on the same line first
            .find_map(|line| line.find("handling ").map(|at| line[at..].to_owned()))
            .expect("the child worker took the message");
        assert_eq!(first.trim(), format!("handling {id} attempts=0"));
        child.kill().unwrap(); // SIGKILL, mid-handler
        child.wait().unwrap();

        // Another worker gets it back once retry_after lapses, and handles it.
        let calls = Calls::default();
        let survivor = app(&t, &q)
            .handle(URN, recording(&calls, false))
            .build()
            .unwrap();
        survivor.consume(idle(3500)).await.unwrap();
        let seen = calls.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "laravel={laravel}: {seen:?}");
        assert_eq!(seen[0].2, id);
        // The reliable layout does not count a recovery as an attempt; Laravel's reserved member
        // already carried attempts + 1.
        assert_eq!(seen[0].1, if laravel { 1 } else { 0 });
        purge(&raw, &q).await;
    }
}

#[tokio::test]
async fn rediss_with_a_private_ca() {
    let Some(raw) = redis().await else { return };
    let Ok(ca) = std::env::var("BQ_REDIS_TLS_CA") else {
        skip_or_fail("BQ_REDIS_TLS_CA (the private CA of rediss://) is not set");
        return;
    };
    let url = std::env::var("BQ_REDISS_URL").unwrap_or_else(|_| "rediss://127.0.0.1:6380".into());
    let q = queue("tls");
    let t = RedisTransport::builder(format!("{url}?ca_file={ca}"))
        .connect()
        .await
        .expect("TLS connect");
    t.publish(&q, b"{\"job\":\"urn:x\"}").await.unwrap();
    let d = t.pop(&q, Duration::from_secs(1)).await.unwrap().unwrap();
    assert_eq!(d.body(), b"{\"job\":\"urn:x\"}");
    t.ack(&d).await.unwrap();
    // without the CA, the server's certificate is refused
    assert!(RedisTransport::connect(&url).await.is_err());
    // the builder's ca_file, with a client certificate offered (this server does not ask for
    // one, so the handshake must still succeed with it configured)
    let (cert, key, _) = babelqueue_testkit::tls::client_files("redis-live");
    let t = RedisTransport::builder(url.clone())
        .ca_file(&ca)
        .client_certificate(&cert, &key)
        .connect()
        .await
        .expect("TLS connect with a client certificate configured");
    t.publish(&q, b"{\"job\":\"urn:y\"}").await.unwrap();
    let d = t.pop(&q, Duration::from_secs(1)).await.unwrap().unwrap();
    assert_eq!(d.body(), b"{\"job\":\"urn:y\"}");
    t.ack(&d).await.unwrap();
    purge(&raw, &q).await;
}

// ------------------------------------------------------------------------------------------------
// Interop with the Python reference SDK (babelqueue 1.24.0) on the same Redis.

/// The reference SDK running `tests/python/peer.py`, or `None` (skip) when it is missing and
/// not required.
fn python() -> Option<PythonPeer> {
    PythonPeer::find_or_skip(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/peer.py"),
        &["babelqueue.redis_transport"],
    )
}

async fn peer(python: &PythonPeer, args: &[&str]) -> Vec<Value> {
    python.run(args).await
}

#[tokio::test]
async fn interop_rust_produces_python_consumes_in_both_layouts() {
    let Some(raw) = redis().await else { return };
    let Some(py) = python() else { return };
    for laravel in [false, true] {
        let q = queue("r2p");
        let t = transport(laravel, None).await;
        let a = app(&t, &q).build().unwrap();
        let data = json!({"order_id": 1042, "city": "İstanbul ☕", "tags": [], "nested": {}});
        let envelope = a
            .envelope(URN)
            .data(&data)
            .trace_id("trace-r2p")
            .build()
            .unwrap();
        a.publish_envelope(&q, &envelope, &Headers::new())
            .await
            .unwrap();
        let lines = peer(
            &py,
            &[
                "consume",
                &url(laravel),
                &q,
                "1",
                "--urn",
                URN,
                "--timeout",
                "1",
            ],
        )
        .await;
        assert_eq!(lines.len(), 1, "laravel={laravel}");
        let got = &lines[0];
        assert_eq!(got["urn"], URN);
        assert_eq!(got["trace_id"], "trace-r2p");
        assert_eq!(got["attempts"], 0);
        assert_eq!(got["data"], data);
        assert_eq!(got["meta"]["lang"], "rust");
        assert_eq!(got["meta"]["id"], json!(envelope.message_id().unwrap()));
        purge(&raw, &q).await;
    }
}

#[tokio::test]
async fn interop_python_produces_rust_consumes_in_both_layouts() {
    let Some(raw) = redis().await else { return };
    let Some(py) = python() else { return };
    for laravel in [false, true] {
        let q = queue("p2r");
        let ids = peer(
            &py,
            &[
                "publish",
                &url(laravel),
                &q,
                URN,
                r#"{"order_id":7,"s":"é"}"#,
                "2",
            ],
        )
        .await;
        let t = transport(laravel, None).await;
        let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
        let s = seen.clone();
        let a = app(&t, &q)
            .handle(URN, move |ctx: Context| {
                let s = s.clone();
                async move {
                    let meta: Value = serde_json::from_str(ctx.meta().to_raw().as_str()).unwrap();
                    s.lock().unwrap().push(json!({"data": ctx.data_as::<Value>()?, "meta": meta, "attempts": ctx.attempts()}));
                    Ok::<(), HandlerError>(())
                }
            })
            .build()
            .unwrap();
        a.consume(idle(300)).await.unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "laravel={laravel}");
        for (got, id) in seen.iter().zip(&ids) {
            assert_eq!(got["data"], json!({"order_id": 7, "s": "é"}));
            assert_eq!(got["meta"]["lang"], "python");
            assert_eq!(got["meta"]["id"], id["id"]);
            assert_eq!(got["attempts"], 0);
        }
        purge(&raw, &q).await;
    }
}

#[tokio::test]
async fn interop_retries_and_dead_letters_cross_between_sdks() {
    let Some(raw) = redis().await else { return };
    let Some(py) = python() else { return };
    for laravel in [false, true] {
        let t = transport(laravel, None).await;

        // Rust fails once (its retry re-queues attempts 1); Python then handles it.
        let q = queue("xretry");
        let calls = Calls::default();
        let a = app(&t, &q)
            .max_attempts(5)
            .handle(URN, recording(&calls, true))
            .build()
            .unwrap();
        a.publish(URN, &json!({"n": 1})).await.unwrap();
        a.consume(Consume::new().max_messages(1).handle_signals(false))
            .await
            .unwrap();
        let lines = peer(
            &py,
            &[
                "consume",
                &url(laravel),
                &q,
                "1",
                "--urn",
                URN,
                "--timeout",
                "1",
            ],
        )
        .await;
        assert_eq!(
            lines[0]["attempts"], 1,
            "laravel={laravel}: Python sees the Rust retry"
        );

        // Python fails once (its retry re-queues attempts 1); Rust then handles it.
        let q = queue("pretry");
        peer(&py, &["publish", &url(laravel), &q, URN, "{}", "1"]).await;
        peer(
            &py,
            &[
                "consume",
                &url(laravel),
                &q,
                "1",
                "--fail-urn",
                URN,
                "--max-attempts",
                "5",
                "--timeout",
                "1",
            ],
        )
        .await;
        let calls = Calls::default();
        app(&t, &q)
            .handle(URN, recording(&calls, false))
            .build()
            .unwrap()
            .consume(idle(300))
            .await
            .unwrap();
        assert_eq!(
            calls.attempts(),
            [1],
            "laravel={laravel}: Rust sees the Python retry"
        );

        // Python dead-letters; Rust reads the record.
        let q = queue("pdlq");
        App::builder(t.clone())
            .queue(q.clone())
            .build()
            .unwrap()
            .publish(URN, &json!({"n": 2}))
            .await
            .unwrap();
        let lines = peer(
            &py,
            &[
                "consume",
                &url(laravel),
                &q,
                "2",
                "--fail-urn",
                URN,
                "--max-attempts",
                "2",
                "--dead-letter",
                "--timeout",
                "1",
            ],
        )
        .await;
        assert_eq!(
            lines
                .iter()
                .map(|l| l["attempts"].as_i64().unwrap())
                .collect::<Vec<_>>(),
            [0, 1]
        );
        let records = babelqueue_core::redrive::list(&t, &format!("{q}.dlq"), 0)
            .await
            .unwrap();
        assert_eq!(records.len(), 1, "laravel={laravel}");
        let record: Value = serde_json::from_slice(&records[0]).unwrap();
        assert_eq!(
            (
                record["dead_letter"]["reason"].as_str(),
                record["dead_letter"]["lang"].as_str()
            ),
            (Some("failed"), Some("python"))
        );
        assert_eq!(record["attempts"], 2);
        assert_eq!(record["meta"]["lang"], "rust");

        // Rust dead-letters; Python reads the record.
        let q = queue("rdlq");
        peer(&py, &["publish", &url(laravel), &q, URN, r#"{"n":3}"#, "1"]).await;
        let calls = Calls::default();
        app(&t, &q)
            .max_attempts(2)
            .dead_letter(true)
            .handle(URN, recording(&calls, true))
            .build()
            .unwrap()
            .consume(idle(300))
            .await
            .unwrap();
        assert_eq!(calls.attempts(), [0, 1]);
        let lines = peer(&py, &["drain", &url(laravel), &format!("{q}.dlq")]).await;
        assert_eq!(lines.len(), 1, "laravel={laravel}");
        let record: Value = serde_json::from_str(lines[0]["body"].as_str().unwrap()).unwrap();
        assert_eq!(
            (
                record["dead_letter"]["reason"].as_str(),
                record["dead_letter"]["lang"].as_str()
            ),
            (Some("failed"), Some("rust"))
        );
        assert_eq!(
            (record["attempts"].as_i64(), record["meta"]["lang"].as_str()),
            (Some(2), Some("python"))
        );
        assert_eq!(record["data"], json!({"n": 3}));

        purge(&raw, &q).await;
    }
}
