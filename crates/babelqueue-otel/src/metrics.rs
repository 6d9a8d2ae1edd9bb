//! Message metrics: an [`Observer`] the runtime reports every settled delivery to.
//!
//! | instrument | kind | unit | counts |
//! |---|---|---|---|
//! | `babelqueue.messages.handled` | counter | `{message}` | handler ran and succeeded |
//! | `babelqueue.messages.failed` | counter | `{message}` | handler ran and failed (an error or a panic) |
//! | `babelqueue.messages.retried` | counter | `{message}` | given back for a retry, attempts counted |
//! | `babelqueue.messages.dead_lettered` | counter | `{message}` | written to the dead-letter queue (failed, unknown URN, poison, gated) |
//! | `messaging.process.duration` | histogram | `s` | handler run time, success or failure |
//!
//! Every point carries `messaging.system` = `babelqueue` and `messaging.destination.name` = the
//! consumed queue; `messaging.babelqueue.urn` is added when the delivery had a URN (not for
//! poison or gated bodies) unless turned off with [`Metrics::with_urn`] (URNs come from the
//! wire: a fallback handler sees whatever producers send). The histogram also carries
//! `messaging.babelqueue.outcome` = `success` or `failure`. A handler interrupted by the
//! shutdown deadline is not counted (its message is released unchanged).
//!
//! ```
//! use std::sync::Arc;
//! use babelqueue_core::{App, MemoryTransport};
//! use babelqueue_otel::Metrics;
//!
//! let app = App::builder(MemoryTransport::new())
//!     .observer(Arc::new(Metrics::global()))
//!     .build()
//!     .unwrap();
//! # let _ = app;
//! ```

use std::fmt;

use babelqueue_core::{Event, Observer, Outcome};
use opentelemetry::metrics::{Counter, Histogram, Meter};
use opentelemetry::{KeyValue, global};
use opentelemetry_semantic_conventions::attribute as semconv;

use crate::spans::{ATTR_URN, MESSAGING_SYSTEM};

/// Counter of deliveries whose handler succeeded.
pub const HANDLED: &str = "babelqueue.messages.handled";
/// Counter of deliveries whose handler failed.
pub const FAILED: &str = "babelqueue.messages.failed";
/// Counter of deliveries given back for a retry.
pub const RETRIED: &str = "babelqueue.messages.retried";
/// Counter of deliveries written to a dead-letter queue.
pub const DEAD_LETTERED: &str = "babelqueue.messages.dead_lettered";
/// Histogram of handler run time, in seconds.
pub const PROCESS_DURATION: &str = "messaging.process.duration";
/// The histogram attribute that says whether the handler succeeded.
pub const ATTR_OUTCOME: &str = "messaging.babelqueue.outcome";

/// The duration buckets (seconds) the messaging semantic conventions recommend.
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// The metrics observer (see the [module docs](self)); attach it with
/// [`AppBuilder::observer`](babelqueue_core::AppBuilder::observer).
#[derive(Clone)]
pub struct Metrics {
    handled: Counter<u64>,
    failed: Counter<u64>,
    retried: Counter<u64>,
    dead_lettered: Counter<u64>,
    duration: Histogram<f64>,
    urn: bool,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("urn", &self.urn)
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// Instruments created on `meter`.
    pub fn new(meter: &Meter) -> Metrics {
        let counter = |name: &'static str, description: &'static str| {
            meter
                .u64_counter(name)
                .with_unit("{message}")
                .with_description(description)
                .build()
        };
        Metrics {
            handled: counter(HANDLED, "Deliveries whose handler succeeded"),
            failed: counter(FAILED, "Deliveries whose handler failed"),
            retried: counter(RETRIED, "Deliveries given back for a retry"),
            dead_lettered: counter(DEAD_LETTERED, "Deliveries written to a dead-letter queue"),
            duration: meter
                .f64_histogram(PROCESS_DURATION)
                .with_unit("s")
                .with_description("Handler run time")
                .with_boundaries(BUCKETS.to_vec())
                .build(),
            urn: true,
        }
    }

    /// Instruments on the globally installed meter provider (scope `babelqueue-otel`).
    pub fn global() -> Metrics {
        Metrics::new(&global::meter_provider().meter_with_scope(crate::spans::scope()))
    }

    /// Whether points carry `messaging.babelqueue.urn` (default on).
    #[must_use]
    pub fn with_urn(mut self, on: bool) -> Metrics {
        self.urn = on;
        self
    }

    fn attributes(&self, event: &Event<'_>) -> Vec<KeyValue> {
        let mut attributes = vec![
            KeyValue::new(semconv::MESSAGING_SYSTEM, MESSAGING_SYSTEM),
            KeyValue::new(semconv::MESSAGING_DESTINATION_NAME, event.queue.to_owned()),
        ];
        if self.urn && !event.urn.is_empty() {
            attributes.push(KeyValue::new(ATTR_URN, event.urn.to_owned()));
        }
        attributes
    }
}

impl Observer for Metrics {
    fn on_event(&self, event: &Event<'_>) {
        let mut attributes = self.attributes(event);
        match event.outcome {
            Outcome::Retried => self.retried.add(1, &attributes),
            Outcome::DeadLettered => self.dead_lettered.add(1, &attributes),
            _ => {}
        }
        if let Some((took, ok)) = event.handler {
            if ok {
                self.handled.add(1, &attributes);
            } else {
                self.failed.add(1, &attributes);
            }
            attributes.push(KeyValue::new(
                ATTR_OUTCOME,
                if ok { "success" } else { "failure" },
            ));
            self.duration.record(took.as_secs_f64(), &attributes);
        }
    }
}
