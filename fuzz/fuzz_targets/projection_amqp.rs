//! RabbitMQ (AMQP 0-9-1) projection: `properties`, `properties_json`, `received_headers` and
//! `header_text` on any body, any out-of-band headers and any received header table.
//!
//! Checked, as the module documents:
//! * the fixed properties are always set, and an `Err` only comes from an over-long `type`,
//!   `correlation_id` or `message_id` of an object body;
//! * a body that is not a JSON object gets the out-of-band headers only (usable ones: non-empty,
//!   key at most 255 bytes), and a consumer reads exactly those back;
//! * for an object body the contract headers (`x-schema-version`, `x-source-lang`,
//!   `x-attempts`) hold the body's values with their native AMQP types (`x-attempts` 0 when
//!   `attempts` is missing) or are absent (null, an object, an array, a number that is not
//!   finite as a double), whatever an out-of-band header of the same name said;
//! * round trip: a consumer reads back every contract header as its text and every other usable
//!   out-of-band header as sent; the binding reports no facts, so the runtime sees the body as
//!   published, never rewritten.
//!
//! Nothing dropped with contract v2: this binding never gated nor reconciled; the facts it
//! reports (none) are now checked through the runtime's `classify`.
//!
//! Input: the body, then optionally `0xFF` and the bytes the headers and the table come from.
#![no_main]

use babelqueue_core::classify::Class;
use babelqueue_core::{Facts, Headers};
use babelqueue_envelope::{Envelope, JsonKind, RawJson};
use babelqueue_fuzz::{check_classified, headers, long_text, split_body, text};
use babelqueue_transport_amqp::projection::{
    APP_ID, CONTENT_ENCODING, CONTENT_TYPE, HEADER_ATTEMPTS, HEADER_SCHEMA_VERSION,
    HEADER_SOURCE_LANG, PERSISTENT, header_text, properties, properties_json, received_headers,
};
use lapin::types::{AMQPValue, DecimalValue, FieldArray, FieldTable, LongString, ShortString};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (body, params) = split_body(data);
    let mut u = Unstructured::new(params);
    let extra = headers(&mut u).unwrap_or_default();
    produce(body, &extra);
    if let Ok(table) = table(&mut u, 3) {
        for value in table.inner().values() {
            let _ = header_text(value);
        }
        let _ = received_headers(Some(&table));
    }
});

/// The native AMQP value of a contract member, as the module documents it: integers as signed
/// 32-bit when they fit, else 64-bit; other finite numbers as doubles; strings as long strings;
/// booleans as such; nothing for null, objects, arrays and numbers that are not finite.
fn documented(raw: &RawJson) -> Option<AMQPValue> {
    match raw.kind() {
        JsonKind::Null | JsonKind::Array | JsonKind::Object => None,
        JsonKind::Bool => raw.as_bool().map(AMQPValue::Boolean),
        JsonKind::String => raw
            .as_string()
            .map(|s| AMQPValue::LongString(LongString::from(s.into_owned()))),
        JsonKind::Number => match raw.as_i64() {
            Some(n) => Some(i32::try_from(n).map_or(AMQPValue::LongLongInt(n), AMQPValue::LongInt)),
            None => raw
                .as_str()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(AMQPValue::Double),
        },
    }
}

fn produce(body: &[u8], extra: &Headers) {
    let envelope = Envelope::parse_object(body).ok();
    let props = match properties(body, extra) {
        Ok(props) => props,
        Err(e) => {
            assert!(
                envelope.is_some(),
                "only an object body can fail the projection: {e}"
            );
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    assert_eq!(
        props.content_type().as_ref().map(ShortString::as_str),
        Some(CONTENT_TYPE)
    );
    assert_eq!(
        props.content_encoding().as_ref().map(ShortString::as_str),
        Some(CONTENT_ENCODING)
    );
    assert_eq!(
        props.app_id().as_ref().map(ShortString::as_str),
        Some(APP_ID)
    );
    assert_eq!(*props.delivery_mode(), Some(PERSISTENT));
    let _ = properties_json(&props);
    let table = props.headers().as_ref();
    let received = received_headers(table);

    let Some(envelope) = envelope else {
        let usable: Headers = extra
            .iter()
            .filter(|(k, v)| !k.is_empty() && !v.is_empty() && k.len() <= 255)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(
            received, usable,
            "a non-object body carries the usable out-of-band headers, nothing else"
        );
        return;
    };
    let urn = envelope.urn();
    if !urn.is_empty() {
        assert_eq!(props.kind().as_ref().map(ShortString::as_str), Some(&*urn));
    }
    let meta = envelope.meta();
    let contract = [
        (
            HEADER_SCHEMA_VERSION,
            meta.and_then(|m| m.get("schema_version"))
                .and_then(documented),
        ),
        (
            HEADER_SOURCE_LANG,
            meta.and_then(|m| m.get("lang")).and_then(documented),
        ),
        (
            HEADER_ATTEMPTS,
            match envelope.get("attempts") {
                None => Some(AMQPValue::LongInt(0)),
                Some(raw) => documented(&raw),
            },
        ),
    ];
    for (key, want) in &contract {
        let sent = table.and_then(|t| t.inner().get(*key));
        assert_eq!(
            sent,
            want.as_ref(),
            "{key} is the body's value; an out-of-band header never poses as it"
        );
        let read = received.get(*key);
        let want_text = want.as_ref().and_then(header_text).map(|t| t.into_owned());
        assert_eq!(read, want_text.as_ref(), "{key} reads back as its text");
    }
    for (key, value) in extra {
        if key.is_empty() || value.is_empty() || key.len() > 255 {
            continue;
        }
        if contract.iter().all(|(name, _)| *name != key.as_str()) {
            assert_eq!(received.get(key), Some(value), "{key} reads back as sent");
        }
    }

    // The binding reports no facts: the runtime reads the body as it was published.
    if let Class::Readable { body: seen, .. } = check_classified(body, &Facts::default(), "q") {
        assert_eq!(&*seen, body, "no count, no rewrite");
    }
}

/// A received header table with every AMQP field type, nested up to `depth` levels.
fn table(u: &mut Unstructured<'_>, depth: u32) -> Result<FieldTable> {
    let mut table = FieldTable::default();
    for _ in 0..u.int_in_range(0..=8)? {
        let key = text(u)?;
        let Ok(key) = ShortString::try_new(key) else {
            continue;
        };
        table.insert(key, value(u, depth)?);
    }
    Ok(table)
}

fn value(u: &mut Unstructured<'_>, depth: u32) -> Result<AMQPValue> {
    let max = if depth == 0 { 15 } else { 17 };
    Ok(match u.int_in_range(0..=max)? {
        0 => AMQPValue::Boolean(u.arbitrary()?),
        1 => AMQPValue::ShortShortInt(u.arbitrary()?),
        2 => AMQPValue::ShortShortUInt(u.arbitrary()?),
        3 => AMQPValue::ShortInt(u.arbitrary()?),
        4 => AMQPValue::ShortUInt(u.arbitrary()?),
        5 => AMQPValue::LongInt(u.arbitrary()?),
        6 => AMQPValue::LongUInt(u.arbitrary()?),
        7 => AMQPValue::LongLongInt(u.arbitrary()?),
        8 => AMQPValue::Float(u.arbitrary()?),
        9 => AMQPValue::Double(u.arbitrary()?),
        10 => AMQPValue::DecimalValue(DecimalValue {
            scale: u.arbitrary()?,
            value: u.arbitrary()?,
        }),
        11 => match ShortString::try_new(text(u)?) {
            Ok(s) => AMQPValue::ShortString(s),
            Err(_) => AMQPValue::Void,
        },
        12 => AMQPValue::LongString(LongString::from(long_text(u)?)),
        13 => AMQPValue::LongString(LongString::from(u.arbitrary::<Vec<u8>>()?)),
        14 => AMQPValue::Timestamp(u.arbitrary()?),
        15 => AMQPValue::ByteArray(u.arbitrary::<Vec<u8>>()?.into()),
        16 => {
            let mut items = Vec::new();
            for _ in 0..u.int_in_range(0..=4)? {
                items.push(value(u, depth - 1)?);
            }
            AMQPValue::FieldArray(FieldArray::from(items))
        }
        _ => AMQPValue::FieldTable(table(u, depth - 1)?),
    })
}
