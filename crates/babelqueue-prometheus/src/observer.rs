//! The worker's metrics: an [`Observer`] that records every delivery and publish through the
//! `metrics` facade, so whichever recorder the process installed (this crate's Prometheus one,
//! or another) receives them.

use babelqueue_core::{Event, Observer, Outcome};
use metrics::{Label, counter, gauge, histogram};

use crate::names::{
    CONSUMED, DEAD_LETTERED, FAILED, IN_FLIGHT, LABEL_DESTINATION, LABEL_OUTCOME, LABEL_SYSTEM,
    LABEL_URN, PROCESS_DURATION, RETRIED, SENT, SYSTEM,
};

/// Records deliveries and publishes (see the [crate docs](crate) for the names). Attach it with
/// [`AppBuilder::observer`](babelqueue_core::AppBuilder::observer); cheap to clone.
#[derive(Debug, Clone)]
pub struct WorkerMetrics {
    urn: bool,
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        WorkerMetrics::new()
    }
}

impl WorkerMetrics {
    /// Metrics with the URN label on.
    pub fn new() -> WorkerMetrics {
        WorkerMetrics { urn: true }
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
}

fn in_flight(queue: &str) -> metrics::Gauge {
    gauge!(IN_FLIGHT, LABEL_SYSTEM => SYSTEM, LABEL_DESTINATION => queue.to_owned())
}

impl Observer for WorkerMetrics {
    fn on_dispatch(&self, queue: &str) {
        in_flight(queue).increment(1.0);
    }

    fn on_event(&self, event: &Event<'_>) {
        in_flight(event.queue).decrement(1.0);
        let labels = self.labels(event.queue, event.urn);
        let mut consumed = labels.clone();
        consumed.push(Label::new(LABEL_OUTCOME, event.outcome.as_str()));
        counter!(CONSUMED, consumed).increment(1);
        match event.outcome {
            Outcome::Retried => counter!(RETRIED, labels.clone()).increment(1),
            Outcome::DeadLettered => counter!(DEAD_LETTERED, labels.clone()).increment(1),
            _ => {}
        }
        if let Some((took, ok)) = event.handler {
            if !ok {
                counter!(FAILED, labels.clone()).increment(1);
            }
            let mut timed = labels;
            timed.push(Label::new(
                LABEL_OUTCOME,
                if ok { "success" } else { "failure" },
            ));
            histogram!(PROCESS_DURATION, timed).record(took.as_secs_f64());
        }
    }

    fn on_published(&self, queue: &str, urn: &str, count: u64) {
        counter!(SENT, self.labels(queue, urn)).increment(count);
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
}
