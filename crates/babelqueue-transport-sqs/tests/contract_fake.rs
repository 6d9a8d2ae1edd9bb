//! The transport contract suite of `babelqueue-testkit` against the SQS binding over its
//! in-memory [`FakeSqs`], without a broker: the transport's own code (attributes, receive,
//! delete, visibility changes, the receive count as a fact) driven by the same battery as on
//! moto (`tests/contract.rs`). The fake keeps one FIFO per queue and does not simulate time:
//! a visibility change makes a message visible again at once, a delay is not honoured, a
//! message received by a consumer that went away stays in flight, and no RedrivePolicy moves
//! anything. So the suite's timing and native tests (delayed publish, back-off, redelivery after
//! a crash, the receive count, native dead-lettering) are reported not applicable here, with
//! their reasons, and run on moto instead.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout)]

use std::time::Duration;

use babelqueue_core::TransportError;
use babelqueue_testkit::{Features, Suite};
use babelqueue_transport_sqs::fake::FakeSqs;
use babelqueue_transport_sqs::{SqsOptions, SqsTransport};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_passes_the_contract_suite_over_its_fake() {
    let features = Features::new()
        // one FIFO per queue in the fake (a real standard queue is best-effort order)
        .ordered(true)
        // text only, as on SQS
        .binary_bodies(false)
        .max_body_bytes(256 * 1024)
        .poll_timeout(Duration::from_millis(50))
        .quiet_period(Duration::from_millis(200));
    let fake = FakeSqs::new();
    let report = Suite::new(features, move || {
        let transport = SqsTransport::new(fake.clone(), SqsOptions::default());
        async move { Ok::<_, TransportError>(transport) }
    })
    .exclude(
        "capabilities_declared",
        "the transport offers a NativeSettler, which the fake cannot honour (no RedrivePolicy): \
         it is claimed and passes on moto (tests/contract.rs)",
    )
    .exclude(
        "delayed_publish",
        "the transport declares delays, which the fake cannot honour (no clock): the test \
         passes on moto (tests/contract.rs)",
    )
    .run()
    .await;
    println!("{report}");
    report.assert_passed();
}
