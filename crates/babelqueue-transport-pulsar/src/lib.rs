//! Apache Pulsar transport for BabelQueue.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::{App, Consume, Context, HandlerError};
//! use babelqueue_transport_pulsar::PulsarTransport;
//!
//! let transport = PulsarTransport::connect("pulsar://127.0.0.1:6650").await?;
//! let app = App::builder(transport)
//!     .queue("orders")
//!     .dead_letter(true)
//!     .handle("urn:babel:orders:created", |ctx: Context| async move {
//!         tracing::info!(data = %ctx.data(), "order received");
//!         Ok::<(), HandlerError>(())
//!     })
//!     .build()?;
//! app.publish("urn:babel:orders:created", &serde_json::json!({"order_id": 1042})).await?;
//! app.consume(Consume::new().max_messages(1)).await?;
//! # Ok(()) }
//! ```
//!
//! # What goes on the wire
//!
//! The payload is the envelope, byte for byte. Beside it, string message properties a peer can
//! route on without parsing the body ([`projection::properties`]): `bq-job` (the URN),
//! `bq-trace-id`, `bq-message-id` (`meta.id`), `bq-schema-version`, `bq-source-lang` and
//! `bq-attempts` (0 when the body has none). A body that is not a JSON object gets no
//! property. No event time is set; Pulsar stamps the publish time.
//!
//! # Consuming
//!
//! One Shared subscription named `babelqueue` per topic ([`NativeClient`]); receive, handle,
//! individual ack. The payload is handed to the runtime byte for byte, with what the broker
//! carried beside it ([`projection::facts`]); the runtime applies the contract's rules:
//!
//! 1. `bq-schema-version`, exactly as carried, is the input of the schema-version gate, which
//!    the runtime applies before anything is decoded (absent, ASCII-blank or exactly `"1"`
//!    decodes; anything else is never decoded, handled or retried);
//! 2. `bq-job`, as carried, is the out-of-band URN: the runtime routes a body with an identity
//!    of its own by it (trimmed of ASCII whitespace; a blank one is none); the body is never
//!    rewritten for routing;
//! 3. the count is [`Count::CarriedOrBody`](babelqueue_core::Count::CarriedOrBody): `attempts`
//!    = `bq-attempts` when it is plain digits within a signed 32-bit int, else the body's,
//!    raised to the 0-based redelivery count (no -1), written into the body only when the body
//!    already holds an integer `attempts` and the value changes; a poison body is counted by
//!    `max(valid bq-attempts or 0, redelivery count)`.
//!
//! # Settling
//!
//! * retry and release: the runtime re-publishes a copy (`attempts + 1`, `bq-attempts` with
//!   it), then acks the original. The copy carries the facts the delivery carried when it
//!   carried `bq-job` or `bq-schema-version` (`bq-job` stays pinned to the carried URN), and
//!   its delay ([`Sends`]: facts and delays, together). A non-zero back-off delay is honoured
//!   with Pulsar delayed delivery: the copy is sent with `deliver_at_time` = now + delay
//!   ([`PulsarClient::send_at`]), and the broker holds it on the Shared subscription until then
//!   (the reference SDK re-publishes at once). That needs `delayedDeliveryEnabled` on the
//!   broker (the default); with it off the copy comes back at once. The broker may release it
//!   up to `delayedDeliveryTickTimeMillis` early unless `isDelayedDeliveryDeliverAtTimeStrict`
//!   is set (the local test broker sets it);
//! * dead-letter: the record goes to `<queue>.dlq` (`topic_prefix` + `<queue>.dlq`), then ack;
//! * a gated delivery re-published anywhere keeps its original `bq-schema-version` and `bq-job`
//!   ([`projection::routed_properties`]), so a DLQ copy or a redrive meets the same gate;
//! * [`Rewinder`]: a failed dead-letter write or retry publish, and a graceful shutdown, nack
//!   the message (the runtime then pauses 1 s, because the crate's nack redelivers at once).
//!
//! Capabilities: sends with carried facts and delays ([`Sends`]), [`Rewinder`], an
//! [`Inspector`](babelqueue_core::Inspector) for tools that show the wire (the message id, the
//! redelivery count above 0 as redelivered, the publish time, producer name, sequence id,
//! event time and partition key, and the properties that are not facts), and
//! [`Browser`](babelqueue_core::Browser) when an admin URL is set (`babelqueue dlq list` then
//! peeks the subscription's backlog over the admin REST API instead of draining it: see
//! [`browse`]); redelivery is the runtime's copy-then-ack. No header publisher (traceparent is not carried), no native
//! settle.
//!
//! # URL and options
//!
//! `pulsar://host:6650` or `pulsar+ssl://host:6651` (TLS through rustls with the aws-lc-rs
//! provider and the webpki roots). Its query keys `token`, `ca_file` and `oauth2_*` (OAuth2
//! client credentials, see [`oauth2`]) are taken out before the URL reaches the client (see
//! [`auth`]). [`PulsarOptions`] (given to [`PulsarTransport::connect_with`]) and
//! [`PulsarTransport::builder`] set the rest: `topic_prefix` (default empty, e.g.
//! `persistent://public/default/`), the subscription name, the connect timeout, and extra CA
//! certificates to trust for a privately signed broker certificate (default: the PEM file the
//! `BQ_PULSAR_TLS_TRUST_CERTS` environment variable names, so `connect(url)` and the CLI can
//! use it too).
//!
//! # Limits and deviations from the reference SDK (Python 1.24.0)
//!
//! * **The redelivery count.** The `pulsar` crate (6.9.1, its newest release) reads the broker's
//!   `CommandMessage.redelivery_count` only for its own dead-letter policy and hands the consumer
//!   the message id and the payload alone (`consumer::Message` has no count), and a dependency
//!   from crates.io cannot be patched here. [`NativeClient`] therefore counts itself: how many
//!   times it has handed out each message id of a topic (0 the first time), forgotten once the
//!   id is acknowledged through it. The counts belong to the client (one per
//!   [`PulsarTransport::connect`]), not to a consumer, so the client's own reconnection (the
//!   broker closing the consumer, a topic unload) and the transport subscribing again (after a
//!   failed receive, or after `close`) keep them. What starts again from 0: a restarted process
//!   and any other client (another process, or another `connect` in this one); and, per topic,
//!   every count at once when 100 000 ids handed out were never acknowledged here (logged).
//!
//!   Only native redeliveries can go uncounted: the message coming back without a copy, after a
//!   nack ([`Rewinder`]: a failed dead-letter write or retry publish, a graceful shutdown's
//!   unhandled messages) or after the consumer holding it closed or died, when it then goes to
//!   another client (no ack timeout is set, so none comes from one). A retry or a release is a
//!   copy whose `bq-attempts` and body `attempts`
//!   reach every process, so a handler failure whose retry was published is always counted.
//!   The redelivery count only raises `attempts` above the carried count (`max`), so a lost
//!   count matters where a message came back natively more often than it was copied: another
//!   client then hands it to the handler with the carried `attempts` (a handler failure whose
//!   retry publish failed costs one run more than `max_attempts`). A handler that kills the
//!   process is never counted: nothing nacks the message and no copy is written. The broker's
//!   own count would not close those gaps: it counts nacks while the consumer holding the
//!   message lives, and the next consumer reads 0 once that one closed or died holding it
//!   (Pulsar 4.0.7, read through the C++ client in `tests/it.rs`); it reads more than this
//!   transport only for a nacked message the broker hands straight to another client's
//!   consumer (1 there, 0 here). The pure facts ([`projection::facts`]) take the count as an
//!   argument and are tested with counts above 0.
//! * A new `babelqueue` subscription starts at the earliest retained message (the Pulsar
//!   client default is the latest), so messages published before the first consumer
//!   subscribed are not skipped. [`PulsarOptions::initial_position_earliest`] turns it off.
//! * A body whose `attempts` is not an integer is published without `bq-attempts` (the
//!   reference raises and the re-publish fails).
//! * The crate's own dead-letter policy is never enabled: it would move messages to a topic
//!   of its own and bypass BabelQueue's dead-letter records.
//!
//! # Testing
//!
//! [`PulsarTransport::with_client`] takes any [`PulsarClient`], so the transport, with the real
//! runtime in front, runs against an in-memory fake (`fake::FakePulsar`, with the `fake`
//! feature: the unit tests and the conformance runner). `tests/it.rs` runs against a real Pulsar standalone broker
//! (`scripts/brokers.sh up pulsar`; URL in `BQ_PULSAR_URL`).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use babelqueue_core::{
    BatchAcker, BatchPublisher, Capabilities, Delivery, Outgoing, Rewinder, Sends, Transport,
    TransportError,
};

pub mod auth;
pub mod browse;
pub mod client;
mod error;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod inspect;
pub mod oauth2;
// Public for the conformance runner and the fuzz targets, which check the wire mapping
// directly; it is not part of the API an application should build on.
#[doc(hidden)]
pub mod projection;
mod redelivery;
pub mod stats;
mod window;

pub use auth::{ClientSettings, PulsarAuth, TOKEN_ENV};
#[allow(deprecated)]
pub use client::ClientOptions;
pub use client::{
    ADMIN_URL_ENV, MessageRef, NativeClient, PulsarClient, PulsarOptions, Received,
    TLS_TRUST_CERTS_ENV,
};
pub use error::PulsarError;
pub use inspect::Metadata;
use inspect::Wire;
pub use oauth2::{OAuth2Credentials, OAuth2Grant, OAuth2Params};
pub use projection::Properties;

/// What the transport keeps with each delivery: the message handle for ack and nack, and what
/// the broker said of the message (for the [`Inspector`](babelqueue_core::Inspector)).
#[derive(Debug, Clone)]
struct Handle {
    message: MessageRef,
    wire: Wire,
}

/// The Pulsar transport. Cheap to clone (the client is shared).
#[derive(Clone)]
pub struct PulsarTransport {
    client: Arc<dyn PulsarClient>,
    topic_prefix: String,
}

impl fmt::Debug for PulsarTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PulsarTransport")
            .field("client", &self.client)
            .field("topic_prefix", &self.topic_prefix)
            .finish()
    }
}

/// Builds a [`PulsarTransport`] with options. `Debug` masks any secret of the URL.
#[derive(Clone)]
#[must_use]
pub struct Builder {
    url: String,
    topic_prefix: String,
    options: PulsarOptions,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("url", &babelqueue_core::redact::redact(&self.url))
            .field("topic_prefix", &self.topic_prefix)
            .field("options", &self.options)
            .finish()
    }
}

impl Builder {
    /// The prefix every queue name is given to form its topic (default empty; for example
    /// `persistent://public/default/`).
    pub fn topic_prefix(mut self, prefix: impl Into<String>) -> Builder {
        self.topic_prefix = prefix.into();
        self
    }

    /// Replaces every client option at once (the topic prefix is kept).
    pub fn options(mut self, options: PulsarOptions) -> Builder {
        self.options = options;
        self
    }

    /// The subscription name (default `babelqueue`; never random).
    pub fn subscription(mut self, name: impl Into<String>) -> Builder {
        self.options.subscription = name.into();
        self
    }

    /// Whether a new subscription starts at the earliest retained message (default `true`).
    pub fn initial_position_earliest(mut self, earliest: bool) -> Builder {
        self.options.initial_position_earliest = earliest;
        self
    }

    /// How long connecting may take before it is reported as a connection error (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Builder {
        self.options.connect_timeout = timeout;
        self
    }

    /// A PEM file of extra CA certificates to trust for `pulsar+ssl://` (default: the file
    /// `BQ_PULSAR_TLS_TRUST_CERTS` names, if set; the webpki roots are always trusted). The
    /// URL query key `ca_file` does the same.
    pub fn ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Builder {
        self.options.ca_file = Some(path.into());
        self
    }

    /// The broker's admin REST API (`http://host:8080` or `https://host:8443`), for browsing
    /// a queue without consuming it (`babelqueue dlq list`; default: `BQ_PULSAR_ADMIN_URL`).
    ///
    /// ```
    /// # fn main() -> Result<(), babelqueue_transport_pulsar::PulsarError> {
    /// use babelqueue_transport_pulsar::PulsarTransport;
    /// let builder = PulsarTransport::builder("pulsar://127.0.0.1:6650")?
    ///     .admin_url("http://127.0.0.1:8080");
    /// assert!(format!("{builder:?}").contains("8080"));
    /// # Ok(()) }
    /// ```
    pub fn admin_url(mut self, url: impl Into<String>) -> Builder {
        self.options.admin_url = Some(url.into());
        self
    }

    /// The old name of [`Builder::ca_file`].
    #[deprecated(note = "renamed to ca_file, the name every TLS transport uses")]
    pub fn tls_trust_certs_file(self, path: impl Into<std::path::PathBuf>) -> Builder {
        self.ca_file(path)
    }

    /// Authenticates with a token: a JWT, `token:<jwt>`, or `file:///path` to read it from
    /// (default: the token `BQ_PULSAR_TOKEN` holds, if set). The URL query key `token` does
    /// the same.
    ///
    /// ```
    /// # fn main() -> Result<(), babelqueue_transport_pulsar::PulsarError> {
    /// use babelqueue_transport_pulsar::PulsarTransport;
    /// let builder = PulsarTransport::builder("pulsar+ssl://broker:6651")?.token("token:ey.J9");
    /// let settings = builder.settings()?; // what the client is built with
    /// assert_eq!(settings.token.as_deref(), Some("ey.J9"));
    /// assert!(!format!("{builder:?}").contains("ey.J9"));
    /// # Ok(()) }
    /// ```
    pub fn token(mut self, token: &str) -> Builder {
        self.options.auth = Some(PulsarAuth::token(token));
        self
    }

    /// Authenticates with OAuth2 client credentials: the client requests access tokens from
    /// the issuer and sends them with the `token` auth method (see [`oauth2`]). The URL query
    /// keys `oauth2_issuer_url`, `oauth2_private_key`, `oauth2_audience` and `oauth2_scope` do
    /// the same.
    ///
    /// ```
    /// # fn main() -> Result<(), babelqueue_transport_pulsar::PulsarError> {
    /// use babelqueue_transport_pulsar::{OAuth2Credentials, OAuth2Params, PulsarTransport};
    /// let builder = PulsarTransport::builder("pulsar+ssl://broker:6651")?.oauth2(
    ///     OAuth2Params::new("https://auth.example.com", OAuth2Credentials::client_secret("bq", "s3cr3t"))
    ///         .audience("urn:pulsar:cluster"),
    /// );
    /// let grant = builder.settings()?.oauth2.expect("an OAuth2 grant");
    /// assert_eq!(grant.client_id, "bq");
    /// assert!(!format!("{builder:?}").contains("s3cr3t"));
    /// # Ok(()) }
    /// ```
    pub fn oauth2(mut self, params: OAuth2Params) -> Builder {
        self.options.auth = Some(PulsarAuth::OAuth2(params));
        self
    }

    /// What the client would be built with: the service URL, the auth data and the CA
    /// certificates, with the files read (an error names a file that cannot be read).
    pub fn settings(&self) -> Result<ClientSettings, PulsarError> {
        auth::settings(&self.url, &self.options)
    }

    /// Connects.
    pub async fn connect(self) -> Result<PulsarTransport, PulsarError> {
        let client = NativeClient::connect(&self.url, self.options).await?;
        Ok(PulsarTransport::with_client(Arc::new(client)).with_topic_prefix(self.topic_prefix))
    }
}

/// Checks that `url` is a Pulsar URL with a host.
pub fn validate_url(url: &str) -> Result<(), PulsarError> {
    let rest = url
        .strip_prefix("pulsar://")
        .or_else(|| url.strip_prefix("pulsar+ssl://"))
        .ok_or_else(|| {
            PulsarError::Config(format!(
                "{:?} is not a pulsar:// or pulsar+ssl:// URL",
                babelqueue_core::redact::redact(url)
            ))
        })?;
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() {
        return Err(PulsarError::Config(format!(
            "{:?} names no host",
            babelqueue_core::redact::redact(url)
        )));
    }
    Ok(())
}

impl PulsarTransport {
    /// Connects to `url` with the default options.
    pub async fn connect(url: &str) -> Result<PulsarTransport, PulsarError> {
        PulsarTransport::builder(url)?.connect().await
    }

    /// Connects to `url` with `options` (a Pulsar URL carries no options of its own). The
    /// topic prefix is set on the transport ([`with_topic_prefix`](Self::with_topic_prefix))
    /// or with the [`Builder`].
    pub async fn connect_with(
        url: &str,
        options: PulsarOptions,
    ) -> Result<PulsarTransport, PulsarError> {
        PulsarTransport::builder(url)?
            .options(options)
            .connect()
            .await
    }

    /// Starts building a transport for `url` (checked here, connected by
    /// [`Builder::connect`]).
    pub fn builder(url: &str) -> Result<Builder, PulsarError> {
        validate_url(url)?;
        Ok(Builder {
            url: url.to_owned(),
            topic_prefix: String::new(),
            options: PulsarOptions::default(),
        })
    }

    /// A transport over any client (a fake in tests).
    pub fn with_client(client: Arc<dyn PulsarClient>) -> PulsarTransport {
        PulsarTransport {
            client,
            topic_prefix: String::new(),
        }
    }

    /// Sets the topic prefix.
    #[must_use]
    pub fn with_topic_prefix(mut self, prefix: impl Into<String>) -> PulsarTransport {
        self.topic_prefix = prefix.into();
        self
    }

    /// The topic of `queue`: prefix + queue.
    pub fn topic(&self, queue: &str) -> String {
        format!("{}{queue}", self.topic_prefix)
    }

    fn handle(delivery: &Delivery) -> Result<&Handle, TransportError> {
        delivery.handle::<Handle>().ok_or_else(|| {
            PulsarError::ForeignDelivery(format!(
                "a delivery from queue {:?} carries no Pulsar handle",
                delivery.queue()
            ))
            .into()
        })
    }

    async fn send_now(
        &self,
        queue: &str,
        body: &[u8],
        properties: Properties,
    ) -> Result<(), TransportError> {
        self.client
            .send(&self.topic(queue), body, properties)
            .await
            .map_err(Into::into)
    }

    /// Sends at once when `delay` is none or zero, else with `deliver_at_time` = now + `delay`
    /// (refused before anything is sent when that is out of range).
    async fn send_after(
        &self,
        queue: &str,
        body: &[u8],
        properties: Properties,
        delay: Option<Duration>,
    ) -> Result<(), TransportError> {
        let Some(delay) = delay.filter(|d| !d.is_zero()) else {
            return self.send_now(queue, body, properties).await;
        };
        let deliver_at = SystemTime::now().checked_add(delay).ok_or_else(|| {
            PulsarError::Config(format!("a delivery delay of {delay:?} is out of range"))
        })?;
        self.client
            .send_at(&self.topic(queue), body, properties, deliver_at)
            .await
            .map_err(Into::into)
    }
}

#[async_trait]
impl Transport for PulsarTransport {
    fn name(&self) -> &'static str {
        "pulsar"
    }

    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        self.send_now(queue, body, projection::properties(body))
            .await
    }

    /// The normal projection, or, for a copy on behalf of a delivery that carried facts, the
    /// properties that keep what it carried ([`projection::routed_properties`]: `bq-job` stays
    /// pinned, a gated message keeps its `bq-schema-version`); held by the broker until `delay`
    /// has passed (Pulsar delayed delivery, `deliver_at_time` = now + delay; a zero delay sends
    /// at once). Pulsar carries no other headers.
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        let body = outgoing.body;
        let properties = match outgoing.facts {
            Some(facts) => projection::routed_properties(body, facts),
            None => projection::properties(body),
        };
        self.send_after(outgoing.queue, body, properties, outgoing.delay)
            .await
    }

    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        let timeout = if timeout.is_zero() {
            Duration::from_secs(1)
        } else {
            timeout
        };
        let Some(received) = self.client.receive(&self.topic(queue), timeout).await? else {
            return Ok(None);
        };
        let facts = projection::facts(&received.properties, received.redelivery_count);
        let handle = Handle {
            message: received.id,
            wire: Wire::new(
                received.metadata,
                received.properties,
                received.redelivery_count,
            ),
        };
        Ok(Some(
            Delivery::new(queue, received.payload)
                .with_facts(facts)
                .with_handle(handle),
        ))
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let handle = Self::handle(delivery)?;
        self.client.ack(&handle.message).await.map_err(Into::into)
    }

    /// The first message waits up to `timeout`; then what the consumer's receiver queue
    /// already holds, up to `max`, in the same request.
    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        let timeout = if timeout.is_zero() {
            Duration::from_secs(1)
        } else {
            timeout
        };
        let received = self
            .client
            .receive_many(&self.topic(queue), max.max(1), timeout)
            .await?;
        Ok(received
            .into_iter()
            .map(|received| {
                let facts = projection::facts(&received.properties, received.redelivery_count);
                Delivery::new(queue, received.payload)
                    .with_facts(facts)
                    .with_handle(Handle {
                        message: received.id,
                        wire: Wire::new(
                            received.metadata,
                            received.properties,
                            received.redelivery_count,
                        ),
                    })
            })
            .collect())
    }

    async fn close(&self) -> Result<(), TransportError> {
        self.client.close().await.map_err(Into::into)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        let capabilities = Capabilities::none()
            .sends(Sends::body_only().facts().delay())
            .rewind(self)
            .batch_ack(self)
            .batch_publish(self)
            .inspect(self);
        // Browsing reads the subscription's backlog over the admin API, and stats count it
        // there; without an admin URL there is no way to read it in place (see the `browse`
        // and `stats` modules), so neither is offered.
        if self.client.can_browse() {
            capabilities.browse(self).stats(self)
        } else {
            capabilities
        }
    }
}

/// Individual acknowledgements, handed to the client together ([`PulsarClient::ack_many`]):
/// the subscription is Shared, where a cumulative acknowledgement is not allowed.
#[async_trait]
impl BatchAcker for PulsarTransport {
    async fn ack_batch(&self, deliveries: &[Delivery]) -> Result<(), TransportError> {
        let mut first_error = None;
        let mut messages = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            match Self::handle(delivery) {
                Ok(handle) => messages.push(handle.message.clone()),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let sent = self.client.ack_many(&messages).await;
        match first_error {
            Some(e) => Err(e),
            None => sent.map_err(Into::into),
        }
    }
}

/// A batch in order on the topic's producer, with the receipts of a window of messages in
/// flight together ([`SEND_WINDOW`](client::SEND_WINDOW)); each body gets the projection
/// [`publish`](Transport::publish) gives it.
#[async_trait]
impl BatchPublisher for PulsarTransport {
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        let messages = bodies
            .iter()
            .map(|body| (*body, projection::properties(body)))
            .collect();
        self.client
            .send_batch(&self.topic(queue), messages)
            .await
            .map_err(Into::into)
    }
}

#[async_trait]
impl Rewinder for PulsarTransport {
    async fn rewind(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let handle = Self::handle(delivery)?;
        self.client.nack(&handle.message).await.map_err(Into::into)
    }
}

#[cfg(test)]
mod batch_tests;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use babelqueue_core::{App, Consume, Context, HandlerError};

    use super::*;
    use crate::fake::FakePulsar;

    const URN: &str = "urn:babel:orders:created";
    const BODY: &[u8] = br#"{"job":"urn:babel:orders:created","data":{},"attempts":0}"#;

    fn setup() -> (Arc<FakePulsar>, PulsarTransport) {
        let fake = Arc::new(FakePulsar::new());
        (
            fake.clone(),
            PulsarTransport::with_client(fake).with_topic_prefix("persistent://public/default/"),
        )
    }

    fn app(transport: PulsarTransport) -> babelqueue_core::AppBuilder {
        App::builder(transport)
            .queue("orders")
            .poll_timeout(Duration::from_millis(5))
            .rewind_pause(Duration::ZERO)
    }

    async fn run(app: &App) {
        app.consume(Consume::new().max_messages(1).handle_signals(false))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn topics_carry_the_prefix() {
        let (fake, transport) = setup();
        transport.publish("orders", BODY).await.unwrap();
        assert_eq!(fake.sent()[0].topic, "persistent://public/default/orders");
    }

    #[tokio::test]
    async fn a_failed_retry_publish_nacks_the_original() {
        let (fake, transport) = setup();
        fake.deliver(
            "persistent://public/default/orders",
            BODY,
            Properties::new(),
            0,
        );
        fake.fail_sends_to("persistent://public/default/orders");
        let app = app(transport)
            .handle(URN, |_ctx: Context| async {
                Err::<(), _>(HandlerError::new("boom"))
            })
            .build()
            .unwrap();
        run(&app).await;
        assert!(fake.acked().is_empty());
        assert_eq!(fake.nacked().len(), 1);
        assert_eq!(
            fake.queued("persistent://public/default/orders"),
            1,
            "it comes back"
        );
    }

    #[tokio::test]
    async fn a_failed_poison_dlq_write_nacks_and_the_next_delivery_is_counted() {
        let (fake, transport) = setup();
        fake.deliver(
            "persistent://public/default/orders",
            b"not json".to_vec(),
            Properties::new(),
            0,
        );
        fake.fail_sends_to("persistent://public/default/orders.dlq");
        let app = app(transport.clone()).dead_letter(true).build().unwrap();
        run(&app).await;
        assert_eq!(fake.nacked().len(), 1);
        let again = transport
            .pop("orders", Duration::from_millis(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(again.facts().count.map(|c| c.native()), Some(1));
    }

    #[tokio::test]
    async fn the_fake_holds_a_delayed_send_but_lets_due_messages_pass() {
        let fake = FakePulsar::new();
        let later = SystemTime::now() + Duration::from_secs(60);
        fake.send_at("t", b"held", Properties::new(), later)
            .await
            .unwrap();
        fake.send("t", b"now", Properties::new()).await.unwrap();
        assert_eq!(fake.queued("t"), 2);
        assert_eq!(fake.held("t"), 1);
        let first = fake.receive("t", Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(first.payload, b"now");
        assert!(fake.receive("t", Duration::ZERO).await.unwrap().is_none());
        assert_eq!(fake.sent()[0].deliver_at, Some(later));
        assert_eq!(fake.sent()[1].deliver_at, None);
    }

    #[tokio::test]
    async fn a_retry_is_held_by_the_broker_until_its_back_off_has_passed() {
        // long enough that the checks below run well before it ends, even on a loaded machine
        const BACKOFF: Duration = Duration::from_millis(1500);
        let (fake, transport) = setup();
        let topic = "persistent://public/default/orders";
        fake.deliver(topic, BODY, Properties::new(), 0);
        let app = app(transport.clone())
            .max_attempts(3)
            .retry_backoff(BACKOFF)
            .handle(URN, |_ctx: Context| async {
                Err::<(), _>(HandlerError::new("boom"))
            })
            .build()
            .unwrap();
        let before = SystemTime::now();
        run(&app).await;
        let after = SystemTime::now();

        assert_eq!(fake.acked().len(), 1, "the original is acked");
        assert!(fake.nacked().is_empty());
        let sent = fake.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].topic, topic);
        assert_eq!(sent[0].properties["bq-attempts"], "1");
        let at = sent[0]
            .deliver_at
            .expect("the copy is sent with a delivery time");
        assert!(at >= before + BACKOFF, "{at:?} vs {before:?}");
        assert!(at <= after + BACKOFF, "{at:?} vs {after:?}");

        assert_eq!(fake.held(topic), 1);
        assert!(SystemTime::now() < at);
        assert!(
            transport
                .pop("orders", Duration::from_millis(5))
                .await
                .unwrap()
                .is_none(),
            "not before its time"
        );

        let wait = at
            .duration_since(SystemTime::now())
            .unwrap_or_default()
            .saturating_add(Duration::from_millis(20));
        tokio::time::sleep(wait).await;
        assert_eq!(fake.held(topic), 0);
        let again = transport
            .pop("orders", Duration::from_millis(5))
            .await
            .unwrap()
            .expect("released once its time has come");
        assert_eq!(again.facts().count.map(|c| c.native()), Some(1));
        assert!(
            std::str::from_utf8(again.body())
                .unwrap()
                .contains(r#""attempts":1"#)
        );
    }

    #[test]
    fn redelivery_is_the_runtimes_copy() {
        let (_fake, transport) = setup();
        let c = transport.capabilities();
        assert!(matches!(
            c.redelivery_mode(),
            babelqueue_core::Redelivery::Copy
        ));
        assert_eq!(
            c.send_parts(),
            babelqueue_core::Sends::body_only().facts().delay()
        );
        assert!(c.rewinder().is_some());
    }

    /// A delivery that carried `bq-job` is retried with its facts carried: `bq-job` stays
    /// pinned to the carried URN (trimmed) and the back-off is still a delivery time.
    #[tokio::test]
    async fn a_routed_retry_keeps_its_bq_job_and_its_back_off() {
        const BACKOFF: Duration = Duration::from_secs(60);
        let (fake, transport) = setup();
        let topic = "persistent://public/default/orders";
        let mut props = projection::properties(BODY);
        props.insert("bq-job".into(), " urn:babel:orders:routed ".into());
        fake.deliver(topic, BODY, props, 0);
        let app = app(transport)
            .max_attempts(3)
            .retry_backoff(BACKOFF)
            .handle("urn:babel:orders:routed", |_ctx: Context| async {
                Err::<(), _>(HandlerError::new("boom"))
            })
            .build()
            .unwrap();
        let before = SystemTime::now();
        run(&app).await;
        assert_eq!(fake.acked().len(), 1);
        let sent = fake.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].properties["bq-job"], "urn:babel:orders:routed");
        assert_eq!(sent[0].properties["bq-attempts"], "1");
        let at = sent[0].deliver_at.expect("held until its back-off");
        assert!(at >= before + BACKOFF, "{at:?} vs {before:?}");
        assert_eq!(fake.held(topic), 1);
    }

    #[tokio::test]
    async fn a_retry_without_back_off_is_sent_for_immediate_delivery() {
        let (fake, transport) = setup();
        let topic = "persistent://public/default/orders";
        fake.deliver(topic, BODY, Properties::new(), 0);
        let app = app(transport)
            .max_attempts(3)
            .handle(URN, |_ctx: Context| async {
                Err::<(), _>(HandlerError::new("boom"))
            })
            .build()
            .unwrap();
        run(&app).await;
        assert_eq!(fake.acked().len(), 1);
        assert_eq!(fake.sent()[0].deliver_at, None);
        assert_eq!(fake.held(topic), 0);
        assert_eq!(fake.queued(topic), 1);
    }
}
