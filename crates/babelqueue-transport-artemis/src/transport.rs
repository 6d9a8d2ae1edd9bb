//! [`ArtemisTransport`]: the runtime's [`Transport`] over a [`Client`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{
    BatchAcker, BatchPublisher, Capabilities, Delivery, Outgoing, Rewinder, Sends, Transport,
    TransportError,
};

use crate::amqp::AmqpClient;
use crate::client::{Client, DeliveryToken, Disposition};
use crate::config::ArtemisOptions;
use crate::error::ArtemisError;
use crate::inspect::Wire;
use crate::projection;

const LOG: &str = "babelqueue::artemis";

/// A delivery's handle: what settles it, and the sections of its message the
/// [`Inspector`](babelqueue_core::Inspector) reads.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) token: DeliveryToken,
    pub(crate) wire: Wire,
}

/// The Apache ActiveMQ Artemis transport (AMQP 1.0).
///
/// * `publish` sends the envelope as an amqp-value string with the JMS-readable projection
///   ([`projection::message`]) and waits for the broker's `accepted`;
/// * `pop` receives one delivery and hands its body over unchanged, with the
///   `bq_schema_version` property as carried (the runtime's gate reads it) and the delivery
///   count (the runtime raises `attempts` to it) ([`projection::read`]);
/// * `ack` settles with `accepted`;
/// * [`send`](Transport::send) declares headers and delays ([`Sends`]): delays (a delayed
///   publish, the retry back-off, the `release` strategy's delay) use Artemis scheduled
///   delivery (`x-opt-delivery-delay`); a retry or release is the runtime's copy (sent
///   through it), then the original is accepted;
/// * [`Rewinder`]: a delivery the runtime leaves unsettled at shutdown is settled with
///   `released`, so Artemis delivers it again at once instead of holding it until the link
///   closes; one whose settle write failed (a broken dead-letter queue) is moved, unchanged, to
///   the end of its queue, so it does not block the messages behind it.
#[derive(Debug, Clone)]
pub struct ArtemisTransport {
    client: Arc<dyn Client>,
    amqp: Option<Arc<AmqpClient>>,
    receive_timeout: Duration,
}

impl ArtemisTransport {
    /// Parses `url` (see [`ArtemisOptions::parse`]) and connects, so a wrong address or wrong
    /// credentials are reported at once. After that the client reconnects on its own.
    pub async fn connect(url: &str) -> Result<ArtemisTransport, ArtemisError> {
        ArtemisTransport::connect_parsed(ArtemisOptions::parse(url)?).await
    }

    /// [`connect`](ArtemisTransport::connect) starting from `options`: the URL's scheme, host
    /// and port, its credentials (when it has any) and its query options override them.
    pub async fn connect_with(
        url: &str,
        options: ArtemisOptions,
    ) -> Result<ArtemisTransport, ArtemisError> {
        ArtemisTransport::connect_parsed(ArtemisOptions::parse_onto(url, options)?).await
    }

    /// Connects with `config` as it is (the broker it names).
    async fn connect_parsed(config: ArtemisOptions) -> Result<ArtemisTransport, ArtemisError> {
        let receive_timeout = config.receive_timeout;
        let client = Arc::new(AmqpClient::new(config)?);
        client.connect().await?;
        Ok(ArtemisTransport {
            client: client.clone(),
            amqp: Some(client),
            receive_timeout,
        })
    }

    /// A transport over any [`Client`] (a fake in tests); `receive_timeout` is used when the
    /// runtime passes a zero pop timeout.
    pub fn with_client(client: Arc<dyn Client>, receive_timeout: Duration) -> ArtemisTransport {
        ArtemisTransport {
            client,
            amqp: None,
            receive_timeout,
        }
    }

    /// The client underneath.
    pub fn client(&self) -> &Arc<dyn Client> {
        &self.client
    }

    /// The AMQP client, for a transport made by [`connect`](ArtemisTransport::connect) (its
    /// connection count and credit windows are there).
    pub fn amqp(&self) -> Option<&AmqpClient> {
        self.amqp.as_deref()
    }

    fn delivery(queue: &str, received: crate::client::Received) -> Delivery {
        let read = projection::read(&received.message);
        let count = read.count();
        Delivery::new(queue, read.body)
            .with_headers(read.headers)
            .with_declared_version(read.declared)
            .with_count(count)
            .with_handle(Held {
                token: received.token,
                wire: Wire::of(received.message),
            })
    }

    fn token(delivery: &Delivery) -> Result<&DeliveryToken, TransportError> {
        delivery.handle::<Held>().map(|held| &held.token).ok_or_else(|| {
            TransportError::other(
                "artemis: this delivery was not received by an Artemis transport (no settle token)",
            )
        })
    }
}

#[async_trait]
impl Transport for ArtemisTransport {
    fn name(&self) -> &'static str {
        "artemis"
    }

    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        self.client
            .send(queue, projection::message(body))
            .await
            .map_err(TransportError::from)
    }

    /// The projection [`publish`](Transport::publish) gives, with out-of-band headers as
    /// string application properties ([`projection::with_headers`]; a `bq_` name is left out,
    /// so the projection wins: an extension, the references carry none) and a delay as
    /// Artemis scheduled delivery (`x-opt-delivery-delay`), together or apart.
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        let mut message = projection::message(outgoing.body);
        if let Some(headers) = outgoing.headers {
            message = projection::with_headers(message, headers);
        }
        if let Some(delay) = outgoing.delay {
            message = projection::delayed(message, delay).ok_or_else(|| {
                TransportError::unsupported(format!(
                    "artemis: a delivery delay of {delay:?} does not fit in the x-opt-delivery-delay annotation"
                ))
            })?;
        }
        self.client
            .send(outgoing.queue, message)
            .await
            .map_err(TransportError::from)
    }

    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        let wait = if timeout.is_zero() {
            self.receive_timeout
        } else {
            timeout
        };
        let Some(received) = self.client.receive(queue, wait).await? else {
            return Ok(None);
        };
        Ok(Some(ArtemisTransport::delivery(queue, received)))
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let token = ArtemisTransport::token(delivery)?;
        self.client
            .settle(token, Disposition::Accepted)
            .await
            .map_err(TransportError::from)
    }

    /// The first delivery waits up to `timeout`; then what the receiver link already holds
    /// (delivered on its credit), up to `max`, without waiting.
    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        let Some(first) = self.pop(queue, timeout).await? else {
            return Ok(Vec::new());
        };
        let mut received = vec![first];
        while received.len() < max {
            match self.client.receive(queue, Duration::ZERO).await {
                Ok(Some(more)) => received.push(ArtemisTransport::delivery(queue, more)),
                // Nothing more at hand, or a failure the next receive meets again.
                Ok(None) | Err(_) => break,
            }
        }
        Ok(received)
    }

    async fn close(&self) -> Result<(), TransportError> {
        self.client.close().await.map_err(TransportError::from)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
            .sends(Sends::body_only().headers().delay())
            .rewind(self)
            .batch_ack(self)
            .batch_publish(self)
            .browse(self)
            .inspect(self)
            .stats(self)
    }
}

/// A batch in order through [`Client::send_batch`] (the AMQP client keeps a window of
/// transfers in flight on the address's link), each body with the projection
/// [`publish`](Transport::publish) gives it.
#[async_trait]
impl BatchPublisher for ArtemisTransport {
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        let messages = bodies
            .iter()
            .map(|body| projection::message(body))
            .collect();
        self.client
            .send_batch(queue, messages)
            .await
            .map_err(TransportError::from)
    }
}

/// Accepts a batch through [`Client::settle_many`]: one disposition frame per run of
/// consecutive delivery ids on a link where the client can.
#[async_trait]
impl BatchAcker for ArtemisTransport {
    async fn ack_batch(&self, deliveries: &[Delivery]) -> Result<(), TransportError> {
        let mut first_error = None;
        let mut tokens = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            match ArtemisTransport::token(delivery) {
                Ok(token) => tokens.push(token.clone()),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let sent = self
            .client
            .settle_many(&tokens, Disposition::Accepted)
            .await
            .map_err(TransportError::from);
        match first_error {
            Some(e) => Err(e),
            None => sent,
        }
    }
}

#[async_trait]
impl Rewinder for ArtemisTransport {
    async fn rewind(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let token = ArtemisTransport::token(delivery)?;
        self.client
            .settle(token, Disposition::Released)
            .await
            .map_err(TransportError::from)
    }

    /// A `released` message goes back to the HEAD of its Artemis queue, so one whose
    /// dead-letter write keeps failing would block everything behind it at concurrency 1.
    /// Instead an unchanged copy is sent to the end of the queue (confirmed), then the original
    /// is accepted; when the copy cannot be sent, the original is released as before. A failed
    /// accept after a stored copy leaves a duplicate, never a loss.
    async fn rewind_behind(
        &self,
        delivery: &Delivery,
        _counted: &[u8],
    ) -> Result<(), TransportError> {
        let message =
            projection::with_headers(projection::message(delivery.body()), delivery.headers());
        match self.client.send(delivery.queue(), message).await {
            Ok(()) => {
                if let Err(e) = self.ack(delivery).await {
                    tracing::warn!(target: LOG, queue = delivery.queue(), error = %e,
                        "A copy of an unsettled message went to the end of its queue, but accepting the original failed; it will be delivered twice");
                }
                Ok(())
            }
            Err(e) => {
                tracing::warn!(target: LOG, queue = delivery.queue(), error = %e,
                    "Could not move an unsettled message to the end of its queue; releasing it in place");
                self.rewind(delivery).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use babelqueue_core::{App, Consume, Context, Count, Declared, HandlerError, Redelivery};
    use babelqueue_testkit::reading::{Class, classify};
    use fe2o3_amqp::types::primitives::SimpleValue;

    use super::*;
    use crate::fake::{FakeClient, incoming};

    const URN: &str = "urn:babel:orders:created";

    fn order(attempts: i64) -> Vec<u8> {
        format!(r#"{{"job":"{URN}","trace_id":"t","data":{{"order_id":1}},"meta":{{"schema_version":1}},"attempts":{attempts}}}"#)
            .into_bytes()
    }

    fn transport(fake: &Arc<FakeClient>) -> ArtemisTransport {
        ArtemisTransport::with_client(fake.clone(), Duration::from_millis(5))
    }

    #[tokio::test]
    async fn a_message_whose_settle_failed_moves_behind_the_others() {
        let fake = FakeClient::new();
        let t = transport(&fake);
        t.publish("orders", &order(0)).await.unwrap();
        t.publish("orders", &order(7)).await.unwrap();
        let first = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let rewinder = t.capabilities().rewinder().unwrap();
        rewinder.rewind_behind(&first, first.body()).await.unwrap();
        let next = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(
            next.body(),
            order(7),
            "the message behind it comes first now"
        );
        let again = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(again.body(), first.body(), "unchanged, at the end");
        let settled: Vec<Disposition> = fake.settlements().into_iter().map(|(_, d)| d).collect();
        assert_eq!(
            settled,
            [Disposition::Accepted],
            "the original was accepted once copied"
        );
    }

    #[tokio::test]
    async fn ack_accepts_and_rewind_releases() {
        let fake = FakeClient::new();
        let t = transport(&fake);
        t.publish("orders", &order(0)).await.unwrap();
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        t.capabilities()
            .rewinder()
            .unwrap()
            .rewind(&d)
            .await
            .unwrap();
        assert_eq!(fake.len("orders"), 1, "released back to the queue");
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        t.ack(&d).await.unwrap();
        let settled: Vec<Disposition> = fake.settlements().into_iter().map(|(_, d)| d).collect();
        assert_eq!(settled, [Disposition::Released, Disposition::Accepted]);
        assert!(t.pop("orders", Duration::ZERO).await.unwrap().is_none());
        let foreign = Delivery::new("orders", order(0));
        assert!(t.ack(&foreign).await.is_err(), "a delivery without a token");
    }

    #[tokio::test]
    async fn gated_deliveries_keep_their_raw_body() {
        let fake = FakeClient::new();
        let raw = b"{\"job\":\"urn:x\", \"attempts\": 0}".to_vec();
        fake.push(
            "orders",
            incoming(
                &raw,
                &[("bq_schema_version", SimpleValue::String("2".into()))],
                4,
            ),
        );
        let d = transport(&fake)
            .pop("orders", Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.body(), raw, "never reconciled, never decoded");
        assert_eq!(d.facts().declared_version, Declared::Text("2".into()));
        assert_eq!(d.facts().count, Some(Count::Redelivered(4)));
        assert_eq!(
            classify(d.body(), d.facts(), d.queue()),
            Class::Gated {
                declared: "2".into()
            }
        );
    }

    /// Retries publish a counted copy and accept the original; the copy starts at
    /// delivery-count 0 and the body keeps the count.
    #[tokio::test]
    async fn retries_go_through_a_copy() {
        let fake = FakeClient::new();
        let t = transport(&fake);
        fake.push("orders", incoming(&order(0), &[], 1));
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let app = App::builder(t)
            .queue("orders")
            .max_attempts(3)
            .dead_letter(true)
            .handle(URN, move |ctx: Context| {
                let s = s.clone();
                async move {
                    s.lock().unwrap().push(ctx.attempts());
                    Err::<(), _>(HandlerError::new("boom"))
                }
            })
            .build()
            .unwrap();
        app.consume(Consume::new().max_messages(2).handle_signals(false))
            .await
            .unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            [1, 2],
            "delivery-count 1 counted, then the copy"
        );
        let sent: Vec<String> = fake.sent().into_iter().map(|(a, _)| a).collect();
        assert_eq!(sent, ["orders", "orders.dlq"]);
        assert_eq!(fake.settlements().len(), 2);
        assert!(fake.is_empty("orders"));
    }

    #[test]
    fn redelivery_is_the_runtimes_copy_with_scheduled_delivery() {
        let fake = FakeClient::new();
        let t = transport(&fake);
        let c = t.capabilities();
        assert!(matches!(c.redelivery_mode(), Redelivery::Copy));
        assert_eq!(c.send_parts(), Sends::body_only().headers().delay());
        assert!(c.rewinder().is_some());
        assert!(c.browser().is_some());
        assert!(c.native_settler().is_none() && c.dead_letter_writer().is_none());
    }

    /// A retry with a back-off is the runtime's copy, scheduled by Artemis
    /// (`x-opt-delivery-delay`), then the original is accepted.
    #[tokio::test]
    async fn a_retry_back_off_is_scheduled_delivery() {
        use fe2o3_amqp::types::messaging::annotations::OwnedKey;
        use fe2o3_amqp::types::primitives::{Symbol, Value};

        let fake = FakeClient::new();
        let t = transport(&fake);
        fake.push("orders", incoming(&order(0), &[], 0));
        let app = App::builder(t)
            .queue("orders")
            .max_attempts(3)
            .retry_backoff(Duration::from_millis(1500))
            .handle(URN, |_ctx: Context| async {
                Err::<(), _>(HandlerError::new("boom"))
            })
            .build()
            .unwrap();
        app.consume(Consume::new().max_messages(1).handle_signals(false))
            .await
            .unwrap();
        let sent = fake.sent();
        let [(address, copy)] = sent.as_slice() else {
            panic!("one copy, saw {}", sent.len())
        };
        assert_eq!(address, "orders");
        let delay = copy.message_annotations.as_ref().and_then(|a| {
            a.get(&OwnedKey::Symbol(Symbol::from(
                projection::DELIVERY_DELAY_ANNOTATION,
            )))
        });
        assert!(
            matches!(delay, Some(Value::Long(ms)) if *ms >= 1500),
            "{delay:?}"
        );
        let body = projection::body_bytes(&copy.body);
        assert!(
            std::str::from_utf8(&body)
                .unwrap()
                .contains(r#""attempts":1"#)
        );
        let settled: Vec<Disposition> = fake.settlements().into_iter().map(|(_, d)| d).collect();
        assert_eq!(settled, [Disposition::Accepted], "the original is accepted");
    }

    #[tokio::test]
    async fn close_reaches_the_client() {
        let fake = FakeClient::new();
        let t = transport(&fake);
        assert!(t.pop("empty", Duration::ZERO).await.unwrap().is_none());
        t.close().await.unwrap();
        assert!(fake.is_closed());
        assert!(t.pop("empty", Duration::ZERO).await.is_err());
    }
}
