//! The binary as a process: streams, colour, signals.

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{babelqueue_with, printed, stderr, stdout};

#[test]
fn logs_carry_no_colour_when_stderr_is_not_a_terminal() {
    let out = babelqueue_with(
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--idle-timeout",
            "0.3",
        ],
        None,
        &[("BABELQUEUE_LOG", "debug")],
    );
    assert!(out.status.success(), "{}", printed(&out));
    let err = stderr(&out);
    assert!(
        err.contains("DEBUG") || err.contains("INFO"),
        "debug logs were written: {err}"
    );
    assert!(!err.contains('\u{1b}'), "no escape sequence: {err:?}");
    assert!(!stdout(&out).contains('\u{1b}'));
}

#[test]
fn publish_count_writes_every_line_and_no_progress_bar_when_piped() {
    let out = babelqueue_with(
        &[
            "publish",
            "memory://",
            "--queue",
            "q",
            "--urn",
            "urn:a",
            "--count",
            "150",
        ],
        None,
        &[],
    );
    assert!(out.status.success(), "{}", printed(&out));
    assert_eq!(stdout(&out).lines().count(), 150);
    assert_eq!(stderr(&out), "", "no bar, no note on a pipe");
}

#[cfg(unix)]
#[test]
fn sigint_stops_a_consumer_and_exits_130() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_babelqueue"))
        .args(["consume", "memory://", "--queue", "q"])
        .env_remove("BABELQUEUE_URL")
        .env_remove("BABELQUEUE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // Wait until it consumes (its signal handlers are in place by then).
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains("consuming q on memory"));
    assert!(ready.is_some(), "the consumer announced itself");
    let started = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let status = child.wait().unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert_eq!(status.code(), Some(130), "{rest:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        rest.iter().any(|l| l.contains("0 handler call(s)")),
        "the summary is still printed: {rest:?}"
    );
}

/// A broker that accepts the connection and never answers: SIGINT abandons the attempt.
#[cfg(all(unix, feature = "redis"))]
#[test]
fn sigint_while_connecting_to_a_mute_broker_exits_130_at_once() {
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", mute.local_addr().unwrap());
    let child = Command::new(env!("CARGO_BIN_EXE_babelqueue"))
        .args(["dlq", "list", &url, "--queue", "q"])
        .env_remove("BABELQUEUE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // Its signal handlers are installed as it starts; the connect attempt lasts 10 s.
    std::thread::sleep(Duration::from_secs(1));
    let started = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", printed(&out));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "not after the connect timeout: {:?}",
        started.elapsed()
    );
    assert!(stderr(&out).contains("interrupted"), "{}", printed(&out));
}
