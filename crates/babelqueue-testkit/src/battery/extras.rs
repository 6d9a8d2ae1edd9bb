//! Capabilities and what they promise: headers, delays, large bodies, competing consumers.
//!
//! Headers, delays and native dead-lettering are read from what the transport declares
//! ([`Sends`](babelqueue_core::Sends), its capabilities), not claimed twice: their tests run
//! whenever it declares them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::send::copies_delayed;
use babelqueue_core::{Consume, Context, HandlerError, Headers, RawJson, Redelivery};
use tokio::time::Instant;

use super::{Calls, Check, Ctx, Spawned, Stop, URN, Why, close, ensure, preview};
use crate::features::MIB;

pub(super) async fn capabilities_declared(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    let capabilities = t.capabilities();
    let f = &ctx.features;
    let mut problems = Vec::new();
    let redelivery = capabilities.redelivery_mode();
    if f.delayed_retry {
        match redelivery {
            Redelivery::Impossible => problems.push(
                "Features::delayed_retry is claimed, but the transport reports Redelivery::Impossible"
                    .to_owned(),
            ),
            Redelivery::Copy if !copies_delayed(capabilities.send_parts()) => problems.push(
                "Features::delayed_retry is claimed, but a retry is a copy (Redelivery::Copy) and \
                 the transport's sends do not delay it (no Sends::delay, or Sends::confirmed)"
                    .to_owned(),
            ),
            _ => {}
        }
    }
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    close(&[&t]).await;
    Ok(())
}

pub(super) async fn concurrent_consumers(ctx: Arc<Ctx>) -> Check {
    const MESSAGES: usize = 30;
    let q = ctx.queue();
    let one = ctx.connect().await?;
    let two = ctx.connect().await?;
    let handled: Arc<Mutex<Vec<(String, usize)>>> = Arc::default();
    let app = |transport, consumer: usize| {
        let handled = handled.clone();
        ctx.app(transport, &q)
            .concurrency(2)
            .handle(URN, move |c: Context| {
                let handled = handled.clone();
                async move {
                    let id = c.message_id().unwrap_or_default().into_owned();
                    handled
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((id, consumer));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    Ok::<(), HandlerError>(())
                }
            })
            .build()
    };
    let first = app(&one, 1).why("building the first app")?;
    let second = app(&two, 2).why("building the second app")?;
    let mut sent = Vec::with_capacity(MESSAGES);
    for n in 0..MESSAGES {
        sent.push(
            first
                .publish(URN, &serde_json::json!({ "n": n }))
                .await
                .why("App::publish")?,
        );
    }
    let loops = [first.clone(), second.clone()].map(|app| {
        Spawned(tokio::spawn(async move {
            app.consume(Consume::new().handle_signals(false)).await
        }))
    });
    // Until every message was handled (or nothing moved for receive_timeout), then a quiet
    // period for late duplicates.
    let mut last = (0, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let count = handled.lock().unwrap_or_else(|p| p.into_inner()).len();
        if count >= MESSAGES {
            break;
        }
        if count != last.0 {
            last = (count, Instant::now());
        } else if last.1.elapsed() >= ctx.features.receive_timeout {
            break;
        }
    }
    tokio::time::sleep(ctx.features.quiet_period).await;
    first.stop_handle().stop();
    second.stop_handle().stop();
    for mut run in loops {
        match tokio::time::timeout(ctx.features.receive_timeout, &mut run.0).await {
            Ok(Ok(Ok(_))) => {}
            Ok(Ok(Err(e))) => return Err(Stop::Fail(format!("a consume loop failed: {e}"))),
            Ok(Err(e)) => return Err(Stop::Fail(format!("a consume loop ended abnormally: {e}"))),
            Err(_) => {
                return Err(Stop::Fail(
                    "a consume loop did not stop within receive_timeout".to_owned(),
                ));
            }
        }
    }
    let handled = handled.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut times: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (id, consumer) in &handled {
        times.entry(id.as_str()).or_default().push(*consumer);
    }
    let twice: Vec<_> = times.iter().filter(|(_, c)| c.len() > 1).collect();
    ensure!(
        twice.is_empty(),
        "messages handled more than once while both consumers lived (id → consumers): {twice:?}"
    );
    let missing: Vec<&String> = sent
        .iter()
        .filter(|id| !times.contains_key(id.as_str()))
        .collect();
    ensure!(
        missing.is_empty(),
        "{} of {MESSAGES} messages were never handled: {missing:?}",
        missing.len()
    );
    close(&[&one, &two]).await;
    Ok(())
}

pub(super) async fn large_body(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    let q = ctx.queue();
    let calls = Calls::default();
    let app = ctx
        .app(&t, &q)
        .handle(URN, calls.succeeding())
        .build()
        .why("building the app")?;
    // Size the filler so the encoded envelope is exactly one MiB.
    let envelope_with = |filler: &str| {
        let data = RawJson::parse(&format!("{{\"blob\":\"{filler}\"}}")).why("test data")?;
        app.envelope(URN)
            .data_raw(data)
            .build()
            .why("building the envelope")
    };
    let overhead = envelope_with("")?.encode().why("encoding")?.len();
    let mut state = 0x2545_f491_u32;
    let filler: String = (0..MIB.saturating_sub(overhead))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect();
    let envelope = envelope_with(&filler)?;
    let body_len = envelope.encode().why("encoding")?.len();
    ensure!(
        body_len == MIB,
        "the test body is {body_len} bytes, not {MIB}"
    );
    let data = format!("{{\"blob\":\"{filler}\"}}");
    app.publish_envelope(&q, &envelope, &Headers::new())
        .await
        .why("publishing a 1 MiB body")?;
    app.consume(ctx.consume(1)).await.why("App::consume")?;
    let calls = calls.all();
    ensure!(
        calls.len() == 1,
        "the 1 MiB message was handled {} times",
        calls.len()
    );
    ensure!(
        calls[0].data == data,
        "the 1 MiB body changed on the way ({} bytes of data came, {} sent)",
        calls[0].data.len(),
        data.len()
    );
    close(&[&t]).await;
    Ok(())
}

pub(super) async fn headers(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    if !t.capabilities().send_parts().headers {
        close(&[&t]).await;
        return Err(Stop::NotApplicable(
            "the transport declares no headers (Sends::headers)".to_owned(),
        ));
    }
    let q = ctx.queue();
    let calls = Calls::default();
    let app = ctx
        .app(&t, &q)
        .handle(URN, calls.succeeding())
        .build()
        .why("building the app")?;
    let sent = Headers::from([
        (
            "traceparent".to_owned(),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
        ),
        ("tracestate".to_owned(), "bq=testkit,vendor=1".to_owned()),
        (
            "x-bq-testkit".to_owned(),
            "a value; with = signs".to_owned(),
        ),
    ]);
    let envelope = app.envelope(URN).build().why("building the envelope")?;
    app.publish_envelope(&q, &envelope, &sent)
        .await
        .why("App::publish_envelope with headers")?;
    app.consume(ctx.consume(1)).await.why("App::consume")?;
    let calls = calls.all();
    ensure!(
        calls.len() == 1,
        "the message was handled {} times",
        calls.len()
    );
    let got = &calls[0].headers;
    for (key, value) in &sent {
        ensure!(
            got.get(key) == Some(value),
            "header {key:?} = {value:?} did not reach the handler; it saw {got:?}"
        );
    }
    let leaked: Vec<&String> = calls[0]
        .envelope_keys
        .iter()
        .filter(|k| sent.contains_key(k.as_str()))
        .collect();
    ensure!(
        leaked.is_empty(),
        "headers entered the envelope: {leaked:?}"
    );
    close(&[&t]).await;
    Ok(())
}

pub(super) async fn delayed_publish(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    if !t.capabilities().send_parts().delay {
        close(&[&t]).await;
        return Err(Stop::NotApplicable(
            "the transport declares no delay (Sends::delay)".to_owned(),
        ));
    }
    let q = ctx.queue();
    let app = ctx.app(&t, &q).build().why("building the app")?;
    let probe = ctx.features.delay_probe;
    let envelope = app.envelope(URN).build().why("building the envelope")?;
    let published = Instant::now();
    app.publish_delayed(&q, &envelope, probe)
        .await
        .why("App::publish_delayed")?;
    let latest = probe + ctx.features.delay_tolerance;
    let got = ctx
        .pop_within(t.as_ref(), &q, latest.saturating_sub(published.elapsed()))
        .await?;
    let arrived = published.elapsed();
    let Some(got) = got else {
        return Err(Stop::Fail(format!(
            "a message delayed by {probe:?} had not arrived after {arrived:?} (delay_tolerance {:?})",
            ctx.features.delay_tolerance
        )));
    };
    t.ack(&got).await.why("ack")?;
    let earliest = ctx.features.earliest(probe);
    ensure!(
        arrived >= earliest,
        "a message delayed by {probe:?} arrived after {arrived:?} (allowed from {earliest:?}: \
         delay_granularity {:?}): {}",
        ctx.features.delay_granularity,
        preview(got.body())
    );
    close(&[&t]).await;
    Ok(())
}

pub(super) async fn take_in_place(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    let capabilities = t.capabilities();
    let Some(taker) = capabilities.taker() else {
        close(&[&t]).await;
        return Err(Stop::NotApplicable(
            "the transport offers no Taker".to_owned(),
        ));
    };
    let Some(browser) = capabilities.browser() else {
        return Err(Stop::Fail(
            "the transport offers a Taker without a Browser: the tools locate entries by browsing"
                .to_owned(),
        ));
    };
    let (q, to) = (ctx.queue(), ctx.queue());
    let bodies: [&[u8]; 6] = [b"take-0", b"twin", b"take-2", b"twin", b"take-4", b"take-5"];
    for body in bodies {
        t.publish(&q, body).await.why("publishing")?;
    }
    let read = |queue: String| async move {
        browser
            .browse_page(&queue, 0, 0)
            .await
            .why(format!("browsing {queue:?}"))
    };
    let before = read(q.clone()).await?;
    ensure!(
        before == bodies,
        "the queue does not read as published: {before:?}"
    );
    // The second "twin" (read at 3) is taken, not the first: the rest reads in its order.
    let taken = taker.take(&q, 3, b"twin").await.why("Taker::take")?;
    let after = read(q.clone()).await?;
    let rest: [&[u8]; 5] = [b"take-0", b"twin", b"take-2", b"take-4", b"take-5"];
    ensure!(
        taken == 1 && after == rest,
        "taking the entry read at 3 took {taken} and left {after:?}, expected {rest:?}"
    );
    let none = taker.take(&q, 0, b"absent").await.why("Taker::take")?;
    ensure!(none == 0, "taking a body no entry holds took {none}");
    // A move: the entry leaves, the new body is published to `to`, the rest stays in order.
    let moved = taker
        .take_to(&q, 2, b"take-2", &to, b"moved-2")
        .await
        .why("Taker::take_to")?;
    let after = read(q.clone()).await?;
    let rest: [&[u8]; 4] = [b"take-0", b"twin", b"take-4", b"take-5"];
    ensure!(
        moved == 1 && after == rest,
        "moving the entry read at 2 took {moved} and left {after:?}, expected {rest:?}"
    );
    let got = ctx
        .pop_within(t.as_ref(), &to, ctx.features.receive_timeout)
        .await?;
    let Some(got) = got else {
        return Err(Stop::Fail(
            "the moved message never arrived on its target queue".to_owned(),
        ));
    };
    t.ack(&got).await.why("ack")?;
    ensure!(
        got.body() == b"moved-2",
        "the target received {}, expected moved-2",
        preview(got.body())
    );
    let missing = taker
        .take_to(&q, 0, b"absent", &to, b"never")
        .await
        .why("Taker::take_to")?;
    let stray = ctx
        .pop_within(t.as_ref(), &to, ctx.features.quiet_period)
        .await?;
    ensure!(
        missing == 0 && stray.is_none(),
        "moving a body no entry holds took {missing} and published {:?}",
        stray.as_ref().map(|d| preview(d.body()))
    );
    for body in rest {
        taker.take(&q, 0, body).await.why("Taker::take")?;
    }
    close(&[&t]).await;
    Ok(())
}
