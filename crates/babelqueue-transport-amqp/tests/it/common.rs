//! Shared helpers: the broker URL, the reachability rule, unique queue names, a raw lapin
//! connection to inspect queues independently of the transport, the Python driver.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

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
pub fn broker() -> Option<String> {
    let url = url();
    let parsed = babelqueue_transport_amqp::AmqpUrl::parse(&url).expect("BQ_AMQP_URL parses");
    let address = format!(
        "{}:{}",
        parsed.uri.authority.host, parsed.uri.authority.port
    );
    let reachable = std::net::ToSocketAddrs::to_socket_addrs(&address.as_str())
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok());
    if reachable {
        return Some(url);
    }
    if std::env::var_os("BQ_REQUIRE_BROKERS").is_some() {
        panic!(
            "RabbitMQ is not reachable at {address} and BQ_REQUIRE_BROKERS is set: start it with `scripts/brokers.sh up rabbitmq`"
        );
    }
    eprintln!(
        "SKIPPED: rabbitmq not reachable at {address} (set BQ_REQUIRE_BROKERS to make this a failure)"
    );
    None
}

/// Takes the shared side of the broker lock.
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    BROKER.read().await
}

pub fn queue(prefix: &str) -> String {
    format!("bq-it-{prefix}-{:012x}", fastrand::u64(..1 << 48))
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

    /// Declares `queue` the way another framework might: with a message TTL argument.
    pub async fn declare_with_ttl(&self, queue: &str) {
        let mut args = FieldTable::default();
        args.insert(
            "x-message-ttl".into(),
            lapin::types::AMQPValue::LongInt(60_000),
        );
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

pub fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The reference SDK's interpreter: `BQ_PYTHON`, else the project's venv.
pub fn python() -> PathBuf {
    std::env::var_os("BQ_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python"),
        PathBuf::from,
    )
}

/// Runs the Python driver (`tests/python/bq_amqp.py`) and returns its output; fails loudly
/// when the interpreter is missing.
pub fn py(args: &[&str]) -> Output {
    let python = python();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/bq_amqp.py");
    let out = Command::new(&python)
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run the reference SDK at {} ({e}); `scripts/brokers.sh up python` installs it, or set BQ_PYTHON",
                python.display()
            )
        });
    assert!(
        out.status.success(),
        "python {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
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
