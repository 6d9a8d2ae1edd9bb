//! `poison_dlq` (the ADR-0035 record) and `identity_verdict` (the core classifier, and the fate
//! of each body on the in-memory runtime).

use babelqueue_envelope::{Record, poison_cause};
use serde_json::{Map, Value};

use super::{Ctx, body_of, str_field};
use crate::Case;
use crate::check::{strict_equal, top_level_members};

/// Checks a poison record against the `expect` of a `poison_dlq` case.
pub(crate) fn check_record(
    record: &[u8],
    body: &[u8],
    expect: &Value,
    queue: &str,
) -> Result<(), String> {
    let text = std::str::from_utf8(record).map_err(|_| "the record is not UTF-8".to_string())?;
    let members =
        top_level_members(text).ok_or_else(|| format!("the record is not an object: {text}"))?;
    let blocks: Vec<_> = members.iter().filter(|(k, _)| k == "dead_letter").collect();
    let [(_, block)] = blocks.as_slice() else {
        return Err(format!(
            "the record must have exactly one top-level dead_letter: {text}"
        ));
    };
    let block: Value =
        serde_json::from_str(block).map_err(|e| format!("dead_letter is not JSON: {e}"))?;
    if block.get("reason") != Some(&Value::from("poison")) {
        return Err(format!("dead_letter.reason is not poison: {block}"));
    }
    if block.get("original_queue") != Some(&Value::from(queue)) {
        return Err(format!(
            "dead_letter.original_queue is not {queue:?}: {block}"
        ));
    }
    let shape = str_field(expect, "shape")?;
    let want = expect.get("record").ok_or("case has no expect.record")?;
    let as_wrapper = || -> Result<(), String> {
        let mut doc: Map<String, Value> =
            serde_json::from_str(text).map_err(|e| format!("the record does not parse: {e}"))?;
        doc.remove("dead_letter");
        if strict_equal(&Value::Object(doc.clone()), want) {
            Ok(())
        } else {
            Err(format!(
                "record without dead_letter is {}, expected {want}",
                Value::Object(doc)
            ))
        }
    };
    match shape {
        "wrapper" => as_wrapper(),
        "splice" => {
            as_wrapper()?;
            let body = std::str::from_utf8(body).map_err(|_| "splice of a non-UTF-8 body")?;
            let trimmed = body.trim_matches([' ', '\t', '\n', '\r']);
            let prefix = trimmed[..trimmed.len() - 1].trim_end_matches([' ', '\t', '\n', '\r']);
            if text.starts_with(prefix) {
                Ok(())
            } else {
                Err(format!(
                    "the splice does not start with the original bytes {prefix:?}: {text}"
                ))
            }
        }
        "splice_or_wrapper" => {
            if as_wrapper().is_ok() {
                return Ok(());
            }
            for literal in expect
                .get("splice_literals")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let literal = literal.as_str().ok_or("splice literal is not a string")?;
                if !text.contains(literal) {
                    return Err(format!(
                        "neither the wrapper nor a splice: literal {literal:?} is missing"
                    ));
                }
            }
            if members
                .iter()
                .any(|(k, _)| k == "raw" || k == "raw_encoding")
            {
                return Err("a splice must not carry raw/raw_encoding".into());
            }
            let mut got: Vec<&str> = members
                .iter()
                .map(|(k, _)| k.as_str())
                .filter(|k| *k != "dead_letter")
                .collect();
            got.sort_unstable();
            got.dedup();
            let mut want: Vec<&str> = expect
                .get("splice_keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            want.sort_unstable();
            want.dedup();
            if got == want {
                Ok(())
            } else {
                Err(format!("splice keys {got:?}, expected {want:?}"))
            }
        }
        other => Err(format!("unknown shape {other:?}")),
    }
}

pub(super) fn poison_dlq(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let queue = ctx
        .data
        .and_then(|d| d.get("original_queue"))
        .and_then(Value::as_str)
        .unwrap_or("orders");
    let body = body_of(case.value)?;
    // The record the runtime writes (the same function), for a body the broker could not
    // count, so its block's error is the bare `Undecodable BabelQueue body`.
    let record = Record::Poison {
        cause: None,
        attempts: 0,
        original_queue: queue.to_owned(),
    }
    .render(&body, None, queue, 1_750_000_000_000)
    .map_err(|e| e.to_string())?;
    check_record(
        &record,
        &body,
        case.value.get("expect").ok_or("no expect")?,
        queue,
    )
}

pub(super) fn identity_verdict(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let body = body_of(case.value)?;
    let want = str_field(case.value, "expect")?;
    let cause = poison_cause(&body, true);
    let got = if cause.is_none() { "ok" } else { "poison" };
    if got != want {
        return Err(format!("verdict {got} ({cause:?}), expected {want}"));
    }
    crate::fate::identity(&body, want == "ok")
}
