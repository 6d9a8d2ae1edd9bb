//! What the topology rows share about the nodes of a `scripts/brokers.sh` cluster: waiting for a
//! condition within a bound, and starting a node again in the background.

use std::future::Future;
use std::time::{Duration, Instant};

use std::process::Command;

use crate::brokers;

/// Polls `check` every 200 ms until it gives `Some`, for at most `limit`; `Err` names `what`
/// and the last thing `check` said.
pub(crate) async fn until<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        let last = match check().await {
            Ok(found) => return Ok(found),
            Err(e) => e,
        };
        if start.elapsed() >= limit {
            return Err(format!("{what}: not within {}s ({last})", limit.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs `program args…` detached (a shell that exits at once), so the node is nobody's child
/// and outlives the run, as the cluster's other nodes do.
pub(crate) async fn spawn_detached(program: &str, args: &[&str]) -> Result<(), String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("\"$@\" </dev/null >/dev/null 2>&1 &")
        .arg("sh")
        .arg(program)
        .args(args);
    brokers::run(cmd, Duration::from_secs(10))
        .await
        .map(|_| ())
        .map_err(|e| format!("starting {program}: {e}"))
}

/// The pid in a pid file, when that process still runs.
pub(crate) fn live_pid(path: &std::path::Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    std::path::Path::new(&format!("/proc/{pid}"))
        .exists()
        .then_some(pid)
}
