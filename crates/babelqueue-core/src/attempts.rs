//! Reconciling a body's `attempts` with what the broker knows ([`Count`]), in one place for
//! every transport.
//!
//! The body is rewritten only when the value changes, through the codec (decode → set
//! attempts → encode), so everything else survives byte for byte; an unreadable body, or one
//! whose `attempts` is present but not an integer, is left as it is (the runtime then
//! classifies it).

use std::borrow::Cow;

use babelqueue_envelope::{Envelope, JsonKind};

use crate::delivery::Count;

/// An envelope's `attempts`: `(null, value)` with `Some((_, 0))` when missing or null, `None`
/// when it is not an integer.
fn current(envelope: &Envelope) -> Option<(bool, i64)> {
    match envelope.get("attempts") {
        None => Some((false, 0)),
        Some(raw) if raw.kind() == JsonKind::Null => Some((true, 0)),
        Some(raw) => raw.as_i64().map(|n| (false, n)),
    }
}

/// The `attempts` value `envelope` must be rewritten to under `count`, or `None` when it stays
/// as it is (the rules of [`reconcile`]).
pub fn reconciled(envelope: &Envelope, count: Option<Count>) -> Option<i64> {
    let count = count?;
    let (null, attempts) = current(envelope)?;
    let wanted = match count {
        Count::Redelivered(n) => attempts.max(n),
        Count::Carried(v) if null => return Some(v),
        Count::Carried(v) => v,
        Count::CarriedOrBody {
            carried,
            redelivered,
        } => {
            envelope.get("attempts").and_then(|a| a.as_i64())?;
            carried.unwrap_or(attempts).max(redelivered)
        }
    };
    (wanted != attempts).then_some(wanted)
}

fn rewrite(body: &[u8], attempts: i64) -> Cow<'_, [u8]> {
    let mut envelope = Envelope::decode_lenient(body).envelope;
    envelope.set_attempts(attempts);
    match envelope.encode() {
        Ok(text) => Cow::Owned(text.into_bytes()),
        Err(_) => Cow::Borrowed(body),
    }
}

/// The body with `attempts` reconciled with `count` (unchanged when there is no count).
///
/// | rule | `attempts` becomes |
/// |---|---|
/// | [`Count::Redelivered`] `n` | `max(attempts, n)` (missing/null count as 0) |
/// | [`Count::Carried`] `v` | `v` (a null `attempts` is written as `v` too) |
/// | [`Count::CarriedOrBody`] | `max(carried or attempts, redelivered)`, only for an integer `attempts` |
pub fn reconcile(body: &[u8], count: Option<Count>) -> Cow<'_, [u8]> {
    if count.is_none() {
        return Cow::Borrowed(body);
    }
    let Ok(parsed) = Envelope::parse_object(body) else {
        return Cow::Borrowed(body);
    };
    match reconciled(&parsed, count) {
        Some(value) => rewrite(body, value),
        None => Cow::Borrowed(body),
    }
}

/// Deliveries a poison body has had (R-50): the broker's count when it is authoritative
/// ([`Count::Carried`]), else the larger of the broker's count and the integer `attempts` of
/// the body (a bare `{"attempts":N}` a previous bounded retry left); never below 0.
pub fn poison_attempts(body: &[u8], count: Option<Count>) -> i64 {
    if let Some(Count::Carried(v)) = count {
        return v.max(0);
    }
    let body_attempts = Envelope::parse_object(body)
        .ok()
        .and_then(|e| e.get("attempts").and_then(|a| a.as_i64()))
        .unwrap_or(0);
    count.map_or(0, |c| c.native()).max(body_attempts).max(0)
}

/// The count the broker reports for the next delivery of the same message: one more earlier
/// delivery; a carried count stays as it was carried.
pub fn one_more_delivery(count: Count) -> Count {
    match count {
        Count::Redelivered(n) => Count::Redelivered(n.saturating_add(1)),
        Count::Carried(v) => Count::Carried(v),
        Count::CarriedOrBody {
            carried,
            redelivered,
        } => Count::CarriedOrBody {
            carried,
            redelivered: redelivered.saturating_add(1),
        },
    }
}

/// The count the broker reports for the first delivery of a fresh copy of a message: no
/// earlier delivery, nothing carried (the copy is read from its body).
pub fn first_delivery(count: Count) -> Count {
    match count {
        Count::Redelivered(_) => Count::Redelivered(0),
        Count::Carried(_) | Count::CarriedOrBody { .. } => Count::CarriedOrBody {
            carried: None,
            redelivered: 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(body: Cow<'_, [u8]>) -> String {
        String::from_utf8(body.into_owned()).unwrap()
    }

    #[test]
    fn redelivered_raises_never_lowers() {
        let body = br#"{"job":"urn:x","data":{"n":1.50},"attempts":2}"#;
        let at_least = |n| reconcile(body, Some(Count::Redelivered(n)));
        assert!(matches!(at_least(1), Cow::Borrowed(_)));
        assert!(matches!(at_least(2), Cow::Borrowed(_)));
        assert_eq!(
            text(at_least(5)),
            r#"{"job":"urn:x","data":{"n":1.50},"attempts":5}"#
        );
        assert_eq!(
            text(reconcile(
                br#"{"job":"urn:x"}"#,
                Some(Count::Redelivered(1))
            )),
            r#"{"job":"urn:x","attempts":1}"#
        );
    }

    #[test]
    fn carried_is_exact_and_writes_over_null() {
        let body = br#"{"job":"urn:x","attempts":5}"#;
        assert_eq!(
            text(reconcile(body, Some(Count::Carried(1)))),
            r#"{"job":"urn:x","attempts":1}"#
        );
        assert!(matches!(
            reconcile(body, Some(Count::Carried(5))),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            text(reconcile(
                br#"{"job":"urn:x","attempts":null}"#,
                Some(Count::Carried(0))
            )),
            r#"{"job":"urn:x","attempts":0}"#
        );
    }

    #[test]
    fn carried_or_body_needs_an_integer_attempts() {
        let pulsar = |carried, redelivered| {
            Some(Count::CarriedOrBody {
                carried,
                redelivered,
            })
        };
        let body = br#"{"job":"urn:x","attempts":2}"#;
        assert_eq!(
            text(reconcile(body, pulsar(Some(4), 1))),
            r#"{"job":"urn:x","attempts":4}"#
        );
        assert_eq!(
            text(reconcile(body, pulsar(None, 3))),
            r#"{"job":"urn:x","attempts":3}"#
        );
        assert!(matches!(reconcile(body, pulsar(None, 1)), Cow::Borrowed(_)));
        let missing = br#"{"job":"urn:x"}"#;
        assert!(matches!(
            reconcile(missing, pulsar(Some(4), 4)),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn untouchable_bodies_and_no_count() {
        for untouched in [
            &b"not json"[..],
            br#"{"job":"urn:x","attempts":"3"}"#,
            b"[1]",
        ] {
            for count in [Count::Redelivered(9), Count::Carried(9)] {
                assert!(matches!(
                    reconcile(untouched, Some(count)),
                    Cow::Borrowed(_)
                ));
            }
        }
        assert!(matches!(
            reconcile(br#"{"attempts":1}"#, None),
            Cow::Borrowed(_)
        ));
        // forbidden keys are dropped by the rewrite, as on every re-encode
        assert_eq!(
            text(reconcile(
                br#"{"job":"urn:x","timestamp":1}"#,
                Some(Count::Redelivered(2))
            )),
            r#"{"job":"urn:x","attempts":2}"#
        );
    }

    #[test]
    fn poison_counts() {
        assert_eq!(poison_attempts(b"not json", None), 0);
        assert_eq!(poison_attempts(br#"{"attempts":3}"#, None), 3);
        assert_eq!(
            poison_attempts(br#"{"attempts":3}"#, Some(Count::Redelivered(5))),
            5
        );
        assert_eq!(
            poison_attempts(br#"{"attempts":3}"#, Some(Count::Carried(1))),
            1,
            "an authoritative count wins over the body"
        );
        assert_eq!(poison_attempts(br#"{"attempts":-3}"#, None), 0);
    }
}
