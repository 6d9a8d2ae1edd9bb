//! What the memory transport knows of a queue ([`Stats`]): everything, exactly, since it is
//! the broker. The dead-letter figure is the default `<queue>.dlq` (an app configured with
//! another dead-letter queue counts that one with a second `stats`). No age: a stored message
//! keeps no publish time, and adding one to every message only for a tool is not worth it.

use async_trait::async_trait;
use tokio::time::Instant;

use super::{MemoryTransport, State};
use crate::error::TransportError;
use crate::stats::{QueueStats, Stats};

/// The figures of `queue` in `state` at `now`.
fn count(state: &State, queue: &str, now: Instant) -> QueueStats {
    let (mut ready, mut delayed) = (0u64, 0u64);
    if let Some(q) = state.queues.get(queue) {
        for m in &q.waiting {
            if m.visible_at.is_some_and(|t| t > now) {
                delayed += 1;
            } else {
                ready += 1;
            }
        }
    }
    let in_flight = state
        .in_flight
        .values()
        .filter(|f| &*f.queue == queue)
        .count() as u64;
    let dlq = format!("{queue}.dlq");
    let dead_letter = state.queues.get(&dlq).map_or(0, |q| q.waiting.len()) as u64;
    QueueStats::new("memory: the transport's own queues")
        .ready(ready)
        .in_flight(in_flight)
        .delayed(delayed)
        .dead_letter(dead_letter)
}

#[async_trait]
impl Stats for MemoryTransport {
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError> {
        Ok(count(&self.state(), queue, Instant::now()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::transport::{Outgoing, Transport};

    use super::*;

    #[tokio::test]
    async fn counts_ready_in_flight_delayed_and_dead_letters() {
        let memory = MemoryTransport::new();
        for _ in 0..3 {
            memory.publish("q", b"{}").await.expect("publish");
        }
        memory
            .send(&Outgoing::new("q", b"{}").delay(Duration::from_secs(60)))
            .await
            .expect("delayed publish");
        memory.publish("q.dlq", b"{}").await.expect("dlq publish");
        memory.publish("other", b"{}").await.expect("publish");
        let held = memory
            .pop("q", Duration::ZERO)
            .await
            .expect("pop")
            .expect("a delivery");

        let stats = memory.stats("q").await.expect("stats");
        assert_eq!(
            (
                stats.ready,
                stats.in_flight,
                stats.delayed,
                stats.dead_letter
            ),
            (Some(2), Some(1), Some(1), Some(1))
        );
        memory.ack(&held).await.expect("ack");
        assert_eq!(memory.stats("q").await.expect("stats").in_flight, Some(0));
        let never = memory.stats("never").await.expect("stats");
        assert_eq!(never.total(), Some(0));
    }
}
