//! `cargo xtask chaos [--short] [--broker NAME]... [--scenario NAME]... [--jobs N]`: builds and
//! runs `bq-chaos` (crates/babelqueue-chaos), the chaos suite on the real brokers of
//! `scripts/brokers.sh` (they must be up: `scripts/brokers.sh up`). It prints one table row per
//! broker and scenario, writes the table as JSON to `$BQ_CACHE/chaos/last.json`, and fails when a
//! row lost, stranded or corrupted a message, or failed a check.
//!
//! `cargo xtask chaos --ha [--short] [--topology NAME]... [--fault NAME]...`: the
//! high-availability and network-fault rows instead (one per topology and fault, with recovery
//! time and connection counts; `$BQ_CACHE/chaos/last-ha.json`). The harness starts the HA
//! components it needs (`scripts/brokers.sh up toxiproxy`).

use crate::{cargo, status};

pub(crate) fn chaos(args: &[String]) -> Result<(), String> {
    let mut pass = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--short" | "--ha" => pass.push(arg.clone()),
            "--broker" | "--scenario" | "--topology" | "--fault" | "--jobs" | "--json" => {
                let value = it
                    .next()
                    .ok_or_else(|| format!("chaos: {arg} needs a value"))?;
                pass.push(arg.clone());
                pass.push(value.clone());
            }
            other => return Err(format!("chaos: unknown argument {other:?}")),
        }
    }
    status({
        let mut cmd = cargo();
        cmd.args([
            "build",
            "--quiet",
            "--package",
            "babelqueue-chaos",
            "--bin",
            "bq-chaos",
        ]);
        cmd
    })?;
    let mut cmd = cargo();
    cmd.args([
        "run",
        "--quiet",
        "--package",
        "babelqueue-chaos",
        "--bin",
        "bq-chaos",
        "--",
    ]);
    cmd.args(&pass);
    status(cmd)
}
