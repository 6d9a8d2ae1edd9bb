//! The producer side of an [`App`].

use std::time::Duration;

use babelqueue_envelope::{Builder, Envelope, Message};

use super::App;
use crate::error::{Error, Result};
use crate::transport::Headers;

impl App {
    /// An envelope builder for `urn`, addressed to the app's queue.
    pub fn envelope(&self, urn: &str) -> Builder {
        Envelope::builder(urn).queue(self.inner.queue.clone())
    }

    /// Publishes `data` under `urn` to the app's queue; returns `meta.id`.
    pub async fn publish<T: serde::Serialize + ?Sized>(
        &self,
        urn: &str,
        data: &T,
    ) -> Result<String> {
        self.publish_to(&self.inner.queue.clone(), urn, data).await
    }

    /// Publishes `data` under `urn` to `queue`; returns `meta.id`.
    pub async fn publish_to<T: serde::Serialize + ?Sized>(
        &self,
        queue: &str,
        urn: &str,
        data: &T,
    ) -> Result<String> {
        let envelope = Envelope::builder(urn).queue(queue).data(data).build()?;
        self.publish_envelope(queue, &envelope, &Headers::new())
            .await?;
        Ok(envelope
            .message_id()
            .map(|id| id.into_owned())
            .unwrap_or_default())
    }

    /// Publishes a typed message to the app's queue; returns `meta.id`.
    pub async fn publish_message<M: Message + ?Sized>(&self, message: &M) -> Result<String> {
        let envelope = Builder::from_message(message)
            .queue(self.inner.queue.clone())
            .build()?;
        self.publish_envelope(&self.inner.queue.clone(), &envelope, &Headers::new())
            .await?;
        Ok(envelope
            .message_id()
            .map(|id| id.into_owned())
            .unwrap_or_default())
    }

    /// Publishes an envelope to `queue` with out-of-band `headers`. Headers need the transport's
    /// [`HeaderPublisher`](crate::HeaderPublisher) capability; without it (or with no header)
    /// this is a plain publish. Headers never enter the envelope.
    pub async fn publish_envelope(
        &self,
        queue: &str,
        envelope: &Envelope,
        headers: &Headers,
    ) -> Result<()> {
        let body = envelope.encode()?;
        let transport = &self.inner.transport;
        match transport.capabilities().header_publisher() {
            Some(publisher) if !headers.is_empty() => {
                publisher
                    .publish_with_headers(queue, body.as_bytes(), headers)
                    .await?;
            }
            _ => transport.publish(queue, body.as_bytes()).await?,
        }
        Ok(())
    }

    /// Publishes many envelopes to `queue`, in order: in one step when the transport can
    /// ([`BatchPublisher`](crate::BatchPublisher): one pipeline, one batch request), else one
    /// by one. Every envelope is encoded before anything is sent, so an envelope that cannot be
    /// encoded fails the call with nothing published. On a transport error some envelopes may
    /// have been published; sending the batch again may duplicate them (at-least-once).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::Error> {
    /// use babelqueue_core::{App, MemoryTransport};
    ///
    /// let memory = MemoryTransport::new();
    /// let app = App::builder(memory.clone()).queue("orders").build()?;
    /// let envelopes = (0..100)
    ///     .map(|id| app.envelope("urn:babel:orders:created").data(&serde_json::json!({"order_id": id})).build())
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// app.publish_batch("orders", &envelopes).await?;
    /// assert_eq!(memory.len("orders"), 100);
    /// # Ok(()) }
    /// ```
    pub async fn publish_batch(&self, queue: &str, envelopes: &[Envelope]) -> Result<()> {
        let bodies = envelopes
            .iter()
            .map(Envelope::encode)
            .collect::<std::result::Result<Vec<String>, _>>()?;
        let transport = &self.inner.transport;
        match transport.capabilities().batch_publisher() {
            Some(publisher) => {
                let slices: Vec<&[u8]> = bodies.iter().map(String::as_bytes).collect();
                publisher.publish_batch(queue, &slices).await?;
            }
            None => {
                for body in &bodies {
                    transport.publish(queue, body.as_bytes()).await?;
                }
            }
        }
        Ok(())
    }

    /// Publishes an envelope that becomes deliverable after `delay` (needs the transport's
    /// [`DelayedPublisher`](crate::DelayedPublisher) capability).
    pub async fn publish_delayed(
        &self,
        queue: &str,
        envelope: &Envelope,
        delay: Duration,
    ) -> Result<()> {
        let body = envelope.encode()?;
        let Some(publisher) = self.inner.transport.capabilities().delayed_publisher() else {
            return Err(Error::Config(format!(
                "the {} transport cannot delay a message (no DelayedPublisher capability)",
                self.inner.transport.name()
            )));
        };
        publisher
            .publish_delayed(queue, body.as_bytes(), delay)
            .await?;
        Ok(())
    }
}
