//! SQS projection: every pure function of `babelqueue_transport_sqs::projection` on any body,
//! any message attributes, any `ApproximateReceiveCount` text and any delays, with the facts the
//! binding reports classified and reconciled by the runtime (`babelqueue_core::classify`,
//! `attempts`).
//!
//! Checked, as the module documents:
//! * projected attributes are `String`/`Number` values SQS accepts, a non-object body projects
//!   nothing, and merging out-of-band headers never drops or changes a contract attribute;
//! * round trip: a consumer reads the contract attributes back as headers, the declared version
//!   back as the projected `bq-schema-version` text (else absent), and a first receive reports
//!   no count, so a readable body reaches the runtime byte for byte;
//! * `count` reports `ApproximateReceiveCount - 1` earlier deliveries above 1 and nothing
//!   otherwise; the runtime makes that `attempts = max(body, count - 1)`, the body rewritten
//!   only when the count raises it;
//! * `declared` is the attribute's text whatever its data type, untrimmed (absent for a binary
//!   one), and the runtime's gate passes exactly absent, ASCII-blank and `1`;
//! * the clamps stay in range (visibility 0..=43200, wait 0..=20, delay whole seconds <= 900).
//!
//! Dropped with contract v2: the binding no longer gates (`gate`), counts (`native_attempts`)
//! nor rewrites bodies (`reconcile`); those rules are checked through the runtime's `classify`
//! and `reconcile` on the reported facts instead.
//!
//! Input: the body, then optionally `0xFF` and the bytes the other arguments come from.
#![no_main]

use std::time::Duration;

use babelqueue_core::classify::Class;
use babelqueue_core::{Count, Declared, Delivery};
use babelqueue_envelope::{Envelope, ascii};
use babelqueue_fuzz::{
    body_attempts, check_classified, check_reconciled, headers, split_body, text,
};
use babelqueue_transport_sqs::projection::{
    AttributeValue, Attributes, MAX_ATTRIBUTES, MAX_PUBLISH_DELAY, MAX_VISIBILITY_TIMEOUT,
    MAX_WAIT_TIME, SCHEMA_VERSION_ATTRIBUTE, attributes, check_attribute_name, count,
    dead_letter_queue_name, declared, deduplication_id, first_invalid_char, is_fifo_queue,
    is_sqs_text, merge_headers, publish_delay, visibility_timeout, wait_time_seconds,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

const QUEUE: &str = "orders";

fuzz_target!(|data: &[u8]| {
    let (body, params) = split_body(data);
    let mut u = Unstructured::new(params);
    produce(body, &mut u);
    let _ = consume(body, &mut u);
    let _ = limits(&mut u);
});

/// What a consumer sees of a message: the transport's pop, on the attributes and receive count
/// SQS returned.
fn received(body: &[u8], attributes: &Attributes, receive_count: Option<&str>) -> Delivery {
    let delivery = Delivery::new(QUEUE, body.to_vec())
        .with_headers(babelqueue_transport_sqs::projection::headers(attributes))
        .with_declared_version(declared(attributes));
    match count(receive_count) {
        Some(c) => delivery.with_count(c),
        None => delivery,
    }
}

fn produce(body: &[u8], u: &mut Unstructured<'_>) {
    let projected = attributes(body);
    if Envelope::parse_object(body).is_err() {
        assert!(projected.is_empty(), "a non-object body projects nothing");
    }
    for (name, value) in &projected {
        assert!(check_attribute_name(name).is_ok(), "{name}");
        let Some(text) = value.string_value.as_deref() else {
            panic!("{name} is not a text attribute");
        };
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
        Err(e) => {
            assert!(!e.to_string().is_empty());
            merged = projected.clone();
        }
    }
    let id = deduplication_id(body);
    assert!((1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic()));

    // Round trip: the first receive of what was sent. The contract attributes read back as
    // sent beside any header; the facts are checked on the contract attributes alone (a header
    // named like an absent contract attribute is carried as sent, and read as it).
    let delivery = received(body, &merged, Some("1"));
    for (name, value) in &projected {
        assert_eq!(
            delivery.headers().get(name),
            value.string_value.as_ref(),
            "{name} reads back as sent"
        );
    }
    let delivery = received(body, &projected, Some("1"));
    let version = projected
        .get(SCHEMA_VERSION_ATTRIBUTE)
        .and_then(|a| a.string_value.clone());
    assert_eq!(
        delivery.facts().declared_version,
        version.map_or(Declared::Absent, Declared::Text)
    );
    assert_eq!(
        delivery.facts().count,
        None,
        "a first receive reports no count"
    );
    if let Class::Readable { body: seen, .. } = check_classified(body, delivery.facts(), QUEUE) {
        assert_eq!(
            &*seen, body,
            "a first receive reaches the runtime unchanged"
        );
    }
}

fn consume(body: &[u8], u: &mut Unstructured<'_>) -> Result<()> {
    let receive_count: Option<String> = if u.arbitrary()? {
        Some(if u.arbitrary()? {
            u.arbitrary::<i64>()?.to_string()
        } else {
            text(u)?
        })
    } else {
        None
    };
    let receive_count = receive_count.as_deref();
    let reported = count(receive_count);
    let parsed = receive_count.and_then(|c| c.parse::<i64>().ok());
    let earlier = parsed.filter(|c| *c > 1).map(|c| c - 1);
    assert_eq!(reported, earlier.map(Count::Redelivered));
    assert!(reported.is_none_or(|c| c.native() >= 1));
    let want = match (earlier, body_attempts(body)) {
        (Some(n), Some(a)) if n > a => Some(n),
        _ => None,
    };
    check_reconciled(body, reported, want);

    // The declared version, on a fuzzer-chosen schema-version attribute (any data type).
    let mut attributes = Attributes::new();
    let carried = text(u)?;
    let data_type = (*u.choose(&["String", "Number", "Number.int", "Binary"])?).to_owned();
    let string_value = (data_type != "Binary").then(|| carried.clone());
    attributes.insert(
        SCHEMA_VERSION_ATTRIBUTE.to_owned(),
        AttributeValue {
            data_type,
            string_value: string_value.clone(),
        },
    );
    let reported_version = declared(&attributes);
    match &string_value {
        None => assert_eq!(reported_version, Declared::Absent),
        Some(v) => assert_eq!(reported_version, Declared::Text(v.clone()), "untrimmed"),
    }
    match (reported_version.rejected(), string_value) {
        (None, None) => {}
        (None, Some(v)) => assert!(v == "1" || ascii::is_blank(&v), "{v:?} passed the gate"),
        (Some(g), Some(v)) => assert_eq!(g, v, "the gate reports the value untrimmed"),
        (Some(g), None) => panic!("a binary attribute gated as {g:?}"),
    }
    let delivery = received(body, &attributes, receive_count);
    check_classified(body, delivery.facts(), QUEUE);
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
    if is_fifo_queue(&queue) {
        assert!(
            is_fifo_queue(&dlq),
            "a FIFO queue's dead-letter queue is FIFO"
        );
    }
    let name = text(u)?;
    let _ = check_attribute_name(&name);
    let _ = first_invalid_char(&name);
    Ok(())
}
