//! Shared helpers: the broker URL, unique names, topic creation, a raw reader and writer that
//! bypass the transport, committed offsets, the Python driver and the CLI binary.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use babelqueue_transport_kafka::{
    KafkaOptions, RdKafkaClient, Record, RecordHeader, TimestampType,
};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, OwnedHeaders, Timestamp};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

/// The broker URL under test.
pub fn url() -> String {
    std::env::var("BQ_KAFKA_URL").unwrap_or_else(|_| "kafka://127.0.0.1:9092".to_owned())
}

/// The URL of the broker's SASL_PLAINTEXT listener with the right credentials
/// (`BQ_KAFKA_SASL_URL`, from `scripts/brokers.sh env kafka`).
pub fn sasl_url() -> String {
    std::env::var("BQ_KAFKA_SASL_URL").unwrap_or_else(|_| {
        "kafka://bq:bq-secret@127.0.0.1:9094?security.protocol=SASL_PLAINTEXT&sasl.mechanism=PLAIN"
            .to_owned()
    })
}

/// `Some(config)` of [`sasl_url`] when its listener answers; a skip or a failure as in
/// [`broker`] otherwise.
pub fn sasl_broker() -> Option<KafkaOptions> {
    let config = KafkaOptions::from_url(&sasl_url()).expect("a valid BQ_KAFKA_SASL_URL");
    reachable(config)
}

/// `host:port[,…]` of [`url`].
pub fn brokers() -> String {
    KafkaOptions::from_url(&url())
        .expect("a valid BQ_KAFKA_URL")
        .brokers
}

/// `Some(config)` when the broker answers; otherwise a loud skip, or a failure when
/// `BQ_REQUIRE_BROKERS` is set.
pub fn broker() -> Option<KafkaOptions> {
    reachable(KafkaOptions::from_url(&url()).expect("a valid BQ_KAFKA_URL"))
}

fn reachable(config: KafkaOptions) -> Option<KafkaOptions> {
    let reachable = config.brokers.split(',').any(|b| {
        b.to_socket_addrs()
            .ok()
            .into_iter()
            .flatten()
            .any(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok())
    });
    if reachable {
        return Some(config);
    }
    if std::env::var_os("BQ_REQUIRE_BROKERS").is_some() {
        panic!(
            "Kafka is not reachable at {} and BQ_REQUIRE_BROKERS is set: start it with `scripts/brokers.sh up kafka`",
            config.brokers
        );
    }
    println!(
        "SKIPPED: kafka not reachable at {} (start it with `scripts/brokers.sh up kafka`)",
        config.brokers
    );
    None
}

/// A topic or group name no other test (or earlier run) uses.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!(
        "bq-it-{prefix}-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// Creates the topics (one partition each unless said otherwise).
pub async fn create_topics(config: &KafkaOptions, topics: &[&str], partitions: i32) {
    RdKafkaClient::new(config.clone())
        .create_topics(topics, partitions)
        .await
        .expect("topics created");
}

fn client_config(extra: &[(&str, &str)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers());
    for (k, v) in extra {
        config.set(*k, *v);
    }
    config
}

/// Writes a record with a key and headers, straight through librdkafka.
pub async fn produce_raw(topic: &str, value: &[u8], key: Option<&[u8]>, headers: &[RecordHeader]) {
    let producer: FutureProducer = client_config(&[]).create().expect("a producer");
    let mut owned = OwnedHeaders::new();
    for h in headers {
        owned = owned.insert(Header {
            key: &h.key,
            value: h.value.as_deref(),
        });
    }
    let mut record = FutureRecord::<[u8], [u8]>::to(topic)
        .payload(value)
        .headers(owned);
    if let Some(key) = key {
        record = record.key(key);
    }
    producer
        .send(record, Duration::from_secs(30))
        .await
        .expect("the raw write is confirmed");
}

/// The first `count` records of partition 0 of `topic`, read from the beginning with no group,
/// waiting up to `timeout` for them.
pub async fn read_raw(topic: &str, count: usize, timeout: Duration) -> Vec<Record> {
    let group = unique("raw");
    let consumer: StreamConsumer =
        client_config(&[("group.id", &group), ("enable.auto.commit", "false")])
            .create()
            .expect("a raw consumer");
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("a partition list");
    consumer.assign(&list).expect("assigned");
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if let Ok(Ok(m)) = tokio::time::timeout(left, consumer.recv()).await {
            out.push(Record {
                topic: m.topic().to_owned(),
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                headers: m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| RecordHeader {
                                key: h.key.to_owned().into(),
                                value: h.value.map(<[u8]>::to_vec),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                timestamp: m.timestamp().to_millis(),
                timestamp_type: match m.timestamp() {
                    Timestamp::LogAppendTime(_) => TimestampType::LogAppendTime,
                    _ => TimestampType::CreateTime,
                },
            });
        }
    }
    out
}

/// Asserts that `topic` receives nothing more than the `expected` records within `wait`.
pub async fn assert_exactly(topic: &str, expected: usize, wait: Duration) -> Vec<Record> {
    let records = read_raw(topic, expected + 1, wait).await;
    assert_eq!(
        records.len(),
        expected,
        "{topic} holds {} records, expected {expected}",
        records.len()
    );
    records
}

/// The committed position of `group` on `topic[0]` (`None`: nothing committed).
pub fn committed(group: &str, topic: &str) -> Option<i64> {
    let consumer: BaseConsumer = client_config(&[("group.id", group)])
        .create()
        .expect("a consumer");
    let mut list = TopicPartitionList::new();
    list.add_partition(topic, 0);
    let got = consumer
        .committed_offsets(list, Duration::from_secs(10))
        .expect("committed offsets");
    match got.find_partition(topic, 0).map(|e| e.offset()) {
        Some(Offset::Offset(o)) => Some(o),
        _ => None,
    }
}

/// The first header named `name`, as text.
pub fn header<'a>(record: &'a Record, name: &str) -> Option<&'a str> {
    record
        .headers
        .iter()
        .find(|h| h.key == name)
        .and_then(|h| h.value.as_deref())
        .map(|v| std::str::from_utf8(v).expect("a UTF-8 header"))
}

/// Polls `check` until it holds or `timeout` passes.
pub async fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}

/// A URL for a worker with a short session timeout, so a dead member leaves the group fast.
pub fn worker_url(extra: &str) -> String {
    let base = url();
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}session.timeout.ms=6000&heartbeat.interval.ms=500{extra}")
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The reference SDK's interpreter: `$BQ_PYTHON`, else the project venv.
pub fn python() -> PathBuf {
    std::env::var_os("BQ_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../cache/venv/bin/python"))
}

/// Runs the Python driver (`tests/python/driver.py`) and returns its JSON lines; panics with
/// its stderr when it fails.
pub async fn python_driver(args: &[&str]) -> Vec<serde_json::Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/driver.py");
    let python = python();
    assert!(
        python.exists(),
        "the reference Python SDK is missing at {} (scripts/brokers.sh up python, or set BQ_PYTHON)",
        python.display()
    );
    let output = tokio::process::Command::new(&python)
        .arg(&script)
        .args(args)
        .output()
        .await
        .expect("the Python driver runs");
    json_lines(&output, "python driver")
}

/// The JSON lines of a finished process's stdout; panics with its stderr when it failed.
pub fn json_lines(output: &Output, what: &str) -> Vec<serde_json::Value> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{what} printed {l:?}: {e}")))
        .collect()
}

/// The `babelqueue` binary with the `kafka` feature, built once per test run.
pub fn cli() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let output = Command::new(env!("CARGO"))
            .args([
                "build",
                "-q",
                "-p",
                "babelqueue-cli",
                "--features",
                "kafka",
                "--message-format",
                "json",
            ])
            .current_dir(workspace())
            .output()
            .expect("cargo runs");
        assert!(
            output.status.success(),
            "building the babelqueue CLI failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "babelqueue")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("cargo reports the babelqueue executable")
    })
    .clone()
}
