//! The PostgreSQL outbox and idempotency stores against a real PostgreSQL (`BQ_POSTGRES_URL`,
//! default `postgres://bq:bq@127.0.0.1:5432/bq`; `scripts/brokers.sh up postgres` starts one),
//! and the relay into a real Redis (`BQ_REDIS_URL`, default `redis://127.0.0.1:6379`;
//! `scripts/brokers.sh up redis`).
//!
//! With `BQ_REQUIRE_BROKERS` set, an unreachable server fails the tests; without it they print
//! `SKIPPED` and return. Every test works in tables of its own, dropped at the end.

#![allow(clippy::print_stdout)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::idempotency::{Claim, IdempotencyStore, idempotent};
use babelqueue_core::{
    Action, App, Backoff, Consume, Context, Delivery, Envelope, Handler, HandlerError, Headers,
    Jitter, MemoryTransport, Transport, TransportError,
};
use babelqueue_outbox::{OutboxMessage, OutboxRelay, OutboxStore};
use babelqueue_postgres::tokio_postgres::Client;
use babelqueue_postgres::{PgIdempotencyStore, PgOutbox, PgOutboxStore};
use babelqueue_transport_redis::fred::interfaces::{KeysInterface, ListInterface};
use babelqueue_transport_redis::{FredClient, RedisTransport};

fn pg_url() -> String {
    std::env::var("BQ_POSTGRES_URL").unwrap_or_else(|_| "postgres://bq:bq@127.0.0.1:5432/bq".into())
}

fn redis_url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn unreachable(what: &str, url: &str, why: &str) {
    let url = babelqueue_core::redact::redact(url);
    assert!(
        std::env::var_os("BQ_REQUIRE_BROKERS").is_none(),
        "{what} at {url} is required but not reachable: {why}"
    );
    println!("SKIPPED: {what} not reachable at {url} ({why})");
}

/// A connected client, or `None` (skip) when PostgreSQL is down and not required.
async fn database() -> Option<Client> {
    let url = pg_url();
    match tokio::time::timeout(Duration::from_secs(5), babelqueue_postgres::connect(&url)).await {
        Ok(Ok(client)) => Some(client),
        Ok(Err(e)) => {
            unreachable("PostgreSQL", &url, &e.to_string());
            None
        }
        Err(_) => {
            unreachable("PostgreSQL", &url, "timed out");
            None
        }
    }
}

/// A wrong password is an Auth error (SQLSTATE 28P01) that names the server, fails at once, and
/// never shows the password; the stores built from such a URL fail the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_an_auth_error_that_names_the_server() {
    if database().await.is_none() {
        return;
    }
    let good = babelqueue_postgres::Connector::parse(&pg_url()).unwrap();
    let endpoint = good.endpoint();
    let host = endpoint.split(':').next().unwrap_or_default().to_owned();
    let wrong = format!("postgres://bq:wrongpw@{endpoint}/bq");
    let started = std::time::Instant::now();
    let error = babelqueue_postgres::connect(&wrong).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        error.kind(),
        babelqueue_postgres::ErrorKind::Auth,
        "{error:?}"
    );
    assert_eq!(error.sqlstate(), Some("28P01"), "{error:?}");
    assert!(!error.is_transient());
    let text = format!("{error}\n{error:?}");
    assert!(
        text.contains(&host) && text.contains("refused the credentials"),
        "{text}"
    );
    assert!(!text.contains("wrongpw"), "{text}");
    let outbox = babelqueue_outbox::Error::from(error);
    assert!(!outbox.is_transient(), "{outbox:?}");
    assert!(
        !format!("{outbox}\n{outbox:?}").contains("wrongpw"),
        "{outbox:?}"
    );

    let store = PgOutboxStore::connect(&wrong).await.unwrap_err();
    assert!(
        !format!("{store}\n{store:?}").contains("wrongpw"),
        "{store:?}"
    );
}

/// A raw Redis client, or `None` (skip) when Redis is down and not required.
async fn redis() -> Option<FredClient> {
    let url = redis_url();
    match tokio::time::timeout(Duration::from_secs(3), FredClient::connect(&url)).await {
        Ok(Ok(client)) => Some(client),
        Ok(Err(e)) => {
            unreachable("Redis", &url, &e.to_string());
            None
        }
        Err(_) => {
            unreachable("Redis", &url, "timed out");
            None
        }
    }
}

fn unique(name: &str) -> String {
    format!("bq_it_{name}_{:08x}", fastrand::u32(..))
}

/// An outbox table of the test's own: created, and dropped when the guard goes.
struct Tables {
    admin: Client,
    names: Vec<String>,
}

impl Tables {
    async fn outbox(admin: Client, name: &str) -> (Tables, PgOutbox) {
        let table = unique(name);
        let outbox = PgOutbox::with_table(&table).unwrap();
        outbox.migrate(&admin).await.unwrap();
        (
            Tables {
                admin,
                names: vec![table],
            },
            outbox,
        )
    }

    async fn store(&self, outbox: &PgOutbox) -> PgOutboxStore {
        PgOutboxStore::connect(&pg_url())
            .await
            .unwrap()
            .with_table(outbox.table().name())
            .unwrap()
    }

    async fn drop_all(self) {
        for name in &self.names {
            let _ = self
                .admin
                .batch_execute(&format!("DROP TABLE IF EXISTS \"{name}\""))
                .await;
        }
    }
}

fn envelope(queue: &str, n: usize) -> Envelope {
    Envelope::builder("urn:babel:orders:created")
        .queue(queue)
        .trace_id(format!("4bf92f35-77b3-4da6-a3ce-{n:012}"))
        .data(&serde_json::json!({"order_id": n, "note": "naïve ✓ 😀 \"q\" \\ / \u{7f}"}))
        .build()
        .unwrap()
}

fn quick_backoff(base: f64) -> Backoff {
    Backoff {
        base,
        multiplier: 2.0,
        max: 5.0,
        jitter: Jitter::None,
    }
}

/// One outbox row as the database holds it.
#[derive(Debug)]
struct Row {
    status: String,
    attempts: i32,
    last_error: Option<String>,
    due_in_ms: f64,
    body: Vec<u8>,
}

async fn row(client: &Client, outbox: &PgOutbox, id: &str) -> Row {
    let t = outbox.table();
    let r = client
        .query_one(
            &format!(
                "SELECT status, attempts, last_error, \
                 EXTRACT(EPOCH FROM (next_attempt_at - clock_timestamp()))::float8 * 1000, body \
                 FROM {t} WHERE id = $1"
            ),
            &[&id.parse::<i64>().unwrap()],
        )
        .await
        .unwrap();
    Row {
        status: r.get(0),
        attempts: r.get(1),
        last_error: r.get(2),
        due_in_ms: r.get(3),
        body: r.get(4),
    }
}

/// A transport that counts every publish per body, after a short pause.
#[derive(Debug, Default)]
struct Counting {
    published: Mutex<HashMap<Vec<u8>, usize>>,
    pause: Duration,
}

impl Counting {
    fn total(&self) -> usize {
        self.published.lock().unwrap().values().sum()
    }
}

#[async_trait]
impl Transport for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    async fn publish(&self, _queue: &str, body: &[u8]) -> Result<(), TransportError> {
        tokio::time::sleep(self.pause).await;
        *self
            .published
            .lock()
            .unwrap()
            .entry(body.to_vec())
            .or_default() += 1;
        Ok(())
    }
    async fn pop(&self, _: &str, _: Duration) -> Result<Option<Delivery>, TransportError> {
        Ok(None)
    }
    async fn ack(&self, _: &Delivery) -> Result<(), TransportError> {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The outbox
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_rolled_back_transaction_publishes_nothing_a_committed_one_publishes_once() {
    let Some(admin) = database().await else {
        return;
    };
    let (tables, outbox) = Tables::outbox(admin, "rollback").await;
    let store = tables.store(&outbox).await;
    let broker = MemoryTransport::new();
    let relay = OutboxRelay::builder(broker.clone(), store).build().unwrap();

    let mut app_db = babelqueue_postgres::connect(&pg_url()).await.unwrap();
    app_db
        .batch_execute("CREATE TEMP TABLE orders (id BIGINT PRIMARY KEY)")
        .await
        .unwrap();

    // Rolled back: neither the business row nor the message exists.
    let tx = app_db.transaction().await.unwrap();
    tx.execute("INSERT INTO orders VALUES (1)", &[])
        .await
        .unwrap();
    outbox.write(&tx, &envelope("orders", 1)).await.unwrap();
    tx.rollback().await.unwrap();
    // Dropped without commit: the same.
    {
        let tx = app_db.transaction().await.unwrap();
        outbox.write(&tx, &envelope("orders", 2)).await.unwrap();
    }
    let report = relay.drain().await.unwrap();
    assert_eq!(report.attempted(), 0);
    assert!(broker.is_empty("orders"));

    // Committed: published exactly once, however often the relay runs.
    let env = envelope("orders", 3);
    let tx = app_db.transaction().await.unwrap();
    tx.execute("INSERT INTO orders VALUES (3)", &[])
        .await
        .unwrap();
    let id = outbox.write(&tx, &env).await.unwrap();
    // Not visible to the relay before the commit.
    assert_eq!(relay.drain().await.unwrap().attempted(), 0);
    tx.commit().await.unwrap();
    assert_eq!(relay.drain().await.unwrap().published, 1);
    assert_eq!(relay.drain().await.unwrap().attempted(), 0);
    assert_eq!(
        broker.bodies("orders"),
        vec![env.encode().unwrap().into_bytes()]
    );
    assert_eq!(
        row(&tables.admin, &outbox, id.as_str()).await.status,
        "published"
    );
    let orders: i64 = app_db
        .query_one("SELECT count(*) FROM orders", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(orders, 1, "only the committed business row exists");
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_relays_at_once_publish_each_of_200_rows_exactly_once() {
    let Some(admin) = database().await else {
        return;
    };
    let (tables, outbox) = Tables::outbox(admin, "two_relays").await;
    let mut writer_db = babelqueue_postgres::connect(&pg_url()).await.unwrap();
    let mut bodies = Vec::new();
    for chunk in 0..4 {
        let tx = writer_db.transaction().await.unwrap();
        for n in chunk * 50..(chunk + 1) * 50 {
            let env = envelope("orders", n);
            bodies.push(env.encode().unwrap().into_bytes());
            outbox.write(&tx, &env).await.unwrap();
        }
        tx.commit().await.unwrap();
    }

    let counting = Arc::new(Counting {
        pause: Duration::from_millis(1),
        ..Counting::default()
    });
    let mut relays = Vec::new();
    for _ in 0..2 {
        let store = tables.store(&outbox).await;
        let relay = OutboxRelay::builder_arc(counting.clone(), Arc::new(store))
            .batch_size(10)
            .build()
            .unwrap();
        relays.push(tokio::spawn(async move { relay.drain().await.unwrap() }));
    }
    let mut reports = Vec::new();
    for relay in relays {
        reports.push(relay.await.unwrap());
    }
    assert_eq!(reports[0].published + reports[1].published, 200);
    assert!(
        reports.iter().all(|r| r.published > 0),
        "both relays took part: {reports:?}"
    );
    assert_eq!(counting.total(), 200, "no body was published twice");
    let published = counting.published.lock().unwrap().clone();
    for body in &bodies {
        assert_eq!(published.get(body), Some(&1));
    }
    let counts = tables.store(&outbox).await.counts().await.unwrap();
    assert_eq!((counts.pending, counts.published), (0, 200));
    tables.drop_all().await;
}

#[tokio::test]
async fn a_claimed_row_is_skipped_by_another_relay_and_released_by_a_dropped_batch() {
    let Some(admin) = database().await else {
        return;
    };
    let (tables, outbox) = Tables::outbox(admin, "skip_locked").await;
    for n in 0..5 {
        outbox
            .write(&tables.admin, &envelope("q", n))
            .await
            .unwrap();
    }
    let (a, b) = (tables.store(&outbox).await, tables.store(&outbox).await);
    let ids = |batch: &dyn babelqueue_outbox::ClaimedBatch| -> Vec<i64> {
        batch
            .records()
            .iter()
            .map(|r| r.id().as_str().parse().unwrap())
            .collect()
    };
    let held = a.claim(3).await.unwrap();
    let first = ids(&*held);
    assert_eq!(first.len(), 3);
    let other = b.claim(10).await.unwrap();
    let second = ids(&*other);
    assert_eq!(second.len(), 2, "the held rows are skipped, not waited for");
    assert!(first.iter().all(|id| id < &second[0]), "oldest first");
    drop(other);
    // Dropping the batch rolls its transaction back on a task: the rows come back, unchanged.
    // A claim on the same store waits for its own rollback, not for the other store's, so poll
    // (bounded) until both rollbacks reached the server.
    drop(held);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let again = loop {
        let batch = a.claim(10).await.unwrap();
        if ids(&*batch).len() == 5 || std::time::Instant::now() > deadline {
            break batch;
        }
        drop(batch);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        ids(&*again).len(),
        5,
        "both dropped batches released their rows"
    );
    assert!(again.records().iter().all(|r| r.attempts() == 0));
    drop(again);
    tables.drop_all().await;
}

#[tokio::test]
async fn a_transport_failure_leaves_the_row_pending_and_a_later_pass_publishes_it() {
    let Some(admin) = database().await else {
        return;
    };
    let (tables, outbox) = Tables::outbox(admin, "failure").await;
    let id = outbox
        .write(&tables.admin, &envelope("orders", 1))
        .await
        .unwrap();
    let broker = MemoryTransport::new();
    broker.fail_publishes_to("orders", true);
    let relay = OutboxRelay::builder(broker.clone(), tables.store(&outbox).await)
        .backoff(quick_backoff(0.3))
        .build()
        .unwrap();

    let report = relay.flush().await.unwrap();
    assert_eq!((report.published, report.failed), (0, 1));
    let r = row(&tables.admin, &outbox, id.as_str()).await;
    assert_eq!((r.status.as_str(), r.attempts), ("pending", 1));
    let error = r.last_error.unwrap();
    assert!(
        error.starts_with("Connection: ") && error.contains("injected"),
        "{error}"
    );
    assert!(
        r.due_in_ms > 100.0 && r.due_in_ms <= 300.0,
        "{}",
        r.due_in_ms
    );

    // The broker is back, but the row is not due yet.
    broker.fail_publishes_to("orders", false);
    assert_eq!(relay.flush().await.unwrap().attempted(), 0);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(relay.drain().await.unwrap().published, 1);
    assert_eq!(broker.len("orders"), 1);
    let r = row(&tables.admin, &outbox, id.as_str()).await;
    assert_eq!((r.status.as_str(), r.attempts), ("published", 1));
    tables.drop_all().await;
}

#[tokio::test]
async fn one_bad_row_does_not_block_the_others_and_parked_rows_can_be_unparked() {
    let Some(admin) = database().await else {
        return;
    };
    let (tables, outbox) = Tables::outbox(admin, "bad_row").await;
    let mut ids = Vec::new();
    for (n, queue) in ["ok", "bad", "ok", "bad", "ok"].iter().enumerate() {
        ids.push(
            outbox
                .write(&tables.admin, &envelope(queue, n))
                .await
                .unwrap(),
        );
    }
    let broker = MemoryTransport::new();
    broker.fail_publishes_to("bad", true);
    let store = tables.store(&outbox).await;
    let relay = OutboxRelay::builder(broker.clone(), tables.store(&outbox).await)
        .backoff(quick_backoff(0.05))
        .max_attempts(2)
        .build()
        .unwrap();
    let report = relay.flush().await.unwrap();
    assert_eq!((report.published, report.failed, report.parked), (3, 2, 0));
    let mut stored = Vec::new();
    for id in [&ids[0], &ids[2], &ids[4]] {
        stored.push(row(&tables.admin, &outbox, id.as_str()).await.body);
    }
    assert_eq!(broker.bodies("ok"), stored, "in order, byte for byte");
    for id in [&ids[1], &ids[3]] {
        let r = row(&tables.admin, &outbox, id.as_str()).await;
        assert_eq!((r.status.as_str(), r.attempts), ("pending", 1));
    }

    tokio::time::sleep(Duration::from_millis(80)).await;
    let report = relay.flush().await.unwrap();
    assert_eq!((report.failed, report.parked), (2, 2));
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.pending, counts.published, counts.parked), (0, 3, 2));
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(
        relay.drain().await.unwrap().attempted(),
        0,
        "parked rows stay put"
    );

    broker.fail_publishes_to("bad", false);
    assert_eq!(store.unpark().await.unwrap(), 2);
    assert_eq!(relay.drain().await.unwrap().published, 2);
    assert_eq!(broker.len("bad"), 2);
    assert_eq!(store.purge_published(Duration::ZERO).await.unwrap(), 5);
    assert_eq!(store.counts().await.unwrap(), Default::default());
    tables.drop_all().await;
}

#[tokio::test]
async fn the_bytes_on_the_broker_equal_the_bytes_stored() {
    let Some(admin) = database().await else {
        return;
    };
    let Some(raw) = redis().await else {
        return;
    };
    let (tables, outbox) = Tables::outbox(admin, "bytes").await;
    let queue = format!("bq-it-outbox-{:08x}", fastrand::u32(..));
    let env = envelope(&queue, 7);
    let mut ids = vec![outbox.write(&tables.admin, &env).await.unwrap()];
    // Bytes the codec would never write (spacing, key order, an unknown member): still
    // published as they are.
    let odd = format!(
        "{{ \"data\" : {{\"b\":1,\"a\":[1.50,-0]}}, \"job\":\"urn:babel:odd\", \"x-ext\":null,\
         \"meta\":{{\"id\":\"m-1\",\"queue\":\"{queue}\"}}, \"trace_id\":\"t\",\"attempts\":0 }}"
    );
    ids.push(
        babelqueue_outbox::Outbox::new(outbox.writer(&tables.admin))
            .write_message(&OutboxMessage::new(queue.clone(), odd.clone().into_bytes()))
            .await
            .unwrap(),
    );
    let redis = RedisTransport::connect(&redis_url()).await.unwrap();
    let relay = OutboxRelay::builder(redis.clone(), tables.store(&outbox).await)
        .build()
        .unwrap();
    assert_eq!(relay.drain().await.unwrap().published, 2);

    let on_broker: Vec<Vec<u8>> = raw.raw().lrange(&queue, 0, -1).await.unwrap();
    let mut stored = Vec::new();
    for id in &ids {
        stored.push(row(&tables.admin, &outbox, id.as_str()).await.body);
    }
    assert_eq!(stored[0], env.encode().unwrap().into_bytes());
    assert_eq!(stored[1], odd.into_bytes());
    assert_eq!(
        on_broker, stored,
        "the broker holds exactly the stored bytes"
    );

    // Headers travel beside the body (the Redis frame) and the body still arrives unchanged.
    let mut headers = Headers::new();
    headers.insert(
        "traceparent".into(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
    );
    let third = envelope(&queue, 8);
    let id = outbox
        .write_with_headers(&tables.admin, &third, &headers)
        .await
        .unwrap();
    let _: i64 = raw.raw().del(&queue).await.unwrap();
    assert_eq!(relay.drain().await.unwrap().published, 1);
    let delivery = redis
        .pop(&queue, Duration::from_secs(1))
        .await
        .unwrap()
        .expect("the relayed message");
    assert_eq!(
        delivery.body(),
        row(&tables.admin, &outbox, id.as_str()).await.body
    );
    assert_eq!(delivery.headers(), &headers);
    redis.ack(&delivery).await.unwrap();
    for key in [
        queue.clone(),
        format!("{queue}:processing"),
        format!("{queue}:processing:deadlines"),
    ] {
        let _: i64 = raw.raw().del(key).await.unwrap_or(0);
    }
    tables.drop_all().await;
}

#[tokio::test]
async fn migrate_is_idempotent_and_safe_to_run_concurrently() {
    let Some(admin) = database().await else {
        return;
    };
    let table = unique("migrate");
    let outbox = PgOutbox::with_table(&table).unwrap();
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(babelqueue_postgres::connect(&pg_url()).await.unwrap());
    }
    let (a, b, c) = tokio::join!(
        outbox.migrate(&clients[0]),
        outbox.migrate(&clients[1]),
        outbox.migrate(&clients[2])
    );
    a.unwrap();
    b.unwrap();
    c.unwrap();
    outbox.migrate(&admin).await.unwrap();
    let indexes: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE tablename = $1",
            &[&table],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(indexes, 2, "the primary key and the pending index");
    assert!(
        outbox
            .schema_sql()
            .contains(&format!("\"{table}_pending_idx\""))
    );
    Tables {
        admin,
        names: vec![table],
    }
    .drop_all()
    .await;
}

// ---------------------------------------------------------------------------------------------
// The idempotency store
// ---------------------------------------------------------------------------------------------

async fn idempotency_store(tables: &mut Tables, table: &str) -> PgIdempotencyStore {
    let store = PgIdempotencyStore::connect(&pg_url())
        .await
        .unwrap()
        .with_table(table)
        .unwrap();
    store.migrate().await.unwrap();
    if !tables.names.iter().any(|n| n == table) {
        tables.names.push(table.to_owned());
    }
    store
}

async fn idempotency_tables() -> Option<(Tables, String)> {
    let admin = database().await?;
    Some((
        Tables {
            admin,
            names: Vec::new(),
        },
        unique("idem"),
    ))
}

#[tokio::test]
async fn idempotency_claims_follow_the_core_semantics() {
    let Some((mut tables, table)) = idempotency_tables().await else {
        return;
    };
    let store = idempotency_store(&mut tables, &table).await;
    let id = "f1e2d3c4-b5a6-4789-90ab-cdef01234567";
    assert!(!store.seen(id).await.unwrap());
    assert_eq!(store.claim(id).await.unwrap(), Claim::Acquired);
    assert_eq!(store.claim(id).await.unwrap(), Claim::InFlight);
    assert!(!store.seen(id).await.unwrap(), "a claim is not a success");
    store.remember(id).await.unwrap();
    assert!(store.seen(id).await.unwrap());
    assert_eq!(store.claim(id).await.unwrap(), Claim::Done);
    store.forget(id).await.unwrap();
    assert!(!store.seen(id).await.unwrap());
    assert_eq!(store.claim(id).await.unwrap(), Claim::Acquired);
    // forget releases a claim after a failure: the next delivery claims it.
    store.forget(id).await.unwrap();
    assert_eq!(store.claim(id).await.unwrap(), Claim::Acquired);
    // remember without a claim works too (the reference SDKs' seen/remember contract).
    store.remember("other").await.unwrap();
    assert!(store.seen("other").await.unwrap());
    // Ids are taken verbatim: no trimming, case kept.
    assert_eq!(store.claim(" other").await.unwrap(), Claim::Acquired);
    assert_eq!(store.claim("OTHER").await.unwrap(), Claim::Acquired);
    tables.drop_all().await;
}

#[tokio::test]
async fn an_abandoned_claim_expires_and_a_retention_forgets_handled_ids() {
    let Some((mut tables, table)) = idempotency_tables().await else {
        return;
    };
    let short = idempotency_store(&mut tables, &table)
        .await
        .claim_timeout(Duration::from_millis(200))
        .retention(Some(Duration::from_millis(300)));
    assert_eq!(short.claim("a").await.unwrap(), Claim::Acquired);
    assert_eq!(short.claim("a").await.unwrap(), Claim::InFlight);
    tokio::time::sleep(Duration::from_millis(250)).await;
    // The worker that claimed "a" died: another delivery takes the claim over.
    let other = idempotency_store(&mut tables, &table).await;
    assert_eq!(other.claim("a").await.unwrap(), Claim::Acquired);

    short.remember("b").await.unwrap();
    assert_eq!(short.claim("b").await.unwrap(), Claim::Done);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(!short.seen("b").await.unwrap());
    assert_eq!(
        short.purge_expired().await.unwrap(),
        1,
        "b's row; a was re-claimed"
    );
    assert_eq!(short.claim("b").await.unwrap(), Claim::Acquired);
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_many_concurrent_claims_of_one_id_exactly_one_acquires() {
    let Some((mut tables, table)) = idempotency_tables().await else {
        return;
    };
    let mut stores = Vec::new();
    for _ in 0..12 {
        stores.push(Arc::new(idempotency_store(&mut tables, &table).await));
    }
    for round in 0..5 {
        let id = format!("msg-{round}");
        let barrier = Arc::new(tokio::sync::Barrier::new(stores.len()));
        let tasks: Vec<_> = stores
            .iter()
            .map(|store| {
                let (store, barrier, id) = (store.clone(), barrier.clone(), id.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    store.claim(&id).await.unwrap()
                })
            })
            .collect();
        let mut acquired = 0;
        for task in tasks {
            match task.await.unwrap() {
                Claim::Acquired => acquired += 1,
                Claim::InFlight => {}
                Claim::Done => panic!("nobody remembered {id}"),
            }
        }
        assert_eq!(acquired, 1, "round {round}");
    }
    tables.drop_all().await;
}

fn context(id: &str) -> Context {
    let env = Envelope::builder("urn:babel:orders:created")
        .message_id(id)
        .build()
        .unwrap();
    Context::new(env, "orders", Headers::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_concurrent_deliveries_of_one_id_run_the_handler_once() {
    let Some((mut tables, table)) = idempotency_tables().await else {
        return;
    };
    let runs = Arc::new(AtomicUsize::new(0));
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handler = {
        let (runs, fail) = (runs.clone(), fail.clone());
        move |_ctx: Context| {
            let (runs, fail) = (runs.clone(), fail.clone());
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                if fail.load(Ordering::SeqCst) {
                    Err(HandlerError::new("payment service down"))
                } else {
                    Ok(())
                }
            }
        }
    };
    // Two workers, each with its own connection.
    let a = idempotent(
        Arc::new(idempotency_store(&mut tables, &table).await),
        handler.clone(),
    );
    let b = idempotent(
        Arc::new(idempotency_store(&mut tables, &table).await),
        handler.clone(),
    );
    let (ra, rb) = tokio::join!(a.call(context("order-1")), b.call(context("order-1")));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran once");
    let (ok, retried): (Vec<_>, Vec<_>) = [ra, rb].into_iter().partition(Result::is_ok);
    assert_eq!((ok.len(), retried.len()), (1, 1));
    let err = retried.into_iter().next().unwrap().unwrap_err();
    assert!(matches!(err.action(), Action::RetryAfter(_)), "{err:?}");
    // The redelivery of the one in flight finds it done: acknowledged without a run.
    assert!(b.call(context("order-1")).await.is_ok());
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // A failure releases the claim: the redelivery runs the handler again.
    fail.store(true, Ordering::SeqCst);
    assert!(a.call(context("order-2")).await.is_err());
    fail.store(false, Ordering::SeqCst);
    assert!(b.call(context("order-2")).await.is_ok());
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_consuming_a_duplicate_run_the_handler_once() {
    let Some((mut tables, table)) = idempotency_tables().await else {
        return;
    };
    let broker = MemoryTransport::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut apps = Vec::new();
    for _ in 0..2 {
        let store = Arc::new(idempotency_store(&mut tables, &table).await);
        let runs = runs.clone();
        let handler = idempotent(store, move |_ctx: Context| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(400)).await;
                Ok::<(), HandlerError>(())
            }
        });
        apps.push(
            App::builder(broker.clone())
                .queue("orders")
                .dead_letter(true)
                .poll_timeout(Duration::from_millis(50))
                .handle("urn:babel:orders:created", handler)
                .build()
                .unwrap(),
        );
    }
    // The same message delivered twice (a producer retry, a broker redelivery).
    let env = envelope("orders", 1042);
    let body = env.encode().unwrap();
    broker.publish("orders", body.as_bytes()).await.unwrap();
    broker.publish("orders", body.as_bytes()).await.unwrap();

    let consume = Consume::new()
        .idle_timeout(Duration::from_millis(2500))
        .handle_signals(false);
    let (a, b) = tokio::join!(apps[0].consume(consume.clone()), apps[1].consume(consume));
    let processed = a.unwrap().processed + b.unwrap().processed;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran once");
    assert!(
        processed >= 3,
        "two deliveries and the in-flight retry: {processed}"
    );
    assert!(broker.is_empty("orders") && broker.in_flight() == 0);
    assert!(
        broker.is_empty("orders.dlq"),
        "the duplicate was not dead-lettered"
    );
    tables.drop_all().await;
}
