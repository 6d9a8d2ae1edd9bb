//! The dead-letter records, for any body and any block: the original bytes must come back.
//!
//! * Poison record (ADR-0035): a strict object is spliced at byte level (the trimmed body minus
//!   its closing brace, then the block); other UTF-8 text is wrapped as `{"raw": …}` and reads
//!   back exactly; other bytes are wrapped as base64 with `"raw_encoding":"base64"` and decode
//!   back exactly. The record is always one JSON object whose `dead_letter` member is the block.
//! * Annotated record (`Envelope::annotate`): the decoded envelope with the block set; encoding
//!   it appends the block to the envelope's own encoding byte for byte (or replaces an existing
//!   block in place), and decoding the record gives the annotated envelope back.
//! * Gated record: the body itself.
//!
//! Input: the body, then optionally `0xFF` and the bytes the block is drawn from.
#![no_main]

use babelqueue_envelope::{
    DeadLetter, DeadLetterRecord, Envelope, Object, RawJson, Reason, WarningKind, is_spliceable,
    poison_cause, poison_record,
};
use babelqueue_fuzz::{base64_decode, split_body, text};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (body, params) = split_body(data);
    let mut u = Unstructured::new(params);
    let Ok(block) = block(body, &mut u) else {
        return;
    };
    check_block(&block);
    poison(body, &block);
    annotated(body, &block);
    let record = DeadLetterRecord::Gated { body };
    let gated = record.to_bytes().expect("a gated record is the body");
    assert_eq!(
        &*gated, body,
        "a gated record must be the body, byte for byte"
    );
});

fn block(body: &[u8], u: &mut Unstructured<'_>) -> Result<DeadLetter> {
    let queue = text(u)?;
    let attempts = u.arbitrary()?;
    let failed_at = u.arbitrary()?;
    if let Some(cause) = poison_cause(body, true)
        && u.ratio(1, 2)?
    {
        return Ok(DeadLetter::poison(&cause, queue, attempts, failed_at));
    }
    let reason = *u.choose(&[Reason::Failed, Reason::UnknownUrn, Reason::Poison])?;
    let block = DeadLetter::new(reason, queue, attempts, failed_at);
    Ok(if u.arbitrary()? {
        block.with_error(text(u)?, text(u)?)
    } else {
        block
    })
}

/// The block's text holds its seven members, in order, with the values it was built from.
fn check_block(block: &DeadLetter) {
    let raw = block.to_raw();
    let object = Object::parse(raw.as_str()).expect("the block is a JSON object");
    let names: Vec<String> = object.iter().map(|(k, _)| k.name().into_owned()).collect();
    assert_eq!(
        names,
        [
            "reason",
            "error",
            "exception",
            "failed_at",
            "original_queue",
            "attempts",
            "lang"
        ]
    );
    let string = |name: &str| {
        object
            .get(name)
            .and_then(RawJson::as_string)
            .map(|s| s.into_owned())
    };
    assert_eq!(string("reason").as_deref(), Some(block.reason.as_str()));
    assert_eq!(string("error"), block.error);
    assert_eq!(string("exception"), block.exception);
    assert_eq!(
        string("original_queue").as_deref(),
        Some(block.original_queue.as_str())
    );
    assert_eq!(string("lang").as_deref(), Some(block.lang.as_str()));
    let int = |name: &str| object.get(name).and_then(RawJson::as_i64);
    assert_eq!(int("failed_at"), Some(block.failed_at));
    assert_eq!(int("attempts"), Some(block.attempts));
}

fn json_ws(b: &u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn poison(body: &[u8], block: &DeadLetter) {
    let record = poison_record(body, block);
    let kind = DeadLetterRecord::Poison { body, block };
    let through_enum = kind.to_bytes().expect("a poison record always builds");
    assert_eq!(&*through_enum, record.as_slice());

    let text = std::str::from_utf8(&record).expect("a poison record is UTF-8");
    let block_text = block.to_raw().into_string();
    let head = text
        .strip_suffix(&format!("{block_text}}}"))
        .expect("the record ends with the block and the closing brace");
    let object = Object::parse(text).expect("a poison record is one JSON object");
    assert_eq!(
        object.get("dead_letter").map(RawJson::as_str),
        Some(block_text.as_str())
    );

    if is_spliceable(body) {
        let start = body.iter().position(|b| !json_ws(b)).expect("an object");
        let end = body.iter().rposition(|b| !json_ws(b)).expect("an object") + 1;
        let body_text = std::str::from_utf8(body).expect("a spliceable body is UTF-8");
        let trimmed = &body_text[start..end];
        if trimmed[1..trimmed.len() - 1].bytes().all(|b| json_ws(&b)) {
            assert_eq!(head, "{\"dead_letter\":");
        } else {
            let expected = format!("{},\"dead_letter\":", &trimmed[..trimmed.len() - 1]);
            assert_eq!(head, expected, "a splice keeps the body's bytes");
        }
        return;
    }
    let raw = object
        .get("raw")
        .and_then(RawJson::as_string)
        .expect("a wrapper holds the body as a string");
    match std::str::from_utf8(body) {
        Ok(original) => {
            assert_eq!(&*raw, original, "the raw wrapper gives the text back");
            assert_eq!(object.len(), 2, "raw and dead_letter only");
        }
        Err(_) => {
            assert_eq!(
                object.get("raw_encoding").map(RawJson::as_str),
                Some("\"base64\"")
            );
            let bytes = base64_decode(&raw).expect("the raw member is standard base64");
            assert_eq!(bytes, body, "the base64 wrapper gives the bytes back");
            assert_eq!(object.len(), 3, "raw, raw_encoding and dead_letter only");
        }
    }
}

fn annotated(body: &[u8], block: &DeadLetter) {
    let Ok(decoded) = Envelope::decode_checked(body) else {
        return;
    };
    let envelope = decoded.envelope;
    let original = envelope
        .encode()
        .expect("an envelope that came out of a decode always encodes");
    let annotated = envelope.annotate(block);
    let block_text = block.to_raw().into_string();
    assert_eq!(
        annotated.dead_letter().map(RawJson::as_str),
        Some(block_text.as_str())
    );
    let record = annotated
        .encode()
        .expect("annotating never adds a forbidden key");
    let kind = DeadLetterRecord::Annotated {
        envelope: &envelope,
        block,
    };
    let through_enum = kind
        .to_bytes()
        .expect("an annotated record of a decoded envelope builds");
    assert_eq!(&*through_enum, record.as_bytes());

    if envelope.dead_letter().is_none() {
        // The block is appended: every byte of the envelope's own encoding comes first.
        let expected = if envelope.is_empty() {
            format!("{{\"dead_letter\":{block_text}}}")
        } else {
            format!(
                "{},\"dead_letter\":{block_text}}}",
                &original[..original.len() - 1]
            )
        };
        assert_eq!(record, expected);
    }

    let back = Envelope::decode_checked(record.as_bytes()).expect("an annotated record decodes");
    assert!(
        !back
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::DroppedForbiddenKey),
        "an annotated record holds no forbidden key: {:?}",
        back.warnings
    );
    assert_eq!(
        back.envelope, annotated,
        "the record decodes to what was written"
    );
    let (mut stripped, mut before) = (back.envelope, envelope);
    stripped.remove("dead_letter");
    before.remove("dead_letter");
    assert_eq!(stripped, before, "only the block differs");
}
