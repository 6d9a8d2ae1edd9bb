//! `PythonPeer` against a broker-free script (`tests/python/echo.py`) run by the reference SDK's
//! interpreter (`BQ_PYTHON`); skipped (loudly) when the SDK is not installed.

use std::time::Duration;

use babelqueue_testkit::{PythonPeer, REFERENCE_SDK_VERSION};
use serde_json::json;

fn peer() -> Option<PythonPeer> {
    PythonPeer::find_or_skip(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/echo.py"),
        &["json"],
    )
}

#[tokio::test]
async fn runs_to_completion_and_reads_json_lines() {
    let Some(peer) = peer() else { return };
    let lines = peer.run(&["args", "é", "{\"x\":1}"]).await;
    assert_eq!(
        lines,
        [json!({"args": ["é", "{\"x\":1}"], "sdk": REFERENCE_SDK_VERSION})],
        "the log line is skipped"
    );
}

#[tokio::test]
async fn a_failing_run_panics_with_its_stderr() {
    let Some(peer) = peer() else { return };
    let failed = tokio::spawn(async move { peer.run(&["fail"]).await })
        .await
        .expect_err("the run panics");
    let text = failed.into_panic();
    let text = text.downcast_ref::<String>().expect("a message");
    assert!(text.contains("exit status: 3"), "{text}");
    assert!(text.contains("echo.py: failing on purpose"), "{text}");
}

#[tokio::test]
async fn a_running_peer_speaks_json_lines_both_ways() {
    let Some(peer) = peer() else { return };
    let mut process = peer.spawn(&["echo"]).await;
    let second = Duration::from_secs(10);
    assert_eq!(process.recv(second).await, Some(json!({"ready": true})));
    process.send(&json!({"n": 1, "s": "\u{2028}"})).await;
    assert_eq!(
        process.recv(second).await,
        Some(json!({"echo": {"n": 1, "s": "\u{2028}"}}))
    );
    process.send(&json!([2])).await;
    assert_eq!(process.finish().await, [json!({"echo": [2]})]);
}

#[tokio::test]
async fn a_silent_peer_fails_recv_on_time() {
    let Some(peer) = peer() else { return };
    let mut process = peer.spawn(&["echo"]).await;
    let _ready = process.recv(Duration::from_secs(10)).await;
    let waited = tokio::spawn(async move { process.recv(Duration::from_millis(200)).await })
        .await
        .expect_err("recv panics after its timeout");
    let text = waited.into_panic();
    let text = text.downcast_ref::<String>().expect("a message");
    assert!(text.contains("no JSON line within 200ms"), "{text}");
}
