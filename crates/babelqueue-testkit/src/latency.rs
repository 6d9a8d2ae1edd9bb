//! Idle-to-handled latency, for the broker benchmarks: how long a message published into an
//! empty queue takes to reach the handler of a worker that is already waiting.

use std::time::Duration;

use babelqueue_core::{AppBuilder, Consume, Context, HandlerError};
use tokio::time::Instant;

/// Builds `builder` with a handler for `urn`, starts its worker on its queue, and publishes
/// `samples` messages one at a time, each after 30 ms of idleness; returns the median time from
/// before the `publish` call to the handler's start.
///
/// # Panics
///
/// When the app cannot be built, a publish fails or the worker stops early: it is a
/// benchmark helper, and a broken run has no figure to give.
pub async fn idle_to_handled(builder: AppBuilder, urn: &str, samples: u64) -> Duration {
    let (handled_tx, mut handled) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let app = builder
        .handle(urn, move |_ctx: Context| {
            let _ = handled_tx.send(Instant::now());
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .expect("a valid benchmark app");
    let worker = {
        let app = app.clone();
        tokio::spawn(async move {
            app.consume(
                Consume::new()
                    .max_messages(samples)
                    .idle_timeout(Duration::from_secs(10))
                    .handle_signals(false),
            )
            .await
        })
    };
    let mut taken = Vec::new();
    for n in 0..samples {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let sent = Instant::now();
        app.publish(urn, &serde_json::json!({ "ping": n }))
            .await
            .expect("published");
        let at = handled.recv().await.expect("handled");
        taken.push(at.saturating_duration_since(sent));
    }
    worker
        .await
        .expect("the worker task")
        .expect("the worker consumed");
    taken.sort_unstable();
    taken.get(taken.len() / 2).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use babelqueue_core::{App, MemoryTransport};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_waiting_worker_on_memory_handles_within_a_poll() {
        let builder = App::builder(MemoryTransport::new())
            .queue("idle")
            .poll_timeout(Duration::from_secs(1));
        let median = idle_to_handled(builder, "urn:babel:bench:ping", 5).await;
        // memory:// wakes its waiting receive on publish: far below the 1 s poll.
        assert!(median < Duration::from_millis(500), "{median:?}");
    }
}
