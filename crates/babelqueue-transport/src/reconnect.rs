//! The pause between a transport's reconnect attempts: exponential, capped, with jitter.
//!
//! Transports that hold a connection (RabbitMQ, Artemis) wait between failed attempts so a
//! broker that is down, or that closes every fresh connection, meets a growing pause instead of
//! a reconnect storm. It lives in the contract, beside [`TransportError`](crate::TransportError),
//! because transports need it and must not depend on the runtime; the runtime's own retry
//! back-off (`babelqueue_core::Backoff`) is a different thing, the delay before a failed
//! message is handled again, set by the application.

use std::time::Duration;

/// Exponential back-off with jitter between reconnect attempts.
///
/// After `failures` consecutive failed attempts the next one waits [`ceiling`](Self::ceiling)
/// — `min`, doubled for every failure after the first, never above `max` — times a factor drawn
/// uniformly from [50 %, 100 %], so a fleet of workers does not reconnect in lock step after a
/// broker restart.
///
/// ```
/// use std::time::Duration;
///
/// use babelqueue_transport::ReconnectBackoff;
///
/// let backoff = ReconnectBackoff::new(Duration::from_millis(100), Duration::from_secs(5));
/// assert_eq!(backoff.ceiling(1), Duration::from_millis(100));
/// assert_eq!(backoff.ceiling(4), Duration::from_millis(800));
/// assert_eq!(backoff.ceiling(10), Duration::from_secs(5));
/// let pause = backoff.pause(4);
/// assert!(pause >= Duration::from_millis(400) && pause <= Duration::from_millis(800));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectBackoff {
    min: Duration,
    max: Duration,
}

/// The largest doubling: beyond 2^30 times `min` the pause is `max` for any sensible bounds,
/// and the exponent must stay small enough to compute.
const MAX_DOUBLINGS: u32 = 30;

impl ReconnectBackoff {
    /// Pauses from `min` (after the first failure) up to `max`; a `max` below `min` is `min`.
    pub const fn new(min: Duration, max: Duration) -> ReconnectBackoff {
        let max = if max.as_nanos() < min.as_nanos() {
            min
        } else {
            max
        };
        ReconnectBackoff { min, max }
    }

    /// The pause after the first failure.
    pub const fn min(&self) -> Duration {
        self.min
    }

    /// The longest pause.
    pub const fn max(&self) -> Duration {
        self.max
    }

    /// The longest pause after `failures` consecutive failed attempts, before jitter: `min`
    /// doubled `failures - 1` times, capped at `max` (no failure yet counts as one).
    pub fn ceiling(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(MAX_DOUBLINGS);
        self.min.saturating_mul(1 << doublings).min(self.max)
    }

    /// The pause after `failures` consecutive failed attempts, jittered.
    pub fn pause(&self, failures: u32) -> Duration {
        self.pause_at(failures, fastrand::f64())
    }

    /// The pause after `failures` consecutive failed attempts for the jitter draw `unit`
    /// (in `[0, 1)`): `unit` 0 is half the [`ceiling`](Self::ceiling), 1 the whole of it.
    pub fn pause_at(&self, failures: u32, unit: f64) -> Duration {
        self.ceiling(failures).mul_f64(0.5 + 0.5 * unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RabbitMQ transport's pause before this helper, computed in seconds.
    fn amqp_before(min: Duration, max: Duration, failures: u32, unit: f64) -> Duration {
        let min = min.as_secs_f64();
        let max = max.as_secs_f64();
        let exp = min
            * 2f64.powi(
                i32::try_from(failures.saturating_sub(1))
                    .unwrap_or(30)
                    .min(30),
            );
        let capped = exp.min(max);
        Duration::from_secs_f64(capped * (0.5 + 0.5 * unit))
    }

    /// The Artemis transport's send loop before this helper: the pause of its `failures`th
    /// retry, and the un-jittered back-off it checked its deadline against.
    fn artemis_before(
        min: Duration,
        max: Duration,
        failures: u32,
        unit: f64,
    ) -> (Duration, Duration) {
        let mut backoff = min;
        for _ in 1..failures {
            backoff = (backoff * 2).min(max);
        }
        (backoff.mul_f64(0.5 + 0.5 * unit), backoff)
    }

    #[test]
    fn the_pauses_are_the_ones_both_transports_computed_before() {
        let mut rng = fastrand::Rng::with_seed(7);
        let bounds = [
            (100, 5_000), // RabbitMQ's defaults
            (100, 2_000), // Artemis's
            (10, 40),
            (10, 20),
            (50, 400),
            (1, 10_000),
            (333, 100_000),
        ];
        for (min, max) in bounds {
            let (min, max) = (Duration::from_millis(min), Duration::from_millis(max));
            let backoff = ReconnectBackoff::new(min, max);
            for failures in 1..40 {
                for unit in [0.0, 0.5, 0.999_999_999]
                    .into_iter()
                    .chain(std::iter::repeat_with(|| rng.f64()).take(500))
                {
                    let pause = backoff.pause_at(failures, unit);
                    assert_eq!(pause, amqp_before(min, max, failures, unit));
                    let (artemis_pause, artemis_ceiling) = artemis_before(min, max, failures, unit);
                    assert_eq!(pause, artemis_pause);
                    assert_eq!(backoff.ceiling(failures), artemis_ceiling);
                }
            }
        }
    }

    #[test]
    fn pauses_double_from_min_to_max_within_half_to_all_of_the_ceiling() {
        let backoff = ReconnectBackoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let ceilings: Vec<u128> = (0..8).map(|f| backoff.ceiling(f).as_millis()).collect();
        assert_eq!(ceilings, [100, 100, 200, 400, 800, 1_600, 2_000, 2_000]);
        assert_eq!(backoff.ceiling(u32::MAX), Duration::from_secs(2));
        assert_eq!(backoff.pause_at(3, 0.0), Duration::from_millis(200));
        for _ in 0..1_000 {
            let pause = backoff.pause(3);
            assert!(pause >= Duration::from_millis(200) && pause <= Duration::from_millis(400));
        }
    }

    #[test]
    fn a_max_below_min_is_min() {
        let backoff = ReconnectBackoff::new(Duration::from_secs(1), Duration::from_millis(10));
        assert_eq!(backoff.max(), Duration::from_secs(1));
        assert_eq!(backoff.ceiling(5), Duration::from_secs(1));
        let huge = ReconnectBackoff::new(Duration::from_secs(u64::MAX / 2), Duration::MAX);
        assert_eq!(huge.ceiling(40), Duration::MAX);
    }
}
