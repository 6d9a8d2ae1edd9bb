//! The client seam: the Service Bus operations the transport needs ([`ServiceBusClient`]), the
//! connection settings ([`AsbOptions`]), and [`AmqpServiceBus`], their implementation on
//! AMQP 1.0 (`fe2o3-amqp`, with CBS put-token SAS authentication from `fe2o3-amqp-cbs`).
//!
//! Tests and the conformance runner put a fake behind the same trait (`fake::FakeServiceBus`,
//! with the `fake` feature), so the real [`AsbTransport`](crate::AsbTransport) runs without a
//! namespace.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use fe2o3_amqp::connection::ConnectionHandle;
use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::definitions::{
    self, ErrorCondition, Fields, ReceiverSettleMode, SenderSettleMode,
};
use fe2o3_amqp::types::messaging::{
    ApplicationProperties, Body, Message, MessageId, Modified, Outcome, Properties,
};
use fe2o3_amqp::types::primitives::{Binary, OrderedMap, SimpleValue, Symbol, Timestamp, Value};
use fe2o3_amqp::{Connection, Receiver, Sender, Session};
use fe2o3_amqp_cbs::client::CbsClient;
use fe2o3_amqp_cbs::token::CbsToken;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::credential::{AccessToken, DefaultCredential, SERVICE_BUS_SCOPE, TokenCredential};
use crate::error::AsbError;
use crate::inspect::SystemProperties;
use crate::projection::{self, AmqpValue, Outgoing};

/// The settle handle of one received message (its peek-lock).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockToken {
    /// The queue the message was received from.
    pub queue: String,
    /// The lock, as the client identifies it.
    pub id: u64,
}

/// One message as the client received it, in PeekLock mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// The body bytes (the data sections, concatenated).
    pub body: Vec<u8>,
    /// The application properties, AMQP-typed.
    pub application_properties: projection::ApplicationProperties,
    /// Service Bus `DeliveryCount`, 1-based (the AMQP header's count + 1).
    pub delivery_count: u32,
    /// The lock.
    pub lock: LockToken,
    /// The message id and the system properties the namespace stamped on the message.
    pub system: SystemProperties,
}

/// The Service Bus operations the transport uses. Queue names are entity paths.
#[async_trait]
pub trait ServiceBusClient: Send + Sync + fmt::Debug {
    /// Sends one message to `queue` and waits until the namespace accepted it.
    async fn send(&self, queue: &str, message: Outgoing) -> Result<(), AsbError>;

    /// Receives one message from `queue` in PeekLock mode, waiting up to `timeout`.
    async fn receive(&self, queue: &str, timeout: Duration) -> Result<Option<Received>, AsbError>;

    /// `Complete`: the message is done.
    async fn complete(&self, lock: &LockToken) -> Result<(), AsbError>;

    /// `Abandon`: the lock is released at once and the message is redelivered (its
    /// `DeliveryCount` goes up).
    async fn abandon(&self, lock: &LockToken) -> Result<(), AsbError>;

    /// `DeadLetter`: the message moves to the entity's `$DeadLetterQueue` with a reason and a
    /// description, body unchanged.
    async fn dead_letter(
        &self,
        lock: &LockToken,
        reason: &str,
        description: &str,
    ) -> Result<(), AsbError>;

    /// Closes links and the connection.
    async fn close(&self) -> Result<(), AsbError> {
        Ok(())
    }

    /// The runtime counts of `queue` ([`crate::stats`]); `None` when it does not exist. A
    /// client that cannot read them says so (the default).
    async fn counts(&self, queue: &str) -> Result<Option<crate::stats::QueueCounts>, AsbError> {
        Err(AsbError::Client(format!(
            "this Service Bus client cannot read the counts of {queue}"
        )))
    }

    /// Up to `max` bodies (all when 0) from the head of `queue`, in sequence-number order,
    /// read without locking, settling or counting a delivery (Service Bus's peek). `queue` may
    /// be a dead-letter sub-queue, `<queue>/$deadletterqueue`. A client that cannot peek says
    /// so (the default).
    async fn peek(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, AsbError> {
        let _ = max;
        Err(AsbError::Client(format!(
            "this Service Bus client cannot peek {queue}"
        )))
    }
}

/// How to reach and authenticate with a namespace: from a URL ([`AsbOptions::from_url`]), a
/// connection string ([`AsbOptions::from_connection_string`]) or set in code.
#[derive(Clone, PartialEq, Eq)]
pub struct AsbOptions {
    /// The namespace host (`<namespace>.servicebus.windows.net`).
    pub host: String,
    /// The port (default 5671 with TLS, 5672 for the emulator).
    pub port: u16,
    /// TLS (`amqps`); off only for the development emulator.
    pub tls: bool,
    /// The shared access key's name.
    pub key_name: String,
    /// The shared access key.
    pub key: String,
}

/// The old name of [`AsbOptions`].
#[deprecated(note = "renamed to AsbOptions")]
pub type ConnectionConfig = AsbOptions;

impl fmt::Debug for AsbOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsbOptions")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("key_name", &self.key_name)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// The environment variable holding a connection string.
pub const CONNECTION_STRING_ENV: &str = "AZURE_SERVICEBUS_CONNECTION_STRING";

/// The URL schemes of the binding.
pub const SCHEMES: [&str; 3] = ["sb", "servicebus", "azureservicebus"];

fn host_port(authority: &str) -> Result<(String, Option<u16>), AsbError> {
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => (
            host,
            Some(
                port.parse::<u16>()
                    .map_err(|e| AsbError::Config(format!("bad port {:?}: {e}", redact(port))))?,
            ),
        ),
        _ => (authority, None),
    };
    if host.is_empty() {
        return Err(AsbError::Config("the URL names no namespace host".into()));
    }
    Ok((host.to_owned(), port))
}

use babelqueue_core::redact::redact;

/// The key name or key of the URL's userinfo, percent-decoded (a `+` is a plus sign: a SAS
/// key is base64, whose `+` must survive; see [`babelqueue_core::options`]).
fn percent_decode(text: &str) -> String {
    babelqueue_core::options::decode_lossy(text, babelqueue_core::options::Component::Userinfo)
}

impl AsbOptions {
    /// Parses a Service Bus connection string: `Endpoint=sb://<host>/;SharedAccessKeyName=…;
    /// SharedAccessKey=…` (`UseDevelopmentEmulator=true` selects plain AMQP on 5672).
    pub fn from_connection_string(text: &str) -> Result<AsbOptions, AsbError> {
        let mut fields: HashMap<String, String> = HashMap::new();
        for (n, part) in text
            .split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .enumerate()
        {
            // The part is not shown: it may be a key that lost its `SharedAccessKey=`.
            let (k, v) = part.split_once('=').ok_or_else(|| {
                AsbError::Config(format!(
                    "part {} of the connection string is not key=value",
                    n + 1
                ))
            })?;
            fields.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
        let endpoint = fields
            .get("endpoint")
            .ok_or_else(|| AsbError::Config("the connection string has no Endpoint".into()))?;
        let authority = endpoint
            .split_once("://")
            .map_or(endpoint.as_str(), |(_, rest)| rest)
            .trim_end_matches('/');
        let (host, port) = host_port(authority)?;
        let emulator = fields
            .get("usedevelopmentemulator")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let key_name = fields.get("sharedaccesskeyname").cloned().ok_or_else(|| {
            AsbError::Config("the connection string has no SharedAccessKeyName".into())
        })?;
        let key = fields.get("sharedaccesskey").cloned().ok_or_else(|| {
            AsbError::Config("the connection string has no SharedAccessKey".into())
        })?;
        Ok(AsbOptions {
            host,
            port: port.unwrap_or(if emulator { 5672 } else { 5671 }),
            tls: !emulator,
            key_name,
            key,
        })
    }

    /// Reads `sb://[<key name>:<key>@]<namespace host>[:port]` (also `servicebus://`,
    /// `azureservicebus://`). A connection string (`connection_string`, else the
    /// `AZURE_SERVICEBUS_CONNECTION_STRING` environment variable) takes precedence over the
    /// URL, as in the reference SDK; without either, the URL must carry the key.
    pub fn from_url(url: &str, connection_string: Option<&str>) -> Result<AsbOptions, AsbError> {
        let rest = check_scheme(url)?;
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = host_port(hostport)?;
        let from_env = std::env::var(CONNECTION_STRING_ENV).ok();
        if let Some(text) = connection_string
            .or(from_env.as_deref())
            .filter(|t| !t.trim().is_empty())
        {
            return AsbOptions::from_connection_string(text);
        }
        let Some((key_name, key)) = userinfo.and_then(|u| u.split_once(':')) else {
            // No key: Azure AD, as the reference SDK's default (`DefaultAzureCredential`).
            return Ok(AsbOptions {
                host,
                port: port.unwrap_or(5671),
                tls: true,
                key_name: String::new(),
                key: String::new(),
            });
        };
        Ok(AsbOptions {
            host,
            port: port.unwrap_or(5671),
            tls: true,
            key_name: percent_decode(key_name),
            key: percent_decode(key),
        })
    }
}

impl AsbOptions {
    /// Whether these options authenticate with Azure AD (no shared access key is set).
    pub fn uses_azure_ad(&self) -> bool {
        self.key.is_empty()
    }
}

/// What follows `<scheme>://` in a Service Bus URL, or the error for a URL that is none.
pub(crate) fn check_scheme(url: &str) -> Result<&str, AsbError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| AsbError::Config(format!("{:?} is not a URL", redact(url))))?;
    if !SCHEMES.contains(&scheme) {
        return Err(AsbError::Config(format!(
            "{:?} is not an Azure Service Bus scheme (sb, servicebus, azureservicebus)",
            redact(scheme)
        )));
    }
    Ok(rest)
}

/// A SAS token for `resource` (`sb://<host>/<entity>`), valid until `expiry` (epoch seconds):
/// `SharedAccessSignature sr=<uri>&sig=<base64 HMAC-SHA256>&se=<expiry>&skn=<key name>`.
pub fn sas_token(resource: &str, key_name: &str, key: &str, expiry: u64) -> String {
    use aws_lc_rs::hmac;
    let encoded = babelqueue_core::gate::escape(resource, false);
    let signing = hmac::Key::new(hmac::HMAC_SHA256, key.as_bytes());
    let signature = hmac::sign(&signing, format!("{encoded}\n{expiry}").as_bytes());
    let signature = babelqueue_core::gate::escape(&STANDARD.encode(signature.as_ref()), false);
    format!(
        "SharedAccessSignature sr={encoded}&sig={signature}&se={expiry}&skn={}",
        babelqueue_core::gate::escape(key_name, false)
    )
}

/// How long a put token is valid.
pub(crate) const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// Tokens are put again when less than this is left.
const TOKEN_RENEW_MARGIN: Duration = Duration::from_secs(300);

/// The token put on the `$cbs` node for one entity.
#[derive(Clone, PartialEq, Eq)]
struct Grant {
    token: String,
    token_type: &'static str,
    expires_at: SystemTime,
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grant")
            .field("token", &"***")
            .field("token_type", &self.token_type)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// A SAS token for `resource`, valid for [`TOKEN_LIFETIME`] from `now`.
fn sas_grant(config: &AsbOptions, resource: &str, now: SystemTime) -> Grant {
    let expiry = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .saturating_add(TOKEN_LIFETIME);
    Grant {
        token: sas_token(resource, &config.key_name, &config.key, expiry.as_secs()),
        token_type: "servicebus.windows.net:sastoken",
        expires_at: UNIX_EPOCH + Duration::from_secs(expiry.as_secs()),
    }
}

/// An Azure AD token, put with the CBS token type `jwt`.
fn aad_grant(token: &AccessToken) -> Grant {
    Grant {
        token: token.token.clone(),
        token_type: "jwt",
        expires_at: token.expires_at,
    }
}

/// Whether `token` has more than [`TOKEN_RENEW_MARGIN`] left at `now`.
fn fresh(token: &AccessToken, now: SystemTime) -> bool {
    token
        .expires_at
        .duration_since(now)
        .is_ok_and(|left| left > TOKEN_RENEW_MARGIN)
}

pub(crate) struct Link {
    connection: ConnectionHandle<()>,
    pub(crate) session: SessionHandle<()>,
    cbs: CbsClient,
    tokens: HashMap<String, Instant>,
    /// The Azure AD token last obtained (one serves every entity of the namespace).
    aad: Option<AccessToken>,
}

/// [`ServiceBusClient`] over AMQP 1.0: one connection and session, a CBS link for SAS
/// tokens (renewed before they expire), one sender and one PeekLock receiver (prefetch 1)
/// per queue, created on first use and cached.
pub struct AmqpServiceBus {
    config: AsbOptions,
    credential: Option<Arc<dyn TokenCredential>>,
    pub(crate) link: Mutex<Link>,
    senders: Mutex<HashMap<String, Arc<Mutex<Sender>>>>,
    receivers: Mutex<HashMap<String, Arc<Mutex<Receiver>>>>,
    locks: Mutex<HashMap<u64, DeliveryInfo>>,
    next_lock: AtomicU64,
}

impl fmt::Debug for AmqpServiceBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmqpServiceBus")
            .field("config", &self.config)
            .field("credential", &self.credential)
            .finish_non_exhaustive()
    }
}

fn amqp_err(context: &str, e: impl fmt::Display) -> AsbError {
    AsbError::Connection(format!("{context}: {e}"))
}

fn refused(context: &str, e: impl fmt::Display) -> AsbError {
    AsbError::Rejected(format!("{context}: {e}"))
}

/// A refused `put-token`: `401 Unauthorized` means the SAS token (the key) was not accepted.
fn token_refused(context: &str, e: &fe2o3_amqp_management::error::Error) -> AsbError {
    match e {
        fe2o3_amqp_management::error::Error::Status(status) if status.code.0.get() == 401 => {
            AsbError::Auth(format!("{context}: {e}"))
        }
        other => refused(context, other),
    }
}

impl AmqpServiceBus {
    /// Opens the connection, the session and the CBS link. Without a shared access key the
    /// client authenticates with Azure AD through [`DefaultCredential::from_env`]: the
    /// `AZURE_*` environment variables, then the machine's managed identity, then the Azure
    /// CLI. The first token is asked for before connecting, so a machine where no link works
    /// fails here with an error listing why each failed.
    pub async fn connect(config: AsbOptions) -> Result<AmqpServiceBus, AsbError> {
        let credential = config
            .uses_azure_ad()
            .then(|| Arc::new(DefaultCredential::from_env()) as Arc<dyn TokenCredential>);
        AmqpServiceBus::open(config, credential).await
    }

    /// Like [`connect`](Self::connect), authenticating with Azure AD tokens from `credential`
    /// (the options' shared access key, if any, is not used). The first token is asked for
    /// before connecting.
    pub async fn connect_with_credential(
        config: AsbOptions,
        credential: Arc<dyn TokenCredential>,
    ) -> Result<AmqpServiceBus, AsbError> {
        AmqpServiceBus::open(config, Some(credential)).await
    }

    async fn open(
        config: AsbOptions,
        credential: Option<Arc<dyn TokenCredential>>,
    ) -> Result<AmqpServiceBus, AsbError> {
        // A credential that cannot give a token fails before any connection is tried.
        let aad = match &credential {
            Some(credential) => Some(credential.get_token(SERVICE_BUS_SCOPE).await?),
            None => None,
        };
        let scheme = if config.tls { "amqps" } else { "amqp" };
        let url = format!("{scheme}://{}:{}", config.host, config.port);
        let container = format!("babelqueue-rust-{}", std::process::id());
        let builder = Connection::builder()
            .container_id(container)
            .hostname(config.host.as_str())
            .sasl_profile(SaslProfile::Anonymous)
            .alt_tls_establishment(config.tls);
        let mut connection =
            tokio::time::timeout(Duration::from_secs(10), builder.open(url.as_str()))
                .await
                .map_err(|_| AsbError::Timeout(format!("connecting to {url}")))?
                .map_err(|e| amqp_err(&format!("connecting to {url}"), e))?;
        let mut session = Session::begin(&mut connection)
            .await
            .map_err(|e| amqp_err("beginning a session", e))?;
        let cbs = CbsClient::attach(&mut session)
            .await
            .map_err(|e| amqp_err("attaching the $cbs link", e))?;
        Ok(AmqpServiceBus {
            config,
            credential,
            link: Mutex::new(Link {
                connection,
                session,
                cbs,
                tokens: HashMap::new(),
                aad,
            }),
            senders: Mutex::new(HashMap::new()),
            receivers: Mutex::new(HashMap::new()),
            locks: Mutex::new(HashMap::new()),
            next_lock: AtomicU64::new(1),
        })
    }

    /// Puts (or renews) the token for `queue`: a SAS token signed with the key, or the
    /// Azure AD token.
    pub(crate) async fn authorize(&self, link: &mut Link, queue: &str) -> Result<(), AsbError> {
        if link.tokens.get(queue).is_some_and(|until| {
            until.saturating_duration_since(Instant::now()) > TOKEN_RENEW_MARGIN
        }) {
            return Ok(());
        }
        let resource = format!("sb://{}/{queue}", self.config.host);
        let now = SystemTime::now();
        let grant = match &self.credential {
            None => sas_grant(&self.config, &resource, now),
            Some(credential) => {
                let token = match link.aad.take().filter(|t| fresh(t, now)) {
                    Some(token) => token,
                    None => credential.get_token(SERVICE_BUS_SCOPE).await?,
                };
                let grant = aad_grant(&token);
                link.aad = Some(token);
                grant
            }
        };
        let millis = i64::try_from(
            grant
                .expires_at
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis(),
        )
        .unwrap_or(i64::MAX);
        link.cbs
            .put_token(
                resource.clone(),
                CbsToken::new(
                    grant.token,
                    grant.token_type,
                    Timestamp::from_milliseconds(millis),
                ),
            )
            .await
            .map_err(|e| {
                let whose = match &self.credential {
                    None => format!("the SAS token of the key {:?}", self.config.key_name),
                    Some(_) => "the Azure AD token".to_owned(),
                };
                token_refused(
                    &format!("{} refused {whose} for {resource}", self.config.host),
                    &e,
                )
            })?;
        let valid = grant.expires_at.duration_since(now).unwrap_or_default();
        link.tokens.insert(queue.to_owned(), Instant::now() + valid);
        Ok(())
    }

    async fn sender(&self, queue: &str) -> Result<Arc<Mutex<Sender>>, AsbError> {
        let mut link = self.link.lock().await;
        self.authorize(&mut link, queue).await?;
        let mut senders = self.senders.lock().await;
        if let Some(s) = senders.get(queue) {
            return Ok(s.clone());
        }
        let sender = Sender::attach(
            &mut link.session,
            format!("babelqueue-sender-{queue}"),
            queue,
        )
        .await
        .map_err(|e| refused(&format!("attaching a sender to {queue}"), e))?;
        let sender = Arc::new(Mutex::new(sender));
        senders.insert(queue.to_owned(), sender.clone());
        Ok(sender)
    }

    async fn receiver(&self, queue: &str) -> Result<Arc<Mutex<Receiver>>, AsbError> {
        let mut link = self.link.lock().await;
        self.authorize(&mut link, queue).await?;
        let mut receivers = self.receivers.lock().await;
        if let Some(r) = receivers.get(queue) {
            return Ok(r.clone());
        }
        let receiver = Receiver::builder()
            .name(format!("babelqueue-receiver-{queue}"))
            .source(queue)
            .sender_settle_mode(SenderSettleMode::Unsettled)
            .receiver_settle_mode(ReceiverSettleMode::First)
            .credit_mode(CreditMode::Auto(1))
            .auto_accept(false)
            .attach(&mut link.session)
            .await
            .map_err(|e| refused(&format!("attaching a receiver to {queue}"), e))?;
        let receiver = Arc::new(Mutex::new(receiver));
        receivers.insert(queue.to_owned(), receiver.clone());
        Ok(receiver)
    }

    async fn settle(
        &self,
        lock: &LockToken,
        how: impl AsyncFnOnce(&Receiver, DeliveryInfo) -> Result<(), AsbError>,
    ) -> Result<(), AsbError> {
        let info = self.locks.lock().await.remove(&lock.id).ok_or_else(|| {
            AsbError::ForeignDelivery(format!("lock {} on {} is not held", lock.id, lock.queue))
        })?;
        let receiver = self.receiver(&lock.queue).await?;
        let receiver = receiver.lock().await;
        how(&receiver, info).await
    }
}

fn to_simple(value: &AmqpValue) -> SimpleValue {
    match value {
        AmqpValue::Null => SimpleValue::Null,
        AmqpValue::Bool(b) => SimpleValue::Bool(*b),
        AmqpValue::Ubyte(n) => SimpleValue::Ubyte(*n),
        AmqpValue::Ushort(n) => SimpleValue::Ushort(*n),
        AmqpValue::Uint(n) => SimpleValue::Uint(*n),
        AmqpValue::Ulong(n) => SimpleValue::Ulong(*n),
        AmqpValue::Byte(n) => SimpleValue::Byte(*n),
        AmqpValue::Short(n) => SimpleValue::Short(*n),
        AmqpValue::Int(n) => SimpleValue::Int(*n),
        AmqpValue::Long(n) => SimpleValue::Long(*n),
        AmqpValue::Float(f) => SimpleValue::Float((*f).into()),
        AmqpValue::Double(f) => SimpleValue::Double((*f).into()),
        AmqpValue::String(s) => SimpleValue::String(s.clone()),
        AmqpValue::Binary(b) => SimpleValue::Binary(b.clone().into()),
        AmqpValue::Other(_, text) => SimpleValue::String(text.clone()),
    }
}

fn from_simple(value: &SimpleValue) -> AmqpValue {
    match value {
        SimpleValue::Null => AmqpValue::Null,
        SimpleValue::Bool(b) => AmqpValue::Bool(*b),
        SimpleValue::Ubyte(n) => AmqpValue::Ubyte(*n),
        SimpleValue::Ushort(n) => AmqpValue::Ushort(*n),
        SimpleValue::Uint(n) => AmqpValue::Uint(*n),
        SimpleValue::Ulong(n) => AmqpValue::Ulong(*n),
        SimpleValue::Byte(n) => AmqpValue::Byte(*n),
        SimpleValue::Short(n) => AmqpValue::Short(*n),
        SimpleValue::Int(n) => AmqpValue::Int(*n),
        SimpleValue::Long(n) => AmqpValue::Long(*n),
        SimpleValue::Float(f) => AmqpValue::Float(f.into_inner()),
        SimpleValue::Double(f) => AmqpValue::Double(f.into_inner()),
        SimpleValue::String(s) => AmqpValue::String(s.clone()),
        SimpleValue::Binary(b) => AmqpValue::Binary(b.to_vec()),
        other => AmqpValue::Other("amqp".to_owned(), format!("{other:?}")),
    }
}

pub(crate) fn body_bytes(body: Body<Value>) -> Vec<u8> {
    match body {
        Body::Data(sections) => sections.into_iter().flat_map(|d| d.0.into_vec()).collect(),
        Body::Value(v) => match v.0 {
            Value::String(s) => s.into_bytes(),
            Value::Binary(b) => b.into_vec(),
            other => format!("{other:?}").into_bytes(),
        },
        Body::Sequence(s) => format!("{s:?}").into_bytes(),
        Body::Empty => Vec::new(),
    }
}

#[async_trait]
impl ServiceBusClient for AmqpServiceBus {
    async fn send(&self, queue: &str, message: Outgoing) -> Result<(), AsbError> {
        let mut properties = Properties {
            content_type: Some(Symbol::from(message.content_type.as_str())),
            subject: message.subject,
            ..Properties::default()
        };
        properties.message_id = message.message_id.map(MessageId::String);
        properties.correlation_id = message.correlation_id.map(MessageId::String);
        let mut map = OrderedMap::new();
        for (k, v) in &message.application_properties {
            map.insert(k.clone(), to_simple(v));
        }
        let amqp = Message::builder()
            .properties(properties)
            .application_properties(ApplicationProperties(map))
            .data(Binary::from(message.body))
            .build();
        let sender = self.sender(queue).await?;
        let outcome = sender
            .lock()
            .await
            .send(amqp)
            .await
            .map_err(|e| amqp_err(&format!("sending to {queue}"), e))?;
        match outcome {
            Outcome::Accepted(_) => Ok(()),
            other => Err(refused(
                &format!("sending to {queue}"),
                format!("{other:?}"),
            )),
        }
    }

    async fn receive(&self, queue: &str, timeout: Duration) -> Result<Option<Received>, AsbError> {
        let receiver = self.receiver(queue).await?;
        let mut receiver = receiver.lock().await;
        let delivery = match tokio::time::timeout(timeout, receiver.recv::<Body<Value>>()).await {
            Err(_) => return Ok(None),
            Ok(Err(e)) => {
                drop(receiver);
                self.receivers.lock().await.remove(queue);
                return Err(amqp_err(&format!("receiving from {queue}"), e));
            }
            Ok(Ok(delivery)) => delivery,
        };
        drop(receiver);
        let (info, message) = delivery.into_parts();
        let id = self.next_lock.fetch_add(1, Ordering::Relaxed);
        self.locks.lock().await.insert(id, info);
        let delivery_count = message
            .header
            .as_ref()
            .map_or(0, |h| h.delivery_count)
            .saturating_add(1);
        let application_properties = message
            .application_properties
            .as_ref()
            .map(|p| {
                p.0.iter()
                    .map(|(k, v)| (k.clone(), from_simple(v)))
                    .collect()
            })
            .unwrap_or_default();
        let system = SystemProperties::of(message.properties, message.message_annotations.as_ref());
        Ok(Some(Received {
            body: body_bytes(message.body),
            application_properties,
            delivery_count,
            lock: LockToken {
                queue: queue.to_owned(),
                id,
            },
            system,
        }))
    }

    async fn complete(&self, lock: &LockToken) -> Result<(), AsbError> {
        self.settle(lock, async |r: &Receiver, info| {
            r.accept(info).await.map_err(|e| refused("completing", e))
        })
        .await
    }

    async fn abandon(&self, lock: &LockToken) -> Result<(), AsbError> {
        self.settle(lock, async |r: &Receiver, info| {
            r.modify(
                info,
                Modified {
                    delivery_failed: None,
                    undeliverable_here: None,
                    message_annotations: None,
                },
            )
            .await
            .map_err(|e| refused("abandoning", e))
        })
        .await
    }

    async fn dead_letter(
        &self,
        lock: &LockToken,
        reason: &str,
        description: &str,
    ) -> Result<(), AsbError> {
        let mut info_fields = Fields::new();
        info_fields.insert(
            Symbol::from("DeadLetterReason"),
            Value::String(reason.to_owned()),
        );
        info_fields.insert(
            Symbol::from("DeadLetterErrorDescription"),
            Value::String(description.to_owned()),
        );
        let error = definitions::Error::new(
            ErrorCondition::Custom(Symbol::from("com.microsoft:dead-letter")),
            Some(description.to_owned()),
            Some(info_fields),
        );
        self.settle(lock, async move |r: &Receiver, info| {
            r.reject(info, error)
                .await
                .map_err(|e| refused("dead-lettering", e))
        })
        .await
    }

    async fn peek(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, AsbError> {
        self.peek_bodies(queue, max).await
    }

    async fn counts(&self, queue: &str) -> Result<Option<crate::stats::QueueCounts>, AsbError> {
        let base = format!("https://{}", self.config.host);
        let resource = format!("{base}/{queue}");
        let authorization =
            crate::stats::authorization(&self.config, self.credential.as_deref(), &resource)
                .await?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| AsbError::Client(format!("management HTTP client: {e}")))?;
        crate::stats::fetch(&http, &base, queue, &authorization).await
    }

    async fn close(&self) -> Result<(), AsbError> {
        for (_, sender) in self.senders.lock().await.drain() {
            if let Ok(sender) = Arc::try_unwrap(sender) {
                let _ = sender.into_inner().close().await;
            }
        }
        for (_, receiver) in self.receivers.lock().await.drain() {
            if let Ok(receiver) = Arc::try_unwrap(receiver) {
                let _ = receiver.into_inner().close().await;
            }
        }
        let mut link = self.link.lock().await;
        let _ = link.session.close().await;
        link.connection
            .close()
            .await
            .map_err(|e| amqp_err("closing the connection", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_strings() {
        let c = AsbOptions::from_connection_string(
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=abc=",
        )
        .unwrap();
        assert_eq!(c.host, "ns.servicebus.windows.net");
        assert_eq!((c.port, c.tls), (5671, true));
        assert_eq!(c.key, "abc=");
        assert!(!format!("{c:?}").contains("abc="), "the key is redacted");
        let c = AsbOptions::from_connection_string(
            "Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;",
        )
        .unwrap();
        assert_eq!((c.host.as_str(), c.port, c.tls), ("localhost", 5672, false));
        assert!(AsbOptions::from_connection_string("Endpoint=sb://x/").is_err());
        assert!(AsbOptions::from_connection_string("garbage").is_err());
    }

    #[test]
    fn urls() {
        let c =
            AsbOptions::from_url("sb://name:k%2Fe%3Dy@ns.servicebus.windows.net", None).unwrap();
        assert_eq!((c.key_name.as_str(), c.key.as_str()), ("name", "k/e=y"));
        let c = AsbOptions::from_url(
            "servicebus://ignored",
            Some("Endpoint=sb://127.0.0.1:9/;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"),
        )
        .unwrap();
        assert_eq!((c.host.as_str(), c.port), ("127.0.0.1", 9));
        let err = AsbOptions::from_url("kafka://x", None).unwrap_err();
        assert!(err.to_string().contains("not an Azure Service Bus scheme"));
        assert!(AsbOptions::from_url("sb://", Some("")).is_err());
    }

    #[test]
    fn a_url_without_a_key_means_azure_ad() {
        if std::env::var_os(CONNECTION_STRING_ENV).is_some() {
            return; // the environment's connection string would win
        }
        let c = AsbOptions::from_url("sb://acme.servicebus.windows.net", None).unwrap();
        assert!(c.uses_azure_ad());
        assert_eq!(
            (c.host.as_str(), c.port, c.tls),
            ("acme.servicebus.windows.net", 5671, true)
        );
        let c = AsbOptions::from_url("sb://k:v@acme.servicebus.windows.net", None).unwrap();
        assert!(!c.uses_azure_ad());
    }

    #[test]
    fn a_key_puts_a_sas_token_and_a_credential_a_jwt() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let options = AsbOptions::from_url("sb://k:v@ns.servicebus.windows.net", None).unwrap();
        let sas = sas_grant(&options, "sb://ns.servicebus.windows.net/q", now);
        assert_eq!(sas.token_type, "servicebus.windows.net:sastoken");
        assert!(
            sas.token.starts_with("SharedAccessSignature sr="),
            "{sas:?}"
        );
        assert!(sas.token.contains("&se=1700003600&skn=k"), "{}", sas.token);
        assert_eq!(sas.expires_at, now + TOKEN_LIFETIME);
        let token = AccessToken {
            token: "ey.aad".into(),
            expires_at: now + Duration::from_secs(3599),
        };
        let jwt = aad_grant(&token);
        assert_eq!((jwt.token.as_str(), jwt.token_type), ("ey.aad", "jwt"));
        assert_eq!(jwt.expires_at, token.expires_at);
        assert!(!format!("{jwt:?}{sas:?}").contains("ey.aad"));
        assert!(!format!("{jwt:?}{sas:?}").contains("sig="));
        // an Azure AD token is asked for again within the renewal margin of its expiry
        assert!(fresh(&token, now));
        assert!(!fresh(&token, token.expires_at - TOKEN_RENEW_MARGIN));
        assert!(!fresh(&token, token.expires_at + Duration::from_secs(1)));
    }

    #[test]
    fn a_refused_token_is_an_auth_error() {
        use fe2o3_amqp_management::error::{Error as MgmtError, StatusError};
        use fe2o3_amqp_management::status::StatusCode;
        let status = |code: u16| {
            MgmtError::Status(StatusError {
                code: StatusCode(std::num::NonZeroU16::new(code).unwrap()),
                description: Some("InvalidSignature: The token has an invalid signature.".into()),
            })
        };
        let context =
            "ns.servicebus.windows.net refused the SAS token of the key \"k\" for sb://ns/q";
        let error = token_refused(context, &status(401));
        assert_eq!(
            error.kind(),
            babelqueue_core::TransportErrorKind::Auth,
            "{error:?}"
        );
        assert!(!error.is_transient());
        let text = error.to_string();
        assert!(
            text.contains("refused the credentials") && text.contains("ns.servicebus.windows.net"),
            "{text}"
        );
        let mapped = babelqueue_core::TransportError::from(error);
        assert_eq!(mapped.kind(), babelqueue_core::TransportErrorKind::Auth);
        // Other statuses stay refusals.
        assert_eq!(
            token_refused(context, &status(404)).kind(),
            babelqueue_core::TransportErrorKind::Rejected
        );
    }

    /// A port on 127.0.0.1 that nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        drop(listener);
        port
    }

    fn shown(error: AsbError) -> String {
        let text = format!("{error}\n{error:?}");
        let runtime = babelqueue_core::TransportError::from(error);
        format!("{text}\n{runtime}\n{runtime:?}")
    }

    #[test]
    fn a_bad_url_or_connection_string_never_shows_the_key() {
        for url in [
            "sb://k:hunter2@127.0.0.1:99999",
            "sb://k:hunter2@",
            "sb:/k:hunter2@ns.servicebus.windows.net",
            "k:hunter2@ns.servicebus.windows.net",
            "http://k:hunter2@ns.servicebus.windows.net",
        ] {
            let error = AsbOptions::from_url(url, None).unwrap_err();
            assert_eq!(
                error.kind(),
                babelqueue_core::TransportErrorKind::Config,
                "{url}: {error}"
            );
            let text = shown(error);
            assert!(!text.contains("hunter2"), "{url}: {text}");
        }
        for text in [
            "Endpoint=sb://h/;SharedAccessKeyName=k;hunter2",
            "Endpoint=sb://h:99999/;SharedAccessKeyName=k;SharedAccessKey=hunter2",
            "SharedAccessKeyName=k;SharedAccessKey=hunter2",
        ] {
            let error = AsbOptions::from_connection_string(text).unwrap_err();
            let shown = shown(error);
            assert!(!shown.contains("hunter2"), "{text}: {shown}");
        }
    }

    #[tokio::test]
    async fn a_refused_connection_never_shows_the_key() {
        let port = closed_port();
        let url = format!("sb://k:hunter2@127.0.0.1:{port}");
        let string = format!(
            "Endpoint=sb://127.0.0.1:{port}/;SharedAccessKeyName=k;SharedAccessKey=hunter2;UseDevelopmentEmulator=true"
        );
        let from_string = AsbOptions::from_connection_string(&string).unwrap();
        for (url, options) in [(url.as_str(), None), ("sb://ignored", Some(from_string))] {
            let error = match options {
                None => crate::AsbTransport::connect(url).await,
                Some(options) => crate::AsbTransport::connect_with(url, options).await,
            }
            .unwrap_err();
            assert!(error.is_transient(), "{error:?}");
            assert!(error.to_string().contains("127.0.0.1"), "{error}");
            let text = shown(error);
            assert!(!text.contains("hunter2"), "{url}: {text}");
        }
    }

    #[tokio::test]
    async fn the_first_token_is_asked_for_before_connecting() {
        use crate::credential::DefaultCredential;
        let port = closed_port();
        let options = AsbOptions::from_url(&format!("sb://127.0.0.1:{port}"), Some("")).unwrap();
        // a chain where no link works: its error, before any connection is tried
        let nothing = DefaultCredential::empty().with_link(
            "Azure CLI",
            Arc::new(crate::AzureCliCredential::new().with_program("/nonexistent/bq-az")),
        );
        let error = AmqpServiceBus::connect_with_credential(options.clone(), Arc::new(nothing))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), babelqueue_core::TransportErrorKind::Config);
        let text = error.to_string();
        assert!(
            text.contains("Azure CLI: ") && text.contains(CONNECTION_STRING_ENV),
            "{text}"
        );
        // a credential that gives a token: on to connect, and the closed port says so
        #[derive(Debug)]
        struct Gives;
        #[async_trait]
        impl TokenCredential for Gives {
            async fn get_token(&self, _: &str) -> Result<AccessToken, AsbError> {
                Ok(AccessToken {
                    token: "ey.given".into(),
                    expires_at: SystemTime::now() + Duration::from_secs(3600),
                })
            }
        }
        let error = AmqpServiceBus::connect_with_credential(options, Arc::new(Gives))
            .await
            .unwrap_err();
        assert!(error.is_transient(), "{error:?}");
        assert!(error.to_string().contains("127.0.0.1"), "{error}");
        assert!(!shown(error).contains("ey.given"));
    }

    #[test]
    fn typed_values_cross_the_amqp_mapping_unchanged() {
        for value in [
            AmqpValue::Null,
            AmqpValue::Bool(true),
            AmqpValue::Ubyte(1),
            AmqpValue::Ushort(1),
            AmqpValue::Uint(1),
            AmqpValue::Ulong(1),
            AmqpValue::Byte(-1),
            AmqpValue::Short(1),
            AmqpValue::Int(1),
            AmqpValue::Long(1_749_132_727_000),
            AmqpValue::Float(1.0),
            AmqpValue::Double(1.5),
            AmqpValue::String("php".into()),
            AmqpValue::Binary(b"1".to_vec()),
        ] {
            assert_eq!(from_simple(&to_simple(&value)), value);
        }
        assert!(matches!(
            from_simple(&SimpleValue::Timestamp(Timestamp::from_milliseconds(1))),
            AmqpValue::Other(..)
        ));
    }

    #[test]
    fn bodies_are_read_as_bytes() {
        use fe2o3_amqp::types::messaging::{AmqpValue as Section, Batch, Data};
        let data = Body::Data(Batch::new(vec![
            Data::from(b"{\"a\":".to_vec()),
            Data::from(b"1}\xff".to_vec()),
        ]));
        assert_eq!(body_bytes(data), b"{\"a\":1}\xff");
        assert_eq!(
            body_bytes(Body::Value(Section(Value::String("{}".into())))),
            b"{}"
        );
        assert_eq!(body_bytes(Body::Empty), b"");
    }

    #[test]
    fn sas_tokens_are_signed_and_escaped() {
        let token = sas_token(
            "sb://ns.servicebus.windows.net/orders",
            "key name",
            "secret",
            1_700_000_000,
        );
        assert!(token.starts_with(
            "SharedAccessSignature sr=sb%3A%2F%2Fns.servicebus.windows.net%2Forders&sig="
        ));
        assert!(token.ends_with("&se=1700000000&skn=key%20name"));
        // HMAC-SHA256("secret", "<encoded uri>\n1700000000"), standard base64, escaped: the
        // bytes Python's hmac + base64.b64encode + urllib.parse.quote give.
        assert!(
            token.contains("&sig=MUJFQJrJPIZb%2Fd3l8Hhlz%2F8puO3nf2yIguorXC3CIZY%3D&"),
            "{token}"
        );
        let again = sas_token(
            "sb://ns.servicebus.windows.net/orders",
            "key name",
            "secret",
            1_700_000_000,
        );
        assert_eq!(token, again);
        assert_ne!(
            token,
            sas_token(
                "sb://ns.servicebus.windows.net/orders",
                "key name",
                "other",
                1_700_000_000
            )
        );
    }
}
