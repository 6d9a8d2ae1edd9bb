//! The Redis idempotency store against the real server: exclusive claims under concurrency,
//! two concurrent deliveries of one id running the handler once, lifetimes that expire, and a
//! failure releasing the claim.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use babelqueue_core::idempotency::{Claim, IdempotencyStore, idempotent};
use babelqueue_core::{Action, Context, Handler, HandlerError, Headers};
use babelqueue_envelope::Envelope;
use babelqueue_transport_redis::fred::interfaces::{KeysInterface, ListInterface};
use babelqueue_transport_redis::idempotency::{DONE, IN_FLIGHT};
use babelqueue_transport_redis::{FredClient, RedisIdempotencyStore};
use serde_json::json;

use super::{URN, app, base_url, idle, purge, queue, redis, transport};

/// A store with a prefix of its own, so runs never share keys.
async fn store() -> RedisIdempotencyStore {
    RedisIdempotencyStore::connect(&base_url())
        .await
        .expect("connect")
        .prefix(format!("{}:", babelqueue_testkit::unique_queue("it-idemp")))
}

async fn value(raw: &FredClient, key: &[u8]) -> Option<String> {
    raw.raw()
        .get::<Option<String>, _>(String::from_utf8(key.to_vec()).unwrap())
        .await
        .unwrap()
}

async fn pttl(raw: &FredClient, key: &[u8]) -> i64 {
    raw.raw()
        .pttl(String::from_utf8(key.to_vec()).unwrap())
        .await
        .unwrap()
}

async fn delete(raw: &FredClient, key: &[u8]) {
    let _: i64 = raw
        .raw()
        .del(String::from_utf8(key.to_vec()).unwrap())
        .await
        .unwrap_or(0);
}

fn ctx(id: &str) -> Context {
    let envelope = Envelope::builder(URN).message_id(id).build().unwrap();
    Context::new(envelope, "q", Headers::new())
}

/// A handler that counts its runs, sleeps `hold`, and fails its first `fail_first` runs.
fn counting(runs: &Arc<AtomicUsize>, hold: Duration, fail_first: usize) -> impl Handler + Clone {
    let runs = runs.clone();
    move |_ctx: Context| {
        let runs = runs.clone();
        async move {
            let n = runs.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(hold).await;
            if n < fail_first {
                Err(HandlerError::new("boom"))
            } else {
                Ok(())
            }
        }
    }
}

#[tokio::test]
async fn idempotency_concurrent_claims_of_one_id_acquire_exactly_once() {
    let Some(raw) = redis().await else { return };
    let one = Arc::new(store().await.claim_ttl(Duration::from_secs(30)));
    // A second worker: its own connection, the same prefix.
    let two = Arc::new(
        RedisIdempotencyStore::from_transport(&transport(false, None).await)
            .prefix(one.key_prefix().to_owned())
            .done_ttl(Duration::from_secs(120)),
    );
    let id = "order-1042";
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let s = if i % 2 == 0 { one.clone() } else { two.clone() };
            tokio::spawn(async move { s.claim(id).await.unwrap() })
        })
        .collect();
    let mut claims = Vec::new();
    for t in tasks {
        claims.push(t.await.unwrap());
    }
    let acquired = claims.iter().filter(|c| **c == Claim::Acquired).count();
    let in_flight = claims.iter().filter(|c| **c == Claim::InFlight).count();
    assert_eq!((acquired, in_flight), (1, 19), "{claims:?}");

    let key = one.key(id);
    assert_eq!(key, format!("{}order-1042", one.key_prefix()).into_bytes());
    assert_eq!(value(&raw, &key).await.as_deref(), Some(IN_FLIGHT));
    let ttl = pttl(&raw, &key).await;
    assert!(ttl > 0 && ttl <= 30_000, "claim lifetime {ttl}");
    assert!(!one.seen(id).await.unwrap(), "in flight is not done");

    two.remember(id).await.unwrap();
    assert_eq!(value(&raw, &key).await.as_deref(), Some(DONE));
    let ttl = pttl(&raw, &key).await;
    assert!(ttl > 30_000 && ttl <= 120_000, "done lifetime {ttl}");
    assert!(one.seen(id).await.unwrap());
    assert_eq!(one.claim(id).await.unwrap(), Claim::Done);

    // A key another writer set (any value but the in-flight marker) counts as done.
    let foreign = one.key("from-go");
    let _: () = raw
        .raw()
        .set(
            String::from_utf8(foreign.clone()).unwrap(),
            "1",
            None,
            None,
            false,
        )
        .await
        .unwrap();
    assert_eq!(one.claim("from-go").await.unwrap(), Claim::Done);
    delete(&raw, &key).await;
    delete(&raw, &foreign).await;
}

#[tokio::test]
async fn idempotency_two_concurrent_deliveries_run_the_handler_once() {
    let Some(raw) = redis().await else { return };
    let store = Arc::new(store().await);
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = idempotent(
        store.clone(),
        counting(&runs, Duration::from_millis(300), 0),
    );
    let (a, b) = tokio::join!(handler.call(ctx("dup-1")), handler.call(ctx("dup-1")));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran once");
    let (ok, err) = match (a, b) {
        (Ok(()), Err(e)) | (Err(e), Ok(())) => ((), e),
        other => panic!("one delivery must run and one must wait: {other:?}"),
    };
    let () = ok;
    assert_eq!(err.exception(), "InFlight");
    assert!(matches!(err.action(), Action::RetryAfter(_)));
    // The retried duplicate finds the id done: acknowledged without running.
    handler.call(ctx("dup-1")).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        value(&raw, &store.key("dup-1")).await.as_deref(),
        Some(DONE)
    );
    delete(&raw, &store.key("dup-1")).await;
}

#[tokio::test]
async fn idempotency_two_workers_given_one_message_twice_run_it_once() {
    let Some(raw) = redis().await else { return };
    // The Laravel layout honours the in-flight retry delay through its delayed set; the reliable
    // layout re-queues at once (see docs/transports/redis.md).
    let q = queue("idemp");
    let store = Arc::new(store().await);
    let runs = Arc::new(AtomicUsize::new(0));
    let worker = |store: Arc<RedisIdempotencyStore>, runs: Arc<AtomicUsize>| {
        let q = q.clone();
        async move {
            let t = transport(true, Some(60)).await;
            app(&t, &q)
                .dead_letter(true)
                .handle(
                    URN,
                    idempotent(store, counting(&runs, Duration::from_millis(500), 0)),
                )
                .build()
                .unwrap()
        }
    };
    let one = worker(store.clone(), runs.clone()).await;
    let two = worker(store.clone(), runs.clone()).await;
    let envelope = one
        .envelope(URN)
        .message_id("dup-app-1")
        .data(&json!({"order_id": 1042}))
        .build()
        .unwrap();
    one.publish_envelope(&q, &envelope, &Headers::new())
        .await
        .unwrap();
    one.publish_envelope(&q, &envelope, &Headers::new())
        .await
        .unwrap();
    let (a, b) = tokio::join!(one.consume(idle(2500)), two.consume(idle(2500)));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran once");
    assert!(
        a.processed >= 1 && b.processed >= 1,
        "both workers took a delivery"
    );
    let keys = [
        format!("queues:{q}"),
        format!("queues:{q}:reserved"),
        format!("queues:{q}:delayed"),
        format!("queues:{q}.dlq"),
    ];
    for key in keys {
        let n: i64 = raw.raw().exists(key.clone()).await.unwrap();
        assert_eq!(n, 0, "{key} is empty: both deliveries were acknowledged");
    }
    assert_eq!(
        value(&raw, &store.key("dup-app-1")).await.as_deref(),
        Some(DONE)
    );
    delete(&raw, &store.key("dup-app-1")).await;
    purge(&raw, &q).await;
}

#[tokio::test]
async fn idempotency_claims_and_successes_expire() {
    let Some(raw) = redis().await else { return };
    let store = store()
        .await
        .claim_ttl(Duration::from_millis(300))
        .done_ttl(Duration::from_millis(300));
    // A worker died holding the claim: the id is free again once the claim lapses.
    assert_eq!(store.claim("ttl-1").await.unwrap(), Claim::Acquired);
    assert_eq!(store.claim("ttl-1").await.unwrap(), Claim::InFlight);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(value(&raw, &store.key("ttl-1")).await, None);
    assert_eq!(store.claim("ttl-1").await.unwrap(), Claim::Acquired);
    // A remembered success lapses too.
    store.remember("ttl-1").await.unwrap();
    assert!(store.seen("ttl-1").await.unwrap());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!store.seen("ttl-1").await.unwrap());
    assert_eq!(store.claim("ttl-1").await.unwrap(), Claim::Acquired);

    // Zero lifetimes never expire.
    let forever = store
        .clone()
        .claim_ttl(Duration::ZERO)
        .done_ttl(Duration::ZERO);
    assert_eq!(forever.claim("ttl-2").await.unwrap(), Claim::Acquired);
    assert_eq!(pttl(&raw, &forever.key("ttl-2")).await, -1);
    forever.remember("ttl-2").await.unwrap();
    assert_eq!(pttl(&raw, &forever.key("ttl-2")).await, -1);
    delete(&raw, &store.key("ttl-1")).await;
    delete(&raw, &store.key("ttl-2")).await;
}

#[tokio::test]
async fn idempotency_a_failure_releases_the_claim() {
    let Some(raw) = redis().await else { return };
    let store = Arc::new(store().await);
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = idempotent(store.clone(), counting(&runs, Duration::ZERO, 1));
    assert!(handler.call(ctx("fail-1")).await.is_err());
    assert_eq!(
        value(&raw, &store.key("fail-1")).await,
        None,
        "the failed delivery released its claim"
    );
    handler.call(ctx("fail-1")).await.unwrap();
    handler.call(ctx("fail-1")).await.unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "failed run + the one success"
    );

    // Through the runtime on the reliable layout: the failed first delivery is retried and runs
    // again, then the message is acknowledged.
    let q = queue("idemp-fail");
    let t = transport(false, None).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let a = app(&t, &q)
        .dead_letter(true)
        .handle(
            URN,
            idempotent(store.clone(), counting(&runs, Duration::ZERO, 1)),
        )
        .build()
        .unwrap();
    let envelope = a.envelope(URN).message_id("fail-app-1").build().unwrap();
    a.publish_envelope(&q, &envelope, &Headers::new())
        .await
        .unwrap();
    let summary = a.consume(idle(500)).await.unwrap();
    assert_eq!(summary.processed, 2);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let left: i64 = raw.raw().llen(q.clone()).await.unwrap();
    let dlq: i64 = raw.raw().llen(format!("{q}.dlq")).await.unwrap();
    assert_eq!((left, dlq), (0, 0));
    assert_eq!(
        value(&raw, &store.key("fail-app-1")).await.as_deref(),
        Some(DONE)
    );
    delete(&raw, &store.key("fail-1")).await;
    delete(&raw, &store.key("fail-app-1")).await;
    purge(&raw, &q).await;
}
