//! The processes `cargo xtask bench cli` and `cargo xtask bench outbox` time from outside
//! (wall clock and CPU): the library's windowed publish, and one outbox relay on a PostgreSQL
//! table to a broker. Run by hand:
//!
//! ```text
//! drivers publish BROKER_URL QUEUE N      # App::publish_batch in windows of 1 024, as the CLI
//! drivers fill  PG_URL TABLE QUEUE N       # create TABLE, insert N pending rows
//! drivers relay PG_URL TABLE BROKER_URL BATCH  # OutboxRelay::drain, batch size BATCH
//! drivers naive PG_URL TABLE BROKER_URL    # select one row, publish, delete, one at a time
//! drivers count PG_URL TABLE               # pending / published / parked
//! drivers drop  PG_URL TABLE
//! ```
//!
//! `publish` prints `id <meta.id>` per envelope once its window was confirmed.
//!
//! `relay` and `naive` print one line per body the broker accepted: `sent <hash>` (FNV-1a of the
//! body bytes, which hold a unique `meta.id`), so the xtask can count rows two relay processes
//! both sent. Without a command (as `cargo test --all-targets` runs it) it prints its usage.

#![allow(missing_docs, clippy::print_stdout)]

use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue::outbox::OutboxRelay;
use babelqueue::postgres::tokio_postgres::Client;
use babelqueue::postgres::{PgOutbox, PgOutboxStore};
use babelqueue::{
    BatchPublisher, Capabilities, Delivery, Envelope, Outgoing, Transport, TransportError,
};

type Failed = Box<dyn std::error::Error + Send + Sync>;

/// FNV-1a: a row's identity in the `sent` lines.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The broker's transport, recording what it accepted.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn Transport>,
    sent: Mutex<Vec<u64>>,
}

impl Recording {
    fn record<'a>(&self, bodies: impl IntoIterator<Item = &'a [u8]>) {
        let mut sent = self
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sent.extend(bodies.into_iter().map(fnv));
    }

    fn print(&self) {
        let sent = self
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for hash in sent.iter() {
            let _ = writeln!(out, "sent {hash:016x}");
        }
    }
}

#[async_trait]
impl Transport for Recording {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        self.inner.publish(queue, body).await?;
        self.record([body]);
        Ok(())
    }
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        self.inner.send(outgoing).await?;
        self.record([outgoing.body]);
        Ok(())
    }
    async fn pop(&self, queue: &str, wait: Duration) -> Result<Option<Delivery>, TransportError> {
        self.inner.pop(queue, wait).await
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        self.inner.ack(delivery).await
    }
    async fn close(&self) -> Result<(), TransportError> {
        self.inner.close().await
    }
    fn capabilities(&self) -> Capabilities<'_> {
        let inner = self.inner.capabilities();
        match inner.batch_publisher() {
            Some(_) => inner.batch_publish(self),
            None => inner,
        }
    }
}

#[async_trait]
impl BatchPublisher for Recording {
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        let Some(publisher) = self.inner.capabilities().batch_publisher() else {
            return Err(TransportError::unsupported("no batch publish underneath"));
        };
        publisher.publish_batch(queue, bodies).await?;
        self.record(bodies.iter().copied());
        Ok(())
    }
}

/// What `babelqueue publish --count` does, through the library alone: windows of 1 024
/// envelopes, each one `App::publish_batch` (confirmed) before the next is built.
async fn publish(broker: &str, queue: &str, n: u64) -> Result<(), Failed> {
    let transport = babelqueue::connect(broker).await?;
    let app = babelqueue::App::builder_arc(transport.clone())
        .queue(queue)
        .build()?;
    let data = serde_json::json!({"order_id": 1, "total": 99.9, "currency": "EUR"});
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut left = n;
    while left > 0 {
        let take = left.min(1024);
        let batch = (0..take)
            .map(|_| app.envelope("urn:babel:bench:cli").data(&data).build())
            .collect::<Result<Vec<_>, _>>()?;
        app.publish_batch(queue, &batch).await?;
        for envelope in &batch {
            writeln!(out, "id {}", envelope.message_id().unwrap_or_default())?;
        }
        left -= take;
    }
    out.flush()?;
    drop(out);
    transport.close().await?;
    Ok(())
}

async fn pg(url: &str) -> Result<Client, Failed> {
    Ok(babelqueue::postgres::connect(url).await?)
}

/// Creates `table` and inserts `n` pending rows for `queue` in one statement per 5 000.
async fn fill(url: &str, table: &str, queue: &str, n: u64) -> Result<(), Failed> {
    let client = pg(url).await?;
    let outbox = PgOutbox::with_table(table)?;
    outbox.migrate(&client).await?;
    let sql = format!(
        "INSERT INTO {} (queue, body) SELECT $1, b FROM unnest($2::bytea[]) AS b",
        outbox.table()
    );
    let mut left = n;
    let mut order = 0_u64;
    while left > 0 {
        let take = left.min(5_000);
        let mut bodies = Vec::new();
        for _ in 0..take {
            order += 1;
            let envelope = Envelope::builder("urn:babel:orders:created")
                .queue(queue)
                .data(&serde_json::json!({"order_id": order, "total": 99.9, "currency": "EUR"}))
                .build()?;
            bodies.push(envelope.encode()?.into_bytes());
        }
        client.execute(&sql, &[&queue, &bodies]).await?;
        left -= take;
    }
    println!("filled {n}");
    Ok(())
}

async fn relay(url: &str, table: &str, broker: &str, batch: usize) -> Result<(), Failed> {
    let store = PgOutboxStore::connect(url).await?.with_table(table)?;
    let recording = Arc::new(Recording {
        inner: babelqueue::connect(broker).await?,
        sent: Mutex::new(Vec::new()),
    });
    let relay = OutboxRelay::builder_arc(recording.clone(), Arc::new(store))
        .batch_size(batch)
        .max_passes(u64::MAX)
        .build()?;
    let report = relay.drain().await?;
    recording.print();
    println!(
        "published {} failed {} passes {}",
        report.published, report.failed, report.passes
    );
    recording.inner.close().await?;
    Ok(())
}

/// The loop an application writes first: one row per transaction, published, then deleted.
async fn naive(url: &str, table: &str, broker: &str) -> Result<(), Failed> {
    let mut client = pg(url).await?;
    let table = PgOutbox::with_table(table)?.table().to_string();
    let transport = Recording {
        inner: babelqueue::connect(broker).await?,
        sent: Mutex::new(Vec::new()),
    };
    let select = format!(
        "SELECT id, queue, body FROM {table} WHERE status = 'pending' \
         ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    );
    let delete = format!("DELETE FROM {table} WHERE id = $1");
    let (select, delete) = (
        client.prepare(&select).await?,
        client.prepare(&delete).await?,
    );
    let mut published = 0_u64;
    loop {
        let tx = client.transaction().await?;
        let Some(row) = tx.query_opt(&select, &[]).await? else {
            tx.commit().await?;
            break;
        };
        let (id, queue, body): (i64, String, Vec<u8>) = (row.get(0), row.get(1), row.get(2));
        transport.publish(&queue, &body).await?;
        tx.execute(&delete, &[&id]).await?;
        tx.commit().await?;
        published += 1;
    }
    transport.print();
    println!("published {published} failed 0 passes {published}");
    transport.inner.close().await?;
    Ok(())
}

async fn count(url: &str, table: &str) -> Result<(), Failed> {
    let client = pg(url).await?;
    let table = PgOutbox::with_table(table)?.table().to_string();
    let row = client
        .query_one(
            &format!(
                "SELECT count(*) FILTER (WHERE status = 'pending'), \
                 count(*) FILTER (WHERE status = 'published'), \
                 count(*) FILTER (WHERE status = 'parked') FROM {table}"
            ),
            &[],
        )
        .await?;
    let (p, d, k): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    println!("pending {p} published {d} parked {k}");
    Ok(())
}

async fn drop_table(url: &str, table: &str) -> Result<(), Failed> {
    let client = pg(url).await?;
    let table = PgOutbox::with_table(table)?.table().to_string();
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS {table}"))
        .await?;
    Ok(())
}

fn main() -> Result<(), Failed> {
    // Cargo's bench and test runners pass their own flags; the commands are plain words.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match words.as_slice() {
            ["publish", broker, queue, n] => publish(broker, queue, n.parse()?).await,
            ["fill", url, table, queue, n] => fill(url, table, queue, n.parse()?).await,
            ["relay", url, table, broker, batch] => relay(url, table, broker, batch.parse()?).await,
            ["naive", url, table, broker] => naive(url, table, broker).await,
            ["count", url, table] => count(url, table).await,
            ["drop", url, table] => drop_table(url, table).await,
            _ => {
                println!(
                    "drivers: run by `cargo xtask bench cli` and `bench outbox` (publish, fill, relay, naive, count, drop); nothing to do"
                );
                Ok(())
            }
        }
    })
}
