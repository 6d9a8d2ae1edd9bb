//! The actions: retry, remove, redrive, each through `babelqueue::redrive` (nothing is
//! re-implemented here) and each written to the audit log: one `tracing` line at target
//! `babelqueue::audit` saying who, what, on which queue, which ids, and the outcome.

use std::time::Duration;

use babelqueue::redrive::{self, Redrive, RedriveItem};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ConsoleError;
use crate::scan;
use crate::view::Filter;
use crate::{Console, Source, Watched};

/// Who asked: `"token"` (the admin token, by bearer or login) or `"local"` (no token set, a
/// loopback listener).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Who(pub(crate) &'static str);

/// What to retry: these ids, or every entry of a cause.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct RetryRequest {
    /// Entry ids (`meta.id`, else a content address).
    #[serde(default)]
    pub ids: Vec<String>,
    /// A cause fingerprint: every entry of this cause (among the first 10 000).
    #[serde(default)]
    pub cause: Option<String>,
}

/// What to remove.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct RemoveRequest {
    /// Entry ids.
    pub ids: Vec<String>,
}

/// A redrive of the whole dead-letter queue (or its first `max` entries).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct RedriveRequest {
    /// Report only; every entry stays.
    #[serde(default)]
    pub dry_run: bool,
    /// At most this many entries (0 = all).
    #[serde(default)]
    pub max: usize,
    /// At most this many entries a second (0 = no limit).
    #[serde(default)]
    pub rate: usize,
    /// Only entries whose URN is exactly this.
    #[serde(default)]
    pub urn: Option<String>,
}

/// One entry an action handled.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ItemResult {
    /// The entry id.
    pub id: String,
    /// The URN.
    pub urn: String,
    /// Where it went (retry, redrive), when anywhere.
    pub to: Option<String>,
    /// Whether it left the dead-letter queue.
    pub done: bool,
    /// Why it stayed, when it did.
    pub kept: Option<String>,
}

/// What an action did.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ActionReport {
    /// `retry`, `remove`, `redrive` or `redrive (dry run)`.
    pub action: String,
    /// The dead-letter queue.
    pub dlq: String,
    /// How many entries left the dead-letter queue.
    pub done: usize,
    /// How many stayed.
    pub kept: usize,
    /// The entries asked for and not found.
    pub missing: Vec<String>,
    /// One line per entry handled (entries an id list did not name are left out).
    pub items: Vec<ItemResult>,
}

fn audit(who: &Who, action: &str, source: &Source, queue: &Watched, ids: &[String], done: usize) {
    tracing::info!(
        target: "babelqueue::audit",
        who = who.0,
        action,
        broker = source.label(),
        queue = queue.name.as_str(),
        dlq = queue.dlq.as_str(),
        ids = ids.join(",").as_str(),
        done,
        "console action"
    );
}

fn item(i: &RedriveItem) -> ItemResult {
    ItemResult {
        id: i.id.clone(),
        urn: i.urn.clone(),
        to: Some(i.to.clone()).filter(|t| !t.is_empty()),
        done: i.redriven,
        kept: i.skipped.clone(),
    }
}

fn broker(source: &Source, e: &babelqueue::Error) -> ConsoleError {
    ConsoleError::Broker(source.scrub(&e.to_string()))
}

/// How long a retry or redrive waits for the dead-letter queue's messages: a Kafka consumer
/// joins its group and is assigned the topic's partitions in seconds, the other brokers hand
/// out at once.
fn drain_timeout(transport: &str) -> Duration {
    match transport {
        "kafka" => Duration::from_secs(10),
        _ => Duration::from_secs(1),
    }
}

fn writable(console: &Console, what: &str) -> Result<(), ConsoleError> {
    if console.is_read_only() {
        return Err(ConsoleError::ReadOnly(what.to_owned()));
    }
    Ok(())
}

/// Retries `request`'s entries of the dead-letter queue of `queue` to their original queues.
pub(crate) async fn retry(
    console: &Console,
    who: &Who,
    source_ix: usize,
    queue: &str,
    request: RetryRequest,
) -> Result<ActionReport, ConsoleError> {
    writable(console, "retry")?;
    let (source, queue) = console.queue(source_ix, queue)?;
    let mut ids = request.ids;
    if let Some(cause) = request.cause.filter(|c| !c.is_empty()) {
        let filter = Filter {
            cause: Some(cause),
            ..Filter::default()
        };
        ids.extend(scan::ids(source, queue, &filter, scan::GROUP_SCAN, scan::GROUP_SCAN).await?);
    }
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        return Err(ConsoleError::BadRequest(
            "nothing to retry: no id".to_owned(),
        ));
    }
    let options = Redrive::new()
        .ids(ids.iter().cloned())
        .timeout(drain_timeout(source.transport().name()));
    let report = redrive::redrive(source.transport(), &queue.dlq, &options, &mut |_| {})
        .await
        .map_err(|e| broker(source, &e))?;
    let items: Vec<ItemResult> = report
        .items
        .iter()
        .filter(|i| ids.contains(&i.id))
        .map(item)
        .collect();
    let missing = ids
        .iter()
        .filter(|id| !items.iter().any(|i| &i.id == *id))
        .cloned()
        .collect();
    let done = items.iter().filter(|i| i.done).count();
    audit(who, "retry", source, queue, &ids, done);
    Ok(ActionReport {
        action: "retry".to_owned(),
        dlq: queue.dlq.clone(),
        done,
        kept: items.len() - done,
        missing,
        items,
    })
}

/// Removes `request`'s entries from the dead-letter queue of `queue`.
pub(crate) async fn remove(
    console: &Console,
    who: &Who,
    source_ix: usize,
    queue: &str,
    request: RemoveRequest,
) -> Result<ActionReport, ConsoleError> {
    writable(console, "remove")?;
    let (source, queue) = console.queue(source_ix, queue)?;
    if request.ids.is_empty() {
        return Err(ConsoleError::BadRequest(
            "nothing to remove: no id".to_owned(),
        ));
    }
    let removed = redrive::remove(source.transport(), &queue.dlq, &request.ids, &mut |_| {})
        .await
        .map_err(|e| broker(source, &e))?;
    let items: Vec<ItemResult> = removed
        .iter()
        .map(|r| ItemResult {
            id: r.id.clone(),
            urn: r.urn.clone(),
            to: None,
            done: true,
            kept: None,
        })
        .collect();
    let missing = request
        .ids
        .iter()
        .filter(|id| !items.iter().any(|i| &i.id == *id))
        .cloned()
        .collect();
    audit(who, "remove", source, queue, &request.ids, items.len());
    Ok(ActionReport {
        action: "remove".to_owned(),
        dlq: queue.dlq.clone(),
        done: items.len(),
        kept: 0,
        missing,
        items,
    })
}

/// Redrives the dead-letter queue of `queue`; with a rate, in batches of `rate` entries a
/// second, over at most as many entries as the queue held when it started.
pub(crate) async fn redrive_all(
    console: &Console,
    who: &Who,
    source_ix: usize,
    queue: &str,
    request: RedriveRequest,
) -> Result<ActionReport, ConsoleError> {
    writable(console, "redrive")?;
    let (source, queue) = console.queue(source_ix, queue)?;
    let options = |max: usize| {
        let mut o = Redrive::new()
            .max(max)
            .dry_run(request.dry_run)
            .timeout(drain_timeout(source.transport().name()));
        if let Some(urn) = request.urn.clone().filter(|u| !u.is_empty()) {
            o = o.select(move |envelope| envelope.urn() == urn);
        }
        o
    };
    let mut items = Vec::new();
    if request.rate == 0 || request.dry_run {
        let report = redrive::redrive(
            source.transport(),
            &queue.dlq,
            &options(request.max),
            &mut |_| {},
        )
        .await
        .map_err(|e| broker(source, &e))?;
        items.extend(report.items.iter().map(item));
    } else {
        // Entries kept go back to the tail: never look at more than were there at the start.
        let depth = scan::stats(source, queue)
            .await?
            .and_then(|s| s.dead_letter)
            .and_then(|n| usize::try_from(n).ok());
        let budget = match (request.max, depth) {
            (0, Some(d)) => d,
            (0, None) => usize::MAX,
            (m, Some(d)) => m.min(d),
            (m, None) => m,
        };
        let mut seen = 0;
        while seen < budget {
            let batch = request.rate.min(budget - seen);
            let started = tokio::time::Instant::now();
            let report =
                redrive::redrive(source.transport(), &queue.dlq, &options(batch), &mut |_| {})
                    .await
                    .map_err(|e| broker(source, &e))?;
            let n = report.items.len();
            items.extend(report.items.iter().map(item));
            seen += n;
            if n < batch {
                break;
            }
            tokio::time::sleep_until(started + Duration::from_secs(1)).await;
        }
    }
    let done = items.iter().filter(|i| i.done).count();
    let action = if request.dry_run {
        "redrive (dry run)"
    } else {
        "redrive"
    };
    let ids: Vec<String> = items
        .iter()
        .filter(|i| i.done)
        .map(|i| i.id.clone())
        .collect();
    audit(who, action, source, queue, &ids, done);
    Ok(ActionReport {
        action: action.to_owned(),
        dlq: queue.dlq.clone(),
        done,
        kept: items.len() - done,
        missing: Vec::new(),
        items,
    })
}
