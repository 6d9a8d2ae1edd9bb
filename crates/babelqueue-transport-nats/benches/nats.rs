//! Publish and consume+ack messages/s on the local NATS JetStream server, side by side: this
//! SDK (concurrency 1 and 8) and a raw `async-nats` loop with the same durability (every
//! publish waits for the stream's acknowledgement, 64 in flight; every ack confirmed by the
//! server), then the open-loop publish-to-handled latency. The Python reference SDK 1.24.0
//! has no NATS transport, so there is no Python row.
//!
//! `cargo bench -p babelqueue-transport-nats --bench nats` (NATS from `scripts/brokers.sh up
//! nats`; `BQ_NATS_URL`, `BQ_BENCH_MESSAGES` (3 000 by default)). It prints one line per
//! loop and `BQ-FIGURE broker nats <publish|consume|cpu> <who> <value>` lines (the consuming
//! side's CPU-seconds per 1 000 messages from getrusage of this process around the consume
//! phase), then `BQ-FIGURE latency nats` lines at each load of
//! `babelqueue_testkit::OPEN_LOOP_LOADS` (each load twice, the better pass kept), which
//! `cargo xtask bench brokers` reads.
//!
//! Publishing: this SDK's `rust-c1` row publishes `App::publish` with 64 calls in flight, the
//! `rust-c8` row `App::publish_batch` by 100 (256 publishes in flight). Consuming: a no-op handler, every message
//! acknowledged. The raw loop consumes from a pull consumer's message stream (batches of the
//! client's default size), which is the most a JetStream consumer of this durability gets.

#![allow(missing_docs, clippy::print_stdout)]

use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, Envelope, HandlerError};
use babelqueue_testkit::{
    OPEN_LOOP_LOADS, OPEN_LOOP_PASSES, OpenLoopRun, cpu_figure, cpu_time, open_loop,
};
use babelqueue_transport_nats::NatsTransport;
use babelqueue_transport_nats::async_nats::{self, jetstream};
use futures_util::StreamExt as _;

const URN: &str = "urn:babel:bench:noop";
const IN_FLIGHT: u64 = 64;

fn url() -> String {
    std::env::var("BQ_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

fn data() -> serde_json::Value {
    serde_json::json!({"order_id": 1042, "total": 99.9})
}

fn queue(kind: &str) -> String {
    format!("bq-bench-{kind}-{:08x}", fastrand::u32(..))
}

/// Publish time, consume time and the consume phase's CPU time.
type Round = (Duration, Duration, Duration);

async fn rust_round(transport: &NatsTransport, n: u64, concurrency: usize) -> Round {
    let queue = queue("rust");
    let app = App::builder(transport.clone())
        .queue(queue.clone())
        .concurrency(concurrency)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .expect("an app");
    let data = data();
    let started = Instant::now();
    let mut sent = 0;
    while sent < n {
        let take = (n - sent).min(if concurrency > 1 { 100 } else { IN_FLIGHT });
        if concurrency > 1 {
            let batch: Vec<Envelope> = (0..take)
                .map(|_| app.envelope(URN).data(&data).build().expect("an envelope"))
                .collect();
            app.publish_batch(&queue, &batch).await.expect("published");
        } else {
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..take {
                let (app, data) = (app.clone(), data.clone());
                tasks.spawn(async move { app.publish(URN, &data).await.expect("published") });
            }
            while let Some(done) = tasks.join_next().await {
                done.expect("a publish task");
            }
        }
        sent += take;
    }
    let published = started.elapsed();
    let (started, cpu) = (Instant::now(), cpu_time());
    let summary = app
        .consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .expect("consumed");
    assert_eq!(summary.processed, n);
    let round = (published, started.elapsed(), cpu_time() - cpu);
    let _ = transport
        .jetstream()
        .delete_stream(stream_of(transport, &queue))
        .await;
    round
}

fn stream_of(transport: &NatsTransport, queue: &str) -> String {
    transport
        .options()
        .stream_name(queue)
        .expect("a valid queue name")
}

/// The raw loop: a work-queue stream of its own, confirmed publishes (64 in flight), a durable
/// pull consumer's message stream, a server-confirmed ack per message.
async fn raw_round(n: u64) -> Round {
    let client = async_nats::connect(url()).await.expect("NATS is reachable");
    let js = jetstream::new(client);
    let name = queue("raw");
    let stream = js
        .create_stream(jetstream::stream::Config {
            name: name.clone(),
            subjects: vec![name.clone()],
            retention: jetstream::stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        })
        .await
        .expect("a stream");
    let body = Envelope::builder(URN)
        .queue(name.clone())
        .data(&data())
        .build()
        .expect("an envelope")
        .encode()
        .expect("encodes")
        .into_bytes();
    let body = bytes::Bytes::from(body);
    let started = Instant::now();
    let mut sent = 0;
    while sent < n {
        let take = (n - sent).min(IN_FLIGHT);
        let mut acks = Vec::new();
        for _ in 0..take {
            acks.push(js.publish(name.clone(), body.clone()).await.expect("sent"));
        }
        for ack in acks {
            ack.await.expect("stored");
        }
        sent += take;
    }
    let published = started.elapsed();
    let (started, cpu) = (Instant::now(), cpu_time());
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some("raw".into()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("a consumer");
    let mut messages = consumer.messages().await.expect("a message stream");
    let mut got = 0;
    while got < n {
        let message = messages.next().await.expect("a message").expect("no error");
        message.double_ack().await.expect("acknowledged");
        got += 1;
    }
    let round = (published, started.elapsed(), cpu_time() - cpu);
    let _ = js.delete_stream(&name).await;
    round
}

fn print(who: &str, n: u64, (publish, consume, cpu): Round) {
    let (p, c) = (
        n as f64 / publish.as_secs_f64(),
        n as f64 / consume.as_secs_f64(),
    );
    println!("nats, {who}: publish {p:.0} msg/s, consume+ack {c:.0} msg/s ({n} messages)");
    println!("BQ-FIGURE broker nats publish {who} {p:.0}");
    println!("BQ-FIGURE broker nats consume {who} {c:.0}");
    println!("{}", cpu_figure("nats", who, cpu, n));
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let transport = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(3), NatsTransport::connect(&url()))
            .await
            .ok()
            .and_then(Result::ok)
    });
    let Some(transport) = transport else {
        assert!(
            std::env::var_os("BQ_REQUIRE_BROKERS").is_none(),
            "NATS is required at {}",
            url()
        );
        println!("SKIPPED: NATS not reachable at {}", url());
        return;
    };
    let benching = std::env::var_os("BQ_BENCH_FIGURES_ONLY").is_some()
        || std::env::args().any(|a| a == "--bench");
    let n: u64 = if benching {
        std::env::var("BQ_BENCH_MESSAGES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3_000)
    } else {
        // `cargo test --benches`: a smoke pass that every loop still works.
        50
    };
    print("rust-c1", n, runtime.block_on(rust_round(&transport, n, 1)));
    print("rust-c8", n, runtime.block_on(rust_round(&transport, n, 8)));
    print("raw", n, runtime.block_on(raw_round(n)));
    if !benching {
        return;
    }
    for (rate, duration) in OPEN_LOOP_LOADS {
        let mut best: Option<OpenLoopRun> = None;
        for _ in 0..OPEN_LOOP_PASSES {
            let queue = queue("open");
            let run = runtime.block_on(open_loop(
                App::builder(transport.clone()).queue(queue.clone()),
                URN,
                rate,
                duration,
            ));
            let _ = runtime.block_on(
                transport
                    .jetstream()
                    .delete_stream(stream_of(&transport, &queue)),
            );
            best = Some(best.map_or(run.clone(), |b| b.better(run)));
        }
        if let Some(run) = best {
            run.print("nats", "rust");
        }
    }
}
