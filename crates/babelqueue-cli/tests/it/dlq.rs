//! `babelqueue dlq list|show|retry|remove|redrive`: in process on a shared memory:// transport,
//! and the binary against a live Redis.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue::{Capabilities, Delivery, MemoryTransport, Transport, TransportError};
use common::{json_lines, record, run_memory, run_on};
use serde_json::Value;

const DLQ: &str = "orders.dlq";

/// `orders.dlq` holding a, b, c (urn:ok, urn:ok, urn:other) and a poison body.
async fn seeded() -> MemoryTransport {
    let memory = MemoryTransport::new();
    for (id, urn) in [("a", "urn:ok"), ("b", "urn:ok"), ("c", "urn:other")] {
        memory
            .publish(DLQ, &record(id, urn, "orders"))
            .await
            .unwrap();
    }
    memory.publish(DLQ, b"not json").await.unwrap();
    memory
}

fn ids(memory: &MemoryTransport, queue: &str) -> Vec<String> {
    memory
        .bodies(queue)
        .iter()
        .map(|b| {
            serde_json::from_slice::<Value>(b)
                .ok()
                .and_then(|v| v["meta"]["id"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "<poison>".into())
        })
        .collect()
}

#[tokio::test]
async fn list_prints_one_json_line_per_record_and_changes_nothing() {
    let memory = seeded().await;
    let ran = run_memory(&memory, &["dlq", "list", "memory://", "--queue", "orders"]).await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let lines = json_lines(&ran.stdout);
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["message_id"], "a");
    assert_eq!(lines[0]["reason"], "failed");
    assert_eq!(lines[0]["error"], "boom a");
    assert_eq!(lines[3]["readable"], false);
    assert!(ran.stderr.contains("4 message(s) in orders.dlq"), "{ran:?}");
    assert!(!ran.stderr.contains("drains"), "memory browses: {ran:?}");
    assert_eq!(ids(&memory, DLQ), ["a", "b", "c", "<poison>"]);
}

#[tokio::test]
async fn human_output_is_an_aligned_table() {
    let memory = seeded().await;
    let ran = run_memory(
        &memory,
        &[
            "dlq",
            "list",
            "memory://",
            "--queue",
            "orders",
            "--output",
            "human",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    // border, header, separator, 4 rows, border
    assert_eq!(lines.len(), 8, "{}", ran.stdout);
    assert!(lines[1].contains("| ID ") && lines[1].contains("ORIGINAL_QUEUE"));
    assert!(
        lines[3].contains("| a ") && lines[3].contains("urn:ok") && lines[3].contains("boom a")
    );
    let width = lines[0].chars().count();
    assert!(
        lines.iter().all(|l| l.chars().count() == width),
        "every line equally wide:\n{}",
        ran.stdout
    );
}

#[tokio::test]
async fn show_prints_the_named_records_and_fails_on_an_unknown_id() {
    let memory = seeded().await;
    let ran = run_memory(
        &memory,
        &["dlq", "show", "memory://", "--queue", "orders", "c", "a"],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let lines = json_lines(&ran.stdout);
    let shown: Vec<&str> = lines
        .iter()
        .map(|l| l["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(shown, ["a", "c"]);
    let body: Value = serde_json::from_str(lines[1]["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["data"]["id"], "c");

    let ran = run_memory(
        &memory,
        &["dlq", "show", "memory://", "--queue", "orders", "nope"],
    )
    .await;
    assert_eq!(ran.status, 1, "{ran:?}");
    assert!(
        ran.stderr.contains("no entry with this id in orders.dlq"),
        "{ran:?}"
    );
    assert!(ran.stderr.contains("nope"), "{ran:?}");
    assert_eq!(memory.len(DLQ), 4);
}

#[tokio::test]
async fn retry_sends_only_the_named_messages_back_to_their_queue() {
    let memory = seeded().await;
    let ran = run_memory(
        &memory,
        &["dlq", "retry", "memory://", "--queue", "orders", "b"],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let lines = json_lines(&ran.stdout);
    assert_eq!(
        lines.len(),
        1,
        "only the named message is reported: {}",
        ran.stdout
    );
    assert_eq!(
        (
            lines[0]["message_id"].as_str(),
            lines[0]["to"].as_str(),
            lines[0]["redriven"].as_bool()
        ),
        (Some("b"), Some("orders"), Some(true))
    );
    assert_eq!(ids(&memory, "orders"), ["b"]);
    let back: Value = serde_json::from_slice(&memory.bodies("orders")[0]).unwrap();
    assert_eq!(back["attempts"], 0);
    assert!(back.get("dead_letter").is_none());
    assert_eq!(ids(&memory, DLQ), ["a", "c", "<poison>"]);

    // --to, and an id that is not there: the found one moves, the exit status says the rest.
    let ran = run_memory(
        &memory,
        &[
            "dlq",
            "retry",
            "memory://",
            "--queue",
            "orders",
            "--to",
            "elsewhere",
            "c",
            "zz",
        ],
    )
    .await;
    assert_eq!(ran.status, 1, "{ran:?}");
    assert!(ran.stderr.contains("zz"), "{ran:?}");
    assert_eq!(ids(&memory, "elsewhere"), ["c"]);
}

#[tokio::test]
async fn remove_deletes_only_the_named_messages() {
    let memory = seeded().await;
    let ran = run_memory(
        &memory,
        &["dlq", "remove", "memory://", "--queue", "orders", "a", "c"],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let lines = json_lines(&ran.stdout);
    let removed: Vec<&str> = lines
        .iter()
        .map(|l| l["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(removed, ["a", "c"]);
    assert_eq!(lines[0]["removed"], true);
    assert_eq!(ids(&memory, DLQ), ["b", "<poison>"]);
    assert!(ran.stderr.contains("2 removed from orders.dlq"), "{ran:?}");
    assert_eq!(memory.in_flight(), 0);
}

/// memory:// takes a named entry out in place (a `Taker`): the other entries are neither
/// drained nor published again, so a broker refusing publishes changes nothing. (The drain
/// path's failure, for transports without a `Taker`, is core's
/// `a_failing_broker_loses_nothing_and_says_what_was_removed`.)
#[tokio::test]
async fn remove_in_place_publishes_nothing_so_a_refusing_broker_loses_nothing() {
    let memory = MemoryTransport::with_visibility_timeout(Duration::from_millis(50));
    for id in ["a", "b"] {
        memory
            .publish(DLQ, &record(id, "urn:ok", "orders"))
            .await
            .unwrap();
    }
    memory.fail_publishes_to(DLQ, true);
    let ran = run_memory(
        &memory,
        &["dlq", "remove", "memory://", "--queue", "orders", "b"],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    assert!(ran.stderr.contains("1 removed from orders.dlq"), "{ran:?}");
    memory.fail_publishes_to(DLQ, false);
    tokio::time::sleep(Duration::from_millis(120)).await;
    let mut back = Vec::new();
    while let Some(d) = memory.pop(DLQ, Duration::ZERO).await.unwrap() {
        back.push(d.body().to_vec());
        memory.ack(&d).await.unwrap();
    }
    assert_eq!(back, [record("a", "urn:ok", "orders")], "only b is gone");
    assert_eq!(memory.in_flight(), 0);
}

#[tokio::test]
async fn redrive_dry_run_reports_one_line_per_message_on_stdout() {
    let memory = seeded().await;
    let ran = run_memory(
        &memory,
        &[
            "dlq",
            "redrive",
            "memory://",
            "--queue",
            "orders",
            "--dry-run",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let lines = json_lines(&ran.stdout);
    assert_eq!(lines.len(), 4, "{}", ran.stdout);
    assert!(lines.iter().all(|l| l["redriven"] == false));
    assert_eq!(lines[0]["skipped"], "dry run");
    assert_eq!(memory.len(DLQ), 4);

    let ran = run_memory(
        &memory,
        &[
            "dlq",
            "redrive",
            "memory://",
            "--queue",
            "orders",
            "--select",
            "urn:ok",
            "--output",
            "human",
        ],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    assert!(
        ran.stdout.contains("RESULT") && ran.stdout.contains("redriven"),
        "{}",
        ran.stdout
    );
    assert!(ran.stdout.contains("kept: not selected"), "{}", ran.stdout);
    assert_eq!(ids(&memory, "orders"), ["a", "b"]);
}

/// memory:// without the browse capability, like most brokers.
#[derive(Debug, Clone)]
struct NoBrowse(MemoryTransport);

#[async_trait]
impl Transport for NoBrowse {
    fn name(&self) -> &'static str {
        "nobrowse"
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        self.0.publish(queue, body).await
    }
    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        self.0.pop(queue, timeout).await
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        self.0.ack(delivery).await
    }
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
    }
}

#[tokio::test]
async fn listing_without_browse_says_it_drains_and_restores() {
    let memory = seeded().await;
    let transport = Arc::new(NoBrowse(memory.clone()));
    let ran = run_on(
        transport.clone(),
        &["dlq", "list", "memory://", "--queue", "orders"],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    assert!(
        ran.stderr.contains(
            "cannot browse a queue: reading orders.dlq drains it and restores every message"
        ),
        "{ran:?}"
    );
    assert_eq!(json_lines(&ran.stdout).len(), 4);
    assert_eq!(
        ids(&memory, DLQ),
        ["a", "b", "c", "<poison>"],
        "restored in order"
    );
    assert_eq!(memory.in_flight(), 0);

    let ran = run_on(
        transport,
        &["dlq", "show", "x://", "--queue", "orders", "b"],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    assert!(ran.stderr.contains("drains it"), "{ran:?}");
    assert_eq!(ids(&memory, DLQ), ["a", "b", "c", "<poison>"]);

    let help = common::babelqueue(&["dlq", "list", "--help"], None);
    // clap wraps the help to the terminal's width: compare the words.
    let text = common::stdout(&help)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("RabbitMQ and SQS cannot browse")
            && text.contains("drains the dead-letter queue and restores every message"),
        "{text}"
    );
}

/// The binary against a live Redis (`BQ_REDIS_URL`).
#[cfg(feature = "redis")]
mod redis {
    use super::*;
    use crate::common::{babelqueue, printed, redis_url, stdout};

    /// A fresh queue whose dead-letter queue holds ok-1, ok-2 (urn:cli:ok) and bad-1
    /// (urn:cli:bad), failed out of it by the runtime.
    fn dead_lettered(url: &str, label: &str) -> (String, Vec<String>) {
        let queue = babelqueue_testkit::unique_queue(label);
        let published = babelqueue(
            &[
                "publish",
                url,
                "--queue",
                &queue,
                "--urn",
                "urn:cli:dl",
                "--count",
                "3",
            ],
            None,
        );
        assert!(published.status.success(), "{}", printed(&published));
        let ids = json_lines(&stdout(&published))
            .iter()
            .map(|v| v["meta"]["id"].as_str().unwrap().to_owned())
            .collect();
        let consumed = babelqueue(
            &[
                "consume",
                url,
                "--queue",
                &queue,
                "--fail-urn",
                "urn:cli:dl",
                "--urn",
                "urn:none",
                "--max-attempts",
                "1",
                "--dead-letter",
                "--idle-timeout",
                "1",
            ],
            None,
        );
        assert!(consumed.status.success(), "{}", printed(&consumed));
        (queue, ids)
    }

    #[test]
    fn redrive_dry_run_writes_its_report_to_a_redirected_stdout() {
        let Some(url) = redis_url() else { return };
        let (queue, ids) = dead_lettered(&url, "cli-dry");
        let out = babelqueue(
            &["dlq", "redrive", &url, "--queue", &queue, "--dry-run"],
            None,
        );
        assert!(out.status.success(), "{}", printed(&out));
        let lines = json_lines(&stdout(&out));
        let reported: Vec<&str> = lines
            .iter()
            .map(|l| l["message_id"].as_str().unwrap())
            .collect();
        assert_eq!(reported, ids.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(lines.iter().all(|l| l["skipped"] == "dry run"));
    }

    #[test]
    fn show_retry_and_remove_by_id_against_redis() {
        let Some(url) = redis_url() else { return };
        let (queue, ids) = dead_lettered(&url, "cli-byid");
        let by_id =
            |verb: &str, id: &str| babelqueue(&["dlq", verb, &url, "--queue", &queue, id], None);
        let shown = by_id("show", &ids[0]);
        assert!(shown.status.success(), "{}", printed(&shown));
        let line = &json_lines(&stdout(&shown))[0];
        assert_eq!(
            (line["message_id"].as_str(), line["reason"].as_str()),
            (Some(ids[0].as_str()), Some("failed"))
        );

        let removed = by_id("remove", &ids[1]);
        assert!(removed.status.success(), "{}", printed(&removed));
        let retried = by_id("retry", &ids[2]);
        assert!(retried.status.success(), "{}", printed(&retried));
        assert_eq!(json_lines(&stdout(&retried))[0]["redriven"], true);

        let listed = babelqueue(&["dlq", "list", &url, "--queue", &queue], None);
        let left: Vec<String> = json_lines(&stdout(&listed))
            .iter()
            .map(|l| l["message_id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(left, [ids[0].clone()], "one removed, one retried, one kept");

        let again = babelqueue(
            &[
                "consume",
                &url,
                "--queue",
                &queue,
                "--max",
                "1",
                "--idle-timeout",
                "2",
            ],
            None,
        );
        let line = &json_lines(&stdout(&again))[0];
        assert_eq!(line["meta"]["id"].as_str(), Some(ids[2].as_str()));
        assert_eq!(line["attempts"], 0, "retry resets attempts");
        assert!(
            by_id("show", &ids[1]).status.code() == Some(1),
            "the removed one is gone"
        );
    }
}

mod redis_raw {
    use super::*;
    use crate::common::{babelqueue, printed, redis_url, stdout};

    /// Bodies that are not envelopes, planted with `publish --raw --allow-poison`, dead-lettered
    /// by the runtime as poison records (no `meta.id`), then listed, shown, refused a retry and
    /// removed by their content address: on both Redis layouts.
    #[test]
    fn dead_letter_entries_without_an_id_are_managed_by_their_content_address() {
        let Some(base) = redis_url() else { return };
        let with_option = |option: &str| {
            let separator = if base.contains('?') { '&' } else { '?' };
            format!("{base}{separator}{option}")
        };
        for url in [base.clone(), with_option("laravel=1")] {
            let queue = babelqueue_testkit::unique_queue("cli-raw");
            for body in [&b"\xff\xfe{garbage"[..], b"not json"] {
                let planted = babelqueue(
                    &[
                        "publish",
                        &url,
                        "--queue",
                        &queue,
                        "--raw",
                        "--allow-poison",
                    ],
                    Some(body),
                );
                assert!(planted.status.success(), "{url}: {}", printed(&planted));
            }
            let refused = babelqueue(
                &["publish", &url, "--queue", &queue, "--raw"],
                Some(b"\xff\xfe{garbage"),
            );
            assert_eq!(refused.status.code(), Some(1), "{}", printed(&refused));
            let consumed = babelqueue(
                &[
                    "consume",
                    &url,
                    "--queue",
                    &queue,
                    "--dead-letter",
                    "--max-deliveries",
                    "2",
                    "--idle-timeout",
                    "5",
                ],
                None,
            );
            assert!(consumed.status.success(), "{url}: {}", printed(&consumed));

            let list = || {
                let listed = babelqueue(&["dlq", "list", &url, "--queue", &queue], None);
                assert!(listed.status.success(), "{url}: {}", printed(&listed));
                json_lines(&stdout(&listed))
            };
            let entries = list();
            assert_eq!(entries.len(), 2, "{url}: {entries:?}");
            let ids: Vec<String> = entries
                .iter()
                .map(|l| l["id"].as_str().unwrap().to_owned())
                .collect();
            for (entry, id) in entries.iter().zip(&ids) {
                assert!(id.starts_with("sha256:"), "{url}: {entry}");
                assert_eq!(entry["message_id"], Value::Null, "{url}: {entry}");
                assert_eq!(entry["reason"], "poison", "{url}: {entry}");
                assert_eq!(entry["readable"], false, "{url}: {entry}");
            }
            // The record of the bytes that were not UTF-8 carries them as base64.
            assert!(
                entries.iter().any(|l| l["body"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("//57Z2FyYmFnZQ==")),
                "{url}: {entries:?}"
            );

            let by_id = |verb: &str, ids: &[&str]| {
                let mut args = vec!["dlq", verb, url.as_str(), "--queue", queue.as_str()];
                args.extend(ids);
                babelqueue(&args, None)
            };
            let shown = by_id("show", &[&ids[0]]);
            assert!(shown.status.success(), "{url}: {}", printed(&shown));
            assert_eq!(
                json_lines(&stdout(&shown))[0]["id"].as_str(),
                Some(ids[0].as_str())
            );
            let retried = by_id("retry", &[&ids[0]]);
            assert_eq!(
                retried.status.code(),
                Some(1),
                "{url}: {}",
                printed(&retried)
            );
            assert!(
                printed(&retried).contains("not a readable envelope"),
                "{url}: {}",
                printed(&retried)
            );
            assert_eq!(list().len(), 2, "{url}: the refused retry kept it");
            let removed = by_id("remove", &[&ids[0], &ids[1]]);
            assert!(removed.status.success(), "{url}: {}", printed(&removed));
            assert!(list().is_empty(), "{url}");
        }
    }
}

/// Another SDK's raw poison record (the base64 wrapper: no `meta.id`) and bytes that were never
/// JSON, beside two envelopes.
async fn seeded_with_raw_entries() -> MemoryTransport {
    let memory = MemoryTransport::new();
    memory
        .publish(DLQ, &record("a", "urn:ok", "orders"))
        .await
        .unwrap();
    memory
        .publish(
            DLQ,
            br#"{"raw":"//57Z2FyYmFnZQ==","raw_encoding":"base64","dead_letter":{"reason":"poison","error":"Undecodable BabelQueue body: invalid UTF-8","original_queue":"orders"}}"#,
        )
        .await
        .unwrap();
    memory.publish(DLQ, b"\xff\xfe{garbage").await.unwrap();
    memory
        .publish(DLQ, &record("b", "urn:ok", "orders"))
        .await
        .unwrap();
    memory
}

#[tokio::test]
async fn every_entry_has_an_id_and_its_exact_bytes_whatever_it_holds() {
    let memory = seeded_with_raw_entries().await;
    let ran = run_memory(&memory, &["dlq", "list", "memory://", "--queue", "orders"]).await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let lines = json_lines(&ran.stdout);
    let ids: Vec<&str> = lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!((ids[0], ids[3]), ("a", "b"));
    assert!(ids[1].starts_with("sha256:") && ids[2].starts_with("sha256:"));
    assert_ne!(ids[1], ids[2]);
    // The wrapper record is JSON text: shown as text. The raw bytes are not UTF-8: base64,
    // never U+FFFD.
    assert_eq!(lines[1]["reason"], "poison");
    assert!(lines[1]["body"].as_str().unwrap().starts_with(r#"{"raw":"#));
    assert!(lines[2].get("body").is_none(), "{}", lines[2]);
    assert_eq!(lines[2]["body_base64"], "//57Z2FyYmFnZQ==");
    assert_eq!(lines[2]["readable"], false);
    assert!(
        lines[2]["poison_cause"]
            .as_str()
            .unwrap()
            .contains("not valid UTF-8"),
        "{}",
        lines[2]
    );
    assert!(!ran.stdout.contains('\u{FFFD}'));

    // The table has no empty row: an entry that is not an envelope says so.
    let table = run_memory(
        &memory,
        &[
            "dlq",
            "list",
            "memory://",
            "--queue",
            "orders",
            "--output",
            "human",
        ],
    )
    .await;
    let raw_row = table
        .stdout
        .lines()
        .find(|l| l.contains(ids[2]))
        .unwrap_or_default();
    assert!(raw_row.contains("(not an envelope)"), "{}", table.stdout);
    assert!(raw_row.contains("not valid UTF-8"), "{}", table.stdout);

    // Show, retry and remove take the content address.
    let raw_id = ids[2].to_owned();
    let shown = run_memory(
        &memory,
        &["dlq", "show", "memory://", "--queue", "orders", &raw_id],
    )
    .await;
    assert_eq!(shown.status, 0, "{shown:?}");
    assert_eq!(
        json_lines(&shown.stdout)[0]["body_base64"],
        "//57Z2FyYmFnZQ=="
    );
    let human = run_memory(
        &memory,
        &[
            "dlq",
            "show",
            "memory://",
            "--queue",
            "orders",
            "--output",
            "human",
            &raw_id,
        ],
    )
    .await;
    assert!(
        human.stdout.contains("base64://57Z2FyYmFnZQ=="),
        "{}",
        human.stdout
    );

    let retried = run_memory(
        &memory,
        &["dlq", "retry", "memory://", "--queue", "orders", &raw_id],
    )
    .await;
    assert_eq!(retried.status, 1, "{retried:?}");
    assert!(
        retried.stderr.contains("not a readable envelope")
            && retried.stderr.contains(raw_id.as_str()),
        "{retried:?}"
    );
    assert_eq!(memory.len(DLQ), 4, "a kept entry stays");
    assert_eq!(memory.len("orders"), 0);

    let removed = run_memory(
        &memory,
        &[
            "dlq",
            "remove",
            "memory://",
            "--queue",
            "orders",
            &raw_id,
            ids[1],
        ],
    )
    .await;
    assert_eq!(removed.status, 0, "{removed:?}");
    let gone = json_lines(&removed.stdout);
    assert_eq!(gone.len(), 2);
    assert!(gone.iter().all(|l| l["message_id"] == ""));
    assert_eq!(self::ids(&memory, DLQ), ["a", "b"]);

    // A full redrive sends the envelopes back and names nothing it could not address.
    let redriven = run_memory(
        &memory,
        &["dlq", "redrive", "memory://", "--queue", "orders"],
    )
    .await;
    assert_eq!(redriven.status, 0, "{redriven:?}");
    let items = json_lines(&redriven.stdout);
    assert!(items.iter().all(|l| !l["id"].as_str().unwrap().is_empty()));
    assert_eq!(memory.len(DLQ), 0);
}

#[tokio::test]
async fn a_kept_poison_entry_says_why_in_the_redrive_report() {
    let memory = MemoryTransport::new();
    memory.publish(DLQ, b"\xff\xfe{garbage").await.unwrap();
    let ran = run_memory(
        &memory,
        &["dlq", "redrive", "memory://", "--queue", "orders"],
    )
    .await;
    assert_eq!(ran.status, 0, "{ran:?}");
    let item = &json_lines(&ran.stdout)[0];
    assert!(
        item["id"].as_str().unwrap().starts_with("sha256:"),
        "{item}"
    );
    assert!(
        item["skipped"]
            .as_str()
            .unwrap()
            .contains("not a readable envelope"),
        "{item}"
    );
    assert_eq!(memory.len(DLQ), 1);
}
