//! Many at once on a real Redis, both layouts: one script call reserves up to N, one
//! acknowledges a batch, one publishes a batch; a lapsed reservation is never acknowledged by
//! a batch; a batch-published, batch-received, batch-acknowledged run loses nothing.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use babelqueue_core::{BatchAcker, BatchPublisher, Delivery};
use babelqueue_transport_redis::client::Reply;
use babelqueue_transport_redis::fred::interfaces::SortedSetsInterface;
use babelqueue_transport_redis::scripts::LuaScript;
use babelqueue_transport_redis::{RedisClient, RedisError, RedisOptions};

use super::*;

/// The real client, counting the round trips the transport makes.
#[derive(Debug)]
struct Counting {
    inner: FredClient,
    evals: AtomicUsize,
    others: AtomicUsize,
}

impl Counting {
    fn calls(&self) -> (usize, usize) {
        (
            self.evals.swap(0, Ordering::SeqCst),
            self.others.swap(0, Ordering::SeqCst),
        )
    }
}

#[async_trait]
impl RedisClient for Counting {
    async fn eval(
        &self,
        script: &'static LuaScript,
        keys: Vec<Vec<u8>>,
        args: Vec<Vec<u8>>,
    ) -> Result<Reply, RedisError> {
        self.evals.fetch_add(1, Ordering::SeqCst);
        self.inner.eval(script, keys, args).await
    }
    async fn rpush(&self, key: &[u8], value: &[u8]) -> Result<(), RedisError> {
        self.others.fetch_add(1, Ordering::SeqCst);
        self.inner.rpush(key, value).await
    }
    async fn zadd(&self, key: &[u8], score: i64, member: &[u8]) -> Result<(), RedisError> {
        self.others.fetch_add(1, Ordering::SeqCst);
        self.inner.zadd(key, score, member).await
    }
    async fn zrem(&self, key: &[u8], member: &[u8]) -> Result<i64, RedisError> {
        self.others.fetch_add(1, Ordering::SeqCst);
        self.inner.zrem(key, member).await
    }
    async fn lrange(&self, key: &[u8], start: i64, stop: i64) -> Result<Vec<Vec<u8>>, RedisError> {
        self.others.fetch_add(1, Ordering::SeqCst);
        self.inner.lrange(key, start, stop).await
    }
    async fn blpop(&self, key: &[u8], timeout: Duration) -> Result<(), RedisError> {
        self.others.fetch_add(1, Ordering::SeqCst);
        self.inner.blpop(key, timeout).await
    }
    async fn quit(&self) -> Result<(), RedisError> {
        self.inner.quit().await
    }
}

async fn counting(laravel: bool) -> (RedisTransport, Arc<Counting>) {
    let client = Arc::new(Counting {
        inner: FredClient::connect(&base_url()).await.expect("connect"),
        evals: AtomicUsize::new(0),
        others: AtomicUsize::new(0),
    });
    let mut options = RedisOptions::default();
    if laravel {
        options.layout = babelqueue_transport_redis::Layout::Laravel;
    }
    (RedisTransport::with_client(client.clone(), options), client)
}

fn bodies(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!(r#"{{"job":"{URN}","data":{{"n":{i}}},"attempts":0}}"#).into_bytes())
        .collect()
}

/// What is reserved and not settled: the processing list (reliable) or the reserved set
/// (Laravel), and the deadlines set (reliable).
async fn held(raw: &FredClient, t: &RedisTransport, laravel: bool, q: &str) -> i64 {
    if laravel {
        raw.raw().zcard(t.options().reserved(q)).await.unwrap()
    } else {
        let processing: i64 = raw.raw().llen(t.options().processing(q)).await.unwrap();
        let deadlines: i64 = raw.raw().zcard(t.options().deadlines(q)).await.unwrap();
        assert_eq!(processing, deadlines, "one deadline per reservation");
        processing
    }
}

#[tokio::test]
async fn one_script_call_publishes_reserves_and_acknowledges_a_batch() {
    let Some(raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("batch-calls");
        let (t, calls) = counting(laravel).await;
        let published = bodies(8);
        let slices: Vec<&[u8]> = published.iter().map(Vec::as_slice).collect();
        t.publish_batch(&q, &slices).await.unwrap();
        assert_eq!(calls.calls(), (1, 0), "one call publishes the batch");
        assert_eq!(
            list(&raw, &t.options().ready(&q)).await,
            published,
            "in order"
        );
        if laravel {
            let tokens: i64 = raw.raw().llen(t.options().notify(&q)).await.unwrap();
            assert_eq!(tokens, 8, "one wake-up token per job");
        }

        // The first receive also sweeps (or migrates): at most two calls for five deliveries.
        let first = t.receive(&q, 5, Duration::from_secs(1)).await.unwrap();
        assert_eq!(first.len(), 5);
        let (evals, others) = calls.calls();
        assert!(
            evals <= 3 && others == 0,
            "{evals} scripts, {others} other calls"
        );
        assert_eq!(held(&raw, &t, laravel, &q).await, 5);
        // The next one, within the sweep interval: one call, and it takes what is left.
        let rest = t.receive(&q, 5, Duration::from_secs(1)).await.unwrap();
        assert_eq!(rest.len(), 3);
        assert_eq!(calls.calls(), (1, 0));
        let got: Vec<&[u8]> = first.iter().chain(&rest).map(Delivery::body).collect();
        assert_eq!(got, slices, "received in order, byte for byte");

        let all: Vec<Delivery> = first.into_iter().chain(rest).collect();
        t.ack_batch(&all).await.unwrap();
        assert_eq!(calls.calls(), (1, 0), "one call acknowledges the batch");
        assert_eq!(held(&raw, &t, laravel, &q).await, 0);
        assert!(list(&raw, &t.options().ready(&q)).await.is_empty());
    }
}

#[tokio::test]
async fn a_batch_never_acknowledges_a_reservation_that_lapsed() {
    let Some(raw) = redis().await else { return };
    let q = queue("batch-lapsed");
    let t = transport(false, Some(1)).await;
    let published = bodies(2);
    let slices: Vec<&[u8]> = published.iter().map(Vec::as_slice).collect();
    t.publish_batch(&q, &slices).await.unwrap();
    let both = t.receive(&q, 2, Duration::from_secs(1)).await.unwrap();
    assert_eq!(both.len(), 2);
    // The first reservation lapses and is swept back to the ready list by another consumer.
    let lapsed = RedisTransport::reservation_of(&both[0]).unwrap().to_vec();
    let members: Vec<Vec<u8>> = raw
        .raw()
        .zrange(t.options().deadlines(&q), 0, -1, None, false, None, false)
        .await
        .unwrap();
    let member = members
        .into_iter()
        .find(|m| m.ends_with(&lapsed))
        .expect("the first reservation's deadline member");
    let _: i64 = raw
        .raw()
        .zadd(
            t.options().deadlines(&q),
            None,
            None,
            false,
            false,
            (0.0, member),
        )
        .await
        .unwrap();
    assert_eq!(t.sweep(&q).await.unwrap(), 1);

    t.ack_batch(&both).await.unwrap();
    // The swept one stays for its next consumer; the other is gone.
    assert_eq!(list(&raw, &t.options().ready(&q)).await, vec![lapsed]);
    assert_eq!(held(&raw, &t, false, &q).await, 0);
}

#[tokio::test]
async fn a_batch_native_worker_handles_every_message_once() {
    let Some(raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("batch-worker");
        let t = transport(laravel, None).await;
        let seen: Arc<Mutex<Vec<i64>>> = Arc::default();
        let s = seen.clone();
        let a = app(&t, &q)
            .concurrency(4)
            .prefetch(16)
            .handle(URN, move |ctx: Context| {
                let data: Value = ctx.data_as().unwrap();
                s.lock().unwrap().push(data["n"].as_i64().unwrap());
                async { Ok::<(), HandlerError>(()) }
            })
            .build()
            .unwrap();
        let envelopes: Vec<Envelope> = (0..300)
            .map(|n| a.envelope(URN).data(&json!({ "n": n })).build().unwrap())
            .collect();
        a.publish_batch(&q, &envelopes).await.unwrap();
        let summary = a
            .consume(Consume::new().max_messages(300).handle_signals(false))
            .await
            .unwrap();
        assert_eq!(summary.processed, 300);
        let mut all = seen.lock().unwrap().clone();
        all.sort_unstable();
        assert_eq!(all, (0..300).collect::<Vec<_>>(), "each exactly once");
        assert_eq!(
            held(&raw, &t, laravel, &q).await,
            0,
            "nothing left reserved"
        );
        assert!(list(&raw, &t.options().ready(&q)).await.is_empty());
    }
}

#[tokio::test]
async fn an_idle_receive_wakes_when_work_arrives_and_keeps_the_order() {
    let Some(raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("batch-idle");
        let t = transport(laravel, None).await;
        let waiting = {
            let (t, q) = (t.clone(), q.clone());
            tokio::spawn(async move {
                let got = t.receive(&q, 10, Duration::from_secs(5)).await.unwrap();
                (got, tokio::time::Instant::now())
            })
        };
        // Long enough for a polling wait to back off (100, 200, 400 ms pauses: it would look
        // again only at 1.5 s).
        tokio::time::sleep(Duration::from_millis(800)).await;
        let published = bodies(3);
        let slices: Vec<&[u8]> = published.iter().map(Vec::as_slice).collect();
        let sent = tokio::time::Instant::now();
        t.publish_batch(&q, &slices).await.unwrap();
        let (got, at) = waiting.await.unwrap();
        let late = at.saturating_duration_since(sent);
        assert!(
            late < Duration::from_millis(300),
            "woken {late:?} after the publish"
        );
        // The wait moved nothing: whatever the first receive did not take is still in order.
        let mut all: Vec<Vec<u8>> = got.iter().map(|d| d.body().to_vec()).collect();
        all.extend(list(&raw, &t.options().ready(&q)).await);
        assert_eq!(all, published);
        t.ack_batch(&got).await.unwrap();
    }
}

/// A clock the test moves: fractional epoch seconds.
fn pinned(
    at: f64,
) -> (
    Arc<std::sync::atomic::AtomicU64>,
    babelqueue_transport_redis::Clock,
) {
    let now = Arc::new(std::sync::atomic::AtomicU64::new(at.to_bits()));
    let read = now.clone();
    (
        now,
        Arc::new(move || f64::from_bits(read.load(Ordering::SeqCst))),
    )
}

fn set(now: &std::sync::atomic::AtomicU64, at: f64) {
    now.store(at.to_bits(), Ordering::SeqCst);
}

#[tokio::test]
async fn a_held_delivery_is_refused_once_its_reservation_lapsed() {
    let Some(_raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("hold-check");
        let (now, clock) = pinned(1_000_000.2);
        let t = transport(laravel, Some(90)).await.with_clock(clock);
        let capabilities = t.capabilities();
        assert_eq!(capabilities.default_prefetch_per_slot(), 4);
        let check = capabilities.hold_checker().expect("a hold check");
        let a = app(&t, &q)
            .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
            .build()
            .unwrap();
        a.publish(URN, &json!({})).await.unwrap();
        let got = t.receive(&q, 4, Duration::from_secs(1)).await.unwrap();
        assert_eq!(got.len(), 1, "laravel={laravel}");
        // Reserved until floor(now) + 90 = 1 000 090, which a sweep returns from then on.
        set(&now, 1_000_089.99);
        assert!(check.still_held(&got[0]), "laravel={laravel}");
        set(&now, 1_000_090.0);
        assert!(!check.still_held(&got[0]), "laravel={laravel}");
        // A delivery some other way (a tool's reservation) is never refused.
        let foreign = Delivery::new(q.as_str(), b"{}".to_vec());
        assert!(check.still_held(&foreign));
        t.ack(&got[0]).await.unwrap_or_default();
    }
    // Recovery off: a reservation never lapses, so it is never refused.
    let q = queue("hold-check-off");
    let (now, clock) = pinned(1_000_000.2);
    let t = RedisTransport::builder(url(false))
        .retry_after(None)
        .connect()
        .await
        .unwrap()
        .with_clock(clock);
    t.publish(&q, br#"{"job":"urn:x"}"#).await.unwrap();
    let got = t.receive(&q, 1, Duration::from_secs(1)).await.unwrap();
    set(&now, 9.0e9);
    assert!(t.capabilities().hold_checker().unwrap().still_held(&got[0]));
    t.ack(&got[0]).await.unwrap();
}

/// Held deliveries that lapse while they wait for a slot are not started: the sweep returns
/// them and they are handled once, after a fresh reserve (which the Laravel layout counts as
/// an attempt, so their second reserve shows).
#[tokio::test]
async fn lapsed_held_deliveries_come_back_and_are_handled_once() {
    let Some(raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("hold-lapse");
        let (now, clock) = pinned(2_000_000.2);
        let t = transport(laravel, Some(30)).await.with_clock(clock);
        let seen: Arc<Mutex<Vec<(i64, i64)>>> = Arc::default();
        let (s, moved) = (seen.clone(), now.clone());
        let a = app(&t, &q)
            .concurrency(1)
            .handle(URN, move |ctx: Context| {
                let data: Value = ctx.data_as().unwrap();
                let n = data["n"].as_i64().unwrap();
                s.lock().unwrap().push((n, ctx.attempts()));
                // The second handler runs while three more wait for the slot: it takes
                // longer than their reservations last.
                if n == 1 {
                    set(&moved, 2_000_031.0);
                }
                async { Ok::<(), HandlerError>(()) }
            })
            .build()
            .unwrap();
        let envelopes: Vec<Envelope> = (0..5)
            .map(|n| a.envelope(URN).data(&json!({ "n": n })).build().unwrap())
            .collect();
        a.publish_batch(&q, &envelopes).await.unwrap();
        let summary = a
            .consume(Consume::new().max_messages(5).handle_signals(false))
            .await
            .unwrap();
        assert_eq!(summary.processed, 5, "laravel={laravel}");
        let seen = seen.lock().unwrap().clone();
        let mut handled: Vec<i64> = seen.iter().map(|(n, _)| *n).collect();
        handled.sort_unstable();
        assert_eq!(
            handled,
            vec![0, 1, 2, 3, 4],
            "each once, laravel={laravel}: {seen:?}"
        );
        if laravel {
            // 0 came alone, 1-4 in the second reserve; 2-4 were refused and reserved again (the
            // attempts before this try, which the Laravel reserve counts).
            let attempts: Vec<i64> = (0..5)
                .map(|n| seen.iter().find(|(m, _)| *m == n).unwrap().1)
                .collect();
            assert_eq!(attempts, vec![0, 0, 1, 1, 1], "{seen:?}");
        }
        assert_eq!(
            held(&raw, &t, laravel, &q).await,
            0,
            "nothing left reserved"
        );
        assert!(list(&raw, &t.options().ready(&q)).await.is_empty());
    }
}
