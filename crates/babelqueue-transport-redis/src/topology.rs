//! Where the servers are: one server (`redis://`, `rediss://`), a master found through Redis
//! Sentinel (`redis+sentinel://`, `rediss+sentinel://`) or a Redis Cluster (`redis+cluster://`,
//! `rediss+cluster://`). Parsing only, no network; [`FredClient`](crate::FredClient) turns a
//! [`Topology`] into the client's configuration.
//!
//! ```text
//! redis+sentinel://[user:pass@]host1:port1,host2:port2/service_name[/db][?options]
//! redis+cluster://[user:pass@]host1:port1,host2:port2[?options]
//! ```
//!
//! The userinfo authenticates to the Redis servers (the master and its replicas, the cluster's
//! nodes). Sentinels are asked without credentials unless `sentinel_password=` (and, for an ACL
//! user, `sentinel_username=`) is given. A host without a port is on 26379 (a sentinel) or 6379
//! (a cluster node). An IPv6 host is written in brackets (`[::1]:26379`). The `rediss+` forms
//! speak TLS to every sentinel and server, with the `ca_file`, `cert_file` and `key_file` query
//! keys of `rediss://`.

use std::fmt;

use babelqueue_core::options::{Component, decode_lossy};
use babelqueue_core::redact::redact;

use crate::error::RedisError;

/// The default port of a sentinel.
pub const SENTINEL_PORT: u16 = 26379;

/// The default port of a Redis server (a cluster node).
pub const REDIS_PORT: u16 = 6379;

/// How the servers of a URL are found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// `redis://` or `rediss://`: one server (the client reads the URL itself).
    Single,
    /// `redis+sentinel://` or `rediss+sentinel://`: the master of a service, as the sentinels
    /// name it (and again after a failover).
    Sentinel(SentinelUrl),
    /// `redis+cluster://` or `rediss+cluster://`: a Redis Cluster, found from any of its nodes.
    Cluster(ClusterUrl),
}

/// A user name and a password; the password never shows in `Debug`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The ACL user name (`None`: the default user).
    pub username: Option<String>,
    /// The password (`None`: no `AUTH`).
    pub password: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

/// A `redis+sentinel://` URL, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelUrl {
    /// Whether every connection speaks TLS (`rediss+sentinel://`).
    pub tls: bool,
    /// The sentinels, as `(host, port)`, in the order written.
    pub sentinels: Vec<(String, u16)>,
    /// The service (master) name the sentinels monitor.
    pub service: String,
    /// The database to select on the master.
    pub db: Option<u8>,
    /// For the master and its replicas (the URL's userinfo).
    pub credentials: Credentials,
    /// For the sentinels (`sentinel_username=`, `sentinel_password=`).
    pub sentinel_credentials: Credentials,
}

/// A `redis+cluster://` URL, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterUrl {
    /// Whether every connection speaks TLS (`rediss+cluster://`).
    pub tls: bool,
    /// The nodes to discover the cluster from, as `(host, port)`.
    pub nodes: Vec<(String, u16)>,
    /// For every node (the URL's userinfo).
    pub credentials: Credentials,
}

/// Whether `scheme` (the text before `://`) is one the transport reads.
pub fn is_scheme(scheme: &str) -> bool {
    matches!(
        scheme,
        "redis"
            | "rediss"
            | "redis+sentinel"
            | "rediss+sentinel"
            | "redis+cluster"
            | "rediss+cluster"
    )
}

/// Whether `scheme` names a Redis Cluster.
pub fn is_cluster_scheme(scheme: &str) -> bool {
    matches!(scheme, "redis+cluster" | "rediss+cluster")
}

/// A configuration error about `url`, naming only its scheme and hosts: the query may hold a
/// secret under a misspelt key, which redaction would not recognise.
fn config(url: &str, why: impl fmt::Display) -> RedisError {
    let scheme = url.split_once("://").map_or("", |(s, _)| s);
    match babelqueue_core::redact::host(url) {
        Some(hosts) => RedisError::Config(format!("{why} (in {}://{hosts}…)", redact(scheme))),
        None => RedisError::Config(why.to_string()),
    }
}

/// Reads a client URL (BabelQueue's own query keys already taken out).
pub fn parse(url: &str) -> Result<Topology, RedisError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| config(url, "no \"://\""))?;
    let (kind, tls) = match scheme {
        "redis" | "rediss" => return Ok(Topology::Single),
        "redis+sentinel" => ("sentinel", false),
        "rediss+sentinel" => ("sentinel", true),
        "redis+cluster" => ("cluster", false),
        "rediss+cluster" => ("cluster", true),
        other => {
            return Err(RedisError::Config(format!(
                "scheme {:?} is not redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster or rediss+cluster",
                redact(other)
            )));
        }
    };
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    // The userinfo ends at the last `@` (a password may hold an unencoded `@`).
    let (userinfo, after) = match before_query.rsplit_once('@') {
        Some((userinfo, after)) => (Some(userinfo), after),
        None => (None, before_query),
    };
    let (hosts, path) = after.split_once('/').unwrap_or((after, ""));
    let default_port = if kind == "sentinel" {
        SENTINEL_PORT
    } else {
        REDIS_PORT
    };
    let hosts = host_list(url, hosts, default_port)?;
    let credentials = userinfo.map(credentials).unwrap_or_default();
    let mut sentinel_credentials = Credentials::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = decode_lossy(value, Component::Query);
        match (kind, key) {
            ("sentinel", "sentinel_username") => {
                sentinel_credentials.username = Some(value).filter(|v| !v.is_empty());
            }
            ("sentinel", "sentinel_password") => {
                sentinel_credentials.password = Some(value).filter(|v| !v.is_empty());
            }
            _ => {
                return Err(config(
                    url,
                    format!(
                        "unknown option {:?} for a {scheme}:// URL (the options are those of the transport{})",
                        redact(key),
                        if kind == "sentinel" {
                            ", sentinel_username and sentinel_password"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
    }
    if kind == "cluster" {
        if !matches!(path, "" | "0") {
            return Err(config(
                url,
                "a Redis Cluster has database 0 only: write no /db (or /0)",
            ));
        }
        return Ok(Topology::Cluster(ClusterUrl {
            tls,
            nodes: hosts,
            credentials,
        }));
    }
    let mut segments = path.split('/');
    let service = decode_lossy(segments.next().unwrap_or(""), Component::Path);
    if service.is_empty() {
        return Err(config(
            url,
            "no service name: write the master's name the sentinels monitor after the hosts (redis+sentinel://h1:26379,h2:26379/mymaster)",
        ));
    }
    let db = match segments.next().filter(|s| !s.is_empty()) {
        None => None,
        Some(db) => Some(db.parse::<u8>().map_err(|_| {
            config(
                url,
                format!("the database must be a number from 0 to 255, got {db:?}"),
            )
        })?),
    };
    if segments.any(|s| !s.is_empty()) {
        return Err(config(
            url,
            "the path is /service_name[/db]: there is more after the database",
        ));
    }
    Ok(Topology::Sentinel(SentinelUrl {
        tls,
        sentinels: hosts,
        service,
        db,
        credentials,
        sentinel_credentials,
    }))
}

/// `user:pass` (both percent-decoded; either may be empty).
fn credentials(userinfo: &str) -> Credentials {
    let (user, password) = match userinfo.split_once(':') {
        Some((user, password)) => (user, Some(password)),
        None => (userinfo, None),
    };
    Credentials {
        username: Some(decode_lossy(user, Component::Userinfo)).filter(|u| !u.is_empty()),
        password: password
            .map(|p| decode_lossy(p, Component::Userinfo))
            .filter(|p| !p.is_empty()),
    }
}

/// `h1:p1,h2,[::1]:p3`: at least one host, each with its port or `default_port`.
fn host_list(url: &str, text: &str, default_port: u16) -> Result<Vec<(String, u16)>, RedisError> {
    let mut hosts = Vec::new();
    for item in text.split(',') {
        if item.is_empty() {
            return Err(config(
                url,
                "an empty host in the host list (h1:port1,h2:port2)",
            ));
        }
        let (host, port) = if let Some(v6) = item.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| config(url, format!("{item:?} opens \"[\" without \"]\"")))?;
            match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None if after.is_empty() => (host, None),
                None => return Err(config(url, format!("{item:?} is not [v6]:port"))),
            }
        } else {
            match item.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (item, None),
            }
        };
        if host.is_empty() {
            return Err(config(url, format!("{item:?} names no host")));
        }
        let port = match port {
            None => default_port,
            Some(port) => port
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| {
                    config(
                        url,
                        format!("{port:?} is not a port (1 to 65535) in {item:?}"),
                    )
                })?,
        };
        hosts.push((host.to_owned(), port));
    }
    Ok(hosts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(list: &[(&str, u16)]) -> Vec<(String, u16)> {
        list.iter().map(|(h, p)| ((*h).to_owned(), *p)).collect()
    }

    fn creds(user: Option<&str>, password: Option<&str>) -> Credentials {
        Credentials {
            username: user.map(str::to_owned),
            password: password.map(str::to_owned),
        }
    }

    #[test]
    fn sentinel_urls_are_read_row_by_row() {
        // (url, tls, sentinels, service, db, master credentials, sentinel credentials)
        type Row<'a> = (
            &'a str,
            bool,
            &'a [(&'a str, u16)],
            &'a str,
            Option<u8>,
            Credentials,
            Credentials,
        );
        let rows: [Row<'_>; 7] = [
            (
                "redis+sentinel://h1:26379,h2:26380/mymaster",
                false,
                &[("h1", 26379), ("h2", 26380)],
                "mymaster",
                None,
                creds(None, None),
                creds(None, None),
            ),
            (
                "redis+sentinel://h1,h2:1/mymaster/3",
                false,
                &[("h1", 26379), ("h2", 1)],
                "mymaster",
                Some(3),
                creds(None, None),
                creds(None, None),
            ),
            (
                "rediss+sentinel://app:p%40ss@[::1]:26379,10.0.0.2/svc/0/",
                true,
                &[("::1", 26379), ("10.0.0.2", 26379)],
                "svc",
                Some(0),
                creds(Some("app"), Some("p@ss")),
                creds(None, None),
            ),
            (
                "redis+sentinel://:hunter2@h/m?sentinel_password=s%2Bcret",
                false,
                &[("h", 26379)],
                "m",
                None,
                creds(None, Some("hunter2")),
                creds(None, Some("s+cret")),
            ),
            (
                "redis+sentinel://h/m?sentinel_username=watch&sentinel_password=pw",
                false,
                &[("h", 26379)],
                "m",
                None,
                creds(None, None),
                creds(Some("watch"), Some("pw")),
            ),
            // an `@` inside an unencoded password: the userinfo ends at the last `@`
            (
                "redis+sentinel://u:a@b@h:1/m",
                false,
                &[("h", 1)],
                "m",
                None,
                creds(Some("u"), Some("a@b")),
                creds(None, None),
            ),
            (
                "redis+sentinel://h:1/my%20master/",
                false,
                &[("h", 1)],
                "my master",
                None,
                creds(None, None),
                creds(None, None),
            ),
        ];
        for (url, tls, sentinels, service, db, credentials, sentinel_credentials) in rows {
            assert_eq!(
                parse(url).unwrap(),
                Topology::Sentinel(SentinelUrl {
                    tls,
                    sentinels: hosts(sentinels),
                    service: service.to_owned(),
                    db,
                    credentials,
                    sentinel_credentials,
                }),
                "{url}"
            );
        }
    }

    #[test]
    fn cluster_urls_are_read_row_by_row() {
        // (url, tls, nodes, credentials)
        type Row<'a> = (&'a str, bool, &'a [(&'a str, u16)], Credentials);
        let rows: [Row<'_>; 4] = [
            (
                "redis+cluster://h1:7000,h2:7001",
                false,
                &[("h1", 7000), ("h2", 7001)],
                creds(None, None),
            ),
            (
                "rediss+cluster://u:pw@h1/",
                true,
                &[("h1", 6379)],
                creds(Some("u"), Some("pw")),
            ),
            (
                "redis+cluster://[::1]:7000/0",
                false,
                &[("::1", 7000)],
                creds(None, None),
            ),
            (
                "redis+cluster://:pw@h:7000",
                false,
                &[("h", 7000)],
                creds(None, Some("pw")),
            ),
        ];
        for (url, tls, nodes, credentials) in rows {
            assert_eq!(
                parse(url).unwrap(),
                Topology::Cluster(ClusterUrl {
                    tls,
                    nodes: hosts(nodes),
                    credentials,
                }),
                "{url}"
            );
        }
        assert_eq!(parse("redis://h:1/2").unwrap(), Topology::Single);
        assert_eq!(parse("rediss://h").unwrap(), Topology::Single);
    }

    #[test]
    fn bad_urls_say_what_is_wrong_and_never_show_a_password() {
        for (url, needle) in [
            ("redis+sentinel://h1,h2", "no service name"),
            ("redis+sentinel://h1:26379/", "no service name"),
            (
                "redis+sentinel://u:hunter2@h1/m/x",
                "database must be a number",
            ),
            ("redis+sentinel://h1/m/256", "database must be a number"),
            ("redis+sentinel://h1/m/1/extra", "more after the database"),
            ("redis+sentinel://h1,,h2/m", "empty host"),
            ("redis+sentinel://u:hunter2@h1:0/m", "not a port"),
            ("redis+sentinel://h1:x/m", "not a port"),
            ("redis+sentinel://[::1/m", "without \"]\""),
            ("redis+sentinel://:26379/m", "names no host"),
            (
                "redis+sentinel://h/m?sentinel_pasword=hunter2",
                "unknown option \"sentinel_pasword\"",
            ),
            ("redis+cluster://u:hunter2@h:7000/1", "database 0 only"),
            (
                "redis+cluster://h:7000?sentinel_password=hunter2",
                "unknown option",
            ),
            ("redis+cluster://", "empty host"),
            ("redis+clusters://u:hunter2@h", "is not redis"),
        ] {
            let error = parse(url).unwrap_err();
            assert_eq!(
                error.kind(),
                babelqueue_core::TransportErrorKind::Config,
                "{url}"
            );
            let text = format!("{error} {error:?}");
            assert!(text.contains(needle), "{url}: {text}");
            assert!(!text.contains("hunter2"), "{url}: {text}");
        }
    }

    #[test]
    fn passwords_never_show_in_debug() {
        let parsed =
            parse("redis+sentinel://u:hunter2@h/m?sentinel_password=s3cr3t-sentinel").unwrap();
        let shown = format!("{parsed:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("s3cr3t-sentinel"), "{shown}");
        assert!(shown.contains("***"), "{shown}");
    }

    #[test]
    fn schemes() {
        for scheme in [
            "redis",
            "rediss",
            "redis+sentinel",
            "rediss+sentinel",
            "redis+cluster",
            "rediss+cluster",
        ] {
            assert!(is_scheme(scheme), "{scheme}");
        }
        assert!(!is_scheme("redis-sentinel"));
        assert!(is_cluster_scheme("rediss+cluster"));
        assert!(!is_cluster_scheme("redis+sentinel"));
    }
}
