//! SIGINT and SIGTERM: a consumer stops gracefully, a dead-letter operation finishes its run
//! (so no drained message is left behind), a publish stops between envelopes, a connection
//! attempt is abandoned; then the process exits 128 + the signal's number (130, 143). A second
//! signal exits at once.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use babelqueue::StopHandle;
use tokio::sync::Notify;

use crate::io::Io;

/// The exit status after SIGINT.
pub(crate) const SIGINT_EXIT: u8 = 130;
/// The exit status after SIGTERM.
pub(crate) const SIGTERM_EXIT: u8 = 143;

#[derive(Debug, Default)]
struct State {
    /// The exit status the signal asks for; 0 while none came.
    exit: AtomicU8,
    arrived: Notify,
    consumer: OnceLock<StopHandle>,
}

/// The signals a run listens to (none for an embedded or test run).
#[derive(Debug, Clone, Default)]
pub(crate) struct Shutdown(Arc<State>);

impl Shutdown {
    /// Listens for SIGINT and SIGTERM from now on (inside a Tokio runtime).
    pub(crate) fn listen(io: Io) -> Shutdown {
        let shutdown = Shutdown::default();
        let state = shutdown.0.clone();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) {
                (Ok(mut int), Ok(mut term)) => {
                    tokio::spawn(async move {
                        loop {
                            let exit = tokio::select! {
                                _ = int.recv() => SIGINT_EXIT,
                                _ = term.recv() => SIGTERM_EXIT,
                            };
                            arrived(&state, &io, exit);
                        }
                    });
                }
                _ => io.note("cannot listen for signals; Ctrl-C ends the process at once"),
            }
        }
        #[cfg(not(unix))]
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                arrived(&state, &io, SIGINT_EXIT);
            }
        });
        shutdown
    }

    /// The exit status a signal asked for, if one came.
    pub(crate) fn exit(&self) -> Option<u8> {
        match self.0.exit.load(Ordering::SeqCst) {
            0 => None,
            code => Some(code),
        }
    }

    /// Resolves once a signal came.
    pub(crate) async fn wait(&self) {
        loop {
            let notified = self.0.arrived.notified();
            if self.exit().is_some() {
                return;
            }
            notified.await;
        }
    }

    /// The consumer a signal stops.
    pub(crate) fn stops(&self, consumer: StopHandle) {
        let _ = self.0.consumer.set(consumer);
    }
}

fn arrived(state: &State, io: &Io, exit: u8) {
    if state.exit.swap(exit, Ordering::SeqCst) != 0 {
        // A second signal: the operator insists.
        io.note("interrupted again: exiting now; what was in flight comes back from the broker");
        std::process::exit(i32::from(exit));
    }
    io.note("interrupted: finishing what is in flight (nothing is lost), then exiting; signal again to exit at once");
    if let Some(consumer) = state.consumer.get() {
        consumer.stop();
    }
    state.arrived.notify_waiters();
}
