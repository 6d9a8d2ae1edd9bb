//! A process-local outbox, for tests and demos.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::message::{OutboxId, OutboxMessage, OutboxRecord};
use crate::store::{ClaimedBatch, OutboxStore, OutboxWriter, Retry, Settlement};

/// The state of an outbox row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowStatus {
    /// Waiting to be published (possibly not due yet after a failure).
    Pending,
    /// The transport accepted it.
    Published,
    /// Its attempts ran out; no relay touches it again.
    Parked,
}

/// A copy of one row of a [`MemoryOutbox`], for assertions.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RowSnapshot {
    /// The row id.
    pub id: OutboxId,
    /// The stored message.
    pub message: OutboxMessage,
    /// Failed publishes so far.
    pub attempts: u32,
    /// The state.
    pub status: RowStatus,
    /// The last failure's text, if any.
    pub last_error: Option<String>,
    /// How long until a pending row is due (zero when due now; `None` when it never will be).
    pub due_in: Option<Duration>,
    /// Whether a relay holds it right now.
    pub claimed: bool,
}

#[derive(Debug)]
struct Row {
    message: OutboxMessage,
    attempts: u32,
    status: RowStatus,
    last_error: Option<String>,
    /// `None`: never due again.
    due_at: Option<Instant>,
    claimed: bool,
}

#[derive(Debug, Default)]
struct State {
    rows: BTreeMap<u64, Row>,
    next_id: u64,
}

/// An in-memory outbox: both the relay-side [`OutboxStore`] and a writer.
///
/// Saving through the outbox itself stores a row at once (there is no database transaction).
/// [`MemoryOutbox::transaction`] models one: rows saved through it appear on
/// [`commit`](MemoryTransaction::commit) and vanish on rollback or drop, so code written against
/// [`OutboxWriter`] can be tested without a database. Claims behave like `FOR UPDATE SKIP
/// LOCKED`: a claimed row is invisible to other claims until its batch is settled or dropped.
/// Due times follow tokio's clock, so a paused test clock drives the back-off.
///
/// Cloning shares the rows.
#[derive(Clone, Default)]
pub struct MemoryOutbox {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for MemoryOutbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryOutbox")
            .field("rows", &self.lock().rows.len())
            .finish()
    }
}

impl MemoryOutbox {
    /// An empty outbox.
    pub fn new() -> MemoryOutbox {
        MemoryOutbox::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation below completes under one lock; a panic elsewhere leaves it consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A transaction: rows saved through it are stored on commit only.
    pub fn transaction(&self) -> MemoryTransaction {
        MemoryTransaction {
            outbox: self.clone(),
            staged: Mutex::new(Vec::new()),
        }
    }

    fn allocate(&self) -> u64 {
        let mut state = self.lock();
        state.next_id += 1;
        state.next_id
    }

    fn insert(&self, rows: impl IntoIterator<Item = (u64, OutboxMessage)>) {
        let now = Instant::now();
        let mut state = self.lock();
        for (id, message) in rows {
            state.rows.insert(
                id,
                Row {
                    message,
                    attempts: 0,
                    status: RowStatus::Pending,
                    last_error: None,
                    due_at: Some(now),
                    claimed: false,
                },
            );
        }
    }

    /// Every row, oldest first.
    pub fn rows(&self) -> Vec<RowSnapshot> {
        let now = Instant::now();
        self.lock()
            .rows
            .iter()
            .map(|(id, row)| RowSnapshot {
                id: OutboxId::from(id.to_string()),
                message: row.message.clone(),
                attempts: row.attempts,
                status: row.status,
                last_error: row.last_error.clone(),
                due_in: match (row.status, row.due_at) {
                    (RowStatus::Pending, Some(at)) => Some(at.saturating_duration_since(now)),
                    _ => None,
                },
                claimed: row.claimed,
            })
            .collect()
    }

    /// One row.
    pub fn row(&self, id: &OutboxId) -> Option<RowSnapshot> {
        self.rows().into_iter().find(|r| &r.id == id)
    }

    /// Rows not published yet and not parked.
    pub fn pending_count(&self) -> usize {
        self.count(RowStatus::Pending)
    }

    /// Rows in `status`.
    pub fn count(&self, status: RowStatus) -> usize {
        self.lock()
            .rows
            .values()
            .filter(|r| r.status == status)
            .count()
    }

    fn release(&self, ids: &[u64]) {
        let mut state = self.lock();
        for id in ids {
            if let Some(row) = state.rows.get_mut(id) {
                row.claimed = false;
            }
        }
    }
}

fn parse_id(id: &OutboxId) -> Option<u64> {
    id.as_str().parse().ok()
}

#[async_trait]
impl OutboxWriter for MemoryOutbox {
    async fn save(&self, message: &OutboxMessage) -> Result<OutboxId> {
        let id = self.allocate();
        self.insert([(id, message.clone())]);
        Ok(OutboxId::from(id.to_string()))
    }
}

#[async_trait]
impl OutboxStore for MemoryOutbox {
    async fn claim(&self, limit: usize) -> Result<Box<dyn ClaimedBatch>> {
        let now = Instant::now();
        let mut state = self.lock();
        let mut ids = Vec::new();
        let mut records = Vec::new();
        for (id, row) in &mut state.rows {
            if records.len() >= limit {
                break;
            }
            let due = row.due_at.is_some_and(|at| at <= now);
            if row.status == RowStatus::Pending && !row.claimed && due {
                row.claimed = true;
                ids.push(*id);
                records.push(OutboxRecord::new(
                    id.to_string(),
                    row.message.clone(),
                    row.attempts,
                ));
            }
        }
        Ok(Box::new(MemoryBatch {
            outbox: self.clone(),
            ids,
            records,
            settled: false,
        }))
    }
}

/// A batch claimed from a [`MemoryOutbox`]; dropping it unsettled releases its rows.
struct MemoryBatch {
    outbox: MemoryOutbox,
    ids: Vec<u64>,
    records: Vec<OutboxRecord>,
    settled: bool,
}

impl fmt::Debug for MemoryBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBatch")
            .field("ids", &self.ids)
            .finish_non_exhaustive()
    }
}

impl Drop for MemoryBatch {
    fn drop(&mut self) {
        if !self.settled {
            self.outbox.release(&self.ids);
        }
    }
}

#[async_trait]
impl ClaimedBatch for MemoryBatch {
    fn records(&self) -> &[OutboxRecord] {
        &self.records
    }

    async fn settle(mut self: Box<Self>, settlement: Settlement) -> Result<()> {
        let now = Instant::now();
        let mut ours = |id: &OutboxId| {
            parse_id(id)
                .filter(|n| self.ids.contains(n))
                .ok_or_else(|| Error::store(format!("row {id} is not part of this batch")))
        };
        // Check every id first so a bad settlement records nothing.
        let published = settlement
            .published_ids()
            .iter()
            .map(&mut ours)
            .collect::<Result<Vec<_>>>()?;
        let failed = settlement
            .failures()
            .iter()
            .map(|f| ours(f.id()).map(|n| (n, f)))
            .collect::<Result<Vec<_>>>()?;
        {
            let mut state = self.outbox.lock();
            for id in published {
                if let Some(row) = state.rows.get_mut(&id) {
                    row.status = RowStatus::Published;
                }
            }
            for (id, failure) in failed {
                if let Some(row) = state.rows.get_mut(&id) {
                    row.attempts = row.attempts.saturating_add(1);
                    row.last_error = Some(failure.error().to_owned());
                    match failure.retry() {
                        Retry::After(delay) => row.due_at = now.checked_add(delay),
                        Retry::Park => {
                            row.status = RowStatus::Parked;
                            row.due_at = None;
                        }
                    }
                }
            }
        }
        self.outbox.release(&self.ids);
        self.settled = true;
        Ok(())
    }
}

/// Rows saved in one modelled transaction of a [`MemoryOutbox`]: stored on
/// [`commit`](MemoryTransaction::commit), discarded on [`rollback`](MemoryTransaction::rollback)
/// or drop. Ids are taken at save time (like a database sequence, a rolled-back id is not
/// reused).
#[derive(Debug)]
pub struct MemoryTransaction {
    outbox: MemoryOutbox,
    staged: Mutex<Vec<(u64, OutboxMessage)>>,
}

impl MemoryTransaction {
    fn staged(&self) -> MutexGuard<'_, Vec<(u64, OutboxMessage)>> {
        self.staged.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores every saved row.
    pub fn commit(self) {
        let rows = std::mem::take(&mut *self.staged());
        self.outbox.insert(rows);
    }

    /// Discards every saved row.
    pub fn rollback(self) {
        drop(self);
    }
}

#[async_trait]
impl OutboxWriter for MemoryTransaction {
    async fn save(&self, message: &OutboxMessage) -> Result<OutboxId> {
        let id = self.outbox.allocate();
        self.staged().push((id, message.clone()));
        Ok(OutboxId::from(id.to_string()))
    }
}
