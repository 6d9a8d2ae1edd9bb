//! The transport contract suite of `babelqueue-testkit`, run against a real redis-server
//! (`BQ_REDIS_URL`, default `redis://127.0.0.1:6379`) in both layouts: reliable (the default)
//! and Laravel-compatible (`?laravel=1`). Without the server the test prints `SKIPPED`; with
//! `BQ_REQUIRE_BROKERS` set it fails instead.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only, and runs the two layouts one after the other.

#![allow(clippy::print_stdout)]

use std::collections::HashSet;
use std::time::Duration;

use babelqueue_testkit::{Features, Report, Suite, broker_or_skip};
use babelqueue_transport_redis::fred::interfaces::{ClientLike, KeysInterface};
use babelqueue_transport_redis::fred::types::CustomCommand;
use babelqueue_transport_redis::{FredClient, RedisTransport};

/// The reservation lifetime in this run. Deadlines are whole epoch seconds
/// (`floor(now) + retry_after`), so a reservation lives between `retry_after - 1` and
/// `retry_after` seconds: 2 keeps at least one second for a handler (1 could lapse at once,
/// under a running handler) and still brings a lost delivery back within 2 s.
const RETRY_AFTER: Duration = Duration::from_secs(2);

fn base_url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// What both layouts have.
fn common() -> Features {
    Features::new()
        // one list per queue, reserved from its head
        .ordered(true)
        // the sweep (reliable) or migrate (Laravel) before every reserve
        .redelivery_after(RETRY_AFTER)
        .quiet_period(Duration::from_millis(500))
}

/// The reliable layout: headers ride in a `__bq_frame`; no delayed set (a release goes back
/// at once, a delayed publish is refused); no native dead-letter or delivery count.
fn reliable() -> Features {
    common()
}

/// The Laravel layout: the `:delayed` set honours delays and back-offs, scored in whole epoch
/// seconds (`floor(now) + ceil(delay)`, the cross-SDK score), so a delay may be due up to one
/// second early; a probe of 2 s still tells an honoured delay from an ignored one. Headers
/// cannot ride (Laravel reads the stored job).
fn laravel() -> Features {
    common()
        .delayed_retry(true)
        .delay_granularity(Duration::from_secs(1))
        .delay_probe(Duration::from_secs(2))
}

async fn run(laravel: bool, features: Features) -> Report {
    let url = base_url();
    Suite::new(features, move || {
        RedisTransport::builder(url.clone())
            .laravel(laravel)
            .retry_after(Some(RETRY_AFTER))
            .connect()
    })
    .run()
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_passes_the_contract_suite_in_both_layouts() {
    let url = base_url();
    let Some(raw) = broker_or_skip(&format!("Redis at {url}"), FredClient::connect(&url)).await
    else {
        return;
    };
    let before = suite_keys(&raw).await;

    let reliable = run(false, reliable()).await;
    println!("reliable layout:\n{reliable}");
    let laravel = run(true, laravel()).await;
    println!("Laravel layout (?laravel=1):\n{laravel}");

    // The suite's queues (`bq-<test>-…`, unique to this run) leave keys behind: delete them.
    for key in suite_keys(&raw).await.difference(&before) {
        let _: Result<i64, _> = raw.raw().del(key.as_str()).await;
    }
    let _ = raw.raw().quit().await;

    reliable.assert_passed();
    laravel.assert_passed();
}

/// The keys of the testkit's queues: `bq-<test name>-…`, with or without Laravel's `queues:`.
async fn suite_keys(raw: &FredClient) -> HashSet<String> {
    let mut keys = HashSet::new();
    for test in babelqueue_testkit::tests() {
        let label = test.name.replace('_', "-");
        for pattern in [format!("bq-{label}-*"), format!("queues:bq-{label}-*")] {
            let found: Vec<String> = raw
                .raw()
                .custom(
                    CustomCommand::new_static("KEYS", None, false),
                    vec![pattern],
                )
                .await
                .unwrap_or_default();
            keys.extend(found);
        }
    }
    keys
}
