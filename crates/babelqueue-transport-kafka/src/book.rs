//! The in-flight book: which records of each partition were handed out and how far the
//! consumer may commit.
//!
//! Kafka's commit is one cumulative position per partition, so a record may only be committed
//! once every record before it on its partition is settled. With several handlers running at
//! once, an acknowledgement that arrives ahead of an unsettled record is deferred, and the
//! commit advances to just below the lowest record still in flight (the watermark) when that
//! record settles. Pure bookkeeping, no I/O.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::client::TopicPartition;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Handed out, not settled.
    InFlight,
    /// Acknowledged, waiting for an earlier record of its partition.
    Settled,
    /// Dropped without being settled (its task died): it must be fetched again.
    Abandoned,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    id: u64,
    state: State,
}

/// The records handed out by one consumer, per partition.
#[derive(Debug, Default)]
pub(crate) struct Book {
    next_id: u64,
    /// Looked up twice per record (hand-out and settle): a seeded fast hasher, not SipHash.
    partitions: HashMap<TopicPartition, BTreeMap<i64, Entry>, foldhash::fast::RandomState>,
    /// The partition of the last record handed out, shared with its delivery: records come
    /// in runs per partition, so most deliveries name theirs without copying its topic.
    last: Option<Arc<TopicPartition>>,
}

impl Book {
    /// `topic[partition]`, shared: the last one asked for when it is the same, else a new one
    /// (then the last).
    pub(crate) fn shared(&mut self, topic: &str, partition: i32) -> Arc<TopicPartition> {
        match &self.last {
            Some(last) if last.partition == partition && last.topic == topic => Arc::clone(last),
            _ => Arc::clone(
                self.last
                    .insert(Arc::new(TopicPartition::new(topic, partition))),
            ),
        }
    }

    /// Records a handed-out record; returns its ticket (an id that tells this hand-out from a
    /// later one of the same offset after a seek).
    pub(crate) fn track(&mut self, tp: &TopicPartition, offset: i64) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let entry = Entry {
            id,
            state: State::InFlight,
        };
        // The partition is cloned (its topic copied) only the first time it is seen.
        match self.partitions.get_mut(tp) {
            Some(records) => {
                records.insert(offset, entry);
            }
            None => {
                self.partitions
                    .insert(tp.clone(), BTreeMap::from([(offset, entry)]));
            }
        }
        id
    }

    fn matching(&mut self, tp: &TopicPartition, offset: i64, id: u64) -> Option<&mut Entry> {
        self.partitions
            .get_mut(tp)?
            .get_mut(&offset)
            .filter(|e| e.id == id)
    }

    /// The record was acknowledged. Returns `false` when it is not (or no longer) in the book:
    /// its partition was revoked or rewound past it, and nothing is to be committed for it.
    pub(crate) fn settle(&mut self, tp: &TopicPartition, offset: i64, id: u64) -> bool {
        match self.matching(tp, offset, id) {
            Some(entry) => {
                if entry.state == State::InFlight {
                    entry.state = State::Settled;
                }
                true
            }
            None => false,
        }
    }

    /// Takes the settled records at the head of the partition (those with no unsettled record
    /// before them) out of the book, and returns the position to commit for them (the offset
    /// after the highest); `None` when the head is unsettled or nothing is left.
    pub(crate) fn take_committable(&mut self, tp: &TopicPartition) -> Option<i64> {
        let entries = self.partitions.get_mut(tp)?;
        let mut top = None;
        while let Some(entry) = entries.first_entry() {
            if entry.get().state != State::Settled {
                break;
            }
            top = Some(*entry.key());
            entry.remove();
        }
        // An emptied partition keeps its map (empty, it holds no memory) until it is revoked:
        // its next record, usually the very next one, needs no copy of its name.
        top.map(|offset| offset + 1)
    }

    /// The record is to be fetched again from its offset: forget it and everything after it on
    /// its partition (the seek brings them all back). Returns `false`, and changes nothing, when
    /// the record is not in the book any more: an earlier rewind or a revocation already took
    /// it back, and seeking now could skip the records before it.
    pub(crate) fn rewind(&mut self, tp: &TopicPartition, offset: i64, id: u64) -> bool {
        if self.matching(tp, offset, id).is_none() {
            return false;
        }
        self.forget_from(tp, offset);
        true
    }

    /// The record's delivery was dropped unsettled (its handler task died): it will be sought
    /// back before the next fetch.
    pub(crate) fn abandon(&mut self, tp: &TopicPartition, offset: i64, id: u64) {
        if let Some(entry) = self.matching(tp, offset, id)
            && entry.state == State::InFlight
        {
            entry.state = State::Abandoned;
        }
    }

    /// The lowest abandoned record of each partition, each forgotten with everything after it:
    /// the caller seeks each partition back to it.
    pub(crate) fn take_abandoned(&mut self) -> Vec<(TopicPartition, i64)> {
        let lowest: Vec<(TopicPartition, i64)> = self
            .partitions
            .iter()
            .filter_map(|(tp, entries)| {
                entries
                    .iter()
                    .find(|(_, e)| e.state == State::Abandoned)
                    .map(|(offset, _)| (tp.clone(), *offset))
            })
            .collect();
        for (tp, offset) in &lowest {
            self.forget_from(tp, *offset);
        }
        lowest
    }

    /// A rebalance took these partitions away: their records belong to the next owner.
    pub(crate) fn revoke(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.partitions.remove(tp);
        }
    }

    /// Records handed out and not yet committed (in flight, deferred or abandoned).
    pub(crate) fn len(&self) -> usize {
        self.partitions.values().map(BTreeMap::len).sum()
    }

    fn forget_from(&mut self, tp: &TopicPartition, offset: i64) {
        if let Some(entries) = self.partitions.get_mut(tp) {
            entries.split_off(&offset);
            if entries.is_empty() {
                self.partitions.remove(tp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("orders", p)
    }

    #[test]
    fn in_order_acks_commit_each_record() {
        let mut book = Book::default();
        let a = book.track(&tp(0), 0);
        let b = book.track(&tp(0), 1);
        assert!(book.settle(&tp(0), 0, a));
        assert_eq!(book.take_committable(&tp(0)), Some(1));
        assert!(book.settle(&tp(0), 1, b));
        assert_eq!(book.take_committable(&tp(0)), Some(2));
        assert_eq!(
            book.take_committable(&tp(0)),
            None,
            "nothing left to commit"
        );
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn the_watermark_never_passes_an_unsettled_record() {
        let mut book = Book::default();
        let ids: Vec<u64> = (10..18).map(|o| book.track(&tp(0), o)).collect();
        let other = book.track(&tp(1), 3);
        // everything but offset 12 settles: only 10 and 11 may be committed
        for (i, offset) in (10..18).enumerate() {
            if offset == 12 {
                continue;
            }
            assert!(book.settle(&tp(0), offset, ids[i]));
            let want = match offset {
                10 => Some(11),
                11 => Some(12),
                _ => None,
            };
            assert_eq!(book.take_committable(&tp(0)), want, "offset {offset}");
        }
        // partitions are independent
        assert!(book.settle(&tp(1), 3, other));
        assert_eq!(book.take_committable(&tp(1)), Some(4));
        // 12 settles: the deferred acks are committed with it, at once
        assert!(book.settle(&tp(0), 12, ids[2]));
        assert_eq!(book.take_committable(&tp(0)), Some(18));
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn a_rewind_forgets_from_the_record_and_stale_tickets_do_nothing() {
        let mut book = Book::default();
        let a = book.track(&tp(0), 5);
        let b = book.track(&tp(0), 6);
        let c = book.track(&tp(0), 7);
        assert!(book.settle(&tp(0), 7, c));
        assert_eq!(book.take_committable(&tp(0)), None);
        assert!(book.rewind(&tp(0), 6, b));
        assert_eq!(book.len(), 1);
        // the records from 6 on come back with new tickets; the old ones are dead
        assert!(!book.settle(&tp(0), 7, c));
        let b2 = book.track(&tp(0), 6);
        assert!(!book.rewind(&tp(0), 6, b), "a stale ticket never seeks");
        assert!(!book.settle(&tp(0), 6, b));
        // a later record's rewind after an earlier one's is refused: it would skip
        assert!(book.rewind(&tp(0), 5, a));
        assert!(!book.rewind(&tp(0), 6, b2));
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn abandoned_records_are_sought_back_once() {
        let mut book = Book::default();
        let a = book.track(&tp(0), 1);
        let b = book.track(&tp(0), 2);
        let c = book.track(&tp(0), 3);
        book.abandon(&tp(0), 2, b);
        book.abandon(&tp(0), 3, c);
        assert!(book.settle(&tp(0), 1, a));
        assert_eq!(book.take_committable(&tp(0)), Some(2));
        assert_eq!(book.take_abandoned(), vec![(tp(0), 2)]);
        assert!(book.take_abandoned().is_empty());
        // an abandon after a settle does nothing
        let d = book.track(&tp(0), 4);
        assert!(book.settle(&tp(0), 4, d));
        book.abandon(&tp(0), 4, d);
        assert_eq!(book.take_committable(&tp(0)), Some(5));
        assert!(book.take_abandoned().is_empty());
    }

    #[test]
    fn a_commit_covers_every_settled_record_before_the_first_unsettled_one() {
        // Several acknowledgements settle before one commit runs: one commit covers them all,
        // and the acknowledgements after it find nothing left to commit.
        let mut book = Book::default();
        let ids: Vec<(i64, u64)> = (0..4).map(|o| (o, book.track(&tp(0), o))).collect();
        for (offset, id) in ids {
            assert!(book.settle(&tp(0), offset, id));
        }
        assert_eq!(book.take_committable(&tp(0)), Some(4));
        assert_eq!(book.take_committable(&tp(0)), None);
    }

    #[test]
    fn a_partition_named_again_is_shared_and_never_mistaken_for_another() {
        let mut book = Book::default();
        let first = book.shared("orders", 0);
        assert!(Arc::ptr_eq(&first, &book.shared("orders", 0)));
        // Another partition, then another topic with the same number: each its own name.
        let other = book.shared("orders", 1);
        assert_eq!(*other, tp(1));
        let elsewhere = book.shared("orders.retry", 1);
        assert_eq!(*elsewhere, TopicPartition::new("orders.retry", 1));
        assert!(!Arc::ptr_eq(&other, &elsewhere));
        assert_eq!(*book.shared("orders", 0), tp(0));
        // The shared name tracks and settles as the partition itself.
        let shared = book.shared("orders", 0);
        let id = book.track(&shared, 5);
        assert!(book.settle(&tp(0), 5, id));
        assert_eq!(book.take_committable(&shared), Some(6));
    }

    #[test]
    fn revoked_partitions_are_forgotten() {
        let mut book = Book::default();
        let a = book.track(&tp(0), 1);
        let b = book.track(&tp(1), 1);
        book.revoke(&[tp(0)]);
        assert!(!book.settle(&tp(0), 1, a));
        assert!(!book.rewind(&tp(0), 1, a));
        assert!(book.settle(&tp(1), 1, b));
        assert_eq!(book.take_committable(&tp(1)), Some(2));
    }
}
