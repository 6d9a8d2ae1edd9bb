//! ActiveMQ Artemis (AMQP 1.0) projection: `project`, `message`, `with_headers`, `delayed`,
//! `read`, `declared` and `body_bytes` on any body, any application properties (every AMQP
//! simple type), any body section and any delivery count, with the facts a message reports
//! classified and reconciled by the runtime (`babelqueue_core::classify`, `attempts`).
//!
//! Checked, as the module documents:
//! * `message` carries the body byte for byte, and `body_bytes` gives it back;
//! * out-of-band headers never override a `bq_` property, and a consumer reads back exactly the
//!   usable ones;
//! * round trip: `read` of a message this SDK wrote gives the body unchanged, the projected
//!   `bq_schema_version` as the declared version (else absent) and a delivery count of 0;
//! * `read` of any message: the body as carried (never reconciled), the declared version typed
//!   as the module lists it (strings untrimmed), `Count::Redelivered(delivery-count)`, and the
//!   string application properties not named `bq_…` as headers; through the runtime's gate
//!   absent, null, ASCII-blank or `1` text and an integral 1 pass, everything else is rejected,
//!   and a readable body gets `attempts = max(body, delivery-count)`, rewritten only when the
//!   count raises it;
//! * a zero delay leaves the message alone; any other is rounded up to whole milliseconds.
//!
//! Dropped with contract v2: `gate_verdict`, `reconcile`, `Read::gated` and a `read` that
//! reconciled the body are gone; the gate and the reconciliation are checked through the
//! runtime's `classify` and `reconcile` on the facts `read` reports instead.
//!
//! Input: the body, then optionally `0xFF` and the bytes the rest comes from.
#![no_main]

use std::time::Duration;

use babelqueue_core::classify::Class;
use babelqueue_core::{Count, Declared, Delivery, Headers};
use babelqueue_envelope::{Envelope, ascii};
use babelqueue_fuzz::{
    body_attempts, check_classified, check_reconciled, headers, split_body, text,
};
use babelqueue_transport_artemis::projection::{
    AmqpMessage, CONTRACT_PROPERTY_PREFIX, DELIVERY_DELAY_ANNOTATION, Read,
    SCHEMA_VERSION_PROPERTY, body_bytes, declared, delayed, message, project, read, with_headers,
};
use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::{
    AmqpSequence, AmqpValue, ApplicationProperties, Batch, Body, Data, Header,
};
use fe2o3_amqp::types::primitives::{Binary, SimpleValue, Symbol, Timestamp, Value};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

const QUEUE: &str = "orders";

fuzz_target!(|data: &[u8]| {
    let (body, params) = split_body(data);
    let mut u = Unstructured::new(params);
    produce(body, &mut u);
    if let Ok(msg) = received(body, &mut u) {
        check_read(&msg);
    }
});

/// What the transport's pop hands the runtime for a message it read.
fn delivery(got: &Read) -> Delivery {
    Delivery::new(QUEUE, got.body.clone())
        .with_headers(got.headers.clone())
        .with_declared_version(got.declared.clone())
        .with_count(got.count())
}

/// The runtime's reconciliation of a read message: `attempts = max(body, delivery-count)`.
fn check_count(got: &Read) -> Vec<u8> {
    let n = i64::from(got.delivery_count);
    assert_eq!(got.count(), Count::Redelivered(n));
    let want = body_attempts(&got.body).filter(|a| n > *a).map(|_| n);
    check_reconciled(&got.body, Some(got.count()), want)
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

    // Round trip: a first delivery of what was sent.
    let got = read(&msg);
    assert_eq!(got.headers, usable);
    assert_eq!(got.body, body, "read never changes the body");
    assert_eq!(got.delivery_count, 0);
    let version = projection
        .properties
        .iter()
        .find(|(name, _)| *name == SCHEMA_VERSION_PROPERTY)
        .map(|(_, v)| v.clone());
    assert_eq!(
        got.declared,
        version.map_or(Declared::Absent, Declared::Text),
        "the declared version reads back as projected"
    );
    let reconciled = check_count(&got);
    let d = delivery(&got);
    if let Class::Readable { body: seen, .. } = check_classified(&got.body, d.facts(), QUEUE) {
        assert_eq!(&*seen, reconciled.as_slice());
        if body_attempts(body).is_some_and(|a| a >= 0) {
            assert_eq!(
                &*seen, body,
                "a first delivery reaches the runtime unchanged"
            );
        }
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

/// Whether the runtime's gate must pass this property (the module's type mapping and the gate's
/// rule, restated).
fn passes(property: Option<&SimpleValue>) -> bool {
    let text_passes = |t: &str| ascii::is_blank(t) || t == "1";
    match property {
        None | Some(SimpleValue::Null) => true,
        Some(SimpleValue::String(s)) => text_passes(s),
        Some(SimpleValue::Symbol(s)) => text_passes(s.as_str()),
        Some(SimpleValue::Char(c)) => text_passes(&c.to_string()),
        Some(SimpleValue::Binary(b)) => text_passes(&String::from_utf8_lossy(b)),
        Some(SimpleValue::Ubyte(n)) => *n == 1,
        Some(SimpleValue::Ushort(n)) => *n == 1,
        Some(SimpleValue::Uint(n)) => *n == 1,
        Some(SimpleValue::Ulong(n)) => *n == 1,
        Some(SimpleValue::Byte(n)) => *n == 1,
        Some(SimpleValue::Short(n)) => *n == 1,
        Some(SimpleValue::Int(n)) => *n == 1,
        Some(SimpleValue::Long(n)) => *n == 1,
        Some(_) => false,
    }
}

fn check_read(msg: &AmqpMessage) {
    let property = msg
        .application_properties
        .as_ref()
        .and_then(|p| p.0.get(SCHEMA_VERSION_PROPERTY));
    let raw = body_bytes(&msg.body);
    let got = read(msg);
    assert_eq!(got.body, raw, "read hands the body over as carried");
    assert_eq!(got.declared, declared(property));
    match property {
        None => assert_eq!(got.declared, Declared::Absent),
        Some(SimpleValue::Null) => assert_eq!(got.declared, Declared::Null),
        Some(SimpleValue::String(s)) => assert_eq!(got.declared, Declared::Text(s.clone())),
        Some(_) => {}
    }
    let rejected = got.declared.rejected();
    assert_eq!(
        rejected.is_none(),
        passes(property),
        "{property:?} gave the verdict {rejected:?}"
    );
    let count = msg.header.as_ref().map_or(0, |h| h.delivery_count);
    assert_eq!(got.delivery_count, count);
    let want_headers: Headers = msg
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
    assert_eq!(got.headers, want_headers);

    let reconciled = check_count(&got);
    let d = delivery(&got);
    if let Class::Readable { body, .. } = check_classified(&got.body, d.facts(), QUEUE) {
        assert_eq!(&*body, reconciled.as_slice());
    }
}
