//! What a broker says about one queue right now ([`Stats`], [`QueueStats`]): how many
//! messages wait, how many are handed out and unsettled, how many are delayed, how many sit in
//! the queue's dead-letter queue. Read by tools (`babelqueue stats`, the chaos suite, the
//! benchmarks), never by the runtime's rules.
//!
//! Brokers know different things, so every figure is an `Option`: `None` means the broker does
//! not say it cheaply, never zero. What each transport fills:
//!
//! | transport | `ready` | `in_flight` | `delayed` | `dead_letter` | `consumers` |
//! |---|---|---|---|---|---|
//! | memory | queued | popped, not settled | waiting for their delay | `<queue>.dlq` queued | `None` |
//! | Redis (reliable) | `LLEN <queue>` | `LLEN <queue>:processing` | `None` (no delays) | `LLEN` of `<queue>.dlq` | `None` |
//! | Redis (Laravel) | `LLEN queues:<queue>` | `ZCARD …:reserved` | `ZCARD …:delayed` | `LLEN` of `<queue>.dlq` | `None` |
//! | SQS | `ApproximateNumberOfMessages` | `…NotVisible` | `…Delayed` | `ApproximateNumberOfMessages` of `<queue>-dlq` (`<base>-dlq.fifo`), `None` when it does not exist | `None` |
//! | NATS JetStream | the consumer's `num_pending` (the stream's count before a consumer exists) | `num_ack_pending` | `None` | the `<queue>.dlq` stream's count | `None` |
//! | RabbitMQ | passive `queue.declare`: message count (ready only) | `messages_unacknowledged` of the management API, with a management URL (sampled); else `None` | `None` | passive declare of `<queue>.dlq` | passive declare: consumer count |
//! | Kafka | the consumer group's lag: end offsets less committed offsets (what is handed out and not committed too) | `None` | `None` | the group's lag on `<queue>.dlq` | `None` |
//! | Pulsar (with an admin URL) | the subscription's `msgBacklog` less its `unackedMessages` (admin REST topic stats) | `unackedMessages` | `None` | the subscription's backlog on `<queue>.dlq`, `None` while nobody subscribed to it | the subscription's consumers |
//! | Artemis | `messageCount` less `deliveringCount` and `scheduledCount` (attributes of `queue.<queue>`, read through the `activemq.management` address) | `deliveringCount` | `scheduledCount` | `messageCount` of `<queue>.dlq`, `None` when it does not exist | `consumerCount` |
//! | Azure Service Bus | `ActiveMessageCount` of the management REST API (locked messages included) | `None` (counted in `ready`) | `ScheduledMessageCount` | `ActiveMessageCount` of `<queue>.dlq`, `None` when it does not exist | `None` |
//!
//! `oldest_ready_age`, how long the next message to hand out has waited:
//!
//! | transport | from |
//! |---|---|
//! | Redis (both layouts) | the ready list's head's `meta.created_at` (decoded on the server), `None` for a body that is not an envelope |
//! | NATS JetStream | the stored time of the next sequence the consumer has not handed out |
//! | Pulsar (with an admin URL) | the subscription's `earliestMsgPublishTimeInBacklog` (may be a message handed out and not acknowledged) |
//! | Artemis | `firstMessageTimestamp` (the AMQP `creation-time` the transport sets from `meta.created_at`) |
//! | memory, SQS, RabbitMQ, Kafka, Azure Service Bus | `None`: no cheap call says it |
//!
//! Ages compare a time another clock wrote (a producer's, the broker's) with this host's; a
//! clock ahead gives zero, never a negative age.
//!
//! `source` says in a few words what the broker reported (`"LLEN/ZCARD"`,
//! `"GetQueueAttributes"` …), so a reader knows what a figure means on that broker.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::TransportError;

/// This host's clock in milliseconds since the Unix epoch (0 before it): the `now_ms` of
/// [`QueueStats::oldest_written_at`].
pub fn now_epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The figures a broker gave for one queue. `None`: the broker does not say it cheaply.
///
/// ```
/// use babelqueue_transport::QueueStats;
///
/// let stats = QueueStats::new("LLEN").ready(3).in_flight(1);
/// assert_eq!(stats.ready, Some(3));
/// assert_eq!(stats.delayed, None);
/// assert_eq!(stats.total(), Some(4));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// Messages waiting to be handed out.
    pub ready: Option<u64>,
    /// Messages handed out and not settled yet (reserved, unacknowledged, not visible).
    pub in_flight: Option<u64>,
    /// Messages published with a delay that has not run out yet.
    pub delayed: Option<u64>,
    /// Messages in the queue's default dead-letter queue, where the transport can name and
    /// count it cheaply.
    pub dead_letter: Option<u64>,
    /// How long the oldest message waiting to be handed out has waited, where the broker says
    /// it cheaply (see the table above for what each transport reads).
    pub oldest_ready_age: Option<Duration>,
    /// Consumers attached to the queue right now, where the broker says (a worker that is
    /// running but polls with a short request between receives may not be counted).
    pub consumers: Option<u64>,
    /// What the broker reported, in a few words (`"GetQueueAttributes"`, `"LLEN/ZCARD"` …).
    pub source: String,
}

impl QueueStats {
    /// No figure yet, from `source`.
    pub fn new(source: impl Into<String>) -> QueueStats {
        QueueStats {
            source: source.into(),
            ..QueueStats::default()
        }
    }

    /// With the ready depth.
    #[must_use]
    pub fn ready(mut self, n: u64) -> QueueStats {
        self.ready = Some(n);
        self
    }

    /// With the messages in flight.
    #[must_use]
    pub fn in_flight(mut self, n: u64) -> QueueStats {
        self.in_flight = Some(n);
        self
    }

    /// With the delayed messages.
    #[must_use]
    pub fn delayed(mut self, n: u64) -> QueueStats {
        self.delayed = Some(n);
        self
    }

    /// With the dead-letter queue's depth.
    #[must_use]
    pub fn dead_letter(mut self, n: u64) -> QueueStats {
        self.dead_letter = Some(n);
        self
    }

    /// With the age of the oldest ready message.
    #[must_use]
    pub fn oldest_ready_age(mut self, age: Duration) -> QueueStats {
        self.oldest_ready_age = Some(age);
        self
    }

    /// With the age of the oldest ready message written at `written_ms` (ms since the Unix
    /// epoch, by the clock of whoever wrote it: a producer, the broker), read at `now_ms`
    /// ([`now_epoch_ms`]). A writer's clock ahead of this one gives zero, never a negative or
    /// wrapped-around age.
    ///
    /// ```
    /// use std::time::Duration;
    /// use babelqueue_transport::QueueStats;
    ///
    /// let stats = QueueStats::new("x").oldest_written_at(1_000, 4_500);
    /// assert_eq!(stats.oldest_ready_age, Some(Duration::from_millis(3_500)));
    /// let ahead = QueueStats::new("x").oldest_written_at(9_000, 4_500);
    /// assert_eq!(ahead.oldest_ready_age, Some(Duration::ZERO));
    /// ```
    #[must_use]
    pub fn oldest_written_at(self, written_ms: u64, now_ms: u64) -> QueueStats {
        self.oldest_ready_age(Duration::from_millis(now_ms.saturating_sub(written_ms)))
    }

    /// With the consumers attached.
    #[must_use]
    pub fn consumers(mut self, n: u64) -> QueueStats {
        self.consumers = Some(n);
        self
    }

    /// What is left to handle in the queue itself: ready + in flight + delayed, counting only
    /// the figures the broker gave; `None` when it gave none of the three.
    pub fn total(&self) -> Option<u64> {
        let known = [self.ready, self.in_flight, self.delayed];
        if known.iter().all(Option::is_none) {
            return None;
        }
        Some(known.iter().flatten().sum())
    }
}

/// Say what the broker knows of a queue right now (`babelqueue stats`).
#[async_trait]
pub trait Stats: Send + Sync {
    /// The figures of `queue`. A queue the broker never saw reads as empty where the broker
    /// says so (zeros), never as an error; an unreachable broker is an error.
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_counts_only_known_figures() {
        assert_eq!(QueueStats::new("x").total(), None);
        assert_eq!(QueueStats::new("x").dead_letter(5).total(), None);
        assert_eq!(QueueStats::new("x").ready(2).delayed(3).total(), Some(5));
        assert_eq!(QueueStats::new("x").ready(0).in_flight(1).total(), Some(1));
    }
}
