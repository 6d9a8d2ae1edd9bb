//! The client seam: [`SqsClient`], the five SQS calls the transport makes, and [`AwsSqs`], its
//! implementation on `aws-sdk-sqs`.
//!
//! The transport only ever talks to SQS through this trait, so tests and the conformance runner
//! drive the real [`SqsTransport`](crate::SqsTransport) against [`FakeSqs`](crate::fake::FakeSqs).

use std::fmt;

use async_trait::async_trait;
use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName};

use crate::error::{SqsError, from_sdk};
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
    /// The message attributes.
    pub attributes: Attributes,
    /// The `ApproximateReceiveCount` system attribute, as text, when reported.
    pub receive_count: Option<String>,
}

/// The SQS calls the transport makes. Implemented by [`AwsSqs`] on `aws-sdk-sqs`, and by
/// [`FakeSqs`](crate::fake::FakeSqs) for broker-free tests.
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
}

/// [`SqsClient`] on `aws-sdk-sqs`.
#[derive(Debug, Clone)]
pub struct AwsSqs {
    client: aws_sdk_sqs::Client,
}

impl AwsSqs {
    /// Wraps an SDK client.
    pub fn new(client: aws_sdk_sqs::Client) -> AwsSqs {
        AwsSqs { client }
    }

    /// Builds the SDK client from the default AWS provider chain, with the region and endpoint
    /// of `config` when set. Credentials always come from the chain (environment, profile, web
    /// identity, ECS, IMDS).
    pub async fn from_env(config: &crate::SqsConfig) -> Result<AwsSqs, SqsError> {
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
        Ok(AwsSqs::new(aws_sdk_sqs::Client::new(&shared)))
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
            .await
            .map_err(|e| from_sdk("GetQueueUrl", name, &e))?;
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
            .await
            .map_err(|e| from_sdk("SendMessage", &request.queue_url, &e))?;
        Ok(())
    }

    async fn receive_message(
        &self,
        request: ReceiveMessage,
    ) -> Result<Vec<ReceivedMessage>, SqsError> {
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
            .await
            .map_err(|e| from_sdk("ReceiveMessage", &request.queue_url, &e))?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(from_sdk_message)
            .collect())
    }

    async fn delete_message(&self, queue_url: &str, receipt_handle: &str) -> Result<(), SqsError> {
        self.client
            .delete_message()
            .queue_url(queue_url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map_err(|e| from_sdk("DeleteMessage", queue_url, &e))?;
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
            .await
            .map_err(|e| from_sdk("ChangeMessageVisibility", queue_url, &e))?;
        Ok(())
    }
}
