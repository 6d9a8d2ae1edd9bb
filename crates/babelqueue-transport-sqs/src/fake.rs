//! [`FakeSqs`]: an in-memory [`SqsClient`] that records every call, for broker-free tests of
//! the real transport (unit tests, the conformance runner, your own tests).
//!
//! It keeps one FIFO of visible messages per queue URL and the messages in flight. A receive
//! takes messages in flight; `DeleteMessage` removes them; `ChangeMessageVisibility` puts them
//! back at the tail with `ApproximateReceiveCount` one higher (timing is not simulated: the
//! message is visible again at once). Queue URLs are `http://fake/<name>`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::TransportError> {
//! use std::time::Duration;
//! use babelqueue_core::Transport;
//! use babelqueue_transport_sqs::{SqsOptions, SqsTransport, fake::FakeSqs};
//!
//! let fake = FakeSqs::new();
//! let transport = SqsTransport::new(fake.clone(), SqsOptions::default());
//! transport.publish("orders", br#"{"job":"urn:x"}"#).await?;
//! let delivery = transport.pop("orders", Duration::ZERO).await?.expect("a message");
//! transport.ack(&delivery).await?;
//! assert_eq!(fake.sent()[0].queue_url, "http://fake/orders");
//! assert_eq!(fake.deleted(), vec![("http://fake/orders".to_owned(), "rh-1".to_owned())]);
//! # Ok(()) }
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::client::{ReceiveMessage, ReceivedMessage, SendMessage, SqsClient};
use crate::error::SqsError;
use crate::projection::Attributes;

/// The URL base of the fake's queues.
pub const FAKE_BASE: &str = "http://fake";

/// The `MessageId` of the `n`th message the fake stored (a UUID, as SQS's are).
fn message_id(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

#[derive(Debug, Default)]
struct State {
    visible: HashMap<String, VecDeque<ReceivedMessage>>,
    in_flight: HashMap<String, (String, ReceivedMessage)>,
    sent: Vec<SendMessage>,
    deleted: Vec<(String, String)>,
    visibility_changes: Vec<(String, String, i32)>,
    receives: Vec<ReceiveMessage>,
    url_lookups: Vec<String>,
    /// Every request the fake answered, by API name (`SendMessageBatch`, `DeleteMessage` …).
    requests: HashMap<&'static str, usize>,
    failing_sends: HashSet<String>,
    failing_receives: bool,
    next: u64,
}

/// An in-memory SQS that records SendMessage, ReceiveMessage, DeleteMessage,
/// ChangeMessageVisibility and GetQueueUrl. Cloning shares the state.
#[derive(Debug, Clone, Default)]
pub struct FakeSqs {
    state: Arc<Mutex<State>>,
}

impl FakeSqs {
    /// An empty fake.
    pub fn new() -> FakeSqs {
        FakeSqs::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The URL of queue `name`.
    pub fn url(name: &str) -> String {
        format!("{FAKE_BASE}/{name}")
    }

    /// Puts a message on queue `name` as if someone had sent it; `receive_count` is the
    /// `ApproximateReceiveCount` its next receive reports (`None` = not reported). Returns its
    /// receipt handle.
    pub fn seed(
        &self,
        name: &str,
        body: &str,
        attributes: Attributes,
        receive_count: Option<&str>,
    ) -> String {
        let mut state = self.state();
        state.next += 1;
        let handle = format!("seed-{}", state.next);
        let message = ReceivedMessage {
            body: body.to_owned(),
            receipt_handle: Some(handle.clone()),
            message_id: Some(message_id(state.next)),
            attributes,
            receive_count: receive_count.map(str::to_owned),
        };
        state
            .visible
            .entry(FakeSqs::url(name))
            .or_default()
            .push_back(message);
        handle
    }

    /// Makes every SendMessage to queue `name` fail (`true`) or succeed again.
    pub fn fail_sends_to(&self, name: &str, fail: bool) {
        let url = FakeSqs::url(name);
        let mut state = self.state();
        if fail {
            state.failing_sends.insert(url);
        } else {
            state.failing_sends.remove(&url);
        }
    }

    /// Makes every ReceiveMessage fail (`true`) or succeed again.
    pub fn fail_receives(&self, fail: bool) {
        self.state().failing_receives = fail;
    }

    /// The successful SendMessage requests, in order.
    pub fn sent(&self) -> Vec<SendMessage> {
        self.state().sent.clone()
    }

    /// The DeleteMessage calls, as (queue URL, receipt handle).
    pub fn deleted(&self) -> Vec<(String, String)> {
        self.state().deleted.clone()
    }

    /// The ChangeMessageVisibility calls, as (queue URL, receipt handle, timeout).
    pub fn visibility_changes(&self) -> Vec<(String, String, i32)> {
        self.state().visibility_changes.clone()
    }

    /// The ReceiveMessage requests, in order.
    pub fn receives(&self) -> Vec<ReceiveMessage> {
        self.state().receives.clone()
    }

    /// How many requests of each API the fake answered (`SendMessage`, `SendMessageBatch`,
    /// `ReceiveMessage`, `DeleteMessage`, `DeleteMessageBatch`, `ChangeMessageVisibility`,
    /// `GetQueueUrl`).
    pub fn requests(&self) -> HashMap<&'static str, usize> {
        self.state().requests.clone()
    }

    /// The names looked up with GetQueueUrl, in order.
    pub fn url_lookups(&self) -> Vec<String> {
        self.state().url_lookups.clone()
    }

    /// The bodies visible on queue `name`, head first.
    pub fn bodies(&self, name: &str) -> Vec<String> {
        self.state()
            .visible
            .get(&FakeSqs::url(name))
            .map(|q| q.iter().map(|m| m.body.clone()).collect())
            .unwrap_or_default()
    }

    /// Stores a sent message (SendMessage and each SendMessageBatch entry).
    fn store(&self, request: SendMessage) -> Result<(), SqsError> {
        let mut state = self.state();
        if state.failing_sends.contains(&request.queue_url) {
            return Err(SqsError::Connection {
                operation: "SendMessage",
                message: format!("fake: sends to {} fail (injected)", request.queue_url),
            });
        }
        state.next += 1;
        let message = ReceivedMessage {
            body: request.body.clone(),
            receipt_handle: Some(format!("rh-{}", state.next)),
            message_id: Some(message_id(state.next)),
            attributes: request.attributes.clone(),
            receive_count: Some("1".to_owned()),
        };
        state
            .visible
            .entry(request.queue_url.clone())
            .or_default()
            .push_back(message);
        state.sent.push(request);
        Ok(())
    }

    /// Messages received and neither deleted nor released.
    pub fn in_flight(&self) -> usize {
        self.state().in_flight.len()
    }
}

#[async_trait]
impl SqsClient for FakeSqs {
    /// The visible messages and those in flight; nothing is ever delayed (timing is not
    /// simulated).
    async fn queue_attributes(&self, queue_url: &str) -> Result<HashMap<String, String>, SqsError> {
        let mut state = self.state();
        *state.requests.entry("GetQueueAttributes").or_default() += 1;
        let visible = state.visible.get(queue_url).map_or(0, VecDeque::len);
        let in_flight = state
            .in_flight
            .values()
            .filter(|(url, _)| url == queue_url)
            .count();
        Ok(HashMap::from([
            (
                "ApproximateNumberOfMessages".to_owned(),
                visible.to_string(),
            ),
            (
                "ApproximateNumberOfMessagesNotVisible".to_owned(),
                in_flight.to_string(),
            ),
            (
                "ApproximateNumberOfMessagesDelayed".to_owned(),
                "0".to_owned(),
            ),
        ]))
    }

    async fn get_queue_url(&self, name: &str) -> Result<String, SqsError> {
        let mut state = self.state();
        *state.requests.entry("GetQueueUrl").or_default() += 1;
        state.url_lookups.push(name.to_owned());
        Ok(FakeSqs::url(name))
    }

    async fn send_message(&self, request: SendMessage) -> Result<(), SqsError> {
        *self.state().requests.entry("SendMessage").or_default() += 1;
        self.store(request)
    }

    async fn send_message_batch(
        &self,
        queue_url: &str,
        requests: Vec<SendMessage>,
    ) -> Result<(), SqsError> {
        *self.state().requests.entry("SendMessageBatch").or_default() += 1;
        if requests.len() > 10 || requests.iter().any(|r| r.queue_url != queue_url) {
            return Err(SqsError::Service {
                operation: "SendMessageBatch",
                code: "TooManyEntriesInBatchRequest".to_owned(),
                message: "fake: at most 10 entries, all for the queue of the call".to_owned(),
            });
        }
        for request in requests {
            self.store(request)?;
        }
        Ok(())
    }

    async fn delete_message_batch(
        &self,
        queue_url: &str,
        receipt_handles: Vec<String>,
    ) -> Result<(), SqsError> {
        let mut state = self.state();
        *state.requests.entry("DeleteMessageBatch").or_default() += 1;
        if receipt_handles.len() > 10 {
            return Err(SqsError::Service {
                operation: "DeleteMessageBatch",
                code: "TooManyEntriesInBatchRequest".to_owned(),
                message: "fake: at most 10 entries".to_owned(),
            });
        }
        for handle in receipt_handles {
            state.in_flight.remove(&handle);
            state.deleted.push((queue_url.to_owned(), handle));
        }
        Ok(())
    }

    async fn receive_message(
        &self,
        request: ReceiveMessage,
    ) -> Result<Vec<ReceivedMessage>, SqsError> {
        let mut state = self.state();
        *state.requests.entry("ReceiveMessage").or_default() += 1;
        state.receives.push(request.clone());
        if state.failing_receives {
            return Err(SqsError::Connection {
                operation: "ReceiveMessage",
                message: "fake: receives fail (injected)".to_owned(),
            });
        }
        let max = usize::try_from(request.max_messages.clamp(1, 10)).unwrap_or(1);
        let mut out = Vec::new();
        while out.len() < max {
            let Some(message) = state
                .visible
                .get_mut(&request.queue_url)
                .and_then(VecDeque::pop_front)
            else {
                break;
            };
            if let Some(handle) = &message.receipt_handle {
                state
                    .in_flight
                    .insert(handle.clone(), (request.queue_url.clone(), message.clone()));
            }
            out.push(message);
        }
        Ok(out)
    }

    async fn delete_message(&self, queue_url: &str, receipt_handle: &str) -> Result<(), SqsError> {
        let mut state = self.state();
        *state.requests.entry("DeleteMessage").or_default() += 1;
        state
            .deleted
            .push((queue_url.to_owned(), receipt_handle.to_owned()));
        state.in_flight.remove(receipt_handle);
        Ok(())
    }

    async fn change_message_visibility(
        &self,
        queue_url: &str,
        receipt_handle: &str,
        visibility_timeout: i32,
    ) -> Result<(), SqsError> {
        let mut state = self.state();
        *state.requests.entry("ChangeMessageVisibility").or_default() += 1;
        let Some((url, mut message)) = state.in_flight.remove(receipt_handle) else {
            return Err(SqsError::Service {
                operation: "ChangeMessageVisibility",
                code: "ReceiptHandleIsInvalid".to_owned(),
                message: format!("fake: {receipt_handle} is not in flight"),
            });
        };
        state.visibility_changes.push((
            queue_url.to_owned(),
            receipt_handle.to_owned(),
            visibility_timeout,
        ));
        message.receive_count = match message.receive_count.as_deref().map(str::parse::<i64>) {
            Some(Ok(n)) => Some((n + 1).to_string()),
            _ => message.receive_count,
        };
        state.visible.entry(url).or_default().push_back(message);
        Ok(())
    }
}
