//! The transport contract suite of `babelqueue-testkit`, run against the Azure Service Bus
//! binding over its in-memory [`FakeServiceBus`]: no namespace or emulator is reachable from
//! the project's machines (see the crate docs), so the fake, which keeps PeekLock semantics
//! (locks that lapse after the lock duration, `DeliveryCount`, abandon, native dead-letter), is
//! the broker here. Every transport `make` returns shares the one fake, as every client of a
//! namespace shares its queues.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::TransportError;
use babelqueue_testkit::{Features, Suite};
use babelqueue_transport_asb::AsbTransport;
use babelqueue_transport_asb::fake::FakeServiceBus;

/// The queue's lock duration in this run (Service Bus allows 5 s to 5 min, default 60 s; the
/// fake takes any, so the suite's lost deliveries come back quickly).
const LOCK_DURATION: Duration = Duration::from_secs(1);

/// The largest message of the Standard tier (Premium takes up to 100 MiB).
const STANDARD_TIER_MAX_MESSAGE: usize = 256 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asb_passes_the_contract_suite_over_its_fake() {
    let features = Features::new()
        // No headers (as the reference SDK: traceparent is not carried), no delayed publish
        // (ScheduledEnqueueTime is not used), so no delayed retry (a retry is a copy).
        // Not ordered: Service Bus guarantees FIFO only with sessions, which the binding does
        // not use.
        // `NativeSettler`: the entity's own `$DeadLetterQueue`.
        // `DeliveryCount - 1` as `Count::Redelivered`.
        .native_redelivery_count(true)
        // A lapsed PeekLock.
        .redelivery_after(LOCK_DURATION)
        .max_body_bytes(STANDARD_TIER_MAX_MESSAGE)
        .quiet_period(Duration::from_millis(300));
    let fake = Arc::new(FakeServiceBus::with_lock_duration(LOCK_DURATION));
    let shared = fake.clone();
    let report = Suite::new(features, move || {
        let fake = shared.clone();
        async move { Ok::<_, TransportError>(AsbTransport::with_client(fake)) }
    })
    .run()
    .await;
    println!("{report}");
    report.assert_passed();

    // The poison body and the rejected message of `native_dead_letter` went to the entity's
    // own dead-letter queue, not to a BabelQueue `.dlq` record.
    let native: Vec<String> = fake
        .dead_lettered()
        .iter()
        .map(|d| d.reason.clone())
        .collect();
    assert_eq!(native.len(), 2, "native dead-letters: {native:?}");
}
