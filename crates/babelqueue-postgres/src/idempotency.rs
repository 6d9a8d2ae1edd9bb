//! The PostgreSQL idempotency store.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::idempotency::{Claim, IdempotencyStore, StoreError};
use tokio_postgres::Client;
use tokio_postgres::types::Type;

use crate::connect::Shared;
use crate::error::Error;
use crate::outbox::apply_ddl;
use crate::table::Table;

/// The idempotency DDL with `{table}` and `{expires_index}` placeholders.
pub const IDEMPOTENCY_SQL: &str = include_str!("../sql/idempotency.sql");

/// The default idempotency table.
pub const DEFAULT_IDEMPOTENCY_TABLE: &str = "babelqueue_idempotency";

/// How long an unfinished claim holds an id by default before another delivery may take it
/// over (a worker that died mid-handler).
pub const DEFAULT_CLAIM_TIMEOUT: Duration = Duration::from_secs(300);

/// How many times a claim re-reads a row that vanished between its insert and its read (a
/// concurrent `forget`) before it answers "in flight".
const CLAIM_ROUNDS: usize = 3;

#[derive(Debug, Clone)]
struct Sql {
    claim: String,
    state: String,
    seen: String,
    remember: String,
    forget: String,
    purge: String,
}

impl Sql {
    fn new(t: &Table) -> Sql {
        Sql {
            // Inserts a claim, or takes over a row that expired; answers only when it did.
            claim: format!(
                "INSERT INTO {t} AS i (message_id, created_at, completed_at, expires_at) \
                 VALUES ($1, now(), NULL, now() + $2::bigint * interval '1 millisecond') \
                 ON CONFLICT (message_id) DO UPDATE \
                 SET created_at = now(), completed_at = NULL, expires_at = EXCLUDED.expires_at \
                 WHERE i.expires_at IS NOT NULL AND i.expires_at <= now() \
                 RETURNING 1"
            ),
            state: format!(
                "SELECT completed_at IS NOT NULL FROM {t} \
                 WHERE message_id = $1 AND (expires_at IS NULL OR expires_at > now())"
            ),
            seen: format!(
                "SELECT EXISTS (SELECT 1 FROM {t} WHERE message_id = $1 \
                 AND completed_at IS NOT NULL AND (expires_at IS NULL OR expires_at > now()))"
            ),
            remember: format!(
                "INSERT INTO {t} AS i (message_id, created_at, completed_at, expires_at) \
                 VALUES ($1, now(), now(), now() + $2::bigint * interval '1 millisecond') \
                 ON CONFLICT (message_id) DO UPDATE \
                 SET completed_at = now(), expires_at = EXCLUDED.expires_at"
            ),
            forget: format!("DELETE FROM {t} WHERE message_id = $1"),
            purge: format!("DELETE FROM {t} WHERE expires_at IS NOT NULL AND expires_at <= now()"),
        }
    }
}

/// Handled `meta.id`s in a PostgreSQL table, shared by every worker of a fleet.
///
/// Implements the core's claim semantics ([`Claim`]): `INSERT … ON CONFLICT` on the primary key
/// lets exactly one of several concurrent deliveries of an id claim it; the others see it
/// [`InFlight`](Claim::InFlight) until the claim holder remembers it
/// ([`Done`](Claim::Done)) or forgets it after a failure (the next delivery claims it again).
/// A claim nobody finishes (a worker died) expires after the claim timeout and can be taken
/// over; a handled id is kept for the retention (forever by default).
///
/// Queries run on one connection, pipelined, so concurrent handlers share it. A store built from
/// a URL reconnects after a lost connection.
pub struct PgIdempotencyStore {
    table: Table,
    shared: Arc<Shared>,
    sql: Sql,
    claim_timeout: Duration,
    retention: Option<Duration>,
}

impl fmt::Debug for PgIdempotencyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgIdempotencyStore")
            .field("table", &self.table)
            .field("claim_timeout", &self.claim_timeout)
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl PgIdempotencyStore {
    /// Connects to `url` (see [`Connector::parse`](crate::Connector::parse)) for the default
    /// table.
    pub async fn connect(url: &str) -> Result<PgIdempotencyStore, Error> {
        Ok(PgIdempotencyStore::build(Shared::connect(url).await?))
    }

    /// A store on a client you connected (not reconnected if it closes).
    pub fn from_client(client: Client) -> PgIdempotencyStore {
        PgIdempotencyStore::build(Shared::from_client(client))
    }

    fn build(shared: Shared) -> PgIdempotencyStore {
        let table = Table::parse(DEFAULT_IDEMPOTENCY_TABLE).expect("a valid name");
        PgIdempotencyStore {
            sql: Sql::new(&table),
            table,
            shared: Arc::new(shared),
            claim_timeout: DEFAULT_CLAIM_TIMEOUT,
            retention: None,
        }
    }

    /// Uses another table (`[schema.]name`).
    pub fn with_table(mut self, table: &str) -> Result<PgIdempotencyStore, Error> {
        self.table = Table::parse(table)?;
        self.sql = Sql::new(&self.table);
        Ok(self)
    }

    /// How long an unfinished claim holds its id (default 5 minutes). Keep it above your
    /// longest handler run: a claim older than this can be taken by another delivery.
    #[must_use]
    pub fn claim_timeout(mut self, timeout: Duration) -> PgIdempotencyStore {
        self.claim_timeout = timeout;
        self
    }

    /// How long a handled id is remembered (default: forever). `None` keeps ids forever.
    #[must_use]
    pub fn retention(mut self, retention: Option<Duration>) -> PgIdempotencyStore {
        self.retention = retention;
        self
    }

    /// The table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The DDL that creates the table and its index (idempotent), for your own migration tool.
    pub fn schema_sql(&self) -> String {
        IDEMPOTENCY_SQL
            .replace("{table}", &self.table.to_string())
            .replace("{expires_index}", &self.table.companion("expires_idx"))
    }

    /// Creates the table and its index when they are missing (safe to run concurrently and
    /// repeatedly).
    pub async fn migrate(&self) -> Result<(), Error> {
        let client = self.shared.client().await?;
        apply_ddl(&client, &self.schema_sql()).await
    }

    /// Deletes expired rows (abandoned claims, ids past their retention); returns how many.
    /// Expired rows are already ignored; this only reclaims space.
    pub async fn purge_expired(&self) -> Result<u64, Error> {
        let client = self.shared.client().await?;
        Ok(client.execute(&self.sql.purge, &[]).await?)
    }

    async fn try_claim(&self, id: &str) -> Result<Claim, Error> {
        let client = self.shared.client().await?;
        let lease = millis(self.claim_timeout);
        for _ in 0..CLAIM_ROUNDS {
            let inserted = client
                .query_typed_opt(&self.sql.claim, &[(&id, Type::TEXT), (&lease, Type::INT8)])
                .await?;
            if inserted.is_some() {
                return Ok(Claim::Acquired);
            }
            let state = client
                .query_typed_opt(&self.sql.state, &[(&id, Type::TEXT)])
                .await?;
            if let Some(row) = state {
                let done: bool = row.try_get(0)?;
                return Ok(if done { Claim::Done } else { Claim::InFlight });
            }
            // The row was forgotten or expired between the two statements: claim again.
        }
        Ok(Claim::InFlight)
    }
}

#[async_trait]
impl IdempotencyStore for PgIdempotencyStore {
    async fn seen(&self, id: &str) -> Result<bool, StoreError> {
        let client = self.shared.client().await?;
        let row = client
            .query_typed_one(&self.sql.seen, &[(&id, Type::TEXT)])
            .await
            .map_err(Error::from)?;
        Ok(row.try_get(0).map_err(Error::from)?)
    }

    async fn remember(&self, id: &str) -> Result<(), StoreError> {
        let client = self.shared.client().await?;
        let retention: Option<i64> = self.retention.map(millis);
        client
            .query_typed(
                &self.sql.remember,
                &[(&id, Type::TEXT), (&retention, Type::INT8)],
            )
            .await
            .map_err(Error::from)?;
        Ok(())
    }

    async fn forget(&self, id: &str) -> Result<(), StoreError> {
        let client = self.shared.client().await?;
        client
            .query_typed(&self.sql.forget, &[(&id, Type::TEXT)])
            .await
            .map_err(Error::from)?;
        Ok(())
    }

    async fn claim(&self, id: &str) -> Result<Claim, StoreError> {
        Ok(self.try_claim(id).await?)
    }
}
