//! [`Suite`]: runs the battery against a transport, test by test, each bounded in time.

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::Transport;

use crate::battery::{self, Ctx, Stop};
use crate::features::Features;
use crate::report::{Report, TestOutcome, TestResult};

/// A boxed, sendable future (what the suite stores `make` as).
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// `make`, type-erased: a fresh connected transport, or why not.
pub(crate) type Make = Arc<dyn Fn() -> BoxFuture<Result<Arc<dyn Transport>, String>> + Send + Sync>;

/// One test of the battery, as [`tests`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestInfo {
    /// Its name, as the report shows it and [`Suite::only`] / [`Suite::exclude`] take it.
    pub name: &'static str,
    /// What it needs to run (`-` for the base contract).
    pub needs: &'static str,
    /// What it checks.
    pub checks: &'static str,
}

/// Every test of the battery, in the order a run reports them.
///
/// ```
/// let names: Vec<&str> = babelqueue_testkit::tests().iter().map(|t| t.name).collect();
/// assert!(names.contains(&"round_trip"));
/// assert!(names.contains(&"graceful_shutdown"));
/// ```
pub fn tests() -> &'static [TestInfo] {
    battery::info()
}

/// Runs the whole battery against the transports `make` builds, with what `features` says the
/// broker can do, and reports every test; the shorthand of [`Suite::new`] + [`Suite::run`].
///
/// `make` returns a fresh connected transport each time it is called: each test makes its own,
/// and calls it again to play a restarted worker or a second consumer. The transports it
/// returns must reach the same broker (for `memory://`, clones of one
/// [`MemoryTransport`](babelqueue_core::MemoryTransport)). The [crate example](crate) runs it.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use babelqueue_core::{MemoryTransport, TransportError};
/// use babelqueue_testkit::{Features, suite};
///
/// let memory = MemoryTransport::with_visibility_timeout(Duration::from_millis(500));
/// let features = Features::new()
///     .delayed_retry(true)
///     .ordered(true)
///     .redelivery_after(Duration::from_millis(500));
/// let report = suite(features, move || {
///     let memory = memory.clone();
///     async move { Ok::<_, TransportError>(memory) }
/// })
/// .await;
/// assert!(report.get("round_trip").is_some());
/// # }
/// ```
pub async fn suite<T, E, F, Fut>(features: Features, make: F) -> Report
where
    T: Transport + 'static,
    E: fmt::Display,
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
{
    Suite::new(features, make).run().await
}

/// A configured run of the battery: which transport, what it can do, which tests.
///
/// Every test of [`tests`] appears in the [`Report`]: run, or not applicable with the reason
/// (a feature the broker lacks, [`exclude`](Suite::exclude)d, not selected by
/// [`only`](Suite::only)). Tests run one after the other, each in a task of its own under
/// [`Features::budget`]: a test that hangs or panics fails, and the run goes on.
///
/// Needs a Tokio runtime with time and I/O enabled (`#[tokio::test]` has both); a current-thread
/// runtime will do.
#[must_use]
pub struct Suite {
    features: Features,
    make: Make,
    excluded: Vec<(String, String)>,
    only: Option<BTreeSet<String>>,
    signals: bool,
}

impl fmt::Debug for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Suite")
            .field("features", &self.features)
            .field("excluded", &self.excluded)
            .field("only", &self.only)
            .field("signals", &self.signals)
            .finish_non_exhaustive()
    }
}

impl Suite {
    /// A run against the transports `make` builds (see [`suite`]).
    pub fn new<T, E, F, Fut>(features: Features, make: F) -> Suite
    where
        T: Transport + 'static,
        E: fmt::Display,
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        let make = Arc::new(make);
        Suite::erased(
            features,
            Arc::new(move || {
                let made = make();
                Box::pin(async move {
                    made.await
                        .map(|t| Arc::new(t) as Arc<dyn Transport>)
                        .map_err(|e| e.to_string())
                }) as BoxFuture<_>
            }),
        )
    }

    /// A run against transports `make` returns already shared, such as
    /// `babelqueue::connect(url)`.
    pub fn shared<E, F, Fut>(features: Features, make: F) -> Suite
    where
        E: fmt::Display,
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Arc<dyn Transport>, E>> + Send + 'static,
    {
        let make = Arc::new(make);
        Suite::erased(
            features,
            Arc::new(move || {
                let made = make();
                Box::pin(async move { made.await.map_err(|e| e.to_string()) }) as BoxFuture<_>
            }),
        )
    }

    fn erased(features: Features, make: Make) -> Suite {
        Suite {
            features,
            make,
            excluded: Vec::new(),
            only: None,
            signals: cfg!(unix),
        }
    }

    /// Does not run the test `name`; the report lists it as not applicable with `reason` (a
    /// known broker limitation, a tracking issue). An unknown name is a failed row of its own.
    pub fn exclude(mut self, name: &str, reason: &str) -> Suite {
        self.excluded.push((name.to_owned(), reason.to_owned()));
        self
    }

    /// Runs only the tests named (while working on one); the others are listed as not
    /// applicable. An unknown name is a failed row of its own.
    pub fn only<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Suite {
        self.only = Some(names.into_iter().map(str::to_owned).collect());
        self
    }

    /// Whether `graceful_shutdown` may send SIGTERM to this process (default: on Unix). The
    /// runtime starts its shutdown deadline only on a signal, so the test signals its own
    /// process; every consume loop of the process that handles signals stops too, so turn this
    /// off when such loops run in parallel with the suite (the test is then not applicable).
    pub fn signals(mut self, allowed: bool) -> Suite {
        self.signals = allowed;
        self
    }

    /// Runs the battery and reports every test.
    pub async fn run(self) -> Report {
        let started = Instant::now();
        let transport_name: Arc<Mutex<Option<&'static str>>> = Arc::default();
        let mut results = Vec::new();
        let known: BTreeSet<&str> = battery::info().iter().map(|t| t.name).collect();
        let unknown = self
            .excluded
            .iter()
            .map(|(name, _)| name.as_str())
            .chain(self.only.iter().flatten().map(String::as_str))
            .filter(|name| !known.contains(name))
            .collect::<BTreeSet<_>>();
        for name in unknown {
            results.push(TestResult {
                name: "(unknown test name)",
                outcome: TestOutcome::Failed(format!(
                    "Suite::exclude/only named {name:?}, which is not a test of the battery"
                )),
                elapsed: Duration::ZERO,
            });
        }
        for test in battery::TESTS {
            let name = test.info.name;
            let excluded = self.excluded.iter().find(|(n, _)| n == name);
            let skipped = if let Some((_, reason)) = excluded {
                Some(format!("excluded: {reason}"))
            } else if self.only.as_ref().is_some_and(|only| !only.contains(name)) {
                Some("not selected (Suite::only)".to_owned())
            } else if name == "graceful_shutdown" && !self.signals {
                Some(if cfg!(unix) {
                    "Suite::signals(false): the test would send SIGTERM to this process".to_owned()
                } else {
                    "needs Unix signals (the runtime starts its shutdown deadline on a signal)"
                        .to_owned()
                })
            } else {
                (test.applies)(&self.features).err()
            };
            if let Some(reason) = skipped {
                results.push(TestResult {
                    name,
                    outcome: TestOutcome::NotApplicable(reason),
                    elapsed: Duration::ZERO,
                });
                continue;
            }
            let ctx = Arc::new(Ctx::new(
                name,
                self.features.clone(),
                self.make.clone(),
                transport_name.clone(),
            ));
            let budget = self.features.budget();
            let began = Instant::now();
            let mut task = tokio::spawn((test.run)(ctx));
            let outcome = match tokio::time::timeout(budget, &mut task).await {
                Ok(Ok(Ok(()))) => TestOutcome::Passed,
                Ok(Ok(Err(Stop::Fail(why)))) => TestOutcome::Failed(why),
                Ok(Ok(Err(Stop::NotApplicable(why)))) => TestOutcome::NotApplicable(why),
                Ok(Err(e)) if e.is_panic() => {
                    TestOutcome::Failed(format!("panicked: {}", panic_text(&*e.into_panic())))
                }
                Ok(Err(e)) => TestOutcome::Failed(format!("the test task ended abnormally: {e}")),
                Err(_) => {
                    task.abort();
                    TestOutcome::Failed(format!(
                        "timed out after {budget:?} (Features::test_timeout + 2 × redelivery_after): \
                         a transport call never returned, or a message never came"
                    ))
                }
            };
            results.push(TestResult {
                name,
                outcome,
                elapsed: began.elapsed(),
            });
        }
        let name = transport_name
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or("(never connected)")
            .to_owned();
        Report::new(name, results, started.elapsed())
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned())
}
