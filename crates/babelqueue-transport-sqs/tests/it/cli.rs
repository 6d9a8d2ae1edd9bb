//! The `babelqueue` command-line tool against `sqs://`: built with the `sqs` feature (or taken
//! from `BQ_CLI`), run as a child process.

use serde_json::Value;
use std::path::PathBuf;

use crate::support::{self, Env};

const URN: &str = "urn:babel:orders:created";

/// The CLI binary: `BQ_CLI`, else `cargo build -p babelqueue-cli --features sqs` in this
/// workspace (same target directory; cargo holds no lock while tests run).
fn cli() -> PathBuf {
    if let Some(path) = std::env::var_os("BQ_CLI") {
        return PathBuf::from(path);
    }
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "-q",
            "-p",
            "babelqueue-cli",
            "--features",
            "sqs",
            "--message-format",
            "json",
        ])
        .current_dir(support::workspace())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "building the CLI failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["target"]["name"] == "babelqueue")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported the babelqueue executable")
}

fn babelqueue(env: &Env, exe: &PathBuf) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(exe);
    for (k, v) in env.child_env() {
        cmd.env(k, v);
    }
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn babelqueue_publish_and_consume_work_against_sqs() {
    let Some(env) = support::env().await else {
        return;
    };
    let exe = tokio::task::spawn_blocking(cli).await.unwrap();
    let queue = support::unique("cli");
    let url = env.create_queue(&queue, &[]).await;
    let dlq_url = env.create_queue(&format!("{queue}-dlq"), &[]).await;

    let published = support::run(babelqueue(&env, &exe).args([
        "publish",
        &env.url,
        "--queue",
        &queue,
        "--urn",
        URN,
        "--data",
        r#"{"order_id":1042}"#,
        "--count",
        "2",
        "--header",
        "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ]))
    .await;
    assert_eq!(published.len(), 2);
    let consumed = support::run(
        babelqueue(&env, &exe).args(["consume", &env.url, "--queue", &queue, "--max", "2"]),
    )
    .await;
    assert_eq!(consumed.len(), 2);
    for (line, body) in consumed.iter().zip(&published) {
        let call: Value = serde_json::from_str(line).unwrap();
        let sent: Value = serde_json::from_str(body).unwrap();
        assert_eq!(call["urn"], URN);
        assert_eq!(call["data"], sent["data"]);
        assert_eq!(call["meta"], sent["meta"]);
        assert_eq!(call["trace_id"], sent["trace_id"]);
        assert_eq!(call["attempts"], 0);
    }
    assert_eq!(env.depth(&url).await, 0);

    // With `max_messages=4` one receive takes the whole batch; `--max 1` handles one and, on
    // exit, the CLI closes the transport, which makes the two buffered messages visible again
    // at once (not after the queue's 30 s visibility timeout).
    let batched = format!(
        "{}{}max_messages=4",
        env.url,
        if env.url.contains('?') { '&' } else { '?' }
    );
    support::run(babelqueue(&env, &exe).args([
        "publish", &env.url, "--queue", &queue, "--urn", URN, "--count", "3",
    ]))
    .await;
    let one = support::run(
        babelqueue(&env, &exe).args(["consume", &batched, "--queue", &queue, "--max", "1"]),
    )
    .await;
    assert_eq!(one.len(), 1);
    let rest = support::run(babelqueue(&env, &exe).args([
        "consume",
        &env.url,
        "--queue",
        &queue,
        "--max",
        "2",
        "--idle-timeout",
        "5",
    ]))
    .await;
    assert_eq!(
        rest.len(),
        2,
        "the rest of the batch was visible again at once"
    );
    assert_eq!(env.depth(&url).await, 0);

    // A failing consumer dead-letters to <queue>-dlq after its attempts.
    support::run(
        babelqueue(&env, &exe).args(["publish", &env.url, "--queue", &queue, "--urn", URN]),
    )
    .await;
    let failed = support::run(babelqueue(&env, &exe).args([
        "consume",
        &env.url,
        "--queue",
        &queue,
        "--fail-urn",
        URN,
        "--max-attempts",
        "2",
        "--dead-letter",
        "--idle-timeout",
        "3",
    ]))
    .await;
    let attempts: Vec<i64> = failed
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["attempts"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(attempts, [0, 1]);

    // `dlq list` reads the record (drained and put back), `dlq redrive` sends it back to work.
    let listed =
        support::run(babelqueue(&env, &exe).args(["dlq", "list", &env.url, "--queue", &queue]))
            .await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let summary: Value = serde_json::from_str(&listed[0]).unwrap();
    assert_eq!(summary["reason"], "failed");
    assert_eq!(summary["urn"], URN);
    assert_eq!(summary["original_queue"], queue.as_str());
    let out = babelqueue(&env, &exe)
        .args(["dlq", "redrive", &env.url, "--queue", &queue])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains("1 redriven"),
        "{stderr}"
    );
    assert_eq!(env.depth(&dlq_url).await, 0);
    let again = support::run(
        babelqueue(&env, &exe).args(["consume", &env.url, "--queue", &queue, "--max", "1"]),
    )
    .await;
    let call: Value = serde_json::from_str(&again[0]).unwrap();
    assert_eq!(call["attempts"], 0, "a redriven message starts over");

    // A delay SQS cannot honour is an error, and nothing is sent.
    let out = babelqueue(&env, &exe)
        .args([
            "publish", &env.url, "--queue", &queue, "--urn", URN, "--delay", "901",
        ])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("0..=900"), "{stderr}");
    assert_eq!(env.depth(&url).await, 0);
}
