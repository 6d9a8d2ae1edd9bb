//! What the topology rows share about the nodes of a `scripts/brokers.sh` cluster: the
//! variables its `env` exports, waiting for a condition within a bound, starting a node again in
//! the background, and reading a Redis server's pid.

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

/// The variable `key` that `scripts/brokers.sh env` exports while `component` runs, or an error
/// saying how to start it.
pub(crate) fn required(env: &brokers::Env, key: &str, component: &str) -> Result<String, String> {
    env.var(key)
        .map(str::to_owned)
        .ok_or_else(|| format!("{key} is not set: scripts/brokers.sh up {component}"))
}

/// The `process_id` of a Redis server's `INFO server` reply.
pub(crate) fn redis_pid(info: &str) -> Option<u32> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix("process_id:"))
        .and_then(|p| p.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_pid_is_read_from_info_server() {
        let info = "# Server\r\nredis_version:7.0.15\r\nprocess_id:4242\r\ntcp_port:7001\r\n";
        assert_eq!(redis_pid(info), Some(4242));
        assert_eq!(redis_pid("# Server\r\nprocess_id:\r\n"), None);
        assert_eq!(redis_pid(""), None);
    }
}
