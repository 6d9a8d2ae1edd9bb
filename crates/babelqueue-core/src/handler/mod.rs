//! Handlers: what runs for a URN, what it sees, and how it reports failure.
//!
//! Below the runtime: a [`Context`] publishes through `Publish`, a narrow trait the app
//! implements, and the failure types come from a leaf module, so nothing here names the app.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use babelqueue_envelope::{Builder, Envelope, Message, Object, RawJson};

pub(crate) mod current;
mod publish;

pub use crate::failure::{Action, HandlerError};
pub(crate) use publish::{Publish, Publishing};

use crate::error::{Error, Result};
use crate::transport::Headers;

/// The header redrive stamps on a replayed message (`bq-replay-bypass: 1`).
pub const HEADER_REPLAY_BYPASS: &str = "bq-replay-bypass";

/// What a handler sees of one delivery.
///
/// While the handler's future runs, its context is also the *current delivery*
/// ([`Context::current`]): what the handler publishes, through the context
/// ([`Context::publish`]) or through the [`App`](crate::App)
/// ([`App::publish`](crate::App::publish) and the other helpers),
/// continues the delivery's `trace_id` and passes its W3C `traceparent`/`tracestate` headers on,
/// unless the caller sets its own.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::Error> {
/// use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport};
///
/// let memory = MemoryTransport::new();
/// let app = App::builder(memory.clone())
///     .queue("orders")
///     .handle("urn:babel:orders:created", |ctx: Context| async move {
///         // Same trace_id as the order, same traceparent where one arrived.
///         ctx.publish_to("mail", "urn:babel:mail:confirm", &serde_json::json!({"to": "a@b.c"}))
///             .await
///             .map_err(|e| HandlerError::new(e.to_string()))?;
///         Ok::<(), HandlerError>(())
///     })
///     .build()?;
/// let order = app.envelope("urn:babel:orders:created").trace_id("trace-7").build()?;
/// app.publish_envelope("orders", &order, &Default::default()).await?;
/// app.consume(Consume::new().max_messages(1).handle_signals(false)).await?;
///
/// let body = memory.bodies("mail").pop().expect("the handler published one");
/// let mail = babelqueue_core::Envelope::decode(&body)?.envelope;
/// assert_eq!(mail.trace_id().as_deref(), Some("trace-7"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    envelope: Envelope,
    queue: Arc<str>,
    headers: Headers,
    route: String,
    native_attempts: i64,
    /// The app that consumed the delivery, as the narrow [`Publish`] it offers a handler.
    app: Option<Arc<dyn Publish>>,
    /// The W3C headers passed on to what is published inside this delivery, when a wrapper set
    /// them ([`Context::with_trace_headers`]); else the incoming ones are.
    trace_headers: Option<Headers>,
}

impl Context {
    /// A context for `envelope` consumed from `queue` (the runtime builds these; handy in tests).
    /// Such a context has no [`App`](crate::App): [`Context::publish`] and its siblings refuse.
    pub fn new(envelope: Envelope, queue: impl Into<Arc<str>>, headers: Headers) -> Context {
        Context::with_route(envelope, queue, headers, String::new(), 0, None)
    }

    pub(crate) fn with_route(
        envelope: Envelope,
        queue: impl Into<Arc<str>>,
        headers: Headers,
        route: String,
        native_attempts: i64,
        app: Option<Arc<dyn Publish>>,
    ) -> Context {
        Context {
            inner: Arc::new(ContextInner {
                envelope,
                queue: queue.into(),
                headers,
                route,
                native_attempts,
                app,
                trace_headers: None,
            }),
        }
    }

    /// The delivery whose handler is running in this task, if any (`None` outside a handler's
    /// future, and in a task the handler spawned unless it was wrapped with
    /// [`Context::scope`]).
    pub fn current() -> Option<Context> {
        current::current()
    }

    /// Runs `future` with this context as the current delivery, so publishes inside it continue
    /// this delivery's trace. The runtime does this around every handler call; use it for a
    /// task the handler spawns (task-locals do not cross `tokio::spawn`).
    ///
    /// ```
    /// # async fn handler(ctx: babelqueue_core::Context) {
    /// let background = ctx.clone().scope(async move {
    ///     // App::publish here continues ctx's trace_id.
    /// });
    /// tokio::spawn(background);
    /// # }
    /// ```
    pub fn scope<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        current::scope(self, future)
    }

    /// The same delivery carrying `envelope` instead (queue, headers, out-of-band route and the
    /// broker's attempt count kept): for wrappers that rewrite the message before the handler
    /// sees it, such as GDPR decryption.
    pub fn with_envelope(&self, envelope: Envelope) -> Context {
        let inner = &self.inner;
        Context {
            inner: Arc::new(ContextInner {
                envelope,
                queue: inner.queue.clone(),
                headers: inner.headers.clone(),
                route: inner.route.clone(),
                native_attempts: inner.native_attempts,
                app: inner.app.clone(),
                trace_headers: inner.trace_headers.clone(),
            }),
        }
    }

    /// The same delivery, passing `headers` on (instead of the incoming `traceparent` and
    /// `tracestate`) to what is published inside it: for wrappers that open a span of their
    /// own, such as `babelqueue-otel`'s consumer span. Only the W3C trace headers of `headers`
    /// are kept; [`Context::headers`] still shows what arrived.
    pub fn with_trace_headers(&self, headers: Headers) -> Context {
        let inner = &self.inner;
        let trace_headers = headers
            .into_iter()
            .filter(|(k, v)| current::is_trace_header(k) && !v.is_empty())
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        Context {
            inner: Arc::new(ContextInner {
                envelope: inner.envelope.clone(),
                queue: inner.queue.clone(),
                headers: inner.headers.clone(),
                route: inner.route.clone(),
                native_attempts: inner.native_attempts,
                app: inner.app.clone(),
                trace_headers: Some(trace_headers),
            }),
        }
    }

    /// The W3C trace headers (`traceparent`, `tracestate`, lower-case names) this delivery
    /// passes on to what is published inside it: those set by
    /// [`Context::with_trace_headers`], else the incoming ones (names matched ignoring ASCII
    /// case). Empty when none arrived.
    pub fn trace_headers(&self) -> Headers {
        if let Some(set) = &self.inner.trace_headers {
            return set.clone();
        }
        self.inner
            .headers
            .iter()
            .filter(|(k, v)| current::is_trace_header(k) && !v.is_empty())
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect()
    }

    /// What publishes for this delivery: the app that consumed it (`None` for a context built
    /// with [`Context::new`]). [`Context::app`](crate::Context::app) is the same, as the app.
    pub(crate) fn publisher(&self) -> Option<&dyn Publish> {
        self.inner.app.as_deref()
    }

    /// Publishes `data` under `urn` to the app's queue, continuing this delivery's trace: the
    /// new envelope's `trace_id` is this one's, and [`Context::trace_headers`] ride beside it
    /// where the transport carries headers. Returns `meta.id`. For your own `trace_id`, build
    /// the envelope with [`App::envelope`](crate::App::envelope) and publish it with
    /// [`App::publish_envelope`](crate::App::publish_envelope).
    pub async fn publish<T: serde::Serialize + ?Sized>(
        &self,
        urn: &str,
        data: &T,
    ) -> Result<String> {
        let queue = self.publishing_app()?.queue().to_owned();
        self.publish_to(&queue, urn, data).await
    }

    /// [`Context::publish`] to `queue`.
    pub async fn publish_to<T: serde::Serialize + ?Sized>(
        &self,
        queue: &str,
        urn: &str,
        data: &T,
    ) -> Result<String> {
        self.send(queue, Envelope::builder(urn).queue(queue).data(data))
            .await
    }

    /// [`Context::publish`] for a typed message; the message's own
    /// [`Message::trace_id`] wins over this delivery's.
    pub async fn publish_message<M: Message + ?Sized>(&self, message: &M) -> Result<String> {
        let queue = self.publishing_app()?.queue().to_owned();
        let builder = Builder::from_message(message).queue(queue.clone());
        match message.trace_id() {
            Some(own) => self.send_as_is(&queue, builder.trace_id(own)).await,
            None => self.send(&queue, builder).await,
        }
    }

    fn publishing_app(&self) -> Result<&dyn Publish> {
        self.publisher().ok_or_else(|| {
            Error::Config(
                "this context has no app (built with Context::new): publish through an App".into(),
            )
        })
    }

    /// Builds from `builder` continuing this delivery's trace, and publishes.
    async fn send(&self, queue: &str, builder: Builder) -> Result<String> {
        let builder = match self.trace_id() {
            Some(trace_id) => builder.trace_id(trace_id.into_owned()),
            None => builder,
        };
        self.send_as_is(queue, builder).await
    }

    async fn send_as_is(&self, queue: &str, builder: Builder) -> Result<String> {
        let app = self.publishing_app()?;
        let envelope = builder.build()?;
        let headers = if envelope.trace_id() == self.trace_id() {
            self.trace_headers()
        } else {
            Headers::new()
        };
        app.publish_envelope(queue, &envelope, &headers).await?;
        Ok(envelope
            .message_id()
            .map(Cow::into_owned)
            .unwrap_or_default())
    }

    /// The decoded envelope (forbidden keys dropped, `urn` alias folded, unknown keys kept).
    pub fn envelope(&self) -> &Envelope {
        &self.inner.envelope
    }

    /// The URN the message was routed by: the out-of-band route when the transport supplied one,
    /// else the body's.
    pub fn urn(&self) -> Cow<'_, str> {
        if self.inner.route.is_empty() {
            self.inner.envelope.urn()
        } else {
            Cow::Borrowed(&self.inner.route)
        }
    }

    /// `data`, as raw JSON (`{}` when missing or `null`).
    pub fn data(&self) -> RawJson {
        match self.inner.envelope.data() {
            Some(raw) if !raw.is_null() => raw.clone(),
            _ => RawJson::empty_object(),
        }
    }

    /// `data`, deserialized.
    pub fn data_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, HandlerError> {
        self.inner.envelope.data_as().map_err(HandlerError::from)
    }

    /// `meta` (empty when missing or not an object).
    pub fn meta(&self) -> Cow<'_, Object> {
        match self.inner.envelope.meta() {
            Some(meta) => Cow::Borrowed(meta),
            None => Cow::Owned(Object::new()),
        }
    }

    /// `trace_id`.
    pub fn trace_id(&self) -> Option<Cow<'_, str>> {
        self.inner.envelope.trace_id()
    }

    /// `meta.id`.
    pub fn message_id(&self) -> Option<Cow<'_, str>> {
        self.inner.envelope.message_id()
    }

    /// `attempts` as the body carries it (0 on a first delivery).
    pub fn attempts(&self) -> i64 {
        self.inner.envelope.attempts()
    }

    /// The broker's own count of earlier deliveries (0 when the broker has none).
    pub fn native_attempts(&self) -> i64 {
        self.inner.native_attempts
    }

    /// The queue the message was consumed from.
    pub fn queue(&self) -> &str {
        &self.inner.queue
    }

    /// The out-of-band headers the broker carried (empty when none).
    pub fn headers(&self) -> &Headers {
        &self.inner.headers
    }

    /// Whether this delivery is a redrive replay (it carries a non-empty `bq-replay-bypass`):
    /// skip external effects that already happened.
    pub fn is_replay(&self) -> bool {
        self.inner
            .headers
            .get(HEADER_REPLAY_BYPASS)
            .is_some_and(|v| !v.is_empty())
    }

    /// Runs `effect` unless this delivery is a replay.
    pub async fn bypass_external_effects<T, F, Fut>(&self, effect: F) -> Option<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        if self.is_replay() {
            None
        } else {
            Some(effect().await)
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("urn", &self.urn())
            .field("queue", &self.inner.queue)
            .field("attempts", &self.attempts())
            .finish_non_exhaustive()
    }
}

/// The future a handler returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send + 'static>>;

/// Something that handles the messages of one URN.
///
/// Implemented for every `Fn(Context) -> impl Future<Output = Result<(), HandlerError>>`, so an
/// async closure is a handler. Wrappers (idempotency, schema validation, tracing) implement it
/// around an inner handler.
pub trait Handler: Send + Sync + 'static {
    /// Handles one message.
    fn call(&self, ctx: Context) -> HandlerFuture;
}

impl<F, Fut> Handler for F
where
    F: Fn(Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
{
    fn call(&self, ctx: Context) -> HandlerFuture {
        Box::pin(self(ctx))
    }
}

/// A handler that receives `data` deserialized into `M`; a `data` that does not fit `M` fails
/// the message (retry, then dead-letter), like a schema violation.
pub struct Typed<M, F> {
    f: F,
    _message: std::marker::PhantomData<fn() -> M>,
}

impl<M, F> fmt::Debug for Typed<M, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Typed<{}>", std::any::type_name::<M>())
    }
}

/// Wraps a closure over `(M, Context)` as a [`Handler`].
pub fn typed<M, F, Fut>(f: F) -> Typed<M, F>
where
    M: serde::de::DeserializeOwned + Send + 'static,
    F: Fn(M, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
{
    Typed {
        f,
        _message: std::marker::PhantomData,
    }
}

impl<M, F, Fut> Handler for Typed<M, F>
where
    M: serde::de::DeserializeOwned + Send + 'static,
    F: Fn(M, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
{
    fn call(&self, ctx: Context) -> HandlerFuture {
        match ctx.data_as::<M>() {
            Ok(message) => Box::pin((self.f)(message, ctx)),
            Err(e) => Box::pin(async move { Err(e.with_exception("DataError")) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_flag_needs_a_non_empty_header() {
        let env = Envelope::builder("urn:x").build().unwrap();
        let mut headers = Headers::new();
        assert!(!Context::new(env.clone(), "q", headers.clone()).is_replay());
        headers.insert(HEADER_REPLAY_BYPASS.into(), String::new());
        assert!(!Context::new(env.clone(), "q", headers.clone()).is_replay());
        headers.insert(HEADER_REPLAY_BYPASS.into(), "1".into());
        assert!(Context::new(env, "q", headers).is_replay());
    }

    #[test]
    fn with_envelope_keeps_the_delivery_facts() {
        let env = Envelope::builder("urn:body").build().unwrap();
        let mut headers = Headers::new();
        headers.insert("h".into(), "v".into());
        let ctx = Context::with_route(env, "q", headers, "urn:routed".into(), 3, None);
        let other = Envelope::builder("urn:other")
            .data(&serde_json::json!({"x": 1}))
            .build()
            .unwrap();
        let swapped = ctx.with_envelope(other);
        assert_eq!(swapped.data().as_str(), r#"{"x":1}"#);
        assert_eq!(swapped.urn(), "urn:routed");
        assert_eq!(swapped.queue(), "q");
        assert_eq!(swapped.native_attempts(), 3);
        assert_eq!(swapped.headers().get("h").map(String::as_str), Some("v"));
        assert_eq!(
            ctx.data().as_str(),
            "{}",
            "the original context is unchanged"
        );
    }
}
