//! The runtime sections: `idempotency`, `payload_schema`, `payload_schema_unicode`,
//! `retry_backoff`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use babelqueue_core::idempotency::{IdempotencyStore, InMemoryStore, idempotent};
use babelqueue_core::{Backoff, Context, Envelope, Handler, HandlerError, Jitter, schema};
use serde_json::Value;

use super::{Ctx, bool_field, str_field};
use crate::Case;
use crate::hop::block_on;

fn delivery(meta_id: &str) -> Context {
    let envelope = Envelope::builder("urn:babel:orders:created")
        .message_id(meta_id)
        .build()
        .expect("a valid envelope");
    Context::new(envelope, "orders", Default::default())
}

pub(super) fn idempotency(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let store = Arc::new(InMemoryStore::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (r, f) = (runs.clone(), fail.clone());
    let handler = idempotent(store.clone(), move |_ctx: Context| {
        let (r, f) = (r.clone(), f.clone());
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            if f.load(Ordering::SeqCst) {
                Err(HandlerError::new("handler threw"))
            } else {
                Ok(())
            }
        }
    });
    block_on(async {
        if case.id == "dedup_key" {
            let body = ctx.fixture(c, "envelope_file")?;
            let envelope = Envelope::decode(&body).map_err(|e| e.to_string())?.envelope;
            let context = Context::new(envelope, "orders", Default::default());
            handler
                .call(context.clone())
                .await
                .map_err(|e| e.to_string())?;
            handler.call(context).await.map_err(|e| e.to_string())?;
            let key = str_field(c, "expected_key")?;
            if runs.load(Ordering::SeqCst) != 1 {
                return Err(format!(
                    "the handler ran {} times for two deliveries",
                    runs.load(Ordering::SeqCst)
                ));
            }
            if !store.seen(key).await.map_err(|e| e.to_string())? {
                return Err(format!("the store did not record meta.id {key:?}"));
            }
            let trace = Envelope::decode(&body)
                .map_err(|e| e.to_string())?
                .envelope
                .trace_id()
                .unwrap_or_default()
                .into_owned();
            if store.seen(&trace).await.map_err(|e| e.to_string())? {
                return Err("the store is keyed by trace_id".into());
            }
            return Ok(());
        }
        for (i, d) in c
            .get("deliveries")
            .and_then(Value::as_array)
            .ok_or("no deliveries")?
            .iter()
            .enumerate()
        {
            let id = str_field(d, "meta_id")?;
            if d.get("forget_before").and_then(Value::as_bool) == Some(true) {
                store.forget(id).await.map_err(|e| e.to_string())?;
            }
            fail.store(
                d.get("outcome").and_then(Value::as_str) == Some("throw"),
                Ordering::SeqCst,
            );
            let before = runs.load(Ordering::SeqCst);
            let _ = handler.call(delivery(id)).await;
            let ran = if runs.load(Ordering::SeqCst) > before {
                "run"
            } else {
                "skip"
            };
            let want = str_field(d, "expect_effect")?;
            if ran != want {
                return Err(format!("delivery {i} ({id}): {ran}, expected {want}"));
            }
        }
        let want = c
            .get("expected_effects")
            .and_then(Value::as_u64)
            .ok_or("no expected_effects")?;
        let got = runs.load(Ordering::SeqCst) as u64;
        if got == want {
            Ok(())
        } else {
            Err(format!("{got} handler invocations, expected {want}"))
        }
    })
}

pub(super) fn payload_schema(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let schema = ctx
        .data
        .and_then(|d| d.get("schema"))
        .ok_or("the section has no schema")?;
    let data = case.value.get("data").ok_or("no data")?;
    let violation = schema::validate(schema, data);
    let want = bool_field(case.value, "valid")?;
    match (violation, want) {
        (None, true) => Ok(()),
        (Some(v), false) if v.contains(": ") => Ok(()),
        (got, want) => Err(format!("validation gave {got:?}, expected valid = {want}")),
    }
}

pub(super) fn retry_backoff(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let number = |k: &str| {
        c.get(k)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("no number `{k}`"))
    };
    let jitter: Jitter = str_field(c, "retry_jitter")?
        .parse()
        .map_err(|e: babelqueue_core::Error| e.to_string())?;
    let backoff = Backoff {
        base: number("retry_backoff")?,
        multiplier: number("retry_backoff_multiplier")?,
        max: number("retry_backoff_max")?,
        jitter,
    };
    let n = c.get("n").and_then(Value::as_i64).ok_or("no n")?;
    if let Some(want) = c.get("expect_delay_seconds").and_then(Value::as_f64) {
        let got = backoff.seconds_with(n, &mut |_, _| f64::NAN);
        return if got == want {
            Ok(())
        } else {
            Err(format!("d({n}) = {got}, expected exactly {want}"))
        };
    }
    let range = c
        .get("expect_delay_range_seconds")
        .ok_or("no expectation")?;
    let (min, max) = (
        range.get("min").and_then(Value::as_f64).ok_or("no min")?,
        range.get("max").and_then(Value::as_f64).ok_or("no max")?,
    );
    // The bounds are inclusive: a sampler returning each bound is honoured exactly.
    for pick in [0usize, 1] {
        let got = backoff.seconds_with(n, &mut |low, high| if pick == 0 { low } else { high });
        if got < min || got > max {
            return Err(format!("a bound sample gave {got}, outside [{min}, {max}]"));
        }
    }
    for _ in 0..500 {
        let got = backoff.delay(n).as_secs_f64();
        if got < min || got > max {
            return Err(format!("a jittered delay {got} is outside [{min}, {max}]"));
        }
    }
    Ok(())
}
