//! The settings table, row by row.

use std::time::Duration;

use super::*;
use crate::ErrorKind;

/// Whether a field holds what its variable said.
type Check = Box<dyn Fn(&Settings) -> bool>;

/// Every documented variable, a valid value, and the field it must set.
fn every_variable() -> Vec<(&'static str, &'static str, Check)> {
    vec![
        (
            "BABELQUEUE_URL",
            "redis://:secret@127.0.0.1:6379/0",
            Box::new(|s: &Settings| {
                s.broker_url.as_deref() == Some("redis://:secret@127.0.0.1:6379/0")
            }),
        ),
        (
            "BABELQUEUE_QUEUE",
            "orders",
            Box::new(|s: &Settings| s.queue.as_deref() == Some("orders")),
        ),
        (
            "BABELQUEUE_MAX_ATTEMPTS",
            "7",
            Box::new(|s: &Settings| s.max_attempts == Some(7)),
        ),
        (
            "BABELQUEUE_DEAD_LETTER",
            "yes",
            Box::new(|s: &Settings| s.dead_letter == Some(true)),
        ),
        (
            "BABELQUEUE_DEAD_LETTER_QUEUE",
            "orders.failed",
            Box::new(|s: &Settings| s.dead_letter_queue.as_deref() == Some("orders.failed")),
        ),
        (
            "BABELQUEUE_DEAD_LETTER_SUFFIX",
            ".dead",
            Box::new(|s: &Settings| s.dead_letter_suffix.as_deref() == Some(".dead")),
        ),
        (
            "BABELQUEUE_ON_UNKNOWN_URN",
            "dead_letter",
            Box::new(|s: &Settings| s.on_unknown_urn == Some(UnknownUrn::DeadLetter)),
        ),
        (
            "BABELQUEUE_UNKNOWN_URN_RELEASE_DELAY",
            "0.25",
            Box::new(|s: &Settings| {
                s.unknown_urn_release_delay == Some(Duration::from_millis(250))
            }),
        ),
        (
            "BABELQUEUE_RETRY_BACKOFF",
            "1.5",
            Box::new(|s: &Settings| s.retry_backoff == Some(Duration::from_millis(1500))),
        ),
        (
            "BABELQUEUE_RETRY_BACKOFF_MULTIPLIER",
            "2",
            Box::new(|s: &Settings| s.retry_backoff_multiplier == Some(2.0)),
        ),
        (
            "BABELQUEUE_RETRY_BACKOFF_MAX",
            "60",
            Box::new(|s: &Settings| s.retry_backoff_max == Some(Duration::from_secs(60))),
        ),
        (
            "BABELQUEUE_RETRY_JITTER",
            "full",
            Box::new(|s: &Settings| s.retry_jitter == Some(Jitter::Full)),
        ),
        (
            "BABELQUEUE_SHUTDOWN_TIMEOUT",
            "45",
            Box::new(|s: &Settings| s.shutdown_timeout == Some(Duration::from_secs(45))),
        ),
        (
            "BABELQUEUE_CONCURRENCY",
            "8",
            Box::new(|s: &Settings| s.concurrency == Some(8)),
        ),
        (
            "BABELQUEUE_PREFETCH",
            "32",
            Box::new(|s: &Settings| s.prefetch == Some(32)),
        ),
        (
            "BABELQUEUE_POLL_TIMEOUT",
            "0.5",
            Box::new(|s: &Settings| s.poll_timeout == Some(Duration::from_millis(500))),
        ),
        (
            "BABELQUEUE_REWIND_PAUSE",
            "2",
            Box::new(|s: &Settings| s.rewind_pause == Some(Duration::from_secs(2))),
        ),
    ]
}

#[test]
fn every_documented_variable_sets_its_field() {
    let rows = every_variable();
    assert_eq!(rows.len(), ROWS.len(), "one row per setting of the table");
    let vars: Vec<(&str, &str)> = rows.iter().map(|(k, v, _)| (*k, *v)).collect();
    let read = Settings::from_vars(vars).unwrap();
    assert!(read.unknown.is_empty(), "{:?}", read.unknown);
    for (name, value, check) in &rows {
        assert!(
            check(&read.settings),
            "{name}={value} did not set its field: {:?}",
            read.settings
        );
        // Each alone sets exactly its own field.
        let alone = Settings::from_vars([(name, value)]).unwrap().settings;
        assert!(check(&alone), "{name} alone");
        assert_ne!(alone, Settings::default(), "{name} alone");
    }
    // The table and the documentation name the same variables.
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/settings.md"
    ))
    .expect("docs/settings.md");
    for row in ROWS {
        assert!(
            doc.contains(&format!("`{}`", row.env)),
            "docs/settings.md lacks {}",
            row.env
        );
        assert!(
            doc.contains(&format!("`{}`", row.key)),
            "docs/settings.md lacks {}",
            row.key
        );
    }
}

#[test]
fn each_bad_value_is_refused_by_name_with_the_expected_form() {
    let bad = [
        (
            "BABELQUEUE_URL",
            "localhost:6379",
            "a broker URL such as redis://host:6379 or memory://",
        ),
        ("BABELQUEUE_QUEUE", "  ", "a queue name (not empty)"),
        ("BABELQUEUE_MAX_ATTEMPTS", "three", "a whole number ≥ 1"),
        (
            "BABELQUEUE_DEAD_LETTER",
            "maybe",
            "true or false (or 1/0, yes/no, on/off)",
        ),
        (
            "BABELQUEUE_DEAD_LETTER_QUEUE",
            "",
            "a queue name (not empty)",
        ),
        (
            "BABELQUEUE_DEAD_LETTER_SUFFIX",
            "",
            "a suffix such as .dlq (not empty)",
        ),
        (
            "BABELQUEUE_ON_UNKNOWN_URN",
            "ignore",
            "one of fail, delete, release, dead_letter",
        ),
        (
            "BABELQUEUE_UNKNOWN_URN_RELEASE_DELAY",
            "-1",
            "a number of seconds ≥ 0 (such as 30 or 0.5)",
        ),
        (
            "BABELQUEUE_RETRY_BACKOFF",
            "5s",
            "a number of seconds ≥ 0 (such as 30 or 0.5)",
        ),
        (
            "BABELQUEUE_RETRY_BACKOFF_MULTIPLIER",
            "NaN",
            "a number ≥ 0 (such as 2)",
        ),
        (
            "BABELQUEUE_RETRY_BACKOFF_MAX",
            "inf",
            "a number of seconds ≥ 0 (0: no cap)",
        ),
        ("BABELQUEUE_RETRY_JITTER", "half", "none or full"),
        (
            "BABELQUEUE_SHUTDOWN_TIMEOUT",
            "forever",
            "a number of seconds ≥ 0 (such as 30 or 0.5)",
        ),
        ("BABELQUEUE_CONCURRENCY", "0", "a whole number ≥ 1"),
        ("BABELQUEUE_PREFETCH", "-4", "a whole number ≥ 1"),
        (
            "BABELQUEUE_POLL_TIMEOUT",
            "1e400",
            "a number of seconds ≥ 0 (such as 30 or 0.5)",
        ),
        (
            "BABELQUEUE_REWIND_PAUSE",
            "soon",
            "a number of seconds ≥ 0 (such as 30 or 0.5)",
        ),
    ];
    assert_eq!(bad.len(), ROWS.len(), "one bad value per setting");
    for (name, value, expected) in bad {
        let err = Settings::from_vars([(name, value)]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{name}");
        assert_eq!(
            err.to_string(),
            format!("{name}: expected {expected}, got {value:?}"),
            "{name}"
        );
        match err {
            Error::Setting { name: got, .. } => assert_eq!(got, name),
            other => panic!("{name}: {other:?}"),
        }
    }
    assert_eq!(
        Settings::from_vars([("BABELQUEUE_MAX_ATTEMPTS", "three")])
            .unwrap_err()
            .to_string(),
        r#"BABELQUEUE_MAX_ATTEMPTS: expected a whole number ≥ 1, got "three""#
    );
}

#[test]
fn a_password_never_reaches_an_error_or_debug() {
    let err = Settings::from_vars([("BABELQUEUE_URL", "redis//:hunter2@host")]).unwrap_err();
    assert!(!err.to_string().contains("hunter2"), "{err}");
    let read = Settings::from_vars([("BABELQUEUE_URL", "redis://:hunter2@host:6379")]).unwrap();
    let debug = format!("{:?}", read.settings);
    assert!(
        !debug.contains("hunter2") && debug.contains("host:6379"),
        "{debug}"
    );
}

#[test]
fn unknown_prefixed_variables_are_reported_and_others_ignored() {
    let read = Settings::from_vars([
        ("BABELQUEUE_MAX_ATTEMPT", "4"),
        ("BABELQUEUE_LOG", "debug"),
        ("BABELQUEUE_CONFIG", "/etc/bq.toml"),
        ("PATH", "/usr/bin"),
        ("BABELQUEUE_QUEUE", "orders"),
        ("BABELQUEUE_COLOR", "blue"),
    ])
    .unwrap();
    assert_eq!(read.unknown, ["BABELQUEUE_COLOR", "BABELQUEUE_MAX_ATTEMPT"]);
    assert_eq!(read.settings.queue.as_deref(), Some("orders"));
    assert_eq!(
        read.settings.max_attempts, None,
        "a misspelt name sets nothing"
    );
}

#[test]
fn a_toml_file_reads_every_key_like_its_variable() {
    let text = r#"
broker_url = "memory://"
queue = "orders"
max_attempts = 4
dead_letter = true
dead_letter_queue = "orders.failed"
dead_letter_suffix = ".dead"
on_unknown_urn = "release"
unknown_urn_release_delay = 0.5
retry_backoff = 2
retry_backoff_multiplier = 1.5
retry_backoff_max = 30.0
retry_jitter = "full"
shutdown_timeout = 10
concurrency = 4
prefetch = 16
poll_timeout = 0.25
rewind_pause = 3
"#;
    let s = Settings::from_toml(text).unwrap();
    assert_eq!(s.broker_url.as_deref(), Some("memory://"));
    assert_eq!(s.queue.as_deref(), Some("orders"));
    assert_eq!(s.max_attempts, Some(4));
    assert_eq!(s.dead_letter, Some(true));
    assert_eq!(s.dead_letter_queue.as_deref(), Some("orders.failed"));
    assert_eq!(s.dead_letter_suffix.as_deref(), Some(".dead"));
    assert_eq!(s.on_unknown_urn, Some(UnknownUrn::Release));
    assert_eq!(
        s.unknown_urn_release_delay,
        Some(Duration::from_millis(500))
    );
    assert_eq!(s.retry_backoff, Some(Duration::from_secs(2)));
    assert_eq!(s.retry_backoff_multiplier, Some(1.5));
    assert_eq!(s.retry_backoff_max, Some(Duration::from_secs(30)));
    assert_eq!(s.retry_jitter, Some(Jitter::Full));
    assert_eq!(s.shutdown_timeout, Some(Duration::from_secs(10)));
    assert_eq!(s.concurrency, Some(4));
    assert_eq!(s.prefetch, Some(16));
    assert_eq!(s.poll_timeout, Some(Duration::from_millis(250)));
    assert_eq!(s.rewind_pause, Some(Duration::from_secs(3)));
    // The same text through serde (any self-describing format reads the same way).
    let via_serde: Settings = toml::from_str(text).unwrap();
    assert_eq!(via_serde, s);
}

#[test]
fn a_bad_file_names_the_key_and_an_unknown_key_is_an_error() {
    let err = Settings::from_toml("max_attempts = 0").unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"max_attempts: expected a whole number ≥ 1, got "0""#
    );
    let err = Settings::from_toml("dead_letter = \"perhaps\"").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("dead_letter: expected true or false"),
        "{err}"
    );
    let err = Settings::from_toml("queue = [\"a\"]").unwrap_err();
    assert!(
        err.to_string().starts_with("queue: expected a queue name"),
        "{err}"
    );
    let err = Settings::from_toml("max_attempt = 3").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(
        err.to_string().contains("unknown setting `max_attempt`"),
        "{err}"
    );
    let err = Settings::from_toml("queue = ").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid configuration: settings file:"),
        "{err}"
    );
    let dir = std::env::temp_dir().join(format!("bq-settings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("worker.toml");
    std::fs::write(&file, "concurrency = \"many\"\n").unwrap();
    let err = Settings::from_toml_file(&file).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            r#"{}: concurrency: expected a whole number ≥ 1, got "many""#,
            file.display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_environment_wins_over_the_file_field_by_field() {
    let file = Settings::from_toml("queue = \"from-file\"\nmax_attempts = 9\n").unwrap();
    let env = Settings::from_vars([("BABELQUEUE_QUEUE", "from-env")])
        .unwrap()
        .settings;
    let s = env.over(file);
    assert_eq!(s.queue.as_deref(), Some("from-env"));
    assert_eq!(
        s.max_attempts,
        Some(9),
        "the file fills what the environment leaves"
    );
}
