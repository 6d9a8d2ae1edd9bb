//! GDPR field protection through a real Redis (`BQ_REDIS_URL`, default `redis://127.0.0.1:6379`;
//! `scripts/brokers.sh up redis` starts one): only ciphertext reaches the broker, the handler sees
//! clear text, and a message the consumer cannot decrypt is retried, then dead-lettered without
//! the handler running.
//!
//! With `BQ_REQUIRE_BROKERS` set, an unreachable Redis fails the test; without it the test prints
//! `SKIPPED` and returns.

#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::schema::MapProvider;
use babelqueue_core::{App, Consume, Context, HandlerError, Headers, RawJson};
use babelqueue_gdpr::{AesGcmCipher, AesKey, Protector, unprotected};
use babelqueue_transport_redis::fred::interfaces::{KeysInterface, ListInterface};
use babelqueue_transport_redis::{FredClient, RedisTransport};
use serde_json::{Value, json};

const URN: &str = "urn:babel:customers:registered";
const DATA: &str = r#"{"customer_id":7,"email":"alice@example.com","tags":["a",1.50]}"#;

fn url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A connected raw client, or `None` (skip) when Redis is down and not required.
async fn redis() -> Option<FredClient> {
    match tokio::time::timeout(Duration::from_secs(3), FredClient::connect(&url())).await {
        Ok(Ok(client)) => Some(client),
        other => {
            let why = match other {
                Ok(Err(e)) => e.to_string(),
                _ => "timed out".into(),
            };
            assert!(
                std::env::var_os("BQ_REQUIRE_BROKERS").is_none(),
                "Redis at {} is required but not reachable: {why}",
                url()
            );
            println!("SKIPPED: Redis not reachable at {} ({why})", url());
            None
        }
    }
}

fn protector(key: [u8; 32]) -> Arc<Protector> {
    let schema = json!({"type": "object", "properties": {
        "email": {"type": "string", "x-gdpr-sensitive": "contact"}}});
    Arc::new(Protector::new(
        Arc::new(AesGcmCipher::new(&AesKey::from_bytes(&key).unwrap())),
        Arc::new(MapProvider::new([(URN.to_owned(), schema)])),
    ))
}

async fn list(raw: &FredClient, key: &str) -> Vec<Vec<u8>> {
    raw.raw().lrange(key, 0, -1).await.unwrap()
}

#[tokio::test]
async fn gdpr_over_real_redis_clear_for_the_handler_dead_lettered_under_a_wrong_key() {
    let Some(raw) = redis().await else { return };
    let q = format!("bq-it-gdpr-{:08x}", fastrand::u32(..));
    let transport = RedisTransport::connect(&url()).await.expect("connect");
    let producer = protector([1; 32]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let runs = Arc::new(AtomicUsize::new(0));

    // Two consumers of one queue name in turn: one with the producer's key, one with another.
    let consumer = |gdpr: Arc<Protector>| {
        let (seen, runs) = (seen.clone(), runs.clone());
        App::builder(transport.clone())
            .queue(q.as_str())
            .poll_timeout(Duration::from_millis(100))
            .retry_backoff(Duration::from_millis(1))
            .max_attempts(3)
            .dead_letter(true)
            .handle(
                URN,
                unprotected(gdpr, move |ctx: Context| {
                    let (seen, runs) = (seen.clone(), runs.clone());
                    async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        seen.lock().unwrap().push(ctx.data().to_string());
                        Ok::<(), HandlerError>(())
                    }
                }),
            )
            .build()
            .unwrap()
    };
    let idle = || {
        Consume::new()
            .idle_timeout(Duration::from_millis(500))
            .handle_signals(false)
    };
    let right = consumer(protector([1; 32]));
    let mut envelope = right
        .envelope(URN)
        .data_raw(RawJson::parse(DATA).unwrap())
        .build()
        .unwrap();
    producer.protect_envelope(&mut envelope).await.unwrap();
    let protected_data = envelope.data().unwrap().clone();

    // The right key: only ciphertext on the broker, clear text for the handler.
    right
        .publish_envelope(&q, &envelope, &Headers::new())
        .await
        .unwrap();
    let stored = list(&raw, &q).await;
    assert_eq!(stored.len(), 1);
    let stored = String::from_utf8(stored[0].clone()).unwrap();
    assert!(!stored.contains("alice"), "{stored}");
    assert!(stored.contains(r#""tags":["a",1.50]"#), "{stored}");
    right.consume(idle()).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [DATA.to_owned()]);

    // A wrong key: three deliveries, the handler never runs, one dead-letter record without
    // clear text, carrying the protected data as it was.
    runs.store(0, Ordering::SeqCst);
    let wrong = consumer(protector([2; 32]));
    wrong
        .publish_envelope(&q, &envelope, &Headers::new())
        .await
        .unwrap();
    let summary = wrong.consume(idle()).await.unwrap();
    assert_eq!(
        summary.processed, 3,
        "two retries, then the dead-letter queue"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the handler never ran");
    assert!(list(&raw, &q).await.is_empty());
    let dlq = list(&raw, &format!("{q}.dlq")).await;
    assert_eq!(dlq.len(), 1);
    let text = String::from_utf8(dlq[0].clone()).unwrap();
    assert!(!text.contains("alice"), "{text}");
    let record: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(record["attempts"], 3);
    assert_eq!(record["dead_letter"]["reason"], "failed");
    assert_eq!(record["dead_letter"]["exception"], "DecryptError");
    let error = record["dead_letter"]["error"].as_str().unwrap();
    assert!(error.contains("`email`"), "{error}");
    assert!(
        text.contains(&format!(r#""data":{}"#, protected_data.as_str())),
        "the protected data, byte for byte: {text}"
    );

    for key in [
        q.clone(),
        format!("{q}:processing"),
        format!("{q}:processing:deadlines"),
        format!("{q}.dlq"),
    ] {
        let _: i64 = raw.raw().del(key).await.unwrap_or(0);
    }
}
