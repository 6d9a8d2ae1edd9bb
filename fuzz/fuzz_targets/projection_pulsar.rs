//! Pulsar projection: `properties`, `routed_properties`, `declared`, `property_attempts`,
//! `count`, `facts` and `check_size` on any payload, any message properties and any redelivery
//! count, with the facts a message reports classified and reconciled by the runtime
//! (`babelqueue_core::classify`, `attempts`).
//!
//! Checked, as the module documents:
//! * a non-object body gets no property; an object gets `bq-attempts` (0 for a missing or null
//!   `attempts`, the integer as written, nothing for other types) and never an empty value;
//! * a re-publish on behalf of a delivery pins `bq-job` to the carried URN (trimmed, only for a
//!   body with an identity of its own), and one of a gated delivery restores the declared
//!   version and the carried `bq-job` exactly; every other property is the normal projection;
//! * round trip: the facts of the properties this SDK wrote (first delivery) are the body's own
//!   URN, schema version and count, and the payload reaches the runtime byte for byte whenever
//!   its `attempts` is not negative;
//! * on any properties: `bq-job` is the URN as carried (blank is none), `bq-schema-version` the
//!   declared text, and the count is `CarriedOrBody` of a valid `bq-attempts` (plain digits,
//!   at most 2^31 - 1) and the redelivery count; through the runtime a readable body with an
//!   integer `attempts` gets `max(bq-attempts or attempts, redelivery count)`, rewritten only
//!   when that differs, and any other body is left as it is;
//! * a payload above `MAX_MESSAGE_SIZE` is refused, any other accepted.
//!
//! Dropped with contract v2: `consume`, `gated`, `native_attempts`, `reconciled_attempts` and the
//! routes (`Route::Urn`, `Route::Gated`) are gone: the binding reports facts, and the gate, the
//! routing by `bq-job` and the reconciliation are checked through the runtime's `classify` and
//! `reconcile` instead. Out-of-band headers do not apply: the binding carries none.
//!
//! Input: the payload, then optionally `0xFF` and the bytes the other arguments come from.
#![no_main]

use babelqueue_core::classify::Class;
use babelqueue_core::{Count, Declared, Facts};
use babelqueue_envelope::{Envelope, JsonKind, ascii};
use babelqueue_fuzz::{check_classified, check_reconciled, integer_attempts, split_body, text};
use babelqueue_transport_pulsar::projection::{
    MAX_MESSAGE_SIZE, MAX_PROPERTY_ATTEMPTS, PROP_ATTEMPTS, PROP_JOB, PROP_SCHEMA_VERSION,
    Properties, check_size, count, declared, facts, properties, property_attempts,
    routed_properties,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

const TOPIC: &str = "orders";

fuzz_target!(|data: &[u8]| {
    let (payload, params) = split_body(data);
    let mut u = Unstructured::new(params);
    let own = produce(payload);
    round_trip(payload, &own);
    let _ = republish(payload, &mut u);
    if let Ok(props) = received(&mut u) {
        let redelivery_count = u.arbitrary().unwrap_or(0);
        check_consume(payload, &props, redelivery_count);
    }
    if let Ok(len) = u.int_in_range(0..=2 * MAX_MESSAGE_SIZE) {
        assert_eq!(check_size(TOPIC, len).is_ok(), len <= MAX_MESSAGE_SIZE);
    }
});

fn produce(payload: &[u8]) -> Properties {
    let props = properties(payload);
    let Ok(envelope) = Envelope::parse_object(payload) else {
        assert!(props.is_empty(), "a non-object body gets no property");
        return props;
    };
    assert!(props.values().all(|v| !v.is_empty()), "{props:?}");
    let expected = match envelope.get("attempts") {
        None => Some("0".to_owned()),
        Some(raw) if raw.kind() == JsonKind::Null => Some("0".to_owned()),
        Some(raw) => raw.as_i64().map(|n| n.to_string()),
    };
    assert_eq!(props.get(PROP_ATTEMPTS), expected.as_ref());
    props
}

fn round_trip(payload: &[u8], own: &Properties) {
    let reported = check_consume(payload, own, 0);
    assert_eq!(
        reported.declared_version,
        own.get(PROP_SCHEMA_VERSION)
            .map_or(Declared::Absent, |v| Declared::Text(v.clone()))
    );
    let negative = integer_attempts(payload).is_some_and(|n| n < 0);
    if !negative && let Class::Readable { body, .. } = check_classified(payload, &reported, TOPIC) {
        assert_eq!(
            &*body, payload,
            "publish then consume must give the payload back"
        );
    }
}

fn republish(payload: &[u8], u: &mut Unstructured<'_>) -> Result<()> {
    let mut facts = Facts::default();
    if u.arbitrary()? {
        facts.urn = Some(text(u)?);
    }
    if u.arbitrary()? {
        facts.declared_version = Declared::Text(text(u)?);
    }
    let props = routed_properties(payload, &facts);
    let mut normal = properties(payload);
    if let Some(declared) = facts.declared_version.rejected() {
        normal.insert(PROP_SCHEMA_VERSION.to_owned(), declared);
        if let Some(urn) = &facts.urn {
            normal.insert(PROP_JOB.to_owned(), urn.clone());
        }
        assert_eq!(
            props, normal,
            "a gated re-publish restores what was carried"
        );
        return Ok(());
    }
    let pinned = facts
        .urn
        .as_deref()
        .map(ascii::trim)
        .filter(|urn| !urn.is_empty());
    let has_identity = Envelope::parse_object(payload).is_ok_and(|e| !e.urn().is_empty());
    if let Some(urn) = pinned
        && has_identity
    {
        normal.insert(PROP_JOB.to_owned(), urn.to_owned());
    }
    assert_eq!(
        props, normal,
        "a re-publish is the projection, bq-job pinned"
    );
    Ok(())
}

fn received(u: &mut Unstructured<'_>) -> Result<Properties> {
    let mut props = Properties::new();
    for _ in 0..u.int_in_range(0..=6)? {
        let key = if u.ratio(3, 4)? {
            (*u.choose(&[PROP_ATTEMPTS, PROP_JOB, PROP_SCHEMA_VERSION])?).to_owned()
        } else {
            text(u)?
        };
        let value = if u.ratio(1, 3)? {
            u.arbitrary::<i64>()?.to_string()
        } else {
            text(u)?
        };
        props.insert(key, value);
    }
    Ok(props)
}

/// The facts of a received message, checked against the module docs, and what the runtime
/// makes of them.
fn check_consume(payload: &[u8], props: &Properties, redelivery_count: u32) -> Facts {
    let carried = property_attempts(props);
    if let Some(n) = carried {
        assert!((0..=MAX_PROPERTY_ATTEMPTS).contains(&n));
        let raw = props
            .get(PROP_ATTEMPTS)
            .map(String::as_str)
            .unwrap_or_default();
        assert!(
            raw.bytes().all(|b| b.is_ascii_digit()),
            "{raw:?} read as {n}"
        );
    }
    let redelivered = i64::from(redelivery_count);
    let want_count = Count::CarriedOrBody {
        carried,
        redelivered,
    };
    assert_eq!(count(props, redelivery_count), want_count);

    let reported = facts(props, redelivery_count);
    let job = props.get(PROP_JOB).filter(|j| !ascii::is_blank(j));
    assert_eq!(
        reported.urn.as_ref(),
        job,
        "bq-job as carried, blank is none"
    );
    assert_eq!(reported.declared_version, declared(props));
    assert_eq!(
        reported.declared_version,
        props
            .get(PROP_SCHEMA_VERSION)
            .map_or(Declared::Absent, |v| Declared::Text(v.clone()))
    );
    assert_eq!(reported.count, Some(want_count));
    assert!(want_count.native() >= redelivered);

    let want = integer_attempts(payload).and_then(|current| {
        let value = carried.unwrap_or(current).max(redelivered);
        (value != current).then_some(value)
    });
    check_reconciled(payload, reported.count, want);
    check_classified(payload, &reported, TOPIC);
    reported
}
