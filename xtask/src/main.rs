//! Repository automation, in the cargo-xtask style (`cargo xtask <command>`).
//!
//! ```text
//! cargo xtask conformance [--manifest PATH] [--results PATH] [--verbose]
//! cargo xtask conformance --all        # the project's vectors, then the official suite
//! cargo xtask suite                    # where the official suite is (fetched from PyPI if need be)
//! cargo xtask examples [--broker NAME]...  # the example producer, then worker, on each broker
//! cargo xtask bench [--quick]          # every benchmark of the workspace, figures printed
//! cargo xtask bench runtime            # codec and runtime side by side with the Python SDK
//! cargo xtask bench cli|scale|outbox   # opt-in: CLI publish, worker processes, outbox relay
//! cargo xtask fuzz [--seconds N]       # the four core cargo-fuzz targets, on stable
//! cargo xtask fuzz --all | --target NAME  # every target (the projections too), or one
//! cargo xtask audit                    # cargo deny: licenses, bans, sources, advisories
//! cargo xtask tidy                     # repository invariants, rust-version floors, no
//!                                      # work-period or issue labels in tracked text,
//!                                      # publishing metadata, the changelog's sections
//! cargo xtask release-check [--package NAME]... [--rebaseline]  # before publishing: cargo
//!                                      # package (verify), cargo semver-checks vs the kept
//!                                      # baselines ($BQ_CACHE/release)
//! cargo xtask chaos [--short] [--broker NAME]... [--scenario NAME]...  # kill workers and brokers
//! cargo xtask chaos --ha [--short] [--topology NAME]... [--fault NAME]...  # network faults, HA
//! cargo xtask ci                       # fmt, clippy, tests, no_std, docs, tidy, packaging
//!                                      # (--no-verify), conformance,
//!                                      # examples, chaos --short, chaos --ha --short,
//!                                      # fuzz (20 s per target), audit
//! ```
//!
//! Besides the standard library only `serde_json` (to read `cargo metadata`) and `sha2` (to
//! check the suite's pinned archive) are used here; the conformance runner is the
//! `babelqueue-conformance` crate, which this command builds and runs.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod audit;
mod bench;
mod chaos;
mod disk;
mod examples;
mod fuzz;
mod labels;
mod lengths;
mod msrv;
mod publish;
mod release;
mod suite;
mod tools;

/// The workspace root. `cargo run` (the `cargo xtask` alias) sets `CARGO_MANIFEST_DIR` when it
/// starts the binary; that runtime value wins over the compile-time one, because cargo reuses a
/// cached xtask binary built from a checkout at another path (its fingerprint does not include
/// the absolute path), and the baked-in path would then point at that other checkout.
fn root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The target directory the cargo this xtask starts writes to: `CARGO_TARGET_DIR` (a relative
/// one read from the repository root, where [`cargo`] starts it), else `target/` there.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root().join("target"), |dir| root().join(dir))
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    // The subcommands installed by `tools::ensure` come first.
    let mut path = vec![tools::bin_dir()];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    if let Ok(joined) = std::env::join_paths(path) {
        cmd.env("PATH", joined);
    }
    cmd
}

fn status(mut cmd: Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{shown} exited with {s}")),
        Err(e) => Err(format!("{shown} could not start: {e}")),
    }
}

/// The official suite's manifest: `../shared/conformance` (or `$BQ_SHARED_CONFORMANCE`), else
/// the copy `cargo xtask suite` fetches from PyPI.
fn official() -> Result<String, String> {
    Ok(suite::official_dir()?
        .join("manifest.json")
        .display()
        .to_string())
}

fn conformance(args: &[String]) -> Result<(), String> {
    let mut manifest: Option<String> = None;
    let mut results: Option<String> = None;
    let mut all = false;
    let mut extra = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--manifest" => manifest = it.next().cloned(),
            "--results" => results = it.next().cloned(),
            "--all" => all = true,
            "--official" => manifest = Some(official()?),
            "--verbose" | "-v" => extra.push(arg.clone()),
            other => return Err(format!("conformance: unknown argument {other:?}")),
        }
    }
    let runs: Vec<(String, String)> = if all {
        vec![
            (
                "conformance/manifest.json".into(),
                "conformance/results/own.json".into(),
            ),
            (official()?, "conformance/results/official.json".into()),
        ]
    } else {
        let manifest = manifest.unwrap_or_else(|| "conformance/manifest.json".into());
        let results = results.unwrap_or_else(|| "conformance/results/latest.json".into());
        vec![(manifest, results)]
    };
    status({
        let mut cmd = cargo();
        cmd.args([
            "build",
            "--quiet",
            "--package",
            "babelqueue-conformance",
            "--bin",
            "bq-conformance",
        ]);
        cmd
    })?;
    let mut failed = Vec::new();
    for (manifest, results) in runs {
        let mut cmd = cargo();
        cmd.args([
            "run",
            "--quiet",
            "--package",
            "babelqueue-conformance",
            "--bin",
            "bq-conformance",
            "--",
        ]);
        cmd.args(["--manifest", &manifest, "--results", &results])
            .args(&extra);
        if let Err(e) = status(cmd) {
            failed.push(format!("{manifest}: {e}"));
        }
        println!();
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

/// One CI step: a name, the cargo arguments, extra environment.
type Step = (
    &'static str,
    Vec<&'static str>,
    Vec<(&'static str, &'static str)>,
);

/// Runs cargo `steps` in order, reporting the disk before each; stops at the first that fails.
fn run_steps(suite: &std::path::Path, steps: Vec<Step>) -> Result<(), String> {
    for (name, args, env) in steps {
        disk::report();
        println!("==> {name}: cargo {}", args.join(" "));
        let mut cmd = cargo();
        cmd.args(&args).env("BQ_SHARED_CONFORMANCE", suite);
        for (k, v) in env {
            cmd.env(k, v);
        }
        status(cmd).map_err(|e| format!("step `{name}` failed: {e}"))?;
    }
    Ok(())
}

/// The `tests` step's cargo arguments; the last is `--no-fail-fast`.
const TESTS: [&str; 5] = [
    "test",
    "--workspace",
    "--all-targets",
    "--all-features",
    "--no-fail-fast",
];

/// The whole check suite, in order; stops at the first failing step.
fn ci() -> Result<(), String> {
    // Tests and benchmarks read the official suite from BQ_SHARED_CONFORMANCE: the shared
    // folder, or the copy fetched from PyPI when a clone has no ../shared.
    let suite = suite::official_dir()?;
    println!("==> official conformance suite: {}", suite.display());
    let workspace: Vec<Step> = vec![
        ("format", vec!["fmt", "--all", "--", "--check"], vec![]),
        (
            "clippy",
            vec![
                "clippy",
                "--workspace",
                "--all-targets",
                "--all-features",
                "--",
                "-D",
                "warnings",
            ],
            vec![],
        ),
        ("tests", TESTS.to_vec(), vec![]),
        (
            "doc tests",
            vec!["test", "--workspace", "--doc", "--all-features"],
            vec![],
        ),
    ];
    let rest: Vec<Step> = vec![
        (
            // A transport outside the workspace, depending on the contract crate, the envelope
            // and the testkit only, passes the contract suite.
            "a transport outside the workspace",
            vec![
                "clippy",
                "--manifest-path",
                "fixtures/outside-transport/Cargo.toml",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
            vec![],
        ),
        (
            "its contract suite",
            vec![
                "test",
                "--manifest-path",
                "fixtures/outside-transport/Cargo.toml",
            ],
            vec![],
        ),
        (
            "no_std build",
            vec![
                "build",
                "--package",
                "babelqueue-envelope",
                "--no-default-features",
            ],
            vec![],
        ),
        (
            "docs",
            vec!["doc", "--workspace", "--no-deps", "--all-features"],
            vec![("RUSTDOCFLAGS", "-D warnings")],
        ),
    ];
    run_steps(&suite, workspace)?;
    // The workspace's test executables are not run again: their disk goes to the later steps.
    disk::free_test_executables(&TESTS[..TESTS.len() - 1])?;
    run_steps(&suite, rest)?;
    println!("==> tidy");
    tidy()?;
    println!("==> packaging (cargo package --no-verify of every published crate)");
    release::package(&publish::published(&publish::metadata()?), false)?;
    println!("==> conformance (project vectors, then the official suite)");
    let result = conformance(&["--all".to_string()]);
    disk::report();
    result?;
    println!("==> examples (the producer, then the worker, on each real broker)");
    examples::examples(&[])?;
    println!(
        "==> chaos --short (every broker: worker SIGKILLs, broker restarts, a broken DLQ, malformed bodies)"
    );
    chaos::chaos(&["--short".to_string()])?;
    println!(
        "==> chaos --ha --short (Toxiproxy in front of Redis, both layouts, and RabbitMQ: latency, a reset, a 30 s black hole, a bandwidth cap; Redis with its connections frozen without a close; Redis Sentinel: the master SIGKILLed; the NATS cluster: an R3 stream's leader SIGKILLed)"
    );
    chaos::chaos(&["--ha".to_string(), "--short".to_string()])?;
    println!("==> fuzz (the four core targets, 20 s each)");
    fuzz::fuzz(&["--seconds".to_string(), "20".to_string()])?;
    println!("==> audit (cargo deny)");
    audit::audit(&[])
}

/// Invariants that no compiler checks.
fn tidy() -> Result<(), String> {
    let mut problems = Vec::new();
    let crates = root().join("crates");
    let entries = std::fs::read_dir(&crates).map_err(|e| e.to_string())?;
    for entry in entries.flatten() {
        let manifest = entry.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        if !text.contains("[lints]\nworkspace = true") {
            problems.push(format!(
                "{}: members must inherit the workspace lints",
                manifest.display()
            ));
        }
        // rust-version is per crate: the msrv check below holds each to its floor.
        for field in ["version.workspace = true", "edition.workspace = true"] {
            if !text.contains(field) {
                problems.push(format!("{}: missing `{field}`", manifest.display()));
            }
        }
    }
    problems.extend(msrv::check()?);
    problems.extend(labels::check(&root())?);
    problems.extend(lengths::check(&root())?);
    problems.extend(release::problems()?);
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap_or_default();
    let first_block: Vec<&str> = readme
        .split("```")
        .nth(1)
        .map(|b| b.lines().skip(1).filter(|l| !l.trim().is_empty()).collect())
        .unwrap_or_default();
    if first_block.len() != 2 {
        problems.push(format!(
            "README.md: the first shell block must hold exactly two commands, found {first_block:?}"
        ));
    }
    if problems.is_empty() {
        println!("tidy: ok");
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("conformance") => conformance(&args[1..]),
        Some("bench") => bench::bench(&args[1..]),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("audit") => audit::audit(&args[1..]),
        Some("tidy") => tidy(),
        Some("suite") => suite::suite(&args[1..]),
        Some("examples") => examples::examples(&args[1..]),
        Some("chaos") => chaos::chaos(&args[1..]),
        Some("ci") => ci(),
        Some("release-check") => release::release_check(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask <ci|conformance|suite|examples|bench|fuzz|audit|tidy|chaos|release-check> [options]"
            );
            eprintln!("  ci");
            eprintln!(
                "  conformance [--manifest PATH] [--results PATH] [--official] [--all] [--verbose]"
            );
            eprintln!("  suite");
            eprintln!("  examples [--broker NAME]...");
            eprintln!("  bench [--quick] | bench runtime | bench brokers | bench cli|scale|outbox");
            eprintln!("  fuzz [--seconds N] [--all | --target NAME]");
            eprintln!("  audit");
            eprintln!("  tidy");
            eprintln!("  release-check [--package NAME]... [--rebaseline]");
            eprintln!(
                "  chaos [--short] [--broker NAME]... [--scenario NAME]... [--jobs N] [--json PATH]"
            );
            eprintln!(
                "  chaos --ha [--short] [--topology NAME]... [--fault NAME]... [--jobs N] [--json PATH]"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
