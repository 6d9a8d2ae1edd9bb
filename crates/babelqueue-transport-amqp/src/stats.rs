//! What RabbitMQ says of a queue over AMQP ([`Stats`]): a passive `queue.declare`, on a channel
//! of its own, answers the ready messages and the consumers attached. RabbitMQ counts only the
//! ready messages there; how many are delivered and unacknowledged only its management HTTP
//! API says, which this transport has no address for, so `in_flight` is `None`.
//!
//! * `ready`: the declare's `message_count`;
//! * `consumers`: the declare's `consumer_count`;
//! * `dead_letter`: the `message_count` of `<queue>.dlq` (0 when it does not exist);
//! * `in_flight`, `delayed`, `oldest_ready_age`: `None`.
//!
//! A queue that does not exist counts 0 (the transport declares queues on first use).

use async_trait::async_trait;
use babelqueue_core::{QueueStats, Stats, TransportError};

use crate::client::QueueCount;
use crate::transport::AmqpTransport;

fn project(own: Option<QueueCount>, dead_letter: Option<QueueCount>) -> QueueStats {
    let own = own.unwrap_or(QueueCount {
        messages: 0,
        consumers: 0,
    });
    QueueStats::new("rabbitmq: passive queue.declare (ready messages only)")
        .ready(u64::from(own.messages))
        .consumers(u64::from(own.consumers))
        .dead_letter(dead_letter.map_or(0, |d| u64::from(d.messages)))
}

#[async_trait]
impl Stats for AmqpTransport {
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError> {
        let own = self.count(queue).await?;
        let dead_letter = self.count(&format!("{queue}.dlq")).await?;
        Ok(project(own, dead_letter))
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
        let stats = project(Some(own), Some(dlq));
        assert_eq!(
            (
                stats.ready,
                stats.consumers,
                stats.dead_letter,
                stats.in_flight
            ),
            (Some(5), Some(2), Some(1), None)
        );
        let missing = project(None, None);
        assert_eq!((missing.ready, missing.dead_letter), (Some(0), Some(0)));
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
