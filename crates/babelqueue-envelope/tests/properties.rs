//! Property tests of the codec.
//!
//! * `decode(encode(e)) == e` for generated envelopes (with unknown members, extension meta,
//!   odd number literals and escapes), with no warning;
//! * for any byte string, decode, the verdict and the poison record never panic, the verdict
//!   agrees with `poison_cause`, and the poison record always gives the original bytes back.

use babelqueue_envelope::{
    Builder, DeadLetter, Envelope, RawJson, Reason, Verdict, ascii, classify, is_spliceable,
    poison_cause, poison_record,
};
use proptest::prelude::*;

/// JSON value texts, including literals a float tree would not keep.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("12345678901234567890123".to_string()),
        Just("-0".to_string()),
        Just("1.50".to_string()),
        Just("1E2".to_string()),
        Just("1e400".to_string()),
        Just("1e-400".to_string()),
        "[a-z\u{e9}\u{2028} ]{0,8}".prop_map(|s| format!("\"{s}\"")),
        Just(r#""caf\u00e9 \/ \ud83d\ude00 \n""#.to_string()),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(("[a-z]{1,4}", inner), 0..4).prop_map(|members| {
                let body: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect();
                format!("{{{}}}", body.join(","))
            }),
        ]
    })
}

fn json_object() -> impl Strategy<Value = String> {
    prop::collection::vec(("[a-z_]{1,5}", json_value()), 0..5).prop_map(|members| {
        let body: Vec<String> = members
            .into_iter()
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect();
        format!("{{{}}}", body.join(","))
    })
}

prop_compose! {
    fn envelope()(
        urn in "[ \t]{0,2}urn:[a-z:\u{e9}]{1,12}[ \n]{0,2}",
        trace in proptest::option::of("[ a-z0-9-]{0,12}"),
        queue in "[a-z.]{0,8}",
        data in json_object(),
        meta in prop::collection::btree_map("x_[a-z]{1,4}", json_value(), 0..3),
        extras in prop::collection::btree_map("y_[a-z]{1,4}", json_value(), 0..3),
        attempts in any::<i64>(),
        id in "[a-f0-9-]{1,36}",
        created in any::<i64>(),
    ) -> Envelope {
        let mut builder = Builder::new(urn)
            .queue(queue)
            .data_raw(RawJson::parse(&data).unwrap())
            .message_id(id)
            .created_at(created);
        if let Some(trace) = trace {
            builder = builder.trace_id(trace);
        }
        for (key, value) in meta {
            builder = builder.meta_raw(key, RawJson::parse(&value).unwrap());
        }
        let mut envelope = builder.build().unwrap();
        envelope.set_attempts(attempts);
        for (key, value) in extras {
            envelope.set(&key, RawJson::parse(&value).unwrap());
        }
        envelope
    }
}

/// What a poison record gives back: the exact bytes for a wrapper, the trimmed object for a
/// splice (`None` when the object was empty, whose interior whitespace the record drops).
fn recover(record: &[u8], block: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(record).expect("records are UTF-8");
    let tail = format!("{block}}}");
    let head = text
        .strip_suffix(&tail)
        .expect("the record ends with the block");
    if let Some(b64) = head
        .strip_prefix("{\"raw\":\"")
        .and_then(|rest| rest.strip_suffix("\",\"raw_encoding\":\"base64\",\"dead_letter\":"))
    {
        return Some(base64_decode(b64));
    }
    if let Some(raw) = head
        .strip_prefix("{\"raw\":")
        .and_then(|r| r.strip_suffix(",\"dead_letter\":"))
    {
        let raw: String = serde_json::from_str(raw).expect("raw is a JSON string");
        return Some(raw.into_bytes());
    }
    if head == "{\"dead_letter\":" {
        return None;
    }
    let prefix = head.strip_suffix(",\"dead_letter\":").expect("a splice");
    Some(format!("{prefix}}}").into_bytes())
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("standard padded base64")
}

fn json_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Top-level members the decode acts on, and some it leaves alone.
const MEMBERS: &[&str] = &[
    r#""job":"urn:a""#,
    r#""job":7"#,
    r#""job":null"#,
    r#""job":"  ""#,
    r#""urn":"urn:b""#,
    r#""urn":false"#,
    r#""\u0075rn":"urn:c""#,
    r#""timestamp":1"#,
    r#""times\u0074amp":2"#,
    r#""trace_id":"t""#,
    r#""attempts":3"#,
    r#""data":{"timestamp":1,"urn":"x"}"#,
    r#""extra":[1,2]"#,
];

/// `meta` members, forbidden ones among them.
const META_MEMBERS: &[&str] = &[
    r#""queue":"q""#,
    r#""max_retries":3"#,
    r#""attempts":1"#,
    r#""source":"php""#,
    r#""ts":5"#,
    r#""\u0074s":6"#,
    r#""schema_version":1"#,
];

fn check_any_body(body: &[u8]) -> Result<(), TestCaseError> {
    let decoded = Envelope::decode_lenient(body);
    let verdict = classify(body);
    let strict = poison_cause(body, true);
    let structural = poison_cause(body, false);
    prop_assert_eq!(strict.is_none(), verdict == Verdict::Ok);
    if let Verdict::Poison(_) = verdict {
        prop_assert!(structural.is_some());
    }
    if strict.is_none() {
        // A readable body with an identity decodes strictly and re-encodes.
        let envelope = Envelope::decode(body)
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .envelope;
        prop_assert!(!envelope.urn().is_empty());
        prop_assert!(decoded.envelope.encode().is_ok());
    }
    // The one-pass decode agrees with the two passes it replaces.
    match Envelope::decode_classified(body) {
        Ok(one) => {
            prop_assert_eq!(strict, None);
            prop_assert_eq!(&one.envelope, &decoded.envelope);
            prop_assert_eq!(&one.warnings, &decoded.warnings);
        }
        Err(cause) => prop_assert_eq!(Some(cause), strict.clone()),
    }
    let block = DeadLetter::new(Reason::Poison, "orders", 0, 1);
    let record = poison_record(body, &block);
    let block_text = block.to_raw().as_str().to_owned();
    match recover(&record, &block_text) {
        Some(bytes) if is_spliceable(body) => {
            let start = body.iter().position(|b| !json_ws(*b)).unwrap();
            let end = body.iter().rposition(|b| !json_ws(*b)).unwrap() + 1;
            prop_assert_eq!(bytes, &body[start..end]);
        }
        Some(bytes) => prop_assert_eq!(bytes, body),
        None => prop_assert!(is_spliceable(body)),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_built_envelope_is_refused_exactly_when_its_consumers_would_refuse_it(e in envelope()) {
        // The builder's shortcut (only `data` scanned, once) agrees with the full verdict.
        let body = e.encode().unwrap();
        let verdict = babelqueue_envelope::check_publishable(body.as_bytes());
        prop_assert_eq!(e.encode_checked().is_ok(), verdict.is_ok(), "{}", body);
        prop_assert_eq!(verdict.is_ok(), poison_cause(body.as_bytes(), true).is_none());
    }

    #[test]
    fn decode_of_encode_is_identity(e in envelope()) {
        let text = e.encode().unwrap();
        let decoded = Envelope::decode(text.as_bytes()).unwrap();
        prop_assert!(decoded.warnings.is_empty(), "{:?}", decoded.warnings);
        prop_assert_eq!(&decoded.envelope, &e);
        prop_assert_eq!(decoded.envelope.encode().unwrap(), text);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_poison_records_keep_them(body in prop::collection::vec(any::<u8>(), 0..96)) {
        check_any_body(&body)?;
    }

    #[test]
    fn json_like_text_never_panics(body in "[{}\\[\\]\":,a-z0-9 \\\\u\u{feff}\u{e9}.eE+-]{0,64}") {
        check_any_body(body.as_bytes())?;
    }

    #[test]
    fn envelopes_decode_the_same_in_one_pass(e in envelope(), noise in prop::collection::vec(any::<u8>(), 0..4)) {
        let text = e.encode().unwrap();
        check_any_body(text.as_bytes())?;
        let mut bent = text.into_bytes();
        // A few bytes overwritten: mostly poison, sometimes still readable.
        for (i, b) in noise.iter().enumerate() {
            let at = (usize::from(*b) * 7 + i * 13) % bent.len();
            bent[at] = *b;
        }
        check_any_body(&bent)?;
    }

    #[test]
    fn real_json_objects_round_trip_through_the_poison_record(object in json_object(), pad in "[ \t\r\n]{0,3}") {
        let body = format!("{pad}{object}{pad}");
        check_any_body(body.as_bytes())?;
        prop_assert!(is_spliceable(body.as_bytes()));
    }

    #[test]
    fn members_the_decode_normalises_decode_the_same_in_one_pass(
        picks in prop::collection::vec(0usize..MEMBERS.len(), 1..7),
        meta in prop::collection::vec(0usize..META_MEMBERS.len(), 0..4),
    ) {
        // The one-pass decode skips normalising when no member needs it: any mix of the members
        // it acts on (forbidden keys, escaped or not, the `urn` alias, a `job` of any type,
        // repeated members) must still decode exactly as the two-pass decode does.
        let mut members: Vec<String> = picks.iter().map(|&i| MEMBERS[i].to_owned()).collect();
        let meta: Vec<&str> = meta.iter().map(|&i| META_MEMBERS[i]).collect();
        members.push(format!(r#""meta":{{{}}}"#, meta.join(",")));
        let body = format!("{{{}}}", members.join(","));
        check_any_body(body.as_bytes())?;
    }

    #[test]
    fn minified_text_is_stable(value in json_value()) {
        let raw = RawJson::parse(&value).unwrap();
        let again = RawJson::parse(raw.as_str()).unwrap();
        prop_assert_eq!(again.as_str(), raw.as_str());
    }

    #[test]
    fn ascii_trim_only_removes_the_six_characters(s in "[ \t\n\u{b}\u{c}\r\u{a0}\u{2003}a]{0,12}") {
        let t = ascii::trim(&s);
        prop_assert!(s.contains(t));
        let ws = [' ', '\t', '\n', '\u{b}', '\u{c}', '\r'];
        prop_assert!(!t.starts_with(ws));
        prop_assert!(!t.ends_with(ws));
        prop_assert_eq!(t.contains('\u{a0}'), s.contains('\u{a0}'));
    }
}
