//! Azure Service Bus projection: `outgoing`, `gated` and `reconcile` on any body, any
//! application properties (every AMQP type the binding models) and any delivery count.
//!
//! Checked, as the module documents:
//! * the body is sent byte for byte with `application/json`; a non-object body gets nothing
//!   else; an error only comes from an id longer than 128 characters, and a successful
//!   projection never carries one;
//! * the gate reads the last `bq-schema-version`: absent, null, blank or `"1"` text, and the
//!   integer 1 of any width pass; every other value is reported;
//! * `attempts = max(body, DeliveryCount - 1)`, the body unchanged unless the count raises it.
//!
//! Input: the body, then optionally `0xFF` and the bytes the rest comes from.
#![no_main]

use babelqueue_envelope::{Envelope, JsonKind, ascii};
use babelqueue_fuzz::{split_body, text};
use babelqueue_transport_asb::projection::{
    AmqpValue, ApplicationProperties, CONTENT_TYPE, MAX_ID_CHARS, PROP_SCHEMA_VERSION, gated,
    outgoing, reconcile,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (body, params) = split_body(data);
    let mut u = Unstructured::new(params);
    produce(body);
    let _ = gate(&mut u);
    if let Ok(count) = u.arbitrary::<u32>() {
        check_reconcile(body, count);
    }
});

fn produce(body: &[u8]) {
    let parsed = Envelope::parse_object(body);
    match outgoing(body) {
        Ok(out) => {
            assert_eq!(out.body, body, "the body is sent byte for byte");
            assert_eq!(out.content_type, CONTENT_TYPE);
            for id in [&out.message_id, &out.correlation_id].into_iter().flatten() {
                assert!(!id.is_empty() && id.chars().count() <= MAX_ID_CHARS);
            }
            if parsed.is_err() {
                assert!(out.subject.is_none() && out.message_id.is_none());
                assert!(out.correlation_id.is_none() && out.application_properties.is_empty());
            }
        }
        Err(e) => {
            assert!(parsed.is_ok(), "only an object body can be refused: {e}");
            assert!(!e.to_string().is_empty());
        }
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

fn gate(u: &mut Unstructured<'_>) -> Result<()> {
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
    let verdict = gated(&props);
    assert_eq!(
        verdict.is_none(),
        passes(last),
        "{last:?} gave the verdict {verdict:?}"
    );
    Ok(())
}

fn check_reconcile(body: &[u8], count: u32) {
    let out = reconcile(body, count);
    let current = Envelope::parse_object(body)
        .ok()
        .and_then(|e| match e.get("attempts") {
            None => Some(0),
            Some(raw) if raw.kind() == JsonKind::Null => Some(0),
            Some(raw) => raw.as_i64(),
        });
    let native = i64::from(count) - 1;
    match current {
        Some(a) if count > 1 && native > a => {
            let back = Envelope::parse_object(&out).expect("a rewritten body is an object");
            assert_eq!(back.attempts(), native);
        }
        _ => assert_eq!(
            &*out, body,
            "the count does not raise attempts: body unchanged"
        ),
    }
}
