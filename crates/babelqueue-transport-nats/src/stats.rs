//! What JetStream says of a queue ([`Stats`]): the info of the queue's stream and of the
//! transport's durable consumer on it.
//!
//! * `ready`: the consumer's `num_pending` (stored, not delivered yet); before the consumer
//!   exists, the stream's message count (nothing was delivered);
//! * `in_flight`: the consumer's `num_ack_pending` (delivered, not acknowledged);
//! * `delayed`: `None`: JetStream has no delayed delivery the transport uses;
//! * `dead_letter`: the message count of the dead-letter queue's stream (`<queue>.dlq`);
//! * `oldest_ready_age`: now less the stored time of the next message the consumer has not
//!   handed out (stream sequence `delivered + 1`, read with one message get); before the
//!   consumer exists, the stream's first message. `None` when nothing is pending. A message
//!   handed out and given back for redelivery is not counted in it (it is in flight until
//!   redelivered). The server's clock against this host's.
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
    /// When the oldest message not handed out yet was stored (ms since the epoch).
    oldest_ms: Option<u64>,
}

/// The figures of the queue's stream and its dead-letter stream, read at `now_ms`.
fn project(own: Read, dead_letter: Read, now_ms: u64) -> QueueStats {
    let (ready, in_flight) = match (own.consumer, own.stored) {
        (Some((pending, ack_pending)), _) => (pending, ack_pending),
        (None, stored) => (stored.unwrap_or(0), 0),
    };
    let stats = QueueStats::new("nats: JetStream stream and consumer info")
        .ready(ready)
        .in_flight(in_flight)
        .dead_letter(dead_letter.stored.unwrap_or(0));
    match own.oldest_ms.filter(|_| ready > 0) {
        Some(oldest) => stats.oldest_written_at(oldest, now_ms),
        None => stats,
    }
}

/// A stored time as ms since the epoch (0 for a time before it).
fn epoch_ms(time: time::OffsetDateTime) -> u64 {
    u64::try_from(time.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
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
        let state = &stream.cached_info().state;
        let stored = Some(state.messages);
        let first_ms = (state.messages > 0).then(|| epoch_ms(state.first_timestamp));
        let consumer_name = &self.options().consumer;
        let mut next_undelivered = 0;
        let consumer = match stream.consumer_info(consumer_name).await {
            Ok(info) => {
                next_undelivered = info.delivered.stream_sequence + 1;
                Some(info_figures(&info))
            }
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
        let oldest_ms = match consumer {
            None => first_ms,
            Some((0, _)) => None,
            // The next sequence the consumer has not handed out; a message deleted meanwhile
            // leaves the age unknown rather than failing the read.
            Some(_) => stream
                .get_raw_message(next_undelivered)
                .await
                .ok()
                .map(|m| epoch_ms(m.time)),
        };
        Ok(Read {
            stored,
            consumer,
            oldest_ms,
        })
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
        let now_ms = babelqueue_transport::stats::now_epoch_ms();
        Ok(project(own, dead_letter, now_ms))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_consumer_wins_over_the_stream_count() {
        let consumed = Read {
            stored: Some(9),
            consumer: Some((4, 2)),
            oldest_ms: Some(1_000),
        };
        let dlq = Read {
            stored: Some(3),
            consumer: None,
            oldest_ms: None,
        };
        let stats = project(consumed, dlq, 3_000);
        assert_eq!(stats.oldest_ready_age, Some(Duration::from_secs(2)));
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
            oldest_ms: None,
        };
        let stats = project(unconsumed, Read::default(), 0);
        assert_eq!(
            (stats.ready, stats.in_flight, stats.dead_letter),
            (Some(5), Some(0), Some(0))
        );
        assert_eq!(
            project(Read::default(), Read::default(), 0).total(),
            Some(0)
        );
    }

    #[test]
    fn nothing_pending_has_no_age_and_a_clock_behind_no_negative_one() {
        let drained = Read {
            stored: Some(2),
            consumer: Some((0, 2)),
            oldest_ms: Some(1_000),
        };
        assert_eq!(
            project(drained, Read::default(), 5_000).oldest_ready_age,
            None
        );
        let ahead = Read {
            stored: Some(1),
            consumer: None,
            oldest_ms: Some(9_000),
        };
        assert_eq!(
            project(ahead, Read::default(), 5_000).oldest_ready_age,
            Some(Duration::ZERO)
        );
    }
}
