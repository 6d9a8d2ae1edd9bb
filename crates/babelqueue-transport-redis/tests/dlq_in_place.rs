//! The dead-letter tools taking one entry of a few-thousand-entry DLQ in place ([`Taker`]),
//! against a real redis-server (`BQ_REDIS_URL`, default `redis://127.0.0.1:6379`), in both
//! layouts: a retry by id and a removal by id leave every other entry where it was, the
//! retried message lands on its queue as core writes it (checked against the drain path, on a
//! twin queue and on the memory transport), and an entry named by a content address `#2` is
//! the second copy, not the first.
//!
//! `cargo test -p babelqueue-transport-redis --test dlq_in_place`. With `BQ_REQUIRE_BROKERS`
//! set, an unreachable Redis fails the test; without it the test prints `SKIPPED` and returns.
//!
//! [`Taker`]: babelqueue_core::Taker

use babelqueue_core::redrive::{self, Access, Redrive};
use babelqueue_core::{Headers, MemoryTransport, Transport};
use babelqueue_testkit::{broker_or_skip, unique_queue};
use babelqueue_transport_redis::fred::interfaces::{KeysInterface, ListInterface};
use babelqueue_transport_redis::{FredClient, RedisTransport, layout};

const ENTRIES: usize = 3000;

fn base_url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn record(q: &str, n: usize) -> Vec<u8> {
    format!(
        r#"{{"job":"urn:babel:orders:created","data":{{"order_id":{n},"amount":"42.00"}},"meta":{{"id":"m-{n}","queue":"{q}"}},"attempts":3,"dead_letter":{{"reason":"failed","original_queue":"{q}","attempts":3}}}}"#
    )
    .into_bytes()
}

/// The stored values of a DLQ: records, a raw body twice (positions 10 and 2000) and, on the
/// default layout, a record (`m-99999`) stored in a `__bq_frame` with a header (position 1500).
fn seed(q: &str, laravel: bool) -> Vec<Vec<u8>> {
    let mut values = Vec::with_capacity(ENTRIES + 3);
    for n in 0..ENTRIES {
        match n {
            10 | 2000 => values.push(b"\xff raw bytes".to_vec()),
            1500 if !laravel => {
                let headers = Headers::from([("x-trace".to_owned(), "t-1".to_owned())]);
                values.push(layout::frame(&record(q, 99_999), &headers).into_owned());
            }
            _ => {}
        }
        values.push(record(q, n));
    }
    values
}

struct Keys {
    dlq: String,
    ready: String,
    notify: String,
}

fn keys(q: &str, laravel: bool) -> Keys {
    if laravel {
        Keys {
            dlq: format!("queues:{q}.dlq"),
            ready: format!("queues:{q}"),
            notify: format!("queues:{q}:notify"),
        }
    } else {
        Keys {
            dlq: format!("{q}.dlq"),
            ready: q.to_owned(),
            notify: format!("{q}:notify"),
        }
    }
}

async fn fill(raw: &FredClient, key: &str, values: &[Vec<u8>]) {
    let _: i64 = raw.raw().del(key).await.unwrap();
    for chunk in values.chunks(500) {
        let _: i64 = raw.raw().rpush(key, chunk.to_vec()).await.unwrap();
    }
}

async fn list(raw: &FredClient, key: &str) -> Vec<Vec<u8>> {
    raw.raw().lrange(key, 0, -1).await.unwrap()
}

async fn purge(raw: &FredClient, k: &Keys) {
    for key in [&k.dlq, &k.ready, &k.notify] {
        let _: i64 = raw.raw().del(key.as_str()).await.unwrap_or(0);
    }
}

/// What core publishes for `body` on a retry: the drain path on the memory transport.
async fn retried_by_core(q: &str, body: &[u8]) -> Vec<u8> {
    let memory = MemoryTransport::new();
    let dlq = format!("{q}.dlq");
    memory.publish(&dlq, body).await.unwrap();
    let options = Redrive::new().ids(["m-1234"]).access(Access::Drain);
    redrive::redrive(&memory, &dlq, &options, &mut |_| {})
        .await
        .unwrap();
    memory.bodies(q).remove(0)
}

async fn one_layout(raw: &FredClient, laravel: bool) {
    let url = if laravel {
        format!("{}?laravel=1", base_url())
    } else {
        base_url()
    };
    let layout = if laravel { "laravel" } else { "reliable" };
    let redis = RedisTransport::connect(&url).await.expect("connect");
    assert!(redis.capabilities().taker().is_some(), "{layout}: a Taker");
    let (q, twin) = (unique_queue("inplace"), unique_queue("inplace-twin"));
    let (k, tk) = (keys(&q, laravel), keys(&twin, laravel));
    let (values, twin_values) = (seed(&q, laravel), seed(&twin, laravel));
    fill(raw, &k.dlq, &values).await;
    fill(raw, &tk.dlq, &twin_values).await;
    let (dlq, twin_dlq) = (format!("{q}.dlq"), format!("{twin}.dlq"));

    // Retry one entry, in place and (on the twin) by draining.
    let retry = |access| Redrive::new().ids(["m-1234"]).access(access);
    let report = redrive::redrive(&redis, &dlq, &retry(Access::InPlace), &mut |_| {})
        .await
        .expect("retry in place");
    let twin_report = redrive::redrive(&redis, &twin_dlq, &retry(Access::Drain), &mut |_| {})
        .await
        .expect("retry by draining");
    assert_eq!(report.redriven, 1, "{layout}");
    assert_eq!(
        report.items.len(),
        values.len(),
        "{layout}: every entry reported"
    );
    assert_eq!(
        report.items.iter().map(|i| &i.id).collect::<Vec<_>>(),
        twin_report.items.iter().map(|i| &i.id).collect::<Vec<_>>(),
        "{layout}: the same ids, in the same order"
    );
    let at = values.iter().position(|v| *v == record(&q, 1234)).unwrap();
    let mut rest = values.clone();
    rest.remove(at);
    assert!(
        list(raw, &k.dlq).await == rest,
        "{layout}: the rest intact, in order"
    );
    let mut twin_rest = twin_values.clone();
    twin_rest.remove(at);
    // A drain restores a framed record as a copy, without its headers; in place it stays.
    let unframed: Vec<Vec<u8>> = twin_rest
        .iter()
        .map(|v| layout::unframe(v).0.into_owned())
        .collect();
    assert!(
        list(raw, &tk.dlq).await == unframed,
        "{layout}: the drain keeps the order too"
    );
    let published = list(raw, &k.ready).await;
    assert_eq!(
        published,
        vec![retried_by_core(&q, &record(&q, 1234)).await],
        "{layout}: the retried message as core writes it"
    );
    assert_eq!(
        list(raw, &tk.ready).await.len(),
        1,
        "{layout}: twin retried"
    );
    let notify: i64 = raw.raw().llen(k.notify.as_str()).await.unwrap();
    assert_eq!(
        notify,
        i64::from(laravel),
        "{layout}: one wake-up token on Laravel"
    );

    // Remove one record, and the second copy of the raw body (by its content address).
    let listed = redrive::entries(&redis, &dlq, 0).await.unwrap();
    let second = listed
        .iter()
        .find(|e| e.body == b"\xff raw bytes" && e.id.ends_with("#2"))
        .map(|e| e.id.clone())
        .expect("the second copy is numbered #2");
    let mut wanted = vec!["m-2500".to_owned(), second];
    if !laravel {
        wanted.push("m-99999".to_owned());
    }
    let gone = redrive::remove(&redis, &dlq, &wanted, &mut |_| {})
        .await
        .expect("remove in place");
    assert_eq!(gone.len(), wanted.len(), "{layout}: {gone:?}");
    let mut expected = rest.clone();
    expected.retain(|v| *v != record(&q, 2500));
    let second_copy = expected
        .iter()
        .enumerate()
        .filter(|(_, v)| v.as_slice() == b"\xff raw bytes")
        .map(|(n, _)| n)
        .nth(1)
        .unwrap();
    expected.remove(second_copy);
    if !laravel {
        // The framed record is named by the body it carries, and taken with its frame.
        let framed = expected
            .iter()
            .position(|v| v.starts_with(b"{\"__bq_frame\""))
            .unwrap();
        expected.remove(framed);
    }
    let now = list(raw, &k.dlq).await;
    assert!(now == expected, "{layout}: only the named entries are gone");
    assert_eq!(now[10], b"\xff raw bytes", "{layout}: the first copy stays");
    purge(raw, &k).await;
    purge(raw, &tk).await;
}

#[tokio::test]
async fn retry_and_remove_one_entry_in_place_in_both_layouts() {
    let url = base_url();
    let Some(raw) = broker_or_skip(&format!("Redis at {url}"), FredClient::connect(&url)).await
    else {
        return;
    };
    one_layout(&raw, false).await;
    one_layout(&raw, true).await;
}
