//! The settle policy: retry budget, back-off, dead-lettering and the unknown-URN strategy.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What to do with a valid envelope whose URN has no handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum UnknownUrn {
    /// Treat it as a handler failure: retry up to `max_attempts`, then dead-letter or drop.
    #[default]
    Fail,
    /// Acknowledge and drop it.
    Delete,
    /// Give it back unchanged (attempts not counted), after `unknown_urn_release_delay`.
    Release,
    /// Dead-letter it at once (reason `unknown_urn`), even with dead-lettering off.
    DeadLetter,
}

impl UnknownUrn {
    /// The strategy's name shared by every SDK.
    pub fn as_str(self) -> &'static str {
        match self {
            UnknownUrn::Fail => "fail",
            UnknownUrn::Delete => "delete",
            UnknownUrn::Release => "release",
            UnknownUrn::DeadLetter => "dead_letter",
        }
    }
}

impl fmt::Display for UnknownUrn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for UnknownUrn {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fail" => Ok(UnknownUrn::Fail),
            "delete" => Ok(UnknownUrn::Delete),
            "release" => Ok(UnknownUrn::Release),
            "dead_letter" => Ok(UnknownUrn::DeadLetter),
            other => Err(crate::Error::Config(format!(
                "on_unknown_urn must be one of fail, delete, release, dead_letter; got {other:?}"
            ))),
        }
    }
}

/// Randomisation of the back-off delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Jitter {
    /// Exactly `d(n)`.
    #[default]
    None,
    /// Uniform in `[0, d(n)]`.
    Full,
}

impl FromStr for Jitter {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Jitter::None),
            "full" => Ok(Jitter::Full),
            other => Err(crate::Error::Config(format!(
                "retry_jitter must be none or full; got {other:?}"
            ))),
        }
    }
}

/// The worker-side retry back-off: `d(n) = base · multiplier^(n−1)`, capped at `max` when
/// `max > 0`, with `n` the new attempts value (1-based). Saturating: an absurd `n` gives the
/// cap (or an unbounded delay the transport clamps), never an overflow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Base delay, seconds.
    pub base: f64,
    /// Growth per attempt.
    pub multiplier: f64,
    /// Cap, seconds; 0 or less = no cap.
    pub max: f64,
    /// Jitter.
    pub jitter: Jitter,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: 0.0,
            multiplier: 1.0,
            max: 0.0,
            jitter: Jitter::None,
        }
    }
}

impl Backoff {
    /// `d(n)` in seconds before jitter.
    pub fn nominal_seconds(&self, n: i64) -> f64 {
        let exponent = n.max(1).saturating_sub(1);
        // Exponents beyond i32 make any multiplier other than 0/1 saturate anyway.
        let exponent = f64::from(i32::try_from(exponent).unwrap_or(i32::MAX));
        let mut delay = self.base * self.multiplier.powf(exponent);
        if delay.is_nan() {
            delay = 0.0;
        }
        if self.max > 0.0 {
            delay = delay.min(self.max);
        }
        delay.max(0.0)
    }

    /// The delay for attempt `n` in seconds, drawing jitter from `uniform(low, high)`.
    pub fn seconds_with(&self, n: i64, uniform: &mut (dyn FnMut(f64, f64) -> f64 + Send)) -> f64 {
        let delay = self.nominal_seconds(n);
        match self.jitter {
            Jitter::None => delay,
            Jitter::Full if delay <= 0.0 => 0.0,
            Jitter::Full => uniform(0.0, delay).clamp(0.0, delay),
        }
    }

    /// The delay for attempt `n`, with jitter from a thread-local generator.
    pub fn delay(&self, n: i64) -> Duration {
        let seconds = self.seconds_with(n, &mut |low, high| {
            // Inclusive of both bounds, so 0 and d(n) can both be drawn.
            low + (high - low)
                * (fastrand::u64(..=u64::from(u32::MAX)) as f64 / f64::from(u32::MAX))
        });
        seconds_to_duration(seconds)
    }
}

/// Seconds as a `Duration`, saturating (negative and NaN = 0, too large = `Duration::MAX`).
pub fn seconds_to_duration(seconds: f64) -> Duration {
    if seconds.is_nan() || seconds <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
    }
}

/// Everything the decision tables read from the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Total deliveries allowed, the first included (default 3).
    pub max_attempts: i64,
    /// Whether exhausted and poison messages go to a dead-letter queue (default off).
    pub dead_letter: bool,
    /// An explicit dead-letter queue (default: derived from the consumed queue).
    pub dead_letter_queue: Option<String>,
    /// The suffix appended to the consumed queue (unset = `.dlq`, or the transport's rule).
    pub dead_letter_suffix: Option<String>,
    /// The unknown-URN strategy.
    pub on_unknown_urn: UnknownUrn,
    /// Retry back-off.
    pub backoff: Backoff,
    /// The delay of the `release` strategy.
    pub unknown_urn_release_delay: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_attempts: 3,
            dead_letter: false,
            dead_letter_queue: None,
            dead_letter_suffix: None,
            on_unknown_urn: UnknownUrn::Fail,
            backoff: Backoff::default(),
            unknown_urn_release_delay: Duration::ZERO,
        }
    }
}

impl Policy {
    /// Whether a dead-letter write is wanted for exhausted or poison messages: dead-lettering is
    /// on, or the unknown-URN strategy is `dead_letter`.
    pub fn dlq_on(&self) -> bool {
        self.dead_letter || self.on_unknown_urn == UnknownUrn::DeadLetter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(base: f64, multiplier: f64, max: f64) -> Backoff {
        Backoff {
            base,
            multiplier,
            max,
            jitter: Jitter::None,
        }
    }

    #[test]
    fn formula_and_cap() {
        assert_eq!(b(0.5, 3.0, 0.0).nominal_seconds(3), 4.5);
        assert_eq!(b(2.0, 10.0, 0.0).nominal_seconds(4), 2000.0);
        assert_eq!(b(1.0, 2.0, 10.0).nominal_seconds(20), 10.0);
        assert_eq!(b(5.0, 1.0, 0.0).nominal_seconds(0), 5.0);
        assert_eq!(Backoff::default().nominal_seconds(7), 0.0);
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        assert_eq!(b(1.0, 10.0, 30.0).nominal_seconds(i64::MAX), 30.0);
        assert_eq!(b(1.0, 10.0, 0.0).nominal_seconds(i64::MAX), f64::INFINITY);
        assert_eq!(b(1.0, 10.0, 0.0).delay(i64::MAX), Duration::MAX);
        assert_eq!(b(1.0, 0.0, 0.0).nominal_seconds(5), 0.0);
        assert_eq!(seconds_to_duration(-3.0), Duration::ZERO);
    }

    #[test]
    fn full_jitter_stays_in_bounds() {
        let full = Backoff {
            jitter: Jitter::Full,
            ..b(1.0, 2.0, 0.0)
        };
        for _ in 0..1000 {
            let d = full.delay(3).as_secs_f64();
            assert!((0.0..=4.0).contains(&d));
        }
        assert_eq!(full.seconds_with(3, &mut |_, high| high), 4.0);
        assert_eq!(full.seconds_with(3, &mut |low, _| low), 0.0);
        assert_eq!(
            Backoff {
                jitter: Jitter::Full,
                ..Backoff::default()
            }
            .delay(1),
            Duration::ZERO
        );
    }

    #[test]
    fn strategy_names() {
        for s in ["fail", "delete", "release", "dead_letter"] {
            assert_eq!(s.parse::<UnknownUrn>().unwrap().as_str(), s);
        }
        assert!("drop".parse::<UnknownUrn>().is_err());
        assert!("half".parse::<Jitter>().is_err());
    }
}
