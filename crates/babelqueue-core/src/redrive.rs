//! Dead-letter queue tooling: list a DLQ, and redrive its messages back to work.
//!
//! Redrive drains first, then processes, so a restored message is never seen twice in one run.
//! A message that cannot be redriven (poison, no identity, no target, filtered out, dry run)
//! is restored to the DLQ unchanged. Unlike the reference SDK, a failed publish restores the
//! message it was on *and* every message still drained, before the run stops: nothing is lost.
//!
//! Single entries are addressed by their id ([`find`], [`remove`], and [`Redrive::ids`] to
//! retry some), the way operators of Symfony Messenger's failure transport work with
//! `messenger:failed:show|retry|remove ID`. Every entry has one ([`EntryIds`]): its `meta.id`,
//! else the content address of its bytes, so another SDK's raw poison record or bytes that were
//! never JSON can be shown and removed too.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use babelqueue_envelope::{Envelope, RawJson};

use crate::Facts;
use crate::classify::{Class, classify};
use crate::error::{Error, Result, TransportError};
use crate::handler::HEADER_REPLAY_BYPASS;
use crate::transport::{Delivery, Headers, Outgoing, Transport};

mod by_id;
mod entry;
mod in_place;

pub use by_id::{Removed, find, remove, remove_with};
pub use entry::{Entry, EntryIds, is_content_address};

/// A filter over dead-lettered envelopes.
pub type Select = Box<dyn Fn(&Envelope) -> bool + Send + Sync>;

/// Redrive options.
#[must_use]
pub struct Redrive {
    to_queue: Option<String>,
    max: usize,
    dry_run: bool,
    select: Option<Select>,
    ids: Option<BTreeSet<String>>,
    bypass: bool,
    timeout: Duration,
    access: Access,
}

/// How the redrive tools reach the entries they act on ([`Redrive::access`], [`remove_with`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// In place where the transport can browse and take ([`Taker`](crate::Taker)): the
    /// entries are located with a paged browse and taken one by one, every other entry left
    /// where it is. Elsewhere, drained and restored.
    #[default]
    InPlace,
    /// Always drain the queue and restore every entry not taken (what a transport without a
    /// [`Taker`](crate::Taker) does; forced to compare the two).
    Drain,
}

impl fmt::Debug for Redrive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redrive")
            .field("to_queue", &self.to_queue)
            .field("max", &self.max)
            .field("dry_run", &self.dry_run)
            .field("ids", &self.ids)
            .field("bypass", &self.bypass)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl Default for Redrive {
    fn default() -> Self {
        Redrive {
            to_queue: None,
            max: 0,
            dry_run: false,
            select: None,
            ids: None,
            bypass: false,
            timeout: Duration::from_secs(1),
            access: Access::InPlace,
        }
    }
}

impl Redrive {
    /// Redrive everything to each message's original queue.
    pub fn new() -> Redrive {
        Redrive::default()
    }
    /// Redrive to this queue instead of the original one.
    pub fn to_queue(mut self, queue: impl Into<String>) -> Redrive {
        self.to_queue = Some(queue.into());
        self
    }
    /// Take at most `max` messages (0 = all available).
    pub fn max(mut self, max: usize) -> Redrive {
        self.max = max;
        self
    }
    /// Only report what would happen; every message is restored.
    pub fn dry_run(mut self, on: bool) -> Redrive {
        self.dry_run = on;
        self
    }
    /// Only redrive the messages `select` accepts.
    pub fn select(mut self, select: impl Fn(&Envelope) -> bool + Send + Sync + 'static) -> Redrive {
        self.select = Some(Box::new(select));
        self
    }
    /// Only redrive the entries whose id ([`EntryIds`]: `meta.id`, else a content address) is
    /// one of `ids` (together with [`select`](Redrive::select), when both are set); every other
    /// entry stays in the DLQ and is reported as `"not selected"`.
    ///
    /// ```
    /// use babelqueue_core::redrive::Redrive;
    ///
    /// let retry = Redrive::new().ids(["0192c1d2-7a0e-7c3f-9b1a-5d4e3f2a1b0c"]);
    /// # drop(retry);
    /// ```
    pub fn ids<I, S>(mut self, ids: I) -> Redrive
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.ids = Some(ids.into_iter().map(Into::into).collect());
        self
    }
    /// Stamp `bq-replay-bypass: 1` so handlers can skip external effects (needs header support).
    pub fn bypass(mut self, on: bool) -> Redrive {
        self.bypass = on;
        self
    }
    /// How the named entries are reached ([`Access::InPlace`] by default; it applies to a
    /// redrive by [`ids`](Redrive::ids) without a [`max`](Redrive::max)).
    pub fn access(mut self, access: Access) -> Redrive {
        self.access = access;
        self
    }
    /// How long to wait for the DLQ's messages.
    pub fn timeout(mut self, timeout: Duration) -> Redrive {
        self.timeout = timeout;
        self
    }
}

/// What happened to one DLQ message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedriveItem {
    /// The entry's id ([`EntryIds`]): `meta.id`, else the content address of its bytes.
    pub id: String,
    /// `meta.id` (`""` when the entry has none).
    pub message_id: String,
    /// `trace_id`.
    pub trace_id: String,
    /// The URN.
    pub urn: String,
    /// `dead_letter.reason`.
    pub reason: String,
    /// The DLQ.
    pub from_queue: String,
    /// The planned target (`""` when none).
    pub to: String,
    /// Whether it was published to `to`.
    pub redriven: bool,
    /// Whether the replay-bypass header was stamped.
    pub bypassed: bool,
    /// Why it stayed in the DLQ, when it did.
    pub skipped: Option<String>,
}

/// The result of a redrive run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedriveReport {
    /// Messages published back.
    pub redriven: usize,
    /// Messages restored to the DLQ.
    pub skipped: usize,
    /// One item per message, in DLQ order.
    pub items: Vec<RedriveItem>,
}

async fn drain(
    transport: &dyn Transport,
    dlq: &str,
    max: usize,
    timeout: Duration,
) -> Result<Vec<Delivery>, TransportError> {
    if let Some(batch) = transport.capabilities().batch_popper() {
        return batch.pop_batch(dlq, max, timeout).await;
    }
    let mut out = Vec::new();
    while max == 0 || out.len() < max {
        match transport
            .pop(
                dlq,
                if out.is_empty() {
                    timeout
                } else {
                    Duration::ZERO
                },
            )
            .await?
        {
            Some(d) => out.push(d),
            None => break,
        }
    }
    Ok(out)
}

async fn restore(
    transport: &dyn Transport,
    dlq: &str,
    delivery: &Delivery,
) -> Result<(), TransportError> {
    crate::send::on_behalf(transport, delivery, dlq, delivery.body(), None).await?;
    transport.ack(delivery).await
}

fn text(value: Option<std::borrow::Cow<'_, str>>) -> String {
    value.map(|v| v.into_owned()).unwrap_or_default()
}

/// What a redrive does with one entry: its report line (not settled yet), why it stays in the
/// DLQ (`None`: it goes back to work), and the body that goes back (the envelope without its
/// dead-letter block, `attempts` reset).
fn plan(
    raw: &[u8],
    facts: &Facts,
    dlq: &str,
    options: &Redrive,
    id: String,
) -> Result<(RedriveItem, Option<String>, String)> {
    let envelope = Envelope::decode_lenient(raw).envelope;
    let block = envelope
        .dead_letter()
        .and_then(|b| babelqueue_envelope::Object::parse(b.as_str()).ok());
    let block_text = |name: &str| {
        block
            .as_ref()
            .and_then(|b| b.get(name))
            .and_then(RawJson::as_string)
            .map(|r| r.into_owned())
            .filter(|r| !r.is_empty())
    };
    let mut item = RedriveItem {
        id,
        message_id: text(envelope.message_id()),
        trace_id: text(envelope.trace_id()),
        urn: envelope.urn().into_owned(),
        reason: block_text("reason").unwrap_or_default(),
        from_queue: dlq.to_owned(),
        ..RedriveItem::default()
    };
    item.to = options
        .to_queue
        .clone()
        .filter(|q| !q.is_empty())
        .or_else(|| block_text("original_queue"))
        .or_else(|| envelope.queue().map(|q| q.into_owned()))
        .unwrap_or_default();
    let unlisted = options
        .ids
        .as_ref()
        .is_some_and(|ids| !ids.contains(&item.id));
    // An entry not named is only reported: nothing below is read for it.
    if unlisted {
        return Ok((item, Some("not selected".into()), String::new()));
    }
    let poison = matches!(classify(raw, facts, dlq), Class::Poison(_));
    let job_is_string = envelope.job().is_some_and(|j| j.as_string().is_some());
    let mut skip: Option<String> = if poison || envelope.is_empty() || !job_is_string {
        let why = babelqueue_envelope::check_publishable(raw)
            .err()
            .map_or_else(|| "it has no job URN".to_owned(), |e| e.to_string());
        Some(format!(
            "not a readable envelope ({why}): kept in the dead-letter queue"
        ))
    } else if options
        .select
        .as_ref()
        .is_some_and(|select| !select(&envelope))
    {
        Some("not selected".into())
    } else if item.to.is_empty() {
        Some("no target queue (no original_queue, no meta.queue)".into())
    } else if options.dry_run {
        Some("dry run".into())
    } else {
        None
    };
    // What goes back to work passes the verdict its consumers run, like every publish.
    let body = match skip {
        Some(_) => String::new(),
        None => match back_to_work(envelope) {
            Ok(body) => body,
            Err(babelqueue_envelope::Error::Unpublishable(refused)) => {
                skip = Some(format!(
                    "its consumers would refuse it as poison ({refused}): kept in the \
                     dead-letter queue"
                ));
                String::new()
            }
            Err(e) => return Err(e.into()),
        },
    };
    Ok((item, skip, body))
}

/// The envelope that goes back to work: without its dead-letter block, `attempts` reset,
/// checked as every publish is.
fn back_to_work(mut copy: Envelope) -> std::result::Result<String, babelqueue_envelope::Error> {
    copy.remove("dead_letter");
    copy.set_attempts(0);
    copy.encode_checked()
}

/// Redrives the messages of `dlq`, calling `progress` after each one.
///
/// With [`Redrive::ids`] and no [`max`](Redrive::max), on a transport that can take entries in
/// place ([`Taker`](crate::Taker), with a [`Browser`](crate::Browser)), the DLQ is read page by
/// page and each entry named is moved to its target in one step; every other entry stays where
/// it is. The report is the one a drain gives: every entry, in DLQ order. Elsewhere (or with
/// [`Redrive::access`] set to [`Access::Drain`], or a replay-bypass header to carry) the DLQ
/// is drained, and what stays is restored in order.
pub async fn redrive(
    transport: &dyn Transport,
    dlq: &str,
    options: &Redrive,
    progress: &mut (dyn FnMut(&RedriveItem) + Send),
) -> Result<RedriveReport> {
    let capabilities = transport.capabilities();
    let bypass = options.bypass && capabilities.send_parts().headers;
    if let (Access::InPlace, Some(_), 0, false, Some(taker), Some(browser)) = (
        options.access,
        &options.ids,
        options.max,
        bypass,
        capabilities.taker(),
        capabilities.browser(),
    ) {
        return in_place::redrive(taker, browser, dlq, options, progress).await;
    }
    let drained = drain(transport, dlq, options.max, options.timeout).await?;
    let mut report = RedriveReport::default();
    let mut pending = drained.into_iter();
    let mut entry_ids = EntryIds::new();
    while let Some(delivery) = pending.next() {
        let id = entry_ids.next(delivery.body());
        let (mut item, skip, body) = plan(delivery.body(), delivery.facts(), dlq, options, id)?;
        if let Some(why) = skip {
            restore(transport, dlq, &delivery).await?;
            item.skipped = Some(why);
            report.skipped += 1;
            progress(&item);
            report.items.push(item);
            continue;
        }
        // The bypass header needs a transport that carries headers (`bypass` above); without
        // one the message goes back as any copy does, keeping what the delivery carried.
        let published = if bypass {
            item.bypassed = true;
            let headers = Headers::from([(HEADER_REPLAY_BYPASS.to_owned(), "1".to_owned())]);
            let outgoing = Outgoing::new(&item.to, body.as_bytes()).headers(&headers);
            transport.send(&outgoing).await
        } else {
            crate::send::on_behalf(transport, &delivery, &item.to, body.as_bytes(), None).await
        };
        if let Err(e) = published {
            // Nothing is lost: the message and every message still drained go back.
            let mut restore_errors = Vec::new();
            for d in std::iter::once(delivery).chain(pending) {
                if let Err(re) = restore(transport, dlq, &d).await {
                    restore_errors.push(re.to_string());
                }
            }
            return Err(Error::Redrive(format!(
                "publishing {} to {:?} failed ({e}); it and the rest of the batch were restored to {dlq:?}{}",
                item.id,
                item.to,
                if restore_errors.is_empty() {
                    String::new()
                } else {
                    format!(" (restore errors: {})", restore_errors.join("; "))
                }
            )));
        }
        transport.ack(&delivery).await?;
        item.redriven = true;
        report.redriven += 1;
        progress(&item);
        report.items.push(item);
    }
    Ok(report)
}

/// The entries of `dlq`, head first, each with its id ([`EntryIds`]): read in place where the
/// transport can browse, else drained and restored in order.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> babelqueue_core::Result<()> {
/// use babelqueue_core::{MemoryTransport, Transport, redrive};
///
/// let memory = MemoryTransport::new();
/// memory.publish("orders.dlq", br#"{"job":"urn:a","meta":{"id":"m-1"},"attempts":3}"#).await?;
/// memory.publish("orders.dlq", b"\xff raw bytes").await?;
/// let entries = redrive::entries(&memory, "orders.dlq", 0).await?;
/// assert_eq!(entries[0].id, "m-1");
/// assert!(entries[1].id.starts_with("sha256:"));
/// assert_eq!(entries[1].body, b"\xff raw bytes");
/// # Ok(()) }
/// ```
pub async fn entries(transport: &dyn Transport, dlq: &str, max: usize) -> Result<Vec<Entry>> {
    Ok(entry::entries(list(transport, dlq, max).await?))
}

/// The bodies in `dlq`, head first: read in place where the transport can browse, else drained
/// and restored in order.
pub async fn list(transport: &dyn Transport, dlq: &str, max: usize) -> Result<Vec<Vec<u8>>> {
    if let Some(browser) = transport.capabilities().browser() {
        return Ok(browser.browse(dlq, max).await?);
    }
    let drained = drain(transport, dlq, max, Duration::from_secs(1)).await?;
    let bodies = drained.iter().map(|d| d.body().to_vec()).collect();
    for d in &drained {
        restore(transport, dlq, d).await?;
    }
    Ok(bodies)
}

/// One page of `dlq`: up to `max` entries starting `offset` entries after its head (all the
/// rest when `max` is 0), each with its id ([`EntryIds`]), left in place. Where the transport
/// can browse, only the page is read ([`Browser::browse_page`](crate::Browser::browse_page));
/// else the queue is drained and restored in order, as [`list`] does.
///
/// A content address (`sha256:…`) numbers repeated copies of the same bytes from the head of
/// the page, not of the queue: the `#2` of a copy on a later page may read as the first; both
/// name the same bytes, so a retry or removal by that id acts on an identical entry.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> babelqueue_core::Result<()> {
/// use babelqueue_core::{MemoryTransport, Transport, redrive};
///
/// let memory = MemoryTransport::new();
/// for n in 1..=5 {
///     let body = format!(r#"{{"job":"urn:a","meta":{{"id":"m-{n}"}},"attempts":3}}"#);
///     memory.publish("orders.dlq", body.as_bytes()).await?;
/// }
/// let page = redrive::page(&memory, "orders.dlq", 2, 2).await?;
/// assert_eq!(page.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["m-3", "m-4"]);
/// # Ok(()) }
/// ```
pub async fn page(
    transport: &dyn Transport,
    dlq: &str,
    offset: usize,
    max: usize,
) -> Result<Vec<Entry>> {
    if let Some(browser) = transport.capabilities().browser() {
        return Ok(entry::entries(browser.browse_page(dlq, offset, max).await?));
    }
    let upto = if max == 0 {
        0
    } else {
        offset.saturating_add(max)
    };
    let mut bodies = list(transport, dlq, upto).await?;
    let bodies = if offset >= bodies.len() {
        Vec::new()
    } else {
        bodies.split_off(offset)
    };
    Ok(entry::entries(bodies))
}
