//! What JetStream says of a queue ([`Stats`]): the info of the queue's stream and of the
//! transport's durable consumer on it.
//!
//! * `ready`: the consumer's `num_pending` (stored, not delivered yet); before the consumer
//!   exists, the stream's message count (nothing was delivered);
//! * `in_flight`: the consumer's `num_ack_pending` (delivered, not acknowledged);
//! * `delayed`: `None`: JetStream has no delayed delivery the transport uses;
//! * `dead_letter`: the message count of the dead-letter queue's stream (`<queue>.dlq`);
//! * no age: the stream's first message may be one delivered and not yet acknowledged.
//!
//! A queue without a stream counts 0 everywhere (the transport creates it on first use).
//!
//! Not the stream's own count for `ready`: after a SIGKILL of nats-server a message whose
//! acknowledgement the consumer recorded can stay in a work-queue stream (the removal had not
//! reached the disk) and is never handed out again; the consumer's figures leave it out.

use async_nats::jetstream::context::{ConsumerInfoErrorKind, GetStreamErrorKind};
use async_nats::jetstream::{ErrorCode, consumer};
use async_trait::async_trait;
use babelqueue_transport::{QueueStats, Stats, TransportError};

use crate::error::NatsError;
use crate::transport::NatsTransport;

/// What the stream and the consumer said.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Read {
    /// Messages stored in the stream (`None`: no stream).
    stored: Option<u64>,
    /// `num_pending` and `num_ack_pending` of the consumer (`None`: no consumer yet).
    consumer: Option<(u64, u64)>,
}

fn project(own: Read, dead_letter: Read) -> QueueStats {
    let (ready, in_flight) = match (own.consumer, own.stored) {
        (Some((pending, ack_pending)), _) => (pending, ack_pending),
        (None, stored) => (stored.unwrap_or(0), 0),
    };
    QueueStats::new("nats: JetStream stream and consumer info")
        .ready(ready)
        .in_flight(in_flight)
        .dead_letter(dead_letter.stored.unwrap_or(0))
}

impl NatsTransport {
    /// The stream of `queue` and the transport's consumer on it.
    async fn read(&self, queue: &str) -> Result<Read, NatsError> {
        let name = self.options().stream_name(queue)?;
        let stream = match self.jetstream().get_stream(&name).await {
            Ok(stream) => stream,
            Err(e) => {
                if let GetStreamErrorKind::JetStream(api) = e.kind()
                    && api.error_code() == ErrorCode::STREAM_NOT_FOUND
                {
                    return Ok(Read::default());
                }
                return Err(NatsError::get_stream(&e, &name));
            }
        };
        let stored = Some(stream.cached_info().state.messages);
        let consumer_name = &self.options().consumer;
        let consumer = match stream.consumer_info(consumer_name).await {
            Ok(info) => Some(info_figures(&info)),
            Err(e) => match e.kind() {
                ConsumerInfoErrorKind::NotFound => None,
                ConsumerInfoErrorKind::JetStream(api)
                    if api.error_code() == ErrorCode::CONSUMER_NOT_FOUND =>
                {
                    None
                }
                ConsumerInfoErrorKind::TimedOut => {
                    return Err(NatsError::Timeout(format!(
                        "consumer info {name}/{consumer_name}: {e}"
                    )));
                }
                ConsumerInfoErrorKind::Request | ConsumerInfoErrorKind::NoResponders => {
                    return Err(NatsError::Connection(format!(
                        "consumer info {name}/{consumer_name}: {e}"
                    )));
                }
                _ => {
                    return Err(NatsError::Other(format!(
                        "consumer info {name}/{consumer_name}: {e}"
                    )));
                }
            },
        };
        Ok(Read { stored, consumer })
    }
}

fn info_figures(info: &consumer::Info) -> (u64, u64) {
    (info.num_pending, info.num_ack_pending as u64)
}

#[async_trait]
impl Stats for NatsTransport {
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError> {
        let own = self.read(queue).await?;
        let dead_letter = self.read(&format!("{queue}.dlq")).await?;
        Ok(project(own, dead_letter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_consumer_wins_over_the_stream_count() {
        let consumed = Read {
            stored: Some(9),
            consumer: Some((4, 2)),
        };
        let dlq = Read {
            stored: Some(3),
            consumer: None,
        };
        let stats = project(consumed, dlq);
        assert_eq!(
            (
                stats.ready,
                stats.in_flight,
                stats.delayed,
                stats.dead_letter
            ),
            (Some(4), Some(2), None, Some(3))
        );
    }

    #[test]
    fn a_stream_never_consumed_is_all_ready_and_no_stream_is_empty() {
        let unconsumed = Read {
            stored: Some(5),
            consumer: None,
        };
        let stats = project(unconsumed, Read::default());
        assert_eq!(
            (stats.ready, stats.in_flight, stats.dead_letter),
            (Some(5), Some(0), Some(0))
        );
        assert_eq!(project(Read::default(), Read::default()).total(), Some(0));
    }
}
