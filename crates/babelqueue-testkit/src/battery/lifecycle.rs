//! The base contract: publish, pop, acknowledge, order, close.

use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::{Envelope, Headers, RawJson};
use tokio::time::Instant;

use super::{Calls, Check, Ctx, DATA, Stop, URN, Why, close, ensure, preview};

/// A hand-written envelope whose bytes no encoder would produce (key order, spacing, escapes).
fn raw_body() -> Vec<u8> {
    format!(
        "{{\"job\":\"{URN}\", \"trace_id\":\"tk-round-trip\",\"data\":{DATA},\"meta\":{{\"id\":\"tk-raw-1\",\"lang\":\"rust\",\"schema_version\":1}},\"attempts\":0,\"x-unknown\":[\"\\u2028\",\"\u{2028}\"]}}"
    )
    .into_bytes()
}

pub(super) async fn round_trip(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    let q = ctx.queue();

    // The transport alone: the body comes back byte for byte.
    let body = raw_body();
    t.publish(&q, &body).await.why("publish")?;
    let got = ctx.receive(t.as_ref(), &q, "the raw body").await?;
    ensure!(
        got.body() == body.as_slice(),
        "the body changed on the way:\n sent {}\n  got {}",
        preview(&body),
        preview(got.body())
    );
    ensure!(
        got.queue() == q,
        "the delivery names queue {:?}, not {q:?}",
        got.queue()
    );
    t.ack(&got).await.why("ack")?;

    // Through the runtime: what the handler sees.
    let calls = Calls::default();
    let app = ctx
        .app(&t, &q)
        .handle(URN, calls.succeeding())
        .build()
        .why("building the app")?;
    let data = RawJson::parse(DATA).why("parsing the test data")?;
    let envelope = app
        .envelope(URN)
        .data_raw(data)
        .trace_id("tk-trace")
        .build()
        .why("building the envelope")?;
    let id = envelope.message_id().unwrap_or_default().into_owned();
    app.publish_envelope(&q, &envelope, &Headers::new())
        .await
        .why("App::publish_envelope")?;
    let summary = app.consume(ctx.consume(1)).await.why("App::consume")?;
    let seen = calls.all();
    ensure!(
        summary.processed == 1 && seen.len() == 1,
        "expected one handled message, got {} handler calls ({summary:?})",
        seen.len()
    );
    let call = &seen[0];
    ensure!(
        call.data == DATA,
        "`data` changed on the way:\n sent {DATA}\n  got {}",
        call.data
    );
    ensure!(call.id == id, "meta.id {:?} came back as {:?}", id, call.id);
    ensure!(
        call.attempts == 0,
        "a first delivery has attempts {}",
        call.attempts
    );
    close(&[&t]).await;
    Ok(())
}

pub(super) async fn pop_timeout(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    let q = ctx.queue();
    // Make the queue exist (some brokers create queues on first use), then empty it.
    t.publish(&q, b"{}").await.why("publish")?;
    let first = ctx
        .receive(t.as_ref(), &q, "the message that creates the queue")
        .await?;
    t.ack(&first).await.why("ack")?;
    let timeout = Duration::from_millis(300);
    let allowed = timeout + ctx.features.delay_tolerance;
    let started = Instant::now();
    let popped = tokio::time::timeout(allowed + Duration::from_secs(5), t.pop(&q, timeout)).await;
    let took = started.elapsed();
    match popped {
        Err(_) => {
            return Err(Stop::Fail(format!(
                "pop({q:?}, {timeout:?}) of an empty queue had not returned after {took:?}"
            )));
        }
        Ok(Err(e)) => return Err(Stop::Fail(format!("pop of an empty queue failed: {e}"))),
        Ok(Ok(Some(d))) => {
            return Err(Stop::Fail(format!(
                "an empty (acknowledged) queue delivered {}",
                preview(d.body())
            )));
        }
        Ok(Ok(None)) => {}
    }
    ensure!(
        took <= allowed,
        "pop({q:?}, {timeout:?}) of an empty queue took {took:?} (allowed {allowed:?})"
    );
    close(&[&t]).await;
    Ok(())
}

pub(super) async fn ordering(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    let q = ctx.queue();
    let calls = Calls::default();
    let app = ctx
        .app(&t, &q)
        .concurrency(1)
        .handle(URN, calls.succeeding())
        .build()
        .why("building the app")?;
    let sent: Vec<String> = (0..10).map(|n| format!("{{\"n\":{n}}}")).collect();
    for n in 0..10 {
        app.publish(URN, &serde_json::json!({ "n": n }))
            .await
            .why("App::publish")?;
    }
    app.consume(ctx.consume(10)).await.why("App::consume")?;
    let got: Vec<String> = calls.all().into_iter().map(|c| c.data).collect();
    ensure!(
        got == sent,
        "published in order {sent:?}\nhandled in order  {got:?}"
    );
    close(&[&t]).await;
    Ok(())
}

pub(super) async fn ack_removes(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    let q = ctx.queue();
    let calls = Calls::default();
    let app = ctx
        .app(&t, &q)
        .handle(URN, calls.succeeding())
        .build()
        .why("building the app")?;
    app.publish(URN, &serde_json::json!({ "n": 1 }))
        .await
        .why("App::publish")?;
    let summary = app.consume(ctx.consume(1)).await.why("App::consume")?;
    ensure!(
        summary.processed == 1 && calls.all().len() == 1,
        "expected one handled message, got {} handler calls ({summary:?})",
        calls.all().len()
    );
    drop(app);
    close(&[&t]).await;
    drop(t);

    // A new consumer, for as long as an unsettled delivery would take to come back.
    let window = ctx
        .features
        .redelivery_after
        .map_or(ctx.features.quiet_period, |after| {
            after + ctx.features.delay_tolerance
        });
    let again = ctx.connect().await?;
    ctx.expect_nothing(
        again.as_ref(),
        &q,
        window,
        "the message was handled and acknowledged",
    )
    .await?;
    close(&[&again]).await;
    Ok(())
}

pub(super) async fn close_and_reconnect(ctx: Arc<Ctx>) -> Check {
    let q = ctx.queue();
    let first = ctx.connect().await?;
    let before = Envelope::builder(URN)
        .queue(q.clone())
        .build()
        .why("building an envelope")?
        .encode()
        .why("encoding it")?
        .into_bytes();
    first.publish(&q, &before).await.why("publish")?;
    tokio::time::timeout(Duration::from_secs(10), first.close())
        .await
        .map_err(|_| "close() did not return within 10 s".to_owned())?
        .why("close()")?;
    drop(first);

    let second = ctx.connect().await?;
    let got = ctx
        .receive(second.as_ref(), &q, "the message published before close()")
        .await?;
    ensure!(
        got.body() == before.as_slice(),
        "the message published before close() came back as {}",
        preview(got.body())
    );
    second.ack(&got).await.why("ack on the new transport")?;
    second
        .publish(&q, b"{\"after\":true}")
        .await
        .why("publish on the new transport")?;
    let after = ctx
        .receive(
            second.as_ref(),
            &q,
            "the message published after reconnecting",
        )
        .await?;
    ensure!(
        after.body() == b"{\"after\":true}",
        "the new transport delivered {}",
        preview(after.body())
    );
    second.ack(&after).await.why("ack")?;
    tokio::time::timeout(Duration::from_secs(10), second.close())
        .await
        .map_err(|_| "the second close() did not return within 10 s".to_owned())?
        .why("the second close()")?;
    Ok(())
}
