//! [`Reinjecting`]: a [`KafkaTransport`] deployed as the crate documents it, with a
//! [`RetryReinjector`] running beside the workers of every work topic, for the contract suite.
//!
//! On Kafka a retry (or a delayed publish) is parked on a retry tier, `<topic>.retry.<n>`, and
//! only the re-injector brings it back. A production deployment runs one for its known work
//! topics; the contract suite names its queues itself (a fresh one per test), so this wrapper
//! starts a re-injector for a queue the first time the transport consumes it, and stops it
//! when the transport is dropped. Everything else goes straight to the wrapped transport: its
//! name, every call, and its capabilities (the runtime talks to the real `KafkaTransport`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{Capabilities, Delivery, Outgoing, Transport, TransportError};
use babelqueue_transport_kafka::{
    KafkaClient, KafkaOptions, KafkaTransport, RdKafkaClient, RetryReinjector, retry_topic,
};
use tokio::sync::oneshot;

/// How often an idle re-injector polls (the crate's default is 1 s; a due record is never
/// waited past, whatever this is).
const REINJECT_POLL: Duration = Duration::from_millis(200);

/// Where the re-injectors run: the client they use, and the tiers (the workers' own).
#[derive(Clone)]
pub(crate) struct Cluster {
    /// The client the re-injectors' consumers and producers come from.
    pub(crate) client: Arc<dyn KafkaClient>,
    /// The workers' configuration: its retry tiers are the ones re-injected.
    pub(crate) config: KafkaOptions,
    /// On a real broker, the client that creates the tier topics up front (the crate's docs
    /// ask for that); `None` for the in-memory fake, which creates topics on first use.
    pub(crate) admin: Option<RdKafkaClient>,
}

/// A [`KafkaTransport`] with a re-injector per consumed work topic.
pub(crate) struct Reinjecting {
    inner: KafkaTransport,
    cluster: Cluster,
    /// Dropping a sender stops its re-injector.
    running: Mutex<HashMap<String, oneshot::Sender<()>>>,
}

impl std::fmt::Debug for Reinjecting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("Reinjecting")
            .field("inner", &self.inner)
            .field("reinjected", &running.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Reinjecting {
    /// `inner`, whose retries `cluster`'s re-injectors bring back.
    pub(crate) fn new(inner: KafkaTransport, cluster: Cluster) -> Reinjecting {
        Reinjecting {
            inner,
            cluster,
            running: Mutex::new(HashMap::new()),
        }
    }

    /// Starts the re-injector of `queue` unless one runs already. A dead-letter queue gets
    /// none (nothing is retried from it), nor does a transport without tiers.
    fn reinject(&self, queue: &str) {
        if queue.ends_with(".dlq") || self.cluster.config.retry_tiers.is_empty() {
            return;
        }
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.contains_key(queue) {
            return;
        }
        let (stop, stopped) = oneshot::channel::<()>();
        running.insert(queue.to_owned(), stop);
        let cluster = self.cluster.clone();
        let queue = queue.to_owned();
        tokio::spawn(async move {
            let tiers: Vec<String> = (1..=cluster.config.retry_tiers.len())
                .map(|n| retry_topic(&queue, n))
                .collect();
            if let Some(admin) = &cluster.admin {
                let names: Vec<&str> = tiers.iter().map(String::as_str).collect();
                admin
                    .create_topics(&names, 1)
                    .await
                    .expect("the retry tier topics are created");
            }
            let group = babelqueue_testkit::unique_queue("reinject");
            let mut reinjector = RetryReinjector::with_client(
                cluster.client.as_ref(),
                &cluster.config,
                std::slice::from_ref(&queue),
                &group,
            )
            .expect("a re-injector")
            .with_poll_interval(REINJECT_POLL);
            reinjector
                .run(async {
                    let _ = stopped.await;
                })
                .await;
        });
    }
}

#[async_trait]
impl Transport for Reinjecting {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        self.inner.publish(queue, body).await
    }

    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        self.inner.send(outgoing).await
    }

    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        self.reinject(queue);
        self.inner.pop(queue, timeout).await
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        self.inner.ack(delivery).await
    }

    async fn prepare_consume(&self, queue: &str, concurrency: usize) -> Result<(), TransportError> {
        self.reinject(queue);
        self.inner.prepare_consume(queue, concurrency).await
    }

    async fn close(&self) -> Result<(), TransportError> {
        self.inner.close().await
    }

    fn capabilities(&self) -> Capabilities<'_> {
        self.inner.capabilities()
    }
}
