//! Open-loop publish-to-handled latency, for the broker benchmarks.
//!
//! A producer paced by a clock schedule offers a fixed load (`rate` messages per second for a
//! while); every message carries its *scheduled* send time (wall clock, ns since the Unix
//! epoch, in its `t` data field) and its latency is the handler's start minus that time. A
//! producer or a consumer that falls behind therefore shows in the figures instead of slowing
//! the offered load down (no coordinated omission). The latencies go into an
//! [`hdrhistogram`] histogram in µs; the same record is built from the Python SDK's samples
//! (`xtask/bench/python_latency.py`), so both sides' percentiles come from one computation.
//!
//! A side *sustains* a load when it handled every offered message and its latency did not
//! grow over the run: the median of the last quarter of the messages (in the order handled)
//! is at most [`GROWTH_ALLOWED`] (or a tenth of the run, if longer) above the first quarter's.
//! A side that falls behind builds a backlog, and its latency grows with it; one that polls
//! (a message waits for the next poll) has long latencies that do not grow. Otherwise the run
//! reports the load as not sustained, and its percentiles only describe a growing backlog.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use babelqueue_core::{AppBuilder, Consume, Context, HandlerError};
use hdrhistogram::Histogram;
use serde_json::{Value, json};

use crate::cpu::cpu_time;

/// How many passes the broker benchmarks run at each load (each side's better kept, see
/// [`OpenLoopRun::better`]).
pub const OPEN_LOOP_PASSES: usize = 2;

/// The loads the broker benchmarks offer, messages per second and for how long: 1 000 and
/// 10 000 (the targets' loads) and 100, a load the Python SDK sustains on every broker.
///
/// 100 msg/s runs 10 s: a thousand samples, so its p99 is the tenth slowest message and not
/// the third (at 3 s one stall of the shared machine, which delays a few consecutive messages
/// together, was the whole p99).
pub const OPEN_LOOP_LOADS: [(u64, Duration); 3] = [
    (100, Duration::from_secs(10)),
    (1_000, Duration::from_secs(3)),
    (10_000, Duration::from_secs(2)),
];

/// How much the median latency may grow from the first quarter of a run to the last for the
/// load to count as sustained (or a tenth of the run, if longer).
pub const GROWTH_ALLOWED: Duration = Duration::from_millis(100);

/// How long the warm-up message may take (a Kafka consumer group joining a new topic).
const WARM_UP: Duration = Duration::from_secs(60);

/// How long after the schedule's end a run waits for the rest of its messages.
const GRACE: Duration = Duration::from_secs(5);

/// The producer wakes at most this often (each time sending every message then due).
const WAKE_QUANTUM: Duration = Duration::from_micros(500);

/// The histogram's highest value: one hour, in µs.
const HOUR_US: u64 = 3_600_000_000;

/// Publishes in flight at once at most, for this SDK's producer: a publish that waits for its
/// broker's confirm does not hold the schedule back, and a broker that cannot keep up still
/// shows (the producer then waits for a slot, late against its schedule).
const IN_FLIGHT: usize = 256;

/// The `n` largest of `samples_us` with their places, largest first (equal ones in order).
pub fn slowest(samples_us: &[u64], n: usize) -> Vec<(u64, usize)> {
    let mut placed: Vec<(u64, usize)> = samples_us.iter().copied().zip(0..).collect();
    placed.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    placed.truncate(n);
    placed
}

/// One open-loop run: the latencies of the handled messages and the load they were offered at.
#[derive(Debug, Clone)]
pub struct OpenLoopRun {
    /// The offered rate, messages per second.
    pub rate: u64,
    /// How many messages the schedule offered.
    pub offered: u64,
    /// Publish-to-handled latency of every handled message, in µs.
    pub histogram: Histogram<u64>,
    /// From the first scheduled send to the last handler start.
    pub span: Duration,
    /// CPU time of the consuming process over the run, when measured.
    pub cpu: Option<Duration>,
    /// The median latency of the last quarter of the handled messages less the first
    /// quarter's, µs.
    pub growth_us: i64,
}

impl OpenLoopRun {
    /// A run from its latency samples (µs, in the order handled).
    ///
    /// With `BQ_OPEN_LOOP_TRACE` set it prints the twelve slowest messages with their place in
    /// the run ([`slowest`]): a tail of consecutive messages is a stall (the process or the
    /// machine paused, everything queued behind it), one spread over the run a per-message cost.
    ///
    /// # Panics
    ///
    /// Never: the bounds are constants (1 µs to one hour, 3 significant digits; a sample
    /// above an hour is recorded as an hour).
    #[allow(clippy::print_stdout)]
    pub fn from_samples(rate: u64, offered: u64, samples_us: &[u64], span: Duration) -> Self {
        if std::env::var_os("BQ_OPEN_LOOP_TRACE").is_some() {
            println!(
                "open loop at {rate}/s, the slowest (µs, place): {:?}",
                slowest(samples_us, 12)
            );
        }
        let mut histogram =
            Histogram::<u64>::new_with_bounds(1, HOUR_US, 3).expect("valid histogram bounds");
        for &us in samples_us {
            histogram.saturating_record(us.clamp(1, HOUR_US));
        }
        let quarter = samples_us.len() / 4;
        let median = |part: &[u64]| {
            let mut part = part.to_vec();
            part.sort_unstable();
            i64::try_from(part.get(part.len() / 2).copied().unwrap_or(0)).unwrap_or(i64::MAX)
        };
        let growth_us =
            median(&samples_us[samples_us.len() - quarter..]) - median(&samples_us[..quarter]);
        OpenLoopRun {
            rate,
            offered,
            histogram,
            span,
            cpu: None,
            growth_us,
        }
    }

    /// The better of two passes at the same load: a sustained one before one that is not,
    /// then the lower p99. The benchmarks run each load twice, each side's passes taken in
    /// turn, and keep each side's better pass: on a shared machine a busy spell (another
    /// process on the CPU) only ever adds latency, and it then costs one pass of each side.
    pub fn better(self, other: OpenLoopRun) -> OpenLoopRun {
        let key = |r: &OpenLoopRun| (!r.sustained(), r.percentile_us(0.99));
        if key(&other) < key(&self) {
            other
        } else {
            self
        }
    }

    /// Keeps in `best` the better of it and `run` ([`better`](OpenLoopRun::better)): each
    /// side's best pass at a load, as the broker benchmarks report it.
    pub fn keep_better(best: &mut Option<OpenLoopRun>, run: OpenLoopRun) {
        *best = Some(match best.take() {
            Some(kept) => kept.better(run),
            None => run,
        });
    }

    /// How many messages were handled.
    pub fn handled(&self) -> u64 {
        self.histogram.len()
    }

    /// Handled messages per second over the run.
    pub fn achieved_rate(&self) -> f64 {
        let secs = self.span.as_secs_f64();
        if secs > 0.0 {
            self.handled() as f64 / secs
        } else {
            0.0
        }
    }

    /// Every offered message handled, the latency not growing by more than
    /// [`GROWTH_ALLOWED`] (or a tenth of the run) from the first quarter to the last.
    pub fn sustained(&self) -> bool {
        let run_us = self.offered.saturating_mul(1_000_000) / self.rate.max(1);
        let allowed = u64::try_from(GROWTH_ALLOWED.as_micros())
            .unwrap_or(u64::MAX)
            .max(run_us / 10);
        self.offered > 0
            && self.handled() >= self.offered
            && self.growth_us <= i64::try_from(allowed).unwrap_or(i64::MAX)
    }

    /// The latency at `quantile` (0.5, 0.99, 0.999), in µs.
    pub fn percentile_us(&self, quantile: f64) -> u64 {
        self.histogram.value_at_quantile(quantile)
    }

    /// The p99's 95% sampling interval, µs: the latencies at the order statistics that hold
    /// the true 99th percentile with 95% confidence (the binomial's normal approximation,
    /// distribution-free). Two runs whose intervals overlap are not told apart by their p99s
    /// (with 1 000 samples the interval spans the 983rd to the 998th fastest). The
    /// samples are not independent (a stall delays consecutive messages), so the true
    /// interval is wider: a verdict read from this one errs towards telling runs apart.
    pub fn p99_interval_us(&self) -> (u64, u64) {
        let n = self.handled();
        if n == 0 {
            return (0, 0);
        }
        let n_f = n as f64;
        let spread = 1.96 * (n_f * 0.99 * 0.01).sqrt();
        let rank = |r: f64| (r.max(1.0).min(n_f)) / n_f;
        (
            self.percentile_us(rank((n_f * 0.99 - spread).floor())),
            self.percentile_us(rank((n_f * 0.99 + spread).ceil() + 1.0)),
        )
    }

    /// CPU-seconds per 1 000 handled messages, when the CPU was measured.
    pub fn cpu_per_thousand(&self) -> Option<f64> {
        let handled = self.handled();
        self.cpu
            .filter(|_| handled > 0)
            .map(|cpu| cpu.as_secs_f64() * 1000.0 / handled as f64)
    }

    /// The `BQ-FIGURE latency` line `cargo xtask bench brokers` reads:
    /// `latency <row> <rate> <who> <p50> <p99> <p99.9> <max> <handled> <offered> <achieved/s>
    /// <sustained: 1 or 0> <cpu s/1000 or -> <p99 interval low> <p99 interval high>`,
    /// latencies in µs ([`p99_interval_us`](OpenLoopRun::p99_interval_us)).
    pub fn figure(&self, row: &str, who: &str) -> String {
        let (low, high) = self.p99_interval_us();
        format!(
            "BQ-FIGURE latency {row} {} {who} {} {} {} {} {} {} {:.0} {} {} {low} {high}",
            self.rate,
            self.percentile_us(0.5),
            self.percentile_us(0.99),
            self.percentile_us(0.999),
            self.histogram.max(),
            self.handled(),
            self.offered,
            self.achieved_rate(),
            u8::from(self.sustained()),
            self.cpu_per_thousand()
                .map_or("-".to_owned(), |c| format!("{c:.4}")),
        )
    }

    /// Prints a human line and the figure line.
    #[allow(clippy::print_stdout)]
    pub fn print(&self, row: &str, who: &str) {
        println!(
            "{row}, {who}: open loop at {} msg/s: p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms; {} of {} handled at {:.0}/s{}",
            self.rate,
            self.percentile_us(0.5) as f64 / 1e3,
            self.percentile_us(0.99) as f64 / 1e3,
            self.percentile_us(0.999) as f64 / 1e3,
            self.histogram.max() as f64 / 1e3,
            self.handled(),
            self.offered,
            self.achieved_rate(),
            if self.sustained() {
                ""
            } else {
                " (not sustained)"
            },
        );
        println!("{}", self.figure(row, who));
    }
}

/// Wall-clock ns since the Unix epoch: the clock both SDKs stamp and read.
fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The message body of the open-loop runs: the throughput benchmarks' body plus the scheduled
/// send time.
pub fn stamped(scheduled_ns: u64) -> Value {
    json!({"order_id": 1042, "total": 99.9, "t": scheduled_ns})
}

/// The consuming side's end of an open loop: a handler (this SDK's, or a raw client's loop)
/// calls [`OpenLoopProbe::handled`] at its start with the message's `t` data field, and the
/// run ([`drive_open_loop`]) records the latency. Made by [`open_loop_probe`].
#[derive(Debug, Clone)]
pub struct OpenLoopProbe {
    tx: tokio::sync::mpsc::UnboundedSender<Option<(u64, u64)>>,
}

impl OpenLoopProbe {
    /// A handler started on a message stamped `t` (its scheduled send time, ns since the Unix
    /// epoch; `None`: the warm-up message, or any message without a stamp).
    pub fn handled(&self, t: Option<u64>) {
        let now = wall_ns();
        let _ = self
            .tx
            .send(t.map(|t| (now.saturating_sub(t) / 1_000, now)));
    }

    /// [`OpenLoopProbe::handled`] with the stamp read from a message's data (`{"t": …}`).
    pub fn handled_data(&self, data: &Value) {
        self.handled(data.get("t").and_then(Value::as_u64));
    }
}

/// The recording end of an [`OpenLoopProbe`], for [`drive_open_loop`].
#[derive(Debug)]
pub struct OpenLoopHandled {
    rx: tokio::sync::mpsc::UnboundedReceiver<Option<(u64, u64)>>,
}

/// A probe for a consumer to call and its recording end for [`drive_open_loop`].
pub fn open_loop_probe() -> (OpenLoopProbe, OpenLoopHandled) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    (OpenLoopProbe { tx }, OpenLoopHandled { rx })
}

/// Runs `builder`'s worker on its queue with a handler for `urn`, offers `rate` messages per
/// second for `duration` on an open-loop schedule, and records each handled message's
/// latency. One warm-up message is published and handled first (connections, first poll, a
/// consumer group's join).
/// The run gives up 5 s after the schedule's end (as the Python script does); what was not handled by then is missing
/// from the histogram (and the run is not sustained).
///
/// # Panics
///
/// When the app cannot be built or a publish fails: it is a benchmark helper, and a broken run
/// has no figure to give. A warm-up message not handled within a minute gives a run with
/// nothing handled (not sustained), with the reason printed.
pub async fn open_loop(
    builder: AppBuilder,
    urn: &str,
    rate: u64,
    duration: Duration,
) -> OpenLoopRun {
    let (probe, handled) = open_loop_probe();
    let app = builder
        .handle(urn, move |ctx: Context| {
            match ctx.data_as::<Value>() {
                Ok(data) => probe.handled_data(&data),
                Err(_) => probe.handled(None),
            }
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .expect("a valid benchmark app");
    let stop = app.stop_handle();
    // The worker runs until stopped: a run with `max_messages` and no idle timeout ends at its
    // first empty poll, which on Kafka (a consumer group still joining) came before the
    // warm-up message and cost the pass.
    let worker = {
        let app = app.clone();
        tokio::spawn(async move { app.consume(Consume::new().handle_signals(false)).await })
    };
    let urn = urn.to_owned();
    let run = drive_open_loop(handled, rate, duration, move |body| {
        let (app, urn) = (app.clone(), urn.clone());
        async move {
            app.publish(&urn, &body).await.expect("published");
        }
    })
    .await;
    stop.stop();
    let _ = tokio::time::timeout(Duration::from_secs(10), worker).await;
    run
}

fn offered(rate: u64, duration: Duration) -> u64 {
    rate.saturating_mul(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)) / 1000
}

/// The open loop itself, for any consumer that reports to `handled`'s probe: publishes the
/// warm-up message `{"warm": true}` through `publish` and waits for its probe call, then
/// offers `rate` messages per second for `duration` (bodies [`stamped`] with their scheduled
/// send time, each publish a task of its own, at most 256 in flight, as [`open_loop`] does
/// for this SDK) and records every probe call until all were handled or 5 s after the
/// schedule's end. The CPU time is this process's over the run. The caller stops its consumer
/// afterwards. A raw client's loop run with this and [`open_loop`] on the same broker differ
/// only in the client.
///
/// # Panics
///
/// Never itself; `publish` may (a benchmark's publish that fails has no figure to give).
#[allow(clippy::print_stdout)]
pub async fn drive_open_loop<P, F>(
    handled: OpenLoopHandled,
    rate: u64,
    duration: Duration,
    publish: P,
) -> OpenLoopRun
where
    P: Fn(Value) -> F + Send + Sync + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let OpenLoopHandled { rx: mut handled } = handled;
    let offered = offered(rate, duration);
    tokio::spawn(publish(json!({"warm": true})));
    // A consumer group may take a while to join a topic that was just created (Kafka).
    if !matches!(
        tokio::time::timeout(WARM_UP, handled.recv()).await,
        Ok(Some(None))
    ) {
        println!("the warm-up message was not handled within {WARM_UP:?}: no figure at {rate}/s");
        return OpenLoopRun::from_samples(rate, offered, &[], Duration::ZERO);
    }

    let cpu_before = cpu_time();
    let interval_ns = 1_000_000_000 / rate.max(1);
    let start_ns = wall_ns() + 5_000_000;
    let start = std::time::Instant::now() + Duration::from_millis(5);
    // The producer paces itself on a thread of its own with the OS's sleep (tokio's timer
    // rounds every wake-up up to the next millisecond, which would be counted as latency): at
    // each wake-up it hands every message then due to the runtime, and it wakes at the next
    // message's time, at most every WAKE_QUANTUM (at 10 000 msg/s, five messages a wake-up).
    let stop_producing = Arc::new(AtomicBool::new(false));
    let producer = {
        let stop = stop_producing.clone();
        let publish = Arc::new(publish);
        let (handle, slots) = (
            tokio::runtime::Handle::current(),
            Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT)),
        );
        std::thread::spawn(move || {
            let due = |i: u64| start + Duration::from_nanos(i * interval_ns);
            let mut i = 0;
            while i < offered && !stop.load(Ordering::Relaxed) {
                let now = std::time::Instant::now();
                while i < offered && due(i) <= now {
                    let Ok(slot) = handle.block_on(slots.clone().acquire_owned()) else {
                        return;
                    };
                    let sent = publish(stamped(start_ns + i * interval_ns));
                    handle.spawn(async move {
                        sent.await;
                        drop(slot);
                    });
                    i += 1;
                }
                let next = due(i).max(now + WAKE_QUANTUM);
                std::thread::sleep(next.saturating_duration_since(std::time::Instant::now()));
            }
        })
    };
    let start = tokio::time::Instant::from_std(start);
    let deadline = start + duration + GRACE;
    let mut samples = Vec::with_capacity(usize::try_from(offered).unwrap_or(0));
    let mut last_ns = start_ns;
    while (samples.len() as u64) < offered {
        match tokio::time::timeout_at(deadline, handled.recv()).await {
            Ok(Some(Some((us, at)))) => {
                samples.push(us);
                last_ns = last_ns.max(at);
            }
            Ok(Some(None)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    let cpu = cpu_time().saturating_sub(cpu_before);
    stop_producing.store(true, Ordering::Relaxed);
    let _ = tokio::task::spawn_blocking(move || producer.join()).await;
    let span = Duration::from_nanos(last_ns.saturating_sub(start_ns));
    let mut run = OpenLoopRun::from_samples(rate, offered, &samples, span);
    run.cpu = Some(cpu);
    run
}

/// Runs the Python SDK's open loop (`xtask/bench/python_latency.py` under `python`) on `url`
/// and `queue` at `rate` for `duration`; `None` (with the reason printed) when it could not
/// run.
#[allow(clippy::print_stdout)]
pub fn python_open_loop(
    python: &Path,
    url: &str,
    queue: &str,
    rate: u64,
    duration: Duration,
) -> Option<OpenLoopRun> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../xtask/bench/python_latency.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .args([
            url,
            queue,
            &rate.to_string(),
            &duration.as_secs_f64().to_string(),
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        println!(
            "the Python open loop failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    parse_python(&out.stdout)
}

/// The Python script's JSON line: `{"rate", "offered", "lat_us": [...], "span_s", "cpu_s"}`.
fn parse_python(stdout: &[u8]) -> Option<OpenLoopRun> {
    let text = String::from_utf8_lossy(stdout);
    let line: Value = serde_json::from_str(text.lines().last()?).ok()?;
    let samples: Vec<u64> = line["lat_us"]
        .as_array()?
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    let mut run = OpenLoopRun::from_samples(
        line["rate"].as_u64()?,
        line["offered"].as_u64()?,
        &samples,
        Duration::from_secs_f64(line["span_s"].as_f64()?.max(0.0)),
    );
    run.cpu = line["cpu_s"]
        .as_f64()
        .map(|s| Duration::from_secs_f64(s.max(0.0)));
    Some(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_better_keeps_the_lower_p99_of_sustained_passes() {
        let run = |us: u64| OpenLoopRun::from_samples(100, 4, &[us; 4], Duration::from_millis(40));
        let mut best = None;
        OpenLoopRun::keep_better(&mut best, run(900));
        assert_eq!(best.as_ref().map(|r| r.percentile_us(0.99)), Some(900));
        OpenLoopRun::keep_better(&mut best, run(300));
        OpenLoopRun::keep_better(&mut best, run(700));
        assert_eq!(best.map(|r| r.percentile_us(0.99)), Some(300));
    }

    #[test]
    fn the_slowest_come_with_their_places() {
        let samples = [5, 90, 91, 89, 7, 90];
        assert_eq!(slowest(&samples, 3), [(91, 2), (90, 1), (90, 5)]);
        assert_eq!(slowest(&samples, 99).len(), 6);
        assert!(slowest(&[], 3).is_empty());
    }

    #[test]
    fn percentiles_and_the_sustained_verdict_come_from_the_samples() {
        // 1 000 samples of 1..=1000 µs, shuffled in handling order, at 1 000/s: sustained.
        let samples: Vec<u64> = (1..=1000).map(|i| (i * 7919) % 1000 + 1).collect();
        let run = OpenLoopRun::from_samples(1000, 1000, &samples, Duration::from_millis(1010));
        assert_eq!(run.handled(), 1000);
        assert_eq!(run.percentile_us(0.5), 500);
        assert_eq!(run.percentile_us(0.99), 990);
        assert_eq!(run.histogram.max(), 1000);
        assert!(run.sustained(), "{}", run.growth_us);
        // A backlog: the latency grows by 1 ms a message (to 1 s): not sustained.
        let growing: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let slow = OpenLoopRun::from_samples(1000, 1000, &growing, Duration::from_secs(2));
        assert!(slow.growth_us > 400_000 && !slow.sustained());
        // Long but steady latencies (a consumer that polls): sustained.
        let polled: Vec<u64> = (0..1000).map(|i| 1_000_000 - (i % 100) * 10_000).collect();
        assert!(OpenLoopRun::from_samples(1000, 1000, &polled, Duration::from_secs(2)).sustained());
        // A message missing: not sustained whatever the latencies.
        let short = OpenLoopRun::from_samples(1000, 1001, &samples, Duration::from_secs(1));
        assert!(!short.sustained());
    }

    #[test]
    fn the_better_pass_is_sustained_first_then_the_lower_p99() {
        let steady: Vec<u64> = vec![500; 100];
        let fast = OpenLoopRun::from_samples(100, 100, &steady, Duration::from_secs(1));
        let slow = OpenLoopRun::from_samples(100, 100, &[900; 100], Duration::from_secs(1));
        let short = OpenLoopRun::from_samples(100, 101, &[100; 100], Duration::from_secs(1));
        assert_eq!(slow.clone().better(fast.clone()).percentile_us(0.99), 500);
        assert_eq!(fast.clone().better(slow).percentile_us(0.99), 500);
        assert_eq!(short.clone().better(fast.clone()).percentile_us(0.99), 500);
        assert_eq!(fast.better(short).percentile_us(0.99), 500);
    }

    #[test]
    fn the_figure_line_carries_every_column() {
        let mut run = OpenLoopRun::from_samples(10, 2, &[100, 3000], Duration::from_millis(200));
        run.cpu = Some(Duration::from_millis(5));
        assert_eq!(
            run.figure("redis", "python"),
            "BQ-FIGURE latency redis 10 python 100 3001 3001 3001 2 2 10 1 2.5000 100 3001"
        );
    }

    #[test]
    fn the_p99_interval_spans_the_order_statistics_around_the_990th_of_1_000() {
        // 1 000 samples of 1..=1000 µs: the interval is the 983rd to the 998th value.
        let samples: Vec<u64> = (1..=1000).collect();
        let run = OpenLoopRun::from_samples(100, 1000, &samples, Duration::from_secs(10));
        assert_eq!(run.p99_interval_us(), (983, 998));
        // Few samples: the interval reaches the slowest, and never past it.
        let few = OpenLoopRun::from_samples(10, 30, &samples[..30], Duration::from_secs(3));
        assert_eq!(few.p99_interval_us(), (28, 30));
        let none = OpenLoopRun::from_samples(10, 30, &[], Duration::from_secs(3));
        assert_eq!(none.p99_interval_us(), (0, 0));
    }

    #[test]
    fn the_python_line_is_read() {
        let out = b"noise\n{\"rate\": 1000, \"offered\": 3, \"lat_us\": [10, 20, 30], \"span_s\": 0.003, \"cpu_s\": 0.5}\n";
        let run = parse_python(out).expect("a run");
        assert_eq!((run.rate, run.offered, run.handled()), (1000, 3, 3));
        assert_eq!(run.percentile_us(0.5), 20);
        assert!(run.sustained());
    }
}
