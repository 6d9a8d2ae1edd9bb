//! Idempotent handling keyed on `meta.id`: a message that was already handled successfully is
//! skipped (and acknowledged) instead of run again.
//!
//! The helper claims the id before running the handler, so two concurrent deliveries of one
//! message run it once: the second sees the claim in flight and is retried later (never
//! acknowledged while the first could still fail), then skipped once the first succeeded.
//! A failed handler releases the claim, so a redelivery runs it again. A message without a
//! usable `meta.id` runs unchanged.
//!
//! ```
//! use std::sync::Arc;
//! use babelqueue_core::idempotency::{InMemoryStore, idempotent};
//! use babelqueue_core::{Context, HandlerError};
//!
//! let store = Arc::new(InMemoryStore::new());
//! let handler = idempotent(store, |ctx: Context| async move { Ok::<(), HandlerError>(()) });
//! # let _ = handler;
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::handler::{Context, Handler, HandlerError, HandlerFuture};

/// A store failure.
#[derive(Debug, thiserror::Error)]
#[error("idempotency store: {message}")]
pub struct StoreError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StoreError {
    /// A store error.
    pub fn new(message: impl Into<String>) -> StoreError {
        StoreError {
            message: message.into(),
            source: None,
        }
    }

    /// A store error with its cause.
    pub fn with_source(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> StoreError {
        StoreError {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

/// The state of an id after a claim attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// This caller owns the id now: run the handler.
    Acquired,
    /// Another delivery holds the claim and has not finished.
    InFlight,
    /// A delivery of this id already succeeded.
    Done,
}

/// Where handled ids are remembered.
///
/// `seen`, `remember` and `forget` are the contract every BabelQueue SDK shares; `claim` is the
/// atomic step that makes concurrent duplicates run once (the default, built from `seen`, is
/// not atomic: override it in a shared store).
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Whether `id` was handled successfully.
    async fn seen(&self, id: &str) -> Result<bool, StoreError>;
    /// Marks `id` as handled successfully.
    async fn remember(&self, id: &str) -> Result<(), StoreError>;
    /// Forgets `id` (a claim or a success), so it runs again.
    async fn forget(&self, id: &str) -> Result<(), StoreError>;
    /// Claims `id` for one delivery.
    async fn claim(&self, id: &str) -> Result<Claim, StoreError> {
        Ok(if self.seen(id).await? {
            Claim::Done
        } else {
            Claim::Acquired
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    InFlight,
    Done,
}

/// A process-local store (tests, single-process workers). Not shared across workers, not
/// persistent: use the Redis or PostgreSQL store for fleets.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    ids: Mutex<HashMap<String, Mark>>,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> InMemoryStore {
        InMemoryStore::default()
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<String, Mark>> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl IdempotencyStore for InMemoryStore {
    async fn seen(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.ids().get(id) == Some(&Mark::Done))
    }
    async fn remember(&self, id: &str) -> Result<(), StoreError> {
        self.ids().insert(id.to_owned(), Mark::Done);
        Ok(())
    }
    async fn forget(&self, id: &str) -> Result<(), StoreError> {
        self.ids().remove(id);
        Ok(())
    }
    async fn claim(&self, id: &str) -> Result<Claim, StoreError> {
        let mut ids = self.ids();
        Ok(match ids.get(id) {
            Some(Mark::Done) => Claim::Done,
            Some(Mark::InFlight) => Claim::InFlight,
            None => {
                ids.insert(id.to_owned(), Mark::InFlight);
                Claim::Acquired
            }
        })
    }
}

/// How long a duplicate that found the id in flight waits before it is tried again.
pub const IN_FLIGHT_RETRY: Duration = Duration::from_secs(1);

/// A handler that runs `inner` at most once per successful `meta.id`.
pub struct Idempotent<S: ?Sized, H> {
    store: Arc<S>,
    inner: Arc<H>,
}

impl<S: ?Sized, H> fmt::Debug for Idempotent<S, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Idempotent")
    }
}

/// Wraps `handler` so it runs at most once per successful `meta.id` (see the module docs).
pub fn idempotent<S, H>(store: Arc<S>, handler: H) -> Idempotent<S, H>
where
    S: IdempotencyStore + ?Sized + 'static,
    H: Handler,
{
    Idempotent {
        store,
        inner: Arc::new(handler),
    }
}

impl<S, H> Handler for Idempotent<S, H>
where
    S: IdempotencyStore + ?Sized + 'static,
    H: Handler,
{
    fn call(&self, ctx: Context) -> HandlerFuture {
        let store = self.store.clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            let Some(id) = ctx
                .message_id()
                .filter(|id| !id.is_empty())
                .map(|id| id.into_owned())
            else {
                // No usable id: cannot dedupe, run unchanged.
                return inner.call(ctx).await;
            };
            let claim = store.claim(&id).await.map_err(|e| {
                HandlerError::new(format!("idempotency check failed: {e}"))
                    .with_exception("StoreError")
            })?;
            match claim {
                Claim::Done => Ok(()),
                Claim::InFlight => Err(HandlerError::retry_after(
                    format!("message {id} is being handled by another delivery"),
                    IN_FLIGHT_RETRY,
                )
                .with_exception("InFlight")),
                Claim::Acquired => match inner.call(ctx).await {
                    Ok(()) => {
                        if let Err(e) = store.remember(&id).await {
                            // The handler succeeded: acknowledge anyway, a redelivery may rerun it.
                            tracing::error!(target: "babelqueue::idempotency", id, error = %e,
                                "Could not remember a handled message id");
                        }
                        Ok(())
                    }
                    Err(e) => {
                        if let Err(forget) = store.forget(&id).await {
                            tracing::error!(target: "babelqueue::idempotency", id, error = %forget,
                                "Could not release the claim of a failed message id");
                        }
                        Err(e)
                    }
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelqueue_envelope::Envelope;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn ctx(id: &str) -> Context {
        let env = Envelope::builder("urn:x").message_id(id).build().unwrap();
        Context::new(env, "q", Default::default())
    }

    #[tokio::test]
    async fn duplicates_run_once_failures_run_again() {
        let runs = Arc::new(AtomicUsize::new(0));
        let fail_next = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (r, f) = (runs.clone(), fail_next.clone());
        let h = idempotent(Arc::new(InMemoryStore::new()), move |_ctx: Context| {
            let (r, f) = (r.clone(), f.clone());
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                if f.swap(false, Ordering::SeqCst) {
                    Err(HandlerError::new("boom"))
                } else {
                    Ok(())
                }
            }
        });
        assert!(h.call(ctx("a")).await.is_err());
        assert!(h.call(ctx("a")).await.is_ok());
        assert!(h.call(ctx("a")).await.is_ok());
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        // an empty id fails open
        h.call(ctx("")).await.unwrap();
        h.call(ctx("")).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_duplicate_in_flight_is_retried_not_acknowledged() {
        let store = Arc::new(InMemoryStore::new());
        assert_eq!(store.claim("a").await.unwrap(), Claim::Acquired);
        let h = idempotent(store.clone(), |_ctx: Context| async {
            Ok::<(), HandlerError>(())
        });
        let e = h.call(ctx("a")).await.unwrap_err();
        assert!(matches!(e.action(), crate::Action::RetryAfter(_)));
        store.remember("a").await.unwrap();
        assert!(h.call(ctx("a")).await.is_ok());
    }
}
