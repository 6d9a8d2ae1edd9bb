//! The dead-letter records, for any body and any block: the original bytes must come back.
//!
//! * Poison record (ADR-0035): a strict object is spliced at byte level (the trimmed body minus
//!   its closing brace, then the block); other UTF-8 text is wrapped as `{"raw": …}` and reads
//!   back exactly; other bytes are wrapped as base64 with `"raw_encoding":"base64"` and decode
//!   back exactly. The record is always one JSON object whose `dead_letter` member is the block.
//!   `Record::Poison` renders exactly that record with the poison block (`DeadLetter::poison`,
//!   with or without a typed cause).
//! * Annotated record (`annotated_record`): the decoded envelope with `attempts` set to the
//!   block's count and the block set; it is the encoding of that counted envelope with the
//!   block appended byte for byte (or an existing block replaced in place), and decoding it
//!   gives the annotated envelope back. `Record::Annotated` renders it with the block built from
//!   its reason, count and error, `original_queue` being `meta.queue` when the envelope names
//!   one, else the consumed queue.
//! * Gated record: the body itself.
//!
//! Input: the body, then optionally `0xFF` and the bytes the block is drawn from.
#![no_main]

use babelqueue_envelope::{
    DeadLetter, Envelope, Object, PoisonCause, RawJson, Reason, Record, WarningKind,
    annotated_record, is_spliceable, poison_cause, poison_record,
};
use babelqueue_fuzz::{base64_decode, split_body, text};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

/// The queue a rendered record was consumed from.
const CONSUMED: &str = "orders.retry.1";

fuzz_target!(|data: &[u8]| {
    let (body, params) = split_body(data);
    let mut u = Unstructured::new(params);
    let Ok(drawn) = block(body, &mut u) else {
        return;
    };
    let block = &drawn.block;
    check_block(block);
    poison(body, block);
    if let Some(cause) = &drawn.poison {
        let record = Record::Poison {
            cause: cause.clone(),
            attempts: block.attempts,
            original_queue: block.original_queue.clone(),
        };
        let rendered = record
            .render(body, None, CONSUMED, block.failed_at)
            .expect("a poison record always renders");
        assert_eq!(rendered, poison_record(body, block));
    }
    annotated(body, block);
    let gated = Record::Gated
        .render(body, None, CONSUMED, block.failed_at)
        .expect("a gated record is the body");
    assert_eq!(
        gated, body,
        "a gated record must be the body, byte for byte"
    );
});

/// A drawn block, and the cause it was built from when it is a poison block.
struct Drawn {
    block: DeadLetter,
    poison: Option<Option<PoisonCause>>,
}

fn block(body: &[u8], u: &mut Unstructured<'_>) -> Result<Drawn> {
    let queue = text(u)?;
    let attempts = u.arbitrary()?;
    let failed_at = u.arbitrary()?;
    if u.ratio(1, 2)? {
        // A poison block: the body's own cause, or none (an attempt the broker did not count).
        let cause = poison_cause(body, true).filter(|_| u.ratio(3, 4).unwrap_or(true));
        let block = DeadLetter::poison(cause.as_ref(), queue, attempts, failed_at);
        let error = block.error.as_deref().unwrap_or_default();
        match &cause {
            Some(_) => assert!(
                error.starts_with("Undecodable BabelQueue body: "),
                "{error}"
            ),
            None => assert_eq!(error, "Undecodable BabelQueue body"),
        }
        assert_eq!(block.reason, Reason::Poison);
        return Ok(Drawn {
            block,
            poison: Some(cause),
        });
    }
    let reason = *u.choose(&[Reason::Failed, Reason::UnknownUrn, Reason::Poison])?;
    let block = DeadLetter::new(reason, queue, attempts, failed_at);
    let block = if u.arbitrary()? {
        block.with_error(text(u)?, text(u)?)
    } else {
        block
    };
    Ok(Drawn {
        block,
        poison: None,
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
    let record = annotated_record(&envelope, block).expect("annotating never adds a forbidden key");
    let record = String::from_utf8(record).expect("an annotated record is UTF-8");

    // The record is the envelope counted with the block's attempts, then annotated.
    let mut counted = envelope.clone();
    counted.set_attempts(block.attempts);
    assert_eq!(counted.attempts(), block.attempts);
    let original = counted
        .encode()
        .expect("an envelope that came out of a decode always encodes");
    let annotated = counted.annotate(block);
    let block_text = block.to_raw().into_string();
    assert_eq!(
        annotated.dead_letter().map(RawJson::as_str),
        Some(block_text.as_str())
    );
    assert_eq!(
        record,
        annotated
            .encode()
            .expect("annotating never adds a forbidden key")
    );

    if counted.dead_letter().is_none() {
        // The block is appended: every byte of the counted envelope's encoding comes first.
        let expected = format!(
            "{},\"dead_letter\":{block_text}}}",
            &original[..original.len() - 1]
        );
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
    assert_eq!(back.envelope.attempts(), block.attempts);
    let (mut stripped, mut before) = (back.envelope, counted);
    stripped.remove("dead_letter");
    before.remove("dead_letter");
    assert_eq!(stripped, before, "only the block differs");

    // The runtime's record kind renders the same bytes from the block's parts.
    let error = block.error.clone().zip(block.exception.clone());
    let kind = Record::Annotated {
        reason: block.reason,
        attempts: block.attempts,
        error: error.clone(),
    };
    let rendered = kind
        .render(
            body,
            Some(&envelope),
            &block.original_queue,
            block.failed_at,
        )
        .expect("an annotated record of a decoded envelope renders");
    let original_queue = envelope
        .queue()
        .filter(|q| !q.is_empty())
        .map_or_else(|| block.original_queue.clone(), |q| q.into_owned());
    let mut expected_block = DeadLetter::new(
        block.reason,
        original_queue,
        block.attempts,
        block.failed_at,
    );
    if let Some((message, exception)) = error {
        expected_block = expected_block.with_error(message, exception);
    }
    let expected =
        annotated_record(&envelope, &expected_block).expect("the same envelope annotates");
    assert_eq!(rendered, expected);
}
