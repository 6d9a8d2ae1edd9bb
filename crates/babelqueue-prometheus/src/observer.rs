//! The worker's metrics: an [`Observer`] that records every delivery and publish through the
//! `metrics` facade, so whichever recorder the process installed (this crate's Prometheus one,
//! or another) receives them.
//!
//! The handles of a queue and URN are registered once and kept: a delivery costs one map
//! lookup and a few atomic adds, not a label set built and hashed per metric.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use babelqueue_core::{Event, Observer, Outcome};
use metrics::{Counter, Gauge, Histogram, Label, counter, gauge, histogram};

use crate::names::{
    CONSUMED, DEAD_LETTERED, FAILED, IN_FLIGHT, LABEL_DESTINATION, LABEL_OUTCOME, LABEL_SYSTEM,
    LABEL_URN, PROCESS_DURATION, RETRIED, SENT, SYSTEM,
};

/// The outcomes with a handle of their own, in slot order.
const OUTCOMES: [Outcome; 8] = [
    Outcome::Acked,
    Outcome::Dropped,
    Outcome::Retried,
    Outcome::Released,
    Outcome::DeadLettered,
    Outcome::Native,
    Outcome::Unsettled,
    Outcome::Interrupted,
];

/// The handles of one queue and URN.
struct Series {
    consumed: [Counter; OUTCOMES.len()],
    failed: Counter,
    retried: Counter,
    dead_lettered: Counter,
    succeeded_in: Histogram,
    failed_in: Histogram,
    sent: Counter,
}

impl Series {
    fn register(labels: &[Label]) -> Series {
        let with_outcome = |outcome: &'static str| {
            let mut all = labels.to_vec();
            all.push(Label::new(LABEL_OUTCOME, outcome));
            all
        };
        Series {
            consumed: OUTCOMES.map(|o| counter!(CONSUMED, with_outcome(o.as_str()))),
            failed: counter!(FAILED, labels.to_vec()),
            retried: counter!(RETRIED, labels.to_vec()),
            dead_lettered: counter!(DEAD_LETTERED, labels.to_vec()),
            succeeded_in: histogram!(PROCESS_DURATION, with_outcome("success")),
            failed_in: histogram!(PROCESS_DURATION, with_outcome("failure")),
            sent: counter!(SENT, labels.to_vec()),
        }
    }
}

thread_local! {
    /// The lookup key being built, reused so a lookup allocates nothing.
    static KEY: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Records deliveries and publishes (see the [crate docs](crate) for the names). Attach it with
/// [`AppBuilder::observer`](babelqueue_core::AppBuilder::observer); cheap to clone (clones
/// share their handles). Install the recorder before the first message: a handle registers
/// with the recorder installed at that moment.
#[derive(Clone)]
pub struct WorkerMetrics {
    urn: bool,
    /// By `queue \0 urn`.
    series: Arc<RwLock<HashMap<String, Arc<Series>>>>,
    /// By queue.
    in_flight: Arc<RwLock<HashMap<String, Gauge>>>,
}

impl std::fmt::Debug for WorkerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerMetrics")
            .field("urn", &self.urn)
            .finish_non_exhaustive()
    }
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        WorkerMetrics::new()
    }
}

impl WorkerMetrics {
    /// Metrics with the URN label on.
    pub fn new() -> WorkerMetrics {
        WorkerMetrics {
            urn: true,
            series: Arc::default(),
            in_flight: Arc::default(),
        }
    }

    /// Whether series carry the `messaging_babelqueue_urn` label (default on). URNs come from
    /// the wire: a fallback handler sees whatever producers send, and each URN is a series.
    #[must_use]
    pub fn with_urn(mut self, on: bool) -> WorkerMetrics {
        self.urn = on;
        self
    }

    fn labels(&self, queue: &str, urn: &str) -> Vec<Label> {
        let mut labels = vec![
            Label::new(LABEL_SYSTEM, SYSTEM),
            Label::new(LABEL_DESTINATION, queue.to_owned()),
        ];
        if self.urn && !urn.is_empty() {
            labels.push(Label::new(LABEL_URN, urn.to_owned()));
        }
        labels
    }

    /// The handles of `queue` and `urn`, registered on first use.
    fn series(&self, queue: &str, urn: &str) -> Arc<Series> {
        let urn = if self.urn { urn } else { "" };
        KEY.with_borrow_mut(|key| {
            key.clear();
            key.push_str(queue);
            key.push('\0');
            key.push_str(urn);
            let found = self
                .series
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(key.as_str())
                .cloned();
            found.unwrap_or_else(|| {
                let series = Arc::new(Series::register(&self.labels(queue, urn)));
                self.series
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(key.clone())
                    .or_insert(series)
                    .clone()
            })
        })
    }

    fn in_flight(&self, queue: &str) -> Gauge {
        if let Some(gauge) = self
            .in_flight
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(queue)
        {
            return gauge.clone();
        }
        self.in_flight
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(queue.to_owned())
            .or_insert_with(
                || gauge!(IN_FLIGHT, LABEL_SYSTEM => SYSTEM, LABEL_DESTINATION => queue.to_owned()),
            )
            .clone()
    }
}

impl Observer for WorkerMetrics {
    fn on_dispatch(&self, queue: &str) {
        self.in_flight(queue).increment(1.0);
    }

    fn on_event(&self, event: &Event<'_>) {
        self.in_flight(event.queue).decrement(1.0);
        let series = self.series(event.queue, event.urn);
        match OUTCOMES.iter().position(|o| *o == event.outcome) {
            Some(slot) => series.consumed[slot].increment(1),
            // an outcome newer than this crate: registered on the spot
            None => {
                let mut labels = self.labels(event.queue, event.urn);
                labels.push(Label::new(LABEL_OUTCOME, event.outcome.as_str()));
                counter!(CONSUMED, labels).increment(1);
            }
        }
        match event.outcome {
            Outcome::Retried => series.retried.increment(1),
            Outcome::DeadLettered => series.dead_lettered.increment(1),
            _ => {}
        }
        if let Some((took, ok)) = event.handler {
            if ok {
                series.succeeded_in.record(took.as_secs_f64());
            } else {
                series.failed.increment(1);
                series.failed_in.record(took.as_secs_f64());
            }
        }
    }

    fn on_published(&self, queue: &str, urn: &str, count: u64) {
        self.series(queue, urn).sent.increment(count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_urn_label_is_left_out_when_off_or_empty() {
        let on = WorkerMetrics::new();
        assert_eq!(on.labels("q", "urn:babel:a:b").len(), 3);
        assert_eq!(on.labels("q", "").len(), 2, "poison has no URN");
        assert_eq!(on.with_urn(false).labels("q", "urn:babel:a:b").len(), 2);
    }

    #[test]
    fn a_queue_and_urn_share_one_set_of_handles() {
        let metrics = WorkerMetrics::new();
        let a = metrics.series("orders", "urn:babel:a:b");
        assert!(Arc::ptr_eq(&a, &metrics.series("orders", "urn:babel:a:b")));
        assert!(!Arc::ptr_eq(&a, &metrics.series("orders", "urn:babel:a:c")));
        // with the URN label off, every URN of a queue is one series
        let off = WorkerMetrics::new().with_urn(false);
        assert!(Arc::ptr_eq(
            &off.series("q", "urn:x"),
            &off.series("q", "urn:y")
        ));
        assert_eq!(metrics.series.read().map(|m| m.len()).unwrap_or(0), 2);
    }
}
