//! What Artemis says of a queue ([`Stats`]): five attributes of the queue's management
//! resource (`queue.<name>`), read through the broker's management address
//! ([`Client::read_attributes`](crate::Client::read_attributes)).
//!
//! * `ready`: `messageCount` less `deliveringCount` and `scheduledCount` (Artemis counts both
//!   in `messageCount`), never below 0;
//! * `in_flight`: `deliveringCount` (handed to a consumer, not settled);
//! * `delayed`: `scheduledCount` (scheduled delivery: a delayed publish, the retry back-off);
//! * `consumers`: `consumerCount`;
//! * `dead_letter`: `messageCount` of `<queue>.dlq`, `None` while that queue does not exist;
//! * `oldest_ready_age`: now less `firstMessageTimestamp`, the timestamp of the message at the
//!   head of the queue: its AMQP `creation-time`, which the transport sets from the envelope's
//!   `meta.created_at`. `None` when the queue is empty or the head message has no timestamp (a
//!   body that is not an envelope). (`firstMessageAge` would count such a message's age from
//!   1970.)
//!
//! A queue Artemis does not know (never used: the transport creates it on first use) counts 0
//! everywhere. The user needs the `manage` permission on the management address.

use async_trait::async_trait;
use babelqueue_core::{QueueStats, Stats, TransportError};

use crate::client::ManagementReply;
use crate::error::ArtemisError;
use crate::transport::ArtemisTransport;

/// The attributes read, in the order [`Figures::parse`] expects them.
const ATTRIBUTES: [&str; 5] = [
    "messageCount",
    "deliveringCount",
    "scheduledCount",
    "consumerCount",
    "firstMessageTimestamp",
];

const SOURCE: &str = "artemis: management attributes messageCount, deliveringCount, \
                      scheduledCount, consumerCount, firstMessageTimestamp";

/// The attributes of one queue.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Figures {
    messages: u64,
    delivering: u64,
    scheduled: u64,
    consumers: u64,
    /// `firstMessageTimestamp` in ms since the epoch; `None` for an empty queue or a head
    /// message without a timestamp.
    first_timestamp_ms: Option<u64>,
}

impl Figures {
    /// The figures in `replies` (one per [`ATTRIBUTES`] entry); `None` when Artemis has no
    /// such queue.
    fn parse(resource: &str, replies: &[ManagementReply]) -> Result<Option<Figures>, ArtemisError> {
        if replies.len() != ATTRIBUTES.len() {
            return Err(ArtemisError::Management {
                request: resource.to_owned(),
                reason: format!(
                    "{} replies to {} attribute reads",
                    replies.len(),
                    ATTRIBUTES.len()
                ),
            });
        }
        if replies
            .iter()
            .all(|reply| !reply.succeeded && no_such_resource(&reply.body))
        {
            return Ok(None);
        }
        let failed = |attribute: &str, reason: String| ArtemisError::Management {
            request: format!("{resource}.{attribute}"),
            reason,
        };
        let mut values = [0u64; 4];
        for ((value, reply), attribute) in values.iter_mut().zip(replies).zip(ATTRIBUTES) {
            *value = attribute_value(reply).map_err(|reason| failed(attribute, reason))?;
        }
        let [messages, delivering, scheduled, consumers] = values;
        // The age is optional: a head message without a timestamp, or a reply Artemis does not
        // render as JSON (seen for some bodies under the chaos suite), leaves it unknown
        // instead of failing the counts.
        let first_timestamp_ms = match &replies[4] {
            reply if is_null(reply) => None,
            reply => attribute_value(reply).ok().filter(|ms| *ms > 0),
        };
        Ok(Some(Figures {
            messages,
            delivering,
            scheduled,
            consumers,
            first_timestamp_ms,
        }))
    }
}

/// The number a successful reply carries: its body is a JSON array holding the value.
fn attribute_value(reply: &ManagementReply) -> Result<u64, String> {
    if !reply.succeeded {
        return Err(format!(
            "the broker answered with a failure: {}",
            reply.body
        ));
    }
    let parsed: serde_json::Value = serde_json::from_str(reply.body.trim())
        .map_err(|e| format!("the reply {:?} is not JSON: {e}", reply.body))?;
    let value = match &parsed {
        serde_json::Value::Array(items) => items.first(),
        other => Some(other),
    };
    value
        .and_then(|v| {
            v.as_u64()
                .or_else(|| v.as_i64().map(|n| n.max(0).unsigned_abs()))
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        })
        .ok_or_else(|| format!("the reply {:?} holds no count", reply.body))
}

/// Whether a successful reply holds no value (`[null]`: what an age of an empty queue reads).
fn is_null(reply: &ManagementReply) -> bool {
    if !reply.succeeded {
        return false;
    }
    match serde_json::from_str::<serde_json::Value>(reply.body.trim()) {
        Ok(serde_json::Value::Null) => true,
        Ok(serde_json::Value::Array(items)) => items.first().is_none_or(serde_json::Value::is_null),
        _ => false,
    }
}

/// Whether a failed reply can mean the resource does not exist. Artemis 2.40 hides the cause
/// of a failed attribute read behind `Problem while retrieving attribute <name>`; older brokers say `Cannot find resource with name queue.<name>`. A queue counts as
/// absent only when all five reads failed so, as they do for a queue never created.
fn no_such_resource(body: &str) -> bool {
    body.contains("Cannot find resource") || body.contains("Problem while retrieving attribute")
}

/// The figures of the queue and its dead-letter queue, read at `now_ms` (ms since the epoch).
fn project(own: Option<Figures>, dead_letter: Option<Figures>, now_ms: u64) -> QueueStats {
    let own = own.unwrap_or_default();
    let ready = own
        .messages
        .saturating_sub(own.delivering)
        .saturating_sub(own.scheduled);
    let stats = QueueStats::new(SOURCE)
        .ready(ready)
        .in_flight(own.delivering)
        .delayed(own.scheduled)
        .consumers(own.consumers);
    let stats = match own.first_timestamp_ms {
        Some(ms) => stats.oldest_written_at(ms, now_ms),
        None => stats,
    };
    match dead_letter {
        Some(dlq) => stats.dead_letter(dlq.messages),
        None => stats,
    }
}

impl ArtemisTransport {
    async fn figures(&self, queue: &str) -> Result<Option<Figures>, ArtemisError> {
        let resource = format!("queue.{queue}");
        let replies = self
            .client()
            .read_attributes(&resource, &ATTRIBUTES)
            .await?;
        Figures::parse(&resource, &replies)
    }
}

#[async_trait]
impl Stats for ArtemisTransport {
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError> {
        let own = self.figures(queue).await?;
        let dead_letter = self.figures(&format!("{queue}.dlq")).await?;
        let now_ms = babelqueue_core::stats::now_epoch_ms();
        Ok(project(own, dead_letter, now_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(body: &str) -> ManagementReply {
        ManagementReply {
            succeeded: true,
            body: body.to_owned(),
        }
    }

    fn failed(body: &str) -> ManagementReply {
        ManagementReply {
            succeeded: false,
            body: body.to_owned(),
        }
    }

    #[test]
    fn ready_is_the_message_count_less_delivering_and_scheduled() {
        let own = Figures::parse(
            "queue.q",
            &[ok("[7]"), ok("[2]"), ok("[1]"), ok("[3]"), ok("[1500]")],
        )
        .expect("parsed");
        let dlq = Figures::parse(
            "queue.q.dlq",
            &[ok("[4]"), ok("[0]"), ok("[0]"), ok("[0]"), ok("[null]")],
        )
        .expect("parsed");
        let stats = project(own, dlq, 3_000);
        assert_eq!(
            (
                stats.ready,
                stats.in_flight,
                stats.delayed,
                stats.consumers,
                stats.dead_letter
            ),
            (Some(4), Some(2), Some(1), Some(3), Some(4))
        );
        assert_eq!(stats.total(), Some(7));
        assert_eq!(
            stats.oldest_ready_age,
            Some(std::time::Duration::from_millis(1500))
        );
        assert_eq!(dlq.and_then(|d| d.first_timestamp_ms), None);
        // a head message without a timestamp (not an envelope) has no age
        let untimed = Figures::parse(
            "queue.q",
            &[ok("[1]"), ok("[0]"), ok("[0]"), ok("[0]"), ok("[0]")],
        )
        .expect("parsed");
        assert_eq!(project(untimed, None, 2_000).oldest_ready_age, None);
    }

    #[test]
    fn ready_never_goes_below_zero() {
        // the attributes are read one after the other; a delivery can start in between
        let own = Figures {
            messages: 1,
            delivering: 2,
            scheduled: 1,
            consumers: 0,
            first_timestamp_ms: None,
        };
        assert_eq!(project(Some(own), None, 0).ready, Some(0));
    }

    #[test]
    fn an_unknown_queue_is_empty_and_an_unknown_dead_letter_queue_is_none() {
        let unknown = failed("[\"Problem while retrieving attribute messageCount\"]");
        let replies = vec![unknown.clone(); 5];
        assert_eq!(
            Figures::parse("queue.q.dlq", &replies).expect("parsed"),
            None
        );
        let older = vec![failed("Cannot find resource with name queue.q.dlq"); 5];
        assert_eq!(Figures::parse("queue.q.dlq", &older).expect("parsed"), None);
        // one attribute read failing so among others that succeeded is an error
        let mixed = [ok("[1]"), unknown, ok("[0]"), ok("[0]"), ok("[null]")];
        let err = Figures::parse("queue.q", &mixed).expect_err("one failed");
        assert!(err.to_string().contains("queue.q.deliveringCount"), "{err}");
        let stats = project(None, None, 0);
        assert_eq!(stats.total(), Some(0));
        assert_eq!((stats.consumers, stats.dead_letter), (Some(0), None));
    }

    #[test]
    fn other_failures_and_unreadable_bodies_are_errors_that_name_them() {
        let denied = failed("AMQ229213: User: bq does not have permission='MANAGE'");
        let replies = [denied, ok("[0]"), ok("[0]"), ok("[0]"), ok("[null]")];
        let err = Figures::parse("queue.q", &replies).expect_err("refused");
        assert!(err.to_string().contains("queue.q.messageCount"), "{err}");
        assert!(err.to_string().contains("MANAGE"), "{err}");
        let garbled = [ok("[0]"), ok("nope"), ok("[0]"), ok("[0]"), ok("[0]")];
        let err = Figures::parse("queue.q", &garbled).expect_err("unreadable");
        assert!(err.to_string().contains("deliveringCount"), "{err}");
        // an unreadable age leaves the age unknown, and the counts stand
        for age in [ok("soon"), ok("@"), failed("no timestamp")] {
            let figures = Figures::parse(
                "queue.q",
                &[ok("[2]"), ok("[0]"), ok("[0]"), ok("[0]"), age],
            )
            .expect("the counts stand")
            .expect("a queue");
            assert_eq!((figures.messages, figures.first_timestamp_ms), (2, None));
        }
        assert!(Figures::parse("queue.q", &[ok("[0]")]).is_err());
    }

    #[tokio::test]
    async fn a_client_without_management_requests_says_it_is_unsupported() {
        let transport = ArtemisTransport::with_client(
            crate::fake::FakeClient::new(),
            std::time::Duration::from_millis(5),
        );
        let err = transport
            .stats("q")
            .await
            .expect_err("the fake has no management");
        assert_eq!(err.kind(), babelqueue_core::TransportErrorKind::Unsupported);
    }

    #[test]
    fn a_count_reads_from_a_number_a_string_or_a_bare_value() {
        assert_eq!(attribute_value(&ok("[5]")), Ok(5));
        assert_eq!(attribute_value(&ok("[\"6\"]")), Ok(6));
        assert_eq!(attribute_value(&ok(" 8 ")), Ok(8));
        assert!(attribute_value(&ok("[]")).is_err());
    }
}
