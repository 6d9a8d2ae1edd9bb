//! The Toxiproxy of `scripts/brokers.sh up toxiproxy`: its HTTP API (through `curl`, as the
//! suite's other admin calls), and the connections a proxy accepted, counted from the server's
//! log (its API does not count them).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::faults::Toxic;
use crate::brokers::{self, Env};

/// The API's address and the server's log.
#[derive(Debug, Clone)]
pub(crate) struct Toxiproxy {
    api: String,
    log: PathBuf,
}

/// How long one API call may take.
const API_LIMIT: Duration = Duration::from_secs(15);

impl Toxiproxy {
    /// From `BQ_TOXIPROXY_URL` and `BQ_TOXIPROXY_LOG` (`scripts/brokers.sh env` exports them while
    /// the component runs).
    pub(crate) fn from_env(env: &Env) -> Result<Toxiproxy, String> {
        let api = env.var("BQ_TOXIPROXY_URL").ok_or(
            "BQ_TOXIPROXY_URL is not set: is Toxiproxy up (`scripts/brokers.sh up toxiproxy`)?",
        )?;
        let log = env.var("BQ_TOXIPROXY_LOG").ok_or(
            "BQ_TOXIPROXY_LOG is not set: is Toxiproxy up (`scripts/brokers.sh up toxiproxy`)?",
        )?;
        Ok(Toxiproxy {
            api: api.trim_end_matches('/').to_owned(),
            log: PathBuf::from(log),
        })
    }

    /// One API call; the response body when the status is 2xx.
    async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<String, String> {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--max-time", "10", "-X", method])
            .args(["-H", "Content-Type: application/json"])
            .args(["-w", "\n%{http_code}"]);
        if let Some(body) = body {
            cmd.arg("--data-binary").arg(body.to_string());
        }
        cmd.arg(format!("{}{path}", self.api));
        let out = brokers::run(cmd, API_LIMIT).await?;
        let (text, code) = out.trim_end().rsplit_once('\n').unwrap_or(("", out.trim()));
        match code.parse::<u16>() {
            Ok(code) if (200..300).contains(&code) => Ok(text.to_owned()),
            Ok(code) => Err(format!(
                "toxiproxy {method} {path}: HTTP {code}: {}",
                text.trim()
            )),
            Err(_) => Err(format!("toxiproxy {method} {path}: {}", out.trim())),
        }
    }

    /// Creates proxy `name` listening on `listen` (`127.0.0.1:0`: a port the server picks), in
    /// front of `upstream` (`host:port`); the address it listens on.
    pub(crate) async fn create_proxy(
        &self,
        name: &str,
        listen: &str,
        upstream: &str,
    ) -> Result<String, String> {
        let body = json!({
            "name": name,
            "listen": listen,
            "upstream": upstream,
            "enabled": true,
        });
        let text = self.call("POST", "/proxies", Some(&body)).await?;
        let created: Value =
            serde_json::from_str(&text).map_err(|e| format!("toxiproxy: {e}: {text}"))?;
        let listen = created
            .get("listen")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("toxiproxy: no listen address in {text}"))?;
        if !listen.starts_with("127.0.0.1:") || listen.ends_with(":0") {
            return Err(format!("toxiproxy: proxy {name} listens on {listen}"));
        }
        Ok(listen.to_owned())
    }

    /// Deletes every proxy that listens on `listen` (one an interrupted run left behind holds
    /// the port).
    pub(crate) async fn free_listen(&self, listen: &str) -> Result<(), String> {
        let text = self.call("GET", "/proxies", None).await?;
        let proxies: Value =
            serde_json::from_str(&text).map_err(|e| format!("toxiproxy: {e}: {text}"))?;
        let holders: Vec<String> = proxies
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, p)| p.get("listen").and_then(Value::as_str) == Some(listen))
            .map(|(name, _)| name.clone())
            .collect();
        for name in holders {
            self.delete_proxy(&name).await?;
        }
        Ok(())
    }

    pub(crate) async fn delete_proxy(&self, name: &str) -> Result<(), String> {
        self.call("DELETE", &format!("/proxies/{name}"), None)
            .await
            .map(|_| ())
    }

    pub(crate) async fn add_toxic(&self, proxy: &str, toxic: &Toxic) -> Result<(), String> {
        self.call(
            "POST",
            &format!("/proxies/{proxy}/toxics"),
            Some(&toxic.to_json()),
        )
        .await
        .map(|_| ())
    }

    pub(crate) async fn remove_toxic(&self, proxy: &str, toxic: &Toxic) -> Result<(), String> {
        self.call(
            "DELETE",
            &format!("/proxies/{proxy}/toxics/{}", toxic.name()),
            None,
        )
        .await
        .map(|_| ())
    }

    /// The client connections proxy `name` accepted so far (one log line each).
    pub(crate) async fn accepted(&self, name: &str) -> Result<u64, String> {
        let path = self.log.clone();
        let name = name.to_owned();
        tokio::task::spawn_blocking(move || {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("toxiproxy log {}: {e}", path.display()))?;
            Ok(count_accepted(&text, &name))
        })
        .await
        .map_err(|e| e.to_string())?
    }
}

/// The `Accepted client` lines of proxy `name` in a Toxiproxy log (JSON lines; anything else is
/// skipped).
pub(crate) fn count_accepted(log: &str, name: &str) -> u64 {
    log.lines()
        .filter(|line| line.contains("Accepted client"))
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|v| {
            v.get("message").and_then(Value::as_str) == Some("Accepted client")
                && v.get("name").and_then(Value::as_str) == Some(name)
        })
        .count() as u64
}

/// `host:port` of a broker URL (`scheme://[user[:pass]@]host[:port][/…][?…]`), with the scheme's
/// default port when it names none.
pub(crate) fn authority(url: &str, default_port: u16) -> Result<String, String> {
    let (_, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("not a URL: {url}"))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let hostport = &rest[..end];
    let hostport = hostport.rsplit_once('@').map_or(hostport, |(_, h)| h);
    if hostport.is_empty() {
        return Err(format!("no host in {url}"));
    }
    let has_port = match hostport.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => hostport.contains(':'),
    };
    Ok(if has_port {
        hostport.to_owned()
    } else {
        format!("{hostport}:{default_port}")
    })
}

/// `url` with its `host[:port]` replaced by `listen` (credentials, path and query kept).
pub(crate) fn redirect(url: &str, listen: &str) -> Result<String, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("not a URL: {url}"))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let userinfo = authority.rsplit_once('@').map(|(u, _)| u);
    Ok(match userinfo {
        Some(user) => format!("{scheme}://{user}@{listen}{tail}"),
        None => format!("{scheme}://{listen}{tail}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_clients_are_counted_per_proxy() {
        let log = concat!(
            r#"{"level":"info","version":"git","caller":"server.go:78","time":"2026-12-04T13:21:35Z","message":"Starting Toxiproxy"}"#,
            "\n",
            r#"{"level":"info","name":"chaos-a","listen":"127.0.0.1:0","upstream":"127.0.0.1:6379","client":"127.0.0.1:34052","caller":"proxy.go:204","time":"2026-12-04T13:21:41Z","message":"Accepted client"}"#,
            "\n",
            r#"{"level":"warn","name":"chaos-a","bytes":7,"error":"use of closed network connection","message":"Source terminated"}"#,
            "\n",
            r#"{"level":"info","name":"chaos-ab","client":"127.0.0.1:34058","message":"Accepted client"}"#,
            "\n",
            r#"{"level":"info","name":"chaos-a","client":"127.0.0.1:34060","message":"Accepted client"}"#,
            "\n",
            // a line cut short while the server wrote it
            r#"{"level":"info","name":"chaos-a","client":"127.0.0.1:34062","message":"Accepted cl"#,
        );
        assert_eq!(count_accepted(log, "chaos-a"), 2);
        assert_eq!(count_accepted(log, "chaos-ab"), 1, "names match exactly");
        assert_eq!(count_accepted(log, "chaos-b"), 0);
        assert_eq!(count_accepted("", "chaos-a"), 0);
    }

    #[test]
    fn broker_urls_are_pointed_at_the_proxy() {
        assert_eq!(
            authority("redis://127.0.0.1:6379", 6379).as_deref(),
            Ok("127.0.0.1:6379")
        );
        assert_eq!(
            authority("redis://127.0.0.1/2?retry_after=2", 6379).as_deref(),
            Ok("127.0.0.1:6379")
        );
        assert_eq!(
            authority("amqp://guest:guest@127.0.0.1:5672/%2f", 5672).as_deref(),
            Ok("127.0.0.1:5672")
        );
        assert_eq!(
            authority("amqp://u:p@ss@[::1]/%2f", 5672).as_deref(),
            Ok("[::1]:5672")
        );
        assert!(authority("127.0.0.1:6379", 6379).is_err());
        assert_eq!(
            redirect("amqp://guest:guest@127.0.0.1:5672/%2f", "127.0.0.1:40001").as_deref(),
            Ok("amqp://guest:guest@127.0.0.1:40001/%2f")
        );
        assert_eq!(
            redirect("redis://127.0.0.1:6379?laravel=1", "127.0.0.1:40002").as_deref(),
            Ok("redis://127.0.0.1:40002?laravel=1")
        );
        assert_eq!(
            redirect("redis://127.0.0.1", "127.0.0.1:40003").as_deref(),
            Ok("redis://127.0.0.1:40003")
        );
    }
}
