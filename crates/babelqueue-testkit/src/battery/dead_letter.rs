//! Dead-letter records: the annotated record of a failed message, the poison records that keep
//! the original bytes, and the broker's native dead-lettering.

use std::sync::Arc;

use babelqueue_core::{Context, HandlerError, Outcome, Transport};
use babelqueue_envelope::{DeadLetter, Envelope, Reason, poison_cause, poison_record};
use base64::Engine as _;
use serde_json::Value;

use super::{Check, Ctx, DATA, Stop, URN, Why, close, ensure, outcome_app, preview, publish_data};

/// The record the runtime wrote to `dlq`, acknowledged.
async fn read_record(ctx: &Ctx, transport: &dyn Transport, dlq: &str) -> Result<Vec<u8>, Stop> {
    let record = ctx
        .receive(transport, dlq, "the dead-letter record")
        .await?;
    transport.ack(&record).await.why("ack of the record")?;
    Ok(record.body().to_vec())
}

/// `failed_at` is a time of this run (epoch milliseconds).
fn check_failed_at(block: &Value, since: i64) -> Result<i64, Stop> {
    let failed_at = block["failed_at"].as_i64().unwrap_or(i64::MIN);
    let now = babelqueue_envelope::now_millis();
    ensure!(
        (since - 1000..=now + 1000).contains(&failed_at),
        "dead_letter.failed_at is {}, not a time of this run ({since}..{now})",
        block["failed_at"]
    );
    Ok(failed_at)
}

pub(super) async fn dead_letter_record(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    let q = ctx.queue();
    let since = babelqueue_envelope::now_millis();
    let (builder, outcomes) = outcome_app(&ctx, &t, &q);
    let app = builder
        .max_attempts(2)
        .dead_letter(true)
        .handle(URN, |_c: Context| async {
            Err::<(), _>(
                HandlerError::new("testkit: fails on purpose").with_exception("TestkitError"),
            )
        })
        .build()
        .why("building the app")?;
    let dlq = ctx.dead_letter_queue(&app, &q);
    let envelope = publish_data(&app, &q, Some("tk-trace-dlq")).await?;
    app.consume(ctx.consume(2)).await.why("App::consume")?;
    let seen = outcomes.all();
    ensure!(
        seen == [Outcome::Retried, Outcome::DeadLettered],
        "expected the outcomes [Retried, DeadLettered], got {seen:?}"
    );
    let record = read_record(&ctx, t.as_ref(), &dlq).await?;
    let decoded = Envelope::decode(&record)
        .map_err(|e| format!("the record is not an envelope ({e}): {}", preview(&record)))?
        .envelope;
    ensure!(
        decoded.urn() == URN,
        "the record's URN is {:?}",
        decoded.urn()
    );
    ensure!(
        decoded.message_id() == envelope.message_id(),
        "the record's meta.id is {:?}, the message's {:?}",
        decoded.message_id(),
        envelope.message_id()
    );
    ensure!(
        decoded.trace_id().as_deref() == Some("tk-trace-dlq"),
        "the record's trace_id is {:?}",
        decoded.trace_id()
    );
    let data = decoded
        .data()
        .map(|d| d.as_str().to_owned())
        .unwrap_or_default();
    ensure!(
        data == DATA,
        "the record's `data` changed:\n sent {DATA}\n  got {data}"
    );
    ensure!(
        decoded.attempts() == 2,
        "the record's attempts is {}, expected 2",
        decoded.attempts()
    );
    let Some(block_raw) = decoded.dead_letter() else {
        return Err(Stop::Fail(format!(
            "the record has no dead_letter block: {}",
            preview(&record)
        )));
    };
    let block: Value = block_raw
        .to_value()
        .map_err(|e| format!("dead_letter is not JSON: {e}"))?;
    for (key, expected) in [
        ("reason", Value::from("failed")),
        ("error", Value::from("testkit: fails on purpose")),
        ("exception", Value::from("TestkitError")),
        ("original_queue", Value::from(q.as_str())),
        ("attempts", Value::from(2)),
        ("lang", Value::from("rust")),
    ] {
        ensure!(
            block[key] == expected,
            "dead_letter.{key} is {}, expected {expected}",
            block[key]
        );
    }
    let failed_at = check_failed_at(&block, since)?;
    // The block byte for byte: all seven keys, in the contract's order.
    let expected = DeadLetter::new(Reason::Failed, q.clone(), 2, failed_at)
        .with_error("testkit: fails on purpose", "TestkitError")
        .to_raw();
    ensure!(
        block_raw.as_str() == expected.as_str(),
        "the dead_letter block is\n {}\nexpected\n {}",
        block_raw.as_str(),
        expected.as_str()
    );
    close(&[&t]).await;
    Ok(())
}

/// A poison body's record, as read from the dead-letter queue.
struct Poisoned {
    record: Vec<u8>,
    parsed: Value,
    /// The record the contract (ADR-0035) builds for the body, with the record's `failed_at`.
    expected: Vec<u8>,
}

impl Poisoned {
    /// The whole record, byte for byte (checked last: the specific checks say more).
    fn exact(&self) -> Check {
        ensure!(
            self.record == self.expected,
            "the poison record is\n {}\nexpected\n {}",
            preview(&self.record),
            preview(&self.expected)
        );
        Ok(())
    }
}

/// Dead-letters `body` (published raw) and returns its record, its block checked.
async fn dead_letter_poison(ctx: &Ctx, body: &[u8]) -> Result<Poisoned, Stop> {
    let t = ctx.connect().await?;
    let q = ctx.queue();
    let since = babelqueue_envelope::now_millis();
    let (builder, outcomes) = outcome_app(ctx, &t, &q);
    let app = builder
        .dead_letter(true)
        .handle(URN, |_c: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .why("building the app")?;
    let dlq = ctx.dead_letter_queue(&app, &q);
    t.publish(&q, body).await.why("publish")?;
    app.consume(ctx.consume(1)).await.why("App::consume")?;
    let seen = outcomes.all();
    ensure!(
        seen == [Outcome::DeadLettered],
        "a poison body should be dead-lettered at once, got the outcomes {seen:?}"
    );
    let record = read_record(ctx, t.as_ref(), &dlq).await?;
    let parsed: Value = serde_json::from_slice(&record)
        .map_err(|e| format!("the poison record is not JSON ({e}): {}", preview(&record)))?;
    let block = &parsed["dead_letter"];
    for (key, expected) in [
        ("reason", Value::from("poison")),
        ("exception", Value::from("BabelQueueError")),
        ("original_queue", Value::from(q.as_str())),
        ("attempts", Value::from(0)),
        ("lang", Value::from("rust")),
    ] {
        ensure!(
            block[key] == expected,
            "dead_letter.{key} is {}, expected {expected} (record {})",
            block[key],
            preview(&record)
        );
    }
    let error = block["error"].as_str().unwrap_or_default();
    ensure!(
        error.starts_with("Undecodable BabelQueue body: "),
        "dead_letter.error is {:?}",
        block["error"]
    );
    let failed_at = check_failed_at(block, since)?;
    let cause = poison_cause(body, true);
    let expected = poison_record(
        body,
        &DeadLetter::poison(cause.as_ref(), q.clone(), 0, failed_at),
    );
    close(&[&t]).await;
    Ok(Poisoned {
        record,
        parsed,
        expected,
    })
}

pub(super) async fn poison_invalid_utf8(ctx: Arc<Ctx>) -> Check {
    let body: &[u8] = b"\xff\xfe\x00 not UTF-8 \x80 {\"job\":\"urn:babel:testkit:contract\"}";
    let poisoned = dead_letter_poison(&ctx, body).await?;
    let (record, parsed) = (&poisoned.record, &poisoned.parsed);
    ensure!(
        parsed["raw_encoding"] == "base64",
        "a non-UTF-8 body's record needs raw_encoding base64: {}",
        preview(record)
    );
    let raw = parsed["raw"].as_str().unwrap_or_default();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(raw)
        .map_err(|e| format!("`raw` is not base64 ({e}): {raw:?}"))?;
    ensure!(
        decoded == body,
        "`raw` does not hold the original bytes: decoded {decoded:?}"
    );
    poisoned.exact()
}

pub(super) async fn poison_not_json(ctx: Arc<Ctx>) -> Check {
    let text = "not JSON at all \u{2028} İstanbul ☕ \"quoted\" \\ backslash";
    let poisoned = dead_letter_poison(&ctx, text.as_bytes()).await?;
    let (record, parsed) = (&poisoned.record, &poisoned.parsed);
    ensure!(
        parsed.get("raw_encoding").is_none(),
        "a UTF-8 body is wrapped as text, not base64: {}",
        preview(record)
    );
    ensure!(
        parsed["raw"] == text,
        "`raw` does not hold the original text: {}",
        parsed["raw"]
    );
    poisoned.exact()
}

pub(super) async fn poison_no_identity(ctx: Arc<Ctx>) -> Check {
    let body = concat!(
        r#"{"data":{"n":18446744073709551616,"s":"\u2028 and "#,
        "\u{2028}",
        r#""},"attempts":0,"extra":[1,2]}"#
    );
    let poisoned = dead_letter_poison(&ctx, body.as_bytes()).await?;
    let record = &poisoned.record;
    let kept = &body[..body.len() - 1];
    ensure!(
        record.starts_with(kept.as_bytes())
            && record[kept.len()..].starts_with(b",\"dead_letter\":{")
            && record.ends_with(b"}}"),
        "the block is not spliced into the original bytes:\n original {body}\n record   {}",
        preview(record)
    );
    poisoned.exact()
}

pub(super) async fn native_dead_letter(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    if t.capabilities().native_settler().is_none() {
        close(&[&t]).await;
        return Err(Stop::NotApplicable(
            "the transport offers no NativeSettler".to_owned(),
        ));
    }
    let q = ctx.queue();
    let (builder, outcomes) = outcome_app(&ctx, &t, &q);
    let app = builder
        .dead_letter(false)
        .handle(URN, |_c: Context| async {
            Err::<(), _>(HandlerError::reject("testkit: rejected on purpose"))
        })
        .build()
        .why("building the app")?;
    t.publish(&q, b"not JSON: poison").await.why("publish")?;
    publish_data(&app, &q, None).await?;
    app.consume(ctx.consume(2)).await.why("App::consume")?;
    let seen = outcomes.all();
    ensure!(
        seen == [Outcome::Native, Outcome::Native],
        "with dead-lettering off, a poison body and a rejected message are left to the broker \
         (outcome Native); got {seen:?}"
    );
    close(&[&t]).await;
    Ok(())
}
