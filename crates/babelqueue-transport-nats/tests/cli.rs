//! The `babelqueue` CLI on `nats://`, against the nats-server of `scripts/brokers.sh`: publish,
//! consume with a retry and a dead-letter, and `dlq list`, keeping `data` byte for byte (an
//! integer above 2^64 and a raw U+2028 line separator). The binary is built here with the `nats`
//! feature (`cargo build -p babelqueue-cli --features nats`, in this workspace's target dir).
//!
//! ```sh
//! scripts/brokers.sh up nats
//! cargo test -p babelqueue-transport-nats --test cli
//! ```

#![allow(clippy::print_stdout, clippy::missing_panics_doc)]

use std::path::{Path, PathBuf};
use std::process::Command;

use babelqueue_testkit::{broker_or_skip, json_lines, unique_queue};
use babelqueue_transport_nats::NatsTransport;

/// `data` as published: an integer no 64-bit type holds, a raw U+2028, an escaped one, and an
/// astral character. The CLI must hand every byte of it through.
const DATA: &str = "{\"big\":18446744073709551616,\"raw\":\"a\u{2028}b\",\"esc\":\"\\u2028\",\"astral\":\"\u{1F600}\"}";

fn url() -> String {
    std::env::var("BQ_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// Builds the CLI with the `nats` feature and returns the binary's path.
fn cli() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(cargo)
        .current_dir(&workspace)
        .args([
            "build",
            "--quiet",
            "-p",
            "babelqueue-cli",
            "--features",
            "nats",
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
    json_lines(&out.stdout, "cargo build")
        .into_iter()
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "babelqueue")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reports the babelqueue executable")
}

/// Runs the CLI, which must succeed; its standard output as text.
fn run(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().expect("the CLI runs");
    assert!(
        out.status.success(),
        "babelqueue {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).expect("the CLI prints UTF-8")
}

/// `DATA` as the CLI prints it: the same bytes, but U+2028 and U+2029 written as JSON escapes
/// (many line splitters break a line at them).
fn printed_data() -> String {
    DATA.replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The text of the `data` member of a JSON line, exactly as printed.
fn data_text(line: &str) -> &str {
    let start = line.find("\"data\":").expect("a data member") + "\"data\":".len();
    &line[start..start + printed_data().len()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_publishes_consumes_retries_and_dead_letters_over_nats() {
    let Some(transport) = broker_or_skip("nats-server", NatsTransport::connect(&url())).await
    else {
        return;
    };
    drop(transport);
    let bin = tokio::task::spawn_blocking(cli)
        .await
        .expect("the build ran");
    let url = url();
    let q = unique_queue("cli");

    let published = run(
        &bin,
        &[
            "publish",
            &url,
            "--queue",
            &q,
            "--urn",
            "urn:babel:cli:ping",
            "--data",
            DATA,
        ],
    );
    assert_eq!(data_text(published.trim()), printed_data(), "{published}");
    run(
        &bin,
        &[
            "publish",
            &url,
            "--queue",
            &q,
            "--urn",
            "urn:babel:cli:broken",
            "--data",
            DATA,
            "--trace-id",
            "cli-trace",
        ],
    );

    // The ping is handled once; the broken one fails, is retried once (a delayed NAK: JetStream
    // counts the delivery) and then dead-lettered.
    let consumed = run(
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
            "3",
            "--idle-timeout",
            "5",
        ],
    );
    let lines: Vec<&str> = consumed
        .lines()
        .filter(|line| line.trim_end().starts_with('{'))
        .collect();
    let calls = json_lines(consumed.as_bytes(), "babelqueue consume");
    let ping: Vec<usize> = (0..calls.len())
        .filter(|&i| calls[i]["urn"] == "urn:babel:cli:ping")
        .collect();
    assert_eq!(ping.len(), 1, "{consumed}");
    assert_eq!(calls[ping[0]]["attempts"], 0);
    let broken: Vec<usize> = (0..calls.len())
        .filter(|&i| calls[i]["urn"] == "urn:babel:cli:broken")
        .collect();
    assert_eq!(
        broken
            .iter()
            .map(|&i| calls[i]["attempts"].as_i64())
            .collect::<Vec<_>>(),
        vec![Some(0), Some(1)],
        "one retry, then the dead-letter queue: {consumed}"
    );
    for &i in ping.iter().chain(&broken) {
        assert_eq!(
            data_text(lines[i]),
            printed_data(),
            "the handler saw data byte for byte"
        );
    }

    let listed = run(&bin, &["dlq", "list", &url, "--queue", &q]);
    let records = json_lines(listed.as_bytes(), "babelqueue dlq list");
    assert_eq!(records.len(), 1, "{listed}");
    // `body` is the record as stored, a JSON string; its `data` is the published one, byte
    // for byte.
    let record = records[0]["body"].as_str().expect("the record's text");
    assert!(
        record.contains(&format!("\"data\":{DATA},")),
        "the record keeps data byte for byte: {record}"
    );
    assert_eq!(records[0]["reason"], "failed");
    assert_eq!(records[0]["attempts"], 2);
    println!("{listed}");
}
