//! What the cluster tests share: the three-server cluster of `scripts/brokers.sh up
//! nats-cluster` (`BQ_NATS_CLUSTER_URL`, `BQ_NATS_CLUSTER_DIR`, `BQ_NATS_SERVER`), found or
//! skipped loudly, and its servers killed and started again by name.
//!
//! A cluster that is not up prints `SKIPPED`; with `BQ_REQUIRE_HA` set (not empty) it fails
//! instead, as `BQ_REQUIRE_BROKERS` does for the single brokers.

#![allow(dead_code, unreachable_pub, clippy::print_stdout)] // each test file uses its own part

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use babelqueue_core::TransportErrorKind;
use babelqueue_transport_nats::NatsTransport;
use babelqueue_transport_nats::async_nats::jetstream;

/// Turns a skip of the cluster tests into a failure when set and not empty.
pub const REQUIRE_HA: &str = "BQ_REQUIRE_HA";

/// The names of the cluster's servers.
pub const SERVERS: [&str; 3] = ["n1", "n2", "n3"];

/// Says that the cluster is unavailable: panics when [`REQUIRE_HA`] is set, else prints
/// `SKIPPED: …` so the caller can return.
#[track_caller]
pub fn skip_or_fail(what: &str) {
    let required = std::env::var_os(REQUIRE_HA).is_some_and(|v| !v.is_empty());
    assert!(
        !required,
        "{what}, and {REQUIRE_HA} is set: scripts/brokers.sh up nats-cluster, then eval \"$(scripts/brokers.sh env)\""
    );
    println!("SKIPPED: {what} (set {REQUIRE_HA}=1 to fail instead)");
}

/// The cluster of `scripts/brokers.sh up nats-cluster`.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// `nats://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`.
    pub url: String,
    dir: PathBuf,
    binary: OsString,
}

impl Cluster {
    /// The cluster the environment names, when all of it answers (a connection through its
    /// URL that sees three servers with a JetStream meta leader); `None` after
    /// [`skip_or_fail`].
    pub async fn from_env() -> Option<Cluster> {
        let (Ok(url), Some(dir)) = (
            std::env::var("BQ_NATS_CLUSTER_URL"),
            std::env::var_os("BQ_NATS_CLUSTER_DIR"),
        ) else {
            skip_or_fail("the NATS cluster is not up (BQ_NATS_CLUSTER_URL is not set)");
            return None;
        };
        let cluster = Cluster {
            url,
            dir: PathBuf::from(dir),
            binary: std::env::var_os("BQ_NATS_SERVER").unwrap_or_else(|| "nats-server".into()),
        };
        let down: Vec<&str> = SERVERS
            .into_iter()
            .filter(|n| cluster.pid(n).is_none())
            .collect();
        if !down.is_empty() {
            skip_or_fail(&format!(
                "the NATS cluster's servers {down:?} are not running"
            ));
            return None;
        }
        match tokio::time::timeout(
            Duration::from_secs(10),
            NatsTransport::connect(&cluster.url),
        )
        .await
        {
            Ok(Ok(_)) => Some(cluster),
            // The servers run: a URL the transport refuses is a failure, never a skip.
            Ok(Err(e)) if e.kind() == TransportErrorKind::Config => {
                panic!("the transport refuses the cluster URL {}: {e}", cluster.url)
            }
            Ok(Err(e)) => {
                skip_or_fail(&format!(
                    "the NATS cluster at {} is not reachable ({e})",
                    cluster.url
                ));
                None
            }
            Err(_) => {
                skip_or_fail(&format!(
                    "the NATS cluster at {} does not answer",
                    cluster.url
                ));
                None
            }
        }
    }

    /// The cluster URL with `options` (`replicas=3&ack_wait=2`).
    pub fn url_with(&self, options: &str) -> String {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{separator}{options}", self.url)
    }

    fn config(&self, name: &str) -> PathBuf {
        self.dir.join(name).join("nats.conf")
    }

    /// The pid of server `name` when it runs: its pid file names a process started with its
    /// config (never another process that took the number).
    pub fn pid(&self, name: &str) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.dir.join(name).join("nats.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let config = self.config(name);
        let ours = String::from_utf8_lossy(&cmdline).contains(&*config.to_string_lossy());
        ours.then_some(pid)
    }

    /// SIGKILL to server `name` (no goodbye to its peers or clients), and waits until it is gone.
    pub async fn kill(&self, name: &str) {
        let pid = self
            .pid(name)
            .unwrap_or_else(|| panic!("server {name} is not running"));
        let status = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -KILL {pid} ({name}): {status}");
        let since = Instant::now();
        while std::path::Path::new(&format!("/proc/{pid}/cmdline")).exists()
            && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty())
        {
            assert!(
                since.elapsed() < Duration::from_secs(10),
                "{name} outlived SIGKILL"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts server `name` again with its config (same ports, same store), and waits until
    /// its client port accepts connections.
    pub async fn restart(&self, name: &str) {
        if self.pid(name).is_some() {
            return;
        }
        let config = self.config(name);
        // In the background of a shell that exits at once: the server is nobody's child here,
        // and stays up after the test, as the cluster's other servers do.
        let status = Command::new("sh")
            .args(["-c", "\"$0\" -c \"$1\" </dev/null >/dev/null 2>&1 &"])
            .arg(&self.binary)
            .arg(&config)
            .stdin(Stdio::null())
            .status()
            .expect("sh runs");
        assert!(status.success(), "starting {name}: {status}");
        let text = std::fs::read_to_string(&config).expect("the server's config");
        let port: u16 = text
            .lines()
            .find_map(|l| l.strip_prefix("# client="))
            .and_then(|p| p.trim().parse().ok())
            .expect("the client port in the config");
        let since = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                since.elapsed() < Duration::from_secs(20),
                "{name} did not come back"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts every server that is not running (after a test that failed half-way).
    pub async fn heal(&self) {
        for name in SERVERS {
            self.restart(name).await;
        }
    }
}

/// The stream's cluster facts: its leader, and how many of its replicas are current.
pub async fn placement(js: &jetstream::Context, stream: &str) -> Option<(String, usize)> {
    let mut stream = js.get_stream(stream).await.ok()?;
    let info = stream.info().await.ok()?;
    let cluster = info.cluster.clone()?;
    let leader = cluster.leader.clone()?;
    let current = cluster.replicas.iter().filter(|r| r.current).count();
    Some((leader, current))
}

/// Waits (up to `within`) until the stream has a leader and `followers` current replicas
/// besides it; its leader.
pub async fn settled(
    js: &jetstream::Context,
    stream: &str,
    followers: usize,
    within: Duration,
) -> String {
    let since = Instant::now();
    loop {
        if let Some((leader, current)) = placement(js, stream).await
            && current >= followers
        {
            return leader;
        }
        assert!(
            since.elapsed() < within,
            "stream {stream} has no leader with {followers} current followers after {within:?}: {:?}",
            placement(js, stream).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server that leads the consumer `consumer` of `stream`.
pub async fn consumer_leader(
    js: &jetstream::Context,
    stream: &str,
    consumer: &str,
) -> Option<String> {
    let stream = js.get_stream(stream).await.ok()?;
    let mut consumer = stream
        .get_consumer::<jetstream::consumer::pull::Config>(consumer)
        .await
        .ok()?;
    consumer.info().await.ok()?.cluster.clone()?.leader
}

/// Moves the leadership of the stream and of its consumer onto `server` (a leader stepdown
/// naming it as the preferred leader, repeated until it holds), so that one kill takes the
/// stream's leader, the consumer's leader and (when the worker is connected there) the
/// worker's connection at once.
pub async fn lead_from(js: &jetstream::Context, stream: &str, consumer: &str, server: &str) {
    let preferred = format!("{{\"placement\":{{\"preferred\":\"{server}\"}}}}");
    let since = Instant::now();
    loop {
        let on_stream = placement(js, stream).await.map(|p| p.0);
        let on_consumer = consumer_leader(js, stream, consumer).await;
        if on_stream.as_deref() == Some(server) && on_consumer.as_deref() == Some(server) {
            return;
        }
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "the leaders of {stream} did not move to {server}: stream {on_stream:?}, consumer {on_consumer:?}"
        );
        let subject = if on_stream.as_deref() == Some(server) {
            format!("$JS.API.CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}")
        } else {
            format!("$JS.API.STREAM.LEADER.STEPDOWN.{stream}")
        };
        let _ = js.client().request(subject, preferred.clone().into()).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
