//! Batches: `Transport::receive` of several deliveries, and the batch acknowledgement and batch
//! publish capabilities where a transport offers them.

use std::sync::Arc;

use babelqueue_core::Delivery;
use tokio::time::Instant;

use super::{Check, Ctx, Stop, Why, close, ensure, preview};

/// Messages the test moves.
const COUNT: usize = 7;
/// The most it asks one receive for.
const MAX: usize = 3;

pub(super) async fn batch_receive_and_settle(ctx: Arc<Ctx>) -> Check {
    let t = ctx.connect().await?;
    let q = ctx.queue();
    let bodies: Vec<Vec<u8>> = (0..COUNT)
        .map(|i| format!(r#"{{"batch":{i}}}"#).into_bytes())
        .collect();
    let capabilities = t.capabilities();
    match capabilities.batch_publisher() {
        Some(batch) => {
            let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
            batch
                .publish_batch(&q, &slices)
                .await
                .why("BatchPublisher::publish_batch")?;
        }
        None => {
            for body in &bodies {
                t.publish(&q, body).await.why("publish")?;
            }
        }
    }

    // Receive them all, never more than asked for at once.
    let mut received: Vec<Delivery> = Vec::new();
    let deadline = Instant::now() + ctx.features.receive_timeout;
    while received.len() < COUNT && Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        let got = match t
            .receive(&q, MAX, left.min(ctx.features.poll_timeout))
            .await
        {
            Ok(got) => got,
            Err(e) if e.is_transient() => continue,
            Err(e) => return Err(Stop::Fail(format!("receive({q:?}, {MAX}) failed: {e}"))),
        };
        ensure!(
            got.len() <= MAX,
            "receive({q:?}, {MAX}) returned {} deliveries",
            got.len()
        );
        received.extend(got);
    }
    ensure!(
        received.len() == COUNT,
        "{COUNT} messages published, {} received within {:?}",
        received.len(),
        ctx.features.receive_timeout
    );
    let mut got: Vec<&[u8]> = received.iter().map(Delivery::body).collect();
    if ctx.features.ordered {
        let expected: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
        ensure!(
            got == expected,
            "published in order, received as {:?}",
            got.iter().map(|b| preview(b)).collect::<Vec<_>>()
        );
    }
    got.sort_unstable();
    let mut expected: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    expected.sort_unstable();
    ensure!(
        got == expected,
        "received bodies differ from those published: {:?}",
        got.iter().map(|b| preview(b)).collect::<Vec<_>>()
    );

    // Settle them all at once where the transport can, then nothing may come back.
    match capabilities.batch_acker() {
        Some(batch) => batch
            .ack_batch(&received)
            .await
            .why("BatchAcker::ack_batch")?,
        None => {
            for delivery in &received {
                t.ack(delivery).await.why("ack")?;
            }
        }
    }
    drop(received);
    let window = ctx
        .features
        .redelivery_after
        .map_or(ctx.features.quiet_period, |after| {
            after + ctx.features.delay_tolerance
        });
    ctx.expect_nothing(t.as_ref(), &q, window, "every delivery was acknowledged")
        .await?;
    close(&[&t]).await;
    Ok(())
}
