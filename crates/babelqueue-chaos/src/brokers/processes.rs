//! Killing and restarting brokers: the pid of a `scripts/brokers.sh` broker, a hard kill, a
//! restart through the script, and a Redis of the harness's own with AOF for the restart rows.

use super::*;

/// The pid of a `scripts/brokers.sh` broker, for a hard kill.
async fn broker_pid(env: &Env, broker: Broker) -> Result<u32, String> {
    let from_file = |path: PathBuf| -> Result<u32, String> {
        std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .trim()
            .parse()
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    let dir = env.brokers_dir();
    match broker {
        Broker::Kafka => from_file(dir.join("kafka/kafka.pid")),
        Broker::Artemis => from_file(dir.join("artemis/instance/data/artemis.pid")),
        Broker::Pulsar => from_file(dir.join("pulsar/run/pulsar.pid")),
        Broker::Nats => from_file(dir.join("nats/nats.pid")),
        Broker::Rabbitmq => {
            let mut cmd = env.command("rabbitmqctl");
            cmd.args(["eval", "os:getpid()."]);
            let out = run(cmd, Duration::from_secs(60)).await?;
            out.trim()
                .trim_matches('"')
                .parse()
                .map_err(|e| format!("rabbitmqctl eval os:getpid(): {out:?}: {e}"))
        }
        _ => Err(format!(
            "{} has no scripts/brokers.sh process to kill",
            broker.name()
        )),
    }
}

/// SIGKILL of `pid`, and wait until it is gone. A zombie is not gone: the thread-group leader of
/// a JVM shows `Z` while its other threads still exit and its sockets still listen, and a
/// readiness check would then find the dying broker "up". The brokers are daemons (their parent
/// is init, which reaps them), so the pid disappears.
pub(crate) async fn kill9(pid: u32) -> Result<(), String> {
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("kill -KILL {pid} failed"));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("pid {pid} still exists 30 s after SIGKILL"))
}

/// Restarts a `scripts/brokers.sh` broker: `down` + `up`, or SIGKILL + `up`.
pub(crate) async fn restart_service(
    env: &Env,
    broker: Broker,
    hard: bool,
) -> Result<String, String> {
    let service = broker.service();
    let t = Instant::now();
    let how = if hard {
        let pid = broker_pid(env, broker).await?;
        kill9(pid).await?;
        format!("SIGKILL of pid {pid}")
    } else {
        env.brokers_sh(&["down", service], Duration::from_secs(120))
            .await?;
        format!("scripts/brokers.sh down {service}")
    };
    let down_after = t.elapsed();
    env.brokers_sh(&["up", service], Duration::from_secs(300))
        .await?;
    Ok(format!(
        "{how} ({:.1}s), then scripts/brokers.sh up {service} ({:.1}s)",
        down_after.as_secs_f64(),
        (t.elapsed() - down_after).as_secs_f64()
    ))
}

/// A Redis of our own for the restart scenario: AOF on, fsync on every write, on a free port
/// and in its own directory under the cache (the test Redis on 6379 has no persistence).
#[derive(Debug, Clone)]
pub(crate) struct OwnRedis {
    pub(crate) port: u16,
    pub(crate) dir: PathBuf,
}

/// How many free ports [`OwnRedis::start_new`] tries: another process may take the one it
/// picked before redis-server binds it.
const OWN_REDIS_PORTS: usize = 3;

/// How long a start waits for redis-server to answer as itself.
const OWN_REDIS_START: Duration = Duration::from_secs(30);

impl OwnRedis {
    /// Starts one in `dir` on a free port of 127.0.0.1 (on another one when that port is taken
    /// before redis-server binds it). The error says which ports were tried and why each
    /// failed, in redis-server's own words.
    pub(crate) async fn start_new(env: &Env, dir: &Path) -> Result<OwnRedis, String> {
        babelqueue_testkit::on_free_port(OWN_REDIS_PORTS, |port| {
            let own = OwnRedis {
                port,
                dir: dir.to_path_buf(),
            };
            async move { own.start(env).await.map(|()| own) }
        })
        .await
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub(super) fn pid_path(&self) -> PathBuf {
        self.dir.join("redis.pid")
    }

    pub(super) fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    /// `redis-server on 127.0.0.1:PORT`, the start of every message about it.
    pub(super) fn name(&self) -> String {
        format!("redis-server on 127.0.0.1:{}", self.port)
    }

    /// Starts redis-server on `self.port` and waits until the server answering there is the
    /// one it started (its `process_id` is the pid in our pid file): a server someone else
    /// runs on that port is never taken for ours.
    pub(super) async fn start(&self, env: &Env) -> Result<(), StartError> {
        let name = self.name();
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| StartError::Failed(format!("{name}: {}: {e}", self.dir.display())))?;
        // A pid file left by a SIGKILL names a dead process: only the new server's counts.
        let pid_path = self.pid_path();
        match std::fs::remove_file(&pid_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(StartError::Failed(format!(
                    "{name}: {}: {e}",
                    pid_path.display()
                )));
            }
        }
        // The log grows over restarts: this start's lines are the ones after `from`.
        let from = std::fs::metadata(self.log_path()).map_or(0, |m| m.len());
        let mut cmd = env.command("redis-server");
        cmd.args(["--daemonize", "yes", "--bind", "127.0.0.1", "--port"])
            .arg(self.port.to_string())
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--pidfile")
            .arg(&pid_path)
            .arg("--logfile")
            .arg(self.log_path());
        if let Err(e) = run(cmd, Duration::from_secs(20)).await {
            return Err(self.start_failed(&format!("did not start ({e})"), from));
        }
        let deadline = Instant::now() + OWN_REDIS_START;
        loop {
            // Ours once the pid file names a live process that answers on the port.
            if let Some(pid) = self.pid().ok().filter(|&pid| alive(pid))
                && self.answering_pid(env).await == Some(pid)
            {
                return Ok(());
            }
            let log = self.log_since(from);
            if log.contains("Address already in use") {
                return Err(self.start_failed("found the port taken", from));
            }
            if log.contains("aborting") || last_log_pid(&log).is_some_and(|pid| !alive(pid)) {
                return Err(self.start_failed("exited while starting", from));
            }
            if Instant::now() >= deadline {
                let answering = match self.answering_pid(env).await {
                    Some(pid) => format!("; the Redis answering there is pid {pid}, not ours"),
                    None => String::new(),
                };
                return Err(self.start_failed(
                    &format!(
                        "did not answer as itself within {} s{answering}",
                        OWN_REDIS_START.as_secs()
                    ),
                    from,
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A failed start: a collision when the log says so or something else holds the port now,
    /// any other failure otherwise; the message names the port and ends with the log's tail.
    pub(super) fn start_failed(&self, what: &str, from: u64) -> StartError {
        let log = self.log_since(from);
        let message = format!(
            "{} {what}: {}",
            self.name(),
            log_tail(&log, &self.log_path())
        );
        if log.contains("Address already in use") || babelqueue_testkit::port_taken(self.port) {
            StartError::PortTaken(message)
        } else {
            StartError::Failed(message)
        }
    }

    /// What the log gained after byte `from`.
    pub(super) fn log_since(&self, from: u64) -> String {
        let bytes = std::fs::read(self.log_path()).unwrap_or_default();
        let from = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
        String::from_utf8_lossy(&bytes[from..]).into_owned()
    }

    /// The `process_id` of the Redis answering on our port, if one does.
    pub(super) async fn answering_pid(&self, env: &Env) -> Option<u32> {
        let info = redis_cli(env, &self.url(), &["INFO", "server"])
            .await
            .ok()?;
        info.lines()
            .find_map(|line| line.trim().strip_prefix("process_id:"))
            .and_then(|pid| pid.parse().ok())
    }

    pub(super) fn pid(&self) -> Result<u32, String> {
        let path = self.pid_path();
        std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {}: {e}", self.name(), path.display()))?
            .trim()
            .parse()
            .map_err(|e| format!("{}: {}: {e}", self.name(), path.display()))
    }

    /// Graceful (`SHUTDOWN`, which fsyncs the AOF) or hard (SIGKILL), then a start on the same
    /// port (the worker's URL names it) and directory.
    pub(crate) async fn restart(&self, env: &Env, hard: bool) -> Result<String, String> {
        let t = Instant::now();
        let pid = self.pid()?;
        let how = if hard {
            kill9(pid).await?;
            format!("SIGKILL of redis-server pid {pid}")
        } else {
            if self.answering_pid(env).await != Some(pid) {
                return Err(format!(
                    "{} does not answer as pid {pid}: not shutting down what answers there",
                    self.name()
                ));
            }
            let _ = redis_cli(env, &self.url(), &["SHUTDOWN"]).await;
            let deadline = Instant::now() + Duration::from_secs(20);
            while alive(pid) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            format!("SHUTDOWN of redis-server pid {pid}")
        };
        self.start(env)
            .await
            .map_err(|e| format!("{how}, then no start: {}", e.message()))?;
        Ok(format!(
            "{how}, then a start on its AOF ({:.1}s)",
            t.elapsed().as_secs_f64()
        ))
    }

    /// Stops it for good (only if the server answering on its port is still ours) and removes
    /// its directory.
    pub(crate) async fn stop(&self, env: &Env) {
        if let Ok(pid) = self.pid() {
            if self.answering_pid(env).await == Some(pid) {
                let _ = redis_cli(env, &self.url(), &["SHUTDOWN", "NOSAVE"]).await;
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while alive(pid) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether `pid` is a live process (a zombie is not: it has exited).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (comm) S …`: the state follows the last `)`.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// The pid of the last line of a redis-server log (`PID:ROLE date # message`).
fn last_log_pid(log: &str) -> Option<u32> {
    log.lines()
        .rev()
        .find_map(|line| line.split_once(':')?.0.parse().ok())
}

/// The last lines of a log (without blank lines), for a message.
fn log_tail(log: &str, path: &Path) -> String {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return format!("nothing in {}", path.display());
    }
    let tail = &lines[lines.len().saturating_sub(5)..];
    format!("{} (the end of {})", tail.join(" | "), path.display())
}
