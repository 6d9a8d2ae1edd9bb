//! `babelqueue consume` configured by its environment alone: no argument but the subcommand.
//!
//! `cargo test -p babelqueue-cli --test it settings_env::` (the Redis row needs Redis:
//! `BQ_REDIS_URL`, default `redis://127.0.0.1:6379`; with `BQ_REQUIRE_BROKERS=1` a missing
//! Redis fails the test).

#![cfg(unix)]

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{babelqueue, babelqueue_with, json_lines, printed, stderr, stdout};

/// The binary with `consume` only, its environment cleared of every `BABELQUEUE_*` variable
/// and given `env`.
fn consume_from_env(env: &[(&str, &str)]) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_babelqueue"));
    command.arg("consume");
    for (k, _) in std::env::vars() {
        if k.starts_with("BABELQUEUE_") {
            command.env_remove(k);
        }
    }
    command
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs")
}

/// Lines of a child's stream, read on a thread.
fn lines(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn terminate(child: &Child) {
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
}

#[test]
fn url_and_queue_from_the_environment_start_a_worker() {
    let mut child = consume_from_env(&[
        ("BABELQUEUE_URL", "memory://"),
        ("BABELQUEUE_QUEUE", "from-env"),
        ("BABELQUEUE_CONCURRENCY", "2"),
    ]);
    let err = lines(child.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        match err.recv_timeout(Duration::from_millis(200)) {
            Ok(line) if line.contains("consuming from-env on memory") => break,
            Ok(line) => seen.push(line),
            Err(_) if child.try_wait().unwrap().is_some() => panic!("it exited: {seen:?}"),
            Err(_) => {}
        }
    }
    terminate(&child);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{seen:?}");
}

#[test]
fn a_bad_value_stops_the_worker_naming_the_variable() {
    let out = babelqueue_with(
        &["consume"],
        None,
        &[
            ("BABELQUEUE_URL", "memory://"),
            ("BABELQUEUE_QUEUE", "q"),
            ("BABELQUEUE_MAX_ATTEMPTS", "three"),
        ],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains(r#"BABELQUEUE_MAX_ATTEMPTS: expected a whole number ≥ 1, got "three""#),
        "{}",
        printed(&out)
    );
    let out = babelqueue_with(&["consume"], None, &[("BABELQUEUE_URL", "memory://")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no queue to consume"),
        "{}",
        printed(&out)
    );
}

#[test]
fn a_worker_configured_by_its_environment_consumes_from_redis() {
    let Some(url) = common::redis_url() else {
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let queue = format!("bq-cli-settings-{}-{nanos}", std::process::id());
    common::publish_n(&url, &queue, "urn:babel:settings:test", r#"{"n":1}"#, 2);
    // A body that is not an envelope: dead-lettered only because BABELQUEUE_DEAD_LETTER says so.
    let poison = babelqueue_with(
        &[
            "publish",
            &url,
            "--queue",
            &queue,
            "--raw",
            "--allow-poison",
        ],
        Some(b"not an envelope"),
        &[],
    );
    assert!(poison.status.success(), "{}", printed(&poison));

    let mut child = consume_from_env(&[
        ("BABELQUEUE_URL", url.as_str()),
        ("BABELQUEUE_QUEUE", queue.as_str()),
        ("BABELQUEUE_DEAD_LETTER", "true"),
        ("BABELQUEUE_MAX_ATTEMPTS", "1"),
        ("BABELQUEUE_MAX_ATTEMPT", "2"),
    ]);
    let out = lines(child.stdout.take().unwrap());
    let err = lines(child.stderr.take().unwrap());
    let mut calls = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while calls.len() < 2 && Instant::now() < deadline {
        if let Ok(line) = out.recv_timeout(Duration::from_millis(200)) {
            calls.push(line);
        }
    }
    // The poison body reaches the dead-letter queue.
    let mut dead = Vec::new();
    while dead.is_empty() && Instant::now() < deadline {
        let listed = babelqueue(&["dlq", "list", &url, "--queue", &queue], None);
        assert!(listed.status.success(), "{}", printed(&listed));
        dead = json_lines(&stdout(&listed));
        if dead.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    terminate(&child);
    let status = child.wait().unwrap();
    let notes: Vec<String> = err.try_iter().collect();
    assert_eq!(status.code(), Some(143), "{notes:?}");
    let calls = json_lines(&calls.join("\n"));
    assert_eq!(calls.len(), 2, "{calls:?} {notes:?}");
    for call in &calls {
        assert_eq!(call["urn"], "urn:babel:settings:test");
        assert_eq!(call["data"]["n"], 1);
    }
    assert_eq!(
        dead.len(),
        1,
        "the poison body was dead-lettered: {notes:?}"
    );
    assert!(
        notes.iter().any(|l| l.contains(
            "warning: BABELQUEUE_MAX_ATTEMPT is not a BabelQueue setting and is ignored"
        )),
        "{notes:?}"
    );
}
