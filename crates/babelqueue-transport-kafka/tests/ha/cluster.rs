//! The three-node cluster of `scripts/brokers.sh up kafka-cluster` (`BQ_KAFKA_CLUSTER_URL`,
//! `BQ_KAFKA_CLUSTER_DIR`), found or skipped loudly; its nodes killed, paused and brought back;
//! and what the tests read beside the transport: partition leaders, every record of a topic,
//! a group's lag.
//!
//! A cluster that is not up prints `SKIPPED`; with `BQ_REQUIRE_HA` set (not empty) it fails
//! instead, as `BQ_REQUIRE_BROKERS` does for the single brokers.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

/// The node ids of the cluster (`n1`, `n2`, `n3` in its directory).
pub const NODES: [i32; 3] = [1, 2, 3];

const METADATA_TIMEOUT: Duration = Duration::from_secs(5);

/// Says that the cluster is unavailable: panics when `BQ_REQUIRE_HA` is set, else prints
/// `SKIPPED: …` so the caller can return.
#[track_caller]
pub fn skip_or_fail(what: &str) {
    babelqueue_testkit::skip_or_fail_ha(format!(
        "{what} (scripts/brokers.sh up kafka-cluster, then eval \"$(scripts/brokers.sh env)\")"
    ));
}

/// One partition as the metadata shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub partition: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// The cluster of `scripts/brokers.sh up kafka-cluster`.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// `kafka://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`.
    pub url: String,
    dir: PathBuf,
}

impl Cluster {
    /// The cluster the environment names, when every node runs and the metadata lists all
    /// three brokers; `None` after [`skip_or_fail`].
    pub async fn from_env() -> Option<Cluster> {
        let (Ok(url), Some(dir)) = (
            std::env::var("BQ_KAFKA_CLUSTER_URL"),
            std::env::var_os("BQ_KAFKA_CLUSTER_DIR"),
        ) else {
            skip_or_fail("the Kafka cluster is not up (BQ_KAFKA_CLUSTER_URL is not set)");
            return None;
        };
        let cluster = Cluster {
            url,
            dir: PathBuf::from(dir),
        };
        let down: Vec<i32> = NODES
            .into_iter()
            .filter(|n| cluster.pid(*n).is_none())
            .collect();
        if !down.is_empty() {
            skip_or_fail(&format!(
                "the Kafka cluster's nodes {down:?} are not running"
            ));
            return None;
        }
        if let Err(e) = cluster.wait_for_brokers(3, Duration::from_secs(30)).await {
            skip_or_fail(&format!("the Kafka cluster at {}: {e}", cluster.url));
            return None;
        }
        Some(cluster)
    }

    /// The cluster URL with `options` (`acks=1&group_id=g`).
    pub fn url_with(&self, options: &str) -> String {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{separator}{options}", self.url)
    }

    /// `host:port,…` of the URL.
    pub fn bootstrap(&self) -> String {
        babelqueue_transport_kafka::KafkaOptions::from_url(&self.url)
            .expect("a valid BQ_KAFKA_CLUSTER_URL")
            .brokers
    }

    fn config(&self, node: i32) -> PathBuf {
        self.dir.join(format!("n{node}")).join("server.properties")
    }

    /// The pid of `node` when it runs: its pid file names a JVM started with its config (never
    /// another process that took the number).
    pub fn pid(&self, node: i32) -> Option<u32> {
        let file = self.dir.join(format!("n{node}")).join("kafka.pid");
        let pid: u32 = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let config = self.config(node);
        let config = config.to_string_lossy();
        String::from_utf8_lossy(&cmdline)
            .contains(config.as_ref())
            .then_some(pid)
    }

    /// Sends `signal` (`KILL`, `STOP`, `CONT`) to `node`'s JVM.
    pub fn signal(&self, node: i32, signal: &str) {
        let pid = self
            .pid(node)
            .unwrap_or_else(|| panic!("node {node} is not running"));
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {pid} (node {node})");
    }

    /// SIGKILLs `node` and waits until its process is gone.
    pub async fn kill(&self, node: i32) -> Instant {
        let pid = self.pid(node).expect("the node runs");
        self.signal(node, "KILL");
        let at = Instant::now();
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            // a zombie until the shell that started it reaps it; its sockets are closed
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if state.contains(") Z ") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        at
    }

    /// Starts the nodes that are not running (`scripts/brokers.sh up kafka-cluster`, from this
    /// checkout) and waits until all three are ready. Blocking: it is what a drop guard runs.
    pub fn bring_back_blocking(&self) -> Result<(), String> {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/brokers.sh");
        let brokers_dir = self.dir.parent().expect("the cluster dir has a parent");
        let output = Command::new("bash")
            .arg(script)
            .args(["up", "kafka-cluster"])
            .env("BQ_BROKERS_DIR", brokers_dir)
            .output()
            .map_err(|e| format!("brokers.sh: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "brokers.sh up kafka-cluster: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(())
    }

    fn client(&self, extra: &[(&str, &str)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", self.bootstrap());
        for (k, v) in extra {
            config.set(*k, *v);
        }
        config
    }

    fn metadata_consumer(&self) -> BaseConsumer {
        self.client(&[("group.id", "bq-ha-metadata")])
            .create()
            .expect("a metadata consumer")
    }

    /// Waits until the metadata lists `count` brokers.
    pub async fn wait_for_brokers(&self, count: usize, limit: Duration) -> Result<(), String> {
        let consumer = self.metadata_consumer();
        let deadline = Instant::now() + limit;
        let mut last = String::new();
        while Instant::now() < deadline {
            match consumer.fetch_metadata(None, METADATA_TIMEOUT) {
                Ok(m) if m.brokers().len() == count => return Ok(()),
                Ok(m) => last = format!("{} brokers listed", m.brokers().len()),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(format!(
            "{count} brokers not listed within {limit:?} ({last})"
        ))
    }

    /// The partitions of `topic` as the metadata shows them now.
    pub fn partitions(&self, topic: &str) -> Vec<PartitionState> {
        let consumer = self.metadata_consumer();
        let metadata = consumer
            .fetch_metadata(Some(topic), METADATA_TIMEOUT)
            .expect("the topic's metadata");
        let mut states: Vec<PartitionState> = metadata
            .topics()
            .iter()
            .flat_map(|t| t.partitions())
            .map(|p| PartitionState {
                partition: p.id(),
                leader: p.leader(),
                replicas: p.replicas().to_vec(),
                isr: p.isr().to_vec(),
            })
            .collect();
        states.sort_by_key(|p| p.partition);
        states
    }

    /// Waits until every partition of `topic` satisfies `ok`; the states it last saw.
    pub async fn wait_for_partitions(
        &self,
        topic: &str,
        limit: Duration,
        ok: impl Fn(&PartitionState) -> bool,
    ) -> Result<Vec<PartitionState>, Vec<PartitionState>> {
        let deadline = Instant::now() + limit;
        loop {
            let states = self.partitions(topic);
            if !states.is_empty() && states.iter().all(&ok) {
                return Ok(states);
            }
            if Instant::now() >= deadline {
                return Err(states);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The node leading most partitions of `topic`, and the partitions it leads.
    pub fn busiest_leader(&self, topic: &str) -> (i32, Vec<i32>) {
        let mut led: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for p in self.partitions(topic) {
            led.entry(p.leader).or_default().push(p.partition);
        }
        led.into_iter()
            .max_by_key(|(_, partitions)| partitions.len())
            .expect("the topic has partitions")
    }

    /// Every record of `topic` from the start to the high watermarks: (partition, offset,
    /// value).
    pub async fn read_all(&self, topic: &str) -> Vec<(i32, i64, Vec<u8>)> {
        let consumer: BaseConsumer = self
            .client(&[
                ("group.id", "bq-ha-reader"),
                ("enable.auto.commit", "false"),
                ("enable.partition.eof", "false"),
            ])
            .create()
            .expect("a reader");
        let mut ends = BTreeMap::new();
        let mut assignment = TopicPartitionList::new();
        for p in self.partitions(topic) {
            let (_, high) = consumer
                .fetch_watermarks(topic, p.partition, METADATA_TIMEOUT)
                .expect("the watermarks");
            if high > 0 {
                ends.insert(p.partition, high);
                assignment
                    .add_partition_offset(topic, p.partition, Offset::Beginning)
                    .unwrap();
            }
        }
        consumer.assign(&assignment).expect("assigned");
        let mut records = Vec::new();
        let mut reached: BTreeMap<i32, i64> = BTreeMap::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while ends
            .iter()
            .any(|(p, end)| reached.get(p).copied().unwrap_or(0) < *end)
        {
            assert!(
                Instant::now() < deadline,
                "reading {topic} stalled at {reached:?} of {ends:?}"
            );
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
                reached.insert(m.partition(), m.offset() + 1);
                records.push((
                    m.partition(),
                    m.offset(),
                    m.payload().unwrap_or_default().to_vec(),
                ));
            }
        }
        records
    }

    /// The records of `topic` not yet committed by `group`: high watermark minus committed
    /// offset, summed over the partitions (a partition never committed counts from 0).
    pub fn lag(&self, topic: &str, group: &str) -> i64 {
        let consumer: BaseConsumer = self
            .client(&[("group.id", group), ("enable.auto.commit", "false")])
            .create()
            .expect("a group reader");
        let mut list = TopicPartitionList::new();
        let partitions = self.partitions(topic);
        for p in &partitions {
            list.add_partition(topic, p.partition);
        }
        let committed = consumer
            .committed_offsets(list, Duration::from_secs(10))
            .expect("the committed offsets");
        partitions
            .iter()
            .map(|p| {
                let (_, high) = consumer
                    .fetch_watermarks(topic, p.partition, METADATA_TIMEOUT)
                    .expect("the watermarks");
                let at = match committed
                    .find_partition(topic, p.partition)
                    .map(|e| e.offset())
                {
                    Some(Offset::Offset(n)) => n,
                    _ => 0,
                };
                high - at
            })
            .sum()
    }
}
