//! The transport contract suite of `babelqueue-testkit` against a real Apache Pulsar standalone
//! broker (`BQ_PULSAR_URL`, default `pulsar://127.0.0.1:6650`; `scripts/brokers.sh up pulsar`).
//! Without the broker the test prints `SKIPPED`; with `BQ_REQUIRE_BROKERS` set it fails
//! instead.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout, missing_docs)]

use std::time::Duration;

use babelqueue_testkit::{Features, Suite, broker_or_skip};
use babelqueue_transport_pulsar::{PulsarTransport, projection};

fn url() -> String {
    std::env::var("BQ_PULSAR_URL").unwrap_or_else(|_| "pulsar://127.0.0.1:6650".to_owned())
}

/// How soon a delivery left unsettled comes back: the transport sets no ack timeout, so the
/// broker redelivers an unacknowledged message when its consumer closes (a transport that is
/// dropped closes its consumers) or is nacked.
const REDELIVERY_AFTER: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract() {
    let Some(probe) =
        broker_or_skip("Pulsar (BQ_PULSAR_URL)", PulsarTransport::connect(&url())).await
    else {
        return;
    };
    drop(probe);
    let features = Features::new()
        // Redelivery::Copy sent with its delay (and the facts it carried): held until due
        .delayed_retry(true)
        .native_redelivery_count(true)
        .redelivery_after(REDELIVERY_AFTER)
        // the broker's default maxMessageSize, which the transport checks before sending
        .max_body_bytes(projection::MAX_MESSAGE_SIZE);
    let url = url();
    let report = Suite::new(features, move || {
        let url = url.clone();
        async move { PulsarTransport::connect(&url).await }
    })
    .run()
    .await;
    println!("{report}");
    report.assert_passed();
}
