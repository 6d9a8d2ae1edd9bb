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
