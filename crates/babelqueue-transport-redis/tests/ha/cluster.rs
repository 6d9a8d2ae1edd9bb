use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Browser, Consume, Context, HandlerError, Headers};
use babelqueue_testkit::unique_queue;
use babelqueue_transport_redis::{RedisTransport, layout};

use super::{FAILOVERS, cli, info, ports, topology_url, until};

/// A node of `CLUSTER NODES`.
#[derive(Debug, Clone)]
struct Node {
    id: String,
    port: u16,
    master: bool,
    failed: bool,
    slots: Vec<(u16, u16)>,
}

/// The nodes as the first node of `ports` that answers sees them.
async fn nodes(ports: &[u16]) -> Vec<Node> {
    for port in ports {
        let reply = cli(*port, &["cluster", "nodes"]).await;
        let nodes: Vec<Node> = reply
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let address = fields.get(1)?;
                let port = address.split(['@', ':']).nth(1)?.parse().ok()?;
                let flags = fields.get(2)?;
                let slots = fields
                    .iter()
                    .skip(8)
                    .filter(|s| !s.starts_with('['))
                    .filter_map(|s| match s.split_once('-') {
                        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                        None => s.parse().ok().map(|n| (n, n)),
                    })
                    .collect();
                Some(Node {
                    id: (*fields.first()?).to_owned(),
                    port,
                    master: flags.contains("master"),
                    failed: flags.contains("fail"),
                    slots,
                })
            })
            .collect();
        if !nodes.is_empty() {
            return nodes;
        }
    }
    panic!("no cluster node answers CLUSTER NODES");
}

/// The master serving `slot`.
async fn owner(ports: &[u16], slot: u16) -> Node {
    serving(ports, slot)
        .await
        .expect("a master serves the slot")
}

/// The master serving `slot`, if one does now (none while a failed master's replica is not
/// promoted yet).
async fn serving(ports: &[u16], slot: u16) -> Option<Node> {
    nodes(ports)
        .await
        .into_iter()
        .find(|n| n.master && !n.failed && n.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
}

/// Whether every node answers and sees the cluster whole.
async fn whole(ports: &[u16]) -> bool {
    for port in ports {
        let state = info_cluster(*port).await;
        if !state.contains("cluster_state:ok") || !state.contains("cluster_known_nodes:6") {
            return false;
        }
    }
    let nodes = nodes(ports).await;
    nodes
        .iter()
        .filter(|n| n.master && !n.failed && !n.slots.is_empty())
        .count()
        == 3
        && nodes.iter().all(|n| !n.failed)
}

async fn info_cluster(port: u16) -> String {
    cli(port, &["cluster", "info"]).await
}

/// Moves `slot` to another master the way a resharding does (IMPORTING/MIGRATING, MIGRATE,
/// SETSLOT NODE), pausing in the migrating state so that the worker meets `ASK` redirections,
/// then `MOVED` ones.
async fn migrate(ports: Vec<u16>, slot: u16) {
    let source = owner(&ports, slot).await;
    let target = nodes(&ports)
        .await
        .into_iter()
        .find(|n| n.master && !n.failed && n.id != source.id && !n.slots.is_empty())
        .expect("another master");
    let slot_text = slot.to_string();
    let importing = cli(
        target.port,
        &["cluster", "setslot", &slot_text, "importing", &source.id],
    )
    .await;
    assert_eq!(importing, "OK");
    let migrating = cli(
        source.port,
        &["cluster", "setslot", &slot_text, "migrating", &target.id],
    )
    .await;
    assert_eq!(migrating, "OK");
    for round in 0..20 {
        let keys = cli(
            source.port,
            &["cluster", "getkeysinslot", &slot_text, "1000"],
        )
        .await;
        let keys: Vec<&str> = keys
            .lines()
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .collect();
        if !keys.is_empty() {
            // MIGRATE host port "" db timeout KEYS key…
            let port = target.port.to_string();
            let mut args = vec!["migrate", "127.0.0.1", &port, "", "0", "5000", "keys"];
            args.extend(keys.iter().copied());
            let moved = cli(source.port, &args).await;
            println!(
                "migrating slot {slot}, round {round}: {} keys: {moved}",
                keys.len()
            );
            assert_eq!(moved, "OK", "MIGRATE {keys:?}");
        }
        // The worker and the publisher go on meanwhile, redirected with ASK.
        tokio::time::sleep(Duration::from_millis(300)).await;
        if round >= 3 && keys.is_empty() {
            break;
        }
    }
    for node in nodes(&ports).await.iter().filter(|n| n.master && !n.failed) {
        cli(
            node.port,
            &["cluster", "setslot", &slot_text, "node", &target.id],
        )
        .await;
    }
    println!(
        "slot {slot} moved from :{} to :{}",
        source.port, target.port
    );
    assert_eq!(owner(&ports, slot).await.id, target.id);
}

/// Kills the master serving `slot` (SIGKILL), waits for its replica to take over, and starts it
/// again from its directory: it rejoins as a replica.
async fn kill_master(ports: Vec<u16>, slot: u16, dir: String) {
    let master = owner(&ports, slot).await;
    let node_dir = format!("{dir}/{}", master.port);
    let pid = std::fs::read_to_string(format!("{node_dir}/redis.pid")).expect("the node's pid");
    let killed = tokio::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .await
        .expect("kill");
    assert!(killed.success());
    let started = Instant::now();
    let others: Vec<u16> = ports
        .iter()
        .copied()
        .filter(|p| *p != master.port)
        .collect();
    until("a replica promoted", Duration::from_secs(30), || {
        let others = others.clone();
        async move {
            serving(&others, slot)
                .await
                .is_some_and(|n| n.port != master.port)
        }
    })
    .await;
    println!(
        "master :{} killed; slot {slot} served by :{} after {:?}",
        master.port,
        owner(&others, slot).await.port,
        started.elapsed()
    );
    let restarted = tokio::process::Command::new("redis-server")
        .arg(format!("{node_dir}/redis.conf"))
        .status()
        .await
        .expect("redis-server");
    assert!(restarted.success());
    until("the cluster whole again", Duration::from_secs(60), || {
        let ports = ports.clone();
        async move { whole(&ports).await }
    })
    .await;
    let role = info(master.port, "replication").await;
    println!("node :{} back as {:?}", master.port, role.get("role"));
}

/// Publishes `n` messages (each retried until `wait_replicas=1` confirms it) to a fresh queue
/// while a worker consumes it, runs `disrupt(slot of the queue)` after the first quarter, and
/// checks that every message was handled.
async fn across<F, Fut>(url: &str, laravel: bool, what: &str, disrupt: F)
where
    F: FnOnce(u16) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let name = unique_queue(&format!("cluster-{what}"));
    // The Laravel layout needs a hash tag in the queue name.
    let queue = if laravel { format!("{{{name}}}") } else { name };
    let url = format!("{url}?wait_replicas=1&wait_timeout_ms=500&laravel={laravel}");
    let transport = RedisTransport::builder(url)
        .retry_after(Some(Duration::from_secs(2)))
        .connect()
        .await
        .expect("connect to the cluster");
    let slot = layout::slot(transport.options().ready(&queue).as_bytes());
    let handled: Arc<Mutex<Vec<i64>>> = Arc::default();
    let seen = handled.clone();
    let app = App::builder(transport.clone())
        .queue(&queue)
        .poll_timeout(Duration::from_millis(200))
        .handle("urn:bq:ha:n", move |ctx: Context| {
            let seen = seen.clone();
            async move {
                let data: serde_json::Value = ctx.data_as()?;
                // Slower than the publisher: a backlog builds up, so the queue's keys hold
                // messages while its slot migrates.
                tokio::time::sleep(Duration::from_millis(20)).await;
                seen.lock()
                    .expect("lock")
                    .push(data["n"].as_i64().unwrap_or(-1));
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .expect("app");
    let worker = {
        let app = app.clone();
        tokio::spawn(async move { app.consume(Consume::new().handle_signals(false)).await })
    };
    let n = 150;
    let mut refused = 0;
    let started = Instant::now();
    let mut disruption = None;
    let mut disrupt = Some(disrupt);
    for i in 0..n {
        if i == n / 4
            && let Some(disrupt) = disrupt.take()
        {
            disruption = Some(tokio::spawn(disrupt(slot)));
        }
        let envelope = app
            .envelope("urn:bq:ha:n")
            .data(&serde_json::json!({ "n": i }))
            .build()
            .expect("envelope");
        loop {
            let published = tokio::time::timeout(
                Duration::from_secs(10),
                app.publish_envelope(&queue, &envelope, &Headers::new()),
            )
            .await;
            let e = match published {
                Ok(Ok(())) => break,
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer within 10 s".to_owned(),
            };
            println!("publish {i}: {e}");
            refused += 1;
            assert!(started.elapsed() < Duration::from_secs(120), "{i}: {e}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    disruption.expect("started").await.expect("the disruption");
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
        "{what}, laravel={laravel}: {n} published to {queue} (slot {slot}) in {:?}, {refused} publish calls refused and retried; handled {calls} ({} more than once); {summary:?}",
        started.elapsed(),
        i64::try_from(calls).unwrap_or(i64::MAX) - n
    );
    let left = transport.browse(&queue, 0).await.expect("browse");
    assert!(left.is_empty(), "nothing left on the queue: {}", left.len());
}

/// A slot migration under a running worker and publisher: `ASK` while the slot migrates, `MOVED`
/// after, and `TRYAGAIN` for a script whose keys are split between the two nodes; nothing lost,
/// in both layouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_keeps_consuming_while_its_slot_migrates() {
    let Some(url) = topology_url("BQ_REDIS_CLUSTER_URL", "Redis Cluster") else {
        return;
    };
    let _one = FAILOVERS.lock().await;
    for laravel in [false, true] {
        let ports = ports(&url);
        across(&url, laravel, "migration", move |slot| migrate(ports, slot)).await;
    }
}

/// The master serving the worker's queue is killed: its replica takes over, the worker and the
/// publisher go on (publishes are refused until a replica confirms them again), nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_keeps_consuming_across_a_master_kill() {
    let Some(url) = topology_url("BQ_REDIS_CLUSTER_URL", "Redis Cluster") else {
        return;
    };
    let Some(dir) = std::env::var("BQ_REDIS_CLUSTER_DIR").ok() else {
        babelqueue_testkit::skip_or_fail(
            "BQ_REDIS_CLUSTER_DIR is not set (scripts/brokers.sh env)",
        );
        return;
    };
    let _one = FAILOVERS.lock().await;
    let ports = ports(&url);
    across(&url, false, "master-kill", move |slot| {
        kill_master(ports, slot, dir)
    })
    .await;
}

/// A dead-letter queue in another slot than its queue: the record is written in steps (no
/// script touches two slots), in both layouts, and the reservation is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_go_to_another_slot_in_steps() {
    let Some(url) = topology_url("BQ_REDIS_CLUSTER_URL", "Redis Cluster") else {
        return;
    };
    let _one = FAILOVERS.lock().await;
    for laravel in [false, true] {
        let name = unique_queue("cluster-dlq");
        let (queue, dlq) = if laravel {
            (format!("{{{name}}}"), format!("{{{name}-dead}}"))
        } else {
            (name.clone(), format!("{name}.dlq"))
        };
        let transport = RedisTransport::builder(format!("{url}?laravel={laravel}"))
            .connect()
            .await
            .expect("connect");
        let o = transport.options().clone();
        assert_ne!(
            layout::slot(o.ready(&queue).as_bytes()),
            layout::slot(o.ready(&dlq).as_bytes()),
            "the two queues hash apart"
        );
        let app = App::builder(transport.clone())
            .queue(&queue)
            .dead_letter(true)
            .dead_letter_queue(&dlq)
            .max_attempts(1)
            .poll_timeout(Duration::from_millis(100))
            .handle("urn:bq:ha:fail", |_ctx: Context| async {
                Err::<(), _>(HandlerError::new("boom"))
            })
            .build()
            .expect("app");
        let envelope = app.envelope("urn:bq:ha:fail").build().expect("envelope");
        app.publish_envelope(&queue, &envelope, &Headers::new())
            .await
            .expect("publish");
        let summary = app
            .consume(
                Consume::new()
                    .idle_timeout(Duration::from_millis(500))
                    .handle_signals(false),
            )
            .await
            .expect("consume");
        assert_eq!(summary.processed, 1, "laravel={laravel}");
        let records = transport.browse(&dlq, 0).await.expect("browse the dlq");
        assert_eq!(records.len(), 1, "laravel={laravel}: one record");
        assert!(
            String::from_utf8_lossy(&records[0]).contains("boom"),
            "the record says why"
        );
        assert!(
            transport
                .browse(&queue, 0)
                .await
                .expect("browse")
                .is_empty()
        );
        let reservations = if laravel {
            o.reserved(&queue)
        } else {
            o.deadlines(&queue)
        };
        let port = owner(&ports(&url), layout::slot(reservations.as_bytes()))
            .await
            .port;
        assert_eq!(
            cli(port, &["zcard", &reservations]).await,
            "0",
            "laravel={laravel}"
        );
        for key in [o.ready(&dlq), o.notify(&dlq)] {
            let port = owner(&ports(&url), layout::slot(key.as_bytes())).await.port;
            cli(port, &["del", &key]).await;
        }
    }
}
