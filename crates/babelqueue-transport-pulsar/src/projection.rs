//! The pure half of the binding: what goes into the message properties on produce, and what the
//! broker reported about a received message (its [`Facts`]) on consume. No I/O; unit-tested without a broker, and the code the
//! conformance runner drives.

use std::borrow::Cow;
use std::collections::BTreeMap;

use babelqueue_core::{Count, Declared, Facts};
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

/// The properties of a body published on its own (not on behalf of a delivery): the normal
/// projection.
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
/// delivery whose broker reported `facts` ([`Sends::facts`](babelqueue_core::Sends::facts)).
///
/// * A version-gated delivery (`facts.declared_version` is one the gate rejects): the normal
///   projection (when the body parses), then `bq-schema-version` set back to the declared value
///   exactly as carried and `bq-job` to the carried one, so a dead-letter copy or a redrive
///   meets the same gate.
/// * A carried `bq-job` ([`Facts::urn`]): the normal projection with `bq-job` pinned to it
///   (trimmed of ASCII whitespace), so a property/body mismatch does not flip to the body's URN
///   on the next hop. Only for a body with an identity of its own: the out-of-band URN never
///   routes a body without one, so a poison record or the bare `{"attempts":N}` of a poison
///   retry is projected as it is.
/// * anything else: the normal projection.
pub fn routed_properties(body: &[u8], facts: &Facts) -> Properties {
    let mut props = properties(body);
    if let Some(declared) = facts.declared_version.rejected() {
        props.insert(PROP_SCHEMA_VERSION.to_owned(), declared);
        if let Some(urn) = &facts.urn {
            props.insert(PROP_JOB.to_owned(), urn.clone());
        }
        return props;
    }
    let pinned = facts
        .urn
        .as_deref()
        .map(ascii::trim)
        .filter(|urn| !urn.is_empty());
    if let Some(urn) = pinned
        && Envelope::parse_object(body).is_ok_and(|envelope| !envelope.urn().is_empty())
    {
        props.insert(PROP_JOB.to_owned(), urn.to_owned());
    }
    props
}

/// The `bq-schema-version` property as carried, for the runtime's gate: absent, or the string
/// (never trimmed, never capped).
pub fn declared(props: &Properties) -> Declared {
    props
        .get(PROP_SCHEMA_VERSION)
        .map_or(Declared::Absent, |v| Declared::Text(v.clone()))
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

/// The delivery count and its rule: a valid `bq-attempts` when there is one, else the body's
/// integer `attempts`, raised to the 0-based redelivery count (no -1). The runtime applies it
/// (the runtime's reconciliation of `attempts`); a poison body is counted
/// by `max(valid bq-attempts or 0, redelivery count)`.
pub fn count(props: &Properties, redelivery_count: u32) -> Count {
    Count::CarriedOrBody {
        carried: property_attempts(props),
        redelivered: i64::from(redelivery_count),
    }
}

/// Everything the broker carried beside a received payload, as the runtime reads it: the
/// `bq-job` property as carried ([`Facts::urn`]; blank is none), the `bq-schema-version`
/// property ([`declared`]) and the delivery count ([`count`]). The transport never applies the
/// gate, routes or rewrites the body itself.
pub fn facts(props: &Properties, redelivery_count: u32) -> Facts {
    let mut facts = Facts::default();
    facts.urn = props
        .get(PROP_JOB)
        .filter(|job| !ascii::is_blank(job))
        .cloned();
    facts.declared_version = declared(props);
    facts.count = Some(count(props, redelivery_count));
    facts
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
    use babelqueue_testkit::reading as attempts;
    use babelqueue_testkit::reading::{Class, classify};

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

    fn gated_facts(declared: &str, urn: Option<&str>) -> Facts {
        let mut props = props(&[("bq-schema-version", declared)]);
        if let Some(urn) = urn {
            props.insert("bq-job".into(), urn.into());
        }
        facts(&props, 0)
    }

    #[test]
    fn routed_projection_pins_the_job_and_restores_the_gate() {
        let routed = facts(&props(&[("bq-job", " urn:other\t")]), 0);
        let p = routed_properties(ORDER, &routed);
        assert_eq!(p["bq-job"], "urn:other", "pinned, trimmed");
        assert_eq!(p["bq-attempts"], "0");
        // A body without an identity of its own is never routed by bq-job: not pinned.
        assert_eq!(
            routed_properties(br#"{"attempts":2}"#, &routed),
            props(&[("bq-attempts", "2")])
        );
        assert!(routed_properties(b"not json", &routed).is_empty());
        // Nothing carried: the normal projection.
        assert_eq!(
            routed_properties(ORDER, &facts(&Properties::new(), 3)),
            properties(ORDER)
        );
        // A carried, accepted bq-schema-version is not restored: the body's is projected.
        let accepted = facts(&props(&[("bq-schema-version", " ")]), 0);
        assert_eq!(routed_properties(ORDER, &accepted), properties(ORDER));

        let p = routed_properties(ORDER, &gated_facts(" 2/x", Some(" urn:orig")));
        assert_eq!(p["bq-schema-version"], " 2/x");
        assert_eq!(p["bq-job"], " urn:orig", "restored exactly as carried");
        assert_eq!(p["bq-trace-id"], "t-1");
        let p = routed_properties(b"not json", &gated_facts("2", None));
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

    /// The attempts the runtime sees: this binding's facts, reconciled by core.
    fn reconciled(payload: &[u8], props: &Properties, redelivery_count: u32) -> Vec<u8> {
        let facts = facts(props, redelivery_count);
        match classify(payload, &facts, "orders") {
            Class::Readable { body, .. } => body.into_owned(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_count_carries_bq_attempts_and_the_redelivery_count() {
        assert_eq!(
            count(&Properties::new(), 2),
            Count::CarriedOrBody {
                carried: None,
                redelivered: 2
            }
        );
        assert_eq!(
            count(&props(&[("bq-attempts", "5")]), 0),
            Count::CarriedOrBody {
                carried: Some(5),
                redelivered: 0
            }
        );
        assert_eq!(
            count(&props(&[("bq-attempts", "-5")]), 1),
            Count::CarriedOrBody {
                carried: None,
                redelivered: 1
            },
            "an invalid bq-attempts is not carried"
        );
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
            let facts = facts(&Properties::new(), rc);
            let out = attempts::reconcile(payload.as_bytes(), facts.count);
            let got = Envelope::parse_object(&out).unwrap().attempts();
            assert_eq!(got, want, "body {body} rc {rc}");
            assert_eq!(
                matches!(out, Cow::Borrowed(_)),
                body == want,
                "rewritten only on change"
            );
        }
        // bq-attempts wins over the body, even when lower; then raised to the count
        assert_eq!(
            reconciled(
                br#"{"job":"urn:x","attempts":5}"#,
                &props(&[("bq-attempts", "2")]),
                0
            ),
            br#"{"job":"urn:x","attempts":2}"#
        );
        assert_eq!(
            reconciled(
                br#"{"job":"urn:x","attempts":0}"#,
                &props(&[("bq-attempts", "2")]),
                4
            ),
            br#"{"job":"urn:x","attempts":4}"#
        );
        // no integer attempts in the body: never written
        let bare = props(&[("bq-attempts", "2")]);
        assert_eq!(
            reconciled(br#"{"job":"urn:x"}"#, &bare, 0),
            br#"{"job":"urn:x"}"#
        );
        // a poison body is counted by max(valid bq-attempts or 0, redelivery count)
        assert_eq!(facts(&bare, 0).count.map(|c| c.native()), Some(2));
        let Class::Poison(poison) = classify(b"not json", &facts(&bare, 3), "orders") else {
            panic!("not json is poison")
        };
        assert_eq!(poison.attempts, 3);
    }

    #[test]
    fn routing_needs_a_body_identity() {
        let urn = |payload: &[u8], props: &Properties| match classify(
            payload,
            &facts(props, 0),
            "orders",
        ) {
            Class::Readable { urn, routed, .. } => (urn, routed),
            other => panic!("{other:?}"),
        };
        let carried = props(&[("bq-job", " urn:routed\t")]);
        assert_eq!(
            facts(&carried, 0).urn.as_deref(),
            Some(" urn:routed\t"),
            "carried as it is"
        );
        assert_eq!(urn(ORDER, &carried), ("urn:routed".to_owned(), true));
        let blank = props(&[("bq-job", " \t")]);
        assert_eq!(facts(&blank, 0).urn, None);
        assert_eq!(
            urn(ORDER, &blank),
            ("urn:babel:orders:created".to_owned(), false)
        );
        let Class::Poison(poison) = classify(
            br#"{"data":{},"attempts":0}"#,
            &facts(&props(&[("bq-job", "urn:routed")]), 0),
            "orders",
        ) else {
            panic!("no identity: not rescued by bq-job")
        };
        assert_eq!(poison.attempts, 0);
        let Class::Poison(poison) = classify(
            b"\xff",
            &facts(&props(&[("bq-job", "urn:routed")]), 3),
            "orders",
        ) else {
            panic!("not UTF-8: poison")
        };
        assert_eq!(poison.attempts, 3);
    }

    #[test]
    fn the_gate_reads_the_property_before_any_decode() {
        let f = facts(
            &props(&[("bq-schema-version", "2"), ("bq-job", "urn:j")]),
            0,
        );
        assert_eq!(f.declared_version, Declared::Text("2".into()));
        assert_eq!(f.urn.as_deref(), Some("urn:j"));
        assert_eq!(
            classify(b"plain text", &f, "orders"),
            Class::Gated {
                declared: "2".into()
            }
        );
        assert_eq!(declared(&Properties::new()), Declared::Absent);
        for ok in ["1", "", " \t", "\n\u{b}\u{c}\r"] {
            let d = declared(&props(&[("bq-schema-version", ok)]));
            assert_eq!(d, Declared::Text(ok.into()), "carried as it is");
            assert_eq!(d.rejected(), None, "{ok:?}");
        }
        let long = "9".repeat(100);
        assert_eq!(
            declared(&props(&[("bq-schema-version", &long)])).rejected(),
            Some(long.clone()),
            "Pulsar does not cap the declared version"
        );
    }
}
