//! `babelqueue serve`: an open listener without a token is refused before it binds; the binary
//! serves the console on a loopback port until SIGTERM, scraping the workers given with
//! `--worker-metrics`.

use crate::common;

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use babelqueue::MemoryTransport;
use common::run_memory;

#[tokio::test]
async fn a_non_loopback_listen_without_a_token_is_refused_with_a_clear_error() {
    if std::env::var_os("BABELQUEUE_ADMIN_TOKEN").is_some() {
        panic!("unset BABELQUEUE_ADMIN_TOKEN to run this test");
    }
    let memory = MemoryTransport::new();
    let ran = run_memory(
        &memory,
        &[
            "serve",
            "memory://",
            "--queue",
            "orders",
            "--listen",
            "0.0.0.0:0",
        ],
    )
    .await;
    assert_eq!(ran.status, 1, "{ran:?}");
    assert!(ran.stderr.contains("BABELQUEUE_ADMIN_TOKEN"), "{ran:?}");
}

/// A free loopback port (bound then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

/// `babelqueue serve memory:// --queue orders ARGS…` on a free loopback port: the child and
/// its port.
fn serve(args: &[&str]) -> (std::process::Child, u16) {
    let port = free_port();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_babelqueue"))
        .args(["serve", "memory://", "--queue", "orders"])
        .args(args)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .env_remove("BABELQUEUE_ADMIN_TOKEN")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, port)
}

/// `GET /api/v1/queues` until its answer satisfies `ready`, for at most 20 s.
fn queues_when(port: u16, ready: impl Fn(&str) -> bool, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(text) = http_get(port, "/api/v1/queues")
            && ready(&text)
        {
            return text;
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGTERM, and the exit status it ends with (143).
fn terminate(mut child: std::process::Child) {
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(143));
}

#[test]
fn the_binary_serves_the_console_until_it_is_terminated() {
    let (child, port) = serve(&[]);
    let answer = queues_when(port, |_| true, "the console never answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"queue\":\"orders\""), "{answer}");
    let page = http_get(port, "/").unwrap();
    assert!(page.contains("BabelQueue console"), "{page}");
    terminate(child);
}

/// A worker's `/metrics` as `consume --metrics-listen` serves it (one counter), on a free
/// loopback port, answering every request until the test ends.
fn fake_worker() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let body = "# TYPE messaging_client_consumed_messages_total counter\n\
                messaging_client_consumed_messages_total{messaging_system=\"babelqueue\",\
                messaging_destination_name=\"orders\",messaging_babelqueue_outcome=\"acked\"} 42\n";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn the_binary_scrapes_the_workers_it_is_given() {
    let worker = fake_worker();
    let endpoint = format!("127.0.0.1:{worker}");
    let (child, port) = serve(&["--sample-every", "1", "--worker-metrics", &endpoint]);
    let answer = queues_when(
        port,
        |text| text.contains("\"consumed_total\":42"),
        "the console never showed the worker's count",
    );
    assert!(answer.contains("\"workers\":1"), "{answer}");
    let workers = http_get(port, "/api/v1/workers").unwrap();
    assert!(
        workers.contains(&format!("http://{endpoint}/metrics")),
        "{workers}"
    );
    terminate(child);
}

#[tokio::test]
async fn a_worker_endpoint_that_is_not_http_is_a_usage_error() {
    let memory = MemoryTransport::new();
    let ran = run_memory(
        &memory,
        &[
            "serve",
            "memory://",
            "--queue",
            "orders",
            "--worker-metrics",
            "redis://127.0.0.1:6379",
        ],
    )
    .await;
    assert_eq!(ran.status, 2, "{ran:?}");
    assert!(ran.stderr.contains("not an http(s) URL"), "{ran:?}");
}
