//! What SQS says of a queue ([`Stats`]): `GetQueueAttributes`, whose counts SQS itself calls
//! approximate (eventually consistent, up to a minute behind on a busy queue).
//!
//! * `ready`: `ApproximateNumberOfMessages`;
//! * `in_flight`: `ApproximateNumberOfMessagesNotVisible` (received, not deleted, within their
//!   visibility timeout);
//! * `delayed`: `ApproximateNumberOfMessagesDelayed`;
//! * `dead_letter`: `ApproximateNumberOfMessages` of the queue the transport names as its
//!   dead-letter queue (`<queue>-dlq`, `<base>-dlq.fifo`), `None` when that queue does not
//!   exist (a queue's `RedrivePolicy` may name another one);
//! * no age: SQS does not say how old the oldest message is (CloudWatch does, not the API).
//!
//! A queue that does not exist is an error (`QueueDoesNotExist`): SQS queues are created by
//! their owner, never by the transport.

use std::collections::HashMap;

use async_trait::async_trait;
use babelqueue_core::{QueueStats, Stats, TransportError};

use crate::error::SqsError;
use crate::projection;
use crate::transport::SqsTransport;

/// One count of an attribute map; `None` when SQS did not send it or sent something else.
fn count(attributes: &HashMap<String, String>, name: &str) -> Option<u64> {
    attributes.get(name).and_then(|v| v.parse().ok())
}

/// The figures of a queue's attributes, and of its dead-letter queue's when there is one.
fn project(
    attributes: &HashMap<String, String>,
    dead_letter: Option<&HashMap<String, String>>,
) -> QueueStats {
    let mut stats = QueueStats::new("sqs: GetQueueAttributes (approximate)");
    stats.ready = count(attributes, "ApproximateNumberOfMessages");
    stats.in_flight = count(attributes, "ApproximateNumberOfMessagesNotVisible");
    stats.delayed = count(attributes, "ApproximateNumberOfMessagesDelayed");
    stats.dead_letter = dead_letter.and_then(|a| count(a, "ApproximateNumberOfMessages"));
    stats
}

impl SqsTransport {
    /// The attributes of the queue `name`.
    async fn attributes(&self, name: &str) -> Result<HashMap<String, String>, SqsError> {
        let url = self.queue_url(name).await?;
        self.client().queue_attributes(&url).await
    }
}

#[async_trait]
impl Stats for SqsTransport {
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError> {
        let own = self.attributes(queue).await?;
        let dlq = projection::dead_letter_queue_name(queue, None);
        let dead_letter = match self.attributes(&dlq).await {
            Ok(attributes) => Some(attributes),
            Err(SqsError::QueueDoesNotExist { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        Ok(project(&own, dead_letter.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use babelqueue_core::Transport;

    use super::*;
    use crate::SqsOptions;
    use crate::fake::FakeSqs;

    fn attributes(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn attributes_project_onto_the_figures() {
        let own = attributes(&[
            ("ApproximateNumberOfMessages", "4"),
            ("ApproximateNumberOfMessagesNotVisible", "2"),
            ("ApproximateNumberOfMessagesDelayed", "1"),
            ("VisibilityTimeout", "30"),
        ]);
        let dlq = attributes(&[("ApproximateNumberOfMessages", "7")]);
        let stats = project(&own, Some(&dlq));
        assert_eq!(
            (
                stats.ready,
                stats.in_flight,
                stats.delayed,
                stats.dead_letter
            ),
            (Some(4), Some(2), Some(1), Some(7))
        );
        let bare = project(&attributes(&[("ApproximateNumberOfMessages", "x")]), None);
        assert_eq!(
            (bare.ready, bare.in_flight, bare.dead_letter),
            (None, None, None)
        );
    }

    #[tokio::test]
    async fn the_fake_counts_visible_and_in_flight() {
        let fake = FakeSqs::new();
        let transport = SqsTransport::new(fake.clone(), SqsOptions::default());
        for _ in 0..3 {
            transport.publish("orders", b"{}").await.expect("publish");
        }
        let _held = transport
            .pop("orders", Duration::ZERO)
            .await
            .expect("pop")
            .expect("a delivery");
        let stats = transport.stats("orders").await.expect("stats");
        assert_eq!(
            (
                stats.ready,
                stats.in_flight,
                stats.delayed,
                stats.dead_letter
            ),
            (Some(2), Some(1), Some(0), Some(0))
        );
    }
}
