#![allow(clippy::print_stdout)]

//! `babelqueue publish` and `consume` through Redis Sentinel (`redis+sentinel://`, with
//! `wait_replicas`) and on Redis Cluster (`redis+cluster://`), in both layouts, on the
//! topologies of `scripts/brokers.sh up redis-sentinel redis-cluster`
//! (`BQ_REDIS_SENTINEL_URL`, `BQ_REDIS_CLUSTER_URL`). A topology that is not up prints
//! `SKIPPED`; with `BQ_REQUIRE_HA` set it fails.

#![cfg(feature = "redis")]

use crate::common;

use common::{babelqueue, consume_n, printed, publish_n};

/// The URL in `var`, or `None` after a loud skip (a failure with `BQ_REQUIRE_HA` set).
fn topology(var: &str, what: &str) -> Option<String> {
    if let Ok(url) = std::env::var(var) {
        return Some(url);
    }
    babelqueue_testkit::skip_or_fail_ha(format!(
        "{what} is not up ({var} is not set; scripts/brokers.sh up redis-sentinel redis-cluster, then eval \"$(scripts/brokers.sh env)\")"
    ));
    None
}

/// Publishes three messages to `queue` through `url`, consumes them, and checks that each came
/// back once with its data.
fn publish_then_consume(url: &str, queue: &str) {
    publish_n(url, queue, "urn:cli:ha", r#"{"n":7}"#, 3);
    consume_n(url, queue, "urn:cli:ha", &serde_json::json!({"n": 7}), 3, 1);
}

fn queue(label: &str) -> String {
    format!("bq-cli-{label}-{:08x}", std::process::id())
}

#[test]
fn publish_and_consume_through_sentinel_in_both_layouts() {
    let Some(base) = topology("BQ_REDIS_SENTINEL_URL", "Redis Sentinel") else {
        return;
    };
    publish_then_consume(&format!("{base}?wait_replicas=1"), &queue("sentinel"));
    publish_then_consume(
        &format!("{base}?laravel=1&wait_replicas=2&wait_timeout_ms=2000"),
        &queue("sentinel-laravel"),
    );
}

#[test]
fn publish_and_consume_on_a_cluster_in_both_layouts() {
    let Some(base) = topology("BQ_REDIS_CLUSTER_URL", "Redis Cluster") else {
        return;
    };
    publish_then_consume(&base, &queue("cluster"));
    // The Laravel layout: a queue name with a hash tag, as Laravel asks on a cluster …
    let tagged = format!("{{{}}}", queue("cluster-laravel"));
    publish_then_consume(&format!("{base}?laravel=1"), &tagged);
    // … and a clear refusal without one, naming what to write.
    let refused = babelqueue(
        &[
            "publish",
            &format!("{base}?laravel=1"),
            "--queue",
            "orders",
            "--urn",
            "urn:cli:ha",
        ],
        None,
    );
    let text = printed(&refused);
    assert!(!refused.status.success(), "{text}");
    assert!(text.contains("has no hash tag"), "{text}");
    assert!(text.contains(r#"use the queue name "{orders}""#), "{text}");
}
