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
    /// Classify a body (identity, poison cause) and show its normalised envelope; exits 3 when
    /// the body is poison.
    Inspect(InspectArgs),
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
    /// The URN of the job (the envelope's `job`).
    #[arg(long)]
    pub(crate) urn: String,
    /// `data` as a JSON object.
    #[arg(long, default_value = "{}")]
    pub(crate) data: String,
    /// Continue this trace instead of minting a trace id.
    #[arg(long)]
    pub(crate) trace_id: Option<String>,
    /// How many envelopes to publish (a progress bar shows on a terminal).
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

#[derive(Debug, Args)]
pub(crate) struct ConsumeArgs {
    #[command(flatten)]
    pub(crate) url: UrlArg,
    /// The queue to consume.
    #[arg(long)]
    pub(crate) queue: String,
    /// Handle this URN (repeatable); with none, every URN is handled.
    #[arg(long = "urn")]
    pub(crate) urns: Vec<String>,
    /// Handle this URN with a handler that fails (repeatable).
    #[arg(long = "fail-urn")]
    pub(crate) fail_urns: Vec<String>,
    /// Exit after this many handler calls.
    #[arg(long)]
    pub(crate) max: Option<u64>,
    /// Exit when nothing arrived for this many seconds.
    #[arg(long)]
    pub(crate) idle_timeout: Option<f64>,
    /// Deliveries per message before it is dead-lettered or dropped.
    #[arg(long, default_value_t = 3)]
    pub(crate) max_attempts: i64,
    /// Dead-letter exhausted and poison messages.
    #[arg(long)]
    pub(crate) dead_letter: bool,
    /// What to do with a URN no handler is registered for.
    #[arg(long, value_enum, default_value_t = OnUnknownUrn::Fail)]
    pub(crate) on_unknown_urn: OnUnknownUrn,
    /// Retry back-off base, seconds.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) retry_backoff: f64,
    /// Handlers in flight at once.
    #[arg(long, default_value_t = 1)]
    pub(crate) concurrency: usize,
    /// Deliveries received per broker round trip, at most (default: --concurrency). Deliveries
    /// received and not started when the consumer stops are released unchanged.
    #[arg(long)]
    pub(crate) prefetch: Option<usize>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum DlqCommand {
    /// List the dead-letter queue of a queue, leaving it unchanged. Redis, NATS, Artemis,
    /// Kafka, Pulsar (with BQ_PULSAR_ADMIN_URL), Azure Service Bus and memory:// read it in
    /// place; RabbitMQ and SQS cannot browse, so there the listing drains the dead-letter
    /// queue and restores every message in order (a consumer of it could see them meanwhile).
    List(DlqArgs),
    /// Show the dead-lettered messages with these ids (`meta.id`), body included.
    Show(ByIdArgs),
    /// Send the dead-lettered messages with these ids back to work (attempts reset,
    /// dead_letter block removed); every other message stays.
    Retry(RetryArgs),
    /// Delete the dead-lettered messages with these ids; every other message stays.
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
    /// Broker URL; defaults to $BABELQUEUE_URL, which keeps a password out of the process list.
    #[arg(long, env = URL_ENV, hide_env_values = true)]
    pub(crate) url: String,
    #[command(flatten)]
    pub(crate) target: DlqTarget,
    /// The messages' ids (`meta.id`).
    #[arg(required = true, value_name = "ID")]
    pub(crate) ids: Vec<String>,
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

fn parse_header(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("a header is KEY=VALUE, got {text:?}"))
}

impl Command {
    /// The broker URL the command was given, if any (for scrubbing it out of errors).
    pub(crate) fn url(&self) -> Option<&str> {
        match self {
            Command::Publish(a) => Some(&a.url.url),
            Command::Consume(a) => Some(&a.url.url),
            Command::Dlq { command } => Some(match command {
                DlqCommand::List(a) => &a.url.url,
                DlqCommand::Redrive(a) => &a.dlq.url.url,
                DlqCommand::Show(a) | DlqCommand::Remove(a) => &a.url,
                DlqCommand::Retry(a) => &a.by_id.url,
            }),
            #[cfg(feature = "kafka")]
            Command::Kafka { command } => Some(command.url()),
            _ => None,
        }
    }
}
