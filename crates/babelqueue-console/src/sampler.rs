//! The last hour of every queue's depth: the sampler reads each queue's stats periodically
//! into an in-memory ring per queue (the chart on the pages, `/api/v1/.../history`).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use utoipa::ToSchema;

use crate::Console;
use crate::view::now_ms;

/// How far back the history goes.
pub(crate) const WINDOW: Duration = Duration::from_secs(3600);

/// One sample of one queue.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct Point {
    /// When, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Ready messages, when the broker says.
    pub ready: Option<u64>,
    /// Messages in flight, when the broker says.
    pub in_flight: Option<u64>,
    /// Dead letters, when the broker says.
    pub dead_letter: Option<u64>,
    /// Deliveries the workers settled per second (`--worker-metrics`), when they report
    /// the queue.
    pub consumed_per_sec: Option<f64>,
}

/// The rings, one per watched queue in source order.
#[derive(Debug)]
pub(crate) struct History {
    rings: Vec<Mutex<VecDeque<Point>>>,
    capacity: usize,
}

impl History {
    pub(crate) fn new(queues: usize, every: Duration) -> History {
        let every = every.as_millis().max(1);
        let capacity = usize::try_from(WINDOW.as_millis() / every)
            .unwrap_or(usize::MAX)
            .clamp(2, 3600);
        History {
            rings: (0..queues).map(|_| Mutex::new(VecDeque::new())).collect(),
            capacity,
        }
    }

    pub(crate) fn push(&self, index: usize, point: Point) {
        if let Some(ring) = self.rings.get(index) {
            let mut ring = ring.lock().unwrap_or_else(|p| p.into_inner());
            if ring.len() == self.capacity {
                ring.pop_front();
            }
            ring.push_back(point);
        }
    }

    /// The points of the last hour, oldest first.
    pub(crate) fn points(&self, index: usize) -> Vec<Point> {
        let since = now_ms().saturating_sub(u64::try_from(WINDOW.as_millis()).unwrap_or(0));
        self.rings.get(index).map_or_else(Vec::new, |ring| {
            let ring = ring.lock().unwrap_or_else(|p| p.into_inner());
            ring.iter().filter(|p| p.at_ms >= since).copied().collect()
        })
    }
}

/// The flat index of queue `queue` of source `source`.
pub(crate) fn index(console: &Console, source: usize, queue: &str) -> Option<usize> {
    let mut n = 0;
    for (s, src) in console.sources().iter().enumerate() {
        for q in src.queues() {
            if s == source && q.name == queue {
                return Some(n);
            }
            n += 1;
        }
    }
    None
}

/// Reads every queue's stats once into the history and the gauges.
pub(crate) async fn sample(console: &Console) {
    console.inner.workers.scrape().await;
    let mut n = 0;
    for source in console.sources() {
        for queue in source.queues() {
            if let Ok(Some(stats)) = crate::scan::stats(source, queue).await {
                console
                    .inner
                    .metrics
                    .set(source.transport().name(), &queue.name, &stats);
                console.inner.history.push(
                    n,
                    Point {
                        at_ms: now_ms(),
                        ready: stats.ready,
                        in_flight: stats.in_flight,
                        dead_letter: stats.dead_letter,
                        consumed_per_sec: console
                            .inner
                            .workers
                            .queue(&queue.name)
                            .and_then(|r| r.consumed_per_sec),
                    },
                );
            }
            n += 1;
        }
    }
}

/// Samples forever, every `sample_every`.
pub(crate) async fn run(console: Console) {
    let mut tick = tokio::time::interval(console.inner.sample_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        sample(&console).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_an_hour_of_samples() {
        let history = History::new(1, Duration::from_secs(15));
        assert_eq!(history.capacity, 240);
        for i in 0..300 {
            history.push(
                0,
                Point {
                    at_ms: now_ms(),
                    ready: Some(i),
                    in_flight: None,
                    dead_letter: None,
                    consumed_per_sec: None,
                },
            );
        }
        let points = history.points(0);
        assert_eq!(points.len(), 240);
        assert_eq!(points[0].ready, Some(60));
        assert!(history.points(5).is_empty());
    }
}
