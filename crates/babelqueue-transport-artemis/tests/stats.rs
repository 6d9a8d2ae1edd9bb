//! `Stats` against a real Artemis (`BQ_ARTEMIS_URL`, default `artemis://bq:bq@127.0.0.1:5673`):
//! three published, one received and not settled, then one in the dead-letter queue; the
//! figures read through the management address. Without the broker the test prints
//! `SKIPPED`; with `BQ_REQUIRE_BROKERS` set it fails instead.

#![allow(missing_docs)]

use std::time::Duration;

use babelqueue_core::Transport;
use babelqueue_testkit::{broker_or_skip, unique_queue};
use babelqueue_transport_artemis::ArtemisTransport;

/// An envelope created now: the transport sets its `creation-time` from `meta.created_at`, the
/// timestamp the broker's `firstMessageTimestamp` reads.
fn envelope(queue: &str, n: u32) -> Vec<u8> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis();
    format!(
        "{{\"job\":\"urn:babel:test:stats\",\"trace_id\":\"t-{n}\",\"data\":{{\"n\":{n}}},\
         \"meta\":{{\"id\":\"m-{n}\",\"queue\":\"{queue}\",\"schema_version\":1,\"created_at\":{now_ms}}},\
         \"attempts\":0}}"
    )
    .into_bytes()
}

fn url() -> String {
    std::env::var("BQ_ARTEMIS_URL").unwrap_or_else(|_| "artemis://bq:bq@127.0.0.1:5673".to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_ready_in_flight_and_consumers() {
    let Some(transport) = broker_or_skip(
        "Artemis (BQ_ARTEMIS_URL)",
        ArtemisTransport::connect(&url()),
    )
    .await
    else {
        return;
    };
    let queue = unique_queue("it-stats");
    let capabilities = transport.capabilities();
    let reader = capabilities.stats_reader().expect("artemis offers Stats");
    let empty = reader
        .stats(&queue)
        .await
        .expect("stats of an unknown queue");
    assert_eq!(empty.total(), Some(0), "{empty:?}");
    assert_eq!(empty.dead_letter, None, "{empty:?}");
    assert_eq!(empty.oldest_ready_age, None, "{empty:?}");

    for n in 0..3 {
        transport
            .publish(&queue, &envelope(&queue, n))
            .await
            .expect("publish");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = transport
        .pop(&queue, Duration::from_secs(5))
        .await
        .expect("pop")
        .expect("a delivery");
    let stats = reader.stats(&queue).await.expect("stats");
    assert_eq!(stats.ready, Some(2), "{stats:?}");
    assert_eq!(stats.in_flight, Some(1), "{stats:?}");
    assert_eq!(stats.delayed, Some(0), "{stats:?}");
    assert_eq!(stats.consumers, Some(1), "{stats:?}");
    assert!(stats.source.contains("management"), "{stats:?}");
    // the oldest message waited at least the pause, by the broker's clock against this host's
    let age = stats.oldest_ready_age.expect("an age while messages wait");
    assert!(
        age >= Duration::from_millis(250) && age < Duration::from_secs(120),
        "{stats:?}"
    );

    transport.ack(&held).await.expect("ack");
    transport
        .publish(&format!("{queue}.dlq"), b"{\"dead\":1}")
        .await
        .expect("publish to the dead-letter queue");
    let stats = reader.stats(&queue).await.expect("stats after the ack");
    assert_eq!(stats.total(), Some(2), "{stats:?}");
    assert_eq!(stats.dead_letter, Some(1), "{stats:?}");
    transport.close().await.expect("close");
}
