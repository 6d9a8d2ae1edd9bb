//! `cargo xtask bench`: every benchmark of the workspace, or `bench runtime`, the runtime and
//! codec figures side by side with the Python SDK, in one run.
//!
//! `bench runtime` runs, one after the other on the same machine (steps 1 and 2 twice, in turn,
//! each side's best pass kept, so that a busy spell slows one pass of each side rather than all
//! of one side's):
//!
//! 1. the codec benchmark (`crates/babelqueue-envelope/benches/codec.rs`), which writes its three
//!    sized bodies (small ≈ 400 bytes, medium ≈ 1.5 KB, large ≈ 40 KB) to
//!    `<cache>/bench/bodies` and times this codec's consume-side hop and a `serde_json` `Value`
//!    round trip on each;
//! 2. `xtask/bench/python_hop.py` under the Python SDK 1.24.0 of `<cache>/venv` (installed by
//!    `scripts/brokers.sh up python`), timing the same hop on the same files;
//! 3. the runtime benchmark (`crates/babelqueue-core/benches/runtime.rs`): memory:// messages/s
//!    at concurrency 1 and 8, the best and the median of seven rounds taken in turn, with the RSS before and
//!    after, and a worker's RSS after 100 000 and 1 000 000 messages;
//! 4. concurrency 1 again, built with Cargo's default release profile (no LTO, 16 codegen
//!    units): the workspace's profile (fat LTO, one codegen unit) is what the figures above and
//!    the verdicts use, and a service gets them only if its own profile says the same, so the
//!    run shows both;
//!
//! then prints the ratios and says, for each runtime target, whether this run met it: the small
//! body's hop at least 30x the Python SDK's and at most 1.0x serde_json's `Value` round trip, at
//! least 500 000 messages/s at concurrency 1, concurrency 8 not slower than concurrency 1, and a
//! worker's RSS after 1 000 000 messages within 10% of after 100 000. The benchmarks print
//! `BQ-FIGURE` lines; this module only reads them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo, root, status, tools};

mod cli;
mod latency;
mod measure;
mod outbox;
mod scale;

/// `cargo xtask bench [--quick]`, `cargo xtask bench runtime`,
/// `cargo xtask bench brokers [--broker NAME]...`, or the opt-in `bench cli`, `bench scale` and
/// `bench outbox` (see their modules).
pub(crate) fn bench(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("runtime") => runtime(),
        Some("brokers") => brokers(&args[1..]),
        Some("cli") => cli::run(&args[1..]),
        Some("scale") => scale::run(&args[1..]),
        Some("outbox") => outbox::run(&args[1..]),
        Some(other) if !other.starts_with("--") => Err(format!(
            "unknown benchmark {other:?}: `cargo xtask bench [--quick]` runs them all, `cargo xtask bench runtime` the side-by-side runtime figures, `cargo xtask bench brokers [--broker NAME]` the side-by-side broker figures, `cargo xtask bench cli|scale|outbox` the opt-in CLI publish, worker scaling and outbox relay figures"
        )),
        _ => {
            let quick = args.iter().any(|a| a == "--quick");
            let mut cmd = cargo();
            cmd.args(["bench", "--workspace", "--benches", "--"]);
            if quick {
                cmd.args(["--warm-up-time", "1", "--measurement-time", "2"]);
            }
            status(cmd)
        }
    }
}

/// The `BQ-FIGURE` lines of a benchmark's output, each split into words after the marker.
fn figures(output: &str) -> Vec<Vec<String>> {
    output
        .lines()
        .filter_map(|line| line.strip_prefix("BQ-FIGURE "))
        .map(|rest| rest.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// Runs `cmd`, echoes its human lines, and returns its figures.
fn run_figures(mut cmd: Command) -> Result<Vec<Vec<String>>, String> {
    let shown = format!("{cmd:?}");
    let output = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("{shown} could not start: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    for line in text
        .lines()
        .filter(|l| !l.starts_with("BQ-FIGURE") && !l.trim().is_empty())
    {
        println!("  {line}");
    }
    if !output.status.success() {
        return Err(format!("{shown} exited with {}", output.status));
    }
    Ok(figures(&text))
}

fn number(words: &[String], at: usize) -> f64 {
    words
        .get(at)
        .and_then(|w| w.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The number right after the first figure line that starts with `words`.
fn figure(figures: &[Vec<String>], words: &[&str]) -> Option<f64> {
    figures
        .iter()
        .find(|f| f.len() > words.len() && f.iter().zip(words).all(|(a, b)| a == b))
        .map(|f| number(f, words.len()))
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

fn python() -> PathBuf {
    std::env::var_os("BQ_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| tools::cache_dir().join("venv"))
        .join("bin/python")
}

/// Codec hop per message, by body name: (bytes, babelqueue ns, serde_json ns).
type Hops = BTreeMap<String, (f64, f64, f64)>;

/// Passes of the codec hop, each this SDK's then the Python SDK's: a busy spell of the machine
/// then slows one pass of each side, not all of one side's rounds, and each side's best pass
/// is kept (as the runtime's configurations take their rounds in turn).
const CODEC_PASSES: usize = 2;

fn runtime() -> Result<(), String> {
    let bodies = tools::cache_dir().join("bench/bodies");
    let mut hops = Hops::new();
    let mut python_hops = BTreeMap::new();
    for pass in 1..=CODEC_PASSES {
        println!("== 1/4 codec hop, pass {pass} of {CODEC_PASSES}: babelqueue against serde_json");
        let mut codec = cargo();
        codec
            .args([
                "bench",
                "--package",
                "babelqueue-envelope",
                "--bench",
                "codec",
            ])
            .env("BQ_BENCH_FIGURES_ONLY", "1")
            .env("BQ_BENCH_BODIES_OUT", &bodies);
        for f in run_figures(codec)?
            .into_iter()
            .filter(|f| f.first().is_some_and(|k| k == "codec_hop_ns"))
        {
            let (bytes, ours, serde) = (number(&f, 2), number(&f, 3), number(&f, 4));
            let best = hops.entry(f[1].clone()).or_insert((bytes, ours, serde));
            *best = (bytes, best.1.min(ours), best.2.min(serde));
        }
        println!(
            "== 2/4 codec hop, pass {pass} of {CODEC_PASSES}: the Python SDK 1.24.0 on the same bodies"
        );
        for (name, ns) in python_hops_pass(&bodies) {
            let best = python_hops.entry(name).or_insert(ns);
            *best = f64::min(*best, ns);
        }
    }

    println!("== 3/4 runtime on memory://, {}", profile_label());
    let runtime = run_figures(runtime_bench())?;

    println!("== 4/4 runtime on memory://, concurrency 1, {DEFAULT_PROFILE}");
    let mut bench = runtime_bench();
    bench
        .env("BQ_BENCH_ONLY", "1:1")
        // Built beside the other (its own artifacts: the profile is part of their hash).
        .env("CARGO_PROFILE_BENCH_LTO", "false")
        .env("CARGO_PROFILE_BENCH_CODEGEN_UNITS", "16");
    let default_profile = run_figures(bench)?;

    report(&hops, &python_hops, &runtime);
    report_default_profile(&runtime, &default_profile);
    Ok(())
}

/// The runtime benchmark, printing only its figures.
fn runtime_bench() -> Command {
    let mut bench = cargo();
    bench
        .args([
            "bench",
            "--package",
            "babelqueue-core",
            "--bench",
            "runtime",
        ])
        .env("BQ_BENCH_FIGURES_ONLY", "1");
    bench
}

/// Cargo's own release profile, which a service that sets nothing builds with.
const DEFAULT_PROFILE: &str = "Cargo's default release profile (no LTO, 16 codegen units)";

/// The profile the main runtime figures are built with: the workspace's, unless the
/// environment overrides it.
fn profile_label() -> String {
    let overrides: Vec<String> = std::env::vars()
        .filter(|(k, _)| {
            k.starts_with("CARGO_PROFILE_BENCH_") || k.starts_with("CARGO_PROFILE_RELEASE_")
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if overrides.is_empty() {
        "the workspace's release profile (fat LTO, one codegen unit)".to_owned()
    } else {
        format!(
            "the workspace's release profile with {}",
            overrides.join(" ")
        )
    }
}

/// The concurrency 1 figure of both builds, side by side.
fn report_default_profile(runtime: &[Vec<String>], default_profile: &[Vec<String>]) {
    let best = |figures: &[Vec<String>]| figure(figures, &["runtime", "1", "1"]);
    let median = |figures: &[Vec<String>]| {
        figures
            .iter()
            .find(|f| f.len() > 4 && f[..3] == ["runtime", "1", "1"])
            .map(|f| number(f, 4))
    };
    if let (Some(ours), Some(cargo)) = (best(runtime), best(default_profile)) {
        println!(
            "  concurrency 1 with {DEFAULT_PROFILE}: best {cargo:.0} messages/s (median {:.0}), {:.2}x of {}",
            median(default_profile).unwrap_or(f64::NAN),
            cargo / ours,
            profile_label()
        );
    }
}

/// The Python SDK's hop per body name, in ns; empty (with the reason printed) without the venv.
fn python_hops_pass(bodies: &Path) -> BTreeMap<String, f64> {
    let python = python();
    if !python.exists() {
        println!(
            "  {} is missing: run `scripts/brokers.sh up python` to install the Python SDK 1.24.0; the Python column stays empty",
            python.display()
        );
        return BTreeMap::new();
    }
    let mut cmd = Command::new(&python);
    cmd.arg(root().join("xtask/bench/python_hop.py"))
        .arg(bodies)
        .arg("2");
    match run_figures(cmd) {
        Ok(figures) => figures
            .into_iter()
            .filter(|f| f.first().is_some_and(|k| k == "python_hop_ns"))
            .map(|f| (f[1].clone(), number(&f, 2)))
            .collect(),
        Err(e) => {
            println!("  the Python hop failed ({e}); the Python column stays empty");
            BTreeMap::new()
        }
    }
}

fn report(hops: &Hops, python: &BTreeMap<String, f64>, runtime: &[Vec<String>]) {
    println!();
    println!(
        "codec hop per message (verdict + decode in one pass, attempts + 1, encode), each side's best of {CODEC_PASSES} passes taken in turn:"
    );
    println!(
        "  {:<8} {:>7} {:>12} {:>12} {:>14} {:>14} {:>11}",
        "body", "bytes", "babelqueue", "serde_json", "python 1.24.0", "vs serde_json", "vs python"
    );
    for (name, (bytes, ours, serde)) in hops {
        let py = python.get(name).copied();
        println!(
            "  {:<8} {:>7} {:>9.2} µs {:>9.2} µs {:>14} {:>13.2}x {:>11}",
            name,
            bytes,
            ours / 1e3,
            serde / 1e3,
            py.map_or("-".to_owned(), |p| format!("{:.1} µs", p / 1e3)),
            ours / serde,
            py.map_or("-".to_owned(), |p| format!("{:.1}x", p / ours)),
        );
    }
    if let Some((_, ours, serde)) = hops.get("small") {
        match python.get("small") {
            Some(py) => println!(
                "  target: small body at least 30x the Python SDK: {:.1}x, {}",
                py / ours,
                verdict(py / ours >= 30.0)
            ),
            None => println!("  target: small body at least 30x the Python SDK: not measured"),
        }
        println!(
            "  target: small body at most 1.0x serde_json's Value round trip: {:.2}x, {}",
            ours / serde,
            verdict(ours / serde <= 1.0)
        );
    }

    println!();
    println!(
        "runtime on memory://, no-op handler (classify, decode, route, handle, acknowledge); the best and the median of the rounds:"
    );
    println!(
        "  {:>11} {:>8} {:>12} {:>12} {:>9} {:>18} {:>14}",
        "concurrency",
        "prefetch",
        "best msg/s",
        "median msg/s",
        "µs/msg",
        "in serde_json hops",
        "RSS before/after"
    );
    let serde_small = hops.get("small").map(|h| h.2);
    // (best, median) by (concurrency, prefetch).
    let mut rates: BTreeMap<(u64, u64), (f64, f64)> = BTreeMap::new();
    for f in runtime
        .iter()
        .filter(|f| f.first().is_some_and(|k| k == "runtime"))
    {
        let (concurrency, prefetch, best, median) =
            (number(f, 1), number(f, 2), number(f, 3), number(f, 4));
        let key = |at: usize| f.get(at).and_then(|w| w.parse::<u64>().ok()).unwrap_or(0);
        rates.insert((key(1), key(2)), (best, median));
        let per = 1e6 / best;
        println!(
            "  {:>11} {:>8} {:>12.0} {:>12.0} {:>9.2} {:>18} {:>7.0}/{:.0} MiB",
            concurrency,
            prefetch,
            best,
            median,
            per,
            serde_small.map_or("-".to_owned(), |s| format!("{:.2}", per * 1e3 / s)),
            number(f, 5) / 1024.0,
            number(f, 6) / 1024.0,
        );
    }
    if let Some(f) = runtime
        .iter()
        .find(|f| f.first().is_some_and(|k| k == "publish"))
    {
        println!(
            "  publishing (build, encode, publish): {:.0} envelopes/s one by one, {:.0} in batches of 100",
            number(f, 1),
            number(f, 2)
        );
    }
    if let Some(&(c1, c1_median)) = rates.get(&(1, 1)) {
        // The best round is the verdict: on a shared machine other work only ever adds time,
        // so the best round is the runtime's own cost; the median says how busy the machine was.
        println!(
            "  target: at least 500 000 messages/s at concurrency 1 (best round, {}): {c1:.0} (median {c1_median:.0}), {}",
            profile_label(),
            verdict(c1 >= 500_000.0)
        );
        if let Some(&(c8, c8_median)) = rates.get(&(8, 8)) {
            println!(
                "  target: concurrency 8 not slower than concurrency 1: {:.2}x (medians {:.2}x), {}",
                c8 / c1,
                c8_median / c1_median,
                verdict(c8 >= c1)
            );
        }
    }
    if let Some(f) = runtime
        .iter()
        .find(|f| f.first().is_some_and(|k| k == "rss"))
    {
        let (early, late) = (number(f, 2), number(f, 4));
        println!(
            "  target: a worker's RSS after 1 000 000 messages within 10% of after 100 000: {:.0} -> {:.0} KiB ({:+.1}%), {}",
            early,
            late,
            (late / early - 1.0) * 100.0,
            verdict(late <= early * 1.1)
        );
    }
}

/// A broker benchmark: the name `--broker` takes, its package and bench target, and its
/// throughput targets at concurrency 8 (times the Python SDK, share of the raw client loop:
/// 10x and 50% for Redis and RabbitMQ, 5x and 70% for Kafka, Artemis and Pulsar).
struct BrokerBench {
    name: &'static str,
    package: &'static str,
    bench: &'static str,
    /// The `BQ-FIGURE broker <row>` names it prints.
    rows: &'static [&'static str],
    python_times: f64,
    raw_share: f64,
}

const BROKERS: &[BrokerBench] = &[
    BrokerBench {
        name: "redis",
        package: "babelqueue-transport-redis",
        bench: "redis",
        rows: &["redis", "redis-laravel"],
        python_times: 10.0,
        raw_share: 0.5,
    },
    BrokerBench {
        name: "kafka",
        package: "babelqueue-transport-kafka",
        bench: "throughput",
        rows: &["kafka"],
        python_times: 5.0,
        raw_share: 0.7,
    },
    BrokerBench {
        name: "artemis",
        package: "babelqueue-transport-artemis",
        bench: "artemis",
        rows: &["artemis"],
        python_times: 5.0,
        raw_share: 0.7,
    },
    BrokerBench {
        name: "pulsar",
        package: "babelqueue-transport-pulsar",
        bench: "throughput",
        rows: &["pulsar"],
        python_times: 5.0,
        raw_share: 0.7,
    },
    BrokerBench {
        name: "amqp",
        package: "babelqueue-transport-amqp",
        bench: "amqp",
        rows: &["rabbitmq"],
        python_times: 10.0,
        raw_share: 0.5,
    },
    // The Python SDK 1.24.0 has no NATS transport: the raw loop and the latency are the
    // comparison.
    BrokerBench {
        name: "nats",
        package: "babelqueue-transport-nats",
        bench: "nats",
        rows: &["nats"],
        python_times: 10.0,
        raw_share: 0.5,
    },
];

/// SQS on moto: moto bounds the rates, so its target is the requests per message (at most 0.25).
const SQS: &str = "sqs";
const SQS_REQUESTS_PER_MESSAGE: f64 = 0.25;

/// `cargo xtask bench brokers [--broker NAME]...`: each broker's side-by-side benchmark on the
/// local broker (`scripts/brokers.sh up` first), then its ratios and targets.
fn brokers(args: &[String]) -> Result<(), String> {
    let mut wanted: Vec<&str> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--broker" => wanted.push(it.next().ok_or("--broker needs a name")?.as_str()),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    for name in &wanted {
        if *name != SQS && !BROKERS.iter().any(|b| b.name == *name) {
            return Err(format!("unknown broker {name:?}"));
        }
    }
    for broker in BROKERS
        .iter()
        .filter(|b| wanted.is_empty() || wanted.contains(&b.name))
    {
        println!("== {}", broker.name);
        let mut cmd = cargo();
        cmd.args([
            "bench",
            "--package",
            broker.package,
            "--bench",
            broker.bench,
        ])
        .env("BQ_BENCH_FIGURES_ONLY", "1")
        .env("BQ_REQUIRE_BROKERS", "1");
        let figures = run_figures(cmd)?;
        for row in broker.rows {
            report_broker(broker, row, &figures);
        }
        if broker.name == "redis" {
            println!();
            println!(
                "memory:// (the same open-loop schedule in the same process: the runtime and the machine alone)"
            );
            latency::report("memory", &figures);
        }
    }
    if wanted.is_empty() || wanted.contains(&SQS) {
        println!("== {SQS}");
        let mut cmd = cargo();
        cmd.args([
            "bench",
            "--package",
            "babelqueue-transport-sqs",
            "--bench",
            "throughput",
        ])
        .env("BQ_BENCH_FIGURES_ONLY", "1")
        .env("BQ_REQUIRE_BROKERS", "1");
        report_sqs(&run_figures(cmd)?);
    }
    Ok(())
}

fn report_broker(broker: &BrokerBench, row: &str, figures: &[Vec<String>]) {
    let rate = |phase: &str, who: &str| figure(figures, &["broker", row, phase, who]);
    println!();
    println!(
        "{row}: messages/s, one run; the consuming side's CPU-seconds per 1 000 messages (getrusage)"
    );
    println!(
        "  {:<20} {:>12} {:>12} {:>10}",
        "", "publish", "consume+ack", "CPU s/1k"
    );
    for who in [
        "rust-c1",
        "rust-c8",
        "rust-c8-prefetch64",
        "rust-c8-prefetch8",
        "raw",
        "raw-sdk-frames",
        "raw-unconfirmed",
        "python",
    ] {
        let (p, c) = (rate("publish", who), rate("consume", who));
        if p.is_none() && c.is_none() {
            continue;
        }
        let show = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
        let cpu = latency::cpu(figures, row, who).map_or("-".to_owned(), |v| format!("{v:.3}"));
        println!("  {who:<20} {:>12} {:>12} {cpu:>10}", show(p), show(c));
    }
    if let (Some(ours), Some(raw)) = (
        latency::cpu(figures, row, "rust-c8"),
        latency::cpu(figures, row, "raw"),
    ) {
        if broker.name == "kafka" {
            println!(
                "  target: consume CPU per record at concurrency 8 at most 2x the raw client loop's: {:.2}x, {}",
                ours / raw,
                verdict(ours / raw <= 2.0)
            );
            if ours / raw > 2.0
                && let Some(decode) = latency::cpu(figures, row, "decode")
            {
                println!("  {}", decode_bound(ours, raw, decode));
            }
        } else {
            println!(
                "  consume CPU per message at concurrency 8: {:.2}x the raw client loop's",
                ours / raw
            );
        }
    }
    if let Some(latency) = rate("latency", "rust-c1") {
        println!(
            "  target: idle-to-handled latency below 5 ms at the median: {:.2} ms, {}",
            latency / 1e3,
            verdict(latency < 5_000.0)
        );
    }
    if rate("consume", "raw").is_none() {
        println!("  (no raw client loop in this broker's benchmark yet)");
    }
    latency::report(row, figures);
    for phase in ["publish", "consume"] {
        let (Some(ours), raw, python) = (
            rate(phase, "rust-c8"),
            rate(phase, "raw"),
            rate(phase, "python"),
        ) else {
            continue;
        };
        match python {
            Some(py) => {
                println!(
                    "  target: {phase} at concurrency 8 at least {:.0}x the Python SDK: {:.1}x, {}",
                    broker.python_times,
                    ours / py,
                    verdict(ours / py >= broker.python_times)
                );
                if let Some(line) = python_multiple_bound(ours, raw, py, broker.python_times) {
                    println!("  {line}");
                }
            }
            None => println!(
                "  target: {phase} against the Python SDK: not measured (no Python row in this benchmark)"
            ),
        }
        if let Some(raw) = raw {
            println!(
                "  target: {phase} at concurrency 8 at least {:.0}% of the raw client loop: {:.0}%, {}",
                broker.raw_share * 100.0,
                ours / raw * 100.0,
                verdict(ours / raw >= broker.raw_share)
            );
            if phase == "consume"
                && ours / raw < broker.raw_share
                && let (Some(our_cpu), Some(raw_cpu)) = (
                    latency::cpu(figures, row, "rust-c8"),
                    latency::cpu(figures, row, "raw"),
                )
                && let Some(line) = cpu_rate_bound(our_cpu, raw_cpu)
            {
                println!("  {line}");
            }
        }
        if phase == "publish"
            && let Some(same) = rate(phase, "raw-sdk-frames")
        {
            println!(
                "  (the raw loop sending the SDK's own frames: {same:.0}/s; this SDK at {:.0}% of it)",
                ours / same * 100.0
            );
        }
        if phase == "publish"
            && let (Some(bare), Some(py)) = (rate(phase, "raw-unconfirmed"), python)
        {
            println!(
                "  (the raw loop without confirms, the Python SDK's durability, timed as it is: {bare:.0}/s, {:.1}x the Python SDK: the most a publisher of that durability got here)",
                bare / py
            );
        }
    }
}

/// The SQS figures: rates beside the Python SDK's (moto bounds them), and the requests per
/// message of the batched paths against the target.
fn report_sqs(figures: &[Vec<String>]) {
    let find = |kind: &str, key: &str| figure(figures, &["sqs", kind, key]);
    println!();
    println!(
        "sqs (moto): messages/s, one run (moto bounds them); the consuming side's CPU-seconds per 1 000 messages (getrusage)"
    );
    println!("  {:<32} {:>10} {:>10}", "", "msg/s", "CPU s/1k");
    let show = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
    for (label, key, who) in [
        ("rust publish, one at a time", "rust_publish", None),
        ("rust publish_batch", "rust_publish_batch", None),
        ("python publish, one at a time", "python_publish", None),
        (
            "rust consume, concurrency 1",
            "rust_consume_c1",
            Some("rust-c1"),
        ),
        (
            "rust consume, concurrency 8",
            "rust_consume_c8",
            Some("rust-c8"),
        ),
        (
            "rust consume, concurrency 10",
            "rust_consume_c10",
            Some("rust-c10"),
        ),
        ("python consume", "python_consume", Some("python")),
    ] {
        let cpu = who
            .and_then(|who| latency::cpu(figures, SQS, who))
            .map_or("-".to_owned(), |v| format!("{v:.3}"));
        println!("  {label:<32} {:>10} {cpu:>10}", show(find("rate", key)));
    }
    for (label, key) in [
        ("publish_batch", "publish_batch"),
        (
            "consume at concurrency 10 (receive 10, batched deletes)",
            "consume_c10",
        ),
    ] {
        match find("requests", key) {
            Some(per) => println!(
                "  target: {label}: at most {SQS_REQUESTS_PER_MESSAGE} requests per message: {per:.3}, {}",
                verdict(per <= SQS_REQUESTS_PER_MESSAGE)
            ),
            None => println!("  target: {label}: requests per message not measured"),
        }
    }
    latency::report(SQS, figures);
}

/// The bound of Kafka's 2x CPU target (CPU-seconds per 1 000 records): this SDK's record costs
/// the raw loop's read, the envelope's decode and the rest (delivery, dispatch,
/// acknowledgement), so 2x leaves the rest `raw - decode`.
fn decode_bound(ours: f64, raw: f64, decode: f64) -> String {
    let room = raw - decode;
    let rest = (ours - raw - decode).max(0.0);
    format!(
        "bound: the envelope's decode alone costs {decode:.4} s/1k, {:.1}x the raw loop's whole read of a record ({raw:.4}); {}; the rest of this SDK's work per record (the delivery, the dispatch, the acknowledgement) takes {rest:.4} now",
        decode / raw,
        if room > 0.0 {
            format!("2x leaves {room:.4} s/1k for the rest")
        } else {
            "2x leaves nothing for the rest".to_owned()
        }
    )
}

/// Where a multiple `times` of the Python SDK's rate `py` is missed and the broker's own
/// client, with nothing of the SDK around it, misses it too, that loop is the bound.
fn python_multiple_bound(ours: f64, raw: Option<f64>, py: f64, times: f64) -> Option<String> {
    let raw = raw.filter(|raw| ours / py < times && raw / py < times)?;
    Some(format!(
        "bound: the raw client loop does {:.1}x the Python SDK on this broker, so {times:.0}x is out of reach of any client of it; this SDK is at {:.0}% of that loop",
        raw / py,
        ours / raw * 100.0
    ))
}

/// A consumer short of the raw loop's rate that spends more CPU per message (s/1k): the CPU
/// figures are the bound.
fn cpu_rate_bound(our_cpu: f64, raw_cpu: f64) -> Option<String> {
    (raw_cpu > 0.0 && our_cpu > raw_cpu).then(|| {
        format!(
            "bound: CPU per message, {our_cpu:.4} against the raw loop's {raw_cpu:.4} s/1k ({:.1}x): a consumer bound by its CPU reaches about {:.0}% of the raw loop's rate",
            our_cpu / raw_cpu,
            raw_cpu / our_cpu * 100.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_say_what_a_missed_target_is_bound_by() {
        // Kafka's CPU per record (s/1k): the raw read 0.0012, this SDK 0.0032, the decode 0.0007.
        assert_eq!(
            decode_bound(0.0032, 0.0012, 0.0007),
            "bound: the envelope's decode alone costs 0.0007 s/1k, 0.6x the raw loop's whole read of a record (0.0012); 2x leaves 0.0005 s/1k for the rest; the rest of this SDK's work per record (the delivery, the dispatch, the acknowledgement) takes 0.0013 now"
        );
        assert!(decode_bound(0.0040, 0.0010, 0.0012).contains("2x leaves nothing for the rest"));
        // Pulsar consume: 5x the Python SDK is out of the raw crate consumer's reach.
        assert_eq!(
            python_multiple_bound(18_191.0, Some(24_275.0), 12_188.0, 5.0).as_deref(),
            Some(
                "bound: the raw client loop does 2.0x the Python SDK on this broker, so 5x is out of reach of any client of it; this SDK is at 75% of that loop"
            )
        );
        // Met, or within the raw loop's reach, or no raw loop: no bound line.
        assert_eq!(
            python_multiple_bound(70_000.0, Some(80_000.0), 12_000.0, 5.0),
            None
        );
        assert_eq!(
            python_multiple_bound(20_000.0, Some(80_000.0), 12_000.0, 5.0),
            None
        );
        assert_eq!(python_multiple_bound(20_000.0, None, 12_000.0, 5.0), None);
        // A consumer spending 2.7x the raw loop's CPU per message.
        assert_eq!(
            cpu_rate_bound(0.0032, 0.0012).as_deref(),
            Some(
                "bound: CPU per message, 0.0032 against the raw loop's 0.0012 s/1k (2.7x): a consumer bound by its CPU reaches about 37% of the raw loop's rate"
            )
        );
        assert_eq!(cpu_rate_bound(0.0010, 0.0012), None);
        assert_eq!(cpu_rate_bound(0.0010, 0.0), None);
    }

    #[test]
    fn figures_are_read_from_the_marked_lines_only() {
        let out = "codec hop, small: ...\nBQ-FIGURE codec_hop_ns small 419 3500 5900\nnoise BQ-FIGURE x\n";
        assert_eq!(
            figures(out),
            vec![vec!["codec_hop_ns", "small", "419", "3500", "5900"]]
        );
        assert!(number(&figures(out)[0], 4) == 5900.0);
        assert!(number(&figures(out)[0], 9).is_nan());
        assert_eq!(
            figure(&figures(out), &["codec_hop_ns", "small"]),
            Some(419.0)
        );
        assert_eq!(figure(&figures(out), &["codec_hop_ns", "large"]), None);
    }
}
