//! Messages that come back: retries, unsettled deliveries, back-off, the broker's count, and
//! the graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::{
    AppBuilder, Context, Delivery, Envelope, HandlerError, Outcome, RawJson, Redelivery, Transport,
};
use tokio::time::Instant;

use super::{
    Calls, Check, Ctx, DATA, Outcomes, Spawned, Stop, URN, Why, close, ensure, outcome_app,
    preview, publish_data,
};
use crate::EARLY_SLACK;

/// Fails the test as not applicable when the transport cannot redeliver at all.
fn can_redeliver(transport: &dyn Transport) -> Check {
    if matches!(
        transport.capabilities().redelivery_mode(),
        Redelivery::Impossible
    ) {
        return Err(Stop::NotApplicable(format!(
            "the {} transport reports Redelivery::Impossible with this configuration",
            transport.name()
        )));
    }
    Ok(())
}

/// An app whose handler records every call and fails the first `failures` of them.
fn failing_app(
    ctx: &Ctx,
    transport: &Arc<dyn Transport>,
    queue: &str,
    failures: usize,
) -> (AppBuilder, Calls, Outcomes) {
    let calls = Calls::default();
    let recorder = calls.clone();
    let (builder, outcomes) = outcome_app(ctx, transport, queue);
    let builder = builder.handle(URN, move |c: Context| {
        let recorder = recorder.clone();
        async move {
            if recorder.record(&c) <= failures {
                Err(HandlerError::new("testkit: fails on purpose").with_exception("TestkitError"))
            } else {
                Ok(())
            }
        }
    });
    (builder, calls, outcomes)
}

pub(super) async fn release_counts_attempts(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    can_redeliver(t.as_ref())?;
    let q = ctx.queue();
    let (builder, calls, outcomes) = failing_app(&ctx, &t, &q, 1);
    let app = builder
        .max_attempts(2)
        .dead_letter(true)
        .build()
        .why("building the app")?;
    let envelope = publish_data(&app, &q, None).await?;
    app.consume(ctx.consume(2)).await.why("App::consume")?;
    let calls = calls.all();
    let attempts: Vec<i64> = calls.iter().map(|c| c.attempts).collect();
    ensure!(
        attempts == [0, 1],
        "a handler failing once under max_attempts 2 should see attempts [0, 1], saw {attempts:?} (outcomes {:?})",
        outcomes.all()
    );
    let id = envelope.message_id().unwrap_or_default();
    ensure!(
        calls.iter().all(|c| c.id == id),
        "the retry is not the same message: ids {:?}, published {id:?}",
        calls.iter().map(|c| &c.id).collect::<Vec<_>>()
    );
    ensure!(
        calls[1].data == DATA,
        "`data` changed on the retry:\n sent {DATA}\n  got {}",
        calls[1].data
    );
    let seen = outcomes.all();
    ensure!(
        seen == [Outcome::Retried, Outcome::Acked],
        "expected the outcomes [Retried, Acked], got {seen:?}"
    );
    close(&[&t]).await;
    Ok(())
}

pub(super) async fn unsettled_redelivered(ctx: Arc<Ctx>) -> Check {
    let after = ctx
        .features
        .redelivery_after
        .ok_or_else(|| Stop::NotApplicable("no redelivery_after".into()))?;
    let q = ctx.queue();
    let first = ctx.connect().await?;
    let body = Envelope::builder(URN)
        .queue(q.clone())
        .data_raw(RawJson::parse(DATA).why("test data")?)
        .build()
        .why("building the envelope")?
        .encode()
        .why("encoding it")?
        .into_bytes();
    first.publish(&q, &body).await.why("publish")?;
    let popped = ctx
        .receive(first.as_ref(), &q, "the first delivery")
        .await?;
    ensure!(
        popped.body() == body.as_slice(),
        "the first delivery changed the body: {}",
        preview(popped.body())
    );
    // The worker dies: nothing is settled, nothing is closed.
    drop(popped);
    drop(first);
    let died = Instant::now();

    let second = ctx.connect().await?;
    let allowed = after + ctx.features.delay_tolerance;
    let patience = allowed.saturating_sub(died.elapsed());
    let again = ctx.pop_within(second.as_ref(), &q, patience).await?;
    let Some(again) = again else {
        return Err(Stop::Fail(format!(
            "a delivery left unsettled by a dropped transport was not delivered again within \
             redelivery_after {after:?} + delay_tolerance {:?}",
            ctx.features.delay_tolerance
        )));
    };
    same_message(&again, &body, "the redelivered message")?;
    second.ack(&again).await.why("ack of the redelivery")?;
    close(&[&second]).await;
    Ok(())
}

/// `delivery` is the message `body` was (same `meta.id`, same `data`), attempts aside.
fn same_message(delivery: &Delivery, body: &[u8], what: &str) -> Check {
    let sent = Envelope::decode_lenient(body).envelope;
    let got = Envelope::decode_lenient(delivery.body()).envelope;
    ensure!(
        got.message_id() == sent.message_id() && got.data() == sent.data(),
        "{what} is not the message sent:\n sent {}\n  got {}",
        preview(body),
        preview(delivery.body())
    );
    Ok(())
}

pub(super) async fn retry_backoff(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    can_redeliver(t.as_ref())?;
    let q = ctx.queue();
    let probe = ctx.features.delay_probe;
    let (builder, calls, outcomes) = failing_app(&ctx, &t, &q, 1);
    let app = builder
        .max_attempts(2)
        .retry_backoff(probe)
        .build()
        .why("building the app")?;
    publish_data(&app, &q, None).await?;
    let consume = babelqueue_core::Consume::new()
        .max_messages(2)
        .idle_timeout(ctx.features.receive_timeout + probe)
        .handle_signals(false);
    app.consume(consume).await.why("App::consume")?;
    let calls = calls.all();
    ensure!(
        calls.len() == 2,
        "expected two handler calls (a failure, then the retry), got {} (outcomes {:?})",
        calls.len(),
        outcomes.all()
    );
    let gap = calls[1].at.duration_since(calls[0].at);
    let earliest = ctx.features.earliest(probe);
    let latest = probe + ctx.features.delay_tolerance;
    ensure!(
        gap >= earliest,
        "the retry came {gap:?} after the failure, before the back-off of {probe:?} \
         (allowed from {earliest:?}: delay_granularity {:?})",
        ctx.features.delay_granularity
    );
    ensure!(
        gap <= latest,
        "the retry came {gap:?} after the failure; the back-off is {probe:?} (+ delay_tolerance {:?})",
        ctx.features.delay_tolerance
    );
    close(&[&t]).await;
    Ok(())
}

pub(super) async fn native_redelivery_count(ctx: Arc<Ctx>) -> Check {
    let q = ctx.queue();
    let first = ctx.connect().await?;
    let body = Envelope::builder(URN)
        .queue(q.clone())
        .build()
        .why("building the envelope")?
        .encode()
        .why("encoding it")?
        .into_bytes();
    first.publish(&q, &body).await.why("publish")?;
    let delivery = ctx
        .receive(first.as_ref(), &q, "the first delivery")
        .await?;
    let count = delivery.facts().count;
    ensure!(
        count.is_none_or(|c| c.native() == 0),
        "a first delivery reports {count:?} earlier deliveries"
    );
    let (again, holder) = if let Some(rewinder) = first.capabilities().rewinder() {
        rewinder.rewind(&delivery).await.why("rewind")?;
        drop(delivery);
        let again = ctx
            .receive(first.as_ref(), &q, "the rewound delivery")
            .await?;
        (again, first)
    } else if let Some(after) = ctx.features.redelivery_after {
        drop(delivery);
        drop(first);
        let second = ctx.connect().await?;
        let patience = after + ctx.features.delay_tolerance;
        let again = ctx
            .pop_within(second.as_ref(), &q, patience)
            .await?
            .ok_or_else(|| {
                format!("the unsettled delivery did not come back within {patience:?}")
            })?;
        (again, second)
    } else {
        return Err(Stop::Fail(
            "Features::native_redelivery_count is claimed, but the transport offers no Rewinder \
             and Features::redelivery_after is not set: the suite cannot make a message come back"
                .into(),
        ));
    };
    same_message(&again, &body, "the second delivery")?;
    let count = again.facts().count;
    ensure!(
        count.is_some_and(|c| c.native() >= 1),
        "a second delivery of the same message reports {count:?} earlier deliveries (expected at least 1)"
    );
    holder.ack(&again).await.why("ack")?;
    close(&[&holder]).await;
    Ok(())
}

#[cfg(not(unix))]
pub(super) async fn graceful_shutdown(_ctx: Arc<Ctx>) -> Check {
    Err(Stop::NotApplicable(
        "needs Unix signals (the runtime starts its shutdown deadline on a signal)".into(),
    ))
}

#[cfg(unix)]
pub(super) async fn graceful_shutdown(ctx: Arc<Ctx>) -> Check {
    use tokio::signal::unix::{SignalKind, signal};

    // Installs a SIGTERM handler for the process before anything is sent, so the signal below
    // can never kill it (Tokio never uninstalls a handler).
    let _guard = signal(SignalKind::terminate()).why("listening for SIGTERM")?;
    let t = ctx.connect().await?;
    let q = ctx.queue();
    let started = Arc::new(tokio::sync::Notify::new());
    let notify = started.clone();
    let shutdown_timeout = Duration::from_millis(300);
    let app = ctx
        .app(&t, &q)
        .shutdown_timeout(shutdown_timeout)
        .handle(URN, move |_c: Context| {
            let notify = notify.clone();
            async move {
                notify.notify_one();
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .why("building the app")?;
    let envelope = publish_data(&app, &q, None).await?;
    let body = envelope.encode().why("encoding the envelope")?.into_bytes();
    let stop = app.stop_handle();
    let mut run = Spawned(tokio::spawn({
        let app = app.clone();
        async move { app.consume(babelqueue_core::Consume::new()).await }
    }));
    if tokio::time::timeout(ctx.features.receive_timeout, started.notified())
        .await
        .is_err()
    {
        stop.stop();
        return Err(Stop::Fail(format!(
            "the handler never started within {:?}",
            ctx.features.receive_timeout
        )));
    }
    // The runtime's signal listener was spawned before its first pop; let it register.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let signalled = Instant::now();
    let kill = tokio::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .await;
    if !kill.as_ref().is_ok_and(|s| s.success()) {
        stop.stop();
        return Err(Stop::Fail(format!(
            "`kill -TERM <this process>` failed: {kill:?}"
        )));
    }
    let bound = shutdown_timeout + ctx.features.delay_tolerance + Duration::from_secs(10);
    let summary = match tokio::time::timeout(bound, &mut run.0).await {
        Ok(Ok(Ok(summary))) => summary,
        Ok(Ok(Err(e))) => return Err(Stop::Fail(format!("App::consume failed: {e}"))),
        Ok(Err(e)) => {
            return Err(Stop::Fail(format!(
                "the consume task ended abnormally: {e}"
            )));
        }
        Err(_) => {
            return Err(Stop::Fail(format!(
                "App::consume had not returned {bound:?} after SIGTERM (shutdown_timeout {shutdown_timeout:?})"
            )));
        }
    };
    let took = signalled.elapsed();
    ensure!(
        summary.signalled && summary.released_at_shutdown == 1 && summary.processed == 0,
        "expected a signalled run that released its one in-flight message, got {summary:?}"
    );
    ensure!(
        took + EARLY_SLACK >= shutdown_timeout,
        "the handler was interrupted {took:?} after SIGTERM, before shutdown_timeout {shutdown_timeout:?}"
    );
    let latest = shutdown_timeout + ctx.features.delay_tolerance + ctx.features.poll_timeout;
    ensure!(
        took <= latest,
        "consume returned {took:?} after SIGTERM; shutdown_timeout is {shutdown_timeout:?} (allowed {latest:?})"
    );
    // The runtime closed the transport after the signal: a new worker takes over.
    drop(app);
    drop(t);
    let again = ctx.connect().await?;
    let patience = ctx.features.receive_timeout + ctx.features.redelivery_after.unwrap_or_default();
    let Some(back) = ctx.pop_within(again.as_ref(), &q, patience).await? else {
        return Err(Stop::Fail(format!(
            "the message released at shutdown did not come back within {patience:?}"
        )));
    };
    ensure!(
        back.body() == body.as_slice(),
        "the message released at shutdown changed (it must come back unchanged, attempts not counted):\n sent {}\n  got {}",
        preview(&body),
        preview(back.body())
    );
    again.ack(&back).await.why("ack")?;
    close(&[&again]).await;
    Ok(())
}
