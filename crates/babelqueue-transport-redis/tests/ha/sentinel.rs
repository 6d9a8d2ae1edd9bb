use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Browser, Consume, Context, HandlerError, Headers, Transport};
use babelqueue_testkit::unique_queue;
use babelqueue_transport_redis::RedisTransport;

use super::{Count, FAILOVERS, cli, cli_blocking, info, ports, topology_url, until};

const SERVICE: &str = "mymaster";

/// The master's port, as the first sentinel that answers names it.
async fn master(sentinels: &[u16]) -> u16 {
    for s in sentinels {
        let reply = cli(*s, &["sentinel", "get-master-addr-by-name", SERVICE]).await;
        if let Some(port) = reply.lines().nth(1).and_then(|p| p.trim().parse().ok()) {
            return port;
        }
    }
    panic!("no sentinel names the master of {SERVICE}");
}

/// The master and every replica the sentinels know.
async fn servers(sentinels: &[u16]) -> Vec<u16> {
    let mut all = vec![master(sentinels).await];
    let reply = cli(sentinels[0], &["sentinel", "replicas", SERVICE]).await;
    let lines: Vec<&str> = reply.lines().map(str::trim).collect();
    for pair in lines.windows(2) {
        if pair[0] == "port"
            && let Ok(port) = pair[1].parse()
        {
            all.push(port);
        }
    }
    all
}

/// Waits until the sentinels name a master other than `old`, and it has both replicas
/// connected and in sync (the demoted master among them); returns it.
async fn settled(sentinels: &[u16], old: u16) -> u16 {
    until(
        "a new master with two replicas",
        Duration::from_secs(60),
        || async {
            let new = master(sentinels).await;
            new != old && in_sync(new).await
        },
    )
    .await;
    master(sentinels).await
}

/// Whether `port` is a master with two replicas online.
async fn in_sync(port: u16) -> bool {
    let replication = info(port, "replication").await;
    replication.get("role").map(String::as_str) == Some("master")
        && replication
            .iter()
            .filter(|(k, v)| k.starts_with("slave") && v.contains("state=online"))
            .count()
            == 2
}

/// Replication as it was, on every server, even when the test panics.
struct Restore(Vec<u16>);

impl Drop for Restore {
    fn drop(&mut self) {
        for port in &self.0 {
            cli_blocking(*port, &["acl", "setuser", "bq-repl", "on"]);
        }
    }
}

/// Cuts replication from the master, as a partition between it and its replicas would: the
/// replication user is switched off and its connections are closed, so the replicas cannot
/// follow (nor reconnect) while the master goes on acknowledging writes.
async fn cut_replication(master: u16) {
    assert_eq!(
        cli(master, &["acl", "setuser", "bq-repl", "off"]).await,
        "OK"
    );
    cli(master, &["client", "kill", "user", "bq-repl"]).await;
    until("replicas cut off", Duration::from_secs(5), || async {
        info(master, "replication").await.get("connected_slaves") == Some(&"0".to_owned())
    })
    .await;
}

/// Publishes `m-0` … `m-<n-1>` to a fresh queue, each retried until acknowledged, cutting
/// replication after the first fifth and asking the sentinels for a failover 300 ms later;
/// then counts what the new master holds.
async fn publish_across_a_failover(url: &str, wait_replicas: u32, n: usize) -> Count {
    let sentinels = ports(url);
    let old = master(&sentinels).await;
    let restore = Restore(servers(&sentinels).await);
    let queue = unique_queue("sentinel-failover");
    let transport = RedisTransport::connect(&format!(
        "{url}?wait_replicas={wait_replicas}&wait_timeout_ms=200"
    ))
    .await
    .expect("connect through the sentinels");
    let mut count = Count::default();
    let started = Instant::now();
    let mut failover = None;
    for i in 0..n {
        if i == n / 5 {
            cut_replication(old).await;
            let first = sentinels[0];
            failover = Some(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                cli(first, &["sentinel", "failover", SERVICE]).await
            }));
        }
        let body = format!("m-{i}");
        loop {
            match transport.publish(&queue, body.as_bytes()).await {
                Ok(()) => break,
                Err(e) => {
                    count.refused += 1;
                    assert!(
                        started.elapsed() < Duration::from_secs(90),
                        "message {i} not acknowledged within 90 s: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        count.acked += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    if let Some(failover) = failover {
        assert_eq!(failover.await.expect("failover task"), "OK");
    }
    let new = settled(&sentinels, old).await;
    drop(restore);
    let stored = transport.browse(&queue, 0).await.expect("browse the queue");
    let _ = cli(new, &["del", &queue]).await;
    let _ = transport.close().await;
    let found: BTreeSet<Vec<u8>> = stored.iter().cloned().collect();
    count.duplicates = stored.len() - found.len();
    count.lost = (0..n)
        .filter(|i| !found.contains(format!("m-{i}").as_bytes()))
        .count();
    println!(
        "wait_replicas={wait_replicas}: {n} published in {took:?} across a failover from :{old} to :{new}: {count:?}"
    );
    count
}

/// Without `wait_replicas` the old master acknowledges publishes its replicas never see, and
/// the failover drops them; with `wait_replicas=1` no acknowledged publish is lost (the
/// unconfirmed ones fail, are retried, and land on the new master).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_drops_unconfirmed_publishes_and_none_confirmed_by_wait_replicas() {
    let Some(url) = topology_url("BQ_REDIS_SENTINEL_URL", "Redis Sentinel") else {
        return;
    };
    let _one = FAILOVERS.lock().await;
    let without = publish_across_a_failover(&url, 0, 150).await;
    let with = publish_across_a_failover(&url, 1, 150).await;
    assert_eq!(
        without.refused, 0,
        "without WAIT nothing is refused: {without:?}"
    );
    assert!(
        without.lost > 0,
        "the scenario must drop acknowledged writes without WAIT: {without:?}"
    );
    assert!(
        with.refused > 0,
        "WAIT refused the unconfirmed publishes: {with:?}"
    );
    assert_eq!(
        with.lost, 0,
        "nothing acknowledged is lost with wait_replicas=1: {with:?}"
    );
}

/// A worker consumes while the master fails over (the sentinels promote a replica, the old
/// master becomes one): every acknowledged publish is handled, at least once, in both layouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_consumes_across_a_failover_and_loses_nothing() {
    let Some(url) = topology_url("BQ_REDIS_SENTINEL_URL", "Redis Sentinel") else {
        return;
    };
    let _one = FAILOVERS.lock().await;
    for laravel in [false, true] {
        let sentinels = ports(&url);
        let old = master(&sentinels).await;
        let queue = unique_queue("sentinel-worker");
        let url = format!("{url}?wait_replicas=1&wait_timeout_ms=500&laravel={laravel}");
        let transport = RedisTransport::builder(url.clone())
            .retry_after(Some(Duration::from_secs(2)))
            .connect()
            .await
            .expect("connect");
        let handled: Arc<Mutex<Vec<i64>>> = Arc::default();
        let seen = handled.clone();
        let app = App::builder(transport.clone())
            .queue(&queue)
            .poll_timeout(Duration::from_millis(200))
            .handle("urn:bq:ha:n", move |ctx: Context| {
                let seen = seen.clone();
                async move {
                    let data: serde_json::Value = ctx.data_as()?;
                    let n = data["n"].as_i64().unwrap_or(-1);
                    seen.lock().expect("lock").push(n);
                    Ok::<(), HandlerError>(())
                }
            })
            .build()
            .expect("app");
        let worker = {
            let app = app.clone();
            tokio::spawn(async move { app.consume(Consume::new().handle_signals(false)).await })
        };
        let n = 200;
        let mut refused = 0;
        let started = Instant::now();
        let mut failover = None;
        for i in 0..n {
            if i == n / 4 {
                let first = sentinels[0];
                failover = Some(tokio::spawn(async move {
                    cli(first, &["sentinel", "failover", SERVICE]).await
                }));
            }
            let envelope = app
                .envelope("urn:bq:ha:n")
                .data(&serde_json::json!({ "n": i }))
                .build()
                .expect("envelope");
            while let Err(e) = app
                .publish_envelope(&queue, &envelope, &Headers::new())
                .await
            {
                refused += 1;
                assert!(started.elapsed() < Duration::from_secs(90), "{i}: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(failover.expect("asked").await.expect("failover task"), "OK");
        let new = settled(&sentinels, old).await;
        until("every message handled", Duration::from_secs(60), || {
            let handled = handled.clone();
            async move {
                let got: BTreeSet<i64> = handled.lock().expect("lock").iter().copied().collect();
                (0..n).all(|i| got.contains(&i))
            }
        })
        .await;
        app.stop_handle().stop();
        let summary = worker.await.expect("worker task").expect("the worker ran");
        let calls = handled.lock().expect("lock").len();
        println!(
            "laravel={laravel}: {n} published across a failover from :{old} to :{new} ({refused} publish calls refused and retried); the worker handled {calls} ({} more than once), summary {summary:?}",
            i64::try_from(calls).unwrap_or(i64::MAX) - n
        );
        for key in [queue.clone(), format!("queues:{queue}")] {
            let _ = cli(new, &["del", &key]).await;
        }
    }
}

/// What `wait_replicas` costs: 2 000 publishes of a 300-byte body through Sentinel, one after
/// the other and from 8 tasks, with `wait_replicas` 0, 1 and 2 (numbers in
/// docs/transports/redis.md). A measurement, not a check: run it with
/// `cargo test --release -p babelqueue-transport-redis --test ha publish_rate -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement of publish rates that prints figures and asserts none; run it by hand with --release"]
async fn publish_rate_with_and_without_wait_replicas() {
    let Some(url) = topology_url("BQ_REDIS_SENTINEL_URL", "Redis Sentinel") else {
        return;
    };
    let body = vec![b'x'; 300];
    for replicas in [0, 1, 2] {
        let transport = RedisTransport::connect(&format!("{url}?wait_replicas={replicas}"))
            .await
            .expect("connect");
        let queue = unique_queue("sentinel-rate");
        let started = Instant::now();
        for _ in 0..2000 {
            transport.publish(&queue, &body).await.expect("publish");
        }
        let one = 2000.0 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (transport, queue, body) = (transport.clone(), queue.clone(), body.clone());
                tokio::spawn(async move {
                    for _ in 0..250 {
                        transport.publish(&queue, &body).await.expect("publish");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
        let eight = 2000.0 / started.elapsed().as_secs_f64();
        println!("wait_replicas={replicas}: {one:.0}/s one at a time, {eight:.0}/s from 8 tasks");
        let _ = cli(master(&ports(&url)).await, &["del", &queue]).await;
        let _ = transport.close().await;
    }
}
