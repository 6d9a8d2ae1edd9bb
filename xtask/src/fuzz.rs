//! `cargo xtask fuzz [--seconds N] [--all | --target NAME]`: builds the cargo-fuzz targets in
//! `fuzz/` on the stable toolchain, seeds their corpora from the conformance vectors, runs each
//! one for a bounded time and reports, per target, the executions and whether it found a crash.
//!
//! * Which targets: with no option, the core targets (`decode`, `scanner`, `dead_letter`,
//!   `gdpr_unprotect`: every `[[bin]]` of fuzz/Cargo.toml without `required-features`), which
//!   build from the envelope, core and GDPR crates alone; this is what `cargo xtask ci` runs.
//!   `--all` adds the `projection_*` targets, one per transport, and `--target NAME` runs one.
//!   A projection target needs the fuzz package's `transports` feature, which pulls in every
//!   broker stack (the AWS SDK, the Kafka, Pulsar, AMQP and Redis clients, TLS); built with
//!   coverage instrumentation and AddressSanitizer that costs far more CPU than the core targets
//!   (about 24 min against a few), which is why CI leaves them out. When a selected target needs
//!   the feature, `--features transports` goes to the build and to every run (`cargo fuzz run`
//!   rebuilds when its features differ from the build's).
//! * Stable toolchain: cargo-fuzz passes `-Zsanitizer=address` (and checks for a nightly
//!   compiler) only through rustc's unstable-options gate; `RUSTC_BOOTSTRAP=1` opens that gate on
//!   a stable compiler, so no nightly toolchain is needed. It is set for the cargo-fuzz
//!   processes only, never for the workspace build.
//! * Where things go: the fuzz build in `<cache>/fuzz-target`, the corpora in
//!   `<cache>/fuzz-corpus/<target>` (kept between runs, so a cached CI directory keeps what
//!   earlier runs learned), libFuzzer's logs in `<cache>/fuzz-logs`, where `<cache>` is the
//!   parent of `CARGO_TARGET_DIR` when it is set, else `target/` in the repository.
//! * A crash: libFuzzer writes the input into a scratch directory; it is copied to
//!   `fuzz/artifacts/<target>/` (the cargo-fuzz convention, ignored by git) and printed with the
//!   command that replays it. The command then fails.

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{cargo, root, status, tools};

/// Seconds per target when `--seconds` is not given: a smoke run, as CI does.
const DEFAULT_SECONDS: u64 = 20;

/// Our conformance files whose bodies seed every corpus (paths from the repository root); the
/// official suite's are added from wherever `cargo xtask suite` finds it (`../shared`, or the
/// copy fetched from PyPI), so a clone without `../shared` seeds from the same 710 cases.
const MANIFESTS: [&str; 1] = ["conformance/manifest.json"];
const FIXTURE_DIRS: [&str; 1] = ["conformance/fixtures"];

/// Members of the manifests that hold a message body or a stored value, as text …
const BODY_KEYS: [&str; 5] = ["body", "raw", "member", "handler_body", "stored"];
/// … or as base64 (bodies that are not UTF-8).
const BASE64_BODY_KEYS: [&str; 1] = ["body_base64"];

/// The fuzz package's feature the `projection_*` targets require.
const TRANSPORTS_FEATURE: &str = "transports";

struct Options {
    seconds: u64,
    target: Option<String>,
    all: bool,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        seconds: DEFAULT_SECONDS,
        target: None,
        all: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seconds" => {
                let value = it.next().ok_or("fuzz: --seconds needs a number")?;
                options.seconds =
                    value.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                        format!("fuzz: --seconds {value:?} is not a positive number")
                    })?;
            }
            "--target" => {
                let value = it.next().ok_or("fuzz: --target needs a target name")?;
                options.target = Some(value.clone());
            }
            "--all" => options.all = true,
            other => return Err(format!("fuzz: unknown argument {other:?}")),
        }
    }
    if options.all && options.target.is_some() {
        return Err("fuzz: --all and --target exclude each other".to_owned());
    }
    Ok(options)
}

/// Where the fuzz build, corpora and logs live (see the module docs).
fn cache_dir() -> PathBuf {
    tools::cache_dir()
}

/// A fuzz target: a `[[bin]]` of fuzz/Cargo.toml.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    name: String,
    /// Whether the bin requires the `transports` feature (a `projection_*` target).
    transports: bool,
}

/// The fuzz targets of fuzz/Cargo.toml.
fn targets() -> Result<Vec<Target>, String> {
    let manifest = root().join("fuzz/Cargo.toml");
    let text = fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let targets = parse_targets(&text);
    if targets.is_empty() {
        return Err(format!("no [[bin]] target in {}", manifest.display()));
    }
    Ok(targets)
}

/// The `[[bin]]` sections of a manifest: each one's `name`, and whether its
/// `required-features` name the transports feature.
fn parse_targets(manifest: &str) -> Vec<Target> {
    let mut targets: Vec<Target> = Vec::new();
    let mut in_bin = false;
    let value = |rest: &str| rest.trim_start().trim_start_matches('=').trim().to_owned();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
            if in_bin {
                targets.push(Target {
                    name: String::new(),
                    transports: false,
                });
            }
            continue;
        }
        let Some(current) = targets.last_mut().filter(|_| in_bin) else {
            continue;
        };
        if let Some(rest) = line.strip_prefix("required-features") {
            current.transports = value(rest).contains(&format!("\"{TRANSPORTS_FEATURE}\""));
        } else if let Some(rest) = line.strip_prefix("name") {
            current.name = value(rest).trim_matches('"').to_owned();
        }
    }
    targets.retain(|t| !t.name.is_empty());
    targets
}

/// Installs cargo-fuzz into `<cache>/tools` when `cargo fuzz` is not available.
fn ensure_cargo_fuzz() -> Result<(), String> {
    tools::ensure(&tools::CARGO_FUZZ)
}

/// `cargo fuzz <subcommand>` on the stable toolchain, building into `target_dir`, with the
/// `transports` feature when `transports` is set.
///
/// `cargo fuzz run` rebuilds before it runs, so build and run must get the same build options
/// (here: the target directory and the feature, besides cargo-fuzz's defaults: optimised, debug
/// assertions and overflow checks on, AddressSanitizer).
fn cargo_fuzz(subcommand: &str, target_dir: &Path, transports: bool) -> Command {
    let mut cmd = cargo();
    // With the unstable-options gate open, cargo reports the sanitizer to build scripts and the
    // `cc` crate then compiles bundled C libraries with `-fsanitize=address` as well. librdkafka's
    // own configure script (rdkafka-sys, under the Kafka transport) links test programs against
    // such a library without the sanitizer runtime and fails. No C code runs in the fuzz targets,
    // so C is compiled without the sanitizer (`cc` documents `-fno-sanitize=address` in CFLAGS
    // as the way to turn it off); the Rust code keeps it.
    for var in ["CFLAGS", "CXXFLAGS"] {
        let mut flags = std::env::var(var).unwrap_or_default();
        if !flags.contains("-fno-sanitize=address") {
            flags = format!("{flags} -fno-sanitize=address").trim().to_owned();
        }
        cmd.env(var, flags);
    }
    cmd.env("RUSTC_BOOTSTRAP", "1")
        .arg("fuzz")
        .arg(subcommand)
        .arg("--target-dir")
        .arg(target_dir);
    if transports {
        cmd.arg("--features").arg(TRANSPORTS_FEATURE);
    }
    cmd
}

pub(crate) fn fuzz(args: &[String]) -> Result<(), String> {
    let options = parse_args(args)?;
    let all = targets()?;
    let selected: Vec<Target> = match &options.target {
        Some(name) => match all.iter().find(|t| &t.name == name) {
            Some(target) => vec![target.clone()],
            None => {
                let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
                return Err(format!(
                    "fuzz: no target {name:?}; the targets are {}",
                    names.join(", ")
                ));
            }
        },
        None if options.all => all,
        // The core targets: what CI runs.
        None => all.into_iter().filter(|t| !t.transports).collect(),
    };
    // One feature set for the build and every run, so no run rebuilds.
    let transports = selected.iter().any(|t| t.transports);
    let cache = cache_dir();
    let target_dir = cache.join("fuzz-target");
    ensure_cargo_fuzz()?;

    let started = Instant::now();
    println!(
        "==> building {} fuzz target(s) on the stable toolchain (RUSTC_BOOTSTRAP=1{}) into {}",
        selected.len(),
        if transports {
            ", --features transports"
        } else {
            ""
        },
        target_dir.display()
    );
    let mut build = cargo_fuzz("build", &target_dir, transports);
    if let [only] = selected.as_slice() {
        build.arg(&only.name);
    }
    status(build).map_err(|e| format!("fuzz build failed: {e}"))?;
    println!("    built in {:.0?}", started.elapsed());

    let seeds = seed_inputs()?;
    println!(
        "==> {} seed inputs from the conformance vectors",
        seeds.len()
    );

    let mut results = Vec::new();
    for target in &selected {
        results.push(run_target(
            &target.name,
            transports,
            &target_dir,
            &cache,
            &seeds,
            options.seconds,
        )?);
    }

    println!();
    println!(
        "{:<20} {:>12} {:>10}  result",
        "target", "executions", "exec/s"
    );
    for r in &results {
        let executions = r
            .executions
            .map_or_else(|| "?".to_owned(), |n| n.to_string());
        let rate = r
            .rate
            .or_else(|| r.executions.map(|n| n / r.seconds.max(1)))
            .map_or_else(|| "?".to_owned(), |n| n.to_string());
        let verdict = if r.crashes.is_empty() && r.ok {
            "ok".to_owned()
        } else if r.crashes.is_empty() {
            format!("FAILED (no artifact; see {})", r.log.display())
        } else {
            format!("CRASH ({} input(s) saved)", r.crashes.len())
        };
        println!("{:<20} {executions:>12} {rate:>10}  {verdict}", r.target);
    }
    println!(
        "    fuzz step took {:.0?} in all (build included)",
        started.elapsed()
    );

    let failed: Vec<&RunResult> = results
        .iter()
        .filter(|r| !r.ok || !r.crashes.is_empty())
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    let features = if transports {
        format!(" --features {TRANSPORTS_FEATURE}")
    } else {
        String::new()
    };
    for r in &failed {
        for crash in &r.crashes {
            println!(
                "    replay: CFLAGS=-fno-sanitize=address CXXFLAGS=-fno-sanitize=address \
                 RUSTC_BOOTSTRAP=1 cargo fuzz run --target-dir {}{features} {} {}",
                target_dir.display(),
                r.target,
                crash.display()
            );
        }
    }
    Err(format!(
        "fuzzing found a problem in: {}",
        failed
            .iter()
            .map(|r| r.target.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

struct RunResult {
    target: String,
    seconds: u64,
    executions: Option<u64>,
    /// libFuzzer's own average executions per second.
    rate: Option<u64>,
    ok: bool,
    crashes: Vec<PathBuf>,
    log: PathBuf,
}

fn run_target(
    target: &str,
    transports: bool,
    target_dir: &Path,
    cache: &Path,
    seeds: &[Vec<u8>],
    seconds: u64,
) -> Result<RunResult, String> {
    let corpus = cache.join("fuzz-corpus").join(target);
    let scratch = cache.join("fuzz-artifacts").join(target);
    let logs = cache.join("fuzz-logs");
    for dir in [&corpus, &scratch, &logs] {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // Stale artifacts of an earlier run would be reported again.
    clear_dir(&scratch)?;
    for seed in seeds {
        let path = corpus.join(format!("seed-{:016x}", digest(seed)));
        if !path.exists() {
            fs::write(&path, seed).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
    }

    let log = logs.join(format!("{target}.log"));
    let log_file =
        fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let log_err = log_file
        .try_clone()
        .map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    println!("==> fuzz {target} for {seconds} s (log: {})", log.display());
    let mut cmd = cargo_fuzz("run", target_dir, transports);
    cmd.arg(target)
        .arg(&corpus)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-artifact_prefix={}/", scratch.display()))
        .arg("-print_final_stats=1")
        // An input that takes 10 s is a hang worth reporting, not a slow machine.
        .arg("-timeout=10")
        .stdout(Stdio::from(log_file))
        .stderr(Stdio::from(log_err));
    let ok = cmd
        .status()
        .map_err(|e| format!("cannot start cargo fuzz run {target}: {e}"))?
        .success();
    let output = fs::read_to_string(&log).unwrap_or_default();
    let executions = executions(&output);
    let rate = final_stat(&output, "average_exec_per_sec");

    let mut crashes = Vec::new();
    let stable = root().join("fuzz/artifacts").join(target);
    for entry in fs::read_dir(&scratch).map_err(|e| e.to_string())?.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !["crash-", "leak-", "timeout-", "oom-", "slow-unit-"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            continue;
        }
        fs::create_dir_all(&stable)
            .map_err(|e| format!("cannot create {}: {e}", stable.display()))?;
        let kept = stable.join(&*name);
        fs::copy(entry.path(), &kept)
            .map_err(|e| format!("cannot copy {}: {e}", entry.path().display()))?;
        let bytes = fs::read(&kept).unwrap_or_default();
        println!("    {target}: {name} saved as {}", kept.display());
        println!("      input ({} bytes): {}", bytes.len(), escaped(&bytes));
        crashes.push(kept);
    }
    if !ok || !crashes.is_empty() {
        println!("    --- from {} ---", log.display());
        for line in failure_excerpt(&output) {
            println!("    {line}");
        }
    }
    match executions {
        Some(n) => println!("    {target}: {n} executions in {seconds} s"),
        None => println!("    {target}: no execution count in the log"),
    }
    Ok(RunResult {
        target: target.to_owned(),
        seconds,
        executions,
        rate,
        ok,
        crashes,
        log,
    })
}

/// What a failed run's log says about the failure: the panic message (or the sanitizer's
/// report) and libFuzzer's summary; the last 40 lines when there is neither (a build error).
fn failure_excerpt(output: &str) -> Vec<&str> {
    let lines: Vec<&str> = output.lines().collect();
    let mut shown = Vec::new();
    let starts = [
        "panicked at",
        "ERROR: AddressSanitizer",
        "ERROR: LeakSanitizer",
    ];
    if let Some(i) = lines
        .iter()
        .position(|l| starts.iter().any(|s| l.contains(s)))
    {
        // The message, up to the stack trace.
        shown.extend(
            lines[i..]
                .iter()
                .take(12)
                .take_while(|l| !l.starts_with("stack backtrace") && !l.contains("    #0 ")),
        );
    }
    if let Some(i) = lines.iter().position(|l| l.starts_with("SUMMARY:")) {
        shown.extend(lines[i..].iter().take(2));
    }
    if shown.is_empty() {
        shown.extend(&lines[lines.len().saturating_sub(40)..]);
    }
    shown
}

fn clear_dir(dir: &Path) -> Result<(), String> {
    for entry in fs::read_dir(dir).map_err(|e| e.to_string())?.flatten() {
        if entry.path().is_file() {
            fs::remove_file(entry.path())
                .map_err(|e| format!("cannot remove {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// One of the final statistics libFuzzer prints with `-print_final_stats=1`
/// (`stat::<name>: N`).
fn final_stat(output: &str, name: &str) -> Option<u64> {
    let prefix = format!("stat::{name}:");
    output
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .filter_map(|s| s.trim().parse::<u64>().ok())
        .next_back()
}

/// libFuzzer's execution count: `stat::number_of_executed_units`, else the last `Done N runs …`
/// or `#N …` status line (a run cut short by a crash prints no final statistics).
fn executions(output: &str) -> Option<u64> {
    let number = |s: &str| s.trim().parse::<u64>().ok();
    final_stat(output, "number_of_executed_units")
        .or_else(|| {
            output
                .lines()
                .filter_map(|l| l.strip_prefix("Done ")?.split_whitespace().next())
                .filter_map(number)
                .next_back()
        })
        .or_else(|| {
            output
                .lines()
                .filter_map(|l| l.strip_prefix('#')?.split_whitespace().next())
                .filter_map(number)
                .next_back()
        })
}

/// A byte string as Rust would write it in a `b"…"` literal (so it can go into a test as is),
/// shortened past 1 KiB.
fn escaped(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(1024)];
    let mut out = String::from("b\"");
    for &b in shown {
        out.extend(std::ascii::escape_default(b).map(char::from));
    }
    out.push('"');
    if shown.len() < bytes.len() {
        out.push_str(" …");
    }
    out
}

fn digest(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

/// Every seed: the fixture files, the bodies inside the manifests (ours and the official
/// suite's), and the committed seeds in fuzz/seeds. When the official suite cannot be had (no
/// `../shared` and no network), that is said and its seeds are left out.
fn seed_inputs() -> Result<Vec<Vec<u8>>, String> {
    let base = root();
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut manifests: Vec<PathBuf> = MANIFESTS.iter().map(|m| base.join(m)).collect();
    let mut dirs: Vec<PathBuf> = FIXTURE_DIRS.iter().map(|d| base.join(d)).collect();
    match crate::suite::official_dir() {
        Ok(official) => {
            manifests.push(official.join("manifest.json"));
            dirs.push(official.join("fixtures"));
        }
        Err(e) => eprintln!("fuzz: seeding without the official suite ({e})"),
    }
    for dir in dirs.into_iter().chain([base.join("fuzz/seeds")]) {
        if let Ok(entries) = fs::read_dir(&dir) {
            files.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_file()));
        }
    }
    files.sort();
    for file in files {
        seeds.push(fs::read(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?);
    }
    for manifest in manifests {
        let Ok(text) = fs::read_to_string(&manifest) else {
            continue;
        };
        let value =
            json::parse(&text).map_err(|e| format!("{}: not JSON: {e}", manifest.display()))?;
        collect_bodies(&value, None, &mut seeds);
    }
    seeds.sort();
    seeds.dedup();
    Ok(seeds)
}

fn collect_bodies(value: &json::Value, key: Option<&str>, out: &mut Vec<Vec<u8>>) {
    match value {
        json::Value::Str(bytes) if key.is_some_and(|k| BODY_KEYS.contains(&k)) => {
            out.push(bytes.clone());
        }
        json::Value::Str(bytes) if key.is_some_and(|k| BASE64_BODY_KEYS.contains(&k)) => {
            if let Some(decoded) = std::str::from_utf8(bytes).ok().and_then(base64_decode) {
                out.push(decoded);
            }
        }
        json::Value::Array(items) => {
            for item in items {
                collect_bodies(item, key, out);
            }
        }
        json::Value::Object(members) => {
            for (k, v) in members {
                collect_bodies(v, Some(k), out);
            }
        }
        _ => {}
    }
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let sextet = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    };
    let bytes: Vec<u8> = text.bytes().filter(|b| *b != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for &c in chunk {
            n = (n << 6) | sextet(c)?;
        }
        n <<= 6 * (4 - chunk.len());
        let three = n.to_be_bytes();
        out.extend_from_slice(&three[1..chunk.len()]);
    }
    Some(out)
}

mod json;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_targets_are_the_ones_requiring_transports() {
        let manifest = r#"
[package]
name = "babelqueue-fuzz"

[dependencies]
babelqueue-transport-amqp = { path = "x", optional = true }

[features]
transports = ["dep:babelqueue-transport-amqp"]

[[bin]]
name = "decode"
path = "fuzz_targets/decode.rs"
test = false

[[bin]]
name = "projection_amqp"
path = "fuzz_targets/projection_amqp.rs"
required-features = ["transports"]
test = false
"#;
        assert_eq!(
            parse_targets(manifest),
            [
                Target {
                    name: "decode".into(),
                    transports: false
                },
                Target {
                    name: "projection_amqp".into(),
                    transports: true
                },
            ]
        );
        let options = parse_args(&["--all".into(), "--seconds".into(), "5".into()]).unwrap();
        assert!(options.all && options.target.is_none() && options.seconds == 5);
        assert!(parse_args(&["--all".into(), "--target".into(), "decode".into()]).is_err());
    }

    #[test]
    fn reads_libfuzzer_counts() {
        let log = "#1024\tpulse  cov: 10\nDone 4242 runs in 2 second(s)\n\
                   stat::number_of_executed_units: 4243\nstat::average_exec_per_sec: 2121\n";
        assert_eq!(executions(log), Some(4243));
        assert_eq!(executions("Done 17 runs in 1 second(s)\n"), Some(17));
        assert_eq!(executions("#99\tDONE   cov: 3\n"), Some(99));
        assert_eq!(executions("nothing here"), None);
    }

    #[test]
    fn shows_the_panic_message_and_the_summary() {
        let log = "INFO: Seed: 1\n#2 NEW\nthread '<unnamed>' panicked at src/x.rs:1:2:\n\
                   left != right\nstack backtrace:\n   0: frame\n\
                   SUMMARY: libFuzzer: deadly signal\nMS: 1 ChangeBit-\n";
        assert_eq!(
            failure_excerpt(log),
            [
                "thread '<unnamed>' panicked at src/x.rs:1:2:",
                "left != right",
                "SUMMARY: libFuzzer: deadly signal",
                "MS: 1 ChangeBit-",
            ]
        );
        assert_eq!(
            failure_excerpt("error: linker failed"),
            ["error: linker failed"]
        );
    }

    #[test]
    fn collects_bodies_from_manifests() {
        let text = r#"{"cases":[{"body":"{\"job\":\"urn:\\ud800x\"}"},
            {"body_base64":"//4="},{"name":"x","expect":{"raw":"\ud800"}}]}"#;
        let value = json::parse(text).unwrap();
        let mut out = Vec::new();
        collect_bodies(&value, None, &mut out);
        assert_eq!(
            out,
            vec![
                br#"{"job":"urn:\ud800x"}"#.to_vec(),
                vec![0xff, 0xfe],
                vec![0xed, 0xa0, 0x80],
            ]
        );
    }

    #[test]
    fn seeds_include_the_official_suite_wherever_it_comes_from() {
        // ../shared when present, else the copy `cargo xtask suite` fetched from PyPI.
        let official = crate::suite::official_dir().expect("the official suite");
        let text = std::fs::read_to_string(official.join("manifest.json")).unwrap();
        let mut bodies = Vec::new();
        collect_bodies(&json::parse(&text).unwrap(), None, &mut bodies);
        assert!(bodies.len() > 100, "{} bodies", bodies.len());
        let seeds = seed_inputs().unwrap();
        let missing = bodies
            .iter()
            .filter(|b| seeds.binary_search(b).is_err())
            .count();
        assert_eq!(missing, 0, "every official body seeds the corpora");
    }

    #[test]
    fn base64_round_trips_the_rfc_vectors() {
        for (text, bytes) in [
            ("", &b""[..]),
            ("Zg==", b"f"),
            ("Zm8=", b"fo"),
            ("Zm9v", b"foo"),
            ("Zm9vYmFy", b"foobar"),
        ] {
            assert_eq!(base64_decode(text).as_deref(), Some(bytes));
        }
    }
}
