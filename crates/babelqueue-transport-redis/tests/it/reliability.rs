//! Regression tests for the settle scripts: a write that fails (a dead-letter key of the wrong
//! type) never loses the message, and the Laravel reserve keeps every byte but `attempts`.
//! Both need a real Redis: Lua errors and cjson are server behaviour.

use babelqueue_core::{Delivery, Redeliver, Redelivered, Redelivery};
use babelqueue_testkit::reading::{Class, classify};
use babelqueue_transport_redis::RedisClient;
use babelqueue_transport_redis::fred::interfaces::SortedSetsInterface;
use babelqueue_transport_redis::scripts;

use super::*;

async fn set_string(raw: &FredClient, key: &str) {
    let _: () = raw
        .raw()
        .set(key, "notalist", None, None, false)
        .await
        .unwrap();
}

async fn llen(raw: &FredClient, key: &str) -> i64 {
    raw.raw().llen(key).await.unwrap()
}

async fn zcard(raw: &FredClient, key: &str) -> i64 {
    raw.raw().zcard(key).await.unwrap()
}

/// Where the one message of `q` is: (ready, in flight, dead-lettered).
async fn census(raw: &FredClient, t: &RedisTransport, laravel: bool, q: &str) -> (i64, i64, i64) {
    let ready = llen(raw, &t.options().ready(q)).await;
    let in_flight = if laravel {
        zcard(raw, &t.options().reserved(q)).await + zcard(raw, &t.options().delayed(q)).await
    } else {
        llen(raw, &t.options().processing(q)).await
    };
    let dlq_type: String = raw.raw().r#type(dlq_key(laravel, q)).await.unwrap();
    let dead = if dlq_type == "list" {
        llen(raw, &dlq_key(laravel, q)).await
    } else {
        0
    };
    (ready, in_flight, dead)
}

#[tokio::test]
async fn a_failed_dead_letter_write_loses_nothing_and_succeeds_once_the_dlq_is_fixed() {
    let Some(raw) = redis().await else { return };
    for laravel in [false, true] {
        let q = queue("dlq-broken");
        let t = transport(laravel, Some(1)).await;
        let calls = Calls::default();
        let a = app(&t, &q)
            .max_attempts(1)
            .dead_letter(true)
            .handle(URN, recording(&calls, true))
            .build()
            .unwrap();
        // The reproduction of the report: the DLQ key holds a string.
        set_string(&raw, &dlq_key(laravel, &q)).await;
        a.publish(URN, &json!({"n": 1})).await.unwrap();
        a.consume(idle(300)).await.unwrap();
        // At least once: on a slow machine the lapsed reservation can come back (and fail to
        // be dead-lettered again) before the loop idles out.
        assert!(calls.len() >= 1, "laravel={laravel}");
        assert_eq!(
            census(&raw, &t, laravel, &q).await,
            (0, 1, 0),
            "laravel={laravel}: the failed dead-letter write left the reservation in place"
        );
        let dlq_type: String = raw.raw().r#type(dlq_key(laravel, &q)).await.unwrap();
        assert_eq!(dlq_type, "string", "nothing was pushed onto the broken key");

        // Fixed: the reservation lapses (retry_after 1 s), comes back, and is dead-lettered.
        let _: i64 = raw.raw().del(dlq_key(laravel, &q)).await.unwrap();
        let before = calls.len();
        a.consume(idle(3_000)).await.unwrap();
        assert!(calls.len() > before, "laravel={laravel}: it came back");
        assert_eq!(
            census(&raw, &t, laravel, &q).await,
            (0, 0, 1),
            "laravel={laravel}"
        );
        purge(&raw, &q).await;
    }
}

#[tokio::test]
async fn a_wrongly_typed_key_makes_every_moving_script_touch_nothing() {
    let Some(raw) = redis().await else { return };
    let body = br#"{"job":"urn:babel:orders:created","data":{},"attempts":0}"#;
    // Reliable layout: a broken processing list or deadline set refuses the reserve.
    for broken in [":processing", ":processing:deadlines"] {
        let q = queue("wrongtype");
        let t = transport(false, Some(90)).await;
        t.publish(&q, body).await.unwrap();
        set_string(&raw, &format!("{q}{broken}")).await;
        let err = t.pop(&q, Duration::from_millis(50)).await.unwrap_err();
        assert!(err.to_string().contains("BQWRONGTYPE"), "{err}");
        assert_eq!(list(&raw, &q).await, vec![body.to_vec()], "{broken}");
        purge(&raw, &q).await;
    }
    // Reliable layout: a release onto a broken ready list keeps the reservation.
    let q = queue("wrongtype");
    let t = transport(false, Some(90)).await;
    t.publish(&q, body).await.unwrap();
    let d = t.pop(&q, Duration::from_millis(50)).await.unwrap().unwrap();
    set_string(&raw, &q).await;
    assert!(redeliver(&t, &d, body, None).await.is_err());
    assert_eq!(llen(&raw, &t.options().processing(&q)).await, 1);
    assert_eq!(zcard(&raw, &t.options().deadlines(&q)).await, 1);
    purge(&raw, &q).await;

    // Laravel layout: a broken reserved set or notify list refuses the reserve; a broken
    // delayed set refuses the release; a broken ready list refuses the migrate.
    for broken in [":reserved", ":notify"] {
        let q = queue("wrongtype");
        let t = transport(true, Some(90)).await;
        t.publish(&q, body).await.unwrap();
        set_string(&raw, &format!("queues:{q}{broken}")).await;
        let err = t.pop(&q, Duration::from_millis(50)).await.unwrap_err();
        assert!(err.to_string().contains("BQWRONGTYPE"), "{err}");
        assert_eq!(llen(&raw, &format!("queues:{q}")).await, 1, "{broken}");
        purge(&raw, &q).await;
    }
    let q = queue("wrongtype");
    let t = transport(true, Some(90)).await;
    t.publish(&q, body).await.unwrap();
    let d = t.pop(&q, Duration::from_millis(50)).await.unwrap().unwrap();
    set_string(&raw, &t.options().delayed(&q)).await;
    assert!(
        redeliver(&t, &d, body, Some(Duration::from_secs(5)))
            .await
            .is_err()
    );
    assert_eq!(zcard(&raw, &t.options().reserved(&q)).await, 1);
    let _: i64 = raw.raw().del(t.options().delayed(&q)).await.unwrap();
    // An expired reservation with a broken ready list stays where it is.
    let _: () = raw
        .raw()
        .zadd(
            t.options().reserved(&q),
            None,
            None,
            false,
            false,
            (1.0, "lapsed"),
        )
        .await
        .unwrap();
    let _: i64 = raw.raw().del(t.options().ready(&q)).await.unwrap();
    set_string(&raw, &t.options().ready(&q)).await;
    assert!(t.migrate(&q).await.is_err());
    assert_eq!(zcard(&raw, &t.options().reserved(&q)).await, 2);
    purge(&raw, &q).await;
}

/// Sends `d` back through the transport's own redelivery.
async fn redeliver(
    t: &RedisTransport,
    d: &Delivery,
    body: &[u8],
    delay: Option<Duration>,
) -> Result<(), babelqueue_core::TransportError> {
    let Redelivery::Native(redeliverer) = t.capabilities().redelivery_mode() else {
        panic!("Redis redelivers natively")
    };
    let done = redeliverer
        .redeliver(d, Redeliver::new(body, Some(1), delay))
        .await?;
    assert_eq!(done, Redelivered::Settled, "the scripts settle it");
    Ok(())
}

/// Whether the runtime would classify `d` as poison.
fn is_poison(d: &Delivery) -> bool {
    matches!(classify(d.body(), d.facts(), d.queue()), Class::Poison(_))
}

/// Reserves `job` through the Laravel reserve script and returns `(job, member)`.
async fn reserve_member(raw: &FredClient, q: &str, job: &[u8]) -> (Vec<u8>, Vec<u8>) {
    purge(raw, q).await;
    let _: i64 = raw.raw().rpush(format!("queues:{q}"), job).await.unwrap();
    let reply = raw
        .eval(
            &scripts::RESERVE_ZSET,
            vec![
                format!("queues:{q}").into_bytes(),
                format!("queues:{q}:reserved").into_bytes(),
                format!("queues:{q}:notify").into_bytes(),
            ],
            vec![b"1000".to_vec()],
        )
        .await
        .unwrap();
    let babelqueue_transport_redis::Reply::Array(pair) = reply else {
        panic!("{reply:?}")
    };
    let mut pair = pair.into_iter().map(|r| r.into_bytes().unwrap());
    (pair.next().unwrap(), pair.next().unwrap())
}

#[tokio::test]
async fn the_laravel_reserve_changes_only_the_attempts_token() {
    let Some(raw) = redis().await else { return };
    let q = queue("splice");
    let cases: [(&str, &str); 10] = [
        (
            r#"{"job":"urn:x","data":{"big":12345678901234567890,"list":[],"z":1,"a":2},"attempts":0}"#,
            r#"{"job":"urn:x","data":{"big":12345678901234567890,"list":[],"z":1,"a":2},"attempts":1}"#,
        ),
        (
            r#"{"attempts":2,"job":"urn:x","data":{"attempts":7,"s":"\"attempts\":9"}}"#,
            r#"{"attempts":3,"job":"urn:x","data":{"attempts":7,"s":"\"attempts\":9"}}"#,
        ),
        (
            " {\n \"job\" : \"urn:x\" ,\n \"attempts\" :\t41 \n} ",
            " {\n \"job\" : \"urn:x\" ,\n \"attempts\" :\t42 \n} ",
        ),
        // The last duplicate wins, as in cjson and in the runtime's codec.
        (
            r#"{"job":"urn:x","attempts":5,"attempts":1}"#,
            r#"{"job":"urn:x","attempts":5,"attempts":2}"#,
        ),
        (
            r#"{"job":"urn:x","attempt\u0073":3}"#,
            r#"{"job":"urn:x","attempt\u0073":4}"#,
        ),
        (
            r#"{"job":"urn:x","attempts":-5}"#,
            r#"{"job":"urn:x","attempts":-4}"#,
        ),
        (
            r#"{"job":"urn:x","attempts":1.5}"#,
            r#"{"job":"urn:x","attempts":2.5}"#,
        ),
        (
            r#"{"job":"urn:x","attempts":2e0}"#,
            r#"{"job":"urn:x","attempts":3}"#,
        ),
        (
            r#"{"job":"urn:x","data":[],"attempts":0,"u":"\u2028 é \\"}"#,
            r#"{"job":"urn:x","data":[],"attempts":1,"u":"\u2028 é \\"}"#,
        ),
        // Nothing to count: reserved raw, handed over as poison.
        (
            r#"{"job":"urn:x","data":{}}"#,
            r#"{"job":"urn:x","data":{}}"#,
        ),
    ];
    for (job, member) in cases {
        let (got_job, got_member) = reserve_member(&raw, &q, job.as_bytes()).await;
        assert_eq!(got_job, job.as_bytes());
        assert_eq!(String::from_utf8(got_member).unwrap(), member, "{job}");
    }
    purge(&raw, &q).await;
}

#[tokio::test]
async fn a_recovered_laravel_reservation_keeps_data_byte_for_byte() {
    let Some(raw) = redis().await else { return };
    let q = queue("recover");
    let t = transport(true, Some(1)).await;
    let good = r#"{"job":"urn:babel:orders:created","trace_id":"t","data":{"big":12345678901234567890,"list":[],"z":1,"a":2},"meta":{"id":"m","queue":"q","lang":"php","schema_version":1},"attempts":0}"#;
    let poison = r#"{"job":"urn:babel:orders:created","data":[],"attempts":0}"#;
    t.publish(&q, good.as_bytes()).await.unwrap();
    t.publish(&q, poison.as_bytes()).await.unwrap();
    // A worker reserves both and dies without settling.
    let first = t.pop(&q, Duration::from_millis(50)).await.unwrap().unwrap();
    let second = t.pop(&q, Duration::from_millis(50)).await.unwrap().unwrap();
    assert!(!is_poison(&first));
    assert!(is_poison(&second));
    drop((first, second));
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    // Recovered (equal deadlines come back in member order, so sort them out by content):
    // the same bytes with attempts counted, the poison body still poison.
    let mut recovered = Vec::new();
    for _ in 0..2 {
        let d = t.pop(&q, Duration::from_millis(50)).await.unwrap().unwrap();
        recovered.push((String::from_utf8(d.body().to_vec()).unwrap(), is_poison(&d)));
    }
    recovered.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![
        (good.replace(r#""attempts":0"#, r#""attempts":1"#), false),
        (poison.replace(r#""attempts":0"#, r#""attempts":1"#), true),
    ];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(recovered, expected);
    purge(&raw, &q).await;
}
