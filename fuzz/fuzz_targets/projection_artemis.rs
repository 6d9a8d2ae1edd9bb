//! ActiveMQ Artemis (AMQP 1.0) projection: `project`, `message`, `with_headers`, `delayed`,
//! `read`, `gate_verdict`, `body_bytes` and `reconcile`, on any body, any application properties
//! (every AMQP simple type), any body section and any delivery count.
//!
//! Checked, as the module documents:
//! * `message` carries the body byte for byte, and `body_bytes` gives it back;
//! * out-of-band headers never override a `bq_` property, and a consumer reads back exactly the
//!   usable ones;
//! * `read`: a gated message keeps its body; otherwise `attempts = max(body, delivery-count)`,
//!   the body changing only when the count raises it;
//! * a zero delay leaves the message alone; any other is rounded up to whole milliseconds.
//!
//! Input: the body, then optionally `0xFF` and the bytes the rest comes from.
#![no_main]

use std::time::Duration;

use babelqueue_core::Headers;
use babelqueue_envelope::{Envelope, JsonKind};
use babelqueue_fuzz::{headers, split_body, text};
use babelqueue_transport_artemis::projection::{
    AmqpMessage, CONTRACT_PROPERTY_PREFIX, DELIVERY_DELAY_ANNOTATION, SCHEMA_VERSION_PROPERTY,
    body_bytes, delayed, gate_verdict, message, project, read, reconcile, with_headers,
};
use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::{
    AmqpSequence, AmqpValue, ApplicationProperties, Batch, Body, Data, Header,
};
use fe2o3_amqp::types::primitives::{Binary, SimpleValue, Symbol, Timestamp, Value};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (body, params) = split_body(data);
    let mut u = Unstructured::new(params);
    produce(body, &mut u);
    if let Ok(msg) = received(body, &mut u) {
        check_read(&msg);
    }
});

/// `attempts` as the reconciliation reads it: 0 when missing or null, the integer, or `None`
/// when the body is not an object or `attempts` is not an integer.
fn attempts_of(body: &[u8]) -> Option<i64> {
    let envelope = Envelope::parse_object(body).ok()?;
    match envelope.get("attempts") {
        None => Some(0),
        Some(raw) if raw.kind() == JsonKind::Null => Some(0),
        Some(raw) => raw.as_i64(),
    }
}

/// `reconcile` against its formula.
fn check_reconcile(body: &[u8], count: u32) -> Vec<u8> {
    let out = reconcile(body, count).into_owned();
    match attempts_of(body) {
        Some(a) if i64::from(count) > a => {
            let back = Envelope::parse_object(&out).expect("a rewritten body is an object");
            assert_eq!(back.attempts(), i64::from(count));
        }
        _ => assert_eq!(
            out, body,
            "the count does not raise attempts: body unchanged"
        ),
    }
    out
}

fn produce(body: &[u8], u: &mut Unstructured<'_>) {
    let projection = project(body);
    if Envelope::parse_object(body).is_err() {
        assert_eq!(
            projection,
            Default::default(),
            "a non-object body projects nothing"
        );
    }
    let msg = message(body);
    assert_eq!(
        body_bytes(&msg.body),
        body,
        "the body travels byte for byte"
    );

    let extra = headers(u).unwrap_or_default();
    let msg = with_headers(msg, &extra);
    let app = msg.application_properties.as_ref();
    for (name, value) in &projection.properties {
        assert_eq!(
            app.and_then(|p| p.0.get(*name)),
            Some(&SimpleValue::String(value.clone())),
            "the projection's {name} wins over out-of-band headers"
        );
    }
    let usable: Headers = extra
        .iter()
        .filter(|(k, v)| {
            !k.trim().is_empty() && !v.trim().is_empty() && !k.starts_with(CONTRACT_PROPERTY_PREFIX)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let got = read(&msg);
    assert_eq!(got.headers, usable);
    assert_eq!(got.delivery_count, 0);
    if got.gated.is_some() {
        assert_eq!(got.body, body);
    } else {
        assert_eq!(got.body, check_reconcile(body, 0));
    }

    if let Ok((secs, nanos)) = u.arbitrary::<(u64, u32)>() {
        let delay = Duration::new(secs, nanos % 1_000_000_000);
        match delayed(msg.clone(), delay) {
            None => assert!(delay.as_nanos().div_ceil(1_000_000) > i64::MAX as u128),
            Some(later) if delay.is_zero() => assert_eq!(later, msg),
            Some(later) => {
                let key = OwnedKey::Symbol(Symbol::from(DELIVERY_DELAY_ANNOTATION));
                let annotation = later.message_annotations.as_ref().and_then(|a| a.get(&key));
                let millis = i64::try_from(delay.as_nanos().div_ceil(1_000_000)).ok();
                assert_eq!(annotation, millis.map(Value::Long).as_ref());
            }
        }
    }
}

fn simple(u: &mut Unstructured<'_>) -> Result<SimpleValue> {
    Ok(match u.int_in_range(0..=20)? {
        0 => SimpleValue::Null,
        1 => SimpleValue::Bool(u.arbitrary()?),
        2 => SimpleValue::Ubyte(u.arbitrary()?),
        3 => SimpleValue::Ushort(u.arbitrary()?),
        4 => SimpleValue::Uint(u.arbitrary()?),
        5 => SimpleValue::Ulong(u.arbitrary()?),
        6 => SimpleValue::Byte(u.arbitrary()?),
        7 => SimpleValue::Short(u.arbitrary()?),
        8 => SimpleValue::Int(u.arbitrary()?),
        9 => SimpleValue::Long(u.arbitrary()?),
        10 => SimpleValue::Float(u.arbitrary::<f32>()?.into()),
        11 => SimpleValue::Double(u.arbitrary::<f64>()?.into()),
        12 => SimpleValue::Char(u.arbitrary()?),
        13 => SimpleValue::Timestamp(Timestamp::from_milliseconds(u.arbitrary()?)),
        14 => SimpleValue::Uuid(u.arbitrary::<[u8; 16]>()?.into()),
        15 => SimpleValue::Binary(Binary::from(u.arbitrary::<Vec<u8>>()?)),
        16 => SimpleValue::Symbol(Symbol::from(text(u)?)),
        17 => SimpleValue::Decimal32(u.arbitrary::<[u8; 4]>()?.into()),
        18 => SimpleValue::Int(1),
        19 => SimpleValue::String("1".to_owned()),
        _ => SimpleValue::String(text(u)?),
    })
}

fn value(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let max = if depth == 0 { 6 } else { 8 };
    Ok(match u.int_in_range(0..=max)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::Long(u.arbitrary()?),
        3 => Value::Double(u.arbitrary::<f64>()?.into()),
        4 => Value::String(text(u)?),
        5 => Value::Binary(Binary::from(u.arbitrary::<Vec<u8>>()?)),
        6 => Value::Symbol(Symbol::from(text(u)?)),
        7 => {
            let mut items = Vec::new();
            for _ in 0..u.int_in_range(0..=3)? {
                items.push(value(u, depth - 1)?);
            }
            Value::List(items)
        }
        _ => Value::Uint(u.arbitrary()?),
    })
}

/// A message as a broker might deliver it: any body section (the fuzzed body as text, binary or
/// data sections, or something that is no envelope at all), any application properties and
/// delivery count.
fn received(body: &[u8], u: &mut Unstructured<'_>) -> Result<AmqpMessage> {
    let mut msg = message(body);
    msg.body = match u.int_in_range(0..=5)? {
        0 => msg.body,
        1 => Body::Value(AmqpValue(Value::Binary(Binary::from(body.to_vec())))),
        2 => {
            let cut = u.choose_index(body.len() + 1)?;
            Body::Data(Batch::new(vec![
                Data(Binary::from(body[..cut].to_vec())),
                Data(Binary::from(body[cut..].to_vec())),
            ]))
        }
        3 => Body::Value(AmqpValue(value(u, 2)?)),
        4 => Body::Sequence(Batch::new(vec![AmqpSequence(vec![value(u, 2)?])])),
        _ => Body::Empty,
    };
    let mut props = ApplicationProperties::default();
    for _ in 0..u.int_in_range(0..=5)? {
        let name = if u.ratio(1, 2)? {
            SCHEMA_VERSION_PROPERTY.to_owned()
        } else {
            text(u)?
        };
        props.0.insert(name, simple(u)?);
    }
    msg.application_properties = Some(props);
    if u.arbitrary()? {
        msg.header = Some(Header {
            delivery_count: u.arbitrary()?,
            ..Header::default()
        });
    } else {
        msg.header = None;
    }
    Ok(msg)
}

fn check_read(msg: &AmqpMessage) {
    let property = msg
        .application_properties
        .as_ref()
        .and_then(|p| p.0.get(SCHEMA_VERSION_PROPERTY));
    let verdict = gate_verdict(property);
    let raw = body_bytes(&msg.body);
    let got = read(msg);
    assert_eq!(got.gated, verdict);
    let count = msg.header.as_ref().map_or(0, |h| h.delivery_count);
    assert_eq!(got.delivery_count, count);
    if verdict.is_some() {
        assert_eq!(got.body, raw, "a gated message keeps its body");
    } else {
        assert_eq!(got.body, check_reconcile(&raw, count));
    }
    assert!(
        got.headers
            .keys()
            .all(|k| !k.starts_with(CONTRACT_PROPERTY_PREFIX))
    );
}
