//! Which acknowledgements of a batch can share one `basic.ack multiple=true`.
//!
//! RabbitMQ numbers the deliveries of a channel 1, 2, 3 … and a `basic.ack` with `multiple`
//! set acknowledges every unacknowledged delivery of that channel up to and including its tag.
//! That is safe only when each such delivery is in the batch: a delivery still being handled,
//! or one whose negative acknowledgement is under way, must not be acknowledged by accident.
//!
//! A [`Ledger`] per consuming channel holds the tags handed out and not yet settled on the
//! wire. [`Ledger::plan`] splits a batch into the run below the first tag the batch does not
//! hold (one multiple-ack) and the rest (one ack each).

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The delivery tags of one channel handed out and not yet settled (their frame not sent).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    open: Mutex<BTreeSet<u64>>,
}

/// How one channel's share of a batch is acknowledged.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct AckPlan {
    /// The highest tag of the run one multiple-ack covers; `None` when no run of two or more.
    pub(crate) up_to: Option<u64>,
    /// The tags acknowledged one by one, ascending.
    pub(crate) single: Vec<u64>,
}

impl Ledger {
    fn open(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        // Each critical section is one set operation: a poisoned lock is still consistent.
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A delivery with `tag` was handed out.
    pub(crate) fn handed_out(&self, tag: u64) {
        self.open().insert(tag);
    }

    /// The frames settling `tags` went out: they no longer hold a multiple-ack back.
    pub(crate) fn settled(&self, tags: impl IntoIterator<Item = u64>) {
        let mut open = self.open();
        for tag in tags {
            open.remove(&tag);
        }
    }

    /// Splits `batch` (tags of this channel, each handed out and settled by nobody else) into
    /// the run one multiple-ack may cover and the tags to acknowledge one by one.
    ///
    /// The run is every batch tag below the lowest open tag the batch does not hold: a
    /// multiple-ack up to the run's last tag then covers exactly the run.
    pub(crate) fn plan(&self, batch: &[u64]) -> AckPlan {
        let mut batch = batch.to_vec();
        batch.sort_unstable();
        batch.dedup();
        let barrier = {
            let open = self.open();
            let mut wanted = batch.iter().peekable();
            open.iter()
                .copied()
                .find(|tag| {
                    // Both ascend: an open tag the batch skips over is the barrier.
                    while wanted.next_if(|b| *b < tag).is_some() {}
                    wanted.next_if_eq(&tag).is_none()
                })
                .unwrap_or(u64::MAX)
        };
        let run = batch.partition_point(|tag| *tag < barrier);
        if run < 2 {
            return AckPlan {
                up_to: None,
                single: batch,
            };
        }
        AckPlan {
            up_to: Some(batch[run - 1]),
            single: batch.split_off(run),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use babelqueue_core::{BatchAcker, Transport};

    use super::*;
    use crate::fake::FakeClient;
    use crate::{AmqpOptions, AmqpTransport};

    /// Frames counted on the fake seam: an in-order batch is one multiple-ack; a batch with a
    /// gap (a delivery still held) acknowledges the run before the gap together and the rest
    /// one tag at a time; nothing is lost or acknowledged twice.
    #[tokio::test]
    async fn batches_use_one_multiple_ack_for_an_in_order_run() {
        let fake = FakeClient::default();
        let t = AmqpTransport::with_client(
            Arc::new(fake.clone()),
            AmqpOptions::default().prefetch(Some(16)),
        );
        for n in 0..8 {
            fake.publish_raw("q", format!("body {n}").as_bytes());
        }
        let mut got = t.receive("q", 8, Duration::from_millis(200)).await.unwrap();
        assert_eq!(got.len(), 8);

        t.ack_batch(&got[0..3]).await.unwrap();
        assert_eq!(
            fake.world().ack_frames,
            [("q".to_owned(), 3, true)],
            "tags 1-3 in one frame"
        );

        // Tag 4 is still held by a handler: 5 and 6 must not ride on a multiple-ack.
        fake.world().ack_frames.clear();
        got.swap(4, 5);
        t.ack_batch(&got[4..6]).await.unwrap();
        assert_eq!(
            fake.world().ack_frames,
            [("q".to_owned(), 5, false), ("q".to_owned(), 6, false)]
        );

        // Once 4 is settled, 7 and 8 are a run again (5 and 6 are gone from the ledger).
        fake.world().ack_frames.clear();
        t.ack(&got[3]).await.unwrap();
        t.ack_batch(&got[6..8]).await.unwrap();
        assert_eq!(
            fake.world().ack_frames,
            [("q".to_owned(), 4, false), ("q".to_owned(), 8, true)]
        );

        // Every delivery was acknowledged exactly once: a dropped connection returns nothing,
        // and acknowledging any of them again is refused.
        fake.kill_connections();
        assert!(fake.bodies("q").is_empty());
        assert!(t.ack_batch(&got[0..1]).await.is_err());
    }

    #[tokio::test]
    async fn a_requeue_under_way_is_never_covered_by_a_multiple_ack() {
        let fake = FakeClient::default();
        let t = AmqpTransport::with_client(
            Arc::new(fake.clone()),
            AmqpOptions::default().prefetch(Some(16)),
        );
        for n in 0..3 {
            fake.publish_raw("q", format!("body {n}").as_bytes());
        }
        let got = t.receive("q", 3, Duration::from_millis(200)).await.unwrap();
        assert_eq!(got.len(), 3);
        // The first delivery is released (requeued) by the runtime; the others' batch after
        // it is a run again, and the released one is back in the queue, not acknowledged.
        babelqueue_core::Rewinder::rewind(&t, &got[0])
            .await
            .unwrap();
        t.ack_batch(&got[1..3]).await.unwrap();
        assert_eq!(fake.world().ack_frames, [("q".to_owned(), 3, true)]);
        assert_eq!(fake.bodies("q"), [b"body 0".to_vec()]);
    }

    fn ledger(open: &[u64]) -> Ledger {
        let ledger = Ledger::default();
        for tag in open {
            ledger.handed_out(*tag);
        }
        ledger
    }

    #[test]
    fn an_in_order_batch_is_one_multiple_ack() {
        let l = ledger(&[1, 2, 3, 4]);
        assert_eq!(
            l.plan(&[3, 1, 4, 2]),
            AckPlan {
                up_to: Some(4),
                single: vec![]
            }
        );
    }

    #[test]
    fn a_delivery_still_held_stops_the_run() {
        // 3 is still being handled: the multiple-ack must stop at 2, and 4, 5 go one by one.
        let l = ledger(&[1, 2, 3, 4, 5]);
        assert_eq!(
            l.plan(&[1, 2, 4, 5]),
            AckPlan {
                up_to: Some(2),
                single: vec![4, 5]
            }
        );
        // The lowest open tag is held elsewhere: no run at all.
        assert_eq!(
            l.plan(&[2, 4]),
            AckPlan {
                up_to: None,
                single: vec![2, 4]
            }
        );
    }

    #[test]
    fn settled_tags_no_longer_hold_the_run_back_and_later_deliveries_never_do() {
        let l = ledger(&[1, 2, 3, 4, 5, 6]);
        l.settled([1, 2]);
        // 5 and 6 were handed out after the batch's tags; a multiple-ack up to 4 leaves them.
        assert_eq!(
            l.plan(&[3, 4]),
            AckPlan {
                up_to: Some(4),
                single: vec![]
            }
        );
    }

    #[test]
    fn a_single_tag_is_acknowledged_alone() {
        let l = ledger(&[7]);
        assert_eq!(
            l.plan(&[7]),
            AckPlan {
                up_to: None,
                single: vec![7]
            }
        );
    }
}
