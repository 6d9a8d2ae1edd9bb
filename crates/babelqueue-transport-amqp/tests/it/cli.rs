//! `babelqueue publish` / `consume` against `amqp://`: the real binary, built with the `amqp`
//! feature (`cargo build -p babelqueue-cli --features amqp`, in this workspace's target dir).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::common::{self, Raw, json};

/// Builds the CLI with the `amqp` feature and returns the binary's path.
fn cli() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(&cargo)
        .current_dir(&workspace)
        .args([
            "build",
            "--quiet",
            "-p",
            "babelqueue-cli",
            "--features",
            "amqp",
            "--message-format",
            "json",
        ])
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "building the CLI failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    babelqueue_testkit::json_lines(&out.stdout, "cargo build")
        .into_iter()
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "babelqueue")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reports the babelqueue executable")
}

fn run(bin: &PathBuf, args: &[&str]) -> std::process::Output {
    let out = Command::new(bin).args(args).output().expect("the CLI runs");
    assert!(
        out.status.success(),
        "babelqueue {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_publishes_and_consumes_over_amqp() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let bin = tokio::task::spawn_blocking(cli).await.unwrap();
    let q = common::queue("cli");
    let dlq = format!("{q}.dlq");
    let raw = Raw::new(&url).await;

    run(
        &bin,
        &[
            "publish",
            &url,
            "--queue",
            &q,
            "--urn",
            "urn:babel:cli:ping",
            "--data",
            r#"{"n":7}"#,
            "--count",
            "2",
            "--header",
            "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ],
    );
    run(
        &bin,
        &[
            "publish",
            &url,
            "--queue",
            &q,
            "--urn",
            "urn:babel:cli:broken",
            "--trace-id",
            "cli-trace",
        ],
    );
    assert_eq!(raw.wait_depth(&q, 3, Duration::from_secs(5)).await, 3);

    let out = run(
        &bin,
        &[
            "consume",
            &url,
            "--queue",
            &q,
            "--urn",
            "urn:babel:cli:ping",
            "--fail-urn",
            "urn:babel:cli:broken",
            "--max-attempts",
            "2",
            "--dead-letter",
            "--max",
            "4",
            "--idle-timeout",
            "5",
            "--concurrency",
            "2",
        ],
    );
    let lines = babelqueue_testkit::json_lines(&out.stdout, "babelqueue consume");
    let pings: Vec<_> = lines
        .iter()
        .filter(|l| l["urn"] == "urn:babel:cli:ping")
        .collect();
    assert_eq!(pings.len(), 2, "{lines:?}");
    assert!(
        pings
            .iter()
            .all(|l| l["data"]["n"] == 7 && l["attempts"] == 0)
    );
    let broken: Vec<_> = lines
        .iter()
        .filter(|l| l["urn"] == "urn:babel:cli:broken")
        .collect();
    assert_eq!(
        broken
            .iter()
            .map(|l| l["attempts"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![0, 1],
        "one retry, then the dead-letter queue: {lines:?}"
    );
    assert_eq!(broken[0]["trace_id"], "cli-trace");

    assert_eq!(raw.wait_depth(&q, 0, Duration::from_secs(5)).await, 0);
    let records = raw.drain(&dlq).await;
    assert_eq!(records.len(), 1);
    let record = json(&records[0].0);
    assert_eq!(record["dead_letter"]["reason"], "failed");
    assert_eq!(record["trace_id"], "cli-trace");
    raw.delete(&[&q, &dlq]).await;
}
