//! The client seam: the few broker operations the transport needs ([`PulsarClient`]), and
//! [`NativeClient`], their implementation on the `pulsar` crate.
//!
//! Tests and the conformance runner put a fake behind the same trait, so the real
//! [`PulsarTransport`](crate::PulsarTransport) runs without a broker.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures_util::{FutureExt, StreamExt};
use pulsar::consumer::{ConsumerOptions, InitialPosition};
use pulsar::proto::MessageIdData;
use pulsar::{
    ConnectionRetryOptions, Consumer, OperationRetryOptions, Producer, Pulsar, SubType,
    TokioExecutor,
};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::time::Instant;

use crate::auth::PulsarAuth;
use crate::error::PulsarError;
use crate::inspect::Metadata;
use crate::projection::Properties;
use crate::redelivery::{Counts, Shared};
use crate::window::Handed;

mod native;
pub use native::NativeClient;

/// Identifies one received message for ack and nack: its topic and its message id
/// (`ledger:entry:partition:batch`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MessageRef {
    /// The topic the message was received from.
    pub topic: String,
    /// The message id, as text.
    pub id: String,
}

/// One message as the client received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The payload, byte for byte.
    pub payload: Vec<u8>,
    /// The message properties.
    pub properties: Properties,
    /// How many times the message was delivered before (0-based). [`NativeClient`] counts the
    /// deliveries it handed out itself, for the whole client (see the crate docs for what that
    /// covers).
    pub redelivery_count: u32,
    /// The handle for ack and nack.
    pub id: MessageRef,
    /// The message metadata beside the properties (publish time, producer, sequence id …).
    pub metadata: Metadata,
}

/// Messages a batch send hands the producer before it awaits their receipts (the client's
/// outbound queue per connection holds 100 by default).
pub const SEND_WINDOW: usize = 64;

/// How many times one batch send waits for a full outbound queue to drain before it gives up
/// with the client's `SlowDown` error.
const SLOW_DOWN_LIMIT: usize = 1000;

/// The broker operations the transport uses. Topics are full topic names (prefix + queue).
#[async_trait]
pub trait PulsarClient: Send + Sync + fmt::Debug {
    /// Sends `payload` with `properties` to `topic` and waits for the broker's receipt.
    async fn send(
        &self,
        topic: &str,
        payload: &[u8],
        properties: Properties,
    ) -> Result<(), PulsarError>;

    /// Sends every `(payload, properties)` of `messages` to `topic`, in order, and waits for
    /// their receipts: `Ok` once the broker took them all, else the first error (a message
    /// sent before it may have been taken). The default sends them one at a time; a client
    /// that can keep receipts in flight together overrides it.
    async fn send_batch(
        &self,
        topic: &str,
        messages: Vec<(&[u8], Properties)>,
    ) -> Result<(), PulsarError> {
        for (payload, properties) in messages {
            self.send(topic, payload, properties).await?;
        }
        Ok(())
    }

    /// Sends like [`send`](PulsarClient::send), and asks the broker to hold the message until
    /// `deliver_at` (Pulsar delayed delivery: the message's `deliver_at_time`, honoured for
    /// Shared and Key_Shared subscriptions when the broker has `delayedDeliveryEnabled`).
    async fn send_at(
        &self,
        topic: &str,
        payload: &[u8],
        properties: Properties,
        deliver_at: SystemTime,
    ) -> Result<(), PulsarError>;

    /// Receives the next message of `topic` on the transport's subscription, waiting up to
    /// `timeout`; `None` when none came.
    async fn receive(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<Option<Received>, PulsarError>;

    /// Receives up to `max` messages of `topic`: the first waits up to `timeout`, then what
    /// the consumer already holds (its receiver queue), without waiting. Empty when none came.
    /// The default receives one.
    async fn receive_many(
        &self,
        topic: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Received>, PulsarError> {
        let _ = max;
        Ok(self.receive(topic, timeout).await?.into_iter().collect())
    }

    /// Acknowledges one message (individual ack).
    async fn ack(&self, message: &MessageRef) -> Result<(), PulsarError>;

    /// Acknowledges every message of `messages` (individual acks, never cumulative: the
    /// subscription is Shared), attempting each even when one fails; the first error. The
    /// default acknowledges them one by one.
    async fn ack_many(&self, messages: &[MessageRef]) -> Result<(), PulsarError> {
        let mut first_error = None;
        for message in messages {
            if let Err(e) = self.ack(message).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Negatively acknowledges one message: the broker redelivers it.
    async fn nack(&self, message: &MessageRef) -> Result<(), PulsarError>;

    /// Whether [`browse`](PulsarClient::browse) can read a subscription's backlog (the
    /// native client: when it has an admin URL). The default is `false`.
    fn can_browse(&self) -> bool {
        false
    }

    /// Up to `max` payloads (all when 0, bounded by [`BROWSE_LIMIT`](crate::browse::BROWSE_LIMIT))
    /// of the backlog of the transport's subscription on `topic`, oldest first, read without
    /// consuming anything. The default refuses: the client cannot browse.
    async fn browse(&self, topic: &str, max: usize) -> Result<Vec<Vec<u8>>, PulsarError> {
        let _ = max;
        Err(PulsarError::Config(format!(
            "browsing {topic} needs the admin URL (PulsarOptions::admin_url or {ADMIN_URL_ENV})"
        )))
    }

    /// What the broker counts for the transport's subscription on `topic` (`Stats`): `None`
    /// when the subscription does not exist yet. The default refuses, like
    /// [`browse`](PulsarClient::browse): the counts come from the admin API.
    async fn subscription_stats(
        &self,
        topic: &str,
    ) -> Result<Option<crate::stats::SubscriptionStats>, PulsarError> {
        Err(PulsarError::Config(format!(
            "the stats of {topic} need the admin URL (PulsarOptions::admin_url or {ADMIN_URL_ENV})"
        )))
    }

    /// Closes producers, consumers and connections.
    async fn close(&self) -> Result<(), PulsarError> {
        Ok(())
    }
}

/// The options of a Pulsar transport (and of its [`NativeClient`]), for
/// [`PulsarTransport::connect_with`](crate::PulsarTransport::connect_with) or the
/// [`Builder`](crate::Builder).
#[derive(Clone)]
pub struct PulsarOptions {
    /// The subscription name (default `babelqueue`).
    pub subscription: String,
    /// Where a subscription that does not exist yet starts (default: the earliest retained
    /// message, so messages published before the first consumer are not skipped).
    pub initial_position_earliest: bool,
    /// How long to try to reach the broker before reporting a connection error.
    pub connect_timeout: Duration,
    /// How long one broker operation may take.
    pub operation_timeout: Duration,
    /// A PEM file of extra CA certificates to trust for `pulsar+ssl://` (beside the webpki
    /// roots), for a broker whose certificate a private CA signed (the URL query key
    /// `ca_file`; default: the file `BQ_PULSAR_TLS_TRUST_CERTS` names).
    pub ca_file: Option<std::path::PathBuf>,
    /// How the client authenticates (the URL query keys `token` and `oauth2_*`; default: the
    /// token `BQ_PULSAR_TOKEN` holds, else none).
    pub auth: Option<PulsarAuth>,
    /// The broker's admin REST API (its web service, e.g. `http://127.0.0.1:8080`), used only
    /// to browse a subscription's backlog without consuming (`babelqueue dlq list`); the
    /// token and `ca_file` apply to it too. Default: the URL `BQ_PULSAR_ADMIN_URL` holds, else
    /// none, and then the transport offers no browsing.
    pub admin_url: Option<String>,
}

impl fmt::Debug for PulsarOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `PulsarAuth`'s own Debug masks the token.
        f.debug_struct("PulsarOptions")
            .field("subscription", &self.subscription)
            .field("initial_position_earliest", &self.initial_position_earliest)
            .field("connect_timeout", &self.connect_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .field("ca_file", &self.ca_file)
            .field("auth", &self.auth)
            .field(
                "admin_url",
                &self
                    .admin_url
                    .as_deref()
                    .map(babelqueue_core::redact::redact),
            )
            .finish()
    }
}

/// The old name of [`PulsarOptions`].
#[deprecated(note = "renamed to PulsarOptions")]
pub type ClientOptions = PulsarOptions;

impl Default for PulsarOptions {
    fn default() -> Self {
        PulsarOptions {
            subscription: "babelqueue".to_owned(),
            initial_position_earliest: true,
            connect_timeout: Duration::from_secs(5),
            operation_timeout: Duration::from_secs(30),
            ca_file: std::env::var_os(TLS_TRUST_CERTS_ENV)
                .filter(|v| !v.is_empty())
                .map(std::path::PathBuf::from),
            auth: crate::auth::auth_from_env(),
            admin_url: std::env::var(ADMIN_URL_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty()),
        }
    }
}

/// The environment variable holding the broker's admin URL ([`PulsarOptions::admin_url`]'s
/// default), so `connect(url)` and the CLI can browse.
pub const ADMIN_URL_ENV: &str = "BQ_PULSAR_ADMIN_URL";

/// The environment variable naming a PEM file of extra CA certificates to trust for
/// `pulsar+ssl://` ([`PulsarOptions::ca_file`]'s default), so `connect(url)` and
/// the CLI can reach a broker with a privately signed certificate.
pub const TLS_TRUST_CERTS_ENV: &str = "BQ_PULSAR_TLS_TRUST_CERTS";
