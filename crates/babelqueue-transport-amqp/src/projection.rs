//! The AMQP 0-9-1 projection of an envelope (pure functions, no network).
//!
//! Produce side ([`properties`]): every SDK that publishes to RabbitMQ sets the same
//! `BasicProperties`, so a consumer in any language can route on `type` without reading the
//! body:
//!
//! | property | value |
//! |---|---|
//! | `content_type` | `application/json` |
//! | `content_encoding` | `utf-8` |
//! | `delivery_mode` | 2 (persistent) |
//! | `app_id` | `babelqueue` |
//! | `type` | the URN (`job`) |
//! | `correlation_id` | `trace_id` |
//! | `message_id` | `meta.id` |
//!
//! and the header table, with NATIVE AMQP types (never stringified): `x-schema-version` =
//! `meta.schema_version`, `x-source-lang` = `meta.lang`, `x-attempts` = `attempts` (a missing
//! `attempts` is 0, as the reference sends it). Integers that fit are signed 32-bit (`I`, what
//! pika and amqp091-go emit), larger ones signed 64-bit (`l`); strings are long strings (`S`).
//! Out-of-band headers (`traceparent`, …) go into the same table as long strings first, and
//! the contract keys win a collision.
//!
//! A body that is not a JSON object gets the fixed properties and the out-of-band headers only
//! (as the Go reference does; Python sends fewer): nothing is derived from it, and it is still
//! published byte for byte.
//!
//! Consume side ([`received_headers`]): every header-table entry becomes a string, as the
//! reference surfaces them to handlers.

use std::borrow::Cow;

use babelqueue_core::Headers;
use babelqueue_envelope::{Envelope, JsonKind, RawJson};
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use serde_json::{Map, Value, json};

use crate::error::AmqpError;

/// The `app_id` every BabelQueue producer sets.
pub const APP_ID: &str = "babelqueue";
/// The `content_type` every BabelQueue producer sets.
pub const CONTENT_TYPE: &str = "application/json";
/// The `content_encoding` every BabelQueue producer sets.
pub const CONTENT_ENCODING: &str = "utf-8";
/// AMQP `delivery_mode` 2: persistent.
pub const PERSISTENT: u8 = 2;
/// Header: `meta.schema_version`.
pub const HEADER_SCHEMA_VERSION: &str = "x-schema-version";
/// Header: `meta.lang`.
pub const HEADER_SOURCE_LANG: &str = "x-source-lang";
/// Header: `attempts`.
pub const HEADER_ATTEMPTS: &str = "x-attempts";

const SHORT_STRING_MAX: usize = 255;

fn short(property: &'static str, value: &str) -> Result<ShortString, AmqpError> {
    ShortString::try_new(value).map_err(|_| AmqpError::PropertyTooLong {
        property,
        len: value.len(),
    })
}

/// The native AMQP value of a JSON member, the way the reference encodes it: integers as
/// signed 32-bit when they fit (else 64-bit), strings as long strings, booleans and floats as
/// such; `null`, objects and arrays are left out.
///
/// A number that is not finite as a double (`1e400`, `-1e400`) is left out too: RabbitMQ's
/// field-table parser refuses an infinite double and closes the connection (541
/// INTERNAL_ERROR), so such a header would make the publish fail on every reconnect.
fn native(raw: &RawJson) -> Option<AMQPValue> {
    match raw.kind() {
        JsonKind::Null | JsonKind::Array | JsonKind::Object => None,
        JsonKind::Bool => raw.as_bool().map(AMQPValue::Boolean),
        JsonKind::String => raw
            .as_string()
            .map(|s| AMQPValue::LongString(LongString::from(s.into_owned()))),
        JsonKind::Number => match raw.as_i64() {
            Some(n) => Some(match i32::try_from(n) {
                Ok(small) => AMQPValue::LongInt(small),
                Err(_) => AMQPValue::LongLongInt(n),
            }),
            None => raw
                .as_str()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(AMQPValue::Double),
        },
    }
}

/// The `BasicProperties` a BabelQueue producer sends with `body`, with `extra` out-of-band
/// headers beside the contract ones.
///
/// Fails (and nothing must be sent) when `type`, `correlation_id` or `message_id` would be
/// longer than an AMQP short string allows.
///
/// ```
/// use babelqueue_core::Headers;
/// use babelqueue_transport_amqp::projection::properties;
/// use lapin::types::AMQPValue;
///
/// let body = br#"{"job":"urn:babel:orders:created","trace_id":"t-1","data":{},"meta":{"id":"m-1","lang":"rust","schema_version":1},"attempts":0}"#;
/// let props = properties(body, &Headers::new())?;
/// assert_eq!(props.kind().as_ref().unwrap().as_str(), "urn:babel:orders:created");
/// assert_eq!(props.correlation_id().as_ref().unwrap().as_str(), "t-1");
/// let headers = props.headers().as_ref().unwrap().inner();
/// assert_eq!(headers["x-attempts"], AMQPValue::LongInt(0));
/// # Ok::<(), babelqueue_transport_amqp::AmqpError>(())
/// ```
pub fn properties(body: &[u8], extra: &Headers) -> Result<BasicProperties, AmqpError> {
    let mut table = FieldTable::default();
    for (key, value) in extra {
        if key.is_empty() || value.is_empty() || key.len() > SHORT_STRING_MAX {
            continue;
        }
        table.insert(
            ShortString::from(key.as_str()),
            AMQPValue::LongString(LongString::from(value.as_str())),
        );
    }
    let mut props = BasicProperties::default()
        .with_content_type(ShortString::from(CONTENT_TYPE))
        .with_content_encoding(ShortString::from(CONTENT_ENCODING))
        .with_delivery_mode(PERSISTENT)
        .with_app_id(ShortString::from(APP_ID));

    // Read-only: no key dropped, no warning, the body is forwarded unchanged.
    if let Ok(envelope) = Envelope::parse_object(body) {
        let urn = envelope.urn();
        if !urn.is_empty() {
            props = props.with_type(short("type", &urn)?);
        }
        if let Some(trace_id) = envelope.trace_id() {
            props = props.with_correlation_id(short("correlation_id", &trace_id)?);
        }
        if let Some(id) = envelope.message_id() {
            props = props.with_message_id(short("message_id", &id)?);
        }
        let meta = envelope.meta();
        let contract: [(&str, Option<AMQPValue>); 3] = [
            (
                HEADER_SCHEMA_VERSION,
                meta.and_then(|m| m.get("schema_version")).and_then(native),
            ),
            (
                HEADER_SOURCE_LANG,
                meta.and_then(|m| m.get("lang")).and_then(native),
            ),
            (
                HEADER_ATTEMPTS,
                match envelope.get("attempts") {
                    None => Some(AMQPValue::LongInt(0)),
                    Some(raw) => native(&raw),
                },
            ),
        ];
        for (key, value) in contract {
            match value {
                Some(value) => {
                    table.insert(ShortString::from(key), value);
                }
                None => {
                    // The contract key is absent: an out-of-band header must not pose as it.
                    let mut inner = table.inner().clone();
                    inner.remove(key);
                    table = FieldTable::from(inner);
                }
            }
        }
    }
    if !table.inner().is_empty() {
        props = props.with_headers(table);
    }
    Ok(props)
}

/// A header value as text, the way the reference surfaces it to a handler; `None` for AMQP
/// void, nested tables and arrays.
pub fn header_text(value: &AMQPValue) -> Option<Cow<'_, str>> {
    Some(match value {
        AMQPValue::Boolean(b) => Cow::Borrowed(if *b { "True" } else { "False" }),
        AMQPValue::ShortShortInt(n) => Cow::Owned(n.to_string()),
        AMQPValue::ShortShortUInt(n) => Cow::Owned(n.to_string()),
        AMQPValue::ShortInt(n) => Cow::Owned(n.to_string()),
        AMQPValue::ShortUInt(n) => Cow::Owned(n.to_string()),
        AMQPValue::LongInt(n) => Cow::Owned(n.to_string()),
        AMQPValue::LongUInt(n) => Cow::Owned(n.to_string()),
        AMQPValue::LongLongInt(n) => Cow::Owned(n.to_string()),
        AMQPValue::Timestamp(n) => Cow::Owned(n.to_string()),
        AMQPValue::Float(f) => Cow::Owned(f.to_string()),
        AMQPValue::Double(f) => Cow::Owned(f.to_string()),
        AMQPValue::ShortString(s) => Cow::Borrowed(s.as_str()),
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()),
        AMQPValue::ByteArray(b) => String::from_utf8_lossy(b.as_slice()),
        AMQPValue::DecimalValue(_)
        | AMQPValue::FieldArray(_)
        | AMQPValue::FieldTable(_)
        | AMQPValue::Void => return None,
    })
}

/// The headers a consumed delivery surfaces to its handler: every entry of the AMQP header
/// table as text (integers of any width, short and long strings, byte arrays), nulls skipped.
pub fn received_headers(table: Option<&FieldTable>) -> Headers {
    let mut out = Headers::new();
    for (key, value) in table.into_iter().flat_map(FieldTable::inner) {
        if let Some(text) = header_text(value) {
            out.insert(key.as_str().to_owned(), text.into_owned());
        }
    }
    out
}

fn value_json(value: &AMQPValue) -> Value {
    match value {
        AMQPValue::Boolean(b) => json!(b),
        AMQPValue::ShortShortInt(n) => json!(n),
        AMQPValue::ShortShortUInt(n) => json!(n),
        AMQPValue::ShortInt(n) => json!(n),
        AMQPValue::ShortUInt(n) => json!(n),
        AMQPValue::LongInt(n) => json!(n),
        AMQPValue::LongUInt(n) => json!(n),
        AMQPValue::LongLongInt(n) => json!(n),
        AMQPValue::Timestamp(n) => json!(n),
        AMQPValue::Float(f) => json!(f),
        AMQPValue::Double(f) => json!(f),
        AMQPValue::ShortString(s) => json!(s.as_str()),
        AMQPValue::LongString(s) => json!(String::from_utf8_lossy(s.as_bytes())),
        AMQPValue::ByteArray(b) => json!(String::from_utf8_lossy(b.as_slice())),
        AMQPValue::FieldArray(items) => {
            Value::Array(items.as_slice().iter().map(value_json).collect())
        }
        AMQPValue::FieldTable(t) => Value::Object(
            t.inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), value_json(v)))
                .collect(),
        ),
        AMQPValue::DecimalValue(_) | AMQPValue::Void => Value::Null,
    }
}

/// A type-faithful JSON view of properties (`{"properties": {...}, "headers": {...}}`):
/// AMQP integers stay JSON numbers and strings stay strings, so a check can compare types
/// (the conformance runner and the tests read it).
pub fn properties_json(props: &BasicProperties) -> Value {
    let mut p = Map::new();
    let mut put = |name: &str, value: Option<&ShortString>| {
        if let Some(v) = value {
            p.insert(name.to_owned(), json!(v.as_str()));
        }
    };
    put("type", props.kind().as_ref());
    put("correlation_id", props.correlation_id().as_ref());
    put("message_id", props.message_id().as_ref());
    put("app_id", props.app_id().as_ref());
    put("content_type", props.content_type().as_ref());
    put("content_encoding", props.content_encoding().as_ref());
    if let Some(mode) = props.delivery_mode() {
        p.insert("delivery_mode".to_owned(), json!(mode));
    }
    let headers: Map<String, Value> = props
        .headers()
        .as_ref()
        .map(|t| {
            t.inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), value_json(v)))
                .collect()
        })
        .unwrap_or_default();
    json!({"properties": p, "headers": headers})
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: &[u8] = br#"{"job":"urn:babel:orders:created","trace_id":"7b3f","data":{"order_id":1042},"meta":{"id":"f1e2","queue":"orders","lang":"php","schema_version":1,"created_at":1749132727000},"attempts":0}"#;

    fn headers(props: &BasicProperties) -> &std::collections::BTreeMap<ShortString, AMQPValue> {
        props.headers().as_ref().unwrap().inner()
    }

    #[test]
    fn the_contract_projection() {
        let props = properties(ORDER, &Headers::new()).unwrap();
        let view = properties_json(&props);
        assert_eq!(
            view,
            json!({
                "properties": {"type": "urn:babel:orders:created", "correlation_id": "7b3f",
                    "message_id": "f1e2", "app_id": "babelqueue", "content_type": "application/json",
                    "content_encoding": "utf-8", "delivery_mode": 2},
                "headers": {"x-schema-version": 1, "x-source-lang": "php", "x-attempts": 0}
            })
        );
        let h = headers(&props);
        assert_eq!(h["x-schema-version"], AMQPValue::LongInt(1));
        assert_eq!(h["x-attempts"], AMQPValue::LongInt(0));
        assert_eq!(
            h["x-source-lang"],
            AMQPValue::LongString(LongString::from("php"))
        );
    }

    #[test]
    fn out_of_band_headers_ride_beside_and_lose_collisions() {
        let extra = Headers::from([
            ("traceparent".to_owned(), "00-abc-def-01".to_owned()),
            ("x-source-lang".to_owned(), "evil".to_owned()),
            ("empty".to_owned(), String::new()),
        ]);
        let props = properties(ORDER, &extra).unwrap();
        let h = headers(&props);
        assert_eq!(
            h["traceparent"],
            AMQPValue::LongString(LongString::from("00-abc-def-01"))
        );
        assert_eq!(
            h["x-source-lang"],
            AMQPValue::LongString(LongString::from("php"))
        );
        assert!(!h.contains_key("empty"));
    }

    #[test]
    fn wide_and_odd_values_keep_their_types() {
        let body =
            br#"{"job":"urn:x","meta":{"schema_version":1,"lang":null},"attempts":4294967296}"#;
        let props = properties(body, &Headers::new()).unwrap();
        let h = headers(&props);
        assert_eq!(h["x-attempts"], AMQPValue::LongLongInt(4_294_967_296));
        assert!(!h.contains_key("x-source-lang"));
        assert!(props.correlation_id().is_none() && props.message_id().is_none());

        let missing = properties(br#"{"job":"urn:x"}"#, &Headers::new()).unwrap();
        assert_eq!(headers(&missing)["x-attempts"], AMQPValue::LongInt(0));
        let null = properties(br#"{"job":"urn:x","attempts":null}"#, &Headers::new()).unwrap();
        assert!(null.headers().is_none());
    }

    #[test]
    fn non_finite_numbers_never_reach_the_header_table() {
        let extra = Headers::from([("x-attempts".to_owned(), "posing".to_owned())]);
        for body in [
            &br#"{"job":"urn:x","attempts":1e400}"#[..],
            br#"{"job":"urn:x","attempts":-1e400,"meta":{"schema_version":1e999}}"#,
        ] {
            let props = properties(body, &extra).unwrap();
            let h = props
                .headers()
                .as_ref()
                .map(|t| t.inner().clone())
                .unwrap_or_default();
            assert!(!h.contains_key("x-attempts"), "{h:?}");
            assert!(!h.contains_key("x-schema-version"), "{h:?}");
            assert!(
                h.values()
                    .all(|v| !matches!(v, AMQPValue::Double(f) if !f.is_finite())),
                "{h:?}"
            );
        }
        // A finite fraction or a wide integer is still carried, as a double.
        let props = properties(br#"{"job":"urn:x","attempts":1.5e300}"#, &Headers::new()).unwrap();
        assert_eq!(headers(&props)["x-attempts"], AMQPValue::Double(1.5e300));
    }

    #[test]
    fn a_body_that_is_not_an_envelope_gets_the_fixed_properties_only() {
        let extra = Headers::from([("traceparent".to_owned(), "00-a".to_owned())]);
        for body in [&b"not json"[..], b"[1,2]", b"\xff\xfe{", b""] {
            let props = properties(body, &extra).unwrap();
            let view = properties_json(&props);
            assert_eq!(
                view["properties"],
                json!({"app_id": "babelqueue", "content_type": "application/json",
                    "content_encoding": "utf-8", "delivery_mode": 2})
            );
            assert_eq!(view["headers"], json!({"traceparent": "00-a"}));
        }
    }

    #[test]
    fn short_string_limits_fail_loudly() {
        let long = "x".repeat(256);
        let body = format!(r#"{{"job":"urn:x","trace_id":"{long}"}}"#);
        let err = properties(body.as_bytes(), &Headers::new()).unwrap_err();
        assert!(matches!(
            err,
            AmqpError::PropertyTooLong {
                property: "correlation_id",
                len: 256
            }
        ));
        let ok = format!(r#"{{"job":"urn:x","trace_id":"{}"}}"#, "y".repeat(255));
        assert!(properties(ok.as_bytes(), &Headers::new()).is_ok());
    }

    #[test]
    fn received_headers_stringify_every_variant() {
        let mut t = FieldTable::default();
        t.insert("a".into(), AMQPValue::ShortShortInt(-3));
        t.insert("b".into(), AMQPValue::LongUInt(7));
        t.insert("c".into(), AMQPValue::LongLongInt(1 << 40));
        t.insert("d".into(), AMQPValue::ShortString("s".into()));
        t.insert("e".into(), AMQPValue::LongString("00-rabbit".into()));
        t.insert("f".into(), AMQPValue::ByteArray(b"bytes".to_vec().into()));
        t.insert("g".into(), AMQPValue::Void);
        t.insert("h".into(), AMQPValue::Boolean(true));
        let h = received_headers(Some(&t));
        let want: Headers = [
            ("a", "-3"),
            ("b", "7"),
            ("c", "1099511627776"),
            ("d", "s"),
            ("e", "00-rabbit"),
            ("f", "bytes"),
            ("h", "True"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(h, want);
        assert!(received_headers(None).is_empty());
    }
}
