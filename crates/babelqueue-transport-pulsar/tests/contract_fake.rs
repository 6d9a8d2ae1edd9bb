//! The transport contract suite of `babelqueue-testkit` against the Pulsar binding over its
//! in-memory [`FakePulsar`], without a broker: the transport's own code (properties, the
//! routed and delayed re-publish, acks and negative acks, the redelivery count as a fact)
//! driven by the same battery as on the real broker (`tests/contract.rs`). The fake holds a
//! message sent with a delivery time until it is due, as a Shared subscription does, and
//! queues a negatively acknowledged message again with its count raised; a message received by
//! a consumer that went away stays in flight, so redelivery after a crash runs on the real
//! broker only.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout)]

use std::sync::Arc;

use babelqueue_core::TransportError;
use babelqueue_testkit::{Features, Suite};
use babelqueue_transport_pulsar::fake::FakePulsar;
use babelqueue_transport_pulsar::{PulsarTransport, projection};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulsar_passes_the_contract_suite_over_its_fake() {
    let features = Features::new()
        // the retry copy, delayed the same way
        .delayed_retry(true)
        // the redelivery count of a negatively acknowledged message
        .native_redelivery_count(true)
        .max_body_bytes(projection::MAX_MESSAGE_SIZE);
    let fake = Arc::new(FakePulsar::new());
    let report = Suite::new(features, move || {
        let transport = PulsarTransport::with_client(fake.clone());
        async move { Ok::<_, TransportError>(transport) }
    })
    .run()
    .await;
    println!("{report}");
    report.assert_passed();
}
