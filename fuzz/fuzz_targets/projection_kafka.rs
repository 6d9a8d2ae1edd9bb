//! Kafka projection: `project`, `record_timestamp`, the header readers, `schema_gate`,
//! `reconcile`, `inbound`, `reinject_headers` and `due_at` on any record value, any headers
//! (null values and invalid UTF-8 included) and any clock values.
//!
//! Checked, as the module documents:
//! * a gated or poison record keeps its raw value byte for byte; a poison record names the
//!   `bq-original-topic` header (else the topic) and the `bq-attempts` header (else 0);
//! * a readable record's body changes only through `reconcile`, which sets exactly the header's
//!   count;
//! * publish then consume (the headers this SDK wrote) gives a readable value back byte for byte
//!   whenever its `attempts` is a non-negative integer or absent;
//! * the re-injector drops exactly `bq-delay` and `bq-original-topic`, keeping the order;
//! * `due_at` stays within `[now, now + tier]`.
//!
//! Input: the record value, then optionally `0xFF` and the bytes the rest comes from.
#![no_main]

use babelqueue_core::Route;
use babelqueue_envelope::{Envelope, Verdict, classify};
use babelqueue_fuzz::{split_body, text};
use babelqueue_transport_kafka::client::{Record, RecordHeader};
use babelqueue_transport_kafka::projection::{
    HEADER_ATTEMPTS, HEADER_DELAY, HEADER_JOB, HEADER_ORIGINAL_TOPIC, HEADER_SCHEMA_VERSION,
    due_at, header_attempts, header_text, inbound, project, reconcile, record_timestamp,
    reinject_headers, schema_gate,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (value, params) = split_body(data);
    let mut u = Unstructured::new(params);
    let own = produce(value);
    round_trip(value, own);
    if let Ok(record) = record(value, &mut u) {
        check_inbound(&record);
        let reinjected = reinject_headers(&record.headers);
        let kept: Vec<&RecordHeader> = record
            .headers
            .iter()
            .filter(|h| h.key != HEADER_DELAY && h.key != HEADER_ORIGINAL_TOPIC)
            .collect();
        assert_eq!(reinjected.iter().collect::<Vec<_>>(), kept);
    }
    if let Ok((ts, tier, now)) = u.arbitrary::<(Option<i64>, u64, i64)>() {
        let due = due_at(ts, tier, now);
        let latest = now.saturating_add(i64::try_from(tier).unwrap_or(i64::MAX));
        assert!(
            (now..=latest).contains(&due),
            "{due} outside [{now}, {latest}]"
        );
    }
});

fn produce(value: &[u8]) -> Vec<RecordHeader> {
    let headers = project(value);
    let readable = Envelope::parse_object(value)
        .ok()
        .filter(|e| e.keys().next().is_some());
    if readable.is_none() {
        assert!(
            headers.is_empty(),
            "an empty or non-object value gets no header"
        );
    }
    for h in &headers {
        assert!(h.key.starts_with("bq-"), "{}", h.key);
        let text = h
            .value
            .as_deref()
            .expect("projected headers are never null");
        assert!(std::str::from_utf8(text).is_ok());
    }
    if let Some(ts) = record_timestamp(value) {
        assert!(ts > 0);
    }
    headers
}

fn round_trip(value: &[u8], headers: Vec<RecordHeader>) {
    let record = Record {
        topic: "orders".to_owned(),
        partition: 0,
        offset: 0,
        key: None,
        value: Some(value.to_vec()),
        headers,
        timestamp: None,
    };
    let got = check_inbound(&record);
    let plain_attempts =
        Envelope::parse_object(value)
            .ok()
            .is_some_and(|e| match e.get("attempts") {
                None => true,
                Some(raw) => raw.as_i64().is_some_and(|n| n >= 0),
            });
    if plain_attempts {
        assert_eq!(got, value, "publish then consume must give the value back");
    }
}

fn record(value: &[u8], u: &mut Unstructured<'_>) -> Result<Record> {
    let mut headers = Vec::new();
    for _ in 0..u.int_in_range(0..=6)? {
        let key = if u.ratio(3, 4)? {
            (*u.choose(&[
                HEADER_ATTEMPTS,
                HEADER_SCHEMA_VERSION,
                HEADER_ORIGINAL_TOPIC,
                HEADER_DELAY,
                HEADER_JOB,
            ])?)
            .to_owned()
        } else {
            text(u)?
        };
        let value = match u.int_in_range(0..=3)? {
            0 => None,
            1 => Some(u.arbitrary::<Vec<u8>>()?),
            2 => Some(u.arbitrary::<i64>()?.to_string().into_bytes()),
            _ => Some(text(u)?.into_bytes()),
        };
        headers.push(RecordHeader { key, value });
    }
    Ok(Record {
        topic: text(u)?,
        partition: u.arbitrary()?,
        offset: u.arbitrary()?,
        key: u.arbitrary()?,
        value: if u.ratio(1, 8)? {
            None
        } else {
            Some(value.to_vec())
        },
        headers,
        timestamp: u.arbitrary()?,
    })
}

/// Applies `inbound` and checks it against the documented order of rules; returns the body.
fn check_inbound(record: &Record) -> Vec<u8> {
    let value = record.value.as_deref().unwrap_or_default();
    if let Some(n) = header_attempts(&record.headers) {
        assert!(n >= 0);
    }
    let got = inbound(record);
    if let Some(declared) = schema_gate(&record.headers) {
        assert_eq!(got.body, value, "a gated record keeps its raw value");
        assert_eq!(
            got.route,
            Route::Gated {
                declared,
                urn: None
            }
        );
        return got.body;
    }
    match classify(value) {
        Verdict::Ok => {
            assert_eq!(got.route, Route::Body);
            assert_eq!(got.body, &*reconcile(value, &record.headers));
            if let Some(n) = header_attempts(&record.headers) {
                let back = Envelope::parse_object(&got.body).expect("a readable body");
                assert_eq!(back.attempts(), n, "the header's count is authoritative");
            } else {
                assert_eq!(got.body, value);
            }
        }
        Verdict::NoIdentity | Verdict::Poison(_) => {
            assert_eq!(got.body, value, "a poison record keeps its raw value");
            let Route::TransportPoison(poison) = &got.route else {
                panic!("a poison record must route as poison, got {:?}", got.route);
            };
            assert_eq!(
                poison.attempts,
                header_attempts(&record.headers).unwrap_or(0)
            );
            let topic = header_text(&record.headers, HEADER_ORIGINAL_TOPIC)
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| record.topic.clone());
            assert_eq!(poison.original_queue, topic);
            assert!(!poison.cause.is_empty());
        }
    }
    got.body
}
