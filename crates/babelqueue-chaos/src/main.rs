//! `bq-chaos`: the chaos suite of BabelQueue for Rust, on the real brokers of
//! `scripts/brokers.sh`. Run it with `cargo xtask chaos [--short]`.
//!
//! ```text
//! bq-chaos [--short] [--broker NAME]... [--scenario NAME]... [--jobs N] [--json PATH]
//! bq-chaos --ha [--short] [--topology NAME]... [--fault NAME]... [--jobs N] [--json PATH]
//! ```
//!
//! Brokers: `redis` (reliable layout), `redis-laravel`, `rabbitmq`, `sqs`, `kafka`, `artemis`,
//! `pulsar`. Scenarios: `sigkill`, `dlq-failure`, `malformed`, `broker-restart` (see
//! `docs/chaos.md`). One table row per broker and scenario: messages, kills or restarts, lost,
//! duplicated, stranded, corrupted, worker crashes, wall time. The exit code is 1 when a row
//! failed (lost, stranded or corrupted messages, a crashed or wedged worker, or a failed check),
//! 2 on a usage error.
//!
//! `--ha` runs the high-availability and network-fault rows instead (module `ha`): one row per
//! topology and fault (Toxiproxy in front of Redis, the Redis Laravel layout, RabbitMQ and NATS:
//! latency, a reset, a 30 s black hole, a bandwidth cap), with the time from the fault to the
//! first message handled after it and the connections the worker opened.
//!
//! The same binary is the worker the harness starts (and SIGKILLs): `bq-chaos worker …`
//! (hidden).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};

mod bodies;
mod brokers;
mod fleet;
mod ha;
mod records;
mod report;
mod scenarios;
mod tally;
mod worker;

use brokers::{Broker, Env};
use report::Row;
use scenarios::{Ctx, Scenario, Sizes};

#[derive(Debug, Parser)]
#[command(
    name = "bq-chaos",
    about = "Kill workers and brokers, break dead-letter queues, publish malformed bodies; count what was lost."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Small counts (for CI): 200 messages and 3 kills per sigkill row, no Pulsar restart.
    #[arg(long)]
    short: bool,
    /// Only this broker (repeatable): redis, redis-laravel, rabbitmq, sqs, kafka, artemis, pulsar.
    #[arg(long = "broker")]
    brokers: Vec<String>,
    /// Only this scenario (repeatable): sigkill, dlq-failure, malformed, broker-restart.
    #[arg(long = "scenario")]
    scenarios: Vec<String>,
    /// The high-availability and network-fault rows (docs/chaos.md, `--ha`) instead of the
    /// scenarios.
    #[arg(long)]
    ha: bool,
    /// With --ha: only this topology (repeatable): redis, redis-laravel, rabbitmq, nats.
    #[arg(long = "topology")]
    topologies: Vec<String>,
    /// With --ha: only this fault (repeatable): latency, reset, blackhole, bandwidth.
    #[arg(long = "fault")]
    faults: Vec<String>,
    /// How many brokers (topologies, with --ha) run their rows at once (0: all).
    #[arg(long, default_value_t = 0)]
    jobs: usize,
    /// The repository root (default: found from this crate's manifest directory).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Where the JSON table goes (default: $BQ_CACHE/chaos/last.json).
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A worker child (started by the harness).
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Worker(args)) => worker_main(args),
        None => harness_main(&cli),
    }
}

fn worker_main(args: worker::WorkerArgs) -> ExitCode {
    let filter = std::env::var("BQ_CHAOS_LOG").unwrap_or_else(|_| "warn,babelqueue=info".into());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bq-chaos worker: runtime: {e}");
            return ExitCode::from(3);
        }
    };
    match runtime.block_on(worker::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bq-chaos worker: {e}");
            ExitCode::from(3)
        }
    }
}

fn default_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../..")
}

fn harness_main(cli: &Cli) -> ExitCode {
    if cli.ha {
        return ha_main(cli);
    }
    if !cli.topologies.is_empty() || !cli.faults.is_empty() {
        eprintln!("bq-chaos: --topology and --fault go with --ha");
        return ExitCode::from(2);
    }
    let mut selected = Vec::new();
    for name in &cli.brokers {
        match Broker::parse(name) {
            Some(b) => selected.push(b),
            None => {
                eprintln!(
                    "bq-chaos: unknown broker {name:?} (known: {})",
                    Broker::ALL.map(Broker::name).join(", ")
                );
                return ExitCode::from(2);
            }
        }
    }
    let mut scenarios = Vec::new();
    for name in &cli.scenarios {
        match Scenario::parse(name) {
            Some(s) => scenarios.push(s),
            None => {
                eprintln!(
                    "bq-chaos: unknown scenario {name:?} (known: {})",
                    Scenario::ALL.map(Scenario::name).join(", ")
                );
                return ExitCode::from(2);
            }
        }
    }
    if selected.is_empty() {
        selected = Broker::ALL.to_vec();
    }
    if scenarios.is_empty() {
        scenarios = Scenario::ALL.to_vec();
    }
    selected.sort();
    selected.dedup();
    scenarios.sort();
    scenarios.dedup();

    let Some(Setup {
        env,
        chaos_dir,
        run,
        dir,
        exe,
    }) = setup(cli)
    else {
        return ExitCode::FAILURE;
    };
    let sizes = if cli.short {
        Sizes::short()
    } else {
        Sizes::full()
    };
    let mode = if cli.short { "short" } else { "full" };
    eprintln!(
        "bq-chaos: run {run} ({mode}): {} × {} rows, logs in {}",
        selected.len(),
        scenarios.len(),
        dir.display()
    );
    let ctx = Arc::new(Ctx {
        env,
        exe,
        run: run.clone(),
        dir: dir.clone(),
        sizes,
    });
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    let started = Instant::now();
    let jobs = if cli.jobs == 0 {
        selected.len()
    } else {
        cli.jobs
    };
    let rows = runtime.block_on(run_lanes(ctx.clone(), &selected, &scenarios, jobs, started));
    let total = started.elapsed();

    // Every restarted broker up again, whatever happened.
    let mut restarted: Vec<&str> = rows
        .iter()
        .filter(|r| r.scenario == Scenario::BrokerRestart.name())
        .filter(|r| r.status() != report::Status::NotApplicable)
        .filter_map(|r| Broker::parse(&r.broker))
        .filter(|b| !b.is_redis())
        .map(Broker::service)
        .collect();
    restarted.dedup();
    let brokers_up = runtime.block_on(async {
        let mut problems = Vec::new();
        for service in &restarted {
            if let Err(e) = ctx
                .env
                .brokers_sh(&["up", service], Duration::from_secs(300))
                .await
            {
                problems.push(format!("{service}: {e}"));
            }
        }
        problems
    });

    let (pass, verdict) = report::verdict(&rows, total);
    println!();
    print!("{}", report::table(&rows));
    println!();
    print!("{}", report::details(&rows));
    println!();
    if !brokers_up.is_empty() {
        println!("brokers NOT up again: {}", brokers_up.join("; "));
    } else if !restarted.is_empty() {
        println!("brokers up again: {}", restarted.join(", "));
    }
    println!("{verdict}");
    let json_path = cli
        .json
        .clone()
        .unwrap_or_else(|| chaos_dir.join("last.json"));
    let json = serde_json::json!({
        "date": report::utc_now(),
        "run": run,
        "mode": mode,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "seconds": (total.as_secs_f64() * 10.0).round() / 10.0,
        "pass": pass,
        "verdict": verdict,
        "logs": dir.display().to_string(),
        "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
    });
    write_json(&json_path, &json);
    if pass && brokers_up.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What every run needs: the broker environment, a run id and directory, and the pinned worker
/// executable.
struct Setup {
    env: Env,
    chaos_dir: PathBuf,
    run: String,
    dir: PathBuf,
    exe: PathBuf,
}

fn setup(cli: &Cli) -> Option<Setup> {
    let root = cli.root.clone().unwrap_or_else(default_root);
    let root = root.canonicalize().unwrap_or(root);
    let env = Env::load(&root);
    let chaos_dir = env.cache.join("chaos");
    let run = run_id();
    let dir = chaos_dir.join("runs").join(&run);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("bq-chaos: {}: {e}", dir.display());
        return None;
    }
    prune_runs(&chaos_dir.join("runs"), 5);
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("bq-chaos: own executable: {e}");
            return None;
        }
    };
    // Workers are started from a link to this very executable in the run directory: a build
    // that replaces target/debug/bq-chaos during the run (another `cargo build`) must not change
    // the workers under the harness.
    let pinned = dir.join("bq-chaos");
    let exe = if std::fs::hard_link(&exe, &pinned).is_ok() || std::fs::copy(&exe, &pinned).is_ok() {
        pinned
    } else {
        exe
    };
    Some(Setup {
        env,
        chaos_dir,
        run,
        dir,
        exe,
    })
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(8)
        .max_blocking_threads(64)
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("bq-chaos: runtime: {e}");
            None
        }
    }
}

/// Writes the run's JSON table.
fn write_json(path: &Path, json: &serde_json::Value) {
    match serde_json::to_string_pretty(json)
        .map_err(|e| e.to_string())
        .and_then(|text| std::fs::write(path, text + "\n").map_err(|e| e.to_string()))
    {
        Ok(()) => println!("table written to {}", path.display()),
        Err(e) => eprintln!("bq-chaos: {}: {e}", path.display()),
    }
}

/// `--ha`: the topology × fault rows.
fn ha_main(cli: &Cli) -> ExitCode {
    if !cli.brokers.is_empty() || !cli.scenarios.is_empty() {
        eprintln!("bq-chaos: with --ha, choose rows with --topology and --fault");
        return ExitCode::from(2);
    }
    let rows = match ha::select(&cli.topologies, &cli.faults, cli.short) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("bq-chaos: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    // The components first (`scripts/brokers.sh up NAME` is a no-op for one that is up), then
    // the environment, which names the ports they took.
    let root = cli.root.clone().unwrap_or_else(default_root);
    let root = root.canonicalize().unwrap_or(root);
    let components = ha::components(&rows);
    let probe_env = Env::load(&root);
    for component in &components {
        if let Err(e) =
            runtime.block_on(probe_env.brokers_sh(&["up", component], Duration::from_secs(600)))
        {
            eprintln!("bq-chaos: `scripts/brokers.sh up {component}` failed: {e}");
            return ExitCode::FAILURE;
        }
    }
    let Some(Setup {
        env,
        chaos_dir,
        run,
        dir,
        exe,
    }) = setup(cli)
    else {
        return ExitCode::FAILURE;
    };
    let sizes = if cli.short {
        ha::HaSizes::short()
    } else {
        ha::HaSizes::full()
    };
    let mode = if cli.short { "short" } else { "full" };
    let count: usize = rows.iter().map(|(_, faults)| faults.len()).sum();
    eprintln!(
        "bq-chaos: run {run} (--ha, {mode}): {count} rows on {} topologies ({}), logs in {}",
        rows.len(),
        components.join(", "),
        dir.display()
    );
    let ctx = Arc::new(Ctx {
        env,
        exe,
        run: run.clone(),
        dir: dir.clone(),
        sizes: Sizes::short(),
    });
    let started = Instant::now();
    let jobs = if cli.jobs == 0 { rows.len() } else { cli.jobs };
    let table = runtime.block_on(ha::run_lanes(ctx, Arc::new(sizes), rows, jobs, |row| {
        eprintln!("[{}] {}", report::utc_now(), ha::progress_line(row))
    }));
    let total = started.elapsed();
    let (pass, verdict) = report::verdict(&table, total);
    println!();
    print!("{}", report::ha_table(&table));
    println!();
    print!("{}", report::details(&table));
    println!();
    println!("{verdict}");
    let json_path = cli
        .json
        .clone()
        .unwrap_or_else(|| chaos_dir.join("last-ha.json"));
    let json = serde_json::json!({
        "date": report::utc_now(),
        "run": run,
        "mode": format!("ha-{mode}"),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "seconds": (total.as_secs_f64() * 10.0).round() / 10.0,
        "pass": pass,
        "verdict": verdict,
        "logs": dir.display().to_string(),
        "rows": table.iter().map(ha_json).collect::<Vec<_>>(),
    });
    write_json(&json_path, &json);
    if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// An HA row as JSON: the scenarios' keys, and `topology` and `fault` for `broker` and
/// `scenario`.
fn ha_json(row: &Row) -> serde_json::Value {
    match row.to_json() {
        serde_json::Value::Object(map) => map
            .into_iter()
            .map(|(key, value)| match key.as_str() {
                "broker" => ("topology".to_owned(), value),
                "scenario" => ("fault".to_owned(), value),
                _ => (key, value),
            })
            .collect::<serde_json::Map<_, _>>()
            .into(),
        other => other,
    }
}

/// One lane per broker, `jobs` lanes at once; each lane runs its scenarios in order.
async fn run_lanes(
    ctx: Arc<Ctx>,
    brokers: &[Broker],
    scenarios: &[Scenario],
    jobs: usize,
    started: Instant,
) -> Vec<Row> {
    let permits = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let rows: Arc<Mutex<Vec<(Broker, Scenario, Row)>>> = Arc::new(Mutex::new(Vec::new()));
    let mut lanes = tokio::task::JoinSet::new();
    for &broker in brokers {
        let (ctx, permits, rows) = (ctx.clone(), permits.clone(), rows.clone());
        let scenarios = scenarios.to_vec();
        lanes.spawn(async move {
            let Ok(_permit) = permits.acquire().await else {
                return;
            };
            let t = Instant::now();
            let unusable = scenarios::preflight(&ctx, broker).await.err();
            for scenario in scenarios {
                let row = match &unusable {
                    None => scenarios::run_row(&ctx, broker, scenario).await,
                    Some(e) => {
                        let mut row = Row::new(broker.name(), scenario.name());
                        row.fail(format!(
                            "the broker is not usable: a first publish failed ({e}); the row \
                             did not run"
                        ));
                        row.elapsed = t.elapsed();
                        row
                    }
                };
                eprintln!(
                    "[{:>7}] {}/{}: {} ({} msgs, {} kills, lost {}, dup {}, stranded {}, corrupted {}, crashes {}) in {}",
                    report::duration(started.elapsed()),
                    row.broker,
                    row.scenario,
                    match row.status() {
                        report::Status::Ok => "ok",
                        report::Status::Fail => "FAIL",
                        report::Status::NotApplicable => "n/a",
                    },
                    row.messages,
                    row.kills,
                    row.lost,
                    row.duplicated,
                    row.stranded,
                    row.corrupted,
                    row.crashes,
                    report::duration(row.elapsed)
                );
                if let Ok(mut rows) = rows.lock() {
                    rows.push((broker, scenario, row));
                }
            }
        });
    }
    while lanes.join_next().await.is_some() {}
    let mut rows = match Arc::try_unwrap(rows) {
        Ok(m) => m.into_inner().unwrap_or_default(),
        Err(shared) => shared.lock().map(|r| r.clone()).unwrap_or_default(),
    };
    rows.sort_by_key(|(b, s, _)| (*b, *s));
    rows.into_iter().map(|(_, _, row)| row).collect()
}

/// A short id for this run: queue names, ids and the log directory carry it.
fn run_id() -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mixed = (millis as u64) ^ (u64::from(std::process::id()) << 24);
    format!("{:07x}", mixed & 0x0fff_ffff)
}

/// Keeps the `keep` newest run directories.
fn prune_runs(runs: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    let mut dirs: Vec<(SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    dirs.sort();
    let excess = dirs.len().saturating_sub(keep);
    for (_, path) in dirs.into_iter().take(excess) {
        let _ = std::fs::remove_dir_all(path);
    }
}
