//! What a [`Context`](super::Context) needs of the app that consumed its delivery: a queue to
//! publish to, and a way to publish an envelope.
//!
//! The runtime's [`App`](crate::App) implements [`Publish`], and a context holds it as a trait
//! object instead of the app: the handler types then depend on nothing above them, and the
//! runtime, which runs handlers, stays the only module that knows both.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use babelqueue_envelope::Envelope;

use crate::error::Result;
use crate::transport::Headers;

/// A publish in flight.
pub(crate) type Publishing<'a> = Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>;

/// Publishes for a handler's [`Context`](super::Context). Object safe; `Any`, so the runtime
/// can hand its own app back ([`Context::app`](crate::Context::app)).
pub(crate) trait Publish: Any + Send + Sync {
    /// The queue [`Context::publish`](super::Context::publish) sends to.
    fn queue(&self) -> &str;

    /// Publishes `envelope` to `queue` with `headers` (as
    /// [`App::publish_envelope`](crate::App::publish_envelope)).
    fn publish_envelope<'a>(
        &'a self,
        queue: &'a str,
        envelope: &'a Envelope,
        headers: &'a Headers,
    ) -> Publishing<'a>;
}
