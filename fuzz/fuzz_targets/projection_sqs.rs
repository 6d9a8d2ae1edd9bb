//! SQS projection: every pure function of `babelqueue_transport_sqs::projection` on any body,
//! any message attributes, any `ApproximateReceiveCount` text and any delays.
//!
//! Checked, as the module documents:
//! * projected attributes are `String`/`Number` values SQS accepts, a non-object body projects
//!   nothing, and merging headers never drops or changes a contract attribute;
//! * `reconcile` leaves the body byte-identical unless the count raises `attempts`, and then
//!   the new body carries exactly `count - 1`;
//! * the gate passes absent, blank and `1`, and otherwise reports the value untrimmed;
//! * the clamps stay in range (visibility 0..=43200, wait 0..=20, delay whole seconds <= 900).
//!
//! Input: the body, then optionally `0xFF` and the bytes the other arguments come from.
#![no_main]

use std::borrow::Cow;
use std::time::Duration;

use babelqueue_envelope::{Envelope, JsonKind, ascii};
use babelqueue_fuzz::{headers, split_body, text};
use babelqueue_transport_sqs::projection::{
    AttributeValue, Attributes, MAX_ATTRIBUTES, MAX_PUBLISH_DELAY, MAX_VISIBILITY_TIMEOUT,
    MAX_WAIT_TIME, SCHEMA_VERSION_ATTRIBUTE, attributes, check_attribute_name,
    dead_letter_queue_name, deduplication_id, first_invalid_char, gate, is_sqs_text, merge_headers,
    native_attempts, publish_delay, reconcile, visibility_timeout, wait_time_seconds,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (body, params) = split_body(data);
    let mut u = Unstructured::new(params);
    produce(body, &mut u);
    let _ = consume(body, &mut u);
    let _ = limits(&mut u);
});

fn produce(body: &[u8], u: &mut Unstructured<'_>) {
    let projected = attributes(body);
    if Envelope::parse_object(body).is_err() {
        assert!(projected.is_empty(), "a non-object body projects nothing");
    }
    for (name, value) in &projected {
        assert!(check_attribute_name(name).is_ok(), "{name}");
        let text = value.string_value.as_deref().expect("a text attribute");
        assert!(is_sqs_text(text), "{name} = {text:?}");
        match value.data_type.as_str() {
            "String" => assert!(!text.is_empty()),
            "Number" => assert!(text.parse::<i64>().is_ok(), "{name} = {text:?}"),
            other => panic!("unexpected data type {other}"),
        }
    }
    assert!(projected.len() <= 6);

    let extra = headers(u).unwrap_or_default();
    let mut merged = projected.clone();
    match merge_headers(&mut merged, &extra) {
        Ok(()) => {
            for (name, value) in &projected {
                assert_eq!(
                    merged.get(name),
                    Some(value),
                    "contract attribute {name} kept"
                );
            }
            assert!(merged.len() <= MAX_ATTRIBUTES.max(projected.len()));
            for (name, value) in &merged {
                if projected.contains_key(name) {
                    continue;
                }
                assert!(check_attribute_name(name).is_ok(), "{name}");
                assert_eq!(
                    value.string_value.as_deref(),
                    extra.get(name).map(String::as_str)
                );
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let id = deduplication_id(body);
    assert!((1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic()));
}

fn consume(body: &[u8], u: &mut Unstructured<'_>) -> Result<()> {
    let count: Option<String> = if u.arbitrary()? {
        Some(if u.arbitrary()? {
            u.arbitrary::<i64>()?.to_string()
        } else {
            text(u)?
        })
    } else {
        None
    };
    let count = count.as_deref();
    let native = native_attempts(count);
    assert!(native >= 0);

    let reconciled = reconcile(body, count);
    let parsed_count = count.and_then(|c| c.parse::<i64>().ok());
    let current = Envelope::parse_object(body)
        .ok()
        .and_then(|e| match e.get("attempts") {
            None => Some(0),
            Some(raw) if raw.kind() == JsonKind::Null => Some(0),
            Some(raw) => raw.as_i64(),
        });
    match (parsed_count, current) {
        (Some(c), Some(a)) if c > 1 && c - 1 > a => {
            let Cow::Owned(rewritten) = &reconciled else {
                panic!("a count of {c} must raise attempts {a}");
            };
            let e = Envelope::parse_object(rewritten).expect("a rewritten body is an object");
            assert_eq!(e.attempts(), c - 1);
        }
        _ => assert_eq!(&*reconciled, body, "the body must stay byte-identical"),
    }

    // The gate, on a fuzzer-chosen schema-version attribute (any data type).
    let mut attributes = Attributes::new();
    let declared = text(u)?;
    let data_type = (*u.choose(&["String", "Number", "Number.int", "Binary"])?).to_owned();
    let string_value = (data_type != "Binary").then(|| declared.clone());
    attributes.insert(
        SCHEMA_VERSION_ATTRIBUTE.to_owned(),
        AttributeValue {
            data_type,
            string_value: string_value.clone(),
        },
    );
    match (gate(&attributes), string_value) {
        (None, None) => {}
        (None, Some(v)) => assert!(v == "1" || ascii::is_blank(&v), "{v:?} passed the gate"),
        (Some(g), Some(v)) => assert_eq!(g, v, "the gate reports the value untrimmed"),
        (Some(g), None) => panic!("a binary attribute gated as {g:?}"),
    }
    let _ = babelqueue_transport_sqs::projection::headers(&attributes);
    Ok(())
}

fn limits(u: &mut Unstructured<'_>) -> Result<()> {
    let delay: f64 = u.arbitrary()?;
    let visibility = visibility_timeout(delay);
    assert!((0..=MAX_VISIBILITY_TIMEOUT).contains(&visibility.seconds));
    if (0.0..=f64::from(MAX_VISIBILITY_TIMEOUT)).contains(&delay) {
        assert!(!visibility.clamped);
    } else {
        assert!(visibility.clamped);
    }

    let duration = Duration::new(u.arbitrary()?, u.arbitrary::<u32>()? % 1_000_000_000);
    let fifo: bool = u.arbitrary()?;
    if let Ok(Some(seconds)) = publish_delay(Some(duration), fifo) {
        assert!(!fifo);
        assert!(seconds > 0 && u64::try_from(seconds).is_ok_and(|s| s <= MAX_PUBLISH_DELAY));
        assert_eq!(u64::try_from(seconds).ok(), Some(duration.as_secs()));
    }
    let cap: Option<i32> = u.arbitrary()?;
    let wait = wait_time_seconds(duration, cap);
    assert!((0..=MAX_WAIT_TIME).contains(&wait));

    let queue = text(u)?;
    let suffix: Option<String> = if u.arbitrary()? { Some(text(u)?) } else { None };
    let dlq = dead_letter_queue_name(&queue, suffix.as_deref());
    assert!(
        dlq.len() > queue.len(),
        "a dead-letter queue name adds a suffix"
    );
    if queue.ends_with(".fifo") {
        assert!(
            dlq.ends_with(".fifo"),
            "a FIFO queue's dead-letter queue is FIFO"
        );
    }
    let name = text(u)?;
    let _ = check_attribute_name(&name);
    let _ = first_invalid_char(&name);
    Ok(())
}
