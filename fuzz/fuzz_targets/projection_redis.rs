//! Redis layout: `frame` / `unframe`, `reliable_route`, `laravel_route`, URL options, key names
//! and scores, on any stored value, any headers, any URL and any clock values.
//!
//! Checked, as the module documents:
//! * `unframe` of a value that is not a frame gives the value itself and no header;
//! * a frame gives back exactly the body and the non-blank headers it was built from;
//! * a delivery is poison exactly when the stored value is not UTF-8 or its body is not a
//!   readable envelope with an identity (Laravel: also when the reserve script could not count
//!   the attempt);
//! * scores never go below `floor(now)`.
//!
//! Input: the stored value, then optionally `0xFF` and the bytes the rest comes from.
#![no_main]

use babelqueue_core::Route;
use babelqueue_envelope::poison_cause;
use babelqueue_fuzz::{headers, split_body, text};
use babelqueue_transport_redis::layout::{
    FRAME_KEY, Options, available_at, deadline_score, frame, laravel_route, reliable_route,
    sanitize_headers, unframe, whole_seconds,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (stored, params) = split_body(data);
    let mut u = Unstructured::new(params);
    consume(stored);
    let _ = framing(stored, &mut u);
    let _ = options(&mut u);
    let _ = scores(&mut u);
});

fn consume(stored: &[u8]) {
    let (body, headers) = unframe(stored);
    let needle = format!("\"{FRAME_KEY}\"");
    let looks_framed = stored.first() == Some(&b'{')
        && stored.windows(needle.len()).any(|w| w == needle.as_bytes());
    if !looks_framed {
        assert_eq!(&*body, stored, "a value that is not a frame is the body");
        assert!(headers.is_empty());
    }
    assert!(headers.iter().all(|(k, v)| !k.is_empty() && !v.is_empty()));

    let poison = std::str::from_utf8(stored).is_err() || poison_cause(&body, true).is_some();
    let route = reliable_route(stored, &body);
    assert_eq!(route == Route::NonNumericAttempts, poison, "{route:?}");
    assert!(matches!(route, Route::Body | Route::NonNumericAttempts));

    // Laravel: the reserve script hands back the member it could not count as the job itself.
    let route = laravel_route(stored, stored);
    assert_eq!(route, Route::NonNumericAttempts);
    let route = laravel_route(stored, b"");
    let poison = stored.is_empty() || poison_cause(stored, true).is_some();
    assert_eq!(route == Route::NonNumericAttempts, poison, "{route:?}");
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
    if let Ok((client_url, options)) = Options::from_url(&url) {
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
