//! [`AmqpTransport`]: the runtime's [`Transport`] over an [`AmqpClient`], with the connection
//! supervisor.
//!
//! # Supervision
//!
//! The transport holds at most two live connections: one for publishing (publisher confirms)
//! and one for consuming, so a broker that closes the publishing connection (on a message it
//! refuses, or under a memory alarm) leaves the deliveries held on the consuming one alive.
//! Every operation asks for the connection of its role; when it is gone (a broker restart, a
//! network drop, a heartbeat timeout) the caller that notices reconnects, with exponential
//! back-off and jitter between failed attempts, while the others wait for it. A connection
//! that fails within seconds of being opened counts as a failed attempt too, so a broker that
//! keeps closing fresh connections meets a growing pause, never a reconnect storm. Every broker
//! operation is bounded in time ([`AmqpOptions::operation_timeout`]): a half-open connection
//! left by a node killed hard is dropped and re-established instead of waited on forever. Each
//! connection has a generation number:
//!
//! * queue declarations are cached per generation, so a new connection declares again;
//! * a consumer belongs to a generation: `pop` re-subscribes on the new connection;
//! * a delivery remembers its generation and its channel; once that channel closed, RabbitMQ
//!   has already requeued it, so its ack is refused locally ([`AmqpError::StaleDelivery`]),
//!   never sent as a foreign delivery tag on a new channel (which would close that channel).
//!
//! `pop` waits for a reconnect within its own timeout and reports the outage as a transient
//! error when the budget runs out (the runtime logs it and polls again); `publish` waits up to
//! [`AmqpOptions::reconnect_wait`] and re-sends after a connection loss (a message may then
//! arrive twice, never zero times).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::reconnect::ReconnectBackoff;
use babelqueue_core::{
    BatchAcker, BatchPublisher, Capabilities, Delivery, Headers, HoldChecker, Outgoing, Rewinder,
    Sends, Transport, TransportError,
};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::acks::Ledger;
use crate::client::{AmqpClient, AmqpLink, AmqpSettle, AmqpSubscription, LapinClient};
use crate::error::AmqpError;
use crate::inspect::Wire;
use crate::projection;
use crate::topology::{self, QUORUM_POP_PREFETCH, QueueType};
use babelqueue_core::redact::redact;

use crate::url::AmqpUrl;

mod supervisor;

const LOG: &str = "babelqueue::amqp";

/// How the transport behaves beyond the URL.
#[derive(Clone)]
#[non_exhaustive]
pub struct AmqpOptions {
    /// A fixed `basic_qos` prefetch. `None` (the default) follows what the runtime holds:
    /// `App::consume` announces its prefetch (4 per handler slot unless the app sets its own)
    /// before the first receive and the consumer starts with that; without that announcement
    /// (a bare `pop` loop) the prefetch starts at 1 and grows whenever another message is asked
    /// for while every prefetched one is still held, so it settles at the number of handlers
    /// that run at once.
    pub prefetch: Option<u16>,
    /// Declare queues (durable, with the arguments of [`queue_type`](Self::queue_type)) before
    /// first use. Default `true`.
    pub declare: bool,
    /// The type of the queues declared, and of the queues consumed: a quorum queue's consumers
    /// get a prefetch of their own, which quorum queues need even when they were provisioned
    /// elsewhere (`declare=0`). Default [`QueueType::Classic`]; the URL's `queue_type` wins.
    pub queue_type: QueueType,
    /// The first pause after a failed reconnect (default 100 ms); it doubles per failure.
    pub reconnect_min: Duration,
    /// The longest pause between reconnect attempts (default 5 s).
    pub reconnect_max: Duration,
    /// How long a publish waits for a lost connection to come back, or keeps sending a message
    /// RabbitMQ refused (a negative confirm, as a quorum queue without a leader gives) on a new
    /// channel (default 10 s).
    pub reconnect_wait: Duration,
    /// How long one broker operation (a publisher confirm, an acknowledgement, a channel open)
    /// may take before the connection is treated as lost and re-established (default 30 s).
    pub operation_timeout: Duration,
    /// For `amqps://`: a PEM file of CA certificates to trust beside the platform's roots, for
    /// a broker whose certificate a private CA signed (default `None`). Read once by
    /// [`AmqpTransport::connect_with`] and [`AmqpTransport::lazy_with`]; a transport built with
    /// [`AmqpTransport::with_client`] leaves TLS to its client. The URL query key `ca_file`
    /// wins over it.
    pub ca_file: Option<PathBuf>,
    /// For `amqps://`: a PEM file of the client certificate (mutual TLS), with
    /// [`key_file`](Self::key_file); the URL query keys `cert_file` and `key_file` win.
    pub cert_file: Option<PathBuf>,
    /// The PEM file of the client certificate's private key.
    pub key_file: Option<PathBuf>,
    /// RabbitMQ's management HTTP API (e.g. `http://127.0.0.1:15672`), read only by
    /// [`Stats`](babelqueue_core::Stats) for the messages in flight (delivered, not
    /// acknowledged), which AMQP itself does not count. Its user and password, when absent,
    /// are the AMQP URL's. Default: the URL `BQ_AMQP_MANAGEMENT_URL` holds, else none, and
    /// then `in_flight` is not reported. Read by [`AmqpTransport::connect_with`] and
    /// [`AmqpTransport::lazy_with`].
    pub management_url: Option<String>,
}

/// The environment variable holding RabbitMQ's management API URL
/// ([`AmqpOptions::management_url`]'s default), so `connect(url)` and the CLI count the
/// messages in flight.
pub const MANAGEMENT_URL_ENV: &str = "BQ_AMQP_MANAGEMENT_URL";

impl fmt::Debug for AmqpOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmqpOptions")
            .field("prefetch", &self.prefetch)
            .field("declare", &self.declare)
            .field("queue_type", &self.queue_type)
            .field("reconnect_min", &self.reconnect_min)
            .field("reconnect_max", &self.reconnect_max)
            .field("reconnect_wait", &self.reconnect_wait)
            .field("operation_timeout", &self.operation_timeout)
            .field("ca_file", &self.ca_file)
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .field(
                "management_url",
                &self.management_url.as_deref().map(redact),
            )
            .finish()
    }
}

impl Default for AmqpOptions {
    fn default() -> Self {
        AmqpOptions {
            prefetch: None,
            declare: true,
            queue_type: QueueType::Classic,
            reconnect_min: Duration::from_millis(100),
            reconnect_max: Duration::from_secs(5),
            reconnect_wait: Duration::from_secs(10),
            operation_timeout: DEFAULT_OPERATION_TIMEOUT,
            ca_file: None,
            cert_file: None,
            key_file: None,
            management_url: std::env::var(MANAGEMENT_URL_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty()),
        }
    }
}

impl AmqpOptions {
    /// Reads the messages in flight from RabbitMQ's management API at `url`
    /// ([`management_url`](Self::management_url)).
    #[must_use]
    pub fn management_url(mut self, url: impl Into<String>) -> Self {
        self.management_url = Some(url.into());
        self
    }

    /// Sets a fixed prefetch (`None`: follow the runtime's concurrency).
    #[must_use]
    pub fn prefetch(mut self, prefetch: Option<u16>) -> Self {
        self.prefetch = prefetch;
        self
    }
    /// Turns queue declaration on or off.
    #[must_use]
    pub fn declare(mut self, declare: bool) -> Self {
        self.declare = declare;
        self
    }
    /// Sets the type of the queues declared and consumed (the [`topology`] module tells what
    /// each type declares).
    #[must_use]
    pub fn queue_type(mut self, queue_type: QueueType) -> Self {
        self.queue_type = queue_type;
        self
    }
    /// Sets the reconnect back-off bounds.
    #[must_use]
    pub fn reconnect_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.reconnect_min = min;
        self.reconnect_max = max.max(min);
        self
    }
    /// Sets how long a publish waits for a reconnect.
    #[must_use]
    pub fn reconnect_wait(mut self, wait: Duration) -> Self {
        self.reconnect_wait = wait;
        self
    }
    /// Sets the bound on one broker operation.
    #[must_use]
    pub fn operation_timeout(mut self, limit: Duration) -> Self {
        self.operation_timeout = limit;
        self
    }
    /// Trusts the CA certificates of this PEM file for `amqps://`, beside the platform's roots.
    #[must_use]
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }
    /// The old name of [`AmqpOptions::ca_file`].
    #[deprecated(note = "renamed to ca_file, the name every TLS transport uses")]
    #[must_use]
    pub fn tls_ca_file(self, path: impl Into<PathBuf>) -> Self {
        self.ca_file(path)
    }
    /// Presents the client certificate of the PEM file `cert` with the private key of the PEM
    /// file `key` for `amqps://` (mutual TLS).
    #[must_use]
    pub fn client_certificate(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.cert_file = Some(cert.into());
        self.key_file = Some(key.into());
        self
    }
}

/// One live connection and what was set up on it.
struct Live {
    link: Arc<dyn AmqpLink>,
    generation: u64,
    declared: StdMutex<HashSet<String>>,
    /// When it was opened: a connection that dies young counts as a failed attempt.
    opened: Instant,
}

/// A connection that lived less than this before it failed counts as a failed connection
/// attempt for the reconnect back-off, so a broker that accepts every connection and then
/// closes it at once (a message it cannot parse, a policy that kills the connection) is met
/// with a growing, jittered pause instead of a reconnect storm.
const STABLE_CONNECTION: Duration = Duration::from_secs(10);

/// How many connection losses one publish survives: the first is resent on a new connection (a
/// broker restart), a second one means the broker refuses this very message.
const PUBLISH_LOSSES_TOLERATED: u32 = 1;

#[derive(Default)]
struct Supervisor {
    live: Option<Arc<Live>>,
    generation: u64,
    failures: u32,
    retry_at: Option<Instant>,
}

/// What a connection is for. Publishing and consuming each get their own connection, as
/// RabbitMQ recommends: a broker that closes the publishing connection (on a message it refuses,
/// or under a memory alarm that blocks publishers) leaves the consumer's channel, and the
/// deliveries held on it, alive, so they can still be acknowledged or moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Publishing,
    Consuming,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Publishing => "publishing",
            Role::Consuming => "consuming",
        }
    }
}

/// One supervised connection.
#[derive(Default)]
struct Supervised {
    supervisor: Mutex<Supervisor>,
    /// The live connection, readable without awaiting (the hot path of every operation); only
    /// the supervisor (under its async lock) replaces it.
    current: StdMutex<Option<Arc<Live>>>,
    reconnects: AtomicU64,
}

/// A consumer of one queue on one connection.
struct Sub {
    generation: u64,
    sub: Arc<dyn AmqpSubscription>,
    /// Deliveries handed out and not settled yet.
    outstanding: Arc<AtomicUsize>,
    /// Their delivery tags, for multiple-acks.
    ledger: Arc<Ledger>,
    prefetch: AtomicU16,
    /// The prefetch is the consumer's own and never changes (else it is channel-wide and
    /// grows with what a bare `pop` loop holds).
    fixed: bool,
}

struct Inner {
    client: Arc<dyn AmqpClient>,
    options: AmqpOptions,
    /// The management API client, when [`AmqpOptions::management_url`] is set.
    management: Option<crate::management::Management>,
    publishing: Supervised,
    consuming: Supervised,
    subs: StdMutex<HashMap<String, Arc<Sub>>>,
    /// The prefetch each queue grew to, kept across reconnects.
    grown: StdMutex<HashMap<String, u16>>,
    /// The queues whose consumer's prefetch the runtime announced (`prepare_consume`): their
    /// consumers get a prefetch of their own, fixed, instead of a channel-wide one that grows.
    announced: StdMutex<std::collections::HashSet<String>>,
}

/// The settle handle of an AMQP delivery, and what the broker said of it.
pub(crate) struct Handle {
    settle: Arc<dyn AmqpSettle>,
    generation: u64,
    outstanding: Arc<AtomicUsize>,
    /// The delivery tag on its channel, and that channel's ledger.
    pub(crate) tag: Option<u64>,
    ledger: Arc<Ledger>,
    settled: AtomicBool,
    /// The broker's word, kept raw for the [`Inspector`](babelqueue_core::Inspector).
    pub(crate) wire: Wire,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Handle {
    /// Marks the delivery settled (once); `false` when it already was.
    fn take(&self) -> bool {
        if self.settled.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.outstanding.fetch_sub(1, Ordering::SeqCst);
        true
    }
}

/// The RabbitMQ transport. Cheap to clone (clones share the connection).
///
/// See the [crate documentation](crate) for the URL, the capabilities and the deviations from
/// the reference SDK.
#[derive(Clone)]
pub struct AmqpTransport {
    inner: Arc<Inner>,
}

impl fmt::Debug for AmqpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmqpTransport")
            .field("client", &self.inner.client)
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl AmqpTransport {
    /// A passive declare of `queue` on the publishing connection (reconnecting within
    /// `reconnect_wait`), bounded by `operation_timeout`: the figures of `Stats`.
    pub(crate) async fn count(
        &self,
        queue: &str,
    ) -> Result<Option<crate::client::QueueCount>, AmqpError> {
        let deadline = Instant::now() + self.inner.options.reconnect_wait;
        let live = self.inner.link(Role::Publishing, deadline).await?;
        bounded(
            self.inner.options.operation_timeout,
            "counting a queue",
            live.link.count(queue),
        )
        .await
    }

    /// The management API's figures of `queue`: `None` without a management URL, `Some(None)`
    /// when the queue does not exist there.
    pub(crate) async fn managed(
        &self,
        queue: &str,
    ) -> Option<Result<Option<crate::management::ManagedQueue>, AmqpError>> {
        match &self.inner.management {
            Some(management) => Some(management.queue(queue).await),
            None => None,
        }
    }

    /// Parses `url` and connects once, so a wrong host, port, credential or vhost fails here.
    /// Later drops are reconnected by the supervisor.
    pub async fn connect(url: &str) -> Result<AmqpTransport, AmqpError> {
        AmqpTransport::connect_with(url, AmqpOptions::default()).await
    }

    /// [`connect`](AmqpTransport::connect) with options, such as a private CA for `amqps://`
    /// ([`AmqpOptions::ca_file`]). A `prefetch`, `declare=0` or `queue_type` in the URL wins
    /// over the options.
    pub async fn connect_with(url: &str, options: AmqpOptions) -> Result<AmqpTransport, AmqpError> {
        let transport = AmqpTransport::lazy_with(url, options)?;
        transport
            .inner
            .link(Role::Publishing, Instant::now())
            .await
            .map_err(|e| match e {
                AmqpError::Connection(text) => {
                    AmqpError::Connection(format!("{text} (connecting to {})", redact(url)))
                }
                AmqpError::Auth(text) => {
                    AmqpError::Auth(format!("{text} (connecting to {})", redact(url)))
                }
                other => other,
            })?;
        Ok(transport)
    }

    /// Parses `url` without connecting: the first operation connects.
    pub fn lazy(url: &str) -> Result<AmqpTransport, AmqpError> {
        AmqpTransport::lazy_with(url, AmqpOptions::default())
    }

    /// [`lazy`](AmqpTransport::lazy) with options; the CA file, if any, is read here.
    pub fn lazy_with(url: &str, options: AmqpOptions) -> Result<AmqpTransport, AmqpError> {
        let parsed = AmqpUrl::parse(url)?;
        let prefetch = parsed.prefetch.or(options.prefetch);
        let declare = parsed.declare && options.declare;
        let queue_type = parsed.queue_type.unwrap_or(options.queue_type);
        let options = options
            .prefetch(prefetch)
            .declare(declare)
            .queue_type(queue_type);
        let name = format!("babelqueue-rust pid {}", std::process::id());
        let files = crate::tls::TlsFiles::of(&parsed, &options);
        let management = match options.management_url.as_deref() {
            Some(url) => {
                let who = &parsed.uri.authority.userinfo;
                Some(crate::management::Management::new(
                    url,
                    &parsed.uri.vhost,
                    &who.username,
                    &who.password,
                    options.operation_timeout,
                )?)
            }
            None => None,
        };
        let client = LapinClient::new(parsed.uri, name).with_hosts(parsed.hosts);
        let client = files.apply(client)?;
        Ok(AmqpTransport::build(Arc::new(client), options, management))
    }

    /// A transport over any [`AmqpClient`] (a fake one in tests). It reads no management API:
    /// its `in_flight` is what the client seam says.
    pub fn with_client(client: Arc<dyn AmqpClient>, options: AmqpOptions) -> AmqpTransport {
        AmqpTransport::build(client, options, None)
    }

    fn build(
        client: Arc<dyn AmqpClient>,
        options: AmqpOptions,
        management: Option<crate::management::Management>,
    ) -> AmqpTransport {
        AmqpTransport {
            inner: Arc::new(Inner {
                client,
                options,
                management,
                publishing: Supervised::default(),
                consuming: Supervised::default(),
                subs: StdMutex::new(HashMap::new()),
                grown: StdMutex::new(HashMap::new()),
                announced: StdMutex::new(std::collections::HashSet::new()),
            }),
        }
    }

    /// How many times a lost connection was re-established, publishing and consuming
    /// connections together (0 while the first ones live).
    pub fn reconnects(&self) -> u64 {
        self.inner.publishing.reconnects.load(Ordering::SeqCst)
            + self.inner.consuming.reconnects.load(Ordering::SeqCst)
    }

    /// The prefetch the consumer of `queue` currently runs with, when it has one.
    pub fn prefetch_of(&self, queue: &str) -> Option<u16> {
        lock(&self.inner.subs)
            .get(queue)
            .map(|s| s.prefetch.load(Ordering::SeqCst))
    }

    /// Publishes `body` to `queue` with out-of-band `headers`, waiting for the publisher
    /// confirm. The properties are [`projection::properties`] of the body.
    pub async fn publish_confirmed(
        &self,
        queue: &str,
        body: &[u8],
        headers: &Headers,
    ) -> Result<(), AmqpError> {
        let properties = projection::properties(body, headers)?;
        self.inner.publish(queue, body, properties).await
    }
}

/// The default bound on one broker operation ([`AmqpOptions::operation_timeout`]).
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs one operation on the client within `limit`. The supervisor relies on every operation
/// ending: a node killed hard can leave a connection on which a channel open, a publisher
/// confirm or an acknowledgement never completes, and a worker waiting on one forever logs
/// nothing, never reaches its idle timeout and ignores SIGTERM. Running out is a
/// [`AmqpError::Timeout`], which drops the connection (it is re-established).
async fn bounded<T>(
    limit: Duration,
    what: &str,
    operation: impl std::future::Future<Output = Result<T, AmqpError>>,
) -> Result<T, AmqpError> {
    tokio::time::timeout(limit, operation)
        .await
        .map_err(|_| AmqpError::Timeout(format!("{what} took longer than {limit:?}")))?
}

fn lock<T>(m: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section is a single map operation, so a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl Transport for AmqpTransport {
    fn name(&self) -> &'static str {
        "amqp"
    }

    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        Ok(self.publish_confirmed(queue, body, &Headers::new()).await?)
    }

    /// The same confirmed publish, with out-of-band headers in the AMQP header table. Every
    /// write returns only once RabbitMQ confirmed it, so a settle write (retry copy, release,
    /// dead-letter record, shutdown copy) is acknowledged only after that.
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        let none = Headers::new();
        let headers = outgoing.headers.unwrap_or(&none);
        Ok(self
            .publish_confirmed(outgoing.queue, outgoing.body, headers)
            .await?)
    }

    /// The consumer of `queue` starts with a prefetch of what the runtime will hold at once
    /// (unless a fixed `prefetch` was configured), instead of growing to it one delivery at a
    /// time. That prefetch is the consumer's own and stays as announced: a caller that holds
    /// more deliveries unsettled than it announced gets no more until it settles some.
    async fn prepare_consume(&self, queue: &str, held: usize) -> Result<(), TransportError> {
        if self.inner.options.prefetch.is_none() {
            let wanted = u16::try_from(held.max(1)).unwrap_or(u16::MAX);
            let mut grown = lock(&self.inner.grown);
            let entry = grown.entry(queue.to_owned()).or_insert(wanted);
            *entry = (*entry).max(wanted);
        }
        lock(&self.inner.announced).insert(queue.to_owned());
        Ok(())
    }

    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        Ok(self.inner.pop(queue, timeout).await?)
    }

    /// The first delivery waits up to `timeout`; then whatever the consumer already holds (its
    /// prefetch), up to `max`, without waiting.
    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        let Some(first) = self.inner.pop(queue, timeout).await? else {
            return Ok(Vec::new());
        };
        let mut received = vec![first];
        while received.len() < max {
            match self.inner.pop(queue, Duration::ZERO).await {
                Ok(Some(delivery)) => received.push(delivery),
                // Nothing more at hand, or the consumer failed: what is held is handed out,
                // and the next receive meets the failure again.
                Ok(None) | Err(_) => break,
            }
        }
        Ok(received)
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        Ok(self.inner.settle(delivery, false).await?)
    }

    async fn close(&self) -> Result<(), TransportError> {
        lock(&self.inner.subs).clear();
        for conn in [&self.inner.consuming, &self.inner.publishing] {
            let live = {
                let mut sup = conn.supervisor.lock().await;
                *lock(&conn.current) = None;
                sup.live.take()
            };
            if let Some(live) = live {
                live.link.close().await;
            }
        }
        Ok(())
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
            .sends(Sends::body_only().headers().confirmed())
            .rewind(self)
            .batch_publish(self)
            .batch_ack(self)
            .hold_check(self)
            .inspect(self)
            .stats(self)
            .prefetch_per_slot(PREFETCH_PER_SLOT)
    }
}

/// A delivery is held while the connection it came on is the live one and open: once that
/// connection is gone, RabbitMQ has requeued every unacknowledged delivery of its channels and
/// will hand them out again, so the runtime does not start one that waited for a slot.
impl HoldChecker for AmqpTransport {
    fn still_held(&self, delivery: &Delivery) -> bool {
        let Some(handle) = delivery.handle::<Handle>() else {
            return true;
        };
        match lock(&self.inner.consuming.current).as_ref() {
            Some(live) => live.generation == handle.generation && live.link.is_open(),
            None => false,
        }
    }
}

/// Deliveries the runtime holds per handler slot by default ([`Capabilities::prefetch_per_slot`]):
/// a consumer at concurrency 8 keeps a `basic_qos` window of 32. RabbitMQ sends the next
/// delivery only once one is settled, so a window as wide as the handlers leaves the consumer
/// idle for a round trip after every batch: on the local broker (`cargo bench -p
/// babelqueue-transport-amqp --bench amqp`, 20 000 persistent messages, concurrency 8) a window
/// of 8 consumed 9 700-12 000/s, 16 about 14 700/s, and 32, 64 and 256 all about 18 000/s (the
/// broker's own limit there). 4 is also Celery's default prefetch multiplier.
const PREFETCH_PER_SLOT: usize = 4;

/// A batch's in-order run on one channel is one `basic.ack multiple=true`; a delivery another
/// handler still holds (or one being requeued) stops the run, and the deliveries after it are
/// acknowledged one by one, so a multiple-ack never covers a delivery outside the batch.
#[async_trait]
impl BatchAcker for AmqpTransport {
    async fn ack_batch(&self, deliveries: &[Delivery]) -> Result<(), TransportError> {
        let mut first_error = None;
        let mut handles = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            match delivery.handle::<Handle>() {
                Some(handle) if handle.take() => handles.push(handle),
                Some(_) => {
                    first_error.get_or_insert(AmqpError::Other(
                        "this delivery was already settled".to_owned(),
                    ));
                }
                None => {
                    first_error.get_or_insert(AmqpError::Other(
                        "this delivery did not come from the AMQP transport".to_owned(),
                    ));
                }
            }
        }
        let sent = self.inner.ack_many(handles).await;
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(sent?),
        }
    }
}

/// Bodies per window of confirms in flight. Bare lapin on the local broker (2026-12-02, one
/// sweep of 20 000 persistent confirmed publishes per window size, see
/// docs/transports/amqp.md): about 9 100/s with 64 in flight, 10 600/s with 256, 13 800/s with
/// 1 024, and no faster with the whole batch at once. A window holds only borrowed bodies and
/// their properties.
const PUBLISH_WINDOW: usize = 1024;

#[async_trait]
impl BatchPublisher for AmqpTransport {
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        for window in bodies.chunks(PUBLISH_WINDOW) {
            let messages = window
                .iter()
                .map(|body| Ok((*body, projection::properties(body, &Headers::new())?)))
                .collect::<Result<Vec<_>, AmqpError>>()?;
            self.inner.publish_many(queue, &messages).await?;
        }
        Ok(())
    }
}

/// `basic.nack` with requeue: an unsettled delivery goes back to its queue at once instead of
/// holding a prefetch slot until the channel closes.
#[async_trait]
impl Rewinder for AmqpTransport {
    async fn rewind(&self, delivery: &Delivery) -> Result<(), TransportError> {
        Ok(self.inner.settle(delivery, true).await?)
    }

    /// `basic.nack` with requeue puts a message back at the HEAD of its queue, so a message
    /// whose dead-letter write keeps failing would come back first, again and again, and at
    /// concurrency 1 nothing behind it would run. Instead an unchanged copy goes to the end of
    /// the queue (confirmed) and the original is acknowledged; when the copy cannot be sent,
    /// the original is requeued as before. A failed acknowledgement after the copy leaves a
    /// duplicate, never a loss.
    async fn rewind_behind(
        &self,
        delivery: &Delivery,
        _counted: &[u8],
    ) -> Result<(), TransportError> {
        if self.inner.is_stale(delivery) {
            // Its channel closed: RabbitMQ has requeued it already; a copy would be a duplicate.
            return Ok(());
        }
        match self
            .publish_confirmed(delivery.queue(), delivery.body(), delivery.headers())
            .await
        {
            Ok(()) => {
                if let Err(e) = self.inner.settle(delivery, false).await {
                    tracing::warn!(target: LOG, queue = delivery.queue(), error = %e,
                        "A copy of an unsettled message went to the end of its queue, but acknowledging the original failed; it will be delivered twice");
                }
                Ok(())
            }
            Err(e) => {
                tracing::warn!(target: LOG, queue = delivery.queue(), error = %e,
                    "Could not move an unsettled message to the end of its queue; requeueing it in place");
                Ok(self.inner.settle(delivery, true).await?)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use babelqueue_core::{App, Consume, Context, HandlerError, Outcome};

    use super::*;
    use crate::fake::FakeClient;

    const URN: &str = "urn:babel:orders:created";

    fn transport(fake: &FakeClient) -> AmqpTransport {
        AmqpTransport::with_client(
            Arc::new(fake.clone()),
            AmqpOptions::default()
                .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(40)),
        )
    }

    fn body(n: u32) -> Vec<u8> {
        format!(r#"{{"job":"{URN}","trace_id":"t{n}","data":{{"n":{n}}},"meta":{{"id":"m{n}","queue":"q","lang":"rust","schema_version":1}},"attempts":0}}"#).into_bytes()
    }

    #[tokio::test]
    async fn a_lost_connection_is_re_established_and_stale_tags_are_never_sent() {
        let fake = FakeClient::default();
        let t = transport(&fake);
        t.publish("q", &body(1)).await.unwrap();
        let first = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        fake.kill_connections();
        // The delivery's channel is gone: its ack is refused locally, as a transient error.
        let err = t.ack(&first).await.unwrap_err();
        assert!(err.is_transient(), "{err}");
        // The broker requeued it; the next pop reconnects, declares again, re-subscribes.
        let again = t
            .pop("q", Duration::from_millis(200))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(again.body(), first.body());
        t.ack(&again).await.unwrap();
        assert_eq!(t.reconnects(), 1, "the consuming connection came back once");
        let world = fake.world();
        assert_eq!(
            world.connects, 3,
            "a publishing connection, a consuming one, the consuming one again"
        );
        assert_eq!(
            world.declares, 3,
            "the queue is declared once per connection"
        );
        assert!(world.queues["q"].is_empty());
    }

    #[tokio::test]
    async fn an_outage_is_a_transient_error_then_backs_off_until_the_broker_returns() {
        let fake = FakeClient::default();
        let t = transport(&fake);
        t.publish("q", &body(1)).await.unwrap();
        t.publish("q", &body(2)).await.unwrap();
        let first = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        t.ack(&first).await.unwrap();
        fake.world().down = true;
        fake.kill_connections();
        let err = t.pop("q", Duration::from_millis(100)).await.unwrap_err();
        assert!(err.is_transient(), "{err}");
        let connects_while_down = fake.world().connects;
        fake.world().down = false;
        let got = t.pop("q", Duration::from_secs(1)).await.unwrap().unwrap();
        t.ack(&got).await.unwrap();
        assert_eq!(
            connects_while_down, 2,
            "nothing connected while the broker was down"
        );
        assert_eq!(t.reconnects(), 1);
    }

    #[tokio::test]
    async fn publish_waits_for_the_reconnect_and_refusals_surface() {
        let fake = FakeClient::default();
        let t = AmqpTransport::with_client(
            Arc::new(fake.clone()),
            AmqpOptions::default()
                .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(20))
                .reconnect_wait(Duration::from_millis(150)),
        );
        t.publish("q", &body(1)).await.unwrap();
        fake.kill_connections();
        t.publish("q", &body(2)).await.unwrap();
        assert_eq!(fake.bodies("q").len(), 2);
        fake.world().down = true;
        fake.kill_connections();
        let err = t.publish("q", &body(3)).await.unwrap_err();
        assert!(err.is_transient(), "{err}");
        fake.world().down = false;
        fake.world().nack_publishes_to.insert("q".into());
        let err = t.publish("q", &body(4)).await.unwrap_err();
        assert!(
            !err.is_transient() && err.to_string().contains("negative publisher confirm"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn prefetch_follows_what_the_runtime_holds() {
        let fake = FakeClient::default();
        let t = transport(&fake);
        for n in 0..3 {
            fake.publish_raw("q", &body(n));
        }
        let a = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(t.prefetch_of("q"), Some(1));
        let b = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        let c = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(t.prefetch_of("q"), Some(3));
        t.ack(&a).await.unwrap();
        assert!(
            t.pop("q", Duration::from_millis(20))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(t.prefetch_of("q"), Some(3), "a free slot does not raise it");
        t.ack(&b).await.unwrap();
        t.ack(&c).await.unwrap();
        // A bare `pop` loop's prefetch is channel-wide: it grew on the running consumer.
        assert_eq!(fake.world().subscriptions, [("q".to_owned(), 1, true)]);
        assert_eq!(fake.world().prefetch_calls, [2, 3]);

        // Through the runtime: 4 handlers at once hold 4 deliveries per slot by default, so the
        // prefetch is 16 from the start; `.prefetch(4)` keeps it at the concurrency.
        for (prefetch, expected) in [(None, 16), (Some(4), 4)] {
            let fake = FakeClient::default();
            let t = transport(&fake);
            for n in 0..40 {
                fake.publish_raw("q", &body(n));
            }
            let builder = App::builder(t.clone())
                .queue("q")
                .concurrency(4)
                .poll_timeout(Duration::from_millis(20))
                .handle(URN, |_ctx: Context| async {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Ok::<(), HandlerError>(())
                });
            let app = match prefetch {
                Some(n) => builder.prefetch(n),
                None => builder,
            }
            .build()
            .unwrap();
            let summary = app
                .consume(Consume::new().max_messages(40).handle_signals(false))
                .await
                .unwrap();
            assert_eq!(summary.processed, 40);
            assert_eq!(t.prefetch_of("q"), Some(expected), "{prefetch:?}");
            assert!(
                fake.world().prefetch_calls.is_empty(),
                "App::consume announced what it holds: the consumer started at {expected}, nothing to grow"
            );
            // Known before the first delivery, the prefetch is the consumer's own.
            assert_eq!(
                fake.world().subscriptions,
                [("q".to_owned(), expected, false)]
            );
        }

        // A prefetch fixed in the options is the consumer's own too.
        let fake = FakeClient::default();
        let t = AmqpTransport::with_client(
            Arc::new(fake.clone()),
            AmqpOptions::default().prefetch(Some(7)),
        );
        fake.publish_raw("q", &body(1));
        let d = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        t.ack(&d).await.unwrap();
        assert_eq!(fake.world().subscriptions, [("q".to_owned(), 7, false)]);
        assert!(fake.world().prefetch_calls.is_empty());
    }

    /// A delivery that waited for a slot while its connection died is not handled on the dead
    /// channel (RabbitMQ requeued it): each message is handled once, except the one whose
    /// handler was running when the connection died (its ack could not be sent).
    #[tokio::test]
    async fn deliveries_of_a_dead_connection_are_not_started() {
        let fake = FakeClient::default();
        let t = transport(&fake);
        for n in 0..4 {
            fake.publish_raw("q", &body(n));
        }
        // Held while its connection is the live one.
        let d = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        assert!(t.still_held(&d));
        fake.kill_connections();
        assert!(!t.still_held(&d), "its connection died");

        let fake = FakeClient::default();
        let t = transport(&fake);
        for n in 0..4 {
            fake.publish_raw("q", &body(n));
        }
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let killer = fake.clone();
        // Concurrency 1 with the default 4 per slot: the first handler kills the connection
        // while three more deliveries wait in the runtime.
        let app = App::builder(t.clone())
            .queue("q")
            .poll_timeout(Duration::from_millis(20))
            .rewind_pause(Duration::from_millis(1))
            .handle(URN, move |_ctx: Context| {
                if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                    killer.kill_connections();
                }
                async { Ok::<(), HandlerError>(()) }
            })
            .build()
            .unwrap();
        let summary = app
            .consume(
                Consume::new()
                    .idle_timeout(Duration::from_millis(300))
                    .handle_signals(false),
            )
            .await
            .unwrap();
        let calls = calls.load(Ordering::SeqCst);
        assert_eq!(
            calls, 5,
            "four messages, the first handled twice: {summary:?}"
        );
        assert!(fake.bodies("q").is_empty(), "all acknowledged in the end");
    }

    /// A transport that keeps sending a refused message for 300 ms only.
    fn impatient(fake: &FakeClient) -> AmqpTransport {
        AmqpTransport::with_client(
            Arc::new(fake.clone()),
            AmqpOptions::default()
                .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(40))
                .reconnect_wait(Duration::from_millis(300)),
        )
    }

    #[tokio::test]
    async fn settle_writes_are_confirmed_before_the_ack_and_a_refused_one_requeues() {
        let fake = FakeClient::default();
        let t = impatient(&fake);
        let app = App::builder(t.clone())
            .queue("q")
            .max_attempts(2)
            .dead_letter(true)
            .rewind_pause(Duration::from_millis(1))
            .poll_timeout(Duration::from_millis(20))
            .handle(URN, |_ctx: Context| async {
                Err::<(), _>(HandlerError::new("boom"))
            })
            .build()
            .unwrap();
        fake.publish_raw("q", &body(1));
        let first = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(app.dispatch(first).await, Outcome::Retried);
        let second = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        assert!(String::from_utf8_lossy(second.body()).contains(r#""attempts":1"#));
        fake.world().nack_publishes_to.insert("q.dlq".into());
        assert_eq!(app.dispatch(second).await, Outcome::Unsettled);
        let log = fake.world().log.clone();
        assert_eq!(
            log[..4],
            ["connect", "connect", "confirmed q", "ack q"],
            "the copy is confirmed before the ack"
        );
        assert_eq!(
            log[4..log.len() - 2],
            ["nacked q.dlq", "new publishing channel"],
            "a classic queue's refusal is its answer: not sent again, and the next publish \
             goes out on a new channel: {log:?}"
        );
        assert_eq!(
            log[log.len() - 2..],
            ["confirmed q", "ack q"],
            "then the message moves, unchanged, to the end of its queue"
        );
        fake.world().nack_publishes_to.clear();
        let third = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(app.dispatch(third).await, Outcome::DeadLettered);
        assert_eq!(fake.bodies("q.dlq").len(), 1);
        assert!(fake.bodies("q").is_empty());
    }

    fn failing_app(t: &AmqpTransport) -> (App, Arc<StdMutex<Vec<i64>>>) {
        let seen = Arc::new(StdMutex::new(Vec::new()));
        let s = seen.clone();
        let app = App::builder(t.clone())
            .queue("q")
            .max_attempts(1)
            .dead_letter(true)
            .rewind_pause(Duration::from_millis(1))
            .poll_timeout(Duration::from_millis(20))
            .handle(URN, move |ctx: Context| {
                let s = s.clone();
                async move {
                    let data: serde_json::Value = ctx.data_as().unwrap();
                    let n = data["n"].as_i64().unwrap_or(-1);
                    s.lock().unwrap().push(n);
                    if n == 1 {
                        Err(HandlerError::new("boom"))
                    } else {
                        Ok(())
                    }
                }
            })
            .build()
            .unwrap();
        (app, seen)
    }

    #[tokio::test]
    async fn a_broken_dead_letter_queue_does_not_block_the_messages_behind() {
        let fake = FakeClient::default();
        let t = impatient(&fake);
        fake.world().nack_publishes_to.insert("q.dlq".into());
        fake.publish_raw("q", &body(1));
        fake.publish_raw("q", &body(2));
        let (app, seen) = failing_app(&t);
        app.consume(Consume::new().max_messages(4).handle_signals(false))
            .await
            .unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            &seen[..2],
            [1, 2],
            "the good message ran second, not never: {seen:?}"
        );
        // The failing one is still there, unchanged, waiting for the DLQ to come back.
        assert_eq!(fake.bodies("q"), [body(1)]);
    }

    #[tokio::test]
    async fn a_message_the_broker_closes_the_connection_on_is_not_resent_forever() {
        let fake = FakeClient::default();
        let t = AmqpTransport::with_client(
            Arc::new(fake.clone()),
            AmqpOptions::default()
                .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(400))
                .reconnect_wait(Duration::from_secs(5)),
        );
        fake.world().kill_on_publish_to.insert("q.dlq".into());
        // One publish: the first loss is resent on a new connection, the second is final.
        let err = t.publish("q.dlq", &body(9)).await.unwrap_err();
        assert!(!err.is_transient(), "{err}");
        assert!(
            err.to_string().contains("closed the connection 2 times"),
            "{err}"
        );
        assert_eq!(fake.world().connects, 2);

        // Through the runtime for two seconds: the message whose dead-letter record the broker
        // refuses comes back, but the reconnects back off instead of storming, and the good
        // message behind it is handled.
        fake.publish_raw("q", &body(1));
        fake.publish_raw("q", &body(2));
        let (app, seen) = failing_app(&t);
        let stop = app.stop_handle();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            stop.stop();
        });
        app.consume(Consume::new().handle_signals(false))
            .await
            .unwrap();
        let connects = fake.world().connects;
        assert!(
            connects <= 14,
            "{connects} connections in 2 s: a reconnect storm"
        );
        let seen = seen.lock().unwrap().clone();
        assert!(seen.contains(&2), "{seen:?}");
        let left: Vec<_> = fake.bodies("q");
        assert_eq!(left, [body(1)], "nothing lost");
    }

    /// A worker must not wedge after a hard kill of the node (no log, no idle timeout, SIGTERM
    /// ignored) on an operation that never completes, as it once did. Every
    /// operation is bounded: a connect and an acknowledgement that never answer are dropped,
    /// the connection is re-established, nothing is lost, and the loop reaches its idle
    /// timeout.
    #[tokio::test]
    async fn operations_that_never_complete_are_bounded_and_the_loop_stays_alive() {
        let fake = FakeClient::default();
        let t = AmqpTransport::with_client(
            Arc::new(fake.clone()),
            AmqpOptions::default()
                .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(40))
                .operation_timeout(Duration::from_millis(300)),
        );
        fake.publish_raw("q", &body(1));
        fake.publish_raw("q", &body(2));
        {
            let mut world = fake.world();
            world.hang_connects = 1;
            world.hang_acks = 1;
        }
        let handled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let h = handled.clone();
        let app = App::builder(t.clone())
            .queue("q")
            .poll_timeout(Duration::from_millis(50))
            .handle(URN, move |_ctx: Context| {
                h.fetch_add(1, Ordering::SeqCst);
                async { Ok::<(), HandlerError>(()) }
            })
            .build()
            .unwrap();
        let summary = tokio::time::timeout(
            Duration::from_secs(10),
            app.consume(
                Consume::new()
                    .idle_timeout(Duration::from_millis(500))
                    .handle_signals(false),
            ),
        )
        .await
        .expect("the consume loop reached its idle timeout instead of wedging")
        .unwrap();
        assert!(summary.processed >= 2, "{summary:?}");
        assert!(fake.bodies("q").is_empty(), "both handled and acknowledged");
        assert!(handled.load(Ordering::SeqCst) >= 2);
        let log = fake.world().log.clone();
        assert!(log.contains(&"connect hangs".to_owned()), "{log:?}");
        assert!(log.contains(&"ack hangs q".to_owned()), "{log:?}");
        assert!(
            t.reconnects() >= 1,
            "the connection with the hung ack was replaced"
        );
    }

    #[tokio::test]
    async fn headers_ride_beside_the_body_and_come_back_as_text() {
        let fake = FakeClient::default();
        let t = transport(&fake);
        let headers = Headers::from([("traceparent".to_owned(), "00-aa-bb-01".to_owned())]);
        let sent = body(1);
        t.send(&Outgoing::new("q", &sent).headers(&headers))
            .await
            .unwrap();
        let got = t
            .pop("q", Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.body(), body(1).as_slice());
        assert_eq!(got.headers()["traceparent"], "00-aa-bb-01");
        assert_eq!(got.headers()["x-attempts"], "0");
        assert_eq!(got.headers()["x-schema-version"], "1");
        t.ack(&got).await.unwrap();
        assert!(
            t.ack(&got).await.is_err(),
            "a second ack is refused locally"
        );
    }

    #[test]
    fn the_urls_queue_type_wins_and_its_hosts_reach_the_client() {
        let quorum = AmqpOptions::default().queue_type(QueueType::Quorum);
        for (url, options, expected) in [
            ("amqp://h", AmqpOptions::default(), QueueType::Classic),
            ("amqp://h", quorum.clone(), QueueType::Quorum),
            (
                "amqp://h?queue_type=classic",
                quorum.clone(),
                QueueType::Classic,
            ),
            (
                "amqp://h?queue_type=quorum",
                AmqpOptions::default(),
                QueueType::Quorum,
            ),
        ] {
            let t = AmqpTransport::lazy_with(url, options).unwrap();
            assert_eq!(t.inner.options.queue_type, expected, "{url}");
        }
        let t = AmqpTransport::lazy("amqp://u:hunter2@127.0.0.1:5681,h2:5682/%2f?host=h3").unwrap();
        let shown = format!("{t:?}");
        assert!(
            shown.contains(r#"["127.0.0.1:5681", "h2:5682", "h3:5672"]"#),
            "{shown}"
        );
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    const TEST_CA: &str = include_str!("../tests/fixtures/test-ca.pem");

    fn client() -> LapinClient {
        LapinClient::new(AmqpUrl::parse("amqps://h").unwrap().uri, "t")
    }

    #[test]
    fn a_private_ca_must_hold_usable_certificates() {
        assert!(client().with_tls_ca_pem(TEST_CA).is_ok());
        let twice = format!("{TEST_CA}{TEST_CA}");
        assert!(client().with_tls_ca_pem(twice).is_ok());
        let not_der = "-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n";
        for (pem, says) in [
            ("", "no PEM CERTIFICATE block"),
            ("not a certificate at all", "no PEM CERTIFICATE block"),
            (not_der, "#1 is not usable"),
        ] {
            let err = client().with_tls_ca_pem(pem).unwrap_err();
            assert_eq!(
                err.kind(),
                babelqueue_core::TransportErrorKind::Config,
                "{err}"
            );
            assert!(err.to_string().contains(says), "{pem:?}: {err}");
        }
    }

    #[test]
    fn lazy_with_reads_the_ca_file_and_lets_the_url_win() {
        let dir = std::env::temp_dir().join(format!("bq-amqp-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("ca.pem");
        std::fs::write(&good, TEST_CA).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();

        let t = AmqpTransport::lazy_with(
            "amqps://h/%2f?prefetch=8",
            AmqpOptions::default()
                .prefetch(Some(2))
                .declare(false)
                .ca_file(&good),
        )
        .unwrap();
        assert_eq!(t.inner.options.prefetch, Some(8), "the URL's prefetch wins");
        assert!(!t.inner.options.declare);
        assert!(format!("{:?}", t.inner.client).contains("extra_ca: true"));
        let t = AmqpTransport::lazy_with("amqps://h", AmqpOptions::default().prefetch(Some(2)))
            .unwrap();
        assert_eq!(t.inner.options.prefetch, Some(2));
        assert!(format!("{:?}", t.inner.client).contains("extra_ca: false"));
        let t = AmqpTransport::lazy_with("amqp://h?declare=0", AmqpOptions::default()).unwrap();
        assert!(!t.inner.options.declare);

        for (path, says) in [
            (dir.join("missing.pem"), "cannot read the CA file"),
            (empty.clone(), "no PEM CERTIFICATE block"),
        ] {
            let err = AmqpTransport::lazy_with("amqps://h", AmqpOptions::default().ca_file(&path))
                .unwrap_err();
            assert!(!err.is_transient(), "{err}");
            let text = err.to_string();
            assert!(
                text.contains(says) && text.contains(&*path.to_string_lossy()),
                "{text}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
