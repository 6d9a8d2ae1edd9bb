//! The pure part of the binding: how an envelope becomes the AMQP 1.0 message a JMS peer reads,
//! and how a received AMQP message becomes the bytes and the facts (the declared schema version,
//! the delivery count) the runtime sees. No network, no clock.
//!
//! # Produce
//!
//! | AMQP | value | JMS |
//! |---|---|---|
//! | message annotation `x-opt-jms-type` (symbol key) | the URN | `JMSType` |
//! | properties `correlation-id` (string) | `trace_id` | `JMSCorrelationID` |
//! | properties `creation-time` (timestamp, ms) | `meta.created_at` | `JMSTimestamp` |
//! | application property `bq_schema_version` (string) | `meta.schema_version` | |
//! | application property `bq_source_lang` (string) | `meta.lang` | |
//! | application property `bq_attempts` (string) | `attempts` (0 when missing) | |
//! | application property `bq_app_id` (string) | `babelqueue` | |
//! | header `durable` | `true` | `DeliveryMode.PERSISTENT` |
//! | body | one amqp-value string holding the envelope bytes | a `TextMessage` |
//!
//! A body that is not a JSON object gets no annotation, properties or correlation; a body that
//! is not UTF-8 (only ever a raw dead-letter copy) travels as one data section, byte for byte.
//!
//! # Consume
//!
//! [`read`] takes the body losslessly (an amqp-value string or binary, or data sections) and
//! never changes it, and reports what the broker carried beside it: the `bq_schema_version`
//! application property as carried ([`declared`]; the runtime applies the gate before the body
//! is looked at) and the 0-based AMQP `delivery-count` as a
//! [`Count::Redelivered`] (the runtime raises `attempts` to it: `max(body, delivery-count)`, no
//! −1).
//!
//! # Out-of-band headers (an extension)
//!
//! [`with_headers`] adds out-of-band headers (`traceparent`, `tracestate` …) as string
//! application properties beside the `bq_` ones; a contract `bq_` name is never overwritten.
//! [`read`] gives back every string application property not named `bq_…` as the delivery's
//! headers. The references carry no headers on this transport; a peer that ignores the extra
//! properties is unaffected.

use std::borrow::Cow;

use babelqueue_core::{Count, Declared, Headers};
use babelqueue_envelope::{Envelope, JsonKind};
use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::{
    AmqpValue, ApplicationProperties, Batch, Body, Data, Header, Message, MessageAnnotations,
    MessageId, Properties,
};
use fe2o3_amqp::types::primitives::{Binary, SimpleValue, Symbol, Timestamp, Value};

/// The message annotation carrying the URN (the AMQP-JMS mapping of `JMSType`).
pub const JMS_TYPE_ANNOTATION: &str = "x-opt-jms-type";
/// The application property carrying `meta.schema_version`; the consumer's gate reads it.
pub const SCHEMA_VERSION_PROPERTY: &str = "bq_schema_version";
/// The application property carrying `meta.lang`.
pub const SOURCE_LANG_PROPERTY: &str = "bq_source_lang";
/// The application property carrying `attempts`.
pub const ATTEMPTS_PROPERTY: &str = "bq_attempts";
/// The application property naming the producer family.
pub const APP_ID_PROPERTY: &str = "bq_app_id";
/// The value of [`APP_ID_PROPERTY`].
pub const APP_ID: &str = "babelqueue";
/// The message annotation asking Artemis to deliver a message this many milliseconds after it
/// was accepted (Artemis scheduled delivery; other AMQP brokers ignore `x-opt-` annotations they
/// do not know).
pub const DELIVERY_DELAY_ANNOTATION: &str = "x-opt-delivery-delay";

/// The AMQP message type this binding sends and receives.
pub type AmqpMessage = Message<Body<Value>>;

/// What a producer derives from an envelope body (the body itself is never changed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projection {
    /// The URN, for the `x-opt-jms-type` annotation.
    pub jms_type: Option<String>,
    /// `trace_id`, for `correlation-id`.
    pub correlation_id: Option<String>,
    /// `meta.created_at` in epoch milliseconds, for `creation-time`.
    pub creation_time: Option<i64>,
    /// The `bq_` application properties, all strings, in this order: `bq_schema_version`,
    /// `bq_source_lang`, `bq_attempts`, `bq_app_id` (each only when it applies).
    pub properties: Vec<(&'static str, String)>,
}

/// The projection of `body`. Empty for a body that is not a JSON object.
///
/// * `bq_schema_version`: when `meta.schema_version` is present and not null (its decimal, or
///   the string as written, or the JSON text of any other type);
/// * `bq_source_lang`: when `meta.lang` is a non-empty string;
/// * `bq_attempts`: the integer `attempts`, 0 when missing or null, left out when it is not an
///   integer (the reference raises there; this binding never fails a publish over it);
/// * `bq_app_id`: always.
pub fn project(body: &[u8]) -> Projection {
    let Ok(envelope) = Envelope::parse_object(body) else {
        return Projection::default();
    };
    let meta = envelope.meta();
    let mut properties = Vec::with_capacity(4);
    if let Some(version) = meta.and_then(|m| m.get("schema_version"))
        && !version.is_null()
    {
        let text = match (version.as_i64(), version.as_string()) {
            (Some(n), _) => n.to_string(),
            (None, Some(s)) => s.into_owned(),
            (None, None) => version.as_str().to_owned(),
        };
        properties.push((SCHEMA_VERSION_PROPERTY, text));
    }
    if let Some(lang) = envelope.lang().filter(|l| !l.is_empty()) {
        properties.push((SOURCE_LANG_PROPERTY, lang.into_owned()));
    }
    let attempts = match envelope.get("attempts") {
        None => Some(0),
        Some(raw) if raw.kind() == JsonKind::Null => Some(0),
        Some(raw) => raw.as_i64(),
    };
    if let Some(attempts) = attempts {
        properties.push((ATTEMPTS_PROPERTY, attempts.to_string()));
    }
    properties.push((APP_ID_PROPERTY, APP_ID.to_owned()));
    let urn = envelope.urn();
    Projection {
        jms_type: (!urn.is_empty()).then(|| urn.into_owned()),
        correlation_id: envelope
            .trace_id()
            .filter(|t| !t.is_empty())
            .map(Cow::into_owned),
        creation_time: envelope.created_at(),
        properties,
    }
}

/// The AMQP message that carries `body`: the body byte for byte (an amqp-value string, or one
/// data section when it is not UTF-8), `durable` set, and the [`project`]ion.
pub fn message(body: &[u8]) -> AmqpMessage {
    let projection = project(body);
    let section = match std::str::from_utf8(body) {
        Ok(text) => Body::Value(AmqpValue(Value::String(text.to_owned()))),
        Err(_) => Body::Data(Batch::new(vec![Data(Binary::from(body.to_vec()))])),
    };
    let annotations = projection.jms_type.map(|urn| {
        let mut annotations = MessageAnnotations::default();
        annotations.insert(
            OwnedKey::Symbol(Symbol::from(JMS_TYPE_ANNOTATION)),
            Value::String(urn),
        );
        annotations
    });
    let properties = (projection.correlation_id.is_some() || projection.creation_time.is_some())
        .then(|| Properties {
            correlation_id: projection.correlation_id.map(MessageId::String),
            creation_time: projection.creation_time.map(Timestamp::from_milliseconds),
            ..Properties::default()
        });
    let application_properties = (!projection.properties.is_empty()).then(|| {
        let mut map = ApplicationProperties::default();
        for (name, value) in projection.properties {
            map.0.insert(name.to_owned(), SimpleValue::String(value));
        }
        map
    });
    Message {
        header: Some(Header {
            durable: true,
            ..Header::default()
        }),
        delivery_annotations: None,
        message_annotations: annotations,
        properties,
        application_properties,
        body: section,
        footer: None,
    }
}

/// The prefix of the contract's application properties; out-of-band headers never use it.
pub const CONTRACT_PROPERTY_PREFIX: &str = "bq_";

/// `message` with the out-of-band `headers` added as string application properties: blank
/// names and values are dropped, and so is any name starting with
/// [`CONTRACT_PROPERTY_PREFIX`] (the projection wins).
pub fn with_headers(mut message: AmqpMessage, headers: &Headers) -> AmqpMessage {
    let usable = headers.iter().filter(|(name, value)| {
        !name.trim().is_empty()
            && !value.trim().is_empty()
            && !name.starts_with(CONTRACT_PROPERTY_PREFIX)
    });
    for (name, value) in usable {
        message
            .application_properties
            .get_or_insert_with(ApplicationProperties::default)
            .0
            .insert(name.clone(), SimpleValue::String(value.clone()));
    }
    message
}

/// `message` with its delivery postponed by `delay` (the [`DELIVERY_DELAY_ANNOTATION`], whole
/// milliseconds rounded up so it is never early). A zero delay leaves the message as it is.
/// `None` when the delay does not fit the annotation (more than `i64::MAX` ms).
pub fn delayed(mut message: AmqpMessage, delay: std::time::Duration) -> Option<AmqpMessage> {
    if delay.is_zero() {
        return Some(message);
    }
    let millis = i64::try_from(delay.as_nanos().div_ceil(1_000_000)).ok()?;
    message
        .message_annotations
        .get_or_insert_with(MessageAnnotations::default)
        .insert(
            OwnedKey::Symbol(Symbol::from(DELIVERY_DELAY_ANNOTATION)),
            Value::Long(millis),
        );
    Some(message)
}

/// A received message as the runtime needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    /// The body bytes, exactly as carried (never reconciled, never decoded here).
    pub body: Vec<u8>,
    /// The `bq_schema_version` application property as carried ([`declared`]).
    pub declared: Declared,
    /// The AMQP `delivery-count` (0 when the header is missing).
    pub delivery_count: u32,
    /// The out-of-band headers: every string application property not named `bq_…`.
    pub headers: Headers,
}

impl Read {
    /// The delivery count as the runtime reconciles it: `attempts` is raised to the 0-based
    /// `delivery-count` (no −1), never lowered.
    pub fn count(&self) -> Count {
        Count::Redelivered(i64::from(self.delivery_count))
    }
}

/// Reads a received message: the body (losslessly, unchanged), the declared schema version,
/// the delivery count, and the out-of-band headers.
pub fn read(message: &AmqpMessage) -> Read {
    let delivery_count = message.header.as_ref().map_or(0, |h| h.delivery_count);
    let declared = declared(
        message
            .application_properties
            .as_ref()
            .and_then(|p| p.0.get(SCHEMA_VERSION_PROPERTY)),
    );
    let headers = message
        .application_properties
        .as_ref()
        .map(|p| {
            p.0.iter()
                .filter(|(name, _)| !name.starts_with(CONTRACT_PROPERTY_PREFIX))
                .filter_map(|(name, value)| match value {
                    SimpleValue::String(text) => Some((name.clone(), text.clone())),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Read {
        body: body_bytes(&message.body),
        declared,
        delivery_count,
        headers,
    }
}

/// A `bq_schema_version` application property (`None` = no such property) as the runtime's
/// gate reads it.
///
/// Absent and null are themselves. A string, a symbol, a char, or binary (decoded as UTF-8 with
/// replacement) is text; an integer of any AMQP width is an integer; a float or double is a
/// float; a boolean is a boolean. Any other type (a decimal, a timestamp, a UUID, a described
/// value) is never a schema version: it is the text of its AMQP type, so the gate rejects it
/// and says what arrived.
pub fn declared(property: Option<&SimpleValue>) -> Declared {
    let Some(value) = property else {
        return Declared::Absent;
    };
    match value {
        SimpleValue::Null => Declared::Null,
        SimpleValue::String(s) => Declared::Text(s.clone()),
        SimpleValue::Symbol(s) => Declared::Text(s.as_str().to_owned()),
        SimpleValue::Char(c) => Declared::Text(c.to_string()),
        SimpleValue::Binary(b) => Declared::Text(String::from_utf8_lossy(b).into_owned()),
        SimpleValue::Bool(b) => Declared::Bool(*b),
        SimpleValue::Ubyte(n) => Declared::Integer(i128::from(*n)),
        SimpleValue::Ushort(n) => Declared::Integer(i128::from(*n)),
        SimpleValue::Uint(n) => Declared::Integer(i128::from(*n)),
        SimpleValue::Ulong(n) => Declared::Integer(i128::from(*n)),
        SimpleValue::Byte(n) => Declared::Integer(i128::from(*n)),
        SimpleValue::Short(n) => Declared::Integer(i128::from(*n)),
        SimpleValue::Int(n) => Declared::Integer(i128::from(*n)),
        SimpleValue::Long(n) => Declared::Integer(i128::from(*n)),
        SimpleValue::Float(f) => Declared::Float(f64::from(f.into_inner())),
        SimpleValue::Double(f) => Declared::Float(f.into_inner()),
        other => Declared::Text(format!("{other:?}")),
    }
}

/// The body bytes, losslessly: an amqp-value string or binary as its bytes, data sections
/// concatenated, no body as no bytes. Any other section (an amqp-sequence, an amqp-value of
/// another type) cannot hold an envelope; it is handed over as its AMQP encoding, so the
/// runtime classifies it as poison and dead-letters it intact.
pub fn body_bytes(body: &Body<Value>) -> Vec<u8> {
    match body {
        Body::Value(AmqpValue(Value::String(text))) => text.as_bytes().to_vec(),
        Body::Value(AmqpValue(Value::Binary(bytes))) => bytes.to_vec(),
        Body::Value(AmqpValue(other)) => serde_amqp::to_vec(other).unwrap_or_default(),
        Body::Data(sections) => sections.iter().flat_map(|d| d.0.iter().copied()).collect(),
        Body::Sequence(sequences) => sequences
            .iter()
            .flat_map(|s| serde_amqp::to_vec(&s.0).unwrap_or_default())
            .collect(),
        Body::Empty => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use babelqueue_core::Delivery;
    use babelqueue_testkit::reading as attempts;
    use babelqueue_testkit::reading::{Class, classify};

    use super::*;

    const ORDER: &str = r#"{"job":"urn:babel:orders:created","trace_id":"7b3f","data":{"order_id":1042},"meta":{"id":"m1","queue":"orders","lang":"php","schema_version":1,"created_at":1749132727000},"attempts":0}"#;

    #[test]
    fn projection_of_a_full_envelope() {
        let p = project(ORDER.as_bytes());
        assert_eq!(p.jms_type.as_deref(), Some("urn:babel:orders:created"));
        assert_eq!(p.correlation_id.as_deref(), Some("7b3f"));
        assert_eq!(p.creation_time, Some(1_749_132_727_000));
        assert_eq!(
            p.properties,
            vec![
                (SCHEMA_VERSION_PROPERTY, "1".to_owned()),
                (SOURCE_LANG_PROPERTY, "php".to_owned()),
                (ATTEMPTS_PROPERTY, "0".to_owned()),
                (APP_ID_PROPERTY, "babelqueue".to_owned()),
            ]
        );
    }

    #[test]
    fn out_of_band_headers_ride_as_application_properties() {
        let mut headers = Headers::new();
        headers.insert(
            "traceparent".into(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
        );
        headers.insert("bq_attempts".into(), "9".into());
        headers.insert("blank".into(), " ".into());
        let m = with_headers(message(ORDER.as_bytes()), &headers);
        let app = &m.application_properties.as_ref().unwrap().0;
        assert_eq!(
            app.get(ATTEMPTS_PROPERTY),
            Some(&SimpleValue::String("0".into()))
        );
        assert!(!app.contains_key("blank"));
        let read = read(&m);
        assert_eq!(read.headers.len(), 1);
        assert_eq!(
            read.headers.get("traceparent").map(String::as_str),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        );
        assert!(super::read(&message(ORDER.as_bytes())).headers.is_empty());
        let bare = with_headers(message(b"not json"), &headers);
        assert_eq!(super::read(&bare).headers.len(), 1);
    }

    #[test]
    fn projection_edges() {
        assert_eq!(project(b"not json"), Projection::default());
        assert_eq!(project(b"[1,2]"), Projection::default());
        let p =
            project(br#"{"urn":"urn:x","attempts":"3","meta":{"lang":"","schema_version":null}}"#);
        assert_eq!(p.jms_type.as_deref(), Some("urn:x"));
        assert_eq!(p.correlation_id, None);
        assert_eq!(
            p.properties,
            vec![(APP_ID_PROPERTY, "babelqueue".to_owned())]
        );
        let p = project(br#"{"job":"urn:x","meta":{"schema_version":0}}"#);
        assert_eq!(
            p.properties,
            vec![
                (SCHEMA_VERSION_PROPERTY, "0".to_owned()),
                (ATTEMPTS_PROPERTY, "0".to_owned()),
                (APP_ID_PROPERTY, "babelqueue".to_owned()),
            ]
        );
    }

    #[test]
    fn message_sections() {
        let m = message(ORDER.as_bytes());
        assert!(m.header.as_ref().is_some_and(|h| h.durable));
        assert_eq!(
            m.body,
            Body::Value(AmqpValue(Value::String(ORDER.to_owned())))
        );
        let annotations = m.message_annotations.as_ref().unwrap();
        assert_eq!(
            annotations.get(&OwnedKey::Symbol(Symbol::from(JMS_TYPE_ANNOTATION))),
            Some(&Value::String("urn:babel:orders:created".into()))
        );
        let props = m.properties.as_ref().unwrap();
        assert_eq!(props.correlation_id, Some(MessageId::String("7b3f".into())));
        assert_eq!(
            props.creation_time,
            Some(Timestamp::from_milliseconds(1_749_132_727_000))
        );
        assert_eq!(props.message_id, None);
        let app = &m.application_properties.as_ref().unwrap().0;
        assert_eq!(app.len(), 4);
        assert!(app.values().all(|v| matches!(v, SimpleValue::String(_))));

        let binary = message(b"\xff\xfe raw");
        assert!(binary.message_annotations.is_none() && binary.application_properties.is_none());
        assert_eq!(body_bytes(&binary.body), b"\xff\xfe raw");
    }

    #[test]
    fn delays_are_an_annotation_in_whole_milliseconds() {
        use std::time::Duration;
        let key = OwnedKey::Symbol(Symbol::from(DELIVERY_DELAY_ANNOTATION));
        let m = delayed(message(ORDER.as_bytes()), Duration::from_micros(1500)).unwrap();
        let annotations = m.message_annotations.unwrap();
        assert_eq!(annotations.get(&key), Some(&Value::Long(2)), "rounded up");
        assert!(
            annotations.contains_key(&OwnedKey::Symbol(Symbol::from(JMS_TYPE_ANNOTATION))),
            "the projection stays"
        );
        let plain = delayed(message(b"x"), Duration::ZERO).unwrap();
        assert!(plain.message_annotations.is_none());
        assert!(delayed(message(b"x"), Duration::MAX).is_none());
    }

    #[test]
    fn bodies_are_read_losslessly() {
        let text = Body::Value(AmqpValue(Value::String("{}".into())));
        assert_eq!(body_bytes(&text), b"{}");
        let bin = Body::Value(AmqpValue(Value::Binary(vec![0xff, b'{'].into())));
        assert_eq!(body_bytes(&bin), [0xff, b'{']);
        let data = Body::Data(Batch::new(vec![
            Data(Binary::from(b"{\"a\":".to_vec())),
            Data(Binary::from(b"1}".to_vec())),
        ]));
        assert_eq!(body_bytes(&data), b"{\"a\":1}");
        assert_eq!(body_bytes(&Body::Empty), b"");
        let number = Body::Value(AmqpValue(Value::Int(5)));
        assert_eq!(
            body_bytes(&number),
            serde_amqp::to_vec(&Value::Int(5)).unwrap()
        );
    }

    #[test]
    fn gate_types() {
        let s = |v: &str| declared(Some(&SimpleValue::String(v.into())));
        assert_eq!(declared(None), Declared::Absent);
        assert_eq!(declared(Some(&SimpleValue::Null)), Declared::Null);
        assert_eq!(s("1"), Declared::Text("1".into()));
        assert_eq!(s(" \t"), Declared::Text(" \t".into()), "carried as it is");
        assert_eq!(declared(None).rejected(), None);
        assert_eq!(declared(Some(&SimpleValue::Null)).rejected(), None);
        assert_eq!(s("1").rejected(), None);
        assert_eq!(s(" \t").rejected(), None);
        assert_eq!(s("2").rejected().as_deref(), Some("2"));
        assert_eq!(s(" 1").rejected().as_deref(), Some(" 1"));
        for one in [
            SimpleValue::Ubyte(1),
            SimpleValue::Ushort(1),
            SimpleValue::Uint(1),
            SimpleValue::Ulong(1),
            SimpleValue::Byte(1),
            SimpleValue::Short(1),
            SimpleValue::Int(1),
            SimpleValue::Long(1),
            SimpleValue::Symbol(Symbol::from("1")),
            SimpleValue::Binary(b"1".to_vec().into()),
            SimpleValue::Char('1'),
        ] {
            assert_eq!(declared(Some(&one)).rejected(), None, "{one:?}");
        }
        assert_eq!(
            declared(Some(&SimpleValue::Ulong(u64::MAX))),
            Declared::Integer(i128::from(u64::MAX))
        );
        for rejected in [
            SimpleValue::Long(2),
            SimpleValue::Int(0),
            SimpleValue::Byte(-1),
            SimpleValue::Double(1.0.into()),
            SimpleValue::Float(1.0.into()),
            SimpleValue::Bool(true),
            SimpleValue::Timestamp(Timestamp::from_milliseconds(1)),
        ] {
            assert!(
                declared(Some(&rejected)).rejected().is_some(),
                "{rejected:?}"
            );
        }
        assert_eq!(
            declared(Some(&SimpleValue::Double(1.0.into()))),
            Declared::Float(1.0)
        );
        assert_eq!(
            declared(Some(&SimpleValue::Bool(false))),
            Declared::Bool(false)
        );
    }

    #[test]
    fn read_hands_the_body_over_unchanged_with_its_facts() {
        let mut m = message(ORDER.as_bytes());
        m.header.as_mut().unwrap().delivery_count = 2;
        let r = read(&m);
        assert_eq!(r.body, ORDER.as_bytes(), "never reconciled here");
        assert_eq!(r.declared, Declared::Text("1".into()));
        assert_eq!(r.delivery_count, 2);
        assert_eq!(r.count(), Count::Redelivered(2));
        // the runtime reconciles an ungated body with the count ...
        let facts = Delivery::new("orders", r.body.clone())
            .with_declared_version(r.declared.clone())
            .with_count(r.count())
            .facts()
            .clone();
        let Class::Readable { envelope, .. } = classify(&r.body, &facts, "orders") else {
            panic!("a readable envelope")
        };
        assert_eq!(envelope.attempts(), 2);
        // ... and never a gated one
        m.application_properties.as_mut().unwrap().0.insert(
            SCHEMA_VERSION_PROPERTY.into(),
            SimpleValue::String("2".into()),
        );
        let r = read(&m);
        assert_eq!(r.declared, Declared::Text("2".into()));
        assert_eq!(r.body, ORDER.as_bytes(), "a gated body is never touched");
        let facts = Delivery::new("orders", r.body.clone())
            .with_declared_version(r.declared.clone())
            .with_count(r.count())
            .facts()
            .clone();
        assert_eq!(
            classify(&r.body, &facts, "orders"),
            Class::Gated {
                declared: "2".into()
            }
        );
        m.header = None;
        assert_eq!(read(&m).delivery_count, 0);
        assert_eq!(read(&m).count(), Count::Redelivered(0));
    }

    #[test]
    fn reconciliation_table() {
        for (body_attempts, count, want) in [
            (0, 0, 0),
            (0, 2, 2),
            (2, 5, 5),
            (5, 1, 5),
            (4, 0, 4),
            (3, 3, 3),
        ] {
            let body = format!(r#"{{"job":"urn:x","attempts":{body_attempts}}}"#);
            let mut m = message(body.as_bytes());
            m.header.as_mut().unwrap().delivery_count = count;
            let r = read(&m);
            let out = attempts::reconcile(&r.body, Some(r.count()));
            assert_eq!(Envelope::decode(&out).unwrap().envelope.attempts(), want);
            if want == body_attempts {
                assert!(
                    matches!(out, Cow::Borrowed(_)),
                    "unchanged bodies are not rewritten"
                );
            }
        }
    }
}
