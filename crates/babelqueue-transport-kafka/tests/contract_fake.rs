//! The transport contract suite of `babelqueue-testkit` on the in-memory Kafka
//! ([`FakeKafka`], feature `fake`), with the same retry tiers and re-injector as the live run
//! (`contract.rs`): no broker needed, so it always runs.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout, missing_docs)]

#[path = "support/reinjecting.rs"]
mod reinjecting;

use std::sync::Arc;
use std::time::Duration;

use babelqueue_testkit::{Features, Suite};
use babelqueue_transport_kafka::fake::FakeKafka;
use babelqueue_transport_kafka::{KafkaOptions, KafkaTransport};
use reinjecting::{Cluster, Reinjecting};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract_on_the_fake() {
    let kafka = FakeKafka::new();
    let config =
        KafkaOptions::from_url("kafka://fake:9092?group_id=contract&retry_tiers_ms=1000,5000")
            .expect("a valid URL");
    // The fake hands a new consumer its group's committed position at once: an unsettled
    // record of a dropped transport comes back on the next consumer's first poll.
    let redelivery = Duration::from_millis(500);
    let features = Features::new()
        .delayed_retry(true)
        .ordered(true)
        .redelivery_after(redelivery)
        .quiet_period(Duration::from_millis(500));
    let cluster = Cluster {
        client: Arc::new(kafka.clone()),
        config: config.clone(),
        admin: None,
    };
    let report = Suite::new(features, move || {
        let transport = KafkaTransport::with_client(Arc::new(kafka.clone()), &config);
        let cluster = cluster.clone();
        async move { Ok::<_, std::convert::Infallible>(Reinjecting::new(transport, cluster)) }
    })
    .exclude(
        "concurrent_consumers",
        "FakeKafka has no group coordination: every consumer owns every partition of its \
         topics, so two consumers of one group both receive every record (contract.rs runs \
         this test on the broker, where the group splits the work)",
    )
    .run()
    .await;
    println!("{report}");
    report.assert_passed();
}
