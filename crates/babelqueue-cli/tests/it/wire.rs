//! What crosses the wire: `publish` refuses what its consumers would refuse, `publish --raw`
//! sends bytes as they are, `consume --output raw|wire` shows them as they came, and the
//! consumer's edges a script relies on (`--max-deliveries`, the idle timeout under `release`,
//! line separators, the configuration knobs).

use crate::common;

use std::time::Duration;

use babelqueue::{Headers, MemoryTransport, Outgoing, Transport};
use base64::Engine as _;
use common::{babelqueue, json_lines, printed, run_memory, stderr, stdout};
use serde_json::Value;

const ENVELOPE: &[u8] = br#"{"job":"urn:babel:orders:created","trace_id":"t-1","data":{"n":12345678901234567890,"s":"a/b"},"meta":{"id":"m-1","queue":"orders"},"attempts":0,"x-ext":{"k":[]}}"#;

#[test]
fn publish_refuses_data_its_consumers_would_dead_letter_and_names_the_member() {
    let out = babelqueue(
        &[
            "publish",
            "memory://",
            "--queue",
            "q",
            "--urn",
            "urn:a",
            "--data",
            r#"{"x":1e400}"#,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    assert!(
        stderr(&out).contains("data.x: 1e400 is not a finite number"),
        "{}",
        printed(&out)
    );
    assert_eq!(stdout(&out), "", "nothing was published");

    // A whole --count is refused before the first envelope goes out.
    let out = babelqueue(
        &[
            "publish",
            "memory://",
            "--queue",
            "q",
            "--urn",
            "urn:a",
            "--count",
            "250",
            "--data",
            r#"{"deep":[{"v":-1e999}]}"#,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    assert!(
        stderr(&out).contains("data.deep[0].v: -1e999"),
        "{}",
        printed(&out)
    );
    assert_eq!(stdout(&out), "");

    // `inspect` names the member the same way.
    let out = babelqueue(&["inspect"], Some(br#"{"job":"urn:a","data":{"x":1e400}}"#));
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stdout(&out).contains(r#""poison_cause":"data.x: 1e400 is not a finite number""#),
        "{}",
        stdout(&out)
    );
}

/// `publish memory:// --queue q --raw --body-file PATH EXTRA...`.
async fn publish_raw(memory: &MemoryTransport, path: &str, extra: &[&str]) -> common::Ran {
    let mut args = vec![
        "publish",
        "memory://",
        "--queue",
        "q",
        "--raw",
        "--body-file",
        path,
    ];
    args.extend(extra);
    run_memory(memory, &args).await
}

#[tokio::test]
async fn publish_raw_sends_the_bytes_as_they_are_and_refuses_poison_unless_allowed() {
    let memory = MemoryTransport::new();
    let dir = std::env::temp_dir().join(format!("bq-cli-raw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, body: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        path.display().to_string()
    };
    // Spacing, key order and a 20-digit integer a codec would never write: sent as they are.
    let odd = file(
        "odd.json",
        b" {\"data\":{\"n\":12345678901234567890} , \"job\":\"urn:a\"}\n",
    );
    let ran = publish_raw(&memory, &odd, &[]).await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let sent = std::fs::read(&odd).unwrap();
    assert_eq!(json_lines(&ran.stdout)[0]["bytes"], sent.len());
    assert_eq!(memory.bodies("q"), vec![sent]);

    let poison = file("poison.bin", b"\xff\xfe{garbage");
    let ran = publish_raw(&memory, &poison, &[]).await;
    assert_eq!(ran.status, 1, "{ran:?}");
    assert!(ran.stderr.contains("not valid UTF-8"), "{ran:?}");
    assert!(ran.stderr.contains("--allow-poison"), "{ran:?}");
    assert_eq!(memory.len("q"), 1);

    let ran = publish_raw(&memory, &poison, &["--allow-poison", "--count", "2"]).await;
    assert_eq!(ran.status, 0, "{ran:?}");
    assert_eq!(
        memory.bodies("q")[1..],
        [b"\xff\xfe{garbage".to_vec(), b"\xff\xfe{garbage".to_vec()]
    );

    // --raw takes no --urn or --data; --allow-poison only goes with --raw.
    for args in [
        &[
            "publish",
            "memory://",
            "--queue",
            "q",
            "--raw",
            "--urn",
            "urn:a",
        ][..],
        &[
            "publish",
            "memory://",
            "--queue",
            "q",
            "--urn",
            "urn:a",
            "--allow-poison",
        ][..],
    ] {
        let ran = run_memory(&memory, args).await;
        assert_eq!(ran.status, 2, "{args:?}: {ran:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();

    // From standard input, through the binary.
    let out = babelqueue(
        &["publish", "memory://", "--queue", "q", "--raw"],
        Some(ENVELOPE),
    );
    assert!(out.status.success(), "{}", printed(&out));
}

/// The exact bytes a `body` / `body_base64` member of a line reads back to.
fn body_of(line: &Value) -> Vec<u8> {
    match (line.get("body"), line.get("body_base64")) {
        (Some(text), None) => text.as_str().unwrap().as_bytes().to_vec(),
        (None, Some(b64)) => base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap())
            .unwrap(),
        other => panic!("neither body nor body_base64: {other:?}"),
    }
}

/// `q` holding an envelope with headers and an unknown member, a poison body, and an envelope
/// no handler is registered for.
async fn seeded() -> MemoryTransport {
    let memory = MemoryTransport::new();
    let headers = Headers::from([("traceparent".to_owned(), "00-ab-cd-01".to_owned())]);
    memory
        .send(&Outgoing::new("q", ENVELOPE).headers(&headers))
        .await
        .unwrap();
    memory.publish("q", b"\xff\xfe{garbage").await.unwrap();
    memory
        .publish("q", br#"{"job":"urn:babel:unknown","attempts":0}"#)
        .await
        .unwrap();
    memory
}

#[tokio::test]
async fn consume_output_raw_prints_every_delivery_byte_for_byte() {
    let memory = seeded().await;
    let ran = run_memory(
        &memory,
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--urn",
            "urn:babel:orders:created",
            "--output",
            "raw",
            "--max-deliveries",
            "3",
            "--on-unknown-urn",
            "delete",
            "--dead-letter",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let lines = json_lines(&ran.stdout);
    assert_eq!(lines.len(), 3, "{}", ran.stdout);
    let bodies: Vec<Vec<u8>> = lines.iter().map(body_of).collect();
    assert_eq!(bodies[0], ENVELOPE);
    assert_eq!(bodies[1], b"\xff\xfe{garbage");
    assert_eq!(bodies[2], br#"{"job":"urn:babel:unknown","attempts":0}"#);
    assert!(
        ran.stderr
            .contains("1 handler call(s), 3 deliveries settled"),
        "{ran:?}"
    );
}

#[tokio::test]
async fn consume_output_wire_shows_members_headers_facts_and_the_broker_view() {
    let memory = seeded().await;
    let ran = run_memory(
        &memory,
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--urn",
            "urn:babel:orders:created",
            "--output",
            "wire",
            "--max-deliveries",
            "3",
            "--on-unknown-urn",
            "dead_letter",
            "--dead-letter",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let lines = json_lines(&ran.stdout);
    assert_eq!(lines.len(), 3, "{}", ran.stdout);
    let handled = &lines[0];
    assert_eq!(handled["outcome"], "acked");
    assert_eq!(handled["urn"], "urn:babel:orders:created");
    assert_eq!(body_of(handled), ENVELOPE);
    // Every top-level member as it came, the unknown one too; big integers kept.
    assert_eq!(handled["members"]["x-ext"], serde_json::json!({"k": []}));
    assert!(
        ran.stdout.contains(r#""n":12345678901234567890"#),
        "{}",
        ran.stdout
    );
    assert_eq!(handled["headers"]["traceparent"], "00-ab-cd-01");
    assert_eq!(handled["facts"]["native_attempts"], 0);
    assert!(handled["broker"]["properties"]["delivery_tag"].is_string());

    let poison = &lines[1];
    assert_eq!(poison["outcome"], "dead_lettered");
    assert_eq!(poison["members"], Value::Null);
    assert_eq!(body_of(poison), b"\xff\xfe{garbage");
    assert_eq!(lines[2]["outcome"], "dead_lettered");
    assert_eq!(lines[2]["urn"], "urn:babel:unknown");
    assert_eq!(memory.len("q.dlq"), 2);
}

#[tokio::test]
async fn max_deliveries_ends_a_run_that_meets_only_poison() {
    let memory = MemoryTransport::new();
    for _ in 0..3 {
        memory.publish("q", b"not an envelope").await.unwrap();
    }
    let ran = tokio::time::timeout(
        Duration::from_secs(20),
        run_memory(
            &memory,
            &[
                "consume",
                "memory://",
                "--queue",
                "q",
                "--max",
                "1",
                "--max-deliveries",
                "2",
                "--dead-letter",
            ],
        ),
    )
    .await
    .expect("--max-deliveries ends the run");
    assert_eq!(ran.status, 0, "{ran:?}");
    assert!(
        ran.stderr
            .contains("0 handler call(s), 2 deliveries settled"),
        "{ran:?}"
    );
    assert_eq!((memory.len("q"), memory.len("q.dlq")), (1, 2));
}

#[test]
fn release_of_the_same_message_does_not_keep_an_idle_consumer_alive() {
    // The consume loop runs on a thread of its own: before the rule it never went idle and
    // never yielded, so only a timeout outside its runtime could end the test.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ran = runtime.block_on(async {
            let memory = MemoryTransport::new();
            memory
                .publish("q", br#"{"job":"urn:nobody","attempts":0}"#)
                .await
                .unwrap();
            let ran = run_memory(
                &memory,
                &[
                    "consume",
                    "memory://",
                    "--queue",
                    "q",
                    "--urn",
                    "urn:somebody",
                    "--on-unknown-urn",
                    "release",
                    "--idle-timeout",
                    "0.3",
                ],
            )
            .await;
            (ran, memory.len("q"))
        });
        let _ = done.send(ran);
    });
    let (ran, left) = finished
        .recv_timeout(Duration::from_secs(15))
        .expect("the idle timeout ends the run");
    assert_eq!(ran.status, 0, "{ran:?}");
    assert_eq!(left, 1, "the released message is still there");
}

#[tokio::test]
async fn line_separators_are_escaped_in_what_the_cli_prints_never_on_the_wire() {
    let memory = MemoryTransport::new();
    let body = "{\"job\":\"urn:a\",\"data\":{\"s\":\"x\u{2028}y\u{2029}z\"},\"attempts\":0}";
    memory.publish("q", body.as_bytes()).await.unwrap();
    for output in ["call", "raw"] {
        let memory = memory.clone();
        let ran = run_memory(
            &memory,
            &[
                "consume",
                "memory://",
                "--queue",
                "q",
                "--max",
                "1",
                "--output",
                output,
            ],
        )
        .await;
        assert_eq!(ran.status, 0, "{ran:?}");
        assert!(!ran.stdout.contains(['\u{2028}', '\u{2029}']), "{output}");
        assert!(ran.stdout.contains(r"x\u2028y\u2029z"), "{}", ran.stdout);
        // Python's splitlines (and JavaScript tooling) sees one line, which reads back exactly.
        let lines = json_lines(&ran.stdout);
        assert_eq!(lines.len(), 1);
        let text = match output {
            "raw" => String::from_utf8(body_of(&lines[0])).unwrap(),
            _ => lines[0]["data"]["s"].as_str().unwrap().to_owned(),
        };
        assert!(text.contains("x\u{2028}y\u{2029}z"));
        // Put it back for the next output form.
        memory.publish("q", body.as_bytes()).await.unwrap();
    }
}

#[tokio::test]
async fn consume_takes_the_configuration_pages_knobs() {
    let memory = MemoryTransport::new();
    memory.publish("q", b"poison one").await.unwrap();
    let ran = run_memory(
        &memory,
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--dead-letter",
            "--dead-letter-queue",
            "graveyard",
            "--retry-backoff",
            "0.01",
            "--retry-backoff-multiplier",
            "3",
            "--retry-backoff-max",
            "0.05",
            "--retry-jitter",
            "full",
            "--shutdown-timeout",
            "1.5",
            "--unknown-urn-release-delay",
            "0.2",
            "--max-deliveries",
            "1",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    assert_eq!(memory.len("graveyard"), 1);

    memory.publish("q", b"poison two").await.unwrap();
    let ran = run_memory(
        &memory,
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--dead-letter",
            "--dead-letter-suffix",
            ".dead",
            "--max-deliveries",
            "1",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    assert_eq!(memory.len("q.dead"), 1);

    // A release delay holds an unknown URN back: it is not visible again at once.
    memory
        .publish("q", br#"{"job":"urn:nobody"}"#)
        .await
        .unwrap();
    let ran = run_memory(
        &memory,
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--urn",
            "urn:somebody",
            "--on-unknown-urn",
            "release",
            "--unknown-urn-release-delay",
            "30",
            "--max-deliveries",
            "1",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    assert!(
        memory.pop("q", Duration::ZERO).await.unwrap().is_none(),
        "released with a 30 s delay"
    );

    // A jitter that does not exist, or a concurrency that is not a number, is a usage error.
    // (A dead-letter queue named without --dead-letter is not: dead-lettering may come from
    // the environment, BABELQUEUE_DEAD_LETTER.)
    for args in [
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--concurrency",
            "many",
        ][..],
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--retry-jitter",
            "half",
        ][..],
    ] {
        let ran = run_memory(&memory, args).await;
        assert_eq!(ran.status, 2, "{args:?}: {ran:?}");
    }
}

mod redis {
    use crate::common::{babelqueue, json_lines, printed, redis_url, stdout};

    /// `consume --output wire` against a real broker: the broker's own view of each delivery
    /// (a Redis reservation), the headers-free body byte for byte, and the outcome.
    #[test]
    fn wire_output_shows_what_the_broker_holds_for_each_delivery() {
        let Some(url) = redis_url() else { return };
        let queue = babelqueue_testkit::unique_queue("cli-wire");
        let published = babelqueue(
            &[
                "publish",
                &url,
                "--queue",
                &queue,
                "--urn",
                "urn:cli:wire",
                "--data",
                r#"{"n":18446744073709551616}"#,
            ],
            None,
        );
        assert!(published.status.success(), "{}", printed(&published));
        let sent = stdout(&published);
        let consumed = babelqueue(
            &[
                "consume",
                &url,
                "--queue",
                &queue,
                "--output",
                "wire",
                "--max-deliveries",
                "1",
                "--idle-timeout",
                "5",
            ],
            None,
        );
        assert!(consumed.status.success(), "{}", printed(&consumed));
        let line = &json_lines(&stdout(&consumed))[0];
        assert_eq!(line["outcome"], "acked");
        assert_eq!(line["body"].as_str().map(str::trim), Some(sent.trim()));
        assert_eq!(line["broker"]["properties"]["layout"], "reliable", "{line}");
        assert!(
            line["broker"]["properties"]["reservation_deadline"].is_string(),
            "{line}"
        );
        assert!(stdout(&consumed).contains(r#""n":18446744073709551616"#));
    }
}
