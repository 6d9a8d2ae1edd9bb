//! [`Report`]: what a suite run found, test by test.

use std::fmt;
use std::time::Duration;

/// How one test ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestOutcome {
    /// Every check held.
    Passed,
    /// A check failed (or the test timed out, or the transport panicked): why.
    Failed(String),
    /// The test was not run: why (a feature the broker lacks, a test excluded by its caller).
    NotApplicable(String),
}

impl TestOutcome {
    /// The short word of the report table: `passed`, `FAILED` or `n/a`.
    pub fn label(&self) -> &'static str {
        match self {
            TestOutcome::Passed => "passed",
            TestOutcome::Failed(_) => "FAILED",
            TestOutcome::NotApplicable(_) => "n/a",
        }
    }

    /// The failure message or the reason it was not applicable (`""` when it passed).
    pub fn detail(&self) -> &str {
        match self {
            TestOutcome::Passed => "",
            TestOutcome::Failed(why) | TestOutcome::NotApplicable(why) => why,
        }
    }
}

/// One test of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestResult {
    /// The test's name (see [`tests`](crate::tests)).
    pub name: &'static str,
    /// How it ended.
    pub outcome: TestOutcome,
    /// How long it ran (zero when it was not applicable).
    pub elapsed: Duration,
}

/// What a suite run found: every test of the battery, in order, passed, failed or not
/// applicable (never silently skipped).
///
/// `Display` prints a table; [`assert_passed`](Report::assert_passed) fails the calling test
/// with every failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    transport: String,
    results: Vec<TestResult>,
    elapsed: Duration,
}

impl Report {
    pub(crate) fn new(transport: String, results: Vec<TestResult>, elapsed: Duration) -> Report {
        Report {
            transport,
            results,
            elapsed,
        }
    }

    /// The transport's name ([`Transport::name`](babelqueue_core::Transport::name)), or
    /// `"(never connected)"` when `make` never succeeded.
    pub fn transport(&self) -> &str {
        &self.transport
    }

    /// Every test, in the order it ran.
    pub fn results(&self) -> &[TestResult] {
        &self.results
    }

    /// The result of the test called `name`.
    pub fn get(&self, name: &str) -> Option<&TestResult> {
        self.results.iter().find(|r| r.name == name)
    }

    /// The failed tests.
    pub fn failures(&self) -> impl Iterator<Item = &TestResult> {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, TestOutcome::Failed(_)))
    }

    /// How many tests passed.
    pub fn passed(&self) -> usize {
        self.count(|o| matches!(o, TestOutcome::Passed))
    }

    /// How many tests failed.
    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, TestOutcome::Failed(_)))
    }

    /// How many tests were not applicable.
    pub fn not_applicable(&self) -> usize {
        self.count(|o| matches!(o, TestOutcome::NotApplicable(_)))
    }

    /// Whether no test failed.
    pub fn is_success(&self) -> bool {
        self.failed() == 0
    }

    /// How long the whole run took.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// Panics with every failure (name and message) and the whole table when a test failed;
    /// returns quietly otherwise.
    #[track_caller]
    pub fn assert_passed(&self) {
        if self.is_success() {
            return;
        }
        let mut message = format!(
            "{} of {} contract tests failed for the {} transport:\n",
            self.failed(),
            self.results.len(),
            self.transport
        );
        for failure in self.failures() {
            message.push_str(&format!(
                "\n--- {} ---\n{}\n",
                failure.name,
                failure.outcome.detail()
            ));
        }
        message.push_str(&format!("\n{self}"));
        panic!("{message}");
    }

    fn count(&self, which: impl Fn(&TestOutcome) -> bool) -> usize {
        self.results.iter().filter(|r| which(&r.outcome)).count()
    }
}

fn millis(d: Duration) -> String {
    if d >= Duration::from_secs(10) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "babelqueue contract suite, {} transport: {} passed, {} failed, {} not applicable ({})",
            self.transport,
            self.passed(),
            self.failed(),
            self.not_applicable(),
            millis(self.elapsed)
        )?;
        let width = self
            .results
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            f,
            "  {:<width$}  {:<6}  {:>8}  detail",
            "test", "result", "time"
        )?;
        for r in &self.results {
            let time = match r.outcome {
                TestOutcome::NotApplicable(_) => "-".to_owned(),
                _ => millis(r.elapsed),
            };
            // One line per test: a multi-line failure shows its first line here (the whole
            // message is in `assert_passed` and in `results`).
            let detail = r.outcome.detail().lines().next().unwrap_or("");
            let line = format!(
                "  {:<width$}  {:<6}  {:>8}  {detail}",
                r.name,
                r.outcome.label(),
                time
            );
            writeln!(f, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report::new(
            "memory".into(),
            vec![
                TestResult {
                    name: "round_trip",
                    outcome: TestOutcome::Passed,
                    elapsed: Duration::from_millis(12),
                },
                TestResult {
                    name: "headers",
                    outcome: TestOutcome::NotApplicable("no headers".into()),
                    elapsed: Duration::ZERO,
                },
                TestResult {
                    name: "ordering",
                    outcome: TestOutcome::Failed("got [1, 0]\nmore".into()),
                    elapsed: Duration::from_secs(11),
                },
            ],
            Duration::from_secs(12),
        )
    }

    #[test]
    fn the_table_has_one_line_per_test() {
        let text = report().to_string();
        assert!(text.starts_with(
            "babelqueue contract suite, memory transport: 1 passed, 1 failed, 1 not applicable (12.0 s)"
        ));
        assert!(text.contains("round_trip  passed     12 ms"), "{text}");
        assert!(
            text.contains("headers     n/a            -  no headers"),
            "{text}"
        );
        assert!(
            text.contains("ordering    FAILED    11.0 s  got [1, 0]\n"),
            "{text}"
        );
        assert!(!text.contains("more"));
    }

    #[test]
    fn assert_passed_lists_every_failure() {
        let r = report();
        assert_eq!((r.passed(), r.failed(), r.not_applicable()), (1, 1, 1));
        assert_eq!(r.get("headers").map(|t| t.outcome.label()), Some("n/a"));
        let caught = std::panic::catch_unwind(|| r.assert_passed()).expect_err("it panics");
        let text = caught
            .downcast_ref::<String>()
            .expect("a formatted message");
        assert!(
            text.contains("--- ordering ---\ngot [1, 0]\nmore"),
            "{text}"
        );
    }
}
