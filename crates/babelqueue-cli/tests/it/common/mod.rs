//! What the CLI's test files share: the binary run as a user runs it, and the in-process runner
//! over a shared memory:// transport.

#![allow(dead_code, unreachable_pub)] // each test file uses its own part

use std::io::Write as _;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use babelqueue::MemoryTransport;
use babelqueue_cli::{Captured, Io, Session};

/// The `babelqueue` binary with `args`, `stdin` fed in (or closed), `env` added.
pub fn babelqueue_with(args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_babelqueue"));
    command
        .args(args)
        .env_remove("BABELQUEUE_URL")
        .env_remove("BABELQUEUE_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("the binary runs");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    } else {
        drop(child.stdin.take());
    }
    child.wait_with_output().unwrap()
}

/// The `babelqueue` binary with `args`.
pub fn babelqueue(args: &[&str], stdin: Option<&[u8]>) -> Output {
    babelqueue_with(args, stdin, &[])
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Everything the process printed.
pub fn printed(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// Each line of standard output, parsed as JSON.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

/// What one in-process run returned and printed.
#[derive(Debug)]
pub struct Ran {
    pub status: u8,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `babelqueue ARGS` in process, every broker URL opening `transport`.
pub async fn run_on(transport: Arc<dyn babelqueue::Transport>, args: &[&str]) -> Ran {
    let (io, printed): (Io, Captured) = Io::capture();
    let session = Session::new(io).with_transport(transport);
    let status = babelqueue_cli::run(
        &session,
        std::iter::once("babelqueue").chain(args.iter().copied()),
    )
    .await;
    Ran {
        status,
        stdout: printed.stdout(),
        stderr: printed.stderr(),
    }
}

/// [`run_on`] over `memory`.
pub async fn run_memory(memory: &MemoryTransport, args: &[&str]) -> Ran {
    run_on(Arc::new(memory.clone()), args).await
}

/// A dead-letter record of `urn` with `meta.id` `id`, failed out of `queue`.
pub fn record(id: &str, urn: &str, queue: &str) -> Vec<u8> {
    format!(
        r#"{{"job":"{urn}","trace_id":"t-{id}","data":{{"id":"{id}"}},"meta":{{"id":"{id}","queue":"{queue}"}},"attempts":3,"dead_letter":{{"reason":"failed","error":"boom {id}","attempts":3,"original_queue":"{queue}"}}}}"#
    )
    .into_bytes()
}

/// The Redis URL of the live tests (`BQ_REDIS_URL`), or `None` after a loud skip.
pub fn redis_url() -> Option<String> {
    let base = std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let probe = babelqueue(&["dlq", "list", &base, "--queue", "bq-cli-probe"], None);
    if probe.status.success() {
        return Some(base);
    }
    babelqueue_testkit::skip_or_fail(format!("Redis not reachable at {base}: {}", stderr(&probe)));
    None
}

/// `babelqueue publish URL --queue Q --urn URN --data DATA --count N`: asserts that it succeeded
/// and printed one line per message.
pub fn publish_n(url: &str, queue: &str, urn: &str, data: &str, count: usize) {
    let n = count.to_string();
    let published = babelqueue(
        &[
            "publish", url, "--queue", queue, "--urn", urn, "--data", data, "--count", &n,
        ],
        None,
    );
    assert!(published.status.success(), "{url}: {}", printed(&published));
    assert_eq!(
        stdout(&published).lines().count(),
        count,
        "{url}: {}",
        printed(&published)
    );
}

/// `babelqueue consume URL --queue Q --urn URN --max N --concurrency 4 --idle-timeout S`:
/// asserts that it succeeded and that `count` messages of `urn` carrying `data` were handled
/// once each, first attempts.
pub fn consume_n(
    url: &str,
    queue: &str,
    urn: &str,
    data: &serde_json::Value,
    count: usize,
    idle_secs: u32,
) {
    let (n, idle) = (count.to_string(), idle_secs.to_string());
    let consumed = babelqueue(
        &[
            "consume",
            url,
            "--queue",
            queue,
            "--urn",
            urn,
            "--max",
            &n,
            "--concurrency",
            "4",
            "--idle-timeout",
            &idle,
        ],
        None,
    );
    assert!(consumed.status.success(), "{url}: {}", printed(&consumed));
    let calls = json_lines(&stdout(&consumed));
    assert_eq!(calls.len(), count, "{url}: {}", printed(&consumed));
    for call in &calls {
        assert_eq!(call["urn"], urn, "{call}");
        assert_eq!(&call["data"], data, "{call}");
        assert_eq!(call["attempts"], 0, "{call}");
    }
}
