//! An in-memory [`PulsarClient`] that records what the transport does: for tests, the
//! conformance runner and broker-free demos.
//!
//! Messages are queued per topic; a received message stays in flight until it is acked (gone)
//! or nacked (queued again with its redelivery count raised, as on a Shared subscription). A
//! message sent with [`send_at`](PulsarClient::send_at) is held until its delivery time, as a
//! broker with delayed delivery holds it for a Shared subscription.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::TransportError> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use babelqueue_core::Transport;
//! use babelqueue_transport_pulsar::{PulsarTransport, fake::FakePulsar};
//!
//! let fake = Arc::new(FakePulsar::new());
//! let transport = PulsarTransport::with_client(fake.clone());
//! transport.publish("orders", br#"{"job":"urn:x","attempts":0}"#).await?;
//! assert_eq!(fake.sent()[0].properties["bq-job"], "urn:x");
//! let delivery = transport.pop("orders", Duration::from_millis(10)).await?.unwrap();
//! transport.ack(&delivery).await?;
//! assert_eq!(fake.acked().len(), 1);
//! # Ok(()) }
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::client::{MessageRef, PulsarClient, Received};
use crate::error::PulsarError;
use crate::inspect::Metadata;
use crate::projection::Properties;

/// The fake broker's clock for a message's publish time, in epoch milliseconds.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One message the transport sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The topic.
    pub topic: String,
    /// The payload.
    pub payload: Vec<u8>,
    /// The properties.
    pub properties: Properties,
    /// The delivery time asked for ([`PulsarClient::send_at`]); `None` for an immediate send.
    pub deliver_at: Option<SystemTime>,
}

#[derive(Debug, Default)]
struct State {
    queued: HashMap<String, VecDeque<Received>>,
    in_flight: HashMap<MessageRef, Received>,
    not_before: HashMap<MessageRef, SystemTime>,
    sent: Vec<Sent>,
    acked: Vec<MessageRef>,
    nacked: Vec<MessageRef>,
    failing: HashSet<String>,
    next_id: u64,
    /// The size of every `ack_many` call, and how many requests received messages.
    ack_calls: Vec<usize>,
    receive_calls: usize,
}

/// The fake client. Sends also enqueue the message on its topic, so a publish can be
/// consumed.
#[derive(Debug, Default)]
pub struct FakePulsar {
    state: Mutex<State>,
}

impl FakePulsar {
    /// An empty fake.
    pub fn new() -> FakePulsar {
        FakePulsar::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a message on `topic` as a producer elsewhere would have sent it, with the
    /// broker's redelivery count.
    pub fn deliver(
        &self,
        topic: &str,
        payload: impl Into<Vec<u8>>,
        properties: Properties,
        redelivery_count: u32,
    ) -> MessageRef {
        let mut state = self.state();
        state.next_id += 1;
        let sequence_id = state.next_id - 1;
        let id = MessageRef {
            topic: topic.to_owned(),
            id: format!("{}:0:-1:-1", state.next_id),
        };
        state
            .queued
            .entry(topic.to_owned())
            .or_default()
            .push_back(Received {
                payload: payload.into(),
                properties,
                redelivery_count,
                id: id.clone(),
                metadata: Metadata {
                    publish_time: now_ms(),
                    producer_name: "fake".to_owned(),
                    sequence_id,
                    event_time: None,
                    partition_key: None,
                },
            });
        id
    }

    /// Messages on `topic` held back because their delivery time has not come yet.
    pub fn held(&self, topic: &str) -> usize {
        let now = SystemTime::now();
        let state = self.state();
        state.queued.get(topic).map_or(0, |queue| {
            queue
                .iter()
                .filter(|m| state.not_before.get(&m.id).is_some_and(|at| *at > now))
                .count()
        })
    }

    fn record_send(
        &self,
        topic: &str,
        payload: &[u8],
        properties: Properties,
        deliver_at: Option<SystemTime>,
    ) -> Result<(), PulsarError> {
        if self.state().failing.contains(topic) {
            return Err(PulsarError::Connection(format!(
                "injected failure sending to {topic}"
            )));
        }
        self.state().sent.push(Sent {
            topic: topic.to_owned(),
            payload: payload.to_vec(),
            properties: properties.clone(),
            deliver_at,
        });
        let id = self.deliver(topic, payload, properties, 0);
        if let Some(at) = deliver_at {
            self.state().not_before.insert(id, at);
        }
        Ok(())
    }

    /// Makes every send to `topic` fail (a broken dead-letter topic).
    pub fn fail_sends_to(&self, topic: &str) {
        self.state().failing.insert(topic.to_owned());
    }

    /// Every message sent, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.state().sent.clone()
    }

    /// The messages sent to `topic`.
    pub fn sent_to(&self, topic: &str) -> Vec<Sent> {
        self.state()
            .sent
            .iter()
            .filter(|s| s.topic == topic)
            .cloned()
            .collect()
    }

    /// The size of every batched acknowledgement ([`PulsarClient::ack_many`]), in order.
    pub fn ack_calls(&self) -> Vec<usize> {
        self.state().ack_calls.clone()
    }

    /// Requests that received messages through [`PulsarClient::receive_many`].
    pub fn receive_calls(&self) -> usize {
        self.state().receive_calls
    }

    /// Every ack, in order.
    pub fn acked(&self) -> Vec<MessageRef> {
        self.state().acked.clone()
    }

    /// Every nack, in order.
    pub fn nacked(&self) -> Vec<MessageRef> {
        self.state().nacked.clone()
    }

    /// Messages received and not settled yet.
    pub fn in_flight(&self) -> usize {
        self.state().in_flight.len()
    }

    /// Messages waiting on `topic`, held ones included.
    pub fn queued(&self, topic: &str) -> usize {
        self.state().queued.get(topic).map_or(0, VecDeque::len)
    }
}

#[async_trait]
impl PulsarClient for FakePulsar {
    async fn send(
        &self,
        topic: &str,
        payload: &[u8],
        properties: Properties,
    ) -> Result<(), PulsarError> {
        self.record_send(topic, payload, properties, None)
    }

    async fn send_at(
        &self,
        topic: &str,
        payload: &[u8],
        properties: Properties,
        deliver_at: SystemTime,
    ) -> Result<(), PulsarError> {
        self.record_send(topic, payload, properties, Some(deliver_at))
    }

    async fn receive(
        &self,
        topic: &str,
        _timeout: Duration,
    ) -> Result<Option<Received>, PulsarError> {
        let now = SystemTime::now();
        let mut state = self.state();
        let State {
            queued, not_before, ..
        } = &mut *state;
        let Some(queue) = queued.get_mut(topic) else {
            return Ok(None);
        };
        let Some(due) = queue
            .iter()
            .position(|m| not_before.get(&m.id).is_none_or(|at| *at <= now))
        else {
            return Ok(None);
        };
        let Some(message) = queue.remove(due) else {
            return Ok(None);
        };
        not_before.remove(&message.id);
        state.in_flight.insert(message.id.clone(), message.clone());
        Ok(Some(message))
    }

    /// Counted as one request ([`FakePulsar::receive_calls`]); what is due, up to `max`.
    async fn receive_many(
        &self,
        topic: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Received>, PulsarError> {
        self.state().receive_calls += 1;
        let mut batch = Vec::new();
        while batch.len() < max.max(1) {
            match self.receive(topic, timeout).await? {
                Some(message) => batch.push(message),
                None => break,
            }
        }
        Ok(batch)
    }

    /// Counted as one call ([`FakePulsar::ack_calls`]), then each acknowledged.
    async fn ack_many(&self, messages: &[MessageRef]) -> Result<(), PulsarError> {
        self.state().ack_calls.push(messages.len());
        let mut first_error = None;
        for message in messages {
            if let Err(e) = self.ack(message).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn ack(&self, message: &MessageRef) -> Result<(), PulsarError> {
        let mut state = self.state();
        if state.in_flight.remove(message).is_none() {
            return Err(PulsarError::ForeignDelivery(format!(
                "{} is not in flight",
                message.id
            )));
        }
        state.acked.push(message.clone());
        Ok(())
    }

    async fn nack(&self, message: &MessageRef) -> Result<(), PulsarError> {
        let mut state = self.state();
        let Some(mut received) = state.in_flight.remove(message) else {
            return Err(PulsarError::ForeignDelivery(format!(
                "{} is not in flight",
                message.id
            )));
        };
        state.nacked.push(message.clone());
        received.redelivery_count += 1;
        state
            .queued
            .entry(message.topic.clone())
            .or_default()
            .push_back(received);
        Ok(())
    }

    /// The fake always browses, as a client with an admin URL does.
    fn can_browse(&self) -> bool {
        true
    }

    /// The backlog [`browse`](PulsarClient::browse) reads and the messages in flight; the
    /// fake's subscription always exists and has no consumer it could count.
    async fn subscription_stats(
        &self,
        topic: &str,
    ) -> Result<Option<crate::stats::SubscriptionStats>, PulsarError> {
        let state = self.state();
        let queued = state.queued.get(topic).map_or(0, VecDeque::len) as u64;
        let unacked = state
            .in_flight
            .values()
            .filter(|m| m.id.topic == topic)
            .count() as u64;
        Ok(Some(crate::stats::SubscriptionStats {
            backlog: queued + unacked,
            unacked,
            consumers: 0,
            // the fake keeps no publish time
            earliest_publish_ms: None,
        }))
    }

    /// The subscription's backlog on `topic` as the broker keeps it: every message not yet
    /// acknowledged (queued, held for later delivery, or in flight), in message-id order.
    /// Nothing changes: no message moves, no redelivery count is raised.
    async fn browse(&self, topic: &str, max: usize) -> Result<Vec<Vec<u8>>, PulsarError> {
        let state = self.state();
        let mut backlog: Vec<&Received> = state
            .queued
            .get(topic)
            .into_iter()
            .flatten()
            .chain(state.in_flight.values().filter(|m| m.id.topic == topic))
            .collect();
        backlog.sort_by_key(|m| entry_of(&m.id));
        let limit = if max == 0 {
            crate::browse::BROWSE_LIMIT
        } else {
            max
        };
        Ok(backlog
            .into_iter()
            .take(limit)
            .map(|m| m.payload.clone())
            .collect())
    }
}

/// The entry number of a fake message id (`"<n>:0:-1:-1"`): the order the fake broker stored
/// it in.
fn entry_of(id: &MessageRef) -> u64 {
    id.id
        .split(':')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}
