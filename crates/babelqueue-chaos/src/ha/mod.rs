//! The high-availability and network-fault rows (`bq-chaos --ha`): one row per topology and
//! fault. A row publishes a bounded stream of chaos messages, runs a worker (the hidden worker
//! mode, a child process) against the topology, injects the fault while messages flow, clears
//! it, drains, and counts lost / duplicated / stranded / corrupted messages with the same code as
//! the other scenarios, plus the time from the fault to the first message handled after it and
//! the connections the worker opened.
//!
//! A topology is a [`Topology`]: its name, the transport family whose counting applies, the
//! `scripts/brokers.sh` components it needs, its faults, and how to deploy one row (a
//! [`Deployment`]: the worker's URL, the publisher's URL, how to inject and clear each fault,
//! how to count connections). Adding one is a file in this directory and a line in
//! [`topologies`]; its `scripts/brokers.sh` component is a `scripts/brokers.d/ha-NAME.sh`.
//! In outline (a Sentinel whose master is killed; `sentinel.rs` is the whole of it):
//!
//! ```text
//! #[derive(Debug)]
//! pub(crate) struct Sentinel;
//!
//! #[async_trait]
//! impl Topology for Sentinel {
//!     fn name(&self) -> &'static str { "redis-sentinel" }
//!     fn broker(&self) -> Broker { Broker::Redis }
//!     fn components(&self) -> &'static [&'static str] { &["redis-sentinel"] }
//!     fn faults(&self, _short: bool) -> Vec<Fault> {
//!         vec![Fault::topology("failover", "SIGKILL of the master", "kill-master",
//!                              Duration::from_secs(10), Duration::from_secs(15))]
//!     }
//!     fn in_short(&self) -> bool { true }
//!     async fn deploy(&self, env: &Env, row: &str, queue: &str)
//!     -> Result<Box<dyn Deployment>, String> {
//!         // read the ports `scripts/brokers.sh env` exported; the worker's URL names the
//!         // sentinels, the publisher's too (it must follow the failover as well)
//!     }
//! }
//! // and a Deployment whose inject("kill-master") kills the master's pid, whose clear
//! // starts it again as a replica, and whose connects() reads what it can count (or None)
//! ```
//!
//! The row's flow is the same for every topology ([`exercise`]): the worker through
//! `worker_base`, the publisher (which retries a failed publish for up to 60 s) through
//! `direct_base`, the fault `inject`ed after the warm-up, `clear`ed after its hold.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::bodies::URN_OK;
use crate::brokers::{self, Broker, Env};
use crate::fleet::Fleet;
use crate::report::{self, Row};
use crate::scenarios::{self, Ctx, Scenario};
use crate::tally::Tally;

mod advertised;
pub(crate) mod faults;
mod freezer;
mod kafka_cluster;
mod nats_cluster;
mod nodes;
mod proxied;
mod rabbit_cluster;
mod redis_cluster;
mod redis_kills;
mod sentinel;
mod silent;
pub(crate) mod toxiproxy;

pub(crate) use faults::{Fault, Measured, RecoveryFrom};

/// A deployment of a broker that HA rows run against.
#[async_trait]
pub(crate) trait Topology: Send + Sync + std::fmt::Debug {
    /// The name in the table and on the command line (`redis`, `rabbitmq`, `redis-sentinel` …).
    fn name(&self) -> &'static str;
    /// The transport family: worker URL options, broker-side counts and the probe consumer come
    /// from it.
    fn broker(&self) -> Broker;
    /// The `scripts/brokers.sh` components it needs (started with `up NAME` when down).
    fn components(&self) -> &'static [&'static str];
    /// Its faults, in the order a lane runs them (`short`: the CI subset's sizes).
    fn faults(&self, short: bool) -> Vec<Fault>;
    /// Whether `--ha --short` (CI) runs it.
    fn in_short(&self) -> bool;
    /// Sets up one row (`row` is unique in the run: use it to name what the row creates;
    /// `queue` is the row's queue, for a fault aimed at what serves it).
    async fn deploy(
        &self,
        env: &Env,
        row: &str,
        queue: &str,
    ) -> Result<Box<dyn Deployment>, String>;
}

/// One row's view of a topology.
#[async_trait]
pub(crate) trait Deployment: Send + Sync + std::fmt::Debug {
    /// The URL the worker connects to, without the per-row options the harness adds
    /// (`retry_after`, `laravel=1` …).
    fn worker_base(&self) -> String;
    /// The URL the publisher, the broker-side count and the probe consumer use.
    fn direct_base(&self) -> String;
    /// How [`Deployment::connects`] counts, for the row's notes.
    fn counting(&self) -> String;
    /// The connections the worker opened so far (`None`: this topology cannot count them).
    async fn connects(&self) -> Result<Option<u64>, String>;
    /// Starts the fault.
    async fn inject(&self, fault: &Fault) -> Result<(), String>;
    /// Ends it.
    async fn clear(&self, fault: &Fault) -> Result<(), String>;
    /// Removes what the row made and leaves the topology whole for the next row; runs after
    /// every row, also a failed or timed-out one.
    async fn teardown(&self);
}

/// A topology and the faults its lane runs.
pub(crate) type Lane = (Arc<dyn Topology>, Vec<Fault>);

/// Every topology, in table order.
pub(crate) fn topologies() -> Vec<Arc<dyn Topology>> {
    vec![
        Arc::new(proxied::Proxied::new(Broker::Redis, true)),
        Arc::new(proxied::Proxied::new(Broker::RedisLaravel, true)),
        Arc::new(proxied::Proxied::new(Broker::Rabbitmq, true)),
        Arc::new(proxied::Proxied::new(Broker::Nats, false)),
        Arc::new(proxied::Proxied::new(Broker::Artemis, false)),
        Arc::new(proxied::Proxied::new(Broker::Sqs, false)),
        Arc::new(advertised::KAFKA),
        Arc::new(advertised::PULSAR),
        Arc::new(silent::Silent::new(Broker::Redis, true)),
        Arc::new(silent::Silent::new(Broker::Rabbitmq, false)),
        Arc::new(silent::Silent::new(Broker::Nats, false)),
        Arc::new(silent::Silent::new(Broker::Artemis, false)),
        Arc::new(silent::Silent::new(Broker::Sqs, false)),
        Arc::new(sentinel::Sentinel),
        Arc::new(redis_cluster::RedisCluster),
        Arc::new(rabbit_cluster::RabbitCluster),
        Arc::new(kafka_cluster::KafkaCluster),
        Arc::new(nats_cluster::NatsCluster),
    ]
}

/// The counts and limits of a mode.
#[derive(Debug, Clone)]
pub(crate) struct HaSizes {
    /// Messages per row.
    messages: u64,
    /// Handling before the fault is injected (at least; the worker must have handled one).
    warm: Duration,
    /// Publishing goes on this long after the fault is cleared, so there is work to recover to.
    tail: Duration,
    /// The drain after the fault.
    drain_limit: Duration,
}

impl HaSizes {
    pub(crate) fn short() -> HaSizes {
        HaSizes {
            messages: 300,
            warm: Duration::from_secs(3),
            tail: Duration::from_secs(5),
            drain_limit: Duration::from_secs(60),
        }
    }

    pub(crate) fn full() -> HaSizes {
        HaSizes {
            messages: 1000,
            warm: Duration::from_secs(3),
            tail: Duration::from_secs(10),
            drain_limit: Duration::from_secs(120),
        }
    }

    /// The hard wall-clock limit of a row: the fault, the warm-up (30 s at most), the drain,
    /// the probe (about 45 s at most) and slack.
    fn row_limit(&self, fault: &Fault) -> Duration {
        fault.hold + self.tail + self.drain_limit + Duration::from_secs(150)
    }
}

/// The rows a run has: topologies (by name, or all; `--short` keeps those in the CI subset) and
/// their faults (by name, or all).
pub(crate) fn select(
    names: &[String],
    fault_names: &[String],
    short: bool,
) -> Result<Vec<Lane>, String> {
    let all = topologies();
    let known = all.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ");
    for name in names {
        if !all.iter().any(|t| t.name() == name) {
            return Err(format!("unknown topology {name:?} (known: {known})"));
        }
    }
    let chosen: Vec<Arc<dyn Topology>> = all
        .into_iter()
        .filter(|t| {
            if names.is_empty() {
                !short || t.in_short()
            } else {
                names.iter().any(|n| n == t.name())
            }
        })
        .collect();
    let mut out = Vec::new();
    let mut matched: BTreeSet<&str> = BTreeSet::new();
    for topology in chosen {
        let faults: Vec<Fault> = topology
            .faults(short)
            .into_iter()
            .filter(|f| fault_names.is_empty() || fault_names.iter().any(|n| n == f.name))
            .collect();
        matched.extend(faults.iter().map(|f| f.name));
        if !faults.is_empty() {
            out.push((topology, faults));
        }
    }
    for name in fault_names {
        if !matched.contains(name.as_str()) {
            let mut every: Vec<&str> = topologies()
                .iter()
                .flat_map(|t| t.faults(short))
                .map(|f| f.name)
                .collect();
            every.sort_unstable();
            every.dedup();
            return Err(format!(
                "no selected topology has the fault {name:?} (the faults: {})",
                every.join(", ")
            ));
        }
    }
    Ok(out)
}

/// The components the selected topologies need, each once.
pub(crate) fn components(rows: &[Lane]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (topology, _) in rows {
        for c in topology.components() {
            if !out.contains(c) {
                out.push(c);
            }
        }
    }
    out
}

/// One lane per topology, `jobs` lanes at once; each lane runs its faults in order. Progress
/// goes to `progress` as each row ends.
pub(crate) async fn run_lanes(
    ctx: Arc<Ctx>,
    sizes: Arc<HaSizes>,
    rows: Vec<Lane>,
    jobs: usize,
    progress: fn(&Row),
) -> Vec<Row> {
    let permits = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let done: Arc<Mutex<Vec<(usize, usize, Row)>>> = Arc::new(Mutex::new(Vec::new()));
    let mut lanes = tokio::task::JoinSet::new();
    for (lane, (topology, faults)) in rows.into_iter().enumerate() {
        let (ctx, sizes, permits, done) =
            (ctx.clone(), sizes.clone(), permits.clone(), done.clone());
        lanes.spawn(async move {
            let Ok(_permit) = permits.acquire().await else {
                return;
            };
            for (i, fault) in faults.iter().enumerate() {
                let row = run_row(&ctx, &sizes, topology.as_ref(), fault).await;
                progress(&row);
                if let Ok(mut done) = done.lock() {
                    done.push((lane, i, row));
                }
            }
        });
    }
    while lanes.join_next().await.is_some() {}
    let mut rows = done.lock().map(|d| d.clone()).unwrap_or_default();
    rows.sort_by_key(|(lane, i, _)| (*lane, *i));
    rows.into_iter().map(|(_, _, row)| row).collect()
}

/// Runs one row, bounded by its hard limit; the deployment is torn down whatever happened.
async fn run_row(ctx: &Ctx, sizes: &HaSizes, topology: &dyn Topology, fault: &Fault) -> Row {
    let start = Instant::now();
    let mut row = Row::new(topology.name(), fault.name);
    let id = format!("{}-{}-{}", topology.name(), fault.name, ctx.run);
    let dir = ctx
        .dir
        .join(format!("ha-{}-{}", topology.name(), fault.name));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        row.fail(format!("{}: {e}", dir.display()));
        return row;
    }
    let queue = format!("chaos-ha-{id}");
    row.note(format!("fault: {}", fault.what));
    let deployment = match topology
        .deploy(&ctx.env, &format!("chaos-{id}"), &queue)
        .await
    {
        Ok(d) => d,
        Err(e) => {
            row.fail(format!("the topology could not be deployed: {e}"));
            row.elapsed = start.elapsed();
            return row;
        }
    };
    let limit = sizes.row_limit(fault);
    let work = exercise(
        ctx,
        sizes,
        topology.broker(),
        deployment.as_ref(),
        fault,
        &queue,
        &dir,
        &mut row,
    );
    match tokio::time::timeout(limit, work).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => row.fail(format!("the row could not run: {e}")),
        Err(_) => row.fail(format!(
            "the row did not finish within its hard limit of {}s (its worker was SIGKILLed)",
            limit.as_secs()
        )),
    }
    deployment.teardown().await;
    brokers::cleanup(&ctx.env, topology.broker(), &queue).await;
    row.note(format!("queue {queue}; logs in {}", dir.display()));
    row.elapsed = start.elapsed();
    row
}

/// Feeds the worker logs into the tally.
fn poll(fleet: &mut Fleet, tally: &mut Tally, known: &BTreeMap<String, String>) {
    for line in fleet.logs.poll() {
        tally.add(known, &line);
    }
}

/// Lets the worker run (restarting it if it exits) until `until`.
async fn hold(
    fleet: &mut Fleet,
    tally: &mut Tally,
    known: &BTreeMap<String, String>,
    until: Instant,
) -> Result<(), String> {
    while Instant::now() < until {
        fleet.keep_running()?;
        poll(fleet, tally, known);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The row itself: publish, warm up, fault, clear, drain, count, judge.
#[allow(clippy::too_many_arguments)]
async fn exercise(
    ctx: &Ctx,
    sizes: &HaSizes,
    broker: Broker,
    deployment: &dyn Deployment,
    fault: &Fault,
    queue: &str,
    dir: &Path,
    row: &mut Row,
) -> Result<(), String> {
    let env = &ctx.env;
    // The per-row options of the other scenarios' workers (Redis: retry_after=2, the Laravel
    // layout; NATS: ack_wait=2 …), on the topology's URLs.
    let url =
        |base: String| scenarios::worker_url(env, broker, Scenario::Sigkill, queue, Some(base));
    let worker_url = url(deployment.worker_base())?;
    let direct_url = url(deployment.direct_base())?;
    scenarios::prepare(env, broker, queue, true).await?;
    let n = sizes.messages;
    let msgs = scenarios::messages(&ctx.run, queue, 0..n, URN_OK);
    let known: BTreeMap<String, String> = msgs
        .iter()
        .map(|m| (m.id.clone(), m.data.clone()))
        .collect();
    let transport = brokers::connect(env, broker, &direct_url).await?;
    let mut worker = scenarios::spec(&worker_url, queue, 8);
    worker.work_ms = 20;
    let mut fleet = Fleet::new(&ctx.exe, &env.vars, dir, "worker", worker);
    fleet.start()?;
    let start = Instant::now();
    // One steady stream over the warm-up, the fault and the tail: there is work before, during
    // and after the fault.
    let span = sizes.warm + fault.hold + sizes.tail;
    let pace = span / u32::try_from(n).unwrap_or(u32::MAX).max(1);
    let publisher = tokio::spawn(scenarios::publish(
        transport,
        queue.to_owned(),
        msgs,
        pace,
        Duration::from_secs(60),
        scenarios::IN_FLIGHT,
    ));
    let mut tally = Tally::default();
    hold(&mut fleet, &mut tally, &known, start + sizes.warm).await?;
    let warm_limit = start + Duration::from_secs(30);
    while tally.all.is_empty() && Instant::now() < warm_limit {
        hold(
            &mut fleet,
            &mut tally,
            &known,
            Instant::now() + Duration::from_millis(200),
        )
        .await?;
    }
    if tally.all.is_empty() {
        return Err("the worker handled nothing in 30 s, before any fault".into());
    }
    let mut measured = Measured {
        connects_before: deployment.connects().await?,
        ..Measured::default()
    };
    let calls_before = tally.all.len();
    let injecting = Instant::now();
    deployment.inject(fault).await?;
    // The clock and the hold start once the fault is in place: finding what to kill can take
    // seconds (a rabbitmqctl call on a loaded machine), and that is not the topology's recovery.
    let injected = Instant::now();
    let injected_ms = scenarios::now_ms();
    row.note(format!(
        "injected at {:.1}s after {calls_before} handler calls (putting it in place took {:.1}s)",
        injected.duration_since(start).as_secs_f64(),
        injected.duration_since(injecting).as_secs_f64()
    ));
    // While it holds, the connection count is watched: the first connection the worker opens
    // shows when it noticed the fault by itself.
    let mut noticed: Option<Duration> = None;
    let until = injected + fault.hold;
    let mut held = Ok(());
    while Instant::now() < until {
        let step = (Instant::now() + Duration::from_millis(500)).min(until);
        held = hold(&mut fleet, &mut tally, &known, step).await;
        if held.is_err() {
            break;
        }
        if noticed.is_none() {
            let now = deployment.connects().await.ok().flatten();
            if now
                .zip(measured.connects_before)
                .is_some_and(|(n, b)| n > b)
            {
                noticed = Some(injected.elapsed());
            }
        }
    }
    measured.connects_at_clear = deployment.connects().await.ok().flatten();
    // Cleared whatever happened while it held.
    let cleared = deployment.clear(fault).await;
    let cleared_ms = scenarios::now_ms();
    held?;
    cleared?;
    let during = tally.all.len() - calls_before;
    row.note(format!(
        "cleared after {:.1}s; {during} handler calls while it lasted",
        injected.elapsed().as_secs_f64()
    ));
    if measured.connects_before.is_some() {
        row.note(match noticed {
            Some(after) => format!(
                "the worker opened its first new connection {:.1}s into the fault",
                after.as_secs_f64()
            ),
            None => format!(
                "the worker opened no new connection while the fault lasted ({}s)",
                fault.hold.as_secs()
            ),
        });
    }
    // The publisher goes straight to the broker (not through the fault): every message must be
    // confirmed.
    let published = publisher.await.map_err(|e| e.to_string())?;
    let must: BTreeSet<String> = published.confirmed.keys().cloned().collect();
    row.messages = must.len() as u64;
    if !published.unconfirmed.is_empty() {
        row.fail(format!(
            "{} of {n} messages could not be published (the first: {:?})",
            published.unconfirmed.len(),
            published.unconfirmed.first()
        ));
    }
    let drained = scenarios::drain(
        &mut fleet,
        &mut tally,
        &known,
        &must,
        sizes.drain_limit,
        broker.settle(),
    )
    .await?;
    let missing = tally.missing(must.iter()).len();
    scenarios::report_drain(row, "drain after the fault", &drained, missing);
    scenarios::report_fleet(row, &fleet);
    measured.connects_total = deployment.connects().await?;
    measured.recovery = match fault.recovery_from {
        RecoveryFrom::Clear => first_call_after(&tally, cleared_ms),
        RecoveryFrom::Inject => end_of_longest_pause(
            &tally,
            injected_ms,
            injected_ms + KILL_PAUSE_STARTS_WITHIN.as_millis() as u64,
        ),
        RecoveryFrom::InjectFresh => {
            let fresh: BTreeSet<&str> = published
                .confirmed
                .iter()
                .filter(|(_, at)| **at >= injected)
                .map(|(id, _)| id.as_str())
                .collect();
            first_fresh_call_after(&tally, injected_ms, &fresh)
        }
    };
    row.recovery = measured.recovery;
    row.connects = measured.connects_total;
    match measured.connects_split() {
        Some(split) => row.note(format!(
            "worker connections ({}): {split}",
            deployment.counting()
        )),
        None => row.note(format!("worker connections: {}", deployment.counting())),
    }
    if fault.breaks_connections && measured.reconnects() == Some(0) {
        row.note(
            "the worker opened no connection from the fault on: the fault may not have reached \
             a connection that carried data",
        );
    }
    for failure in faults::judge(fault, &measured) {
        row.fail(failure);
    }
    let probe = scenarios::probe(env, broker, &direct_url, queue).await;
    scenarios::settle_counts(row, &published, &tally, &probe, &BTreeSet::new());
    Ok(())
}

/// From `clock_ms` to the first handler call at or after it.
pub(crate) fn first_call_after(tally: &Tally, clock_ms: u64) -> Option<Duration> {
    tally
        .all
        .iter()
        .map(|c| c.at_ms)
        .filter(|at| *at >= clock_ms)
        .min()
        .map(|at| Duration::from_millis(at - clock_ms))
}

/// From `clock_ms` to the first handler call at or after it of a message in `fresh`.
pub(crate) fn first_fresh_call_after(
    tally: &Tally,
    clock_ms: u64,
    fresh: &BTreeSet<&str>,
) -> Option<Duration> {
    tally
        .all
        .iter()
        .filter(|c| fresh.contains(c.id.as_str()))
        .map(|c| c.at_ms)
        .filter(|at| *at >= clock_ms)
        .min()
        .map(|at| Duration::from_millis(at - clock_ms))
}

/// A kill's pause begins this soon after it: the worker handles what it held (a few messages
/// of 20 ms at concurrency 8) and then waits for the topology. A pause that begins later is the
/// machine's noise (a few hundred ms now and then) or the killed node's return, not the failover.
const KILL_PAUSE_STARTS_WITHIN: Duration = Duration::from_secs(2);

/// From `from_ms` to the first handler call after the longest pause in handling that began
/// at or after `from_ms` and before `until_ms` (a pause begins at `from_ms` itself or at a
/// handler call; it ends at the next call, which may come after `until_ms`). `None`: no call
/// came after `from_ms`.
pub(crate) fn end_of_longest_pause(tally: &Tally, from_ms: u64, until_ms: u64) -> Option<Duration> {
    let mut calls: Vec<u64> = tally
        .all
        .iter()
        .map(|c| c.at_ms)
        .filter(|at| *at >= from_ms)
        .collect();
    calls.sort_unstable();
    let mut start = from_ms;
    let mut longest: Option<(u64, u64)> = None;
    for at in calls {
        if start >= until_ms && longest.is_some() {
            break;
        }
        if longest.is_none_or(|(s, e)| at - start > e - s) {
            longest = Some((start, at));
        }
        start = at;
    }
    longest.map(|(_, end)| Duration::from_millis(end - from_ms))
}

/// The progress line of a finished row (stderr, as the other scenarios').
pub(crate) fn progress_line(row: &Row) -> String {
    let recovery = row
        .recovery
        .map_or_else(|| "-".to_owned(), report::duration);
    let connects = row
        .connects
        .map_or_else(|| "-".to_owned(), |c| c.to_string());
    format!(
        "{}/{}: {} ({} msgs, lost {}, dup {}, stranded {}, corrupted {}, recovery {recovery}, \
         connects {connects}) in {}",
        row.broker,
        row.scenario,
        match row.status() {
            report::Status::Ok => "ok",
            report::Status::Fail => "FAIL",
            report::Status::NotApplicable => "n/a",
        },
        row.messages,
        row.lost,
        row.duplicated,
        row.stranded,
        row.corrupted,
        report::duration(row.elapsed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tally::{Call, Seen};

    fn call(at_ms: u64) -> Call {
        Call {
            id: format!("id-{at_ms}"),
            urn: URN_OK.into(),
            attempts: 0,
            worker: 0,
            seen: Seen::Text("{}".into()),
            at_ms,
        }
    }

    #[test]
    fn recovery_is_the_first_call_at_or_after_the_clock() {
        let mut tally = Tally::default();
        assert_eq!(first_call_after(&tally, 1_000), None);
        // Out of log order across incarnations: the earliest one after the clock counts.
        tally.all = vec![call(900), call(2_500), call(1_700), call(999)];
        assert_eq!(
            first_call_after(&tally, 1_000),
            Some(Duration::from_millis(700))
        );
        assert_eq!(first_call_after(&tally, 1_700), Some(Duration::ZERO));
        assert_eq!(first_call_after(&tally, 2_501), None);
    }

    #[test]
    fn a_silent_fault_recovers_on_a_message_published_after_it() {
        let mut tally = Tally::default();
        let fresh: BTreeSet<&str> = ["id-6500", "id-4000"].into_iter().collect();
        assert_eq!(first_fresh_call_after(&tally, 1_000, &fresh), None);
        // id-1200 was published before the freeze and handled after it (a call under way).
        tally.all = vec![call(1_200), call(6_500), call(4_000)];
        assert_eq!(
            first_fresh_call_after(&tally, 1_000, &fresh),
            Some(Duration::from_millis(3_000))
        );
        assert_eq!(
            first_fresh_call_after(&tally, 1_000, &BTreeSet::new()),
            None
        );
    }

    #[test]
    fn a_kill_recovers_at_the_end_of_the_longest_pause_after_it() {
        let mut tally = Tally::default();
        assert_eq!(end_of_longest_pause(&tally, 1_000, 5_000), None);
        // Held messages handled right after the kill (1 010, 1 020), then the failover (until
        // 3 400), then the flow again; a call before the kill does not count.
        tally.all = vec![
            call(900),
            call(1_020),
            call(1_010),
            call(3_400),
            call(3_450),
            call(3_500),
        ];
        assert_eq!(
            end_of_longest_pause(&tally, 1_000, 5_000),
            Some(Duration::from_millis(2_400))
        );
        // A pause that begins after the window (noise, the killed node's return) is not the
        // failover's.
        tally.all.extend([call(5_200), call(9_000)]);
        assert_eq!(
            end_of_longest_pause(&tally, 1_000, 5_000),
            Some(Duration::from_millis(2_400))
        );
        // One that began before the clearing and ended after it is.
        tally.all = vec![call(1_010), call(7_000), call(7_010)];
        assert_eq!(
            end_of_longest_pause(&tally, 1_000, 5_000),
            Some(Duration::from_millis(6_000))
        );
        // Nothing handled before the first call after the kill: that call ends the pause.
        tally.all = vec![call(4_000)];
        assert_eq!(
            end_of_longest_pause(&tally, 1_000, 5_000),
            Some(Duration::from_millis(3_000))
        );
    }

    #[test]
    fn topologies_have_unique_names_and_the_ci_subset_is_network_faults_a_silence_and_two_kills() {
        let all = topologies();
        let mut names: Vec<&str> = all.iter().map(|t| t.name()).collect();
        names.dedup();
        assert_eq!(names.len(), all.len());
        let short = select(&[], &[], true).unwrap();
        let short_names: Vec<&str> = short.iter().map(|(t, _)| t.name()).collect();
        assert_eq!(
            short_names,
            [
                "redis",
                "redis-laravel",
                "rabbitmq",
                "redis-silent",
                "redis-sentinel",
                "nats-cluster"
            ]
        );
        let full = select(&[], &[], false).unwrap();
        assert!(full.len() > short.len(), "the full run has more");
        // Kafka's network faults: the full run only, on a node of their own behind Toxiproxy.
        let (kafka, faults) = full
            .iter()
            .find(|(t, _)| t.name() == "kafka")
            .expect("the kafka topology");
        assert_eq!(kafka.components(), ["kafka-proxied", "toxiproxy"]);
        assert_eq!(faults.len(), 4);
        // Pulsar's likewise, on a standalone of their own.
        let (pulsar, faults) = full
            .iter()
            .find(|(t, _)| t.name() == "pulsar")
            .expect("the pulsar topology");
        assert_eq!(pulsar.components(), ["pulsar-proxied", "toxiproxy"]);
        assert_eq!(faults.len(), 4);
        // Named, a topology runs in --short too.
        assert_eq!(select(&["nats".into()], &[], true).unwrap().len(), 1);
        for (topology, faults) in &short[..3] {
            assert!(topology.components().contains(&"toxiproxy"));
            assert_eq!(faults.len(), 4, "{}", topology.name());
        }
        // The silent fault on Redis, then the two topology rows of CI: one kill each.
        let kills: Vec<(&str, &str)> = short[3..]
            .iter()
            .flat_map(|(t, faults)| faults.iter().map(|f| (t.name(), f.name)))
            .collect();
        assert_eq!(
            kills,
            [
                ("redis-silent", "silent"),
                ("redis-sentinel", "failover"),
                ("nats-cluster", "leader-kill")
            ]
        );
        assert_eq!(
            components(&short),
            [
                "redis",
                "toxiproxy",
                "rabbitmq",
                "redis-sentinel",
                "nats-cluster"
            ],
            "each component once"
        );
    }

    #[test]
    fn rows_are_selected_by_topology_and_fault() {
        let rows = select(&["rabbitmq".into()], &["reset".into()], false).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].0.name(), "rabbitmq");
        assert_eq!(rows[0].1.len(), 1);
        assert_eq!(rows[0].1[0].name, "reset");
        assert!(
            select(&["nope".into()], &[], false)
                .unwrap_err()
                .contains("unknown topology")
        );
        assert!(
            select(&[], &["nope".into()], false)
                .unwrap_err()
                .contains("no selected topology")
        );
    }

    #[test]
    fn a_row_is_bounded() {
        for (sizes, short) in [(HaSizes::short(), true), (HaSizes::full(), false)] {
            for fault in topologies().iter().flat_map(|t| t.faults(short)) {
                assert!(
                    sizes.row_limit(&fault) <= Duration::from_secs(360),
                    "{}",
                    fault.name
                );
            }
        }
    }
}
