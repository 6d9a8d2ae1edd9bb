//! [`SqsTransport`]: the [`Transport`] and its capabilities on top of an [`SqsClient`].

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{
    BatchAcker, BatchPublisher, Capabilities, DeadLetterNamer, Delivery, Headers, NativeSettler,
    Outgoing, Redeliver, Redelivered, Redeliverer, Redelivery, Sends, Transport, TransportError,
};
use tokio::sync::OnceCell;

use crate::client::{AwsSqs, ReceiveMessage, ReceivedMessage, SendMessage, SqsClient};
use crate::config::SqsOptions;
use crate::error::SqsError;
use crate::projection::{self, MAX_RECEIVE_BATCH};

const LOG: &str = "babelqueue::sqs";

/// What a delivery remembers for its settlement, and what SQS said of it (moved from the
/// received message, for the [`Inspector`](babelqueue_core::Inspector)).
#[derive(Debug, Clone)]
pub(crate) struct Receipt {
    /// The receipt handle (`None` when SQS sent none: nothing can settle it).
    handle: Option<String>,
    /// SQS's `MessageId`.
    pub(crate) message_id: Option<String>,
    /// The `ApproximateReceiveCount` system attribute as SQS sent it (`None`: not reported).
    pub(crate) receive_count: Option<String>,
}

/// The Amazon SQS transport.
///
/// Build it from a URL with [`SqsTransport::connect`], or over any [`SqsClient`] with
/// [`SqsTransport::new`] (an [`AwsSqs`] you configured yourself, or a
/// `fake::FakeSqs` (the `fake` feature) in tests). See the [crate docs](crate) for the behaviour.
pub struct SqsTransport {
    client: Arc<dyn SqsClient>,
    config: SqsOptions,
    urls: Mutex<HashMap<String, Arc<OnceCell<String>>>>,
    batch: AtomicUsize,
    /// `max_messages` was not fixed: the batch follows the runtime's `concurrency`.
    follow_concurrency: AtomicBool,
    buffered: Mutex<HashMap<String, VecDeque<Delivery>>>,
}

impl fmt::Debug for SqsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqsTransport")
            .field("config", &self.config)
            .field("max_messages", &self.batch.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl SqsTransport {
    /// Connects from an `sqs://` URL: the options of [`SqsOptions::from_url`], credentials from
    /// the default AWS provider chain. Queue URLs and credentials are resolved on first use; with
    /// a region in the URL nothing is sent until then (without one, the provider chain may ask
    /// the instance metadata service for the region).
    pub async fn connect(url: &str) -> Result<SqsTransport, SqsError> {
        SqsTransport::connect_with(url, SqsOptions::default()).await
    }

    /// [`connect`](SqsTransport::connect) starting from `options`: the URL's region (when it
    /// names one) and its query options override them.
    pub async fn connect_with(url: &str, options: SqsOptions) -> Result<SqsTransport, SqsError> {
        let config = SqsOptions::from_url_onto(url, options)?;
        let client = AwsSqs::from_env(&config).await?;
        Ok(SqsTransport::new(client, config))
    }

    /// A transport over `client` with `config` (its `region` and `endpoint` are then only
    /// informative: the client is already built).
    pub fn new(client: impl SqsClient + 'static, config: SqsOptions) -> SqsTransport {
        SqsTransport::with_client(Arc::new(client), config)
    }

    /// A transport over a shared client.
    pub fn with_client(client: Arc<dyn SqsClient>, config: SqsOptions) -> SqsTransport {
        let batch = config.max_messages.unwrap_or(1).clamp(1, MAX_RECEIVE_BATCH);
        SqsTransport {
            follow_concurrency: AtomicBool::new(config.max_messages.is_none()),
            client,
            config,
            urls: Mutex::new(HashMap::new()),
            batch: AtomicUsize::new(batch),
            buffered: Mutex::new(HashMap::new()),
        }
    }

    /// The client, for the `Stats` module.
    pub(crate) fn client(&self) -> &dyn SqsClient {
        self.client.as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &SqsOptions {
        &self.config
    }

    /// Fixes how many messages one ReceiveMessage takes (clamped to 1..=10), instead of the
    /// runtime's `concurrency`. Takes effect on the next receive.
    pub fn set_max_messages(&self, n: usize) {
        self.follow_concurrency.store(false, Ordering::Relaxed);
        self.batch
            .store(n.clamp(1, MAX_RECEIVE_BATCH), Ordering::Relaxed);
    }

    /// Messages received in a batch and not handed to the runtime yet, over all queues.
    pub fn buffered(&self) -> usize {
        self.buffer().values().map(VecDeque::len).sum()
    }

    /// Makes every buffered message visible again at once (`ChangeMessageVisibility` 0; SQS
    /// counts that receive). [`Transport::close`] calls it; call it yourself when a consume loop
    /// ended on its own (`max_messages`, an idle timeout) and the transport lives on.
    pub async fn release_buffered(&self) -> Result<(), TransportError> {
        let drained: Vec<Delivery> = self.buffer().drain().flat_map(|(_, queue)| queue).collect();
        let mut first_error = None;
        for delivery in drained {
            if let Err(e) = self.change_visibility(&delivery, 0).await {
                tracing::error!(target: LOG, queue = delivery.queue(), error = %e,
                    "Releasing a buffered SQS message failed; it comes back after its visibility timeout");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), |e| Err(e.into()))
    }

    fn buffer(&self) -> MutexGuard<'_, HashMap<String, VecDeque<Delivery>>> {
        self.buffered.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_fifo(&self, queue: &str) -> bool {
        self.config.fifo || projection::is_fifo_queue(queue)
    }

    /// The queue URL of `name`: `<prefix>/<name>` with a prefix, else GetQueueUrl, resolved
    /// once per name for the transport's life (concurrent first uses share one lookup; a failed
    /// lookup is not cached).
    pub async fn queue_url(&self, name: &str) -> Result<String, SqsError> {
        if let Some(prefix) = &self.config.prefix {
            return Ok(format!("{}/{name}", prefix.trim_end_matches('/')));
        }
        let cell = {
            let mut urls = self.urls.lock().unwrap_or_else(|p| p.into_inner());
            urls.entry(name.to_owned()).or_default().clone()
        };
        cell.get_or_try_init(|| self.client.get_queue_url(name))
            .await
            .cloned()
    }

    async fn send_message(
        &self,
        queue: &str,
        body: &[u8],
        headers: Option<&Headers>,
        delay: Option<Duration>,
    ) -> Result<(), SqsError> {
        let request = self.request(queue, body, headers, delay).await?;
        self.client.send_message(request).await
    }

    /// The SendMessage request for `body`: the body as text, the contract attributes (and
    /// `headers`), the delay, the FIFO group and deduplication ids.
    async fn request(
        &self,
        queue: &str,
        body: &[u8],
        headers: Option<&Headers>,
        delay: Option<Duration>,
    ) -> Result<SendMessage, SqsError> {
        let fifo = self.is_fifo(queue);
        let delay_seconds = projection::publish_delay(delay, fifo)?;
        let text = std::str::from_utf8(body).map_err(|e| {
            SqsError::Body(format!(
                "it is not valid UTF-8 (at byte {}); SQS bodies are text",
                e.valid_up_to()
            ))
        })?;
        if let Some((at, c)) = projection::first_invalid_char(text) {
            return Err(SqsError::Body(format!(
                "character {c:?} at byte {at} is outside SQS's character set"
            )));
        }
        let mut attributes = projection::attributes(body);
        if let Some(headers) = headers {
            projection::merge_headers(&mut attributes, headers)?;
        }
        let (group_id, deduplication_id) = if fifo {
            let group = self
                .config
                .group_id
                .clone()
                .unwrap_or_else(|| queue.to_owned());
            let dedup = (!self.config.content_dedup).then(|| projection::deduplication_id(body));
            (Some(group), dedup)
        } else {
            (None, None)
        };
        let queue_url = self.queue_url(queue).await?;
        Ok(SendMessage {
            queue_url,
            body: text.to_owned(),
            attributes,
            delay_seconds,
            group_id,
            deduplication_id,
        })
    }

    /// Turns one received message into a delivery: the body exactly as received, with what SQS
    /// said about it (the `bq-schema-version` attribute as carried, the receive count). The
    /// runtime gates, reconciles and classifies.
    fn delivery(&self, queue: &str, message: ReceivedMessage) -> Delivery {
        let ReceivedMessage {
            body,
            receipt_handle,
            message_id,
            attributes,
            receive_count,
        } = message;
        let delivery = Delivery::new(queue, body.into_bytes())
            .with_headers(projection::headers(&attributes))
            .with_declared_version(projection::declared(&attributes));
        let delivery = match projection::count(receive_count.as_deref()) {
            Some(count) => delivery.with_count(count),
            None => delivery,
        };
        delivery.with_handle(Receipt {
            handle: receipt_handle,
            message_id,
            receive_count,
        })
    }

    async fn change_visibility(&self, delivery: &Delivery, seconds: i32) -> Result<(), SqsError> {
        let Some(handle) = delivery
            .handle::<Receipt>()
            .and_then(|r| r.handle.as_deref())
        else {
            return Ok(());
        };
        let url = self.queue_url(delivery.queue()).await?;
        self.client
            .change_message_visibility(&url, handle, seconds)
            .await
    }
}

#[async_trait]
impl Transport for SqsTransport {
    fn name(&self) -> &'static str {
        "sqs"
    }

    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        Ok(self.send_message(queue, body, None, None).await?)
    }

    /// One SendMessage: `headers` as String message attributes beside the contract ones, and
    /// `DelaySeconds` = the delay, together or apart. A delay SQS cannot honour (not whole
    /// seconds in 0..=900, or any delay on a FIFO queue) is an error and nothing is sent.
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        Ok(self
            .send_message(
                outgoing.queue,
                outgoing.body,
                outgoing.headers,
                outgoing.delay,
            )
            .await?)
    }

    /// One ReceiveMessage feeds every free handler slot, unless `max_messages` was fixed.
    async fn prepare_consume(
        &self,
        _queue: &str,
        concurrency: usize,
    ) -> Result<(), TransportError> {
        if self.follow_concurrency.load(Ordering::Relaxed) {
            self.batch
                .store(concurrency.clamp(1, MAX_RECEIVE_BATCH), Ordering::Relaxed);
        }
        Ok(())
    }

    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        Ok(self.receive(queue, 1, timeout).await?.into_iter().next())
    }

    /// Buffered messages first; else one ReceiveMessage of up to 10 (the runtime's `max`, or
    /// the fixed `max_messages`), long-polling; what is beyond `max` waits in the buffer.
    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        let max = max.max(1);
        {
            let mut buffer = self.buffer();
            if let Some(buffered) = buffer.get_mut(queue).filter(|b| !b.is_empty()) {
                let take = max.min(buffered.len());
                return Ok(buffered.drain(..take).collect());
            }
        }
        let queue_url = self.queue_url(queue).await?;
        let batch = if self.follow_concurrency.load(Ordering::Relaxed) {
            max.max(self.batch.load(Ordering::Relaxed))
        } else {
            self.batch.load(Ordering::Relaxed)
        }
        .clamp(1, MAX_RECEIVE_BATCH);
        let messages = self
            .client
            .receive_message(ReceiveMessage {
                queue_url,
                max_messages: i32::try_from(batch).unwrap_or(1),
                wait_time_seconds: projection::wait_time_seconds(timeout, self.config.wait_time),
                visibility_timeout: self.config.visibility_timeout,
            })
            .await?;
        let mut deliveries: Vec<Delivery> = messages
            .into_iter()
            .map(|m| self.delivery(queue, m))
            .collect();
        if deliveries.len() > max {
            let rest = deliveries.split_off(max);
            self.buffer()
                .entry(queue.to_owned())
                .or_default()
                .extend(rest);
        }
        Ok(deliveries)
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let Some(handle) = delivery
            .handle::<Receipt>()
            .and_then(|r| r.handle.as_deref())
        else {
            return Ok(());
        };
        let url = self.queue_url(delivery.queue()).await?;
        Ok(self.client.delete_message(&url, handle).await?)
    }

    /// Makes the messages received in a batch and not handed out visible again.
    async fn close(&self) -> Result<(), TransportError> {
        self.release_buffered().await
    }

    /// Headers and delays on publish, release by visibility (native: never a copy), the `-dlq`
    /// naming rule, and the no-op native settle that leaves a message to the RedrivePolicy.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
            .sends(Sends::body_only().headers().delay())
            .redelivery(Redelivery::Native(self))
            .dead_letter_names(self)
            .native_settle(self)
            .batch_ack(self)
            .batch_publish(self)
            .inspect(self)
            .stats(self)
    }
}

/// Entries per SendMessageBatch and DeleteMessageBatch: SQS's own limit.
const SQS_BATCH: usize = 10;

#[async_trait]
impl BatchAcker for SqsTransport {
    /// One DeleteMessageBatch per queue and per 10 messages.
    async fn ack_batch(&self, deliveries: &[Delivery]) -> Result<(), TransportError> {
        let mut by_queue: HashMap<&str, Vec<String>> = HashMap::new();
        for delivery in deliveries {
            if let Some(handle) = delivery.handle::<Receipt>().and_then(|r| r.handle.clone()) {
                by_queue.entry(delivery.queue()).or_default().push(handle);
            }
        }
        let mut first_error = None;
        for (queue, handles) in by_queue {
            let url = self.queue_url(queue).await?;
            for chunk in handles.chunks(SQS_BATCH) {
                if let Err(e) = self.client.delete_message_batch(&url, chunk.to_vec()).await {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), |e| Err(e.into()))
    }
}

#[async_trait]
impl BatchPublisher for SqsTransport {
    /// One SendMessageBatch per 10 bodies; every body is checked (UTF-8, SQS's character set)
    /// before the first is sent.
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        let mut requests = Vec::with_capacity(bodies.len());
        for body in bodies {
            requests.push(self.request(queue, body, None, None).await?);
        }
        let url = self.queue_url(queue).await?;
        let mut requests = requests.into_iter().peekable();
        while requests.peek().is_some() {
            let chunk: Vec<SendMessage> = requests.by_ref().take(SQS_BATCH).collect();
            self.client.send_message_batch(&url, chunk).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Redeliverer for SqsTransport {
    /// `ChangeMessageVisibility(VisibilityTimeout = delay)` on the received message (0 when no
    /// delay is configured): never a delete, never a copy, so the body is unused; SQS's receive
    /// count carries the attempt.
    async fn redeliver(
        &self,
        delivery: &Delivery,
        redeliver: Redeliver<'_>,
    ) -> Result<Redelivered, TransportError> {
        let delay = redeliver.delay_or_zero();
        let queue = delivery.queue();
        let receipt = delivery.handle::<Receipt>();
        if receipt.and_then(|r| r.handle.as_deref()).is_none() {
            tracing::warn!(target: LOG, queue,
                "SQS message on queue {queue:?} has no receipt handle: it cannot be released and comes back after the queue's visibility timeout");
            return Ok(Redelivered::Settled);
        }
        if receipt.is_some_and(|r| r.receive_count.is_none()) {
            tracing::warn!(target: LOG, queue,
                "SQS delivery on queue {queue:?} did not report ApproximateReceiveCount: releasing it cannot advance attempts; rely on the queue's RedrivePolicy to stop a poison loop");
        }
        let visibility = projection::visibility_timeout(delay.as_secs_f64());
        if visibility.clamped {
            tracing::warn!(target: LOG, queue, requested = ?delay, seconds = visibility.seconds,
                "SQS release delay {delay:?} is outside 0..=43200 s; clamped to {} s", visibility.seconds);
        }
        self.change_visibility(delivery, visibility.seconds).await?;
        Ok(Redelivered::Settled)
    }
}

impl DeadLetterNamer for SqsTransport {
    /// `<queue>-dlq`, or `<base>-dlq.fifo` for a FIFO queue; an explicit suffix replaces `-dlq`.
    fn dead_letter_queue_name(&self, queue: &str, suffix: Option<&str>) -> String {
        projection::dead_letter_queue_name(queue, suffix)
    }
}

#[async_trait]
impl NativeSettler for SqsTransport {
    /// Deliberately nothing on the wire: no delete, no visibility change, no copy. The message
    /// comes back when its visibility timeout lapses, and the queue's `RedrivePolicy` moves it to
    /// the queue's own dead-letter queue after `maxReceiveCount` receives.
    async fn settle_native(
        &self,
        delivery: &Delivery,
        reason: &str,
        _description: &str,
    ) -> Result<(), TransportError> {
        tracing::debug!(target: LOG, queue = delivery.queue(), reason,
            "left to SQS: visibility expiry, then the queue's RedrivePolicy");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeSqs;
    use crate::projection::{AttributeValue, Attributes};
    use babelqueue_core::{Count, Declared};
    use babelqueue_testkit::reading::{Class, classify};

    const ORDER: &str = r#"{"job":"urn:babel:orders:created","trace_id":"t-1","data":{"order_id":1042},"meta":{"id":"m-1","queue":"orders","lang":"rust","schema_version":1,"created_at":1749132727000},"attempts":0}"#;

    fn transport(config: SqsOptions) -> (FakeSqs, SqsTransport) {
        let fake = FakeSqs::new();
        (fake.clone(), SqsTransport::new(fake, config))
    }

    /// Sends `d` back the way the runtime does: through the native redelivery capability.
    async fn release(t: &SqsTransport, d: &Delivery, delay: Duration) {
        let Redelivery::Native(redeliverer) = t.capabilities().redelivery_mode() else {
            panic!("SQS redelivers natively")
        };
        redeliverer
            .redeliver(d, Redeliver::new(b"ignored", Some(1), Some(delay)))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn publish_projects_and_resolves_the_url_once() {
        let (fake, t) = transport(SqsOptions::default());
        t.publish("orders", ORDER.as_bytes()).await.unwrap();
        t.publish("orders", ORDER.as_bytes()).await.unwrap();
        assert_eq!(fake.url_lookups(), vec!["orders".to_owned()]);
        let sent = fake.sent();
        assert_eq!(sent[0].body, ORDER);
        assert_eq!(sent[0].attributes.len(), 6);
        assert_eq!(
            (
                sent[0].delay_seconds,
                &sent[0].group_id,
                &sent[0].deduplication_id
            ),
            (None, &None, &None)
        );
    }

    #[tokio::test]
    async fn a_prefix_skips_get_queue_url() {
        let (fake, t) = transport(SqsOptions::default().prefix("http://q/123/"));
        t.publish("orders", ORDER.as_bytes()).await.unwrap();
        assert!(fake.url_lookups().is_empty());
        assert_eq!(fake.sent()[0].queue_url, "http://q/123/orders");
    }

    #[tokio::test]
    async fn headers_ride_as_attributes_and_come_back() {
        let (_, t) = transport(SqsOptions::default());
        let headers: Headers = [("traceparent".to_owned(), "00-abc".to_owned())].into();
        t.send(&Outgoing::new("orders", ORDER.as_bytes()).headers(&headers))
            .await
            .unwrap();
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(d.headers()["traceparent"], "00-abc");
        assert_eq!(d.headers()["bq-job"], "urn:babel:orders:created");
        assert_eq!(d.body(), ORDER.as_bytes());
    }

    #[tokio::test]
    async fn bodies_sqs_cannot_carry_are_refused_before_sending() {
        let (fake, t) = transport(SqsOptions::default());
        for body in [&b"\xff\xfe"[..], "a\u{1}b".as_bytes()] {
            let err = t.publish("orders", body).await.unwrap_err();
            assert_eq!(err.kind(), babelqueue_core::TransportErrorKind::Unsupported);
        }
        let bad: Headers = [("has space".to_owned(), "v".to_owned())].into();
        assert!(
            t.send(&Outgoing::new("orders", ORDER.as_bytes()).headers(&bad))
                .await
                .is_err()
        );
        assert!(fake.sent().is_empty());
    }

    #[tokio::test]
    async fn fifo_sends_group_and_dedup_ids() {
        let (fake, t) = transport(SqsOptions::default().fifo(true));
        t.publish("orders.fifo", ORDER.as_bytes()).await.unwrap();
        t.publish("orders-dlq.fifo", b"plain").await.unwrap();
        let sent = fake.sent();
        assert_eq!(sent[0].group_id.as_deref(), Some("orders.fifo"));
        assert_eq!(sent[0].deduplication_id.as_deref(), Some("m-1"));
        assert_eq!(sent[1].group_id.as_deref(), Some("orders-dlq.fifo"));
        assert_eq!(sent[1].deduplication_id.as_ref().map(String::len), Some(64));

        let (fake, t) = transport(SqsOptions::default().group_id("g").content_dedup(true));
        t.publish("jobs.fifo", ORDER.as_bytes()).await.unwrap();
        let sent = fake.sent();
        assert_eq!(
            (
                sent[0].group_id.as_deref(),
                sent[0].deduplication_id.as_deref()
            ),
            (Some("g"), None)
        );
        // A FIFO name never takes a per-message delay, flag or not.
        let err = t
            .send(&Outgoing::new("jobs.fifo", ORDER.as_bytes()).delay(Duration::from_secs(1)))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), babelqueue_core::TransportErrorKind::Unsupported);
        assert_eq!(fake.sent().len(), 1);
    }

    #[tokio::test]
    async fn pop_asks_for_everything_and_long_polls() {
        let (fake, t) = transport(SqsOptions::default().wait_time(3).visibility_timeout(45));
        assert!(
            t.pop("orders", Duration::from_secs(30))
                .await
                .unwrap()
                .is_none()
        );
        let r = &fake.receives()[0];
        assert_eq!(
            (r.max_messages, r.wait_time_seconds, r.visibility_timeout),
            (1, 3, Some(45))
        );
    }

    #[tokio::test]
    async fn pop_hands_the_raw_body_over_with_the_receive_count() {
        let (fake, t) = transport(SqsOptions::default());
        fake.seed("orders", ORDER, Attributes::new(), Some("3"));
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(d.body(), ORDER.as_bytes(), "the transport never rewrites");
        assert_eq!(d.facts().count, Some(Count::Redelivered(2)));
        assert_eq!(d.facts().declared_version, Declared::Absent);
        // What the runtime makes of it: attempts = max(0, 3 - 1), routed on the body.
        let Class::Readable {
            body, urn, routed, ..
        } = classify(d.body(), d.facts(), d.queue())
        else {
            panic!("a readable envelope")
        };
        assert!(
            std::str::from_utf8(&body)
                .unwrap()
                .ends_with(r#""attempts":2}"#)
        );
        assert_eq!((urn.as_str(), routed), ("urn:babel:orders:created", false));
        // A first receive reports no count: the body is kept byte for byte.
        fake.seed("orders", ORDER, Attributes::new(), Some("1"));
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(d.facts().count, None);
    }

    #[tokio::test]
    async fn gated_messages_keep_their_raw_body() {
        let (fake, t) = transport(SqsOptions::default());
        let mut attrs = Attributes::new();
        attrs.insert("bq-schema-version".into(), AttributeValue::number("2"));
        let raw = "{ \"job\" : \"urn:x\", \"attempts\": 0 }";
        fake.seed("orders", raw, attrs, Some("5"));
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(d.body(), raw.as_bytes(), "no reconcile on a gated message");
        assert_eq!(d.facts().declared_version, Declared::Text("2".into()));
        assert_eq!(
            classify(d.body(), d.facts(), d.queue()),
            Class::Gated {
                declared: "2".into()
            }
        );
    }

    #[tokio::test]
    async fn a_long_declared_version_is_reported_whole() {
        let (fake, t) = transport(SqsOptions::default());
        let long = "9".repeat(70);
        let mut attrs = Attributes::new();
        attrs.insert("bq-schema-version".into(), AttributeValue::string(&long));
        fake.seed("orders", ORDER, attrs, Some("1"));
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        // Uncapped and unescaped: the runtime caps and escapes it for its log line.
        assert_eq!(d.facts().declared_version, Declared::Text(long.clone()));
        assert!(matches!(
            classify(d.body(), d.facts(), d.queue()),
            Class::Gated { declared } if declared == long
        ));
    }

    #[tokio::test]
    async fn redeliver_changes_visibility_only() {
        let (fake, t) = transport(SqsOptions::default());
        t.publish("orders", ORDER.as_bytes()).await.unwrap();
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        release(&t, &d, Duration::from_secs(99_999)).await;
        assert_eq!(
            fake.visibility_changes(),
            vec![("http://fake/orders".into(), "rh-1".into(), 43_200)]
        );
        assert!(fake.deleted().is_empty());
        assert_eq!(fake.sent().len(), 1);
        // No delay configured (an unchanged release): visible again at once.
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        t.redeliver(&d, Redeliver::new(b"", None, None))
            .await
            .unwrap();
        assert_eq!(fake.visibility_changes()[1].2, 0);
        // Without a receipt handle nothing is sent at all.
        let orphan = Delivery::new("orders", ORDER);
        release(&t, &orphan, Duration::ZERO).await;
        t.ack(&orphan).await.unwrap();
        assert_eq!(fake.visibility_changes().len(), 2);
        assert!(fake.deleted().is_empty());
    }

    #[tokio::test]
    async fn an_uncounted_delivery_is_still_released() {
        let (fake, t) = transport(SqsOptions::default());
        fake.seed("orders", ORDER, Attributes::new(), None);
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(d.facts().count, None, "native_attempts 0");
        release(&t, &d, Duration::ZERO).await;
        assert_eq!(fake.visibility_changes().len(), 1);
    }

    #[tokio::test]
    async fn batches_are_buffered_and_released_on_close() {
        let (fake, t) = transport(SqsOptions::default().max_messages(4));
        for _ in 0..3 {
            t.publish("orders", ORDER.as_bytes()).await.unwrap();
        }
        let first = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(fake.receives()[0].max_messages, 4);
        assert_eq!(t.buffered(), 2);
        let second = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(fake.receives().len(), 1, "served from the buffer");
        t.ack(&first).await.unwrap();
        t.ack(&second).await.unwrap();
        t.close().await.unwrap();
        assert_eq!(t.buffered(), 0);
        assert_eq!(fake.visibility_changes().len(), 1);
        assert_eq!(fake.bodies("orders").len(), 1, "visible again");
        t.set_max_messages(50);
        t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(fake.receives()[1].max_messages, 10);
    }

    #[tokio::test]
    async fn the_batch_follows_the_runtime_concurrency_unless_fixed() {
        let (fake, t) = transport(SqsOptions::default());
        t.prepare_consume("orders", 4).await.unwrap();
        t.pop("orders", Duration::ZERO).await.unwrap();
        t.prepare_consume("orders", 64).await.unwrap();
        t.pop("orders", Duration::ZERO).await.unwrap();
        let (_, fixed) = transport(SqsOptions::default().max_messages(2));
        fixed.prepare_consume("orders", 8).await.unwrap();
        t.set_max_messages(3);
        t.prepare_consume("orders", 8).await.unwrap();
        t.pop("orders", Duration::ZERO).await.unwrap();
        let asked: Vec<i32> = fake.receives().iter().map(|r| r.max_messages).collect();
        assert_eq!(asked, vec![4, 10, 3]);
        assert_eq!(fixed.batch.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn errors_keep_their_kind() {
        let (fake, t) = transport(SqsOptions::default());
        fake.fail_receives(true);
        let err = t.pop("orders", Duration::ZERO).await.unwrap_err();
        assert!(err.is_transient());
        fake.fail_sends_to("orders", true);
        assert!(
            t.publish("orders", ORDER.as_bytes())
                .await
                .unwrap_err()
                .is_transient()
        );
    }

    /// Captures the WARN+ log lines emitted on this thread.
    ///
    /// One process-wide subscriber writes each event to the buffer of the thread that emitted
    /// it. (A per-test `set_default` subscriber races with the other tests' subscribers over
    /// tracing's cached callsite interest and loses lines now and then.)
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    thread_local! {
        static SINK: std::cell::RefCell<Option<Captured>> = const { std::cell::RefCell::new(None) };
    }

    /// Routes each event to the emitting thread's [`Captured`] buffer, or drops it.
    struct ThreadSink;

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ThreadSink {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            SINK.with(|sink| sink.borrow().clone()).unwrap_or_default()
        }
    }

    /// Stops the capture on this thread when dropped.
    struct CaptureGuard;

    impl Drop for CaptureGuard {
        fn drop(&mut self) {
            SINK.with(|sink| sink.borrow_mut().take());
        }
    }

    impl Captured {
        fn start() -> (Captured, CaptureGuard) {
            static INSTALL: std::sync::Once = std::sync::Once::new();
            INSTALL.call_once(|| {
                let subscriber = tracing_subscriber::fmt()
                    .with_writer(ThreadSink)
                    .with_ansi(false)
                    .with_max_level(tracing::Level::WARN)
                    .finish();
                tracing::subscriber::set_global_default(subscriber)
                    .expect("no other global subscriber in the unit tests");
            });
            let captured = Captured::default();
            SINK.with(|sink| *sink.borrow_mut() = Some(captured.clone()));
            (captured, CaptureGuard)
        }
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    #[tokio::test]
    async fn out_of_range_release_delays_are_clamped_with_a_warning() {
        let (fake, t) = transport(SqsOptions::default());
        for _ in 0..2 {
            t.publish("orders", ORDER.as_bytes()).await.unwrap();
        }
        let (logs, _guard) = Captured::start();
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        release(&t, &d, Duration::from_secs(30)).await;
        assert_eq!(logs.text(), "", "an in-range delay does not warn");
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        release(&t, &d, Duration::from_secs(50_000)).await;
        assert!(
            logs.text().contains("clamped to 43200 s"),
            "{}",
            logs.text()
        );
        let sent: Vec<i32> = fake.visibility_changes().iter().map(|c| c.2).collect();
        assert_eq!(sent, [30, 43_200]);
    }

    /// The runtime logs a gated delivery once (capped and escaped); the transport only reports
    /// the declared version ([`a_long_declared_version_is_reported_whole`]) and says nothing.
    #[tokio::test]
    async fn the_transport_does_not_log_the_gate_itself() {
        let (fake, t) = transport(SqsOptions::default());
        let mut attrs = Attributes::new();
        attrs.insert("bq-schema-version".into(), AttributeValue::string("2"));
        fake.seed("orders", ORDER, attrs, Some("1"));
        let (logs, _guard) = Captured::start();
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(d.facts().declared_version, Declared::Text("2".into()));
        assert_eq!(logs.text(), "");
    }

    #[tokio::test]
    async fn releases_that_cannot_count_or_cannot_happen_warn() {
        let (fake, t) = transport(SqsOptions::default());
        fake.seed("orders", ORDER, Attributes::new(), None);
        let (logs, _guard) = Captured::start();
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        release(&t, &d, Duration::ZERO).await;
        assert!(
            logs.text()
                .contains("did not report ApproximateReceiveCount")
        );
        release(&t, &Delivery::new("orders", ORDER), Duration::ZERO).await;
        assert!(logs.text().contains("has no receipt handle"));
    }

    fn failing_app(
        t: SqsTransport,
        configure: impl FnOnce(babelqueue_core::AppBuilder) -> babelqueue_core::AppBuilder,
    ) -> babelqueue_core::App {
        configure(
            babelqueue_core::App::builder(t)
                .queue("orders")
                .poll_timeout(Duration::ZERO)
                .handle(
                    "urn:babel:orders:created",
                    |_ctx: babelqueue_core::Context| async {
                        Err::<(), _>(babelqueue_core::HandlerError::new("always"))
                    },
                ),
        )
        .build()
        .unwrap()
    }

    async fn settle_once(app: &babelqueue_core::App) -> babelqueue_core::Outcome {
        let d = app
            .transport()
            .pop("orders", Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        app.dispatch(d).await
    }

    #[tokio::test]
    async fn the_dead_letter_queue_is_overridable() {
        use babelqueue_core::Outcome;
        for (configure, want) in [
            (None, "http://fake/orders-dlq"),
            (Some(("suffix", "_dead")), "http://fake/orders_dead"),
            (Some(("queue", "all-failures")), "http://fake/all-failures"),
        ] {
            let (fake, t) = transport(SqsOptions::default());
            let app = failing_app(t, |b| {
                let b = b.max_attempts(1).dead_letter(true);
                match configure {
                    Some(("suffix", s)) => b.dead_letter_suffix(s),
                    Some((_, q)) => b.dead_letter_queue(q),
                    None => b,
                }
            });
            fake.seed("orders", ORDER, Attributes::new(), Some("1"));
            assert_eq!(settle_once(&app).await, Outcome::DeadLettered);
            assert_eq!(fake.sent()[0].queue_url, want);
            assert_eq!(fake.deleted().len(), 1);
        }
    }

    #[tokio::test]
    async fn poison_without_dead_lettering_is_left_to_sqs() {
        use babelqueue_core::Outcome;
        let (fake, t) = transport(SqsOptions::default());
        let app = failing_app(t, |b| b.dead_letter(false));
        fake.seed("orders", "not an envelope", Attributes::new(), Some("7"));
        assert_eq!(settle_once(&app).await, Outcome::Native);
        assert!(fake.sent().is_empty() && fake.deleted().is_empty());
        assert!(fake.visibility_changes().is_empty());
        assert_eq!(
            fake.in_flight(),
            1,
            "left in flight until its visibility timeout"
        );
        // With dead-lettering on, the record counts the receives SQS reported (7 - 1).
        let (fake, t) = transport(SqsOptions::default());
        let app = failing_app(t, |b| b.dead_letter(true));
        fake.seed("orders", "not an envelope", Attributes::new(), Some("7"));
        assert_eq!(settle_once(&app).await, Outcome::DeadLettered);
        assert!(
            fake.sent()[0].body.contains(r#""attempts":6"#),
            "{}",
            fake.sent()[0].body
        );
    }

    #[test]
    fn the_namer_and_the_capabilities() {
        let (_, t) = transport(SqsOptions::default());
        assert_eq!(t.dead_letter_queue_name("orders", None), "orders-dlq");
        assert_eq!(t.dead_letter_queue_name("o.fifo", None), "o-dlq.fifo");
        let c = t.capabilities();
        assert!(matches!(c.redelivery_mode(), Redelivery::Native(_)));
        assert!(c.native_settler().is_some() && c.dead_letter_namer().is_some());
        assert_eq!(c.send_parts(), Sends::body_only().headers().delay());
        assert!(c.rewinder().is_none() && c.dead_letter_writer().is_none());
        assert!(c.abandoner().is_none() && c.batch_popper().is_none() && c.browser().is_none());
    }
}
