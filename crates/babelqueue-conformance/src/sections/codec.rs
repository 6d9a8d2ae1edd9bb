//! The codec sections: `cases`, `roundtrip`, `data_shape`, `forbidden_keys`, `extension_write`,
//! `encode_reject`, `trim`, `job_type`.

use babelqueue_envelope::{Builder, Envelope, Error, RawJson};
use serde_json::Value;

use super::{Ctx, bool_field, check_pointers, parse_output, str_field};
use crate::Case;
use crate::check::{expect_at, strict_equal, top_level_members};

/// The retry hop every SDK performs: decode → attempts + 1 → encode.
pub(crate) fn retry_hop(body: &[u8]) -> Result<Vec<u8>, String> {
    crate::hop::retry(body)
}

fn raw(value: &Value) -> Result<RawJson, String> {
    RawJson::parse(&value.to_string()).map_err(|e| e.to_string())
}

fn value_of(raw: Option<&RawJson>) -> Result<Value, String> {
    let raw = raw.ok_or("member absent")?;
    serde_json::from_str(raw.as_str()).map_err(|e| e.to_string())
}

pub(super) fn cases(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let body = ctx.fixture(c, "file")?;
    if !bool_field(c, "valid")? {
        return match Envelope::decode(&body) {
            Err(_) => Ok(()),
            Ok(d) if !d.envelope.accepts() => Ok(()),
            Ok(_) => Err("decoded and accepted; expected a rejection".into()),
        };
    }
    let env = Envelope::decode(&body)
        .map_err(|e| format!("decode failed: {e}"))?
        .envelope;
    if !env.accepts() {
        return Err("accepts() is false for a valid envelope".into());
    }
    let expect = c.get("expect").ok_or("case has no `expect`")?;
    if let Some(urn) = expect.get("urn").and_then(Value::as_str)
        && env.urn() != urn
    {
        return Err(format!("urn is {:?}, expected {urn:?}", env.urn()));
    }
    if let Some(attempts) = expect.get("attempts").and_then(Value::as_i64)
        && env.attempts() != attempts
    {
        return Err(format!(
            "attempts is {}, expected {attempts}",
            env.attempts()
        ));
    }
    if let Some(lang) = expect.get("lang").and_then(Value::as_str)
        && env.lang().as_deref() != Some(lang)
    {
        return Err(format!("meta.lang is {:?}, expected {lang:?}", env.lang()));
    }
    if let Some(version) = expect.get("schema_version").and_then(Value::as_i64)
        && env.schema_version() != Some(version)
    {
        return Err(format!(
            "meta.schema_version is {:?}, expected {version}",
            env.schema_version()
        ));
    }
    if let Some(data) = expect.get("data") {
        let got = value_of(env.data())?;
        if !strict_equal(&got, data) {
            return Err(format!("data is {got}, expected {data}"));
        }
    }
    if let Some(Value::Object(fields)) = expect.get("dead_letter") {
        let block = value_of(env.dead_letter())?;
        for (key, want) in fields {
            expect_at(&block, &format!("/{key}"), want).map_err(|e| format!("dead_letter: {e}"))?;
        }
    }
    if env.message_id().is_none() {
        return Err("meta.id is missing".into());
    }
    if env.trace_id().is_none_or(|t| t.is_empty()) {
        return Err("trace_id is empty".into());
    }
    Ok(())
}

pub(super) fn roundtrip(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let body = ctx.fixture(c, "file")?;
    let decoded = Envelope::decode(&body).map_err(|e| format!("decode failed: {e}"))?;
    if !decoded.envelope.accepts() {
        return Err("accepts() is false".into());
    }
    if let Some(w) = decoded.warnings.first() {
        return Err(format!(
            "decode warned ({w}); a roundtrip fixture must decode silently"
        ));
    }
    let applied = c.get("apply_dead_letter");
    let out = match applied {
        Some(apply) => crate::hop::dead_letter(
            &body,
            str_field(apply, "reason")?,
            str_field(apply, "original_queue")?,
        )?,
        None => retry_hop(&body)?,
    };
    let doc = parse_output(&out)?;
    let want = c
        .get("expect_attempts")
        .and_then(Value::as_i64)
        .ok_or("no expect_attempts")?;
    expect_at(&doc, "/attempts", &Value::from(want))?;
    check_pointers(&doc, c)?;
    if let (Some(_), Some(Value::Object(fields))) = (applied, c.get("expect_dead_letter")) {
        for (key, want) in fields {
            expect_at(&doc, &format!("/dead_letter/{key}"), want)?;
        }
    }
    Ok(())
}

pub(super) fn data_shape(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    match str_field(c, "mode")? {
        "encode" => {
            let envelope = Builder::new(str_field(c, "urn")?)
                .queue(str_field(c, "queue")?)
                .data_raw(raw(c.get("data").ok_or("no data")?)?)
                .build()
                .map_err(|e| e.to_string())?;
            let text = envelope.encode().map_err(|e| e.to_string())?;
            let members = top_level_members(&text).ok_or("encoded text is not an object")?;
            let data = members
                .iter()
                .find(|(k, _)| k == "data")
                .ok_or("no data member")?;
            let want = str_field(c, "expect_encoded_data_json")?;
            let compact: String = data.1.chars().filter(|ch| !ch.is_whitespace()).collect();
            if compact != want {
                return Err(format!("data encodes as {compact}, expected {want}"));
            }
            if want == "{}" && !text.contains("\"data\":{}") {
                return Err(format!("encoded text lacks \"data\":{{}}: {text}"));
            }
            Ok(())
        }
        "decode" => {
            let body = ctx.fixture(c, "file")?;
            let accepted = Envelope::decode(&body).is_ok_and(|d| d.envelope.accepts());
            let valid = bool_field(c, "valid")?;
            if accepted == valid {
                Ok(())
            } else {
                Err(format!("accepted = {accepted}, expected valid = {valid}"))
            }
        }
        other => Err(format!("unknown mode {other:?}")),
    }
}

pub(super) fn forbidden_keys(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let body = ctx.fixture(c, "file")?;
    let pointer = str_field(c, "forbidden_key")?;
    let fixture = parse_output(&body)?;
    if crate::check::pointer(&fixture, pointer).is_none() {
        return Err(format!(
            "fixture sanity: {pointer} does not resolve in the raw fixture"
        ));
    }
    let decoded = Envelope::decode(&body).map_err(|e| format!("decode failed: {e}"))?;
    if !decoded.envelope.accepts() {
        return Err("accepts() is false".into());
    }
    if !decoded.warnings.iter().any(|w| w.pointer == pointer) {
        return Err(format!(
            "no decode warning names {pointer} (got {:?})",
            decoded.warnings
        ));
    }
    let text = decoded
        .envelope
        .encode()
        .map_err(|e| format!("re-encode failed: {e}"))?;
    check_pointers(&parse_output(text.as_bytes())?, c)
}

fn builder_for(c: &Value) -> Result<Builder, String> {
    let mut builder = Builder::new(str_field(c, "urn")?)
        .queue(str_field(c, "queue")?)
        .data_raw(raw(c.get("data").ok_or("no data")?)?);
    if let Some(Value::Object(meta)) = c.get("meta") {
        for (key, value) in meta {
            builder = builder.meta_raw(key.clone(), raw(value)?);
        }
    }
    if let Some(Value::Array(entries)) = c.get("meta_entries") {
        for entry in entries {
            let key = entry
                .get(0)
                .and_then(Value::as_str)
                .ok_or("meta_entries: bad key")?;
            let value = entry.get(1).ok_or("meta_entries: no value")?;
            builder = builder.meta_raw(key, raw(value)?);
        }
    }
    Ok(builder)
}

pub(super) fn extension_write(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let envelope = builder_for(c)?
        .build()
        .map_err(|e| format!("make failed: {e}"))?;
    let text = envelope
        .encode()
        .map_err(|e| format!("encode failed: {e}"))?;
    let expect = c
        .get("expect_envelope")
        .and_then(Value::as_object)
        .ok_or("no expect_envelope")?;
    let first = parse_output(text.as_bytes())?;
    for (ptr, want) in expect {
        expect_at(&first, ptr, want).map_err(|e| format!("after make: {e}"))?;
    }
    let second = parse_output(&retry_hop(text.as_bytes())?)?;
    for (ptr, want) in expect {
        expect_at(&second, ptr, want).map_err(|e| format!("after the re-emit hop: {e}"))?;
    }
    expect_at(&second, "/attempts", &Value::from(1))
}

fn expect_pointer(err: &Error, c: &Value) -> Result<(), String> {
    let want = str_field(c, "offending_key")?;
    match err.pointer() {
        Some(got) if got == want => Ok(()),
        got => Err(format!(
            "rejected ({err}), but the error names {got:?}, expected {want:?}"
        )),
    }
}

pub(super) fn encode_reject(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let mut envelope = match builder_for(c)?.build() {
        Err(e) => return expect_pointer(&e, c),
        Ok(envelope) => envelope,
    };
    if let Some(Value::Object(extras)) = c.get("extras_top") {
        for (key, value) in extras {
            envelope.set(key, raw(value)?);
        }
    }
    if let Some(Value::Object(extras)) = c.get("extras_meta") {
        let meta = envelope
            .meta_mut()
            .ok_or("the built envelope has no meta object")?;
        for (key, value) in extras {
            meta.insert(key, raw(value)?);
        }
    }
    match envelope.encode() {
        Ok(text) => Err(format!("encode produced JSON instead of rejecting: {text}")),
        Err(e) => expect_pointer(&e, c),
    }
}

fn decode_case(ctx: &Ctx<'_>, c: &Value) -> Result<(), String> {
    let body = ctx.fixture(c, "file")?;
    let result = Envelope::decode(&body);
    if !bool_field(c, "valid")? {
        return match result {
            Err(_) => Ok(()),
            Ok(d) => Err(format!(
                "decode succeeded with urn {:?}; expected it to fail",
                d.envelope.urn()
            )),
        };
    }
    let decoded = result.map_err(|e| format!("decode failed: {e}"))?;
    let want = c
        .pointer("/expect/urn")
        .and_then(Value::as_str)
        .ok_or("no expect.urn")?;
    if decoded.envelope.urn() != want {
        return Err(format!(
            "urn is {:?}, expected {want:?}",
            decoded.envelope.urn()
        ));
    }
    let warned = !decoded.warnings.is_empty();
    let expect_warning = bool_field(c, "expect_warning")?;
    if warned != expect_warning {
        return Err(format!(
            "warned = {warned} ({:?}), expected {expect_warning}",
            decoded.warnings
        ));
    }
    Ok(())
}

pub(super) fn trim(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    match str_field(c, "mode")? {
        "make" => {
            let mut builder = Builder::new(str_field(c, "urn")?);
            if let Some(trace_id) = c.get("trace_id").and_then(Value::as_str) {
                builder = builder.trace_id(trace_id);
            }
            let built = builder.build();
            match (c.get("expect"), built) {
                (Some(Value::String(s)), Err(Error::BlankUrn)) if s == "reject" => Ok(()),
                (Some(Value::String(s)), Ok(env)) if s == "reject" => Err(format!(
                    "make accepted the URN as {:?}; expected a rejection",
                    env.urn()
                )),
                (Some(Value::Object(expect)), Ok(env)) => {
                    let doc = parse_output(env.encode().map_err(|e| e.to_string())?.as_bytes())?;
                    for (field, want) in expect {
                        expect_at(&doc, &format!("/{field}"), want)?;
                    }
                    Ok(())
                }
                (_, Err(e)) => Err(format!("make failed: {e}")),
                (other, _) => Err(format!("unexpected `expect`: {other:?}")),
            }
        }
        "decode" => decode_case(ctx, c),
        "accepts" => {
            let body = ctx.fixture(c, "file")?;
            let decoded = Envelope::decode(&body);
            if bool_field(c, "expect_decode_ok")? && decoded.is_err() {
                return Err("decode failed; expected it to succeed".into());
            }
            let accepted = decoded.is_ok_and(|d| d.envelope.accepts());
            let want = bool_field(c, "expect_accepts")?;
            if accepted == want {
                Ok(())
            } else {
                Err(format!("accepts() = {accepted}, expected {want}"))
            }
        }
        "reemit" => {
            let body = ctx.fixture(c, "file")?;
            let doc = parse_output(&retry_hop(&body)?)?;
            let want = c
                .get("expect_attempts")
                .and_then(Value::as_i64)
                .ok_or("no expect_attempts")?;
            expect_at(&doc, "/attempts", &Value::from(want))?;
            check_pointers(&doc, c)
        }
        other => Err(format!("unknown mode {other:?}")),
    }
}

pub(super) fn job_type(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    decode_case(ctx, case.value)
}
