//! The workload of the failover tests: numbered messages published through the runtime (each
//! retried until confirmed), a worker that logs every call, and the tally: lost, duplicated,
//! corrupted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError};
use babelqueue_transport_kafka::KafkaTransport;
use serde_json::{Value, json};

pub const URN: &str = "urn:babel:ha:orders";

/// How long a test waits for a confirmation, a drain, a failover.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// The body of message `seq`: the number and a check string derived from it, so that a body
/// that changed on the way is seen.
pub fn payload(seq: u64) -> Value {
    json!({ "seq": seq, "check": format!("bq-ha-{seq:08}-{}", seq.wrapping_mul(2_654_435_761) % 1_000_003) })
}

/// The message number of a handled body, `None` when the body is not one [`payload`] makes.
pub fn seq_of(data: &Value) -> Option<u64> {
    let seq = data["seq"].as_u64()?;
    (*data == payload(seq)).then_some(seq)
}

/// One handler call.
#[derive(Debug, Clone, Copy)]
pub struct Handled {
    /// `None`: a corrupted body.
    pub seq: Option<u64>,
    pub at: Instant,
}

pub type Log = Arc<Mutex<Vec<Handled>>>;

/// What a publisher did.
#[derive(Debug, Default)]
pub struct Published {
    /// Each confirmed message and when its confirmation came.
    pub confirmed: BTreeMap<u64, Instant>,
    /// Publish calls that failed (and were tried again).
    pub failures: usize,
    /// The first few failures' texts.
    pub errors: Vec<String>,
    /// The longest publish call (failed tries included in the wait).
    pub longest: Duration,
}

impl Published {
    fn merge(&mut self, other: Published) {
        self.confirmed.extend(other.confirmed);
        self.failures += other.failures;
        self.errors.extend(other.errors);
        self.errors.truncate(5);
        self.longest = self.longest.max(other.longest);
    }
}

/// A runtime app that publishes to `topic` through `url`.
pub async fn publisher(url: &str, topic: &str) -> App {
    App::builder(KafkaTransport::connect(url).await.expect("a transport"))
        .queue(topic)
        .build()
        .expect("a publishing app")
}

/// Publishes `seq`, trying again after a failure until it is confirmed.
pub async fn publish_confirmed(app: &App, seq: u64, published: &mut Published) {
    let started = Instant::now();
    loop {
        match app.publish(URN, &payload(seq)).await {
            Ok(_) => {
                published.confirmed.insert(seq, Instant::now());
                published.longest = published.longest.max(started.elapsed());
                return;
            }
            Err(e) => {
                published.failures += 1;
                if published.errors.len() < 5 {
                    published.errors.push(e.to_string());
                }
                assert!(
                    started.elapsed() < PATIENCE,
                    "message {seq} not confirmed within {PATIENCE:?}: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Publishes every number of `seqs` with `tasks` publishers side by side, each pausing `pause`
/// after each confirmed message.
pub async fn publish_all(
    url: &str,
    topic: &str,
    seqs: std::ops::Range<u64>,
    tasks: u64,
    pause: Duration,
) -> Published {
    let app = publisher(url, topic).await;
    let mut running = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let app = app.clone();
        let seqs = seqs.clone();
        running.spawn(async move {
            let mut published = Published::default();
            for seq in seqs.filter(|s| s % tasks == task) {
                publish_confirmed(&app, seq, &mut published).await;
                tokio::time::sleep(pause).await;
            }
            published
        });
    }
    let mut all = Published::default();
    while let Some(done) = running.join_next().await {
        all.merge(done.expect("a publisher task"));
    }
    all
}

/// A worker in this process: the runtime on its own transport, logging every call.
pub struct Worker {
    app: App,
    transport: KafkaTransport,
    running: tokio::task::JoinHandle<()>,
}

impl Worker {
    /// Starts consuming `topic` through `url` at `concurrency`, each call taking `work`.
    pub async fn start(
        url: &str,
        topic: &str,
        log: Log,
        concurrency: usize,
        work: Duration,
    ) -> Worker {
        let transport = KafkaTransport::connect(url).await.expect("a transport");
        let app = App::builder(transport.clone())
            .queue(topic)
            .concurrency(concurrency)
            .handle(URN, move |ctx: Context| {
                let log = log.clone();
                async move {
                    tokio::time::sleep(work).await;
                    let seq = ctx.data_as::<Value>().ok().and_then(|d| seq_of(&d));
                    log.lock().unwrap().push(Handled {
                        seq,
                        at: Instant::now(),
                    });
                    Ok::<(), HandlerError>(())
                }
            })
            .build()
            .expect("a worker app");
        let running = tokio::spawn({
            let app = app.clone();
            async move {
                app.consume(Consume::new().handle_signals(false))
                    .await
                    .expect("the worker runs until stopped");
            }
        });
        Worker {
            app,
            transport,
            running,
        }
    }

    /// Stops consuming, lets the calls in flight finish, and commits what is owed.
    pub async fn stop(self) {
        self.app.stop_handle().stop();
        self.running.await.expect("the worker task");
        self.transport
            .shutdown()
            .await
            .expect("the transport shuts down");
    }
}

/// Waits until `done` holds, checking every 50 ms; false when `limit` passed first.
pub async fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// Lost, duplicated and corrupted messages of a run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub confirmed: usize,
    pub handled: usize,
    pub lost: usize,
    pub duplicates: usize,
    pub corrupt: usize,
}

/// The tally of the calls `log` against the confirmed messages.
pub fn tally(confirmed: &BTreeSet<u64>, log: &[Handled]) -> Tally {
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    let mut corrupt = 0;
    for call in log {
        match call.seq {
            Some(seq) => *seen.entry(seq).or_default() += 1,
            None => corrupt += 1,
        }
    }
    Tally {
        confirmed: confirmed.len(),
        handled: log.len(),
        lost: confirmed.iter().filter(|s| !seen.contains_key(s)).count(),
        duplicates: seen.values().map(|n| n - 1).sum(),
        corrupt,
    }
}

/// The partitions each message number was written to, from the records of the topic.
pub fn partitions_of(records: &[(i32, i64, Vec<u8>)]) -> BTreeMap<u64, BTreeSet<i32>> {
    let mut of: BTreeMap<u64, BTreeSet<i32>> = BTreeMap::new();
    for (partition, _, value) in records {
        let seq = serde_json::from_slice::<Value>(value)
            .ok()
            .and_then(|envelope| seq_of(&envelope["data"]));
        if let Some(seq) = seq {
            of.entry(seq).or_default().insert(*partition);
        }
    }
    of
}

/// The message numbers present in the records of a topic.
pub fn stored(records: &[(i32, i64, Vec<u8>)]) -> BTreeSet<u64> {
    partitions_of(records).into_keys().collect()
}

/// Milliseconds, for the printed rows.
pub fn ms(d: Duration) -> u128 {
    d.as_millis()
}
