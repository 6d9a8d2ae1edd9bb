//! Reading a dead-letter queue a page at a time: never the whole queue at once, however long.
//!
//! Without a filter a page is one ranged read ([`babelqueue::redrive::page`]). With one, the
//! queue is read in chunks from the cursor until the page is full or [`SCAN_LIMIT`] entries
//! were looked at, and the answer says where to go on from: memory stays bounded by a chunk,
//! and one request by the scan limit.

use std::collections::BTreeMap;

use babelqueue::QueueStats;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ConsoleError;
use crate::view::{EntryDetail, EntryView, Filter, now_ms};
use crate::{Source, Watched};

/// How many entries one read takes.
pub(crate) const CHUNK: usize = 500;
/// How many entries one filtered page looks at, at most.
pub(crate) const SCAN_LIMIT: usize = 20_000;
/// The largest page.
pub(crate) const MAX_PAGE: usize = 500;
/// How many entries the cause groups look at by default.
pub(crate) const GROUP_SCAN: usize = 10_000;
/// How many ids a cause group lists.
const GROUP_IDS: usize = 20;

/// One page of a dead-letter queue.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Page {
    /// The dead-letter queue.
    pub dlq: String,
    /// Where the page started (a position in the queue).
    pub from: usize,
    /// The entries, in queue order.
    pub entries: Vec<EntryView>,
    /// Where the next page starts, when the queue may go on.
    pub next: Option<usize>,
    /// How many entries were looked at.
    pub scanned: usize,
}

/// The dead letters of one cause.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Group {
    /// The cause fingerprint.
    pub cause: String,
    /// How many entries have it.
    pub count: usize,
    /// The reasons seen, with their counts.
    pub reasons: BTreeMap<String, usize>,
    /// The error text of the first one.
    pub example: String,
    /// The ids of the first ones.
    pub ids: Vec<String>,
}

/// The cause groups of a dead-letter queue.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Groups {
    /// The dead-letter queue.
    pub dlq: String,
    /// How many entries were looked at.
    pub scanned: usize,
    /// Whether the queue goes on past them.
    pub truncated: bool,
    /// The groups, largest first.
    pub groups: Vec<Group>,
}

fn broker(source: &Source, e: &babelqueue::Error) -> ConsoleError {
    ConsoleError::Broker(source.scrub(&e.to_string()))
}

/// Entries `offset..offset+max` of the dead-letter queue of `queue`.
async fn chunk(
    source: &Source,
    queue: &Watched,
    offset: usize,
    max: usize,
) -> Result<Vec<babelqueue::redrive::Entry>, ConsoleError> {
    babelqueue::redrive::page(source.transport(), &queue.dlq, offset, max)
        .await
        .map_err(|e| broker(source, &e))
}

/// A page of the dead-letter queue of `queue` from position `from`: up to `limit` entries
/// `filter` accepts.
pub(crate) async fn page(
    source: &Source,
    queue: &Watched,
    filter: &Filter,
    from: usize,
    limit: usize,
) -> Result<Page, ConsoleError> {
    let limit = limit.clamp(1, MAX_PAGE);
    let now = now_ms();
    let mut entries = Vec::new();
    let mut at = from;
    let mut scanned = 0;
    let mut more = true;
    while entries.len() < limit && scanned < SCAN_LIMIT {
        let want = if filter.is_empty() {
            limit - entries.len()
        } else {
            CHUNK
        };
        let got = chunk(source, queue, at, want).await?;
        let read = got.len();
        for (i, entry) in got.iter().enumerate() {
            let view = EntryView::of(entry, at + i, now);
            if filter.matches(&view) {
                entries.push(view);
                if entries.len() == limit {
                    // Go on after this one.
                    scanned += i + 1;
                    at += i + 1;
                    return Ok(Page {
                        dlq: queue.dlq.clone(),
                        from,
                        entries,
                        next: Some(at),
                        scanned,
                    });
                }
            }
        }
        scanned += read;
        at += read;
        if read < want {
            more = false;
            break;
        }
    }
    Ok(Page {
        dlq: queue.dlq.clone(),
        from,
        entries,
        next: more.then_some(at),
        scanned,
    })
}

/// The entry `id`, looked for at `hint` first (the position a page showed it at), else from
/// the head, a chunk at a time.
pub(crate) async fn find(
    source: &Source,
    queue: &Watched,
    id: &str,
    hint: Option<usize>,
) -> Result<EntryDetail, ConsoleError> {
    let now = now_ms();
    if let Some(at) = hint
        && let Some(entry) = chunk(source, queue, at, 1).await?.first()
        && entry.id == id
    {
        return Ok(EntryDetail::of(entry, at, now));
    }
    let mut at = 0;
    loop {
        let got = chunk(source, queue, at, CHUNK).await?;
        if let Some(i) = got.iter().position(|e| e.id == id) {
            return Ok(EntryDetail::of(&got[i], at + i, now));
        }
        if got.len() < CHUNK {
            return Err(ConsoleError::NotFound(format!("{id} in {}", queue.dlq)));
        }
        at += got.len();
    }
}

/// The ids of the entries `filter` accepts, among the first `scan` (at most `max` ids).
pub(crate) async fn ids(
    source: &Source,
    queue: &Watched,
    filter: &Filter,
    scan: usize,
    max: usize,
) -> Result<Vec<String>, ConsoleError> {
    let now = now_ms();
    let mut out = Vec::new();
    let mut at = 0;
    while at < scan && out.len() < max {
        let got = chunk(source, queue, at, CHUNK.min(scan - at)).await?;
        for (i, entry) in got.iter().enumerate() {
            if out.len() < max && filter.matches(&EntryView::of(entry, at + i, now)) {
                out.push(entry.id.clone());
            }
        }
        if got.len() < CHUNK.min(scan - at) {
            break;
        }
        at += got.len();
    }
    Ok(out)
}

/// The first `scan` entries of the dead-letter queue of `queue`, grouped by cause.
pub(crate) async fn groups(
    source: &Source,
    queue: &Watched,
    scan: usize,
) -> Result<Groups, ConsoleError> {
    let now = now_ms();
    let mut by_cause: BTreeMap<String, Group> = BTreeMap::new();
    let mut at = 0;
    let mut truncated = false;
    while at < scan {
        let want = CHUNK.min(scan - at);
        let got = chunk(source, queue, at, want).await?;
        for (i, entry) in got.iter().enumerate() {
            let view = EntryView::of(entry, at + i, now);
            let group = by_cause.entry(view.cause.clone()).or_insert_with(|| Group {
                cause: view.cause.clone(),
                count: 0,
                reasons: BTreeMap::new(),
                example: view
                    .error
                    .clone()
                    .or_else(|| view.poison.clone())
                    .unwrap_or_default(),
                ids: Vec::new(),
            });
            group.count += 1;
            *group
                .reasons
                .entry(view.reason.clone().unwrap_or_else(|| "none".to_owned()))
                .or_default() += 1;
            if group.ids.len() < GROUP_IDS {
                group.ids.push(view.id);
            }
        }
        at += got.len();
        if got.len() < want {
            break;
        }
        truncated = at >= scan;
    }
    let mut groups: Vec<Group> = by_cause.into_values().collect();
    groups.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cause.cmp(&b.cause)));
    Ok(Groups {
        dlq: queue.dlq.clone(),
        scanned: at,
        truncated,
        groups,
    })
}

/// The stats of `queue`, `None` when the transport has no stats reader.
pub(crate) async fn stats(
    source: &Source,
    queue: &Watched,
) -> Result<Option<QueueStats>, ConsoleError> {
    let Some(reader) = source.transport().capabilities().stats_reader() else {
        return Ok(None);
    };
    match tokio::time::timeout(std::time::Duration::from_secs(5), reader.stats(&queue.name)).await {
        Ok(Ok(stats)) => Ok(Some(stats)),
        Ok(Err(e)) => Err(ConsoleError::Broker(source.scrub(&e.to_string()))),
        Err(_) => Err(ConsoleError::Broker(format!(
            "stats of {} timed out after 5s",
            queue.name
        ))),
    }
}
