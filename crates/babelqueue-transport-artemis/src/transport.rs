//! [`ArtemisTransport`]: the runtime's [`Transport`] over a [`Client`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::gate::DECLARED_VERSION_MAX_CHARS;
use babelqueue_core::{Delivery, Rewinder, Route, Transport, TransportError};

use crate::amqp::AmqpClient;
use crate::client::{Client, DeliveryToken, Disposition};
use crate::config::ArtemisConfig;
use crate::error::ArtemisError;
use crate::projection::{self, SCHEMA_VERSION_PROPERTY};

const LOG: &str = "babelqueue::artemis";

/// The Apache ActiveMQ Artemis transport (AMQP 1.0).
///
/// * `publish` sends the envelope as an amqp-value string with the JMS-readable projection
///   ([`projection::message`]) and waits for the broker's `accepted`;
/// * `pop` receives one delivery, applies the `bq_schema_version` gate, and reconciles
///   `attempts` with the delivery count ([`projection::read`]);
/// * `ack` settles with `accepted`;
/// * [`Rewinder`]: a delivery the runtime leaves unsettled (a failed dead-letter or retry
///   write, a shutdown) is settled with `released`, so Artemis delivers it again at once
///   instead of holding it until the link closes.
#[derive(Debug, Clone)]
pub struct ArtemisTransport {
    client: Arc<dyn Client>,
    amqp: Option<Arc<AmqpClient>>,
    receive_timeout: Duration,
}

impl ArtemisTransport {
    /// Parses `url` (see [`ArtemisConfig::parse`]) and connects, so a wrong address or wrong
    /// credentials are reported at once. After that the client reconnects on its own.
    pub async fn connect(url: &str) -> Result<ArtemisTransport, ArtemisError> {
        ArtemisTransport::connect_with(ArtemisConfig::parse(url)?).await
    }

    /// Connects with an explicit configuration.
    pub async fn connect_with(config: ArtemisConfig) -> Result<ArtemisTransport, ArtemisError> {
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

    fn token(delivery: &Delivery) -> Result<&DeliveryToken, TransportError> {
        delivery.handle::<DeliveryToken>().ok_or_else(|| {
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
        let read = projection::read(&received.message);
        let delivery = Delivery::new(queue, read.body).with_handle(received.token);
        Ok(Some(match read.gated {
            Some(declared) => {
                let shown: String = if declared.chars().count() > DECLARED_VERSION_MAX_CHARS {
                    let cut: String = declared.chars().take(DECLARED_VERSION_MAX_CHARS).collect();
                    format!("{cut}...")
                } else {
                    declared.clone()
                };
                tracing::warn!(target: LOG, queue, declared = %shown,
                    "Artemis message on queue {queue:?} carries an unsupported {SCHEMA_VERSION_PROPERTY} {shown:?} \
                     (supported: 1); it is not decoded");
                delivery.with_route(Route::Gated {
                    declared,
                    urn: None,
                })
            }
            None => delivery,
        }))
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let token = ArtemisTransport::token(delivery)?;
        self.client
            .settle(token, Disposition::Accepted)
            .await
            .map_err(TransportError::from)
    }

    async fn close(&self) -> Result<(), TransportError> {
        self.client.close().await.map_err(TransportError::from)
    }

    fn rewinder(&self) -> Option<&dyn Rewinder> {
        Some(self)
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
}
