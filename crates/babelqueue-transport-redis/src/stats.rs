//! What Redis says of a queue ([`Stats`]): the lengths of the layout's keys, read by one
//! script per queue (the keys of one queue share a hash slot; the dead-letter queue's may not,
//! so it is a second call).
//!
//! | figure | reliable layout | Laravel layout |
//! |---|---|---|
//! | `ready` | `LLEN <queue>` | `LLEN queues:<queue>` |
//! | `in_flight` | `LLEN <queue>:processing` | `ZCARD queues:<queue>:reserved` |
//! | `delayed` | `None`: the layout has no delays | `ZCARD queues:<queue>:delayed` |
//! | `dead_letter` | ready list of `<queue>.dlq` | ready list of `<queue>.dlq` |
//!
//! `oldest_ready_age`: now less the `meta.created_at` of the next message a consumer takes (the
//! head of the ready list, decoded on the server so only the number travels), by the
//! producer's clock against this host's; `None` when the list is empty or its head carries no
//! `meta.created_at` (a body that is not an envelope). A message that went back to the queue
//! (a retry) keeps its `created_at`, so its age counts from its first publish.
//!
//! A key that does not exist counts 0; a key of another type is an error naming it.

use async_trait::async_trait;
use babelqueue_core::{QueueStats, Stats, TransportError};

use crate::RedisTransport;
use crate::client::Reply;
use crate::layout::Layout;
use crate::scripts::STATS_LENGTHS;

/// The keys whose lengths make the figures of `queue`, in the order [`project`] reads them.
fn keys(transport: &RedisTransport, queue: &str) -> Vec<String> {
    let o = &transport.options;
    match o.layout {
        Layout::Reliable => vec![o.ready(queue), o.processing(queue)],
        Layout::Laravel => vec![o.ready(queue), o.reserved(queue), o.delayed(queue)],
    }
}

/// The lengths of a script reply, in key order.
fn lengths(reply: Reply) -> Result<Vec<u64>, String> {
    let Reply::Array(items) = reply else {
        return Err(format!("an array of lengths was expected, not {reply:?}"));
    };
    Ok(items
        .iter()
        .map(|r| u64::try_from(r.as_int()).unwrap_or(0))
        .collect())
}

/// The figures from the lengths of [`keys`] (and the dead-letter queue's ready list), and the
/// head's `meta.created_at` (0: none), read at `now_ms` (ms since the epoch).
fn project(
    layout: Layout,
    lengths: &[u64],
    dead_letter: Option<u64>,
    created_at: u64,
    now_ms: u64,
) -> QueueStats {
    let at = |n: usize| lengths.get(n).copied().unwrap_or(0);
    let stats = match layout {
        Layout::Reliable => QueueStats::new("redis: LLEN of the ready and processing lists")
            .ready(at(0))
            .in_flight(at(1)),
        Layout::Laravel => QueueStats::new(
            "redis (laravel): LLEN of the ready list, ZCARD of the reserved and delayed sets",
        )
        .ready(at(0))
        .in_flight(at(1))
        .delayed(at(2)),
    };
    let stats = match dead_letter {
        Some(n) => stats.dead_letter(n),
        None => stats,
    };
    if created_at > 0 && at(0) > 0 {
        stats.oldest_written_at(created_at, now_ms)
    } else {
        stats
    }
}

impl RedisTransport {
    /// The lengths of `keys`, and with `head` one more figure: the first key's head's
    /// `meta.created_at` (0: none).
    async fn lengths_of(&self, keys: Vec<String>, head: bool) -> Result<Vec<u64>, TransportError> {
        let keys = keys.into_iter().map(String::into_bytes).collect();
        let args = if head {
            vec![b"1".to_vec()]
        } else {
            Vec::new()
        };
        let reply = self.client.eval(&STATS_LENGTHS, keys, args).await?;
        lengths(reply).map_err(|e| TransportError::other(format!("redis stats: {e}")))
    }
}

#[async_trait]
impl Stats for RedisTransport {
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError> {
        self.options.check_queue(queue)?;
        let keys = keys(self, queue);
        let count = keys.len();
        let mut own = self.lengths_of(keys, true).await?;
        let created_at = if own.len() > count {
            own.remove(count)
        } else {
            0
        };
        let dlq = format!("{queue}.dlq");
        let dead_letter = self
            .lengths_of(vec![self.options.ready(&dlq)], false)
            .await?
            .first()
            .copied();
        let now_ms = babelqueue_core::stats::now_epoch_ms();
        Ok(project(
            self.options.layout,
            &own,
            dead_letter,
            created_at,
            now_ms,
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_reply_projects_onto_the_layouts_figures() {
        let reply = Reply::Array(vec![Reply::Int(3), Reply::Int(1), Reply::Int(2)]);
        let lengths = lengths(reply).expect("lengths");
        let laravel = project(Layout::Laravel, &lengths, Some(4), 0, 0);
        assert_eq!(
            (
                laravel.ready,
                laravel.in_flight,
                laravel.delayed,
                laravel.dead_letter
            ),
            (Some(3), Some(1), Some(2), Some(4))
        );
        let reliable = project(Layout::Reliable, &lengths[..2], None, 0, 0);
        assert_eq!(
            (reliable.ready, reliable.in_flight, reliable.delayed),
            (Some(3), Some(1), None)
        );
        assert_eq!(reliable.oldest_ready_age, None, "no created_at: no age");
    }

    #[test]
    fn the_heads_created_at_gives_the_age_of_the_oldest_ready_message() {
        let aged = project(Layout::Reliable, &[2, 0], None, 1_000, 4_000);
        assert_eq!(aged.oldest_ready_age, Some(Duration::from_secs(3)));
        // an empty ready list has no age, whatever the script said
        let empty = project(Layout::Reliable, &[0, 5], None, 1_000, 4_000);
        assert_eq!(empty.oldest_ready_age, None);
        // a producer's clock ahead of this host's: zero, not a wrap-around
        let ahead = project(Layout::Laravel, &[1, 0, 0], None, 9_000, 4_000);
        assert_eq!(ahead.oldest_ready_age, Some(Duration::ZERO));
    }

    #[test]
    fn a_reply_that_is_not_an_array_is_an_error() {
        assert!(lengths(Reply::Nil).is_err_and(|e| e.contains("array")));
    }
}
