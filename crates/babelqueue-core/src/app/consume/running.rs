//! The dispatches in flight, and how one starts: polled in place by the loop while its first
//! poll finishes at once, else a task of its own.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use tokio::sync::watch;

use crate::app::App;
use crate::app::dispatch::{Deadline, Dispatched};
use crate::transport::Delivery;

/// A dispatch in flight: what it did, or the payload of a panic outside the handler (a handler
/// panic is already a failure).
pub(super) type Dispatching<'a> =
    Pin<Box<dyn Future<Output = std::thread::Result<Dispatched>> + Send + 'a>>;

/// The dispatches in flight: one slot polled in place at concurrency 1 (no task bookkeeping
/// per message), a [`FuturesUnordered`] of spawned tasks above.
pub(super) enum Running<'a> {
    One(Option<Dispatching<'a>>),
    Many(FuturesUnordered<Dispatching<'a>>),
}

impl<'a> Running<'a> {
    pub(super) fn new(concurrency: usize) -> Running<'a> {
        if concurrency == 1 {
            Running::One(None)
        } else {
            Running::Many(FuturesUnordered::new())
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Running::One(slot) => usize::from(slot.is_some()),
            Running::Many(all) => all.len(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn push(&mut self, dispatch: Dispatching<'a>) {
        match self {
            Running::One(slot) => {
                debug_assert!(slot.is_none(), "one dispatch at a time at concurrency 1");
                *slot = Some(dispatch);
            }
            Running::Many(all) => all.push(dispatch),
        }
    }

    /// The next dispatch to finish; `None` at once when none is running.
    pub(super) fn next(
        &mut self,
    ) -> impl Future<Output = Option<std::thread::Result<Dispatched>>> + '_ {
        std::future::poll_fn(move |cx| match self {
            Running::One(slot) => match slot {
                None => Poll::Ready(None),
                Some(dispatch) => match dispatch.as_mut().poll(cx) {
                    Poll::Ready(done) => {
                        *slot = None;
                        Poll::Ready(Some(done))
                    }
                    Poll::Pending => Poll::Pending,
                },
            },
            Running::Many(all) => all.poll_next_unpin(cx),
        })
    }
}

/// Starts dispatching `delivery`: polled by the consume loop itself at concurrency 1 (no spawn
/// and no wake-up of another thread per message; a dispatch its first poll finishes is never
/// tracked). Above, it is first polled here too, while
/// [`Inline`] allows: a dispatch that finishes at once (a quick handler) never becomes a task,
/// and one that waits (on I/O, a timer) continues as a task of its own from where it stopped,
/// so waiting handlers overlap and run on every worker thread. Three first polls in a row that
/// took long (a CPU-bound handler) turn the inline polls off for the rest of the run: from
/// then on each dispatch is a task at once, and CPU-bound handlers run on every worker thread.
pub(super) fn launch<'a>(
    app: &Arc<App>,
    delivery: Delivery,
    deadline: &watch::Receiver<bool>,
    gather: bool,
    inline: &mut Inline,
) -> Started<'a> {
    let deadline = Deadline::at(deadline.clone());
    let dispatch =
        std::panic::AssertUnwindSafe(app.clone().dispatch_owned(delivery, deadline, gather))
            .catch_unwind();
    let mut dispatch = Box::pin(dispatch);
    if app.inner.concurrency == 1 {
        // Never a task: what its first poll leaves pending, the loop polls on.
        return match dispatch.as_mut().now_or_never() {
            Some(done) => Started::Finished(done),
            None => Started::Running(dispatch),
        };
    }
    if inline.on {
        let timer = inline.timed().then(std::time::Instant::now);
        let done = dispatch.as_mut().now_or_never();
        if let Some(polled) = timer {
            inline.polled(polled.elapsed());
        }
        if let Some(done) = done {
            return Started::Finished(done);
        }
    }
    // A future polled once may move to a task: the task polls it at once, which registers
    // the task's waker wherever the first poll registered the loop's.
    let task = tokio::spawn(dispatch);
    Started::Running(Box::pin(async move {
        task.await.unwrap_or_else(|e| Err(Box::new(e.to_string())))
    }))
}

/// What [`launch`] did with a delivery: finished it in its first poll (nothing is left to
/// track), or left a dispatch running.
pub(super) enum Started<'a> {
    Finished(std::thread::Result<Dispatched>),
    Running(Dispatching<'a>),
}

/// Whether a new dispatch (above concurrency 1) is first polled by the consume loop: yes,
/// until [`Inline::IN_A_ROW`] timed first polls in a row each take longer than
/// [`Inline::BUDGET`].
///
/// Reading the clock twice per message cost a quick handler's loop about 2.5% of its time
/// (`perf`, concurrency 8, memory://), so one first poll in [`Inline::SAMPLE`] is timed; after
/// a long one, every poll is, until a quick one ends the streak. The first poll of a run is
/// timed, so a handler that computes every time is still caught in its first three messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Inline {
    on: bool,
    /// Long timed first polls since the last quick one.
    long: u8,
    /// First polls since the last timed one.
    untimed: u8,
}

impl Default for Inline {
    fn default() -> Inline {
        Inline {
            on: true,
            long: 0,
            untimed: 0,
        }
    }
}

impl Inline {
    /// A first poll longer than this is a handler that computes before it waits (or never
    /// waits): it should run beside the others, not on the consume loop.
    const BUDGET: Duration = Duration::from_micros(200);
    /// Long first polls in a row that turn the inline polls off. A handler that computes does
    /// so every time; one long poll among quick ones is the machine (the thread was
    /// preempted, a page fault), and turning the inline polls off for it would cost every
    /// later message a task for nothing.
    const IN_A_ROW: u8 = 3;
    /// One first poll in this many is timed while no long one is pending.
    const SAMPLE: u8 = 8;

    /// Whether the next first poll is timed: the first of every [`Inline::SAMPLE`], and every
    /// one while a streak of long polls is open.
    pub(super) fn timed(&mut self) -> bool {
        if self.long > 0 {
            return true;
        }
        let timed = self.untimed == 0;
        self.untimed = (self.untimed + 1) % Inline::SAMPLE;
        timed
    }

    pub(super) fn polled(&mut self, took: Duration) {
        if took > Inline::BUDGET {
            self.long += 1;
            if self.long >= Inline::IN_A_ROW {
                self.on = false;
            }
        } else {
            self.long = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_first_polls_stop_for_good_after_three_long_polls_in_a_row() {
        let long = Inline::BUDGET + Duration::from_micros(1);
        let mut inline = Inline::default();
        assert!(inline.on);
        for took in [Duration::ZERO, Duration::from_micros(50), Inline::BUDGET] {
            inline.polled(took);
            assert!(inline.on, "{took:?} is within the budget");
        }
        // Long polls among quick ones (a preempted thread) leave them on.
        for took in [long, long, Duration::ZERO, long, Duration::ZERO, long, long] {
            inline.polled(took);
            assert!(inline.on, "never three long polls in a row");
        }
        inline.polled(long);
        assert!(!inline.on, "the third long poll in a row");
        inline.polled(Duration::ZERO);
        assert!(!inline.on, "a quick poll later does not turn them back on");
    }

    #[test]
    fn one_first_poll_in_eight_is_timed_and_every_one_after_a_long_one() {
        let mut inline = Inline::default();
        let timed: Vec<bool> = (0..17).map(|_| inline.timed()).collect();
        let expected: Vec<bool> = (0..17).map(|i| i % 8 == 0).collect();
        assert_eq!(timed, expected, "the first, the ninth and the seventeenth");
        // A long timed poll opens a streak: every poll is timed until a quick one.
        inline.polled(Inline::BUDGET + Duration::from_micros(1));
        assert!(inline.timed() && inline.timed() && inline.timed());
        inline.polled(Duration::ZERO);
        assert!(!inline.timed(), "sampling again after the quick one");
        // A handler that computes every time: three timed long polls in a row, within the
        // first SAMPLE + 2 messages.
        let mut inline = Inline::default();
        let long = Inline::BUDGET * 2;
        let mut messages = 0;
        while inline.on {
            messages += 1;
            if inline.timed() {
                inline.polled(long);
            }
        }
        assert_eq!(
            messages, 3,
            "the first three polls: one sampled, then the streak"
        );
    }
}
