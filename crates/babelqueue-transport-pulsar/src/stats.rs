//! What Pulsar says of a queue ([`Stats`]): the admin REST API's topic stats
//! (`GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/stats`), for the transport's
//! subscription. Like browsing, it needs [`PulsarOptions::admin_url`](crate::PulsarOptions::admin_url)
//! (default: `BQ_PULSAR_ADMIN_URL`): without it the transport offers no `Stats`.
//!
//! * `ready`: the subscription's `msgBacklog` less its `unackedMessages` (the backlog counts
//!   every message not acknowledged, those delivered included);
//! * `in_flight`: `unackedMessages` (delivered to its consumers, not acknowledged);
//! * `consumers`: the subscription's consumers;
//! * `dead_letter`: the backlog of the same subscription on `<queue>.dlq`, `None` while nobody
//!   subscribed to it (a peek would create the subscription);
//! * `oldest_ready_age`: now less the subscription's `earliestMsgPublishTimeInBacklog` (the
//!   stats are asked with `getEarliestTimeInBacklog=true`): the publish time of the oldest
//!   message not acknowledged, which may be one handed out and not settled yet; `None` for an
//!   empty backlog. The broker's clock against this host's;
//! * `delayed`: `None`.
//!
//! A topic that does not exist counts 0. A topic whose subscription does not exist yet (nobody
//! consumed it) has no figure: the broker counts a backlog per subscription only.

use async_trait::async_trait;
use babelqueue_core::{QueueStats, Stats, TransportError};

use crate::PulsarTransport;
use crate::browse::AdminPeek;
use crate::error::PulsarError;

/// The counts of one subscription.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubscriptionStats {
    /// `msgBacklog`: messages not acknowledged (delivered ones included).
    pub backlog: u64,
    /// `unackedMessages`: delivered to its consumers and not acknowledged.
    pub unacked: u64,
    /// Consumers attached.
    pub consumers: u64,
    /// `earliestMsgPublishTimeInBacklog`: the publish time (ms since the epoch) of the oldest
    /// message not acknowledged; `None` for an empty backlog.
    pub earliest_publish_ms: Option<u64>,
}

/// The counts of `subscription` in a topic-stats body; `None` when it is not there.
pub fn parse(body: &[u8], subscription: &str) -> Result<Option<SubscriptionStats>, PulsarError> {
    let stats: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| PulsarError::Client(format!("the topic stats are not JSON: {e}")))?;
    let Some(sub) = stats.get("subscriptions").and_then(|s| s.get(subscription)) else {
        return Ok(None);
    };
    let count = |name: &str| {
        sub.get(name)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    Ok(Some(SubscriptionStats {
        backlog: count("msgBacklog"),
        unacked: count("unackedMessages"),
        consumers: sub
            .get("consumers")
            .and_then(serde_json::Value::as_array)
            .map_or(0, |c| c.len() as u64),
        // 0 or absent: an empty backlog, or a broker older than the field.
        earliest_publish_ms: sub
            .get("earliestMsgPublishTimeInBacklog")
            .and_then(serde_json::Value::as_u64)
            .filter(|ms| *ms > 0),
    }))
}

/// The counts of the transport's subscription on `topic` over the admin API: zeros when the
/// topic does not exist, `None` when the subscription does not.
pub(crate) async fn subscription_stats(
    admin: &AdminPeek,
    topic: &str,
) -> Result<Option<SubscriptionStats>, PulsarError> {
    match admin.topic_stats(topic).await? {
        Some(body) => parse(&body, admin.subscription()),
        None => Ok(Some(SubscriptionStats::default())),
    }
}

/// The figures of the subscription on the queue and on its dead-letter queue, read at
/// `now_ms` (ms since the epoch).
fn project(
    own: Option<SubscriptionStats>,
    dead_letter: Option<SubscriptionStats>,
    now_ms: u64,
) -> QueueStats {
    let mut stats = QueueStats::new("pulsar: admin topic stats of the subscription");
    if let Some(own) = own {
        stats = stats
            .ready(own.backlog.saturating_sub(own.unacked))
            .in_flight(own.unacked)
            .consumers(own.consumers);
        if let Some(earliest) = own.earliest_publish_ms.filter(|_| own.backlog > 0) {
            stats = stats.oldest_written_at(earliest, now_ms);
        }
    } else {
        stats
            .source
            .push_str(" (no subscription yet: nothing counted)");
    }
    stats.dead_letter = dead_letter.map(|d| d.backlog);
    stats
}

#[async_trait]
impl Stats for PulsarTransport {
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError> {
        let own = self.client.subscription_stats(&self.topic(queue)).await?;
        let dlq = self.topic(&format!("{queue}.dlq"));
        let dead_letter = self.client.subscription_stats(&dlq).await?;
        let now_ms = babelqueue_core::stats::now_epoch_ms();
        Ok(project(own, dead_letter, now_ms))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use babelqueue_core::Transport;

    use super::*;
    use crate::fake::FakePulsar;

    const BODY: &str = r#"{"msgInCounter":9,"subscriptions":{
        "babelqueue":{"msgBacklog":5,"unackedMessages":2,"consumers":[{"consumerName":"a"}],
            "earliestMsgPublishTimeInBacklog":1000},
        "other":{"msgBacklog":40}}}"#;

    #[test]
    fn the_subscription_is_read_from_the_topic_stats() {
        let own = parse(BODY.as_bytes(), "babelqueue").expect("parsed");
        assert_eq!(
            own,
            Some(SubscriptionStats {
                backlog: 5,
                unacked: 2,
                consumers: 1,
                earliest_publish_ms: Some(1000),
            })
        );
        assert_eq!(parse(BODY.as_bytes(), "absent").expect("parsed"), None);
        assert!(parse(b"<html>", "babelqueue").is_err());
        let stats = project(own, None, 4_500);
        assert_eq!(
            (
                stats.ready,
                stats.in_flight,
                stats.consumers,
                stats.dead_letter,
                stats.oldest_ready_age
            ),
            (
                Some(3),
                Some(2),
                Some(1),
                None,
                Some(Duration::from_millis(3_500))
            )
        );
        assert_eq!(project(None, None, 4_500).total(), None);
    }

    #[test]
    fn an_empty_backlog_or_a_clock_behind_has_no_negative_age() {
        let empty = parse(
            br#"{"subscriptions":{"s":{"msgBacklog":0,"earliestMsgPublishTimeInBacklog":0}}}"#,
            "s",
        )
        .expect("parsed");
        assert_eq!(empty.and_then(|s| s.earliest_publish_ms), None);
        assert_eq!(project(empty, None, 9).oldest_ready_age, None);
        let ahead = SubscriptionStats {
            backlog: 1,
            earliest_publish_ms: Some(10_000),
            ..SubscriptionStats::default()
        };
        // the broker's clock ahead of this host's: age zero, not a wrap-around
        assert_eq!(
            project(Some(ahead), None, 9_000).oldest_ready_age,
            Some(Duration::ZERO)
        );
    }

    #[tokio::test]
    async fn the_fake_counts_backlog_and_in_flight() {
        let fake = FakePulsar::new();
        let transport = PulsarTransport::with_client(Arc::new(fake));
        for _ in 0..3 {
            transport.publish("orders", b"{}").await.expect("publish");
        }
        let _held = transport
            .pop("orders", Duration::ZERO)
            .await
            .expect("pop")
            .expect("a message");
        let reader = transport.capabilities();
        let stats = reader.stats_reader().expect("stats").stats("orders").await;
        let stats = stats.expect("stats");
        assert_eq!((stats.ready, stats.in_flight), (Some(2), Some(1)));
    }
}
