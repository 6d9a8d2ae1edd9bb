//! A broker restart in the middle of a stream: the Artemis process is stopped and started again
//! (`scripts/brokers.sh down artemis` / `up artemis`, or the command in `BQ_ARTEMIS_RESTART`)
//! while two producers publish (one message at a time, and in batches through
//! `publish_batch`, whose window falls back to one-at-a-time sends with reconnects when the
//! connection is lost) and a worker consumes. Nothing is lost, and the same worker (the same
//! `consume` call) carries on after the restart.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use babelqueue_core::{App, BatchPublisher, Consume, Context, HandlerError, Transport};
use babelqueue_envelope::Envelope;
use babelqueue_transport_artemis::ArtemisTransport;

use crate::common::{broker_alone, queue, url};

const URN: &str = "urn:babel:orders:created";
/// Published one at a time (order ids `0..MESSAGES`), and as many again in batches (order ids
/// `MESSAGES..2 * MESSAGES`).
const MESSAGES: i64 = 300;
const TOTAL: i64 = 2 * MESSAGES;
const BATCH: i64 = 10;

async fn sh(command: &str) {
    let status = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .status()
        .await
        .expect("run a shell");
    assert!(status.success(), "`{command}` failed: {status}");
}

async fn restart_broker() {
    if let Ok(command) = std::env::var("BQ_ARTEMIS_RESTART") {
        return sh(&command).await;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/brokers.sh");
    let script = script.display();
    sh(&format!("{script} down artemis")).await;
    sh(&format!("{script} up artemis")).await;
}

fn with_option(url: &str, option: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{option}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restart_mid_stream_loses_nothing() {
    let Some(_alone) = broker_alone().await else {
        return;
    };
    let q = queue("restart");
    // Separate connections for the producer and the worker, as separate processes would have.
    let producer = ArtemisTransport::connect(&with_option(&url(), "reconnect_timeout_ms=120000"))
        .await
        .unwrap();
    let batcher = ArtemisTransport::connect(&with_option(&url(), "reconnect_timeout_ms=120000"))
        .await
        .unwrap();
    let worker_transport = ArtemisTransport::connect(&url()).await.unwrap();
    let producer_probe = producer.clone();
    let batcher_probe = batcher.clone();

    let seen: Arc<std::sync::Mutex<BTreeMap<i64, u32>>> = Arc::default();
    let handled = Arc::new(AtomicU64::new(0));
    let (s, h) = (seen.clone(), handled.clone());
    let app = App::builder(worker_transport.clone())
        .queue(&q)
        .concurrency(2)
        .handle(URN, move |ctx: Context| {
            let (s, h) = (s.clone(), h.clone());
            async move {
                let order = ctx.data_as::<serde_json::Value>()?["order_id"]
                    .as_i64()
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
                *s.lock().unwrap().entry(order).or_default() += 1;
                h.fetch_add(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let stop = app.stop_handle();
    let worker = tokio::spawn({
        let app = app.clone();
        async move { app.consume(Consume::new().handle_signals(false)).await }
    });
    let publishing = tokio::spawn({
        let q = q.clone();
        async move {
            for order in 0..MESSAGES {
                let body = Envelope::builder(URN)
                    .queue(q.clone())
                    .data(&serde_json::json!({"order_id": order}))
                    .build()
                    .unwrap()
                    .encode()
                    .unwrap();
                producer
                    .publish(&q, body.as_bytes())
                    .await
                    .expect("publish");
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        }
    });

    let batching = tokio::spawn({
        let q = q.clone();
        async move {
            for first in (MESSAGES..TOTAL).step_by(BATCH as usize) {
                let bodies: Vec<String> = (first..first + BATCH)
                    .map(|order| {
                        Envelope::builder(URN)
                            .queue(q.clone())
                            .data(&serde_json::json!({"order_id": order}))
                            .build()
                            .unwrap()
                            .encode()
                            .unwrap()
                    })
                    .collect();
                let bodies: Vec<&[u8]> = bodies.iter().map(String::as_bytes).collect();
                batcher
                    .publish_batch(&q, &bodies)
                    .await
                    .expect("publish a batch");
                tokio::time::sleep(Duration::from_millis(15 * BATCH as u64)).await;
            }
        }
    });

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while handled.load(Ordering::SeqCst) < 50 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = handled.load(Ordering::SeqCst);
    restart_broker().await;
    eprintln!("broker restarted after {before} handled messages");

    publishing
        .await
        .expect("the producer finished: every publish was accepted");
    batching
        .await
        .expect("the batch producer finished: every batch was accepted");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let have = i64::try_from(seen.lock().unwrap().len()).unwrap();
        if have == TOTAL {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {have} of {TOTAL} distinct messages were handled after the restart"
        );
        assert!(!worker.is_finished(), "the worker stopped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !worker.is_finished(),
        "the same consume call is still running"
    );
    assert!(
        handled.load(Ordering::SeqCst) > before,
        "the worker handled messages after the restart"
    );
    stop.stop();
    worker.await.unwrap().expect("the worker ends cleanly");
    let seen = seen.lock().unwrap().clone();
    let duplicates: u32 = seen.values().map(|n| n - 1).sum();
    assert_eq!(i64::try_from(seen.len()).unwrap(), TOTAL);
    assert!(seen.keys().copied().eq(0..TOTAL));
    eprintln!(
        "restart: {TOTAL} published, {TOTAL} handled at least once, {duplicates} handled twice (at least once)"
    );
    for (who, t) in [
        ("worker", &worker_transport),
        ("producer", &producer_probe),
        ("batch producer", &batcher_probe),
    ] {
        let opened = t.amqp().unwrap().connections_opened();
        assert!(opened >= 2, "the {who} reconnected ({opened} connections)");
    }
    assert!(
        worker_transport
            .pop(&q, Duration::from_millis(500))
            .await
            .unwrap()
            .is_none()
    );
}
