//! `App::publish_batch` on NATS ([`BatchPublisher`]): a window of JetStream publishes in
//! flight, each still waiting for the stream's acknowledgement, instead of one round trip per
//! message.

use async_nats::jetstream::context::PublishErrorKind;
use async_trait::async_trait;
use babelqueue_transport::{BatchPublisher, Transport, TransportError};
use bytes::Bytes;

use crate::error::NatsError;
use crate::transport::NatsTransport;

/// Publishes in flight at once: the window's acknowledgements are awaited, in order, before
/// the next window is sent.
const WINDOW: usize = 256;

#[async_trait]
impl BatchPublisher for NatsTransport {
    /// Every body published in order, `WINDOW` at a time; `Ok` once the stream acknowledged
    /// them all. A publish the stream did not take because it was deleted meanwhile is sent
    /// again, alone, once the stream is set up again (as `publish` does); any other error
    /// ends the batch, and sending the batch again may duplicate what was acknowledged before
    /// it (at-least-once).
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        let subject = self.subject(queue).await?;
        for window in bodies.chunks(WINDOW) {
            let mut acks = Vec::with_capacity(window.len());
            for body in window {
                let ack = self
                    .jetstream()
                    .publish(subject.clone(), Bytes::copy_from_slice(body))
                    .await
                    .map_err(|e| NatsError::publish(&e, &subject))?;
                acks.push(ack);
            }
            for (body, ack) in window.iter().zip(acks) {
                match ack.await {
                    Ok(_) => {}
                    Err(e) if e.kind() == PublishErrorKind::StreamNotFound => {
                        self.publish(queue, body).await?;
                    }
                    Err(e) => return Err(NatsError::publish(&e, &subject).into()),
                }
            }
        }
        Ok(())
    }
}
