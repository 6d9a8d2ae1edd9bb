//! [`Features`]: what the broker under test promises, and how patient the suite is with it.

use std::time::Duration;

/// One mebibyte: the size of the large-body test's message.
pub const MIB: usize = 1024 * 1024;

/// What the broker under test can do, and the timings the suite allows it.
///
/// [`Features::new`] promises nothing beyond the base contract (`publish`, `pop`, `ack`, bodies
/// of any bytes and of any size); each setter claims one more behaviour, and the tests that need
/// it run instead of being reported as not applicable. A claim is checked, not trusted: a
/// claimed behaviour the transport does not deliver fails its test, and a capability the
/// transport offers but the features do not claim fails `capabilities_declared`.
///
/// What the transport declares itself is not claimed again here: the headers and
/// delayed-publish tests run whenever its [`Sends`](babelqueue_core::Sends) declares headers or
/// delays. The features say only what capabilities cannot: timings, order, limits, quirks.
///
/// ```
/// use std::time::Duration;
/// use babelqueue_testkit::Features;
///
/// // A broker with delayed retries and a 30 s visibility timeout, that only carries text.
/// let features = Features::new()
///     .delayed_retry(true)
///     .redelivery_after(Duration::from_secs(30))
///     .binary_bodies(false)
///     .max_body_bytes(256 * 1024);
/// assert!(features.delayed_retry && features.redelivery_after.is_some());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Features {
    /// A retry with a back-off is delivered no earlier than the back-off (through the broker's
    /// own redelivery or a delayed copy).
    pub delayed_retry: bool,
    /// One consumer of one queue receives messages in the order they were published.
    pub ordered: bool,
    /// A redelivered message carries the broker's own delivery count
    /// ([`Facts::count`](babelqueue_core::Facts::count)): 0 (or none) on the first delivery,
    /// at least 1 on the next.
    pub native_redelivery_count: bool,
    /// A delivery left unsettled when its consumer goes away (the transport dropped, a new one
    /// made) is delivered again within this time: the visibility timeout, lock duration,
    /// `retry_after`, session timeout … `None` when the broker never redelivers it by itself.
    pub redelivery_after: Option<Duration>,
    /// The largest body the broker accepts, in bytes; `None` for no limit the suite needs to
    /// respect. The large-body test sends one [`MIB`] and runs only when it fits.
    pub max_body_bytes: Option<usize>,
    /// The broker carries any bytes, not only valid UTF-8 text (default `true`: the base
    /// contract; set `false` for a text-only broker such as SQS).
    pub binary_bodies: bool,
    /// How long a message that should arrive may take to arrive (default 10 s).
    pub receive_timeout: Duration,
    /// How long the suite watches for a message that must not arrive (default 1 s); the
    /// acknowledgement test watches for [`redelivery_after`](Features::redelivery_after) plus
    /// the tolerance instead, when that is set.
    pub quiet_period: Duration,
    /// The `pop` timeout the suite's consumers use (default 200 ms).
    pub poll_timeout: Duration,
    /// The delay the back-off and delayed-publish tests ask for (default 1 s).
    pub delay_probe: Duration,
    /// How late a delayed message, a retry or a redelivery may be (default 1 s); a delayed
    /// message may be early by at most [`EARLY_SLACK`](crate::EARLY_SLACK), plus
    /// [`delay_granularity`](Features::delay_granularity).
    pub delay_tolerance: Duration,
    /// The unit the broker schedules delays in, when it is coarser than the clock (default
    /// zero: a delay is kept to the millisecond). A broker that stores "available at" as a
    /// whole number of these units, counted from the current unit (Redis's Laravel layout:
    /// `floor(now) + ceil(delay)` epoch seconds, the cross-SDK score), makes a delayed message
    /// or a retry due up to one unit before the delay has fully passed; the delay tests allow
    /// that much more earliness. Use a [`delay_probe`](Features::delay_probe) of at least two
    /// units, so a delay that is not honoured at all still fails.
    pub delay_granularity: Duration,
    /// How long `make` may take to return a connected transport (default 10 s).
    pub connect_timeout: Duration,
    /// The time budget of one test (default 60 s, plus twice
    /// [`redelivery_after`](Features::redelivery_after)); a test still running then fails.
    pub test_timeout: Duration,
}

impl Default for Features {
    fn default() -> Self {
        Features::new()
    }
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident: $ty:ty) => {
        $(#[$doc])*
        #[must_use]
        pub fn $name(mut self, value: $ty) -> Features {
            self.$name = value;
            self
        }
    };
}

impl Features {
    /// The base contract only: no delayed retries, no ordering, no native dead-lettering
    /// or delivery count, no redelivery by the broker, no size limit, any bytes.
    pub fn new() -> Features {
        Features {
            delayed_retry: false,
            ordered: false,
            native_redelivery_count: false,
            redelivery_after: None,
            max_body_bytes: None,
            binary_bodies: true,
            receive_timeout: Duration::from_secs(10),
            quiet_period: Duration::from_secs(1),
            poll_timeout: Duration::from_millis(200),
            delay_probe: Duration::from_secs(1),
            delay_tolerance: Duration::from_secs(1),
            delay_granularity: Duration::ZERO,
            connect_timeout: Duration::from_secs(10),
            test_timeout: Duration::from_secs(60),
        }
    }

    setter!(
        /// Claims delayed retries ([`Features::delayed_retry`]).
        delayed_retry: bool
    );
    setter!(
        /// Claims order on one queue ([`Features::ordered`]).
        ordered: bool
    );
    setter!(
        /// Claims a native delivery count ([`Features::native_redelivery_count`]).
        native_redelivery_count: bool
    );
    setter!(
        /// Says which bodies the broker carries ([`Features::binary_bodies`]).
        binary_bodies: bool
    );
    setter!(
        /// Sets the arrival patience ([`Features::receive_timeout`]).
        receive_timeout: Duration
    );
    setter!(
        /// Sets the watch for absent messages ([`Features::quiet_period`]).
        quiet_period: Duration
    );
    setter!(
        /// Sets the consumers' `pop` timeout ([`Features::poll_timeout`]).
        poll_timeout: Duration
    );
    setter!(
        /// Sets the probe delay ([`Features::delay_probe`]).
        delay_probe: Duration
    );
    setter!(
        /// Sets how late a delayed delivery may be ([`Features::delay_tolerance`]).
        delay_tolerance: Duration
    );
    setter!(
        /// Sets the broker's delay unit ([`Features::delay_granularity`]).
        delay_granularity: Duration
    );
    setter!(
        /// Sets how long `make` may take ([`Features::connect_timeout`]).
        connect_timeout: Duration
    );
    setter!(
        /// Sets the budget of one test ([`Features::test_timeout`]).
        test_timeout: Duration
    );

    /// Claims that an unsettled delivery comes back within `after` once its consumer is gone
    /// ([`Features::redelivery_after`]).
    #[must_use]
    pub fn redelivery_after(mut self, after: Duration) -> Features {
        self.redelivery_after = Some(after);
        self
    }

    /// Sets the broker's body size limit ([`Features::max_body_bytes`]).
    #[must_use]
    pub fn max_body_bytes(mut self, max: usize) -> Features {
        self.max_body_bytes = Some(max);
        self
    }

    /// The earliest a message delayed by `delay` may arrive: `delay` less
    /// [`EARLY_SLACK`](crate::EARLY_SLACK) (timer granularity) and
    /// [`delay_granularity`](Features::delay_granularity) (the broker's delay unit).
    ///
    /// ```
    /// use std::time::Duration;
    /// use babelqueue_testkit::Features;
    ///
    /// let exact = Features::new();
    /// assert_eq!(exact.earliest(Duration::from_secs(1)), Duration::from_millis(900));
    /// let whole_seconds = Features::new().delay_granularity(Duration::from_secs(1));
    /// assert_eq!(whole_seconds.earliest(Duration::from_secs(2)), Duration::from_millis(900));
    /// ```
    pub fn earliest(&self, delay: Duration) -> Duration {
        delay
            .saturating_sub(crate::EARLY_SLACK)
            .saturating_sub(self.delay_granularity)
    }

    /// The budget of one test: [`test_timeout`](Features::test_timeout) plus twice
    /// [`redelivery_after`](Features::redelivery_after).
    pub fn budget(&self) -> Duration {
        let redelivery = self.redelivery_after.unwrap_or(Duration::ZERO);
        self.test_timeout
            .saturating_add(redelivery)
            .saturating_add(redelivery)
    }
}
