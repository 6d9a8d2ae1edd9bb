//! `cargo xtask audit`: the supply-chain checks of `cargo deny` (configuration: deny.toml).
//!
//! * Always: `cargo deny check licenses bans sources`, which needs no network beyond what
//!   `cargo metadata` needs. A violation fails the command.
//! * When the RustSec advisory database can be fetched: `cargo deny check advisories`, and a
//!   vulnerable or yanked dependency fails the command. The database lives on GitHub; when it
//!   cannot be fetched (no network, GitHub unreachable) the command says loudly that advisories
//!   were NOT checked and why, and does not fail for that reason alone.
//!
//! cargo-deny is installed into `<cache>/tools` when it is missing ([`tools`]).

use std::process::{Command, Stdio};

use crate::{cargo, status, tools};

fn deny() -> Command {
    let mut cmd = cargo();
    cmd.arg("deny");
    cmd
}

pub(crate) fn audit(args: &[String]) -> Result<(), String> {
    if let Some(other) = args.first() {
        return Err(format!("audit: unknown argument {other:?}"));
    }
    tools::ensure(&tools::CARGO_DENY)?;

    println!("==> cargo deny check licenses bans sources");
    let mut cmd = deny();
    // The duplicate-version warnings are informational; their full inclusion trees would be
    // thousands of lines of CI log.
    cmd.args([
        "check",
        "--hide-inclusion-graph",
        "licenses",
        "bans",
        "sources",
    ]);
    status(cmd).map_err(|e| format!("license, ban or source violation: {e}"))?;

    println!("==> cargo deny fetch db (the RustSec advisory database, from GitHub)");
    let fetch = deny()
        .args(["fetch", "db"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot start cargo deny fetch: {e}"))?;
    if !fetch.status.success() {
        let output = String::from_utf8_lossy(&fetch.stderr);
        let reason = output
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no error message");
        println!();
        println!("!! ADVISORIES NOT CHECKED: the advisory database could not be fetched.");
        println!("!! reason: {}", reason.trim());
        println!("!! Licenses, bans and sources were checked. Run `cargo deny check advisories`");
        println!("!! where github.com is reachable to check for known vulnerabilities.");
        return Ok(());
    }
    println!("==> cargo deny check advisories");
    let mut cmd = deny();
    cmd.args(["check", "--hide-inclusion-graph", "advisories"]);
    status(cmd).map_err(|e| format!("advisory check failed: {e}"))
}
