//! `babelqueue publish --count N`: windows through the transport's batch publish, exactly N on
//! the queue, and a failure that says how many were confirmed. In process on memory:// (and a
//! transport that fails part-way), then the binary against a live Redis (both layouts),
//! RabbitMQ (`BQ_AMQP_URL`) and Kafka (`BQ_KAFKA_URL`): skipped when unreachable, a failure
//! with `BQ_REQUIRE_BROKERS` set.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue::{
    BatchPublisher, Capabilities, Delivery, MemoryTransport, Transport, TransportError,
};
use common::{json_lines, run_memory, run_on};

/// The distinct `meta.id`s of the printed envelopes, asserting there is one line per id.
fn ids(stdout: &str) -> BTreeSet<String> {
    let lines = json_lines(stdout);
    let ids: BTreeSet<String> = lines
        .iter()
        .map(|l| l["meta"]["id"].as_str().expect("an id").to_owned())
        .collect();
    assert_eq!(ids.len(), lines.len(), "every printed envelope is distinct");
    ids
}

#[tokio::test]
async fn count_lands_exactly_n_in_windows_and_prints_each_once() {
    let memory = MemoryTransport::new();
    // Two full windows and a partial one.
    let ran = run_memory(
        &memory,
        &[
            "publish",
            "memory://",
            "--queue",
            "orders",
            "--urn",
            "urn:a",
            "--count",
            "2500",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    assert_eq!(ids(&ran.stdout).len(), 2500);
    assert_eq!(memory.len("orders"), 2500);
}

/// Memory underneath; its batch publish accepts `allowed` bodies, then fails.
#[derive(Debug)]
struct FailsAfter {
    memory: MemoryTransport,
    allowed: usize,
    sent: AtomicUsize,
    calls: AtomicUsize,
}

#[async_trait]
impl Transport for FailsAfter {
    fn name(&self) -> &'static str {
        "fails-after"
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        self.memory.publish(queue, body).await
    }
    async fn pop(&self, queue: &str, wait: Duration) -> Result<Option<Delivery>, TransportError> {
        self.memory.pop(queue, wait).await
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        self.memory.ack(delivery).await
    }
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none().batch_publish(self)
    }
}

#[async_trait]
impl BatchPublisher for FailsAfter {
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let before = self.sent.fetch_add(bodies.len(), Ordering::SeqCst);
        if before + bodies.len() > self.allowed {
            return Err(TransportError::connection("the broker went away"));
        }
        for body in bodies {
            self.memory.publish(queue, body).await?;
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_failure_reports_how_many_were_confirmed_and_printed_only_those() {
    let transport = Arc::new(FailsAfter {
        memory: MemoryTransport::new(),
        allowed: 2048,
        sent: AtomicUsize::new(0),
        calls: AtomicUsize::new(0),
    });
    let ran = run_on(
        transport.clone(),
        &[
            "publish", "x://", "--queue", "orders", "--urn", "urn:a", "--count", "5000",
        ],
    )
    .await;
    assert_eq!(ran.status, 1, "{ran:?}");
    assert_eq!(ids(&ran.stdout).len(), 2048, "only confirmed windows print");
    assert_eq!(transport.memory.len("orders"), 2048);
    assert!(
        ran.stderr
            .contains("publishing failed after 2048 of 5000 messages were confirmed"),
        "{ran:?}"
    );
    assert!(ran.stderr.contains("the broker went away"), "{ran:?}");
    // Windows of 1 024: two accepted, the third failed, nothing after it.
    assert_eq!(transport.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_raw_body_repeated_goes_out_in_windows_too() {
    let transport = Arc::new(FailsAfter {
        memory: MemoryTransport::new(),
        allowed: usize::MAX,
        sent: AtomicUsize::new(0),
        calls: AtomicUsize::new(0),
    });
    let file = std::env::temp_dir().join(format!("bq-cli-raw-{}.json", std::process::id()));
    std::fs::write(&file, br#"{"job":"urn:a","attempts":0}"#).unwrap();
    let ran = run_on(
        transport.clone(),
        &[
            "publish",
            "x://",
            "--queue",
            "orders",
            "--raw",
            "--body-file",
            file.to_str().unwrap(),
            "--count",
            "1500",
        ],
    )
    .await;
    let _ = std::fs::remove_file(&file);
    assert_eq!(ran.status, 0, "{ran:?}");
    assert_eq!(ran.stdout.lines().count(), 1500, "{ran:?}");
    assert_eq!(transport.memory.len("orders"), 1500);
    assert_eq!(transport.calls.load(Ordering::SeqCst), 2);
}

/// The binary against live brokers: `publish --count N` then a consume of everything there,
/// which must hand out exactly the N printed ids.
mod live {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use crate::common::{babelqueue, printed, stdout};

    const N: usize = 3000;

    fn reachable(name: &str, env: &str, default: &str) -> Option<String> {
        let url = std::env::var(env).unwrap_or_else(|_| default.to_owned());
        let address = babelqueue::redact::host(&url)?;
        let up = std::net::ToSocketAddrs::to_socket_addrs(&address.as_str())
            .ok()
            .and_then(|mut a| a.next())
            .is_some_and(|a| {
                std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok()
            });
        if up {
            return Some(url);
        }
        babelqueue_testkit::skip_or_fail(format!("{name} not reachable at {address}"));
        None
    }

    /// Publishes N with `--count`, then drains the queue with a consumer that stops once it has
    /// been `idle` seconds without a delivery.
    fn lands_exactly_n(url: &str, queue: &str, idle: &str) {
        let n = N.to_string();
        let published = babelqueue(
            &[
                "publish",
                url,
                "--queue",
                queue,
                "--urn",
                "urn:cli:n",
                "--count",
                &n,
            ],
            None,
        );
        assert!(published.status.success(), "{}", printed(&published));
        let sent: BTreeSet<String> = super::ids(&stdout(&published));
        assert_eq!(sent.len(), N);
        let consumed = babelqueue(
            &[
                "consume",
                url,
                "--queue",
                queue,
                "--output",
                "raw",
                "--concurrency",
                "8",
                "--idle-timeout",
                idle,
            ],
            None,
        );
        assert!(consumed.status.success(), "{}", printed(&consumed));
        let mut got = Vec::new();
        for line in stdout(&consumed).lines() {
            let raw: serde_json::Value = serde_json::from_str(line).unwrap();
            let body: serde_json::Value =
                serde_json::from_str(raw["body"].as_str().expect("a UTF-8 body")).unwrap();
            got.push(body["meta"]["id"].as_str().expect("an id").to_owned());
        }
        assert_eq!(got.len(), N, "{url}: exactly {N} on the queue, no more");
        let got: BTreeSet<String> = got.into_iter().collect();
        assert_eq!(
            got, sent,
            "{url}: the printed ids are the ones on the queue"
        );
    }

    fn queue(broker: &str) -> String {
        format!("bq-cli-publish-n-{broker}-{:08x}", fastrand_u32())
    }

    fn fastrand_u32() -> u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        nanos ^ std::process::id()
    }

    #[test]
    fn redis_both_layouts() {
        let Some(url) = crate::common::redis_url() else {
            return;
        };
        lands_exactly_n(&url, &queue("redis"), "3");
        lands_exactly_n(&format!("{url}?laravel=1"), &queue("laravel"), "3");
    }

    #[cfg(feature = "amqp")]
    #[test]
    fn rabbitmq() {
        let Some(url) = reachable(
            "RabbitMQ",
            "BQ_AMQP_URL",
            "amqp://guest:guest@127.0.0.1:5672/%2f",
        ) else {
            return;
        };
        lands_exactly_n(&url, &queue("amqp"), "3");
    }

    #[cfg(feature = "kafka")]
    #[test]
    fn kafka() {
        let Some(url) = reachable("Kafka", "BQ_KAFKA_URL", "kafka://127.0.0.1:9092") else {
            return;
        };
        // The idle clock runs from the consumer's start, and a new group's first join on a
        // broker that has never had a group (it creates `__consumer_offsets` first, as on a
        // fresh CI machine) took longer than 3 s: the drain then ended with nothing.
        lands_exactly_n(&url, &queue("kafka"), "15");
    }
}
