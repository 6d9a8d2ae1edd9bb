//! `babelqueue consume --metrics-listen ADDR`: the worker answers Prometheus scrapes while it
//! consumes a live Redis (`BQ_REDIS_URL`; skipped when unreachable, a failure with
//! `BQ_REQUIRE_BROKERS` set). The port is probed free first.

use crate::common;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{publish_n, redis_url};

/// One `GET /metrics` over plain HTTP/1.1; `None` while nothing listens.
fn scrape(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    text.starts_with("HTTP/1.1 200").then_some(text)
}

/// The sum of the series of `name` whose line holds every one of `labels`.
fn value(scrape: &str, name: &str, labels: &[&str]) -> f64 {
    scrape
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[test]
fn a_consuming_worker_answers_scrapes_with_its_counts() {
    let Some(url) = redis_url() else { return };
    let queue = babelqueue_testkit::unique_queue("cli-metrics");
    publish_n(&url, &queue, "urn:babel:orders:created", "{}", 4);
    publish_n(&url, &queue, "urn:babel:payments:captured", "{}", 1);
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_babelqueue"))
        .args([
            "consume",
            &url,
            "--queue",
            &queue,
            "--urn",
            "urn:babel:orders:created",
            "--fail-urn",
            "urn:babel:payments:captured",
            "--max-attempts",
            "1",
            "--dead-letter",
            "--idle-timeout",
            "30",
            "--metrics-listen",
            &format!("127.0.0.1:{port}"),
        ])
        .env_remove("BABELQUEUE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let on_queue = format!("messaging_destination_name=\"{queue}\"");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Some(text) = scrape(port) {
            let settled = value(
                &text,
                "messaging_client_consumed_messages_total",
                &[&on_queue],
            );
            last = text;
            if settled >= 5.0 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = child.wait().expect("the worker exits");
    let acked = "messaging_babelqueue_outcome=\"acked\"";
    let dead = "messaging_babelqueue_outcome=\"dead_lettered\"";
    let orders = "messaging_babelqueue_urn=\"urn:babel:orders:created\"";
    let payments = "messaging_babelqueue_urn=\"urn:babel:payments:captured\"";
    let consumed = "messaging_client_consumed_messages_total";
    assert_eq!(
        value(&last, consumed, &[&on_queue, orders, acked]),
        4.0,
        "{last}"
    );
    assert_eq!(
        value(&last, consumed, &[&on_queue, payments, dead]),
        1.0,
        "{last}"
    );
    assert_eq!(
        value(&last, "babelqueue_messages_failed_total", &[&on_queue]),
        1.0
    );
    assert_eq!(
        value(
            &last,
            "messaging_process_duration_seconds_count",
            &[&on_queue]
        ),
        5.0
    );
    assert!(
        last.contains("babelqueue_worker_in_flight_messages"),
        "{last}"
    );
    assert_eq!(status.code(), Some(130), "SIGINT stops the worker");
}
