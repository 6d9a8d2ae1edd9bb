//! An in-memory [`ServiceBusClient`] that records what the transport does: for tests, the
//! conformance runner and broker-free demos. No Service Bus emulator runs on the project's
//! machines, so this fake is how the binding's behaviour is tested.
//!
//! It keeps PeekLock semantics: a received message is locked until it is completed (gone),
//! abandoned (queued again, `DeliveryCount` + 1) or dead-lettered (moved to
//! `<queue>/$DeadLetterQueue` with its reason and description, body unchanged).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::TransportError> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use babelqueue_core::Transport;
//! use babelqueue_transport_asb::{AsbTransport, fake::FakeServiceBus};
//!
//! let fake = Arc::new(FakeServiceBus::new());
//! let transport = AsbTransport::with_client(fake.clone());
//! transport.publish("orders", br#"{"job":"urn:x","attempts":0}"#).await?;
//! assert_eq!(fake.sent()[0].1.subject.as_deref(), Some("urn:x"));
//! let delivery = transport.pop("orders", Duration::from_millis(10)).await?.unwrap();
//! transport.ack(&delivery).await?;
//! assert_eq!(fake.completed().len(), 1);
//! # Ok(()) }
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use crate::client::{LockToken, Received, ServiceBusClient};
use crate::error::AsbError;
use crate::projection::{ApplicationProperties, Outgoing};

/// A message in the entity's `$DeadLetterQueue`.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeDeadLetter {
    /// The message, as it was received.
    pub message: Received,
    /// `DeadLetterReason`.
    pub reason: String,
    /// `DeadLetterErrorDescription`.
    pub description: String,
}

#[derive(Debug, Default)]
struct State {
    queued: HashMap<String, VecDeque<Received>>,
    locked: HashMap<LockToken, Received>,
    sent: Vec<(String, Outgoing)>,
    completed: Vec<LockToken>,
    abandoned: Vec<LockToken>,
    dead_lettered: Vec<NativeDeadLetter>,
    failing: HashSet<String>,
    next_lock: u64,
}

/// The fake client. Sends also enqueue the message, so a publish can be consumed.
#[derive(Debug, Default)]
pub struct FakeServiceBus {
    state: Mutex<State>,
}

impl FakeServiceBus {
    /// An empty fake.
    pub fn new() -> FakeServiceBus {
        FakeServiceBus::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a message on `queue` as another producer would have sent it, with its
    /// application properties and its 1-based `DeliveryCount` as the namespace will report it.
    pub fn deliver(
        &self,
        queue: &str,
        body: impl Into<Vec<u8>>,
        application_properties: ApplicationProperties,
        delivery_count: u32,
    ) -> LockToken {
        let mut state = self.state();
        state.next_lock += 1;
        let lock = LockToken {
            queue: queue.to_owned(),
            id: state.next_lock,
        };
        state
            .queued
            .entry(queue.to_owned())
            .or_default()
            .push_back(Received {
                body: body.into(),
                application_properties,
                delivery_count,
                lock: lock.clone(),
            });
        lock
    }

    /// Makes every send to `queue` fail.
    pub fn fail_sends_to(&self, queue: &str) {
        self.state().failing.insert(queue.to_owned());
    }

    /// Every message sent, with its queue, in order.
    pub fn sent(&self) -> Vec<(String, Outgoing)> {
        self.state().sent.clone()
    }

    /// Every `Complete`.
    pub fn completed(&self) -> Vec<LockToken> {
        self.state().completed.clone()
    }

    /// Every `Abandon`.
    pub fn abandoned(&self) -> Vec<LockToken> {
        self.state().abandoned.clone()
    }

    /// Every native `DeadLetter`.
    pub fn dead_lettered(&self) -> Vec<NativeDeadLetter> {
        self.state().dead_lettered.clone()
    }

    /// Messages locked and not settled.
    pub fn locked(&self) -> usize {
        self.state().locked.len()
    }

    /// Messages waiting on `queue`.
    pub fn queued(&self, queue: &str) -> usize {
        self.state().queued.get(queue).map_or(0, VecDeque::len)
    }

    fn unlock(state: &mut State, lock: &LockToken) -> Result<Received, AsbError> {
        state.locked.remove(lock).ok_or_else(|| {
            AsbError::Rejected(format!("lock {} on {} was lost", lock.id, lock.queue))
        })
    }
}

#[async_trait]
impl ServiceBusClient for FakeServiceBus {
    async fn send(&self, queue: &str, message: Outgoing) -> Result<(), AsbError> {
        if self.state().failing.contains(queue) {
            return Err(AsbError::Connection(format!(
                "injected failure sending to {queue}"
            )));
        }
        self.deliver(
            queue,
            message.body.clone(),
            message.application_properties.clone(),
            1,
        );
        self.state().sent.push((queue.to_owned(), message));
        Ok(())
    }

    async fn receive(&self, queue: &str, _timeout: Duration) -> Result<Option<Received>, AsbError> {
        let mut state = self.state();
        let Some(message) = state.queued.get_mut(queue).and_then(VecDeque::pop_front) else {
            return Ok(None);
        };
        state.locked.insert(message.lock.clone(), message.clone());
        Ok(Some(message))
    }

    async fn complete(&self, lock: &LockToken) -> Result<(), AsbError> {
        let mut state = self.state();
        Self::unlock(&mut state, lock)?;
        state.completed.push(lock.clone());
        Ok(())
    }

    async fn abandon(&self, lock: &LockToken) -> Result<(), AsbError> {
        let mut state = self.state();
        let mut message = Self::unlock(&mut state, lock)?;
        state.abandoned.push(lock.clone());
        message.delivery_count += 1;
        state
            .queued
            .entry(lock.queue.clone())
            .or_default()
            .push_back(message);
        Ok(())
    }

    async fn dead_letter(
        &self,
        lock: &LockToken,
        reason: &str,
        description: &str,
    ) -> Result<(), AsbError> {
        let mut state = self.state();
        let message = Self::unlock(&mut state, lock)?;
        state.dead_lettered.push(NativeDeadLetter {
            message,
            reason: reason.to_owned(),
            description: description.to_owned(),
        });
        Ok(())
    }
}
