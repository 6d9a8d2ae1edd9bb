//! The broker contract: [`Transport`], the [`Delivery`] it hands out, and the optional
//! capabilities a broker may offer, each a trait of its own.
//!
//! # Writing a transport
//!
//! A transport moves bytes; it never decides what happens to a message. The runtime classifies
//! each delivery, picks a settle [`Plan`](crate::decide::Plan) from the decision tables in
//! [`decide`](crate::decide), and carries it out with the methods below. Implement the three
//! required methods, then expose each capability your broker has through the matching
//! accessor (`fn redeliverer(&self) -> Option<&dyn Redeliverer> { Some(self) }`).
//!
//! ```
//! use std::collections::VecDeque;
//! use std::sync::Mutex;
//! use std::time::Duration;
//!
//! use async_trait::async_trait;
//! use babelqueue_core::{Delivery, Transport, TransportError};
//!
//! /// A toy transport: one FIFO per queue, in memory, nothing held in flight.
//! #[derive(Debug, Default)]
//! struct Fifo(Mutex<std::collections::HashMap<String, VecDeque<Vec<u8>>>>);
//!
//! #[async_trait]
//! impl Transport for Fifo {
//!     fn name(&self) -> &'static str {
//!         "fifo"
//!     }
//!     async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
//!         self.0.lock().unwrap().entry(queue.to_owned()).or_default().push_back(body.to_vec());
//!         Ok(())
//!     }
//!     async fn pop(&self, queue: &str, _timeout: Duration) -> Result<Option<Delivery>, TransportError> {
//!         let body = self.0.lock().unwrap().get_mut(queue).and_then(VecDeque::pop_front);
//!         Ok(body.map(|body| Delivery::new(queue, body)))
//!     }
//!     async fn ack(&self, _delivery: &Delivery) -> Result<(), TransportError> {
//!         Ok(()) // removed on pop
//!     }
//! }
//!
//! let transport: Box<dyn Transport> = Box::new(Fifo::default());
//! # let _ = transport;
//! ```

use std::any::Any;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::TransportError;

/// Out-of-band headers that ride beside the envelope (never inside it): `traceparent`,
/// `bq-replay-bypass`, … String keys and values.
pub type Headers = BTreeMap<String, String>;

/// The reserved prefix of routes a transport uses for deliveries no handler can own.
pub const RESERVED_ROUTE_PREFIX: &str = "babelqueue:unsupported-schema-version:";

/// How the runtime routes a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Route {
    /// Route on the URN in the body (every transport, by default).
    #[default]
    Body,
    /// Route on a URN the broker carried out of band (the Pulsar `bq-job` property). The body
    /// is never rewritten; an undecodable body is never rescued by it.
    Urn(String),
    /// The transport's schema-version gate rejected the delivery: it is never decoded, handled
    /// or retried.
    Gated {
        /// The declared version as the broker carried it (unescaped, uncapped).
        declared: String,
        /// The out-of-band URN the delivery carried, kept so a re-publish can restore it.
        urn: Option<String>,
    },
    /// A transport that classifies poison itself (Kafka) hands the record over raw.
    TransportPoison(TransportPoison),
    /// A Redis reservation whose body is poison: dead-lettered unconditionally.
    NonNumericAttempts,
}

/// What a poison-classifying transport knows about a poison record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportPoison {
    /// The attempts the record carried out of band (Kafka `bq-attempts`), 0 when none.
    pub attempts: i64,
    /// Why the record is poison.
    pub cause: String,
    /// The queue the record was first published to.
    pub original_queue: String,
}

impl Route {
    /// The route as the reference SDKs spell it (`""` for [`Route::Body`]), for logs.
    pub fn as_str(&self) -> Cow<'_, str> {
        match self {
            Route::Body => Cow::Borrowed(""),
            Route::Urn(urn) => Cow::Borrowed(urn),
            Route::Gated { declared, .. } => Cow::Owned(format!(
                "{RESERVED_ROUTE_PREFIX}{}",
                crate::gate::escape(declared, true)
            )),
            Route::TransportPoison(_) => Cow::Owned(format!("{RESERVED_ROUTE_PREFIX}poison")),
            Route::NonNumericAttempts => {
                Cow::Owned(format!("{RESERVED_ROUTE_PREFIX}non-numeric-attempts"))
            }
        }
    }

    /// Whether the delivery carries an out-of-band route (anything but [`Route::Body`]).
    pub fn is_out_of_band(&self) -> bool {
        !matches!(self, Route::Body)
    }
}

/// One message a transport handed out, held until the runtime settles it.
pub struct Delivery {
    body: Vec<u8>,
    queue: String,
    headers: Headers,
    route: Route,
    key: Option<Vec<u8>>,
    handle: Box<dyn Any + Send + Sync>,
}

impl Delivery {
    /// A delivery of `body` consumed from `queue`, with no headers, routed on its body.
    pub fn new(queue: impl Into<String>, body: impl Into<Vec<u8>>) -> Delivery {
        Delivery {
            body: body.into(),
            queue: queue.into(),
            headers: Headers::new(),
            route: Route::Body,
            key: None,
            handle: Box::new(()),
        }
    }

    /// Attaches the out-of-band headers the broker carried.
    #[must_use]
    pub fn with_headers(mut self, headers: Headers) -> Delivery {
        self.headers = headers;
        self
    }

    /// Sets the route.
    #[must_use]
    pub fn with_route(mut self, route: Route) -> Delivery {
        self.route = route;
        self
    }

    /// Sets the broker record key (`None` = a null key; an empty key is a key).
    #[must_use]
    pub fn with_key(mut self, key: Option<Vec<u8>>) -> Delivery {
        self.key = key;
        self
    }

    /// Attaches the transport's own settle handle (a receipt, a delivery tag, an offset …).
    #[must_use]
    pub fn with_handle<T: Any + Send + Sync>(mut self, handle: T) -> Delivery {
        self.handle = Box::new(handle);
        self
    }

    /// The body, byte for byte as the broker carried it.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The queue the delivery was consumed from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The out-of-band headers.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The route.
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The broker record key, when the broker has keys.
    pub fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }

    /// The transport's settle handle, when it is a `T`.
    pub fn handle<T: Any>(&self) -> Option<&T> {
        self.handle.downcast_ref()
    }
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("queue", &self.queue)
            .field("body", &String::from_utf8_lossy(&self.body))
            .field("headers", &self.headers)
            .field("route", &self.route)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// The broker contract the runtime needs: publish bytes, reserve one delivery, acknowledge it.
///
/// Object safe: the runtime holds an `Arc<dyn Transport>`. Optional broker capabilities are
/// separate traits, exposed through the accessors at the bottom (each defaults to `None`).
#[async_trait]
pub trait Transport: Send + Sync + fmt::Debug {
    /// A short name for logs (`"memory"`, `"redis"` …).
    fn name(&self) -> &'static str;

    /// Appends an encoded envelope (or any body) to `queue`, unchanged.
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError>;

    /// Reserves the next delivery of `queue`, waiting up to `timeout`; `None` when none came.
    ///
    /// The runtime never cancels a `pop` in progress (a reserved delivery would be stranded),
    /// so keep `timeout` bounded.
    async fn pop(&self, queue: &str, timeout: Duration)
    -> Result<Option<Delivery>, TransportError>;

    /// Acknowledges (removes) a delivery.
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError>;

    /// Called once by [`App::consume`](crate::App::consume) before its first `pop` of `queue`,
    /// with the number of deliveries it will hold at once (its `concurrency`). A transport that
    /// receives in batches or prefetches sizes itself here; the default does nothing.
    ///
    /// A transient error is logged and consuming starts anyway; any other error ends
    /// `consume` before anything is received.
    async fn prepare_consume(&self, queue: &str, concurrency: usize) -> Result<(), TransportError> {
        let _ = (queue, concurrency);
        Ok(())
    }

    /// Releases connections. The runtime calls it after a signal-driven shutdown only.
    async fn close(&self) -> Result<(), TransportError> {
        Ok(())
    }

    /// `true` for a transport that classifies poison bodies itself and hands them over under
    /// [`Route::TransportPoison`] or [`Route::NonNumericAttempts`] (Kafka, Redis); the runtime
    /// then does not classify them again.
    fn classifies_poison(&self) -> bool {
        false
    }

    /// Publishing with out-of-band headers.
    fn header_publisher(&self) -> Option<&dyn HeaderPublisher> {
        None
    }
    /// Publishing with a delivery delay.
    fn delayed_publisher(&self) -> Option<&dyn DelayedPublisher> {
        None
    }
    /// Re-publishing while keeping an out-of-band route.
    fn routed_publisher(&self) -> Option<&dyn RoutedPublisher> {
        None
    }
    /// Broker-confirmed settle writes (with the record key).
    fn settle_publisher(&self) -> Option<&dyn SettlePublisher> {
        None
    }
    /// Native release with a delay.
    fn redeliverer(&self) -> Option<&dyn Redeliverer> {
        None
    }
    /// Writing a dead-letter record and settling as one guarded step.
    fn dead_letter_writer(&self) -> Option<&dyn DeadLetterWriter> {
        None
    }
    /// Making an unsettled delivery come back.
    fn rewinder(&self) -> Option<&dyn Rewinder> {
        None
    }
    /// Broker-specific dead-letter queue names.
    fn dead_letter_namer(&self) -> Option<&dyn DeadLetterNamer> {
        None
    }
    /// Giving a version-gated delivery back at once.
    fn abandoner(&self) -> Option<&dyn Abandoner> {
        None
    }
    /// Leaving a delivery to the broker's own mechanism.
    fn native_settler(&self) -> Option<&dyn NativeSettler> {
        None
    }
    /// The broker's own delivery count.
    fn delivery_counter(&self) -> Option<&dyn DeliveryCounter> {
        None
    }
    /// Taking several deliveries at once, held unsettled.
    fn batch_popper(&self) -> Option<&dyn BatchPopper> {
        None
    }
    /// Reading a queue without consuming it.
    fn browser(&self) -> Option<&dyn Browser> {
        None
    }
}

/// Publish a body with out-of-band headers.
#[async_trait]
pub trait HeaderPublisher: Send + Sync {
    /// Appends `body` to `queue` with `headers` beside it.
    async fn publish_with_headers(
        &self,
        queue: &str,
        body: &[u8],
        headers: &Headers,
    ) -> Result<(), TransportError>;
}

/// Publish a body that becomes visible after a delay.
#[async_trait]
pub trait DelayedPublisher: Send + Sync {
    /// Appends `body` to `queue`, deliverable after `delay`. A transport refuses (with an error,
    /// before sending anything) a delay it cannot honour, rather than truncating it.
    async fn publish_delayed(
        &self,
        queue: &str,
        body: &[u8],
        delay: Duration,
    ) -> Result<(), TransportError>;
}

/// Re-publish keeping the broker routing property a delivery carried ([`Route::Urn`] or a
/// gated delivery's URN).
#[async_trait]
pub trait RoutedPublisher: Send + Sync {
    /// Appends `body` to `queue`, pinning the broker's routing property to `route`.
    async fn publish_routed(
        &self,
        queue: &str,
        body: &[u8],
        route: &Route,
    ) -> Result<(), TransportError>;
}

/// A settle write (retry, release, dead-letter, redrive restore) that returns only once the
/// broker confirmed it, carrying the consumed record's key. Brokers whose acknowledgement is a
/// cumulative position (Kafka) need it.
#[async_trait]
pub trait SettlePublisher: Send + Sync {
    /// Appends `body` to `queue` and waits for the broker's confirmation.
    async fn publish_settle(
        &self,
        queue: &str,
        body: &[u8],
        route: &Route,
        key: Option<&[u8]>,
    ) -> Result<(), TransportError>;
}

/// Give a delivery back to the broker for redelivery after a delay (SQS visibility, the Redis
/// delayed set, Kafka retry tiers) instead of publishing a copy and acknowledging.
#[async_trait]
pub trait Redeliverer: Send + Sync {
    /// Hands `delivery` back, visible again after `delay`. `body` is what the runtime would
    /// re-publish (attempts already counted); a broker that keeps the original ignores it.
    async fn redeliver(
        &self,
        delivery: &Delivery,
        body: &[u8],
        delay: Duration,
    ) -> Result<(), TransportError>;

    /// Whether redelivery is possible at all with this configuration (a Kafka transport without
    /// retry tiers says no: the runtime then warns at start-up and degrades poison to delete).
    fn can_redeliver(&self) -> bool {
        true
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

/// Make an unacknowledged delivery come back on the next pop (Kafka seek, Pulsar nack).
#[async_trait]
pub trait Rewinder: Send + Sync {
    /// Positions the consumer so `delivery` is delivered again (the runtime uses it at
    /// shutdown, for a message whose handler never completed: its place is kept).
    async fn rewind(&self, delivery: &Delivery) -> Result<(), TransportError>;

    /// Makes `delivery` come back after the deliveries waiting now, where the broker can: the
    /// runtime uses it when a settle write failed (a broken dead-letter queue), so that one
    /// message does not block the queue behind it at concurrency 1. The default is
    /// [`rewind`](Rewinder::rewind); a broker whose rewind puts the message back at the head
    /// (RabbitMQ's `basic.nack` with requeue) overrides it.
    async fn rewind_behind(&self, delivery: &Delivery) -> Result<(), TransportError> {
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

/// The broker's own count of earlier deliveries of a message (0-based: 0 on the first).
pub trait DeliveryCounter: Send + Sync {
    /// Earlier deliveries of `delivery`, as the broker counts them.
    fn native_attempts(&self, delivery: &Delivery) -> i64;
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

/// Read a queue's bodies without consuming them (`babelqueue dlq list`).
#[async_trait]
pub trait Browser: Send + Sync {
    /// Up to `max` bodies from the head of `queue` (all when 0), left in place.
    async fn browse(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, TransportError>;
}

/// Publishes `body` to `queue` on behalf of `delivery` (a retry, a release, a dead-letter
/// record, a redrive restore): a broker-confirmed settle write with the delivery's key when the
/// transport offers one, else a routed publish when the delivery carries an out-of-band route,
/// else a plain publish.
pub async fn publish_keeping_route(
    transport: &dyn Transport,
    delivery: &Delivery,
    queue: &str,
    body: &[u8],
) -> Result<(), TransportError> {
    if let Some(settle) = transport.settle_publisher() {
        return settle
            .publish_settle(queue, body, delivery.route(), delivery.key())
            .await;
    }
    if delivery.route().is_out_of_band()
        && let Some(routed) = transport.routed_publisher()
    {
        return routed.publish_routed(queue, body, delivery.route()).await;
    }
    transport.publish(queue, body).await
}
