//! The producer side of an [`App`].

use std::time::Duration;

use babelqueue_envelope::{Builder, Envelope, Message};

use super::{App, trace};
use crate::error::Result;
use crate::handler::{Context, Publish, Publishing};
use crate::send;
use crate::transport::{Headers, Outgoing};

impl App {
    /// An envelope builder for `urn`, addressed to the app's queue. Inside a handler it continues
    /// the delivery's `trace_id` ([`Context::current`](crate::Context::current)); a
    /// [`Builder::trace_id`] you set wins.
    pub fn envelope(&self, urn: &str) -> Builder {
        trace::inherit(Envelope::builder(urn).queue(self.inner.queue.clone()))
    }

    /// Publishes `data` under `urn` to the app's queue; returns `meta.id`. Inside a handler the
    /// envelope continues the delivery's trace (its `trace_id`, and its `traceparent` where the
    /// transport carries headers); elsewhere it gets a fresh `trace_id`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::Error> {
    /// use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, MemoryTransport};
    ///
    /// let memory = MemoryTransport::new();
    /// let app = App::builder(memory.clone())
    ///     .queue("orders")
    ///     .handle("urn:babel:orders:created", |ctx: Context| async move {
    ///         let app = ctx.app().expect("the runtime's contexts carry their app").clone();
    ///         app.publish_to("mail", "urn:babel:mail:confirm", &serde_json::json!({}))
    ///             .await
    ///             .map_err(|e| HandlerError::new(e.to_string()))?;
    ///         Ok::<(), HandlerError>(())
    ///     })
    ///     .build()?;
    /// let order = app.envelope("urn:babel:orders:created").trace_id("trace-7").build()?;
    /// app.publish_envelope("orders", &order, &Default::default()).await?;
    /// app.consume(Consume::new().max_messages(1).handle_signals(false)).await?;
    ///
    /// let mail = Envelope::decode(&memory.bodies("mail")[0])?.envelope;
    /// assert_eq!(mail.trace_id().as_deref(), Some("trace-7"));
    /// # Ok(()) }
    /// ```
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
        let envelope = trace::inherit(Envelope::builder(urn).queue(queue).data(data)).build()?;
        self.publish_envelope(queue, &envelope, &Headers::new())
            .await?;
        Ok(envelope
            .message_id()
            .map(|id| id.into_owned())
            .unwrap_or_default())
    }

    /// Publishes a typed message to the app's queue; returns `meta.id`. Inside a handler it
    /// continues the delivery's trace unless the message names its own
    /// ([`Message::trace_id`]).
    pub async fn publish_message<M: Message + ?Sized>(&self, message: &M) -> Result<String> {
        let builder = Builder::from_message(message).queue(self.inner.queue.clone());
        let builder = match message.trace_id() {
            Some(_) => builder,
            None => trace::inherit(builder),
        };
        let envelope = builder.build()?;
        self.publish_envelope(&self.inner.queue.clone(), &envelope, &Headers::new())
            .await?;
        Ok(envelope
            .message_id()
            .map(|id| id.into_owned())
            .unwrap_or_default())
    }

    /// Publishes an envelope to `queue` with out-of-band `headers`.
    ///
    /// Every publish path (this one, [`App::publish_batch`], [`App::publish_delayed`] and the
    /// helpers built on them) runs the strict verdict every consumer runs on what it receives
    /// ([`Envelope::encode_checked`]): a body a consumer would dead-letter as poison (a number
    /// in `data` that is not a finite double, say) is refused with an error that names the
    /// member, and nothing is sent.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::Error> {
    /// use babelqueue_core::{App, MemoryTransport, envelope::RawJson};
    ///
    /// let memory = MemoryTransport::new();
    /// let app = App::builder(memory.clone()).queue("orders").build()?;
    /// let bad = app.envelope("urn:babel:orders:created")
    ///     .data_raw(RawJson::parse(r#"{"x":1e400}"#)?)
    ///     .build()?;
    /// let refused = app.publish_envelope("orders", &bad, &Default::default()).await.unwrap_err();
    /// assert!(refused.to_string().ends_with("data.x: 1e400 is not a finite number"));
    /// assert_eq!(memory.len("orders"), 0);
    /// # Ok(()) }
    /// ```
    ///
    /// Headers ride where the transport declares them
    /// ([`Sends::headers`](crate::Sends::headers)); without that (or with no header) this is a
    /// plain publish. Headers never enter the envelope.
    ///
    /// Inside a handler, an envelope that continues the delivery's `trace_id` also carries the
    /// delivery's W3C trace headers ([`Context::trace_headers`](crate::Context::trace_headers))
    /// unless `headers` has a `traceparent` or `tracestate` of its own; the envelope itself is
    /// never changed.
    pub async fn publish_envelope(
        &self,
        queue: &str,
        envelope: &Envelope,
        headers: &Headers,
    ) -> Result<()> {
        let inherited = trace::inherited_headers(envelope, headers);
        let headers = match &inherited {
            Some(extra) => &crate::merge_headers([headers, extra]),
            None => headers,
        };
        let body = envelope.encode_checked()?;
        let mut outgoing = Outgoing::new(queue, body.as_bytes());
        if !headers.is_empty() {
            outgoing = outgoing.headers(headers);
        }
        send::publish(self.inner.transport.as_ref(), &outgoing).await?;
        self.published(queue, envelope, 1);
        Ok(())
    }

    /// Tells the observer, if any, that `count` messages like `envelope` went to `queue`.
    fn published(&self, queue: &str, envelope: &Envelope, count: u64) {
        if let Some(observer) = &self.inner.observer {
            observer.on_published(queue, &envelope.urn(), count);
        }
    }

    /// Publishes many envelopes to `queue`, in order: in one step when the transport can
    /// ([`BatchPublisher`](crate::BatchPublisher): one pipeline, one batch request), else one
    /// by one. Every envelope is encoded and checked before anything is sent, so an envelope
    /// that cannot be encoded, or that a consumer would refuse as poison, fails the call with
    /// nothing published. On a transport error some envelopes may
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
            .map(Envelope::encode_checked)
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
        for envelope in envelopes {
            self.published(queue, envelope, 1);
        }
        Ok(())
    }

    /// Publishes an envelope that becomes deliverable after `delay` (needs a transport that
    /// declares delays, [`Sends::delay`](crate::Sends::delay); otherwise an
    /// [`Error::Config`](crate::Error::Config) and nothing is sent).
    pub async fn publish_delayed(
        &self,
        queue: &str,
        envelope: &Envelope,
        delay: Duration,
    ) -> Result<()> {
        let body = envelope.encode_checked()?;
        let outgoing = Outgoing::new(queue, body.as_bytes()).delay(delay);
        send::publish(self.inner.transport.as_ref(), &outgoing).await?;
        self.published(queue, envelope, 1);
        Ok(())
    }
}

/// A handler's [`Context`] publishes through its app, as this narrow trait object: the handler
/// types never name the app.
impl Publish for App {
    fn queue(&self) -> &str {
        App::queue(self)
    }

    fn publish_envelope<'a>(
        &'a self,
        queue: &'a str,
        envelope: &'a Envelope,
        headers: &'a Headers,
    ) -> Publishing<'a> {
        Box::pin(App::publish_envelope(self, queue, envelope, headers))
    }
}

impl Context {
    /// The app that consumed this delivery (`None` for a context built with [`Context::new`]).
    pub fn app(&self) -> Option<&App> {
        let publisher: &dyn std::any::Any = self.publisher()?;
        publisher.downcast_ref::<App>()
    }
}
