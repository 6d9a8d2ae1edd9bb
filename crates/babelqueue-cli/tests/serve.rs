//! `babelqueue serve`: an open listener without a token is refused before it binds; the binary
//! serves the console on a loopback port until SIGTERM.

mod common;

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

#[test]
fn the_binary_serves_the_console_until_it_is_terminated() {
    let port = free_port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_babelqueue"))
        .args(["serve", "memory://", "--queue", "orders", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .env_remove("BABELQUEUE_ADMIN_TOKEN")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        if let Some(text) = http_get(port, "/api/v1/queues") {
            break text;
        }
        assert!(Instant::now() < deadline, "the console never answered");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"queue\":\"orders\""), "{answer}");
    let page = http_get(port, "/").unwrap();
    assert!(page.contains("BabelQueue console"), "{page}");
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
}
