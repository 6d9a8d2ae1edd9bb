//! Redis layout: `frame` / `unframe`, `laravel_counted`, URL options, key names and scores, on
//! any stored value, any headers, any URL and any clock values, with the facts a reservation
//! reports classified by the runtime (`babelqueue_core::classify`).
//!
//! Checked, as the module documents:
//! * `unframe` of a value that is not a frame gives the value itself and no header;
//! * round trip: a frame gives back exactly the body and the non-blank headers it was built
//!   from, and a value stored without a usable header (or not UTF-8) is the body itself;
//! * both layouts report that poison is always dead-lettered and no count (Redis keeps the
//!   count in the body); through the runtime a reliable-layout delivery is poison exactly when
//!   the stored value is not UTF-8 or its body is not a readable envelope with an identity, and
//!   a readable body reaches the handler unchanged;
//! * Laravel: a reservation whose member is the job itself was not counted, and the runtime
//!   treats it as poison (counted 0) whatever the body says; a counted one is poison exactly
//!   when the job is;
//! * key names contain the queue; scores never go below `floor(now)`.
//!
//! Dropped with contract v2: `reliable_route`, `laravel_route` and `Route::NonNumericAttempts`
//! are gone (the binding reports `poison_always_dead_lettered` and `attempts_not_counted`, and
//! the runtime classifies); the same poison rule is checked through `classify` now.
//!
//! Input: the stored value, then optionally `0xFF` and the bytes the rest comes from.
#![no_main]

use babelqueue_core::Delivery;
use babelqueue_core::classify::{Cause, Class};
use babelqueue_envelope::poison_cause;
use babelqueue_fuzz::{check_classified, headers, split_body, text};
use babelqueue_transport_redis::layout::{
    FRAME_KEY, RedisOptions, available_at, deadline_score, frame, laravel_counted,
    sanitize_headers, unframe, whole_seconds,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

const QUEUE: &str = "orders";

fuzz_target!(|data: &[u8]| {
    let (stored, params) = split_body(data);
    let mut u = Unstructured::new(params);
    reliable(stored);
    let _ = laravel(stored, &mut u);
    let _ = framing(stored, &mut u);
    let _ = options(&mut u);
    let _ = scores(&mut u);
});

/// A default-layout reservation of `stored`, as the transport's pop hands it over.
fn reliable(stored: &[u8]) {
    let (body, headers) = unframe(stored);
    let needle = format!("\"{FRAME_KEY}\"");
    let looks_framed = stored.first() == Some(&b'{')
        && stored.windows(needle.len()).any(|w| w == needle.as_bytes());
    if !looks_framed {
        assert_eq!(&*body, stored, "a value that is not a frame is the body");
        assert!(headers.is_empty());
    }
    assert!(headers.iter().all(|(k, v)| !k.is_empty() && !v.is_empty()));

    let delivery = Delivery::new(QUEUE, body.to_vec())
        .with_headers(headers)
        .poison_always_dead_lettered();
    let facts = delivery.facts();
    assert_eq!(facts.count, None, "Redis reports no count");
    let poison = std::str::from_utf8(stored).is_err() || poison_cause(&body, true).is_some();
    match check_classified(delivery.body(), facts, QUEUE) {
        Class::Poison(p) => {
            assert!(poison, "a readable reservation classified as poison");
            assert!(p.always_dead_lettered);
        }
        Class::Readable { body: seen, .. } => {
            assert!(!poison, "a poison reservation was read");
            assert_eq!(&*seen, &*body, "the body reaches the handler unchanged");
        }
        Class::Gated { declared } => panic!("Redis carries no schema version: {declared:?}"),
    }
}

/// A Laravel-layout reservation: the job and the member the reserve script stored.
fn laravel(job: &[u8], u: &mut Unstructured<'_>) -> Result<()> {
    let member: Vec<u8> = match u.int_in_range(0..=2)? {
        0 => job.to_vec(),
        1 => u.arbitrary()?,
        _ => text(u)?.into_bytes(),
    };
    let counted = laravel_counted(job, &member);
    assert_eq!(counted, job != member.as_slice());
    let mut delivery = Delivery::new(QUEUE, job.to_vec()).poison_always_dead_lettered();
    if !counted {
        delivery = delivery.attempts_not_counted();
    }
    match check_classified(job, delivery.facts(), QUEUE) {
        // Uncounted: poison for that alone, or for its body's own cause when it has one.
        Class::Poison(p) if !counted => {
            assert_eq!(p.attempts, 0);
            if poison_cause(job, true).is_none() {
                assert_eq!(p.cause, Cause::NotCounted);
            }
        }
        Class::Poison(p) => {
            assert!(poison_cause(job, true).is_some());
            assert!(p.always_dead_lettered);
        }
        Class::Readable { .. } => assert!(counted && poison_cause(job, true).is_none()),
        Class::Gated { declared } => panic!("Redis carries no schema version: {declared:?}"),
    }
    Ok(())
}

fn framing(body: &[u8], u: &mut Unstructured<'_>) -> Result<()> {
    let headers = headers(u)?;
    let framed = frame(body, &headers);
    let clean = sanitize_headers(headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let is_text = std::str::from_utf8(body).is_ok();
    if clean.is_empty() || !is_text {
        assert_eq!(
            &*framed, body,
            "no usable header, or not text: stored as is"
        );
        return Ok(());
    }
    let (back, back_headers) = unframe(&framed);
    assert_eq!(&*back, body, "a frame gives the body back byte for byte");
    assert_eq!(back_headers, clean, "a frame gives the headers back");
    Ok(())
}

fn options(u: &mut Unstructured<'_>) -> Result<()> {
    let mut url = String::new();
    if u.ratio(3, 4)? {
        url.push_str(u.choose(&["redis://", "rediss://", "http://"])?);
        url.push_str(&text(u)?);
        for i in 0..u.int_in_range(0..=4)? {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(u.choose(&[
                "laravel",
                "laravel_compat",
                "prefix",
                "retry_after",
                "db",
            ])?);
            url.push('=');
            url.push_str(&text(u)?);
        }
    } else {
        url = text(u)?;
    }
    if let Ok((client_url, options)) = RedisOptions::from_url(&url) {
        assert!(client_url.starts_with("redis"), "{client_url}");
        let _ = options.validate();
        let queue = text(u)?;
        for key in [
            options.ready(&queue),
            options.processing(&queue),
            options.deadlines(&queue),
            options.delayed(&queue),
            options.reserved(&queue),
            options.notify(&queue),
        ] {
            assert!(key.contains(&queue));
        }
    }
    Ok(())
}

fn scores(u: &mut Unstructured<'_>) -> Result<()> {
    let now: f64 = u.arbitrary()?;
    let delay: f64 = u.arbitrary()?;
    let floor = whole_seconds(now);
    assert!(available_at(now, delay) >= floor);
    let retry: Option<u64> = u.arbitrary()?;
    let score = deadline_score(now, retry);
    match retry {
        None => assert_eq!(score, "+inf"),
        Some(_) => assert!(score.parse::<i64>().is_ok_and(|s| s >= floor)),
    }
    Ok(())
}
