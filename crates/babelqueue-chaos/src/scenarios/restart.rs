//! `broker-restart`: a graceful restart and a hard kill of the broker under a running worker.

use super::*;

/// The directory of our own persistent Redis, per layout (the lanes run at once).
fn own_redis_dir(ctx: &Ctx, broker: Broker) -> PathBuf {
    ctx.env
        .cache
        .join("chaos")
        .join(format!("own-{}-{}", broker.name(), ctx.run))
}

/// `broker-restart`: a graceful restart and a hard kill of the broker while a worker consumes and
/// messages are published; the worker must recover by itself.
pub(super) async fn broker_restart(
    ctx: &Ctx,
    broker: Broker,
    queue: &str,
    dir: &Path,
    row: &mut Row,
) -> Result<(), String> {
    let env = &ctx.env;
    match broker {
        Broker::Sqs => {
            row.not_applicable = Some(
                "moto, the SQS of scripts/brokers.sh, keeps its queues in memory: a restart \
                 empties them, so there is nothing durable to test"
                    .into(),
            );
            return Ok(());
        }
        Broker::Pulsar if ctx.sizes.short => {
            row.not_applicable = Some(
                "left out of --short: a Pulsar standalone restart takes about a minute, and the \
                 test instance (scripts/brokers.d/60-pulsar.sh) starts with --wipe-data; the full \
                 mode runs it as a recovery check"
                    .into(),
            );
            return Ok(());
        }
        _ => {}
    }
    let own = if broker.is_redis() {
        Some(OwnRedis::start_new(env, &own_redis_dir(ctx, broker)).await?)
    } else {
        None
    };
    if let Some(own) = &own {
        row.note(format!(
            "redis-server of its own on 127.0.0.1:{} (appendonly yes, appendfsync always, in {})",
            own.port,
            own.dir.display()
        ));
    }
    let result = restart_inner(ctx, broker, queue, dir, row, own.as_ref()).await;
    if let Some(own) = &own {
        own.stop(env).await;
    } else if let Err(e) = env
        .brokers_sh(&["up", broker.service()], Duration::from_secs(300))
        .await
    {
        row.fail(format!("{} is not up again: {e}", broker.service()));
    }
    result
}

async fn restart_inner(
    ctx: &Ctx,
    broker: Broker,
    queue: &str,
    dir: &Path,
    row: &mut Row,
    own: Option<&OwnRedis>,
) -> Result<(), String> {
    let env = &ctx.env;
    let url = worker_url(
        env,
        broker,
        Scenario::BrokerRestart,
        queue,
        own.map(OwnRedis::url),
    )?;
    prepare(env, broker, queue, true).await?;
    let n = ctx.sizes.restart_messages;
    row.messages = n;
    let msgs = messages(&ctx.run, queue, 0..n, URN_OK);
    let transport = brokers::connect(env, broker, &url).await?;
    // Handlers take a while (0..=100 ms before and after the log line), so a backlog is still
    // being worked through when the broker goes down.
    let mut worker = spec(&url, queue, 8);
    worker.work_ms = 200;
    let mut fleet = Fleet::new(&ctx.exe, &env.vars, dir, "worker", worker);
    fleet.start()?;
    // Three batches: one before each restart (still being consumed when the broker goes down)
    // and one after the last, which the worker must handle once it has recovered on its own.
    let batch = usize::try_from(n.div_ceil(3)).unwrap_or(usize::MAX).max(1);
    let spread = ctx.sizes.restart_publish / 3;
    let start = Instant::now();
    let mut published = Published::default();
    // Messages confirmed before a wiping restart (Pulsar's test instance) may be wiped with it.
    let mut wiped_before: Option<Instant> = None;
    let mut back: Vec<(&str, u64)> = Vec::new();
    let mut batches = msgs.chunks(batch).map(<[Msg]>::to_vec);
    for restart in [Some(false), Some(true), None] {
        if let Some(chunk) = batches.next() {
            let pace = spread / u32::try_from(chunk.len()).unwrap_or(u32::MAX).max(1);
            let publisher = tokio::spawn(publish(
                transport.clone(),
                queue.to_owned(),
                chunk,
                pace,
                Duration::from_secs(120),
                IN_FLIGHT,
            ));
            while !publisher.is_finished() {
                fleet.keep_running()?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            published.merge(publisher.await.map_err(|e| e.to_string())?);
        }
        let Some(hard) = restart else {
            break;
        };
        let began = start.elapsed();
        let env2 = env.clone();
        let own2 = own.cloned();
        let op = tokio::spawn(async move {
            match own2 {
                Some(own) => own.restart(&env2, hard).await,
                None => brokers::restart_service(&env2, broker, hard).await,
            }
        });
        while !op.is_finished() {
            fleet.keep_running()?;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let kind = if hard {
            "hard kill"
        } else {
            "graceful restart"
        };
        back.push((kind, now_ms()));
        match op.await.map_err(|e| e.to_string())? {
            Ok(how) => {
                row.kills += 1;
                row.note(format!("{kind} at {:.1}s: {how}", began.as_secs_f64()));
            }
            Err(e) => row.fail(format!("{kind} failed: {e}")),
        }
        if broker == Broker::Pulsar {
            wiped_before = Some(Instant::now());
        }
    }
    let must: BTreeSet<String> = published.confirmed.keys().cloned().collect();
    row.messages = must.len() as u64;
    let mut tally = Tally::default();
    let exempt: BTreeSet<String> = match wiped_before {
        Some(at) => published
            .confirmed
            .iter()
            .filter(|(_, confirmed)| **confirmed <= at)
            .map(|(id, _)| id.clone())
            .collect(),
        None => BTreeSet::new(),
    };
    let must: BTreeSet<String> = must.difference(&exempt).cloned().collect();
    // A Kafka consumer has been seen to take 80 s to resume after a hard kill of the broker: a
    // longer drain tells a slow recovery (a note) from none at all (a wedged worker).
    let limit = ctx.sizes.drain_limit
        + if broker == Broker::Kafka {
            Duration::from_secs(120)
        } else {
            Duration::from_secs(30)
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
    report_drain(row, "drain after the restarts", &drained, missing);
    if let Some(first) = drained.first_call.filter(|d| *d > Duration::from_secs(30)) {
        row.note(format!(
            "slow recovery: the worker's first handler call of the drain came {:.0}s after it \
             started",
            first.as_secs_f64()
        ));
    }
    for (kind, at) in &back {
        let after = tally.all.iter().filter(|c| c.at_ms >= *at).count();
        row.note(format!(
            "handler calls after the broker was back from the {kind}: {after} (the last batch \
             is published after the hard kill)"
        ));
    }
    report_fleet(row, &fleet);
    let probe = probe(env, broker, &url, queue).await;
    if !exempt.is_empty() {
        let wiped: Vec<String> = exempt
            .iter()
            .filter(|id| !tally.handled(id))
            .cloned()
            .collect();
        row.note(format!(
            "the Pulsar test instance wipes its data on start (--wipe-data): {} messages \
             confirmed before the last restart were never handled and are not counted as lost; \
             every message published after it must be handled",
            wiped.len()
        ));
    }
    settle_counts(row, &published, &tally, &probe, &exempt);
    if missing > 0 && drained.quiet_for > Duration::from_secs(20) && row.stranded > 0 {
        row.fail(format!(
            "worker wedged: it made no handler call in the last {:.0}s of the drain while {} \
             messages were still on the broker",
            drained.quiet_for.as_secs_f64(),
            row.stranded
        ));
    }
    Ok(())
}
