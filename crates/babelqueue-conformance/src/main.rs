//! `bq-conformance`: run a conformance manifest and write the results file.
//!
//! ```text
//! bq-conformance [--manifest PATH] [--results PATH] [--verbose]
//! ```
//!
//! Exits 0 when every in-scope case passes, 1 when one fails, 2 on a usage or I/O error.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut manifest = PathBuf::from("conformance/manifest.json");
    let mut results: Option<PathBuf> = None;
    let mut verbose = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--manifest" => manifest = args.next().map(PathBuf::from).unwrap_or(manifest),
            "--results" => results = args.next().map(PathBuf::from),
            "--verbose" | "-v" => verbose = true,
            "--help" | "-h" => {
                println!("usage: bq-conformance [--manifest PATH] [--results PATH] [--verbose]");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("bq-conformance: unknown argument {other:?} (try --help)");
                return ExitCode::from(2);
            }
        }
    }
    let loaded = match babelqueue_conformance::Manifest::load(&manifest) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("bq-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    let report = babelqueue_conformance::run(&loaded);
    println!(
        "conformance {} — {}",
        report.conformance_version,
        manifest.display()
    );
    print!("{}", report.summary());
    let failures = report.failures();
    for line in failures.iter().take(if verbose { usize::MAX } else { 40 }) {
        println!("  {line}");
    }
    if !verbose && failures.len() > 40 {
        println!("  … {} more (use --verbose)", failures.len() - 40);
    }
    if let Some(path) = results {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(parent);
        }
        let text = serde_json::to_string_pretty(&report.to_json()).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, text + "\n") {
            eprintln!("bq-conformance: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("results written to {}", path.display());
    }
    if report.all_in_scope_pass() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
