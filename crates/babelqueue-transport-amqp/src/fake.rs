//! An in-memory [`AmqpClient`] (behind the `fake` feature): queues, per-channel unacked
//! deliveries that go back to their queue when the connection dies, prefetch limits, injected
//! outages and refusals, and an ordered log of what reached the "broker". The supervisor's unit
//! tests run on it; give it to [`AmqpTransport::with_client`](crate::AmqpTransport::with_client)
//! to run the transport without RabbitMQ.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lapin::BasicProperties;
use lapin::types::FieldTable;

use crate::client::{AmqpClient, AmqpLink, AmqpSettle, AmqpSubscription, Incoming};
use crate::error::AmqpError;

/// A stored message: its body, its properties (the header table among them), and whether the
/// "broker" handed it out before (it went back to its queue unacknowledged).
#[derive(Debug, Clone, Default)]
pub struct Stored {
    /// The body.
    pub body: Vec<u8>,
    /// The basic properties it was published with.
    pub properties: BasicProperties,
    /// Whether it was delivered before: its next delivery carries `redelivered`.
    pub redelivered: bool,
}

/// The fake broker's state, shared by every connection of one [`FakeClient`].
#[derive(Debug, Default)]
pub struct World {
    /// The ready messages of each queue, head first.
    pub queues: HashMap<String, VecDeque<Stored>>,
    /// What reached the broker, in order (`connect`, `confirmed q`, `ack q`, `requeue q` …).
    pub log: Vec<String>,
    /// While true, connecting fails with a connection error.
    pub down: bool,
    /// Connections opened so far.
    pub connects: u32,
    /// Queue declarations so far.
    pub declares: u32,
    /// A publish to one of these queues is refused with a negative confirm.
    pub nack_publishes_to: HashSet<String>,
    /// A publish to one of these queues makes the "broker" close the connection (as RabbitMQ
    /// does with 541 INTERNAL_ERROR on a header table it cannot parse).
    pub kill_on_publish_to: HashSet<String>,
    /// This many later connection attempts never complete (a node that accepts TCP and then
    /// says nothing, as a RabbitMQ node restarting after a hard kill can).
    pub hang_connects: u32,
    /// This many later acknowledgements never complete (a half-open connection).
    pub hang_acks: u32,
    /// Every prefetch a subscription was changed to, in order.
    pub prefetch_calls: Vec<u16>,
    /// Every consumer started: its queue, its prefetch, and whether that prefetch is
    /// channel-wide (`subscribe`) or the consumer's own (`subscribe_fixed`).
    pub subscriptions: Vec<(String, u16, bool)>,
    /// Every `basic.ack` frame that reached the broker: queue, delivery tag and `multiple`.
    pub ack_frames: Vec<(String, u64, bool)>,
    /// The arguments each queue was first declared with (or provisioned with,
    /// [`FakeClient::provision`]); a later declaration with other arguments is refused as
    /// RabbitMQ refuses it.
    pub declared: HashMap<String, FieldTable>,
    /// This many later publishes reach their queue, but the connection dies before their
    /// publisher confirm comes back (a node killed between the two).
    pub lose_confirms: u32,
    /// This many later publishes are refused with a negative confirm, whatever their queue (a
    /// quorum queue electing a new leader).
    pub nack_next: u32,
}

/// The in-memory client. Clones share one [`World`].
#[derive(Debug, Clone, Default)]
pub struct FakeClient {
    world: Arc<Mutex<World>>,
    links: Arc<Mutex<Vec<Arc<FakeLink>>>>,
}

impl FakeClient {
    /// The broker's state, to read or to change (injected outages and refusals).
    ///
    /// # Panics
    ///
    /// When a thread panicked while holding it.
    pub fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().unwrap()
    }

    /// Puts `body` at the end of `queue`, without headers, as another producer would.
    pub fn publish_raw(&self, queue: &str, body: &[u8]) {
        self.world()
            .queues
            .entry(queue.to_owned())
            .or_default()
            .push_back(Stored {
                body: body.to_vec(),
                ..Stored::default()
            });
    }

    /// Creates `queue` with `arguments`, as an operator or another framework would.
    pub fn provision(&self, queue: &str, arguments: FieldTable) {
        let mut world = self.world();
        world.declared.insert(queue.to_owned(), arguments);
        world.queues.entry(queue.to_owned()).or_default();
    }

    /// The bodies ready in `queue`, head first.
    pub fn bodies(&self, queue: &str) -> Vec<Vec<u8>> {
        self.world()
            .queues
            .get(queue)
            .map(|q| q.iter().map(|m| m.body.clone()).collect())
            .unwrap_or_default()
    }

    /// Kills every open connection: their unacked deliveries go back to the head of their
    /// queues, as RabbitMQ does when a channel closes.
    ///
    /// # Panics
    ///
    /// When a thread panicked while holding the fake's state.
    pub fn kill_connections(&self) {
        for link in self.links.lock().unwrap().drain(..) {
            link.kill();
        }
    }
}

#[async_trait]
impl AmqpClient for FakeClient {
    async fn connect(&self) -> Result<Arc<dyn AmqpLink>, AmqpError> {
        let hang = {
            let mut world = self.world();
            let hang = world.hang_connects > 0;
            if hang {
                world.hang_connects -= 1;
                world.log.push("connect hangs".into());
            }
            hang
        };
        if hang {
            std::future::pending::<()>().await;
        }
        let mut world = self.world();
        if world.down {
            return Err(AmqpError::Connection("connection refused (fake)".into()));
        }
        world.connects += 1;
        world.log.push("connect".into());
        let link = Arc::new(FakeLink {
            world: self.world.clone(),
            open: Arc::new(AtomicBool::new(true)),
            unacked: Arc::new(Mutex::new(Vec::new())),
        });
        self.links.lock().unwrap().push(link.clone());
        Ok(link)
    }
}

type Unacked = Arc<Mutex<Vec<(u64, String, Stored)>>>;

/// RabbitMQ's reply text when `wanted` differs from the `current` arguments of `queue` (the
/// first argument that differs, the queue type first, in RabbitMQ's wording), `None` when they
/// are equivalent.
fn inequivalent(queue: &str, current: &FieldTable, wanted: &FieldTable) -> Option<String> {
    let shown = |value: Option<&lapin::types::AMQPValue>| match value {
        None => "none".to_owned(),
        Some(lapin::types::AMQPValue::LongString(s)) => {
            format!(
                "the value '{}' of type 'longstr'",
                String::from_utf8_lossy(s.as_bytes())
            )
        }
        Some(other) => format!("the value '{other:?}'"),
    };
    // RabbitMQ compares the queue type first.
    let mut keys: Vec<&lapin::types::ShortString> = current
        .inner()
        .keys()
        .chain(wanted.inner().keys())
        .collect();
    keys.sort_by_key(|key| (key.as_str() != "x-queue-type", key.as_str()));
    keys.dedup();
    keys.into_iter().find_map(|key| {
        let (have, want) = (current.inner().get(key), wanted.inner().get(key));
        (have != want).then(|| {
            format!(
                "PRECONDITION_FAILED - inequivalent arg '{key}' for queue '{queue}' in vhost '/': received {} but current is {}",
                shown(want),
                shown(have)
            )
        })
    })
}

#[derive(Debug)]
struct FakeLink {
    world: Arc<Mutex<World>>,
    open: Arc<AtomicBool>,
    unacked: Unacked,
}

impl FakeLink {
    fn kill(&self) {
        if self.open.swap(false, Ordering::SeqCst) {
            let mut world = self.world.lock().unwrap();
            let mut back = std::mem::take(&mut *self.unacked.lock().unwrap());
            back.sort_by_key(|(tag, _, _)| std::cmp::Reverse(*tag));
            for (_, queue, mut message) in back {
                message.redelivered = true;
                world.queues.entry(queue).or_default().push_front(message);
            }
        }
    }
    fn check(&self) -> Result<(), AmqpError> {
        if self.open.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(AmqpError::Connection("connection closed (fake)".into()))
        }
    }
}

#[async_trait]
impl AmqpLink for FakeLink {
    fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }
    /// The ready messages; the fake attaches no consumer it could count.
    async fn count(&self, queue: &str) -> Result<Option<crate::client::QueueCount>, AmqpError> {
        self.check()?;
        let world = self.world.lock().unwrap();
        Ok(world.queues.get(queue).map(|q| crate::client::QueueCount {
            messages: u32::try_from(q.len()).unwrap_or(u32::MAX),
            consumers: 0,
        }))
    }
    async fn declare(&self, queue: &str, arguments: &FieldTable) -> Result<(), AmqpError> {
        self.check()?;
        let mut world = self.world.lock().unwrap();
        world.declares += 1;
        if let Some(current) = world.declared.get(queue)
            && let Some(detail) = inequivalent(queue, current, arguments)
        {
            // RabbitMQ closes the channel; the fake's publishing "channel" is the connection.
            return Err(AmqpError::DeclareMismatch {
                queue: queue.to_owned(),
                detail,
            });
        }
        world
            .declared
            .entry(queue.to_owned())
            .or_insert_with(|| arguments.clone());
        world.queues.entry(queue.to_owned()).or_default();
        Ok(())
    }
    async fn publish(
        &self,
        queue: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), AmqpError> {
        self.check()?;
        let killed = {
            let mut world = self.world.lock().unwrap();
            let killed = world.kill_on_publish_to.contains(queue);
            if killed {
                world.log.push(format!("closed on {queue}"));
            }
            killed
        };
        if killed {
            self.kill();
            return Err(AmqpError::Connection(
                "541 INTERNAL_ERROR: the broker closed the connection (fake)".into(),
            ));
        }
        let mut world = self.world.lock().unwrap();
        if world.lose_confirms > 0 {
            world.lose_confirms -= 1;
            world.log.push(format!("stored {queue}, confirm lost"));
            world
                .queues
                .entry(queue.to_owned())
                .or_default()
                .push_back(Stored {
                    body: body.to_vec(),
                    properties: properties.clone(),
                    ..Stored::default()
                });
            drop(world);
            self.kill();
            return Err(AmqpError::Connection(
                "the connection died before the publisher confirm (fake)".into(),
            ));
        }
        if world.nack_next > 0 {
            world.nack_next -= 1;
            world.log.push(format!("nacked {queue}"));
            return Err(AmqpError::Nacked {
                queue: queue.to_owned(),
            });
        }
        if world.nack_publishes_to.contains(queue) {
            world.log.push(format!("nacked {queue}"));
            return Err(AmqpError::Nacked {
                queue: queue.to_owned(),
            });
        }
        world.log.push(format!("confirmed {queue}"));
        world
            .queues
            .entry(queue.to_owned())
            .or_default()
            .push_back(Stored {
                body: body.to_vec(),
                properties,
                redelivered: false,
            });
        Ok(())
    }
    async fn subscribe(
        &self,
        queue: &str,
        prefetch: u16,
    ) -> Result<Arc<dyn AmqpSubscription>, AmqpError> {
        self.consume_with(queue, prefetch, true)
    }
    async fn subscribe_fixed(
        &self,
        queue: &str,
        prefetch: u16,
    ) -> Result<Arc<dyn AmqpSubscription>, AmqpError> {
        self.consume_with(queue, prefetch, false)
    }
    async fn renew_publisher(&self) {
        self.world
            .lock()
            .unwrap()
            .log
            .push("new publishing channel".into());
    }
    async fn close(&self) {
        self.kill();
    }
}

impl FakeLink {
    fn consume_with(
        &self,
        queue: &str,
        prefetch: u16,
        channel_wide: bool,
    ) -> Result<Arc<dyn AmqpSubscription>, AmqpError> {
        self.check()?;
        self.world
            .lock()
            .unwrap()
            .subscriptions
            .push((queue.to_owned(), prefetch, channel_wide));
        Ok(Arc::new(FakeSub {
            world: self.world.clone(),
            open: self.open.clone(),
            unacked: self.unacked.clone(),
            queue: queue.to_owned(),
            prefetch: AtomicU16::new(prefetch),
            next_tag: Mutex::new(0),
        }))
    }
}

#[derive(Debug)]
struct FakeSub {
    world: Arc<Mutex<World>>,
    open: Arc<AtomicBool>,
    unacked: Unacked,
    queue: String,
    prefetch: AtomicU16,
    next_tag: Mutex<u64>,
}

impl FakeSub {
    fn try_take(&self) -> Result<Option<Incoming>, AmqpError> {
        if !self.open.load(Ordering::SeqCst) {
            return Err(AmqpError::Connection("consumer ended (fake)".into()));
        }
        let held = self
            .unacked
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, q, _)| *q == self.queue)
            .count();
        if held >= usize::from(self.prefetch.load(Ordering::SeqCst)) {
            return Ok(None);
        }
        let Some(message) = self
            .world
            .lock()
            .unwrap()
            .queues
            .get_mut(&self.queue)
            .and_then(VecDeque::pop_front)
        else {
            return Ok(None);
        };
        let tag = {
            let mut t = self.next_tag.lock().unwrap();
            *t += 1;
            *t
        };
        self.unacked
            .lock()
            .unwrap()
            .push((tag, self.queue.clone(), message.clone()));
        Ok(Some(Incoming {
            body: message.body,
            properties: message.properties,
            exchange: "".into(),
            routing_key: self.queue.as_str().into(),
            redelivered: message.redelivered,
            settle: Arc::new(FakeSettle {
                world: self.world.clone(),
                open: self.open.clone(),
                unacked: self.unacked.clone(),
                tag,
                queue: self.queue.clone(),
            }),
        }))
    }
}

#[async_trait]
impl AmqpSubscription for FakeSub {
    async fn next(&self, timeout: Duration) -> Result<Option<Incoming>, AmqpError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(incoming) = self.try_take()? {
                return Ok(Some(incoming));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    async fn set_prefetch(&self, prefetch: u16) -> Result<(), AmqpError> {
        self.prefetch.store(prefetch, Ordering::SeqCst);
        self.world.lock().unwrap().prefetch_calls.push(prefetch);
        Ok(())
    }
    fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }
}

#[derive(Debug)]
struct FakeSettle {
    world: Arc<Mutex<World>>,
    open: Arc<AtomicBool>,
    unacked: Unacked,
    tag: u64,
    queue: String,
}

impl FakeSettle {
    /// An acknowledgement (single or multiple) that the world says never completes.
    async fn hang_if_told(&self) {
        let hang = {
            let mut world = self.world.lock().unwrap();
            let hang = world.hang_acks > 0;
            if hang {
                world.hang_acks -= 1;
                world.log.push(format!("ack hangs {}", self.queue));
            }
            hang
        };
        if hang {
            std::future::pending::<()>().await;
        }
    }

    fn take(&self) -> Result<Stored, AmqpError> {
        if !self.open.load(Ordering::SeqCst) {
            return Err(AmqpError::StaleDelivery);
        }
        let mut unacked = self.unacked.lock().unwrap();
        let i = unacked
            .iter()
            .position(|(t, q, _)| *t == self.tag && *q == self.queue)
            .ok_or(AmqpError::StaleDelivery)?;
        Ok(unacked.remove(i).2)
    }
}

#[async_trait]
impl AmqpSettle for FakeSettle {
    async fn ack(&self) -> Result<(), AmqpError> {
        self.hang_if_told().await;
        self.take()?;
        let mut world = self.world.lock().unwrap();
        world.log.push(format!("ack {}", self.queue));
        world.ack_frames.push((self.queue.clone(), self.tag, false));
        Ok(())
    }
    fn tag(&self) -> Option<u64> {
        Some(self.tag)
    }
    async fn ack_up_to(&self) -> Result<(), AmqpError> {
        self.hang_if_told().await;
        // As RabbitMQ: the tag itself must be unacknowledged (else the channel closes), and
        // every unacknowledged delivery of the channel up to it is acknowledged with it.
        self.take()?;
        let covered = {
            let mut unacked = self.unacked.lock().unwrap();
            let before = unacked.len();
            unacked.retain(|(t, q, _)| *q != self.queue || *t > self.tag);
            before - unacked.len() + 1
        };
        let mut world = self.world.lock().unwrap();
        for _ in 0..covered {
            world.log.push(format!("ack {}", self.queue));
        }
        world.ack_frames.push((self.queue.clone(), self.tag, true));
        Ok(())
    }
    async fn requeue(&self) -> Result<(), AmqpError> {
        let mut message = self.take()?;
        message.redelivered = true;
        let mut world = self.world.lock().unwrap();
        world.log.push(format!("requeue {}", self.queue));
        world
            .queues
            .entry(self.queue.clone())
            .or_default()
            .push_front(message);
        Ok(())
    }
}
