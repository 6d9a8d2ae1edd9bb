//! The first step of every dispatch: from a delivery's body and [`Facts`] to what the runtime
//! is holding ([`Class`]). Pure (no I/O, no clock, no logging), tested row by row; the runtime
//! logs what it found and asks [`decide`](crate::decide) what to do.
//!
//! The order is the contract's:
//!
//! 1. the schema-version gate, on the property the broker carried, before anything reads the
//!    body ([`Class::Gated`]);
//! 2. an attempt the broker could not count ([`Facts::attempts_not_counted`]), then the strict
//!    classifier of the envelope crate ([`Envelope::decode_classified`], the verdict of
//!    `poison_cause` and the lenient decode out of one scan): [`Class::Poison`], with its typed
//!    cause and its delivery count;
//! 3. otherwise the body's `attempts` reconciled with the broker's count, decoded leniently,
//!    and routed by the out-of-band URN when there is one ([`Class::Readable`]).

use std::borrow::Cow;

use babelqueue_envelope::{Envelope, PoisonCause, ascii};

use crate::attempts;
use crate::delivery::Facts;

/// Why a delivery is poison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The body is not a readable envelope with an identity.
    Body(PoisonCause),
    /// The broker could not count the attempt ([`Facts::attempts_not_counted`]) of a body that
    /// is otherwise readable; the record's error says only `Undecodable BabelQueue body`, as the
    /// reference binding writes it. (When the body is poison by itself, its own [`Cause::Body`]
    /// is reported instead: the reference writes the bare text for those too, which tells an
    /// operator nothing about what is wrong with the message.)
    NotCounted,
}

impl Cause {
    /// The typed cause of a poison body, when there is one.
    pub fn poison_cause(&self) -> Option<&PoisonCause> {
        match self {
            Cause::Body(cause) => Some(cause),
            Cause::NotCounted => None,
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Body(cause) => write!(f, "{cause}"),
            Cause::NotCounted => f.write_str("the broker could not count its attempts"),
        }
    }
}

/// A poison delivery: never decoded, never handed to a handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poison {
    /// Why.
    pub cause: Cause,
    /// Deliveries it has had ([`attempts::poison_attempts`]); 0 when not counted.
    pub attempts: i64,
    /// The `original_queue` of its record.
    pub original_queue: String,
    /// Dead-lettered in every configuration ([`Facts::poison_always_dead_lettered`]).
    pub always_dead_lettered: bool,
}

/// What a delivery is.
#[derive(Debug, Clone, PartialEq)]
pub enum Class<'a> {
    /// The schema-version gate rejected it: never decoded, handled or retried.
    Gated {
        /// The declared version as carried (uncapped, unescaped; see
        /// [`gate::escape`](crate::gate::escape) for logs).
        declared: String,
    },
    /// Not a readable envelope.
    Poison(Poison),
    /// A readable envelope.
    Readable {
        /// The body with `attempts` reconciled (borrowed when nothing changed): what a
        /// release of the unchanged message sends back.
        body: Cow<'a, [u8]>,
        /// The decoded envelope (forbidden keys dropped, the `urn` alias folded).
        envelope: Envelope,
        /// The URN it routes by: the out-of-band one when the broker carried one, else the
        /// body's (possibly empty: an envelope with no identity).
        urn: String,
        /// Whether `urn` came out of band.
        routed: bool,
    },
}

/// Classifies `body`, consumed from `queue`, with the facts its transport reported.
pub fn classify<'a>(body: &'a [u8], facts: &Facts, queue: &str) -> Class<'a> {
    if let Some(declared) = facts.declared_version.rejected() {
        return Class::Gated { declared };
    }
    let original_queue = || {
        facts
            .original_queue
            .clone()
            .filter(|q| !q.is_empty())
            .unwrap_or_else(|| queue.to_owned())
    };
    if facts.attempts_not_counted {
        let cause = match Envelope::decode_classified(body) {
            Err(cause) => Cause::Body(cause),
            Ok(_) => Cause::NotCounted,
        };
        return Class::Poison(Poison {
            cause,
            attempts: 0,
            original_queue: original_queue(),
            always_dead_lettered: facts.poison_always_dead_lettered,
        });
    }
    // One scan: the strict verdict and the lenient decode together.
    let mut envelope = match Envelope::decode_classified(body) {
        Ok(decoded) => decoded.envelope,
        Err(cause) => {
            return Class::Poison(Poison {
                cause: Cause::Body(cause),
                attempts: attempts::poison_attempts(body, facts.count),
                original_queue: original_queue(),
                always_dead_lettered: facts.poison_always_dead_lettered,
            });
        }
    };
    let body = match attempts::reconciled(&envelope, facts.count) {
        Some(value) => {
            envelope.set_attempts(value);
            match envelope.encode() {
                Ok(text) => Cow::Owned(text.into_bytes()),
                Err(_) => Cow::Borrowed(body),
            }
        }
        None => Cow::Borrowed(body),
    };
    let own = envelope.urn().into_owned();
    let out_of_band = facts
        .urn
        .as_deref()
        .map(ascii::trim)
        .filter(|urn| !urn.is_empty() && !own.is_empty());
    let (urn, routed) = match out_of_band {
        Some(urn) => (urn.to_owned(), true),
        None => (own, false),
    };
    Class::Readable {
        body,
        envelope,
        urn,
        routed,
    }
}

/// Whether a broker redelivery that [keeps the original](crate::Redeliverer::keeps_original)
/// (its bytes, with the delivery's count raised by one) brings `body` back as the runtime asked
/// with `redeliver`: the next delivery must read as the same kind of message (readable, or
/// poison) carrying the `attempts` counted, and so must the runtime's own body read as a fresh
/// copy. A request that counted nothing (a release) always may: the broker counts the
/// redelivery, as every broker with a native count does. A body whose `attempts` is ahead of
/// the broker's count (a copy another SDK re-published) may not: its next delivery would read
/// the same `attempts` again.
pub fn redelivery_reproduces(
    body: &[u8],
    facts: &Facts,
    queue: &str,
    redeliver: &crate::Redeliver<'_>,
) -> bool {
    let Some(wanted) = redeliver.attempts else {
        return true;
    };
    let mut next = facts.clone();
    next.count = facts.count.map(attempts::one_more_delivery);
    let mut copy = facts.clone();
    copy.count = facts.count.map(attempts::first_delivery);
    match (
        classify(body, &next, queue),
        classify(redeliver.body, &copy, queue),
    ) {
        (Class::Readable { envelope: a, .. }, Class::Readable { envelope: b, .. }) => {
            a.attempts() == wanted && b.attempts() == wanted
        }
        (Class::Poison(a), Class::Poison(b)) => a.attempts == wanted && b.attempts == wanted,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::{Count, Declared};

    const ORDER: &[u8] = br#"{"job":"urn:babel:orders:created","data":{"n":1},"attempts":1}"#;

    fn facts() -> Facts {
        Facts::default()
    }

    #[test]
    fn the_gate_comes_first_whatever_the_body() {
        for body in [ORDER, b"not json"] {
            let mut f = facts();
            f.declared_version = Declared::Text("2".into());
            f.attempts_not_counted = true;
            assert_eq!(
                classify(body, &f, "q"),
                Class::Gated {
                    declared: "2".into()
                }
            );
        }
        let mut f = facts();
        f.declared_version = Declared::Integer(1);
        assert!(matches!(classify(ORDER, &f, "q"), Class::Readable { .. }));
    }

    #[test]
    fn poison_carries_its_typed_cause_count_and_queue() {
        let Class::Poison(p) = classify(br#"{"attempts":4}"#, &facts(), "orders") else {
            panic!()
        };
        assert!(matches!(p.cause, Cause::Body(PoisonCause::NoIdentity)));
        assert_eq!((p.attempts, p.original_queue.as_str()), (4, "orders"));
        assert!(!p.always_dead_lettered);

        let mut f = facts();
        f.count = Some(Count::Carried(2));
        f.original_queue = Some("orders".into());
        f.poison_always_dead_lettered = true;
        let Class::Poison(p) = classify(b"\xff", &f, "orders.retry.1") else {
            panic!()
        };
        assert!(matches!(
            p.cause,
            Cause::Body(PoisonCause::InvalidUtf8 { .. })
        ));
        assert_eq!((p.attempts, p.original_queue.as_str()), (2, "orders"));
        assert!(p.always_dead_lettered);
    }

    #[test]
    fn an_uncounted_attempt_is_poison_even_for_a_readable_body() {
        let mut f = facts();
        f.attempts_not_counted = true;
        let Class::Poison(p) = classify(ORDER, &f, "q") else {
            panic!()
        };
        assert_eq!((p.cause, p.attempts), (Cause::NotCounted, 0));
        // A body that is poison by itself keeps its own cause; nothing is counted.
        let Class::Poison(p) = classify(b"not json", &f, "q") else {
            panic!()
        };
        assert!(matches!(p.cause, Cause::Body(_)), "{:?}", p.cause);
        assert_eq!(p.attempts, 0);
    }

    #[test]
    fn readable_bodies_are_reconciled_and_routed() {
        let mut f = facts();
        f.count = Some(Count::Redelivered(3));
        f.urn = Some(" urn:routed ".into());
        let Class::Readable {
            body,
            envelope,
            urn,
            routed,
        } = classify(ORDER, &f, "q")
        else {
            panic!()
        };
        assert_eq!(envelope.attempts(), 3);
        assert!(body.ends_with(br#""attempts":3}"#));
        assert_eq!((urn.as_str(), routed), ("urn:routed", true));

        let Class::Readable {
            body, urn, routed, ..
        } = classify(ORDER, &facts(), "q")
        else {
            panic!()
        };
        assert!(matches!(body, Cow::Borrowed(_)));
        assert_eq!((urn.as_str(), routed), ("urn:babel:orders:created", false));
    }

    #[test]
    fn a_redelivery_keeping_the_original_is_used_when_the_next_count_gives_what_was_counted() {
        use crate::{Count, Redeliver};
        use std::time::Duration;
        // JetStream: num_delivered 1 on the first delivery, reported as 0 earlier deliveries.
        let facts = |earlier| {
            let mut f = Facts::default();
            f.count = Some(Count::Redelivered(earlier));
            f
        };
        let retry = |body, attempts| Redeliver::new(body, Some(attempts), None);
        // First delivery of a fresh message, retried with attempts 1: it comes back with one
        // earlier delivery, which reads as attempts 1.
        let body = br#"{"job":"urn:x","data":{},"attempts":0}"#;
        let counted = br#"{"job":"urn:x","data":{},"attempts":1}"#;
        assert!(redelivery_reproduces(
            body,
            &facts(0),
            "q",
            &retry(counted, 1)
        ));
        // Third delivery, the body never rewritten: attempts 2 now, 3 next.
        let third = br#"{"job":"urn:x","data":{},"attempts":3}"#;
        assert!(redelivery_reproduces(
            body,
            &facts(2),
            "q",
            &retry(third, 3)
        ));
        // A body ahead of the broker's count (a copy another SDK re-published with attempts
        // 4): the next delivery would still read 4, not 5.
        let ahead = br#"{"job":"urn:x","data":{},"attempts":4}"#;
        let five = br#"{"job":"urn:x","data":{},"attempts":5}"#;
        assert!(!redelivery_reproduces(
            ahead,
            &facts(0),
            "q",
            &retry(five, 5)
        ));
        // A release counts nothing: always the broker's mechanism.
        let release = Redeliver::new(ahead, None, Some(Duration::from_secs(2)));
        assert!(redelivery_reproduces(ahead, &facts(0), "q", &release));
        // The bounded retry of a poison body: the broker keeps the poison bytes and counts.
        let poison = b"\xffnot json";
        assert!(redelivery_reproduces(
            poison,
            &facts(1),
            "q",
            &retry(br#"{"attempts":2}"#, 2)
        ));
        assert!(!redelivery_reproduces(
            br#"{"attempts":7}"#,
            &facts(0),
            "q",
            &retry(br#"{"attempts":8}"#, 8)
        ));
    }
}
