//! The pure half of the binding: what goes into the message properties on produce, and what a
//! received message becomes on consume. No I/O; unit-tested without a broker, and the code the
//! conformance runner drives.

use std::borrow::Cow;
use std::collections::BTreeMap;

use babelqueue_core::gate::{self, GateValue};
use babelqueue_core::{Route, attempts};
use babelqueue_envelope::{Envelope, JsonKind, ascii};

/// Pulsar message properties: string keys, string values.
pub type Properties = BTreeMap<String, String>;

/// `bq-job`: the URN, and the routing key a consumer prefers over the body.
pub const PROP_JOB: &str = "bq-job";
/// `bq-trace-id`: the envelope's `trace_id`.
pub const PROP_TRACE_ID: &str = "bq-trace-id";
/// `bq-message-id`: `meta.id`.
pub const PROP_MESSAGE_ID: &str = "bq-message-id";
/// `bq-schema-version`: `meta.schema_version` in decimal; the gate reads it before decoding.
pub const PROP_SCHEMA_VERSION: &str = "bq-schema-version";
/// `bq-source-lang`: `meta.lang`.
pub const PROP_SOURCE_LANG: &str = "bq-source-lang";
/// `bq-attempts`: the attempts count in decimal, authoritative over the body on consume.
pub const PROP_ATTEMPTS: &str = "bq-attempts";

/// The largest `bq-attempts` a consumer trusts (a signed 32-bit int, as the Java and .NET
/// consumers read it).
pub const MAX_PROPERTY_ATTEMPTS: i64 = i32::MAX as i64;

/// The properties of a body published without a route: the normal projection.
///
/// A body that is not a JSON object gets no property at all. `bq-attempts` is always written
/// for an object (0 when `attempts` is missing or null) and omitted when `attempts` is not an
/// integer (a foreign producer's body; the reference raises there instead).
pub fn properties(body: &[u8]) -> Properties {
    let Ok(envelope) = Envelope::parse_object(body) else {
        return Properties::new();
    };
    let mut props = Properties::new();
    let mut put = |key: &str, value: Option<Cow<'_, str>>| {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            props.insert(key.to_owned(), value.into_owned());
        }
    };
    put(
        PROP_JOB,
        envelope
            .job()
            .and_then(babelqueue_envelope::RawJson::as_string),
    );
    put(PROP_TRACE_ID, envelope.trace_id());
    put(PROP_MESSAGE_ID, envelope.message_id());
    put(
        PROP_SCHEMA_VERSION,
        meta_number(&envelope, "schema_version").map(Cow::Owned),
    );
    put(PROP_SOURCE_LANG, envelope.lang());
    match envelope.get("attempts") {
        None => put(PROP_ATTEMPTS, Some(Cow::Borrowed("0"))),
        Some(raw) if raw.kind() == JsonKind::Null => put(PROP_ATTEMPTS, Some(Cow::Borrowed("0"))),
        Some(raw) => {
            if let Some(n) = raw.as_i64() {
                put(PROP_ATTEMPTS, Some(Cow::Owned(n.to_string())));
            }
        }
    }
    props
}

/// `meta.<key>` in decimal when it is a number (as written), `None` when absent or null.
fn meta_number(envelope: &Envelope, key: &str) -> Option<String> {
    let raw = envelope.meta()?.get(key)?;
    match raw.kind() {
        JsonKind::Null => None,
        JsonKind::Number => Some(raw.as_str().to_owned()),
        _ => raw.as_string().map(Cow::into_owned),
    }
}

/// The properties of a runtime re-publish (retry, release, dead-letter record, redrive) of a
/// delivery consumed under `route` ([`RoutedPublisher`](babelqueue_core::RoutedPublisher)).
///
/// * [`Route::Urn`]: the normal projection with `bq-job` pinned to the route, so a
///   property/body mismatch does not flip to the body's URN on the next hop.
/// * [`Route::Gated`]: the reserved route is never written. The normal projection (when the
///   body parses), then `bq-schema-version` set back to the rejected raw value and `bq-job` to
///   the delivery's original one, so a dead-letter copy or a redrive meets the same gate.
/// * anything else: the normal projection.
pub fn routed_properties(body: &[u8], route: &Route) -> Properties {
    let mut props = properties(body);
    match route {
        Route::Urn(urn) if !urn.is_empty() => {
            props.insert(PROP_JOB.to_owned(), urn.clone());
        }
        Route::Gated { declared, urn } => {
            props.insert(PROP_SCHEMA_VERSION.to_owned(), declared.clone());
            if let Some(urn) = urn {
                props.insert(PROP_JOB.to_owned(), urn.clone());
            }
        }
        _ => {}
    }
    props
}

/// The declared version a delivery's `bq-schema-version` property is gated on, or `None` when
/// it decodes normally (absent, ASCII-blank, or exactly `1`). Never trimmed, never capped.
pub fn gated(props: &Properties) -> Option<String> {
    gate::gated(
        props
            .get(PROP_SCHEMA_VERSION)
            .map_or(GateValue::Absent, |v| GateValue::Text(v)),
    )
}

/// `bq-attempts` when it is a run of ASCII digits (no sign, no space) no greater than
/// 2^31 - 1; `None` when absent or invalid (the body's count is used then).
pub fn property_attempts(props: &Properties) -> Option<i64> {
    let raw = props.get(PROP_ATTEMPTS)?;
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse::<i64>()
        .ok()
        .filter(|n| *n <= MAX_PROPERTY_ATTEMPTS)
}

/// Deliveries the broker knows of without a body: `max(valid bq-attempts or 0, redelivery
/// count)`. What a poison body (no envelope to carry `attempts`) is counted by.
pub fn native_attempts(props: &Properties, redelivery_count: u32) -> i64 {
    property_attempts(props)
        .unwrap_or(0)
        .max(i64::from(redelivery_count))
        .max(0)
}

/// `attempts` for a readable body: `bq-attempts` when valid, else the body's integer
/// `attempts` (0 when missing), then raised to the 0-based redelivery count (no -1).
pub fn reconciled_attempts(body_attempts: i64, props: &Properties, redelivery_count: u32) -> i64 {
    property_attempts(props)
        .unwrap_or(body_attempts)
        .max(i64::from(redelivery_count))
}

/// What a received message becomes: the body the runtime sees, its route, and the count
/// reported through [`DeliveryCounter`](babelqueue_core::DeliveryCounter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumed<'a> {
    /// The body: the payload byte for byte, or re-encoded with the reconciled `attempts` when
    /// that changed (and the body already held an integer `attempts`).
    pub body: Cow<'a, [u8]>,
    /// [`Route::Gated`] for a version-gated delivery, [`Route::Urn`] when a non-blank `bq-job`
    /// routes a body that has an identity of its own, else [`Route::Body`].
    pub route: Route,
    /// `max(valid bq-attempts or 0, redelivery count)`.
    pub native_attempts: i64,
}

/// Applies the consume rules to a received payload, in order: the schema-version gate (before
/// any decode), `bq-job` routing, attempts reconciliation.
pub fn consume<'a>(payload: &'a [u8], props: &Properties, redelivery_count: u32) -> Consumed<'a> {
    let native_attempts = native_attempts(props, redelivery_count);
    if let Some(declared) = gated(props) {
        return Consumed {
            body: Cow::Borrowed(payload),
            route: Route::Gated {
                declared,
                urn: props.get(PROP_JOB).cloned(),
            },
            native_attempts,
        };
    }
    let Ok(envelope) = Envelope::parse_object(payload) else {
        return Consumed {
            body: Cow::Borrowed(payload),
            route: Route::Body,
            native_attempts,
        };
    };
    let routed = props
        .get(PROP_JOB)
        .map(|job| ascii::trim(job))
        .filter(|job| !job.is_empty());
    let route = match routed {
        Some(urn) if !envelope.urn().is_empty() => Route::Urn(urn.to_owned()),
        _ => Route::Body,
    };
    let body_attempts = envelope.get("attempts").and_then(|a| a.as_i64());
    let body = match body_attempts {
        Some(current) => {
            let value = reconciled_attempts(current, props, redelivery_count);
            if value == current {
                Cow::Borrowed(payload)
            } else {
                attempts::exactly(payload, value)
            }
        }
        None => Cow::Borrowed(payload),
    };
    Consumed {
        body,
        route,
        native_attempts,
    }
}

/// The largest payload a Pulsar broker takes by default (`maxMessageSize`, 5 MiB, metadata
/// included). A larger one is refused here, at once and by name, instead of timing out in the
/// producer (the broker never acknowledges it).
pub const MAX_MESSAGE_SIZE: usize = 5 * 1024 * 1024;

/// Refuses a payload of `len` bytes above [`MAX_MESSAGE_SIZE`], before anything is sent.
pub fn check_size(topic: &str, len: usize) -> Result<(), crate::PulsarError> {
    if len > MAX_MESSAGE_SIZE {
        return Err(crate::PulsarError::Rejected(format!(
            "the message for {topic} is {len} bytes, above the {MAX_MESSAGE_SIZE}-byte maxMessageSize \
             a Pulsar broker accepts by default; it was not sent"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_payload_is_refused_by_name() {
        assert!(check_size("t", MAX_MESSAGE_SIZE).is_ok());
        let err =
            check_size("persistent://public/default/orders", MAX_MESSAGE_SIZE + 1).unwrap_err();
        assert!(!err.is_transient());
        let text = err.to_string();
        assert!(
            text.contains("5242881 bytes") && text.contains("maxMessageSize"),
            "{text}"
        );
    }

    const ORDER: &[u8] = br#"{"job":"urn:babel:orders:created","trace_id":"t-1","data":{"order_id":1042},"meta":{"id":"m-1","queue":"orders","lang":"php","schema_version":1,"created_at":1749132727000},"attempts":0}"#;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn projection_writes_six_string_properties() {
        assert_eq!(
            properties(ORDER),
            props(&[
                ("bq-job", "urn:babel:orders:created"),
                ("bq-trace-id", "t-1"),
                ("bq-message-id", "m-1"),
                ("bq-schema-version", "1"),
                ("bq-source-lang", "php"),
                ("bq-attempts", "0"),
            ])
        );
    }

    #[test]
    fn projection_of_odd_bodies() {
        assert!(properties(b"not json").is_empty());
        assert!(properties(b"[1,2]").is_empty());
        assert_eq!(properties(b"{}"), props(&[("bq-attempts", "0")]));
        assert_eq!(
            properties(br#"{"job":"","attempts":null,"meta":{"schema_version":null,"lang":""}}"#),
            props(&[("bq-attempts", "0")])
        );
        // a non-numeric attempts (a foreign producer) omits bq-attempts instead of failing
        assert_eq!(
            properties(br#"{"job":"urn:x","attempts":"3"}"#),
            props(&[("bq-job", "urn:x")])
        );
        assert_eq!(
            properties(br#"{"job":"urn:x","attempts":7,"meta":{"schema_version":0}}"#),
            props(&[
                ("bq-job", "urn:x"),
                ("bq-schema-version", "0"),
                ("bq-attempts", "7")
            ])
        );
    }

    #[test]
    fn routed_projection_pins_the_job_and_restores_the_gate() {
        let p = routed_properties(ORDER, &Route::Urn("urn:other".into()));
        assert_eq!(p["bq-job"], "urn:other");
        let p = routed_properties(
            ORDER,
            &Route::Gated {
                declared: " 2/x".into(),
                urn: Some("urn:orig".into()),
            },
        );
        assert_eq!(p["bq-schema-version"], " 2/x");
        assert_eq!(p["bq-job"], "urn:orig");
        assert_eq!(p["bq-trace-id"], "t-1");
        let p = routed_properties(
            b"not json",
            &Route::Gated {
                declared: "2".into(),
                urn: None,
            },
        );
        assert_eq!(p, props(&[("bq-schema-version", "2")]));
        assert!(
            !p.values()
                .any(|v| v.contains("babelqueue:unsupported-schema-version"))
        );
    }

    #[test]
    fn attempts_property_must_be_plain_digits_in_int32() {
        for (raw, want) in [
            ("0", Some(0)),
            ("7", Some(7)),
            ("2147483647", Some(2_147_483_647)),
            ("2147483648", None),
            ("-1", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("", None),
            ("x", None),
            ("١", None),
        ] {
            assert_eq!(
                property_attempts(&props(&[("bq-attempts", raw)])),
                want,
                "{raw:?}"
            );
        }
    }

    #[test]
    fn reconciliation_table() {
        for (body, rc, want) in [
            (0, 0, 0),
            (0, 2, 2),
            (2, 5, 5),
            (5, 1, 5),
            (4, 0, 4),
            (3, 3, 3),
        ] {
            let payload = format!(r#"{{"job":"urn:x","attempts":{body}}}"#);
            let c = consume(payload.as_bytes(), &Properties::new(), rc);
            let got = Envelope::parse_object(&c.body).unwrap().attempts();
            assert_eq!(got, want, "body {body} rc {rc}");
            assert_eq!(
                matches!(c.body, Cow::Borrowed(_)),
                body == want,
                "rewritten only on change"
            );
        }
        // bq-attempts wins over the body, even when lower; then raised to the count
        let c = consume(
            br#"{"job":"urn:x","attempts":5}"#,
            &props(&[("bq-attempts", "2")]),
            0,
        );
        assert_eq!(&*c.body, br#"{"job":"urn:x","attempts":2}"#);
        let c = consume(
            br#"{"job":"urn:x","attempts":0}"#,
            &props(&[("bq-attempts", "2")]),
            4,
        );
        assert_eq!(&*c.body, br#"{"job":"urn:x","attempts":4}"#);
        // no integer attempts in the body: never written
        let c = consume(br#"{"job":"urn:x"}"#, &props(&[("bq-attempts", "2")]), 0);
        assert_eq!(&*c.body, br#"{"job":"urn:x"}"#);
        assert_eq!(c.native_attempts, 2);
    }

    #[test]
    fn routing_needs_a_body_identity() {
        let c = consume(ORDER, &props(&[("bq-job", " urn:routed\t")]), 0);
        assert_eq!(c.route, Route::Urn("urn:routed".into()));
        let c = consume(ORDER, &props(&[("bq-job", " \t")]), 0);
        assert_eq!(c.route, Route::Body);
        let c = consume(
            br#"{"data":{},"attempts":0}"#,
            &props(&[("bq-job", "urn:routed")]),
            0,
        );
        assert_eq!(c.route, Route::Body, "no identity: not rescued by bq-job");
        let c = consume(b"\xff", &props(&[("bq-job", "urn:routed")]), 3);
        assert_eq!(c.route, Route::Body);
        assert_eq!(&*c.body, b"\xff");
        assert_eq!(c.native_attempts, 3);
    }

    #[test]
    fn the_gate_runs_before_any_decode() {
        let c = consume(
            b"plain text",
            &props(&[("bq-schema-version", "2"), ("bq-job", "urn:j")]),
            0,
        );
        assert_eq!(
            c.route,
            Route::Gated {
                declared: "2".into(),
                urn: Some("urn:j".into())
            }
        );
        assert_eq!(&*c.body, b"plain text");
        for ok in ["1", "", " \t", "\n\u{b}\u{c}\r"] {
            assert_eq!(gated(&props(&[("bq-schema-version", ok)])), None, "{ok:?}");
        }
        let long = "9".repeat(100);
        assert_eq!(
            gated(&props(&[("bq-schema-version", &long)])),
            Some(long.clone()),
            "Pulsar does not cap the declared version"
        );
    }
}
