//! Queue lag: the transport's [`Stats`](babelqueue_core::Stats) sampled into gauges, for the
//! brokers that report them.

use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::{QueueStats, Transport};
use metrics::gauge;

use crate::names::{LABEL_DESTINATION, LABEL_SYSTEM, LAG, OLDEST_AGE, SYSTEM};

/// The sampling task; dropping it stops the sampling.
#[derive(Debug)]
pub struct LagWatch {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LagWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Sets the gauges of `queue` from one [`QueueStats`]; a figure the broker does not report
/// leaves its gauge unset (absent from the scrape), never 0.
pub(crate) fn record(queue: &str, stats: &QueueStats) {
    if let Some(ready) = stats.ready {
        #[allow(clippy::cast_precision_loss)] // a depth above 2^53 is not a depth
        gauge!(LAG, LABEL_SYSTEM => SYSTEM, LABEL_DESTINATION => queue.to_owned())
            .set(ready as f64);
    }
    if let Some(age) = stats.oldest_ready_age {
        gauge!(OLDEST_AGE, LABEL_SYSTEM => SYSTEM, LABEL_DESTINATION => queue.to_owned())
            .set(age.as_secs_f64());
    }
}

/// Samples the stats of `queues` every `every` on the current tokio runtime, until the
/// returned [`LagWatch`] is dropped. A transport without `Stats` records nothing (and says so
/// once in the log); a failed read is logged and tried again at the next tick.
pub fn watch_lag(transport: Arc<dyn Transport>, queues: Vec<String>, every: Duration) -> LagWatch {
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut warned = false;
        loop {
            tick.tick().await;
            let capabilities = transport.capabilities();
            let Some(reader) = capabilities.stats_reader() else {
                if !warned {
                    tracing::info!(target: "babelqueue::prometheus", transport = transport.name(),
                        "the transport reports no queue stats: no lag gauges");
                    warned = true;
                }
                continue;
            };
            for queue in &queues {
                match reader.stats(queue).await {
                    Ok(stats) => record(queue, &stats),
                    Err(e) => tracing::debug!(target: "babelqueue::prometheus", queue,
                        error = %e, "reading queue stats for the lag gauges failed"),
                }
            }
        }
    });
    LagWatch { task }
}
