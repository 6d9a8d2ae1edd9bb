//! An in-memory [`ServiceBusClient`] that records what the transport does: for tests, the
//! conformance runner and broker-free demos. No Service Bus emulator runs on the project's
//! machines, so this fake is how the binding's behaviour is tested.
//!
//! It keeps PeekLock semantics: a received message is locked until it is completed (gone),
//! abandoned (queued again, `DeliveryCount` + 1) or dead-lettered (moved to
//! `<queue>/$DeadLetterQueue` with its reason and description, body unchanged). Each receive
//! takes a fresh lock that lasts the lock duration (a queue's default, 60 s, or
//! [`FakeServiceBus::with_lock_duration`]): when it lapses unsettled (the consumer died), the
//! message is available again ahead of newer ones with `DeliveryCount` + 1, and the old lock is
//! lost (settling it fails). A receive waits up to its timeout for a message, as the
//! namespace's receive does.
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
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::client::{LockToken, Received, ServiceBusClient};
use crate::error::AsbError;
use crate::inspect::SystemProperties;
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

/// A Service Bus queue's default lock duration (`LockDuration` PT1M).
pub const DEFAULT_LOCK_DURATION: Duration = Duration::from_secs(60);

/// The path suffix of a dead-letter sub-queue.
const DEAD_LETTER_SUFFIX: &str = "/$deadletterqueue";

/// `at` in epoch milliseconds.
fn epoch_ms(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How often a waiting receive looks for lapsed locks.
const EXPIRY_CHECK: Duration = Duration::from_millis(20);

#[derive(Debug, Default)]
struct State {
    queued: HashMap<String, VecDeque<Received>>,
    /// Locked messages, with the instant their lock lapses.
    locked: HashMap<LockToken, (Received, Instant)>,
    sent: Vec<(String, Outgoing)>,
    completed: Vec<LockToken>,
    abandoned: Vec<LockToken>,
    dead_lettered: Vec<NativeDeadLetter>,
    failing: HashSet<String>,
    next_lock: u64,
    next_sequence: i64,
}

/// The fake client. Sends also enqueue the message, so a publish can be consumed.
#[derive(Debug)]
pub struct FakeServiceBus {
    state: Mutex<State>,
    lock_duration: Duration,
    /// Woken when a message becomes available (a send, an abandon).
    arrived: Notify,
}

impl Default for FakeServiceBus {
    fn default() -> FakeServiceBus {
        FakeServiceBus::with_lock_duration(DEFAULT_LOCK_DURATION)
    }
}

impl FakeServiceBus {
    /// An empty fake whose locks last [`DEFAULT_LOCK_DURATION`].
    pub fn new() -> FakeServiceBus {
        FakeServiceBus::default()
    }

    /// An empty fake whose locks last `lock_duration` (the queue's `LockDuration`).
    pub fn with_lock_duration(lock_duration: Duration) -> FakeServiceBus {
        FakeServiceBus {
            state: Mutex::default(),
            lock_duration,
            arrived: Notify::new(),
        }
    }

    /// How long a lock lasts.
    pub fn lock_duration(&self) -> Duration {
        self.lock_duration
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
        self.enqueue(
            queue,
            body.into(),
            application_properties,
            delivery_count,
            None,
        )
    }

    /// Queues a message with its `MessageId`, stamped as the namespace stamps one: the next
    /// sequence number of the fake, and the time now as its enqueue time.
    fn enqueue(
        &self,
        queue: &str,
        body: Vec<u8>,
        application_properties: ApplicationProperties,
        delivery_count: u32,
        message_id: Option<String>,
    ) -> LockToken {
        let mut state = self.state();
        state.next_lock += 1;
        state.next_sequence += 1;
        let lock = LockToken {
            queue: queue.to_owned(),
            id: state.next_lock,
        };
        let system = SystemProperties {
            message_id,
            sequence_number: Some(state.next_sequence),
            enqueued_time: Some(epoch_ms(SystemTime::now())),
            locked_until: None,
        };
        state
            .queued
            .entry(queue.to_owned())
            .or_default()
            .push_back(Received {
                body,
                application_properties,
                delivery_count,
                lock: lock.clone(),
                system,
            });
        drop(state);
        self.arrived.notify_waiters();
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
        let mut state = self.state();
        Self::expire(&mut state);
        state.locked.len()
    }

    /// Messages waiting on `queue`.
    pub fn queued(&self, queue: &str) -> usize {
        let mut state = self.state();
        Self::expire(&mut state);
        state.queued.get(queue).map_or(0, VecDeque::len)
    }

    fn unlock(state: &mut State, lock: &LockToken) -> Result<Received, AsbError> {
        Self::expire(state);
        state
            .locked
            .remove(lock)
            .map(|(message, _)| message)
            .ok_or_else(|| {
                AsbError::Rejected(format!("lock {} on {} was lost", lock.id, lock.queue))
            })
    }

    /// Puts every message whose lock lapsed back at the head of its queue, in the order they
    /// were locked, with `DeliveryCount` + 1.
    fn expire(state: &mut State) {
        let now = Instant::now();
        let mut lapsed: Vec<LockToken> = state
            .locked
            .iter()
            .filter(|(_, (_, until))| *until <= now)
            .map(|(lock, _)| lock.clone())
            .collect();
        lapsed.sort_by_key(|lock| std::cmp::Reverse(lock.id));
        for lock in lapsed {
            if let Some((mut message, _)) = state.locked.remove(&lock) {
                message.delivery_count += 1;
                state
                    .queued
                    .entry(lock.queue.clone())
                    .or_default()
                    .push_front(message);
            }
        }
    }

    /// The head of `queue` under a fresh lock, if any.
    fn take(&self, queue: &str) -> Option<Received> {
        let mut state = self.state();
        Self::expire(&mut state);
        let mut message = state.queued.get_mut(queue).and_then(VecDeque::pop_front)?;
        state.next_lock += 1;
        message.lock = LockToken {
            queue: queue.to_owned(),
            id: state.next_lock,
        };
        let until = Instant::now() + self.lock_duration;
        message.system.locked_until = Some(epoch_ms(SystemTime::now() + self.lock_duration));
        state
            .locked
            .insert(message.lock.clone(), (message.clone(), until));
        Some(message)
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
        self.enqueue(
            queue,
            message.body.clone(),
            message.application_properties.clone(),
            1,
            message.message_id.clone(),
        );
        self.state().sent.push((queue.to_owned(), message));
        Ok(())
    }

    async fn receive(&self, queue: &str, timeout: Duration) -> Result<Option<Received>, AsbError> {
        let deadline = Instant::now() + timeout;
        loop {
            // Registered before looking, so a send in between still wakes this receive.
            let mut arrived = std::pin::pin!(self.arrived.notified());
            arrived.as_mut().enable();
            if let Some(message) = self.take(queue) {
                return Ok(Some(message));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let _ = tokio::time::timeout(left.min(EXPIRY_CHECK), arrived).await;
        }
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
        drop(state);
        self.arrived.notify_waiters();
        Ok(())
    }

    /// The counts of `queue` as Service Bus reports them: `ActiveMessageCount` counts the
    /// waiting and the locked messages, `DeadLetterMessageCount` what was dead-lettered
    /// natively from it; `None` for a queue that never held a message.
    async fn counts(&self, queue: &str) -> Result<Option<crate::stats::QueueCounts>, AsbError> {
        let mut state = self.state();
        Self::expire(&mut state);
        let waiting = state.queued.get(queue).map(VecDeque::len);
        let locked = state.locked.keys().filter(|l| l.queue == queue).count();
        let dead = state
            .dead_lettered
            .iter()
            .filter(|d| d.message.lock.queue == queue)
            .count();
        if waiting.is_none() && locked == 0 && dead == 0 {
            return Ok(None);
        }
        Ok(Some(crate::stats::QueueCounts::new(
            (waiting.unwrap_or(0) + locked) as u64,
            0,
            dead as u64,
        )))
    }

    /// The bodies waiting on `queue`, in order, left in place; for `<queue>/$deadletterqueue`
    /// (any case), the messages dead-lettered from `<queue>`. Unlike Service Bus, messages
    /// locked at that moment are not shown.
    async fn peek(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, AsbError> {
        let mut state = self.state();
        Self::expire(&mut state);
        let limit = if max == 0 { usize::MAX } else { max };
        let dead_letters = queue
            .len()
            .checked_sub(DEAD_LETTER_SUFFIX.len())
            .filter(|&at| {
                queue.is_char_boundary(at) && queue[at..].eq_ignore_ascii_case(DEAD_LETTER_SUFFIX)
            })
            .map(|at| &queue[..at]);
        let bodies = match dead_letters {
            Some(parent) => state
                .dead_lettered
                .iter()
                .filter(|d| d.message.lock.queue == parent)
                .map(|d| d.message.body.clone())
                .take(limit)
                .collect(),
            None => state
                .queued
                .get(queue)
                .map(|q| q.iter().map(|m| m.body.clone()).take(limit).collect())
                .unwrap_or_default(),
        };
        Ok(bodies)
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
