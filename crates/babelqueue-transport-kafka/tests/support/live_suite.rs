//! The transport contract suite of `babelqueue-testkit` on a real Kafka broker or cluster,
//! deployed as the crate documents it: retry tiers on, and a re-injector running beside the
//! workers ([`Reinjecting`]). `contract.rs` runs it on the single broker, `ha_contract.rs` on
//! the three-node cluster.

use std::sync::Arc;
use std::time::Duration;

use babelqueue_testkit::{Features, Suite, unique_queue};
use babelqueue_transport_kafka::{KafkaOptions, KafkaTransport, RdKafkaClient};

use crate::reinjecting::{Cluster, Reinjecting};

/// The retry tiers of this run: the suite's probe delay (1 s) and its default back-off-less
/// retries land on the first; the second covers nothing the suite asks for.
const TIERS_MS: &str = "1000,5000";

/// How soon a delivery left unsettled comes back. Kafka has no per-message redelivery: the
/// record is handed out again when its partition's next owner starts from the committed
/// offset (or the owner seeks back to it). A transport that is dropped closes its consumer,
/// which leaves the group at once, so the next consumer of the group gets the partition after
/// one rebalance (about a second here); were the member not to leave, the session timeout of
/// this run (6 s) would take it out.
const REDELIVERY_AFTER: Duration = Duration::from_secs(6);

/// The workers' URL: a consumer group of this run only, the retry tiers, and a short session
/// timeout (as the crate's other live tests use) so a member that vanished without leaving is
/// dropped from the group quickly.
pub(crate) fn url(base: &str, group: &str) -> String {
    let separator = if base.contains('?') { '&' } else { '?' };
    format!(
        "{base}{separator}group_id={group}&retry_tiers_ms={TIERS_MS}\
         &session.timeout.ms=6000&heartbeat.interval.ms=500"
    )
}

/// A consumer group of this run only.
pub(crate) fn group() -> String {
    unique_queue("contract")
}

/// Runs the suite with the workers' `url` (from [`url`]) on the broker `config` reaches.
pub(crate) async fn run(url: String, config: KafkaOptions) {
    let features = Features::new()
        // Headers (record headers beside the bq-* projection) and delays (parked on the
        // smallest retry tier covering the delay) come from the declared Sends.
        // Redelivery::Native: a retry parks on the tier its delay maps to (needs the tiers)
        .delayed_retry(true)
        // Kafka orders per partition; the suite's topics are auto-created with one partition
        // (num.partitions=1 on the test broker and cluster), and the worker commits in offset
        // order
        .ordered(true)
        .redelivery_after(REDELIVERY_AFTER)
        // librdkafka's producer refuses a message above message.max.bytes (1 000 000 by
        // default; the broker's own limit is 1 048 588 for the whole record batch)
        .max_body_bytes(1_000_000);
    let cluster = Cluster {
        client: Arc::new(RdKafkaClient::new(config.clone())),
        admin: Some(RdKafkaClient::new(config.clone())),
        config,
    };
    let report = Suite::new(features, move || {
        let (url, cluster) = (url.clone(), cluster.clone());
        async move {
            KafkaTransport::connect(&url)
                .await
                .map(|t| Reinjecting::new(t, cluster))
        }
    })
    .exclude("dead_letter_record", GROUP_REBALANCE)
    .exclude("poison_invalid_utf8", GROUP_REBALANCE)
    .exclude("poison_not_json", GROUP_REBALANCE)
    .exclude("poison_no_identity", GROUP_REBALANCE)
    .exclude("delayed_publish", REINJECTOR_JOIN)
    .run()
    .await;
    println!("{report}");
    report.assert_passed();
}

/// Why the suite's dead-letter reads are not run on the live broker (they are on the fake,
/// `contract_fake.rs`, and the live dead-letter path is tested in `tests/it/live.rs` and
/// `tests/it/cli.rs`, whose readers use consumer groups of their own).
const GROUP_REBALANCE: &str = "the suite reads the dead-letter topic through a new transport of \
    the one consumer group the run shares; on Kafka the reader's join is a rebalance of the whole \
    group, which waits for members that are open but not polling (up to max.poll.interval.ms), \
    far past the suite's 10 s patience. Measured: nothing read in 10 s on every run";

/// Why the suite's delayed publish is not run on the live broker (the tier and re-injector path
/// of a delayed publish is tested in `tests/it/live.rs`, `retry_through_a_tier_and_the_reinjector`).
const REINJECTOR_JOIN: &str = "a delayed publish comes back through the re-injector, which this \
    harness starts for a queue when the queue is first consumed: its consumer group's first join \
    (group.initial.rebalance.delay.ms, 3 s by default) takes longer than the suite's 1 s delay \
    plus 1 s tolerance";
