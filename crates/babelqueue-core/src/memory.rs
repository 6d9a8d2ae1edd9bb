//! `memory://`: the in-process transport, for tests, demos and broker-free local runs.
//!
//! One FIFO per queue, owned by the transport instance (clone it to share). Unlike the
//! reference SDK's memory transport it behaves like a broker where it matters:
//!
//! * a popped delivery is held in flight until it is acknowledged; a delivery left unsettled is
//!   requeued at the tail of its queue ([`Rewinder`], so it cannot starve the messages behind
//!   it) or, if nobody settles it, comes back after the visibility timeout (30 s by default), so
//!   no path of the runtime can lose it;
//! * releases and delayed publishes honour their delay ([`Redeliverer`], [`Sends::delay`]);
//! * headers ride beside each body ([`Sends::headers`]) and survive a release;
//! * [`MemoryTransport::fail_publishes_to`] injects broker failures for tests.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::TransportError> {
//! use std::time::Duration;
//! use babelqueue_core::{MemoryTransport, Transport};
//!
//! let memory = MemoryTransport::new();
//! memory.publish("orders", b"{}").await?;
//! let delivery = memory.pop("orders", Duration::ZERO).await?.expect("a message");
//! memory.ack(&delivery).await?;
//! assert_eq!(memory.len("orders"), 0);
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

mod stats;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::TransportError;
use crate::transport::{
    BatchAcker, BatchPublisher, BrokerView, Browser, Capabilities, Delivery, Headers, Inspector,
    Outgoing, Redeliver, Redelivered, Redeliverer, Redelivery, Rewinder, Sends, Taker, Transport,
};

#[derive(Debug, Clone)]
struct Stored {
    body: Bytes,
    headers: Headers,
    visible_at: Option<Instant>,
}

#[derive(Debug)]
struct InFlight {
    queue: Arc<str>,
    message: Stored,
    reserved_at: Instant,
}

/// One queue's waiting messages, and its name shared by every delivery taken from it.
#[derive(Debug)]
struct Queue {
    name: Arc<str>,
    waiting: VecDeque<Stored>,
}

impl State {
    /// `queue`, created empty on first use.
    fn queue(&mut self, queue: &str) -> &mut VecDeque<Stored> {
        &mut self
            .queues
            .entry(queue.to_owned())
            .or_insert_with(|| Queue {
                name: Arc::from(queue),
                waiting: VecDeque::new(),
            })
            .waiting
    }
}

#[derive(Debug, Default)]
struct State {
    /// Looked up on every take: a seeded fast hasher (the names are the application's).
    queues: HashMap<String, Queue, foldhash::fast::RandomState>,
    /// By tag: tags are handed out in reservation order, so the oldest reservation is first.
    in_flight: BTreeMap<u64, InFlight>,
    next_tag: u64,
    failing: HashSet<String>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    arrived: Notify,
    visibility_timeout: Duration,
}

/// The settle handle of a memory delivery.
#[derive(Debug, Clone, Copy)]
struct Tag(u64);

/// The in-process transport. Cloning shares the queues.
#[derive(Debug, Clone)]
pub struct MemoryTransport {
    shared: Arc<Shared>,
}

impl Default for MemoryTransport {
    fn default() -> Self {
        MemoryTransport::new()
    }
}

impl MemoryTransport {
    /// Empty queues, a 30 s visibility timeout.
    pub fn new() -> MemoryTransport {
        MemoryTransport::with_visibility_timeout(Duration::from_secs(30))
    }

    /// Empty queues; an unsettled delivery comes back after `timeout`.
    pub fn with_visibility_timeout(timeout: Duration) -> MemoryTransport {
        MemoryTransport {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                arrived: Notify::new(),
                visibility_timeout: timeout,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the maps consistent (every mutation is one
        // statement), so a poisoned lock is still usable.
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Messages waiting in `queue` (visible or delayed), not counting those in flight.
    pub fn len(&self, queue: &str) -> usize {
        self.state()
            .queues
            .get(queue)
            .map_or(0, |q| q.waiting.len())
    }

    /// Whether `queue` holds no waiting message.
    pub fn is_empty(&self, queue: &str) -> bool {
        self.len(queue) == 0
    }

    /// Deliveries popped and not yet settled, over all queues.
    pub fn in_flight(&self) -> usize {
        self.state().in_flight.len()
    }

    /// The bodies waiting in `queue`, head first, left in place.
    pub fn bodies(&self, queue: &str) -> Vec<Vec<u8>> {
        self.state()
            .queues
            .get(queue)
            .map(|q| q.waiting.iter().map(|m| m.body.to_vec()).collect())
            .unwrap_or_default()
    }

    /// The headers of the messages waiting in `queue`, head first.
    pub fn headers_of(&self, queue: &str) -> Vec<Headers> {
        self.state()
            .queues
            .get(queue)
            .map(|q| q.waiting.iter().map(|m| m.headers.clone()).collect())
            .unwrap_or_default()
    }

    /// Makes every publish to `queue` fail (`true`) or succeed again (`false`): broker failures
    /// on demand, for tests.
    pub fn fail_publishes_to(&self, queue: &str, fail: bool) {
        let mut state = self.state();
        if fail {
            state.failing.insert(queue.to_owned());
        } else {
            state.failing.remove(queue);
        }
    }

    fn enqueue(&self, queue: &str, message: Stored) -> Result<(), TransportError> {
        {
            let mut state = self.state();
            if state.failing.contains(queue) {
                return Err(TransportError::connection(format!(
                    "memory: publishing to {queue:?} fails (injected)"
                )));
            }
            state.queue(queue).push_back(message);
        }
        self.shared.arrived.notify_waiters();
        Ok(())
    }

    /// Takes up to `max` visible messages of `queue` (at least one), or says how long until
    /// one becomes visible.
    fn take(&self, queue: &str, max: usize) -> Result<Vec<Delivery>, Option<Instant>> {
        let mut state = self.state();
        let now = Instant::now();
        // Deliveries nobody settled within the visibility timeout come back first.
        let timeout = self.shared.visibility_timeout;
        while let Some(entry) = state.in_flight.first_entry() {
            if now.duration_since(entry.get().reserved_at) < timeout {
                break;
            }
            let f = entry.remove();
            state.queue(&f.queue).push_front(f.message);
        }
        let State {
            queues,
            in_flight,
            next_tag,
            ..
        } = &mut *state;
        let Some(Queue { name, waiting: q }) = queues.get_mut(queue) else {
            return Err(None);
        };
        let max = max.clamp(1, q.len().max(1));
        let mut taken = Vec::with_capacity(max);
        while taken.len() < max {
            let position = q.iter().position(|m| m.visible_at.is_none_or(|t| t <= now));
            let Some(message) = position.and_then(|p| q.remove(p)) else {
                break;
            };
            let tag = *next_tag;
            *next_tag += 1;
            taken.push(
                Delivery::new(Arc::clone(name), message.body.clone())
                    .with_headers(message.headers.clone())
                    .with_handle(Tag(tag)),
            );
            in_flight.insert(
                tag,
                InFlight {
                    queue: Arc::clone(name),
                    message,
                    reserved_at: now,
                },
            );
        }
        if taken.is_empty() {
            return Err(q.iter().filter_map(|m| m.visible_at).min());
        }
        Ok(taken)
    }

    /// Waits up to `timeout` for visible messages of `queue`, and takes up to `max`.
    async fn receive_up_to(&self, queue: &str, max: usize, timeout: Duration) -> Vec<Delivery> {
        // The deadline is read from the clock only when the queue has nothing visible.
        let mut deadline = None;
        loop {
            let notified = self.shared.arrived.notified();
            let next_visible = match self.take(queue, max) {
                Ok(deliveries) => return deliveries,
                Err(next_visible) => next_visible,
            };
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + timeout);
            let wake = next_visible.map_or(deadline, |t| t.min(deadline));
            if Instant::now() >= deadline {
                return Vec::new();
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    fn settle(&self, delivery: &Delivery) -> Option<InFlight> {
        let tag = delivery.handle::<Tag>()?;
        self.state().in_flight.remove(&tag.0)
    }
}

#[async_trait]
impl Transport for MemoryTransport {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        self.enqueue(
            queue,
            Stored {
                body: Bytes::copy_from_slice(body),
                headers: Headers::new(),
                visible_at: None,
            },
        )
    }

    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        Ok(self.receive_up_to(queue, 1, timeout).await.pop())
    }

    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        Ok(self.receive_up_to(queue, max, timeout).await)
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        self.settle(delivery);
        Ok(())
    }

    /// Headers and a delay, together or apart; a delay too large for the clock is visible at
    /// once.
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        self.enqueue(
            outgoing.queue,
            Stored {
                body: Bytes::copy_from_slice(outgoing.body),
                headers: outgoing.headers.cloned().unwrap_or_default(),
                visible_at: outgoing.delay.and_then(|d| Instant::now().checked_add(d)),
            },
        )
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
            .sends(Sends::body_only().headers().delay())
            .redelivery(Redelivery::Native(self))
            .rewind(self)
            .browse(self)
            .take(self)
            .batch_ack(self)
            .batch_publish(self)
            .inspect(self)
            .stats(self)
    }
}

impl Inspector for MemoryTransport {
    fn inspect(&self, delivery: &Delivery) -> BrokerView {
        // Messages here have no id of their own; each delivery gets a tag.
        delivery
            .handle::<Tag>()
            .map_or_else(BrokerView::new, |tag| {
                BrokerView::new().property("delivery_tag", tag.0.to_string())
            })
    }
}

#[async_trait]
impl BatchAcker for MemoryTransport {
    async fn ack_batch(&self, deliveries: &[Delivery]) -> Result<(), TransportError> {
        let mut state = self.state();
        for tag in deliveries.iter().filter_map(|d| d.handle::<Tag>()) {
            state.in_flight.remove(&tag.0);
        }
        Ok(())
    }
}

#[async_trait]
impl BatchPublisher for MemoryTransport {
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        {
            let mut state = self.state();
            if state.failing.contains(queue) {
                return Err(TransportError::connection(format!(
                    "memory: publishing to {queue:?} fails (injected)"
                )));
            }
            state.queue(queue).extend(bodies.iter().map(|body| Stored {
                body: Bytes::copy_from_slice(body),
                headers: Headers::new(),
                visible_at: None,
            }));
        }
        self.shared.arrived.notify_waiters();
        Ok(())
    }
}

#[async_trait]
impl Redeliverer for MemoryTransport {
    async fn redeliver(
        &self,
        delivery: &Delivery,
        redeliver: Redeliver<'_>,
    ) -> Result<Redelivered, TransportError> {
        let (body, delay) = (redeliver.body, redeliver.delay_or_zero());
        if self.state().failing.contains(delivery.queue()) {
            return Err(TransportError::connection(format!(
                "memory: releasing to {:?} fails (injected)",
                delivery.queue()
            )));
        }
        let visible_at = if delay.is_zero() {
            None
        } else {
            Instant::now().checked_add(delay)
        };
        let Some(held) = self.settle(delivery) else {
            return Err(TransportError::rejected(
                "memory: the delivery is no longer held (already settled)",
            ));
        };
        let message = Stored {
            body: Bytes::copy_from_slice(body),
            headers: held.message.headers,
            visible_at,
        };
        self.enqueue(delivery.queue(), message)?;
        Ok(Redelivered::Settled)
    }
}

#[async_trait]
impl Rewinder for MemoryTransport {
    async fn rewind(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let held = self
            .settle(delivery)
            .ok_or_else(|| TransportError::rejected("memory: the delivery is no longer held"))?;
        {
            let mut state = self.state();
            state.queue(&held.queue).push_back(held.message);
        }
        self.shared.arrived.notify_waiters();
        Ok(())
    }
}

#[async_trait]
impl Browser for MemoryTransport {
    async fn browse(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, TransportError> {
        let bodies = self.bodies(queue);
        let n = if max == 0 {
            bodies.len()
        } else {
            max.min(bodies.len())
        };
        Ok(bodies.into_iter().take(n).collect())
    }

    async fn browse_page(
        &self,
        queue: &str,
        offset: usize,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, TransportError> {
        let take = if max == 0 { usize::MAX } else { max };
        Ok(self
            .state()
            .queues
            .get(queue)
            .map(|q| {
                q.waiting
                    .iter()
                    .skip(offset)
                    .take(take)
                    .map(|m| m.body.to_vec())
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// Removes the waiting message at `at` when its body is `body`, else the first whose body is.
fn take_first(waiting: Option<&mut Queue>, at: usize, body: &[u8]) -> usize {
    let Some(queue) = waiting else { return 0 };
    let there = queue.waiting.get(at).is_some_and(|m| m.body == body);
    let found = if there {
        Some(at)
    } else {
        queue.waiting.iter().position(|m| m.body == body)
    };
    match found {
        Some(at) => usize::from(queue.waiting.remove(at).is_some()),
        None => 0,
    }
}

#[async_trait]
impl Taker for MemoryTransport {
    async fn take(&self, queue: &str, at: usize, body: &[u8]) -> Result<usize, TransportError> {
        Ok(take_first(self.state().queues.get_mut(queue), at, body))
    }

    /// The move is made under one lock; a publish to `to` that fails (injected) takes nothing.
    async fn take_to(
        &self,
        from: &str,
        at: usize,
        body: &[u8],
        to: &str,
        publish: &[u8],
    ) -> Result<usize, TransportError> {
        let taken = {
            let mut state = self.state();
            if state.failing.contains(to) {
                return Err(TransportError::connection(format!(
                    "memory: publishing to {to:?} fails (injected)"
                )));
            }
            let taken = take_first(state.queues.get_mut(from), at, body);
            if taken == 1 {
                state.queue(to).push_back(Stored {
                    body: Bytes::copy_from_slice(publish),
                    headers: Headers::new(),
                    visible_at: None,
                });
            }
            taken
        };
        if taken == 1 {
            self.shared.arrived.notify_waiters();
        }
        Ok(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_page_is_read_in_place_from_its_offset() {
        let m = MemoryTransport::new();
        for body in [b"1", b"2", b"3", b"4"] {
            m.publish("q", body).await.unwrap();
        }
        let page = m.browse_page("q", 1, 2).await.unwrap();
        assert_eq!(page, [b"2".to_vec(), b"3".to_vec()]);
        assert_eq!(m.browse_page("q", 3, 0).await.unwrap(), [b"4".to_vec()]);
        assert!(m.browse_page("q", 9, 2).await.unwrap().is_empty());
        assert_eq!(m.len("q"), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn fifo_ack_and_in_flight() {
        let m = MemoryTransport::new();
        m.publish("q", b"1").await.unwrap();
        m.publish("q", b"2").await.unwrap();
        let first = m.pop("q", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(first.body(), b"1");
        assert_eq!((m.len("q"), m.in_flight()), (1, 1));
        m.ack(&first).await.unwrap();
        assert_eq!(m.in_flight(), 0);
        assert!(
            m.pop("empty", Duration::from_millis(10))
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn deliveries_share_their_queue_name_instead_of_copying_it() {
        let m = MemoryTransport::new();
        m.publish("q", b"a").await.unwrap();
        m.publish("q", b"b").await.unwrap();
        let a = m
            .pop("q", Duration::from_millis(10))
            .await
            .unwrap()
            .unwrap();
        let b = m
            .pop("q", Duration::from_millis(10))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((a.queue(), b.queue()), ("q", "q"));
        assert!(Arc::ptr_eq(a.queue_shared(), b.queue_shared()));
    }

    #[tokio::test(start_paused = true)]
    async fn rewind_requeues_and_visibility_brings_back_the_forgotten() {
        let m = MemoryTransport::with_visibility_timeout(Duration::from_secs(5));
        m.publish("q", b"a").await.unwrap();
        m.publish("q", b"b").await.unwrap();
        let a = m.pop("q", Duration::ZERO).await.unwrap().unwrap();
        m.rewind(&a).await.unwrap();
        assert_eq!(m.bodies("q"), vec![b"b".to_vec(), b"a".to_vec()]);
        let b = m.pop("q", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(b.body(), b"b");
        // never settled: back (at the head) after the visibility timeout
        tokio::time::advance(Duration::from_secs(6)).await;
        let again = m.pop("q", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(again.body(), b"b");
        assert_eq!(m.bodies("q"), vec![b"a".to_vec()]);
        assert_eq!(m.in_flight(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_messages_wait_and_pop_waits_for_them() {
        let m = MemoryTransport::new();
        m.send(&Outgoing::new("q", b"later").delay(Duration::from_secs(2)))
            .await
            .unwrap();
        assert!(m.pop("q", Duration::from_secs(1)).await.unwrap().is_none());
        let got = m.pop("q", Duration::from_secs(5)).await.unwrap().unwrap();
        assert_eq!(got.body(), b"later");
    }

    #[tokio::test(start_paused = true)]
    async fn redeliver_keeps_headers_and_injected_failures_fail() {
        let m = MemoryTransport::new();
        let headers = Headers::from([("traceparent".to_owned(), "00-x".to_owned())]);
        m.send(&Outgoing::new("q", b"v1").headers(&headers))
            .await
            .unwrap();
        let d = m.pop("q", Duration::ZERO).await.unwrap().unwrap();
        m.redeliver(&d, Redeliver::new(b"v2", Some(1), None))
            .await
            .unwrap();
        assert_eq!(m.headers_of("q"), vec![headers]);
        assert_eq!(m.bodies("q"), vec![b"v2".to_vec()]);
        m.fail_publishes_to("dlq", true);
        assert!(m.publish("dlq", b"x").await.unwrap_err().is_transient());
        m.fail_publishes_to("dlq", false);
        m.publish("dlq", b"x").await.unwrap();
    }
}
