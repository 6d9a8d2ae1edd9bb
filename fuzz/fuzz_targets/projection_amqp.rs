//! RabbitMQ (AMQP 0-9-1) projection: `properties`, `properties_json`, `received_headers` and
//! `header_text` on any body, any out-of-band headers and any received header table.
//!
//! Checked, as the module documents:
//! * the fixed properties are always set, and an `Err` only comes from an over-long `type`,
//!   `correlation_id` or `message_id` of an object body;
//! * a body that is not a JSON object gets the out-of-band headers only (usable ones: non-empty,
//!   key at most 255 bytes), and a consumer reads exactly those back;
//! * for an object body `x-attempts` is 0 when `attempts` is missing and absent when it is null,
//!   an object or an array, whatever an out-of-band header said.
//!
//! Input: the body, then optionally `0xFF` and the bytes the headers and the table come from.
#![no_main]

use babelqueue_core::Headers;
use babelqueue_envelope::{Envelope, JsonKind};
use babelqueue_fuzz::{headers, long_text, split_body, text};
use babelqueue_transport_amqp::projection::{
    APP_ID, CONTENT_ENCODING, CONTENT_TYPE, HEADER_ATTEMPTS, PERSISTENT, header_text, properties,
    properties_json, received_headers,
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
    let attempts_header = table.and_then(|t| t.inner().get(HEADER_ATTEMPTS));
    match envelope.get("attempts") {
        None => assert_eq!(attempts_header, Some(&AMQPValue::LongInt(0))),
        Some(raw)
            if matches!(
                raw.kind(),
                JsonKind::Null | JsonKind::Object | JsonKind::Array
            ) =>
        {
            assert_eq!(
                attempts_header, None,
                "an out-of-band header must not pose as x-attempts"
            );
        }
        Some(_) => {}
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
