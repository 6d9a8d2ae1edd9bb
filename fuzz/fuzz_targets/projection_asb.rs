//! Azure Service Bus projection: `outgoing`, `declared` and `count` on any body, any application
//! properties (every AMQP type the binding models) and any delivery count, with the facts they
//! report classified and reconciled by the runtime (`babelqueue_core::classify`, `attempts`).
//!
//! Checked, as the module documents:
//! * the body is sent byte for byte with `application/json`; a non-object body gets nothing
//!   else; an error only comes from an id longer than 128 characters, and a successful
//!   projection never carries one;
//! * round trip: the `bq-schema-version` a producer wrote reads back as the declared version
//!   (the integer `meta.schema_version`, else absent), and a first delivery (`DeliveryCount` 1)
//!   reports no count, so a readable body reaches the runtime byte for byte;
//! * `declared` reports the last `bq-schema-version` typed, strings untrimmed; through the
//!   runtime's gate absent, null, ASCII-blank or `"1"` text and the integer 1 of any width pass,
//!   every other value is rejected;
//! * `count` reports `DeliveryCount - 1` earlier deliveries above 1, nothing otherwise, and the
//!   runtime makes that `attempts = max(body, DeliveryCount - 1)`, the body rewritten only when
//!   the count raises it.
//!
//! Dropped with contract v2: the binding no longer gates (`gated`) nor rewrites bodies
//! (`reconcile`); both rules are now checked through the runtime's `classify` and `reconcile`
//! on the facts the binding reports. Out-of-band headers do not apply: the binding carries none.
//!
//! Input: the body, then optionally `0xFF` and the bytes the rest comes from.
#![no_main]

use babelqueue_core::{Count, Declared, Delivery};
use babelqueue_envelope::{Envelope, ascii};
use babelqueue_fuzz::{body_attempts, check_classified, check_reconciled, split_body, text};
use babelqueue_transport_asb::projection::{
    AmqpValue, ApplicationProperties, CONTENT_TYPE, MAX_ID_CHARS, PROP_SCHEMA_VERSION, count,
    declared, outgoing,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

const QUEUE: &str = "orders";

fuzz_target!(|data: &[u8]| {
    let (body, params) = split_body(data);
    let mut u = Unstructured::new(params);
    produce(body);
    let _ = consume(body, &mut u);
});

fn produce(body: &[u8]) {
    let parsed = Envelope::parse_object(body);
    let out = match outgoing(body) {
        Ok(out) => out,
        Err(e) => {
            assert!(parsed.is_ok(), "only an object body can be refused: {e}");
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    assert_eq!(out.body, body, "the body is sent byte for byte");
    assert_eq!(out.content_type, CONTENT_TYPE);
    for id in [&out.message_id, &out.correlation_id].into_iter().flatten() {
        assert!(!id.is_empty() && id.chars().count() <= MAX_ID_CHARS);
    }
    let Ok(envelope) = parsed else {
        assert!(out.subject.is_none() && out.message_id.is_none());
        assert!(out.correlation_id.is_none() && out.application_properties.is_empty());
        assert_eq!(declared(&out.application_properties), Declared::Absent);
        return;
    };

    // Round trip: what a consumer reads back from the properties this producer wrote.
    let version = envelope
        .meta()
        .and_then(|m| m.get("schema_version"))
        .and_then(|v| v.as_i64());
    let read = declared(&out.application_properties);
    assert_eq!(
        read,
        version.map_or(Declared::Absent, |v| Declared::Integer(i128::from(v))),
        "the declared version reads back as projected"
    );
    assert_eq!(count(1), None, "a first delivery reports no count");
    let delivery = Delivery::new(QUEUE, out.body.clone()).with_declared_version(read);
    if let babelqueue_core::classify::Class::Readable { body: seen, .. } =
        check_classified(&out.body, delivery.facts(), QUEUE)
    {
        assert_eq!(
            &*seen, body,
            "a first delivery reaches the runtime unchanged"
        );
    }
}

fn value(u: &mut Unstructured<'_>) -> Result<AmqpValue> {
    Ok(match u.int_in_range(0..=17)? {
        0 => AmqpValue::Null,
        1 => AmqpValue::Bool(u.arbitrary()?),
        2 => AmqpValue::Ubyte(u.arbitrary()?),
        3 => AmqpValue::Ushort(u.arbitrary()?),
        4 => AmqpValue::Uint(u.arbitrary()?),
        5 => AmqpValue::Ulong(u.arbitrary()?),
        6 => AmqpValue::Byte(u.arbitrary()?),
        7 => AmqpValue::Short(u.arbitrary()?),
        8 => AmqpValue::Int(u.arbitrary()?),
        9 => AmqpValue::Long(u.arbitrary()?),
        10 => AmqpValue::Float(u.arbitrary()?),
        11 => AmqpValue::Double(u.arbitrary()?),
        12 => AmqpValue::Binary(u.arbitrary()?),
        13 => AmqpValue::Other(text(u)?, text(u)?),
        14 => AmqpValue::integer(u.arbitrary()?),
        15 => AmqpValue::integer(1),
        16 => AmqpValue::String("1".to_owned()),
        _ => AmqpValue::String(text(u)?),
    })
}

/// Whether the gate must pass this value (the rule, restated from the module docs).
fn passes(value: Option<&AmqpValue>) -> bool {
    let text_passes = |t: &str| ascii::is_blank(t) || t == "1";
    match value {
        None | Some(AmqpValue::Null) => true,
        Some(AmqpValue::String(s)) => text_passes(s),
        Some(AmqpValue::Binary(b)) => text_passes(&String::from_utf8_lossy(b)),
        Some(AmqpValue::Ubyte(n)) => *n == 1,
        Some(AmqpValue::Ushort(n)) => *n == 1,
        Some(AmqpValue::Uint(n)) => *n == 1,
        Some(AmqpValue::Ulong(n)) => *n == 1,
        Some(AmqpValue::Byte(n)) => *n == 1,
        Some(AmqpValue::Short(n)) => *n == 1,
        Some(AmqpValue::Int(n)) => *n == 1,
        Some(AmqpValue::Long(n)) => *n == 1,
        Some(_) => false,
    }
}

fn consume(body: &[u8], u: &mut Unstructured<'_>) -> Result<()> {
    let mut props = ApplicationProperties::new();
    for _ in 0..u.int_in_range(0..=4)? {
        let name = if u.ratio(2, 3)? {
            PROP_SCHEMA_VERSION.to_owned()
        } else {
            text(u)?
        };
        props.push((name, value(u)?));
    }
    let last = props
        .iter()
        .rev()
        .find(|(k, _)| k == PROP_SCHEMA_VERSION)
        .map(|(_, v)| v);
    let reported = declared(&props);
    match last {
        None => assert_eq!(reported, Declared::Absent),
        Some(AmqpValue::Null) => assert_eq!(reported, Declared::Null),
        Some(AmqpValue::String(s)) => assert_eq!(reported, Declared::Text(s.clone())),
        Some(AmqpValue::Other(kind, shown)) => {
            assert_eq!(reported, Declared::Text(format!("{kind}:{shown}")));
        }
        Some(_) => {}
    }
    let rejected = reported.rejected();
    assert_eq!(
        rejected.is_none(),
        passes(last),
        "{last:?} gave the verdict {rejected:?}"
    );

    let delivery_count: u32 = u.arbitrary()?;
    let reported_count = count(delivery_count);
    let earlier = i64::from(delivery_count) - 1;
    assert_eq!(
        reported_count,
        (delivery_count > 1).then_some(Count::Redelivered(earlier))
    );
    let want = match body_attempts(body) {
        Some(a) if delivery_count > 1 && earlier > a => Some(earlier),
        _ => None,
    };
    check_reconciled(body, reported_count, want);

    // What the transport's pop hands the runtime.
    let mut delivery = Delivery::new(QUEUE, body.to_vec()).with_declared_version(reported);
    if let Some(c) = reported_count {
        delivery = delivery.with_count(c);
    }
    check_classified(body, delivery.facts(), QUEUE);
    Ok(())
}
