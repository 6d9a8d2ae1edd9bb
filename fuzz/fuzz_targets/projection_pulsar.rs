//! Pulsar projection: `properties`, `routed_properties`, `gated`, the attempts rules and
//! `consume` on any payload, any message properties and any redelivery count.
//!
//! Checked, as the module documents:
//! * a non-object body gets no property; an object gets `bq-attempts` (0 for a missing or null
//!   `attempts`, the integer as written, nothing for other types) and never an empty value;
//! * a re-publish pins `bq-job` to its route, and a gated one restores the rejected version;
//! * `consume`: a gated or unreadable payload is handed over byte for byte; otherwise the body
//!   changes only when the reconciled count differs, and then carries exactly that count;
//! * publish then consume (the properties this SDK wrote, first delivery) gives the payload back
//!   byte for byte whenever its `attempts` is not negative.
//!
//! Input: the payload, then optionally `0xFF` and the bytes the other arguments come from.
#![no_main]

use std::borrow::Cow;

use babelqueue_core::Route;
use babelqueue_envelope::{Envelope, JsonKind, ascii};
use babelqueue_fuzz::{split_body, text};
use babelqueue_transport_pulsar::projection::{
    MAX_PROPERTY_ATTEMPTS, PROP_ATTEMPTS, PROP_JOB, PROP_SCHEMA_VERSION, Properties, consume,
    gated, native_attempts, properties, property_attempts, reconciled_attempts, routed_properties,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (payload, params) = split_body(data);
    let mut u = Unstructured::new(params);
    let own = produce(payload);
    round_trip(payload, &own);
    let _ = republish(payload, &mut u);
    if let Ok(props) = received(&mut u) {
        let count = u.arbitrary().unwrap_or(0);
        check_consume(payload, &props, count);
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
    let consumed = check_consume(payload, own, 0);
    let attempts = Envelope::parse_object(payload)
        .ok()
        .and_then(|e| e.get("attempts").map(|a| (a.kind(), a.as_i64())));
    let negative = matches!(attempts, Some((_, Some(n))) if n < 0);
    if !negative {
        assert_eq!(
            &*consumed.body, payload,
            "publish then consume must give the payload back"
        );
    }
}

fn republish(payload: &[u8], u: &mut Unstructured<'_>) -> Result<()> {
    let route = match u.int_in_range(0..=2)? {
        0 => Route::Body,
        1 => Route::Urn(text(u)?),
        _ => Route::Gated {
            declared: text(u)?,
            urn: if u.arbitrary()? { Some(text(u)?) } else { None },
        },
    };
    let props = routed_properties(payload, &route);
    match &route {
        Route::Urn(urn) if !urn.is_empty() => assert_eq!(props.get(PROP_JOB), Some(urn)),
        Route::Gated { declared, urn } => {
            assert_eq!(props.get(PROP_SCHEMA_VERSION), Some(declared));
            if let Some(urn) = urn {
                assert_eq!(props.get(PROP_JOB), Some(urn));
            }
        }
        _ => assert_eq!(props, properties(payload)),
    }
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

fn check_consume<'a>(
    payload: &'a [u8],
    props: &Properties,
    count: u32,
) -> babelqueue_transport_pulsar::projection::Consumed<'a> {
    let from_property = property_attempts(props);
    if let Some(n) = from_property {
        assert!((0..=MAX_PROPERTY_ATTEMPTS).contains(&n));
    }
    let native = native_attempts(props, count);
    assert!(native >= i64::from(count) && native >= 0);

    let consumed = consume(payload, props, count);
    assert_eq!(consumed.native_attempts, native);
    if let Some(declared) = gated(props) {
        assert_eq!(
            &*consumed.body, payload,
            "a gated payload is handed over as is"
        );
        assert_eq!(
            consumed.route,
            Route::Gated {
                declared,
                urn: props.get(PROP_JOB).cloned()
            }
        );
        return consumed;
    }
    let Ok(envelope) = Envelope::parse_object(payload) else {
        assert_eq!(
            &*consumed.body, payload,
            "an unreadable payload is handed over as is"
        );
        assert_eq!(consumed.route, Route::Body);
        return consumed;
    };
    let routed = props
        .get(PROP_JOB)
        .map(|j| ascii::trim(j).to_owned())
        .filter(|j| !j.is_empty());
    match routed {
        Some(urn) if !envelope.urn().is_empty() => assert_eq!(consumed.route, Route::Urn(urn)),
        _ => assert_eq!(consumed.route, Route::Body),
    }
    let current = envelope.get("attempts").and_then(|a| a.as_i64());
    match current {
        Some(current) => {
            let value = reconciled_attempts(current, props, count);
            if value == current {
                assert!(matches!(consumed.body, Cow::Borrowed(_)));
                assert_eq!(&*consumed.body, payload);
            } else {
                let back = Envelope::parse_object(&consumed.body).expect("a rewritten object");
                assert_eq!(back.attempts(), value);
            }
        }
        None => assert_eq!(&*consumed.body, payload),
    }
    consumed
}
