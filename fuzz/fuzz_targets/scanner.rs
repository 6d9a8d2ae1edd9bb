//! The codec's JSON scanner against serde_json, on the same text.
//!
//! * Text serde_json accepts must be accepted by `RawJson::parse`, and mean the same value
//!   (compared structurally: strings after unescaping, numbers by value, members by name with
//!   the last of a repeated name winning in both).
//! * Text serde_json rejects must be rejected by the codec and classified as poison (invalid
//!   UTF-8 or invalid JSON), except where the codec documents that it reads *more* than
//!   serde_json: lone surrogate escapes (`"\ud800"` is valid JSON text, kept as written),
//!   numbers beyond a double (`1e400`, kept as their literal) and nesting deeper than
//!   serde_json's 128 levels (the codec reads up to `MAX_DEPTH` = 1000).
//!
//! An input starting with a NUL byte (which no JSON text does) is not text: the rest of it
//! drives a generator that writes a random valid JSON document with random whitespace, escapes
//! and number spellings, so the accepting side is exercised far more than random bytes would.
#![no_main]

use babelqueue_envelope::{
    Envelope, JsonKind, Object, PoisonCause, RawJson, Verdict, classify, poison_cause,
};
use babelqueue_fuzz::{Tree, compact_array_items};
use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((0, rest)) => generated(rest),
        _ => check(data),
    }
});

fn generated(rest: &[u8]) {
    let mut u = Unstructured::new(rest);
    let Ok(tree) = Tree::arbitrary(&mut u, 8) else {
        return;
    };
    let mut text = String::new();
    if tree.write(&mut u, &mut text).is_err() {
        return;
    }
    if let Err(e) = serde_json::from_str::<Value>(&text) {
        panic!("the generator wrote JSON serde_json rejects ({e}): {text}");
    }
    check(text.as_bytes());
}

fn check(bytes: &[u8]) {
    let ours = std::str::from_utf8(bytes).map(RawJson::parse);
    match serde_json::from_slice::<Value>(bytes) {
        Ok(theirs) => {
            let Ok(ours) = ours else {
                panic!("serde_json read text that is not UTF-8");
            };
            let raw = match ours {
                Ok(raw) => raw,
                Err(e) => panic!("serde_json accepts this text, the codec does not: {e}"),
            };
            same_value(&raw, &theirs);
            // The compact text is a fixed point: parsing it again gives the same value.
            let again = RawJson::parse(raw.as_str()).expect("the compact text parses again");
            assert_eq!(again, raw, "minifying is not idempotent");
            verdict_of_valid_json(bytes, &theirs);
        }
        Err(e) => {
            let Ok(ours) = ours else {
                // Not UTF-8: the codec rejects it before looking at the JSON.
                let verdict = classify(bytes);
                assert!(
                    matches!(verdict, Verdict::Poison(PoisonCause::InvalidUtf8 { .. })),
                    "bytes that are not UTF-8 got verdict {verdict:?}"
                );
                return;
            };
            let message = e.to_string();
            let codec_reads_more = [
                "recursion limit",
                "number out of range",
                "surrogate",
                "hex escape",
                "unicode code point",
            ]
            .iter()
            .any(|m| message.contains(m));
            if codec_reads_more {
                return;
            }
            if let Ok(raw) = ours {
                panic!("serde_json rejects this text ({message}), the codec reads {raw:?}");
            }
            match classify(bytes) {
                Verdict::Poison(PoisonCause::InvalidJson(_)) => {}
                other => panic!("serde_json rejects this text ({message}); verdict {other:?}"),
            }
        }
    }
}

/// What the strict classifier may say about text that is valid JSON: never a syntax cause.
fn verdict_of_valid_json(bytes: &[u8], theirs: &Value) {
    let cause = poison_cause(bytes, false);
    match theirs {
        Value::Object(_) => {
            assert!(
                !matches!(
                    cause,
                    Some(PoisonCause::InvalidUtf8 { .. } | PoisonCause::InvalidJson(_))
                ),
                "valid JSON object classified as a syntax error: {cause:?}"
            );
            assert!(Envelope::parse_object(bytes).is_ok());
        }
        other => {
            let found = kind_of(other);
            assert_eq!(cause, Some(PoisonCause::RootNotObject { found }));
        }
    }
}

fn kind_of(value: &Value) -> JsonKind {
    match value {
        Value::Null => JsonKind::Null,
        Value::Bool(_) => JsonKind::Bool,
        Value::Number(_) => JsonKind::Number,
        Value::String(_) => JsonKind::String,
        Value::Array(_) => JsonKind::Array,
        Value::Object(_) => JsonKind::Object,
    }
}

fn same_value(raw: &RawJson, theirs: &Value) {
    assert_eq!(raw.kind(), kind_of(theirs), "{raw:?} vs {theirs}");
    match theirs {
        Value::Null => assert!(raw.is_null()),
        Value::Bool(b) => assert_eq!(raw.as_bool(), Some(*b)),
        Value::String(s) => {
            let ours = raw.as_string().expect("a string value");
            assert_eq!(&*ours, s.as_str());
        }
        Value::Number(n) => same_number(raw.as_str(), n),
        Value::Array(items) => {
            let ours = compact_array_items(raw.as_str());
            assert_eq!(ours.len(), items.len(), "{raw:?} vs {theirs}");
            for (text, item) in ours.iter().zip(items) {
                let element = RawJson::parse(text).expect("an element of a parsed array parses");
                same_value(&element, item);
            }
        }
        Value::Object(members) => {
            let ours = Object::parse(raw.as_str()).expect("a parsed object parses as Object");
            // Both resolve a repeated name last-wins, so both hold one entry per name.
            assert_eq!(ours.len(), members.len(), "{raw:?} vs {theirs}");
            for (key, value) in ours.iter() {
                let name = key.name();
                let Some(theirs) = members.get(&*name) else {
                    panic!("member {name:?} missing on the serde_json side");
                };
                same_value(value, theirs);
            }
        }
    }
}

/// Compares a number literal with serde_json's reading of it. serde_json keeps integers that fit
/// 64 bits exactly and reads everything else as a double. Its default float parser (without the
/// `float_roundtrip` feature, which the fuzz build leaves off so the dependency graph is the
/// product's) is fast but not correctly rounded: it was seen 2 units in the last place away from
/// Rust's `str::parse`. Up to 4096 ULPs (a relative 1e-12) are allowed, so this never fails on
/// rounding; a misread digit or exponent is off by far more.
fn same_number(literal: &str, theirs: &serde_json::Number) {
    if let Some(u) = theirs.as_u64() {
        assert_eq!(literal.parse::<u64>().ok(), Some(u), "{literal}");
    } else if let Some(i) = theirs.as_i64() {
        assert_eq!(literal.parse::<i64>().ok(), Some(i), "{literal}");
    } else {
        let theirs = theirs.as_f64().expect("a serde_json number is a double");
        let ours: f64 = literal
            .parse()
            .expect("a JSON number literal parses as f64");
        let close = ours == theirs
            || (ours.signum() == theirs.signum()
                && ours.to_bits().abs_diff(theirs.to_bits()) <= 4096);
        assert!(close, "{literal}: codec {ours:e}, serde_json {theirs:e}");
    }
}
