//! `malformed`: the malformed-body set, each body checked for its exact dead-letter record.

use super::dlq::dlq_leftover;
use super::*;

/// Whether a publish error says the body was too large.
fn names_a_size(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    ["size", "large", "long", "limit", "bytes", "exceed"]
        .iter()
        .any(|w| lower.contains(w))
}

/// `malformed`: the malformed-body set, published raw, with a failing handler, three attempts
/// and dead-lettering on; every body must reach the DLQ exactly once with its exact bytes.
pub(super) async fn malformed(
    ctx: &Ctx,
    broker: Broker,
    queue: &str,
    dir: &Path,
    row: &mut Row,
) -> Result<(), String> {
    let env = &ctx.env;
    let url = worker_url(env, broker, Scenario::Malformed, queue, None)?;
    prepare(env, broker, queue, true).await?;
    let set = bodies::malformed_set(queue, &ctx.run);
    let transport = brokers::connect(env, broker, &url).await?;
    let mut published = Vec::new();
    for (i, m) in set.iter().enumerate() {
        let t = Instant::now();
        match tokio::time::timeout(Duration::from_secs(120), transport.publish(queue, &m.body))
            .await
        {
            Ok(Ok(())) => published.push(i),
            Ok(Err(e)) => {
                let text = e.to_string();
                let text: String = text.chars().take(240).collect();
                row.note(format!(
                    "{} ({} bytes): refused at publish after {:.1}s: {text}",
                    m.name,
                    m.body.len(),
                    t.elapsed().as_secs_f64()
                ));
                if m.body.len() > 256 * 1024 && !names_a_size(&text) {
                    row.fail(format!(
                        "{} ({} bytes): refused at publish without saying the body is too \
                         large: {text}",
                        m.name,
                        m.body.len()
                    ));
                }
            }
            Err(_) => row.fail(format!(
                "{} ({} bytes): the publish did not return within 120 s",
                m.name,
                m.body.len()
            )),
        }
    }
    drop(transport);
    row.messages = published.len() as u64;
    let expects: Vec<Expect> = set.iter().map(|m| records::expectation(&m.body)).collect();
    // What the failing handler must see, byte for byte: the valid envelopes' data.
    let known: BTreeMap<String, String> = published
        .iter()
        .filter_map(|&i| match &expects[i] {
            Expect::Failed { id, data } => Some((id.clone(), data.clone())),
            Expect::Poison => None,
        })
        .collect();

    let mut worker = spec(&url, queue, 1);
    worker.idle_ms = Some(u64::try_from(broker.idle().as_millis()).unwrap_or(u64::MAX));
    let tiers: Vec<String> = (1..=2).map(|n| format!("{queue}.retry.{n}")).collect();
    let reinject_group = format!("chaos-{queue}-reinject");
    if broker == Broker::Kafka {
        // The transport's documentation: create the tier topics up front (a re-injector that
        // subscribed before its topic existed does not see it until a metadata refresh).
        brokers::kafka_create_topics(&url, &tiers).await?;
        worker.kafka_reinject_group = Some(reinject_group.clone());
    }
    let mut fleet = Fleet::new(&ctx.exe, &env.vars, dir, "worker", worker);
    fleet.start()?;
    let t = Instant::now();
    if !fleet.wait_exit(ctx.sizes.malformed_limit).await {
        row.fail(format!(
            "the worker never went idle within {}s",
            ctx.sizes.malformed_limit.as_secs()
        ));
        if let Stopped::Wedged(e) = fleet.terminate(Duration::from_secs(15)).await {
            row.fail(format!("worker wedged: {e}"));
        }
    }
    row.note(format!("the worker ran {:.1}s", t.elapsed().as_secs_f64()));
    let mut tally = Tally::default();
    for line in fleet.logs.poll() {
        tally.add(&known, &line);
    }
    report_fleet(row, &fleet);
    drop(fleet);

    let dlq = broker.dlq(queue);
    let reader_url = dlq_reader_url(&url);
    let records = brokers::read_all(
        env,
        broker,
        &reader_url,
        &dlq,
        broker.idle() + Duration::from_secs(2),
        Duration::from_secs(90),
    )
    .await
    .map_err(|e| format!("reading {dlq}: {e}"))?;
    let pairs: Vec<(&[u8], &Expect)> = published
        .iter()
        .map(|&i| (set[i].body.as_slice(), &expects[i]))
        .collect();
    let mut per_body = vec![0u64; published.len()];
    let matches = tokio::task::block_in_place(|| {
        records
            .iter()
            .map(|r| records::match_record(r, &pairs))
            .collect::<Vec<_>>()
    });
    for m in matches {
        if let Some(j) = m.body {
            per_body[j] += 1;
        }
        if let Some(problem) = m.problem {
            row.corrupted += 1;
            let name = m.body.map_or("?", |j| set[published[j]].name);
            row.note(format!("DLQ record of {name}: {problem}"));
        }
    }
    let probe = probe(env, broker, &url, queue).await;
    let left: Vec<usize> = (0..published.len())
        .filter(|&j| {
            let body = &set[published[j]].body;
            probe.bodies.iter().any(|b| b == body)
                || matches!(pairs[j].1, Expect::Failed { id, .. } if probe.ids().contains(id))
        })
        .collect();
    for (j, &i) in published.iter().enumerate() {
        let name = set[i].name;
        match per_body[j] {
            0 if left.contains(&j) => {}
            0 => {
                row.lost += 1;
                row.note(format!(
                    "{name}: not in the DLQ and not on the broker: lost"
                ));
            }
            1 => {}
            n => {
                row.duplicated += n - 1;
                row.fail(format!("{name}: {n} DLQ records (exactly one is required)"));
            }
        }
        if let Expect::Failed { id, .. } = &expects[i] {
            let calls = tally.calls.get(id).copied().unwrap_or(0);
            let seen: Vec<i64> = tally
                .all
                .iter()
                .filter(|c| &c.id == id)
                .map(|c| c.attempts)
                .collect();
            let shown: Vec<i64> = seen.iter().take(6).copied().collect();
            row.note(format!(
                "{name}: handler called {calls} times (attempts seen {shown:?}{})",
                if seen.len() > shown.len() { " …" } else { "" }
            ));
            if calls > 3 {
                row.fail(format!(
                    "{name}: the handler was called {calls} times with max_attempts 3"
                ));
            }
        }
    }
    probe.report(row);
    probe.excuse(row);
    dlq_leftover(env, broker, &url, &dlq, row).await;
    if broker == Broker::Kafka {
        // Retries parked on a tier topic and never re-injected are on the broker too.
        let mut parked = 0;
        for tier in &tiers {
            match brokers::kafka_lag(&url, &reinject_group, tier).await {
                Ok(n) => parked += n,
                Err(e) => row.note(format!("lag of {tier}: {e}")),
            }
        }
        if parked > 0 {
            row.stranded += parked;
            row.lost = row.lost.saturating_sub(parked);
            row.fail(format!(
                "{parked} retries are still parked on the tier topics (never re-injected; \
                 counted as stranded, and any loss above is reduced by as many)"
            ));
        }
    }
    if !left.is_empty() {
        let names: Vec<&str> = left.iter().map(|&j| set[published[j]].name).collect();
        row.note(format!("still on the source queue: {}", names.join(", ")));
    }
    row.corrupted += tally.corrupted;
    for example in &tally.corruption_examples {
        row.note(format!("corrupted: {example}"));
    }
    row.note(format!(
        "DLQ {dlq}: {} records for {} published bodies",
        records.len(),
        published.len()
    ));
    Ok(())
}
