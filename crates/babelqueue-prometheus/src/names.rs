//! The metric and label names. OpenTelemetry's messaging conventions name the instruments
//! (`messaging.client.consumed.messages`, `messaging.client.sent.messages`,
//! `messaging.process.duration`) and the attributes (`messaging.system`,
//! `messaging.destination.name`); Prometheus spells them with underscores, counters ending in
//! `_total` and durations in `_seconds`, as OpenTelemetry's own Prometheus mapping does.

/// Counter: deliveries settled, by `messaging_babelqueue_outcome` (`messaging.client.consumed.messages`).
pub const CONSUMED: &str = "messaging_client_consumed_messages_total";
/// Counter: messages the app published (`messaging.client.sent.messages`).
pub const SENT: &str = "messaging_client_sent_messages_total";
/// Histogram: handler run time in seconds, by `messaging_babelqueue_outcome` = `success` or
/// `failure` (`messaging.process.duration`).
pub const PROCESS_DURATION: &str = "messaging_process_duration_seconds";
/// Counter: deliveries whose handler failed (an error or a panic).
pub const FAILED: &str = "babelqueue_messages_failed_total";
/// Counter: deliveries given back for a retry, attempts counted.
pub const RETRIED: &str = "babelqueue_messages_retried_total";
/// Counter: deliveries written to a dead-letter queue (failed, unknown URN, poison, gated).
pub const DEAD_LETTERED: &str = "babelqueue_messages_dead_lettered_total";
/// Gauge: deliveries the worker is working on (dispatched, not settled yet).
pub const IN_FLIGHT: &str = "babelqueue_worker_in_flight_messages";
/// Gauge: messages waiting in the queue, where the transport reports it (`Stats::ready`).
pub const LAG: &str = "babelqueue_queue_lag_messages";
/// Gauge: how long the oldest waiting message has waited, in seconds, where the transport
/// reports it (`Stats::oldest_ready_age`).
pub const OLDEST_AGE: &str = "babelqueue_queue_oldest_age_seconds";

/// Label: `messaging.system`, always [`SYSTEM`].
pub const LABEL_SYSTEM: &str = "messaging_system";
/// The value of [`LABEL_SYSTEM`].
pub const SYSTEM: &str = "babelqueue";
/// Label: `messaging.destination.name`, the queue.
pub const LABEL_DESTINATION: &str = "messaging_destination_name";
/// Label: the URN the delivery was routed by, or the published message's.
pub const LABEL_URN: &str = "messaging_babelqueue_urn";
/// Label: how a delivery ended (`acked`, `retried`, `dead_lettered` …) or whether a handler
/// succeeded (`success`, `failure`).
pub const LABEL_OUTCOME: &str = "messaging_babelqueue_outcome";

/// The handler-duration buckets (seconds) the messaging conventions recommend.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// Gauge of `babelqueue serve` (not recorded by workers): messages of a queue by `state`
/// (`ready`, `in_flight`, `delayed`, `dead_letter`), as the broker reports them.
pub const QUEUE_MESSAGES: &str = "babelqueue_queue_messages";

#[cfg(test)]
mod tests {
    /// Every metric the repository's Grafana dashboard queries is one this crate or
    /// `babelqueue serve` records.
    #[test]
    fn the_grafana_dashboard_queries_only_metrics_that_exist() {
        let known = [
            super::CONSUMED,
            super::SENT,
            super::PROCESS_DURATION,
            super::FAILED,
            super::RETRIED,
            super::DEAD_LETTERED,
            super::IN_FLIGHT,
            super::LAG,
            super::OLDEST_AGE,
            super::QUEUE_MESSAGES,
        ];
        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../../../docs/grafana-dashboard.json"))
                .expect("the dashboard is JSON");
        let panels = dashboard["panels"].as_array().expect("panels");
        assert!(panels.len() >= 6);
        let mut used = std::collections::BTreeSet::new();
        for panel in panels {
            for target in panel["targets"].as_array().expect("targets") {
                let expr = target["expr"].as_str().expect("an expression");
                let names: Vec<&str> = expr
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|w| {
                        w.starts_with("messaging_") && !w.contains("destination")
                            || w.starts_with("babelqueue_")
                    })
                    .filter(|w| !w.starts_with("messaging_babelqueue_"))
                    .collect();
                assert!(!names.is_empty(), "{expr}");
                for name in names {
                    let base = ["_bucket", "_count", "_sum"]
                        .iter()
                        .find_map(|s| name.strip_suffix(s))
                        .unwrap_or(name);
                    assert!(known.contains(&base), "{base} in {expr}");
                    used.insert(base);
                }
            }
        }
        assert_eq!(
            used.len(),
            known.len(),
            "every metric has a panel: {used:?}"
        );
    }
}
