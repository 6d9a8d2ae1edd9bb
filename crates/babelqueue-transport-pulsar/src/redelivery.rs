//! The redelivery count [`NativeClient`](crate::NativeClient) keeps itself, because the `pulsar`
//! crate reads the broker's `CommandMessage.redelivery_count` but does not hand it over.
//!
//! One [`Redeliveries`] per topic, owned by the client rather than by one consumer: when the
//! transport builds a topic's consumer again (after a failed receive, or after
//! [`close`](crate::PulsarClient::close)), the counts of the messages this process has already
//! handed out are kept. No I/O; tested offline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Message ids whose count is kept, at most, per topic: acknowledged ids are forgotten at
/// once; when this many are held (messages handed out and never acknowledged here), they are
/// all forgotten together.
pub(crate) const LIMIT: usize = 100_000;

/// How many times this process has handed out each message id of one topic.
#[derive(Debug)]
pub(crate) struct Redeliveries {
    seen: HashMap<String, u32>,
    limit: usize,
}

/// What [`Redeliveries::delivered`] counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counted {
    /// The 0-based redelivery count: how many times the id was handed out before.
    pub(crate) redelivery_count: u32,
    /// How many counts were forgotten first because [`LIMIT`] ids were held (0 mostly).
    pub(crate) forgotten: usize,
}

impl Redeliveries {
    pub(crate) fn new(limit: usize) -> Redeliveries {
        Redeliveries {
            seen: HashMap::new(),
            limit: limit.max(1),
        }
    }

    /// Counts one hand-out of `id`: 0 the first time, one more each time after, until the id
    /// is [`acknowledged`](Redeliveries::acknowledged).
    pub(crate) fn delivered(&mut self, id: &str) -> Counted {
        let redelivery_count = self.seen.get(id).map_or(0, |n| n.saturating_add(1));
        let mut forgotten = 0;
        if !self.seen.contains_key(id) && self.seen.len() >= self.limit {
            forgotten = self.seen.len();
            self.seen.clear();
        }
        self.seen.insert(id.to_owned(), redelivery_count);
        Counted {
            redelivery_count,
            forgotten,
        }
    }

    /// Forgets `id`: it was acknowledged and will not come back.
    pub(crate) fn acknowledged(&mut self, id: &str) {
        self.seen.remove(id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.len()
    }
}

/// The counts of every topic a client consumes, shared with its consumer tasks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counts {
    topics: Arc<Mutex<HashMap<String, Arc<Mutex<Redeliveries>>>>>,
}

impl Counts {
    /// The counts of `topic`, created empty the first time.
    pub(crate) fn topic(&self, topic: &str) -> Shared {
        let mut topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        Shared(
            topics
                .entry(topic.to_owned())
                .or_insert_with(|| Arc::new(Mutex::new(Redeliveries::new(LIMIT))))
                .clone(),
        )
    }
}

/// One topic's counts, as a consumer task holds them.
#[derive(Debug, Clone)]
pub(crate) struct Shared(Arc<Mutex<Redeliveries>>);

impl Shared {
    /// The counts, locked (never across an await). A panic while they were held leaves them
    /// usable: every update is a single map operation.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Redeliveries> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_hand_out_counts_one_more_until_the_id_is_acknowledged() {
        let mut r = Redeliveries::new(LIMIT);
        for (id, want) in [
            ("1:0:-1:-1", 0),
            ("1:0:-1:-1", 1),
            ("1:1:-1:-1", 0),
            ("1:0:-1:-1", 2),
            ("1:1:-1:-1", 1),
        ] {
            assert_eq!(r.delivered(id).redelivery_count, want, "{id}");
        }
        r.acknowledged("1:0:-1:-1");
        assert_eq!(
            r.delivered("1:0:-1:-1").redelivery_count,
            0,
            "forgotten once acked"
        );
        assert_eq!(
            r.delivered("1:1:-1:-1").redelivery_count,
            2,
            "the other is kept"
        );
        r.acknowledged("never-seen");
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn a_full_map_forgets_every_count_before_a_new_id() {
        let mut r = Redeliveries::new(2);
        assert_eq!(r.delivered("a").forgotten, 0);
        assert_eq!(r.delivered("b").forgotten, 0);
        // a known id is counted without forgetting anything
        assert_eq!(
            r.delivered("a"),
            Counted {
                redelivery_count: 1,
                forgotten: 0
            }
        );
        assert_eq!(
            r.delivered("c"),
            Counted {
                redelivery_count: 0,
                forgotten: 2
            }
        );
        assert_eq!(r.delivered("a").redelivery_count, 0, "a was forgotten");
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn the_count_saturates() {
        let mut r = Redeliveries::new(LIMIT);
        r.seen.insert("x".to_owned(), u32::MAX);
        assert_eq!(r.delivered("x").redelivery_count, u32::MAX);
    }

    /// A consumer built again for a topic (a new task) gets the same counts; another topic,
    /// or another client, its own.
    #[test]
    fn a_topics_counts_outlive_the_consumer_that_took_them() {
        let counts = Counts::default();
        let first_consumer = counts.topic("persistent://public/default/orders");
        assert_eq!(
            first_consumer
                .lock()
                .delivered("7:3:-1:-1")
                .redelivery_count,
            0
        );
        drop(first_consumer);
        let rebuilt = counts.topic("persistent://public/default/orders");
        assert_eq!(rebuilt.lock().delivered("7:3:-1:-1").redelivery_count, 1);
        let other_topic = counts.topic("persistent://public/default/invoices");
        assert_eq!(
            other_topic.lock().delivered("7:3:-1:-1").redelivery_count,
            0
        );
        let other_client = Counts::default().topic("persistent://public/default/orders");
        assert_eq!(
            other_client.lock().delivered("7:3:-1:-1").redelivery_count,
            0
        );
    }
}
