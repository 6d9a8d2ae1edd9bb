//! The command line: every subcommand and argument, with its help.

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;

#[cfg(feature = "kafka")]
use crate::kafka;

/// Where the broker URL comes from when it is not on the command line.
pub(crate) const URL_ENV: &str = "BABELQUEUE_URL";

#[derive(Debug, Parser)]
#[command(
    name = "babelqueue",
    version,
    about = "Operate BabelQueue queues: publish, consume, inspect, list and redrive dead-letter queues.",
    after_help = "Exit status: 0 done, 1 failed, 2 usage error, 3 `inspect` found a poison body, \
                  130 interrupted (SIGINT), 143 terminated (SIGTERM).\n\
                  Machine output goes to standard output, one JSON object per line; notes, \
                  progress bars and logs (BABELQUEUE_LOG=debug|info|warn|error) go to standard error."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the demo on memory://: publish, handle, retry, dead-letter, with a running commentary.
    Demo,
    /// Publish envelopes; prints each one as a compact JSON line.
    Publish(PublishArgs),
    /// Consume with the real runtime; prints one JSON line per handler call.
    Consume(ConsumeArgs),
    /// Dead-letter queue tools: list, show, retry, remove, redrive.
    Dlq {
        #[command(subcommand)]
        command: DlqCommand,
    },
    /// What the broker says of queues: ready, in flight, delayed, dead letters, consumers
    /// (`-` or null where the broker does not say). Nothing is consumed.
    Stats(StatsArgs),
    /// Classify a body (identity, poison cause) and show its normalised envelope; exits 3 when
    /// the body is poison.
    Inspect(InspectArgs),
    /// Serve the web console and admin API over one or more brokers: queue depths, a paged
    /// dead-letter browser, retry/remove/redrive, `/api/v1`, `/metrics`.
    Serve(ServeArgs),
    /// Print a shell completion script (e.g. `babelqueue completions bash > /etc/bash_completion.d/babelqueue`).
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Apache Kafka tools (the retry re-injector).
    #[cfg(feature = "kafka")]
    Kafka {
        #[command(subcommand)]
        command: kafka::KafkaCommand,
    },
}

/// How listing and reporting commands print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// JSON Lines: one compact JSON object per line, streamed as it happens.
    Json,
    /// An aligned table for people, printed at the end.
    Human,
}

/// `--output`, shared by the listing and reporting commands.
#[derive(Debug, Clone, Copy, Args)]
pub(crate) struct OutputArg {
    /// Output format: `json` (JSON Lines, one object per line) or `human` (an aligned table).
    #[arg(long, value_enum, default_value_t = Output::Json)]
    pub(crate) output: Output,
}

/// The broker URL as the first positional argument, or `BABELQUEUE_URL`.
#[derive(Debug, Clone, Args)]
pub(crate) struct UrlArg {
    /// Broker URL (memory://, redis://, amqp://, sqs://, kafka://, …); defaults to
    /// $BABELQUEUE_URL, which keeps a password out of the process list.
    #[arg(env = URL_ENV, hide_env_values = true)]
    pub(crate) url: String,
}

#[derive(Debug, Args)]
pub(crate) struct PublishArgs {
    #[command(flatten)]
    pub(crate) url: UrlArg,
    /// The queue to publish to.
    #[arg(long)]
    pub(crate) queue: String,
    /// The URN of the job (the envelope's `job`); required unless --raw.
    #[arg(long, required_unless_present = "raw", conflicts_with = "raw")]
    pub(crate) urn: Option<String>,
    /// `data` as a JSON object. A body its consumers would dead-letter as poison (a number
    /// that is not a finite double, `1e400`) is refused, naming the member.
    #[arg(long, default_value = "{}", conflicts_with = "raw")]
    pub(crate) data: String,
    /// Continue this trace instead of minting a trace id.
    #[arg(long, conflicts_with = "raw")]
    pub(crate) trace_id: Option<String>,
    /// Send a body exactly as given, byte for byte: from --body-file, else standard input. It
    /// must pass the verdict its consumers run, unless --allow-poison.
    #[arg(long)]
    pub(crate) raw: bool,
    /// With --raw: the file holding the body.
    #[arg(long, requires = "raw", value_name = "PATH")]
    pub(crate) body_file: Option<std::path::PathBuf>,
    /// With --raw: send the body even when its consumers will dead-letter it as poison (to
    /// plant poison in a test, say).
    #[arg(long)]
    pub(crate) allow_poison: bool,
    /// How many envelopes to publish (a progress bar shows on a terminal). Without --delay and
    /// --header they go out in windows of 1 024 through the transport's pipelined batch publish
    /// (RabbitMQ: 1 024 publisher confirms in flight; Redis: pipelined scripts; Kafka: delivery
    /// reports awaited together), the same path as the library's `publish_batch`. A window's
    /// lines are printed once the broker confirmed all of it, and success means every message
    /// was confirmed; on a failure the error says how many were confirmed before it.
    #[arg(long, default_value_t = 1)]
    pub(crate) count: u64,
    /// Deliver after this many seconds (needs a transport that can delay).
    #[arg(long)]
    pub(crate) delay: Option<f64>,
    /// An out-of-band header, `KEY=VALUE` (repeatable).
    #[arg(long = "header", value_parser = parse_header)]
    pub(crate) headers: Vec<(String, String)>,
}

/// What the consumer does with a URN no handler is registered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnUnknownUrn {
    /// Treat it as a handler failure: retry, then dead-letter or drop.
    Fail,
    /// Acknowledge and drop it.
    Delete,
    /// Give it back unchanged, attempts not counted.
    Release,
    /// Dead-letter it at once (reason `unknown_urn`).
    #[value(name = "dead_letter", alias = "dead-letter")]
    DeadLetter,
}

/// `--retry-jitter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RetryJitter {
    /// Exactly the back-off.
    None,
    /// Uniform between 0 and the back-off.
    Full,
}

impl From<RetryJitter> for babelqueue::Jitter {
    fn from(value: RetryJitter) -> Self {
        match value {
            RetryJitter::None => babelqueue::Jitter::None,
            RetryJitter::Full => babelqueue::Jitter::Full,
        }
    }
}

impl From<OnUnknownUrn> for babelqueue::UnknownUrn {
    fn from(value: OnUnknownUrn) -> Self {
        match value {
            OnUnknownUrn::Fail => babelqueue::UnknownUrn::Fail,
            OnUnknownUrn::Delete => babelqueue::UnknownUrn::Delete,
            OnUnknownUrn::Release => babelqueue::UnknownUrn::Release,
            OnUnknownUrn::DeadLetter => babelqueue::UnknownUrn::DeadLetter,
        }
    }
}

/// How `consume` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ConsumeOutput {
    /// One line per handler call: `{urn, trace_id, attempts, data, meta}`.
    Call,
    /// One line per delivery, whatever it held (poison too): the exact body bytes, as
    /// `{"body": TEXT}` when they are UTF-8, else `{"body_base64": …}`.
    Raw,
    /// One line per delivery: the body as `raw` shows it, every top-level member as it came
    /// (unknown ones too), the broker's headers, the facts the transport reported, what the
    /// broker says of it (its id or position, redelivered, properties) and how it ended.
    Wire,
}

#[derive(Debug, Args)]
pub(crate) struct ConsumeArgs {
    #[command(flatten)]
    pub(crate) url: UrlArg,
    /// The queue to consume (default: $BABELQUEUE_QUEUE or the settings file's `queue`).
    /// Every setting below also comes from the environment or $BABELQUEUE_CONFIG (a TOML
    /// file; docs/settings.md); a flag given here wins.
    #[arg(long)]
    pub(crate) queue: Option<String>,
    /// Handle this URN (repeatable); with none, every URN is handled.
    #[arg(long = "urn")]
    pub(crate) urns: Vec<String>,
    /// Handle this URN with a handler that fails (repeatable).
    #[arg(long = "fail-urn")]
    pub(crate) fail_urns: Vec<String>,
    /// Exit after this many handler calls. A delivery that never reaches a handler (poison,
    /// an unknown URN, a version-gated body) does not count: see --max-deliveries.
    #[arg(long)]
    pub(crate) max: Option<u64>,
    /// Exit after this many deliveries were settled, whatever happened to them (handled,
    /// retried, dead-lettered, dropped, released).
    #[arg(long)]
    pub(crate) max_deliveries: Option<u64>,
    /// Exit when nothing arrived for this many seconds. A message this run already gave back
    /// unchanged (--on-unknown-urn release) coming back again is not something arriving.
    #[arg(long)]
    pub(crate) idle_timeout: Option<f64>,
    /// What to print: one line per handler call (`call`), or one per delivery with its exact
    /// bytes (`raw`) or everything the broker carried (`wire`).
    #[arg(long, value_enum, default_value_t = ConsumeOutput::Call)]
    pub(crate) output: ConsumeOutput,
    /// Deliveries per message before it is dead-lettered or dropped (default 3).
    #[arg(long)]
    pub(crate) max_attempts: Option<i64>,
    /// Dead-letter exhausted and poison messages.
    #[arg(long)]
    pub(crate) dead_letter: bool,
    /// With dead-lettering on: the dead-letter queue's name (default: the queue and
    /// --dead-letter-suffix).
    #[arg(long)]
    pub(crate) dead_letter_queue: Option<String>,
    /// With dead-lettering on: the suffix of the derived dead-letter queue's name (`.dlq`).
    #[arg(long)]
    pub(crate) dead_letter_suffix: Option<String>,
    /// What to do with a URN no handler is registered for (default `fail`).
    #[arg(long, value_enum)]
    pub(crate) on_unknown_urn: Option<OnUnknownUrn>,
    /// How long a message with an unknown URN waits before it comes back, seconds (the
    /// `release` strategy).
    #[arg(long)]
    pub(crate) unknown_urn_release_delay: Option<f64>,
    /// Retry back-off base, seconds (default 0).
    #[arg(long)]
    pub(crate) retry_backoff: Option<f64>,
    /// Each retry waits this many times longer than the one before.
    #[arg(long)]
    pub(crate) retry_backoff_multiplier: Option<f64>,
    /// The longest retry back-off, seconds.
    #[arg(long)]
    pub(crate) retry_backoff_max: Option<f64>,
    /// Randomise each back-off: `none` (exactly the back-off) or `full` (uniform between 0
    /// and it).
    #[arg(long, value_enum)]
    pub(crate) retry_jitter: Option<RetryJitter>,
    /// After a signal, how long running handlers may finish before their messages are given
    /// back unchanged, seconds.
    #[arg(long)]
    pub(crate) shutdown_timeout: Option<f64>,
    /// Handlers in flight at once (default 1).
    #[arg(long)]
    pub(crate) concurrency: Option<usize>,
    /// Deliveries received per broker round trip, at most (default: --concurrency). Deliveries
    /// received and not started when the consumer stops are released unchanged.
    #[arg(long)]
    pub(crate) prefetch: Option<usize>,
    /// Serve Prometheus metrics at http://ADDR/metrics while consuming (e.g.
    /// 127.0.0.1:9464; port 0 picks one and logs it): messages consumed, published, failed and
    /// dead-lettered by queue and URN, handler duration, messages in flight, and the queue's
    /// lag where the broker reports it (sampled every 5 s).
    #[arg(long, value_name = "ADDR", env = "BABELQUEUE_METRICS_LISTEN")]
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
}

#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    #[command(flatten)]
    pub(crate) url: UrlArg,
    /// A queue to report (repeatable: one line each).
    #[arg(long = "queue", required = true)]
    pub(crate) queues: Vec<String>,
    #[command(flatten)]
    pub(crate) output: OutputArg,
    /// The same as `--output json`.
    #[arg(long, conflicts_with = "output")]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum DlqCommand {
    /// List the dead-letter queue of a queue, leaving it unchanged. Redis, NATS, Artemis,
    /// Kafka, Pulsar (with BQ_PULSAR_ADMIN_URL), Azure Service Bus and memory:// read it in
    /// place; RabbitMQ and SQS cannot browse, so there the listing drains the dead-letter
    /// queue and restores every message in order (a consumer of it could see them meanwhile).
    List(DlqArgs),
    /// Show the dead-letter entries with these ids, body included (`dlq show [URL] ID...`).
    /// An entry's id is its `meta.id`, else the content address `dlq list` prints
    /// (`sha256:…`): bytes that are not an envelope can be shown too.
    Show(ByIdArgs),
    /// Send the dead-letter entries with these ids back to work (attempts reset, dead_letter
    /// block removed; `dlq retry [URL] ID...`); every other entry stays. An entry that is not a
    /// readable envelope stays, and the command says why.
    Retry(RetryArgs),
    /// Delete the dead-letter entries with these ids (`dlq remove [URL] ID...`); every other
    /// entry stays.
    Remove(ByIdArgs),
    /// Send dead-lettered messages back to work, all of them or those a filter selects.
    Redrive(RedriveArgs),
}

/// Which dead-letter queue.
#[derive(Debug, Args)]
pub(crate) struct DlqTarget {
    /// The source queue; its dead-letter queue is derived the way the runtime names it.
    #[arg(long)]
    pub(crate) queue: String,
    /// The dead-letter queue, when it is not the derived one.
    #[arg(long)]
    pub(crate) dlq: Option<String>,
    #[command(flatten)]
    pub(crate) output: OutputArg,
}

#[derive(Debug, Args)]
pub(crate) struct DlqArgs {
    #[command(flatten)]
    pub(crate) url: UrlArg,
    #[command(flatten)]
    pub(crate) target: DlqTarget,
    /// At most this many messages (0 = all).
    #[arg(long, default_value_t = 0)]
    pub(crate) max: usize,
}

#[derive(Debug, Args)]
pub(crate) struct ByIdArgs {
    /// The broker URL (memory://, redis://, amqp://, …; optional when $BABELQUEUE_URL is set,
    /// which keeps a password out of the process list), then the entries' ids (`meta.id`, or
    /// the `sha256:…` content address `dlq list` prints). The first argument is the URL when
    /// it holds `://`; an id never does.
    #[arg(required = true, value_name = "URL] [ID")]
    pub(crate) args: Vec<String>,
    /// The broker URL, as older versions took it (prefer the first argument).
    #[arg(long, hide = true)]
    pub(crate) url: Option<String>,
    #[command(flatten)]
    pub(crate) target: DlqTarget,
    /// The ids, once [`ByIdArgs::resolve`] split them from the URL.
    #[arg(skip)]
    pub(crate) ids: Vec<String>,
}

impl ByIdArgs {
    /// Splits the positional arguments into the URL and the ids: the first is the URL when it
    /// holds `://`, else the URL comes from `--url` or `$BABELQUEUE_URL`.
    pub(crate) fn resolve(&mut self, env_url: Option<String>) -> Result<(), String> {
        let mut args = std::mem::take(&mut self.args).into_iter().peekable();
        if args.peek().is_some_and(|first| first.contains("://")) {
            if self.url.is_some() {
                return Err("the broker URL was given twice (first argument and --url)".into());
            }
            self.url = args.next();
        }
        self.ids = args.collect();
        if self.url.is_none() {
            self.url = env_url.filter(|url| !url.is_empty());
        }
        if self.url.is_none() {
            return Err(format!(
                "no broker URL: give it as the first argument (`babelqueue dlq show                  redis://127.0.0.1:6379 --queue orders ID`) or set {URL_ENV}"
            ));
        }
        if self.ids.is_empty() {
            return Err(
                "no id given: name the entries by their id (`dlq list` prints them)".into(),
            );
        }
        Ok(())
    }

    /// The broker URL, once resolved.
    pub(crate) fn url(&self) -> &str {
        self.url.as_deref().unwrap_or_default()
    }
}

#[derive(Debug, Args)]
pub(crate) struct RetryArgs {
    #[command(flatten)]
    pub(crate) by_id: ByIdArgs,
    /// Send to this queue instead of each message's original queue.
    #[arg(long)]
    pub(crate) to: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct RedriveArgs {
    #[command(flatten)]
    pub(crate) dlq: DlqArgs,
    /// Report what would happen; every message stays in the dead-letter queue.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Only redrive messages with this URN.
    #[arg(long)]
    pub(crate) select: Option<String>,
    /// Redrive to this queue instead of each message's original queue.
    #[arg(long)]
    pub(crate) to: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    /// A file holding the body, or `-` (the default) for standard input.
    #[arg(default_value = "-")]
    pub(crate) file: String,
    #[command(flatten)]
    pub(crate) output: OutputArg,
}

/// `babelqueue serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Broker URLs (one or more; each is watched for every --queue); defaults to
    /// $BABELQUEUE_URL.
    #[arg(env = URL_ENV, hide_env_values = true, value_delimiter = ' ', num_args = 1.., required = true)]
    pub(crate) urls: Vec<String>,
    /// The address to listen on. Any non-loopback address requires BABELQUEUE_ADMIN_TOKEN.
    #[arg(long, default_value = "127.0.0.1:8025")]
    pub(crate) listen: std::net::SocketAddr,
    /// A queue to watch (repeatable), on every broker.
    #[arg(long = "queue", required = true)]
    pub(crate) queues: Vec<String>,
    /// Refuse every action (retry, remove, redrive): a console to look only.
    #[arg(long)]
    pub(crate) read_only: bool,
    /// Seconds between two readings of every queue's stats (the chart's resolution).
    #[arg(long, default_value_t = 15.0)]
    pub(crate) sample_every: f64,
    /// A worker's metrics endpoint to scrape for rates (repeatable): the address a worker's
    /// `consume --metrics-listen` serves, as HOST:PORT or an http(s) URL. The overview then
    /// shows each queue's consumed and failed messages per second.
    #[arg(long = "worker-metrics", value_name = "URL", value_parser = babelqueue_console::WorkerEndpoint::parse)]
    pub(crate) worker_metrics: Vec<babelqueue_console::WorkerEndpoint>,
}

fn parse_header(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("a header is KEY=VALUE, got {text:?}"))
}

impl Command {
    /// Settles what clap cannot: which positional argument of `dlq show|retry|remove` is the
    /// URL. `Err` is a usage error.
    pub(crate) fn resolve(&mut self, env_url: Option<String>) -> Result<(), String> {
        match self {
            Command::Dlq {
                command: DlqCommand::Show(a) | DlqCommand::Remove(a),
            } => a.resolve(env_url),
            Command::Dlq {
                command: DlqCommand::Retry(a),
            } => a.by_id.resolve(env_url),
            // clap's `requires` does not hold a plain flag to another one.
            Command::Publish(a) if a.allow_poison && !a.raw => {
                Err("--allow-poison only goes with --raw (a body sent as it is)".into())
            }
            _ => Ok(()),
        }
    }

    /// The broker URL the command was given, if any (for scrubbing it out of errors).
    pub(crate) fn url(&self) -> Option<&str> {
        match self {
            Command::Publish(a) => Some(&a.url.url),
            Command::Consume(a) => Some(&a.url.url),
            Command::Stats(a) => Some(&a.url.url),
            Command::Serve(a) => a.urls.first().map(String::as_str),
            Command::Dlq { command } => Some(match command {
                DlqCommand::List(a) => &a.url.url,
                DlqCommand::Redrive(a) => &a.dlq.url.url,
                DlqCommand::Show(a) | DlqCommand::Remove(a) => a.url(),
                DlqCommand::Retry(a) => a.by_id.url(),
            }),
            #[cfg(feature = "kafka")]
            Command::Kafka { command } => Some(command.url()),
            _ => None,
        }
    }
}
