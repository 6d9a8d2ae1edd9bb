//! What the transport declares, per queue type (pure functions, no network), and what a refused
//! declaration means.
//!
//! Every queue the transport touches is declared lazily, once per connection, with the same
//! options and arguments: the work queue, its `<queue>.dlq`, and any other queue a retry or
//! dead-letter copy goes to. (RabbitMQ has no per-message delay here, so there are no retry or
//! delay queues of the transport's own.)
//!
//! | `queue_type` | durable | exclusive | auto-delete | arguments |
//! |---|---|---|---|---|
//! | `classic` (default) | yes | no | no | none, as every BabelQueue SDK declares them |
//! | `quorum` | yes | no | no | `x-queue-type` = `quorum`, `x-delivery-limit` = [`QUORUM_DELIVERY_LIMIT`] |
//!
//! # The delivery limit
//!
//! The runtime counts attempts itself: a retry is a confirmed **copy** (attempts + 1) and an
//! acknowledgement of the original, a dead-letter record a confirmed copy to `<queue>.dlq`. The
//! broker's own count of a message only grows when the same message goes back to its queue:
//! a `basic.nack` with requeue (a delivery the runtime leaves unsettled because its dead-letter
//! write failed) and, up to RabbitMQ 4.2, every return of an unacknowledged delivery when its
//! channel closes (a worker that dies, a node that is killed). None of those is a failed
//! attempt, and a message over the limit is dropped (no dead-letter exchange is declared). So
//! the limit must never be reached: it is declared explicitly, as high as an AMQP signed
//! 32-bit integer goes. Leaving it out is not an option on RabbitMQ 4.0+, whose default is 20;
//! `-1` ("unlimited" from 4.0) would make RabbitMQ 3.x drop every returned message.
//!
//! # Quorum queues and the other features
//!
//! * Priorities (`x-max-priority`), exclusive, auto-delete and non-durable queues, TTLs and
//!   dead-letter exchanges: the transport declares none of them.
//! * Global QoS (a channel-wide `basic.qos`): quorum queues refuse it, and a consumer of one on
//!   such a channel receives nothing. With `queue_type=quorum` every consumer gets a prefetch of
//!   its own (`global=false`), also a bare `pop` loop, whose prefetch then cannot grow and
//!   starts at [`QUORUM_POP_PREFETCH`] (see [`crate::transport`]).
//! * A queue that exists with another type or other arguments is refused by RabbitMQ
//!   (`PRECONDITION_FAILED`, [`inequivalent`]); the transport reports the queue, its type and
//!   the option ([`AmqpError::QueueTypeMismatch`]).

use std::fmt;
use std::time::Duration;

use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

use crate::error::AmqpError;

/// The type of the queues the transport declares: the URL's `queue_type=classic|quorum`, or
/// [`AmqpOptions::queue_type`](crate::AmqpOptions::queue_type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum QueueType {
    /// A classic queue, declared without arguments, as every BabelQueue SDK declares it (the
    /// default).
    #[default]
    Classic,
    /// A quorum queue (RabbitMQ 3.8+): replicated over the cluster's nodes by Raft, with
    /// acknowledgements that survive a node failure.
    Quorum,
}

impl QueueType {
    /// The option's value: `classic` or `quorum`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
        }
    }

    /// Reads the option's value (`classic` or `quorum`, any case).
    pub fn parse(text: &str) -> Option<QueueType> {
        match text.to_ascii_lowercase().as_str() {
            "classic" => Some(QueueType::Classic),
            "quorum" => Some(QueueType::Quorum),
            _ => None,
        }
    }

    /// Whether a consumer of such a queue needs a prefetch of its own (`basic.qos` with
    /// `global=false`): quorum queues accept no channel-wide one.
    pub fn needs_consumer_prefetch(self) -> bool {
        matches!(self, QueueType::Quorum)
    }

    /// Whether a negative publisher confirm from such a queue may be a moment without a
    /// leader, so the message is worth sending again on a new channel. A classic queue's
    /// refusal is the queue's answer (`x-overflow=reject-publish` on a full queue, a queue
    /// that cannot take the message): sending again would only hold up the caller, who may be
    /// a worker writing a dead-letter record with messages queued behind it.
    pub fn resends_refusals(self) -> bool {
        matches!(self, QueueType::Quorum)
    }
}

/// How long a message refused by a quorum queue is sent again for, at most (and never beyond
/// `reconnect_wait`). A quorum queue elects a new leader within a second of its node dying
/// (200 ms measured on the test cluster); a queue that still refuses after this is refusing
/// for good (full, with `x-overflow=reject-publish`), and the publish fails with
/// [`AmqpError::Nacked`].
pub const REFUSAL_RESEND_WINDOW: Duration = Duration::from_secs(2);

/// What to do after the `refusals`-th negative confirm in a row of one publish, with `left`
/// until the publish's deadline: `Some(pause)` to send it again on a new channel after the
/// pause (doubling from `min`, at most 1 s, never past the deadline), `None` to fail.
pub fn resend_after_refusal(
    queue_type: QueueType,
    refusals: u32,
    min: Duration,
    left: Duration,
) -> Option<Duration> {
    if !queue_type.resends_refusals() || left.is_zero() {
        return None;
    }
    Some(
        min.saturating_mul(1 << refusals.clamp(1, 4))
            .min(Duration::from_secs(1))
            .min(left),
    )
}

impl fmt::Display for QueueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `x-delivery-limit` of the quorum queues the transport declares: the largest AMQP signed
/// 32-bit integer, so the broker never drops a message the runtime still counts attempts for
/// (see the [module documentation](self)).
pub const QUORUM_DELIVERY_LIMIT: i32 = i32::MAX;

/// The prefetch of a bare `pop` loop's consumer on a quorum queue (nothing announced, nothing
/// fixed): it cannot grow while the consumer runs, so it starts where a loop that holds a few
/// deliveries at once still gets the next one.
pub const QUORUM_POP_PREFETCH: u16 = 16;

/// The arguments every queue of `queue_type` is declared with.
///
/// ```
/// use babelqueue_transport_amqp::topology::{QUORUM_DELIVERY_LIMIT, QueueType, declare_arguments};
/// use lapin::types::AMQPValue;
///
/// assert!(declare_arguments(QueueType::Classic).inner().is_empty());
/// let quorum = declare_arguments(QueueType::Quorum);
/// assert_eq!(quorum.inner()["x-queue-type"], AMQPValue::LongString("quorum".into()));
/// assert_eq!(quorum.inner()["x-delivery-limit"], AMQPValue::LongInt(QUORUM_DELIVERY_LIMIT));
/// ```
pub fn declare_arguments(queue_type: QueueType) -> FieldTable {
    let mut arguments = FieldTable::default();
    if queue_type == QueueType::Quorum {
        arguments.insert(
            ShortString::from("x-queue-type"),
            AMQPValue::LongString(LongString::from("quorum")),
        );
        arguments.insert(
            ShortString::from("x-delivery-limit"),
            AMQPValue::LongInt(QUORUM_DELIVERY_LIMIT),
        );
    }
    arguments
}

/// What RabbitMQ said when it refused a declaration for an argument that differs from the
/// queue's: `PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/':
/// received none but current is the value 'quorum' of type 'longstr'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inequivalent {
    /// The argument (`x-queue-type`, `x-delivery-limit` …).
    pub argument: String,
    /// Its value in the refused declaration; `None` when it was absent.
    pub received: Option<String>,
    /// Its value on the existing queue; `None` when the queue has none.
    pub current: Option<String>,
}

/// Reads RabbitMQ's reply text to a refused declaration; `None` when it is not about an
/// inequivalent argument (a `durable` or `exclusive` mismatch, another refusal).
///
/// ```
/// use babelqueue_transport_amqp::topology::inequivalent;
///
/// let found = inequivalent("PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' \
///     in vhost '/': received 'classic' but current is 'quorum'").unwrap();
/// assert_eq!(found.argument, "x-queue-type");
/// assert_eq!(found.received.as_deref(), Some("classic"));
/// assert_eq!(found.current.as_deref(), Some("quorum"));
/// ```
pub fn inequivalent(reply: &str) -> Option<Inequivalent> {
    const ARG: &str = "inequivalent arg '";
    let start = reply.find(ARG)? + ARG.len();
    let argument = &reply[start..start + reply[start..].find('\'')?];
    let values = &reply[start + argument.len()..];
    let received = values.rfind(": received ")? + ": received ".len();
    let values = &values[received..];
    let (received, current) = values.split_once(" but current is ")?;
    Some(Inequivalent {
        argument: argument.to_owned(),
        received: value(received),
        current: value(current),
    })
}

/// `none` → `None`; `'quorum'` or `the value 'quorum' of type 'longstr'` → `quorum`.
fn value(text: &str) -> Option<String> {
    let text = text.trim();
    if text.starts_with("none") {
        return None;
    }
    let start = text.find('\'')? + 1;
    let end = start + text[start..].find('\'')?;
    Some(text[start..end].to_owned())
}

/// What a refused declaration of `queue` means for a transport that declares `wanted` queues:
/// a queue of another type is [`AmqpError::QueueTypeMismatch`] (a configuration error that
/// names the queue, its type and the option); anything else is returned as it is.
pub(crate) fn explain(error: AmqpError, wanted: QueueType) -> AmqpError {
    let AmqpError::DeclareMismatch { queue, detail } = error else {
        return error;
    };
    match inequivalent(&detail) {
        Some(found) if found.argument == "x-queue-type" => AmqpError::QueueTypeMismatch {
            queue,
            // A queue without the argument is classic (what every SDK declares).
            existing: found.current.unwrap_or_else(|| "classic".to_owned()),
            wanted,
        },
        _ => AmqpError::DeclareMismatch { queue, detail },
    }
}

#[cfg(test)]
mod tests {
    use babelqueue_core::TransportErrorKind;

    use super::*;

    #[test]
    fn declare_arguments_row_by_row() {
        let long = |s: &str| AMQPValue::LongString(LongString::from(s));
        let rows: [(QueueType, &[(&str, AMQPValue)]); 2] = [
            (QueueType::Classic, &[]),
            (
                QueueType::Quorum,
                &[
                    ("x-delivery-limit", AMQPValue::LongInt(2_147_483_647)),
                    ("x-queue-type", long("quorum")),
                ],
            ),
        ];
        for (queue_type, expected) in rows {
            let declared = declare_arguments(queue_type);
            let got: Vec<(String, AMQPValue)> = declared
                .inner()
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            let expected: Vec<(String, AMQPValue)> = expected
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect();
            assert_eq!(got, expected, "{queue_type}");
        }
        // No argument quorum queues refuse, and no delay or dead-letter routing of the broker's.
        for refused in [
            "x-max-priority",
            "x-queue-mode",
            "x-dead-letter-exchange",
            "x-message-ttl",
        ] {
            assert!(
                !declare_arguments(QueueType::Quorum)
                    .inner()
                    .contains_key(refused),
                "{refused}"
            );
        }
    }

    #[test]
    fn refusals_are_sent_again_only_to_quorum_queues_row_by_row() {
        let ms = Duration::from_millis;
        let min = ms(100);
        // (queue type, refusals so far, time left, the pause before the resend or None)
        let rows = [
            (QueueType::Classic, 1, ms(2000), None),
            (QueueType::Classic, 3, ms(2000), None),
            (QueueType::Quorum, 1, ms(2000), Some(ms(200))),
            (QueueType::Quorum, 2, ms(2000), Some(ms(400))),
            (QueueType::Quorum, 3, ms(2000), Some(ms(800))),
            (QueueType::Quorum, 4, ms(2000), Some(ms(1000))),
            (QueueType::Quorum, 40, ms(2000), Some(ms(1000))),
            (QueueType::Quorum, 1, ms(50), Some(ms(50))),
            (QueueType::Quorum, 1, Duration::ZERO, None),
        ];
        for (queue_type, refusals, left, expected) in rows {
            assert_eq!(
                resend_after_refusal(queue_type, refusals, min, left),
                expected,
                "{queue_type} after {refusals} refusals with {left:?} left"
            );
        }
        assert!(REFUSAL_RESEND_WINDOW <= Duration::from_secs(2));
    }

    #[test]
    fn queue_type_option_values() {
        for (text, parsed) in [
            ("classic", Some(QueueType::Classic)),
            ("quorum", Some(QueueType::Quorum)),
            ("Quorum", Some(QueueType::Quorum)),
            ("stream", None),
            ("", None),
            ("quorum ", None),
        ] {
            assert_eq!(QueueType::parse(text), parsed, "{text:?}");
        }
        assert_eq!(QueueType::default(), QueueType::Classic);
        assert!(QueueType::Quorum.needs_consumer_prefetch());
        assert!(!QueueType::Classic.needs_consumer_prefetch());
    }

    /// RabbitMQ 3.10.8's replies, as the live probe received them.
    #[test]
    fn refused_declarations_are_read_row_by_row() {
        /// The argument, the value received and the current value.
        type Read<'a> = Option<(&'a str, Option<&'a str>, Option<&'a str>)>;
        let rows: [(&str, Read<'_>); 7] = [
            (
                "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'bq-a' in vhost '/': received none but current is the value 'quorum' of type 'longstr'",
                Some(("x-queue-type", None, Some("quorum"))),
            ),
            (
                "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'bq-a' in vhost '/': received 'classic' but current is 'quorum'",
                Some(("x-queue-type", Some("classic"), Some("quorum"))),
            ),
            (
                "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'bq-b' in vhost '/': received the value 'quorum' of type 'longstr' but current is none",
                Some(("x-queue-type", Some("quorum"), None)),
            ),
            (
                "PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'bq-a' in vhost '/': received none but current is the value '2147483647' of type 'signedint'",
                Some(("x-delivery-limit", None, Some("2147483647"))),
            ),
            (
                "PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'a: received x' in vhost 'v': received '5' but current is '2147483647'",
                Some(("x-delivery-limit", Some("5"), Some("2147483647"))),
            ),
            (
                "PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue 'bq-c' in vhost '/' of queue type rabbit_quorum_queue",
                None,
            ),
            (
                "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/'",
                None,
            ),
        ];
        for (reply, expected) in rows {
            let got = inequivalent(reply);
            let expected = expected.map(|(argument, received, current)| Inequivalent {
                argument: argument.to_owned(),
                received: received.map(str::to_owned),
                current: current.map(str::to_owned),
            });
            assert_eq!(got, expected, "{reply}");
        }
    }

    #[test]
    fn a_queue_of_another_type_is_a_configuration_error_naming_queue_type_and_option() {
        let mismatch = |detail: &str| AmqpError::DeclareMismatch {
            queue: "orders".into(),
            detail: detail.into(),
        };
        let rows = [
            (
                "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received none but current is the value 'quorum' of type 'longstr'",
                QueueType::Classic,
                "quorum",
            ),
            (
                "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received the value 'quorum' of type 'longstr' but current is none",
                QueueType::Quorum,
                "classic",
            ),
            (
                "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received the value 'quorum' of type 'longstr' but current is the value 'stream' of type 'longstr'",
                QueueType::Quorum,
                "stream",
            ),
        ];
        for (detail, wanted, existing) in rows {
            let error = explain(mismatch(detail), wanted);
            let AmqpError::QueueTypeMismatch {
                queue,
                existing: found,
                wanted: asked,
            } = &error
            else {
                panic!("{error:?}");
            };
            assert_eq!(
                (queue.as_str(), found.as_str(), *asked),
                ("orders", existing, wanted)
            );
            assert_eq!(error.kind(), TransportErrorKind::Config);
            assert!(!error.is_transient());
            let text = error.to_string();
            for says in [
                "\"orders\"",
                &format!("a {existing} queue"),
                &format!("queue_type={wanted}"),
            ] {
                assert!(text.contains(says), "{says}: {text}");
            }
        }
        // Another argument stays a declare mismatch; other errors pass through.
        let other = explain(
            mismatch(
                "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'orders' in vhost '/': received none but current is '60000'",
            ),
            QueueType::Classic,
        );
        assert!(
            matches!(other, AmqpError::DeclareMismatch { .. }),
            "{other:?}"
        );
        let passed = explain(AmqpError::Timeout("t".into()), QueueType::Quorum);
        assert!(matches!(passed, AmqpError::Timeout(_)));
    }
}
