//! The worker mode (`bq-chaos worker …`, hidden): the real runtime on a real broker, in a child
//! process the harness can SIGKILL. Its handlers append one line per call to the log file.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use babelqueue::{App, Consume, Context, HandlerError};
use clap::Args;

use crate::bodies::{URN_FAIL, URN_OK};
use crate::tally::{Call, Seen};

/// The worker's options (the harness builds them).
#[derive(Debug, Clone, Args)]
pub(crate) struct WorkerArgs {
    /// Broker URL.
    #[arg(long)]
    pub(crate) url: String,
    /// Queue to consume.
    #[arg(long)]
    pub(crate) queue: String,
    /// The handler log (appended to).
    #[arg(long)]
    pub(crate) log: PathBuf,
    /// Which incarnation this is (written on every line).
    #[arg(long, default_value_t = 0)]
    pub(crate) incarnation: u32,
    #[arg(long, default_value_t = 1)]
    pub(crate) concurrency: usize,
    #[arg(long, default_value_t = 3)]
    pub(crate) max_attempts: i64,
    #[arg(long)]
    pub(crate) dead_letter: bool,
    /// Exit when nothing arrived for this many milliseconds.
    #[arg(long)]
    pub(crate) idle_ms: Option<u64>,
    /// Each handler call sleeps a random 0..=N milliseconds (simulated work, so kills land
    /// while handlers run).
    #[arg(long, default_value_t = 0)]
    pub(crate) work_ms: u64,
    /// Run the Kafka retry re-injector for the queue in this process, in this consumer group.
    #[arg(long)]
    pub(crate) kafka_reinject_group: Option<String>,
}

/// The handler log: one `write(2)` per line on an `O_APPEND` file.
#[derive(Debug)]
struct Log {
    file: File,
    incarnation: u32,
    work_ms: u64,
}

impl Log {
    /// Simulated work: half of it before the line is written, half after, so a kill lands both
    /// before a call is logged (the message must come back) and after (a duplicate is allowed).
    async fn work(&self) {
        if self.work_ms > 0 {
            tokio::time::sleep(Duration::from_millis(fastrand::u64(0..=self.work_ms / 2))).await;
        }
    }

    async fn record(&self, ctx: &Context) {
        self.work().await;
        let data = ctx.data();
        let line = Call {
            id: ctx
                .message_id()
                .map(|id| id.into_owned())
                .unwrap_or_default(),
            urn: ctx.urn().into_owned(),
            attempts: ctx.attempts(),
            worker: self.incarnation,
            seen: Seen::of(data.as_str()),
            at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0)),
        }
        .to_line();
        // One write of the whole line: a SIGKILL keeps it or not, never half of it.
        match (&self.file).write(line.as_bytes()) {
            Ok(n) if n == line.len() => {}
            Ok(n) => eprintln!(
                "bq-chaos worker: short log write ({n} of {} bytes)",
                line.len()
            ),
            Err(e) => eprintln!("bq-chaos worker: log write failed: {e}"),
        }
        self.work().await;
    }
}

/// Runs the worker until its idle timeout or a signal; the exit code is the harness' evidence.
pub(crate) async fn run(args: WorkerArgs) -> Result<(), String> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.log)
        .map_err(|e| format!("open {}: {e}", args.log.display()))?;
    let log = Arc::new(Log {
        file,
        incarnation: args.incarnation,
        work_ms: args.work_ms,
    });
    let transport = babelqueue::connect(&args.url)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let ok_log = log.clone();
    let fail_log = log.clone();
    let app = App::builder_arc(transport)
        .queue(args.queue.clone())
        .concurrency(args.concurrency)
        .max_attempts(args.max_attempts)
        .dead_letter(args.dead_letter)
        .shutdown_timeout(Duration::from_secs(5))
        .handle(URN_OK, move |ctx: Context| {
            let log = ok_log.clone();
            async move {
                log.record(&ctx).await;
                Ok::<(), HandlerError>(())
            }
        })
        .handle(URN_FAIL, move |ctx: Context| {
            let log = fail_log.clone();
            async move {
                log.record(&ctx).await;
                Err::<(), HandlerError>(
                    HandlerError::new("chaos: this handler always fails").with_exception("Chaos"),
                )
            }
        })
        .build()
        .map_err(|e| format!("build: {e}"))?;

    let reinjector = match &args.kafka_reinject_group {
        Some(group) => Some(spawn_reinjector(&args.url, &args.queue, group)?),
        None => None,
    };

    let mut options = Consume::new().handle_signals(true);
    if let Some(ms) = args.idle_ms {
        options = options.idle_timeout(Duration::from_millis(ms));
    }
    let result = app.consume(options).await;
    if let Some((stop, task)) = reinjector {
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    }
    let summary = result.map_err(|e| format!("consume: {e}"))?;
    eprintln!(
        "bq-chaos worker {}: consume returned: processed {}, released at shutdown {}, signalled {}",
        args.incarnation, summary.processed, summary.released_at_shutdown, summary.signalled
    );
    Ok(())
}

type Reinjector = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

fn spawn_reinjector(url: &str, queue: &str, group: &str) -> Result<Reinjector, String> {
    use babelqueue::kafka::{KafkaOptions, RdKafkaClient, RetryReinjector};
    let config = KafkaOptions::from_url(url).map_err(|e| format!("kafka config: {e}"))?;
    let mut reinjector = RetryReinjector::with_client(
        &RdKafkaClient::new(config.clone()),
        &config,
        &[queue.to_owned()],
        group,
    )
    .map_err(|e| format!("re-injector: {e}"))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        reinjector
            .run(async {
                let _ = stopped.await;
            })
            .await;
    });
    Ok((stop, task))
}
