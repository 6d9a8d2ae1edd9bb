//! The PostgreSQL outbox: [`PgOutbox`] (the write side, on the caller's transaction) and
//! [`PgOutboxStore`] (the relay side, on its own connection).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{Envelope, Headers};
use babelqueue_outbox::{
    ClaimedBatch, Outbox, OutboxId, OutboxMessage, OutboxRecord, OutboxStore, OutboxWriter, Retry,
    Settlement,
};
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio_postgres::types::{Json, Type};
use tokio_postgres::{Client, GenericClient};

use crate::connect::Shared;
use crate::error::Error;
use crate::table::Table;

/// The outbox DDL with `{table}` and `{pending_index}` placeholders.
pub const OUTBOX_SQL: &str = include_str!("../sql/outbox.sql");

/// The default outbox table.
pub const DEFAULT_OUTBOX_TABLE: &str = "babelqueue_outbox";

/// Serializes concurrent migrations (`pg_advisory_xact_lock` key).
const MIGRATION_LOCK: i64 = 0x6271_6f75_7462_6f78; // "bqoutbox"

/// Runs `ddl` in one transaction, under the migration lock, so concurrent installs do not race
/// on `CREATE … IF NOT EXISTS`.
pub(crate) async fn apply_ddl(client: &Client, ddl: &str) -> Result<(), Error> {
    client
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock({MIGRATION_LOCK}); {ddl}\nCOMMIT;"
        ))
        .await
        .map_err(Error::from)
}

/// The write side of the PostgreSQL outbox: inserts rows through the caller's client or
/// transaction. Cheap to clone; holds only the table name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOutbox {
    table: Table,
    insert: String,
}

impl Default for PgOutbox {
    fn default() -> Self {
        PgOutbox::with_table_name(Table::parse(DEFAULT_OUTBOX_TABLE).expect("a valid name"))
    }
}

impl PgOutbox {
    /// The outbox in the default table, `babelqueue_outbox`.
    pub fn new() -> PgOutbox {
        PgOutbox::default()
    }

    /// The outbox in `table` (`[schema.]name`).
    pub fn with_table(table: &str) -> Result<PgOutbox, Error> {
        Ok(PgOutbox::with_table_name(Table::parse(table)?))
    }

    fn with_table_name(table: Table) -> PgOutbox {
        let insert =
            format!("INSERT INTO {table} (queue, body, headers) VALUES ($1, $2, $3) RETURNING id");
        PgOutbox { table, insert }
    }

    /// The table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The DDL that creates the table and its index (idempotent), for your own migration tool.
    pub fn schema_sql(&self) -> String {
        OUTBOX_SQL
            .replace("{table}", &self.table.to_string())
            .replace("{pending_index}", &self.table.companion("pending_idx"))
    }

    /// Creates the table and its index when they are missing (safe to run concurrently and
    /// repeatedly). `client` must not be inside a transaction.
    pub async fn migrate(&self, client: &Client) -> Result<(), Error> {
        apply_ddl(client, &self.schema_sql()).await
    }

    /// An [`OutboxWriter`] bound to `client`: a [`tokio_postgres::Transaction`] the caller
    /// opened (the row commits or rolls back with it), or a plain client (the row commits at
    /// once).
    pub fn writer<'a, C: GenericClient + Sync>(&'a self, client: &'a C) -> PgWriter<'a, C> {
        PgWriter {
            outbox: self,
            client,
        }
    }

    /// Encodes `envelope` and inserts it through `client` (see [`Outbox::write`]).
    pub async fn write<C: GenericClient + Sync>(
        &self,
        client: &C,
        envelope: &Envelope,
    ) -> babelqueue_outbox::Result<OutboxId> {
        Outbox::new(self.writer(client)).write(envelope).await
    }

    /// Like [`write`](PgOutbox::write), with out-of-band headers.
    pub async fn write_with_headers<C: GenericClient + Sync>(
        &self,
        client: &C,
        envelope: &Envelope,
        headers: &Headers,
    ) -> babelqueue_outbox::Result<OutboxId> {
        Outbox::new(self.writer(client))
            .write_with_headers(envelope, headers)
            .await
    }
}

/// A [`PgOutbox`] bound to the caller's client or transaction.
pub struct PgWriter<'a, C> {
    outbox: &'a PgOutbox,
    client: &'a C,
}

impl<C> fmt::Debug for PgWriter<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgWriter")
            .field("table", &self.outbox.table)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<C: GenericClient + Sync> OutboxWriter for PgWriter<'_, C> {
    async fn save(&self, message: &OutboxMessage) -> babelqueue_outbox::Result<OutboxId> {
        // One round trip: the statement goes out with its parameter types, unprepared.
        let row = self
            .client
            .query_typed_one(
                &self.outbox.insert,
                &[
                    (&message.queue(), Type::TEXT),
                    (&message.body(), Type::BYTEA),
                    (&Json(message.headers()), Type::JSONB),
                ],
            )
            .await
            .map_err(Error::from)?;
        let id: i64 = row.try_get(0).map_err(Error::from)?;
        Ok(OutboxId::from(id))
    }
}

/// Row counts of an outbox table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxCounts {
    /// Waiting to be published (due or not).
    pub pending: u64,
    /// Accepted by the broker.
    pub published: u64,
    /// Parked after their attempts ran out.
    pub parked: u64,
}

/// Per-connection state of a [`PgOutboxStore`]: whether a transaction may still be open.
#[derive(Debug, Default)]
struct Session {
    in_transaction: bool,
}

/// The relay side of the PostgreSQL outbox, on a connection of its own.
///
/// [`claim`](OutboxStore::claim) opens a transaction and locks up to `limit` pending, due rows,
/// oldest first, with `FOR UPDATE SKIP LOCKED`: another relay (another store, another process)
/// skips them, so no row is published by two relays at once. The relay publishes while the
/// rows stay locked; [`settle`](ClaimedBatch::settle) records every outcome and commits. If the
/// relay dies, or the batch is dropped, the transaction rolls back and the rows are claimed
/// again later.
///
/// One store runs one batch at a time (a second claim waits for the first batch); run one
/// store per relay. A store built from a URL reconnects after a lost connection.
pub struct PgOutboxStore {
    outbox: PgOutbox,
    shared: Arc<Shared>,
    session: Arc<Mutex<Session>>,
    claim_sql: String,
    settle_sql: String,
}

impl fmt::Debug for PgOutboxStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgOutboxStore")
            .field("table", &self.outbox.table)
            .field("connection", &self.shared)
            .finish_non_exhaustive()
    }
}

impl PgOutboxStore {
    /// Connects to `url` (see [`Connector::parse`](crate::Connector::parse)) for the default
    /// table.
    pub async fn connect(url: &str) -> Result<PgOutboxStore, Error> {
        Ok(PgOutboxStore::build(
            PgOutbox::new(),
            Shared::connect(url).await?,
        ))
    }

    /// A store on a client you connected (it is not reconnected if it closes). Use the client
    /// for nothing else: the store runs its transactions on it.
    pub fn from_client(client: Client) -> PgOutboxStore {
        PgOutboxStore::build(PgOutbox::new(), Shared::from_client(client))
    }

    /// The same store on another table (`[schema.]name`).
    pub fn with_table(self, table: &str) -> Result<PgOutboxStore, Error> {
        let outbox = PgOutbox::with_table(table)?;
        Ok(PgOutboxStore {
            claim_sql: claim_sql(&outbox.table),
            settle_sql: settle_sql(&outbox.table),
            outbox,
            ..self
        })
    }

    fn build(outbox: PgOutbox, shared: Shared) -> PgOutboxStore {
        PgOutboxStore {
            claim_sql: claim_sql(&outbox.table),
            settle_sql: settle_sql(&outbox.table),
            outbox,
            shared: Arc::new(shared),
            session: Arc::new(Mutex::new(Session::default())),
        }
    }

    /// The write side for the same table.
    pub fn outbox(&self) -> &PgOutbox {
        &self.outbox
    }

    /// Creates the table and its index when they are missing (see [`PgOutbox::migrate`]).
    pub async fn migrate(&self) -> Result<(), Error> {
        let client = self.shared.client().await?;
        self.outbox.migrate(&client).await
    }

    /// How many rows are pending, published and parked.
    pub async fn counts(&self) -> Result<OutboxCounts, Error> {
        let client = self.shared.client().await?;
        let t = &self.outbox.table;
        let row = client
            .query_one(
                &format!(
                    "SELECT count(*) FILTER (WHERE status = 'pending'), \
                            count(*) FILTER (WHERE status = 'published'), \
                            count(*) FILTER (WHERE status = 'parked') FROM {t}"
                ),
                &[],
            )
            .await?;
        let count = |i: usize| -> Result<u64, Error> {
            let n: i64 = row.try_get(i)?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok(OutboxCounts {
            pending: count(0)?,
            published: count(1)?,
            parked: count(2)?,
        })
    }

    /// Deletes published rows older than `age` (by publish time); returns how many.
    pub async fn purge_published(&self, age: Duration) -> Result<u64, Error> {
        let client = self.shared.client().await?;
        let t = &self.outbox.table;
        Ok(client
            .execute(
                &format!(
                    "DELETE FROM {t} WHERE status = 'published' \
                     AND published_at < now() - $1::bigint * interval '1 millisecond'"
                ),
                &[&millis(age)],
            )
            .await?)
    }

    /// Makes every parked row pending and due again (after the cause was fixed); its attempt
    /// count is kept. Returns how many.
    pub async fn unpark(&self) -> Result<u64, Error> {
        let client = self.shared.client().await?;
        let t = &self.outbox.table;
        Ok(client
            .execute(
                &format!(
                    "UPDATE {t} SET status = 'pending', next_attempt_at = now() \
                     WHERE status = 'parked'"
                ),
                &[],
            )
            .await?)
    }

    async fn claim_rows(
        &self,
        limit: usize,
    ) -> Result<(OwnedMutexGuard<Session>, Arc<Client>, Vec<OutboxRecord>), Error> {
        let mut session = self.session.clone().lock_owned().await;
        let client = self.shared.client().await?;
        if session.in_transaction {
            // A batch was dropped without a rollback reaching the server.
            client.batch_execute("ROLLBACK").await?;
            session.in_transaction = false;
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        session.in_transaction = true;
        client.batch_execute("BEGIN").await?;
        let records = match self.read_claimed(&client, limit).await {
            Ok(records) => records,
            Err(e) => {
                if client.batch_execute("ROLLBACK").await.is_ok() {
                    session.in_transaction = false;
                }
                return Err(e);
            }
        };
        Ok((session, client, records))
    }

    async fn read_claimed(&self, client: &Client, limit: i64) -> Result<Vec<OutboxRecord>, Error> {
        let rows = client.query(&self.claim_sql, &[&limit]).await?;
        let mut records = Vec::with_capacity(rows.len());
        for row in rows {
            let id: i64 = row.try_get(0)?;
            let queue: String = row.try_get(1)?;
            let body: Vec<u8> = row.try_get(2)?;
            let Json(headers): Json<Headers> = row.try_get(3).map_err(|e| {
                Error::Protocol(format!("row {id}: headers are not a string map: {e}"))
            })?;
            let attempts: i32 = row.try_get(4)?;
            let message = OutboxMessage::new(queue, body).with_headers(&headers);
            records.push(OutboxRecord::new(
                id,
                message,
                u32::try_from(attempts).unwrap_or(0),
            ));
        }
        Ok(records)
    }
}

#[async_trait]
impl OutboxStore for PgOutboxStore {
    async fn claim(&self, limit: usize) -> babelqueue_outbox::Result<Box<dyn ClaimedBatch>> {
        if limit == 0 {
            return Ok(Box::new(PgBatch::empty()));
        }
        let (session, client, records) = self.claim_rows(limit).await?;
        if records.is_empty() {
            // Nothing locked: end the transaction now.
            let mut session = session;
            client.batch_execute("COMMIT").await.map_err(Error::from)?;
            session.in_transaction = false;
            return Ok(Box::new(PgBatch::empty()));
        }
        Ok(Box::new(PgBatch {
            held: Some((session, client)),
            records,
            settle_sql: self.settle_sql.clone(),
        }))
    }
}

/// Rows claimed from a [`PgOutboxStore`]: an open transaction holding their row locks.
struct PgBatch {
    held: Option<(OwnedMutexGuard<Session>, Arc<Client>)>,
    records: Vec<OutboxRecord>,
    settle_sql: String,
}

impl fmt::Debug for PgBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgBatch")
            .field("rows", &self.records.len())
            .finish_non_exhaustive()
    }
}

impl PgBatch {
    fn empty() -> PgBatch {
        PgBatch {
            held: None,
            records: Vec::new(),
            settle_sql: String::new(),
        }
    }
}

impl Drop for PgBatch {
    fn drop(&mut self) {
        // Unsettled: roll back on a task (the session lock travels with it, so the next claim
        // waits for the rollback). Without a runtime, the next claim rolls back first.
        if let Some((mut session, client)) = self.held.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                if client.batch_execute("ROLLBACK").await.is_ok() {
                    session.in_transaction = false;
                }
            });
        }
    }
}

/// Locks up to `$1` pending, due rows, oldest first, skipping rows another relay holds.
fn claim_sql(t: &Table) -> String {
    format!(
        "SELECT id, queue, body, headers, attempts FROM {t} \
         WHERE status = 'pending' AND next_attempt_at <= now() \
         ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED"
    )
}

/// Marks `$1` published and records the failures `($2, $3, $4, $5)` = (id, error, delay in ms,
/// park) in one statement; answers how many rows each part updated.
fn settle_sql(t: &Table) -> String {
    format!(
        "WITH published AS ( \
            UPDATE {t} SET status = 'published', published_at = now() \
            WHERE id = ANY($1::bigint[]) AND status = 'pending' RETURNING 1 \
         ), failed AS ( \
            UPDATE {t} AS o SET attempts = o.attempts + 1, last_error = f.error, \
                failed_at = now(), \
                status = CASE WHEN f.park THEN 'parked' ELSE 'pending' END, \
                next_attempt_at = CASE WHEN f.park THEN o.next_attempt_at \
                    ELSE now() + f.delay_ms * interval '1 millisecond' END \
            FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bool[]) \
                AS f(id, error, delay_ms, park) \
            WHERE o.id = f.id AND o.status = 'pending' RETURNING 1 \
         ) SELECT (SELECT count(*) FROM published), (SELECT count(*) FROM failed)"
    )
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn parse_id(id: &OutboxId) -> Result<i64, Error> {
    id.as_str()
        .parse()
        .map_err(|_| Error::Config(format!("{id:?} is not a PostgreSQL outbox row id")))
}

#[async_trait]
impl ClaimedBatch for PgBatch {
    fn records(&self) -> &[OutboxRecord] {
        &self.records
    }

    async fn settle(mut self: Box<Self>, settlement: Settlement) -> babelqueue_outbox::Result<()> {
        let Some((mut session, client)) = self.held.take() else {
            return if settlement.is_empty() {
                Ok(())
            } else {
                Err(babelqueue_outbox::Error::store(
                    "settling rows of an empty batch",
                ))
            };
        };
        let ours: Vec<i64> = self
            .records
            .iter()
            .map(|r| parse_id(r.id()))
            .collect::<Result<_, _>>()?;
        let mut published = Vec::new();
        for id in settlement.published_ids() {
            published.push(parse_id(id)?);
        }
        let (mut ids, mut errors, mut delays, mut parks) = (vec![], vec![], vec![], vec![]);
        for failure in settlement.failures() {
            ids.push(parse_id(failure.id())?);
            // TEXT cannot hold NUL.
            errors.push(failure.error().replace('\0', "\u{FFFD}"));
            match failure.retry() {
                Retry::After(delay) => {
                    delays.push(millis(delay));
                    parks.push(false);
                }
                Retry::Park => {
                    delays.push(0);
                    parks.push(true);
                }
            }
        }
        if let Some(stranger) = published.iter().chain(&ids).find(|id| !ours.contains(id)) {
            // Put the session back in the batch so Drop rolls back.
            self.held = Some((session, client));
            return Err(babelqueue_outbox::Error::store(format!(
                "row {stranger} is not part of this batch"
            )));
        }
        let result = async {
            let row = client
                .query_one(
                    &self.settle_sql,
                    &[&published, &ids, &errors, &delays, &parks],
                )
                .await?;
            let (p, f): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
            let expected = (published.len(), ids.len());
            if (usize::try_from(p).ok(), usize::try_from(f).ok())
                != (Some(expected.0), Some(expected.1))
            {
                return Err(Error::Protocol(format!(
                    "settling updated {p} published and {f} failed rows, expected {} and {}",
                    expected.0, expected.1
                )));
            }
            client.batch_execute("COMMIT").await?;
            Ok::<(), Error>(())
        }
        .await;
        match result {
            Ok(()) => {
                session.in_transaction = false;
                Ok(())
            }
            Err(e) => {
                self.held = Some((session, client));
                Err(e.into())
            }
        }
    }
}
