//! The suite catches broken transports: each fault below, injected into a wrapper around
//! `memory://`, fails the tests that should catch it (and only ever fails, never hangs the run
//! or passes silently).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{
    Capabilities, Delivery, MemoryTransport, Outgoing, Redelivery, Sends, Transport, TransportError,
};
use babelqueue_testkit::{Features, Report, Suite, TestOutcome};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `ack` does nothing: the message comes back after the visibility timeout.
    AckIgnored,
    /// `publish` re-encodes U+2028 as `\u2028` (a JSON encoder that "helps").
    EscapesLineSeparator,
    /// `pop` never returns.
    PopHangs,
    /// `pop` panics.
    PopPanics,
    /// `pop` hands out a copy and leaves the message in the queue (a peek).
    PopPeeks,
    /// Capabilities are hidden: only the required methods.
    NoCapabilities,
    /// A delayed publish is sent at once, and retries are delayed copies (so not delayed).
    DelayIgnored,
    /// `pop` acknowledges at once (at most once): an unsettled delivery is lost.
    AutoAck,
}

#[derive(Debug)]
struct Broken {
    inner: MemoryTransport,
    fault: Fault,
    hung: AtomicBool,
}

#[async_trait]
impl Transport for Broken {
    fn name(&self) -> &'static str {
        "broken-memory"
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        if self.fault == Fault::EscapesLineSeparator {
            let text = String::from_utf8_lossy(body).replace('\u{2028}', "\\u2028");
            return self.inner.publish(queue, text.as_bytes()).await;
        }
        self.inner.publish(queue, body).await
    }
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        // A plain request goes through this wrapper's publish, so its faults apply to it too.
        if outgoing.is_plain() {
            return self.publish(outgoing.queue, outgoing.body).await;
        }
        let mut outgoing = *outgoing;
        if self.fault == Fault::DelayIgnored {
            outgoing.delay = None;
        }
        self.inner.send(&outgoing).await
    }
    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        match self.fault {
            Fault::PopHangs => {
                self.hung.store(true, Ordering::SeqCst);
                std::future::pending().await
            }
            Fault::PopPanics => panic!("broken-memory: pop panics on purpose"),
            Fault::PopPeeks => {
                let got = self.inner.pop(queue, timeout).await?;
                if let Some(d) = &got {
                    // Put a copy back (at the tail) and forget the original's reservation.
                    self.inner.publish(queue, d.body()).await?;
                    self.inner.ack(d).await?;
                }
                Ok(got)
            }
            Fault::AutoAck => {
                let got = self.inner.pop(queue, timeout).await?;
                if let Some(d) = &got {
                    self.inner.ack(d).await?;
                }
                Ok(got)
            }
            _ => self.inner.pop(queue, timeout).await,
        }
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        if self.fault == Fault::AckIgnored {
            return Ok(());
        }
        self.inner.ack(delivery).await
    }
    fn capabilities(&self) -> Capabilities<'_> {
        match self.fault {
            Fault::NoCapabilities => Capabilities::none(),
            Fault::DelayIgnored => Capabilities::none()
                .sends(Sends::body_only().headers().delay())
                .rewind(&self.inner),
            // The memory transport's own, minus those that would settle or publish around
            // this wrapper's faults (its batch acknowledgement and batch publish).
            _ => Capabilities::none()
                .sends(Sends::body_only().headers().delay())
                .redelivery(Redelivery::Native(&self.inner))
                .rewind(&self.inner)
                .browse(&self.inner),
        }
    }
}

fn memory_features(visibility: Duration) -> Features {
    Features::new()
        .delayed_retry(true)
        .ordered(true)
        .redelivery_after(visibility)
        .delay_tolerance(Duration::from_millis(500))
        .quiet_period(Duration::from_millis(300))
        .receive_timeout(Duration::from_secs(2))
}

async fn run(fault: Fault, features: Features, only: &[&str]) -> Report {
    let visibility = Duration::from_millis(500);
    let inner = MemoryTransport::with_visibility_timeout(visibility);
    Suite::new(features, move || {
        let inner = inner.clone();
        async move {
            Ok::<_, TransportError>(Broken {
                inner,
                fault,
                hung: AtomicBool::new(false),
            })
        }
    })
    .only(only.iter().copied())
    .run()
    .await
}

fn failure<'a>(report: &'a Report, name: &str) -> &'a str {
    match &report
        .get(name)
        .unwrap_or_else(|| panic!("{name} is in the report"))
        .outcome
    {
        TestOutcome::Failed(why) => why,
        other => panic!("{name} should have failed, it {other:?}\n{report}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_ack_is_caught() {
    let features = memory_features(Duration::from_millis(500));
    let report = run(Fault::AckIgnored, features, &["ack_removes"]).await;
    let why = failure(&report, "ack_removes");
    assert!(why.contains("handled and acknowledged, but"), "{why}");
    assert_eq!(report.failed(), 1);
    assert_eq!(report.passed(), 0);
    assert_eq!(
        report.not_applicable(),
        babelqueue_testkit::tests().len() - 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_bytes_are_caught() {
    let features = memory_features(Duration::from_millis(500));
    let names = [
        "round_trip",
        "poison_not_json",
        "poison_no_identity",
        "close_and_reconnect",
    ];
    let report = run(Fault::EscapesLineSeparator, features, &names).await;
    assert!(
        failure(&report, "round_trip").contains("the body changed on the way"),
        "{report}"
    );
    assert!(failure(&report, "poison_not_json").contains("`raw` does not hold"));
    assert!(failure(&report, "poison_no_identity").contains("not spliced into the original bytes"));
    // No U+2028 in that one: the fault does not touch it.
    assert_eq!(
        report.get("close_and_reconnect").map(|r| &r.outcome),
        Some(&TestOutcome::Passed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_pop_fails_each_test_on_its_own_budget() {
    let features = memory_features(Duration::from_millis(500)).test_timeout(Duration::from_secs(1));
    let started = std::time::Instant::now();
    let report = run(Fault::PopHangs, features, &["round_trip", "pop_timeout"]).await;
    assert!(
        failure(&report, "round_trip").starts_with("timed out after"),
        "{report}"
    );
    assert!(failure(&report, "pop_timeout").starts_with("timed out after"));
    // Budget: 1 s + 2 × 500 ms per test.
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_transport_fails_the_test_not_the_run() {
    let features = memory_features(Duration::from_millis(500));
    let report = run(Fault::PopPanics, features, &["round_trip", "pop_timeout"]).await;
    assert!(
        failure(&report, "round_trip").contains("pop panics on purpose"),
        "{report}"
    );
    assert!(failure(&report, "pop_timeout").starts_with("panicked: "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_handed_out_twice_is_caught() {
    let features = memory_features(Duration::from_millis(500));
    let report = run(Fault::PopPeeks, features, &["concurrent_consumers"]).await;
    let why = failure(&report, "concurrent_consumers");
    assert!(why.contains("handled more than once"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_delays_are_caught() {
    let features = memory_features(Duration::from_millis(500));
    let report = run(
        Fault::DelayIgnored,
        features,
        &["retry_backoff", "delayed_publish", "capabilities_declared"],
    )
    .await;
    let why = failure(&report, "retry_backoff");
    assert!(why.contains("before the back-off of 1s"), "{why}");
    let why = failure(&report, "delayed_publish");
    assert!(
        why.contains("a message delayed by 1s arrived after"),
        "{why}"
    );
    // The claims match the capabilities: only the behaviour is wrong.
    assert_eq!(
        report.get("capabilities_declared").map(|r| &r.outcome),
        Some(&TestOutcome::Passed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_unsettled_delivery_is_caught() {
    let features = memory_features(Duration::from_millis(500));
    let report = run(Fault::AutoAck, features, &["unsettled_redelivered"]).await;
    let why = failure(&report, "unsettled_redelivered");
    assert!(why.contains("was not delivered again within"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_capabilities_must_agree() {
    // A claim the transport cannot back: a delayed retry on a transport that neither
    // redelivers nor delays its copies.
    let claimed = memory_features(Duration::from_millis(500));
    let report = run(
        Fault::NoCapabilities,
        claimed,
        &[
            "capabilities_declared",
            "headers",
            "delayed_publish",
            "native_dead_letter",
        ],
    )
    .await;
    let why = failure(&report, "capabilities_declared");
    assert!(why.contains("Features::delayed_retry is claimed"), "{why}");
    // Native dead-lettering is read from the capability: not offered, not tested.
    assert_eq!(
        report.get("native_dead_letter").map(|r| &r.outcome),
        Some(&TestOutcome::NotApplicable(
            "the transport offers no NativeSettler".to_owned()
        ))
    );
    // Headers and delays are not claimed: what the transport does not declare is not tested.
    for (test, part) in [("headers", "no headers"), ("delayed_publish", "no delay")] {
        assert_eq!(
            report.get(test).map(|r| &r.outcome),
            Some(&TestOutcome::NotApplicable(format!(
                "the transport declares {part} (Sends::{})",
                if test == "headers" {
                    "headers"
                } else {
                    "delay"
                }
            ))),
            "{test}"
        );
    }

    // What the transport declares needs no claim: its tests run from the declaration alone.
    let report = Suite::new(Features::new(), || async {
        Ok::<_, TransportError>(MemoryTransport::new())
    })
    .only(["capabilities_declared", "headers", "delayed_publish"])
    .run()
    .await;
    for test in ["capabilities_declared", "headers", "delayed_publish"] {
        assert_eq!(
            report.get(test).map(|r| &r.outcome),
            Some(&TestOutcome::Passed),
            "{test}: {report}"
        );
    }
}

#[tokio::test]
async fn exclusions_are_reported_by_name_and_unknown_names_fail() {
    let report = Suite::new(memory_features(Duration::from_millis(500)), || async {
        Ok::<_, TransportError>(MemoryTransport::new())
    })
    .only(["round_trip", "no_such_test"])
    .exclude("round_trip", "the broker reorders on redelivery")
    .run()
    .await;
    assert_eq!(
        report.get("round_trip").map(|r| &r.outcome),
        Some(&TestOutcome::NotApplicable(
            "excluded: the broker reorders on redelivery".into()
        ))
    );
    let why = failure(&report, "(unknown test name)");
    assert!(why.contains("\"no_such_test\""), "{why}");
    assert_eq!(report.passed(), 0);
    // Every test of the battery is listed, plus the unknown name.
    assert_eq!(
        report.results().len(),
        babelqueue_testkit::tests().len() + 1
    );
}

#[tokio::test]
async fn a_failing_make_fails_every_test_that_runs() {
    let report = Suite::new(Features::new(), || async {
        Err::<MemoryTransport, _>("broker down")
    })
    .only(["round_trip", "pop_timeout"])
    .run()
    .await;
    assert_eq!(failure(&report, "round_trip"), "make() failed: broker down");
    assert_eq!(report.transport(), "(never connected)");
    let caught = std::panic::catch_unwind(|| report.assert_passed()).expect_err("it fails");
    let text = caught.downcast_ref::<String>().expect("a message");
    assert!(
        text.contains("--- pop_timeout ---\nmake() failed: broker down"),
        "{text}"
    );
}

#[tokio::test]
async fn shared_transports_run_too() {
    let memory: std::sync::Arc<dyn Transport> = std::sync::Arc::new(MemoryTransport::new());
    let report = Suite::shared(Features::new(), move || {
        let memory = memory.clone();
        async move { Ok::<_, TransportError>(memory) }
    })
    .only(["round_trip", "release_counts_attempts"])
    .run()
    .await;
    report.assert_passed();
    assert_eq!((report.passed(), report.transport()), (2, "memory"));
}
