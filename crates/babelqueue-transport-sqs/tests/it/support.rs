//! What every live test needs: the broker (or a loud skip) and unique queues (the testkit's),
//! an SDK client for administration, and a transport whose client records the SQS calls it
//! makes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_testkit::{PythonPeer, broker_or_skip, unique_queue};
use babelqueue_transport_sqs::aws_sdk_sqs;
use babelqueue_transport_sqs::aws_sdk_sqs::types::QueueAttributeName;
use babelqueue_transport_sqs::{
    AwsSqs, ReceiveMessage, ReceivedMessage, SendMessage, SqsClient, SqsError, SqsOptions,
    SqsTransport,
};

pub const DEFAULT_URL: &str = "sqs://us-east-1?endpoint=http://127.0.0.1:5000";

/// The live SQS endpoint the tests run against.
pub struct Env {
    /// The `sqs://` URL (`BQ_SQS_URL`).
    pub url: String,
    /// Its parsed options.
    pub config: SqsOptions,
    /// An SDK client for queue administration (static test credentials: never the AWS chain).
    pub sdk: aws_sdk_sqs::Client,
}

/// The broker, or `None` after a skip line (a failure with BQ_REQUIRE_BROKERS set) when it
/// does not answer (`scripts/brokers.sh up sqs` starts it).
pub async fn env() -> Option<Env> {
    let url = std::env::var("BQ_SQS_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let config = SqsOptions::from_url(&url).expect("BQ_SQS_URL is a valid sqs:// URL");
    let endpoint = config
        .endpoint
        .clone()
        .expect("BQ_SQS_URL names a local endpoint (…?endpoint=http://127.0.0.1:5000)");
    let region = config.region.clone().unwrap_or_else(|| "us-east-1".into());
    let sdk = aws_sdk_sqs::Client::from_conf(sdk_config(&region, &endpoint));
    let answers = async {
        sdk.list_queues()
            .max_results(1)
            .send()
            .await
            .map_err(aws_sdk_sqs::error::DisplayErrorContext)
    };
    broker_or_skip(&format!("SQS at {endpoint}"), answers).await?;
    Some(Env { url, config, sdk })
}

fn sdk_config(region: &str, endpoint: &str) -> aws_sdk_sqs::Config {
    aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .region(aws_sdk_sqs::config::Region::new(region.to_owned()))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test",
            "test",
            None,
            None,
            "babelqueue-tests",
        ))
        .build()
}

/// A queue name no other test (or run) uses; `.fifo` names stay FIFO names.
pub fn unique(name: &str) -> String {
    match name.strip_suffix(".fifo") {
        Some(base) => format!("{}.fifo", unique_queue(&format!("it-{base}"))),
        None => unique_queue(&format!("it-{name}")),
    }
}

impl Env {
    /// Creates a queue (with SQS attributes) and returns its URL.
    pub async fn create_queue(
        &self,
        name: &str,
        attributes: &[(QueueAttributeName, &str)],
    ) -> String {
        let mut call = self.sdk.create_queue().queue_name(name);
        for (k, v) in attributes {
            call = call.attributes(k.clone(), *v);
        }
        call.send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "create {name}: {}",
                    aws_sdk_sqs::error::DisplayErrorContext(e)
                )
            })
            .queue_url()
            .expect("a queue URL")
            .to_owned()
    }

    /// The queue's ARN.
    pub async fn arn(&self, url: &str) -> String {
        self.sdk
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .expect("queue attributes")
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
            .expect("a queue ARN")
    }

    /// Visible + in flight + delayed messages of a queue.
    pub async fn depth(&self, url: &str) -> u64 {
        let out = self
            .sdk
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .expect("queue attributes");
        let attrs = out.attributes().cloned().unwrap_or_default();
        [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
            QueueAttributeName::ApproximateNumberOfMessagesDelayed,
        ]
        .iter()
        .map(|k| {
            attrs
                .get(k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
    }

    /// Sends a raw body with String/Number attributes, bypassing BabelQueue.
    pub async fn send_raw(&self, url: &str, body: &str, attributes: &[(&str, &str, &str)]) {
        let mut call = self.sdk.send_message().queue_url(url).message_body(body);
        for (name, data_type, value) in attributes {
            call = call.message_attributes(
                *name,
                aws_sdk_sqs::types::MessageAttributeValue::builder()
                    .data_type(*data_type)
                    .string_value(*value)
                    .build()
                    .expect("an attribute"),
            );
        }
        call.send().await.expect("send a raw message");
    }

    /// Receives (and deletes) every message of a queue with a plain SDK client, waiting up to
    /// `wait` for the first.
    pub async fn drain(&self, url: &str, wait: Duration) -> Vec<aws_sdk_sqs::types::Message> {
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + wait;
        loop {
            let got = self
                .sdk
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .message_attribute_names("All")
                .message_system_attribute_names(
                    aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
                )
                .send()
                .await
                .expect("receive");
            let messages = got.messages.unwrap_or_default();
            if messages.is_empty() {
                if !out.is_empty() || std::time::Instant::now() >= deadline {
                    return out;
                }
                continue;
            }
            for m in &messages {
                self.sdk
                    .delete_message()
                    .queue_url(url)
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .send()
                    .await
                    .expect("delete");
            }
            out.extend(messages);
        }
    }

    /// A transport over the live endpoint whose client records every call.
    pub fn transport(&self, config: SqsOptions) -> (Calls, SqsTransport) {
        let region = self
            .config
            .region
            .clone()
            .unwrap_or_else(|| "us-east-1".into());
        let endpoint = self.config.endpoint.clone().expect("an endpoint");
        let inner = AwsSqs::new(aws_sdk_sqs::Client::from_conf(sdk_config(
            &region, &endpoint,
        )));
        let calls = Calls::default();
        let client = Recording {
            inner,
            calls: calls.clone(),
        };
        (calls, SqsTransport::new(client, config))
    }

    /// The environment a child process (the CLI, the Python SDK) needs: static test
    /// credentials and the region, so no AWS credential lookup leaves the machine.
    pub fn child_env(&self) -> Vec<(&'static str, String)> {
        let region = self
            .config
            .region
            .clone()
            .unwrap_or_else(|| "us-east-1".into());
        vec![
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", region.clone()),
            ("AWS_DEFAULT_REGION", region),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ]
    }
}

/// One SQS call the transport made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    GetQueueUrl(String),
    Send(SendMessage),
    /// The queue URL and how many messages came back.
    Receive(String, usize),
    Delete(String),
    Visibility(String, i32),
}

/// The calls recorded so far.
#[derive(Debug, Clone, Default)]
pub struct Calls(Arc<Mutex<Vec<Call>>>);

impl Calls {
    fn push(&self, call: Call) {
        self.0.lock().unwrap().push(call);
    }
    pub fn all(&self) -> Vec<Call> {
        self.0.lock().unwrap().clone()
    }
    pub fn sends(&self) -> Vec<SendMessage> {
        self.all()
            .into_iter()
            .filter_map(|c| match c {
                Call::Send(s) => Some(s),
                _ => None,
            })
            .collect()
    }
    pub fn deletes(&self) -> usize {
        self.all()
            .iter()
            .filter(|c| matches!(c, Call::Delete(_)))
            .count()
    }
    pub fn visibility_changes(&self) -> Vec<i32> {
        self.all()
            .into_iter()
            .filter_map(|c| match c {
                Call::Visibility(_, t) => Some(t),
                _ => None,
            })
            .collect()
    }
    pub fn lookups(&self) -> usize {
        self.all()
            .iter()
            .filter(|c| matches!(c, Call::GetQueueUrl(_)))
            .count()
    }
    pub fn received_batches(&self) -> Vec<usize> {
        self.all()
            .into_iter()
            .filter_map(|c| match c {
                Call::Receive(_, n) if n > 0 => Some(n),
                _ => None,
            })
            .collect()
    }
}

/// The real AWS client, recording each call (the client seam in use).
#[derive(Debug)]
struct Recording {
    inner: AwsSqs,
    calls: Calls,
}

#[async_trait]
impl SqsClient for Recording {
    async fn get_queue_url(&self, name: &str) -> Result<String, SqsError> {
        self.calls.push(Call::GetQueueUrl(name.to_owned()));
        self.inner.get_queue_url(name).await
    }
    async fn send_message(&self, request: SendMessage) -> Result<(), SqsError> {
        self.calls.push(Call::Send(request.clone()));
        self.inner.send_message(request).await
    }
    async fn receive_message(
        &self,
        request: ReceiveMessage,
    ) -> Result<Vec<ReceivedMessage>, SqsError> {
        let url = request.queue_url.clone();
        let got = self.inner.receive_message(request).await?;
        self.calls.push(Call::Receive(url, got.len()));
        Ok(got)
    }
    async fn delete_message(&self, queue_url: &str, receipt_handle: &str) -> Result<(), SqsError> {
        self.calls.push(Call::Delete(queue_url.to_owned()));
        self.inner.delete_message(queue_url, receipt_handle).await
    }
    async fn change_message_visibility(
        &self,
        queue_url: &str,
        receipt_handle: &str,
        visibility_timeout: i32,
    ) -> Result<(), SqsError> {
        self.calls
            .push(Call::Visibility(queue_url.to_owned(), visibility_timeout));
        self.inner
            .change_message_visibility(queue_url, receipt_handle, visibility_timeout)
            .await
    }
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The reference SDK (babelqueue 1.24.0 with boto3, `BQ_PYTHON`) running
/// `tests/python/sqs_peer.py`, or `None` after a skip line when it is missing.
pub fn python() -> Option<PythonPeer> {
    PythonPeer::find_or_skip(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/sqs_peer.py"),
        &["boto3"],
    )
}

/// Runs a command, returning stdout lines; panics with its stderr when it fails.
pub async fn run(cmd: &mut tokio::process::Command) -> Vec<String> {
    let out = cmd.output().await.expect("the command starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{stderr}",
        out.status
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8 output")
        .lines()
        .map(str::to_owned)
        .collect()
}
