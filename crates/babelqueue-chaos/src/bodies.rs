//! What the suite publishes: chaos messages with a byte-exactness payload, and the malformed
//! body set.

use babelqueue::envelope::{Envelope, RawJson};

/// The URN whose handler succeeds.
pub(crate) const URN_OK: &str = "urn:chaos:ok";
/// The URN whose handler always fails.
pub(crate) const URN_FAIL: &str = "urn:chaos:fail";

/// The `data` of chaos message `n`, as exact JSON text: an integer beyond 64 bits, `-0`, an
/// exponent, an escaped and a raw line separator, non-ASCII and astral characters, escapes, empty
/// containers. A codec that re-serialises any of it changes the bytes.
pub(crate) fn data_text(n: u64) -> String {
    format!(
        "{{\"n\":{n},\"big\":18446744073709551616,\"neg\":-0,\"f\":1.50e+2,\
         \"u\":\"\\u2028 \u{2028} é 😀 \\/ \\\"q\\\" \\\\\",\"list\":[],\"obj\":{{\"k\":[1,{{\"z\":null}}]}}}}"
    )
}

/// The `meta.id` of chaos message `n` of a run.
pub(crate) fn message_id(run: &str, n: u64) -> String {
    format!("chaos-{run}-{n}")
}

/// The encoded envelope of one chaos message: exactly the bytes `App::publish_envelope` sends.
pub(crate) fn envelope_body(urn: &str, queue: &str, id: &str, data: &str) -> Vec<u8> {
    let data = RawJson::parse(data).expect("chaos data is valid JSON");
    Envelope::builder(urn)
        .queue(queue)
        .message_id(id)
        .data_raw(data)
        .build()
        .and_then(|e| e.encode())
        .expect("a chaos envelope encodes")
        .into_bytes()
}

/// One body of the malformed set.
#[derive(Debug, Clone)]
pub(crate) struct Malformed {
    /// A short name for the report.
    pub(crate) name: &'static str,
    /// The exact bytes published.
    pub(crate) body: Vec<u8>,
}

/// A valid envelope, hand-written so its `attempts` can be anything.
fn raw_envelope(queue: &str, id: &str, data: &str, attempts: &str) -> String {
    format!(
        "{{\"job\":\"{URN_FAIL}\",\"trace_id\":\"chaos-trace\",\"data\":{data},\
         \"meta\":{{\"id\":\"{id}\",\"queue\":\"{queue}\",\"lang\":\"rust\",\"schema_version\":1,\
         \"created_at\":1750000000000}},\"attempts\":{attempts}}}"
    )
}

/// The malformed body set of the `malformed` scenario (ids derived from `run`).
pub(crate) fn malformed_set(queue: &str, run: &str) -> Vec<Malformed> {
    let id = |name: &str| format!("chaos-{run}-m-{name}");
    let small = "{\"k\":\"v\",\"big\":18446744073709551616,\"u\":\"é\\u2028\"}";
    let depth = 100_000;
    let mut deep_arrays = "[".repeat(depth);
    deep_arrays.push_str(&"]".repeat(depth));
    let mut deep_objects = "{\"a\":".repeat(depth);
    deep_objects.push_str("null");
    deep_objects.push_str(&"}".repeat(depth));
    let valid = raw_envelope(queue, &id("bom"), small, "0");
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend_from_slice(valid.as_bytes());
    let truncated = {
        let full = raw_envelope(queue, &id("truncated"), small, "0");
        full[..full.len() / 2].to_owned()
    };
    let big_data = format!("{{\"pad\":\"{}\"}}", "x".repeat(10 * 1024 * 1024));
    let dup_keys = format!(
        "{{\"job\":\"{URN_FAIL}\",\"job\":\"{URN_FAIL}\",\"trace_id\":\"chaos-trace\",\
         \"data\":{{\"k\":1}},\"meta\":{{\"id\":\"{}\",\"queue\":\"{queue}\",\"lang\":\"rust\",\
         \"schema_version\":1,\"created_at\":1750000000000}},\"attempts\":0,\"data\":{{\"k\":2}}}}",
        id("dup-keys")
    );
    let data_array = format!(
        "{{\"job\":\"{URN_FAIL}\",\"trace_id\":\"chaos-trace\",\"data\":[],\"meta\":{{\"id\":\"{}\",\
         \"queue\":\"{queue}\",\"lang\":\"rust\",\"schema_version\":1,\"created_at\":1750000000000}},\
         \"attempts\":0}}",
        id("data-array")
    );
    let mut invalid_utf8 = format!("{{\"job\":\"{URN_FAIL}\",\"data\":{{\"s\":\"").into_bytes();
    invalid_utf8.extend_from_slice(b"\xff\xfe\xc3\x28");
    invalid_utf8.extend_from_slice(b"\"}}");
    vec![
        Malformed {
            name: "invalid-utf8",
            body: invalid_utf8,
        },
        Malformed {
            name: "truncated-json",
            body: truncated.into_bytes(),
        },
        Malformed {
            name: "root-array",
            body: b"[]".to_vec(),
        },
        Malformed {
            name: "root-string",
            body: b"\"s\"".to_vec(),
        },
        Malformed {
            name: "root-number",
            body: b"1".to_vec(),
        },
        Malformed {
            name: "root-null",
            body: b"null".to_vec(),
        },
        Malformed {
            name: "10mb",
            body: raw_envelope(queue, &id("10mb"), &big_data, "0").into_bytes(),
        },
        Malformed {
            name: "depth-100k-arrays",
            body: deep_arrays.into_bytes(),
        },
        Malformed {
            name: "depth-100k-objects",
            body: deep_objects.into_bytes(),
        },
        Malformed {
            name: "attempts-1e400",
            body: b"{\"job\":\"urn:x\",\"attempts\":1e400}".to_vec(),
        },
        Malformed {
            name: "duplicate-keys",
            body: dup_keys.into_bytes(),
        },
        Malformed {
            name: "bom-envelope",
            body: bom,
        },
        Malformed {
            name: "data-array",
            body: data_array.into_bytes(),
        },
        Malformed {
            name: "attempts-neg5",
            body: raw_envelope(queue, &id("attempts-neg5"), small, "-5").into_bytes(),
        },
        Malformed {
            name: "attempts-i64max",
            body: raw_envelope(queue, &id("attempts-i64max"), small, "9223372036854775807")
                .into_bytes(),
        },
        Malformed {
            name: "attempts-i64min",
            body: raw_envelope(queue, &id("attempts-i64min"), small, "-9223372036854775808")
                .into_bytes(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelqueue::envelope::poison_cause;

    #[test]
    fn chaos_messages_are_valid_envelopes_that_keep_their_data_bytes() {
        let data = data_text(42);
        let body = envelope_body(URN_OK, "q", "id-42", &data);
        assert_eq!(poison_cause(&body, true), None);
        let decoded = Envelope::decode(&body).unwrap().envelope;
        assert_eq!(decoded.data().unwrap().as_str(), data);
        assert_eq!(decoded.message_id().unwrap(), "id-42");
        assert!(data.contains('\u{2028}') && data.contains("\\u2028") && data.contains('😀'));
    }

    #[test]
    fn the_malformed_set_has_every_case_of_the_brief() {
        let set = malformed_set("q", "r");
        assert_eq!(set.len(), 16);
        let by_name = |n: &str| &set.iter().find(|m| m.name == n).unwrap().body;
        assert!(std::str::from_utf8(by_name("invalid-utf8")).is_err());
        assert!(by_name("10mb").len() > 10 * 1024 * 1024);
        assert_eq!(by_name("depth-100k-arrays").len(), 200_000);
        assert!(by_name("bom-envelope").starts_with(b"\xEF\xBB\xBF{"));
        // Valid envelopes (handled, then dead-lettered as failed) and poison bodies.
        for valid in [
            "10mb",
            "duplicate-keys",
            "attempts-neg5",
            "attempts-i64max",
            "attempts-i64min",
        ] {
            assert_eq!(poison_cause(by_name(valid), true), None, "{valid}");
        }
        for poison in [
            "invalid-utf8",
            "truncated-json",
            "root-array",
            "root-string",
            "root-number",
            "root-null",
            "depth-100k-arrays",
            "depth-100k-objects",
            "attempts-1e400",
            "bom-envelope",
            "data-array",
        ] {
            assert!(poison_cause(by_name(poison), true).is_some(), "{poison}");
        }
    }
}
