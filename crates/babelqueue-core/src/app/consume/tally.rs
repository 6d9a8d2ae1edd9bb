//! What the loop counts as its dispatches finish: the [`Summary`], the acknowledgements gathered
//! for a batch, and when it last saw work.

use std::time::Duration;

use super::Summary;
use crate::app::dispatch::Dispatched;
use crate::app::{LOG, Outcome};
use crate::transport::Delivery;

/// The settled side of a consume run: updated by every finished dispatch, in one place, so the
/// loop's steps can count one while they hold its receive or its running dispatches.
pub(super) struct Tally {
    pub(super) summary: Summary,
    pub(super) idle: Idle,
    /// Acknowledgements gathered for a transport that sends them in batches; sent when a batch
    /// is full, before the loop asks for more deliveries, and before it waits for anything.
    pub(super) gathered: Vec<Delivery>,
}

impl Tally {
    pub(super) fn new(idle_timeout: Option<Duration>) -> Tally {
        Tally {
            summary: Summary::default(),
            idle: Idle::new(idle_timeout),
            gathered: Vec::new(),
        }
    }

    /// Counts a finished dispatch: its outcome, its acknowledgement to gather, whether it was
    /// work for the idle timeout.
    pub(super) fn count(&mut self, done: std::thread::Result<Dispatched>) {
        let done = done.map(|dispatched| {
            self.gathered.extend(dispatched.ack);
            self.idle.settled(dispatched.released);
            dispatched.outcome
        });
        match done {
            Ok(Outcome::Interrupted) => self.summary.released_at_shutdown += 1,
            Ok(_) => self.summary.processed += 1,
            Err(payload) => {
                // The delivery was dropped unsettled: the broker brings it back.
                let panic = payload
                    .downcast::<String>()
                    .map(|text| *text)
                    .or_else(|payload| payload.downcast::<&str>().map(|text| (*text).to_owned()))
                    .unwrap_or_default();
                tracing::error!(target: LOG, panic = %panic, "A dispatch ended abnormally outside its handler; its message was left unsettled");
            }
        }
    }
}

/// When the consume loop last saw work, for [`Consume::idle_timeout`](super::Consume::idle_timeout): a delivery settled, a
/// handler still running. A delivery of a message this run already gave back unchanged is not
/// work: under the `release` strategy an unknown URN comes straight back, and counting each
/// return would keep an idle worker alive for ever.
pub(super) struct Idle {
    timeout: Option<Duration>,
    since: tokio::time::Instant,
    /// The messages given back unchanged so far ([`message_key`](crate::app::dispatch::message_key)).
    released: std::collections::HashSet<u64>,
}

impl Idle {
    pub(super) fn new(timeout: Option<Duration>) -> Idle {
        Idle {
            timeout,
            since: tokio::time::Instant::now(),
            released: std::collections::HashSet::new(),
        }
    }

    /// There is work now.
    pub(super) fn busy(&mut self) {
        if self.timeout.is_some() {
            self.since = tokio::time::Instant::now();
        }
    }

    /// A delivery settled; `released` keys a message given back unchanged.
    pub(super) fn settled(&mut self, released: Option<u64>) {
        if self.timeout.is_none() {
            return;
        }
        match released {
            Some(key) if !self.released.insert(key) => {}
            _ => self.busy(),
        }
    }

    /// Whether the loop has been idle for its timeout.
    pub(super) fn expired(&self) -> bool {
        self.timeout.is_some_and(|t| self.since.elapsed() >= t)
    }
}
