//! [`NatsTransport`]: the [`Transport`] over JetStream, and its capabilities.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::message::Acker;
use async_nats::jetstream::stream::{self, LastRawMessageErrorKind, RetentionPolicy, StorageType};
use async_nats::jetstream::{self, AckKind, ErrorCode};
use async_nats::{Event, HeaderMap};
use async_trait::async_trait;
use babelqueue_transport::{
    Browser, Capabilities, Delivery, Outgoing, Redeliver, Redelivered, Redeliverer, Redelivery,
    Rewinder, Sends, Transport, TransportError,
};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::error::NatsError;
use crate::inspect::Wire;
use crate::projection::{self, NatsOptions, Storage};

pub(crate) const LOG: &str = "babelqueue::nats";

/// What a delivery keeps for its settlement, and JetStream's metadata of it.
pub(crate) struct Handle {
    pub(crate) acker: Acker,
    /// When it was received ([`HoldChecker`](babelqueue_transport::HoldChecker): held for
    /// `ack_wait` from then).
    pub(crate) received: Instant,
    /// The stream and consumer sequences, JetStream's `num_delivered` (1 on the first
    /// delivery), the pending count and the publish time.
    pub(crate) wire: Wire,
}

struct Inner {
    client: async_nats::Client,
    js: jetstream::Context,
    options: NatsOptions,
    /// Queues whose stream is known to exist.
    streams: Mutex<HashSet<String>>,
    /// The durable pull consumer of each queue consumed so far.
    consumers: Mutex<HashMap<String, PullConsumer>>,
    /// How many times the connection dropped: a pull waiting when it changes was lost with the
    /// connection.
    disconnects: watch::Receiver<u64>,
}

/// The NATS JetStream transport: one stream per queue (work-queue retention), one durable pull
/// consumer per stream with explicit acks. Cloning shares the connection.
///
/// Build it with [`NatsTransport::connect`] (a URL) or [`NatsTransport::with_options`]. See the
/// [crate docs](crate) for what maps to what.
#[derive(Clone)]
pub struct NatsTransport {
    inner: Arc<Inner>,
}

impl fmt::Debug for NatsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsTransport")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every mutation under these locks is one statement: a poisoned lock is still consistent.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn handle(delivery: &Delivery) -> Result<&Handle, NatsError> {
    delivery.handle::<Handle>().ok_or_else(|| {
        NatsError::Rejected(format!(
            "a delivery of queue {:?} that the NATS transport did not hand out",
            delivery.queue()
        ))
    })
}

impl NatsTransport {
    /// Connects to the server a `nats://` URL names (see [`NatsOptions::from_url`] for the
    /// options) and checks that it runs JetStream. Credentials the server refuses are a
    /// [`NatsError::Auth`] naming the host; no error shows a password.
    pub async fn connect(url: &str) -> Result<NatsTransport, NatsError> {
        NatsTransport::with_options(NatsOptions::from_url(url)?).await
    }

    /// [`connect`](NatsTransport::connect) starting from `options`: the URL's server, its
    /// credentials (when it has any) and its query options override them.
    pub async fn connect_with(url: &str, options: NatsOptions) -> Result<NatsTransport, NatsError> {
        NatsTransport::with_options(NatsOptions::from_url_onto(url, options)?).await
    }

    /// Connects with `options` as they are (the server they name).
    pub async fn with_options(options: NatsOptions) -> Result<NatsTransport, NatsError> {
        let (dropped, disconnects) = watch::channel(0_u64);
        let mut connect = async_nats::ConnectOptions::new()
            .name("babelqueue")
            .connection_timeout(options.timeout)
            .request_timeout(Some(options.timeout))
            .ping_interval(options.ping_interval)
            .event_callback(move |event| {
                if matches!(event, Event::Disconnected) {
                    dropped.send_modify(|n| *n = n.wrapping_add(1));
                }
                async move { log_event(&event) }
            });
        if let Some(user) = &options.user {
            connect = connect
                .user_and_password(user.clone(), options.password.clone().unwrap_or_default());
        }
        if let Some(token) = &options.token {
            connect = connect.token(token.clone());
        }
        if options.tls {
            connect = connect.require_tls(true);
        }
        if let Some(ca) = &options.ca_file {
            connect = connect.add_root_certificates(ca.clone());
        }
        options.check_client_certificate()?;
        if let (Some(cert), Some(key)) = (&options.cert_file, &options.key_file) {
            connect = connect.add_client_certificate(cert.clone(), key.clone());
        }
        let host = options.hosts();
        let client = connect
            .connect(options.servers())
            .await
            .map_err(|e| NatsError::connect(&e, &host, &secrets(&options)))?;
        // A raw `$JS.API.INFO`: the reply of a 2.9 server does not parse as async-nats 0.51's
        // `Account`, and all that matters here is that JetStream answers without an error.
        let info = client
            .request("$JS.API.INFO", Bytes::new())
            .await
            .map_err(|e| NatsError::account(&e, &host))?;
        if info.payload.windows(8).any(|w| w == b"\"error\":") {
            return Err(NatsError::account_refused(&info.payload, &host));
        }
        let mut js = jetstream::new(client.clone());
        js.set_timeout(options.timeout);
        Ok(NatsTransport {
            inner: Arc::new(Inner {
                client,
                js,
                options,
                streams: Mutex::new(HashSet::new()),
                consumers: Mutex::new(HashMap::new()),
                disconnects,
            }),
        })
    }

    /// A transport over `client` that never asked its server anything (the offline tests of
    /// the receive path).
    #[cfg(test)]
    pub(crate) fn unchecked(client: async_nats::Client, options: NatsOptions) -> NatsTransport {
        NatsTransport {
            inner: Arc::new(Inner {
                js: jetstream::new(client.clone()),
                client,
                options,
                streams: Mutex::new(HashSet::new()),
                consumers: Mutex::new(HashMap::new()),
                // No connection events are watched: the counter never moves.
                disconnects: watch::channel(0_u64).1,
            }),
        }
    }

    /// The options the transport runs with.
    pub fn options(&self) -> &NatsOptions {
        &self.inner.options
    }

    /// The largest message (body and headers) the server accepts, as it announced it
    /// (`max_payload`, 1 MiB by default).
    pub fn max_payload(&self) -> usize {
        self.inner.client.server_info().max_payload
    }

    /// The JetStream context (streams, consumers, messages), for tools and tests.
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.inner.js
    }

    /// The stream of `queue`, created (work-queue retention, the configured storage and
    /// replicas, the queue's one subject) when it does not exist yet. An existing stream of that
    /// name that does not carry the queue's subject is a configuration error.
    ///
    /// So is an existing stream with fewer replicas than [`NatsOptions::replicas`]: the
    /// transport never changes the replication of a stream that exists (scaling a stream moves
    /// its data between servers, and is the operator's call: `nats stream edit <name>
    /// --replicas N`), and it does not publish into, or consume from, a stream that keeps fewer
    /// copies than the URL asks for. A stream with more replicas than asked is used as it is.
    pub async fn ensure_stream(&self, queue: &str) -> Result<stream::Stream, NatsError> {
        let o = &self.inner.options;
        let name = o.stream_name(queue)?;
        let subject = o.subject(queue)?;
        let config = stream::Config {
            name: name.clone(),
            subjects: vec![subject.clone()],
            retention: RetentionPolicy::WorkQueue,
            storage: match o.storage {
                Storage::File => StorageType::File,
                Storage::Memory => StorageType::Memory,
            },
            num_replicas: o.replicas,
            ..Default::default()
        };
        let stream = self
            .inner
            .js
            .get_or_create_stream(config)
            .await
            .map_err(|e| NatsError::stream(&e, &name))?;
        let existing = &stream.cached_info().config;
        if !existing.subjects.contains(&subject) {
            return Err(NatsError::Config(format!(
                "the stream {name:?} exists but does not carry the subject {subject:?} of queue \
                 {queue:?} (another subject_prefix, or a stream of someone else's)"
            )));
        }
        let replicas = existing.num_replicas.max(1);
        if replicas < o.replicas {
            return Err(NatsError::Config(format!(
                "the stream {name:?} of queue {queue:?} exists with {replicas} replica(s), fewer \
                 than replicas={} asks for; the transport does not change an existing stream's \
                 replication: raise it (nats stream edit {name} --replicas {}) or ask for fewer",
                o.replicas, o.replicas
            )));
        }
        lock(&self.inner.streams).insert(queue.to_owned());
        Ok(stream)
    }

    /// The subject of `queue`, its stream made sure of.
    pub(crate) async fn subject(&self, queue: &str) -> Result<String, NatsError> {
        let subject = self.inner.options.subject(queue)?;
        if !lock(&self.inner.streams).contains(queue) {
            self.ensure_stream(queue).await?;
        }
        Ok(subject)
    }

    /// The durable pull consumer of `queue` (created or updated to the configured ack wait the
    /// first time).
    pub(crate) async fn consumer(&self, queue: &str) -> Result<PullConsumer, NatsError> {
        if let Some(consumer) = lock(&self.inner.consumers).get(queue) {
            return Ok(consumer.clone());
        }
        let stream = self.ensure_stream(queue).await?;
        let o = &self.inner.options;
        let config = pull::Config {
            durable_name: Some(o.consumer.clone()),
            deliver_policy: DeliverPolicy::All,
            ack_policy: AckPolicy::Explicit,
            ack_wait: o.ack_wait,
            // The runtime decides when a message has had enough deliveries.
            max_deliver: -1,
            ..Default::default()
        };
        let consumer: PullConsumer = stream
            .create_consumer(config)
            .await
            .map_err(|e| NatsError::consumer(&e, &stream.cached_info().config.name))?;
        lock(&self.inner.consumers).insert(queue.to_owned(), consumer.clone());
        Ok(consumer)
    }

    /// Forgets what is known of `queue` (after the server said its stream or consumer is gone).
    fn forget(&self, queue: &str) {
        lock(&self.inner.streams).remove(queue);
        lock(&self.inner.consumers).remove(queue);
    }

    /// Publishes `body` to `queue` with `headers` and waits for JetStream's acknowledgement.
    /// A stream deleted behind the transport's back is created again, once.
    async fn send(
        &self,
        queue: &str,
        body: &[u8],
        headers: Option<HeaderMap>,
    ) -> Result<(), NatsError> {
        let subject = self.subject(queue).await?;
        let payload = Bytes::copy_from_slice(body);
        match self
            .publish_once(&subject, payload.clone(), headers.clone())
            .await
        {
            Err(e) if e.kind() == PublishErrorKind::StreamNotFound => {
                self.forget(queue);
                self.ensure_stream(queue).await?;
                self.publish_once(&subject, payload, headers)
                    .await
                    .map_err(|e| NatsError::publish(&e, &subject))
            }
            sent => sent.map_err(|e| NatsError::publish(&e, &subject)),
        }
    }

    async fn publish_once(
        &self,
        subject: &str,
        payload: Bytes,
        headers: Option<HeaderMap>,
    ) -> Result<(), PublishError> {
        let js = &self.inner.js;
        let ack = match headers {
            Some(headers) => {
                js.publish_with_headers(subject.to_owned(), headers, payload)
                    .await?
            }
            None => js.publish(subject.to_owned(), payload).await?,
        };
        ack.await.map(|_| ())
    }

    /// `-NAK`, after `delay` when there is one, confirmed by the server.
    async fn nak(&self, delivery: &Delivery, delay: Option<Duration>) -> Result<(), NatsError> {
        let delay = delay.filter(|d| !d.is_zero());
        handle(delivery)?
            .acker
            .double_ack_with(AckKind::Nak(delay))
            .await
            .map_err(|e| NatsError::ack("giving a delivery back (-NAK)", &*e))
    }

    pub(crate) fn delivery(
        &self,
        queue: &str,
        message: jetstream::Message,
    ) -> Result<Delivery, NatsError> {
        let wire = Wire::of(&message.info().map_err(|e| {
            NatsError::Other(format!(
                "a JetStream message of queue {queue:?} without its delivery metadata: {e}"
            ))
        })?);
        let (message, acker) = message.split();
        let headers = projection::headers_of(message.headers.as_ref());
        let declared = projection::declared(&headers);
        Ok(Delivery::new(queue, message.payload)
            .with_headers(headers)
            .with_declared_version(declared)
            .with_count(projection::count(wire.delivered))
            .with_handle(Handle {
                acker,
                received: Instant::now(),
                wire,
            }))
    }
}

/// What the client reports of its connection, in the log: a server that went away and the
/// reconnect to another are what an operator looks for during a failover.
fn log_event(event: &Event) {
    match event {
        Event::Disconnected => tracing::warn!(target: LOG,
            "Disconnected from the NATS server; reconnecting (to another server of the URL or the cluster)"),
        Event::Connected => tracing::info!(target: LOG, "Connected to a NATS server"),
        Event::Closed => tracing::debug!(target: LOG, "NATS connection closed"),
        other => tracing::warn!(target: LOG, event = %other, "NATS client event"),
    }
}

/// The password and the token of `options`, to scrub from a client's message.
fn secrets(options: &NatsOptions) -> Vec<String> {
    [&options.password, &options.token]
        .into_iter()
        .flatten()
        .filter(|s| !s.is_empty())
        .cloned()
        .collect()
}

#[async_trait]
impl Transport for NatsTransport {
    fn name(&self) -> &'static str {
        "nats"
    }

    /// A JetStream publish to the queue's subject, body unchanged, no headers; returns once
    /// JetStream acknowledged it (stored).
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        Ok(self.send(queue, body, None).await?)
    }

    /// The same publish, with out-of-band headers as NATS headers (JetStream's own `Nats-*`
    /// names are left out; a name or value NATS cannot carry is an error and nothing is sent),
    /// and with the facts a delivery carried as the headers it carried them in
    /// ([`projection::routed_headers`]: the schema-version header, so a copy of a gated message
    /// is gated the same way), which win over a header of the same name. JetStream 2.9 cannot
    /// delay a publish: no delay is declared.
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        let map = match (outgoing.headers, outgoing.facts) {
            (None, None) => None,
            (headers, facts) => {
                let mut all = headers.cloned().unwrap_or_default();
                all.extend(facts.map(projection::routed_headers).unwrap_or_default());
                Some(projection::header_map(&all)?)
            }
        };
        Ok(NatsTransport::send(self, outgoing.queue, outgoing.body, map).await?)
    }

    /// One pull request for one message on the queue's durable consumer, waiting up to
    /// `timeout` (`no_wait` when it is zero).
    ///
    /// A pull waiting when the connection drops is given up at once (its request and its answer
    /// went with the connection), as a [`NatsError::Connection`]; the next pull is sent once the
    /// client reconnected, to whichever server it reached. A pull the server never answers
    /// otherwise (sent to a consumer leader that died) is given up after `timeout` plus the
    /// `timeout=` option, as a [`NatsError::Timeout`]; a pull the server ends because the
    /// consumer's leader changed (`409 Leadership Change`) or because no leader answers yet
    /// (`503`) is a [`NatsError::Connection`]. All are transient.
    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        let consumer = self.consumer(queue).await?;
        let stream = consumer.cached_info().stream_name.clone();
        let mut dropped = self.inner.disconnects.clone();
        dropped.mark_unchanged();
        let batch = if timeout < Duration::from_millis(1) {
            consumer.fetch().max_messages(1).messages().await
        } else {
            consumer
                .batch()
                .max_messages(1)
                .expires(timeout)
                .messages()
                .await
        };
        let mut batch = batch.map_err(|e| NatsError::pull(&e, &stream))?;
        let within = timeout.saturating_add(self.inner.options.timeout);
        let next = tokio::select! {
            biased;
            next = tokio::time::timeout(within, batch.next()) => {
                next.map_err(|_| NatsError::unanswered_pull(&stream, within))?
            }
            Ok(()) = dropped.changed() => return Err(NatsError::dropped_pull(&stream).into()),
        };
        match next {
            None => Ok(None),
            Some(Ok(message)) => Ok(Some(self.delivery(queue, message)?)),
            Some(Err(e)) => {
                let error = NatsError::pulled(&*e, &stream);
                if !error.is_transient() {
                    // A deleted consumer or stream is set up again on the next pop.
                    self.forget(queue);
                }
                Err(error.into())
            }
        }
    }

    /// The first delivery as [`pop`](Transport::pop) takes it (one pull, waiting up to
    /// `timeout`), then, when there is room for more, what the consumer has at hand, up to
    /// `max` in all, from one no-wait pull (a `fetch`, which the server ends once it answered).
    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        let Some(first) = self.pop(queue, timeout).await? else {
            return Ok(Vec::new());
        };
        let mut out = vec![first];
        if max > 1 {
            self.take_ready(queue, max - 1, &mut out).await;
        }
        Ok(out)
    }

    /// `+ACK`, confirmed by the server (JetStream removes the message from the work queue).
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        handle(delivery)?
            .acker
            .double_ack()
            .await
            .map_err(|e| NatsError::ack("acknowledging a delivery (+ACK)", &*e).into())
    }

    /// Sets up the queue's stream and durable consumer before the first pull, so a server
    /// without JetStream or a stream of someone else's stops `consume` at once.
    async fn prepare_consume(
        &self,
        queue: &str,
        _concurrency: usize,
    ) -> Result<(), TransportError> {
        self.consumer(queue).await?;
        Ok(())
    }

    /// Drains the connection: subscriptions end, what was published is flushed.
    async fn close(&self) -> Result<(), TransportError> {
        self.inner
            .client
            .drain()
            .await
            .map_err(|e| NatsError::Connection(format!("draining the connection: {e}")).into())
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
            .sends(Sends::body_only().headers().facts())
            .redelivery(Redelivery::Native(self))
            .rewind(self)
            .batch_ack(self)
            .batch_publish(self)
            .hold_check(self)
            .prefetch_per_slot(PREFETCH_PER_SLOT)
            .browse(self)
            .inspect(self)
            .stats(self)
    }
}

/// Deliveries the runtime holds per handler slot by default
/// ([`Capabilities::prefetch_per_slot`]): a receive then takes up to four per slot in two
/// round trips (a waiting pull for the first, a no-wait pull for the rest) instead of one round
/// trip per message. They wait for a slot only while handlers finish at once, and one that
/// waited past `ack_wait` is refused ([`HoldChecker`](babelqueue_transport::HoldChecker)).
const PREFETCH_PER_SLOT: usize = 4;

#[async_trait]
impl Redeliverer for NatsTransport {
    /// `-NAK` with the delay: JetStream redelivers the original, which keeps its bytes and its
    /// headers, and counts the delivery. The runtime asks for it only when that next delivery
    /// reads as it counted ([`keeps_original`](Redeliverer::keeps_original)); otherwise it
    /// publishes its own body (at once: JetStream 2.9 has no delayed publish) and acknowledges
    /// the original.
    async fn redeliver(
        &self,
        delivery: &Delivery,
        redeliver: Redeliver<'_>,
    ) -> Result<Redelivered, TransportError> {
        self.nak(delivery, redeliver.delay).await?;
        Ok(Redelivered::Settled)
    }

    fn keeps_original(&self) -> bool {
        true
    }
}

#[async_trait]
impl Rewinder for NatsTransport {
    /// `-NAK` without a delay: JetStream redelivers it first.
    async fn rewind(&self, delivery: &Delivery) -> Result<(), TransportError> {
        Ok(self.nak(delivery, None).await?)
    }

    /// A copy at the tail of the stream, then `+ACK`: every message waiting now is delivered
    /// before it. The copy keeps the headers, and its body is `counted`: the attempts JetStream
    /// counted, as the runtime reconciled them (the copy's delivery count starts again from 0);
    /// an unreadable body is copied byte for byte.
    ///
    /// Why not a delayed `-NAK`: JetStream hands a NAKed message out before newer ones once its
    /// delay is over, and the runtime pauses 1 s after each failed settle write, so the
    /// messages whose dead-letter write kept failing came back in turn and took every slot of a
    /// worker (the chaos suite's `nats/dlq-failure` row: 0 of 10 good messages behind them
    /// handled in 20 s with a 1 s delay, 4 with 5 s, 9 with a delay doubling from 5 s).
    ///
    /// When the acknowledgement fails after the copy was stored, the original comes back after
    /// `ack_wait` as well: a duplicate, never a loss.
    async fn rewind_behind(
        &self,
        delivery: &Delivery,
        counted: &[u8],
    ) -> Result<(), TransportError> {
        let held = handle(delivery)?;
        let headers = projection::header_map(delivery.headers())?;
        self.send(delivery.queue(), counted, Some(headers)).await?;
        if let Err(e) = held.acker.double_ack().await {
            tracing::error!(target: LOG, queue = delivery.queue(), error = %e,
                "Failed to acknowledge a message after copying it behind the waiting ones; JetStream will deliver it again after ack_wait (a duplicate)");
        }
        Ok(())
    }
}

#[async_trait]
impl Browser for NatsTransport {
    /// The bodies stored on the queue's stream, oldest first (those delivered and not yet
    /// acknowledged too), read by sequence without a consumer. A queue without a stream is
    /// empty.
    async fn browse(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, TransportError> {
        let o = &self.inner.options;
        let name = o.stream_name(queue)?;
        let subject = o.subject(queue)?;
        let stream = match self.inner.js.get_stream(&name).await {
            Ok(stream) => stream,
            Err(e) => {
                if let async_nats::jetstream::context::GetStreamErrorKind::JetStream(api) = e.kind()
                    && api.error_code() == ErrorCode::STREAM_NOT_FOUND
                {
                    return Ok(Vec::new());
                }
                return Err(NatsError::get_stream(&e, &name).into());
            }
        };
        let mut bodies = Vec::new();
        let mut sequence = 1;
        while max == 0 || bodies.len() < max {
            let next = stream
                .raw_message_builder()
                .sequence(sequence)
                .next_by_subject(subject.clone())
                .send()
                .await;
            match next {
                Ok(message) => {
                    sequence = message.sequence.saturating_add(1);
                    bodies.push(message.payload.to_vec());
                }
                Err(e) => match e.kind() {
                    LastRawMessageErrorKind::NoMessageFound => break,
                    LastRawMessageErrorKind::JetStream(api)
                        if api.error_code() == ErrorCode::NO_MESSAGE_FOUND =>
                    {
                        break;
                    }
                    _ => return Err(NatsError::read(&e, &name).into()),
                },
            }
        }
        Ok(bodies)
    }
}
