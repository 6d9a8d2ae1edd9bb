//! What the opt-in throughput benchmarks (`bench cli`, `bench scale`, `bench outbox`) share:
//! child processes timed by wall clock and CPU (the kernel's `cutime + cstime` of this process,
//! which counts every child it waited for, as `getrusage(RUSAGE_CHILDREN)` does), a broker
//! process's CPU read from `/proc/<pid>/stat`, the release `babelqueue` binary, counts of
//! duplicates and losses, and plain aligned tables.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::cargo;

/// Clock ticks per second of `/proc/*/stat` (`sysconf(_SC_CLK_TCK)`: 100 on every Linux
/// architecture this runs on).
const TICKS_PER_SECOND: f64 = 100.0;

/// The fields of a `/proc/<pid>/stat` line after the command name (which may hold spaces):
/// index 0 is field 3 (`state`).
/// A comma-separated list of positive numbers (`1,2,4`); `None` when any item is not one.
pub(crate) fn positive_list<T: std::str::FromStr + Default + PartialOrd>(
    text: &str,
) -> Option<Vec<T>> {
    text.split(',')
        .map(|item| item.trim().parse().ok().filter(|n| *n > T::default()))
        .collect()
}

fn stat_fields(text: &str) -> Vec<&str> {
    text.rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default()
}

/// Field `n` (1-based, as `man 5 proc` numbers them) of a stat line, in ticks.
fn stat_ticks(fields: &[&str], n: usize) -> u64 {
    fields.get(n - 3).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// CPU seconds of this process's waited-for children so far (user + system).
pub(crate) fn children_cpu() -> f64 {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f = stat_fields(&text);
    (stat_ticks(&f, 16) + stat_ticks(&f, 17)) as f64 / TICKS_PER_SECOND
}

/// CPU seconds a process has used so far (user + system), 0 when it is gone.
fn process_cpu(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f = stat_fields(&text);
    (stat_ticks(&f, 14) + stat_ticks(&f, 15)) as f64 / TICKS_PER_SECOND
}

/// A broker's processes: those whose `comm` is `comm` and whose command line holds `marker`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BrokerProcess {
    pub(crate) comm: &'static str,
    pub(crate) marker: &'static str,
}

pub(crate) const REDIS: BrokerProcess = BrokerProcess {
    comm: "redis-server",
    marker: "6379",
};
pub(crate) const RABBITMQ: BrokerProcess = BrokerProcess {
    comm: "beam.smp",
    marker: "rabbit",
};
pub(crate) const KAFKA: BrokerProcess = BrokerProcess {
    comm: "java",
    marker: "brokers/kafka/",
};
pub(crate) const NATS: BrokerProcess = BrokerProcess {
    comm: "nats-server",
    marker: "4222",
};
pub(crate) const POSTGRES: BrokerProcess = BrokerProcess {
    comm: "postgres",
    marker: "",
};

impl BrokerProcess {
    /// The pids of the matching processes.
    pub(crate) fn pids(&self) -> Vec<u32> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                if comm.trim() != self.comm {
                    return false;
                }
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                String::from_utf8_lossy(&cmdline).contains(self.marker)
            })
            .collect()
    }
}

/// A run's wall clock and CPU: of the children (the SDK's side) and of each group of broker
/// processes (shared with whatever else used the broker meanwhile).
#[derive(Debug, Clone, Default)]
pub(crate) struct Cost {
    pub(crate) wall: f64,
    pub(crate) cpu: f64,
    /// CPU seconds of each group of broker processes, in the order given to [`Meter::start`].
    pub(crate) brokers: Vec<f64>,
}

impl Cost {
    /// CPU seconds per 1 000 messages of the children.
    pub(crate) fn cpu_per_1000(&self, messages: u64) -> f64 {
        self.cpu / messages.max(1) as f64 * 1000.0
    }

    /// Broker group `i`'s CPU as a share of one core over the run (1.0 = one core saturated).
    pub(crate) fn broker_cores(&self, i: usize) -> f64 {
        self.brokers.get(i).copied().unwrap_or(0.0) / self.wall.max(f64::EPSILON)
    }
}

/// How often the broker processes are sampled: a process that ends during the run (a
/// PostgreSQL backend of a relay that exited) keeps the CPU it had at its last sample.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Starts a clock on the children's and the brokers' CPU; [`Meter::stop`] reads the cost.
pub(crate) struct Meter {
    started: Instant,
    cpu: f64,
    stop: std::sync::mpsc::Sender<()>,
    sampler: std::thread::JoinHandle<Vec<f64>>,
}

/// CPU seconds by pid of each group's processes.
fn sample(groups: &[BrokerProcess]) -> Vec<BTreeMap<u32, f64>> {
    groups
        .iter()
        .map(|g| g.pids().into_iter().map(|p| (p, process_cpu(p))).collect())
        .collect()
}

impl Meter {
    pub(crate) fn start(groups: &[BrokerProcess]) -> Meter {
        let groups = groups.to_vec();
        let first = sample(&groups);
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let sampler = std::thread::spawn(move || {
            let mut last = first.clone();
            loop {
                let done = stopped.recv_timeout(SAMPLE_EVERY).is_ok();
                for (i, now) in sample(&groups).into_iter().enumerate() {
                    last[i].extend(now);
                }
                if done {
                    break;
                }
            }
            // A process born during the run started from nothing.
            last.iter()
                .zip(&first)
                .map(|(last, first)| {
                    last.iter()
                        .map(|(pid, cpu)| cpu - first.get(pid).copied().unwrap_or(0.0))
                        .sum()
                })
                .collect()
        });
        Meter {
            started: Instant::now(),
            cpu: children_cpu(),
            stop,
            sampler,
        }
    }

    pub(crate) fn stop(self) -> Cost {
        let wall = self.started.elapsed().as_secs_f64();
        let cpu = children_cpu() - self.cpu;
        let _ = self.stop.send(());
        Cost {
            wall,
            cpu,
            brokers: self.sampler.join().unwrap_or_default(),
        }
    }
}

/// Runs `cmd` to the end, its standard output captured, standard error shown; an error names
/// the command and what it printed.
pub(crate) fn output(mut cmd: Command) -> Result<Output, String> {
    let shown = format!("{:?}", cmd.get_program());
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{shown} could not start: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown} {:?} exited with {}: {}",
            cmd.get_args().collect::<Vec<_>>(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out)
}

/// Starts `cmd` with its standard output captured.
pub(crate) fn spawn(mut cmd: Command) -> Result<Child, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{:?} could not start: {e}", cmd.get_program()))
}

/// Waits for `child` at most `limit`, then kills it; returns its output and whether it ended
/// by itself.
pub(crate) fn wait_capped(child: Child, limit: Duration) -> Result<(Output, bool), String> {
    let pid = child.id();
    let (done, waited) = std::sync::mpsc::channel();
    let guard = std::thread::spawn(move || {
        if waited.recv_timeout(limit).is_err() {
            // The child's own pid, never a name: only what this run started is stopped.
            let _ = Command::new("kill").arg(pid.to_string()).status();
            return false;
        }
        true
    });
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {pid}: {e}"))?;
    let _ = done.send(());
    let by_itself = guard.join().unwrap_or(false);
    Ok((out, by_itself))
}

/// Cargo features of the `babelqueue` binary the benchmarks run: the brokers they measure.
pub(crate) const CLI_FEATURES: &str = "redis,amqp,kafka,nats";

/// Builds the release `babelqueue` binary (the workspace's release profile unless the
/// environment overrides it) and returns its path.
pub(crate) fn build_cli() -> Result<PathBuf, String> {
    built(
        &[
            "--package",
            "babelqueue-cli",
            "--no-default-features",
            "--features",
            CLI_FEATURES,
        ],
        "babelqueue",
    )
}

/// Builds `crates/babelqueue/benches/drivers.rs` (the library's windowed publish and the outbox
/// relay, as processes) with the release profile and returns its path.
pub(crate) fn build_drivers() -> Result<PathBuf, String> {
    built(
        &[
            "--package",
            "babelqueue",
            "--bench",
            "drivers",
            "--features",
            "postgres,redis,amqp,kafka",
        ],
        "drivers",
    )
}

/// `cargo build --release ARGS`, and the executable of target `name` that Cargo reported.
fn built(args: &[&str], name: &str) -> Result<PathBuf, String> {
    let mut cmd = cargo();
    cmd.args(["build", "--release"])
        .args(args)
        .args(["--message-format", "json-render-diagnostics"]);
    let out = output(cmd)?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.pointer("/target/name").and_then(|n| n.as_str()) == Some(name))
        .find_map(|v| v.get("executable")?.as_str().map(PathBuf::from))
        .ok_or_else(|| format!("cargo named no {name} executable"))
}

/// A name no earlier run used: `prefix-<pid><nanos>`.
pub(crate) fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{:x}{nanos:08x}", std::process::id())
}

/// How the messages a run expected came out: each seen once, twice, or never.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Deliveries seen (with repeats).
    pub(crate) deliveries: u64,
    /// Distinct expected ids seen.
    pub(crate) distinct: u64,
    /// Deliveries beyond the first of an id (an id seen three times counts 2).
    pub(crate) duplicates: u64,
    /// Expected ids never seen.
    pub(crate) lost: u64,
    /// Ids seen that were not expected (another run's messages on the queue).
    pub(crate) strangers: u64,
}

/// Counts `seen` (every delivery's id, repeats included) against the `expected` ids.
pub(crate) fn tally<'a>(
    expected: &BTreeSet<String>,
    seen: impl IntoIterator<Item = &'a str>,
) -> Tally {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for id in seen {
        *counts.entry(id).or_default() += 1;
    }
    let mut t = Tally::default();
    for (id, n) in &counts {
        t.deliveries += n;
        if expected.contains(*id) {
            t.distinct += 1;
            t.duplicates += n - 1;
        } else {
            t.strangers += n;
        }
    }
    t.lost = expected.len() as u64 - t.distinct;
    t
}

/// Lays out `rows` under `header`, each column as wide as its widest cell: the first column
/// left-aligned, the others right-aligned; two spaces of indent.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::from("  ");
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            if i > 0 {
                text.push_str("  ");
            }
            if i == 0 {
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
            } else {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            }
        }
        text.trim_end().to_owned()
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push('\n');
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_positive_numbers_is_read_and_anything_else_refused() {
        assert_eq!(positive_list::<u32>("1,2, 4"), Some(vec![1, 2, 4]));
        assert_eq!(positive_list::<usize>("100"), Some(vec![100]));
        assert_eq!(positive_list::<u32>("1,0"), None);
        assert_eq!(positive_list::<u32>("1,x"), None);
        assert_eq!(positive_list::<u32>(""), None);
    }

    #[test]
    fn stat_lines_are_read_after_the_command_name() {
        // A command name with spaces and a parenthesis, as /proc/<pid>/stat may show it.
        let line = "42 (my (odd) cmd) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 1 0";
        let f = stat_fields(line);
        assert_eq!(f[0], "S");
        assert_eq!((stat_ticks(&f, 14), stat_ticks(&f, 15)), (250, 50));
        assert_eq!((stat_ticks(&f, 16), stat_ticks(&f, 17)), (7, 3));
        assert_eq!(stat_ticks(&f, 60), 0);
        assert!(children_cpu() >= 0.0);
    }

    #[test]
    fn tally_counts_repeats_losses_and_strangers() {
        let expected: BTreeSet<String> = ["a", "b", "c", "d"].map(String::from).into();
        let t = tally(&expected, ["a", "b", "a", "a", "c", "zz"]);
        assert_eq!(
            t,
            Tally {
                deliveries: 6,
                distinct: 3,
                duplicates: 2,
                lost: 1,
                strangers: 1,
            }
        );
        assert_eq!(tally(&expected, ["d", "c", "b", "a"]).duplicates, 0);
        assert_eq!(tally(&expected, []).lost, 4);
    }

    #[test]
    fn tables_align_each_column_to_its_widest_cell() {
        let text = table(
            &["broker", "msgs/s"],
            &[
                vec!["redis".into(), "12345".into()],
                vec!["rabbitmq".into(), "9".into()],
            ],
        );
        assert_eq!(
            text,
            "  broker    msgs/s\n  redis      12345\n  rabbitmq       9"
        );
    }

    #[test]
    fn costs_are_per_thousand_and_per_core() {
        let c = Cost {
            wall: 2.0,
            cpu: 3.0,
            brokers: vec![1.0],
        };
        assert!((c.cpu_per_1000(20_000) - 0.15).abs() < 1e-9);
        assert!((c.broker_cores(0) - 0.5).abs() < 1e-9);
        assert!(c.broker_cores(1).abs() < 1e-9);
        assert!(c.cpu_per_1000(0) > 0.0);
    }
}
