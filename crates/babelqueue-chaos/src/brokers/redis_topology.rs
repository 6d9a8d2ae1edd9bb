//! Where a `redis-cli` command of the harness goes when the row's URL names a topology (the
//! HA rows' `redis+sentinel://` and `redis+cluster://`) instead of one server: the master the
//! sentinels name, or any cluster node with `-c` (redis-cli follows the MOVED redirections).

use std::time::Duration;

use babelqueue::redis::topology::{self, Topology};

use super::{Env, run};

/// The server a command goes to: host, port, database, and whether redis-cli must follow
/// cluster redirections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) db: u8,
    pub(crate) cluster: bool,
}

/// The master of a `redis+sentinel://` URL's service, or the first node of a `redis+cluster://`
/// URL; `None` for a plain `redis://` URL (the caller reads it itself).
pub(crate) async fn target(env: &Env, url: &str) -> Result<Option<Target>, String> {
    // A plain URL is the caller's to read, as before there were topologies.
    let scheme = url.split_once("://").map_or("", |(s, _)| s);
    if !scheme.contains('+') {
        return Ok(None);
    }
    // The topology alone: the parser takes only its own options, not the transport's
    // (`wait_replicas`, `retry_after` …), which do not change where a command goes.
    let bare = url.split('?').next().unwrap_or(url);
    match topology::parse(bare).map_err(|e| e.to_string())? {
        Topology::Single => Ok(None),
        Topology::Cluster(c) => {
            let (host, port) = c
                .nodes
                .first()
                .cloned()
                .ok_or_else(|| format!("{url}: no cluster node"))?;
            Ok(Some(Target {
                host,
                port,
                db: 0,
                cluster: true,
            }))
        }
        Topology::Sentinel(s) => {
            let mut last = String::from("no sentinel in the URL");
            for (host, port) in &s.sentinels {
                let mut cmd = env.command("redis-cli");
                cmd.args(["-h", host, "-p", &port.to_string()]).args([
                    "SENTINEL",
                    "get-master-addr-by-name",
                    &s.service,
                ]);
                match run(cmd, Duration::from_secs(5)).await {
                    Ok(reply) => match master_addr(&reply) {
                        Some((host, port)) => {
                            return Ok(Some(Target {
                                host,
                                port,
                                db: s.db.unwrap_or(0),
                                cluster: false,
                            }));
                        }
                        None => last = format!("sentinel {host}:{port} answered {reply:?}"),
                    },
                    Err(e) => last = format!("sentinel {host}:{port}: {e}"),
                }
            }
            Err(format!(
                "no sentinel names the master of {}: {last}",
                s.service
            ))
        }
    }
}

/// The `(host, port)` of a `SENTINEL get-master-addr-by-name` reply as redis-cli prints it (two
/// lines; an unknown service prints nothing or `(nil)`).
pub(crate) fn master_addr(reply: &str) -> Option<(String, u16)> {
    let mut lines = reply.lines().map(str::trim).filter(|l| !l.is_empty());
    let host = lines.next()?;
    let port = lines.next()?.parse().ok()?;
    Some((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_master_is_read_from_the_sentinel_reply() {
        assert_eq!(
            master_addr("127.0.0.1\n40123\n"),
            Some(("127.0.0.1".into(), 40123))
        );
        assert_eq!(
            master_addr("127.0.0.1\r\n40123\r\n"),
            Some(("127.0.0.1".into(), 40123))
        );
        assert_eq!(master_addr(""), None);
        assert_eq!(master_addr("(nil)"), None);
        assert_eq!(master_addr("127.0.0.1\nnot-a-port"), None);
    }
}
