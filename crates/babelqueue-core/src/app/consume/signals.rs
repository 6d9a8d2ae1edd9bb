//! The shutdown signals: the first stops the loop and starts the shutdown deadline, a second
//! brings the deadline forward to now.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use super::Stop;
use crate::app::LOG;

/// Listens for `signals` in a task of its own: sets `stop` and `signalled` on the first, fires
/// `deadline` after `shutdown_timeout`, or at once on the second.
pub(super) fn spawn_signal_listener(
    mut signals: Signals,
    stop: Arc<Stop>,
    signalled: Arc<AtomicBool>,
    deadline: Arc<watch::Sender<bool>>,
    shutdown_timeout: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if signals.next().await.is_err() {
            return;
        }
        tracing::warn!(target: LOG, "Shutdown signal received: finishing in-flight messages (deadline {shutdown_timeout:?})");
        signalled.store(true, Ordering::SeqCst);
        stop.flag.store(true, Ordering::SeqCst);
        stop.notify.notify_waiters();
        let timer = {
            let deadline = deadline.clone();
            tokio::spawn(async move {
                tokio::time::sleep(shutdown_timeout).await;
                deadline.send_replace(true);
            })
        };
        if signals.next().await.is_ok() {
            tracing::warn!(target: LOG, "Second signal: interrupting running handlers now");
            deadline.send_replace(true);
        }
        timer.abort();
    })
}

/// SIGTERM and SIGINT, each registered with the process when this is created (so from then on
/// neither ends the process by default), and read one at a time by the listener.
#[cfg(unix)]
pub(super) struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    pub(super) fn listen() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) -> std::io::Result<()> {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        Ok(())
    }
}

/// Ctrl-C, listened to from the listener's first poll.
#[cfg(not(unix))]
pub(super) struct Signals;

#[cfg(not(unix))]
impl Signals {
    pub(super) fn listen() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    async fn next(&mut self) -> std::io::Result<()> {
        tokio::signal::ctrl_c().await
    }
}
