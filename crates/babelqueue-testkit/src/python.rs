//! Driving the Python reference SDK (babelqueue 1.24.0) as an interop peer.
//!
//! Each transport's live tests keep a small Python script of their own (`tests/python/*.py`)
//! that speaks its broker through the reference SDK and prints one JSON object per line on
//! stdout. What is common lives here: finding the interpreter (`BQ_PYTHON`), checking it can
//! import the SDK (or skipping, see [`skip_or_fail`](crate::skip_or_fail)), running the script
//! to completion and reading its JSON lines, or keeping it running and talking to it line by
//! line.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use babelqueue_testkit::PythonPeer;
//!
//! let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/peer.py");
//! let Some(peer) = PythonPeer::find_or_skip(script, &["babelqueue.redis_transport"]) else {
//!     return; // printed `SKIPPED: …`
//! };
//! let ids = peer
//!     .run(&["publish", "redis://127.0.0.1:6379", "orders", "urn:babel:orders:created", "{}", "2"])
//!     .await;
//! assert_eq!(ids.len(), 2);
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The environment variable naming the interpreter that has the reference SDK installed.
pub const PYTHON_ENV: &str = "BQ_PYTHON";

/// The reference SDK version every peer is checked against.
pub const REFERENCE_SDK_VERSION: &str = "1.24.0";

/// The JSON objects among the lines of `stdout`: every line that starts with `{` (client
/// libraries log to stdout too; those lines are ignored).
///
/// # Panics
///
/// When a line that starts with `{` is not JSON: the peer broke the protocol.
///
/// ```
/// let lines = babelqueue_testkit::json_lines(b"log line\n{\"id\":1}\n{\"id\":2}\n", "peer");
/// assert_eq!(lines, [serde_json::json!({"id": 1}), serde_json::json!({"id": 2})]);
/// ```
#[track_caller]
pub fn json_lines(stdout: &[u8], what: &str) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| json_line(line, what))
        .collect()
}

#[track_caller]
fn json_line(line: &str, what: &str) -> Option<Value> {
    let line = line.trim_end();
    if !line.starts_with('{') {
        return None;
    }
    match serde_json::from_str(line) {
        Ok(value) => Some(value),
        Err(e) => panic!("{what} printed a line that is not JSON ({e}): {line}"),
    }
}

/// A Python script run with the reference SDK's interpreter.
#[derive(Debug, Clone)]
pub struct PythonPeer {
    python: PathBuf,
    script: PathBuf,
    timeout: Duration,
}

impl PythonPeer {
    /// The interpreter: `$BQ_PYTHON`, else this repository's venv
    /// (`<workspace>/../cache/venv/bin/python`, where `scripts/brokers.sh up python` puts it).
    pub fn interpreter() -> PathBuf {
        std::env::var_os(PYTHON_ENV).map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python"),
            PathBuf::from,
        )
    }

    /// A peer running `script` with `python`, unchecked (see
    /// [`find_or_skip`](PythonPeer::find_or_skip)). Each run may take 60 s.
    pub fn new(python: impl Into<PathBuf>, script: impl Into<PathBuf>) -> PythonPeer {
        PythonPeer {
            python: python.into(),
            script: script.into(),
            timeout: Duration::from_secs(60),
        }
    }

    /// A peer running `script` with [`interpreter`](PythonPeer::interpreter), once it proved it
    /// imports `babelqueue` [`REFERENCE_SDK_VERSION`] and every module of `modules` (the
    /// broker client: `"babelqueue.redis_transport"`, `"pulsar"`, `"boto3"` …); else `None`
    /// after [`skip_or_fail`](crate::skip_or_fail).
    #[track_caller]
    pub fn find_or_skip(script: impl Into<PathBuf>, modules: &[&str]) -> Option<PythonPeer> {
        let python = PythonPeer::interpreter();
        let mut check = format!(
            "import babelqueue\nassert babelqueue.__version__ == {REFERENCE_SDK_VERSION:?}, babelqueue.__version__\n"
        );
        for module in modules {
            check.push_str(&format!("import {module}\n"));
        }
        let probe = std::process::Command::new(&python)
            .args(["-c", &check])
            .stdin(Stdio::null())
            .output();
        let why = match probe {
            Ok(out) if out.status.success() => {
                return Some(PythonPeer::new(python, script));
            }
            Ok(out) => String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("it failed")
                .to_owned(),
            Err(e) => e.to_string(),
        };
        crate::skip_or_fail(format!(
            "the Python reference SDK babelqueue {REFERENCE_SDK_VERSION} (with {}) is not usable at {} ({why}; set {PYTHON_ENV})",
            if modules.is_empty() {
                "no extra module".to_owned()
            } else {
                modules.join(", ")
            },
            python.display()
        ));
        None
    }

    /// The same peer, each run bounded by `timeout` instead of 60 s.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> PythonPeer {
        self.timeout = timeout;
        self
    }

    /// The interpreter this peer runs.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// The script this peer runs.
    pub fn script(&self) -> &Path {
        &self.script
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.python);
        command
            .arg(&self.script)
            .args(args)
            .env("PYTHONUNBUFFERED", "1")
            .kill_on_drop(true);
        command
    }

    /// Runs the script with `args` to completion and returns its JSON lines.
    ///
    /// # Panics
    ///
    /// When it cannot start, exits unsuccessfully (the message carries its stderr and
    /// stdout), prints a broken JSON line, or outlives the timeout (it is killed): each is the
    /// calling test's failure.
    pub async fn run(&self, args: &[&str]) -> Vec<Value> {
        let what = self.describe(args);
        let child = self
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what} cannot start: {e}"));
        let output = tokio::time::timeout(self.timeout, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("{what} did not finish within {:?}", self.timeout))
            .unwrap_or_else(|e| panic!("{what} could not be waited for: {e}"));
        assert!(
            output.status.success(),
            "{what} failed ({}):\nstderr:\n{}\nstdout:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
        json_lines(&output.stdout, &what)
    }

    /// Starts the script with `args` and keeps it running, to exchange JSON lines with it
    /// (a consumer that runs while the test publishes, a long-lived driver reading commands on
    /// its stdin). It is killed when the [`PeerProcess`] is dropped.
    ///
    /// # Panics
    ///
    /// When it cannot start.
    pub async fn spawn(&self, args: &[&str]) -> PeerProcess {
        let what = self.describe(args);
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what} cannot start: {e}"));
        let stdout = child
            .stdout
            .take()
            .expect("the child's stdout is piped (set just above)");
        let stdin = child.stdin.take();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let sink = stderr.clone();
            // Collected as it comes, so a peer that hangs still shows what it said.
            tokio::spawn(async move {
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
                    sink.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .extend_from_slice(&chunk[..n]);
                }
            });
        }
        PeerProcess {
            what,
            child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
            stderr,
            timeout: self.timeout,
        }
    }

    fn describe(&self, args: &[&str]) -> String {
        format!(
            "the Python peer {} {:?}",
            self.script.file_name().map_or_else(
                || self.script.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            ),
            args
        )
    }
}

/// A running [`PythonPeer`]: JSON lines in (stdin) and out (stdout). Killed when dropped.
#[derive(Debug)]
pub struct PeerProcess {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    timeout: Duration,
}

impl PeerProcess {
    /// Writes `value` as one JSON line to the peer's stdin.
    ///
    /// # Panics
    ///
    /// When the peer closed its stdin (it exited) or the pipe was already closed by
    /// [`finish`](PeerProcess::finish).
    pub async fn send(&mut self, value: &Value) {
        let what = &self.what;
        let stdin = self
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("{what}: its stdin is closed"));
        let mut line = value.to_string();
        line.push('\n');
        if let Err(e) = stdin.write_all(line.as_bytes()).await {
            panic!(
                "{what}: writing to its stdin failed ({e}){}",
                self.stderr_text()
            );
        }
        if let Err(e) = stdin.flush().await {
            panic!(
                "{what}: flushing its stdin failed ({e}){}",
                self.stderr_text()
            );
        }
    }

    /// The next JSON line the peer prints (other lines are skipped), waiting up to `timeout`;
    /// `None` when it closed its stdout (it exited).
    ///
    /// # Panics
    ///
    /// When nothing came within `timeout`, or a line is broken JSON.
    pub async fn recv(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let next = tokio::time::timeout_at(deadline, self.stdout.next_line()).await;
            match next {
                Err(_) => panic!(
                    "{}: no JSON line within {timeout:?}{}",
                    self.what,
                    self.stderr_text()
                ),
                Ok(Err(e)) => panic!("{}: reading its stdout failed: {e}", self.what),
                Ok(Ok(None)) => return None,
                Ok(Ok(Some(line))) => {
                    if let Some(value) = json_line(&line, &self.what) {
                        return Some(value);
                    }
                }
            }
        }
    }

    /// Closes the peer's stdin (its signal to finish, for a driver reading commands), reads its
    /// remaining JSON lines and waits for it to exit.
    ///
    /// # Panics
    ///
    /// When it does not exit within the peer's timeout (it is killed), or exits
    /// unsuccessfully (with its stderr in the message).
    pub async fn finish(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let what = self.what.clone();
        let timeout = self.timeout;
        let rest = async {
            let mut lines = Vec::new();
            while let Ok(Some(line)) = self.stdout.next_line().await {
                lines.extend(json_line(&line, &what));
            }
            let status = self.child.wait().await;
            (lines, status)
        };
        let Ok((lines, status)) = tokio::time::timeout(timeout, rest).await else {
            let _ = self.child.start_kill();
            panic!(
                "{what} did not exit within {timeout:?}{}",
                self.stderr_text()
            );
        };
        match status {
            Ok(status) if status.success() => lines,
            Ok(status) => panic!("{what} failed ({status}){}", self.stderr_text()),
            Err(e) => panic!("{what} could not be waited for: {e}"),
        }
    }

    /// Kills the peer now.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    fn stderr_text(&self) -> String {
        let stderr = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        if stderr.is_empty() {
            String::new()
        } else {
            format!("\nstderr:\n{}", String::from_utf8_lossy(&stderr))
        }
    }
}
