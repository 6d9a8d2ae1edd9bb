//! Reconciling a body's `attempts` with what the broker knows, for transports whose broker
//! counts deliveries (SQS `ApproximateReceiveCount`, ASB `DeliveryCount`, Artemis
//! `delivery-count`, Pulsar redelivery count) or carries an authoritative count out of band
//! (the Kafka `bq-attempts` header).
//!
//! The body is rewritten only when the value changes, through the codec (decode → set
//! attempts → encode), so everything else survives byte for byte; an unreadable body, or one
//! whose `attempts` is present but not an integer, is left as it is (the runtime then
//! classifies it).

use std::borrow::Cow;

use babelqueue_envelope::{Envelope, JsonKind};

fn current(body: &[u8]) -> Option<(Envelope, i64)> {
    let parsed = Envelope::parse_object(body).ok()?;
    let attempts = match parsed.get("attempts") {
        None => 0,
        Some(raw) if raw.kind() == JsonKind::Null => 0,
        Some(raw) => raw.as_i64()?,
    };
    Some((parsed, attempts))
}

fn rewrite(body: &[u8], attempts: i64) -> Cow<'_, [u8]> {
    let mut envelope = Envelope::decode_lenient(body).envelope;
    envelope.set_attempts(attempts);
    match envelope.encode() {
        Ok(text) => Cow::Owned(text.into_bytes()),
        Err(_) => Cow::Borrowed(body),
    }
}

/// `attempts = max(body attempts, native)`: never lowers the body's count.
pub fn at_least(body: &[u8], native: i64) -> Cow<'_, [u8]> {
    match current(body) {
        Some((_, attempts)) if native > attempts => rewrite(body, native),
        _ => Cow::Borrowed(body),
    }
}

/// `attempts = value` (an authoritative out-of-band count), unchanged when already equal.
pub fn exactly(body: &[u8], value: i64) -> Cow<'_, [u8]> {
    match current(body) {
        Some((parsed, attempts))
            if attempts != value || parsed.get("attempts").is_some_and(|a| a.is_null()) =>
        {
            rewrite(body, value)
        }
        _ => Cow::Borrowed(body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raises_never_lowers() {
        let body = br#"{"job":"urn:x","data":{"n":1.50},"attempts":2}"#;
        assert!(matches!(at_least(body, 1), Cow::Borrowed(_)));
        assert!(matches!(at_least(body, 2), Cow::Borrowed(_)));
        assert_eq!(
            &*at_least(body, 5),
            br#"{"job":"urn:x","data":{"n":1.50},"attempts":5}"#
        );
        assert_eq!(
            &*at_least(br#"{"job":"urn:x"}"#, 1),
            br#"{"job":"urn:x","attempts":1}"#
        );
    }

    #[test]
    fn exact_values_and_untouchable_bodies() {
        let body = br#"{"job":"urn:x","attempts":5}"#;
        assert_eq!(&*exactly(body, 1), br#"{"job":"urn:x","attempts":1}"#);
        assert!(matches!(exactly(body, 5), Cow::Borrowed(_)));
        assert_eq!(
            &*exactly(br#"{"job":"urn:x","attempts":null}"#, 0),
            br#"{"job":"urn:x","attempts":0}"#
        );
        for untouched in [
            &b"not json"[..],
            br#"{"job":"urn:x","attempts":"3"}"#,
            b"[1]",
        ] {
            assert!(matches!(at_least(untouched, 9), Cow::Borrowed(_)));
            assert!(matches!(exactly(untouched, 9), Cow::Borrowed(_)));
        }
        // forbidden keys are dropped by the rewrite, as on every re-encode
        assert_eq!(
            &*at_least(br#"{"job":"urn:x","timestamp":1}"#, 2),
            br#"{"job":"urn:x","attempts":2}"#
        );
    }
}
