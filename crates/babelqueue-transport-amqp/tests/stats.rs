//! `Stats` against a real RabbitMQ (`BQ_AMQP_URL`, default
//! `amqp://guest:guest@127.0.0.1:5672/%2f`): three published, one received and not
//! acknowledged. A passive declare counts ready messages only, so the held one is not in
//! `ready`; without a management URL `in_flight` is unknown, with one
//! (`BQ_AMQP_MANAGEMENT_URL`, as `scripts/brokers.sh env` exports) it is the management API's
//! count. Without the broker the tests print `SKIPPED`; with `BQ_REQUIRE_BROKERS` set they
//! fail instead.

use std::time::Duration;

use babelqueue_core::Transport;
use babelqueue_core::redact::redact;
use babelqueue_testkit::{broker_or_skip, unique_queue};
use babelqueue_transport_amqp::{AmqpOptions, AmqpTransport, MANAGEMENT_URL_ENV};

fn amqp_url() -> String {
    std::env::var("BQ_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

#[tokio::test]
async fn stats_count_ready_and_consumers() {
    let url = amqp_url();
    let what = format!("RabbitMQ at {}", redact(&url));
    let mut options = AmqpOptions::default();
    options.management_url = None;
    let Some(transport) = broker_or_skip(&what, AmqpTransport::connect_with(&url, options)).await
    else {
        return;
    };
    let queue = unique_queue("it-stats");
    let reader = transport.capabilities();
    let reader = reader.stats_reader().expect("amqp offers Stats");
    assert_eq!(
        reader.stats(&queue).await.expect("stats").total(),
        Some(0),
        "no queue yet"
    );
    for _ in 0..3 {
        transport.publish(&queue, b"{}").await.expect("publish");
    }
    transport
        .publish(&format!("{queue}.dlq"), b"{}")
        .await
        .expect("publish");
    let held = transport
        .pop(&queue, Duration::from_secs(2))
        .await
        .expect("pop")
        .expect("a delivery");
    // The consumer's prefetch may hold more than the one delivery handed out: ready is what
    // RabbitMQ has not sent to any consumer.
    let stats = reader.stats(&queue).await.expect("stats");
    assert!(stats.ready.is_some_and(|n| n <= 2), "{stats:?}");
    assert_eq!(stats.in_flight, None, "{stats:?}");
    assert_eq!(stats.consumers, Some(1), "{stats:?}");
    assert_eq!(stats.dead_letter, Some(1), "{stats:?}");
    transport.ack(&held).await.expect("ack");
    let _ = transport.close().await;
}

#[tokio::test]
async fn the_management_api_counts_the_messages_in_flight() {
    let url = amqp_url();
    let management = std::env::var(MANAGEMENT_URL_ENV)
        .unwrap_or_else(|_| "http://guest:guest@127.0.0.1:15672".to_owned());
    let what = format!(
        "RabbitMQ at {} with its management API at {}",
        redact(&url),
        redact(&management)
    );
    let options = AmqpOptions::default().management_url(management.clone());
    let Some(transport) = broker_or_skip(&what, AmqpTransport::connect_with(&url, options)).await
    else {
        return;
    };
    let queue = unique_queue("it-stats-managed");
    for _ in 0..3 {
        transport.publish(&queue, b"{}").await.expect("publish");
    }
    let held = transport
        .pop(&queue, Duration::from_secs(2))
        .await
        .expect("pop")
        .expect("a delivery");
    let reader = transport.capabilities();
    let reader = reader.stats_reader().expect("amqp offers Stats");
    // The plugin samples queue figures (every second on the test broker, 5 s by default):
    // wait for the sample that sees the delivery held.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let stats = loop {
        let stats = match reader.stats(&queue).await {
            Ok(stats) => stats,
            Err(e) => panic!(
                "stats with the management API at {}: {e}",
                redact(&management)
            ),
        };
        if stats.in_flight.is_some_and(|n| n >= 1) || tokio::time::Instant::now() > deadline {
            break stats;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    // Every message is ready or in flight (a prefetch may hold more than the one handed out).
    assert!(stats.in_flight.is_some_and(|n| n >= 1), "{stats:?}");
    assert_eq!(stats.total(), Some(3), "{stats:?}");
    transport.ack(&held).await.expect("ack");
    let _ = transport.close().await;
}

#[tokio::test]
async fn a_wrong_management_password_is_an_auth_error_without_the_password() {
    let url = amqp_url();
    let what = format!("RabbitMQ at {}", redact(&url));
    let options =
        AmqpOptions::default().management_url("http://guest:not-the-password@127.0.0.1:15672");
    let Some(transport) = broker_or_skip(&what, AmqpTransport::connect_with(&url, options)).await
    else {
        return;
    };
    let reader = transport.capabilities();
    let reader = reader.stats_reader().expect("amqp offers Stats");
    let e = reader
        .stats(&unique_queue("it-stats-auth"))
        .await
        .expect_err("refused");
    assert_eq!(e.kind(), babelqueue_core::TransportErrorKind::Auth, "{e}");
    assert!(!e.to_string().contains("not-the-password"), "{e}");
    let _ = transport.close().await;
}
