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

mod dlq;
mod malformed;
mod restart;
mod sigkill;

use dlq::dlq_failure;
use malformed::malformed;
use restart::broker_restart;
use sigkill::sigkill;

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
pub(crate) fn worker_url(
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
pub(crate) async fn prepare(
    env: &Env,
    broker: Broker,
    queue: &str,
    with_dlq: bool,
) -> Result<(), String> {
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
pub(crate) struct Msg {
    pub(crate) id: String,
    pub(crate) data: String,
    pub(crate) body: Vec<u8>,
}

pub(crate) fn messages(run: &str, queue: &str, range: std::ops::Range<u64>, urn: &str) -> Vec<Msg> {
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
pub(crate) struct Published {
    /// Every message it tried (id → data), for the corruption check.
    pub(crate) known: BTreeMap<String, String>,
    /// The ids the broker confirmed, with when.
    pub(crate) confirmed: BTreeMap<String, Instant>,
    /// Messages never confirmed, with the last error.
    pub(crate) unconfirmed: Vec<(String, String)>,
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
pub(crate) async fn publish(
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
pub(crate) const IN_FLIGHT: usize = 4;

/// How a drain went.
#[derive(Debug, Default)]
pub(crate) struct Drained {
    pub(crate) complete: bool,
    /// When the first handler call of the drain came, from its start.
    pub(crate) first_call: Option<Duration>,
    /// When the last handler call came, before the drain ended.
    pub(crate) quiet_for: Duration,
    pub(crate) elapsed: Duration,
    pub(crate) stopped: Option<Stopped>,
}

/// Lets the fleet's worker handle until every id of `must` was handled (then `settle` more, for
/// late duplicates) or `limit`; then SIGTERM. A worker that exits on its own is restarted (and
/// counted as a crash when it exited abnormally).
pub(crate) async fn drain(
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
pub(crate) struct Probe {
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
pub(crate) async fn probe(env: &Env, broker: Broker, url: &str, queue: &str) -> Probe {
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
pub(crate) fn report_drain(row: &mut Row, what: &str, drained: &Drained, missing: usize) {
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
pub(crate) fn report_fleet(row: &mut Row, fleet: &Fleet) {
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

pub(crate) fn spec(url: &str, queue: &str, concurrency: usize) -> WorkerSpec {
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
pub(crate) fn settle_counts(
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

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}
