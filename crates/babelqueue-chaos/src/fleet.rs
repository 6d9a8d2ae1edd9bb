//! Worker child processes: start, SIGKILL, SIGTERM, restart, and tell a crash from a kill.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::tally::LogReader;

/// What a worker child is started with (the hidden `worker` subcommand's options).
#[derive(Debug, Clone)]
pub(crate) struct WorkerSpec {
    pub(crate) url: String,
    pub(crate) queue: String,
    pub(crate) concurrency: usize,
    pub(crate) max_attempts: i64,
    pub(crate) dead_letter: bool,
    pub(crate) idle_ms: Option<u64>,
    pub(crate) work_ms: u64,
    pub(crate) kafka_reinject_group: Option<String>,
}

/// One running incarnation.
#[derive(Debug)]
struct Running {
    child: Child,
    incarnation: u32,
    stderr: PathBuf,
    signalled: bool,
}

/// The worker incarnations of one row: at most one runs at a time.
#[derive(Debug)]
pub(crate) struct Fleet {
    exe: PathBuf,
    envs: BTreeMap<String, String>,
    dir: PathBuf,
    prefix: String,
    spec: WorkerSpec,
    current: Option<Running>,
    started: u32,
    /// Every incarnation's handler log.
    pub(crate) logs: LogReader,
    /// Workers that exited abnormally without being killed by the harness, with evidence.
    pub(crate) crashes: Vec<String>,
    /// Workers that exited on their own with success (while the harness expected them to run).
    pub(crate) early_exits: Vec<String>,
}

/// How a SIGTERM ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// The worker exited within the grace period.
    Exited(String),
    /// It ignored SIGTERM and was SIGKILLed.
    Wedged(String),
    /// No worker was running.
    NotRunning,
}

impl Fleet {
    pub(crate) fn new(
        exe: &Path,
        envs: &BTreeMap<String, String>,
        dir: &Path,
        prefix: &str,
        spec: WorkerSpec,
    ) -> Fleet {
        Fleet {
            exe: exe.to_path_buf(),
            envs: envs.clone(),
            dir: dir.to_path_buf(),
            prefix: prefix.to_owned(),
            spec,
            current: None,
            started: 0,
            logs: LogReader::default(),
            crashes: Vec::new(),
            early_exits: Vec::new(),
        }
    }

    /// Incarnations started so far.
    pub(crate) fn started(&self) -> u32 {
        self.started
    }

    /// Starts the next incarnation.
    pub(crate) fn start(&mut self) -> Result<(), String> {
        if self.current.is_some() {
            return Err("a worker is already running".into());
        }
        let incarnation = self.started;
        self.started += 1;
        let log = self
            .dir
            .join(format!("{}-{incarnation}.jsonl", self.prefix));
        let stderr = self
            .dir
            .join(format!("{}-{incarnation}.stderr", self.prefix));
        self.logs.follow(&log);
        let err = File::create(&stderr).map_err(|e| format!("{}: {e}", stderr.display()))?;
        let spec = &self.spec;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("worker")
            .arg("--url")
            .arg(&spec.url)
            .arg("--queue")
            .arg(&spec.queue)
            .arg("--log")
            .arg(&log)
            .arg("--incarnation")
            .arg(incarnation.to_string())
            .arg("--concurrency")
            .arg(spec.concurrency.to_string())
            .arg("--max-attempts")
            .arg(spec.max_attempts.to_string())
            .arg("--work-ms")
            .arg(spec.work_ms.to_string());
        if spec.dead_letter {
            cmd.arg("--dead-letter");
        }
        if let Some(ms) = spec.idle_ms {
            cmd.arg("--idle-ms").arg(ms.to_string());
        }
        if let Some(group) = &spec.kafka_reinject_group {
            cmd.arg("--kafka-reinject-group").arg(group);
        }
        cmd.envs(&self.envs)
            .env(
                "BQ_CHAOS_LOG",
                std::env::var("BQ_CHAOS_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(err));
        let child = cmd
            .spawn()
            .map_err(|e| format!("start worker {}: {e}", self.exe.display()))?;
        self.current = Some(Running {
            child,
            incarnation,
            stderr,
            signalled: false,
        });
        Ok(())
    }

    /// Whether a worker is running now (reaps one that exited, and records how).
    pub(crate) fn alive(&mut self) -> bool {
        let Some(running) = &mut self.current else {
            return false;
        };
        match running.child.try_wait() {
            Ok(None) => true,
            Ok(Some(status)) => {
                let running = self.current.take().expect("checked above");
                self.record_exit(&running, status);
                false
            }
            Err(_) => true,
        }
    }

    /// Restarts the worker if it exited on its own (a crash is recorded by [`Fleet::alive`]).
    pub(crate) fn keep_running(&mut self) -> Result<(), String> {
        if !self.alive() {
            self.start()?;
        }
        Ok(())
    }

    fn record_exit(&mut self, running: &Running, status: ExitStatus) {
        if running.signalled {
            return;
        }
        let tail = stderr_tail(&running.stderr, 1500);
        let what = describe(status);
        if status.success() {
            self.early_exits.push(format!(
                "worker {} exited on its own ({what})",
                running.incarnation
            ));
        } else {
            self.crashes.push(format!(
                "worker {} {what} without being killed; stderr ({}): …{tail}",
                running.incarnation,
                running.stderr.display()
            ));
        }
    }

    /// SIGKILL, and reap.
    pub(crate) fn kill(&mut self) {
        if let Some(mut running) = self.current.take() {
            if let Ok(Some(status)) = running.child.try_wait() {
                // It died before the kill landed: that is its own doing.
                self.record_exit(&running, status);
                return;
            }
            running.signalled = true;
            let _ = running.child.kill();
            let _ = running.child.wait();
        }
    }

    /// SIGTERM, then wait up to `grace` for a graceful exit; SIGKILL after that.
    pub(crate) async fn terminate(&mut self, grace: Duration) -> Stopped {
        let Some(mut running) = self.current.take() else {
            return Stopped::NotRunning;
        };
        if let Ok(Some(status)) = running.child.try_wait() {
            self.record_exit(&running, status);
            return Stopped::Exited(describe(status));
        }
        running.signalled = true;
        let pid = running.child.id().to_string();
        let _ = Command::new("kill")
            .args(["-TERM", &pid])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = running.child.try_wait() {
                if !status.success() {
                    let tail = stderr_tail(&running.stderr, 800);
                    self.crashes.push(format!(
                        "worker {} {} after SIGTERM (a graceful stop must exit 0); stderr: …{tail}",
                        running.incarnation,
                        describe(status)
                    ));
                }
                return Stopped::Exited(describe(status));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = running.child.kill();
        let _ = running.child.wait();
        Stopped::Wedged(format!(
            "worker {} ignored SIGTERM for {:.0}s and was SIGKILLed; stderr ({}): …{}",
            running.incarnation,
            grace.as_secs_f64(),
            running.stderr.display(),
            stderr_tail(&running.stderr, 800)
        ))
    }

    /// Waits up to `limit` for the worker to exit on its own (an idle timeout); `true` if it did.
    pub(crate) async fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let Some(running) = &mut self.current else {
                return true;
            };
            if let Ok(Some(status)) = running.child.try_wait() {
                let running = self.current.take().expect("checked above");
                if !status.success() {
                    self.record_exit(&running, status);
                }
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(mut running) = self.current.take() {
            let _ = running.child.kill();
            let _ = running.child.wait();
        }
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was ended by signal {signal}"),
        _ => format!("ended ({status})"),
    }
}

/// The last `max` bytes of a file, on one line.
pub(crate) fn stderr_tail(path: &Path, max: u64) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes)
        .split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}
