//! The transport contract suite of `babelqueue-testkit`, run against a live SQS endpoint
//! (moto's server, `scripts/brokers.sh up sqs`; `BQ_SQS_URL`, default
//! `sqs://us-east-1?endpoint=http://127.0.0.1:5000`). Without it the test prints `SKIPPED`;
//! with `BQ_REQUIRE_BROKERS` set it fails instead.
//!
//! SQS queues are provisioned, never created by the transport (nor by the reference SDK), and
//! the suite names a fresh queue for every test. So the transport runs over the real
//! [`AwsSqs`] client wrapped in [`Provisioning`], which answers a `GetQueueUrl` of a missing
//! queue by creating it (standard, default attributes), as an operator would have beforehand;
//! every other call goes to SQS unchanged. The queues are deleted after the run.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_testkit::{Features, Suite, broker_or_skip};
use babelqueue_transport_sqs::aws_sdk_sqs;
use babelqueue_transport_sqs::{
    AwsSqs, ReceiveMessage, ReceivedMessage, SendMessage, SqsClient, SqsError, SqsOptions,
    SqsTransport,
};

/// The visibility timeout of every receive in this run (`visibility_timeout=2` in the URL): an
/// unsettled delivery is visible again 2 s after it was received.
const VISIBILITY: Duration = Duration::from_secs(2);

/// SQS's message size limit.
const MAX_MESSAGE: usize = 256 * 1024;

fn url() -> String {
    let base = std::env::var("BQ_SQS_URL")
        .unwrap_or_else(|_| "sqs://us-east-1?endpoint=http://127.0.0.1:5000".into());
    let separator = if base.contains('?') { '&' } else { '?' };
    format!(
        "{base}{separator}visibility_timeout={}",
        VISIBILITY.as_secs()
    )
}

/// An SDK client for the endpoint with static test credentials (never the AWS chain).
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
            "babelqueue-contract",
        ));
    if let Some(endpoint) = &config.endpoint {
        builder = builder.endpoint_url(endpoint);
    }
    aws_sdk_sqs::Client::from_conf(builder.build())
}

/// The real client, creating a queue the first time its URL is looked up and it is missing.
#[derive(Debug)]
struct Provisioning {
    sqs: AwsSqs,
    sdk: aws_sdk_sqs::Client,
    created: Arc<Mutex<BTreeSet<String>>>,
}

#[async_trait]
impl SqsClient for Provisioning {
    async fn get_queue_url(&self, name: &str) -> Result<String, SqsError> {
        match self.sqs.get_queue_url(name).await {
            Err(SqsError::QueueDoesNotExist { .. }) => {
                let created = self
                    .sdk
                    .create_queue()
                    .queue_name(name)
                    .send()
                    .await
                    .map_err(|e| {
                        SqsError::Config(format!(
                            "creating the test queue {name}: {}",
                            aws_sdk_sqs::error::DisplayErrorContext(e)
                        ))
                    })?;
                let url = created.queue_url().unwrap_or_default().to_owned();
                self.created
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(url.clone());
                Ok(url)
            }
            other => other,
        }
    }
    async fn send_message(&self, request: SendMessage) -> Result<(), SqsError> {
        self.sqs.send_message(request).await
    }
    async fn receive_message(
        &self,
        request: ReceiveMessage,
    ) -> Result<Vec<ReceivedMessage>, SqsError> {
        self.sqs.receive_message(request).await
    }
    async fn delete_message(&self, queue_url: &str, receipt_handle: &str) -> Result<(), SqsError> {
        self.sqs.delete_message(queue_url, receipt_handle).await
    }
    async fn change_message_visibility(
        &self,
        queue_url: &str,
        receipt_handle: &str,
        visibility_timeout: i32,
    ) -> Result<(), SqsError> {
        self.sqs
            .change_message_visibility(queue_url, receipt_handle, visibility_timeout)
            .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_passes_the_contract_suite() {
    let url = url();
    let config = SqsOptions::from_url(&url).expect("BQ_SQS_URL is a valid sqs:// URL");
    let admin = sdk(&config);
    let endpoint = config.endpoint.clone().unwrap_or_else(|| "AWS".into());
    let answers = async {
        admin
            .list_queues()
            .max_results(1)
            .send()
            .await
            .map_err(aws_sdk_sqs::error::DisplayErrorContext)
    };
    if broker_or_skip(&format!("SQS at {endpoint}"), answers)
        .await
        .is_none()
    {
        return;
    }

    let features = Features::new()
        // ChangeMessageVisibility with the back-off
        .delayed_retry(true)
        // `NativeSettler`: left to the queue's RedrivePolicy
        // ApproximateReceiveCount - 1
        .native_redelivery_count(true)
        .redelivery_after(VISIBILITY)
        .max_body_bytes(MAX_MESSAGE)
        // text only: a body must be valid UTF-8 within SQS's character set
        .binary_bodies(false)
        // WaitTimeSeconds is whole seconds: a shorter poll is a short poll that returns at
        // once, so poll for a second (a long poll) instead of hammering the endpoint
        .poll_timeout(Duration::from_secs(1))
        .quiet_period(Duration::from_millis(500));
    // Not ordered: a standard queue delivers in best-effort order only (FIFO queues keep a
    // group's order, but take no per-message delay).
    let created: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let made = created.clone();
    let report = Suite::new(features, move || {
        let client = Provisioning {
            sqs: AwsSqs::new(sdk(&config)),
            sdk: sdk(&config),
            created: made.clone(),
        };
        let transport = SqsTransport::new(client, config.clone());
        async move { Ok::<_, SqsError>(transport) }
    })
    .run()
    .await;
    println!("{report}");

    let created = created.lock().unwrap_or_else(|p| p.into_inner()).clone();
    for queue_url in &created {
        let _ = admin.delete_queue().queue_url(queue_url).send().await;
    }
    report.assert_passed();
}
