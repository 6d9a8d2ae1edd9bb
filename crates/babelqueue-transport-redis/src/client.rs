//! The Redis commands the transport needs, behind a trait: [`FredClient`] talks to a server;
//! a recording or scripted implementation checks the key layout without one.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::redact::{self, redact, scrub};
use fred::bytes::Bytes;
use fred::interfaces::{ClientLike, EventInterface, ListInterface, SortedSetsInterface};
use fred::types::config::{ClusterDiscoveryPolicy, Config, Server, ServerConfig, TlsConnector};
use fred::types::scripts::Script;
use fred::types::{ClusterHash, CustomCommand, Key, Value};

use crate::error::RedisError;
use crate::liveness::{DEFAULT_REPLY_TIMEOUT, ServerWait, Watchdog};
use crate::scripts::LuaScript;
use crate::topology::Topology;

/// A Redis reply, reduced to what the scripts return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `nil`, or a Lua `false` (RESP2 and RESP3 alike).
    Nil,
    /// An integer (a Lua `true` arrives as 1).
    Int(i64),
    /// A bulk string, byte for byte.
    Bytes(Vec<u8>),
    /// An array.
    Array(Vec<Reply>),
}

impl Reply {
    /// The bytes of a bulk reply; `None` for nil/false.
    pub fn into_bytes(self) -> Option<Vec<u8>> {
        match self {
            Reply::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// An integer reply (nil counts as 0).
    pub fn as_int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            _ => 0,
        }
    }
}

fn reply(value: Value) -> Result<Reply, RedisError> {
    Ok(match value {
        Value::Null => Reply::Nil,
        Value::Boolean(false) => Reply::Nil,
        Value::Boolean(true) => Reply::Int(1),
        Value::Integer(n) => Reply::Int(n),
        Value::String(s) => Reply::Bytes(s.as_bytes().to_vec()),
        Value::Bytes(b) => Reply::Bytes(b.to_vec()),
        Value::Double(d) => Reply::Bytes(d.to_string().into_bytes()),
        Value::Array(items) => {
            Reply::Array(items.into_iter().map(reply).collect::<Result<_, _>>()?)
        }
        other => return Err(RedisError::Protocol(format!("a {:?} reply", other.kind()))),
    })
}

/// Whether the command connection was replaced since a moment: taken before a write that `WAIT`
/// is to confirm, and asked after the `WAIT`. `WAIT` confirms the writes of its own connection,
/// so a reconnection in between (a failover, a retried command) would confirm nothing.
#[derive(Debug)]
pub struct Reconnects(Option<tokio::sync::broadcast::Receiver<Server>>);

impl Reconnects {
    /// For clients that never reconnect: nothing is ever replaced.
    pub fn never() -> Reconnects {
        Reconnects(None)
    }

    /// Whether a connection was (re)established since this was taken.
    pub fn happened(&mut self) -> bool {
        use tokio::sync::broadcast::error::TryRecvError;
        match &mut self.0 {
            None => false,
            Some(events) => !matches!(events.try_recv(), Err(TryRecvError::Empty)),
        }
    }
}

/// The commands the transport sends. Keys and values are raw bytes: a member is never decoded,
/// so a value that is not UTF-8 is removed and dead-lettered exactly.
#[async_trait]
pub trait RedisClient: Send + Sync + fmt::Debug {
    /// Runs a script (EVALSHA, loading it on NOSCRIPT).
    async fn eval(
        &self,
        script: &'static LuaScript,
        keys: Vec<Vec<u8>>,
        args: Vec<Vec<u8>>,
    ) -> Result<Reply, RedisError>;
    /// RPUSH one value.
    async fn rpush(&self, key: &[u8], value: &[u8]) -> Result<(), RedisError>;
    /// ZADD one member at an integer score.
    async fn zadd(&self, key: &[u8], score: i64, member: &[u8]) -> Result<(), RedisError>;
    /// ZREM one member; returns how many were removed.
    async fn zrem(&self, key: &[u8], member: &[u8]) -> Result<i64, RedisError>;
    /// LRANGE (inclusive indexes).
    async fn lrange(&self, key: &[u8], start: i64, stop: i64) -> Result<Vec<Vec<u8>>, RedisError>;
    /// BLPOP one key for up to `timeout`, discarding what it pops (a wake-up token).
    async fn blpop(&self, key: &[u8], timeout: Duration) -> Result<(), RedisError>;
    /// Waits up to `timeout` until the list `key` holds an item, leaving the list as it is (the
    /// default layout's idle wait: the reserve script then takes the item). The default sleeps
    /// `timeout`, at most 100 ms, so a client without a blocking connection polls.
    async fn wait_for_items(&self, key: &[u8], timeout: Duration) -> Result<(), RedisError> {
        let _ = key;
        tokio::time::sleep(timeout.min(Duration::from_millis(100))).await;
        Ok(())
    }
    /// A mark to ask, after a `WAIT`, whether the command connection was replaced since now.
    fn reconnects(&self) -> Reconnects {
        Reconnects::never()
    }
    /// `WAIT replicas timeout` on the connection (and, on a cluster, the node) that wrote
    /// `key` last: how many replicas confirmed every write made so far on that connection. The
    /// default, for clients without replicas (a recording fake), confirms at once.
    async fn wait_replicas(
        &self,
        key: &[u8],
        replicas: u32,
        timeout: Duration,
    ) -> Result<i64, RedisError> {
        let _ = (key, timeout);
        Ok(i64::from(replicas))
    }
    /// Closes the connections.
    async fn quit(&self) -> Result<(), RedisError>;
}

/// [`RedisClient`] over `fred`: one connection for commands and scripts, and a second one for
/// the blocking waits (BLPOP, BLMOVE) so a blocked wait never delays a settle. Both reconnect on their own (exponential
/// back-off up to 5 s), so a Redis restart does not stop a worker. Every call is bounded (see
/// [`liveness`](crate::liveness)): a reply later than the server's own wait plus the reply
/// timeout fails the call and replaces the connection, so a silent black hole ends too.
pub struct FredClient {
    /// Whether the servers are a Redis Cluster (`WAIT` then goes to the node of a key's slot).
    clustered: bool,
    commands: fred::clients::Client,
    blocking: fred::clients::Client,
    /// The reply bound of every call, on either connection.
    dog: Watchdog,
    scripts: Arc<Vec<(&'static str, Script)>>,
    /// Through Sentinel: the subscription that reconnects both clients to a new master.
    watcher: Option<crate::watch::Watcher>,
}

impl Drop for FredClient {
    fn drop(&mut self) {
        if let Some(watcher) = &self.watcher {
            watcher.task.abort();
        }
    }
}

impl fmt::Debug for FredClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FredClient").finish_non_exhaustive()
    }
}

impl FredClient {
    /// Connects to the server `url` names (`redis://…` or `rediss://…`, or the master behind
    /// `redis+sentinel://…`, or the cluster of `redis+cluster://…`; see
    /// [`topology`](crate::topology); BabelQueue's query keys already removed). `rediss` trusts
    /// the system's root certificates.
    pub async fn connect(url: &str) -> Result<FredClient, RedisError> {
        FredClient::connect_with(url, None).await
    }

    /// Like [`FredClient::connect`], trusting the CA certificates of the PEM file `ca_file` (and
    /// only those) for `rediss://`.
    pub async fn connect_with(
        url: &str,
        ca_file: Option<&std::path::Path>,
    ) -> Result<FredClient, RedisError> {
        let files = crate::TlsFiles {
            ca_file: ca_file.map(Into::into),
            ..crate::TlsFiles::default()
        };
        FredClient::connect_with_tls(url, &files).await
    }

    /// Like [`FredClient::connect`], with the TLS files of `files` for `rediss://`: the CA
    /// certificates to trust instead of the system's roots, and a client certificate.
    pub async fn connect_with_tls(
        url: &str,
        files: &crate::TlsFiles,
    ) -> Result<FredClient, RedisError> {
        let mut config = config(url)?;
        if let Some(tls) = crate::tls::tls_config(files)? {
            config.tls = Some(tls);
        }
        let clustered = config.server.is_clustered();
        let build = || -> Result<fred::clients::Client, RedisError> {
            let mut builder = fred::types::Builder::from_config(config.clone());
            builder.set_policy(fred::types::config::ReconnectPolicy::new_exponential(
                0, 50, 5_000, 2,
            ));
            builder.with_connection_config(|c| {
                c.connection_timeout = Duration::from_secs(5);
                if clustered {
                    // fred 10.1 sends a command redirected by `ASK` back to the slot's old
                    // owner (only `ASKING` reaches the new one), which answers `ASK` again.
                    // Each round costs a redirection and a write attempt; when the attempts
                    // run out first, the client's router stops for good. With more attempts
                    // than redirections the command fails instead ("Too many redirections", a
                    // transient error) and is retried by its caller once the slot has moved
                    // (`MOVED`, which fred follows).
                    c.max_command_attempts = MAX_REDIRECTIONS * 2;
                    c.max_redirections = MAX_REDIRECTIONS;
                }
            });
            builder.build().map_err(|e| at_connect(url, e))
        };
        let commands = build()?;
        let blocking = build()?;
        commands.init().await.map_err(|e| at_connect(url, e))?;
        blocking.init().await.map_err(|e| at_connect(url, e))?;
        let watcher = if config.server.is_sentinel() {
            crate::watch::switch_master(&config, vec![commands.clone(), blocking.clone()]).await
        } else {
            None
        };
        let scripts = crate::scripts::ALL
            .iter()
            .map(|s| (s.name, Script::from_lua(s.lua)))
            .collect();
        let dog = Watchdog::new(
            Some(DEFAULT_REPLY_TIMEOUT),
            vec![commands.clone(), blocking.clone()],
        );
        Ok(FredClient {
            clustered,
            commands,
            blocking,
            dog,
            scripts: Arc::new(scripts),
            watcher,
        })
    }

    /// How long past the server's own wait a reply may come before the call fails and the
    /// connection is replaced (default [`DEFAULT_REPLY_TIMEOUT`]; `None`: wait for ever, as
    /// before the bound existed). [`RedisOptions::reply_timeout`](crate::RedisOptions) sets it
    /// for a transport.
    #[must_use]
    pub fn with_reply_timeout(mut self, margin: Option<Duration>) -> FredClient {
        self.dog = Watchdog::new(margin, vec![self.commands.clone(), self.blocking.clone()]);
        self
    }

    /// A call on the command connection, bounded.
    async fn command<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, fred::error::Error>>,
    ) -> Result<T, RedisError> {
        Ok(self.dog.bounded(ServerWait::None, call).await??)
    }

    /// The command connection (for tools and tests that need raw commands).
    pub fn raw(&self) -> &fred::clients::Client {
        &self.commands
    }
}

/// The client configuration of a client URL: fred reads `redis://` and `rediss://` itself; the
/// Sentinel and Cluster forms are read by [`topology::parse`](crate::topology::parse).
fn config(url: &str) -> Result<Config, RedisError> {
    let (tls, server, credentials, database) = match crate::topology::parse(url)? {
        Topology::Single => return Config::from_url(url).map_err(|e| at_connect(url, e)),
        Topology::Sentinel(s) => {
            let hosts = s
                .sentinels
                .into_iter()
                .map(|(h, p)| Server::new(h, p))
                .collect();
            let server = ServerConfig::Sentinel {
                hosts,
                service_name: s.service,
                username: s.sentinel_credentials.username,
                password: s.sentinel_credentials.password,
            };
            (s.tls, server, s.credentials, s.db)
        }
        Topology::Cluster(c) => {
            let hosts = c
                .nodes
                .into_iter()
                .map(|(h, p)| Server::new(h, p))
                .collect();
            let server = ServerConfig::Clustered {
                hosts,
                policy: ClusterDiscoveryPolicy::default(),
            };
            (c.tls, server, c.credentials, None)
        }
    };
    let tls = if tls {
        let connector = TlsConnector::default_rustls().map_err(|e| at_connect(url, e))?;
        Some(connector.into())
    } else {
        None
    };
    Ok(Config {
        server,
        username: credentials.username,
        password: credentials.password,
        database,
        tls,
        ..Config::default()
    })
}

/// Redirections (`MOVED`, `ASK`) a command may follow on a cluster.
const MAX_REDIRECTIONS: u32 = 5;

/// An error of the client while connecting to `url`: refused credentials name the server,
/// connection failures the server, the (redacted) URL and the cause in words (`connection
/// refused (os error 111)`, not fred's `Debug` text), and no message keeps the URL's password.
fn at_connect(url: &str, e: fred::error::Error) -> RedisError {
    let readable = crate::error::cause(&e);
    match RedisError::from(e) {
        RedisError::Auth { reason, .. } => RedisError::Auth {
            endpoint: Some(redact::host(url).unwrap_or_else(|| "the server".to_owned())),
            reason: scrub(&reason, url),
        },
        RedisError::Connection(_) => RedisError::Connection(format!(
            "cannot connect to {} ({}): {}",
            endpoint(url),
            redact(url),
            scrub(&readable, url)
        )),
        RedisError::Config(text) => RedisError::Config(scrub(&text, url)),
        RedisError::Server(text) => RedisError::Server(scrub(&text, url)),
        RedisError::Protocol(text) => RedisError::Protocol(scrub(&text, url)),
        other => other,
    }
}

/// `host:port` of the server `url` names (port 6379 when it names none), for messages.
fn endpoint(url: &str) -> String {
    let Some(host) = redact::host(url) else {
        return "the server".to_owned();
    };
    // `[v6]:port`, `[v6]`, `host:port` or `host`.
    let has_port = match host.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => host.contains(':'),
    };
    if has_port {
        host
    } else {
        format!("{host}:6379")
    }
}

fn keys(keys: Vec<Vec<u8>>) -> Vec<Key> {
    keys.into_iter()
        .map(|k| Key::from(Bytes::from(k)))
        .collect()
}

#[async_trait]
impl RedisClient for FredClient {
    async fn eval(
        &self,
        script: &'static LuaScript,
        k: Vec<Vec<u8>>,
        args: Vec<Vec<u8>>,
    ) -> Result<Reply, RedisError> {
        let compiled = self
            .scripts
            .iter()
            .find(|(name, _)| *name == script.name)
            .map(|(_, s)| s)
            .ok_or_else(|| RedisError::Protocol(format!("unknown script {}", script.name)))?;
        let args: Vec<Value> = args
            .into_iter()
            .map(|a| Value::Bytes(Bytes::from(a)))
            .collect();
        let value: Value = self
            .command(compiled.evalsha_with_reload(&self.commands, keys(k), args))
            .await?;
        reply(value)
    }

    async fn rpush(&self, key: &[u8], value: &[u8]) -> Result<(), RedisError> {
        let _: i64 = self
            .command(
                self.commands
                    .rpush(Bytes::copy_from_slice(key), Bytes::copy_from_slice(value)),
            )
            .await?;
        Ok(())
    }

    async fn zadd(&self, key: &[u8], score: i64, member: &[u8]) -> Result<(), RedisError> {
        let _: Value = self
            .command(self.commands.zadd(
                Bytes::copy_from_slice(key),
                None,
                None,
                false,
                false,
                (score as f64, Bytes::copy_from_slice(member)),
            ))
            .await?;
        Ok(())
    }

    async fn zrem(&self, key: &[u8], member: &[u8]) -> Result<i64, RedisError> {
        self.command(
            self.commands
                .zrem(Bytes::copy_from_slice(key), Bytes::copy_from_slice(member)),
        )
        .await
    }

    async fn lrange(&self, key: &[u8], start: i64, stop: i64) -> Result<Vec<Vec<u8>>, RedisError> {
        let items: Vec<Bytes> = self
            .command(
                self.commands
                    .lrange(Bytes::copy_from_slice(key), start, stop),
            )
            .await?;
        Ok(items.into_iter().map(|b| b.to_vec()).collect())
    }

    async fn blpop(&self, key: &[u8], timeout: Duration) -> Result<(), RedisError> {
        let popped = self
            .dog
            .bounded(
                ServerWait::Blocks(timeout),
                self.blocking
                    .blpop::<Value, _>(Bytes::copy_from_slice(key), timeout.as_secs_f64()),
            )
            .await?;
        match popped {
            Ok(_) => Ok(()),
            // fred reports the server's nil reply (nothing arrived within the timeout) as a
            // Timeout error; for a wake-up wait that is the ordinary outcome.
            Err(e) if *e.kind() == fred::error::ErrorKind::Timeout => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn wait_for_items(&self, key: &[u8], timeout: Duration) -> Result<(), RedisError> {
        // BLMOVE from a list's tail to its own tail blocks until the list holds an item, then
        // puts that item back where it was, in one atomic command: the order is unchanged and
        // nothing leaves the list (unlike BLPOP), so the reserve script that follows decides.
        let key = Bytes::copy_from_slice(key);
        let moved = self
            .dog
            .bounded(
                ServerWait::Blocks(timeout),
                self.blocking.blmove::<Value, _, _>(
                    key.clone(),
                    key,
                    fred::types::lists::LMoveDirection::Right,
                    fred::types::lists::LMoveDirection::Right,
                    timeout.as_secs_f64(),
                ),
            )
            .await?;
        match moved {
            Ok(_) => Ok(()),
            // As for BLPOP: the nil reply of a wait that timed out comes back as Timeout.
            Err(e) if *e.kind() == fred::error::ErrorKind::Timeout => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn reconnects(&self) -> Reconnects {
        Reconnects(Some(self.commands.reconnect_rx()))
    }

    async fn wait_replicas(
        &self,
        key: &[u8],
        replicas: u32,
        timeout: Duration,
    ) -> Result<i64, RedisError> {
        let millis = i64::try_from(timeout.as_millis())
            .unwrap_or(i64::MAX)
            .max(1);
        // On a cluster, the node that owns the key's slot (where the write went); elsewhere the
        // one server. Blocking: fred sends nothing else on the connection meanwhile.
        let hash = if self.clustered {
            ClusterHash::Custom(crate::layout::slot(key))
        } else {
            ClusterHash::Random
        };
        let command = CustomCommand::new_static("WAIT", hash, false);
        let acked: i64 = self
            .dog
            .bounded(
                ServerWait::Blocks(timeout.max(Duration::from_millis(1))),
                self.commands
                    .custom(command, vec![i64::from(replicas), millis]),
            )
            .await??;
        Ok(acked)
    }

    async fn quit(&self) -> Result<(), RedisError> {
        if let Some(watcher) = &self.watcher {
            watcher.task.abort();
            let _ = watcher.client.quit().await;
        }
        let _ = self.blocking.quit().await;
        self.commands.quit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use babelqueue_core::{TransportError, TransportErrorKind};

    use crate::{RedisError, RedisTransport};

    /// A port on 127.0.0.1 that nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        drop(listener);
        port
    }

    /// `Display` and `Debug` of the error and of the runtime error it becomes.
    fn shown(error: RedisError) -> String {
        let text = format!("{error}\n{error:?}");
        let runtime = TransportError::from(error);
        format!("{text}\n{runtime}\n{runtime:?}")
    }

    #[tokio::test]
    async fn a_bad_url_option_never_shows_the_password() {
        for url in [
            "redis://u:hunter2@127.0.0.1:6379?retry_after=soon",
            "redis://:hunter2@127.0.0.1:6379?retry_after=-1",
            "redis://u:hun@ter2@[::1]:6379?retry_after=x",
            "rediss://u:hunter2@127.0.0.1:6380?retry_after=x",
            "redis://u:hunter2@:6379",
            "redis:/u:hunter2@127.0.0.1:6379",
            "u:hunter2@127.0.0.1:6379",
            "http://u:hunter2@127.0.0.1:6379",
        ] {
            let error = RedisTransport::connect(url).await.unwrap_err();
            assert_eq!(error.kind(), TransportErrorKind::Config, "{url}: {error}");
            let text = shown(error);
            assert!(
                !text.contains("hunter2") && !text.contains("ter2"),
                "{url}: {text}"
            );
        }
    }

    #[tokio::test]
    async fn a_refused_connection_never_shows_the_password() {
        let url = format!("redis://bq:hunter2@127.0.0.1:{}/0", closed_port());
        let error = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            RedisTransport::connect(&url),
        )
        .await
        .expect("a refused connection fails at once")
        .unwrap_err();
        assert_eq!(error.kind(), TransportErrorKind::Connection, "{error}");
        assert!(error.to_string().contains("127.0.0.1"), "{error}");
        assert!(!error.to_string().contains("Os {"), "{error}");
        let text = shown(error);
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("bq:***@127.0.0.1"), "{text}");
    }

    #[tokio::test]
    async fn a_closed_port_is_named_with_its_cause_within_seconds() {
        let port = closed_port();
        let started = std::time::Instant::now();
        let error = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            RedisTransport::connect(&format!("redis://127.0.0.1:{port}")),
        )
        .await
        .expect("a refused connection is reported within 10 s")
        .unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert_eq!(error.kind(), TransportErrorKind::Connection, "{error}");
        let shown = TransportError::from(error).to_string();
        assert!(
            shown.starts_with(&format!(
                "redis: Redis connection: cannot connect to 127.0.0.1:{port} "
            )),
            "{shown}"
        );
        assert!(
            shown.contains("connection refused (os error 111)"),
            "{shown}"
        );
        assert_eq!(shown.matches("refused").count(), 1, "said once: {shown}");
    }

    #[test]
    fn endpoints_name_host_and_port() {
        for (url, want) in [
            ("redis://u:pw@h:1/0", "h:1"),
            ("redis://h", "h:6379"),
            ("rediss://[::1]:6380", "[::1]:6380"),
            ("redis://[::1]", "[::1]:6379"),
        ] {
            assert_eq!(super::endpoint(url), want, "{url}");
        }
    }

    #[test]
    fn refused_credentials_at_connect_name_the_server() {
        let fred = fred::error::Error::new(
            fred::error::ErrorKind::Auth,
            "WRONGPASS invalid username-password pair or user is disabled.",
        );
        let error = super::at_connect("redis://bq-auth:hunter2@127.0.0.1:6379/0", fred);
        assert_eq!(error.kind(), TransportErrorKind::Auth);
        assert_eq!(
            error.to_string(),
            "Redis at 127.0.0.1:6379 refused the credentials: WRONGPASS invalid username-password pair or user is disabled."
        );
        assert_eq!(TransportError::from(error).kind(), TransportErrorKind::Auth);
    }
}
