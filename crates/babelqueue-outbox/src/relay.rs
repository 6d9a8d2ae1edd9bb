//! The read side: publish committed rows through a [`Transport`].

use std::fmt;
use std::future::Future;
use std::ops::AddAssign;
use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::send::{self, Purpose};
use babelqueue_core::{Backoff, Jitter, Outgoing, Transport, TransportError};

use crate::error::{Error, Result};
use crate::message::OutboxRecord;
use crate::store::{Failure, OutboxStore, Retry, Settlement};

/// The longest error text recorded on a row, in bytes.
pub const MAX_ERROR_LEN: usize = 1000;

/// What one or more relay passes did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// Rows the transport accepted (now marked published).
    pub published: u64,
    /// Rows whose publish failed (left pending with a later next try, or parked).
    pub failed: u64,
    /// Of the failed rows, those parked because their attempts ran out.
    pub parked: u64,
    /// Passes run (claims made).
    pub passes: u64,
}

impl RelayReport {
    /// Rows the relay tried to publish.
    pub fn attempted(&self) -> u64 {
        self.published + self.failed
    }
}

impl AddAssign for RelayReport {
    fn add_assign(&mut self, other: RelayReport) {
        self.published += other.published;
        self.failed += other.failed;
        self.parked += other.parked;
        self.passes += other.passes;
    }
}

#[derive(Debug, Clone)]
struct Config {
    batch_size: usize,
    backoff: Backoff,
    max_attempts: Option<u32>,
    publish_timeout: Duration,
    max_passes: u64,
    poll_interval: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            batch_size: 100,
            backoff: Backoff {
                base: 1.0,
                multiplier: 2.0,
                max: 60.0,
                jitter: Jitter::None,
            },
            max_attempts: None,
            publish_timeout: Duration::from_secs(30),
            max_passes: 10_000,
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// Publishes the rows an [`Outbox`](crate::Outbox) committed, through any [`Transport`].
///
/// * The stored bytes go out unchanged (never decoded or re-encoded, so `trace_id` and every
///   unknown member survive); stored headers ride beside them where the transport declares
///   headers ([`Sends::headers`](babelqueue_core::Sends::headers)), and are dropped otherwise.
/// * A row is marked published only after the transport accepted it. A relay that dies in
///   between publishes the row again later: the handoff is at-least-once, so consumers dedupe on
///   `meta.id` ([`babelqueue_core::idempotency`]).
/// * A failed publish (an error, or no answer within the publish timeout) never stops the
///   batch: the row keeps its bytes, counts one more attempt, records the error text, and is
///   due again after a bounded back-off (`base · multiplier^(attempts−1)`, capped), or is
///   parked once `max_attempts` ran out.
/// * Several relays may run against one store: the store's claim hands each row to one relay
///   at a time.
pub struct OutboxRelay {
    transport: Arc<dyn Transport>,
    store: Arc<dyn OutboxStore>,
    config: Config,
}

impl fmt::Debug for OutboxRelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboxRelay")
            .field("transport", &self.transport.name())
            .field("store", &self.store)
            .field("config", &self.config)
            .finish()
    }
}

/// Configures an [`OutboxRelay`].
#[derive(Debug)]
#[must_use]
pub struct RelayBuilder {
    transport: Arc<dyn Transport>,
    store: Arc<dyn OutboxStore>,
    config: Config,
}

impl RelayBuilder {
    /// Rows claimed and published per pass (default 100, at least 1).
    pub fn batch_size(mut self, rows: usize) -> Self {
        self.config.batch_size = rows;
        self
    }

    /// The delay before a failed row is due again, by its attempts so far (default: 1 s,
    /// doubling, capped at 60 s, no jitter). The cap (`max`) must be positive: the back-off is
    /// bounded.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.config.backoff = backoff;
        self
    }

    /// Parks a row once this many publishes of it failed (default: never park, retry forever).
    /// 0 means never.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.config.max_attempts = (attempts > 0).then_some(attempts);
        self
    }

    /// How long one publish may take before it counts as failed (default 30 s).
    pub fn publish_timeout(mut self, timeout: Duration) -> Self {
        self.config.publish_timeout = timeout;
        self
    }

    /// The most passes one [`drain`](OutboxRelay::drain) makes (default 10 000).
    pub fn max_passes(mut self, passes: u64) -> Self {
        self.config.max_passes = passes;
        self
    }

    /// How long [`run`](OutboxRelay::run) waits when the outbox is drained (default 1 s).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.config.poll_interval = interval;
        self
    }

    /// The relay, or a [`Error::Config`] naming what cannot work.
    pub fn build(self) -> Result<OutboxRelay> {
        let c = &self.config;
        if c.batch_size == 0 {
            return Err(Error::Config("batch_size must be at least 1".into()));
        }
        if c.max_passes == 0 {
            return Err(Error::Config("max_passes must be at least 1".into()));
        }
        if c.publish_timeout.is_zero() {
            return Err(Error::Config("publish_timeout must be positive".into()));
        }
        let b = &c.backoff;
        if !(b.max.is_finite() && b.max > 0.0) {
            return Err(Error::Config(
                "the relay back-off must be bounded: set a positive, finite `max`".into(),
            ));
        }
        if !(b.base.is_finite() && b.base >= 0.0 && b.multiplier.is_finite() && b.multiplier >= 0.0)
        {
            return Err(Error::Config(
                "the relay back-off needs a finite, non-negative base and multiplier".into(),
            ));
        }
        Ok(OutboxRelay {
            transport: self.transport,
            store: self.store,
            config: self.config,
        })
    }
}

impl OutboxRelay {
    /// A relay publishing `store`'s rows through `transport`.
    pub fn builder(
        transport: impl Transport + 'static,
        store: impl OutboxStore + 'static,
    ) -> RelayBuilder {
        RelayBuilder::new(Arc::new(transport), Arc::new(store))
    }

    /// Like [`builder`](OutboxRelay::builder), for shared instances (`App::transport()` …).
    pub fn builder_arc(transport: Arc<dyn Transport>, store: Arc<dyn OutboxStore>) -> RelayBuilder {
        RelayBuilder::new(transport, store)
    }

    /// The delay before a row that has now failed `attempts` times is due again.
    pub fn backoff_for(&self, attempts: u32) -> Duration {
        self.config.backoff.delay(i64::from(attempts))
    }

    /// One pass: claims a batch, publishes every row, records each outcome.
    ///
    /// Only a store failure is an error (nothing is recorded then; the claimed rows come back,
    /// and any the transport already accepted are published again).
    pub async fn flush(&self) -> Result<RelayReport> {
        let batch = self.store.claim(self.config.batch_size).await?;
        let mut report = RelayReport {
            passes: 1,
            ..RelayReport::default()
        };
        let mut settlement = Settlement::new();
        let outcomes = self.publish_all(batch.records()).await;
        for (record, outcome) in batch.records().iter().zip(outcomes) {
            match outcome {
                Ok(()) => {
                    settlement.published(record.id().clone());
                    report.published += 1;
                }
                Err(error) => {
                    let attempts = record.attempts().saturating_add(1);
                    let retry = match self.config.max_attempts {
                        Some(max) if attempts >= max => Retry::Park,
                        _ => Retry::After(self.backoff_for(attempts)),
                    };
                    match retry {
                        Retry::Park => {
                            report.parked += 1;
                            tracing::error!(target: "babelqueue::outbox", id = %record.id(),
                                queue = record.message().queue(), attempts, error,
                                "Parking an outbox row: its publish attempts ran out");
                        }
                        Retry::After(delay) => {
                            tracing::warn!(target: "babelqueue::outbox", id = %record.id(),
                                queue = record.message().queue(), attempts, error,
                                retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                                "Publishing an outbox row failed; it stays pending");
                        }
                    }
                    report.failed += 1;
                    settlement.failed(Failure::new(record.id().clone(), error, retry));
                }
            }
        }
        if let Err(e) = batch.settle(settlement).await {
            tracing::error!(target: "babelqueue::outbox", error = %e, published = report.published,
                "Could not record a relay pass; its rows stay pending and will be published again");
            return Err(e);
        }
        Ok(report)
    }

    /// Passes until the outbox is drained: stops after a pass that publishes nothing (empty, or
    /// only failing rows left) or claims less than a full batch, or at `max_passes`.
    pub async fn drain(&self) -> Result<RelayReport> {
        let mut total = RelayReport::default();
        while total.passes < self.config.max_passes {
            let pass = self.flush().await?;
            total += pass;
            if pass.published == 0 || pass.attempted() < self.batch_size() {
                break;
            }
        }
        Ok(total)
    }

    /// Relays until `shutdown` completes: drains, then waits `poll_interval` for new rows, and
    /// again. A transient store failure is logged and retried after `poll_interval`; any other
    /// store failure ends the run. The pass in progress when `shutdown` completes finishes
    /// first.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<RelayReport> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut total = RelayReport::default();
        loop {
            let busy = match self.flush().await {
                Ok(pass) => {
                    total += pass;
                    pass.published > 0 && pass.attempted() >= self.batch_size()
                }
                Err(e) if e.is_transient() => {
                    tracing::warn!(target: "babelqueue::outbox", error = %e,
                        "The outbox store is unavailable; retrying");
                    false
                }
                Err(e) => return Err(e),
            };
            let pause = if busy {
                Duration::ZERO
            } else {
                self.config.poll_interval
            };
            tokio::select! {
                biased;
                () = &mut shutdown => return Ok(total),
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    fn batch_size(&self) -> u64 {
        u64::try_from(self.config.batch_size).unwrap_or(u64::MAX)
    }

    /// Publishes `records` in order; one outcome per record. Consecutive rows to one queue
    /// whose headers would not ride anyway (none, or a transport that declares none) go out
    /// as one [`BatchPublisher`](babelqueue_core::BatchPublisher) call where the transport
    /// offers it (a Redis pipeline of scripts, RabbitMQ confirms in flight, Kafka delivery
    /// reports awaited together), within one publish timeout; the others one by one. A batch
    /// call that fails fails each of its rows: some may have reached the broker and are
    /// published again later (at-least-once, as for a relay that dies after a publish).
    async fn publish_all(&self, records: &[OutboxRecord]) -> Vec<std::result::Result<(), String>> {
        let capabilities = self.transport.capabilities();
        let headers_ride = capabilities.send_parts().headers;
        let mut outcomes = Vec::with_capacity(records.len());
        let mut start = 0;
        while start < records.len() {
            let queue = records[start].message().queue();
            let run = match capabilities.batch_publisher() {
                Some(_) => records[start..]
                    .iter()
                    .take_while(|r| {
                        r.message().queue() == queue
                            && (!headers_ride || r.message().headers().is_empty())
                    })
                    .count(),
                None => 0,
            };
            match capabilities.batch_publisher() {
                Some(publisher) if run > 1 => {
                    let bodies: Vec<&[u8]> = records[start..start + run]
                        .iter()
                        .map(|r| r.message().body())
                        .collect();
                    let sent = tokio::time::timeout(
                        self.config.publish_timeout,
                        publisher.publish_batch(queue, &bodies),
                    )
                    .await;
                    let outcome = match sent {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(e)) => Err(describe(&e)),
                        Err(_) => Err(self.timed_out()),
                    };
                    outcomes.extend(std::iter::repeat_n(outcome, run));
                    start += run;
                }
                _ => {
                    outcomes.push(self.publish(&records[start]).await);
                    start += 1;
                }
            }
        }
        outcomes
    }

    fn timed_out(&self) -> String {
        format!(
            "Timeout: the publish did not finish within {:?}",
            self.config.publish_timeout
        )
    }

    async fn publish(&self, record: &OutboxRecord) -> std::result::Result<(), String> {
        let message = record.message();
        let (queue, body, headers) = (message.queue(), message.body(), message.headers());
        let publish = async {
            // Headers ride where the transport declares them, else the body goes alone.
            let mut asked = Outgoing::new(queue, body);
            if !headers.is_empty() {
                asked = asked.headers(headers);
            }
            match send::shape(
                Purpose::Publish,
                &asked,
                self.transport.capabilities().send_parts(),
            ) {
                Ok(outgoing) => self.transport.send(&outgoing).await,
                // Only a delay is ever refused, and an outbox record carries none.
                Err(refused) => Err(TransportError::unsupported(refused.to_string())),
            }
        };
        match tokio::time::timeout(self.config.publish_timeout, publish).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(describe(&e)),
            Err(_) => Err(self.timed_out()),
        }
    }
}

impl RelayBuilder {
    fn new(transport: Arc<dyn Transport>, store: Arc<dyn OutboxStore>) -> RelayBuilder {
        RelayBuilder {
            transport,
            store,
            config: Config::default(),
        }
    }
}

/// `<kind>: <message>`, cut to [`MAX_ERROR_LEN`] bytes on a character boundary.
fn describe(error: &TransportError) -> String {
    let mut text = format!("{:?}: {error}", error.kind());
    if text.len() > MAX_ERROR_LEN {
        let mut end = MAX_ERROR_LEN;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_described_by_kind_and_bounded() {
        let e = TransportError::connection("redis: connection refused");
        assert_eq!(describe(&e), "Connection: redis: connection refused");
        let long = TransportError::rejected("é".repeat(MAX_ERROR_LEN));
        let text = describe(&long);
        assert!(text.len() <= MAX_ERROR_LEN && text.starts_with("Rejected: é"));
    }

    #[test]
    fn reports_add_up() {
        let mut total = RelayReport::default();
        total += RelayReport {
            published: 2,
            failed: 1,
            parked: 1,
            passes: 1,
        };
        total += RelayReport {
            published: 3,
            failed: 0,
            parked: 0,
            passes: 1,
        };
        assert_eq!(total.attempted(), 6);
        assert_eq!((total.published, total.parked, total.passes), (5, 1, 2));
    }
}
