//! Azure Service Bus transport for BabelQueue, over AMQP 1.0.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::{App, Consume, Context, HandlerError};
//! use babelqueue_transport_asb::AsbTransport;
//!
//! // The key comes from AZURE_SERVICEBUS_CONNECTION_STRING, or from the URL itself:
//! // sb://<key name>:<url-encoded key>@<namespace>.servicebus.windows.net
//! let transport = AsbTransport::connect("sb://acme.servicebus.windows.net").await?;
//! let app = App::builder(transport)
//!     .queue("orders")
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
//! # Why AMQP and not `azure_messaging_servicebus`
//!
//! The design named `azure_messaging_servicebus`. The only published version (0.21) is the
//! legacy REST client, and it cannot carry this binding:
//!
//! * its custom properties are HTTP headers with string values, while the binding needs
//!   `bq-schema-version` as an AMQP integer and `bq-created-at` as an AMQP long, and must tell
//!   a string `"1"` from an integer 1 on receive;
//! * it returns the body as a `String`, so a body that is not UTF-8 is lost instead of being
//!   dead-lettered with its exact bytes;
//! * REST has no dead-letter operation, so the native `DeadLetter` with a reason and a
//!   description is impossible (only unlock-until-MaxDeliveryCount);
//! * it is unmaintained, and its rustls option brings the `ring` provider into the graph.
//!
//! So this crate speaks AMQP 1.0 to the namespace itself with `fe2o3-amqp` 0.18 (the same
//! stack as the Artemis binding), and authenticates with SAS tokens put on the `$cbs` node
//! (`fe2o3-amqp-cbs` 0.18): typed application properties, byte bodies, `DeliveryCount`,
//! `Complete` (accepted), `Abandon` (modified) and `DeadLetter` (rejected with condition
//! `com.microsoft:dead-letter` and the `DeadLetterReason` / `DeadLetterErrorDescription`
//! fields).
//!
//! # What goes on the wire ([`projection::outgoing`])
//!
//! The body is the envelope's bytes in one data section. `ContentType` `application/json`,
//! `Subject` = the URN, `CorrelationId` = `trace_id`, `MessageId` = `meta.id` (each only
//! when non-empty; an id over 128 characters is refused before sending). Application
//! properties, AMQP-typed: `bq-schema-version` (int; long past int32), `bq-source-lang`
//! (string), `bq-created-at` (long). No `bq-job` or `bq-attempts`, and no out-of-band headers
//! (traceparent is not carried), as in the reference SDK.
//!
//! # Consuming
//!
//! PeekLock, one message at a time (prefetch 1). Each message is handed to the runtime with
//! its body exactly as received and what Service Bus carried beside it; the runtime decides:
//!
//! 1. the `bq-schema-version` application property, AMQP-typed as carried
//!    ([`projection::declared`]): the runtime's schema-version gate reads it before the body
//!    is decoded. Absent, null, ASCII-blank, the string `"1"` or an integral 1 of any width
//!    decodes; anything else (`"2"`, 0, 2, 1.5, a float or double 1.0, a boolean) is never
//!    decoded, reconciled or handled;
//! 2. `DeliveryCount - 1` when `DeliveryCount` is above 1 ([`projection::count`], a
//!    [`Count::Redelivered`](babelqueue_core::Count::Redelivered)): the runtime raises a
//!    readable body's `attempts` to it (`attempts = max(body, DeliveryCount - 1)`, the body
//!    rewritten only when the count raises it), counts a poison body by it and reports it as
//!    [`Context::native_attempts`](babelqueue_core::Context::native_attempts).
//!
//! # Settling
//!
//! * ack is `Complete`;
//! * retry, release and shutdown send a copy (`attempts + 1`, or unchanged) to the same queue
//!   and `Complete` the original (ASB is not a redeliverer; the delay is not honoured);
//! * BabelQueue's own dead-letter queue `<queue>.dlq` is a separate entity (it must exist):
//!   the record is sent there, then the original is completed;
//! * [`NativeSettler`]: with dead-lettering off, a version-gated or poison message is
//!   dead-lettered natively into the entity's `$DeadLetterQueue` (reason
//!   `unsupported schema version` or `poison`, with a description), body unchanged, never
//!   completed or re-sent;
//! * [`Abandoner`]: only when the dead-letter write of a version-gated message fails, the lock
//!   is abandoned at once (then the runtime pauses 1 s). ASB is deliberately not a rewinder: a
//!   failed poison DLQ write or retry copy stays locked until the lock expires.
//!
//! # Browsing
//!
//! The transport is a [`Browser`]: `babelqueue dlq list` reads a
//! queue in place with Service Bus's peek (the `com.microsoft:peek-message` management
//! operation, encoded in [`peek`]), no lock taken, no `DeliveryCount` raised. The native
//! dead-letter sub-queue of `Q` is `Q/$deadletterqueue` ([`peek::dead_letter_path`]).
//!
//! # Inspecting
//!
//! The transport is an [`Inspector`](babelqueue_core::Inspector), for tools that show the wire:
//! a delivery's `MessageId`, whether its `DeliveryCount` is above 1, its sequence number, enqueue
//! time and lock expiry ([`SystemProperties`], taken on receive) and its delivery count. The lock
//! token is not shown, and nothing secret ever reaches a delivery.
//!
//! # URL and credentials
//!
//! `sb://<namespace host>[:port]`, also `servicebus://` and `azureservicebus://`. A connection
//! string (`Endpoint=sb://…;SharedAccessKeyName=…;SharedAccessKey=…`, read into [`AsbOptions`]
//! with [`AsbOptions::from_connection_string`] and given to [`AsbTransport::connect_with`], else
//! read from `AZURE_SERVICEBUS_CONNECTION_STRING`) takes precedence over the URL; otherwise the URL carries the key
//! (`sb://<key name>:<url-encoded key>@<host>`); a URL without a key authenticates with Azure
//! AD through [`DefaultCredential`], a chain like the reference SDK's `DefaultAzureCredential`:
//! [`EnvironmentCredential`] (the standard `AZURE_TENANT_ID`, `AZURE_CLIENT_ID` and
//! `AZURE_CLIENT_SECRET`, or `AZURE_FEDERATED_TOKEN_FILE`, variables), then
//! [`ManagedIdentityCredential`] (`IDENTITY_ENDPOINT`, else a VM's IMDS), then
//! [`AzureCliCredential`] (`az account get-access-token`); the first token is asked for before
//! connecting, and when no link gives one the error lists why each failed.
//! [`AmqpServiceBus::connect_with_credential`] takes any other [`TokenCredential`]. The bearer
//! token is put on the `$cbs` node with the token type `jwt` and renewed before it expires.
//! `UseDevelopmentEmulator=true` in a connection
//! string selects plain AMQP on port 5672 (the Service Bus emulator); everything else is
//! `amqps` on 5671 through rustls with the aws-lc-rs provider.
//!
//! # Limits and deviations from the reference SDK (Python 1.24.0)
//!
//! * **Not run against Service Bus here.** No Service Bus namespace or emulator is reachable
//!   from the project's machines (the emulator ships only as a container image, and there is
//!   no container engine). Every behaviour of the binding is tested through the
//!   [`ServiceBusClient`] trait with the in-memory `fake::FakeServiceBus` (the `fake`
//!   feature), with the real runtime in front; the AMQP client ([`AmqpServiceBus`]) is
//!   compiled and its pure parts (connection strings, URLs, SAS signatures) are unit-tested,
//!   but its wire exchange with a namespace has not been exercised.
//! * Azure AD: of `DefaultAzureCredential`'s chain the environment, managed identity and
//!   Azure CLI links are built in (no IDE, PowerShell or interactive links). The token requests
//!   are tested against local HTTP endpoints and a fake `az` program, never against Azure; the
//!   CBS put-token only through its pure parts.
//! * Settling waits for a receive in progress on the same queue (one receiver per queue
//!   behind a lock), so with `concurrency` above 1 a settle can wait up to the poll timeout.
//! * No lock renewal, as in the reference: a handler that outlives the lock duration makes
//!   `Complete` fail (logged; the message is redelivered).
//! * A body sent by a foreign AMQP client as an `amqp-value` string or binary is read as its
//!   bytes; any other `amqp-value` or `amqp-sequence` body is read as its debug text and so
//!   takes the poison path.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{
    Abandoner, Browser, Capabilities, Delivery, NativeSettler, Transport, TransportError,
};

mod browse;
pub mod client;
pub mod credential;
mod error;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod inspect;
pub mod peek;
// Public for the conformance runner and the fuzz targets, which check the wire mapping
// directly; it is not part of the API an application should build on.
#[doc(hidden)]
pub mod projection;
pub mod stats;

#[allow(deprecated)]
pub use client::ConnectionConfig;
pub use client::{
    AmqpServiceBus, AsbOptions, CONNECTION_STRING_ENV, LockToken, Received, ServiceBusClient,
};
pub use credential::{
    AccessToken, AzureCliCredential, ClientProof, DefaultCredential, EnvironmentCredential,
    ManagedIdentityCredential, SERVICE_BUS_SCOPE, TokenCredential,
};
pub use error::AsbError;
use inspect::Held;
pub use inspect::SystemProperties;
pub use projection::{AmqpValue, Outgoing};

/// The Azure Service Bus transport. Cheap to clone (the client is shared).
#[derive(Clone)]
pub struct AsbTransport {
    client: Arc<dyn ServiceBusClient>,
}

impl fmt::Debug for AsbTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsbTransport")
            .field("client", &self.client)
            .finish()
    }
}

impl AsbTransport {
    /// Connects to the namespace a `sb://` URL names (credentials: see the crate docs).
    pub async fn connect(url: &str) -> Result<AsbTransport, AsbError> {
        let options = AsbOptions::from_url(url, None)?;
        let client = AmqpServiceBus::connect(options).await?;
        Ok(AsbTransport::with_client(Arc::new(client)))
    }

    /// Connects with explicit options, usually read from a connection string
    /// ([`AsbOptions::from_connection_string`]). They name the namespace and carry its key, and
    /// take precedence over the URL, as a connection string does in the reference SDK; the URL
    /// must still be a Service Bus URL.
    pub async fn connect_with(url: &str, options: AsbOptions) -> Result<AsbTransport, AsbError> {
        client::check_scheme(url)?;
        let client = AmqpServiceBus::connect(options).await?;
        Ok(AsbTransport::with_client(Arc::new(client)))
    }

    /// Connects to the namespace a `sb://` URL names, authenticating with Azure AD tokens from
    /// `credential` (a key in the URL is not used).
    pub async fn connect_with_credential(
        url: &str,
        credential: Arc<dyn TokenCredential>,
    ) -> Result<AsbTransport, AsbError> {
        let options = AsbOptions::from_url(url, Some(""))?;
        let client = AmqpServiceBus::connect_with_credential(options, credential).await?;
        Ok(AsbTransport::with_client(Arc::new(client)))
    }

    /// A transport over any client (a fake in tests).
    pub fn with_client(client: Arc<dyn ServiceBusClient>) -> AsbTransport {
        AsbTransport { client }
    }

    fn lock(delivery: &Delivery) -> Result<&LockToken, TransportError> {
        delivery
            .handle::<Held>()
            .map(|held| &held.lock)
            .ok_or_else(|| {
                AsbError::ForeignDelivery(format!(
                    "a delivery from queue {:?} carries no Service Bus lock",
                    delivery.queue()
                ))
                .into()
            })
    }
}

#[async_trait]
impl Transport for AsbTransport {
    fn name(&self) -> &'static str {
        "asb"
    }

    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        let message = projection::outgoing(body)?;
        self.client.send(queue, message).await.map_err(Into::into)
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
        let Some(received) = self.client.receive(queue, timeout).await? else {
            return Ok(None);
        };
        let delivery = Delivery::new(queue, received.body)
            .with_declared_version(projection::declared(&received.application_properties));
        let delivery = match projection::count(received.delivery_count) {
            Some(count) => delivery.with_count(count),
            None => delivery,
        };
        Ok(Some(delivery.with_handle(Held::new(
            received.lock,
            received.system,
            received.delivery_count,
        ))))
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let lock = Self::lock(delivery)?;
        self.client.complete(lock).await.map_err(Into::into)
    }

    async fn close(&self) -> Result<(), TransportError> {
        self.client.close().await.map_err(Into::into)
    }

    /// Abandon (for a version-gated delivery whose dead-letter write failed) and the native
    /// dead-letter. Retries and releases are copies (the default): Service Bus is neither a
    /// redeliverer nor a rewinder here.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
            .abandon(self)
            .native_settle(self)
            .browse(self)
            .inspect(self)
            .stats(self)
    }
}

/// `babelqueue dlq list` reads a queue (or a dead-letter sub-queue,
/// `<queue>/$deadletterqueue`) in place: Service Bus's peek, no lock taken, no delivery
/// counted.
#[async_trait]
impl Browser for AsbTransport {
    async fn browse(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, TransportError> {
        self.client.peek(queue, max).await.map_err(Into::into)
    }
}

#[async_trait]
impl Abandoner for AsbTransport {
    async fn abandon(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let lock = Self::lock(delivery)?;
        self.client.abandon(lock).await.map_err(Into::into)
    }
}

#[async_trait]
impl NativeSettler for AsbTransport {
    async fn settle_native(
        &self,
        delivery: &Delivery,
        reason: &str,
        description: &str,
    ) -> Result<(), TransportError> {
        let lock = Self::lock(delivery)?;
        self.client
            .dead_letter(lock, reason, description)
            .await
            .map_err(Into::into)
    }
}
