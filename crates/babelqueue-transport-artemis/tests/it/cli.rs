//! `babelqueue publish` / `babelqueue consume` against `artemis://`: the `babelqueue` binary of
//! `babelqueue-cli`, built with its `artemis` feature (or the binary named by `BQ_CLI`).

use std::path::PathBuf;

use crate::common::{broker, python, queue, run_python, url};

/// The CLI binary: `BQ_CLI`, else `cargo build -p babelqueue-cli --features artemis`.
async fn cli() -> PathBuf {
    if let Some(path) = std::env::var_os("BQ_CLI") {
        return PathBuf::from(path);
    }
    let output = tokio::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "-p",
            "babelqueue-cli",
            "--features",
            "artemis",
            "--bin",
            "babelqueue",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .await
        .expect("run cargo");
    assert!(
        output.status.success(),
        "building the CLI failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["target"]["name"] == "babelqueue")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported the babelqueue executable")
}

async fn run(cli: &PathBuf, args: &[&str]) -> Vec<serde_json::Value> {
    let output = tokio::process::Command::new(cli)
        .args(args)
        .output()
        .await
        .expect("run the CLI");
    assert!(
        output.status.success(),
        "babelqueue {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn babelqueue_publish_and_consume() {
    let Some(_broker) = broker().await else {
        return;
    };
    let cli = cli().await;
    let q = queue("cli");
    let url = url();
    let published = run(
        &cli,
        &[
            "publish",
            &url,
            "--queue",
            &q,
            "--urn",
            "urn:babel:cli:ping",
            "--data",
            r#"{"n":1,"note":"café"}"#,
            "--trace-id",
            "cli-trace",
            "--count",
            "3",
        ],
    )
    .await;
    assert_eq!(published.len(), 3);
    let consumed = run(
        &cli,
        &[
            "consume",
            &url,
            "--queue",
            &q,
            "--max",
            "3",
            "--idle-timeout",
            "5",
        ],
    )
    .await;
    assert_eq!(consumed.len(), 3);
    for (line, sent) in consumed.iter().zip(&published) {
        assert_eq!(line["urn"], "urn:babel:cli:ping");
        assert_eq!(line["trace_id"], "cli-trace");
        assert_eq!(line["data"], serde_json::json!({"n": 1, "note": "café"}));
        assert_eq!(line["meta"]["id"], sent["meta"]["id"]);
        assert_eq!(line["attempts"], 0);
    }

    // A failing URN is retried and dead-lettered by the CLI's worker; a bad URL is refused.
    // (Each part uses its own queue: the CLI exits without closing the transport, so the very
    // last acknowledgement of a run can be lost with the process and the message redelivered,
    // at least once; see the crate docs.)
    let q2 = queue("cli-fail");
    run(
        &cli,
        &[
            "publish",
            &url,
            "--queue",
            &q2,
            "--urn",
            "urn:babel:cli:fail",
        ],
    )
    .await;
    let calls = run(
        &cli,
        &[
            "consume",
            &url,
            "--queue",
            &q2,
            "--fail-urn",
            "urn:babel:cli:fail",
            "--max",
            "2",
            "--max-attempts",
            "2",
            "--dead-letter",
            "--idle-timeout",
            "5",
        ],
    )
    .await;
    let attempts: Vec<i64> = calls
        .iter()
        .map(|l| l["attempts"].as_i64().unwrap())
        .collect();
    assert_eq!(attempts, [0, 1]);
    let bad = tokio::process::Command::new(&cli)
        .args([
            "publish",
            "artemis://h?credit=0",
            "--queue",
            "q",
            "--urn",
            "urn:x",
        ])
        .output()
        .await
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("credit"),
        "{bad:?}"
    );

    // --delay uses Artemis scheduled delivery.
    let q3 = queue("cli-delay");
    let started = std::time::Instant::now();
    run(
        &cli,
        &[
            "publish",
            &url,
            "--queue",
            &q3,
            "--urn",
            "urn:babel:cli:later",
            "--delay",
            "1.5",
        ],
    )
    .await;
    let later = run(
        &cli,
        &[
            "consume",
            &url,
            "--queue",
            &q3,
            "--max",
            "1",
            "--idle-timeout",
            "10",
        ],
    )
    .await;
    assert_eq!(later[0]["urn"], "urn:babel:cli:later");
    assert!(started.elapsed() >= std::time::Duration::from_millis(1400));

    // The CLI's messages are read by the Python SDK too.
    let q4 = queue("cli-python");
    if let Some(py) = python() {
        run(
            &cli,
            &[
                "publish",
                &url,
                "--queue",
                &q4,
                "--urn",
                "urn:babel:cli:ping",
                "--data",
                r#"{"n":2}"#,
            ],
        )
        .await;
        let lines = run_python(
            &py,
            &["consume", &url, &q4, "1", "--urn", "urn:babel:cli:ping"],
        )
        .await;
        assert_eq!(lines[0]["data"], serde_json::json!({"n": 2}));
    }
}

/// `babelqueue dlq list` browses the dead-letter queue in place: no "drains it" note, the same
/// records twice, and a worker still gets every message afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn babelqueue_dlq_list_reads_in_place() {
    use babelqueue_core::Transport;

    let Some(_broker) = broker().await else {
        return;
    };
    let cli = cli().await;
    let q = queue("cli-dlq");
    let dlq = format!("{q}.dlq");
    let url = url();
    let t = crate::common::transport().await;
    let bodies: [&[u8]; 3] = [
        br#"{"job":"urn:babel:cli:a","trace_id":"t1","data":{},"meta":{"id":"m1"},"attempts":2}"#,
        b"not an envelope",
        br#"{"job":"urn:babel:cli:b","trace_id":"t3","data":{},"meta":{"id":"m3"},"attempts":2}"#,
    ];
    for body in bodies {
        t.publish(&dlq, body).await.unwrap();
    }
    let mut listings = Vec::new();
    for _ in 0..2 {
        let output = tokio::process::Command::new(&cli)
            .args(["dlq", "list", &url, "--queue", &q])
            .output()
            .await
            .expect("run the CLI");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{}\n{stderr}", output.status);
        assert!(!stderr.contains("cannot browse"), "{stderr}");
        assert!(
            stderr.contains(&format!("3 message(s) in {dlq}")),
            "{stderr}"
        );
        listings.push(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    assert_eq!(listings[0].lines().count(), 3, "{}", listings[0]);
    assert_eq!(
        listings[0], listings[1],
        "the same records, in the same order"
    );
    assert!(listings[0].contains("m1") && listings[0].contains("m3"));
    let left = crate::common::drain(&t, &dlq, std::time::Duration::from_secs(2)).await;
    let wanted: Vec<Vec<u8>> = bodies.iter().map(|b| b.to_vec()).collect();
    assert_eq!(left, wanted, "nothing was taken");
    t.close().await.unwrap();
}
