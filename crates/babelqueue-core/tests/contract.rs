//! The transport contract suite (`babelqueue-testkit`) against `memory://`: the in-process
//! transport passes every test whose feature it has, which also proves the suite itself.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only (the runtime's shutdown deadline starts on a signal alone).

#![allow(clippy::print_stdout)]

use std::time::Duration;

use babelqueue_core::{MemoryTransport, TransportError};
use babelqueue_testkit::{Features, Suite, TestOutcome};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_passes_the_contract_suite() {
    let visibility = Duration::from_millis(500);
    let memory = MemoryTransport::with_visibility_timeout(visibility);
    let features = Features::new()
        .delayed_retry(true)
        .ordered(true)
        .redelivery_after(visibility)
        .quiet_period(Duration::from_millis(300))
        .delay_probe(Duration::from_millis(500));
    let report = Suite::new(features, move || {
        let memory = memory.clone();
        async move { Ok::<_, TransportError>(memory) }
    })
    .run()
    .await;
    println!("{report}");
    report.assert_passed();

    // memory:// has no native dead-lettering and no broker delivery count: those two, and only
    // those, are not applicable.
    let not_applicable: Vec<&str> = report
        .results()
        .iter()
        .filter(|r| matches!(r.outcome, TestOutcome::NotApplicable(_)))
        .map(|r| r.name)
        .collect();
    assert_eq!(
        not_applicable,
        ["native_dead_letter", "native_redelivery_count"]
    );
    assert_eq!(report.results().len(), babelqueue_testkit::tests().len());
}
