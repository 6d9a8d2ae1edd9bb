//! A shutdown signal that lands right after `consume` starts is a graceful shutdown, never the
//! default action that ends the process.
//!
//! Its own test binary (signals are process-wide): on a current-thread runtime the consume
//! loop is polled once and the signal sent before anything else runs. The listener task has not
//! run yet then, so the signals must already be registered by that first poll; if they were
//! registered by the task, SIGTERM would end this process and the test would fail with it.

#![cfg(unix)]

use std::time::Duration;

use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport};

fn signal(name: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), std::process::id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

#[test]
fn a_signal_right_after_consume_starts_ends_it_gracefully() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let app = App::builder(MemoryTransport::new())
            .queue("orders")
            .poll_timeout(Duration::from_millis(50))
            .handle("urn:babel:orders:created", |_ctx: Context| async {
                Ok::<(), HandlerError>(())
            })
            .build()
            .expect("valid configuration");
        let mut consume = std::pin::pin!(app.consume(Consume::new()));
        // One poll: the loop starts and waits on the empty queue; nothing else has run.
        tokio::select! {
            biased;
            _ = &mut consume => panic!("the loop ended on its own"),
            () = std::future::ready(()) => {}
        }
        signal("TERM");
        let summary = tokio::time::timeout(Duration::from_secs(10), consume)
            .await
            .expect("the loop ends after the signal")
            .expect("a summary");
        assert!(summary.signalled, "{summary:?}");
        assert_eq!(summary.processed, 0);
    });
}
