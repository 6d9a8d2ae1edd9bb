#![allow(clippy::print_stdout)]

//! The `babelqueue` binary, run as a user runs it (broker-free commands; the broker commands
//! are exercised by each transport crate's live tests).

use crate::common;

use common::{babelqueue, printed, stdout};

#[test]
fn demo_shows_a_retry_and_a_dead_letter_in_plain_words() {
    let out = babelqueue(&["demo"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    for fragment in [
        "handled order 1042",
        "given back to the queue for another try",
        "handled on delivery 2",
        "never reached a handler: dead-lettered with its bytes intact",
        "dead-lettered (reason failed)",
        "holds 2 record(s)",
        "reason failed: urn:babel:emails:send (attempts 3, error: smtp relay is down)",
        "nothing lost",
    ] {
        assert!(text.contains(fragment), "missing {fragment:?} in:\n{text}");
    }
}

#[test]
fn inspect_reports_verdicts_and_the_normalised_envelope() {
    let ok = babelqueue(
        &["inspect"],
        Some(br#"{"urn":"urn:x","timestamp":1,"attempts":0}"#),
    );
    assert!(ok.status.success());
    let line: serde_json::Value = serde_json::from_str(stdout(&ok).trim()).unwrap();
    assert_eq!(line["verdict"], "ok");
    assert_eq!(line["urn"], "urn:x");
    assert_eq!(
        line["envelope"],
        serde_json::json!({"attempts": 0, "job": "urn:x"})
    );
    assert_eq!(line["warnings"].as_array().unwrap().len(), 1);

    assert_eq!(ok.status.code(), Some(0));
    let poison = babelqueue(&["inspect"], Some(br#"{"job":"urn:x","attempts":1.0}"#));
    assert_eq!(
        poison.status.code(),
        Some(3),
        "a poison body exits 3: {}",
        printed(&poison)
    );
    let line: serde_json::Value = serde_json::from_str(stdout(&poison).trim()).unwrap();
    assert_eq!(line["verdict"], "poison");
    assert!(line["poison_cause"].as_str().unwrap().contains("attempts"));

    let table = babelqueue(
        &["inspect", "--output", "human"],
        Some(br#"{"job":"urn:x","attempts":1.0}"#),
    );
    assert_eq!(table.status.code(), Some(3));
    let text = stdout(&table);
    let verdict = text
        .lines()
        .find(|l| l.contains("verdict"))
        .unwrap_or_default();
    assert!(verdict.contains("| poison"), "{text}");
    assert!(
        text.lines()
            .all(|l| l.chars().count() == verdict.chars().count()),
        "{text}"
    );

    let none = babelqueue(&["inspect"], Some(b"null"));
    assert_eq!(none.status.code(), Some(0), "no identity is not poison");
    let line: serde_json::Value = serde_json::from_str(stdout(&none).trim()).unwrap();
    assert_eq!(line["verdict"], "no_identity");
    assert_eq!(line["envelope"], serde_json::Value::Null);
}

#[test]
fn publish_on_memory_prints_the_envelope() {
    let out = babelqueue(
        &[
            "publish",
            "memory://",
            "--queue",
            "q",
            "--urn",
            " urn:a ",
            "--data",
            r#"{"n":12345678901234567890}"#,
            "--count",
            "2",
            "--trace-id",
            "t-1",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with(
        r#"{"job":"urn:a","trace_id":"t-1","data":{"n":12345678901234567890},"meta":{"#
    ));
    assert_ne!(lines[0], lines[1], "fresh meta.id each time");
}

#[test]
fn unknown_and_uncompiled_schemes_are_clear_errors() {
    let out = babelqueue(
        &[
            "publish",
            "mqtt://localhost",
            "--queue",
            "q",
            "--urn",
            "urn:a",
        ],
        None,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unsupported broker URL scheme \"mqtt\""),
        "{err}"
    );
    let bad = babelqueue(
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--on-unknown-urn",
            "ignore",
        ],
        None,
    );
    assert_eq!(
        bad.status.code(),
        Some(2),
        "a usage error: {}",
        printed(&bad)
    );
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("invalid value 'ignore' for '--on-unknown-urn")
            && err.contains("[possible values: fail, delete, release, dead_letter]"),
        "lists the allowed values: {err}"
    );
    let good = babelqueue(
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--on-unknown-urn",
            "dead-letter",
            "--max",
            "0",
        ],
        None,
    );
    assert!(good.status.success(), "{}", printed(&good));
}

#[test]
fn consume_exits_after_the_idle_timeout() {
    let out = babelqueue(
        &[
            "consume",
            "memory://",
            "--queue",
            "q",
            "--idle-timeout",
            "0.3",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 handler call(s)"));
}

#[test]
fn a_url_typo_without_the_separator_never_prints_the_password() {
    for command in ["consume", "publish", "dlq list"] {
        let mut args: Vec<&str> = command.split(' ').collect();
        args.extend(["amqp:/guest:hunter2@127.0.0.1", "--queue", "q"]);
        if command == "publish" {
            args.extend(["--urn", "urn:a"]);
        }
        if command == "consume" {
            args.extend(["--idle-timeout", "5"]);
        }
        let out = babelqueue(&args, None);
        assert!(!out.status.success(), "{command}: {}", printed(&out));
        let text = printed(&out);
        assert!(!text.contains("hunter2"), "{command}: {text}");
        assert!(
            !text.contains("127.0.0.1"),
            "{command}: only the scheme is shown: {text}"
        );
        assert!(
            text.contains("\"amqp\"") && text.contains("no \"://\""),
            "{command}: says what is wrong: {text}"
        );
    }
}

/// The CLI against a real RabbitMQ (`BQ_AMQP_URL`), with a password it refuses.
#[cfg(feature = "amqp")]
mod amqp {
    use std::time::{Duration, Instant};

    use crate::common::{babelqueue, printed};

    /// `host:port` of the broker, when it is reachable.
    fn broker() -> Option<String> {
        let url = std::env::var("BQ_AMQP_URL")
            .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
        let address = babelqueue::redact::host(&url).expect("BQ_AMQP_URL names a host");
        let reachable = std::net::ToSocketAddrs::to_socket_addrs(&address.as_str())
            .ok()
            .and_then(|mut a| a.next())
            .is_some_and(|a| {
                std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok()
            });
        if reachable {
            return Some(address);
        }
        assert!(
            std::env::var_os("BQ_REQUIRE_BROKERS").is_none(),
            "RabbitMQ is required at {address}"
        );
        println!("SKIPPED: RabbitMQ not reachable at {address}");
        None
    }

    #[test]
    fn wrong_credentials_exit_non_zero_and_never_print_the_password() {
        let Some(address) = broker() else { return };
        let host = address.split(':').next().unwrap_or_default().to_owned();
        let url = format!("amqp://guest:wrongpw@{address}/%2f");
        let started = Instant::now();
        let out = babelqueue(
            &["consume", &url, "--queue", "q", "--idle-timeout", "5"],
            None,
        );
        let text = printed(&out);
        assert!(!out.status.success(), "{text}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the worker stops at once, it does not poll: {:?}",
            started.elapsed()
        );
        assert!(text.contains("refused the credentials"), "{text}");
        assert!(text.contains(&host), "names the broker: {text}");
        assert!(!text.contains("wrongpw"), "{text}");
    }
}

/// The CLI against the three-node RabbitMQ cluster (`scripts/brokers.sh up rabbitmq-cluster`,
/// `BQ_AMQP_CLUSTER_URL`), through one URL that lists a dead host and then every node, with
/// quorum queues. Skipped without the cluster; fails instead with `BQ_REQUIRE_HA` set.
#[cfg(feature = "amqp")]
mod amqp_cluster {
    use std::process::Command;

    use crate::common::{babelqueue, stdout};

    /// The cluster's URL with a dead host first, and its rabbitmqctl.
    fn cluster() -> Option<(String, String)> {
        let (Ok(url), Ok(ctl)) = (
            std::env::var("BQ_AMQP_CLUSTER_URL"),
            std::env::var("BQ_AMQP_CLUSTER_CTL"),
        ) else {
            babelqueue_testkit::skip_or_fail_ha(
                "the RabbitMQ cluster is not configured: BQ_AMQP_CLUSTER_URL is not set \
                 (scripts/brokers.sh up rabbitmq-cluster, then eval \"$(scripts/brokers.sh env)\")",
            );
            return None;
        };
        let hosts = babelqueue::redact::host(&url).expect("BQ_AMQP_CLUSTER_URL names its hosts");
        for host in hosts.split(',') {
            if std::net::TcpStream::connect(host).is_err() {
                babelqueue_testkit::skip_or_fail_ha(format!(
                    "RabbitMQ cluster node {host} is down"
                ));
                return None;
            }
        }
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a port")
            .port();
        let (credentials, rest) = url.split_once('@').expect("credentials in the URL");
        Some((
            format!("{credentials}@127.0.0.1:{closed},{rest}?queue_type=quorum"),
            ctl,
        ))
    }

    fn ids(text: &str) -> Vec<String> {
        let mut ids: Vec<String> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["meta"]["id"].as_str().unwrap().to_owned()
            })
            .collect();
        ids.sort();
        ids
    }

    #[test]
    fn publish_and_consume_through_a_multi_host_url_with_quorum_queues() {
        let Some((url, ctl)) = cluster() else { return };
        let queue = format!("bq-cli-cluster-{:08x}", std::process::id());
        let ok = babelqueue(
            &[
                "publish",
                &url,
                "--queue",
                &queue,
                "--urn",
                "urn:cli:ok",
                "--count",
                "20",
            ],
            None,
        );
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        let broken = babelqueue(
            &[
                "publish",
                &url,
                "--queue",
                &queue,
                "--urn",
                "urn:cli:broken",
            ],
            None,
        );
        assert!(broken.status.success());
        let consumed = babelqueue(
            &[
                "consume",
                &url,
                "--queue",
                &queue,
                "--urn",
                "urn:cli:ok",
                "--fail-urn",
                "urn:cli:broken",
                "--max-attempts",
                "2",
                "--dead-letter",
                "--concurrency",
                "4",
                "--idle-timeout",
                "2",
            ],
            None,
        );
        assert!(
            consumed.status.success(),
            "{}",
            String::from_utf8_lossy(&consumed.stderr)
        );
        let lines: Vec<serde_json::Value> = stdout(&consumed)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let handled: Vec<&serde_json::Value> =
            lines.iter().filter(|l| l["urn"] == "urn:cli:ok").collect();
        let mut seen: Vec<String> = handled
            .iter()
            .map(|l| l["meta"]["id"].as_str().unwrap().to_owned())
            .collect();
        seen.sort();
        assert_eq!(seen, ids(&stdout(&ok)), "each of the 20 handled once");
        let attempts: Vec<i64> = lines
            .iter()
            .filter(|l| l["urn"] == "urn:cli:broken")
            .map(|l| l["attempts"].as_i64().unwrap())
            .collect();
        assert_eq!(attempts, [0, 1], "one retry, then the dead-letter queue");

        // The dead-letter record, read back through the same URL.
        let dlq = format!("{queue}.dlq");
        let records = babelqueue(
            &[
                "consume",
                &url,
                "--queue",
                &dlq,
                "--urn",
                "urn:cli:broken",
                "--idle-timeout",
                "2",
            ],
            None,
        );
        assert!(records.status.success());
        let records: Vec<serde_json::Value> = stdout(&records)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["urn"], "urn:cli:broken");

        // Both queues are quorum queues, on the cluster.
        let listed = Command::new(&ctl)
            .args([
                "-n",
                "bq-ha-1@localhost",
                "-q",
                "list_queues",
                "--no-table-headers",
            ])
            .args(["name", "type"])
            .output()
            .expect("rabbitmqctl");
        let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
        for name in [&queue, &dlq] {
            assert!(
                listed.lines().any(|l| l == format!("{name}\tquorum")),
                "{name} is a quorum queue: {listed}"
            );
            let _ = Command::new(&ctl)
                .args(["-n", "bq-ha-1@localhost", "-q", "delete_queue", name])
                .output();
        }
    }
}

/// The CLI against a real Redis (`BQ_REDIS_URL`), in both layouts.
#[cfg(feature = "redis")]
mod redis {
    use crate::common::{babelqueue, stdout};

    fn url(laravel: bool) -> Option<String> {
        let base = crate::common::redis_url()?;
        Some(if laravel {
            format!("{base}?laravel=1")
        } else {
            base
        })
    }

    #[test]
    fn wrong_credentials_exit_non_zero_and_never_print_the_password() {
        let Some(base) = url(false) else { return };
        let address = babelqueue::redact::host(&base).expect("BQ_REDIS_URL names a host");
        let wrong = format!("redis://bq-auth:wrongpw@{address}");
        let out = babelqueue(
            &["consume", &wrong, "--queue", "q", "--idle-timeout", "5"],
            None,
        );
        let text = crate::common::printed(&out);
        assert!(!out.status.success(), "{text}");
        assert!(text.contains("refused the credentials"), "{text}");
        assert!(!text.contains("wrongpw"), "{text}");
    }

    #[test]
    fn publish_count_goes_out_in_batches_and_a_prefetched_consume_takes_each_once() {
        for laravel in [false, true] {
            let Some(url) = url(laravel) else { return };
            let queue = format!(
                "bq-cli-count-{:08x}",
                std::process::id() ^ u32::from(laravel)
            );
            // 250 envelopes: one window (one publish_batch call), one line each.
            let published = babelqueue(
                &[
                    "publish",
                    &url,
                    "--queue",
                    &queue,
                    "--urn",
                    "urn:cli:ok",
                    "--count",
                    "250",
                ],
                None,
            );
            assert!(
                published.status.success(),
                "{}",
                String::from_utf8_lossy(&published.stderr)
            );
            let ids: Vec<String> = stdout(&published)
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    v["meta"]["id"].as_str().unwrap().to_owned()
                })
                .collect();
            assert_eq!(ids.len(), 250);

            let consumed = babelqueue(
                &[
                    "consume",
                    &url,
                    "--queue",
                    &queue,
                    "--urn",
                    "urn:cli:ok",
                    "--concurrency",
                    "4",
                    "--prefetch",
                    "32",
                    "--idle-timeout",
                    "1",
                ],
                None,
            );
            assert!(
                consumed.status.success(),
                "{}",
                String::from_utf8_lossy(&consumed.stderr)
            );
            let mut seen: Vec<String> = stdout(&consumed)
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    v["meta"]["id"].as_str().unwrap().to_owned()
                })
                .collect();
            seen.sort();
            let mut expected = ids.clone();
            expected.sort();
            assert_eq!(
                seen, expected,
                "laravel={laravel}: every message handled once"
            );
        }
    }

    #[test]
    fn publish_consume_retry_and_dead_letter_against_redis() {
        for laravel in [false, true] {
            let Some(url) = url(laravel) else { return };
            let queue = format!("bq-cli-{:08x}", std::process::id() ^ u32::from(laravel));
            let published = babelqueue(
                &[
                    "publish",
                    &url,
                    "--queue",
                    &queue,
                    "--urn",
                    "urn:cli:ok",
                    "--data",
                    r#"{"n":1}"#,
                    "--count",
                    "2",
                ],
                None,
            );
            assert!(
                published.status.success(),
                "{}",
                String::from_utf8_lossy(&published.stderr)
            );
            let fail = babelqueue(
                &["publish", &url, "--queue", &queue, "--urn", "urn:cli:bad"],
                None,
            );
            assert!(fail.status.success());

            let consumed = babelqueue(
                &[
                    "consume",
                    &url,
                    "--queue",
                    &queue,
                    "--urn",
                    "urn:cli:ok",
                    "--fail-urn",
                    "urn:cli:bad",
                    "--max-attempts",
                    "2",
                    "--dead-letter",
                    "--idle-timeout",
                    "1",
                ],
                None,
            );
            assert!(
                consumed.status.success(),
                "{}",
                String::from_utf8_lossy(&consumed.stderr)
            );
            let lines: Vec<serde_json::Value> = stdout(&consumed)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let ok: Vec<_> = lines.iter().filter(|l| l["urn"] == "urn:cli:ok").collect();
            let bad: Vec<_> = lines
                .iter()
                .filter(|l| l["urn"] == "urn:cli:bad")
                .map(|l| l["attempts"].as_i64().unwrap())
                .collect();
            assert_eq!(ok.len(), 2, "laravel={laravel}");
            assert_eq!(ok[0]["data"], serde_json::json!({"n": 1}));
            assert_eq!(ok[0]["meta"]["lang"], "rust");
            assert_eq!(
                bad,
                [0, 1],
                "the failing URN is retried once, then dead-lettered"
            );

            let listed = babelqueue(&["dlq", "list", &url, "--queue", &queue], None);
            assert!(listed.status.success());
            let records: Vec<serde_json::Value> = stdout(&listed)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(records.len(), 1);
            assert_eq!(
                (records[0]["urn"].as_str(), records[0]["reason"].as_str()),
                (Some("urn:cli:bad"), Some("failed"))
            );

            let redriven = babelqueue(&["dlq", "redrive", &url, "--queue", &queue], None);
            assert!(
                redriven.status.success(),
                "{}",
                String::from_utf8_lossy(&redriven.stderr)
            );
            let again = babelqueue(
                &[
                    "consume",
                    &url,
                    "--queue",
                    &queue,
                    "--urn",
                    "urn:cli:bad",
                    "--max",
                    "1",
                    "--idle-timeout",
                    "2",
                ],
                None,
            );
            let line: serde_json::Value =
                serde_json::from_str(stdout(&again).lines().next().unwrap()).unwrap();
            assert_eq!(line["attempts"], 0, "redrive resets attempts");
        }
    }
}
