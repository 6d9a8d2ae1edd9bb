//! The librdkafka client behind the seam (`rdkafka` 0.39, statically built librdkafka).

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::ClientContext;
use rdkafka::Message;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError as RdError;
use rdkafka::message::{
    BorrowedHeaders, BorrowedMessage, Header, Headers, OwnedHeaders, Timestamp,
};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use crate::client::{
    KafkaClient, KafkaConsumer, KafkaProducer, KafkaReader, LentRecord, OutRecord, PRODUCE_WINDOW,
    Record, RecordHeaders, RevokeHook, TimestampType, TopicPartition,
};
use crate::config::{KafkaOptions, member_instance_id, scrub};
use crate::error::{KafkaError, is_auth_code};

mod consumer;
use consumer::RdConsumer;

mod producer;
pub(crate) use consumer::owned;
use producer::RdProducer;

const LOG: &str = "babelqueue::kafka::librdkafka";

/// How long a blocking seek waits for librdkafka.
const SEEK_TIMEOUT: Duration = Duration::from_secs(10);

/// How many of librdkafka's informational errors one `poll` passes over before it hands one to
/// its caller (who waits out the poll): a bound on the work of one call, far above what a broker
/// outage queues per second.
const SKIP_LIMIT: usize = 1000;

/// How long a refusal of the credentials counts as the current state of the connection.
/// librdkafka reports an identical broker error at most once per 30 s (it suppresses the
/// repeats) and retries a refused connection at least every `reconnect.backoff.max.ms`
/// (10 s), so a refusal that persists is reported again within this window.
const AUTH_FRESH: Duration = Duration::from_secs(45);

/// A refusal of the credentials, as librdkafka reported it.
#[derive(Debug)]
struct AuthFailure {
    at: Instant,
    reason: String,
}

/// What the producer and the consumers of one [`RdKafkaClient`] learned about the
/// credentials: librdkafka reports a refused SASL handshake as a client error event (to the
/// context's error callback) and keeps reconnecting, so a write would otherwise only fail
/// when its delivery timeout passes, and a poll would return nothing forever. The last
/// refusal is kept (secrets masked) until a broker answers a request again or
/// [`AUTH_FRESH`] passes, and every waiting `send` / `poll` hears about a new one at once.
///
/// It also keeps what a confirmed write needs to fail fast on a broker that was never reached
/// (see [`KafkaError::Unreachable`]): librdkafka's last failed connection, and whether every
/// broker was reported down before any answered.
pub(crate) struct AuthWatch {
    brokers: String,
    secrets: Vec<String>,
    state: tokio::sync::watch::Sender<Option<Arc<AuthFailure>>>,
    /// Every broker down, no broker ever answered: the last failed connection.
    unreachable: tokio::sync::watch::Sender<Option<Arc<AuthFailure>>>,
    /// librdkafka's account of the last failed connection (secrets masked).
    last_transport_failure: Mutex<Option<String>>,
    /// A broker answered a request since the client was created.
    ever_answered: std::sync::atomic::AtomicBool,
    /// When "every broker down" was last logged as a warning.
    all_down_warned: Mutex<Option<Instant>>,
}

/// How often librdkafka's repeated "every broker down" is logged as a warning.
const ALL_DOWN_LOG_EVERY: Duration = Duration::from_secs(30);

/// How long "every broker down" counts as the current state of a client no broker ever
/// answered: librdkafka reports it again after each failed reconnection (at most
/// `reconnect.backoff.max.ms`, 10 s, apart), and a write started after this waits for the
/// broker again.
const UNREACHABLE_FRESH: Duration = Duration::from_secs(5);

impl AuthWatch {
    fn new(config: &KafkaOptions) -> AuthWatch {
        AuthWatch {
            brokers: config.brokers.clone(),
            secrets: config.secrets(),
            state: tokio::sync::watch::Sender::new(None),
            unreachable: tokio::sync::watch::Sender::new(None),
            last_transport_failure: Mutex::new(None),
            ever_answered: std::sync::atomic::AtomicBool::new(false),
            all_down_warned: Mutex::new(None),
        }
    }

    /// Whether an "every broker down" report is to be logged as a warning: the first, and
    /// then one per [`ALL_DOWN_LOG_EVERY`].
    fn all_down_warning_due(&self) -> bool {
        let mut last = self
            .all_down_warned
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let due = last.is_none_or(|at| at.elapsed() >= ALL_DOWN_LOG_EVERY);
        if due {
            *last = Some(Instant::now());
        }
        due
    }

    /// A connection failed (`all_down`: librdkafka reports every broker down). Only a client
    /// no broker ever answered is marked unreachable.
    fn connection_failed(&self, reason: &str, all_down: bool) {
        let reason = self.scrub(reason);
        let mut last = self
            .last_transport_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if !all_down {
            *last = Some(reason);
            return;
        }
        if self.ever_answered.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        // Unreachable only after a connection itself failed (refused, unresolved, timed out):
        // a broker that refused the credentials answered, and librdkafka reports it "down" too,
        // sometimes before the refusal's own event; that stays an `Auth` error.
        if self.state.borrow().is_some() {
            return;
        }
        let Some(reason) = last.clone() else {
            return;
        };
        drop(last);
        self.unreachable.send_replace(Some(Arc::new(AuthFailure {
            at: Instant::now(),
            reason,
        })));
    }

    fn unreachable_error(&self, failure: &AuthFailure) -> KafkaError {
        KafkaError::Unreachable {
            brokers: self.brokers.clone(),
            reason: failure.reason.clone(),
        }
    }

    /// Every broker reported down within [`UNREACHABLE_FRESH`], none ever answered.
    fn unreachable_now(&self) -> Option<KafkaError> {
        let state = self.unreachable.borrow();
        state
            .as_ref()
            .filter(|f| f.at.elapsed() < UNREACHABLE_FRESH)
            .map(|f| self.unreachable_error(f))
    }

    /// Waits until every broker is reported down (a client no broker ever answered) after
    /// `changes` was taken.
    async fn next_unreachable(
        &self,
        mut changes: tokio::sync::watch::Receiver<Option<Arc<AuthFailure>>>,
    ) -> KafkaError {
        loop {
            if changes.changed().await.is_err() {
                return std::future::pending().await;
            }
            let failure = changes.borrow_and_update().clone();
            if let Some(failure) = failure {
                return self.unreachable_error(&failure);
            }
        }
    }

    fn scrub(&self, text: &str) -> String {
        scrub(text, &self.secrets)
    }

    /// Records a refusal (from the context's error callback, on a librdkafka thread).
    fn refused(&self, reason: &str) {
        let reason = self.scrub(reason);
        // A broker that refused the credentials was reached.
        self.unreachable
            .send_if_modified(|state| state.take().is_some());
        self.state.send_replace(Some(Arc::new(AuthFailure {
            at: Instant::now(),
            reason,
        })));
    }

    /// A broker answered a request: the credentials are good (again).
    fn accepted(&self) {
        self.ever_answered
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.unreachable
            .send_if_modified(|state| state.take().is_some());
        self.state.send_if_modified(|state| state.take().is_some());
    }

    /// The current refusal, when one was reported within [`AUTH_FRESH`].
    fn current(&self) -> Option<KafkaError> {
        let state = self.state.borrow();
        state
            .as_ref()
            .filter(|f| f.at.elapsed() < AUTH_FRESH)
            .map(|f| self.error(f))
    }

    fn error(&self, failure: &AuthFailure) -> KafkaError {
        KafkaError::Auth {
            brokers: self.brokers.clone(),
            reason: failure.reason.clone(),
        }
    }

    /// A subscription to refusals reported from now on; take it before checking
    /// [`AuthWatch::current`], so that nothing reported in between is missed.
    fn subscribe(&self) -> tokio::sync::watch::Receiver<Option<Arc<AuthFailure>>> {
        self.state.subscribe()
    }

    /// Waits until a refusal is reported after `changes` was taken.
    async fn next_refusal(
        &self,
        mut changes: tokio::sync::watch::Receiver<Option<Arc<AuthFailure>>>,
    ) -> KafkaError {
        loop {
            if changes.changed().await.is_err() {
                // The client is gone; nothing will be reported any more.
                return std::future::pending().await;
            }
            let failure = changes.borrow_and_update().clone();
            if let Some(failure) = failure {
                return self.error(&failure);
            }
        }
    }

    /// `error`, or the refusal behind it when its code says the credentials were refused
    /// (a poll or delivery error carries the code, the error event the explanation).
    fn explain(&self, error: KafkaError) -> KafkaError {
        if error.kind() != babelqueue_core::TransportErrorKind::Auth
            || matches!(error, KafkaError::Auth { .. })
        {
            return error;
        }
        let reason = self.state.borrow().as_ref().map_or_else(
            || self.scrub(&error.to_string()),
            |failure| failure.reason.clone(),
        );
        KafkaError::Auth {
            brokers: self.brokers.clone(),
            reason,
        }
    }
}

/// The client context: librdkafka's log lines and errors go to `tracing` (secrets masked), a
/// refusal of the credentials to the [`AuthWatch`]; a consumer's revoked partitions go to the
/// transport's hook.
#[derive(Clone)]
pub(crate) struct RdContext {
    on_revoke: Option<RevokeHook>,
    auth: Arc<AuthWatch>,
}

impl ClientContext for RdContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        let message = self.auth.scrub(message);
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => tracing::error!(target: LOG, facility = fac, "{message}"),
            RDKafkaLogLevel::Warning => tracing::warn!(target: LOG, facility = fac, "{message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: LOG, facility = fac, "{message}");
            }
            RDKafkaLogLevel::Debug => tracing::debug!(target: LOG, facility = fac, "{message}"),
        }
    }

    fn error(&self, error: RdError, reason: &str) {
        let reason = self.auth.scrub(reason);
        if error.rdkafka_error_code().is_some_and(is_auth_code) {
            tracing::error!(target: LOG, brokers = %self.auth.brokers, error = %error,
                "The Kafka broker refused the credentials: {reason}");
            self.auth.refused(&reason);
        } else {
            use rdkafka::error::RDKafkaErrorCode as C;
            match error.rdkafka_error_code() {
                Some(C::BrokerTransportFailure | C::Resolve) => {
                    self.auth.connection_failed(&reason, false);
                }
                Some(C::AllBrokersDown) => {
                    self.auth.connection_failed(&reason, true);
                    // librdkafka repeats it after every failed reconnection (many a second):
                    // one warning per ALL_DOWN_LOG_EVERY, the repeats at debug level.
                    if !self.auth.all_down_warning_due() {
                        tracing::debug!(target: LOG, error = %error, "librdkafka: {reason}");
                        return;
                    }
                }
                _ => {}
            }
            tracing::warn!(target: LOG, error = %error, "librdkafka: {reason}");
        }
    }
}

impl ConsumerContext for RdContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let (Rebalance::Revoke(list), Some(hook)) = (rebalance, &self.on_revoke) {
            let revoked: Vec<TopicPartition> = list
                .elements()
                .iter()
                .map(|e| TopicPartition::new(e.topic(), e.partition()))
                .collect();
            tracing::info!(target: "babelqueue::kafka", partitions = ?revoked, "Partitions revoked by a rebalance; their in-flight records belong to the next owner");
            // Settled records still waiting for the commit interval are committed now, while
            // the partitions are still this consumer's.
            let owed = hook(&revoked);
            if owed.is_empty() {
                return;
            }
            let mut commit = TopicPartitionList::new();
            for (tp, next) in &owed {
                if let Err(e) =
                    commit.add_partition_offset(&tp.topic, tp.partition, Offset::Offset(*next))
                {
                    tracing::warn!(target: LOG, partition = %tp, error = %e, "An owed commit could not be listed");
                }
            }
            if let Err(e) = consumer.commit(&commit, CommitMode::Sync) {
                tracing::warn!(target: LOG, partitions = ?owed, error = %e,
                    "Committing the settled records of revoked partitions failed; the next owner receives them again");
            }
        }
    }
}

/// The librdkafka-backed [`KafkaClient`]: one shared producer, one consumer per call.
///
/// Producer and consumers get `bootstrap.servers` from the config, then its librdkafka
/// options; the producer also `message.timeout.ms` = the delivery timeout and `acks` (default
/// `all`); the consumers
/// `group.id`, `enable.auto.commit=false`, `auto.offset.reset=earliest` and
/// `allow.auto.create.topics=true` (each overridable through the options).
#[derive(Clone)]
pub struct RdKafkaClient {
    config: KafkaOptions,
    auth: Arc<AuthWatch>,
    producer: Arc<OnceLock<Arc<RdProducer>>>,
    producer_init: Arc<Mutex<()>>,
}

impl fmt::Debug for RdKafkaClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RdKafkaClient")
            .field("brokers", &self.config.brokers)
            .finish_non_exhaustive()
    }
}

impl RdKafkaClient {
    /// A client for `config` (nothing connects until the first use).
    pub fn new(config: KafkaOptions) -> RdKafkaClient {
        RdKafkaClient {
            auth: Arc::new(AuthWatch::new(&config)),
            config,
            producer: Arc::new(OnceLock::new()),
            producer_init: Arc::new(Mutex::new(())),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &KafkaOptions {
        &self.config
    }

    fn context(&self, on_revoke: Option<RevokeHook>) -> RdContext {
        RdContext {
            on_revoke,
            auth: self.auth.clone(),
        }
    }

    fn base(&self, defaults: &[(&str, String)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.config.brokers);
        for (key, value) in defaults {
            config.set(*key, value);
        }
        for (key, value) in &self.config.client {
            config.set(key, value);
        }
        config
    }

    fn make_producer(&self) -> Result<Arc<RdProducer>, KafkaError> {
        let timeout_ms = self
            .config
            .delivery_timeout
            .as_millis()
            .clamp(1, i32::MAX as u128);
        let mut defaults = vec![("message.timeout.ms", timeout_ms.to_string())];
        defaults.extend(crate::replication::producer_options(self.config.acks));
        let producer: FutureProducer<RdContext> = self
            .base(&defaults)
            .create_with_context(self.context(None))
            .map_err(KafkaError::client_config(
                "create the producer",
                &self.auth.secrets,
            ))?;
        let all = crate::replication::effective_acks(self.config.acks, &self.config.client)
            == crate::Acks::All;
        Ok(Arc::new(RdProducer {
            producer,
            auth: self.auth.clone(),
            isr: all.then(crate::isr::IsrCheck::default),
        }))
    }

    /// Creates `topics` with `partitions` partitions each and waits for the broker; a topic
    /// that already exists is fine (it is left as it is). The replication factor and
    /// `min.insync.replicas` are the options' [`replication_factor`] and
    /// [`min_insync_replicas`] (URL keys of the same names), else the broker's defaults. For
    /// tests and local setups; production topics are usually provisioned by other means.
    ///
    /// [`replication_factor`]: KafkaOptions::replication_factor
    /// [`min_insync_replicas`]: KafkaOptions::min_insync_replicas
    pub async fn create_topics(&self, topics: &[&str], partitions: i32) -> Result<(), KafkaError> {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        use rdkafka::types::RDKafkaErrorCode;
        let admin: AdminClient<RdContext> = self
            .base(&[])
            .create_with_context(self.context(None))
            .map_err(KafkaError::client_config(
                "create the admin client",
                &self.auth.secrets,
            ))?;
        // -1: the broker's default.replication.factor (KIP-464).
        let factor = self.config.replication_factor.map_or(-1, i32::from);
        let min_insync = self.config.min_insync_replicas.map(|n| n.to_string());
        let new: Vec<NewTopic<'_>> = topics
            .iter()
            .map(|t| {
                let topic = NewTopic::new(t, partitions, TopicReplication::Fixed(factor));
                match &min_insync {
                    Some(n) => topic.set("min.insync.replicas", n),
                    None => topic,
                }
            })
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = admin
            .create_topics(&new, &options)
            .await
            .map_err(KafkaError::client("create topics"))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => {
                    tracing::error!(target: "babelqueue::kafka", topic, "Creating the topic failed");
                    return Err(KafkaError::Client {
                        operation: "create a topic",
                        source: RdError::AdminOp(code),
                    });
                }
            }
        }
        Ok(())
    }
}

impl KafkaClient for RdKafkaClient {
    fn producer(&self) -> Result<Arc<dyn KafkaProducer>, KafkaError> {
        if let Some(p) = self.producer.get() {
            return Ok(p.clone());
        }
        let _init = self.producer_init.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = self.producer.get() {
            return Ok(p.clone());
        }
        let made = self.make_producer()?;
        Ok(self.producer.get_or_init(|| made).clone())
    }

    fn consumer(
        &self,
        group_id: &str,
        topics: &[String],
        on_revoke: RevokeHook,
    ) -> Result<Arc<dyn KafkaConsumer>, KafkaError> {
        let mut config = self.base(&[
            ("group.id", group_id.to_owned()),
            ("enable.auto.commit", "false".to_owned()),
            ("auto.offset.reset", "earliest".to_owned()),
            ("allow.auto.create.topics", "true".to_owned()),
        ]);
        if let Some(id) = &self.config.group_instance_id {
            if self
                .config
                .client
                .get("group.protocol")
                .is_some_and(|p| p.eq_ignore_ascii_case("consumer"))
            {
                // KIP-848: the broker refuses a restarted static member's id until the old
                // member's session expires (UNRELEASED_INSTANCE_ID), and librdkafka takes that
                // as fatal: a SIGKILLed worker's successor would never consume.
                return Err(KafkaError::Config(
                    "group_instance_id (static membership) cannot be used with \
                     group.protocol=consumer: a restarted worker would be refused its id"
                        .into(),
                ));
            }
            config.set("group.instance.id", member_instance_id(id, topics));
        }
        let consumer: StreamConsumer<RdContext> = config
            .create_with_context(self.context(Some(on_revoke)))
            .map_err(KafkaError::client_config(
                "create the consumer",
                &self.auth.secrets,
            ))?;
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&names)
            .map_err(KafkaError::client("subscribe"))?;
        Ok(Arc::new(RdConsumer {
            consumer: Mutex::new(Some(Arc::new(consumer))),
            topics: topics.to_vec(),
            auth: self.auth.clone(),
        }))
    }

    fn reader(&self, group_id: &str) -> Result<Box<dyn KafkaReader>, KafkaError> {
        // Set after the user's options so none of them can make the reader commit, store an
        // offset or create a topic.
        let mut config = self.base(&[]);
        for (key, value) in crate::rd_reader::READER_OPTIONS {
            config.set(key, value);
        }
        config.set("group.id", group_id);
        let consumer: BaseConsumer<RdContext> = config
            .create_with_context(self.context(None))
            .map_err(KafkaError::client_config(
                "create the browsing consumer",
                &self.auth.secrets,
            ))?;
        Ok(Box::new(crate::rd_reader::RdReader::new(consumer)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::redact_url;

    const PASSWORD: &str = "s3cret-Pw-91";

    fn assert_hidden(what: &str, error: &KafkaError) {
        let (display, debug) = (error.to_string(), format!("{error:?}"));
        assert!(
            !display.contains(PASSWORD),
            "{what}: Display shows the password: {display}"
        );
        assert!(
            !debug.contains(PASSWORD),
            "{what}: Debug shows the password: {debug}"
        );
        let runtime: babelqueue_core::TransportError = KafkaError::Config(display.clone()).into();
        assert!(!runtime.to_string().contains(PASSWORD), "{what}: {runtime}");
    }

    fn sasl_url(query: &str) -> String {
        format!("kafka://bq:{PASSWORD}@127.0.0.1:1?security.protocol=SASL_PLAINTEXT&{query}")
    }

    /// librdkafka's complaint about a bad option names the option and its value: the value of
    /// a secret (or misspelt secret) option, and the password anywhere, is masked.
    #[test]
    fn a_bad_option_never_shows_the_password() {
        for (what, query) in [
            ("a bad value", "linger.ms=abc".to_owned()),
            (
                "the password as a bad value",
                format!("linger.ms={PASSWORD}"),
            ),
            (
                "a misspelt password option",
                format!("sasl.pasword={PASSWORD}"),
            ),
            ("an unknown option", format!("no.such.option={PASSWORD}")),
        ] {
            let config = KafkaOptions::from_url(&sasl_url(&query)).unwrap();
            assert!(
                !format!("{config:?}").contains(PASSWORD),
                "{what}: {config:?}"
            );
            let client = RdKafkaClient::new(config);
            assert!(!format!("{client:?}").contains(PASSWORD));
            let err = client.producer().expect_err(what);
            assert_eq!(
                err.kind(),
                babelqueue_core::TransportErrorKind::Config,
                "{what}"
            );
            assert_hidden(what, &err);
            let hook: RevokeHook = Arc::new(|_: &[TopicPartition]| Vec::new());
            let err = client
                .consumer("g", &["orders".to_owned()], hook)
                .expect_err(what);
            assert_hidden(what, &err);
        }
        // The URL itself is shown only redacted.
        let err = KafkaOptions::from_url(&format!(
            "kafka://bq:{PASSWORD}@h:1?sasl.password={PASSWORD}&=x"
        ))
        .unwrap_err();
        assert_hidden("an empty option name", &err);
        let err = KafkaOptions::from_url(&format!("kafka://bq:{PASSWORD}@h:1")).unwrap_err();
        assert_hidden("credentials without a SASL protocol", &err);
        assert!(!redact_url(&sasl_url(&format!("sasl.password={PASSWORD}"))).contains(PASSWORD));
    }

    /// A broker that refuses the connection: the publish fails once its delivery timeout
    /// passes, as a transient error that shows no password.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_connection_never_shows_the_password() {
        let config =
            KafkaOptions::from_url(&sasl_url("sasl.mechanism=PLAIN&delivery_timeout_ms=1500"))
                .unwrap();
        let client = RdKafkaClient::new(config);
        let producer = client.producer().unwrap();
        let record = OutRecord {
            topic: "orders".into(),
            key: None,
            value: b"{}".to_vec(),
            headers: Vec::new(),
            timestamp: None,
        };
        let err = producer
            .send(record, Duration::from_millis(1500))
            .await
            .unwrap_err();
        assert!(err.is_transient(), "{err}");
        assert_hidden("a refused connection", &err);
        let hook: RevokeHook = Arc::new(|_: &[TopicPartition]| Vec::new());
        let consumer = client.consumer("g", &["orders".to_owned()], hook).unwrap();
        if let Err(err) = consumer.poll(Duration::from_millis(500)).await {
            assert_hidden("a poll of a refused connection", &err);
        }
        consumer.close().await;
    }

    /// A broker that was never reached: a confirmed write says which and why within seconds
    /// (not after its 30 s delivery timeout), and so does the next one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_port_fails_a_write_at_once_naming_it_and_the_cause() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let config = KafkaOptions::from_url(&format!("kafka://127.0.0.1:{port}")).unwrap();
        assert_eq!(config.delivery_timeout, Duration::from_secs(30));
        let client = RdKafkaClient::new(config);
        let producer = client.producer().unwrap();
        for attempt in 0..2 {
            let record = OutRecord {
                topic: "orders".into(),
                key: None,
                value: b"{}".to_vec(),
                headers: Vec::new(),
                timestamp: None,
            };
            let started = Instant::now();
            let err = producer
                .send(record, Duration::from_secs(30))
                .await
                .unwrap_err();
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "attempt {attempt}: {:?}",
                started.elapsed()
            );
            assert!(matches!(err, KafkaError::Unreachable { .. }), "{err:?}");
            assert!(err.is_transient(), "{err}");
            let shown = babelqueue_core::TransportError::from(err).to_string();
            assert!(
                shown.starts_with(&format!(
                    "kafka: cannot reach the Kafka broker at 127.0.0.1:{port}: "
                )),
                "{shown}"
            );
            assert!(shown.contains("Connection refused"), "{shown}");
        }
        // Closing does not wait out the delivery timeout of the records librdkafka still holds.
        let started = Instant::now();
        producer.flush(Duration::from_secs(30)).await.unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    /// The same for a batch (`publish_batch`): every record says which broker and why within
    /// seconds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_port_fails_a_batch_at_once_naming_it() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let client = RdKafkaClient::new(
            KafkaOptions::from_url(&format!("kafka://127.0.0.1:{port}")).unwrap(),
        );
        let producer = client.producer().unwrap();
        // Records of two topics, written as `send_many` takes them (all made first) and as
        // `send_made` makes them (one at a time).
        let make = |n: usize| OutRecord {
            topic: if n.is_multiple_of(2) {
                "orders"
            } else {
                "audit"
            }
            .into(),
            key: None,
            value: b"{}".to_vec(),
            headers: Vec::new(),
            timestamp: None,
        };
        for made in [false, true] {
            let started = Instant::now();
            let outcomes = if made {
                producer.send_made(3, &make, Duration::from_secs(30)).await
            } else {
                let records = (0..3).map(make).collect();
                producer.send_many(records, Duration::from_secs(30)).await
            };
            // Closing does not wait out the delivery timeout of what librdkafka still holds.
            producer.flush(Duration::from_secs(30)).await.unwrap();
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "made {made}: {:?}",
                started.elapsed()
            );
            assert_eq!(outcomes.len(), 3, "made {made}");
            for outcome in outcomes {
                let err = outcome.unwrap_err();
                assert!(matches!(err, KafkaError::Unreachable { .. }), "{err:?}");
                assert!(
                    err.to_string().contains(&format!("127.0.0.1:{port}")),
                    "{err}"
                );
            }
        }
    }

    /// A broker that refuses every connection: librdkafka queues an error event on the
    /// consumer queue for each failed reconnection. A poll passes over them (they heal by
    /// themselves) and returns nothing once its timeout passes; it used to return one of them
    /// per call, which left a worker minutes behind its queue after a broker outage.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_poll_passes_over_the_errors_of_a_broker_that_is_down() {
        let config = KafkaOptions::from_url(
            "kafka://127.0.0.1:1?reconnect.backoff.ms=10&reconnect.backoff.max.ms=50",
        )
        .unwrap();
        let hook: RevokeHook = Arc::new(|_: &[TopicPartition]| Vec::new());
        let consumer = RdKafkaClient::new(config)
            .consumer("g", &["orders".to_owned()], hook)
            .unwrap();
        // Failed reconnections pile up on the queue meanwhile.
        tokio::time::sleep(Duration::from_secs(1)).await;
        for _ in 0..3 {
            let started = Instant::now();
            let polled = consumer.poll(Duration::from_millis(300)).await;
            assert!(matches!(polled, Ok(None)), "{polled:?}");
            assert!(
                started.elapsed() >= Duration::from_millis(250),
                "the poll waited"
            );
        }
        consumer.close().await;
    }

    #[test]
    fn static_membership_refuses_the_consumer_protocol() {
        let hook: RevokeHook = Arc::new(|_: &[TopicPartition]| Vec::new());
        let client = RdKafkaClient::new(
            KafkaOptions::from_url(
                "kafka://127.0.0.1:1?group_instance_id=w&group.protocol=consumer",
            )
            .unwrap(),
        );
        let err = client
            .consumer("g", &["orders".to_owned()], hook)
            .unwrap_err();
        assert_eq!(
            err.kind(),
            babelqueue_core::TransportErrorKind::Config,
            "{err}"
        );
    }

    /// The last line of defence: librdkafka's own text loses every secret of the config.
    #[test]
    fn librdkafka_text_is_scrubbed() {
        let config = KafkaOptions::from_url(&sasl_url("ssl.key.password=k3y-Pa55")).unwrap();
        let watch = AuthWatch::new(&config);
        let text = format!("conf: sasl.password={PASSWORD} ssl.key.password=k3y-Pa55 user bq");
        let scrubbed = watch.scrub(&text);
        assert!(
            !scrubbed.contains(PASSWORD) && !scrubbed.contains("k3y-Pa55"),
            "{scrubbed}"
        );
        assert!(scrubbed.contains("user bq"), "{scrubbed}");
        watch.refused(&format!("SASL authentication error for {PASSWORD}"));
        let refusal = watch.current().expect("a current refusal");
        assert_eq!(refusal.kind(), babelqueue_core::TransportErrorKind::Auth);
        assert!(refusal.to_string().contains("127.0.0.1:1"), "{refusal}");
        assert_hidden("a refusal", &refusal);
        watch.accepted();
        assert!(watch.current().is_none());
    }

    #[test]
    fn every_broker_down_is_warned_about_once_in_a_while() {
        let watch = AuthWatch::new(&KafkaOptions::from_url("kafka://127.0.0.1:1").unwrap());
        assert!(watch.all_down_warning_due(), "the first report");
        for _ in 0..100 {
            assert!(!watch.all_down_warning_due(), "a repeat within the period");
        }
        *watch.all_down_warned.lock().unwrap() = Instant::now().checked_sub(ALL_DOWN_LOG_EVERY);
        assert!(
            watch.all_down_warning_due(),
            "the first report of the next period"
        );
    }
}
