//! The broker contract: [`Transport`], and the optional capabilities a broker may offer, each a
//! small trait of its own, all reachable through one accessor, [`Transport::capabilities`]
//! (the [crate example](crate) writes one).
//!
//! # Sending: one request, and what the transport honours
//!
//! Every write goes through [`Transport::send`] as one [`Outgoing`] request: the body, and
//! beside it headers, a delay, the facts a consumed delivery carried, a record key. The
//! transport declares which of those parts it honours ([`Sends`], in
//! [`Capabilities::sends`]); the runtime (`babelqueue_core::send::shape`, a pure table) drops
//! or refuses the others before anything is sent:
//!
//! | the part | asked by | declared | not declared |
//! |---|---|---|---|
//! | headers | `App::publish_envelope`, the outbox, a redrive's bypass header | carried | left out (headers never enter the body) |
//! | delay | `App::publish_delayed`, the CLI | carried; the transport refuses one its broker cannot honour, before sending | refused, before anything is sent |
//! | delay | a copy on behalf of a delivery (a retry, a release) | carried, unless [`Sends::confirmed`] | left out: the copy goes at once (the runtime warns at start-up when a back-off is configured) |
//! | carried facts | a copy on behalf of a delivery carrying an out-of-band URN or a schema version | carried, unless [`Sends::confirmed`] | left out |
//! | key | a copy on behalf of a delivery | the delivery's key | left out |
//!
//! # Which capability wins
//!
//! The runtime settles with the most specific capability the transport offers, falling back
//! to sending a copy and acknowledging the original:
//!
//! | the plan | first | then | else |
//! |---|---|---|---|
//! | retry / release | [`Redelivery::Native`] (`Redeliverer`: SQS visibility, Redis scripts, Kafka tiers, a JetStream `-NAK` when [it reproduces the count](Redeliverer::keeps_original)) | [`Redelivery::Impossible`]: left unsettled and rewound | a copy on behalf of the delivery (above), then `ack` |
//! | dead-letter | [`DeadLetterWriter`] (the Redis scripts: write and settle in one step) | | the record as a copy on behalf of the delivery, then `ack` |
//! | leave unsettled (a settle write failed) | [`Rewinder::rewind_behind`] | [`Abandoner`] for a gated delivery on a broker that cannot rewind | nothing: the broker's lock or visibility timeout brings it back |
//! | leave to the broker | [`NativeSettler`] | | (the plan is only chosen when there is one) |
//! | the dead-letter queue name | [`DeadLetterNamer`] | | `<queue><suffix>`, `.dlq` by default |

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

pub use crate::delivery::{Delivery, Headers};
use crate::error::TransportError;
pub use crate::outgoing::{Outgoing, Sends};
use crate::stats::Stats;

/// The broker contract the runtime needs: publish bytes, reserve one delivery, acknowledge it.
///
/// Object safe: the runtime holds an `Arc<dyn Transport>`. Optional broker capabilities are
/// separate traits, listed by [`capabilities`](Transport::capabilities).
#[async_trait]
pub trait Transport: Send + Sync + fmt::Debug {
    /// A short name for logs (`"memory"`, `"redis"` …).
    fn name(&self) -> &'static str;

    /// Appends an encoded envelope (or any body) to `queue`, unchanged.
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError>;

    /// Appends `outgoing.body` to `outgoing.queue` with the parts beside it, unchanged, and
    /// returns once the broker holds it: the one method every write of the runtime goes
    /// through (a publish with headers or a delay, a retry copy, a dead-letter record, a
    /// redrive).
    ///
    /// The runtime only asks for parts the transport declared in
    /// [`Capabilities::sends`]; a transport that declares any overrides this method and carries
    /// every declared part, in any combination. The default sends a plain request through
    /// [`publish`](Transport::publish) and refuses any other, before anything is sent.
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        match Sends::body_only().first_unhonoured(outgoing) {
            None => self.publish(outgoing.queue, outgoing.body).await,
            Some(part) => Err(TransportError::unsupported(format!(
                "the {} transport cannot send {part} with a message",
                self.name()
            ))),
        }
    }

    /// Reserves the next delivery of `queue`, waiting up to `timeout`; `None` when none came.
    ///
    /// The runtime never cancels a `pop` in progress (a reserved delivery would be stranded),
    /// so keep `timeout` bounded. An error of kind [`Auth`](crate::TransportErrorKind::Auth) or
    /// [`Config`](crate::TransportErrorKind::Config) ends a consume loop; any other is logged
    /// and polled again.
    async fn pop(&self, queue: &str, timeout: Duration)
    -> Result<Option<Delivery>, TransportError>;

    /// Acknowledges (removes) a delivery.
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError>;

    /// Reserves up to `max` deliveries of `queue` (`max` is at least 1), waiting up to
    /// `timeout` for the first; empty when none came. Every delivery returned is held
    /// unsettled until the runtime settles it, exactly as one from [`pop`](Transport::pop).
    ///
    /// The consume loop receives through this method, asking for as many deliveries as it has
    /// room for (its free handler slots, or the app's `prefetch`). The default pops one; a
    /// broker that hands out several messages per round trip overrides it. Return what is
    /// available once the first delivery is in rather than waiting to fill `max`, and never
    /// more than `max`: the runtime never cancels a receive, and releases whatever it could not
    /// start at shutdown.
    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        let _ = max;
        Ok(self.pop(queue, timeout).await?.into_iter().collect())
    }

    /// Called once by the runtime's consume loop (`App::consume`) before its first `pop` of `queue`,
    /// with the number of deliveries it will hold at once: its prefetch, running and waiting
    /// for a handler slot (the `concurrency` unless the app or
    /// [`Capabilities::prefetch_per_slot`] sets more). A transport that receives in batches or
    /// prefetches sizes itself here; the default does nothing.
    ///
    /// A transient error is logged and consuming starts anyway; any other error ends
    /// `consume` before anything is received.
    async fn prepare_consume(&self, queue: &str, held: usize) -> Result<(), TransportError> {
        let _ = (queue, held);
        Ok(())
    }

    /// Releases connections. The runtime calls it after a signal-driven shutdown only.
    async fn close(&self) -> Result<(), TransportError> {
        Ok(())
    }

    /// What the broker can do beyond the four required methods (none by default).
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
    }
}

/// How a message goes back for another delivery (a retry, a release).
///
/// A closed set, not `#[non_exhaustive]`: the runtime settles every variant its own way, so a
/// new one is a change of the contract, made in both crates at once.
#[derive(Clone, Copy, Default)]
pub enum Redelivery<'a> {
    /// Publish a copy (delayed where the transport can delay), then acknowledge the original.
    #[default]
    Copy,
    /// The broker's own mechanism, which settles the original too.
    Native(&'a dyn Redeliverer),
    /// Not possible with this configuration (Kafka without retry tiers): a retry is left
    /// unsettled and rewound, a poison body that cannot be dead-lettered is dropped, and the
    /// runtime warns at start-up when `max_attempts` allows retries.
    Impossible,
}

impl fmt::Debug for Redelivery<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Redelivery::Copy => "Copy",
            Redelivery::Native(_) => "Native",
            Redelivery::Impossible => "Impossible",
        })
    }
}

/// The optional capabilities of a transport, at a glance: each is `None` (or the default
/// [`Redelivery::Copy`]) unless the transport offers it. A transport builds its set with the
/// setters (`Capabilities::none().headers(self).rewind(self)`, see the
/// [module example](self)); the runtime reads it with the getters. The module documentation
/// also says which capability wins when several could settle a plan.
#[derive(Clone, Copy, Default)]
pub struct Capabilities<'a> {
    sends: Sends,
    redelivery: Redelivery<'a>,
    dead_letter: Option<&'a dyn DeadLetterWriter>,
    rewind: Option<&'a dyn Rewinder>,
    dead_letter_names: Option<&'a dyn DeadLetterNamer>,
    abandon: Option<&'a dyn Abandoner>,
    native_settle: Option<&'a dyn NativeSettler>,
    batch_pop: Option<&'a dyn BatchPopper>,
    browse: Option<&'a dyn Browser>,
    batch_ack: Option<&'a dyn BatchAcker>,
    batch_publish: Option<&'a dyn BatchPublisher>,
    hold_check: Option<&'a dyn HoldChecker>,
    inspect: Option<&'a dyn Inspector>,
    stats: Option<&'a dyn Stats>,
    take: Option<&'a dyn Taker>,
    prefetch_per_slot: Option<usize>,
}

macro_rules! capability {
    ($(#[$doc:meta])* $field:ident, $setter:ident, $getter:ident, $trait:ident) => {
        $(#[$doc])*
        #[must_use]
        pub fn $setter(mut self, capability: &'a dyn $trait) -> Self {
            self.$field = Some(capability);
            self
        }
        $(#[$doc])*
        pub fn $getter(&self) -> Option<&'a dyn $trait> {
            self.$field
        }
    };
}

impl<'a> Capabilities<'a> {
    /// No capability at all.
    pub fn none() -> Capabilities<'a> {
        Capabilities::default()
    }

    /// The parts of an [`Outgoing`] request [`Transport::send`] honours (the body alone by
    /// default).
    #[must_use]
    pub fn sends(mut self, sends: Sends) -> Self {
        self.sends = sends;
        self
    }

    /// The parts of an [`Outgoing`] request [`Transport::send`] honours.
    pub fn send_parts(&self) -> Sends {
        self.sends
    }

    capability!(
        /// Writing a dead-letter record and settling as one guarded step.
        dead_letter, dead_letter, dead_letter_writer, DeadLetterWriter
    );
    capability!(
        /// Making an unsettled delivery come back.
        rewind, rewind, rewinder, Rewinder
    );
    capability!(
        /// Broker-specific dead-letter queue names.
        dead_letter_names, dead_letter_names, dead_letter_namer, DeadLetterNamer
    );
    capability!(
        /// Giving a version-gated delivery back at once.
        abandon, abandon, abandoner, Abandoner
    );
    capability!(
        /// Leaving a delivery to the broker's own mechanism.
        native_settle, native_settle, native_settler, NativeSettler
    );
    capability!(
        /// Taking several deliveries at once, held unsettled.
        batch_pop, batch_pop, batch_popper, BatchPopper
    );
    capability!(
        /// Reading a queue without consuming it.
        browse, browse, browser, Browser
    );
    capability!(
        /// Acknowledging several deliveries in one step.
        batch_ack, batch_ack, batch_acker, BatchAcker
    );
    capability!(
        /// Publishing several bodies in one step.
        batch_publish, batch_publish, batch_publisher, BatchPublisher
    );
    capability!(
        /// Telling whether a received delivery is still held for this worker.
        hold_check, hold_check, hold_checker, HoldChecker
    );
    capability!(
        /// Saying what the broker knows of a delivery, for tools that show the wire.
        inspect, inspect, inspector, Inspector
    );
    capability!(
        /// Saying what the broker knows of a queue: depths, in flight, dead letters.
        stats, stats, stats_reader, Stats
    );
    capability!(
        /// Taking named entries out of a queue in place (removing one, or moving it to another
        /// queue), without draining the queue.
        take, take, taker, Taker
    );

    /// How a message goes back for another delivery.
    #[must_use]
    pub fn redelivery(mut self, redelivery: Redelivery<'a>) -> Self {
        self.redelivery = redelivery;
        self
    }

    /// How a message goes back for another delivery ([`Redelivery::Copy`] by default).
    pub fn redelivery_mode(&self) -> Redelivery<'a> {
        self.redelivery
    }

    /// Deliveries the consume loop holds per handler slot when the app sets no
    /// `prefetch` (`AppBuilder::prefetch`): its default prefetch becomes
    /// `concurrency × n` (`n` below 1 counts as 1).
    ///
    /// The consume loop holds more than its free handler slots only while handlers finish at
    /// once (their first poll completes them), so a delivery waits for a slot microseconds,
    /// not behind a slow handler. Where a waiting delivery's lock clock runs (a visibility
    /// timeout, a reservation), offer a [`HoldChecker`] too that refuses one whose lock
    /// lapsed: Redis sets 4 with one. RabbitMQ's unacknowledged deliveries stay with their
    /// channel until they are settled or it closes, and its consumer is only kept busy by a
    /// window of deliveries in flight, so its transport sets 4 as well. The cost: deliveries
    /// waiting for a slot are held away from the queue's other consumers.
    #[must_use]
    pub fn prefetch_per_slot(mut self, n: usize) -> Self {
        self.prefetch_per_slot = Some(n.max(1));
        self
    }

    /// Deliveries per handler slot for the default prefetch (1 unless the transport set more
    /// with [`prefetch_per_slot`](Capabilities::prefetch_per_slot)).
    pub fn default_prefetch_per_slot(&self) -> usize {
        self.prefetch_per_slot.unwrap_or(1)
    }
}

impl fmt::Debug for Capabilities<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut offered: Vec<&str> = Vec::new();
        for (name, present) in [
            ("dead_letter", self.dead_letter.is_some()),
            ("rewind", self.rewind.is_some()),
            ("dead_letter_names", self.dead_letter_names.is_some()),
            ("abandon", self.abandon.is_some()),
            ("native_settle", self.native_settle.is_some()),
            ("batch_pop", self.batch_pop.is_some()),
            ("browse", self.browse.is_some()),
            ("batch_ack", self.batch_ack.is_some()),
            ("batch_publish", self.batch_publish.is_some()),
            ("hold_check", self.hold_check.is_some()),
            ("inspect", self.inspect.is_some()),
            ("stats", self.stats.is_some()),
            ("take", self.take.is_some()),
        ] {
            if present {
                offered.push(name);
            }
        }
        f.debug_struct("Capabilities")
            .field("sends", &self.sends)
            .field("redelivery", &self.redelivery)
            .field("offered", &offered)
            .field("prefetch_per_slot", &self.default_prefetch_per_slot())
            .finish()
    }
}

/// What the runtime asks a [`Redeliverer`] to send back.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Redeliver<'a> {
    /// The body to deliver next: the envelope with `attempts` counted for a retry, the
    /// unchanged body for a release, a bare `{"attempts":N}` for the bounded retry of a poison
    /// body. A broker that keeps the original ignores it.
    pub body: &'a [u8],
    /// The `attempts` value `body` carries when the runtime counted an attempt; `None` for a
    /// release that counts nothing.
    pub attempts: Option<i64>,
    /// The delay the runtime computed (back-off, `retry_after`, the release delay); `None` when
    /// none is configured (the broker's own rule applies: at once, or Kafka's attempt-to-tier).
    pub delay: Option<Duration>,
}

impl<'a> Redeliver<'a> {
    /// A request to send `body` back (tests and runtimes of your own).
    pub fn new(body: &'a [u8], attempts: Option<i64>, delay: Option<Duration>) -> Redeliver<'a> {
        Redeliver {
            body,
            attempts,
            delay,
        }
    }

    /// The delay, zero when none.
    pub fn delay_or_zero(&self) -> Duration {
        self.delay.unwrap_or(Duration::ZERO)
    }
}

/// What a [`Redeliverer`] did with a delivery it was asked to send back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivered {
    /// The broker's own mechanism took the delivery back and settles it (SQS visibility, a
    /// JetStream `-NAK`, the Redis scripts): the runtime does nothing more.
    Settled,
    /// The transport stored the message to be delivered next somewhere of its own (a Kafka
    /// retry tier) and left the original unsettled: the runtime acknowledges the original, as
    /// it does after a copy of its own.
    Copied,
}

/// Give a delivery back to the broker for redelivery through its own mechanism (SQS
/// visibility, the Redis scripts, Kafka retry tiers, a JetStream `-NAK`).
///
/// The runtime decides whether the mechanism may be used: when it
/// [keeps the original](Redeliverer::keeps_original), the runtime checks that the next
/// delivery will read as it counted, and publishes its own copy instead when not.
#[async_trait]
pub trait Redeliverer: Send + Sync {
    /// Hands `delivery` back as `redeliver` says, and says what it did.
    async fn redeliver(
        &self,
        delivery: &Delivery,
        redeliver: Redeliver<'_>,
    ) -> Result<Redelivered, TransportError>;

    /// Whether the mechanism delivers the original bytes and headers again, ignoring
    /// [`Redeliver::body`], with the delivery's [`Count`](crate::Count) raised by one
    /// delivery (a JetStream `-NAK`). `false` by default. When `true`, the runtime asks for
    /// the mechanism only when that next delivery reads as carrying the `attempts` it counted
    /// (a body whose `attempts` is ahead of the broker's count does not); otherwise it
    /// publishes its own body, with the delivery's headers, and acknowledges the original.
    fn keeps_original(&self) -> bool {
        false
    }
}

/// Write a dead-letter record and settle the delivery as one guarded step (the Redis scripts):
/// a reservation that already expired writes nothing.
#[async_trait]
pub trait DeadLetterWriter: Send + Sync {
    /// Writes `body` to `queue` and settles `delivery`.
    async fn dead_letter(
        &self,
        delivery: &Delivery,
        queue: &str,
        body: &[u8],
    ) -> Result<(), TransportError>;
}

/// Make an unacknowledged delivery come back (Kafka seek, Pulsar nack, RabbitMQ requeue).
#[async_trait]
pub trait Rewinder: Send + Sync {
    /// Positions the consumer so `delivery` is delivered again (the runtime uses it at
    /// shutdown, for a message whose handler never completed, and for a gated delivery whose
    /// dead-letter write failed: its place is kept).
    async fn rewind(&self, delivery: &Delivery) -> Result<(), TransportError>;

    /// Makes `delivery` come back after the deliveries waiting now, where the broker can: the
    /// runtime uses it when a settle write failed (a broken dead-letter queue), so that one
    /// message does not block the queue behind it at concurrency 1. The default is
    /// [`rewind`](Rewinder::rewind); a broker whose rewind puts the message back at the head
    /// (RabbitMQ's `basic.nack` with requeue, Artemis `released`) overrides it.
    ///
    /// `counted` is the body with the `attempts` the broker counted so far (the runtime's
    /// reconciliation of the body with the delivery's count): what a transport that moves the
    /// message behind by publishing a copy publishes, since the copy's own count starts again.
    async fn rewind_behind(
        &self,
        delivery: &Delivery,
        counted: &[u8],
    ) -> Result<(), TransportError> {
        let _ = counted;
        self.rewind(delivery).await
    }
}

/// The dead-letter queue name for a source queue, where `<queue><suffix>` does not fit the
/// broker's naming rules (SQS: no dots, FIFO names end in `.fifo`).
pub trait DeadLetterNamer: Send + Sync {
    /// The DLQ name for `queue`; `suffix` is the configured suffix, `None` when unset.
    fn dead_letter_queue_name(&self, queue: &str, suffix: Option<&str>) -> String;
}

/// Release the broker lock on a version-gated delivery whose dead-letter write failed, so the
/// broker redelivers it at once (Azure Service Bus `Abandon`).
#[async_trait]
pub trait Abandoner: Send + Sync {
    /// Gives `delivery` back immediately.
    async fn abandon(&self, delivery: &Delivery) -> Result<(), TransportError>;
}

/// Leave a delivery the runtime can neither process nor drop to the broker's own mechanism
/// (SQS: do nothing, the RedrivePolicy applies; ASB: native dead-letter with a reason).
#[async_trait]
pub trait NativeSettler: Send + Sync {
    /// Settles natively; `reason` and `description` say why.
    async fn settle_native(
        &self,
        delivery: &Delivery,
        reason: &str,
        description: &str,
    ) -> Result<(), TransportError>;
}

/// Take several deliveries at once and hold them all unsettled (drain-first consumers such as
/// redrive, on brokers whose `pop` would otherwise take back an unsettled delivery).
#[async_trait]
pub trait BatchPopper: Send + Sync {
    /// Up to `max` deliveries (all currently available when 0), held unsettled.
    async fn pop_batch(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError>;
}

/// Acknowledge several deliveries in one step (one lock, one pipelined call, one multiple-ack).
///
/// When a transport offers it, the consume loop gathers the acknowledgements of deliveries
/// whose handlers succeeded and sends them together: when it has gathered a batch, before it
/// asks the transport for more deliveries (a broker that orders by group, such as SQS FIFO,
/// holds the next ones back while one is unsettled), and before it waits for anything, so that
/// an acknowledgement is never held back while the loop is idle. With a `prefetch` above 1 a
/// batch is what one receive brought. Only plain acknowledgements are gathered; every other
/// settlement (a retry, a dead-letter write, a release) is carried out at once. A delivery whose
/// acknowledgement is lost comes back, as with [`Transport::ack`].
#[async_trait]
pub trait BatchAcker: Send + Sync {
    /// Acknowledges every delivery of `deliveries` (deliveries of several queues may be mixed).
    /// Attempt them all even when one fails; return the first error.
    async fn ack_batch(&self, deliveries: &[Delivery]) -> Result<(), TransportError>;
}

/// Whether a received delivery is still held for this worker, asked by the consume loop before
/// it starts a delivery that waited for a handler slot.
///
/// A broker may take a delivery back before it is settled (RabbitMQ requeues every delivery of
/// a channel that closed; a Redis reservation that lapsed is returned by the next sweep). Such
/// a delivery can no longer be settled safely, and the broker hands it out again, so running
/// its handler here would handle it twice: the loop drops it instead, unsettled (at least once
/// still holds: the broker has it). Answer `false` only when the broker has surely taken the
/// delivery back or may hand it out again; when in doubt, `true`.
pub trait HoldChecker: Send + Sync {
    /// `false` when the broker has taken `delivery` back.
    fn still_held(&self, delivery: &Delivery) -> bool;
}

/// Publish several bodies to one queue in one step (a pipeline, a batch request, a window of
/// confirms), used by the runtime's `App::publish_batch`.
#[async_trait]
pub trait BatchPublisher: Send + Sync {
    /// Appends every body of `bodies` to `queue`, in order where the broker keeps order.
    /// `Ok` only when the broker took them all; on an error some may have been published, and
    /// a producer that sends the batch again may duplicate those (at-least-once).
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError>;
}

/// What a broker knows of one delivery beyond its body, its headers and its [`Facts`](crate::Facts): its
/// own id or position, whether it says it delivered the message before, and its message
/// properties. Shown by tools that show the wire (`babelqueue consume --output wire`), never
/// read by the runtime's rules.
///
/// ```
/// use babelqueue_transport::transport::BrokerView;
///
/// let view = BrokerView::new()
///     .id("orders/0@42")
///     .redelivered(false)
///     .property("timestamp", "1749132727000");
/// assert_eq!(view.id.as_deref(), Some("orders/0@42"));
/// assert_eq!(view.properties, [("timestamp".to_owned(), "1749132727000".to_owned())]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerView {
    /// The broker's own id or position of the message (an SQS `MessageId`, a Kafka
    /// `topic/partition@offset`, a JetStream stream sequence …); `None` where it has none.
    pub id: Option<String>,
    /// Whether the broker says it delivered the message before (AMQP `redelivered`, a
    /// delivery count above one); `None` where it does not say.
    pub redelivered: Option<bool>,
    /// Broker properties that are neither headers nor facts (a content type, a broker
    /// timestamp, a routing key …), name and value as text, in the order the broker gave them.
    pub properties: Vec<(String, String)>,
}

impl BrokerView {
    /// A view that knows nothing yet.
    pub fn new() -> BrokerView {
        BrokerView::default()
    }

    /// With the broker's id or position of the message.
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> BrokerView {
        self.id = Some(id.into());
        self
    }

    /// With whether the broker delivered the message before.
    #[must_use]
    pub fn redelivered(mut self, redelivered: bool) -> BrokerView {
        self.redelivered = Some(redelivered);
        self
    }

    /// With one more property.
    #[must_use]
    pub fn property(mut self, name: impl Into<String>, value: impl Into<String>) -> BrokerView {
        self.properties.push((name.into(), value.into()));
        self
    }
}

/// Tell what the broker knows of a delivery it handed out ([`BrokerView`]). Read on demand by
/// tools, so a transport keeps in its delivery handle what it needs and builds the view only
/// when asked: nothing of it costs the consume path.
pub trait Inspector: Send + Sync {
    /// What the broker knows of `delivery` (one this transport handed out).
    fn inspect(&self, delivery: &Delivery) -> BrokerView;
}

/// Read a queue's bodies without consuming them (`babelqueue dlq list`).
#[async_trait]
pub trait Browser: Send + Sync {
    /// Up to `max` bodies from the head of `queue` (all when 0), left in place.
    async fn browse(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, TransportError>;

    /// Up to `max` bodies of `queue` starting `offset` entries after its head, left in place:
    /// one page of a long queue (the web console's dead-letter browser). `max` 0 reads to the
    /// end.
    ///
    /// The default reads `offset + max` bodies with [`browse`](Browser::browse) and drops the
    /// first `offset`; a transport that can address a range (Redis `LRANGE`, the memory
    /// transport) overrides it so a page costs only its own entries.
    async fn browse_page(
        &self,
        queue: &str,
        offset: usize,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, TransportError> {
        let upto = if max == 0 {
            0
        } else {
            offset.saturating_add(max)
        };
        let mut bodies = self.browse(queue, upto).await?;
        if offset >= bodies.len() {
            return Ok(Vec::new());
        }
        Ok(bodies.split_off(offset))
    }
}

/// Take named entries out of a queue in place: remove one, or move one to another queue in one
/// atomic step. The dead-letter tools (`babelqueue_core::redrive::remove`, a retry by id, the
/// web console) locate the entries with a [`Browser`] and take them with this, so acting on
/// one entry of a long queue costs that entry, not a drain and restore of every other one.
///
/// An entry is named by its body as [`Browser`] reads it, byte for byte, and by the position
/// it was read at (entries from the head, as [`Browser::browse_page`] counts them): the entry
/// at that position is taken when it still holds the body, else (the queue moved since it was
/// read) the first entry from the head that does. A transport offers it only with a
/// [`Browser`] whose [`browse_page`](Browser::browse_page) reads a range (the tools read the
/// queue a page at a time); without one the tools drain and restore as before.
///
/// ```
/// use async_trait::async_trait;
/// use babelqueue_transport::{Taker, TransportError};
///
/// struct NothingToTake;
///
/// #[async_trait]
/// impl Taker for NothingToTake {
///     async fn take(&self, _queue: &str, _at: usize, _body: &[u8]) -> Result<usize, TransportError> {
///         Ok(0)
///     }
///     async fn take_to(
///         &self,
///         _from: &str,
///         _at: usize,
///         _body: &[u8],
///         _to: &str,
///         _publish: &[u8],
///     ) -> Result<usize, TransportError> {
///         Ok(0)
///     }
/// }
/// ```
#[async_trait]
pub trait Taker: Send + Sync {
    /// Removes the entry of `queue` read at `at` holding `body` (see above), leaving every
    /// other entry in its place and order. Returns how many entries were taken: 1, or 0 when
    /// none holds `body` (another tool or worker took it since it was read).
    async fn take(&self, queue: &str, at: usize, body: &[u8]) -> Result<usize, TransportError>;

    /// In one atomic step, removes the entry of `from` read at `at` holding `body` and, only
    /// when one was taken, appends `publish` to `to` exactly as [`Transport::publish`] would
    /// (a retry: `publish` is the body the runtime rewrote). Returns how many entries were
    /// taken: 1, or 0 when none holds `body` (then nothing was written). On an error nothing
    /// was taken nor written.
    async fn take_to(
        &self,
        from: &str,
        at: usize,
        body: &[u8],
        to: &str,
        publish: &[u8],
    ) -> Result<usize, TransportError>;
}
