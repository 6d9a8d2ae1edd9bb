//! The transport contract suite of `babelqueue-testkit` against a real Apache ActiveMQ Artemis
//! (`BQ_ARTEMIS_URL`, default `artemis://bq:bq@127.0.0.1:5673`; `scripts/brokers.sh up
//! artemis`). Without the broker the test prints `SKIPPED`; with `BQ_REQUIRE_BROKERS` set it
//! fails instead.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout, missing_docs)]

use std::time::Duration;

use babelqueue_testkit::{Features, Suite, broker_or_skip};
use babelqueue_transport_artemis::ArtemisTransport;

fn url() -> String {
    std::env::var("BQ_ARTEMIS_URL").unwrap_or_else(|_| "artemis://bq:bq@127.0.0.1:5673".to_owned())
}

/// How soon a delivery left unsettled comes back: Artemis hands a consumer's unsettled
/// deliveries back to the queue when its link or connection closes (a transport that is
/// dropped closes its connection), and delivers them again at once.
const REDELIVERY_AFTER: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract() {
    let Some(probe) = broker_or_skip(
        "Artemis (BQ_ARTEMIS_URL)",
        ArtemisTransport::connect(&url()),
    )
    .await
    else {
        return;
    };
    drop(probe);
    let features = Features::new()
        // Headers (string application properties beside the bq_ projection) and delays
        // (scheduled delivery, x-opt-delivery-delay) come from the declared Sends.
        // Redelivery::Copy with a delay: the copy is scheduled
        .delayed_retry(true)
        // an ANYCAST queue is FIFO; one consumer with credit 1 takes it in order
        .ordered(true)
        .redelivery_after(REDELIVERY_AFTER);
    let url = url();
    let report = Suite::new(features, move || {
        let url = url.clone();
        async move { ArtemisTransport::connect(&url).await }
    })
    .run()
    .await;
    println!("{report}");
    report.assert_passed();
}
