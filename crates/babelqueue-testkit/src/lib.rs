//! The BabelQueue transport contract suite: one battery of behavioural tests that every
//! [`Transport`](babelqueue_core::Transport) runs against its broker, and the helpers live tests
//! share.
//!
//! A transport author describes the broker with [`Features`], hands the suite a `make` function
//! that returns a fresh connected transport, and asserts the [`Report`]:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::time::Duration;
//! use babelqueue_core::{MemoryTransport, TransportError};
//! use babelqueue_testkit::{Features, Suite};
//!
//! // What the broker can do beyond what the transport declares (its headers and delays come
//! // from its capabilities). memory:// brings an unsettled delivery back after its visibility
//! // timeout; a live broker would say its own (SQS visibility, ASB lock, Redis retry_after).
//! let memory = MemoryTransport::with_visibility_timeout(Duration::from_millis(500));
//! let features = Features::new()
//!     .delayed_retry(true)
//!     .ordered(true)
//!     .redelivery_after(Duration::from_millis(500))
//!     .delay_tolerance(Duration::from_millis(500));
//!
//! // `make` is called once per test, and again to play a restarted worker or a second
//! // consumer: every transport it returns reaches the same broker.
//! let report = Suite::new(features, move || {
//!     let memory = memory.clone();
//!     async move { Ok::<_, TransportError>(memory) }
//! })
//! .run()
//! .await;
//!
//! // `{report}` prints one line per test: passed, FAILED with why, or n/a with why.
//! report.assert_passed();
//! assert_eq!(report.get("native_dead_letter").map(|t| t.outcome.label()), Some("n/a"));
//! # }
//! ```
//!
//! In a transport crate this is one `#[tokio::test(flavor = "multi_thread")]` behind the
//! broker check (see [`broker_or_skip`]); with a broker whose client is `RedisTransport`:
//!
//! ```no_run
//! # use std::time::Duration;
//! # use babelqueue_core::{MemoryTransport, TransportError};
//! # struct RedisTransport;
//! # impl RedisTransport {
//! #     async fn connect(_url: &str) -> Result<MemoryTransport, TransportError> {
//! #         Ok(MemoryTransport::new())
//! #     }
//! # }
//! use babelqueue_testkit::{Features, broker_or_skip, suite};
//!
//! const URL: &str = "redis://127.0.0.1:6379";
//!
//! // #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn redis_passes_the_contract_suite() {
//!     let Some(_) = broker_or_skip("Redis at 127.0.0.1:6379", RedisTransport::connect(URL)).await
//!     else {
//!         return; // printed `SKIPPED: …` (or failed, with BQ_REQUIRE_BROKERS set)
//!     };
//!     let features = Features::new()
//!         .delayed_retry(true)
//!         .ordered(true)
//!         .redelivery_after(Duration::from_secs(3));
//!     let report = suite(features, || RedisTransport::connect(URL)).await;
//!     println!("{report}");
//!     report.assert_passed();
//! }
//! # let _ = redis_passes_the_contract_suite();
//! ```
//!
//! # The battery
//!
//! [`tests`] lists every test, what it needs and what it checks. Every test is run or reported
//! as not applicable by name with the reason, never skipped silently; each runs in a task of its
//! own with a time budget ([`Features::budget`]), so a hung or panicking transport fails that
//! test and the run goes on. Tests go through the real runtime ([`App`](babelqueue_core::App))
//! wherever that is what a user sees (handlers, retries, dead-letter records, shutdown), and
//! through the [`Transport`](babelqueue_core::Transport) methods where the broker alone is
//! under test (bytes, timeouts, redelivery after a crash). Each test uses queues of its own
//! ([`unique_queue`]), so leftovers of one never reach another.
//!
//! # Helpers for live tests
//!
//! * [`broker_or_skip`] / [`skip_or_fail`]: with `BQ_REQUIRE_BROKERS` set an unreachable
//!   broker fails the test; without it the test prints `SKIPPED: …` and returns;
//! * [`ha_or_skip`] / [`skip_or_fail_ha`]: the same for an opt-in high-availability topology
//!   (a RabbitMQ cluster …), which fails the test only with `BQ_REQUIRE_HA` set;
//! * [`unique_queue`]: a queue name valid on every broker, unused by any other test;
//! * [`PythonPeer`]: the Python reference SDK (`BQ_PYTHON`) as an interop peer, run to
//!   completion or kept running, speaking JSON lines;
//! * [`free_port`] / [`on_free_port`]: a port for a server a test starts for itself, and a
//!   start that moves to another port when the first one was taken in the meantime.

mod battery;
mod cpu;
mod env;
mod features;
mod latency;
mod open_loop;
mod ports;
mod python;
pub mod reading;
mod report;
mod suite;
pub mod tls;

use std::time::Duration;

pub use cpu::{cpu_figure, cpu_time, thread_cpu_time};
pub use env::{
    BROKER_TIMEOUT, REQUIRE_BROKERS, REQUIRE_HA, broker_or_skip, broker_or_skip_within,
    brokers_required, ha_or_skip, ha_required, skip_or_fail, skip_or_fail_ha, unique_queue,
};
pub use features::{Features, MIB};
pub use latency::idle_to_handled;
pub use open_loop::{
    GROWTH_ALLOWED, OPEN_LOOP_LOADS, OPEN_LOOP_PASSES, OpenLoopHandled, OpenLoopProbe, OpenLoopRun,
    drive_open_loop, open_loop, open_loop_probe, python_open_loop, slowest, stamped,
};
pub use ports::{StartError, free_port, on_free_port, port_taken};
pub use python::{PYTHON_ENV, PeerProcess, PythonPeer, REFERENCE_SDK_VERSION, json_lines};
pub use report::{Report, TestOutcome, TestResult};
pub use suite::{Suite, TestInfo, suite, tests};

/// How early a delayed message, a retry or the shutdown deadline may fire (timer granularity):
/// 100 ms.
pub const EARLY_SLACK: Duration = Duration::from_millis(100);
