//! Sections that exist only in the project's own manifest (`conformance/manifest.json`).
//!
//! * `codec_reemit`: the exact bytes of the retry hop (decode → attempts + 1 → encode);
//! * `verdict`: the three-way classification (`ok`, `no_identity`, `poison`) of a raw body;
//! * `make_shape`: the exact member order and the generated fields of a produced envelope.

use babelqueue_envelope::{Builder, RawJson, Verdict, classify};
use serde_json::Value;

use super::{Ctx, body_of, str_field};
use crate::Case;
use crate::check::top_level_members;

pub(super) fn codec_reemit(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let body = body_of(case.value)?;
    let want = str_field(case.value, "expect")?;
    // The codec's own hop (the runtime's hop is checked by the official re-emit cases).
    let mut envelope = babelqueue_envelope::Envelope::decode_lenient(&body).envelope;
    envelope.set_attempts(envelope.attempts().saturating_add(1));
    let got = envelope.encode().map_err(|e| e.to_string())?.into_bytes();
    let got = String::from_utf8(got).map_err(|_| "the hop wrote invalid UTF-8".to_string())?;
    if got == want {
        Ok(())
    } else {
        Err(format!("re-emitted\n  {got}\nexpected\n  {want}"))
    }
}

pub(super) fn verdict(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let body = body_of(case.value)?;
    let got = match classify(&body) {
        Verdict::Ok => "ok".to_string(),
        Verdict::NoIdentity => "no_identity".to_string(),
        Verdict::Poison(cause) => format!("poison ({cause})"),
    };
    let want = str_field(case.value, "expect")?;
    if got.split(' ').next() == Some(want) {
        Ok(())
    } else {
        Err(format!("verdict {got}, expected {want}"))
    }
}

fn is_uuid_v4(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            14 => *c == b'4',
            19 => matches!(c, b'8' | b'9' | b'a' | b'b'),
            _ => matches!(c, b'0'..=b'9' | b'a'..=b'f'),
        })
}

pub(super) fn make_shape(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let mut builder = Builder::new(str_field(c, "urn")?);
    if let Some(queue) = c.get("queue").and_then(Value::as_str) {
        builder = builder.queue(queue);
    }
    if let Some(trace_id) = c.get("trace_id").and_then(Value::as_str) {
        builder = builder.trace_id(trace_id);
    }
    if let Some(data) = c.get("data") {
        builder = builder.data_raw(RawJson::parse(&data.to_string()).map_err(|e| e.to_string())?);
    }
    for entry in c
        .get("meta_entries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = entry
            .get(0)
            .and_then(Value::as_str)
            .ok_or("bad meta entry")?;
        let value = RawJson::parse(&entry.get(1).ok_or("bad meta entry")?.to_string())
            .map_err(|e| e.to_string())?;
        builder = builder.meta_raw(key, value);
    }
    let before = babelqueue_envelope::now_millis();
    let envelope = builder.build().map_err(|e| format!("make failed: {e}"))?;
    let after = babelqueue_envelope::now_millis();
    let text = envelope.encode().map_err(|e| e.to_string())?;
    let expect = c.get("expect").ok_or("no expect")?;
    let names = |text: &str| -> Result<Vec<String>, String> {
        Ok(top_level_members(text)
            .ok_or("not an object")?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    };
    let want_keys: Vec<String> = expect
        .get("keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    if names(&text)? != want_keys {
        return Err(format!(
            "top-level keys {:?}, expected {want_keys:?}",
            names(&text)?
        ));
    }
    let members = top_level_members(&text).ok_or("not an object")?;
    let meta = &members
        .iter()
        .find(|(k, _)| k == "meta")
        .ok_or("no meta")?
        .1;
    let want_meta: Vec<String> = expect
        .get("meta_keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    if names(meta)? != want_meta {
        return Err(format!(
            "meta keys {:?}, expected {want_meta:?}",
            names(meta)?
        ));
    }
    for (ptr, want) in expect
        .get("values")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let doc: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        crate::check::expect_at(&doc, ptr, want)?;
    }
    if let Some(data) = expect.get("data_text").and_then(Value::as_str) {
        let got = &members
            .iter()
            .find(|(k, _)| k == "data")
            .ok_or("no data")?
            .1;
        if got != data {
            return Err(format!("data text {got}, expected {data}"));
        }
    }
    let id = envelope.message_id().ok_or("no meta.id")?;
    if !is_uuid_v4(&id) {
        return Err(format!("meta.id {id:?} is not a lowercase UUIDv4"));
    }
    if c.get("trace_id").is_none() || expect.get("trace_id_minted") == Some(&Value::Bool(true)) {
        let trace = envelope.trace_id().ok_or("no trace_id")?;
        if !is_uuid_v4(&trace) || trace == id {
            return Err(format!(
                "minted trace_id {trace:?} is not a fresh UUIDv4 distinct from meta.id"
            ));
        }
    }
    let created = envelope.created_at().ok_or("no created_at")?;
    if created < before || created > after {
        return Err(format!(
            "created_at {created} is not the current time in ms ({before}..={after})"
        ));
    }
    Ok(())
}
