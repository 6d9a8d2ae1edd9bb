//! The in-place path of the redrive tools: the DLQ is read page by page
//! ([`Browser::browse_page`]), each entry gets the id a drain would give it, and the entries
//! named are taken one by one ([`Taker`]); every other entry stays where it is.
//!
//! An entry taken shifts the ones behind it towards the head, so the next page starts that
//! many entries earlier. An entry gone between the read and the take (another tool or worker
//! took it) is left out of the result, as a drain that ran after it would not have seen it.

use std::collections::BTreeSet;

use super::entry::{Entry, EntryIds};
use super::{Redrive, RedriveItem, RedriveReport, Removed, by_id, plan};
use crate::Facts;
use crate::error::{Error, Result, TransportError};
use crate::transport::{Browser, Taker};

/// Entries read per page.
const PAGE: usize = 1000;

/// A pass over a queue from its head, one page at a time.
pub(super) struct Scan<'a> {
    browser: &'a dyn Browser,
    queue: &'a str,
    offset: usize,
    /// Where the page read last started, and how many of its entries were taken since.
    start: usize,
    taken: usize,
    ids: EntryIds,
    done: bool,
}

impl<'a> Scan<'a> {
    pub(super) fn new(browser: &'a dyn Browser, queue: &'a str) -> Scan<'a> {
        Scan {
            browser,
            queue,
            offset: 0,
            start: 0,
            taken: 0,
            ids: EntryIds::new(),
            done: false,
        }
    }

    /// The next page, each entry with its id (numbered from the head of the queue); `None`
    /// past the end.
    pub(super) async fn next_page(&mut self) -> Result<Option<Vec<Entry>>, TransportError> {
        if self.done {
            return Ok(None);
        }
        let bodies = self
            .browser
            .browse_page(self.queue, self.offset, PAGE)
            .await?;
        self.done = bodies.len() < PAGE;
        if bodies.is_empty() {
            return Ok(None);
        }
        self.start = self.offset;
        self.taken = 0;
        self.offset += bodies.len();
        Ok(Some(
            bodies
                .into_iter()
                .map(|body| Entry {
                    id: self.ids.next(&body),
                    body,
                })
                .collect(),
        ))
    }

    /// Where the `index`-th entry of the page read last is now, counted from the head.
    pub(super) fn at(&self, index: usize) -> usize {
        (self.start + index).saturating_sub(self.taken)
    }

    /// One entry of the page read last was taken out of the queue.
    pub(super) fn took_one(&mut self) {
        self.offset = self.offset.saturating_sub(1);
        self.taken += 1;
    }
}

/// The bodies whose id is one of `wanted`, in queue order, left in place.
pub(super) async fn find(
    browser: &dyn Browser,
    dlq: &str,
    wanted: &BTreeSet<&str>,
) -> Result<Vec<Vec<u8>>> {
    let mut scan = Scan::new(browser, dlq);
    let mut found = Vec::new();
    while let Some(page) = scan.next_page().await? {
        found.extend(
            page.into_iter()
                .filter(|e| wanted.contains(e.id.as_str()))
                .map(|e| e.body),
        );
    }
    Ok(found)
}

/// [`by_id::remove_with`] in place.
pub(super) async fn remove(
    taker: &dyn Taker,
    browser: &dyn Browser,
    dlq: &str,
    wanted: &BTreeSet<&str>,
    progress: &mut (dyn FnMut(&Removed) + Send),
) -> Result<Vec<Removed>> {
    let mut scan = Scan::new(browser, dlq);
    let mut gone: Vec<Removed> = Vec::new();
    while let Some(page) = scan.next_page().await? {
        for (index, entry) in page.into_iter().enumerate() {
            if !wanted.contains(entry.id.as_str()) {
                continue;
            }
            match taker.take(dlq, scan.at(index), &entry.body).await {
                Ok(0) => {}
                Ok(_) => {
                    scan.took_one();
                    let record = by_id::removed(&entry.body, entry.id);
                    progress(&record);
                    gone.push(record);
                }
                Err(e) => {
                    let done: Vec<&str> = gone.iter().map(|r| r.id.as_str()).collect();
                    return Err(Error::Redrive(format!(
                        "removing from {dlq:?} failed ({e}); removed before the failure: [{}]; \
                         every other entry was left in place",
                        done.join(", ")
                    )));
                }
            }
        }
    }
    Ok(gone)
}

/// [`super::redrive`] by ids, in place. The entries are read as browsed, without the facts a
/// delivery would carry (Redis and memory carry none a redrive reads).
pub(super) async fn redrive(
    taker: &dyn Taker,
    browser: &dyn Browser,
    dlq: &str,
    options: &Redrive,
    progress: &mut (dyn FnMut(&RedriveItem) + Send),
) -> Result<RedriveReport> {
    let facts = Facts::default();
    let mut scan = Scan::new(browser, dlq);
    let mut report = RedriveReport::default();
    while let Some(page) = scan.next_page().await? {
        for (index, entry) in page.into_iter().enumerate() {
            let (mut item, skip, body) = plan(&entry.body, &facts, dlq, options, entry.id)?;
            if let Some(why) = skip {
                item.skipped = Some(why);
                report.skipped += 1;
                progress(&item);
                report.items.push(item);
                continue;
            }
            match taker
                .take_to(dlq, scan.at(index), &entry.body, &item.to, body.as_bytes())
                .await
            {
                Ok(0) => {}
                Ok(_) => {
                    scan.took_one();
                    item.redriven = true;
                    report.redriven += 1;
                    progress(&item);
                    report.items.push(item);
                }
                Err(e) => {
                    return Err(Error::Redrive(format!(
                        "publishing {} to {:?} failed ({e}); it and every entry after it were \
                         left in {dlq:?}",
                        item.id, item.to
                    )));
                }
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::memory::MemoryTransport;
    use crate::redrive::{Access, redrive as run, remove_with};
    use crate::transport::{Headers, Outgoing, Transport};

    const DLQ: &str = "orders.dlq";

    fn record(id: &str, n: usize) -> Vec<u8> {
        format!(
            r#"{{"job":"urn:a","data":{{"n":{n}}},"meta":{{"id":"{id}","queue":"orders"}},"attempts":3,"dead_letter":{{"reason":"failed","original_queue":"orders"}}}}"#
        )
        .into_bytes()
    }

    /// Two identical queues of `n` records (ids `m-0` …), with a poison body, a twice-stored
    /// raw body and a meta.id held by two records spread over the pages.
    async fn twins(n: usize) -> (MemoryTransport, MemoryTransport) {
        let (a, b) = (MemoryTransport::new(), MemoryTransport::new());
        for memory in [&a, &b] {
            for i in 0..n {
                memory
                    .publish(DLQ, &record(&format!("m-{i}"), i))
                    .await
                    .unwrap();
                if i % 700 == 3 {
                    memory.publish(DLQ, b"\xff raw").await.unwrap();
                    memory.publish(DLQ, b"not json").await.unwrap();
                }
            }
            memory.publish(DLQ, &record("m-5", 99_999)).await.unwrap();
        }
        (a, b)
    }

    fn ids(entries: &[crate::redrive::Entry]) -> Vec<String> {
        entries.iter().map(|e| e.id.clone()).collect()
    }

    #[tokio::test]
    async fn removing_in_place_and_by_draining_give_the_same_result() {
        let (in_place, drained) = twins(2500).await;
        let listed = ids(&crate::redrive::entries(&in_place, DLQ, 0).await.unwrap());
        let raw_second = listed
            .iter()
            .find(|id| id.ends_with("#2"))
            .cloned()
            .unwrap();
        let wanted = ["m-1", "m-5", "m-1200", "m-2499", raw_second.as_str(), "zz"];
        let mut seen = (Vec::new(), Vec::new());
        let one = remove_with(&in_place, DLQ, &wanted, Access::InPlace, &mut |r| {
            seen.0.push(r.id.clone());
        })
        .await
        .unwrap();
        let two = remove_with(&drained, DLQ, &wanted, Access::Drain, &mut |r| {
            seen.1.push(r.id.clone());
        })
        .await
        .unwrap();
        assert_eq!(one, two);
        assert_eq!(seen.0, seen.1);
        assert_eq!(
            one.len(),
            6,
            "m-5 twice, the raw body's second copy: {seen:?}"
        );
        assert!(
            in_place.bodies(DLQ) == drained.bodies(DLQ),
            "the rest differs"
        );
        assert_eq!(in_place.len(DLQ), listed.len() - 6);
        assert_eq!(in_place.in_flight() + drained.in_flight(), 0);
    }

    #[tokio::test]
    async fn retrying_in_place_and_by_draining_give_the_same_result() {
        let (in_place, drained) = twins(2500).await;
        let items = Arc::new(Mutex::new((Vec::new(), Vec::new())));
        let options = |access| {
            Redrive::new()
                .ids(["m-0", "m-999", "m-1000", "m-5", "zz"])
                .access(access)
        };
        let (a, b) = (items.clone(), items.clone());
        let one = run(&in_place, DLQ, &options(Access::InPlace), &mut |i| {
            a.lock().unwrap().0.push(i.clone());
        })
        .await
        .unwrap();
        let two = run(&drained, DLQ, &options(Access::Drain), &mut |i| {
            b.lock().unwrap().1.push(i.clone());
        })
        .await
        .unwrap();
        assert_eq!(one, two);
        let seen = items.lock().unwrap();
        assert_eq!(seen.0, seen.1);
        assert_eq!(one.redriven, 5, "m-5 is held twice");
        assert!(
            in_place.bodies(DLQ) == drained.bodies(DLQ),
            "the rest differs"
        );
        assert!(
            in_place.bodies("orders") == drained.bodies("orders"),
            "the retried differ"
        );
        let back = String::from_utf8(in_place.bodies("orders")[0].clone()).unwrap();
        assert!(
            back.contains(r#""attempts":0"#) && !back.contains("dead_letter"),
            "{back}"
        );
    }

    #[tokio::test]
    async fn in_place_leaves_every_other_entry_untouched_headers_and_all() {
        let memory = MemoryTransport::new();
        let headers = Headers::from([("x-trace".to_owned(), "t-1".to_owned())]);
        for id in ["a", "b", "c"] {
            let body = record(id, 0);
            let outgoing = Outgoing::new(DLQ, &body).headers(&headers);
            memory.send(&outgoing).await.unwrap();
        }
        remove_with(&memory, DLQ, &["b"], Access::InPlace, &mut |_| {})
            .await
            .unwrap();
        // A drain restores copies without their headers; in place nothing else moved.
        assert_eq!(memory.headers_of(DLQ), [headers.clone(), headers.clone()]);
        remove_with(&memory, DLQ, &["a"], Access::Drain, &mut |_| {})
            .await
            .unwrap();
        assert_eq!(memory.headers_of(DLQ), [Headers::new()]);
    }

    #[tokio::test]
    async fn a_failed_move_takes_nothing_and_says_so() {
        let memory = MemoryTransport::new();
        for id in ["a", "b", "c"] {
            memory.publish(DLQ, &record(id, 0)).await.unwrap();
        }
        memory.fail_publishes_to("orders", true);
        let err = run(&memory, DLQ, &Redrive::new().ids(["a", "c"]), &mut |_| {})
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("publishing a to \"orders\" failed"), "{text}");
        assert!(text.contains("left in"), "{text}");
        assert_eq!(memory.len(DLQ), 3);
        assert_eq!(memory.len("orders"), 0);
    }
}
