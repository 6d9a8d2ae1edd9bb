//! The pure half of the binding: the native fields and AMQP-typed application properties a
//! message carries on produce, and on consume what the broker says beside the body (the
//! schema-version property as carried, the delivery count), which the runtime gates and
//! reconciles. No I/O; unit-tested without a broker, and the code the conformance runner drives.

use std::borrow::Cow;

use babelqueue_core::{Count, Declared};
use babelqueue_envelope::{Envelope, JsonKind};

use crate::error::AsbError;

/// `bq-schema-version`: `meta.schema_version` as an AMQP integer.
pub const PROP_SCHEMA_VERSION: &str = "bq-schema-version";
/// `bq-source-lang`: `meta.lang` as an AMQP string.
pub const PROP_SOURCE_LANG: &str = "bq-source-lang";
/// `bq-created-at`: `meta.created_at` (epoch ms) as an AMQP long.
pub const PROP_CREATED_AT: &str = "bq-created-at";
/// The content type of every message.
pub const CONTENT_TYPE: &str = "application/json";
/// The longest `MessageId` or `CorrelationId` Service Bus accepts.
pub const MAX_ID_CHARS: usize = 128;

/// An AMQP 1.0 application-property value, typed as it travels (numbers stay numbers).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AmqpValue {
    /// `null`.
    Null,
    /// `boolean`.
    Bool(bool),
    /// `ubyte`.
    Ubyte(u8),
    /// `ushort`.
    Ushort(u16),
    /// `uint`.
    Uint(u32),
    /// `ulong`.
    Ulong(u64),
    /// `byte`.
    Byte(i8),
    /// `short`.
    Short(i16),
    /// `int`.
    Int(i32),
    /// `long`.
    Long(i64),
    /// `float`.
    Float(f32),
    /// `double`.
    Double(f64),
    /// `string`.
    String(String),
    /// `binary` (a client that hands strings over as bytes).
    Binary(Vec<u8>),
    /// Any other AMQP type (timestamp, uuid, char, decimal …), by its name and text.
    Other(String, String),
}

impl AmqpValue {
    /// An integer as the narrowest of `int` and `long` that holds it (what the reference SDKs
    /// send for a number).
    pub fn integer(n: i64) -> AmqpValue {
        i32::try_from(n).map_or(AmqpValue::Long(n), AmqpValue::Int)
    }
}

/// Application properties, in the order they are written.
pub type ApplicationProperties = Vec<(String, AmqpValue)>;

/// A message to send: the body and what is projected beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// The body: the envelope's bytes, unchanged, in one AMQP data section.
    pub body: Vec<u8>,
    /// `ContentType`: always `application/json`.
    pub content_type: String,
    /// `Subject` (a.k.a. Label): the URN, when non-empty.
    pub subject: Option<String>,
    /// `CorrelationId`: `trace_id`, when non-empty.
    pub correlation_id: Option<String>,
    /// `MessageId`: `meta.id`, when non-empty.
    pub message_id: Option<String>,
    /// The `bq-*` application properties.
    pub application_properties: ApplicationProperties,
}

/// Projects a body onto a Service Bus message.
///
/// `Subject` = `job`, `CorrelationId` = `trace_id`, `MessageId` = `meta.id` (each only when
/// non-empty), `ContentType` = `application/json`; application properties
/// `bq-schema-version` (int, or long past int32), `bq-source-lang` (string) and `bq-created-at`
/// (always long), each only when present and not null. A body that is not a JSON object is
/// sent with the content type alone.
///
/// An id longer than 128 characters is refused here with a clear error, before anything is
/// sent (Service Bus would fail the send).
pub fn outgoing(body: &[u8]) -> Result<Outgoing, AsbError> {
    let mut out = Outgoing {
        body: body.to_vec(),
        content_type: CONTENT_TYPE.to_owned(),
        subject: None,
        correlation_id: None,
        message_id: None,
        application_properties: Vec::new(),
    };
    let Ok(envelope) = Envelope::parse_object(body) else {
        return Ok(out);
    };
    let non_empty = |v: Option<Cow<'_, str>>| v.filter(|v| !v.is_empty()).map(Cow::into_owned);
    out.subject = non_empty(envelope.job().and_then(|j| j.as_string()));
    out.correlation_id = non_empty(envelope.trace_id());
    out.message_id = non_empty(envelope.message_id());
    for (field, value) in [
        ("MessageId", &out.message_id),
        ("CorrelationId", &out.correlation_id),
    ] {
        if let Some(value) = value
            && value.chars().count() > MAX_ID_CHARS
        {
            return Err(AsbError::Invalid(format!(
                "{field} would be {} characters; Service Bus accepts at most {MAX_ID_CHARS}",
                value.chars().count()
            )));
        }
    }
    if let Some(meta) = envelope.meta() {
        let number = |key: &str| {
            meta.get(key)
                .filter(|v| v.kind() != JsonKind::Null)
                .and_then(|v| v.as_i64())
        };
        if let Some(version) = number("schema_version") {
            out.application_properties
                .push((PROP_SCHEMA_VERSION.to_owned(), AmqpValue::integer(version)));
        }
        if let Some(lang) = non_empty(envelope.lang()) {
            out.application_properties
                .push((PROP_SOURCE_LANG.to_owned(), AmqpValue::String(lang)));
        }
        if let Some(created) = number("created_at") {
            out.application_properties
                .push((PROP_CREATED_AT.to_owned(), AmqpValue::Long(created)));
        }
    }
    Ok(out)
}

/// The `bq-schema-version` application property as carried: the input of the runtime's
/// schema-version gate.
///
/// Absent is [`Declared::Absent`], an AMQP null [`Declared::Null`], a string
/// [`Declared::Text`] (untrimmed), every integral width, signed or unsigned,
/// [`Declared::Integer`], a float or double [`Declared::Float`], a boolean [`Declared::Bool`].
/// Binary values are read as UTF-8 text. Any other AMQP type (timestamp, uuid, char, decimal …)
/// is reported as the text `<type>:<value>`, which the gate always rejects (it is neither blank
/// nor `1`). When the property repeats, the last one counts.
///
/// The runtime's gate then lets absent, null, ASCII-blank, the string `"1"` and an integral 1
/// through, and rejects everything else (`"2"`, `" 1"`, 0, 2, 1.5, a float or double 1.0, a
/// boolean, any other type), see [`babelqueue_core::gate::gated`].
pub fn declared(properties: &ApplicationProperties) -> Declared {
    let value = properties
        .iter()
        .rev()
        .find(|(k, _)| k == PROP_SCHEMA_VERSION)
        .map(|(_, v)| v);
    match value {
        None => Declared::Absent,
        Some(AmqpValue::Null) => Declared::Null,
        Some(AmqpValue::Bool(b)) => Declared::Bool(*b),
        Some(AmqpValue::Ubyte(n)) => Declared::Integer(i128::from(*n)),
        Some(AmqpValue::Ushort(n)) => Declared::Integer(i128::from(*n)),
        Some(AmqpValue::Uint(n)) => Declared::Integer(i128::from(*n)),
        Some(AmqpValue::Ulong(n)) => Declared::Integer(i128::from(*n)),
        Some(AmqpValue::Byte(n)) => Declared::Integer(i128::from(*n)),
        Some(AmqpValue::Short(n)) => Declared::Integer(i128::from(*n)),
        Some(AmqpValue::Int(n)) => Declared::Integer(i128::from(*n)),
        Some(AmqpValue::Long(n)) => Declared::Integer(i128::from(*n)),
        Some(AmqpValue::Float(f)) => Declared::Float(f64::from(*f)),
        Some(AmqpValue::Double(f)) => Declared::Float(*f),
        Some(AmqpValue::String(s)) => Declared::Text(s.clone()),
        Some(AmqpValue::Binary(bytes)) => {
            Declared::Text(String::from_utf8_lossy(bytes).into_owned())
        }
        Some(AmqpValue::Other(kind, shown)) => Declared::Text(format!("{kind}:{shown}")),
    }
}

/// What `DeliveryCount` says about earlier deliveries: [`Count::Redelivered`]
/// `DeliveryCount - 1` when the count is above 1, else nothing. `DeliveryCount` is 1-based, so
/// a first delivery (1), or 0, reports nothing and the body is kept exactly as it is.
///
/// The runtime reconciles a readable body with it (`attempts = max(body, DeliveryCount - 1)`,
/// the body rewritten only when the count raises it).
pub fn count(delivery_count: u32) -> Option<Count> {
    (delivery_count > 1).then(|| Count::Redelivered(i64::from(delivery_count) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: &[u8] = br#"{"job":"urn:babel:orders:created","trace_id":"t-1","data":{"order_id":1042},"meta":{"id":"m-1","queue":"orders","lang":"php","schema_version":1,"created_at":1749132727000},"attempts":0}"#;

    #[test]
    fn projection_is_typed() {
        let out = outgoing(ORDER).unwrap();
        assert_eq!(out.body, ORDER);
        assert_eq!(out.content_type, "application/json");
        assert_eq!(out.subject.as_deref(), Some("urn:babel:orders:created"));
        assert_eq!(out.correlation_id.as_deref(), Some("t-1"));
        assert_eq!(out.message_id.as_deref(), Some("m-1"));
        assert_eq!(
            out.application_properties,
            vec![
                ("bq-schema-version".to_owned(), AmqpValue::Int(1)),
                ("bq-source-lang".to_owned(), AmqpValue::String("php".into())),
                (
                    "bq-created-at".to_owned(),
                    AmqpValue::Long(1_749_132_727_000)
                ),
            ]
        );
    }

    #[test]
    fn projection_of_odd_bodies() {
        let out = outgoing(b"not json").unwrap();
        assert_eq!(out.subject, None);
        assert!(out.application_properties.is_empty());
        let out = outgoing(br#"{"job":"","trace_id":"","meta":{"schema_version":null,"created_at":5,"schema_version":4294967296}}"#).unwrap();
        assert_eq!(out.subject, None);
        assert_eq!(out.correlation_id, None);
        assert_eq!(
            out.application_properties,
            vec![
                (
                    "bq-schema-version".to_owned(),
                    AmqpValue::Long(4_294_967_296)
                ),
                ("bq-created-at".to_owned(), AmqpValue::Long(5)),
            ]
        );
        let long = format!(r#"{{"job":"urn:x","trace_id":"{}"}}"#, "t".repeat(129));
        let err = outgoing(long.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("CorrelationId"), "{err}");
        assert!(!err.is_transient());
    }

    #[test]
    fn the_declared_version_is_reported_typed() {
        let with = |v: AmqpValue| declared(&vec![(PROP_SCHEMA_VERSION.to_owned(), v)]);
        assert_eq!(declared(&Vec::new()), Declared::Absent);
        assert_eq!(with(AmqpValue::Null), Declared::Null);
        assert_eq!(
            with(AmqpValue::Ulong(u64::MAX)),
            Declared::Integer(u64::MAX.into())
        );
        assert_eq!(with(AmqpValue::Byte(-1)), Declared::Integer(-1));
        assert_eq!(with(AmqpValue::Float(1.5)), Declared::Float(1.5));
        assert_eq!(with(AmqpValue::Bool(false)), Declared::Bool(false));
        assert_eq!(
            with(AmqpValue::String(" 1".into())),
            Declared::Text(" 1".into())
        );
        assert_eq!(
            with(AmqpValue::Binary(b"2".to_vec())),
            Declared::Text("2".into())
        );
        assert_eq!(
            with(AmqpValue::Other("timestamp".into(), "1".into())),
            Declared::Text("timestamp:1".into())
        );
        // The last of a repeated property counts.
        let twice = vec![
            (PROP_SCHEMA_VERSION.to_owned(), AmqpValue::Int(2)),
            (PROP_SCHEMA_VERSION.to_owned(), AmqpValue::Int(1)),
        ];
        assert_eq!(declared(&twice), Declared::Integer(1));
    }

    /// The contract's trigger table, through the runtime's gate on what is reported.
    #[test]
    fn the_gate_reads_typed_values() {
        let gated = |v: AmqpValue| declared(&vec![(PROP_SCHEMA_VERSION.to_owned(), v)]).rejected();
        for ok in [
            AmqpValue::Int(1),
            AmqpValue::Long(1),
            AmqpValue::Ubyte(1),
            AmqpValue::Ulong(1),
            AmqpValue::Byte(1),
            AmqpValue::Null,
            AmqpValue::String("1".into()),
            AmqpValue::String(" \t".into()),
            AmqpValue::Binary(b"1".to_vec()),
        ] {
            assert_eq!(gated(ok.clone()), None, "{ok:?}");
        }
        assert_eq!(declared(&Vec::new()).rejected(), None);
        for (rejected, want) in [
            (AmqpValue::Int(2), "2"),
            (AmqpValue::Long(2), "2"),
            (AmqpValue::Int(0), "0"),
            (AmqpValue::Double(1.5), "1.5"),
            (AmqpValue::Float(1.0), "1.0"),
            (AmqpValue::Double(1.0), "1.0"),
            (AmqpValue::Bool(true), "true"),
            (AmqpValue::String(" 1".into()), " 1"),
            (AmqpValue::Binary(b"2".to_vec()), "2"),
            (
                AmqpValue::Other("timestamp".into(), "1".into()),
                "timestamp:1",
            ),
        ] {
            assert_eq!(
                gated(rejected.clone()).as_deref(),
                Some(want),
                "{rejected:?}"
            );
        }
    }

    #[test]
    fn the_delivery_count_is_reported_as_earlier_deliveries() {
        assert_eq!(count(0), None);
        assert_eq!(count(1), None);
        assert_eq!(count(2), Some(Count::Redelivered(1)));
        assert_eq!(
            count(u32::MAX),
            Some(Count::Redelivered(i64::from(u32::MAX) - 1))
        );
    }

    /// The contract's table (`attempts = max(body, DeliveryCount - 1)`), through the runtime's
    /// own reconciliation of the reported count.
    #[test]
    fn reconciliation_table() {
        use babelqueue_testkit::reading::reconcile;
        for (body, dc, want) in [
            (0, 1, 0),
            (0, 3, 2),
            (2, 5, 4),
            (5, 2, 5),
            (4, 1, 4),
            (3, 0, 3),
        ] {
            let payload = format!(r#"{{"job":"urn:x","attempts":{body}}}"#);
            let out = reconcile(payload.as_bytes(), count(dc));
            assert_eq!(
                Envelope::parse_object(&out).unwrap().attempts(),
                want,
                "body {body} count {dc}"
            );
            assert_eq!(matches!(out, Cow::Borrowed(_)), body == want);
        }
        assert_eq!(&*reconcile(b"\xff", count(9)), b"\xff");
        // A negative count is kept byte for byte on a first delivery.
        assert!(matches!(
            reconcile(br#"{"job":"urn:x","attempts":-3}"#, count(1)),
            Cow::Borrowed(_)
        ));
    }
}
