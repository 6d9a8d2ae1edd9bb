//! The three-node RabbitMQ cluster of `scripts/brokers.sh up rabbitmq-cluster` (the opt-in `ha`
//! group): its URL (`BQ_AMQP_CLUSTER_URL`, every host), each node's URL, killing a node with
//! SIGKILL and starting it again, and what `rabbitmqctl` says about a queue.
//!
//! Without the cluster the tests print `SKIPPED` and return; with `BQ_REQUIRE_HA` set they fail
//! instead (`BQ_REQUIRE_BROKERS` alone does not start or require it).

use std::path::PathBuf;
use std::process::Command;

use babelqueue_testkit::{ha_or_skip, skip_or_fail_ha};
use babelqueue_transport_amqp::{AmqpHost, AmqpUrl};
use tokio::sync::{Mutex, MutexGuard};

/// A node kill changes the cluster for every test: they take turns.
static TURN: Mutex<()> = Mutex::const_new(());

/// The cluster, when its three nodes answer.
pub struct Cluster {
    hosts: Vec<AmqpHost>,
    dir: PathBuf,
    ctl: PathBuf,
    _turn: MutexGuard<'static, ()>,
}

/// One node's name: `bq-ha-1@localhost` for node 0.
pub fn node_name(node: usize) -> String {
    format!("bq-ha-{}@localhost", node + 1)
}

impl Cluster {
    /// The cluster (this test's turn on it), or `None` after a skip line (a failure with
    /// `BQ_REQUIRE_HA` set).
    pub async fn up() -> Option<Cluster> {
        let Ok(url) = std::env::var("BQ_AMQP_CLUSTER_URL") else {
            skip_or_fail_ha(
                "the RabbitMQ cluster is not configured: BQ_AMQP_CLUSTER_URL is not set \
                 (scripts/brokers.sh up rabbitmq-cluster, then eval \"$(scripts/brokers.sh env)\")",
            );
            return None;
        };
        let var = |name: &str| std::env::var_os(name).map(PathBuf::from);
        let (Some(dir), Some(ctl)) = (var("BQ_AMQP_CLUSTER_DIR"), var("BQ_AMQP_CLUSTER_CTL"))
        else {
            skip_or_fail_ha("BQ_AMQP_CLUSTER_DIR and BQ_AMQP_CLUSTER_CTL are not set");
            return None;
        };
        let hosts = AmqpUrl::parse(&url)
            .expect("BQ_AMQP_CLUSTER_URL parses")
            .hosts;
        assert_eq!(hosts.len(), 3, "three hosts in {url}");
        let turn = TURN.lock().await;
        // Every node answers (a killed node is started again between tests).
        for host in &hosts {
            let address = host.to_string();
            let probe = async move {
                tokio::task::spawn_blocking(move || std::net::TcpStream::connect(address))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())
            };
            ha_or_skip(&format!("RabbitMQ cluster node {host}"), probe).await?;
        }
        Some(Cluster {
            hosts,
            dir,
            ctl,
            _turn: turn,
        })
    }

    /// The URL with every host, node `first` first, then the others in order, and `query`.
    pub fn url_from(&self, first: usize, query: &str) -> String {
        let hosts: Vec<String> = (0..3)
            .map(|i| self.hosts[(first + i) % 3].to_string())
            .collect();
        format!("amqp://guest:guest@{}/%2f{query}", hosts.join(","))
    }

    /// The URL of node `node` alone.
    pub fn url_of(&self, node: usize, query: &str) -> String {
        format!("amqp://guest:guest@{}/%2f{query}", self.hosts[node])
    }

    /// Kills node `node`'s Erlang VM with SIGKILL (its pid from the cluster's directory).
    pub fn kill(&self, node: usize) {
        let file = self.dir.join(format!("bq-ha-{}", node + 1)).join("pid");
        let pid = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
            .trim()
            .to_owned();
        let killed = Command::new("kill").args(["-9", &pid]).status().unwrap();
        assert!(killed.success(), "kill -9 {pid} ({})", node_name(node));
        // Gone once the kernel has torn it down (its sockets closed).
        let proc = PathBuf::from(format!("/proc/{pid}"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while proc.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Starts every node that is down (`scripts/brokers.sh up rabbitmq-cluster` of this
    /// checkout) and waits until the three run together.
    pub fn restart(&self) {
        start_nodes(&self.dir);
    }

    /// `rabbitmqctl` on the first node that answers, with the cluster's cookie.
    pub fn ctl(&self, args: &[&str]) -> String {
        let mut last = String::new();
        for node in 0..3 {
            let out = Command::new(&self.ctl)
                .args(["-n", &node_name(node), "-q"])
                .args(args)
                .output()
                .expect("rabbitmqctl runs");
            if out.status.success() {
                return String::from_utf8_lossy(&out.stdout).into_owned();
            }
            last = String::from_utf8_lossy(&out.stderr).into_owned();
        }
        panic!("rabbitmqctl {args:?} failed on every node: {last}");
    }

    /// Where `queue` lives: its type, and the node of its leader (quorum) or of its process
    /// (classic). (The message counts `rabbitmqctl` shows lag by seconds: a passive declaration
    /// counts them, `Raw::ready`.)
    pub fn queue(&self, queue: &str) -> Option<QueueState> {
        let out = self.ctl(&[
            "list_queues",
            "--no-table-headers",
            "name",
            "type",
            "leader",
            "pid",
        ]);
        let row = out.lines().find(|l| l.split('\t').next() == Some(queue))?;
        let columns: Vec<&str> = row.split('\t').collect();
        let (kind, leader, pid) = (columns.get(1)?, columns.get(2)?, columns.get(3)?);
        // A classic queue's process id names its node: `<bq-ha-1@localhost.1.2.3>`.
        let home = if leader.is_empty() {
            pid.trim_start_matches('<')
                .split('.')
                .next()
                .unwrap_or_default()
        } else {
            leader
        };
        Some(QueueState {
            kind: (*kind).to_owned(),
            node: (0..3).find(|n| node_name(*n) == home),
        })
    }

    /// Deletes `queues` (best effort).
    pub fn delete(&self, queues: &[&str]) {
        for queue in queues {
            let _ = Command::new(&self.ctl)
                .args(["-n", &node_name(0), "-q", "delete_queue", queue])
                .output();
            let _ = Command::new(&self.ctl)
                .args(["-n", &node_name(1), "-q", "delete_queue", queue])
                .output();
        }
    }
}

/// What `rabbitmqctl list_queues` says about a queue.
#[derive(Debug, Clone)]
pub struct QueueState {
    /// `classic` or `quorum`.
    pub kind: String,
    /// The node of its leader or process (0-based), when it runs on a node of the cluster.
    pub node: Option<usize>,
}

fn start_nodes(dir: &std::path::Path) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let brokers = dir.parent().expect("the cluster's directory has a parent");
    let out = Command::new("bash")
        .arg(root.join("scripts/brokers.sh"))
        .args(["up", "rabbitmq-cluster"])
        .env("BQ_BROKERS_DIR", brokers)
        .output()
        .expect("scripts/brokers.sh runs");
    assert!(
        out.status.success(),
        "scripts/brokers.sh up rabbitmq-cluster failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts the cluster's stopped nodes again when dropped, so a failing assertion after a kill
/// cannot leave a node down for the tests that follow.
pub struct RestartOnDrop(pub PathBuf);

impl Drop for RestartOnDrop {
    fn drop(&mut self) {
        start_nodes(&self.0);
    }
}

impl Cluster {
    /// A guard that starts the killed nodes again when the test ends, however it ends.
    pub fn restart_on_drop(&self) -> RestartOnDrop {
        RestartOnDrop(self.dir.clone())
    }
}
