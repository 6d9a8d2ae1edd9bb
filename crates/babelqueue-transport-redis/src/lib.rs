//! BabelQueue over Redis, on [`fred`].
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::{App, Context, HandlerError};
//! use babelqueue_transport_redis::RedisTransport;
//!
//! let redis = RedisTransport::connect("redis://127.0.0.1:6379/0?retry_after=90").await?;
//! let app = App::builder(redis)
//!     .queue("orders")
//!     .dead_letter(true)
//!     .handle("urn:babel:orders:created", |ctx: Context| async move {
//!         println!("{}", ctx.data());
//!         Ok::<(), HandlerError>(())
//!     })
//!     .build()?;
//! app.run().await?;
//! # Ok(()) }
//! ```
//!
//! # Two layouts
//!
//! **Reliable (the default)** — the layout the Python and Go SDKs own. For a queue `Q`:
//! `Q` is the ready list, `Q:processing` holds deliveries in flight, and
//! `Q:processing:deadlines` holds one member `<token>:<raw>` per reservation, scored by its
//! deadline (`floor(now) + retry_after`). A reserve moves the head into `Q:processing` and
//! records a fresh 32-hex token in one script; a sweep (before a reserve, at most every
//! [`SWEEP_INTERVAL`]) returns lapsed reservations to the end of `Q` unchanged (a crashed
//! worker's message comes back after `retry_after`, and a recovery is not an attempt). Ack,
//! release and dead-letter run one gated script: only while the reservation's own member
//! exists, so a late ack can never remove a newer reservation of identical bytes. Out-of-band headers (a W3C `traceparent`) ride in a frame
//! `{"__bq_frame":1,"headers":{…},"body":"…"}` and survive a retry.
//!
//! **Laravel-compatible** (`?laravel=1`, or [`RedisBuilder::laravel`]) — Laravel's own keys and
//! effects, so a Laravel worker and a Rust worker share one queue: `queues:Q` (ready list),
//! `queues:Q:reserved` (scored by deadline), `queues:Q:delayed` (scored by available-at),
//! `queues:Q:notify` (wake-up tokens). The reserve script counts the attempt into the reserved
//! member: `cjson` under `pcall` only decides (a body it cannot decode or re-encode is reserved
//! raw and handed over as poison, never lost), and the member is the job with its `attempts`
//! token replaced at byte level, so a crashed worker's recovered reservation keeps `data` byte
//! for byte (cjson would turn `12345678901234567890` into `1.2345678901235e+19` and `[]` into
//! `{}`); the handler gets the raw job; a release schedules the runtime-built body; the
//! dead-letter write is gated on the reservation.
//!
//! Every script that moves a message checks the types of the keys it writes before it writes
//! anything, and adds before it removes: Redis has no rollback, so a dead-letter queue key of
//! the wrong type, an ACL rule or `maxmemory` can make a write fail, but the message then stays
//! where it was (`BQWRONGTYPE …` names the key) and comes back after `retry_after`. Headers cannot ride here (Laravel reads the
//! stored job), so this layout declares no headers ([`Sends`]) and the runtime publishes the bare
//! envelope; `trace_id` still correlates. Set `prefix` to the full Laravel
//! prefix (often `laravel_database_queues:`), and give both workers the same `retry_after`.
//!
//! **Laravel workers on the same queue re-encode what they touch.** Laravel's own pop script
//! decodes and re-encodes the job with Redis's Lua cjson, and its release and its recovery of
//! an expired reservation put that text back: integers of 15 or more significant digits are
//! rounded (2^64 becomes `1.844674407371e+19`), `[]` becomes `{}`, repeated members collapse,
//! and a number beyond a double or a lone surrogate escape makes the pop fail after it has
//! taken the job off the list (the job is lost). That is Laravel's behaviour, not this
//! transport's. The opt-in `laravel_safe` check ([`LaravelSafe`]) looks at every body the
//! application publishes on this layout (publish, batch, delayed): `warn` logs one warning per
//! body Laravel would change, naming its members; `refuse` fails the publish with
//! [`RedisError::LaravelUnsafe`] (a batch: the whole batch, before anything is sent). The rule
//! is [`babelqueue_envelope::cjson_changes`]; docs/transports/redis.md has the measured table.
//!
//! # URL
//!
//! `redis://[user:pass@]host[:port][/db]?laravel=1&prefix=queues:&retry_after=90` (or the
//! Sentinel and Cluster forms below), `rediss://`
//! for TLS (rustls with aws-lc-rs; the system roots, or `ca_file=/path/ca.pem` for a private CA;
//! `cert_file=` and `key_file=` present a client certificate for mutual TLS).
//! `retry_after=null` (or `none`) disables recovery. `laravel_safe=off|warn|refuse` (default
//! `off`; the Laravel layout only, anything else on the reliable layout is a configuration
//! error). `reply_timeout_ms` (default 5000; 0: off) bounds every reply beyond the server's own
//! wait: past it the call fails (transient) and the connection is replaced, so a connection
//! whose packets vanish without a reset is left within that bound ([`liveness`]). Other query
//! keys go to the client.
//!
//! # High availability: Sentinel, Cluster, `wait_replicas`
//!
//! `redis+sentinel://[user:pass@]h1:26379,h2:26380/mymaster[/db]` (`rediss+sentinel://` for TLS)
//! finds the master through the sentinels, and follows a failover: it reconnects when a sentinel
//! announces `+switch-master`, when a connection drops, or when a demoted master answers
//! `READONLY`. The userinfo authenticates to the servers; `sentinel_password=` (and
//! `sentinel_username=`) to the sentinels. `redis+cluster://h1:7000,h2:7001`
//! (`rediss+cluster://`) talks to a Redis Cluster, where every script's keys share one slot: the
//! reliable layout tags each queue's keys (`{orders}`, `{orders}:processing`, …), and the Laravel
//! layout, as Laravel itself on a cluster, needs a hash tag in the queue name (`{default}`) and
//! refuses a queue without one ([`RedisError::MissingHashTag`]). A dead-letter queue in another
//! slot is written in steps that never lose the message. [`topology`] reads these URLs.
//!
//! Redis replicates asynchronously, so a failover can drop writes the old master acknowledged.
//! `wait_replicas=N` (any URL; `wait_timeout_ms`, default 1000) confirms every publish with
//! `WAIT N` on the connection that wrote it; too few confirmations is
//! [`RedisError::NotReplicated`], a transient error (a retry may store the message twice).
//! docs/transports/redis.md has the measured loss without it (most publishes made during a
//! replication cut) and with it (none), and its cost.
//!
//! # Capabilities and poison
//!
//! Both layouts report that a poison body must be dead-lettered in every configuration
//! ([`Facts::poison_always_dead_lettered`](babelqueue_core::Facts::poison_always_dead_lettered)):
//! the runtime classifies the body, and a value that is not UTF-8, or whose body is not a
//! readable envelope with an identity, is dead-lettered (the ADR-0035 record, with its typed
//! cause) through the gated script even with `on_unknown_urn = delete` or dead-lettering off. A
//! Laravel reservation whose attempt the reserve script could not count (it reserved the raw
//! job) is reported as such ([`Facts::attempts_not_counted`](babelqueue_core::Facts::attempts_not_counted))
//! and dead-lettered the same way. The reliable layout carries out-of-band headers
//! ([`Sends::headers`], the `__bq_frame`). Release is native
//! ([`Redeliverer`]: the Laravel layout honours the back-off delay through `:delayed`; the
//! reliable layout has no delayed set and re-queues at once), dead-lettering is one guarded step
//! ([`DeadLetterWriter`]), the Laravel layout publishes with a delay ([`Sends::delay`]), and
//! `babelqueue dlq list` reads a queue in place ([`Browser`]), and a retry or removal by id takes
//! its entries in place, one script each ([`Taker`](babelqueue_core::Taker), in `take`). A tool that shows the wire reads
//! a delivery's reservation through the [`Inspector`](babelqueue_core::Inspector): the layout,
//! the keys holding it, its token (reliable layout) and its deadline score. Redis has no message
//! id and never says whether it handed a value out before.
//!
//! # Idempotency store
//!
//! [`RedisIdempotencyStore`] keeps the core's idempotency claims in Redis (`SET key NX PX ttl`,
//! one key per `meta.id` under the prefix `bq:idemp:`), so every worker of a fleet shares them;
//! the [`idempotency`] module documents the key layout and the lifetimes.
//!
//! # Deviations from the reference
//!
//! A dead-letter or release write that fails leaves the reservation in place; it comes back after
//! `retry_after` (the reference behaves the same; the runtime never crashes on it). A
//! header-carrying publish of a body that is not UTF-8 stores the bare body (a frame is text).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{
    Browser, Capabilities, DeadLetterWriter, Delivery, Headers, HoldChecker, Outgoing, Redeliver,
    Redelivered, Redeliverer, Redelivery, Sends, Transport, TransportError,
};

mod batch;
pub mod client;
mod error;
pub mod idempotency;
mod inspect;
pub mod layout;
pub mod liveness;
mod reserve;
pub mod scripts;
mod stats;
mod take;
mod tls;
pub mod topology;
mod watch;

pub use client::{FredClient, Reconnects, RedisClient, Reply};
#[allow(deprecated)]
pub use error::Error;
pub use error::RedisError;
pub use fred;
pub use idempotency::RedisIdempotencyStore;
#[allow(deprecated)]
pub use layout::Options;
pub use layout::{LaravelSafe, Layout, RedisOptions};
pub use tls::TlsFiles;

mod builder;
pub use builder::RedisBuilder;

/// A source of the current time, in fractional epoch seconds (pinned in tests).
pub type Clock = Arc<dyn Fn() -> f64 + Send + Sync>;

fn system_clock() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The settle handle of a Redis delivery: its reservation, and when the reservation lapses.
#[derive(Debug, Clone)]
struct Held {
    handle: Handle,
    /// The reservation's deadline (its score, whole epoch seconds); `None` when it never lapses
    /// (recovery off) or is not known (a reservation a tool settles).
    deadline: Option<i64>,
}

/// A reservation, as each layout settles it.
#[derive(Debug, Clone)]
enum Handle {
    /// The stored value (possibly a frame) and the reservation token.
    Reliable { stored: Vec<u8>, token: String },
    /// The reserved member, byte for byte as the reserve script wrote it.
    Laravel { member: Vec<u8> },
}

/// The Redis transport.
#[derive(Clone)]
pub struct RedisTransport {
    client: Arc<dyn RedisClient>,
    options: RedisOptions,
    clock: Clock,
    /// When each queue was last swept or migrated, by `clock` (shared by clones).
    swept: Arc<Mutex<HashMap<String, f64>>>,
}

/// How often a consumer sweeps (reliable layout) or migrates (Laravel layout) a queue it
/// receives from: expired reservations and due delayed messages are back within this.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(250);

impl fmt::Debug for RedisTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTransport")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn bytes(s: impl Into<Vec<u8>>) -> Vec<u8> {
    s.into()
}

impl RedisTransport {
    /// Connects with the options the URL sets.
    pub async fn connect(url: &str) -> Result<RedisTransport, RedisError> {
        RedisTransport::builder(url).connect().await
    }

    /// Connects with `options`, on top of which the URL's query keys (`laravel`, `prefix`,
    /// `retry_after`, `ca_file`) are applied: what the URL spells out wins.
    pub async fn connect_with(
        url: &str,
        options: RedisOptions,
    ) -> Result<RedisTransport, RedisError> {
        let (url, options) = RedisOptions::from_url_onto(url, options)?;
        options.validate()?;
        let (url, files) = tls::take_tls_files(&url, TlsFiles::default());
        let client = FredClient::connect_with_tls(&url, &files)
            .await?
            .with_reply_timeout(options.reply_timeout);
        Ok(RedisTransport::with_client(Arc::new(client), options))
    }

    /// Starts configuring a transport for `url`.
    pub fn builder(url: impl Into<String>) -> RedisBuilder {
        RedisBuilder {
            url: url.into(),
            layout: None,
            prefix: None,
            retry_after: None,
            migration_batch_size: None,
            processing_suffix: None,
            block_for: None,
            laravel_safe: None,
            reply_timeout: None,
            tls: TlsFiles::default(),
        }
    }

    /// A transport over any [`RedisClient`] (a recording fake, a shared connection).
    pub fn with_client(client: Arc<dyn RedisClient>, options: RedisOptions) -> RedisTransport {
        RedisTransport {
            client,
            options,
            clock: Arc::new(system_clock),
            swept: Arc::default(),
        }
    }

    /// Replaces the clock (fractional epoch seconds).
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> RedisTransport {
        self.clock = clock;
        self
    }

    /// The options.
    pub fn options(&self) -> &RedisOptions {
        &self.options
    }

    /// The client.
    pub fn client(&self) -> &Arc<dyn RedisClient> {
        &self.client
    }

    fn now(&self) -> f64 {
        (self.clock)()
    }

    fn batch(&self) -> Vec<u8> {
        bytes(self.options.migration_batch_size.to_string())
    }

    /// The `laravel_safe` check of bodies about to be published on `queue` (`batch`: they are
    /// one batch): with `warn`, one warning per body a Laravel pop would change; with
    /// `refuse`, the error for the first such body, before anything is sent. Only bodies the
    /// application publishes are checked: a retry copy or a dead-letter record carries the
    /// data of a message already on the queue, and refusing it would only strand that message.
    fn laravel_safe(&self, queue: &str, bodies: &[&[u8]], batch: bool) -> Result<(), RedisError> {
        let mode = self.options.laravel_safe;
        if mode == LaravelSafe::Off || self.options.layout != Layout::Laravel {
            return Ok(());
        }
        for (index, body) in bodies.iter().enumerate() {
            let findings = babelqueue_envelope::cjson_changes(body);
            if findings.is_empty() {
                continue;
            }
            if mode == LaravelSafe::Refuse {
                return Err(RedisError::LaravelUnsafe {
                    queue: queue.to_owned(),
                    index: batch.then_some(index),
                    findings,
                });
            }
            let members = findings
                .iter()
                .map(|f| {
                    if f.path.is_empty() {
                        "(the body)"
                    } else {
                        f.path.as_str()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ");
            let changes = findings
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            let lost = findings.iter().any(|f| f.change.fails());
            tracing::warn!(target: "babelqueue::redis", queue, index = ?batch.then_some(index),
                members = %members, changes = %changes, lost,
                "A Laravel worker's pop would change this body (laravel_safe=warn): published as it is");
        }
        Ok(())
    }

    /// `wait_replicas`: waits until that many replicas confirmed the writes made so far on the
    /// connection (and node) that wrote `key`, for a publish described by `what`; `since` was
    /// taken before the write. A connection replaced in between confirms nothing: that is an
    /// error too. Nothing when `wait_replicas` is 0.
    async fn replicated(
        &self,
        key: &str,
        mut since: Reconnects,
        what: impl FnOnce() -> String,
    ) -> Result<(), RedisError> {
        let o = &self.options;
        if o.wait_replicas == 0 {
            return Ok(());
        }
        let timeout_ms = u64::try_from(o.wait_timeout.as_millis()).unwrap_or(u64::MAX);
        let (acked, cause) = match self
            .client
            .wait_replicas(key.as_bytes(), o.wait_replicas, o.wait_timeout)
            .await
        {
            Ok(acked) if since.happened() => (
                acked,
                Some("the connection was replaced between the write and WAIT (a failover?), so WAIT could not confirm the write".to_owned()),
            ),
            Ok(acked) if acked >= i64::from(o.wait_replicas) => return Ok(()),
            Ok(acked) => (acked, None),
            Err(e) => (0, Some(e.to_string())),
        };
        Err(RedisError::NotReplicated {
            what: what(),
            acked,
            wanted: o.wait_replicas,
            timeout_ms,
            cause,
        })
    }

    /// Whether a settle that writes `target` as it removes `source` would touch two slots of a
    /// Redis Cluster (no script may): it is then made in steps.
    fn apart(&self, source: &str, target: &str) -> bool {
        self.options.cluster && layout::slot(source.as_bytes()) != layout::slot(target.as_bytes())
    }

    /// Dead-lettering across two slots of a Redis Cluster, in three steps that never lose the
    /// message: the reservation is checked, the record is written (and, with `wait_replicas`,
    /// confirmed by the replicas of its node), then the reservation is removed, gated as
    /// always. A reservation that lapses between the first and the last step leaves the record
    /// written and the message back on its queue: a duplicate, never a loss.
    async fn dead_letter_in_steps(
        &self,
        delivery: &Delivery,
        queue: &str,
        body: &[u8],
    ) -> Result<(), RedisError> {
        let o = &self.options;
        let source = delivery.queue();
        let (held_key, member, target, script, keys, value) = match self.handle(delivery)? {
            Handle::Reliable { stored, token } => {
                let mut member = bytes(token.clone());
                member.push(b':');
                member.extend_from_slice(stored);
                let value = layout::frame(body, delivery.headers()).into_owned();
                (
                    o.deadlines(source),
                    member,
                    o.ready(queue),
                    &scripts::PUSH_LIST,
                    vec![bytes(o.ready(queue))],
                    value,
                )
            }
            Handle::Laravel { member } => (
                o.reserved(source),
                member.clone(),
                o.ready(queue),
                &scripts::PUSH,
                vec![bytes(o.ready(queue)), bytes(o.notify(queue))],
                body.to_vec(),
            ),
        };
        let held = self
            .client
            .eval(&scripts::HELD, vec![bytes(held_key)], vec![member])
            .await?
            .as_int()
            == 1;
        if !held {
            tracing::warn!(target: "babelqueue::redis", queue = source,
                "The Redis reservation expired before it was dead-lettered: it was swept back and may be delivered again; nothing was written");
            return Ok(());
        }
        let since = self.client.reconnects();
        self.client.eval(script, keys, vec![value]).await?;
        self.replicated(&target, since, || {
            format!("the dead-letter record for {queue:?}")
        })
        .await?;
        let removed = match self.handle(delivery)? {
            Handle::Reliable { .. } => self.settle_reliable(delivery, None).await?,
            Handle::Laravel { member } => {
                self.client
                    .zrem(o.reserved(source).as_bytes(), member)
                    .await?
                    == 1
            }
        };
        if !removed {
            tracing::warn!(target: "babelqueue::redis", queue = source, dead_letter_queue = queue,
                "The Redis reservation expired while it was dead-lettered across two cluster slots: the record was written and the message may be delivered again");
        }
        Ok(())
    }
}

#[async_trait]
impl Transport for RedisTransport {
    fn name(&self) -> &'static str {
        "redis"
    }

    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        let o = &self.options;
        o.check_queue(queue)?;
        let ready = o.ready(queue);
        let since = self.client.reconnects();
        match o.layout {
            Layout::Reliable => self.client.rpush(ready.as_bytes(), body).await?,
            Layout::Laravel => {
                self.laravel_safe(queue, &[body], false)?;
                self.client
                    .eval(
                        &scripts::PUSH,
                        vec![bytes(ready.clone()), bytes(o.notify(queue))],
                        vec![body.to_vec()],
                    )
                    .await?;
            }
        }
        self.replicated(&ready, since, || format!("a publish to {queue:?}"))
            .await?;
        Ok(())
    }

    /// The reliable layout carries headers in a `__bq_frame`; the Laravel layout carries a
    /// delay in its `:delayed` set, scored in whole epoch seconds as Laravel scores it. Each
    /// declares only its own part: Laravel reads the stored job itself, so headers cannot ride
    /// there (and are dropped when asked for directly), and the reliable layout has no delayed
    /// set (a delay is refused, nothing is sent).
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        let (queue, body) = (outgoing.queue, outgoing.body);
        match (self.options.layout, outgoing.delay, outgoing.headers) {
            (Layout::Laravel, Some(delay), _) => self.push_delayed(queue, body, delay).await,
            (Layout::Reliable, Some(_), _) => Err(RedisError::Unsupported(
                "the reliable Redis layout has no delayed set: use the Laravel layout (?laravel=1) to publish with a delay".into(),
            )
            .into()),
            (Layout::Reliable, None, Some(headers)) => {
                self.push_framed(queue, body, headers).await
            }
            (_, None, _) => self.publish(queue, body).await,
        }
    }

    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        Ok(self.receive_up_to(queue, 1, timeout).await?.pop())
    }

    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        Ok(self.receive_up_to(queue, max, timeout).await?)
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        match self.options.layout {
            Layout::Reliable => {
                self.settle_reliable(delivery, None).await?;
            }
            Layout::Laravel => {
                let member = self.laravel_member(delivery)?;
                self.client
                    .zrem(self.options.reserved(delivery.queue()).as_bytes(), member)
                    .await?;
            }
        }
        Ok(())
    }

    async fn close(&self) -> Result<(), TransportError> {
        self.client.quit().await?;
        Ok(())
    }

    fn capabilities(&self) -> Capabilities<'_> {
        let capabilities = Capabilities::none()
            .redelivery(Redelivery::Native(self))
            .dead_letter(self)
            .browse(self)
            .take(self)
            .batch_ack(self)
            .batch_publish(self)
            .hold_check(self)
            .inspect(self)
            .stats(self)
            .prefetch_per_slot(PREFETCH_PER_SLOT);
        match self.options.layout {
            // Laravel reads the stored job itself: headers cannot ride, so the layout does not
            // claim to carry them (a replay's bypass header would be reported sent and lost).
            Layout::Laravel => capabilities.sends(Sends::body_only().delay()),
            Layout::Reliable => capabilities.sends(Sends::body_only().headers()),
        }
    }
}

/// Deliveries the runtime holds per handler slot by default
/// ([`Capabilities::prefetch_per_slot`]): one reserve script then takes up to 32 messages at
/// concurrency 8. The runtime holds them only while handlers finish at once, and
/// [`HoldChecker`] keeps it from starting one whose reservation lapsed while it waited. On the
/// local Redis (`cargo bench -p babelqueue-transport-redis --bench redis`, 3 000 messages,
/// concurrency 8, no-op handler), a prefetch of 8 consumed 14 500-19 100/s (reliable layout)
/// and 9 900-13 200/s (Laravel), 32 consumed 29 700-37 900/s and 16 100-19 500/s.
const PREFETCH_PER_SLOT: usize = 4;

/// A delivery is held while its reservation has not lapsed by the transport's clock: from its
/// deadline on, any consumer's sweep may return it to the queue for another worker (and the
/// Laravel layout counts an attempt at each reserve), so the runtime does not start one that
/// waited for a slot that long. It is left unsettled, and comes back through the sweep.
impl HoldChecker for RedisTransport {
    fn still_held(&self, delivery: &Delivery) -> bool {
        delivery
            .handle::<Held>()
            .is_none_or(|held| !layout::lapsed(held.deadline, self.now()))
    }
}

impl RedisTransport {
    /// Appends `body` with `headers` beside it in a `__bq_frame` (the reliable layout).
    async fn push_framed(
        &self,
        queue: &str,
        body: &[u8],
        headers: &Headers,
    ) -> Result<(), TransportError> {
        self.options.check_queue(queue)?;
        let value = layout::frame(body, headers);
        let ready = self.options.ready(queue);
        let since = self.client.reconnects();
        self.client.rpush(ready.as_bytes(), &value).await?;
        self.replicated(&ready, since, || format!("a publish to {queue:?}"))
            .await?;
        Ok(())
    }

    /// Adds `body` to the `:delayed` set, due after `delay` (the Laravel layout).
    async fn push_delayed(
        &self,
        queue: &str,
        body: &[u8],
        delay: Duration,
    ) -> Result<(), TransportError> {
        self.options.check_queue(queue)?;
        self.laravel_safe(queue, &[body], false)?;
        let score = layout::available_at(self.now(), delay.as_secs_f64());
        let delayed = self.options.delayed(queue);
        let since = self.client.reconnects();
        self.client.zadd(delayed.as_bytes(), score, body).await?;
        self.replicated(&delayed, since, || {
            format!("a delayed publish to {queue:?}")
        })
        .await?;
        Ok(())
    }
}

#[async_trait]
impl Redeliverer for RedisTransport {
    async fn redeliver(
        &self,
        delivery: &Delivery,
        redeliver: Redeliver<'_>,
    ) -> Result<Redelivered, TransportError> {
        let (body, delay) = (redeliver.body, redeliver.delay_or_zero());
        let o = &self.options;
        match o.layout {
            Layout::Reliable => {
                // No delayed set: the message goes back to the end of the ready list at once.
                let value = layout::frame(body, delivery.headers());
                self.settle_reliable(delivery, Some((&o.ready(delivery.queue()), &value)))
                    .await?;
            }
            Layout::Laravel => {
                let member = self.laravel_member(delivery)?.to_vec();
                let score = layout::available_at(self.now(), delay.as_secs_f64());
                self.client
                    .eval(
                        &scripts::RELEASE_ZSET,
                        vec![
                            bytes(o.delayed(delivery.queue())),
                            bytes(o.reserved(delivery.queue())),
                        ],
                        vec![member, body.to_vec(), bytes(score.to_string())],
                    )
                    .await?;
            }
        }
        Ok(Redelivered::Settled)
    }
}

#[async_trait]
impl DeadLetterWriter for RedisTransport {
    async fn dead_letter(
        &self,
        delivery: &Delivery,
        queue: &str,
        body: &[u8],
    ) -> Result<(), TransportError> {
        let o = &self.options;
        o.check_queue(queue)?;
        let source = match o.layout {
            Layout::Reliable => o.deadlines(delivery.queue()),
            Layout::Laravel => o.reserved(delivery.queue()),
        };
        if self.apart(&source, &o.ready(queue)) {
            self.dead_letter_in_steps(delivery, queue, body).await?;
            return Ok(());
        }
        match o.layout {
            Layout::Reliable => {
                let value = layout::frame(body, delivery.headers());
                self.settle_reliable(delivery, Some((&o.ready(queue), &value)))
                    .await?;
            }
            Layout::Laravel => {
                let member = self.laravel_member(delivery)?.to_vec();
                let written = self
                    .client
                    .eval(
                        &scripts::DEAD_LETTER_ZSET,
                        vec![
                            bytes(o.reserved(delivery.queue())),
                            bytes(o.ready(queue)),
                            bytes(o.notify(queue)),
                        ],
                        vec![member, body.to_vec()],
                    )
                    .await?
                    .as_int();
                if written != 1 {
                    tracing::warn!(target: "babelqueue::redis", queue = delivery.queue(),
                        "The Redis reservation expired before it was dead-lettered: it was migrated back and may be delivered again; nothing was written");
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Browser for RedisTransport {
    async fn browse(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, TransportError> {
        self.options.check_queue(queue)?;
        let stop = if max == 0 {
            -1
        } else {
            i64::try_from(max).unwrap_or(i64::MAX) - 1
        };
        let values = self
            .client
            .lrange(self.options.ready(queue).as_bytes(), 0, stop)
            .await?;
        Ok(values
            .into_iter()
            .map(|v| layout::unframe(&v).0.into_owned())
            .collect())
    }

    /// One `LRANGE offset offset+max-1`: a page costs its own entries, however long the list.
    async fn browse_page(
        &self,
        queue: &str,
        offset: usize,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, TransportError> {
        self.options.check_queue(queue)?;
        let start = i64::try_from(offset).unwrap_or(i64::MAX);
        let stop = if max == 0 {
            -1
        } else {
            start.saturating_add(i64::try_from(max).unwrap_or(i64::MAX)) - 1
        };
        let values = self
            .client
            .lrange(self.options.ready(queue).as_bytes(), start, stop)
            .await?;
        Ok(values
            .into_iter()
            .map(|v| layout::unframe(&v).0.into_owned())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_builder_never_prints_its_password() {
        let builder = RedisTransport::builder("redis://app:hunter2@127.0.0.1:6379/0?laravel=1");
        let shown = format!("{builder:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("127.0.0.1:6379"), "{shown}");
    }
}
