//! Handlers: what runs for a URN, what it sees, and how it reports failure.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use babelqueue_envelope::{Envelope, Object, RawJson};

use crate::transport::Headers;

/// The header redrive stamps on a replayed message (`bq-replay-bypass: 1`).
pub const HEADER_REPLAY_BYPASS: &str = "bq-replay-bypass";

/// What a handler sees of one delivery.
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    envelope: Envelope,
    queue: String,
    headers: Headers,
    route: String,
    native_attempts: i64,
}

impl Context {
    /// A context for `envelope` consumed from `queue` (the runtime builds these; handy in tests).
    pub fn new(envelope: Envelope, queue: impl Into<String>, headers: Headers) -> Context {
        Context::with_route(envelope, queue, headers, String::new(), 0)
    }

    pub(crate) fn with_route(
        envelope: Envelope,
        queue: impl Into<String>,
        headers: Headers,
        route: String,
        native_attempts: i64,
    ) -> Context {
        Context {
            inner: Arc::new(ContextInner {
                envelope,
                queue: queue.into(),
                headers,
                route,
                native_attempts,
            }),
        }
    }

    /// The same delivery carrying `envelope` instead (queue, headers, out-of-band route and the
    /// broker's attempt count kept): for wrappers that rewrite the message before the handler
    /// sees it, such as GDPR decryption.
    pub fn with_envelope(&self, envelope: Envelope) -> Context {
        let inner = &self.inner;
        Context::with_route(
            envelope,
            inner.queue.clone(),
            inner.headers.clone(),
            inner.route.clone(),
            inner.native_attempts,
        )
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

/// What a failed handler asks the runtime to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Retry with the configured back-off (until `max_attempts`, then dead-letter or drop).
    Retry,
    /// Retry after this delay instead of the back-off.
    RetryAfter(Duration),
    /// The message can never succeed: dead-letter it now (reason `poison`), no retry.
    Reject,
}

/// A handler failure: a message, a type name for the dead-letter record, and an [`Action`].
///
/// Any `std::error::Error` converts with `?` (action [`Action::Retry`], type name from the
/// error's type).
pub struct HandlerError {
    action: Action,
    message: String,
    exception: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl HandlerError {
    /// A failure to retry.
    pub fn new(message: impl Into<String>) -> HandlerError {
        HandlerError {
            action: Action::Retry,
            message: message.into(),
            exception: "HandlerError".into(),
            source: None,
        }
    }

    /// A failure to retry after `delay` (instead of the configured back-off).
    pub fn retry_after(message: impl Into<String>, delay: Duration) -> HandlerError {
        HandlerError {
            action: Action::RetryAfter(delay),
            ..HandlerError::new(message)
        }
    }

    /// A message that can never succeed: dead-letter it now, without retrying.
    pub fn reject(message: impl Into<String>) -> HandlerError {
        HandlerError {
            action: Action::Reject,
            ..HandlerError::new(message)
        }
    }

    /// Sets the type name recorded in the dead-letter block's `exception`.
    #[must_use]
    pub fn with_exception(mut self, name: impl Into<String>) -> HandlerError {
        self.exception = name.into();
        self
    }

    /// Sets the action.
    #[must_use]
    pub fn with_action(mut self, action: Action) -> HandlerError {
        self.action = action;
        self
    }

    /// The action.
    pub fn action(&self) -> Action {
        self.action
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The type name recorded as `exception`.
    pub fn exception(&self) -> &str {
        &self.exception
    }

    /// The underlying error, when there is one.
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

fn short_type_name<E: ?Sized>() -> String {
    let full = std::any::type_name::<E>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base).to_owned()
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(error: E) -> Self {
        HandlerError {
            action: Action::Retry,
            message: error.to_string(),
            exception: short_type_name::<E>(),
            source: Some(Box::new(error)),
        }
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerError")
            .field("action", &self.action)
            .field("message", &self.message)
            .field("exception", &self.exception)
            .finish()
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
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

    #[derive(Debug, thiserror::Error)]
    #[error("disk full")]
    struct DiskFull;

    #[test]
    fn errors_convert_with_their_type_name() {
        fn fails() -> Result<(), HandlerError> {
            Err(DiskFull)?;
            Ok(())
        }
        let e = fails().unwrap_err();
        assert_eq!(
            (e.message(), e.exception(), e.action()),
            ("disk full", "DiskFull", Action::Retry)
        );
        assert_eq!(HandlerError::reject("bad").action(), Action::Reject);
    }

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
        let ctx = Context::with_route(env, "q", headers, "urn:routed".into(), 3);
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
