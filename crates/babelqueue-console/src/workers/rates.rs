//! The pure part of the workers' rates: what one scrape of a worker's `/metrics` says per
//! queue ([`totals`]), and the rate between two scrapes of the same worker ([`rate`]).

use std::collections::BTreeMap;
use std::time::Duration;

use babelqueue::prometheus::names::{CONSUMED, DEAD_LETTERED, FAILED, LABEL_DESTINATION};
use prometheus_parse::{Scrape, Value};

/// The counters of one queue in one scrape, summed over their other labels (URN, outcome).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Totals {
    /// `messaging_client_consumed_messages_total`: deliveries settled, every outcome.
    pub(crate) consumed: f64,
    /// `babelqueue_messages_failed_total`: deliveries whose handler failed.
    pub(crate) failed: f64,
    /// `babelqueue_messages_dead_lettered_total`.
    pub(crate) dead_lettered: f64,
}

/// Per queue (`messaging_destination_name`), what one scrape says.
pub(crate) type Snapshot = BTreeMap<String, Totals>;

/// The counters of `text` (the Prometheus text format) a worker of this SDK records, summed
/// per queue; every other series is ignored. `Err` names why the text is not readable.
pub(crate) fn totals(text: &str) -> Result<Snapshot, String> {
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .map_err(|e| format!("not the Prometheus text format: {e}"))?;
    let mut out = Snapshot::new();
    for sample in scrape.samples {
        let (Value::Counter(value) | Value::Untyped(value)) = sample.value else {
            continue;
        };
        let Some(queue) = sample.labels.get(LABEL_DESTINATION) else {
            continue;
        };
        if !value.is_finite() {
            continue;
        }
        let slot: fn(&mut Totals) -> &mut f64 = match sample.metric.as_str() {
            CONSUMED => |t: &mut Totals| &mut t.consumed,
            FAILED => |t: &mut Totals| &mut t.failed,
            DEAD_LETTERED => |t: &mut Totals| &mut t.dead_lettered,
            _ => continue,
        };
        *slot(out.entry(queue.to_owned()).or_default()) += value;
    }
    Ok(out)
}

/// Per second, how much a counter grew from `before` to `after` over `elapsed`. A counter
/// that went down was restarted (the worker restarted): it counted `after` since then. `None`
/// when no time passed.
pub(crate) fn rate(before: f64, after: f64, elapsed: Duration) -> Option<f64> {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return None;
    }
    let grown = if after >= before {
        after - before
    } else {
        after
    };
    Some(grown / secs)
}

/// The rates of every queue between two scrapes of one worker. A queue the first scrape did
/// not have started from zero (the exporter shows a counter from its first increment on).
pub(crate) fn rates(before: &Snapshot, after: &Snapshot, elapsed: Duration) -> Snapshot {
    let mut out = Snapshot::new();
    for (queue, now) in after {
        let then = before.get(queue).copied().unwrap_or_default();
        let (Some(consumed), Some(failed), Some(dead_lettered)) = (
            rate(then.consumed, now.consumed, elapsed),
            rate(then.failed, now.failed, elapsed),
            rate(then.dead_lettered, now.dead_lettered, elapsed),
        ) else {
            continue;
        };
        out.insert(
            queue.clone(),
            Totals {
                consumed,
                failed,
                dead_lettered,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `babelqueue::prometheus` renders for a worker (trimmed), with a series of another
    /// exporter and a histogram beside it.
    const TEXT: &str = r#"# TYPE messaging_client_consumed_messages_total counter
messaging_client_consumed_messages_total{messaging_system="babelqueue",messaging_destination_name="orders",messaging_babelqueue_urn="urn:babel:orders:created",messaging_babelqueue_outcome="acked"} 10
messaging_client_consumed_messages_total{messaging_system="babelqueue",messaging_destination_name="orders",messaging_babelqueue_urn="urn:babel:orders:paid",messaging_babelqueue_outcome="retried"} 2
messaging_client_consumed_messages_total{messaging_system="babelqueue",messaging_destination_name="mails",messaging_babelqueue_outcome="acked"} 5
# TYPE babelqueue_messages_failed_total counter
babelqueue_messages_failed_total{messaging_system="babelqueue",messaging_destination_name="orders"} 3
# TYPE babelqueue_messages_dead_lettered_total counter
babelqueue_messages_dead_lettered_total{messaging_system="babelqueue",messaging_destination_name="orders"} 1
# TYPE messaging_process_duration_seconds histogram
messaging_process_duration_seconds_bucket{messaging_destination_name="orders",le="0.005"} 12
messaging_process_duration_seconds_sum{messaging_destination_name="orders"} 0.01
messaging_process_duration_seconds_count{messaging_destination_name="orders"} 12
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 4.5
"#;

    #[test]
    fn a_scrape_sums_each_queue_over_its_urns_and_outcomes() {
        let totals = totals(TEXT).expect("readable");
        assert_eq!(
            totals.get("orders"),
            Some(&Totals {
                consumed: 12.0,
                failed: 3.0,
                dead_lettered: 1.0
            })
        );
        assert_eq!(totals["mails"].consumed, 5.0);
        assert_eq!(totals["mails"].failed, 0.0);
        assert_eq!(
            totals.len(),
            2,
            "the histogram and the other counter are ignored"
        );
    }

    #[test]
    fn a_page_without_our_series_gives_no_queue() {
        assert!(totals("").expect("readable").is_empty());
        assert!(
            totals("<html>not metrics</html>\n")
                .expect("ignored")
                .is_empty()
        );
    }

    #[test]
    fn the_rate_rows() {
        let s = Duration::from_secs;
        // (before, after, elapsed, rate)
        let rows = [
            (10.0, 40.0, s(15), Some(2.0)),
            (10.0, 10.0, s(15), Some(0.0)),
            // the worker restarted and counted 6 since
            (100.0, 6.0, s(3), Some(2.0)),
            (0.0, 5.0, Duration::ZERO, None),
        ];
        for (before, after, elapsed, want) in rows {
            assert_eq!(rate(before, after, elapsed), want, "{before} -> {after}");
        }
    }

    #[test]
    fn rates_between_two_scrapes_count_a_new_queue_from_zero() {
        let before = Snapshot::from([(
            "orders".to_owned(),
            Totals {
                consumed: 10.0,
                failed: 1.0,
                dead_lettered: 0.0,
            },
        )]);
        let after = Snapshot::from([
            (
                "orders".to_owned(),
                Totals {
                    consumed: 30.0,
                    failed: 5.0,
                    dead_lettered: 2.0,
                },
            ),
            (
                "mails".to_owned(),
                Totals {
                    consumed: 4.0,
                    ..Totals::default()
                },
            ),
        ]);
        let rates = rates(&before, &after, Duration::from_secs(2));
        assert_eq!(
            rates["orders"],
            Totals {
                consumed: 10.0,
                failed: 2.0,
                dead_lettered: 1.0
            }
        );
        assert_eq!(rates["mails"].consumed, 2.0);
    }
}
