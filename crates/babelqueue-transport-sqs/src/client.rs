//! The client seam: [`SqsClient`], the five SQS calls the transport makes, and [`AwsSqs`], its
//! implementation on `aws-sdk-sqs`.
//!
//! The transport only ever talks to SQS through this trait, so tests and the conformance runner
//! drive the real [`SqsTransport`](crate::SqsTransport) against `fake::FakeSqs` (the `fake`
//! feature).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName};

use crate::error::{SqsError, from_sdk};

/// How long past the server's own wait (a long poll's `WaitTimeSeconds`) a response may take.
/// The SDK sets no such bound: a connection whose packets vanish without a reset or a close
/// held a worker's receive, and so the worker, for ever (chaos `sqs-silent`). Past it the call
/// fails with a transient [`SqsError::Timeout`] and its connection is dropped; the next request
/// opens a new one. 10 s leaves room for the SDK's own retries of a slow but live endpoint.
pub(crate) const REPLY_MARGIN: Duration = Duration::from_secs(10);

/// [`REPLY_MARGIN`] on top of the server's own `wait`.
fn reply_limit(wait: Duration) -> Duration {
    wait.saturating_add(REPLY_MARGIN)
}

/// A call of the SDK, bounded by [`reply_limit`].
trait Within: Future + Sized {
    async fn within(
        self,
        operation: &'static str,
        wait: Duration,
    ) -> Result<Self::Output, SqsError> {
        deadline(self, operation, reply_limit(wait)).await
    }
}

impl<F: Future> Within for F {}

/// `call`, failed with a transient [`SqsError::Timeout`] when it takes longer than `limit`.
async fn deadline<F: Future>(
    call: F,
    operation: &'static str,
    limit: Duration,
) -> Result<F::Output, SqsError> {
    tokio::time::timeout(limit, call)
        .await
        .map_err(|_| SqsError::Timeout {
            operation,
            message: format!(
                "no response within {:.1} s (the server's own wait plus {} s): the request is \
                     abandoned and its connection dropped",
                limit.as_secs_f64(),
                REPLY_MARGIN.as_secs()
            ),
        })
}
use crate::projection::{AttributeValue, Attributes};

/// A `SendMessage` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendMessage {
    /// The queue URL.
    pub queue_url: String,
    /// The body, unchanged.
    pub body: String,
    /// The message attributes.
    pub attributes: Attributes,
    /// `DelaySeconds`, when sent.
    pub delay_seconds: Option<i32>,
    /// FIFO `MessageGroupId`.
    pub group_id: Option<String>,
    /// FIFO `MessageDeduplicationId`.
    pub deduplication_id: Option<String>,
}

/// A `ReceiveMessage` request (always with `MessageAttributeNames = [All]` and the
/// `ApproximateReceiveCount` system attribute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiveMessage {
    /// The queue URL.
    pub queue_url: String,
    /// `MaxNumberOfMessages`, 1..=10.
    pub max_messages: i32,
    /// `WaitTimeSeconds`, 0..=20.
    pub wait_time_seconds: i32,
    /// `VisibilityTimeout`, when sent.
    pub visibility_timeout: Option<i32>,
}

/// A received message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReceivedMessage {
    /// The body, as SQS returned it.
    pub body: String,
    /// The receipt handle (needed to delete or release it).
    pub receipt_handle: Option<String>,
    /// SQS's `MessageId`, when it sent one.
    pub message_id: Option<String>,
    /// The message attributes.
    pub attributes: Attributes,
    /// The `ApproximateReceiveCount` system attribute, as text, when reported.
    pub receive_count: Option<String>,
}

/// The SQS calls the transport makes. Implemented by [`AwsSqs`] on `aws-sdk-sqs`, and by
/// `fake::FakeSqs` (the `fake` feature) for broker-free tests.
#[async_trait]
pub trait SqsClient: Send + Sync + fmt::Debug {
    /// `GetQueueUrl(QueueName)`.
    async fn get_queue_url(&self, name: &str) -> Result<String, SqsError>;
    /// `SendMessage`.
    async fn send_message(&self, request: SendMessage) -> Result<(), SqsError>;
    /// `ReceiveMessage`.
    async fn receive_message(
        &self,
        request: ReceiveMessage,
    ) -> Result<Vec<ReceivedMessage>, SqsError>;
    /// `DeleteMessage(QueueUrl, ReceiptHandle)`.
    async fn delete_message(&self, queue_url: &str, receipt_handle: &str) -> Result<(), SqsError>;
    /// `ChangeMessageVisibility(QueueUrl, ReceiptHandle, VisibilityTimeout)`.
    async fn change_message_visibility(
        &self,
        queue_url: &str,
        receipt_handle: &str,
        visibility_timeout: i32,
    ) -> Result<(), SqsError>;
    /// `SendMessageBatch` of up to 10 requests to one queue (`queue_url`). `Ok` only when
    /// every entry was sent. The default sends them one by one.
    async fn send_message_batch(
        &self,
        queue_url: &str,
        requests: Vec<SendMessage>,
    ) -> Result<(), SqsError> {
        let _ = queue_url;
        for request in requests {
            self.send_message(request).await?;
        }
        Ok(())
    }
    /// `DeleteMessageBatch` of up to 10 receipt handles of one queue. `Ok` only when every
    /// entry was deleted. The default deletes them one by one (all attempted; the first error
    /// is returned).
    async fn delete_message_batch(
        &self,
        queue_url: &str,
        receipt_handles: Vec<String>,
    ) -> Result<(), SqsError> {
        let mut first_error = None;
        for handle in receipt_handles {
            if let Err(e) = self.delete_message(queue_url, &handle).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
    /// `GetQueueAttributes(QueueUrl, All)`: the attributes by the names SQS gives them
    /// (`ApproximateNumberOfMessages` …), for `Stats`. The default says the client cannot.
    async fn queue_attributes(&self, queue_url: &str) -> Result<HashMap<String, String>, SqsError> {
        Err(SqsError::Other {
            operation: "GetQueueAttributes",
            message: format!("this SQS client does not read the attributes of {queue_url}"),
        })
    }
}

/// The error of a batch call that SQS answered with failed entries.
fn failed_entries(
    operation: &'static str,
    failed: &[aws_sdk_sqs::types::BatchResultErrorEntry],
) -> Result<(), SqsError> {
    match failed.first() {
        None => Ok(()),
        Some(first) => Err(SqsError::Service {
            operation,
            code: first.code().to_owned(),
            message: format!(
                "{} of the batch's entries failed; the first: {}",
                failed.len(),
                first.message().unwrap_or("no message")
            ),
        }),
    }
}

/// [`SqsClient`] on `aws-sdk-sqs`.
///
/// `Debug` shows only the endpoint's name: the SDK's own `Debug` prints the endpoint URL as it
/// was given, credentials and all.
#[derive(Clone)]
pub struct AwsSqs {
    client: aws_sdk_sqs::Client,
    /// Where the calls go, for messages (never with credentials).
    endpoint: String,
}

impl fmt::Debug for AwsSqs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsSqs")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl AwsSqs {
    /// Wraps an SDK client. Error messages name the region's endpoint; use
    /// [`AwsSqs::named`] for a custom endpoint.
    pub fn new(client: aws_sdk_sqs::Client) -> AwsSqs {
        let endpoint = client.config().region().map_or_else(
            || "the SQS endpoint".to_owned(),
            |region| format!("sqs.{region}.amazonaws.com"),
        );
        AwsSqs { client, endpoint }
    }

    /// Names the endpoint error messages show (a custom endpoint URL is shown as its host;
    /// any password in it is masked).
    #[must_use]
    pub fn named(mut self, endpoint: &str) -> AwsSqs {
        self.endpoint = babelqueue_core::redact::host(endpoint)
            .unwrap_or_else(|| babelqueue_core::redact::redact(endpoint));
        self
    }

    /// Builds the SDK client from the default AWS provider chain, with the region and endpoint
    /// of `config` when set. Credentials always come from the chain (environment, profile, web
    /// identity, ECS, IMDS).
    pub async fn from_env(config: &crate::SqsOptions) -> Result<AwsSqs, SqsError> {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = &config.region {
            loader = loader.region(aws_sdk_sqs::config::Region::new(region.clone()));
        }
        if let Some(endpoint) = &config.endpoint {
            loader = loader.endpoint_url(endpoint.clone());
        }
        let shared = loader.load().await;
        if shared.region().is_none() {
            return Err(SqsError::NoRegion);
        }
        let client = AwsSqs::new(aws_sdk_sqs::Client::new(&shared));
        Ok(match &config.endpoint {
            Some(endpoint) => client.named(endpoint),
            None => client,
        })
    }

    /// The SDK client (for queue administration the transport does not do).
    pub fn client(&self) -> &aws_sdk_sqs::Client {
        &self.client
    }
}

fn to_sdk(value: &AttributeValue) -> Result<MessageAttributeValue, SqsError> {
    MessageAttributeValue::builder()
        .data_type(value.data_type.clone())
        .set_string_value(value.string_value.clone())
        .build()
        .map_err(|e| SqsError::Other {
            operation: "SendMessage",
            message: e.to_string(),
        })
}

fn from_sdk_message(message: aws_sdk_sqs::types::Message) -> ReceivedMessage {
    let receive_count = message
        .attributes
        .and_then(|mut a| a.remove(&MessageSystemAttributeName::ApproximateReceiveCount));
    let attributes = message
        .message_attributes
        .unwrap_or_default()
        .into_iter()
        .map(|(name, value)| {
            (
                name,
                AttributeValue {
                    data_type: value.data_type,
                    string_value: value.string_value,
                },
            )
        })
        .collect();
    ReceivedMessage {
        body: message.body.unwrap_or_default(),
        receipt_handle: message.receipt_handle,
        message_id: message.message_id,
        attributes,
        receive_count,
    }
}

#[async_trait]
impl SqsClient for AwsSqs {
    async fn get_queue_url(&self, name: &str) -> Result<String, SqsError> {
        let out = self
            .client
            .get_queue_url()
            .queue_name(name)
            .send()
            .within("GetQueueUrl", Duration::ZERO)
            .await?
            .map_err(|e| from_sdk("GetQueueUrl", name, &self.endpoint, &e))?;
        out.queue_url()
            .map(str::to_owned)
            .ok_or_else(|| SqsError::Other {
                operation: "GetQueueUrl",
                message: format!("no QueueUrl in the answer for {name:?}"),
            })
    }

    async fn send_message(&self, request: SendMessage) -> Result<(), SqsError> {
        let mut call = self
            .client
            .send_message()
            .queue_url(&request.queue_url)
            .message_body(request.body)
            .set_delay_seconds(request.delay_seconds)
            .set_message_group_id(request.group_id)
            .set_message_deduplication_id(request.deduplication_id);
        for (name, value) in &request.attributes {
            call = call.message_attributes(name, to_sdk(value)?);
        }
        call.send()
            .within("SendMessage", Duration::ZERO)
            .await?
            .map_err(|e| from_sdk("SendMessage", &request.queue_url, &self.endpoint, &e))?;
        Ok(())
    }

    async fn receive_message(
        &self,
        request: ReceiveMessage,
    ) -> Result<Vec<ReceivedMessage>, SqsError> {
        let wait = Duration::from_secs(u64::try_from(request.wait_time_seconds).unwrap_or(0));
        let out = self
            .client
            .receive_message()
            .queue_url(&request.queue_url)
            .max_number_of_messages(request.max_messages)
            .wait_time_seconds(request.wait_time_seconds)
            .set_visibility_timeout(request.visibility_timeout)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .within("ReceiveMessage", wait)
            .await?
            .map_err(|e| from_sdk("ReceiveMessage", &request.queue_url, &self.endpoint, &e))?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(from_sdk_message)
            .collect())
    }

    async fn send_message_batch(
        &self,
        queue_url: &str,
        requests: Vec<SendMessage>,
    ) -> Result<(), SqsError> {
        let mut call = self.client.send_message_batch().queue_url(queue_url);
        for (n, request) in requests.into_iter().enumerate() {
            let mut entry = aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                .id(n.to_string())
                .message_body(request.body)
                .set_delay_seconds(request.delay_seconds)
                .set_message_group_id(request.group_id)
                .set_message_deduplication_id(request.deduplication_id);
            for (name, value) in &request.attributes {
                entry = entry.message_attributes(name, to_sdk(value)?);
            }
            call = call.entries(entry.build().map_err(|e| SqsError::Other {
                operation: "SendMessageBatch",
                message: e.to_string(),
            })?);
        }
        let out = call
            .send()
            .within("SendMessageBatch", Duration::ZERO)
            .await?
            .map_err(|e| from_sdk("SendMessageBatch", queue_url, &self.endpoint, &e))?;
        failed_entries("SendMessageBatch", out.failed())
    }

    async fn delete_message_batch(
        &self,
        queue_url: &str,
        receipt_handles: Vec<String>,
    ) -> Result<(), SqsError> {
        let mut call = self.client.delete_message_batch().queue_url(queue_url);
        for (n, handle) in receipt_handles.into_iter().enumerate() {
            call = call.entries(
                aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                    .id(n.to_string())
                    .receipt_handle(handle)
                    .build()
                    .map_err(|e| SqsError::Other {
                        operation: "DeleteMessageBatch",
                        message: e.to_string(),
                    })?,
            );
        }
        let out = call
            .send()
            .within("DeleteMessageBatch", Duration::ZERO)
            .await?
            .map_err(|e| from_sdk("DeleteMessageBatch", queue_url, &self.endpoint, &e))?;
        failed_entries("DeleteMessageBatch", out.failed())
    }

    async fn delete_message(&self, queue_url: &str, receipt_handle: &str) -> Result<(), SqsError> {
        self.client
            .delete_message()
            .queue_url(queue_url)
            .receipt_handle(receipt_handle)
            .send()
            .within("DeleteMessage", Duration::ZERO)
            .await?
            .map_err(|e| from_sdk("DeleteMessage", queue_url, &self.endpoint, &e))?;
        Ok(())
    }

    async fn change_message_visibility(
        &self,
        queue_url: &str,
        receipt_handle: &str,
        visibility_timeout: i32,
    ) -> Result<(), SqsError> {
        self.client
            .change_message_visibility()
            .queue_url(queue_url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(visibility_timeout)
            .send()
            .within("ChangeMessageVisibility", Duration::ZERO)
            .await?
            .map_err(|e| from_sdk("ChangeMessageVisibility", queue_url, &self.endpoint, &e))?;
        Ok(())
    }

    async fn queue_attributes(&self, queue_url: &str) -> Result<HashMap<String, String>, SqsError> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
            .send()
            .within("GetQueueAttributes", Duration::ZERO)
            .await?
            .map_err(|e| from_sdk("GetQueueAttributes", queue_url, &self.endpoint, &e))?;
        Ok(out
            .attributes()
            .into_iter()
            .flatten()
            .map(|(name, value)| (name.as_str().to_owned(), value.clone()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use babelqueue_core::{TransportError, TransportErrorKind};

    use super::{AwsSqs, SqsClient, Within, deadline, reply_limit};
    use crate::{SqsError, SqsOptions};

    /// A port on 127.0.0.1 that nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        drop(listener);
        port
    }

    /// A client for the endpoint of `url`, with static test credentials (never the provider
    /// chain, which would look for an instance metadata service off this machine) and no
    /// retries.
    fn client(url: &str) -> AwsSqs {
        let config = SqsOptions::from_url(url).expect("the URL parses");
        let endpoint = config.endpoint.expect("the URL names an endpoint");
        let sdk = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .endpoint_url(&endpoint)
            .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                "test", "test", None, None, "tests",
            ))
            .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled())
            .build();
        AwsSqs::new(aws_sdk_sqs::Client::from_conf(sdk)).named(&endpoint)
    }

    fn shown(error: SqsError) -> String {
        let text = format!("{error}\n{error:?}");
        let runtime = TransportError::from(error);
        format!("{text}\n{runtime}\n{runtime:?}")
    }

    #[tokio::test]
    async fn a_refused_connection_never_shows_the_password() {
        let port = closed_port();
        // A plain endpoint: a transient connection error that names the endpoint.
        let plain = client(&format!("sqs://us-east-1?endpoint=http://127.0.0.1:{port}"));
        let error = plain.get_queue_url("orders").await.unwrap_err();
        assert_eq!(error.kind(), TransportErrorKind::Connection, "{error:?}");
        // An endpoint with credentials in it: whatever the SDK makes of it, they never show.
        for url in [
            format!("sqs://us-east-1?endpoint=http://bq:hunter2@127.0.0.1:{port}"),
            format!("sqs://us-east-1?endpoint=http%3A%2F%2Fbq%3Ahunter2%40127.0.0.1%3A{port}"),
        ] {
            let sqs = client(&url);
            assert!(!format!("{sqs:?}").contains("hunter2"), "{sqs:?}");
            let error = sqs.get_queue_url("orders").await.unwrap_err();
            let text = shown(error);
            assert!(!text.contains("hunter2"), "{url}: {text}");
        }
    }

    /// The provider chain's answer when it finds nothing (set explicitly: the test changes no
    /// environment variable, and never asks an instance metadata service).
    #[derive(Debug)]
    struct NoCredentialsAnywhere;

    impl aws_sdk_sqs::config::ProvideCredentials for NoCredentialsAnywhere {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            aws_credential_types::provider::future::ProvideCredentials::ready(Err(
                aws_credential_types::provider::error::CredentialsError::not_loaded(
                    "failed to load IMDS session token",
                ),
            ))
        }
    }

    #[tokio::test]
    async fn no_credentials_are_named_as_such_within_seconds() {
        let port = closed_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let sdk = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .endpoint_url(&endpoint)
            .credentials_provider(NoCredentialsAnywhere)
            .build();
        let sqs = AwsSqs::new(aws_sdk_sqs::Client::from_conf(sdk)).named(&endpoint);
        let started = std::time::Instant::now();
        let error = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            sqs.get_queue_url("orders"),
        )
        .await
        .expect("answered within 10 s")
        .unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert!(matches!(error, SqsError::NoCredentials { .. }), "{error:?}");
        assert_eq!(error.kind(), TransportErrorKind::Config);
        assert!(!error.is_transient());
        let shown = TransportError::from(error).to_string();
        assert!(
            shown.starts_with(&format!(
                "sqs: SQS GetQueueUrl at 127.0.0.1:{port}: no AWS credentials found: set \
                 AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            )),
            "{shown}"
        );
        assert!(!shown.contains("IMDS"), "{shown}");
    }

    /// The instance metadata service refusing the token request (as off EC2 behind a proxy)
    /// is "no credentials" too; a provider that timed out stays a timeout.
    #[test]
    fn a_failing_last_provider_is_no_credentials_but_a_timeout_is_not() {
        use aws_credential_types::provider::error::CredentialsError;
        let refused = CredentialsError::provider_error("failed to load IMDS session token");
        assert!(crate::error::no_credentials(&refused).is_some());
        let missing = CredentialsError::not_loaded("no providers in chain provided credentials");
        assert!(crate::error::no_credentials(&missing).is_some());
        let slow = CredentialsError::provider_timed_out(std::time::Duration::from_secs(5));
        assert!(crate::error::no_credentials(&slow).is_none());
        let other = std::io::Error::other("connection refused");
        assert!(crate::error::no_credentials(&other).is_none());
    }

    #[test]
    fn a_bad_url_option_never_shows_the_password() {
        for url in [
            "sqs://us-east-1?endpoint=http://bq:hunter2@127.0.0.1:5000&wait_time=99",
            "sqs://us-east-1?endpoint=http://bq:hunter2@127.0.0.1:5000&bogus=1",
            "sqs://us-east-1?endpoint=http://bq:hunter2%zz@127.0.0.1:5000",
            "sqs://us-east-1?token=hunter2&max_messages=0",
            "sqs://bq:hunter2@us-east-1",
            "sqs:/bq:hunter2@us-east-1",
            "bq:hunter2@us-east-1",
        ] {
            let error = SqsOptions::from_url(url).unwrap_err();
            assert_eq!(error.kind(), TransportErrorKind::Config, "{url}: {error}");
            let text = shown(error);
            assert!(!text.contains("hunter2"), "{url}: {text}");
        }
        let config =
            SqsOptions::from_url("sqs://us-east-1?endpoint=http://bq:hunter2@h:1").unwrap();
        assert!(!format!("{config:?}").contains("hunter2"), "{config:?}");
    }

    #[test]
    fn debug_of_the_transport_never_shows_the_password() {
        let url = "sqs://us-east-1?endpoint=http://bq:hunter2@127.0.0.1:1";
        let transport = crate::SqsTransport::new(client(url), SqsOptions::from_url(url).unwrap());
        for shown in [format!("{transport:?}"), format!("{transport:#?}")] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("127.0.0.1"), "{shown}");
        }
    }

    #[test]
    fn a_response_may_take_the_long_polls_wait_plus_10_s() {
        use std::time::Duration;
        assert_eq!(reply_limit(Duration::ZERO), Duration::from_secs(10));
        assert_eq!(
            reply_limit(Duration::from_secs(20)),
            Duration::from_secs(30)
        );
        assert_eq!(reply_limit(Duration::MAX), Duration::MAX, "no overflow");
    }

    #[tokio::test]
    async fn a_response_that_never_comes_is_a_transient_timeout() {
        let never = std::future::pending::<()>();
        let limit = std::time::Duration::from_millis(50);
        let error = deadline(never, "ReceiveMessage", limit).await.unwrap_err();
        assert!(error.is_transient(), "{error}");
        assert!(error.to_string().contains("within 0.1 s"), "{error}");
        let ok = async { 7 }
            .within("DeleteMessage", std::time::Duration::ZERO)
            .await;
        assert_eq!(ok.ok(), Some(7));
    }
}
