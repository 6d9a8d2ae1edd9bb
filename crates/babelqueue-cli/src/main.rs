//! `babelqueue`: the command-line tool for people who operate BabelQueue queues.
//!
//! ```text
//! babelqueue demo
//! babelqueue publish URL --queue Q --urn URN [--data JSON] [--trace-id ID] [--count N] [--delay SECS] [--header K=V]...
//! babelqueue consume URL --queue Q [--urn URN]... [--fail-urn URN]... [--max N] [--idle-timeout SECS]
//!                    [--max-attempts N] [--dead-letter] [--on-unknown-urn STRATEGY] [--retry-backoff SECS]
//!                    [--concurrency N] [--prefetch N]
//! babelqueue dlq list URL --queue Q [--dlq NAME] [--max N]
//! babelqueue dlq redrive URL --queue Q [--dlq NAME] [--max N] [--dry-run] [--select URN] [--to QUEUE]
//! babelqueue inspect [FILE|-]
//! babelqueue kafka reinject URL --topic T [--topic T2]... [--tiers MS,...] [--max N] [--idle-timeout SECS]   (feature kafka)
//! ```
//!
//! Output lines are compact JSON, one per event, so scripts and tests can read them.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Read as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use babelqueue::envelope::{RawJson, Verdict, classify, poison_cause};
use babelqueue::{App, Consume, Context, Envelope, HandlerError, Headers, UnknownUrn};
use clap::{Args, Parser, Subcommand};

mod demo;
#[cfg(feature = "kafka")]
mod kafka;

#[derive(Debug, Parser)]
#[command(
    name = "babelqueue",
    version,
    about = "Operate BabelQueue queues: publish, consume, inspect, list and redrive dead-letter queues."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the demo on memory://: publish, handle, retry, dead-letter, with a running commentary.
    Demo,
    /// Publish envelopes; prints each one as a compact JSON line.
    Publish(PublishArgs),
    /// Consume with the real runtime; prints one JSON line per handler call.
    Consume(ConsumeArgs),
    /// Dead-letter queue tools.
    Dlq {
        #[command(subcommand)]
        command: DlqCommand,
    },
    /// Classify a body (identity, poison cause) and show its normalised envelope.
    Inspect {
        /// A file holding the body, or `-` (the default) for standard input.
        #[arg(default_value = "-")]
        file: String,
    },
    /// Apache Kafka tools (the retry re-injector).
    #[cfg(feature = "kafka")]
    Kafka {
        #[command(subcommand)]
        command: kafka::KafkaCommand,
    },
}

#[derive(Debug, Args)]
struct PublishArgs {
    /// Broker URL (memory://, redis://, amqp://, sqs://, kafka://, …).
    url: String,
    #[arg(long)]
    queue: String,
    #[arg(long)]
    urn: String,
    /// `data` as a JSON object.
    #[arg(long, default_value = "{}")]
    data: String,
    /// Continue this trace instead of minting a trace id.
    #[arg(long)]
    trace_id: Option<String>,
    /// How many envelopes to publish.
    #[arg(long, default_value_t = 1)]
    count: u64,
    /// Deliver after this many seconds (needs a transport that can delay).
    #[arg(long)]
    delay: Option<f64>,
    /// An out-of-band header, `KEY=VALUE` (repeatable).
    #[arg(long = "header", value_parser = parse_header)]
    headers: Vec<(String, String)>,
}

#[derive(Debug, Args)]
struct ConsumeArgs {
    url: String,
    #[arg(long)]
    queue: String,
    /// Handle this URN (repeatable); with none, every URN is handled.
    #[arg(long = "urn")]
    urns: Vec<String>,
    /// Handle this URN with a handler that fails (repeatable).
    #[arg(long = "fail-urn")]
    fail_urns: Vec<String>,
    /// Exit after this many handler calls.
    #[arg(long)]
    max: Option<u64>,
    /// Exit when nothing arrived for this many seconds.
    #[arg(long)]
    idle_timeout: Option<f64>,
    #[arg(long, default_value_t = 3)]
    max_attempts: i64,
    /// Dead-letter exhausted and poison messages.
    #[arg(long)]
    dead_letter: bool,
    /// fail | delete | release | dead_letter
    #[arg(long, default_value = "fail")]
    on_unknown_urn: String,
    /// Retry back-off base, seconds.
    #[arg(long, default_value_t = 0.0)]
    retry_backoff: f64,
    /// Handlers in flight at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Deliveries received per broker round trip, at most (default: --concurrency). Deliveries
    /// received and not started when the consumer stops are released unchanged.
    #[arg(long)]
    prefetch: Option<usize>,
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// List the dead-letter queue of a queue (one JSON line per record).
    List(DlqArgs),
    /// Send dead-lettered messages back to work (attempts reset, dead_letter block removed).
    Redrive(RedriveArgs),
}

#[derive(Debug, Args)]
struct DlqArgs {
    url: String,
    /// The source queue; its dead-letter queue is derived the way the runtime names it.
    #[arg(long)]
    queue: String,
    /// The dead-letter queue, when it is not the derived one.
    #[arg(long)]
    dlq: Option<String>,
    /// At most this many messages (0 = all).
    #[arg(long, default_value_t = 0)]
    max: usize,
}

#[derive(Debug, Args)]
struct RedriveArgs {
    #[command(flatten)]
    dlq: DlqArgs,
    /// Report what would happen; every message stays in the dead-letter queue.
    #[arg(long)]
    dry_run: bool,
    /// Only redrive messages with this URN.
    #[arg(long)]
    select: Option<String>,
    /// Redrive to this queue instead of each message's original queue.
    #[arg(long)]
    to: Option<String>,
}

fn parse_header(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("a header is KEY=VALUE, got {text:?}"))
}

fn seconds(value: f64, name: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| format!("--{name} must be a non-negative number of seconds, got {value}"))
}

type CliResult = Result<(), String>;

async fn publish(args: PublishArgs) -> CliResult {
    let transport = babelqueue::connect(&args.url)
        .await
        .map_err(|e| e.to_string())?;
    let app = App::builder_arc(transport.clone())
        .queue(args.queue.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let result = publish_all(&app, args).await;
    close(transport.as_ref()).await;
    result
}

/// Envelopes per `App::publish_batch` call of `publish --count`.
const PUBLISH_BATCH: u64 = 100;

async fn publish_all(app: &App, args: PublishArgs) -> CliResult {
    let data = RawJson::parse(&args.data).map_err(|e| format!("--data is not JSON: {e}"))?;
    let headers: Headers = args.headers.into_iter().collect();
    let envelope = |app: &App| {
        let mut builder = app.envelope(&args.urn).data_raw(data.clone());
        if let Some(trace_id) = &args.trace_id {
            builder = builder.trace_id(trace_id.clone());
        }
        builder.build().map_err(|e| e.to_string())
    };
    // Plain envelopes go out in batches (one round trip each where the broker allows); a
    // delayed or header-carrying publish is one call per envelope.
    if args.delay.is_none() && headers.is_empty() {
        let mut left = args.count;
        while left > 0 {
            let take = left.min(PUBLISH_BATCH);
            let batch = (0..take)
                .map(|_| envelope(app))
                .collect::<Result<Vec<_>, _>>()?;
            app.publish_batch(&args.queue, &batch)
                .await
                .map_err(|e| e.to_string())?;
            for sent in &batch {
                println!("{}", sent.encode().map_err(|e| e.to_string())?);
            }
            left -= take;
        }
        return Ok(());
    }
    for _ in 0..args.count {
        let envelope = envelope(app)?;
        match args.delay {
            Some(delay) => {
                app.publish_delayed(&args.queue, &envelope, seconds(delay, "delay")?)
                    .await
            }
            None => app.publish_envelope(&args.queue, &envelope, &headers).await,
        }
        .map_err(|e| e.to_string())?;
        println!("{}", envelope.encode().map_err(|e| e.to_string())?);
    }
    Ok(())
}

/// `{"urn","trace_id","attempts","data","meta"}` for one handler call, data and meta verbatim.
fn call_line(ctx: &Context) -> String {
    let envelope = ctx.envelope();
    let trace = envelope
        .get("trace_id")
        .map_or_else(|| "null".to_owned(), |t| t.as_str().to_owned());
    let meta = envelope
        .get("meta")
        .map_or_else(|| "{}".to_owned(), |m| m.as_str().to_owned());
    format!(
        "{{\"urn\":{},\"trace_id\":{trace},\"attempts\":{},\"data\":{},\"meta\":{meta}}}",
        RawJson::string(&ctx.urn()),
        ctx.attempts(),
        ctx.data()
    )
}

async fn consume(args: ConsumeArgs) -> CliResult {
    let transport = babelqueue::connect(&args.url)
        .await
        .map_err(|e| e.to_string())?;
    let strategy: UnknownUrn = args
        .on_unknown_urn
        .parse()
        .map_err(|e: babelqueue::Error| e.to_string())?;
    let calls = Arc::new(AtomicU64::new(0));
    let stop_after = args.max;
    let mut builder = App::builder_arc(transport.clone())
        .queue(args.queue.clone())
        .max_attempts(args.max_attempts)
        .dead_letter(args.dead_letter)
        .on_unknown_urn(strategy)
        .retry_backoff(seconds(args.retry_backoff, "retry-backoff")?)
        .concurrency(args.concurrency);
    if let Some(prefetch) = args.prefetch {
        builder = builder.prefetch(prefetch);
    }
    // The stop handle exists only once the app is built; handlers reach it through a cell.
    let stop: Arc<std::sync::OnceLock<babelqueue::StopHandle>> =
        Arc::new(std::sync::OnceLock::new());
    let handler = |fail: bool| {
        let (calls, stop) = (calls.clone(), stop.clone());
        move |ctx: Context| {
            let (calls, stop) = (calls.clone(), stop.clone());
            async move {
                println!("{}", call_line(&ctx));
                let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                if stop_after.is_some_and(|max| n >= max)
                    && let Some(stop) = stop.get()
                {
                    stop.stop();
                }
                if fail {
                    Err(HandlerError::new(format!("{} is a --fail-urn", ctx.urn())))
                } else {
                    Ok(())
                }
            }
        }
    };
    for urn in &args.urns {
        builder = builder.handle(urn.clone(), handler(false));
    }
    for urn in &args.fail_urns {
        builder = builder.handle(urn.clone(), handler(true));
    }
    if args.urns.is_empty() {
        builder = builder.handle_any(handler(false));
    }
    let app = builder.build().map_err(|e| e.to_string())?;
    let _ = stop.set(app.stop_handle());
    if args.max == Some(0) {
        close(transport.as_ref()).await;
        return Ok(());
    }
    let mut options = Consume::new();
    if let Some(idle) = args.idle_timeout {
        options = options.idle_timeout(seconds(idle, "idle-timeout")?);
    }
    let summary = app.consume(options).await;
    // After a signal the runtime has closed the transport itself.
    if !summary.as_ref().is_ok_and(|s| s.signalled) {
        close(transport.as_ref()).await;
    }
    let summary = summary.map_err(|e| e.to_string())?;
    eprintln!(
        "babelqueue: {} handler call(s), {} deliveries settled, {} released at shutdown",
        calls.load(Ordering::SeqCst),
        summary.processed,
        summary.released_at_shutdown
    );
    Ok(())
}

async fn dlq_name(args: &DlqArgs, app: &App) -> String {
    args.dlq.clone().unwrap_or_else(|| {
        babelqueue::decide::dead_letter_queue(
            app.policy(),
            &args.queue,
            app.transport().capabilities().dead_letter_namer(),
        )
    })
}

fn summary_line(body: &[u8]) -> String {
    let verdict = classify(body);
    let envelope = Envelope::decode_lenient(body).envelope;
    let block = envelope
        .dead_letter()
        .and_then(|b| babelqueue::envelope::Object::parse(b.as_str()).ok());
    let field = |k: &str| {
        block
            .as_ref()
            .and_then(|b| b.get(k))
            .map_or_else(|| "null".to_owned(), |v| v.as_str().to_owned())
    };
    let raw_body = RawJson::string(&String::from_utf8_lossy(body));
    format!(
        "{{\"urn\":{},\"message_id\":{},\"reason\":{},\"error\":{},\"attempts\":{},\"original_queue\":{},\"readable\":{},\"body\":{raw_body}}}",
        RawJson::string(&envelope.urn()),
        envelope.message_id().map_or_else(
            || "null".to_owned(),
            |id| RawJson::string(&id).into_string()
        ),
        field("reason"),
        field("error"),
        field("attempts"),
        field("original_queue"),
        !matches!(verdict, Verdict::Poison(_)),
    )
}

async fn dlq(command: DlqCommand) -> CliResult {
    let args = match &command {
        DlqCommand::List(a) => a,
        DlqCommand::Redrive(r) => &r.dlq,
    };
    let transport = babelqueue::connect(&args.url)
        .await
        .map_err(|e| e.to_string())?;
    let app = App::builder_arc(transport.clone())
        .queue(args.queue.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let dlq = dlq_name(args, &app).await;
    let result = dlq_command(transport.as_ref(), &dlq, command).await;
    close(transport.as_ref()).await;
    result
}

/// Releases the transport's connections (and, on SQS, any batch-received messages) before the
/// process exits; a failure is reported, never fatal: nothing unsettled is lost, it only comes
/// back later.
async fn close(transport: &dyn babelqueue::Transport) {
    if let Err(e) = transport.close().await {
        eprintln!(
            "babelqueue: closing the {} transport failed: {e}",
            transport.name()
        );
    }
}

async fn dlq_command(
    transport: &dyn babelqueue::Transport,
    dlq: &str,
    command: DlqCommand,
) -> CliResult {
    use babelqueue::redrive::{Redrive, list, redrive};
    match command {
        DlqCommand::List(args) => {
            let bodies = list(transport, dlq, args.max)
                .await
                .map_err(|e| e.to_string())?;
            for body in &bodies {
                println!("{}", summary_line(body));
            }
            eprintln!("babelqueue: {} message(s) in {dlq}", bodies.len());
        }
        DlqCommand::Redrive(args) => {
            let mut options = Redrive::new().max(args.dlq.max).dry_run(args.dry_run);
            if let Some(urn) = args.select.clone() {
                options = options.select(move |envelope| envelope.urn() == urn);
            }
            if let Some(to) = args.to.clone() {
                options = options.to_queue(to);
            }
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_message(format!("redriving {dlq}"));
            let mut on_item = |item: &babelqueue::redrive::RedriveItem| {
                bar.inc(1);
                bar.println(format!(
                    "{{\"message_id\":{},\"urn\":{},\"to\":{},\"redriven\":{},\"skipped\":{}}}",
                    RawJson::string(&item.message_id),
                    RawJson::string(&item.urn),
                    RawJson::string(&item.to),
                    item.redriven,
                    item.skipped
                        .as_deref()
                        .map_or_else(|| "null".to_owned(), |s| RawJson::string(s).into_string()),
                ));
            };
            let report = redrive(transport, dlq, &options, &mut on_item).await;
            bar.finish_and_clear();
            let report = report.map_err(|e| e.to_string())?;
            eprintln!(
                "babelqueue: {} redriven, {} kept in {dlq}",
                report.redriven, report.skipped
            );
        }
    }
    Ok(())
}

fn inspect(file: &str) -> CliResult {
    let mut body = Vec::new();
    if file == "-" {
        std::io::stdin()
            .read_to_end(&mut body)
            .map_err(|e| e.to_string())?;
    } else {
        body = std::fs::read(file).map_err(|e| format!("cannot read {file}: {e}"))?;
    }
    let verdict = match classify(&body) {
        Verdict::Ok => "\"ok\"".to_owned(),
        Verdict::NoIdentity => "\"no_identity\"".to_owned(),
        Verdict::Poison(_) => "\"poison\"".to_owned(),
    };
    let cause = poison_cause(&body, true).map_or_else(
        || "null".to_owned(),
        |c| RawJson::string(&c.to_string()).into_string(),
    );
    let decoded = Envelope::decode_checked(&body);
    let (envelope, warnings) = match &decoded {
        Ok(d) => (
            d.envelope
                .encode()
                .unwrap_or_else(|e| RawJson::string(&e.to_string()).into_string()),
            d.warnings
                .iter()
                .map(|w| RawJson::string(&w.to_string()).into_string())
                .collect::<Vec<_>>(),
        ),
        Err(_) => ("null".to_owned(), Vec::new()),
    };
    let urn = decoded
        .as_ref()
        .map_or_else(|_| String::new(), |d| d.envelope.urn().into_owned());
    println!(
        "{{\"verdict\":{verdict},\"poison_cause\":{cause},\"urn\":{},\"warnings\":[{}],\"envelope\":{envelope}}}",
        RawJson::string(&urn),
        warnings.join(",")
    );
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr (BABELQUEUE_LOG=debug|info|warn|error); the demo narrates instead.
    let default_level = if matches!(cli.command, Command::Demo) {
        "error"
    } else {
        "warn"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BABELQUEUE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("babelqueue: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    // Every error is printed without the password of the broker URL, whatever shape an error
    // message quotes it in.
    let url = broker_url(&cli.command);
    let result = runtime.block_on(async {
        match cli.command {
            Command::Demo => demo::run().await,
            Command::Publish(args) => publish(args).await,
            Command::Consume(args) => consume(args).await,
            Command::Dlq { command } => dlq(command).await,
            Command::Inspect { file } => inspect(&file),
            #[cfg(feature = "kafka")]
            Command::Kafka { command } => kafka::run(command).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let shown = match &url {
                Some(url) => babelqueue::redact::scrub(&e, url),
                None => babelqueue::redact::redact(&e),
            };
            eprintln!("babelqueue: {shown}");
            ExitCode::FAILURE
        }
    }
}

/// The broker URL a command was given, if any.
fn broker_url(command: &Command) -> Option<String> {
    match command {
        Command::Publish(args) => Some(args.url.clone()),
        Command::Consume(args) => Some(args.url.clone()),
        Command::Dlq {
            command: DlqCommand::List(args),
        } => Some(args.url.clone()),
        Command::Dlq {
            command: DlqCommand::Redrive(args),
        } => Some(args.dlq.url.clone()),
        _ => None,
    }
}
