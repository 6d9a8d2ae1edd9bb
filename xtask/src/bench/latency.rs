//! The open-loop latency and CPU-per-message part of `cargo xtask bench brokers`.
//!
//! The broker benchmarks print, per load of `babelqueue_testkit::OPEN_LOOP_LOADS` and per side,
//! `BQ-FIGURE latency <row> <rate> <who> <p50> <p99> <p99.9> <max> <handled> <offered>
//! <achieved/s> <sustained 1|0> <cpu s/1000 | -> <p99 interval low> <p99 interval high>`
//! (latencies in µs, from an `hdrhistogram` of publish-to-handled times measured against each
//! message's scheduled send time; the interval is the p99's 95% sampling interval), and
//! beside each consume rate `BQ-FIGURE broker <row> cpu <who> <CPU-seconds per 1 000>`. This
//! module reads them and says, for each row, whether the latency targets were met: p99 under
//! 5 ms at 1 000 msg/s (Redis, RabbitMQ, NATS), and this SDK's p99 never above the Python
//! SDK's at a load both sustain (every row: Kafka, Artemis, Pulsar and SQS have only this one).
//! A p99 above the Python SDK's whose sampling interval overlaps the Python SDK's is a tie
//! (the two runs are not told apart), and says so.

/// The load the absolute p99 target is set at, and the target, µs.
const TARGET_RATE: u64 = 1_000;
const TARGET_P99_US: u64 = 5_000;

/// The rows whose p99 at [`TARGET_RATE`] is held to [`TARGET_P99_US`].
const P99_TARGET_ROWS: &[&str] = &["redis", "rabbitmq", "nats"];

/// One side's open-loop run at one load.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Run {
    pub(crate) rate: u64,
    pub(crate) who: String,
    pub(crate) p50_us: u64,
    pub(crate) p99_us: u64,
    pub(crate) p999_us: u64,
    pub(crate) max_us: u64,
    pub(crate) handled: u64,
    pub(crate) offered: u64,
    pub(crate) achieved: f64,
    pub(crate) sustained: bool,
    pub(crate) cpu_per_thousand: Option<f64>,
    /// The p99's 95% sampling interval, µs (absent from lines of older benchmarks).
    pub(crate) p99_interval_us: Option<(u64, u64)>,
}

/// The open-loop runs of `row` among `figures`, in the order printed.
pub(crate) fn runs(figures: &[Vec<String>], row: &str) -> Vec<Run> {
    figures
        .iter()
        .filter(|f| f.len() >= 13 && f[0] == "latency" && f[1] == row)
        .filter_map(|f| {
            let int = |at: usize| f[at].parse::<u64>().ok();
            Some(Run {
                rate: int(2)?,
                who: f[3].clone(),
                p50_us: int(4)?,
                p99_us: int(5)?,
                p999_us: int(6)?,
                max_us: int(7)?,
                handled: int(8)?,
                offered: int(9)?,
                achieved: f[10].parse().ok()?,
                sustained: f[11] == "1",
                cpu_per_thousand: f[12].parse().ok(),
                p99_interval_us: f
                    .get(13)
                    .zip(f.get(14))
                    .and_then(|(low, high)| Some((low.parse().ok()?, high.parse().ok()?))),
            })
        })
        .collect()
}

/// The consuming side's CPU-seconds per 1 000 messages of `row` and `who`.
pub(crate) fn cpu(figures: &[Vec<String>], row: &str, who: &str) -> Option<f64> {
    figures
        .iter()
        .find(|f| f.len() >= 5 && f[..4] == ["broker", row, "cpu", who])
        .and_then(|f| f[4].parse().ok())
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1e3)
}

/// The verdict lines of `row`'s runs.
pub(crate) fn verdicts(row: &str, runs: &[Run]) -> Vec<String> {
    let mut lines = Vec::new();
    let find = |rate: u64, who: &str| runs.iter().find(|r| r.rate == rate && r.who == who);
    if P99_TARGET_ROWS.contains(&row) {
        lines.push(match find(TARGET_RATE, "rust") {
            Some(r) if r.sustained => format!(
                "target: p99 under {} ms at {TARGET_RATE} msg/s: {} ms, {}",
                ms(TARGET_P99_US),
                ms(r.p99_us),
                super::verdict(r.p99_us < TARGET_P99_US)
            ),
            Some(_) => format!(
                "target: p99 under {} ms at {TARGET_RATE} msg/s: load not sustained, NOT met",
                ms(TARGET_P99_US)
            ),
            None => format!(
                "target: p99 under {} ms at {TARGET_RATE} msg/s: not measured",
                ms(TARGET_P99_US)
            ),
        });
    }
    // A raw client loop on the same broker, at the same durability and schedule, is the bound
    // the broker and the machine set: when it misses the target too, the client cannot meet it.
    if let Some(raw) = find(TARGET_RATE, "raw")
        && P99_TARGET_ROWS.contains(&row)
    {
        lines.push(format!(
            "bound: the raw client loop (same broker, durability and schedule) at {TARGET_RATE} msg/s: p99 {} ms{}",
            ms(raw.p99_us),
            if !raw.sustained {
                ", load not sustained"
            } else if raw.p99_us >= TARGET_P99_US {
                ": the broker and the machine miss the target without this SDK too"
            } else {
                ""
            }
        ));
    }
    if !runs.iter().any(|r| r.who == "python") {
        lines.push("(no Python SDK row: not compared)".to_owned());
        return lines;
    }
    let mut rates: Vec<u64> = runs.iter().map(|r| r.rate).collect();
    rates.sort_unstable();
    rates.dedup();
    for rate in rates {
        let (Some(ours), python) = (find(rate, "rust"), find(rate, "python")) else {
            continue;
        };
        let line = match python {
            None => "the Python SDK not measured".to_owned(),
            Some(py) if !py.sustained && !ours.sustained => {
                "neither side sustains it (not compared)".to_owned()
            }
            Some(py) if !py.sustained => {
                "the Python SDK does not sustain it, this SDK does: met".to_owned()
            }
            Some(_) if !ours.sustained => {
                "this SDK does not sustain it, the Python SDK does: NOT met".to_owned()
            }
            Some(py) => compare(ours, py),
        };
        lines.push(format!(
            "target: p99 not worse than the Python SDK's at {rate} msg/s: {line}"
        ));
    }
    lines
}

/// This SDK's p99 against the Python SDK's at a load both sustain: met when lower, a tie (met)
/// when higher but the two p99s' sampling intervals overlap, NOT met otherwise.
fn compare(ours: &Run, py: &Run) -> String {
    let figures = format!("{} ms against {} ms", ms(ours.p99_us), ms(py.p99_us));
    if ours.p99_us <= py.p99_us {
        return format!("{figures}, {}", super::verdict(true));
    }
    match (ours.p99_interval_us, py.p99_interval_us) {
        (Some((low, high)), Some((py_low, py_high))) => {
            let intervals = format!(
                "95% sampling intervals {}..{} and {}..{} ms",
                ms(low),
                ms(high),
                ms(py_low),
                ms(py_high)
            );
            if low <= py_high {
                format!(
                    "{figures}, a tie ({intervals} overlap: the runs are not told apart), {}",
                    super::verdict(true)
                )
            } else {
                format!("{figures} ({intervals}), {}", super::verdict(false))
            }
        }
        _ => format!("{figures}, {}", super::verdict(false)),
    }
}

/// Prints `row`'s open-loop table and verdicts; nothing when the benchmark printed no run.
pub(crate) fn report(row: &str, figures: &[Vec<String>]) {
    let runs = runs(figures, row);
    if runs.is_empty() {
        return;
    }
    println!(
        "  open-loop publish-to-handled latency, ms (hdrhistogram; each message's scheduled send time to its handler's start; each side's better of two passes);"
    );
    println!(
        "  CPU s/1k: this SDK's whole process (its producer and consumer), the Python SDK's consuming process only"
    );
    println!(
        "  {:>8} {:<8} {:>8} {:>8} {:>8} {:>8} {:>15} {:>11} {:>10}",
        "msg/s", "who", "p50", "p99", "p99.9", "max", "handled", "achieved/s", "CPU s/1k"
    );
    for r in &runs {
        println!(
            "  {:>8} {:<8} {:>8} {:>8} {:>8} {:>8} {:>15} {:>11.0} {:>10}{}",
            r.rate,
            r.who,
            ms(r.p50_us),
            ms(r.p99_us),
            ms(r.p999_us),
            ms(r.max_us),
            format!("{}/{}", r.handled, r.offered),
            r.achieved,
            r.cpu_per_thousand
                .map_or("-".to_owned(), |c| format!("{c:.3}")),
            if r.sustained { "" } else { "  not sustained" },
        );
    }
    for line in verdicts(row, &runs) {
        println!("  {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::figures;

    const OUT: &str = "\
redis, rust: open loop ...
BQ-FIGURE latency redis 1000 rust 410 1900 3100 4200 3000 3000 996 1 0.0410
BQ-FIGURE latency redis 1000 python 101000 530000 540000 545000 2100 3000 690 0 0.4500
BQ-FIGURE latency redis 100 rust 400 800 900 950 300 300 99 1 -
BQ-FIGURE latency redis 100 python 50000 120000 130000 131000 300 300 98 1 0.2000
BQ-FIGURE latency other 100 rust 1 1 1 1 1 1 1 1 -
BQ-FIGURE latency redis 100 broken line
BQ-FIGURE broker redis cpu rust-c8 0.0312
";

    #[test]
    fn runs_are_read_from_their_row_only() {
        let runs = runs(&figures(OUT), "redis");
        assert_eq!(runs.len(), 4);
        assert_eq!(
            runs[0],
            Run {
                rate: 1000,
                who: "rust".into(),
                p50_us: 410,
                p99_us: 1900,
                p999_us: 3100,
                max_us: 4200,
                handled: 3000,
                offered: 3000,
                achieved: 996.0,
                sustained: true,
                cpu_per_thousand: Some(0.041),
                p99_interval_us: None,
            }
        );
        assert!(!runs[1].sustained);
        assert_eq!(runs[2].cpu_per_thousand, None);
        assert_eq!(cpu(&figures(OUT), "redis", "rust-c8"), Some(0.0312));
        assert_eq!(cpu(&figures(OUT), "redis", "python"), None);
    }

    #[test]
    fn verdicts_compare_only_loads_both_sides_sustain() {
        let lines = verdicts("redis", &runs(&figures(OUT), "redis"));
        assert_eq!(
            lines,
            vec![
                "target: p99 under 5.00 ms at 1000 msg/s: 1.90 ms, met",
                "target: p99 not worse than the Python SDK's at 100 msg/s: 0.80 ms against 120.00 ms, met",
                "target: p99 not worse than the Python SDK's at 1000 msg/s: the Python SDK does not sustain it, this SDK does: met",
            ]
        );
    }

    #[test]
    fn a_slow_or_unsustained_run_fails_its_target() {
        let out = "\
BQ-FIGURE latency rabbitmq 1000 rust 4000 6000 7000 8000 3000 3000 990 1 -
BQ-FIGURE latency rabbitmq 1000 python 3000 5000 6000 7000 3000 3000 990 1 -
BQ-FIGURE latency rabbitmq 10000 rust 4000 6000 7000 8000 9000 20000 4000 0 -
BQ-FIGURE latency rabbitmq 10000 python 3000 5000 6000 7000 20000 20000 9900 1 -
";
        let lines = verdicts("rabbitmq", &runs(&figures(out), "rabbitmq"));
        assert_eq!(
            lines,
            vec![
                "target: p99 under 5.00 ms at 1000 msg/s: 6.00 ms, NOT met",
                "target: p99 not worse than the Python SDK's at 1000 msg/s: 6.00 ms against 5.00 ms, NOT met",
                "target: p99 not worse than the Python SDK's at 10000 msg/s: this SDK does not sustain it, the Python SDK does: NOT met",
            ]
        );
        // A raw client loop's row is printed as the broker's bound.
        let with_raw = format!(
            "{out}BQ-FIGURE latency rabbitmq 1000 raw 400 5500 9000 9500 3000 3000 999 1 -\n"
        );
        assert_eq!(
            verdicts("rabbitmq", &runs(&figures(&with_raw), "rabbitmq"))[1],
            "bound: the raw client loop (same broker, durability and schedule) at 1000 msg/s: p99 5.50 ms: the broker and the machine miss the target without this SDK too"
        );
        // NATS has no Python row.
        let nats = "BQ-FIGURE latency nats 1000 rust 300 4900 7000 8000 3000 3000 1000 1 -\n";
        assert_eq!(
            verdicts("nats", &runs(&figures(nats), "nats")),
            vec![
                "target: p99 under 5.00 ms at 1000 msg/s: 4.90 ms, met",
                "(no Python SDK row: not compared)",
            ]
        );
        // Kafka has no absolute target.
        assert!(
            verdicts("kafka", &runs(&figures(out), "rabbitmq"))[0]
                .contains("1000 msg/s: 6.00 ms against")
        );
    }

    #[test]
    fn a_higher_p99_within_the_python_sdks_sampling_interval_is_a_tie() {
        let out = "\
BQ-FIGURE latency pulsar 100 rust 8480 14360 17740 17770 1000 1000 100 1 0.2000 13900 15100
BQ-FIGURE latency pulsar 100 python 8580 14120 14790 14880 1000 1000 100 1 0.2300 13700 14500
BQ-FIGURE latency pulsar 1000 rust 9000 47000 52000 52000 3000 3000 999 1 0.1000 45000 49000
BQ-FIGURE latency pulsar 1000 python 8000 15000 17000 18000 3000 3000 999 1 0.1000 14000 16000
";
        let lines = verdicts("pulsar", &runs(&figures(out), "pulsar"));
        assert_eq!(
            lines,
            vec![
                "target: p99 not worse than the Python SDK's at 100 msg/s: 14.36 ms against 14.12 ms, a tie (95% sampling intervals 13.90..15.10 and 13.70..14.50 ms overlap: the runs are not told apart), met",
                "target: p99 not worse than the Python SDK's at 1000 msg/s: 47.00 ms against 15.00 ms (95% sampling intervals 45.00..49.00 and 14.00..16.00 ms), NOT met",
            ]
        );
        // A line without the interval (an older benchmark's) is compared strictly.
        let old = "\
BQ-FIGURE latency pulsar 100 rust 8480 14360 17740 17770 1000 1000 100 1 -
BQ-FIGURE latency pulsar 100 python 8580 14120 14790 14880 1000 1000 100 1 -
";
        assert!(
            verdicts("pulsar", &runs(&figures(old), "pulsar"))[0].ends_with("14.12 ms, NOT met")
        );
    }

    #[test]
    fn artemis_pulsar_and_sqs_are_held_to_the_python_sdk_only() {
        let out = "\
BQ-FIGURE latency sqs 100 rust 60000 250000 260000 270000 300 300 99 1 0.5000
BQ-FIGURE latency sqs 100 python 70000 240000 250000 260000 300 300 99 1 0.9000
BQ-FIGURE latency sqs 1000 rust 900000 4000000 4100000 4200000 900 3000 150 0 -
BQ-FIGURE latency sqs 1000 python 900000 4000000 4100000 4200000 500 3000 90 0 -
";
        for row in ["artemis", "pulsar", "sqs"] {
            let text = out.replace(" sqs ", &format!(" {row} "));
            assert_eq!(
                verdicts(row, &runs(&figures(&text), row)),
                vec![
                    "target: p99 not worse than the Python SDK's at 100 msg/s: 250.00 ms against 240.00 ms, NOT met",
                    "target: p99 not worse than the Python SDK's at 1000 msg/s: neither side sustains it (not compared)",
                ],
                "{row}"
            );
        }
    }
}
