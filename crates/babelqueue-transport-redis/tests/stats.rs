//! `Stats` against a real redis-server (`BQ_REDIS_URL`, default `redis://127.0.0.1:6379`), in
//! both layouts: three published, one received and not acknowledged.
//!
//! With `BQ_REQUIRE_BROKERS` set, an unreachable Redis fails the test; without it the test
//! prints `SKIPPED` and returns.

use std::time::Duration;

use babelqueue_core::Transport;
use babelqueue_testkit::{broker_or_skip, unique_queue};
use babelqueue_transport_redis::{FredClient, RedisTransport};

fn base_url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

#[tokio::test]
async fn stats_count_ready_and_in_flight_in_both_layouts() {
    let base = base_url();
    if broker_or_skip(&format!("Redis at {base}"), FredClient::connect(&base))
        .await
        .is_none()
    {
        return;
    }
    for url in [base.clone(), format!("{base}?laravel=1")] {
        let transport = RedisTransport::connect(&url).await.expect("connect");
        let queue = unique_queue("it-stats");
        for _ in 0..3 {
            transport.publish(&queue, b"{}").await.expect("publish");
        }
        transport
            .publish(&format!("{queue}.dlq"), b"{}")
            .await
            .expect("publish");
        let held = transport
            .pop(&queue, Duration::from_secs(1))
            .await
            .expect("pop")
            .expect("a delivery");
        let stats = transport
            .capabilities()
            .stats_reader()
            .expect("redis offers Stats")
            .stats(&queue)
            .await
            .expect("stats");
        assert_eq!(stats.ready, Some(2), "{url}: {stats:?}");
        assert_eq!(stats.in_flight, Some(1), "{url}: {stats:?}");
        assert_eq!(stats.dead_letter, Some(1), "{url}: {stats:?}");
        transport.ack(&held).await.expect("ack");
        let after = transport.capabilities().stats_reader().expect("stats");
        let after = after.stats(&queue).await.expect("stats");
        assert_eq!(after.in_flight, Some(0), "{url}: {after:?}");
        for _ in 0..3 {
            if let Some(d) = transport
                .pop(&queue, Duration::from_millis(200))
                .await
                .expect("pop")
            {
                transport.ack(&d).await.expect("ack");
            }
        }
        if let Some(d) = transport
            .pop(&format!("{queue}.dlq"), Duration::from_millis(200))
            .await
            .expect("pop")
        {
            transport.ack(&d).await.expect("ack");
        }
    }
}

/// An envelope published `ago` before now, by its `meta.created_at`.
fn envelope_created(queue: &str, ago: Duration) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970");
    let created_at = (now - ago).as_millis();
    format!(
        "{{\"job\":\"urn:babel:test:stats\",\"trace_id\":\"t\",\"data\":{{}},\
         \"meta\":{{\"id\":\"m\",\"queue\":\"{queue}\",\"schema_version\":1,\"created_at\":{created_at}}},\
         \"attempts\":0}}"
    )
    .into_bytes()
}

#[tokio::test]
async fn the_oldest_ready_age_is_read_from_the_heads_created_at_in_both_layouts() {
    let base = base_url();
    if broker_or_skip(&format!("Redis at {base}"), FredClient::connect(&base))
        .await
        .is_none()
    {
        return;
    }
    for url in [base.clone(), format!("{base}?laravel=1")] {
        let transport = RedisTransport::connect(&url).await.expect("connect");
        let reader = transport.capabilities();
        let reader = reader.stats_reader().expect("redis offers Stats");
        let queue = unique_queue("it-stats-age");
        let empty = reader.stats(&queue).await.expect("stats");
        assert_eq!(empty.oldest_ready_age, None, "{url}: {empty:?}");
        // the head is the oldest: published first, created 30 s ago
        let old = envelope_created(&queue, Duration::from_secs(30));
        transport.publish(&queue, &old).await.expect("publish");
        let young = envelope_created(&queue, Duration::ZERO);
        transport.publish(&queue, &young).await.expect("publish");
        let stats = reader.stats(&queue).await.expect("stats");
        let age = stats.oldest_ready_age.expect("an age");
        assert!(
            age >= Duration::from_secs(30) && age < Duration::from_secs(90),
            "{url}: {stats:?}"
        );
        // a head that is not an envelope has no age
        let other = unique_queue("it-stats-age-raw");
        transport
            .publish(&other, b"not json")
            .await
            .expect("publish");
        let raw = reader.stats(&other).await.expect("stats");
        assert_eq!((raw.ready, raw.oldest_ready_age), (Some(1), None), "{url}");
        for q in [&queue, &queue, &other] {
            if let Some(d) = transport
                .pop(q, Duration::from_millis(200))
                .await
                .expect("pop")
            {
                transport.ack(&d).await.expect("ack");
            }
        }
    }
}
