//! One console over every broker `scripts/brokers.sh` runs, at once: Redis (both layouts),
//! RabbitMQ, SQS (moto), Kafka, Artemis, Pulsar (with its admin URL) and NATS, each with a
//! fresh queue holding two messages. The overview's API lists every queue with the figures its
//! broker reports and no error. URLs come from `scripts/brokers.sh env` (`BQ_*_URL`); a broker
//! that cannot be reached skips the test, or fails it with `BQ_REQUIRE_BROKERS=1`.

use crate::common;

use std::sync::Arc;

use axum::http::StatusCode;
use babelqueue::{App, Transport};
use babelqueue_console::{Console, Source};
use babelqueue_testkit::{broker_or_skip, unique_queue};
use common::get;

/// Creates `queue` on the SQS endpoint of `url` (SQS queues exist before they are used).
async fn create_sqs_queue(url: &str, queue: &str) -> Result<(), String> {
    use babelqueue::sqs::{SqsOptions, aws_sdk_sqs};
    let options = SqsOptions::from_url(url).map_err(|e| e.to_string())?;
    let region = options.region.clone().unwrap_or_else(|| "us-east-1".into());
    let mut config = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .region(aws_sdk_sqs::config::Region::new(region))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test",
            "test",
            None,
            None,
            "console-test",
        ));
    if let Some(endpoint) = &options.endpoint {
        config = config.endpoint_url(endpoint);
    }
    aws_sdk_sqs::Client::from_conf(config.build())
        .create_queue()
        .queue_name(queue)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())
}

/// Every broker: its name, its URL variable, the URL when the variable is unset, and whether
/// its `ready` count is exact at once (the others: a consumer group's lag, a subscription's
/// backlog, which exist only once something consumed).
const BROKERS: [(&str, &str, &str, bool); 8] = [
    ("redis", "BQ_REDIS_URL", "redis://127.0.0.1:6379", true),
    (
        "redis-laravel",
        "BQ_REDIS_URL",
        "redis://127.0.0.1:6379",
        true,
    ),
    (
        "rabbitmq",
        "BQ_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
        true,
    ),
    (
        "sqs",
        "BQ_SQS_URL",
        "sqs://us-east-1?endpoint=http://127.0.0.1:5000",
        true,
    ),
    ("kafka", "BQ_KAFKA_URL", "kafka://127.0.0.1:9092", false),
    (
        "artemis",
        "BQ_ARTEMIS_URL",
        "artemis://bq:bq@127.0.0.1:5673",
        true,
    ),
    ("pulsar", "BQ_PULSAR_URL", "pulsar://127.0.0.1:6650", false),
    ("nats", "BQ_NATS_URL", "nats://127.0.0.1:4222", true),
];

#[tokio::test]
async fn one_console_watches_a_queue_on_every_broker_at_once() {
    let mut sources = Vec::new();
    let mut expected = Vec::new();
    for (name, var, default, exact) in BROKERS {
        let mut url = std::env::var(var).unwrap_or_else(|_| default.to_owned());
        if name == "redis-laravel" {
            url.push_str(if url.contains('?') {
                "&laravel=1"
            } else {
                "?laravel=1"
            });
        }
        let Some(transport) = broker_or_skip(name, babelqueue::connect(&url)).await else {
            return;
        };
        let queue = unique_queue("console-every");
        if name == "sqs" {
            create_sqs_queue(&url, &queue)
                .await
                .unwrap_or_else(|e| panic!("sqs: create {queue}: {e}"));
        }
        let app = App::builder_arc(transport.clone())
            .queue(queue.clone())
            .build()
            .expect("an app");
        for n in 0..2 {
            app.publish("urn:console:every", &serde_json::json!({ "n": n }))
                .await
                .unwrap_or_else(|e| panic!("{name}: publish: {e}"));
        }
        sources.push(
            Source::new(&url, transport as Arc<dyn Transport>, [queue.clone()])
                .unwrap_or_else(|e| panic!("{name}: {e}")),
        );
        expected.push((name, queue, exact));
    }
    let console = Console::new(sources);
    let router = console.router();
    let answer = get(&router, "/api/v1/queues").await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let rows = answer.json();
    let rows = rows.as_array().expect("an array of queues");
    assert_eq!(rows.len(), expected.len(), "{rows:?}");
    for (row, (name, queue, exact)) in rows.iter().zip(&expected) {
        assert_eq!(row["queue"], queue.as_str(), "{name}: {row}");
        assert!(
            row["error"].is_null(),
            "{name}: the broker's stats failed: {row}"
        );
        if *exact {
            assert_eq!(row["ready"], 2, "{name}: {row}");
        }
        assert!(
            !row["url"].as_str().unwrap_or("").contains(":guest@"),
            "{name}: {row}"
        );
    }
    let page = get(&router, "/").await;
    assert_eq!(page.status, StatusCode::OK);
    for (name, queue, _) in &expected {
        assert!(
            page.body.contains(queue.as_str()),
            "{name}: {queue} on the overview"
        );
    }
}
