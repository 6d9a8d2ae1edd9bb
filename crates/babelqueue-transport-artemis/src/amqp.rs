//! [`AmqpClient`]: the real [`Client`], on `fe2o3-amqp`, with reconnect supervision.
//!
//! One connection with one session; one sender and one receiver link per address, attached on
//! first use with the AMQP `queue` capability (Artemis: an ANYCAST address and queue).
//!
//! **Supervision.** Any failure of the connection, the session or a link marks the connection
//! broken; the next operation opens a new one (the old one is closed, so every delivery it held
//! unsettled goes back to its queue and is delivered again). A `receive` on a broken connection
//! returns a transient error, and the runtime's consume loop pauses and polls again, so a worker
//! rides out a broker restart. A `send` retries on its own, with back-off, for up to
//! `reconnect_timeout`; a retried send may store the message twice (at least once, never lost).
//! A send to a full address is not retried (below).
//!
//! **Credit.** Receiver links use manual credit, granted by [`CreditWindow`]: the window starts
//! at the configured floor (1) and follows the runtime's `concurrency`.
//!
//! **A full address.** Artemis grants a sender link no credit while its address is full
//! (`max-size-bytes` reached under the `BLOCK` or `FAIL` address-full-policy), so a send on a
//! link attached then would wait forever without being refused. A send therefore waits for
//! credit at most
//! `send_credit_timeout` (default 2 s) and then fails with [`ArtemisError::AddressBlocked`]
//! (transient). That wait comes before anything is transferred: `fe2o3-amqp` builds the
//! transfer only once it holds a credit, so giving up drops the message for good, and a credit
//! granted later is used by a later send for its own message only. The connection is not
//! marked broken (it is fine, and its deliveries stay unsettled with it), and a blocked send
//! is not retried here: the caller decides (the runtime leaves a message whose dead-letter
//! write failed unsettled and moves it behind the others). After a send found no credit, the
//! address counts as blocked on this connection: later sends to it wait only
//! [`BLOCKED_PROBE`] (by then the credit Artemis grants once the address has room again is
//! usually there already), until one gets through. A sender link that got no credit although
//! it was attached at least `send_credit_timeout` ago is detached, and the next send attaches
//! a fresh one (Artemis checks the address again at each attach).
//!
//! The two waits are taken apart with `send_batchable_ref`, which returns once the transfer is
//! handed to the session and leaves the outcome to a future of its own. It sets the transfer's
//! `batchable` hint, which Artemis does not act on: its outcomes come as promptly as for
//! `send_ref` (1 000 sequential publishes measured at the same rate either way). Once a message
//! is transferred, the client waits up to 30 s for its outcome; no outcome in that time means
//! the connection is broken (it is replaced, as above).
//!
//! Sends and receives share the connection and its session but use their own links: a send
//! waiting for credit holds only the lock of its own address's sender link, so receiving and
//! settling go on meanwhile.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::reconnect::ReconnectBackoff;
use fe2o3_amqp::connection::ConnectionHandle;
use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::receiver::{CreditMode, ReceiverDisposer};
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::definitions::{ReceiverSettleMode, SenderSettleMode};
use fe2o3_amqp::types::messaging::{Body, DistributionMode, Modified, Outcome, Source, Target};
use fe2o3_amqp::types::primitives::{Symbol, Value};
use fe2o3_amqp::{Connection, Receiver, Sendable, Sender, Session};
use tokio::net::TcpStream;
use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;

use crate::client::{Client, DeliveryToken, Disposition, Received};
use crate::config::ArtemisOptions;
use crate::credit::CreditWindow;
use crate::error::ArtemisError;
use crate::projection::AmqpMessage;

mod management;
mod operations;

/// Transfers a batch send keeps in flight on one link before it awaits their outcomes.
const SEND_WINDOW: usize = 256;

const LOG: &str = "babelqueue::artemis";
/// TCP connect + AMQP open + session begin.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// Attaching a link, and waiting for the broker's outcome of one send.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);
/// The idle timeout offered to the broker (it then sends a frame at least every half of it), and
/// after which a connection that brought nothing is closed: what notices a connection whose
/// packets vanish without a reset or a close. At 30 s the chaos `artemis-silent` row's worker
/// handled nothing for 31 s; 10 s matches the heartbeat the RabbitMQ transport asks for.
const IDLE_TIMEOUT_MS: u32 = 10_000;
/// How long a send waits for credit on an address whose previous send got none.
pub const BLOCKED_PROBE: Duration = Duration::from_millis(250);
/// The pause between a send's reconnect attempts: 100 ms, doubling up to 2 s, jittered.
const RECONNECT_BACKOFF: ReconnectBackoff =
    ReconnectBackoff::new(Duration::from_millis(100), Duration::from_secs(2));

/// The real AMQP 1.0 client (see the module documentation).
pub struct AmqpClient {
    config: ArtemisOptions,
    tls: Option<tokio_rustls::TlsConnector>,
    container_id: String,
    /// Serialises (re)connecting.
    connecting: AsyncMutex<()>,
    /// The connection in use, for lock-free reads.
    current: RwLock<Option<Arc<Live>>>,
    /// Connection attempts (each attempt gets the next number).
    connections: AtomicU64,
    /// Connections actually opened.
    opened: AtomicU64,
    links: AtomicU64,
    closed: AtomicBool,
}

impl std::fmt::Debug for AmqpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpClient")
            .field("config", &self.config)
            .field("container_id", &self.container_id)
            .field("connections_opened", &self.opened.load(Ordering::Relaxed))
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// One open connection and its links.
struct Live {
    number: u64,
    connection: AsyncMutex<ConnectionHandle<()>>,
    session: AsyncMutex<SessionHandle<()>>,
    senders: Mutex<HashMap<String, Arc<AsyncMutex<SenderSlot>>>>,
    receivers: Mutex<HashMap<String, Arc<ReceiverSlot>>>,
    /// Addresses whose last send got no credit.
    blocked: Mutex<HashSet<String>>,
    broken: AtomicBool,
}

impl Live {
    fn mark_broken(&self, why: &str) {
        if !self.broken.swap(true, Ordering::SeqCst) {
            tracing::warn!(target: LOG, connection = self.number,
                "The Artemis connection #{} is broken ({why}); the next operation reconnects, and \
                 deliveries it held unsettled go back to their queues", self.number);
        }
    }

    fn is_blocked(&self, address: &str) -> bool {
        lock(&self.blocked).contains(address)
    }

    /// Forgets the sender link of `address` when `slot` is still the one on record.
    fn forget_sender(&self, address: &str, slot: &Arc<AsyncMutex<SenderSlot>>) {
        let mut senders = lock(&self.senders);
        if senders.get(address).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            senders.remove(address);
        }
    }
}

/// A sender link. `sender` is `None` once the link was retired (detached after it got no
/// credit); whoever finds it so attaches a new one.
struct SenderSlot {
    sender: Option<Sender>,
    attached_at: Instant,
}

/// A receiver link and its bookkeeping.
struct ReceiverSlot {
    receiver: AsyncMutex<Receiver>,
    disposer: ReceiverDisposer,
    book: Mutex<Book>,
}

struct Book {
    window: CreditWindow,
    pending: HashMap<u64, DeliveryInfo>,
    next_id: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a few map operations; a panic cannot leave them half done.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AmqpClient {
    /// A client for `config`; nothing is opened until [`connect`](AmqpClient::connect) or the
    /// first operation. Fails only on a TLS configuration that cannot be built.
    pub fn new(config: ArtemisOptions) -> Result<AmqpClient, ArtemisError> {
        let tls = if config.tls {
            Some(tls_connector(&config)?)
        } else {
            None
        };
        let container_id = format!(
            "babelqueue-rust-{}-{:x}",
            std::process::id(),
            babelqueue_envelope::now_millis()
        );
        Ok(AmqpClient {
            config,
            tls,
            container_id,
            connecting: AsyncMutex::new(()),
            current: RwLock::new(None),
            connections: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            links: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ArtemisOptions {
        &self.config
    }

    /// Opens the connection now (it is otherwise opened by the first operation).
    pub async fn connect(&self) -> Result<(), ArtemisError> {
        self.live().await.map(|_| ())
    }

    /// How many connections this client has opened so far (1 until the first reconnect).
    pub fn connections_opened(&self) -> u64 {
        self.opened.load(Ordering::SeqCst)
    }

    /// The credit window of the receiver link on `address`, when one is attached:
    /// `(window, in_flight, outstanding)` (see [`CreditWindow`]).
    pub fn credit(&self, address: &str) -> Option<(u32, u32, u32)> {
        let live = self.current()?;
        let slot = lock(&live.receivers).get(address).cloned()?;
        let book = lock(&slot.book);
        Some((
            book.window.window(),
            book.window.in_flight(),
            book.window.outstanding(),
        ))
    }

    fn current(&self) -> Option<Arc<Live>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn connection_error(&self, reason: impl std::fmt::Display) -> ArtemisError {
        ArtemisError::Connection {
            endpoint: self.config.endpoint(),
            reason: reason.to_string(),
        }
    }

    /// The connection in use, opening a new one when there is none or it broke.
    async fn live(&self) -> Result<Arc<Live>, ArtemisError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(ArtemisError::Closed);
        }
        if let Some(live) = self.current().filter(|l| !l.broken.load(Ordering::SeqCst)) {
            return Ok(live);
        }
        let _guard = self.connecting.lock().await;
        if let Some(live) = self.current().filter(|l| !l.broken.load(Ordering::SeqCst)) {
            return Ok(live);
        }
        // Drop the broken connection first: closing it hands its unsettled deliveries back.
        let old = self
            .current
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        drop(old);
        let live = Arc::new(self.open().await?);
        if self.closed.load(Ordering::SeqCst) {
            return Err(ArtemisError::Closed);
        }
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(live.clone());
        Ok(live)
    }

    async fn open(&self) -> Result<Live, ArtemisError> {
        let number = self.connections.fetch_add(1, Ordering::SeqCst) + 1;
        let config = &self.config;
        let opening = async {
            let stream = TcpStream::connect((config.host.as_str(), config.port))
                .await
                .map_err(|e| self.connection_error(e))?;
            let _ = stream.set_nodelay(true);
            let profile = match &config.username {
                Some(user) => SaslProfile::Plain {
                    username: user.clone(),
                    password: config.password.clone().unwrap_or_default(),
                },
                None => SaslProfile::Anonymous,
            };
            let container_id = format!("{}-{number}", self.container_id);
            let builder = Connection::builder()
                .container_id(container_id)
                .hostname(config.host.as_str())
                .sasl_profile(profile)
                .idle_time_out(IDLE_TIMEOUT_MS);
            let opened = match &self.tls {
                Some(connector) => {
                    builder
                        .scheme("amqps")
                        .domain(config.host.as_str())
                        .alt_tls_establishment(true)
                        .tls_connector(connector.clone())
                        .open_with_stream(stream)
                        .await
                }
                None => builder.scheme("amqp").open_with_stream(stream).await,
            };
            let mut connection = opened.map_err(|e| self.open_error(e))?;
            let session = Session::begin(&mut connection)
                .await
                .map_err(|e| self.connection_error(format!("beginning a session: {e}")))?;
            Ok::<_, ArtemisError>((connection, session))
        };
        let (connection, session) = tokio::time::timeout(OPEN_TIMEOUT, opening)
            .await
            .map_err(|_| ArtemisError::Timeout(OPEN_TIMEOUT))??;
        self.opened.fetch_add(1, Ordering::SeqCst);
        tracing::info!(target: LOG, connection = number, endpoint = %config.endpoint(),
            "Connected to Artemis at {} (connection #{number})", config.endpoint());
        Ok(Live {
            number,
            connection: AsyncMutex::new(connection),
            session: AsyncMutex::new(session),
            senders: Mutex::new(HashMap::new()),
            receivers: Mutex::new(HashMap::new()),
            blocked: Mutex::new(HashSet::new()),
            broken: AtomicBool::new(false),
        })
    }

    fn open_error(&self, error: fe2o3_amqp::connection::OpenError) -> ArtemisError {
        use fe2o3_amqp::connection::OpenError;
        match error {
            OpenError::SaslError { code, .. } => ArtemisError::Authentication {
                endpoint: self.config.endpoint(),
                reason: format!("SASL outcome {code:?}"),
            },
            OpenError::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                ArtemisError::Tls(format!(
                    "the TLS handshake with {} failed: {e}",
                    self.config.endpoint()
                ))
            }
            OpenError::InvalidDomain => ArtemisError::Tls(format!(
                "{:?} cannot be used as a TLS server name",
                self.config.host
            )),
            other => self.connection_error(other),
        }
    }

    fn capabilities(&self) -> Vec<Symbol> {
        if self.config.queue_capability {
            vec![Symbol::from("queue")]
        } else {
            Vec::new()
        }
    }

    fn link_name(&self, role: &str, address: &str) -> String {
        let n = self.links.fetch_add(1, Ordering::Relaxed);
        format!("{}-{role}-{address}-{n}", self.container_id)
    }

    async fn sender(
        &self,
        live: &Live,
        address: &str,
    ) -> Result<Arc<AsyncMutex<SenderSlot>>, ArtemisError> {
        if let Some(sender) = lock(&live.senders).get(address) {
            return Ok(sender.clone());
        }
        let mut session = live.session.lock().await;
        if let Some(sender) = lock(&live.senders).get(address) {
            return Ok(sender.clone());
        }
        let mut target = Target::builder().address(address);
        let capabilities = self.capabilities();
        if !capabilities.is_empty() {
            target = target.capabilities(capabilities);
        }
        let attaching = Sender::builder()
            .name(self.link_name("send", address))
            .target(target.build())
            .attach(&mut session);
        let sender = match tokio::time::timeout(OPERATION_TIMEOUT, attaching).await {
            Err(_) => {
                live.mark_broken("attaching a sender timed out");
                return Err(ArtemisError::Timeout(OPERATION_TIMEOUT));
            }
            Ok(Err(e)) => {
                return Err(self.attach_error(
                    live,
                    address,
                    &e.to_string(),
                    remote_refusal_sender(&e),
                ));
            }
            Ok(Ok(sender)) => sender,
        };
        let sender = Arc::new(AsyncMutex::new(SenderSlot {
            sender: Some(sender),
            attached_at: Instant::now(),
        }));
        lock(&live.senders).insert(address.to_owned(), sender.clone());
        Ok(sender)
    }

    async fn receiver(
        &self,
        live: &Live,
        address: &str,
    ) -> Result<Arc<ReceiverSlot>, ArtemisError> {
        if let Some(slot) = lock(&live.receivers).get(address) {
            return Ok(slot.clone());
        }
        let mut session = live.session.lock().await;
        if let Some(slot) = lock(&live.receivers).get(address) {
            return Ok(slot.clone());
        }
        let mut source = Source::builder().address(address);
        let capabilities = self.capabilities();
        if !capabilities.is_empty() {
            source = source.capabilities(capabilities);
        }
        let attaching = Receiver::builder()
            .name(self.link_name("recv", address))
            .source(source.build())
            .credit_mode(CreditMode::Manual)
            .receiver_settle_mode(ReceiverSettleMode::First)
            .auto_accept(false)
            .attach(&mut session);
        let receiver = match tokio::time::timeout(OPERATION_TIMEOUT, attaching).await {
            Err(_) => {
                live.mark_broken("attaching a receiver timed out");
                return Err(ArtemisError::Timeout(OPERATION_TIMEOUT));
            }
            Ok(Err(e)) => {
                return Err(self.attach_error(
                    live,
                    address,
                    &e.to_string(),
                    remote_refusal_receiver(&e),
                ));
            }
            Ok(Ok(receiver)) => receiver,
        };
        let slot = Arc::new(ReceiverSlot {
            disposer: receiver.disposer(),
            receiver: AsyncMutex::new(receiver),
            book: Mutex::new(Book {
                window: CreditWindow::new(self.config.credit),
                pending: HashMap::new(),
                next_id: 0,
            }),
        });
        lock(&live.receivers).insert(address.to_owned(), slot.clone());
        Ok(slot)
    }

    fn attach_error(&self, live: &Live, address: &str, text: &str, refused: bool) -> ArtemisError {
        if refused {
            ArtemisError::LinkRefused {
                address: address.to_owned(),
                reason: text.to_owned(),
            }
        } else {
            live.mark_broken("a link could not be attached");
            self.connection_error(format!("attaching a link to {address:?}: {text}"))
        }
    }

    async fn try_send(
        &self,
        address: &str,
        sendable: &Sendable<Body<Value>>,
    ) -> Result<(), ArtemisError> {
        match self
            .try_send_window(address, std::slice::from_ref(sendable))
            .await
        {
            (_, None) => Ok(()),
            (_, Some(e)) => Err(e),
        }
    }

    /// Sends `messages` in order on the address's link, under its lock: every transfer first
    /// (each with the credit bound of one send), then every outcome awaited. Returns how many
    /// of the first were accepted, and the error the window stopped at (`None` when all were
    /// accepted).
    async fn try_send_window(
        &self,
        address: &str,
        messages: &[Sendable<Body<Value>>],
    ) -> (usize, Option<ArtemisError>) {
        let live = match self.live().await {
            Ok(live) => live,
            Err(e) => return (0, Some(e)),
        };
        // The link of this address, locked: one send at a time per address. A link retired
        // while this send waited for the lock is replaced.
        let (slot, mut guard) = loop {
            let slot = match self.sender(&live, address).await {
                Ok(slot) => slot,
                Err(e) => return (0, Some(e)),
            };
            let guard = slot.clone().lock_owned().await;
            if guard.sender.is_some() {
                break (slot, guard);
            }
            live.forget_sender(address, &slot);
        };
        let credit_timeout = self.config.send_credit_timeout;
        let mut transfers = Vec::with_capacity(messages.len());
        let mut stopped = None;
        for sendable in messages {
            let wait = if live.is_blocked(address) {
                BLOCKED_PROBE.min(credit_timeout)
            } else {
                credit_timeout
            };
            let Some(sender) = guard.sender.as_mut() else {
                stopped = Some(self.connection_error(format!(
                    "the sender link to {address:?} was retired under its lock"
                )));
                break;
            };
            // First the credit and the transfer: `send_batchable_ref` returns once the message
            // is handed to the session, without waiting for the outcome. Giving up before that
            // drops the message unsent: fe2o3-amqp takes a credit before it builds the
            // transfer, and the hand-over to the session (a channel with room for 65 535
            // frames) is cancel safe.
            match tokio::time::timeout(wait, sender.send_batchable_ref(sendable)).await {
                Err(_) => {
                    let newly = lock(&live.blocked).insert(address.to_owned());
                    // A link that had the full bound to get credit and got none is detached
                    // (dropping it sends the detach); the next send attaches a fresh one.
                    let retired = guard.attached_at.elapsed() >= credit_timeout;
                    if retired {
                        guard.sender = None;
                        live.forget_sender(address, &slot);
                    }
                    if newly {
                        tracing::warn!(target: LOG, address, waited = ?wait,
                            "Artemis gave no credit to send to {address:?} within {wait:?}: the \
                             address is full or blocked; the message was not sent, and sends to \
                             it fail fast until Artemis gives credit again");
                    } else {
                        tracing::debug!(target: LOG, address, waited = ?wait, retired,
                            "Still no credit to send to {address:?}; the message was not sent");
                    }
                    stopped = Some(ArtemisError::AddressBlocked {
                        address: address.to_owned(),
                        waited: wait,
                    });
                    break;
                }
                Ok(Err(e)) => {
                    live.mark_broken("sending failed");
                    stopped = Some(self.connection_error(format!("sending to {address:?}: {e}")));
                    break;
                }
                Ok(Ok(transferred)) => transfers.push(transferred),
            }
            if lock(&live.blocked).remove(address) {
                tracing::info!(target: LOG, address, "Artemis gives credit to send to {address:?} again");
            }
        }
        // Then the outcome of every message that was transferred.
        let mut accepted = 0;
        for transferred in transfers {
            let outcome = match tokio::time::timeout(OPERATION_TIMEOUT, transferred).await {
                Err(_) => {
                    live.mark_broken("no outcome for a sent message");
                    return (accepted, Some(ArtemisError::Timeout(OPERATION_TIMEOUT)));
                }
                Ok(Err(e)) => {
                    live.mark_broken("sending failed");
                    let e = self.connection_error(format!("sending to {address:?}: {e}"));
                    return (accepted, Some(e));
                }
                Ok(Ok(outcome)) => outcome,
            };
            match outcome {
                Outcome::Accepted(_) => accepted += 1,
                other => {
                    let e = ArtemisError::NotAccepted {
                        address: address.to_owned(),
                        outcome: format!("{other:?}"),
                    };
                    return (accepted, Some(e));
                }
            }
        }
        (accepted, stopped)
    }
}

fn remote_refusal_sender(e: &fe2o3_amqp::link::SenderAttachError) -> bool {
    use fe2o3_amqp::link::SenderAttachError as E;
    matches!(e, E::RemoteClosedWithError(_))
}

fn remote_refusal_receiver(e: &fe2o3_amqp::link::ReceiverAttachError) -> bool {
    use fe2o3_amqp::link::ReceiverAttachError as E;
    matches!(e, E::RemoteClosedWithError(_))
}

fn tls_connector(config: &ArtemisOptions) -> Result<tokio_rustls::TlsConnector, ArtemisError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = &config.ca_file {
        let mut added = 0;
        let certs = CertificateDer::pem_file_iter(path).map_err(|e| {
            ArtemisError::Tls(format!("cannot read the CA file {}: {e}", path.display()))
        })?;
        for cert in certs {
            let cert = cert.map_err(|e| {
                ArtemisError::Tls(format!("the CA file {} is not PEM: {e}", path.display()))
            })?;
            roots.add(cert).map_err(|e| {
                ArtemisError::Tls(format!(
                    "a certificate in {} is unusable: {e}",
                    path.display()
                ))
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(ArtemisError::Tls(format!(
                "the CA file {} holds no certificate",
                path.display()
            )));
        }
    }
    // One crypto provider for the whole graph: aws-lc-rs, chosen explicitly so an application
    // that links another provider too does not make rustls guess.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ArtemisError::Tls(e.to_string()))?
        .with_root_certificates(roots);
    let tls = match (&config.cert_file, &config.key_file) {
        (Some(cert), Some(key)) => {
            let (chain, key) = client_identity(cert, key)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                ArtemisError::Tls(format!(
                    "the client certificate {} and key do not fit: {e}",
                    cert.display()
                ))
            })?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(tokio_rustls::TlsConnector::from(Arc::new(tls)))
}

/// The certificate chain of the PEM file `cert` and the private key of the PEM file `key`
/// (PKCS#8, PKCS#1 or SEC1), for mutual TLS.
#[allow(clippy::type_complexity)]
pub(crate) fn client_identity(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<
    (
        Vec<rustls_pki_types::CertificateDer<'static>>,
        rustls_pki_types::PrivateKeyDer<'static>,
    ),
    ArtemisError,
> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            ArtemisError::Tls(format!(
                "cannot read the client certificate {}: {e}",
                cert.display()
            ))
        })?;
    if chain.is_empty() {
        return Err(ArtemisError::Tls(format!(
            "the client certificate file {} holds no certificate",
            cert.display()
        )));
    }
    // The key's bytes never reach a message.
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        ArtemisError::Tls(format!("cannot read the client key {}: {e}", key.display()))
    })?;
    Ok((chain, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls_options(
        cert: Option<&std::path::Path>,
        key: Option<&std::path::Path>,
    ) -> ArtemisOptions {
        let mut options = ArtemisOptions::parse("artemis+ssl://h").expect("a TLS URL");
        options.cert_file = cert.map(Into::into);
        options.key_file = key.map(Into::into);
        options
    }

    #[test]
    fn a_client_certificate_is_presented_when_its_key_fits() {
        let (cert, key, other) = babelqueue_testkit::tls::client_files("artemis");
        let with = tls_options(Some(&cert), Some(&key));
        assert!(tls_connector(&with).is_ok());
        let (chain, _) = client_identity(&cert, &key).unwrap();
        assert_eq!(chain.len(), 1);
        // a key of another certificate is refused before any connection
        let err = tls_connector(&tls_options(Some(&cert), Some(&other)))
            .err()
            .expect("a key that does not fit");
        assert!(err.to_string().contains("do not fit"), "{err}");
        assert!(!err.to_string().contains("PRIVATE KEY"), "{err}");
        // a missing file is named
        let missing = cert.with_file_name("missing.pem");
        let err = tls_connector(&tls_options(Some(&missing), Some(&key)))
            .err()
            .expect("a missing certificate file");
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let err = tls_connector(&tls_options(Some(&cert), Some(&missing)))
            .err()
            .expect("a missing key file");
        assert!(
            err.to_string().contains("cannot read the client key"),
            "{err}"
        );
        // the key file holding a certificate only is no key
        let err = tls_connector(&tls_options(Some(&cert), Some(&cert)))
            .err()
            .expect("no key in the key file");
        assert_eq!(err.kind(), babelqueue_core::TransportErrorKind::Config);
    }
}
