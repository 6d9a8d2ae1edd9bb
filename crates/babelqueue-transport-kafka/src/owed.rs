//! Commits owed: positions the in-flight book released (every record before them settled)
//! that wait for the commit interval, so a busy consumer commits a few times a second instead
//! of once per batch. Pure bookkeeping, no I/O: the transport parks positions here, a
//! background flush takes them when due, and a revocation or a shutdown takes them at once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::client::TopicPartition;

/// The positions owed a commit, and when the last flush ran.
#[derive(Debug, Default)]
pub(crate) struct Owed {
    positions: BTreeMap<TopicPartition, i64>,
    /// A flush is scheduled (it takes everything parked until it runs).
    scheduled: bool,
    last_flush: Option<Instant>,
}

impl Owed {
    /// `next` (the position after a run of settled records) is owed a commit. Positions of a
    /// partition only move forward: a lower one than already parked is ignored.
    pub(crate) fn park(&mut self, tp: TopicPartition, next: i64) {
        let position = self.positions.entry(tp).or_insert(next);
        *position = (*position).max(next);
    }

    /// Schedules a flush when something is owed and none is scheduled yet: returns how long it
    /// should wait (until `interval` after the last flush, at once for the first).
    pub(crate) fn schedule(&mut self, now: Instant, interval: Duration) -> Option<Duration> {
        if self.scheduled || self.positions.is_empty() {
            return None;
        }
        self.scheduled = true;
        Some(self.last_flush.map_or(Duration::ZERO, |last| {
            (last + interval).saturating_duration_since(now)
        }))
    }

    /// A flush runs now: takes every owed position (the next parked ones need a new flush).
    pub(crate) fn take_for_flush(&mut self, now: Instant) -> Vec<(TopicPartition, i64)> {
        self.scheduled = false;
        self.last_flush = Some(now);
        std::mem::take(&mut self.positions).into_iter().collect()
    }

    /// Takes what is owed on `partitions` (a revocation: committed before they go).
    pub(crate) fn take(&mut self, partitions: &[TopicPartition]) -> Vec<(TopicPartition, i64)> {
        partitions
            .iter()
            .filter_map(|tp| self.positions.remove_entry(tp))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("orders", p)
    }

    #[test]
    fn positions_only_move_forward_and_a_flush_takes_them_all() {
        let mut owed = Owed::default();
        owed.park(tp(0), 5);
        owed.park(tp(0), 3);
        owed.park(tp(1), 2);
        owed.park(tp(0), 9);
        let now = Instant::now();
        assert_eq!(owed.take_for_flush(now), vec![(tp(0), 9), (tp(1), 2)]);
        assert!(owed.take_for_flush(now).is_empty());
    }

    #[test]
    fn one_flush_is_scheduled_at_a_time_and_waits_for_the_interval() {
        let mut owed = Owed::default();
        let interval = Duration::from_millis(200);
        let now = Instant::now();
        assert_eq!(owed.schedule(now, interval), None, "nothing owed");
        owed.park(tp(0), 1);
        assert_eq!(
            owed.schedule(now, interval),
            Some(Duration::ZERO),
            "first: at once"
        );
        owed.park(tp(0), 2);
        assert_eq!(owed.schedule(now, interval), None, "already scheduled");
        assert_eq!(owed.take_for_flush(now), vec![(tp(0), 2)]);
        owed.park(tp(0), 3);
        let later = now + Duration::from_millis(50);
        assert_eq!(
            owed.schedule(later, interval),
            Some(Duration::from_millis(150)),
            "the rest of the interval"
        );
    }

    #[test]
    fn a_revocation_takes_only_its_partitions() {
        let mut owed = Owed::default();
        owed.park(tp(0), 4);
        owed.park(tp(1), 7);
        assert_eq!(owed.take(&[tp(1), tp(2)]), vec![(tp(1), 7)]);
        assert_eq!(owed.take_for_flush(Instant::now()), vec![(tp(0), 4)]);
    }
}
