//! Dead-letter entries addressed by their id ([`EntryIds`]: `meta.id`, else a content
//! address): show them, remove them.
//!
//! Where the transport can take entries in place ([`Taker`](crate::Taker), with a
//! [`Browser`](crate::Browser)), the DLQ is read page by page and each entry named is taken
//! out of it; every other entry stays where it is. Elsewhere removing drains the DLQ,
//! acknowledges the messages named, and restores every other one in its order. When the broker
//! fails half-way, what was not settled yet goes back (or, when even that fails, stays
//! unacknowledged, so the broker delivers it again): nothing is lost, and the error says which
//! messages were removed before it.

use std::collections::BTreeSet;
use std::time::Duration;

use babelqueue_envelope::{Envelope, Object, RawJson};

use super::entry::{self, EntryIds};
use super::{Access, drain, in_place, list, restore};
use crate::error::{Error, Result};
use crate::transport::Transport;

/// How long [`remove`] waits for the DLQ's first message.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// One message [`remove`] took out of the dead-letter queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Removed {
    /// The entry's id ([`EntryIds`]).
    pub id: String,
    /// `meta.id` (`""` when the entry has none).
    pub message_id: String,
    /// The URN (`""` when the body has none).
    pub urn: String,
    /// `dead_letter.reason` (`""` when the record has no dead-letter block).
    pub reason: String,
}

/// The bodies in `dlq` whose id ([`EntryIds`]) is one of `ids`, in DLQ order, left in the queue
/// (read in place where the transport can browse, else drained and restored, like [`list`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> babelqueue_core::Result<()> {
/// use babelqueue_core::{MemoryTransport, Transport, redrive};
///
/// let memory = MemoryTransport::new();
/// memory.publish("orders.dlq", br#"{"job":"urn:a","meta":{"id":"m-1"},"attempts":3}"#).await?;
/// let found = redrive::find(&memory, "orders.dlq", &["m-1"]).await?;
/// assert_eq!(found.len(), 1);
/// assert_eq!(memory.len("orders.dlq"), 1);
/// # Ok(()) }
/// ```
pub async fn find<S: AsRef<str>>(
    transport: &dyn Transport,
    dlq: &str,
    ids: &[S],
) -> Result<Vec<Vec<u8>>> {
    let wanted: BTreeSet<&str> = ids.iter().map(AsRef::as_ref).collect();
    // Page by page where entries are taken in place (a ranged read); else one read.
    let capabilities = transport.capabilities();
    if let (Some(_), Some(browser)) = (capabilities.taker(), capabilities.browser()) {
        return in_place::find(browser, dlq, &wanted).await;
    }
    let mut entries = entry::entries(list(transport, dlq, 0).await?);
    entries.retain(|entry| wanted.contains(entry.id.as_str()));
    Ok(entries.into_iter().map(|entry| entry.body).collect())
}

pub(super) fn removed(body: &[u8], id: String) -> Removed {
    let envelope = Envelope::decode_lenient(body).envelope;
    let reason = envelope
        .dead_letter()
        .and_then(|b| Object::parse(b.as_str()).ok())
        .and_then(|b| {
            b.get("reason")
                .and_then(RawJson::as_string)
                .map(|r| r.into_owned())
        })
        .unwrap_or_default();
    Removed {
        id,
        message_id: envelope
            .message_id()
            .map(|id| id.into_owned())
            .unwrap_or_default(),
        urn: envelope.urn().into_owned(),
        reason,
    }
}

/// Deletes the entries of `dlq` whose id ([`EntryIds`]) is one of `ids`, calling `progress`
/// after each;
/// every other message is restored, in order. Returns what was removed, in DLQ order (an id
/// not found is simply absent from it).
///
/// On a broker failure the run stops: the message it was on and every message still drained
/// are restored (or left unacknowledged for the broker to deliver again), and the
/// [`Error::Redrive`] names the messages already removed.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> babelqueue_core::Result<()> {
/// use babelqueue_core::{MemoryTransport, Transport, redrive};
///
/// let memory = MemoryTransport::new();
/// memory.publish("orders.dlq", br#"{"job":"urn:a","meta":{"id":"m-1"},"attempts":3}"#).await?;
/// memory.publish("orders.dlq", br#"{"job":"urn:a","meta":{"id":"m-2"},"attempts":3}"#).await?;
/// let gone = redrive::remove(&memory, "orders.dlq", &["m-1"], &mut |_| {}).await?;
/// assert_eq!(gone[0].message_id, "m-1");
/// assert_eq!(memory.len("orders.dlq"), 1);
/// # Ok(()) }
/// ```
pub async fn remove<S: AsRef<str>>(
    transport: &dyn Transport,
    dlq: &str,
    ids: &[S],
    progress: &mut (dyn FnMut(&Removed) + Send),
) -> Result<Vec<Removed>> {
    remove_with(transport, dlq, ids, Access::InPlace, progress).await
}

/// [`remove`], reaching the entries as `access` says: [`Access::Drain`] drains and restores
/// even where the transport could take them in place (to compare the two).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> babelqueue_core::Result<()> {
/// use babelqueue_core::{MemoryTransport, Transport, redrive};
/// use babelqueue_core::redrive::Access;
///
/// let memory = MemoryTransport::new();
/// memory.publish("orders.dlq", br#"{"job":"urn:a","meta":{"id":"m-1"},"attempts":3}"#).await?;
/// let gone = redrive::remove_with(&memory, "orders.dlq", &["m-1"], Access::Drain, &mut |_| {}).await?;
/// assert_eq!(gone.len(), 1);
/// # Ok(()) }
/// ```
pub async fn remove_with<S: AsRef<str>>(
    transport: &dyn Transport,
    dlq: &str,
    ids: &[S],
    access: Access,
    progress: &mut (dyn FnMut(&Removed) + Send),
) -> Result<Vec<Removed>> {
    let wanted: BTreeSet<&str> = ids.iter().map(AsRef::as_ref).collect();
    let capabilities = transport.capabilities();
    if let (Access::InPlace, Some(taker), Some(browser)) =
        (access, capabilities.taker(), capabilities.browser())
    {
        return in_place::remove(taker, browser, dlq, &wanted, progress).await;
    }
    let drained = drain(transport, dlq, 0, DRAIN_TIMEOUT).await?;
    let mut gone = Vec::new();
    let mut pending = drained.into_iter();
    let mut entry_ids = EntryIds::new();
    while let Some(delivery) = pending.next() {
        let id = Some(entry_ids.next(delivery.body())).filter(|id| wanted.contains(id.as_str()));
        let settled = match &id {
            Some(_) => transport.ack(&delivery).await,
            None => restore(transport, dlq, &delivery).await,
        };
        if let Err(e) = settled {
            // Nothing is lost: the message and every message still drained go back.
            let mut restore_errors = Vec::new();
            for d in std::iter::once(delivery).chain(pending) {
                if let Err(re) = restore(transport, dlq, &d).await {
                    restore_errors.push(re.to_string());
                }
            }
            let done: Vec<&str> = gone.iter().map(|r: &Removed| r.id.as_str()).collect();
            return Err(Error::Redrive(format!(
                "removing from {dlq:?} failed ({e}); removed before the failure: [{}]; every other \
                 drained message was {}",
                done.join(", "),
                if restore_errors.is_empty() {
                    "restored".to_owned()
                } else {
                    format!(
                        "restored or left unacknowledged for the broker to deliver again \
                         (restore errors: {})",
                        restore_errors.join("; ")
                    )
                }
            )));
        }
        if let Some(id) = id {
            let record = removed(delivery.body(), id);
            progress(&record);
            gone.push(record);
        }
    }
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryTransport;
    use crate::redrive::entry::message_id;
    use crate::redrive::{Redrive, redrive};

    const DLQ: &str = "orders.dlq";

    fn record(id: &str) -> Vec<u8> {
        format!(
            r#"{{"job":"urn:a","meta":{{"id":"{id}","queue":"orders"}},"attempts":3,"dead_letter":{{"reason":"failed","original_queue":"orders"}}}}"#
        )
        .into_bytes()
    }

    async fn seeded(memory: &MemoryTransport, ids: &[&str]) {
        for id in ids {
            memory.publish(DLQ, &record(id)).await.unwrap();
        }
        memory.publish(DLQ, b"not json").await.unwrap();
    }

    fn ids_in(memory: &MemoryTransport, queue: &str) -> Vec<String> {
        memory
            .bodies(queue)
            .iter()
            .map(|b| message_id(b).unwrap_or_else(|| "<poison>".into()))
            .collect()
    }

    #[tokio::test]
    async fn find_reads_the_named_messages_and_leaves_them() {
        let memory = MemoryTransport::new();
        seeded(&memory, &["a", "b", "c"]).await;
        let found = find(&memory, DLQ, &["c", "a", "zz"]).await.unwrap();
        assert_eq!(found, vec![record("a"), record("c")]);
        assert_eq!(memory.len(DLQ), 4);
    }

    #[tokio::test]
    async fn remove_deletes_only_the_named_messages_and_keeps_the_order() {
        let memory = MemoryTransport::new();
        seeded(&memory, &["a", "b", "c"]).await;
        let mut seen = Vec::new();
        let gone = remove(&memory, DLQ, &["b", "zz"], &mut |r| {
            seen.push(r.message_id.clone());
        })
        .await
        .unwrap();
        assert_eq!(seen, ["b"]);
        assert_eq!(
            gone,
            vec![Removed {
                id: "b".into(),
                message_id: "b".into(),
                urn: "urn:a".into(),
                reason: "failed".into()
            }]
        );
        assert_eq!(ids_in(&memory, DLQ), ["a", "c", "<poison>"]);
        assert_eq!(memory.in_flight(), 0);
    }

    #[tokio::test]
    async fn entries_without_a_meta_id_are_shown_and_removed_by_their_content_address() {
        let memory = MemoryTransport::new();
        seeded(&memory, &["a"]).await;
        memory.publish(DLQ, b"\xff\xfe raw").await.unwrap();
        memory.publish(DLQ, b"not json").await.unwrap();
        let listed = crate::redrive::entries(&memory, DLQ, 0).await.unwrap();
        let ids: Vec<&str> = listed.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids[0], "a");
        assert!(
            ids[1].starts_with("sha256:") && !ids[1].contains('#'),
            "{ids:?}"
        );
        assert_eq!(ids[3], format!("{}#2", ids[1]), "the same bytes twice");
        let raw = ids[2].to_owned();
        let shown = find(&memory, DLQ, &[raw.as_str()]).await.unwrap();
        assert_eq!(shown, vec![b"\xff\xfe raw".to_vec()]);
        let second_copy = format!("{}#2", ids[1]);
        let gone = remove(
            &memory,
            DLQ,
            &[raw.as_str(), second_copy.as_str()],
            &mut |_| {},
        )
        .await
        .unwrap();
        assert_eq!(gone.len(), 2);
        assert_eq!(gone[0].id, raw);
        assert_eq!(gone[0].message_id, "");
        assert_eq!(ids_in(&memory, DLQ), ["a", "<poison>"]);
    }

    #[tokio::test]
    async fn a_failing_broker_loses_nothing_and_says_what_was_removed() {
        let memory = MemoryTransport::with_visibility_timeout(Duration::from_millis(50));
        seeded(&memory, &["a", "b", "c"]).await;
        // "a" is removed (an ack), then restoring "b" fails: b, c and the poison record go back
        // unacknowledged and return after the visibility timeout.
        memory.fail_publishes_to(DLQ, true);
        let err = remove_with(&memory, DLQ, &["a", "c"], Access::Drain, &mut |_| {})
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("removed before the failure: [a]"), "{text}");
        assert!(text.contains("left unacknowledged"), "{text}");
        memory.fail_publishes_to(DLQ, false);
        tokio::time::sleep(Duration::from_millis(120)).await;
        let mut back = Vec::new();
        while let Some(d) = memory.pop(DLQ, Duration::ZERO).await.unwrap() {
            back.push(message_id(d.body()).unwrap_or_else(|| "<poison>".into()));
            memory.ack(&d).await.unwrap();
        }
        back.sort();
        assert_eq!(back, ["<poison>", "b", "c"], "only the removed one is gone");
    }

    #[tokio::test]
    async fn retry_by_id_redrives_the_named_messages_only() {
        let memory = MemoryTransport::new();
        seeded(&memory, &["a", "b", "c"]).await;
        let report = redrive(&memory, DLQ, &Redrive::new().ids(["c"]), &mut |_| {})
            .await
            .unwrap();
        assert_eq!((report.redriven, report.skipped), (1, 3));
        let skipped: Vec<_> = report
            .items
            .iter()
            .filter(|i| i.skipped.as_deref() == Some("not selected"))
            .map(|i| i.id.as_str())
            .collect();
        // Every entry not named is "not selected", whatever it holds.
        assert_eq!(skipped[..2], ["a", "b"]);
        assert!(skipped[2].starts_with("sha256:"), "{skipped:?}");
        assert_eq!(ids_in(&memory, "orders"), ["c"]);
        assert_eq!(ids_in(&memory, DLQ), ["a", "b", "<poison>"]);
    }
}
