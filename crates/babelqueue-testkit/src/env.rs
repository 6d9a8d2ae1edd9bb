//! What every live test needs before it starts: the broker (or a loud skip) and queue names
//! nobody else uses.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The environment variable that turns a skip into a failure: when it is set to anything but
/// the empty string, a broker (or a peer SDK) the test needs must be there.
pub const REQUIRE_BROKERS: &str = "BQ_REQUIRE_BROKERS";

/// The environment variable that turns the skip of an opt-in high-availability topology (the
/// `ha` group of `scripts/brokers.sh`: a RabbitMQ cluster …, never started by a plain `up`)
/// into a failure, as [`REQUIRE_BROKERS`] does for the single brokers. [`REQUIRE_BROKERS`]
/// alone does not require them.
pub const REQUIRE_HA: &str = "BQ_REQUIRE_HA";

/// How long [`broker_or_skip`] waits for a connection.
pub const BROKER_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether unreachable brokers fail the tests ([`REQUIRE_BROKERS`] is set and not empty).
pub fn brokers_required() -> bool {
    std::env::var_os(REQUIRE_BROKERS).is_some_and(|v| !v.is_empty())
}

/// Says that `what` is unavailable: panics when [`brokers_required`], else prints
/// `SKIPPED: <what>` (captured by the test harness like any test output) and returns, so the
/// caller returns too.
///
/// ```
/// # if babelqueue_testkit::brokers_required() { return; }
/// babelqueue_testkit::skip_or_fail("Redis not reachable at redis://127.0.0.1:6379");
/// ```
#[track_caller]
#[allow(clippy::print_stdout)] // the skip line is the helper's whole point
pub fn skip_or_fail(what: impl fmt::Display) {
    assert!(
        !brokers_required(),
        "{what}, and {REQUIRE_BROKERS} is set: start it (scripts/brokers.sh up …) or unset {REQUIRE_BROKERS} to skip"
    );
    println!("SKIPPED: {what} (set {REQUIRE_BROKERS}=1 to fail instead)");
}

/// Whether an unavailable high-availability topology fails the tests ([`REQUIRE_HA`] is set and
/// not empty).
pub fn ha_required() -> bool {
    std::env::var_os(REQUIRE_HA).is_some_and(|v| !v.is_empty())
}

/// [`skip_or_fail`] for an opt-in high-availability topology: panics when [`ha_required`],
/// else prints `SKIPPED: <what>` and returns.
///
/// ```
/// # if babelqueue_testkit::ha_required() { return; }
/// babelqueue_testkit::skip_or_fail_ha("the RabbitMQ cluster (BQ_AMQP_CLUSTER_URL) is not set");
/// ```
#[track_caller]
#[allow(clippy::print_stdout)] // the skip line is the helper's whole point
pub fn skip_or_fail_ha(what: impl fmt::Display) {
    assert!(
        !ha_required(),
        "{what}, and {REQUIRE_HA} is set: start it (scripts/brokers.sh up <name>) or unset {REQUIRE_HA} to skip"
    );
    println!("SKIPPED: {what} (set {REQUIRE_HA}=1 to fail instead)");
}

/// [`broker_or_skip`] for an opt-in high-availability topology: `Some` with the connection, or
/// `None` after [`skip_or_fail_ha`].
#[track_caller]
pub fn ha_or_skip<T, E, F>(what: &str, connect: F) -> impl Future<Output = Option<T>>
where
    E: fmt::Display,
    F: Future<Output = Result<T, E>>,
{
    let caller = std::panic::Location::caller();
    let what = what.to_owned();
    async move {
        let why = match tokio::time::timeout(BROKER_TIMEOUT, connect).await {
            Ok(Ok(connected)) => return Some(connected),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {BROKER_TIMEOUT:?}"),
        };
        skip_or_fail_ha(format!("{what} is not reachable ({why}) [{caller}]"));
        None
    }
}

/// Connects with `connect`, waiting up to [`BROKER_TIMEOUT`]: `Some` with the connection, or
/// `None` after [`skip_or_fail`] when it fails or times out. `what` names the broker and where
/// it was looked for.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use babelqueue_core::{MemoryTransport, TransportError};
///
/// let Some(memory) = babelqueue_testkit::broker_or_skip("memory", async {
///     Ok::<_, TransportError>(MemoryTransport::new())
/// })
/// .await
/// else {
///     return; // printed `SKIPPED: …`
/// };
/// # drop(memory); }
/// ```
#[track_caller]
pub fn broker_or_skip<T, E, F>(what: &str, connect: F) -> impl Future<Output = Option<T>>
where
    E: fmt::Display,
    F: Future<Output = Result<T, E>>,
{
    broker_or_skip_within(what, BROKER_TIMEOUT, connect)
}

/// [`broker_or_skip`] with a timeout of your own.
#[track_caller]
pub fn broker_or_skip_within<T, E, F>(
    what: &str,
    timeout: Duration,
    connect: F,
) -> impl Future<Output = Option<T>>
where
    E: fmt::Display,
    F: Future<Output = Result<T, E>>,
{
    let caller = std::panic::Location::caller();
    let what = what.to_owned();
    async move {
        let why = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(connected)) => return Some(connected),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {timeout:?}"),
        };
        let message = format!("{what} is not reachable ({why}) [{caller}]");
        skip_or_fail(message);
        None
    }
}

/// A queue name no other test (of this run or an earlier one) uses: `bq-<label>-<random>-<n>`,
/// with `label` reduced to lowercase ASCII letters, digits and `-` (at most 32 of them), so it is
/// a valid name on every broker (SQS allows no dots; Kafka, Pulsar, Service Bus and Artemis
/// accept it too) and stays under 64 characters, leaving room for a dead-letter suffix.
///
/// ```
/// let a = babelqueue_testkit::unique_queue("Orders Created!");
/// let b = babelqueue_testkit::unique_queue("Orders Created!");
/// assert!(a.starts_with("bq-orders-created-"));
/// assert_ne!(a, b);
/// ```
pub fn unique_queue(label: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let mut clean = String::with_capacity(label.len());
    for c in label.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            clean.push(c);
        } else if !clean.ends_with('-') {
            clean.push('-');
        }
    }
    let clean: String = clean.trim_matches('-').chars().take(32).collect();
    let clean = clean.trim_end_matches('-');
    let label = if clean.is_empty() { "q" } else { clean };
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("bq-{label}-{:08x}-{n}", fastrand::u32(..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_are_clean_short_and_unique() {
        let long = unique_queue(&"x".repeat(100));
        assert!(long.len() < 64, "{long}");
        assert!(unique_queue("---").starts_with("bq-q-"));
        assert!(unique_queue("a.b_c").starts_with("bq-a-b-c-"));
        let name = unique_queue("ü/ß x");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{name}"
        );
        let names: std::collections::HashSet<String> =
            (0..1000).map(|_| unique_queue("t")).collect();
        assert_eq!(names.len(), 1000);
    }
}
