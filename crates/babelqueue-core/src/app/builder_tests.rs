//! Settings and explicit builder calls: code wins, whatever the order.

use std::time::Duration;

use super::*;
use crate::MemoryTransport;

fn every_setting() -> Settings {
    Settings::from_vars([
        ("BABELQUEUE_QUEUE", "from-settings"),
        ("BABELQUEUE_MAX_ATTEMPTS", "7"),
        ("BABELQUEUE_DEAD_LETTER", "true"),
        ("BABELQUEUE_DEAD_LETTER_QUEUE", "settings.dlq"),
        ("BABELQUEUE_ON_UNKNOWN_URN", "delete"),
        ("BABELQUEUE_UNKNOWN_URN_RELEASE_DELAY", "4"),
        ("BABELQUEUE_RETRY_BACKOFF", "3"),
        ("BABELQUEUE_RETRY_BACKOFF_MULTIPLIER", "2"),
        ("BABELQUEUE_RETRY_BACKOFF_MAX", "50"),
        ("BABELQUEUE_RETRY_JITTER", "full"),
        ("BABELQUEUE_SHUTDOWN_TIMEOUT", "12"),
        ("BABELQUEUE_CONCURRENCY", "6"),
        ("BABELQUEUE_PREFETCH", "24"),
        ("BABELQUEUE_POLL_TIMEOUT", "0.5"),
        ("BABELQUEUE_REWIND_PAUSE", "2"),
    ])
    .unwrap()
    .settings
}

#[test]
fn settings_alone_configure_every_field() {
    let app = App::builder(MemoryTransport::new())
        .settings(every_setting())
        .build()
        .unwrap();
    let i = &app.inner;
    assert_eq!(i.queue, "from-settings");
    assert_eq!(i.policy.max_attempts, 7);
    assert!(i.policy.dead_letter);
    assert_eq!(i.policy.dead_letter_queue.as_deref(), Some("settings.dlq"));
    assert_eq!(i.policy.on_unknown_urn, UnknownUrn::Delete);
    assert_eq!(i.policy.unknown_urn_release_delay, Duration::from_secs(4));
    assert_eq!(
        i.policy.backoff,
        Backoff {
            base: 3.0,
            multiplier: 2.0,
            max: 50.0,
            jitter: Jitter::Full
        }
    );
    assert_eq!(i.shutdown_timeout, Duration::from_secs(12));
    assert_eq!(i.concurrency, 6);
    assert_eq!(i.prefetch, 24);
    assert_eq!(i.poll_timeout, Duration::from_millis(500));
    assert_eq!(i.rewind_pause, Duration::from_secs(2));
}

/// Every explicit call, applied to `builder`.
fn explicit(builder: AppBuilder) -> AppBuilder {
    builder
        .queue("from-code")
        .max_attempts(2)
        .dead_letter(false)
        .dead_letter_queue("code.dlq")
        .on_unknown_urn(UnknownUrn::Release)
        .unknown_urn_release_delay(Duration::from_secs(1))
        .retry_backoff(Duration::from_secs(1))
        .retry_backoff_multiplier(1.0)
        .retry_backoff_max(Duration::ZERO)
        .retry_jitter(Jitter::None)
        .shutdown_timeout(Duration::from_secs(5))
        .concurrency(2)
        .prefetch(2)
        .poll_timeout(Duration::from_secs(1))
        .rewind_pause(Duration::from_secs(1))
}

fn assert_code_won(app: &App) {
    let i = &app.inner;
    assert_eq!(i.queue, "from-code");
    assert_eq!(i.policy.max_attempts, 2);
    assert!(!i.policy.dead_letter);
    assert_eq!(i.policy.dead_letter_queue.as_deref(), Some("code.dlq"));
    assert_eq!(i.policy.on_unknown_urn, UnknownUrn::Release);
    assert_eq!(i.policy.unknown_urn_release_delay, Duration::from_secs(1));
    assert_eq!(
        i.policy.backoff,
        Backoff {
            base: 1.0,
            multiplier: 1.0,
            max: 0.0,
            jitter: Jitter::None
        }
    );
    assert_eq!(i.shutdown_timeout, Duration::from_secs(5));
    assert_eq!(i.concurrency, 2);
    assert_eq!(i.prefetch, 2);
    assert_eq!(i.poll_timeout, Duration::from_secs(1));
    assert_eq!(i.rewind_pause, Duration::from_secs(1));
}

#[test]
fn explicit_calls_win_over_settings_given_before_them() {
    let app = explicit(App::builder(MemoryTransport::new()).settings(every_setting()))
        .build()
        .unwrap();
    assert_code_won(&app);
}

#[test]
fn explicit_calls_win_over_settings_given_after_them() {
    let app = explicit(App::builder(MemoryTransport::new()))
        .settings(every_setting())
        .build()
        .unwrap();
    assert_code_won(&app);
}

#[test]
fn a_whole_policy_or_backoff_counts_as_explicit_for_its_fields() {
    let app = App::builder(MemoryTransport::new())
        .backoff(Backoff::default())
        .settings(every_setting())
        .build()
        .unwrap();
    assert_eq!(app.inner.policy.backoff, Backoff::default());
    assert_eq!(app.inner.policy.max_attempts, 7, "not a back-off field");
    let app = App::builder(MemoryTransport::new())
        .settings(every_setting())
        .policy(Policy::default())
        .build()
        .unwrap();
    assert_eq!(app.inner.policy, Policy::default());
    assert_eq!(app.inner.queue, "from-settings", "not a policy field");
}

#[test]
fn a_later_settings_call_wins_field_by_field() {
    let later = Settings::from_vars([("BABELQUEUE_QUEUE", "later")])
        .unwrap()
        .settings;
    let app = App::builder(MemoryTransport::new())
        .settings(every_setting())
        .settings(later)
        .build()
        .unwrap();
    assert_eq!(app.inner.queue, "later");
    assert_eq!(app.inner.policy.max_attempts, 7);
}

#[test]
fn a_dead_letter_queue_from_settings_equal_to_the_queue_is_still_refused() {
    let s = Settings::from_vars([
        ("BABELQUEUE_QUEUE", "orders"),
        ("BABELQUEUE_DEAD_LETTER_QUEUE", "orders"),
    ])
    .unwrap()
    .settings;
    let err = App::builder(MemoryTransport::new())
        .settings(s)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Config);
}
