//! Shared helpers: the broker URL, the reachability rule and unique queue names (the
//! testkit's), a raw lapin connection to inspect queues independently of the transport, the
//! Python driver (a testkit `PythonPeer`).

use std::time::Duration;

use babelqueue_testkit::{PythonPeer, broker_or_skip, unique_queue};
use lapin::options::{BasicGetOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use serde_json::Value;
use tokio::sync::{RwLock, RwLockReadGuard};

pub const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// The broker restart test holds it for writing, every other test for reading.
pub static BROKER: RwLock<()> = RwLock::const_new(());

pub fn url() -> String {
    std::env::var("BQ_AMQP_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// `Some(url)` when RabbitMQ answers; otherwise fails (BQ_REQUIRE_BROKERS set) or skips loudly.
pub async fn broker() -> Option<String> {
    let url = url();
    let parsed = babelqueue_transport_amqp::AmqpUrl::parse(&url).expect("BQ_AMQP_URL parses");
    let address = format!(
        "{}:{}",
        parsed.uri.authority.host, parsed.uri.authority.port
    );
    listening(&format!("RabbitMQ at {address}"), &address).await?;
    Some(url)
}

/// `Some(())` when something accepts a TCP connection at `address`; otherwise fails
/// (BQ_REQUIRE_BROKERS set) or skips loudly, naming `what`.
pub async fn listening(what: &str, address: &str) -> Option<()> {
    let address = address.to_owned();
    let probe = tokio::task::spawn_blocking(move || std::net::TcpStream::connect(address));
    let connect = async {
        probe
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    };
    broker_or_skip(what, connect).await.map(drop)
}

/// Takes the shared side of the broker lock.
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    BROKER.read().await
}

pub fn queue(prefix: &str) -> String {
    unique_queue(&format!("it-{prefix}"))
}

/// A raw lapin connection for checks that must not go through the transport under test.
pub struct Raw {
    _connection: Connection,
    channel: Channel,
}

impl Raw {
    pub async fn new(url: &str) -> Raw {
        let parsed = babelqueue_transport_amqp::AmqpUrl::parse(url).unwrap();
        let connection = Connection::connect_uri(parsed.uri, ConnectionProperties::default())
            .await
            .expect("raw connection");
        let channel = connection.create_channel().await.unwrap();
        Raw {
            _connection: connection,
            channel,
        }
    }

    /// Every message now in `queue`, taken off (auto-ack), with its properties.
    pub async fn drain(&self, queue: &str) -> Vec<(Vec<u8>, BasicProperties)> {
        self.declare(queue).await;
        let mut out = Vec::new();
        while let Some(m) = self
            .channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            out.push((m.delivery.data.clone(), m.delivery.properties.clone()));
        }
        out
    }

    /// The bodies now in `queue`, taken off (auto-ack), without declaring it (a queue of any
    /// type and arguments).
    pub async fn drain_passive(&self, queue: &str) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(m) = self
            .channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            out.push(m.delivery.data.clone());
        }
        out
    }

    pub async fn declare(&self, queue: &str) -> u32 {
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap()
            .message_count()
    }

    /// The ready messages of `queue`, as a passive declaration counts them (whatever its type
    /// and arguments).
    pub async fn ready(&self, queue: &str) -> u32 {
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap()
            .message_count()
    }

    /// Declares `queue` the way another framework might: with a message TTL argument.
    pub async fn declare_with_ttl(&self, queue: &str) {
        self.declare_with(
            queue,
            "x-message-ttl",
            lapin::types::AMQPValue::LongInt(60_000),
        )
        .await;
    }

    /// Declares `queue` as a quorum queue (`x-queue-type=quorum`), provisioned outside the SDK.
    pub async fn declare_quorum(&self, queue: &str) {
        let quorum = lapin::types::AMQPValue::LongString("quorum".into());
        self.declare_with(queue, "x-queue-type", quorum).await;
    }

    /// Declares `queue` durable with one argument.
    async fn declare_with(&self, queue: &str, key: &str, value: lapin::types::AMQPValue) {
        let mut args = FieldTable::default();
        args.insert(key.into(), value);
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                args,
            )
            .await
            .unwrap();
    }

    /// Waits until `queue` holds `n` ready messages.
    pub async fn wait_depth(&self, queue: &str, n: u32, within: Duration) -> u32 {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let depth = self.declare(queue).await;
            if depth == n || tokio::time::Instant::now() >= deadline {
                return depth;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn delete(&self, queues: &[&str]) {
        for q in queues {
            let _ = self
                .channel
                .queue_delete((*q).into(), QueueDeleteOptions::default())
                .await;
        }
    }
}

pub fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

/// The Python driver (`tests/python/bq_amqp.py`) on the reference SDK with pika, or `None`
/// after a skip line (a failure with BQ_REQUIRE_BROKERS set) when it is not installed:
/// `scripts/brokers.sh up python` installs it, or set BQ_PYTHON. Its `run` returns the JSON
/// lines the driver printed.
pub fn python() -> Option<PythonPeer> {
    PythonPeer::find_or_skip(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/bq_amqp.py"),
        &["pika"],
    )
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "babelqueue=warn".into()),
        )
        .with_test_writer()
        .try_init();
}
