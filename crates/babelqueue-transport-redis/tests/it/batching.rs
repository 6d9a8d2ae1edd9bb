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
