//! The four scenarios. Each one is bounded: a fixed number of messages and kills, a time limit
//! for every wait, and a hard wall-clock limit for the whole row.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use babelqueue::Transport;

use crate::bodies::{self, URN_FAIL, URN_OK};
use crate::brokers::{self, Broker, Env, OwnRedis};
use crate::fleet::{Fleet, Stopped, WorkerSpec};
use crate::records::{self, Expect};
use crate::report::Row;
use crate::tally::{self, Tally};

/// A scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Scenario {
    Sigkill,
    DlqFailure,
    Malformed,
    BrokerRestart,
}

impl Scenario {
    /// In the order a broker's lane runs them (the restart last: it is the most disruptive).
    pub(crate) const ALL: [Scenario; 4] = [
        Scenario::Sigkill,
        Scenario::DlqFailure,
        Scenario::Malformed,
        Scenario::BrokerRestart,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Scenario::Sigkill => "sigkill",
            Scenario::DlqFailure => "dlq-failure",
            Scenario::Malformed => "malformed",
            Scenario::BrokerRestart => "broker-restart",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Scenario::Sigkill => "kill",
            Scenario::DlqFailure => "dlq",
            Scenario::Malformed => "mal",
            Scenario::BrokerRestart => "rst",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The counts and limits of a mode.
#[derive(Debug, Clone)]
pub(crate) struct Sizes {
    pub(crate) short: bool,
    sigkill_messages: u64,
    kills: u32,
    drain_limit: Duration,
    restart_messages: u64,
    restart_publish: Duration,
    dlq_failing: u64,
    dlq_good: u64,
    dlq_phase1: Duration,
    dlq_phase2_limit: Duration,
    malformed_limit: Duration,
    row_limit: [Duration; 4],
}

impl Sizes {
    pub(crate) fn short() -> Sizes {
        Sizes {
            short: true,
            sigkill_messages: 200,
            kills: 3,
            drain_limit: Duration::from_secs(60),
            restart_messages: 200,
            restart_publish: Duration::from_secs(9),
            dlq_failing: 10,
            dlq_good: 10,
            dlq_phase1: Duration::from_secs(5),
            dlq_phase2_limit: Duration::from_secs(45),
            malformed_limit: Duration::from_secs(90),
            row_limit: [150, 180, 240, 420].map(Duration::from_secs),
        }
    }

    pub(crate) fn full() -> Sizes {
        Sizes {
            short: false,
            sigkill_messages: 2000,
            kills: 20,
            drain_limit: Duration::from_secs(180),
            restart_messages: 2000,
            restart_publish: Duration::from_secs(30),
            dlq_failing: 30,
            dlq_good: 30,
            dlq_phase1: Duration::from_secs(10),
            dlq_phase2_limit: Duration::from_secs(90),
            malformed_limit: Duration::from_secs(180),
            row_limit: [600, 400, 400, 900].map(Duration::from_secs),
        }
    }

    /// The hard wall-clock limit of a row.
    pub(crate) fn row_limit(&self, scenario: Scenario) -> Duration {
        let i = Scenario::ALL
            .iter()
            .position(|s| *s == scenario)
            .unwrap_or(0);
        self.row_limit[i]
    }
}

/// What every row shares.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub(crate) env: Env,
    pub(crate) exe: PathBuf,
    pub(crate) run: String,
    pub(crate) dir: PathBuf,
    pub(crate) sizes: Sizes,
}

/// Checks that a broker takes a publish at all (within 30 s), before its rows run: a broker
/// that is down or hung fails its rows at once instead of running each into its time limit.
pub(crate) async fn preflight(ctx: &Ctx, broker: Broker) -> Result<(), String> {
    let queue = format!("chaos-preflight-{}-{}", broker.name(), ctx.run);
    let url = worker_url(&ctx.env, broker, Scenario::Sigkill, &queue, None)?;
    let check = async {
        prepare(&ctx.env, broker, &queue, false).await?;
        let transport = brokers::connect(&ctx.env, broker, &url).await?;
        transport
            .publish(&queue, b"{\"bq_chaos_preflight\":true}")
            .await
            .map_err(|e| e.to_string())?;
        let _ = transport.close().await;
        if broker.is_redis() {
            brokers::redis_forget(&ctx.env, &url, &queue).await?;
        }
        Ok::<(), String>(())
    };
    let result = match tokio::time::timeout(Duration::from_secs(30), check).await {
        Ok(result) => result,
        Err(_) => Err("no answer within 30 s".into()),
    };
    brokers::cleanup(&ctx.env, broker, &queue).await;
    result
}

/// Runs one row, bounded by its hard limit.
pub(crate) async fn run_row(ctx: &Ctx, broker: Broker, scenario: Scenario) -> Row {
    let start = Instant::now();
    let mut row = Row::new(broker.name(), scenario.name());
    let dir = ctx
        .dir
        .join(format!("{}-{}", broker.name(), scenario.name()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        row.fail(format!("{}: {e}", dir.display()));
        return row;
    }
    let queue = format!("chaos-{}-{}-{}", scenario.tag(), broker.name(), ctx.run);
    let limit = ctx.sizes.row_limit(scenario);
    let work = async {
        match scenario {
            Scenario::Sigkill => sigkill(ctx, broker, &queue, &dir, &mut row).await,
            Scenario::BrokerRestart => broker_restart(ctx, broker, &queue, &dir, &mut row).await,
            Scenario::DlqFailure => dlq_failure(ctx, broker, &queue, &dir, &mut row).await,
            Scenario::Malformed => malformed(ctx, broker, &queue, &dir, &mut row).await,
        }
    };
    match tokio::time::timeout(limit, work).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => row.fail(format!("the scenario could not run: {e}")),
        Err(_) => row.fail(format!(
            "the row did not finish within its hard limit of {}s (its workers were SIGKILLed)",
            limit.as_secs()
        )),
    }
    if scenario != Scenario::BrokerRestart || !broker.is_redis() {
        brokers::cleanup(&ctx.env, broker, &queue).await;
    }
    if row.not_applicable.is_none() {
        row.note(format!("queue {queue}; logs in {}", dir.display()));
    }
    row.elapsed = start.elapsed();
    row
}

/// The URL the workers (and the harness' own clients) use in a row.
fn worker_url(
    env: &Env,
    broker: Broker,
    scenario: Scenario,
    queue: &str,
    base: Option<String>,
) -> Result<String, String> {
    let base = match base {
        Some(b) => b,
        None => env.base_url(broker)?,
    };
    let sep = if base.contains('?') { '&' } else { '?' };
    Ok(match broker {
        // Killed reservations come back after 2 s.
        Broker::Redis => format!("{base}{sep}retry_after=2"),
        Broker::RedisLaravel => format!("{base}{sep}laravel=1&retry_after=2"),
        // Killed receipts come back after 2 s. In the DLQ scenario a failing message whose DLQ
        // write failed would come back every 2 s and crowd out the good messages a single
        // handler slot must also reach: 10 s there.
        Broker::Sqs if scenario == Scenario::DlqFailure => {
            format!("{base}{sep}visibility_timeout=10")
        }
        Broker::Sqs => format!("{base}{sep}visibility_timeout=2"),
        // A group of its own; a killed member is noticed after 2 s. The malformed set's retries
        // need tiers (re-injected by the worker).
        Broker::Kafka => {
            let mut url = format!(
                "{base}{sep}group_id=chaos-{queue}&session.timeout.ms=2000&heartbeat.interval.ms=500"
            );
            if scenario == Scenario::Malformed {
                url.push_str("&retry_tiers_ms=200,400");
            }
            url
        }
        // An unsettled delivery of a killed worker comes back after 2 s.
        // An unsettled delivery of a killed worker comes back after 2 s.
        Broker::Nats => format!("{base}{sep}ack_wait=2"),
        Broker::Rabbitmq | Broker::Artemis | Broker::Pulsar => base,
    })
}

/// The URL a dead-letter reader uses: for Kafka, a consumer group of its own.
fn dlq_reader_url(url: &str) -> String {
    url.replace("group_id=chaos-", "group_id=chaos-dlqread-")
}

/// Creates what the broker needs before a publish (SQS queues; the others create on use).
async fn prepare(env: &Env, broker: Broker, queue: &str, with_dlq: bool) -> Result<(), String> {
    if broker == Broker::Sqs {
        brokers::sqs_create(env, queue).await?;
        if with_dlq {
            brokers::sqs_create(env, &broker.dlq(queue)).await?;
        }
    }
    Ok(())
}

/// One chaos message.
#[derive(Debug, Clone)]
struct Msg {
    id: String,
    data: String,
    body: Vec<u8>,
}

fn messages(run: &str, queue: &str, range: std::ops::Range<u64>, urn: &str) -> Vec<Msg> {
    range
        .map(|n| {
            let id = bodies::message_id(run, n);
            let data = bodies::data_text(n);
            let body = bodies::envelope_body(urn, queue, &id, &data);
            Msg { id, data, body }
        })
        .collect()
}

/// What a publisher did.
#[derive(Debug, Default)]
struct Published {
    /// Every message it tried (id → data), for the corruption check.
    known: BTreeMap<String, String>,
    /// The ids the broker confirmed, with when.
    confirmed: BTreeMap<String, Instant>,
    /// Messages never confirmed, with the last error.
    unconfirmed: Vec<(String, String)>,
    /// Publish calls that failed and were retried.
    retried: u64,
}

impl Published {
    fn merge(&mut self, other: Published) {
        self.known.extend(other.known);
        self.confirmed.extend(other.confirmed);
        self.unconfirmed.extend(other.unconfirmed);
        self.retried += other.retried;
    }
}

/// Publishes `msgs` one every `pace` (each publish waits for the broker's confirmation; up to
/// `in_flight` of them at once, so a slow confirmation does not hold the schedule back; 1 keeps
/// the order),
/// retrying a failed publish (a broker restarting) for up to `retry_for`; nothing is tried after
/// `retry_for` past the last scheduled publish.
async fn publish(
    transport: Arc<dyn Transport>,
    queue: String,
    msgs: Vec<Msg>,
    pace: Duration,
    retry_for: Duration,
    in_flight: usize,
) -> Published {
    let mut out = Published::default();
    let start = Instant::now();
    let deadline = start + pace.mul_f64(msgs.len() as f64) + retry_for;
    let slots = Arc::new(tokio::sync::Semaphore::new(in_flight.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, msg) in msgs.into_iter().enumerate() {
        let due = start + pace.mul_f64(i as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        out.known.insert(msg.id.clone(), msg.data.clone());
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let (transport, queue) = (transport.clone(), queue.clone());
        tasks.spawn(async move {
            let _slot = slot;
            let mut retried = 0u64;
            let first = Instant::now();
            loop {
                if Instant::now() >= deadline {
                    let why = "not sent: the publisher's deadline had passed".to_owned();
                    return (msg.id, Err(why), retried);
                }
                let error = match tokio::time::timeout(
                    Duration::from_secs(30),
                    transport.publish(&queue, &msg.body),
                )
                .await
                {
                    Ok(Ok(())) => return (msg.id, Ok(Instant::now()), retried),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "publish did not return within 30 s".to_owned(),
                };
                if first.elapsed() >= retry_for || Instant::now() >= deadline {
                    return (msg.id, Err(error), retried);
                }
                retried += 1;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        let Ok((id, result, retried)) = done else {
            continue;
        };
        out.retried += retried;
        match result {
            Ok(at) => {
                out.confirmed.insert(id, at);
            }
            Err(e) => out.unconfirmed.push((id, e)),
        }
    }
    out
}

/// The most messages of a `sigkill` row on SQS (moto).
const SQS_SIGKILL_MESSAGES: u64 = 500;

/// Publishes a publisher keeps waiting for at once, where the order does not matter (moto, the
/// SQS emulator, serves one request at a time: more would starve the worker).
const IN_FLIGHT: usize = 4;

/// How a drain went.
#[derive(Debug, Default)]
struct Drained {
    complete: bool,
    /// When the first handler call of the drain came, from its start.
    first_call: Option<Duration>,
    /// When the last handler call came, before the drain ended.
    quiet_for: Duration,
    elapsed: Duration,
    stopped: Option<Stopped>,
}

/// Lets the fleet's worker handle until every id of `must` was handled (then `settle` more, for
/// late duplicates) or `limit`; then SIGTERM. A worker that exits on its own is restarted (and
/// counted as a crash when it exited abnormally).
async fn drain(
    fleet: &mut Fleet,
    tally: &mut Tally,
    known: &BTreeMap<String, String>,
    must: &BTreeSet<String>,
    limit: Duration,
    settle: Duration,
) -> Result<Drained, String> {
    let start = Instant::now();
    let mut out = Drained::default();
    let mut last_call = start;
    let mut complete_at: Option<Instant> = None;
    fleet.keep_running()?;
    // The first call made after the drain started shows how long the worker took to get going
    // (a Kafka group join, a reconnect).
    let started_ms = now_ms();
    loop {
        let before = tally.all.len();
        for line in fleet.logs.poll() {
            tally.add(known, &line);
        }
        if tally.all.len() > before {
            last_call = Instant::now();
            if out.first_call.is_none() && tally.all[before..].iter().any(|c| c.at_ms >= started_ms)
            {
                out.first_call = Some(start.elapsed());
            }
        }
        if must.iter().all(|id| tally.handled(id)) {
            let at = *complete_at.get_or_insert_with(Instant::now);
            if at.elapsed() >= settle {
                out.complete = true;
                break;
            }
        }
        if start.elapsed() >= limit {
            break;
        }
        fleet.keep_running()?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    out.quiet_for = last_call.elapsed();
    out.stopped = Some(fleet.terminate(Duration::from_secs(15)).await);
    for line in fleet.logs.poll() {
        tally.add(known, &line);
    }
    out.elapsed = start.elapsed();
    Ok(out)
}

/// What a fresh consumer still finds after the drain.
#[derive(Debug, Default)]
struct Probe {
    /// The broker's own count before the probe read anything (`None`: it cannot tell).
    counted: Option<u64>,
    /// The bodies a fresh consumer read.
    bodies: Vec<Vec<u8>>,
    /// Neither the broker nor a consumer could say what is left.
    error: Option<String>,
    /// A count that failed while the consumer worked.
    note: Option<String>,
}

impl Probe {
    fn stranded(&self) -> u64 {
        self.counted.unwrap_or(0).max(self.bodies.len() as u64)
    }

    /// What the broker counts beyond what the consumer could read: messages that are on the
    /// broker but could not be identified (so a "missing" message may be one of them).
    fn unidentified(&self) -> u64 {
        self.counted
            .unwrap_or(0)
            .saturating_sub(self.bodies.len() as u64)
    }

    /// Lowers a loss count by the unidentified messages on the broker, with a note; when nothing
    /// could be probed, a "missing" message is not known to be lost: the row fails with the
    /// count instead.
    fn excuse(&self, row: &mut Row) {
        if self.error.is_some() && row.lost > 0 {
            row.fail(format!(
                "{} messages were never handled (or dead-lettered), and whether they are still \
                 on the broker is unknown (the probe failed): not counted as lost",
                row.lost
            ));
            row.lost = 0;
            return;
        }
        let n = self.unidentified().min(row.lost);
        if n > 0 {
            row.lost -= n;
            row.note(format!(
                "{n} missing messages are not counted as lost: the broker still counts {} \
                 messages a fresh consumer could not read (they are stranded)",
                self.unidentified()
            ));
        }
    }

    fn ids(&self) -> BTreeSet<String> {
        self.bodies
            .iter()
            .filter_map(|b| records::record_id(b))
            .collect()
    }

    fn describe(&self) -> String {
        let counted = self
            .counted
            .map_or_else(|| "n/a".to_owned(), |n| n.to_string());
        let mut text = format!(
            "left on the broker after the drain: broker count {counted}, a fresh consumer read {}",
            self.bodies.len()
        );
        if let Some(e) = &self.note {
            text.push_str(&format!(" (the count failed: {e})"));
        }
        text
    }

    /// Into the row: the stranded count, and a failure when nothing could be probed.
    fn report(&self, row: &mut Row) {
        row.stranded = self.stranded();
        if let Some(e) = &self.error {
            row.fail(format!("what is left on the broker is unknown: {e}"));
        } else if row.stranded > 0 || self.note.is_some() {
            row.note(self.describe());
        }
    }
}

/// The broker count of `queue`, then (unless it says 0) a fresh consumer reading what is left.
async fn probe(env: &Env, broker: Broker, url: &str, queue: &str) -> Probe {
    let mut out = Probe::default();
    match brokers::broker_count(env, broker, url, queue).await {
        Some(Ok(n)) => out.counted = Some(n),
        Some(Err(e)) => out.error = Some(format!("broker count: {e}")),
        None => {}
    }
    if out.counted == Some(0) {
        return out;
    }
    let idle = if broker == Broker::Kafka {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(4)
    };
    match brokers::read_all(env, broker, url, queue, idle, Duration::from_secs(40)).await {
        Ok(bodies) => out.bodies = bodies,
        Err(e) => {
            let prior = out
                .error
                .take()
                .map(|p| format!("{p}; "))
                .unwrap_or_default();
            out.error = Some(format!("{prior}probe consumer: {e}"));
        }
    }
    out
}

/// Adds what a drain says to the row; `Err` texts become failures.
fn report_drain(row: &mut Row, what: &str, drained: &Drained, missing: usize) {
    match &drained.stopped {
        Some(Stopped::Wedged(e)) => row.fail(format!("worker wedged ({what}): {e}")),
        Some(Stopped::Exited(_)) | Some(Stopped::NotRunning) | None => {}
    }
    let first = drained
        .first_call
        .map_or_else(|| "none".to_owned(), |d| format!("{:.1}s", d.as_secs_f64()));
    if drained.complete {
        row.note(format!(
            "{what}: every message handled in {:.1}s (first handler call of the drain after {first})",
            drained.elapsed.as_secs_f64()
        ));
    } else {
        row.note(format!(
            "{what}: {missing} messages still unhandled when the drain ended after {:.1}s \
             (first handler call after {first}, none in the last {:.1}s)",
            drained.elapsed.as_secs_f64(),
            drained.quiet_for.as_secs_f64()
        ));
    }
}

/// Crash evidence into the row.
fn report_fleet(row: &mut Row, fleet: &Fleet) {
    row.crashes += u32::try_from(fleet.crashes.len()).unwrap_or(u32::MAX);
    for c in &fleet.crashes {
        row.note(format!("crash: {c}"));
    }
    for e in &fleet.early_exits {
        row.note(e.clone());
    }
    for t in fleet.logs.torn() {
        row.note(format!("torn log line (a kill landed mid-write): {t}"));
    }
}

fn spec(url: &str, queue: &str, concurrency: usize) -> WorkerSpec {
    WorkerSpec {
        url: url.to_owned(),
        queue: queue.to_owned(),
        concurrency,
        max_attempts: 3,
        dead_letter: true,
        idle_ms: None,
        work_ms: 0,
        kafka_reinject_group: None,
    }
}

fn short_list(ids: &[String]) -> String {
    let shown: Vec<&str> = ids.iter().take(8).map(String::as_str).collect();
    if ids.len() > shown.len() {
        format!("{} … ({} in all)", shown.join(", "), ids.len())
    } else {
        shown.join(", ")
    }
}

/// Fills lost / duplicated / stranded / corrupted of a "handle everything" row.
fn settle_counts(
    row: &mut Row,
    published: &Published,
    tally: &Tally,
    probe: &Probe,
    exempt: &BTreeSet<String>,
) {
    let confirmed: BTreeMap<String, String> = published
        .confirmed
        .keys()
        .filter(|id| !exempt.contains(*id))
        .map(|id| (id.clone(), published.known[id].clone()))
        .collect();
    let on_broker = probe.ids();
    let lost = tally::lost(&confirmed, tally, &on_broker);
    row.lost = lost.len() as u64;
    row.duplicated = tally.duplicated;
    row.corrupted = tally.corrupted;
    if !lost.is_empty() {
        row.note(format!("lost ids: {}", short_list(&lost)));
    }
    probe.report(row);
    probe.excuse(row);
    for example in &tally.corruption_examples {
        row.note(format!("corrupted: {example}"));
    }
    if tally.unreadable > 0 {
        row.note(format!("{} unreadable log lines", tally.unreadable));
    }
    if !published.unconfirmed.is_empty() {
        let (id, e) = &published.unconfirmed[0];
        row.note(format!(
            "{} publishes never confirmed (not counted as lost; the first: {id}: {e})",
            published.unconfirmed.len()
        ));
    }
    if published.retried > 0 {
        row.note(format!(
            "{} publish calls failed and were retried",
            published.retried
        ));
    }
}

/// `sigkill`: a concurrency-8 worker SIGKILLed at random moments while messages are published,
/// restarted each time; then a final worker drains; then what is left is counted.
async fn sigkill(
    ctx: &Ctx,
    broker: Broker,
    queue: &str,
    dir: &Path,
    row: &mut Row,
) -> Result<(), String> {
    let env = &ctx.env;
    let url = worker_url(env, broker, Scenario::Sigkill, queue, None)?;
    prepare(env, broker, queue, true).await?;
    let mut n = ctx.sizes.sigkill_messages;
    if broker == Broker::Sqs && n > SQS_SIGKILL_MESSAGES {
        // moto serves one request at a time and slows down with a deep queue: with 2 000
        // messages and 20 kills its receives fell to 8 messages every few seconds here.
        n = SQS_SIGKILL_MESSAGES;
        row.note(format!(
            "{n} messages on SQS (moto serves one request at a time and slows down with a deep \
             queue)"
        ));
    }
    let kills = ctx.sizes.kills;
    row.messages = n;
    let msgs = messages(&ctx.run, queue, 0..n, URN_OK);
    let transport = brokers::connect(env, broker, &url).await?;
    let mut worker = spec(&url, queue, 8);
    worker.work_ms = 20;
    let mut fleet = Fleet::new(&ctx.exe, &env.vars, dir, "worker", worker);
    fleet.start()?;
    // Publish while the kills happen: over about 80 % of the expected kill phase.
    let expected_phase = Duration::from_millis(1100) * kills;
    let pace = expected_phase.mul_f64(0.8) / u32::try_from(n).unwrap_or(u32::MAX).max(1);
    let publisher = tokio::spawn(publish(
        transport,
        queue.to_owned(),
        msgs,
        pace,
        Duration::from_secs(240),
        IN_FLIGHT,
    ));
    for _ in 0..kills {
        let wait = Duration::from_millis(fastrand::u64(200..=2000));
        let until = Instant::now() + wait;
        while Instant::now() < until {
            fleet.keep_running()?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        fleet.kill();
        row.kills += 1;
        fleet.start()?;
    }
    let published = publisher.await.map_err(|e| e.to_string())?;
    let must: BTreeSet<String> = published.confirmed.keys().cloned().collect();
    row.messages = must.len() as u64;
    if !published.unconfirmed.is_empty() {
        // Nothing disturbs the broker in this scenario: every publish must succeed.
        row.fail(format!(
            "{} of {n} messages could not be published (the first: {:?})",
            published.unconfirmed.len(),
            published.unconfirmed.first()
        ));
    }
    let mut tally = Tally::default();
    let limit = if broker == Broker::Kafka {
        ctx.sizes.drain_limit + Duration::from_secs(30)
    } else {
        ctx.sizes.drain_limit
    };
    let drained = drain(
        &mut fleet,
        &mut tally,
        &published.known,
        &must,
        limit,
        broker.settle(),
    )
    .await?;
    let missing = tally.missing(must.iter()).len();
    report_drain(row, "final drain", &drained, missing);
    report_fleet(row, &fleet);
    row.note(format!("{} worker incarnations", fleet.started()));
    let probe = probe(env, broker, &url, queue).await;
    settle_counts(row, &published, &tally, &probe, &BTreeSet::new());
    if row.stranded > 0 && drained.quiet_for > limit / 2 {
        row.fail(format!(
            "worker wedged: {} messages were still on the broker and the drain worker made no \
             handler call in its last {:.0}s",
            row.stranded,
            drained.quiet_for.as_secs_f64()
        ));
    }
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}

/// The Redis port of our own persistent instance, per layout (the lanes run at once).
fn own_redis(ctx: &Ctx, broker: Broker) -> OwnRedis {
    let port = if broker == Broker::RedisLaravel {
        6392
    } else {
        6391
    };
    OwnRedis {
        port,
        dir: ctx
            .env
            .cache
            .join("chaos")
            .join(format!("redis-{port}-{}", ctx.run)),
    }
}

/// `broker-restart`: a graceful restart and a hard kill of the broker while a worker consumes and
/// messages are published; the worker must recover by itself.
async fn broker_restart(
    ctx: &Ctx,
    broker: Broker,
    queue: &str,
    dir: &Path,
    row: &mut Row,
) -> Result<(), String> {
    let env = &ctx.env;
    match broker {
        Broker::Sqs => {
            row.not_applicable = Some(
                "moto, the SQS of scripts/brokers.sh, keeps its queues in memory: a restart \
                 empties them, so there is nothing durable to test"
                    .into(),
            );
            return Ok(());
        }
        Broker::Pulsar if ctx.sizes.short => {
            row.not_applicable = Some(
                "left out of --short: a Pulsar standalone restart takes about a minute, and the \
                 test instance (scripts/brokers.d/60-pulsar.sh) starts with --wipe-data; the full \
                 mode runs it as a recovery check"
                    .into(),
            );
            return Ok(());
        }
        _ => {}
    }
    let own = broker.is_redis().then(|| own_redis(ctx, broker));
    if let Some(own) = &own {
        own.start(env).await?;
        row.note(format!(
            "redis-server of its own on 127.0.0.1:{} (appendonly yes, appendfsync always, in {})",
            own.port,
            own.dir.display()
        ));
    }
    let result = restart_inner(ctx, broker, queue, dir, row, own.as_ref()).await;
    if let Some(own) = &own {
        own.stop(env).await;
    } else if let Err(e) = env
        .brokers_sh(&["up", broker.service()], Duration::from_secs(300))
        .await
    {
        row.fail(format!("{} is not up again: {e}", broker.service()));
    }
    result
}

async fn restart_inner(
    ctx: &Ctx,
    broker: Broker,
    queue: &str,
    dir: &Path,
    row: &mut Row,
    own: Option<&OwnRedis>,
) -> Result<(), String> {
    let env = &ctx.env;
    let url = worker_url(
        env,
        broker,
        Scenario::BrokerRestart,
        queue,
        own.map(OwnRedis::url),
    )?;
    prepare(env, broker, queue, true).await?;
    let n = ctx.sizes.restart_messages;
    row.messages = n;
    let msgs = messages(&ctx.run, queue, 0..n, URN_OK);
    let transport = brokers::connect(env, broker, &url).await?;
    // Handlers take a while (0..=100 ms before and after the log line), so a backlog is still
    // being worked through when the broker goes down.
    let mut worker = spec(&url, queue, 8);
    worker.work_ms = 200;
    let mut fleet = Fleet::new(&ctx.exe, &env.vars, dir, "worker", worker);
    fleet.start()?;
    // Three batches: one before each restart (still being consumed when the broker goes down)
    // and one after the last, which the worker must handle once it has recovered on its own.
    let batch = usize::try_from(n.div_ceil(3)).unwrap_or(usize::MAX).max(1);
    let spread = ctx.sizes.restart_publish / 3;
    let start = Instant::now();
    let mut published = Published::default();
    // Messages confirmed before a wiping restart (Pulsar's test instance) may be wiped with it.
    let mut wiped_before: Option<Instant> = None;
    let mut back: Vec<(&str, u64)> = Vec::new();
    let mut batches = msgs.chunks(batch).map(<[Msg]>::to_vec);
    for restart in [Some(false), Some(true), None] {
        if let Some(chunk) = batches.next() {
            let pace = spread / u32::try_from(chunk.len()).unwrap_or(u32::MAX).max(1);
            let publisher = tokio::spawn(publish(
                transport.clone(),
                queue.to_owned(),
                chunk,
                pace,
                Duration::from_secs(120),
                IN_FLIGHT,
            ));
            while !publisher.is_finished() {
                fleet.keep_running()?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            published.merge(publisher.await.map_err(|e| e.to_string())?);
        }
        let Some(hard) = restart else {
            break;
        };
        let began = start.elapsed();
        let env2 = env.clone();
        let own2 = own.cloned();
        let op = tokio::spawn(async move {
            match own2 {
                Some(own) => own.restart(&env2, hard).await,
                None => brokers::restart_service(&env2, broker, hard).await,
            }
        });
        while !op.is_finished() {
            fleet.keep_running()?;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let kind = if hard {
            "hard kill"
        } else {
            "graceful restart"
        };
        back.push((kind, now_ms()));
        match op.await.map_err(|e| e.to_string())? {
            Ok(how) => {
                row.kills += 1;
                row.note(format!("{kind} at {:.1}s: {how}", began.as_secs_f64()));
            }
            Err(e) => row.fail(format!("{kind} failed: {e}")),
        }
        if broker == Broker::Pulsar {
            wiped_before = Some(Instant::now());
        }
    }
    let must: BTreeSet<String> = published.confirmed.keys().cloned().collect();
    row.messages = must.len() as u64;
    let mut tally = Tally::default();
    let exempt: BTreeSet<String> = match wiped_before {
        Some(at) => published
            .confirmed
            .iter()
            .filter(|(_, confirmed)| **confirmed <= at)
            .map(|(id, _)| id.clone())
            .collect(),
        None => BTreeSet::new(),
    };
    let must: BTreeSet<String> = must.difference(&exempt).cloned().collect();
    // A Kafka consumer has been seen to take 80 s to resume after a hard kill of the broker: a
    // longer drain tells a slow recovery (a note) from none at all (a wedged worker).
    let limit = ctx.sizes.drain_limit
        + if broker == Broker::Kafka {
            Duration::from_secs(120)
        } else {
            Duration::from_secs(30)
        };
    let drained = drain(
        &mut fleet,
        &mut tally,
        &published.known,
        &must,
        limit,
        broker.settle(),
    )
    .await?;
    let missing = tally.missing(must.iter()).len();
    report_drain(row, "drain after the restarts", &drained, missing);
    if let Some(first) = drained.first_call.filter(|d| *d > Duration::from_secs(30)) {
        row.note(format!(
            "slow recovery: the worker's first handler call of the drain came {:.0}s after it \
             started",
            first.as_secs_f64()
        ));
    }
    for (kind, at) in &back {
        let after = tally.all.iter().filter(|c| c.at_ms >= *at).count();
        row.note(format!(
            "handler calls after the broker was back from the {kind}: {after} (the last batch \
             is published after the hard kill)"
        ));
    }
    report_fleet(row, &fleet);
    let probe = probe(env, broker, &url, queue).await;
    if !exempt.is_empty() {
        let wiped: Vec<String> = exempt
            .iter()
            .filter(|id| !tally.handled(id))
            .cloned()
            .collect();
        row.note(format!(
            "the Pulsar test instance wipes its data on start (--wipe-data): {} messages \
             confirmed before the last restart were never handled and are not counted as lost; \
             every message published after it must be handled",
            wiped.len()
        ));
    }
    settle_counts(row, &published, &tally, &probe, &exempt);
    if missing > 0 && drained.quiet_for > Duration::from_secs(20) && row.stranded > 0 {
        row.fail(format!(
            "worker wedged: it made no handler call in the last {:.0}s of the drain while {} \
             messages were still on the broker",
            drained.quiet_for.as_secs_f64(),
            row.stranded
        ));
    }
    Ok(())
}

/// `dlq-failure`: the dead-letter write fails (the DLQ is broken), then works again.
async fn dlq_failure(
    ctx: &Ctx,
    broker: Broker,
    queue: &str,
    dir: &Path,
    row: &mut Row,
) -> Result<(), String> {
    let env = &ctx.env;
    let url = worker_url(env, broker, Scenario::DlqFailure, queue, None)?;
    prepare(env, broker, queue, false).await?;
    let how = brokers::break_dlq(env, broker, &url, queue).await?;
    row.note(format!("DLQ broken: {how}"));
    // A failing message, then a good one behind it, and so on.
    let (f, g) = (ctx.sizes.dlq_failing, ctx.sizes.dlq_good);
    let mut msgs = Vec::new();
    let mut failing = BTreeSet::new();
    let mut good = BTreeSet::new();
    for i in 0..f.max(g) {
        if i < f {
            let m = messages(&ctx.run, queue, 2 * i..2 * i + 1, URN_FAIL).remove(0);
            failing.insert(m.id.clone());
            msgs.push(m);
        }
        if i < g {
            let m = messages(&ctx.run, queue, 2 * i + 1..2 * i + 2, URN_OK).remove(0);
            good.insert(m.id.clone());
            msgs.push(m);
        }
    }
    row.messages = f + g;
    let transport = brokers::connect(env, broker, &url).await?;
    let published = publish(
        transport,
        queue.to_owned(),
        msgs,
        Duration::ZERO,
        Duration::from_secs(30),
        // In order: a good message behind every failing one.
        1,
    )
    .await;
    if !published.unconfirmed.is_empty() {
        return Err(format!(
            "{} publishes failed: {:?}",
            published.unconfirmed.len(),
            published.unconfirmed.first()
        ));
    }
    let known = &published.known;
    let mut worker = spec(&url, queue, 1);
    worker.max_attempts = 1;
    let mut tally = Tally::default();

    // Phase 1: the DLQ is broken.
    let mut phase1 = Fleet::new(&ctx.exe, &env.vars, dir, "phase1", worker.clone());
    phase1.start()?;
    // The runtime pauses 1 s after each failed dead-letter write (rewind_pause): the window
    // leaves room for that once per failing message.
    let window = ctx.sizes.dlq_phase1 + Duration::from_millis(1500) * u32::try_from(f).unwrap_or(0);
    let start = Instant::now();
    let mut done_at: Option<Instant> = None;
    while start.elapsed() < window {
        for line in phase1.logs.poll() {
            tally.add(known, &line);
        }
        let all_seen = good
            .iter()
            .chain(failing.iter())
            .all(|id| tally.handled(id));
        if all_seen && done_at.get_or_insert_with(Instant::now).elapsed() >= Duration::from_secs(2)
        {
            break;
        }
        phase1.keep_running()?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let phase1_secs = start.elapsed().as_secs_f64();
    if let Stopped::Wedged(e) = phase1.terminate(Duration::from_secs(15)).await {
        row.fail(format!("worker wedged (DLQ broken): {e}"));
    }
    for line in phase1.logs.poll() {
        tally.add(known, &line);
    }
    report_fleet(row, &phase1);
    let good_done = good.iter().filter(|id| tally.handled(id)).count();
    let failing_tried = failing.iter().filter(|id| tally.handled(id)).count();
    let failing_calls: u64 = failing
        .iter()
        .map(|id| tally.calls.get(id).copied().unwrap_or(0))
        .sum();
    row.note(format!(
        "phase 1 (DLQ broken, concurrency 1, {phase1_secs:.1}s): {good_done}/{g} good messages \
         handled; {failing_tried}/{f} failing messages tried, {failing_calls} handler calls"
    ));
    if broker == Broker::Kafka {
        // Kafka promises order within a partition, and the transport keeps it: a record whose
        // dead-letter write fails is retried in place, so the records behind it wait (the
        // documented head-of-line trade-off). Moving it behind the others would break the
        // order of its key. What must hold is that nothing is lost and phase 2 finishes.
        row.note(format!(
            "Kafka keeps partition order: {good_done}/{g} good messages handled while the DLQ \
             was broken (expected to wait behind the failing record)"
        ));
    } else if good_done < good.len() {
        row.fail(format!(
            "head-of-line blocking: with the DLQ broken, only {good_done} of {g} good messages \
             queued behind failing ones were handled in {phase1_secs:.1}s at concurrency 1"
        ));
    }
    match brokers::broker_count(env, broker, &url, queue).await {
        Some(Ok(n)) => {
            row.note(format!(
                "on the source queue after phase 1: {n} (the {f} failing messages must all still be there)"
            ));
            if n < f {
                row.note(format!(
                    "{} failing messages were gone from the source queue while their DLQ write \
                     could not have succeeded",
                    f - n
                ));
            }
        }
        Some(Err(e)) => row.note(format!("broker count after phase 1: {e}")),
        None => {}
    }

    // Phase 2: the DLQ works again.
    brokers::fix_dlq(env, broker, &url, queue).await?;
    let mut worker2 = worker;
    // Above the SQS visibility timeout of this scenario (10 s): a message left by phase 1 must
    // become visible before the worker gives up.
    let idle = if broker == Broker::Sqs {
        Duration::from_secs(12)
    } else {
        broker.idle()
    };
    worker2.idle_ms = Some(u64::try_from(idle.as_millis()).unwrap_or(u64::MAX));
    let mut phase2 = Fleet::new(&ctx.exe, &env.vars, dir, "phase2", worker2);
    phase2.start()?;
    let t2 = Instant::now();
    if !phase2.wait_exit(ctx.sizes.dlq_phase2_limit).await {
        row.fail(format!(
            "the worker never went idle within {}s after the DLQ was fixed",
            ctx.sizes.dlq_phase2_limit.as_secs()
        ));
        if let Stopped::Wedged(e) = phase2.terminate(Duration::from_secs(15)).await {
            row.fail(format!("worker wedged (DLQ fixed): {e}"));
        }
    }
    for line in phase2.logs.poll() {
        tally.add(known, &line);
    }
    report_fleet(row, &phase2);
    row.note(format!(
        "phase 2 (DLQ fixed): the worker ran {:.1}s",
        t2.elapsed().as_secs_f64()
    ));

    // The DLQ: every failing message exactly once, with its bytes.
    let dlq = broker.dlq(queue);
    let reader_url = dlq_reader_url(&url);
    let records = brokers::read_all(
        env,
        broker,
        &reader_url,
        &dlq,
        broker.idle() + Duration::from_secs(2),
        Duration::from_secs(60),
    )
    .await
    .map_err(|e| format!("reading {dlq}: {e}"))?;
    let filler = brokers::artemis_filler();
    let fillers = records.iter().filter(|r| **r == filler).count();
    let records: Vec<Vec<u8>> = records.into_iter().filter(|r| *r != filler).collect();
    if fillers > 0 {
        row.note(format!(
            "{fillers} filler messages of the broken DLQ skipped"
        ));
    }
    let mut per_id: BTreeMap<String, u64> = BTreeMap::new();
    for record in &records {
        let id = records::record_id(record);
        match id.as_deref().filter(|id| failing.contains(*id)) {
            Some(id) => {
                *per_id.entry(id.to_owned()).or_insert(0) += 1;
                if let Err(problem) = records::check_failed_record(record, id, &known[id]) {
                    row.corrupted += 1;
                    row.note(format!("DLQ record of {id}: {problem}"));
                }
            }
            None => {
                row.corrupted += 1;
                row.note(format!(
                    "a DLQ record matches no failing message: {:?}",
                    String::from_utf8_lossy(&record[..record.len().min(160)])
                ));
            }
        }
    }
    let probe = probe(env, broker, &url, queue).await;
    let on_broker = probe.ids();
    let mut lost = Vec::new();
    for id in &failing {
        match per_id.get(id).copied().unwrap_or(0) {
            0 if !on_broker.contains(id) => lost.push(id.clone()),
            0 | 1 => {}
            n => row.duplicated += n - 1,
        }
    }
    for id in &good {
        match tally.calls.get(id).copied().unwrap_or(0) {
            0 if !on_broker.contains(id) => lost.push(id.clone()),
            0 | 1 => {}
            n => row.duplicated += n - 1,
        }
    }
    let in_dlq = failing.iter().filter(|id| per_id.contains_key(*id)).count();
    row.note(format!(
        "DLQ {dlq}: {} records; {in_dlq}/{f} failing messages in it",
        records.len()
    ));
    let extra: u64 = per_id.values().map(|n| n.saturating_sub(1)).sum();
    if extra > 0 {
        row.fail(format!(
            "{extra} extra DLQ records: every failing message must reach the DLQ exactly once"
        ));
    }
    row.lost = lost.len() as u64;
    if !lost.is_empty() {
        row.note(format!("lost ids: {}", short_list(&lost)));
    }
    probe.report(row);
    probe.excuse(row);
    dlq_leftover(env, broker, &url, &dlq, row).await;
    row.corrupted += tally.corrupted;
    for example in &tally.corruption_examples {
        row.note(format!("corrupted: {example}"));
    }
    Ok(())
}

/// Records the dead-letter reader could not read although the broker still holds them: they are
/// not lost (the broker has them) but stuck; counted as stranded, and the row fails.
async fn dlq_leftover(env: &Env, broker: Broker, url: &str, dlq: &str, row: &mut Row) {
    // Redis is read in place and Kafka is counted per group: nothing to compare there.
    if broker.is_redis() || broker == Broker::Kafka {
        return;
    }
    match brokers::broker_count(env, broker, url, dlq).await {
        Some(Ok(0)) | None => {}
        Some(Ok(n)) => {
            row.stranded += n;
            row.lost = row.lost.saturating_sub(n);
            row.fail(format!(
                "the DLQ {dlq} still holds {n} records that a consumer could not read \
                 (counted as stranded; any loss above is reduced by as many)"
            ));
        }
        Some(Err(e)) => row.note(format!(
            "the DLQ {dlq} could not be counted after reading: {e}"
        )),
    }
}

/// Whether a publish error says the body was too large.
fn names_a_size(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    ["size", "large", "long", "limit", "bytes", "exceed"]
        .iter()
        .any(|w| lower.contains(w))
}

/// `malformed`: the malformed-body set, published raw, with a failing handler, three attempts
/// and dead-lettering on; every body must reach the DLQ exactly once with its exact bytes.
async fn malformed(
    ctx: &Ctx,
    broker: Broker,
    queue: &str,
    dir: &Path,
    row: &mut Row,
) -> Result<(), String> {
    let env = &ctx.env;
    let url = worker_url(env, broker, Scenario::Malformed, queue, None)?;
    prepare(env, broker, queue, true).await?;
    let set = bodies::malformed_set(queue, &ctx.run);
    let transport = brokers::connect(env, broker, &url).await?;
    let mut published = Vec::new();
    for (i, m) in set.iter().enumerate() {
        let t = Instant::now();
        match tokio::time::timeout(Duration::from_secs(120), transport.publish(queue, &m.body))
            .await
        {
            Ok(Ok(())) => published.push(i),
            Ok(Err(e)) => {
                let text = e.to_string();
                let text: String = text.chars().take(240).collect();
                row.note(format!(
                    "{} ({} bytes): refused at publish after {:.1}s: {text}",
                    m.name,
                    m.body.len(),
                    t.elapsed().as_secs_f64()
                ));
                if m.body.len() > 256 * 1024 && !names_a_size(&text) {
                    row.fail(format!(
                        "{} ({} bytes): refused at publish without saying the body is too \
                         large: {text}",
                        m.name,
                        m.body.len()
                    ));
                }
            }
            Err(_) => row.fail(format!(
                "{} ({} bytes): the publish did not return within 120 s",
                m.name,
                m.body.len()
            )),
        }
    }
    drop(transport);
    row.messages = published.len() as u64;
    let expects: Vec<Expect> = set.iter().map(|m| records::expectation(&m.body)).collect();
    // What the failing handler must see, byte for byte: the valid envelopes' data.
    let known: BTreeMap<String, String> = published
        .iter()
        .filter_map(|&i| match &expects[i] {
            Expect::Failed { id, data } => Some((id.clone(), data.clone())),
            Expect::Poison => None,
        })
        .collect();

    let mut worker = spec(&url, queue, 1);
    worker.idle_ms = Some(u64::try_from(broker.idle().as_millis()).unwrap_or(u64::MAX));
    let tiers: Vec<String> = (1..=2).map(|n| format!("{queue}.retry.{n}")).collect();
    let reinject_group = format!("chaos-{queue}-reinject");
    if broker == Broker::Kafka {
        // The transport's documentation: create the tier topics up front (a re-injector that
        // subscribed before its topic existed does not see it until a metadata refresh).
        brokers::kafka_create_topics(&url, &tiers).await?;
        worker.kafka_reinject_group = Some(reinject_group.clone());
    }
    let mut fleet = Fleet::new(&ctx.exe, &env.vars, dir, "worker", worker);
    fleet.start()?;
    let t = Instant::now();
    if !fleet.wait_exit(ctx.sizes.malformed_limit).await {
        row.fail(format!(
            "the worker never went idle within {}s",
            ctx.sizes.malformed_limit.as_secs()
        ));
        if let Stopped::Wedged(e) = fleet.terminate(Duration::from_secs(15)).await {
            row.fail(format!("worker wedged: {e}"));
        }
    }
    row.note(format!("the worker ran {:.1}s", t.elapsed().as_secs_f64()));
    let mut tally = Tally::default();
    for line in fleet.logs.poll() {
        tally.add(&known, &line);
    }
    report_fleet(row, &fleet);
    drop(fleet);

    let dlq = broker.dlq(queue);
    let reader_url = dlq_reader_url(&url);
    let records = brokers::read_all(
        env,
        broker,
        &reader_url,
        &dlq,
        broker.idle() + Duration::from_secs(2),
        Duration::from_secs(90),
    )
    .await
    .map_err(|e| format!("reading {dlq}: {e}"))?;
    let pairs: Vec<(&[u8], &Expect)> = published
        .iter()
        .map(|&i| (set[i].body.as_slice(), &expects[i]))
        .collect();
    let mut per_body = vec![0u64; published.len()];
    let matches = tokio::task::block_in_place(|| {
        records
            .iter()
            .map(|r| records::match_record(r, &pairs))
            .collect::<Vec<_>>()
    });
    for m in matches {
        if let Some(j) = m.body {
            per_body[j] += 1;
        }
        if let Some(problem) = m.problem {
            row.corrupted += 1;
            let name = m.body.map_or("?", |j| set[published[j]].name);
            row.note(format!("DLQ record of {name}: {problem}"));
        }
    }
    let probe = probe(env, broker, &url, queue).await;
    let left: Vec<usize> = (0..published.len())
        .filter(|&j| {
            let body = &set[published[j]].body;
            probe.bodies.iter().any(|b| b == body)
                || matches!(pairs[j].1, Expect::Failed { id, .. } if probe.ids().contains(id))
        })
        .collect();
    for (j, &i) in published.iter().enumerate() {
        let name = set[i].name;
        match per_body[j] {
            0 if left.contains(&j) => {}
            0 => {
                row.lost += 1;
                row.note(format!(
                    "{name}: not in the DLQ and not on the broker: lost"
                ));
            }
            1 => {}
            n => {
                row.duplicated += n - 1;
                row.fail(format!("{name}: {n} DLQ records (exactly one is required)"));
            }
        }
        if let Expect::Failed { id, .. } = &expects[i] {
            let calls = tally.calls.get(id).copied().unwrap_or(0);
            let seen: Vec<i64> = tally
                .all
                .iter()
                .filter(|c| &c.id == id)
                .map(|c| c.attempts)
                .collect();
            let shown: Vec<i64> = seen.iter().take(6).copied().collect();
            row.note(format!(
                "{name}: handler called {calls} times (attempts seen {shown:?}{})",
                if seen.len() > shown.len() { " …" } else { "" }
            ));
            if calls > 3 {
                row.fail(format!(
                    "{name}: the handler was called {calls} times with max_attempts 3"
                ));
            }
        }
    }
    probe.report(row);
    probe.excuse(row);
    dlq_leftover(env, broker, &url, &dlq, row).await;
    if broker == Broker::Kafka {
        // Retries parked on a tier topic and never re-injected are on the broker too.
        let mut parked = 0;
        for tier in &tiers {
            match brokers::kafka_lag(&url, &reinject_group, tier).await {
                Ok(n) => parked += n,
                Err(e) => row.note(format!("lag of {tier}: {e}")),
            }
        }
        if parked > 0 {
            row.stranded += parked;
            row.lost = row.lost.saturating_sub(parked);
            row.fail(format!(
                "{parked} retries are still parked on the tier topics (never re-injected; \
                 counted as stranded, and any loss above is reduced by as many)"
            ));
        }
    }
    if !left.is_empty() {
        let names: Vec<&str> = left.iter().map(|&j| set[published[j]].name).collect();
        row.note(format!("still on the source queue: {}", names.join(", ")));
    }
    row.corrupted += tally.corrupted;
    for example in &tally.corruption_examples {
        row.note(format!("corrupted: {example}"));
    }
    row.note(format!(
        "DLQ {dlq}: {} records for {} published bodies",
        records.len(),
        published.len()
    ));
    Ok(())
}
