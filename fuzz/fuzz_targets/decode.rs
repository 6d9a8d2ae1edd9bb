//! Any byte string: decode, verdict and poison record must not panic, the verdicts must agree,
//! a readable body must re-encode, and the poison record must give the original bytes back.
#![no_main]

use babelqueue_envelope::{
    DeadLetter, Envelope, Reason, Verdict, classify, is_spliceable, poison_cause, poison_record,
};
use libfuzzer_sys::fuzz_target;

fn json_ws(b: &u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fuzz_target!(|body: &[u8]| {
    let decoded = Envelope::decode_lenient(body);
    let verdict = classify(body);
    let strict = poison_cause(body, true);
    assert_eq!(strict.is_none(), verdict == Verdict::Ok);
    if matches!(verdict, Verdict::Poison(_)) {
        assert!(poison_cause(body, false).is_some());
    }
    if strict.is_none() {
        assert!(Envelope::decode(body).is_ok());
        assert!(decoded.envelope.encode().is_ok());
    }

    let block = DeadLetter::new(Reason::Poison, "orders", 0, 1);
    let block_text = block.to_raw().as_str().to_owned();
    let record = poison_record(body, &block);
    let text = std::str::from_utf8(&record).expect("a poison record is UTF-8");
    let head = text
        .strip_suffix(&format!("{block_text}}}"))
        .expect("ends with the block");
    if is_spliceable(body) {
        let start = body.iter().position(|b| !json_ws(b)).unwrap();
        let end = body.iter().rposition(|b| !json_ws(b)).unwrap() + 1;
        if head != "{\"dead_letter\":" {
            let prefix = head.strip_suffix(",\"dead_letter\":").expect("a splice");
            assert_eq!(format!("{prefix}}}").as_bytes(), &body[start..end]);
        }
    } else if let Ok(original) = std::str::from_utf8(body) {
        let raw = head
            .strip_prefix("{\"raw\":")
            .and_then(|r| r.strip_suffix(",\"dead_letter\":"));
        let raw: String = serde_json_free_unquote(raw.expect("a text wrapper"));
        assert_eq!(raw, original);
    } else {
        assert!(head.contains("\"raw_encoding\":\"base64\""));
    }
});

/// Reads back a JSON string literal written by the codec (its escapes are the six simple ones
/// and \u00XX), without pulling a JSON library into the fuzz build.
fn serde_json_free_unquote(literal: &str) -> String {
    let inner = &literal[1..literal.len() - 1];
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}
