//! How a tool addresses one dead-letter entry, whatever it holds.
//!
//! An entry that carries a `meta.id` is addressed by it (read leniently: a poison record keeps
//! the id of the envelope it was). Anything else (another SDK's raw poison record, a
//! version-gated body written byte for byte, bytes that were never JSON) is addressed by its
//! content: `sha256:` and the first 16 hex digits of the SHA-256 of its bytes, with `#2`, `#3`
//! … on the second and later copies of the same bytes in queue order. A content address does
//! not move when other entries are removed or added, on any broker, including those whose
//! listing drains and restores the queue (and so renumbers every broker position).

use std::collections::HashMap;

use babelqueue_envelope::Envelope;
use sha2::{Digest as _, Sha256};

/// The prefix of a content address.
const CONTENT: &str = "sha256:";

/// One dead-letter entry: its id ([`EntryIds`]) and its bytes, exactly as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Entry {
    /// The entry's id: `meta.id`, else its content address.
    pub id: String,
    /// The body, byte for byte.
    pub body: Vec<u8>,
}

/// Gives each entry of one pass over a dead-letter queue, in queue order, the id tools address
/// it by.
///
/// ```
/// use babelqueue_core::redrive::EntryIds;
///
/// let mut ids = EntryIds::new();
/// assert_eq!(ids.next(br#"{"job":"urn:a","meta":{"id":"m-1"}}"#), "m-1");
/// let raw = ids.next(b"\xff not json");
/// assert!(raw.starts_with("sha256:") && raw.len() == "sha256:".len() + 16);
/// assert_eq!(ids.next(b"\xff not json"), format!("{raw}#2"));
/// ```
#[derive(Debug, Default)]
pub struct EntryIds {
    /// How many entries without a `meta.id` had each content address so far.
    copies: HashMap<String, u32>,
}

impl EntryIds {
    /// A new pass, from the head of the queue.
    pub fn new() -> EntryIds {
        EntryIds::default()
    }

    /// The id of the next entry.
    pub fn next(&mut self, body: &[u8]) -> String {
        if let Some(id) = message_id(body) {
            return id;
        }
        let address = content_address(body);
        let seen = self.copies.entry(address.clone()).or_insert(0);
        *seen += 1;
        match *seen {
            1 => address,
            n => format!("{address}#{n}"),
        }
    }
}

/// Whether `id` is a content address (so it names an entry without a `meta.id`).
pub fn is_content_address(id: &str) -> bool {
    id.starts_with(CONTENT)
}

/// `bodies`, in queue order, with their ids.
pub(crate) fn entries(bodies: Vec<Vec<u8>>) -> Vec<Entry> {
    let mut ids = EntryIds::new();
    bodies
        .into_iter()
        .map(|body| Entry {
            id: ids.next(&body),
            body,
        })
        .collect()
}

/// The non-blank `meta.id` of a body, read leniently (a poison record may still carry one).
pub(crate) fn message_id(body: &[u8]) -> Option<String> {
    Envelope::decode_lenient(body)
        .envelope
        .message_id()
        .filter(|id| !id.trim().is_empty())
        .map(|id| id.into_owned())
}

fn content_address(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let mut address = String::with_capacity(CONTENT.len() + 16);
    address.push_str(CONTENT);
    for byte in &digest[..8] {
        address.push_str(&format!("{byte:02x}"));
    }
    address
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_addressed_by_its_meta_id_else_by_its_content() {
        let mut ids = EntryIds::new();
        let rows: [(&[u8], &str); 7] = [
            (br#"{"job":"urn:a","meta":{"id":"m-1"}}"#, "m-1"),
            // A poison record keeps the id of the envelope it was.
            (
                br#"{"job":"urn:a","data":{"x":1e400},"meta":{"id":"m-2"},"dead_letter":{}}"#,
                "m-2",
            ),
            // The same meta.id twice addresses both.
            (br#"{"job":"urn:b","meta":{"id":"m-1"}}"#, "m-1"),
            // SHA-256("") = e3b0c442 98fc1c14 …
            (b"", "sha256:e3b0c44298fc1c14"),
            (b"", "sha256:e3b0c44298fc1c14#2"),
            (br#"{"job":"urn:a","meta":{"id":"  "}}"#, "sha256:"),
            (b"", "sha256:e3b0c44298fc1c14#3"),
        ];
        for (body, id) in rows {
            let got = ids.next(body);
            assert!(got.starts_with(id), "{got} for {body:?}");
            assert_eq!(is_content_address(&got), id.starts_with("sha256:"));
        }
    }

    #[test]
    fn a_content_address_does_not_depend_on_the_entries_around_it() {
        let alone = EntryIds::new().next(b"plain text");
        let mut ids = EntryIds::new();
        ids.next(br#"{"job":"urn:a","meta":{"id":"m-1"}}"#);
        ids.next(b"other bytes");
        assert_eq!(ids.next(b"plain text"), alone);
    }
}
