//! The persistence seams: [`OutboxWriter`] (the write side, bound to the caller's open
//! transaction) and [`OutboxStore`] (the relay side).

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::message::{OutboxId, OutboxMessage, OutboxRecord};

/// The write side of an outbox, bound to a transaction the caller opened.
///
/// A writer never begins, commits or rolls back anything: the row it inserts becomes visible to
/// the relay when the caller commits, and disappears with a rollback. Database crates hand one
/// out for their transaction type (for PostgreSQL, `PgOutbox::writer(&transaction)`).
#[async_trait]
pub trait OutboxWriter: Send + Sync {
    /// Stores `message` (its bytes unchanged) as a pending row; returns the row id.
    async fn save(&self, message: &OutboxMessage) -> Result<OutboxId>;
}

#[async_trait]
impl<W: OutboxWriter + ?Sized> OutboxWriter for &W {
    async fn save(&self, message: &OutboxMessage) -> Result<OutboxId> {
        (**self).save(message).await
    }
}

/// The relay side of an outbox: hands out due rows and records what became of them.
///
/// Object safe: the relay holds an `Arc<dyn OutboxStore>`.
///
/// # Contract
///
/// * [`claim`](OutboxStore::claim) returns up to `limit` pending rows whose next try is due,
///   oldest first, and holds them exclusively: another claim (from this relay or another
///   process) skips them until the batch is settled or dropped.
/// * [`ClaimedBatch::settle`] records the outcome of every row in one step: published rows are
///   never handed out again; a failed row keeps its bytes, counts one more attempt, keeps the
///   error text, and becomes due again after its delay, or is parked for good.
/// * Dropping a batch without settling it releases its rows unchanged (a crashed relay loses
///   nothing; what it had published is published again: delivery stays at-least-once).
#[async_trait]
pub trait OutboxStore: Send + Sync + fmt::Debug {
    /// Claims up to `limit` due rows, oldest first.
    async fn claim(&self, limit: usize) -> Result<Box<dyn ClaimedBatch>>;
}

/// Rows one [`OutboxStore::claim`] handed out, held until settled or dropped.
#[async_trait]
pub trait ClaimedBatch: Send + fmt::Debug {
    /// The claimed rows, oldest first.
    fn records(&self) -> &[OutboxRecord];

    /// Records every outcome and releases the claim. On error nothing is recorded: the rows are
    /// released unchanged and come back on a later claim.
    async fn settle(self: Box<Self>, settlement: Settlement) -> Result<()>;
}

/// What happens next to a row whose publish failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Due again after this delay.
    After(Duration),
    /// Never tried again (its attempts ran out): parked for an operator.
    Park,
}

/// A failed publish of one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    id: OutboxId,
    error: String,
    retry: Retry,
}

impl Failure {
    /// A failure of row `id` with a short, human-readable `error` (never a secret).
    pub fn new(id: OutboxId, error: impl Into<String>, retry: Retry) -> Failure {
        Failure {
            id,
            error: error.into(),
            retry,
        }
    }

    /// The row.
    pub fn id(&self) -> &OutboxId {
        &self.id
    }

    /// Why the publish failed.
    pub fn error(&self) -> &str {
        &self.error
    }

    /// When the row is tried again.
    pub fn retry(&self) -> Retry {
        self.retry
    }
}

/// The outcome of one claimed batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settlement {
    published: Vec<OutboxId>,
    failed: Vec<Failure>,
}

impl Settlement {
    /// An empty settlement. Rows of the batch it does not mention are released unchanged.
    pub fn new() -> Settlement {
        Settlement::default()
    }

    /// Records that the broker accepted row `id`.
    pub fn published(&mut self, id: OutboxId) {
        self.published.push(id);
    }

    /// Records a failed publish.
    pub fn failed(&mut self, failure: Failure) {
        self.failed.push(failure);
    }

    /// The rows the broker accepted.
    pub fn published_ids(&self) -> &[OutboxId] {
        &self.published
    }

    /// The failed rows.
    pub fn failures(&self) -> &[Failure] {
        &self.failed
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.published.is_empty() && self.failed.is_empty()
    }
}
