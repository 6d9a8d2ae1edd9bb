//! `sigkill`: a concurrency-8 worker SIGKILLed at random moments while messages are published.

use super::*;

/// `sigkill`: a concurrency-8 worker SIGKILLed at random moments while messages are published,
/// restarted each time; then a final worker drains; then what is left is counted.
pub(super) async fn sigkill(
    ctx: &Ctx,
    broker: Broker,
    queue: &str,
    dir: &Path,
    row: &mut Row,
) -> Result<(), String> {
    let env = &ctx.env;
    let url = worker_url(env, broker, Scenario::Sigkill, queue, None)?;
    prepare(env, broker, queue, true).await?;
    let mut n = ctx.sizes.sigkill_messages;
    if broker == Broker::Sqs && n > SQS_SIGKILL_MESSAGES {
        // moto serves one request at a time and slows down with a deep queue: with 2 000
        // messages and 20 kills its receives fell to 8 messages every few seconds here.
        n = SQS_SIGKILL_MESSAGES;
        row.note(format!(
            "{n} messages on SQS (moto serves one request at a time and slows down with a deep \
             queue)"
        ));
    }
    let kills = ctx.sizes.kills;
    row.messages = n;
    let msgs = messages(&ctx.run, queue, 0..n, URN_OK);
    let transport = brokers::connect(env, broker, &url).await?;
    let mut worker = spec(&url, queue, 8);
    worker.work_ms = 20;
    let mut fleet = Fleet::new(&ctx.exe, &env.vars, dir, "worker", worker);
    fleet.start()?;
    // Publish while the kills happen: over about 80 % of the expected kill phase.
    let expected_phase = Duration::from_millis(1100) * kills;
    let pace = expected_phase.mul_f64(0.8) / u32::try_from(n).unwrap_or(u32::MAX).max(1);
    let publisher = tokio::spawn(publish(
        transport,
        queue.to_owned(),
        msgs,
        pace,
        Duration::from_secs(240),
        IN_FLIGHT,
    ));
    for _ in 0..kills {
        let wait = Duration::from_millis(fastrand::u64(200..=2000));
        let until = Instant::now() + wait;
        while Instant::now() < until {
            fleet.keep_running()?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        fleet.kill();
        row.kills += 1;
        fleet.start()?;
    }
    let published = publisher.await.map_err(|e| e.to_string())?;
    let must: BTreeSet<String> = published.confirmed.keys().cloned().collect();
    row.messages = must.len() as u64;
    if !published.unconfirmed.is_empty() {
        // Nothing disturbs the broker in this scenario: every publish must succeed.
        row.fail(format!(
            "{} of {n} messages could not be published (the first: {:?})",
            published.unconfirmed.len(),
            published.unconfirmed.first()
        ));
    }
    let mut tally = Tally::default();
    let limit = if broker == Broker::Kafka {
        ctx.sizes.drain_limit + Duration::from_secs(30)
    } else {
        ctx.sizes.drain_limit
    };
    let drained = drain(
        &mut fleet,
        &mut tally,
        &published.known,
        &must,
        limit,
        broker.settle(),
    )
    .await?;
    let missing = tally.missing(must.iter()).len();
    report_drain(row, "final drain", &drained, missing);
    report_fleet(row, &fleet);
    row.note(format!("{} worker incarnations", fleet.started()));
    let probe = probe(env, broker, &url, queue).await;
    settle_counts(row, &published, &tally, &probe, &BTreeSet::new());
    if row.stranded > 0 && drained.quiet_for > limit / 2 {
        row.fail(format!(
            "worker wedged: {} messages were still on the broker and the drain worker made no \
             handler call in its last {:.0}s",
            row.stranded,
            drained.quiet_for.as_secs_f64()
        ));
    }
    Ok(())
}
