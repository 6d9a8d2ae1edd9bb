//! What every integration test shares: the broker URL, the skip-or-fail rule, unique names,
//! the lock the restart test takes, the Python driver.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use babelqueue_core::Transport;
use babelqueue_transport_artemis::{ArtemisOptions, ArtemisTransport};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Tests share the broker (read); the restart test takes it alone (write).
static BROKER: RwLock<()> = RwLock::const_new(());

pub(crate) const DEFAULT_URL: &str = "artemis://bq:bq@127.0.0.1:5673";

pub(crate) fn url() -> String {
    std::env::var("BQ_ARTEMIS_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

pub(crate) fn required() -> bool {
    std::env::var_os("BQ_REQUIRE_BROKERS").is_some()
}

/// Fails (with `BQ_REQUIRE_BROKERS`) or prints a loud skip line.
pub(crate) fn unavailable<T>(what: &str, detail: &str) -> Option<T> {
    if required() {
        panic!(
            "{what} is not available ({detail}) and BQ_REQUIRE_BROKERS is set; \
             start it with `scripts/brokers.sh up artemis python`"
        );
    }
    eprintln!("SKIPPED: {what} not reachable ({detail})");
    None
}

pub(crate) async fn reachable(url: &str) -> bool {
    let Ok(config) = ArtemisOptions::parse(url) else {
        return false;
    };
    matches!(
        tokio::time::timeout(
            Duration::from_secs(2),
            tokio::net::TcpStream::connect((config.host.as_str(), config.port)),
        )
        .await,
        Ok(Ok(_))
    )
}

/// Shared use of the broker, or `None` (skip) when it is not reachable.
pub(crate) async fn broker() -> Option<RwLockReadGuard<'static, ()>> {
    let guard = BROKER.read().await;
    if reachable(&url()).await {
        Some(guard)
    } else {
        unavailable("artemis", &url())
    }
}

/// Exclusive use of the broker (nobody else runs while it restarts).
pub(crate) async fn broker_alone() -> Option<RwLockWriteGuard<'static, ()>> {
    let guard = BROKER.write().await;
    if reachable(&url()).await {
        Some(guard)
    } else {
        unavailable("artemis", &url())
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A queue name no other test (or earlier run) uses.
pub(crate) fn queue(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "bq-it.{name}.{}.{:x}.{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

pub(crate) async fn transport() -> ArtemisTransport {
    ArtemisTransport::connect(&url())
        .await
        .expect("connect to Artemis")
}

/// Pops and accepts everything `queue` holds (waiting `wait` for each), returning the bodies.
pub(crate) async fn drain(t: &ArtemisTransport, queue: &str, wait: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(d) = t.pop(queue, wait).await.expect("pop") {
        out.push(d.body().to_vec());
        t.ack(&d).await.expect("ack");
    }
    out
}

pub(crate) fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

/// The reference SDK's Python, or `None` (skip) when it is missing.
pub(crate) fn python() -> Option<PathBuf> {
    let path = std::env::var_os("BQ_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python"),
        PathBuf::from,
    );
    if path.exists() {
        Some(path)
    } else {
        unavailable("python (BQ_PYTHON)", &path.display().to_string())
    }
}

pub(crate) fn driver() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/artemis_driver.py")
}

/// Runs the Python driver; returns its stdout JSON lines (panics on a non-zero exit).
pub(crate) async fn run_python(python: &PathBuf, args: &[&str]) -> Vec<serde_json::Value> {
    let output = tokio::process::Command::new(python)
        .arg(driver())
        .args(args)
        .output()
        .await
        .expect("run the Python driver");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "python {args:?} failed: {}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}
