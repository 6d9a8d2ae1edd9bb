//! Receiving several messages per round trip, holding them, and acknowledging them together:
//! the capabilities the consume loop uses when it has room for more than one delivery.
//!
//! - [`NatsTransport::take_ready`]: after the first delivery of a receive (one pull that waits,
//!   as `pop`), one **no-wait** pull (`fetch`) for what the consumer has at hand. The server
//!   answers with up to that many messages and ends the request, so no pull is left waiting
//!   on the server for a message nobody will read.
//! - [`HoldChecker`]: a delivery that waited for a handler slot longer than the consumer's
//!   `ack_wait` has been given to another consumer by JetStream: it is no longer held.
//! - [`BatchAcker`]: the `+ACK`s of a batch sent together, each still confirmed by the server.

use async_trait::async_trait;
use babelqueue_transport::{BatchAcker, Delivery, HoldChecker, TransportError};
use futures_util::StreamExt;

use crate::error::NatsError;
use crate::transport::{Handle, LOG, NatsTransport};

impl NatsTransport {
    /// Up to `n` more messages of `queue` that its consumer has at hand, appended to `out`,
    /// without waiting for any (one no-wait pull). A failure ends the take with what came
    /// before it, logged: what was taken is held, and a message the failure was on comes back
    /// after `ack_wait` (JetStream's redelivery, never a loss).
    pub(crate) async fn take_ready(&self, queue: &str, n: usize, out: &mut Vec<Delivery>) {
        let taken = async {
            let consumer = self.consumer(queue).await?;
            let stream = consumer.cached_info().stream_name.clone();
            let mut batch = consumer
                .fetch()
                .max_messages(n)
                .messages()
                .await
                .map_err(|e| NatsError::pull(&e, &stream))?;
            let within = self.options().timeout;
            while let Some(next) = tokio::time::timeout(within, batch.next())
                .await
                .map_err(|_| NatsError::unanswered_pull(&stream, within))?
            {
                let message = next.map_err(|e| NatsError::pulled(&*e, &stream))?;
                out.push(self.delivery(queue, message)?);
            }
            Ok::<(), NatsError>(())
        }
        .await;
        if let Err(e) = taken {
            tracing::debug!(target: LOG, queue, error = %e,
                "The no-wait pull after a receive's first message failed; receiving what came before it");
        }
    }
}

impl HoldChecker for NatsTransport {
    /// Held until `ack_wait` has run since it was received (JetStream then delivers it again,
    /// to whichever consumer pulls).
    fn still_held(&self, delivery: &Delivery) -> bool {
        delivery
            .handle::<Handle>()
            .is_some_and(|h| h.received.elapsed() < self.options().ack_wait)
    }
}

#[async_trait]
impl BatchAcker for NatsTransport {
    /// Every `+ACK` sent at once, each confirmed by the server; every one is attempted and
    /// the first error returned (an unconfirmed one comes back after `ack_wait`).
    async fn ack_batch(&self, deliveries: &[Delivery]) -> Result<(), TransportError> {
        let acks = deliveries.iter().map(|d| async move {
            let handle = d.handle::<Handle>().ok_or_else(|| {
                NatsError::Rejected(format!(
                    "a delivery of queue {:?} that the NATS transport did not hand out",
                    d.queue()
                ))
            })?;
            handle
                .acker
                .double_ack()
                .await
                .map_err(|e| NatsError::ack("acknowledging a delivery (+ACK)", &*e))
        });
        let results = futures_util::future::join_all(acks).await;
        results
            .into_iter()
            .find_map(Result::err)
            .map_or(Ok(()), |e| Err(e.into()))
    }
}
