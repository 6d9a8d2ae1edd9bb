//! The seam between the transport and the AMQP 1.0 client: [`Client`].
//!
//! [`ArtemisTransport`](crate::ArtemisTransport) only ever talks to a broker through this trait,
//! so everything above it (the projection, the gate, reconciliation, settling) runs the same
//! against the real broker ([`AmqpClient`](crate::AmqpClient)) and against a fake
//! (`fake::FakeClient`, with the `fake` feature) in tests and conformance runs.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::ArtemisError;
use crate::projection::AmqpMessage;

/// How a received delivery is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Disposition {
    /// The `accepted` outcome: the message is done and leaves the queue.
    Accepted,
    /// The `released` outcome: the broker takes the message back and delivers it again (to
    /// this consumer or another), without counting it as a failed delivery.
    Released,
    /// The `modified` outcome with `delivery-failed`: the broker takes the message back and
    /// counts a failed delivery (its `delivery-count` rises), as a JMS consumer's rollback does.
    /// The transport itself never uses it; it is there for tools and tests. (The AMQP client
    /// needs the receiver link for it, so it waits for a receive in progress on that address.)
    Failed,
}

/// Identifies one received delivery, for [`Client::settle`]. Plain data: the client keeps the
/// AMQP-level settle state on its side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeliveryToken {
    address: String,
    connection: u64,
    id: u64,
}

impl DeliveryToken {
    /// A token for delivery `id` received from `address` on connection number `connection`
    /// (the client's own numbering; a reconnect starts a new number).
    pub fn new(address: impl Into<String>, connection: u64, id: u64) -> DeliveryToken {
        DeliveryToken {
            address: address.into(),
            connection,
            id,
        }
    }

    /// The address (queue) the delivery came from.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The connection number it was received on.
    pub fn connection(&self) -> u64 {
        self.connection
    }

    /// The client's id for the delivery.
    pub fn id(&self) -> u64 {
        self.id
    }
}

/// A received delivery: the AMQP message as the broker sent it, held unsettled until
/// [`Client::settle`].
#[derive(Debug, Clone)]
pub struct Received {
    /// The message (header, annotations, properties, application properties, body).
    pub message: AmqpMessage,
    /// What settles it.
    pub token: DeliveryToken,
}

/// One reply of the broker's management address to an attribute read
/// ([`Client::read_attributes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagementReply {
    /// The reply's `_AMQ_OperationSucceeded` property (`false` when it is missing).
    pub succeeded: bool,
    /// The reply's body as text: a JSON array holding the value, or the broker's error.
    pub body: String,
}

/// An AMQP 1.0 client, as the transport needs it. Object safe.
#[async_trait]
pub trait Client: Send + Sync + fmt::Debug {
    /// Sends `message` to `address` and returns once the broker accepted it. Any other outcome
    /// is an error ([`ArtemisError::NotAccepted`]).
    async fn send(&self, address: &str, message: AmqpMessage) -> Result<(), ArtemisError>;

    /// Sends every message of `messages` to `address`, in order, and returns once the broker
    /// accepted them all; else the first error (messages before it may have been accepted,
    /// and a sender that tries the batch again may duplicate them: at-least-once). The default
    /// sends them one at a time; a client that can keep transfers in flight together
    /// overrides it.
    async fn send_batch(
        &self,
        address: &str,
        messages: Vec<AmqpMessage>,
    ) -> Result<(), ArtemisError> {
        for message in messages {
            self.send(address, message).await?;
        }
        Ok(())
    }

    /// Waits up to `timeout` for the next delivery from `address`; `None` when none came.
    async fn receive(
        &self,
        address: &str,
        timeout: Duration,
    ) -> Result<Option<Received>, ArtemisError>;

    /// Up to `max` messages at the head of `address`, in queue order, read without taking
    /// them: through a browsing link (the AMQP `copy` distribution mode, deliveries settled by
    /// the broker), so nothing is settled and no delivery count rises. See [`crate::browse`].
    async fn browse(&self, address: &str, max: usize) -> Result<Vec<AmqpMessage>, ArtemisError>;

    /// Settles a delivery [`receive`](Client::receive) returned.
    async fn settle(
        &self,
        token: &DeliveryToken,
        disposition: Disposition,
    ) -> Result<(), ArtemisError>;

    /// Settles every delivery of `tokens` the same way, attempting each even when one fails;
    /// the first error. A client that can put several into one disposition frame (a range of
    /// delivery ids) does; the default settles them one by one.
    async fn settle_many(
        &self,
        tokens: &[DeliveryToken],
        disposition: Disposition,
    ) -> Result<(), ArtemisError> {
        let mut first_error = None;
        for token in tokens {
            if let Err(e) = self.settle(token, disposition).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Reads `attributes` of the management resource `resource` (`queue.<name>`) through the
    /// broker's management address, one reply per attribute, in order. The default says the
    /// client does not support it ([`ArtemisError::Unsupported`]).
    async fn read_attributes(
        &self,
        resource: &str,
        attributes: &[&str],
    ) -> Result<Vec<ManagementReply>, ArtemisError> {
        let _ = (resource, attributes);
        Err(ArtemisError::Unsupported("management requests"))
    }

    /// Closes the connection; unsettled deliveries go back to the broker.
    async fn close(&self) -> Result<(), ArtemisError>;
}
