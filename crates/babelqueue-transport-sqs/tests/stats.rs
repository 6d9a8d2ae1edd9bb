//! `Stats` against a live SQS endpoint (moto's server, `scripts/brokers.sh up sqs`;
//! `BQ_SQS_URL`, default `sqs://us-east-1?endpoint=http://127.0.0.1:5000`): three published,
//! one received and not deleted. Without the endpoint the test prints `SKIPPED`; with
//! `BQ_REQUIRE_BROKERS` set it fails instead.

use std::time::Duration;

use babelqueue_core::Transport;
use babelqueue_testkit::{broker_or_skip, unique_queue};
use babelqueue_transport_sqs::aws_sdk_sqs;
use babelqueue_transport_sqs::{AwsSqs, SqsOptions, SqsTransport};

fn sdk(config: &SqsOptions) -> aws_sdk_sqs::Client {
    let region = config.region.clone().unwrap_or_else(|| "us-east-1".into());
    let mut builder = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .region(aws_sdk_sqs::config::Region::new(region))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test",
            "test",
            None,
            None,
            "babelqueue-stats",
        ));
    if let Some(endpoint) = &config.endpoint {
        builder = builder.endpoint_url(endpoint);
    }
    aws_sdk_sqs::Client::from_conf(builder.build())
}

#[tokio::test]
async fn stats_count_ready_and_in_flight() {
    let url = std::env::var("BQ_SQS_URL")
        .unwrap_or_else(|_| "sqs://us-east-1?endpoint=http://127.0.0.1:5000".into());
    let config = SqsOptions::from_url(&url).expect("BQ_SQS_URL is a valid sqs:// URL");
    let admin = sdk(&config);
    let endpoint = config.endpoint.clone().unwrap_or_else(|| "AWS".into());
    let queue = unique_queue("it-stats");
    let dlq = format!("{queue}-dlq");
    let created = async {
        for name in [&queue, &dlq] {
            admin
                .create_queue()
                .queue_name(name)
                .send()
                .await
                .map_err(aws_sdk_sqs::error::DisplayErrorContext)?;
        }
        Ok::<_, aws_sdk_sqs::error::DisplayErrorContext<_>>(())
    };
    if broker_or_skip(&format!("SQS at {endpoint}"), created)
        .await
        .is_none()
    {
        return;
    }
    let transport = SqsTransport::new(AwsSqs::new(admin.clone()), config);
    for _ in 0..3 {
        transport.publish(&queue, b"{}").await.expect("publish");
    }
    transport.publish(&dlq, b"{}").await.expect("publish");
    let held = transport
        .pop(&queue, Duration::from_secs(1))
        .await
        .expect("receive")
        .expect("a message");
    let stats = transport
        .capabilities()
        .stats_reader()
        .expect("sqs offers Stats")
        .stats(&queue)
        .await
        .expect("stats");
    assert_eq!(stats.ready, Some(2), "{stats:?}");
    assert_eq!(stats.in_flight, Some(1), "{stats:?}");
    assert_eq!(stats.delayed, Some(0), "{stats:?}");
    assert_eq!(stats.dead_letter, Some(1), "{stats:?}");
    transport.ack(&held).await.expect("delete");
    for name in [&queue, &dlq] {
        let url = transport.queue_url(name).await.expect("queue url");
        let _ = admin.delete_queue().queue_url(url).send().await;
    }
}
