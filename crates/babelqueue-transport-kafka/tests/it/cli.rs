//! `babelqueue publish` / `consume` / `kafka reinject` against `kafka://`, and across SDKs.

use std::time::Duration;

use babelqueue_core::{App, Transport};
use babelqueue_transport_kafka::KafkaTransport;
use serde_json::json;

use crate::common::{
    assert_exactly, broker, brokers, cli, committed, create_topics, header, json_lines,
    python_driver, unique, url,
};

const URN: &str = "urn:babel:orders:created";

async fn run_cli(args: &[&str]) -> Vec<serde_json::Value> {
    run_cli_stderr(args).await.0
}

/// The JSON lines and the standard error of a CLI run.
async fn run_cli_stderr(args: &[&str]) -> (Vec<serde_json::Value>, String) {
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(cli()).args(args).output(),
    )
    .await
    .expect("the CLI finishes in time")
    .expect("the CLI runs");
    (
        json_lines(&output, &format!("babelqueue {}", args.join(" "))),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn group_url(group: &str) -> String {
    let base = url();
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}group_id={group}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_publish_and_consume() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("cli"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    let published = run_cli(&[
        "publish",
        &url(),
        "--queue",
        &topic,
        "--urn",
        URN,
        "--data",
        r#"{"order_id":7}"#,
        "--count",
        "2",
    ])
    .await;
    assert_eq!(published.len(), 2);
    let consumed = run_cli(&[
        "consume",
        &group_url(&group),
        "--queue",
        &topic,
        "--max",
        "2",
        "--max-attempts",
        "1",
    ])
    .await;
    assert_eq!(consumed.len(), 2, "{consumed:?}");
    for (p, c) in published.iter().zip(&consumed) {
        assert_eq!(c["urn"], URN);
        assert_eq!(c["data"], json!({"order_id": 7}));
        assert_eq!(c["meta"]["id"], p["meta"]["id"]);
        assert_eq!(c["attempts"], 0);
    }
    assert_eq!(committed(&group, &topic), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_and_python_interoperate() {
    let Some(config) = broker() else { return };
    let (to_python, to_cli) = (unique("cli2py"), unique("py2cli"));
    create_topics(&config, &[&to_python, &to_cli], 1).await;

    let published = run_cli(&[
        "publish",
        &url(),
        "--queue",
        &to_python,
        "--urn",
        URN,
        "--data",
        r#"{"n":1}"#,
    ])
    .await;
    let lines = python_driver(&["consume", &brokers(), &to_python, "1", &unique("group")]).await;
    assert_eq!(lines[0]["meta"]["id"], published[0]["meta"]["id"]);
    assert_eq!(lines[0]["data"], json!({"n": 1}));

    let ids = python_driver(&["publish", &brokers(), &to_cli, "1"]).await;
    let consumed = run_cli(&[
        "consume",
        &group_url(&unique("group")),
        "--queue",
        &to_cli,
        "--max",
        "1",
    ])
    .await;
    assert_eq!(consumed[0]["meta"]["id"], ids[0]["id"]);
    assert_eq!(consumed[0]["meta"]["lang"], "python");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_reinject_moves_a_parked_record_back() {
    let Some(config) = broker() else { return };
    let topic = unique("cli-reinject");
    let tier = format!("{topic}.retry.1");
    create_topics(&config, &[&topic, &tier], 1).await;
    let sep = if url().contains('?') { '&' } else { '?' };
    let transport = KafkaTransport::connect(&format!("{}{sep}retry_tiers_ms=1000", url()))
        .await
        .unwrap();
    let app = App::builder(transport.clone())
        .queue(topic.clone())
        .build()
        .unwrap();
    let envelope = app.envelope(URN).data(&json!({"n": 1})).build().unwrap();
    app.publish_delayed(&topic, &envelope, Duration::from_millis(300))
        .await
        .unwrap();
    let out = run_cli(&[
        "kafka",
        "reinject",
        &url(),
        "--topic",
        &topic,
        "--tiers",
        "1000",
        "--max",
        "1",
        "--group",
        &unique("reinject"),
    ])
    .await;
    assert_eq!(out.last().unwrap()["total"], 1, "{out:?}");
    let back = assert_exactly(&topic, 1, Duration::from_secs(3)).await;
    assert_eq!(
        back[0].value.as_deref(),
        Some(envelope.encode().unwrap().as_bytes())
    );
    assert_eq!(header(&back[0], "bq-delay"), None);
    assert_eq!(header(&back[0], "bq-job"), Some(URN));
    transport.close().await.unwrap();
}

/// A worker that could retry (`max_attempts` > 1) but has no retry tiers warns at start-up;
/// with tiers, or with `max_attempts` 1, it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_warns_at_start_up_when_retries_have_no_tier() {
    let Some(config) = broker() else { return };
    let topic = unique("cli-warn");
    create_topics(&config, &[&topic], 1).await;
    run_cli(&[
        "publish",
        &url(),
        "--queue",
        &topic,
        "--urn",
        URN,
        "--count",
        "3",
    ])
    .await;
    let warning = "cannot redeliver a message with this configuration (no retry tiers)";
    for (url, max_attempts, warns) in [
        (group_url(&unique("group")), "3", true),
        (group_url(&unique("group")), "1", false),
        (
            format!("{}&retry_tiers_ms=1000", group_url(&unique("group"))),
            "3",
            false,
        ),
    ] {
        let (lines, stderr) = run_cli_stderr(&[
            "consume",
            &url,
            "--queue",
            &topic,
            "--max",
            "1",
            "--max-attempts",
            max_attempts,
        ])
        .await;
        assert_eq!(lines.len(), 1);
        assert_eq!(
            stderr.contains(warning),
            warns,
            "{url} max_attempts {max_attempts}:\n{stderr}"
        );
    }
}

/// `babelqueue dlq list` on Kafka browses the dead-letter topic in place: no "cannot browse"
/// note, the same records twice in order, nothing committed for the group, and its consumer
/// still gets all three afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_dlq_list_reads_in_place() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("cli-dlq"), unique("group"));
    let dlq = format!("{topic}.dlq");
    create_topics(&config, &[&dlq], 1).await;
    let bodies: [&[u8]; 3] = [
        br#"{"job":"urn:babel:cli:a","trace_id":"t1","data":{},"meta":{"id":"m1"},"attempts":2}"#,
        b"not an envelope",
        br#"{"job":"urn:babel:cli:b","trace_id":"t3","data":{},"meta":{"id":"m3"},"attempts":2}"#,
    ];
    for body in bodies {
        crate::common::produce_raw(&dlq, body, None, &[]).await;
    }
    let mut listings = Vec::new();
    for _ in 0..2 {
        let (lines, stderr) =
            run_cli_stderr(&["dlq", "list", &group_url(&group), "--queue", &topic]).await;
        assert!(!stderr.contains("cannot browse"), "{stderr}");
        assert!(
            stderr.contains(&format!("3 message(s) in {dlq}")),
            "{stderr}"
        );
        listings.push(lines);
    }
    assert_eq!(
        listings[0], listings[1],
        "the same records, in the same order"
    );
    let ids: Vec<&serde_json::Value> = listings[0].iter().map(|l| &l["message_id"]).collect();
    assert_eq!(ids, [&json!("m1"), &json!(null), &json!("m3")]);
    assert_eq!(listings[0][1]["body"], "not an envelope");
    assert_eq!(
        committed(&group, &dlq),
        None,
        "the listing committed nothing"
    );

    let t = KafkaTransport::connect(&group_url(&group)).await.unwrap();
    let mut left = Vec::new();
    while left.len() < 3 {
        let d = t
            .pop(&dlq, Duration::from_secs(20))
            .await
            .unwrap()
            .expect("every record is still there");
        left.push(d.body().to_vec());
        t.ack(&d).await.unwrap();
    }
    let wanted: Vec<Vec<u8>> = bodies.iter().map(|b| b.to_vec()).collect();
    assert_eq!(left, wanted, "nothing was taken");
    t.close().await.unwrap();
}
