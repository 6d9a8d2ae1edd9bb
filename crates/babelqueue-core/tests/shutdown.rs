//! Graceful shutdown on real SIGTERM/SIGINT sent to this test process.
//!
//! Signals are process-wide, so every scenario runs in one test, one after the other. The
//! transport is a downstream-style wrapper around `MemoryTransport` that counts `close` calls and
//! can slow down a pop or a publish.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use babelqueue_core::{
    App, Capabilities, Consume, Context, Delivery, HandlerError, MemoryTransport, Redelivery,
    Transport, TransportError,
};
use serde_json::json;

const URN: &str = "urn:babel:orders:created";

#[derive(Debug, Default)]
struct Probe {
    inner: MemoryTransport,
    closes: AtomicUsize,
    pop_delay: std::sync::Mutex<Option<Duration>>,
    slow_queue: std::sync::Mutex<Option<(String, Duration)>>,
}

#[async_trait]
impl Transport for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        let slow = self.slow_queue.lock().unwrap().clone();
        if let Some((q, d)) = slow
            && q == queue
        {
            tokio::time::sleep(d).await;
        }
        self.inner.publish(queue, body).await
    }
    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        let delay = *self.pop_delay.lock().unwrap();
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        self.inner.pop(queue, timeout).await
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        self.inner.ack(delivery).await
    }
    async fn close(&self) -> Result<(), TransportError> {
        self.closes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
            .rewind(&self.inner)
            .redelivery(Redelivery::Native(&self.inner))
    }
}

fn signal(name: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), std::process::id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

struct Scenario {
    probe: Arc<Probe>,
    app: App,
    started: Arc<tokio::sync::Notify>,
    finished: Arc<AtomicBool>,
}

fn scenario(handler_time: Duration, fail: bool, shutdown_timeout: Duration) -> Scenario {
    let probe = Arc::new(Probe::default());
    let started = Arc::new(tokio::sync::Notify::new());
    let finished = Arc::new(AtomicBool::new(false));
    let (s, f) = (started.clone(), finished.clone());
    let app = App::builder_arc(probe.clone())
        .queue("orders")
        .max_attempts(1)
        .dead_letter(true)
        .shutdown_timeout(shutdown_timeout)
        .poll_timeout(Duration::from_millis(50))
        .handle(URN, move |_ctx: Context| {
            let (s, f) = (s.clone(), f.clone());
            async move {
                s.notify_one();
                tokio::time::sleep(handler_time).await;
                f.store(true, Ordering::SeqCst);
                if fail {
                    Err(HandlerError::new("failed at the end"))
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    Scenario {
        probe,
        app,
        started,
        finished,
    }
}

async fn publish_two(s: &Scenario) -> Vec<u8> {
    s.app.publish(URN, &json!({"n": 1})).await.unwrap();
    s.app.publish(URN, &json!({"n": 2})).await.unwrap();
    s.probe.inner.bodies("orders")[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_on_signals() {
    // 1. SIGTERM while a handler runs: it finishes and is acknowledged; the next message is not
    //    taken; the transport is closed once.
    let s = scenario(Duration::from_millis(300), false, Duration::from_secs(10));
    publish_two(&s).await;
    let run = tokio::spawn({
        let app = s.app.clone();
        async move { app.consume(Consume::new()).await }
    });
    s.started.notified().await;
    signal("TERM");
    let summary = run.await.unwrap().unwrap();
    assert_eq!(
        (
            summary.processed,
            summary.released_at_shutdown,
            summary.signalled
        ),
        (1, 0, true)
    );
    assert!(s.finished.load(Ordering::SeqCst));
    assert_eq!(
        s.probe.inner.len("orders"),
        1,
        "the next message is untouched"
    );
    assert_eq!(s.probe.closes.load(Ordering::SeqCst), 1);

    // 2. SIGINT and a handler that outlives the deadline: interrupted at shutdown_timeout, its
    //    message released unchanged (attempts not counted), the loop returns promptly.
    let s = scenario(Duration::from_secs(60), false, Duration::from_millis(200));
    let first = publish_two(&s).await;
    let run = tokio::spawn({
        let app = s.app.clone();
        async move { app.consume(Consume::new()).await }
    });
    s.started.notified().await;
    let t = Instant::now();
    signal("INT");
    let summary = run.await.unwrap().unwrap();
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert!(t.elapsed() >= Duration::from_millis(200));
    assert_eq!((summary.processed, summary.released_at_shutdown), (0, 1));
    assert!(!s.finished.load(Ordering::SeqCst));
    let bodies = s.probe.inner.bodies("orders");
    assert_eq!(bodies.len(), 2);
    assert!(
        bodies.contains(&first),
        "released byte for byte, attempts still 0"
    );
    assert_eq!(s.probe.inner.in_flight(), 0);

    // 3. shutdown_timeout 0: released as soon as the signal lands; the handler never finishes.
    let s = scenario(Duration::from_millis(500), false, Duration::ZERO);
    publish_two(&s).await;
    let run = tokio::spawn({
        let app = s.app.clone();
        async move { app.consume(Consume::new()).await }
    });
    s.started.notified().await;
    signal("TERM");
    let summary = run.await.unwrap().unwrap();
    assert_eq!((summary.processed, summary.released_at_shutdown), (0, 1));
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        !s.finished.load(Ordering::SeqCst),
        "the interrupted handler body never completes"
    );
    assert_eq!(s.probe.inner.len("orders"), 2);

    // 4. A second signal interrupts at once, despite a long shutdown_timeout.
    let s = scenario(Duration::from_secs(60), false, Duration::from_secs(60));
    publish_two(&s).await;
    let run = tokio::spawn({
        let app = s.app.clone();
        async move { app.consume(Consume::new()).await }
    });
    s.started.notified().await;
    let t = Instant::now();
    signal("TERM");
    tokio::time::sleep(Duration::from_millis(100)).await;
    signal("TERM");
    let summary = run.await.unwrap().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(summary.released_at_shutdown, 1);
    assert_eq!(s.probe.inner.len("orders"), 2);

    // 5. A message whose settlement began is never released: the handler fails before the
    //    deadline, its dead-letter write is still running when the deadline passes.
    let s = scenario(Duration::from_millis(100), true, Duration::from_millis(200));
    *s.probe.slow_queue.lock().unwrap() = Some(("orders.dlq".into(), Duration::from_millis(600)));
    publish_two(&s).await;
    let run = tokio::spawn({
        let app = s.app.clone();
        async move { app.consume(Consume::new()).await }
    });
    s.started.notified().await;
    signal("TERM");
    let summary = run.await.unwrap().unwrap();
    assert_eq!((summary.processed, summary.released_at_shutdown), (1, 0));
    assert_eq!(
        s.probe.inner.len("orders.dlq"),
        1,
        "dead-lettered, not released"
    );
    assert_eq!(
        s.probe.inner.len("orders"),
        1,
        "only the untouched second message is left"
    );

    // 6. A signal while a pop is in progress: the message it returns is handed straight back.
    let s = scenario(Duration::from_millis(10), false, Duration::from_secs(5));
    publish_two(&s).await;
    *s.probe.pop_delay.lock().unwrap() = Some(Duration::from_millis(400));
    let run = tokio::spawn({
        let app = s.app.clone();
        async move { app.consume(Consume::new()).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    signal("TERM");
    let summary = run.await.unwrap().unwrap();
    assert_eq!((summary.processed, summary.released_at_shutdown), (0, 1));
    assert!(!s.finished.load(Ordering::SeqCst));
    assert_eq!(s.probe.inner.len("orders"), 2);
}
