//! The brokers of `scripts/brokers.sh`: URLs, queue administration, broker-side counts, breaking
//! and fixing a dead-letter queue, restarts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use babelqueue::Transport;
use babelqueue_testkit::StartError;

mod dlq;
use dlq::artemis_manage;
pub(crate) use dlq::{artemis_filler, break_dlq, fix_dlq};

mod processes;
pub(crate) use processes::{OwnRedis, kill9, restart_service};

pub(crate) mod nats;
pub(crate) mod redis_topology;

/// One row's broker (the Redis layouts are two).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Broker {
    Redis,
    RedisLaravel,
    Rabbitmq,
    Sqs,
    Kafka,
    Artemis,
    Pulsar,
    Nats,
}

impl Broker {
    pub(crate) const ALL: [Broker; 8] = [
        Broker::Redis,
        Broker::RedisLaravel,
        Broker::Rabbitmq,
        Broker::Sqs,
        Broker::Kafka,
        Broker::Artemis,
        Broker::Pulsar,
        Broker::Nats,
    ];

    /// The name on the command line and in the table.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Broker::Redis => "redis",
            Broker::RedisLaravel => "redis-laravel",
            Broker::Rabbitmq => "rabbitmq",
            Broker::Sqs => "sqs",
            Broker::Kafka => "kafka",
            Broker::Artemis => "artemis",
            Broker::Pulsar => "pulsar",
            Broker::Nats => "nats",
        }
    }

    /// The `scripts/brokers.sh` service.
    pub(crate) fn service(self) -> &'static str {
        match self {
            Broker::Redis | Broker::RedisLaravel => "redis",
            other => other.name(),
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Broker> {
        Broker::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The dead-letter queue the runtime writes to for `queue` (default suffix).
    pub(crate) fn dlq(self, queue: &str) -> String {
        match self {
            Broker::Sqs => format!("{queue}-dlq"),
            _ => format!("{queue}.dlq"),
        }
    }

    pub(crate) fn is_redis(self) -> bool {
        matches!(self, Broker::Redis | Broker::RedisLaravel)
    }

    /// How long a drain keeps going after every message was handled: a reservation, receipt or
    /// uncommitted record a killed worker held after its handler ran comes back after the
    /// broker's redelivery delay (Redis `retry_after` 2 s, rounded up to whole seconds; SQS
    /// visibility 2 s), and must be settled before the drain ends.
    pub(crate) fn settle(self) -> Duration {
        match self {
            Broker::Redis | Broker::RedisLaravel | Broker::Sqs | Broker::Nats => {
                Duration::from_secs(4)
            }
            _ => Duration::from_millis(1500),
        }
    }

    /// How long a worker waits with nothing to do before it exits, in the DLQ and malformed
    /// scenarios: above the broker's redelivery delay (Redis `retry_after`, SQS visibility), and
    /// for Kafka above a group join.
    pub(crate) fn idle(self) -> Duration {
        match self {
            Broker::Kafka => Duration::from_secs(12),
            Broker::Redis | Broker::RedisLaravel | Broker::Sqs | Broker::Pulsar | Broker::Nats => {
                Duration::from_secs(5)
            }
            Broker::Rabbitmq | Broker::Artemis => Duration::from_secs(4),
        }
    }
}

/// Where things are, and the broker environment (`scripts/brokers.sh env`).
#[derive(Debug, Clone)]
pub(crate) struct Env {
    pub(crate) root: PathBuf,
    pub(crate) cache: PathBuf,
    /// Variables for worker children and in-process clients: `scripts/brokers.sh env`, then the
    /// process environment on top.
    pub(crate) vars: BTreeMap<String, String>,
}

impl Env {
    pub(crate) fn load(root: &Path) -> Env {
        let cache = std::env::var_os("BQ_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("..").join("cache"));
        let cache = cache.canonicalize().unwrap_or(cache);
        let mut vars = BTreeMap::new();
        let script = root.join("scripts/brokers.sh");
        if let Ok(out) = Command::new("bash")
            .arg(&script)
            .arg("env")
            .current_dir(root)
            .stderr(Stdio::null())
            .output()
        {
            for (k, v) in parse_exports(&String::from_utf8_lossy(&out.stdout)) {
                vars.insert(k, v);
            }
        }
        for (k, v) in std::env::vars() {
            if k.starts_with("BQ_") || k.starts_with("AWS_") {
                vars.insert(k, v);
            }
        }
        vars.insert("BQ_CACHE".into(), cache.display().to_string());
        Env {
            root: root.to_path_buf(),
            cache,
            vars,
        }
    }

    pub(crate) fn var(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    pub(crate) fn brokers_dir(&self) -> PathBuf {
        self.var("BQ_BROKERS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.cache.join("brokers"))
    }

    /// The broker's URL as `scripts/brokers.sh env` exports it.
    pub(crate) fn base_url(&self, broker: Broker) -> Result<String, String> {
        let key = match broker {
            Broker::Redis | Broker::RedisLaravel => "BQ_REDIS_URL",
            Broker::Rabbitmq => "BQ_AMQP_URL",
            Broker::Sqs => "BQ_SQS_URL",
            Broker::Kafka => "BQ_KAFKA_URL",
            Broker::Artemis => "BQ_ARTEMIS_URL",
            Broker::Pulsar => "BQ_PULSAR_URL",
            Broker::Nats => "BQ_NATS_URL",
        };
        self.var(key)
            .map(str::to_owned)
            .ok_or_else(|| format!("{key} is not set and `scripts/brokers.sh env` did not give it"))
    }

    /// A command run from the repository root with the broker environment.
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(&self.root).envs(&self.vars);
        cmd
    }

    /// `scripts/brokers.sh ARGS…`, bounded.
    pub(crate) async fn brokers_sh(
        &self,
        args: &[&str],
        limit: Duration,
    ) -> Result<String, String> {
        let mut cmd = self.command("bash");
        cmd.arg(self.root.join("scripts/brokers.sh")).args(args);
        // A broker starting on a loaded machine (Pulsar, a JVM) can take longer than the
        // script's default 120 s.
        if self.var("READY_TIMEOUT").is_none() {
            cmd.env("READY_TIMEOUT", "300");
        }
        run(cmd, limit).await
    }
}

/// `export A=1 B='x y'` lines → pairs.
pub(crate) fn parse_exports(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("export ") else {
            continue;
        };
        let mut chars = rest.chars().peekable();
        loop {
            while chars.peek() == Some(&' ') {
                chars.next();
            }
            let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
            if key.is_empty() {
                break;
            }
            let mut value = String::new();
            match chars.peek() {
                Some('\'') => {
                    chars.next();
                    value.extend(chars.by_ref().take_while(|&c| c != '\''));
                }
                Some('"') => {
                    chars.next();
                    value.extend(chars.by_ref().take_while(|&c| c != '"'));
                }
                _ => {
                    while let Some(&c) = chars.peek() {
                        if c == ' ' {
                            break;
                        }
                        value.push(c);
                        chars.next();
                    }
                }
            }
            out.push((key, value));
        }
    }
    out
}

/// Runs a command to completion, killing it after `limit`; stdout on success.
pub(crate) async fn run(mut cmd: Command, limit: Duration) -> Result<String, String> {
    let mut shown = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        shown.push(' ');
        shown.push_str(&arg.to_string_lossy());
    }
    tokio::task::spawn_blocking(move || {
        let out_path = std::env::temp_dir().join(format!(
            "bq-chaos-cmd-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        let out = std::fs::File::create(&out_path).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("{shown}: {e}"))?;
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let text = std::fs::read_to_string(&out_path).unwrap_or_default();
        let _ = std::fs::remove_file(&out_path);
        match status {
            Some(s) if s.success() => Ok(text),
            Some(s) => Err(format!("{shown} exited with {s}: {}", text.trim())),
            None => Err(format!(
                "{shown} did not finish within {}s: {}",
                limit.as_secs(),
                text.trim()
            )),
        }
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Connects an in-process transport (publisher, probe, dead-letter reader).
pub(crate) async fn connect(
    env: &Env,
    broker: Broker,
    url: &str,
) -> Result<Arc<dyn Transport>, String> {
    if broker == Broker::Sqs {
        use babelqueue::sqs::{AwsSqs, SqsOptions, SqsTransport};
        let config = SqsOptions::from_url(url).map_err(|e| e.to_string())?;
        let transport = SqsTransport::new(AwsSqs::new(sqs_client(env, &config)), config);
        return Ok(Arc::new(transport));
    }
    babelqueue::connect(url).await.map_err(|e| e.to_string())
}

fn sqs_client(
    env: &Env,
    config: &babelqueue::sqs::SqsOptions,
) -> babelqueue::sqs::aws_sdk_sqs::Client {
    use babelqueue::sqs::aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
    let region = config.region.clone().unwrap_or_else(|| "us-east-1".into());
    let mut builder = babelqueue::sqs::aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(Credentials::new(
            env.var("AWS_ACCESS_KEY_ID").unwrap_or("test"),
            env.var("AWS_SECRET_ACCESS_KEY").unwrap_or("test"),
            None,
            None,
            "bq-chaos",
        ));
    if let Some(endpoint) = &config.endpoint {
        builder = builder.endpoint_url(endpoint);
    }
    babelqueue::sqs::aws_sdk_sqs::Client::from_conf(builder.build())
}

fn sqs_admin(env: &Env) -> Result<babelqueue::sqs::aws_sdk_sqs::Client, String> {
    let url = env.base_url(Broker::Sqs)?;
    let config = babelqueue::sqs::SqsOptions::from_url(&url).map_err(|e| e.to_string())?;
    Ok(sqs_client(env, &config))
}

/// Creates an SQS queue (the transport only looks queues up).
pub(crate) async fn sqs_create(env: &Env, name: &str) -> Result<(), String> {
    sqs_admin(env)?
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| {
            format!(
                "create SQS queue {name}: {}",
                babelqueue::sqs::aws_sdk_sqs::error::DisplayErrorContext(e)
            )
        })
}

/// `host`, `port` and database of a `redis://` URL.
fn redis_target(url: &str) -> (String, String, String) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.split('?').next().unwrap_or(rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let (hostport, db) = rest.split_once('/').unwrap_or((rest, "0"));
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "6379"));
    let db = if db.is_empty() { "0" } else { db };
    (host.to_owned(), port.to_owned(), db.to_owned())
}

/// One `redis-cli` command against the Redis of `url`.
pub(crate) async fn redis_cli(env: &Env, url: &str, args: &[&str]) -> Result<String, String> {
    let mut cmd = env.command("redis-cli");
    match redis_topology::target(env, url).await? {
        Some(t) => {
            cmd.args([
                "-h",
                &t.host,
                "-p",
                &t.port.to_string(),
                "-n",
                &t.db.to_string(),
            ]);
            if t.cluster {
                cmd.arg("-c");
            }
        }
        None => {
            let (host, port, db) = redis_target(url);
            cmd.args(["-h", &host, "-p", &port, "-n", &db]);
        }
    }
    cmd.args(args);
    let out = run(cmd, Duration::from_secs(10)).await?;
    let out = out.trim().to_owned();
    if out.starts_with("ERR") || out.starts_with("WRONGTYPE") {
        return Err(out);
    }
    Ok(out)
}

/// Deletes a Redis queue's ready list (and the Laravel layout's wake-up list).
pub(crate) async fn redis_forget(env: &Env, url: &str, queue: &str) -> Result<(), String> {
    let (_, options) = babelqueue::redis::RedisOptions::from_url(url).map_err(|e| e.to_string())?;
    redis_cli(
        env,
        url,
        &["DEL", &options.ready(queue), &options.notify(queue)],
    )
    .await
    .map(|_| ())
}

/// The Redis key of a queue's ready list.
pub(crate) fn redis_ready_key(url: &str, queue: &str) -> Result<String, String> {
    let (_, options) = babelqueue::redis::RedisOptions::from_url(url).map_err(|e| e.to_string())?;
    Ok(options.ready(queue))
}

/// What the broker itself says is left in `queue` (ready + in flight + delayed): the
/// transport's own `Stats` (Redis key lengths, SQS attributes, the Kafka group's lag, the
/// Pulsar subscription backlog, the NATS consumer's pending and ack-pending counts, the
/// Artemis queue's management attributes), else `rabbitmqctl list_queues` (RabbitMQ's AMQP
/// count leaves unacknowledged messages out).
pub(crate) async fn broker_count(
    env: &Env,
    broker: Broker,
    url: &str,
    queue: &str,
) -> Option<Result<u64, String>> {
    Some(match broker {
        Broker::Rabbitmq => rabbit_count(env, url, queue).await,
        _ => match stats_transport(env, broker, url).await {
            Ok(transport) => {
                let counted = stats_total(&*transport, queue).await;
                let _ = tokio::time::timeout(Duration::from_secs(10), transport.close()).await;
                counted
            }
            Err(e) => Err(e),
        },
    })
}

/// A transport of `url` that reports stats: Pulsar's with the admin URL of its broker (see
/// [`pulsar_admin_root`]), SQS's with the harness's credentials, the others as `connect` makes
/// them.
async fn stats_transport(
    env: &Env,
    broker: Broker,
    url: &str,
) -> Result<Arc<dyn Transport>, String> {
    if broker == Broker::Pulsar {
        use babelqueue::pulsar::{PulsarOptions, PulsarTransport};
        let transport = PulsarTransport::builder(url)
            .map_err(|e| e.to_string())?
            .options(PulsarOptions {
                admin_url: Some(pulsar_admin_root(env, url)),
                ..PulsarOptions::default()
            })
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        return Ok(Arc::new(transport));
    }
    connect(env, broker, url).await
}

/// Ready + in flight + delayed of `queue`, as the transport's `Stats` report them; an error
/// when the broker gives none of the three (a Pulsar topic nobody subscribed to).
async fn stats_total(transport: &dyn Transport, queue: &str) -> Result<u64, String> {
    let name = transport.name();
    let capabilities = transport.capabilities();
    let reader = capabilities
        .stats_reader()
        .ok_or_else(|| format!("the {name} transport reports no stats"))?;
    let stats = reader
        .stats(queue)
        .await
        .map_err(|e| format!("{name} stats of {queue}: {e}"))?;
    stats
        .total()
        .ok_or_else(|| format!("{name} gave no count of {queue} ({})", stats.source))
}

/// RabbitMQ's count from `rabbitmqctl list_queues messages` (ready and unacknowledged, read
/// from the queue process), not from the transport's `Stats`: its in-flight figure comes from
/// the management plugin, which samples (every second on the test broker), so right after the
/// workers stop it can still count as unacknowledged what went back to ready, and a row would
/// see messages twice.
async fn rabbit_count(env: &Env, url: &str, queue: &str) -> Result<u64, String> {
    let out = match (
        env.var("BQ_AMQP_CLUSTER_URL"),
        env.var("BQ_AMQP_CLUSTER_CTL"),
    ) {
        // A queue of the HA cluster: its own rabbitmqctl (the cluster's cookie), on the first
        // node that answers (one may have just been killed).
        (Some(cluster), Some(ctl)) if url.starts_with(cluster) => {
            let mut last = Err(format!("{ctl}: no node answered"));
            for n in 1..=3 {
                let mut cmd = env.command(ctl);
                cmd.args(["-n", &format!("bq-ha-{n}@localhost")]).args([
                    "list_queues",
                    "-q",
                    "name",
                    "messages",
                ]);
                last = run(cmd, Duration::from_secs(60)).await;
                if last.is_ok() {
                    break;
                }
            }
            last?
        }
        _ => {
            let mut cmd = env.command("rabbitmqctl");
            cmd.args(["list_queues", "-q", "name", "messages"]);
            run(cmd, Duration::from_secs(60)).await?
        }
    };
    for line in out.lines() {
        let mut cols = line.split_whitespace();
        if cols.next() == Some(queue) {
            return cols
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("rabbitmqctl: unreadable line {line:?}"));
        }
    }
    Ok(0)
}

/// The admin REST root of the Pulsar broker of `url`: the pulsar-proxied standalone's own
/// (`BQ_PULSAR_PROXIED_ADMIN_URL`) for its direct URL, else the shared broker's.
fn pulsar_admin_root(env: &Env, url: &str) -> String {
    let node = url.split('?').next().unwrap_or(url);
    match (
        env.var("BQ_PULSAR_PROXIED_URL"),
        env.var("BQ_PULSAR_PROXIED_ADMIN_URL"),
    ) {
        (Some(proxied), Some(admin)) if proxied == node => admin.trim_end_matches('/').to_owned(),
        _ => format!(
            "http://127.0.0.1:{}",
            env.var("BQ_PULSAR_HTTP_PORT").unwrap_or("8080")
        ),
    }
}

/// The admin REST base of public/default on the Pulsar broker of `url`.
fn pulsar_admin(env: &Env, url: &str) -> String {
    format!(
        "{}/admin/v2/persistent/public/default",
        pulsar_admin_root(env, url)
    )
}

async fn curl(env: &Env, method: &str, url: &str) -> Result<String, String> {
    let mut cmd = env.command("curl");
    cmd.args(["-sS", "-X", method, "-w", "\n%{http_code}", url]);
    let out = run(cmd, Duration::from_secs(30)).await?;
    let (body, code) = out.trim_end().rsplit_once('\n').unwrap_or(("", out.trim()));
    if code.starts_with('2') {
        Ok(body.to_owned())
    } else {
        Err(format!("{method} {url}: HTTP {code} {body}"))
    }
}

/// Records of `topic` the consumer group `group` has not committed: what it would still have
/// to consume (the Kafka transport's `Stats`, in that group).
pub(crate) async fn kafka_lag(url: &str, group: &str, topic: &str) -> Result<u64, String> {
    use babelqueue::kafka::{KafkaOptions, KafkaTransport, RdKafkaClient};
    let options = KafkaOptions::from_url(url)
        .map_err(|e| e.to_string())?
        .with_group_id(group);
    let transport =
        KafkaTransport::with_client(Arc::new(RdKafkaClient::new(options.clone())), &options);
    stats_total(&transport, topic).await
}

fn kafka_admin(
    url: &str,
) -> Result<rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext>, String> {
    let brokers = babelqueue::kafka::KafkaOptions::from_url(url)
        .map_err(|e| e.to_string())?
        .brokers;
    rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .map_err(|e| e.to_string())
}

/// The leader and the in-sync replicas (node ids) of each partition of `topic`, as the
/// cluster's metadata has them (empty: the topic does not exist yet).
pub(crate) async fn kafka_partitions(
    url: &str,
    topic: &str,
) -> Result<Vec<(i32, Vec<i32>)>, String> {
    use rdkafka::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let brokers = babelqueue::kafka::KafkaOptions::from_url(url)
        .map_err(|e| e.to_string())?
        .brokers;
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .create()
            .map_err(|e| e.to_string())?;
        let metadata = consumer
            .fetch_metadata(Some(&topic), Duration::from_secs(10))
            .map_err(|e| e.to_string())?;
        Ok(metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic && t.error().is_none())
            .flat_map(|t| t.partitions())
            .map(|p| (p.leader(), p.isr().to_vec()))
            .collect())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Creates Kafka topics (one partition) up front, as the transport's documentation asks for the
/// retry tier topics; an existing topic is fine.
pub(crate) async fn kafka_create_topics(url: &str, topics: &[String]) -> Result<(), String> {
    use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
    use rdkafka::types::RDKafkaErrorCode;
    let admin = kafka_admin(url)?;
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| NewTopic::new(t, 1, TopicReplication::Fixed(1)))
        .collect();
    let results = admin
        .create_topics(new.iter(), &AdminOptions::new())
        .await
        .map_err(|e| e.to_string())?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => return Err(format!("create topic {t}: {e}")),
        }
    }
    Ok(())
}

/// Reads every body of `queue` with a fresh consumer (popped and acknowledged), until nothing
/// came for `idle` (counted from the start too: a Kafka group join takes a while) or `limit`.
/// Redis queues are read in place (`Browser`: the exact stored bytes).
pub(crate) async fn read_all(
    env: &Env,
    broker: Broker,
    url: &str,
    queue: &str,
    idle: Duration,
    limit: Duration,
) -> Result<Vec<Vec<u8>>, String> {
    let transport = connect(env, broker, url).await?;
    if broker.is_redis() {
        let browser = transport
            .capabilities()
            .browser()
            .ok_or_else(|| "the Redis transport has no Browser".to_owned())?;
        return browser.browse(queue, 0).await.map_err(|e| e.to_string());
    }
    let _ =
        tokio::time::timeout(Duration::from_secs(30), transport.prepare_consume(queue, 1)).await;
    let start = Instant::now();
    let mut last = Instant::now();
    let mut bodies = Vec::new();
    let mut errors = 0u32;
    let mut last_error = String::new();
    while start.elapsed() < limit && last.elapsed() < idle {
        match tokio::time::timeout(
            Duration::from_secs(15),
            transport.pop(queue, Duration::from_secs(1)),
        )
        .await
        {
            Ok(Ok(Some(delivery))) => {
                bodies.push(delivery.body().to_vec());
                if let Err(e) = transport.ack(&delivery).await {
                    last_error = format!("ack: {e}");
                    errors += 1;
                }
                last = Instant::now();
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                errors += 1;
                last_error = e.to_string();
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(_) => {
                errors += 1;
                last_error = "a pop did not return within 15 s".into();
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), transport.close()).await;
    if bodies.is_empty() && errors > 0 {
        return Err(format!(
            "reading {queue}: {errors} errors, the last: {last_error}"
        ));
    }
    Ok(bodies)
}

/// Deletes what a row left behind where that is cheap (Redis keys, RabbitMQ queues, Artemis
/// address settings).
pub(crate) async fn cleanup(env: &Env, broker: Broker, queue: &str) {
    if broker.is_redis()
        && let Ok(base) = env.base_url(broker)
    {
        redis_cleanup(env, broker, &base, queue).await;
    }
    if broker == Broker::Artemis && queue.starts_with("chaos-dlq-") {
        let _ = artemis_manage(
            env,
            "removeAddressSettings",
            &serde_json::json!([broker.dlq(queue)]),
        )
        .await;
    }
    if broker == Broker::Rabbitmq {
        for q in [queue.to_owned(), broker.dlq(queue)] {
            let mut cmd = env.command("rabbitmqctl");
            cmd.args(["delete_queue", &q]);
            let _ = run(cmd, Duration::from_secs(30)).await;
        }
    }
}

/// Deletes the keys of `queue` and its dead-letter queue on the Redis of `base` (a plain URL or
/// a topology's), in the layout of `broker`.
pub(crate) async fn redis_cleanup(env: &Env, broker: Broker, base: &str, queue: &str) {
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = if broker == Broker::RedisLaravel {
        format!("{base}{sep}laravel=1")
    } else {
        base.to_owned()
    };
    if let Ok((_, o)) = babelqueue::redis::RedisOptions::from_url(&url) {
        for q in [queue.to_owned(), broker.dlq(queue)] {
            let keys = [
                o.ready(&q),
                o.processing(&q),
                o.deadlines(&q),
                o.reserved(&q),
                o.delayed(&q),
                o.notify(&q),
            ];
            // One key per command: a cluster refuses a DEL across slots.
            for key in &keys {
                let _ = redis_cli(env, &url, &["DEL", key]).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_are_parsed_like_bash_reads_them() {
        let text = "export BQ_REDIS_URL=redis://127.0.0.1:6379\n\
                    export BQ_SQS_URL='sqs://us-east-1?endpoint=http://127.0.0.1:5000'\n\
                    export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1\n\
                    noise\n";
        let vars: BTreeMap<String, String> = parse_exports(text).into_iter().collect();
        assert_eq!(vars["BQ_REDIS_URL"], "redis://127.0.0.1:6379");
        assert_eq!(
            vars["BQ_SQS_URL"],
            "sqs://us-east-1?endpoint=http://127.0.0.1:5000"
        );
        assert_eq!(vars["AWS_SECRET_ACCESS_KEY"], "test");
        assert_eq!(vars["AWS_REGION"], "us-east-1");
        assert_eq!(vars.len(), 5);
    }

    /// Whether there is a redis-server binary; without one, `SKIPPED` (a failure with
    /// `BQ_REQUIRE_BROKERS` set).
    fn redis_server_or_skip() -> bool {
        match Command::new("redis-server").arg("--version").output() {
            Ok(out) if out.status.success() => true,
            other => {
                babelqueue_testkit::skip_or_fail(format!("no redis-server binary: {other:?}"));
                false
            }
        }
    }

    /// An environment whose cache is a fresh temporary directory.
    fn scratch_env(tag: &str) -> Env {
        let cache = std::env::temp_dir().join(format!(
            "bq-chaos-{tag}-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        Env {
            root: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."),
            cache,
            vars: BTreeMap::new(),
        }
    }

    /// A redis-server someone else runs (no persistence), stopped when dropped.
    struct Foreign(std::process::Child);

    impl Foreign {
        /// Starts one on `port`; `None` when the port does not answer as it within 10 s.
        async fn start(env: &Env, port: u16) -> Option<Foreign> {
            let child = Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server runs");
            let foreign = Foreign(child);
            let url = format!("redis://127.0.0.1:{port}");
            for _ in 0..100 {
                if redis_cli(env, &url, &["PING"])
                    .await
                    .is_ok_and(|o| o == "PONG")
                {
                    return Some(foreign);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            None
        }

        fn pid(&self) -> u32 {
            self.0.id()
        }
    }

    impl Drop for Foreign {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// The restart rows once took 6391 (and 6392): with another Redis there, the start took
    /// that server for its own and the restart failed on a missing pid file. Now the row's
    /// Redis is on a free port, is its own (a restart finds its pid), and leaves the other
    /// one alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn own_redis_starts_and_restarts_beside_a_redis_on_6391() {
        if !redis_server_or_skip() {
            return;
        }
        let env = scratch_env("own-redis");
        // The Redis of the failed run; when 6391 is already held, it is held anyway.
        let foreign = if babelqueue_testkit::port_taken(6391) {
            None
        } else {
            Foreign::start(&env, 6391).await
        };
        assert!(babelqueue_testkit::port_taken(6391), "6391 is held");
        let dir = env.cache.join("own");
        let checks = async {
            let own = OwnRedis::start_new(&env, &dir).await?;
            let result = async {
                if own.port == 6391 {
                    return Err("started on the fixed port".to_owned());
                }
                for hard in [true, false] {
                    own.restart(&env, hard).await?;
                    let pid = own.pid()?;
                    let answering = own.answering_pid(&env).await;
                    if answering != Some(pid) {
                        return Err(format!("pid file {pid}, answering {answering:?}"));
                    }
                }
                Ok(own.port)
            }
            .await;
            own.stop(&env).await;
            result
        };
        let result = tokio::time::timeout(Duration::from_secs(120), checks)
            .await
            .expect("start, two restarts and a stop within 2 minutes");
        if let Some(foreign) = &foreign {
            let answering = redis_cli(&env, "redis://127.0.0.1:6391", &["INFO", "server"]).await;
            assert!(
                answering.is_ok_and(|info| info.contains(&format!("process_id:{}", foreign.pid()))),
                "the Redis on 6391 is still the other one"
            );
        }
        drop(foreign);
        let _ = std::fs::remove_dir_all(&env.cache);
        let port = result.expect("own Redis");
        assert!(!dir.exists(), "stop removes {}", dir.display());
        assert_ne!(port, 6391);
    }

    /// A start on a port another Redis or any listener holds is a collision (another port may
    /// work), and says which port and redis-server's own reason; fast, not after the 30 s
    /// wait for an answer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_start_on_a_taken_port_names_the_port_and_why() {
        if !redis_server_or_skip() {
            return;
        }
        let env = scratch_env("taken");
        let redis_port = babelqueue_testkit::free_port().expect("a free port");
        let foreign = Foreign::start(&env, redis_port)
            .await
            .expect("the other Redis answers");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        let listener_port = listener.local_addr().expect("its address").port();
        for port in [redis_port, listener_port] {
            let own = OwnRedis {
                port,
                dir: env.cache.join(format!("own-{port}")),
            };
            let started = Instant::now();
            let result = tokio::time::timeout(Duration::from_secs(60), own.start(&env))
                .await
                .expect("a start gives up within a minute");
            let elapsed = started.elapsed();
            let Err(StartError::PortTaken(message)) = result else {
                panic!("port {port}: not a collision: {result:?}");
            };
            assert!(
                message.contains(&format!("redis-server on 127.0.0.1:{port}")),
                "{message}"
            );
            assert!(message.contains("Address already in use"), "{message}");
            assert!(elapsed < Duration::from_secs(10), "{elapsed:?}: {message}");
        }
        assert!(
            redis_cli(&env, &format!("redis://127.0.0.1:{redis_port}"), &["PING"])
                .await
                .is_ok_and(|o| o == "PONG"),
            "the other Redis is untouched"
        );
        drop((foreign, listener));
        let _ = std::fs::remove_dir_all(&env.cache);
    }

    /// A server that exits while starting (here on an unreadable AOF manifest) is not a
    /// collision: the failure names the port and ends with redis-server's own words.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_start_that_exits_names_the_port_and_the_servers_reason() {
        if !redis_server_or_skip() {
            return;
        }
        let env = scratch_env("exits");
        let own = OwnRedis {
            port: babelqueue_testkit::free_port().expect("a free port"),
            dir: env.cache.join("own"),
        };
        let aof = own.dir.join("appendonlydir");
        std::fs::create_dir_all(&aof).expect("the AOF directory");
        std::fs::write(aof.join("appendonly.aof.manifest"), "not a manifest\n")
            .expect("a broken manifest");
        let result = tokio::time::timeout(Duration::from_secs(60), own.start(&env))
            .await
            .expect("a start gives up within a minute");
        let _ = std::fs::remove_dir_all(&env.cache);
        let Err(StartError::Failed(message)) = result else {
            panic!("not a plain failure: {result:?}");
        };
        assert!(
            message.contains(&format!("redis-server on 127.0.0.1:{} exited", own.port)),
            "{message}"
        );
        assert!(message.contains("AOF manifest"), "{message}");
    }

    /// `broker_count` through the transports' `Stats`: two published, one received and not
    /// settled, on every broker that reports stats (each skipped when it is down, a failure
    /// with `BQ_REQUIRE_BROKERS` set).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn broker_count_is_ready_plus_in_flight_from_the_transports_stats() {
        let env = Env::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."));
        let scenario = crate::scenarios::Scenario::Sigkill;
        for broker in [
            Broker::Redis,
            Broker::RedisLaravel,
            Broker::Sqs,
            Broker::Kafka,
            Broker::Pulsar,
            Broker::Nats,
            Broker::Artemis,
        ] {
            let queue = babelqueue_testkit::unique_queue(&format!("chaos-count-{}", broker.name()));
            let Ok(url) = crate::scenarios::worker_url(&env, broker, scenario, &queue, None) else {
                babelqueue_testkit::skip_or_fail(format!("{}: no URL", broker.name()));
                continue;
            };
            let Some(transport) =
                babelqueue_testkit::broker_or_skip(broker.name(), connect(&env, broker, &url))
                    .await
            else {
                continue;
            };
            if broker == Broker::Sqs {
                sqs_create(&env, &queue)
                    .await
                    .expect("create the SQS queue");
            }
            if broker == Broker::Kafka {
                kafka_create_topics(&url, std::slice::from_ref(&queue))
                    .await
                    .expect("create the topic");
            }
            for _ in 0..2 {
                transport.publish(&queue, b"{}").await.expect("publish");
            }
            let mut held = None;
            for _ in 0..20 {
                held = transport
                    .pop(&queue, Duration::from_secs(1))
                    .await
                    .expect("pop");
                if held.is_some() {
                    break;
                }
            }
            let held = held.expect("a delivery within 20 s");
            let counted = broker_count(&env, broker, &url, &queue).await;
            assert_eq!(counted, Some(Ok(2)), "{}", broker.name());
            transport.ack(&held).await.expect("ack");
            let _ = transport.close().await;
            if broker.is_redis() {
                redis_cleanup(&env, broker, &env.base_url(broker).expect("url"), &queue).await;
            }
        }
    }

    #[test]
    fn redis_urls_name_host_port_and_database() {
        assert_eq!(
            redis_target("redis://127.0.0.1:6391?retry_after=2"),
            ("127.0.0.1".into(), "6391".into(), "0".into())
        );
        assert_eq!(
            redis_target("redis://u:p@h:1/3?laravel=1"),
            ("h".into(), "1".into(), "3".into())
        );
    }
}
