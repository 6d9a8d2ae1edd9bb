//! `babelqueue kafka …`: the Kafka-only tools (feature `kafka`).

use std::time::{Duration, Instant};

use babelqueue::kafka::{
    DEFAULT_REINJECT_GROUP_ID, KafkaOptions, RdKafkaClient, RetryReinjector, RetryTiers,
};
use clap::{Args, Subcommand};

use crate::Session;
use crate::args::UrlArg;

#[derive(Debug, Subcommand)]
pub(crate) enum KafkaCommand {
    /// Run the retry re-injector: move records parked on `<topic>.retry.<n>` back to `<topic>`
    /// once their tier's delay has passed (prints one JSON line per batch written).
    Reinject(ReinjectArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ReinjectArgs {
    /// Broker URL (`kafka://host:9092[?retry_tiers_ms=…&librdkafka.option=…]`).
    #[command(flatten)]
    url: UrlArg,
    /// A work topic whose tier topics to consume (repeatable).
    #[arg(long = "topic", required = true)]
    topics: Vec<String>,
    /// The retry tiers in milliseconds (`5000,30000,…` or `default`); the workers' list. Default:
    /// the URL's `retry_tiers_ms`, else the recommended 5 s, 30 s, 5 min, 30 min.
    #[arg(long)]
    tiers: Option<String>,
    /// The consumer group.
    #[arg(long, default_value = DEFAULT_REINJECT_GROUP_ID)]
    group: String,
    /// Exit after re-injecting this many records.
    #[arg(long)]
    max: Option<u64>,
    /// Exit when nothing was held or re-injected for this many seconds.
    #[arg(long)]
    idle_timeout: Option<f64>,
}

impl KafkaCommand {
    /// The broker URL the command was given.
    pub(crate) fn url(&self) -> &str {
        match self {
            KafkaCommand::Reinject(args) => &args.url.url,
        }
    }
}

pub(crate) async fn run(session: &Session, command: KafkaCommand) -> Result<(), String> {
    match command {
        KafkaCommand::Reinject(args) => reinject(session, args).await,
    }
}

async fn reinject(session: &Session, args: ReinjectArgs) -> Result<(), String> {
    let io = session.io();
    let mut config = KafkaOptions::from_url(&args.url.url).map_err(|e| e.to_string())?;
    if let Some(tiers) = &args.tiers {
        config.retry_tiers = RetryTiers::parse(tiers).map_err(|e| e.to_string())?;
    }
    if config.retry_tiers.is_empty() {
        config.retry_tiers = RetryTiers::recommended();
    }
    let idle = args
        .idle_timeout
        .map(|s| {
            Duration::try_from_secs_f64(s)
                .map_err(|_| format!("--idle-timeout must be a non-negative number, got {s}"))
        })
        .transpose()?;
    let client = RdKafkaClient::new(config.clone());
    let mut reinjector = RetryReinjector::with_client(&client, &config, &args.topics, &args.group)
        .map_err(|e| e.to_string())?;
    io.note(format!(
        "re-injecting from {} (tiers {} ms)",
        reinjector.topics().join(", "),
        config.retry_tiers
    ));
    let shutdown = session.shutdown().wait();
    tokio::pin!(shutdown);
    let mut total: u64 = 0;
    let mut last_activity = Instant::now();
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            written = reinjector.run_once(None) => {
                if written > 0 {
                    total += written as u64;
                    last_activity = Instant::now();
                    io.line(format!("{{\"reinjected\":{written},\"total\":{total}}}"));
                } else if reinjector.held() > 0 {
                    last_activity = Instant::now();
                }
            }
        }
        if args.max.is_some_and(|max| total >= max) {
            break;
        }
        if idle.is_some_and(|idle| last_activity.elapsed() >= idle) {
            break;
        }
    }
    reinjector.close().await;
    io.note(format!("{total} record(s) re-injected"));
    Ok(())
}
