//! What RabbitMQ says of a queue ([`Stats`]): a passive `queue.declare`, on a channel of its
//! own, answers the ready messages and the consumers attached. RabbitMQ counts only the ready
//! messages there; how many are delivered and unacknowledged only its management HTTP API
//! says, read when [`AmqpOptions::management_url`](crate::AmqpOptions::management_url) is set.
//!
//! * `ready`: the declare's `message_count` (exact);
//! * `consumers`: the declare's `consumer_count`;
//! * `in_flight`: the management API's `messages_unacknowledged` (sampled by the plugin every
//!   `collect_statistics_interval`, 5 s by default); `None` without a management URL, and
//!   until the plugin has sampled a queue declared a moment ago;
//! * `dead_letter`: the `message_count` of `<queue>.dlq` (0 when it does not exist);
//! * `delayed`, `oldest_ready_age`: `None` (the transport has no delays; RabbitMQ's
//!   `head_message_timestamp` needs a `timestamp` property BabelQueue's messages do not carry).
//!
//! A queue that does not exist counts 0 (the transport declares queues on first use).

use async_trait::async_trait;
use babelqueue_core::{QueueStats, Stats, TransportError};

use crate::client::QueueCount;
use crate::management::ManagedQueue;
use crate::transport::AmqpTransport;

/// The figures from the declares of the queue and its dead-letter queue, and the management
/// API's answer: `None` without a management URL, `Some(None)` for a queue it does not know.
fn project(
    own: Option<QueueCount>,
    dead_letter: Option<QueueCount>,
    managed: Option<Option<ManagedQueue>>,
) -> QueueStats {
    let own = own.unwrap_or(QueueCount {
        messages: 0,
        consumers: 0,
    });
    let mut stats = match managed {
        Some(_) => QueueStats::new(
            "rabbitmq: passive queue.declare, messages_unacknowledged of the management API",
        ),
        None => QueueStats::new("rabbitmq: passive queue.declare (no management URL: ready only)"),
    };
    stats.in_flight = match managed {
        // a queue the management API does not know has nothing in flight
        Some(None) => Some(0),
        Some(Some(m)) => m.unacknowledged,
        None => None,
    };
    stats
        .ready(u64::from(own.messages))
        .consumers(u64::from(own.consumers))
        .dead_letter(dead_letter.map_or(0, |d| u64::from(d.messages)))
}

#[async_trait]
impl Stats for AmqpTransport {
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError> {
        let own = self.count(queue).await?;
        let dead_letter = self.count(&format!("{queue}.dlq")).await?;
        let managed = self.managed(queue).await.transpose()?;
        Ok(project(own, dead_letter, managed))
    }
}

#[cfg(test)]
mod tests {
    use babelqueue_core::Transport;

    use super::*;
    use crate::fake::FakeClient;

    #[test]
    fn a_declare_projects_onto_ready_and_consumers() {
        let own = QueueCount {
            messages: 5,
            consumers: 2,
        };
        let dlq = QueueCount {
            messages: 1,
            consumers: 0,
        };
        let stats = project(Some(own), Some(dlq), None);
        assert_eq!(
            (
                stats.ready,
                stats.consumers,
                stats.dead_letter,
                stats.in_flight
            ),
            (Some(5), Some(2), Some(1), None)
        );
        let missing = project(None, None, None);
        assert_eq!((missing.ready, missing.dead_letter), (Some(0), Some(0)));
    }

    #[test]
    fn the_management_api_adds_the_messages_in_flight() {
        let own = QueueCount {
            messages: 5,
            consumers: 1,
        };
        let managed = ManagedQueue {
            unacknowledged: Some(3),
        };
        let stats = project(Some(own), None, Some(Some(managed)));
        assert_eq!(
            (stats.ready, stats.in_flight, stats.total()),
            (Some(5), Some(3), Some(8))
        );
        assert!(stats.source.contains("management"), "{}", stats.source);
        // a queue the management API does not know has nothing in flight; one it has not
        // sampled yet has no figure
        assert_eq!(project(None, None, Some(None)).in_flight, Some(0));
        let unsampled = ManagedQueue {
            unacknowledged: None,
        };
        assert_eq!(project(None, None, Some(Some(unsampled))).in_flight, None);
    }

    #[tokio::test]
    async fn the_fake_counts_what_is_ready() {
        let transport = AmqpTransport::with_client(
            std::sync::Arc::new(FakeClient::default()),
            Default::default(),
        );
        for _ in 0..2 {
            transport.publish("orders", b"{}").await.expect("publish");
        }
        let stats = transport.stats("orders").await.expect("stats");
        assert_eq!((stats.ready, stats.dead_letter), (Some(2), Some(0)));
    }
}
