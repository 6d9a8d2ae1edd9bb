//! Disk on the CI machine: what `cargo xtask ci` reports between steps, and what it frees once
//! the test steps have run.
//!
//! A full run builds over 110 test executables (every crate's unit tests, each integration test
//! file, each bench built as a test); each links its dependencies statically, so together they
//! are most of the target directory. Nothing after the test steps runs them again (docs,
//! packaging, conformance, the examples, chaos and fuzz build binaries of their own), so `ci`
//! deletes them before it goes on: the later steps, the fuzz build and the installed tools then
//! have that room on a small disk.

use std::path::PathBuf;
use std::process::Command;

use crate::{cargo, target_dir};

/// Prints the free space on the target directory's disk and the directory's size, so a CI log
/// shows how close a run came to filling the disk. Best effort: a missing `df`/`du` is ignored.
pub(crate) fn report() {
    let target = target_dir();
    let df = Command::new("df")
        .arg("-h")
        .arg("--output=avail")
        .arg(&target)
        .output();
    let du = Command::new("du").arg("-sh").arg(&target).output();
    let free = df
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().nth(1).map(|l| l.trim().to_string()));
    let used = du
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.split_whitespace().next().map(str::to_string));
    if let (Some(free), Some(used)) = (free, used) {
        println!("    (target dir {used}, {free} free on its disk)");
    }
}

/// Deletes the test executables `cargo test <args> --no-run` names (all of them fresh after the
/// test steps, so cargo builds nothing here), and prints how many and how much.
pub(crate) fn free_test_executables(test_args: &[&str]) -> Result<(), String> {
    let mut cmd = cargo();
    cmd.args(test_args)
        .args(["--no-run", "--message-format=json"])
        .stderr(std::process::Stdio::null());
    let out = cmd
        .output()
        .map_err(|e| format!("listing the test executables: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "listing the test executables: cargo exited with {}",
            out.status
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let (mut count, mut bytes) = (0usize, 0u64);
    for path in test_executables(&text) {
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if std::fs::remove_file(&path).is_ok() {
            count += 1;
            bytes += size;
        }
    }
    println!(
        "    (deleted {count} test executables, {} MB: no later step runs them)",
        bytes / 1_000_000
    );
    Ok(())
}

/// The executables of test-profile artifacts in cargo's JSON messages: the unit tests of every
/// library and binary, the integration tests and the benches built as tests. A binary target
/// (the CLI, `bq-chaos`) is not a test artifact and stays.
fn test_executables(messages: &str) -> Vec<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == true)
        .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_test_profile_executables_are_chosen() {
        let messages = [
            // An integration test: chosen.
            r#"{"reason":"compiler-artifact","profile":{"test":true},"executable":"/t/debug/deps/it-1"}"#,
            // The CLI binary: a build artifact, kept.
            r#"{"reason":"compiler-artifact","profile":{"test":false},"executable":"/t/debug/babelqueue"}"#,
            // A library: no executable.
            r#"{"reason":"compiler-artifact","profile":{"test":false},"executable":null}"#,
            // Not an artifact at all.
            r#"{"reason":"build-finished","success":true}"#,
            "not json",
            // A bench built as a test: chosen.
            r#"{"reason":"compiler-artifact","profile":{"test":true},"executable":"/t/debug/deps/throughput-2"}"#,
        ]
        .join("\n");
        assert_eq!(
            test_executables(&messages),
            vec![
                PathBuf::from("/t/debug/deps/it-1"),
                PathBuf::from("/t/debug/deps/throughput-2")
            ]
        );
    }
}
