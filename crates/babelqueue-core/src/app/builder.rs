//! Configuring an [`App`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use babelqueue_envelope::Message;

use super::consume::Stop;
use super::{App, Inner, Observer, SpanHook};
use crate::error::{Error, Result};
use crate::handler::{Context, Handler, HandlerError};
use crate::policy::{Backoff, Jitter, Policy, UnknownUrn};
use crate::settings::Settings;
use crate::transport::Transport;

/// The fields an explicit builder call set, so [`AppBuilder::settings`] never overrides them,
/// whichever comes first.
mod set {
    pub(super) const QUEUE: u32 = 1;
    pub(super) const MAX_ATTEMPTS: u32 = 1 << 1;
    pub(super) const DEAD_LETTER: u32 = 1 << 2;
    pub(super) const DEAD_LETTER_QUEUE: u32 = 1 << 3;
    pub(super) const DEAD_LETTER_SUFFIX: u32 = 1 << 4;
    pub(super) const ON_UNKNOWN_URN: u32 = 1 << 5;
    pub(super) const RELEASE_DELAY: u32 = 1 << 6;
    pub(super) const BACKOFF: u32 = 1 << 7;
    pub(super) const MULTIPLIER: u32 = 1 << 8;
    pub(super) const BACKOFF_MAX: u32 = 1 << 9;
    pub(super) const JITTER: u32 = 1 << 10;
    pub(super) const CONCURRENCY: u32 = 1 << 11;
    pub(super) const PREFETCH: u32 = 1 << 12;
    pub(super) const SHUTDOWN_TIMEOUT: u32 = 1 << 13;
    pub(super) const POLL_TIMEOUT: u32 = 1 << 14;
    pub(super) const REWIND_PAUSE: u32 = 1 << 15;
    pub(super) const ALL_BACKOFF: u32 = BACKOFF | MULTIPLIER | BACKOFF_MAX | JITTER;
    pub(super) const ALL_POLICY: u32 = MAX_ATTEMPTS
        | DEAD_LETTER
        | DEAD_LETTER_QUEUE
        | DEAD_LETTER_SUFFIX
        | ON_UNKNOWN_URN
        | RELEASE_DELAY
        | ALL_BACKOFF;
}

/// Configures an [`App`]. Defaults: queue `default`, `max_attempts` 3, dead-lettering off,
/// `on_unknown_urn` `fail`, no back-off, concurrency 1, `shutdown_timeout` 30 s.
#[must_use]
pub struct AppBuilder {
    transport: Arc<dyn Transport>,
    queue: String,
    policy: Policy,
    handlers: super::Handlers,
    fallback: Option<Arc<dyn Handler>>,
    concurrency: usize,
    prefetch: Option<usize>,
    shutdown_timeout: Duration,
    poll_timeout: Duration,
    rewind_pause: Duration,
    observer: Option<Arc<dyn Observer>>,
    span_hook: Option<Arc<dyn SpanHook>>,
    settings: Settings,
    explicit: u32,
}

impl fmt::Debug for AppBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppBuilder")
            .field("queue", &self.queue)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// `v` when the field is free of an explicit call.
fn pick<T>(free: bool, v: Option<T>) -> Option<T> {
    v.filter(|_| free)
}

impl AppBuilder {
    /// The default queue to publish to and consume from.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.explicit |= set::QUEUE;
        self.queue = queue.into();
        self
    }
    /// Total deliveries allowed, the first included (default 3; 1 or less = no retry).
    pub fn max_attempts(mut self, max: i64) -> Self {
        self.explicit |= set::MAX_ATTEMPTS;
        self.policy.max_attempts = max;
        self
    }
    /// Dead-letter exhausted and poison messages (default off).
    pub fn dead_letter(mut self, on: bool) -> Self {
        self.explicit |= set::DEAD_LETTER;
        self.policy.dead_letter = on;
        self
    }
    /// An explicit dead-letter queue.
    pub fn dead_letter_queue(mut self, queue: impl Into<String>) -> Self {
        self.explicit |= set::DEAD_LETTER_QUEUE;
        self.policy.dead_letter_queue = Some(queue.into());
        self
    }
    /// The dead-letter suffix (default `.dlq`, or the transport's own rule).
    pub fn dead_letter_suffix(mut self, suffix: impl Into<String>) -> Self {
        self.explicit |= set::DEAD_LETTER_SUFFIX;
        self.policy.dead_letter_suffix = Some(suffix.into());
        self
    }
    /// The unknown-URN strategy (default `fail`).
    pub fn on_unknown_urn(mut self, strategy: UnknownUrn) -> Self {
        self.explicit |= set::ON_UNKNOWN_URN;
        self.policy.on_unknown_urn = strategy;
        self
    }
    /// The delay of the `release` strategy (default 0).
    pub fn unknown_urn_release_delay(mut self, delay: Duration) -> Self {
        self.explicit |= set::RELEASE_DELAY;
        self.policy.unknown_urn_release_delay = delay;
        self
    }
    /// The retry back-off base (default 0: immediate).
    pub fn retry_backoff(mut self, base: Duration) -> Self {
        self.explicit |= set::BACKOFF;
        self.policy.backoff.base = base.as_secs_f64();
        self
    }
    /// The back-off multiplier (default 1: constant).
    pub fn retry_backoff_multiplier(mut self, multiplier: f64) -> Self {
        self.explicit |= set::MULTIPLIER;
        self.policy.backoff.multiplier = multiplier;
        self
    }
    /// The back-off cap (default 0: none).
    pub fn retry_backoff_max(mut self, max: Duration) -> Self {
        self.explicit |= set::BACKOFF_MAX;
        self.policy.backoff.max = max.as_secs_f64();
        self
    }
    /// The back-off jitter (default none).
    pub fn retry_jitter(mut self, jitter: Jitter) -> Self {
        self.explicit |= set::JITTER;
        self.policy.backoff.jitter = jitter;
        self
    }
    /// The whole back-off at once.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.explicit |= set::ALL_BACKOFF;
        self.policy.backoff = backoff;
        self
    }
    /// The whole policy at once.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.explicit |= set::ALL_POLICY;
        self.policy = policy;
        self
    }
    /// Handlers in flight at once per consume loop (default 1). The transport's prefetch (AMQP
    /// `basic_qos`, SQS batch size, Artemis link credit) follows it where the broker has one.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.explicit |= set::CONCURRENCY;
        self.concurrency = n;
        self
    }
    /// Deliveries the consume loop may hold at once, running or received and waiting for a
    /// handler slot. The default is `concurrency`, so nothing waits, unless the transport holds
    /// more per slot ([`Capabilities::prefetch_per_slot`](crate::Capabilities::prefetch_per_slot):
    /// RabbitMQ's and Redis's hold `4 × concurrency`; `.prefetch(concurrency)` turns that off).
    /// It asks the transport for as many as it has room for in one
    /// [`receive`](crate::Transport::receive). A transport's per-slot default is held only
    /// while handlers finish at once (their first poll completes them): while one waits (on
    /// I/O, a timer), the loop asks only for what fills its free slots, so a slow handler
    /// never has deliveries queued behind it. A prefetch set here is held whatever the
    /// handlers do.
    ///
    /// Above `concurrency`, fast handlers on a broker that hands out several messages per round
    /// trip need fewer round trips; but a received delivery waits for a slot while its broker
    /// lock (a visibility timeout, a Redis reservation) runs, so keep
    /// `prefetch / concurrency × handler time` well inside it. Deliveries still waiting at
    /// shutdown are released unchanged. Values below `concurrency` are raised to it.
    pub fn prefetch(mut self, n: usize) -> Self {
        self.explicit |= set::PREFETCH;
        self.prefetch = Some(n);
        self
    }
    /// How long a graceful shutdown waits for running handlers before releasing their
    /// messages unchanged (default 30 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.explicit |= set::SHUTDOWN_TIMEOUT;
        self.shutdown_timeout = timeout;
        self
    }
    /// How long one `pop` waits for a message (default 1 s).
    pub fn poll_timeout(mut self, timeout: Duration) -> Self {
        self.explicit |= set::POLL_TIMEOUT;
        self.poll_timeout = timeout;
        self
    }
    /// The pause after rewinding an unsettled message, so a broken DLQ is not hammered
    /// (default 1 s).
    pub fn rewind_pause(mut self, pause: Duration) -> Self {
        self.explicit |= set::REWIND_PAUSE;
        self.rewind_pause = pause;
        self
    }
    /// Takes every setting `settings` holds (from the environment, a TOML file: see
    /// [`Settings`]), except those an explicit call of this builder sets, before or after this
    /// one: code wins over configuration. A later `settings` call wins over an earlier one,
    /// field by field. `broker_url` is not read here (the builder already has its transport).
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings.over(std::mem::take(&mut self.settings));
        self
    }
    /// Applies the settings to the fields no explicit call set.
    fn apply_settings(&mut self) {
        let s = std::mem::take(&mut self.settings);
        let free = |flag: u32| self.explicit & flag == 0;
        let p = &mut self.policy;
        if let Some(v) = pick(free(set::MAX_ATTEMPTS), s.max_attempts) {
            p.max_attempts = v;
        }
        if let Some(v) = pick(free(set::DEAD_LETTER), s.dead_letter) {
            p.dead_letter = v;
        }
        if let Some(v) = pick(free(set::DEAD_LETTER_QUEUE), s.dead_letter_queue) {
            p.dead_letter_queue = Some(v);
        }
        if let Some(v) = pick(free(set::DEAD_LETTER_SUFFIX), s.dead_letter_suffix) {
            p.dead_letter_suffix = Some(v);
        }
        if let Some(v) = pick(free(set::ON_UNKNOWN_URN), s.on_unknown_urn) {
            p.on_unknown_urn = v;
        }
        if let Some(v) = pick(free(set::RELEASE_DELAY), s.unknown_urn_release_delay) {
            p.unknown_urn_release_delay = v;
        }
        if let Some(v) = pick(free(set::BACKOFF), s.retry_backoff) {
            p.backoff.base = v.as_secs_f64();
        }
        if let Some(v) = pick(free(set::MULTIPLIER), s.retry_backoff_multiplier) {
            p.backoff.multiplier = v;
        }
        if let Some(v) = pick(free(set::BACKOFF_MAX), s.retry_backoff_max) {
            p.backoff.max = v.as_secs_f64();
        }
        if let Some(v) = pick(free(set::JITTER), s.retry_jitter) {
            p.backoff.jitter = v;
        }
        if let Some(v) = pick(free(set::QUEUE), s.queue) {
            self.queue = v;
        }
        if let Some(v) = pick(free(set::CONCURRENCY), s.concurrency) {
            self.concurrency = v;
        }
        if let Some(v) = pick(free(set::PREFETCH), s.prefetch) {
            self.prefetch = Some(v);
        }
        if let Some(v) = pick(free(set::SHUTDOWN_TIMEOUT), s.shutdown_timeout) {
            self.shutdown_timeout = v;
        }
        if let Some(v) = pick(free(set::POLL_TIMEOUT), s.poll_timeout) {
            self.poll_timeout = v;
        }
        if let Some(v) = pick(free(set::REWIND_PAUSE), s.rewind_pause) {
            self.rewind_pause = v;
        }
    }
    /// Reports every settled delivery (and every publish) to `observer`. Several may be added
    /// (metrics and a tracer, say): each sees every call, in the order they were added.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(match self.observer.take() {
            Some(first) => Arc::new(super::Observers(vec![first, observer])),
            None => observer,
        });
        self
    }
    /// Shows every enabled delivery span (`babelqueue.handle`, see [`trace`](super::trace)) to
    /// `hook` before the handler runs in it; `babelqueue-otel`'s `TracingParent` gives the span
    /// its OpenTelemetry parent this way.
    pub fn span_hook(mut self, hook: impl SpanHook) -> Self {
        self.span_hook = Some(Arc::new(hook));
        self
    }
    /// Routes `urn` (matched exactly) to `handler`; a later registration replaces an earlier one.
    pub fn handle(mut self, urn: impl Into<String>, handler: impl Handler) -> Self {
        self.handlers.insert(urn.into(), Arc::new(handler));
        self
    }
    /// Handles every URN that has no handler of its own (tools, bridges, the CLI). With a
    /// fallback, a valid envelope is never an unknown URN; poison and gated deliveries still
    /// never reach a handler.
    pub fn handle_any(mut self, handler: impl Handler) -> Self {
        self.fallback = Some(Arc::new(handler));
        self
    }
    /// Routes `urn` to an already shared handler.
    pub fn handle_arc(mut self, urn: impl Into<String>, handler: Arc<dyn Handler>) -> Self {
        self.handlers.insert(urn.into(), handler);
        self
    }
    /// Routes [`Message::URN`] to a closure that receives `data` as an `M`.
    pub fn handle_message<M, F, Fut>(self, f: F) -> Self
    where
        M: Message + serde::de::DeserializeOwned + Send + 'static,
        F: Fn(M, Context) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
    {
        self.handle(M::URN, crate::handler::typed::<M, F, Fut>(f))
    }

    /// Checks the configuration and builds the app.
    pub fn build(mut self) -> Result<App> {
        self.apply_settings();
        let bad = |m: String| Err(Error::Config(m));
        if self.concurrency == 0 {
            return bad("concurrency must be at least 1".into());
        }
        if self.policy.dead_letter_suffix.as_deref() == Some("") {
            return bad("dead_letter_suffix is empty: the dead-letter queue would be the source queue itself".into());
        }
        if self.policy.dead_letter_queue.as_deref() == Some(self.queue.as_str()) {
            return bad(format!(
                "dead_letter_queue {:?} is the consumed queue itself",
                self.queue
            ));
        }
        let b = self.policy.backoff;
        for (name, v) in [
            ("retry_backoff", b.base),
            ("retry_backoff_multiplier", b.multiplier),
        ] {
            if !v.is_finite() || v < 0.0 {
                return bad(format!("{name} must be a finite number >= 0, got {v}"));
            }
        }
        if b.max.is_nan() {
            return bad("retry_backoff_max must be a number".into());
        }
        let prefetch = self
            .prefetch
            .unwrap_or_else(|| {
                let per_slot = self.transport.capabilities().default_prefetch_per_slot();
                self.concurrency.saturating_mul(per_slot)
            })
            .max(self.concurrency);
        let prefetch_follows_handlers = self.prefetch.is_none() && prefetch > self.concurrency;
        Ok(App {
            inner: Arc::new(Inner {
                transport: self.transport,
                queue: self.queue,
                policy: self.policy,
                handlers: self.handlers,
                fallback: self.fallback,
                concurrency: self.concurrency,
                prefetch,
                prefetch_follows_handlers,
                shutdown_timeout: self.shutdown_timeout,
                poll_timeout: self.poll_timeout,
                rewind_pause: self.rewind_pause,
                stop: Arc::new(Stop::default()),
                observer: self.observer,
                span_hook: self.span_hook,
            }),
        })
    }
}

impl App {
    /// Starts configuring an app over `transport`.
    pub fn builder(transport: impl Transport + 'static) -> AppBuilder {
        App::builder_arc(Arc::new(transport))
    }

    /// Starts configuring an app over a shared transport.
    pub fn builder_arc(transport: Arc<dyn Transport>) -> AppBuilder {
        AppBuilder {
            transport,
            queue: "default".into(),
            policy: Policy::default(),
            handlers: super::Handlers::default(),
            fallback: None,
            concurrency: 1,
            prefetch: None,
            shutdown_timeout: Duration::from_secs(30),
            poll_timeout: Duration::from_secs(1),
            rewind_pause: Duration::from_secs(1),
            observer: None,
            span_hook: None,
            settings: Settings::default(),
            explicit: 0,
        }
    }
}

#[cfg(test)]
#[path = "builder_tests.rs"]
mod tests;
