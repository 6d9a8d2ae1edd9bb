//! What the console shows of one dead-letter entry ([`EntryView`]), and the filter over them
//! ([`Filter`]). Read leniently: a poison body is shown, never refused.

use std::time::{SystemTime, UNIX_EPOCH};

use babelqueue::envelope::{Envelope, Object, RawJson, check_publishable};
use babelqueue::redrive::Entry;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::fingerprint::fingerprint;

/// One dead-letter entry as listed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EntryView {
    /// The id tools address it by: `meta.id`, else the content address of its bytes.
    pub id: String,
    /// Its position in the dead-letter queue (0 = head) when it was read.
    pub position: usize,
    /// The job URN (`""` when the body has none).
    pub urn: String,
    /// `meta.id`, when present.
    pub message_id: Option<String>,
    /// `dead_letter.reason` (`failed`, `unknown_urn`, `poison`), when present.
    pub reason: Option<String>,
    /// `dead_letter.error`, when present.
    pub error: Option<String>,
    /// `dead_letter.exception`, when present.
    pub exception: Option<String>,
    /// The cause fingerprint: the error text (else the poison cause, else the reason) with
    /// numbers, hexadecimal ids and UUIDs masked.
    pub cause: String,
    /// `dead_letter.failed_at`, milliseconds since the Unix epoch, when present.
    pub failed_at_ms: Option<u64>,
    /// Seconds since `failed_at`, when known.
    pub age_secs: Option<u64>,
    /// `dead_letter.original_queue`, when present.
    pub original_queue: Option<String>,
    /// `dead_letter.attempts` (else the envelope's `attempts`), when present.
    pub attempts: Option<String>,
    /// Why a consumer would refuse the body, when it would (a poison body).
    pub poison: Option<String>,
    /// The body's size in bytes.
    pub size: usize,
}

/// One entry with everything the detail page shows.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EntryDetail {
    /// The listed fields.
    #[serde(flatten)]
    pub entry: EntryView,
    /// The envelope, pretty-printed, when the body is JSON.
    pub pretty: Option<String>,
    /// The `dead_letter` block's members (the facts of the failure), in order.
    pub facts: Vec<Member>,
    /// The `meta` block's members (the envelope's headers), in order.
    pub meta: Vec<Member>,
    /// The body as text when it is UTF-8.
    pub text: Option<String>,
    /// The body, standard base64.
    pub base64: String,
    /// The first 4 KiB of the body, hexadecimal.
    pub hex: String,
}

/// One member of a block: its name and its value (a string unquoted, anything else as JSON).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Member {
    /// The name.
    pub name: String,
    /// The value.
    pub value: String,
}

/// The filter of the dead-letter browser; every field set must hold.
#[derive(Debug, Clone, Default, Deserialize, IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
pub struct Filter {
    /// The URN contains this text.
    pub urn: Option<String>,
    /// `dead_letter.reason` is exactly this.
    pub reason: Option<String>,
    /// The cause fingerprint is exactly this, or the error text contains it.
    pub cause: Option<String>,
    /// Failed at least this many seconds ago.
    pub older_than: Option<u64>,
    /// Failed at most this many seconds ago.
    pub newer_than: Option<u64>,
}

impl Filter {
    /// Whether no field is set (every entry matches).
    pub fn is_empty(&self) -> bool {
        [&self.urn, &self.reason, &self.cause]
            .iter()
            .all(|f| f.as_deref().is_none_or(str::is_empty))
            && self.older_than.is_none()
            && self.newer_than.is_none()
    }

    /// Whether `entry` passes. An entry whose age is unknown passes no age bound.
    pub fn matches(&self, entry: &EntryView) -> bool {
        let set = |f: &Option<String>| f.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
        let urn_ok = set(&self.urn).is_none_or(|urn| entry.urn.contains(&urn));
        let reason_ok =
            set(&self.reason).is_none_or(|r| entry.reason.as_deref() == Some(r.as_str()));
        let cause_ok = set(&self.cause).is_none_or(|cause| {
            let in_text = entry
                .error
                .as_deref()
                .is_some_and(|e| e.to_lowercase().contains(&cause.to_lowercase()));
            entry.cause == cause || in_text
        });
        let older_ok = self
            .older_than
            .is_none_or(|min| entry.age_secs.is_some_and(|age| age >= min));
        let newer_ok = self
            .newer_than
            .is_none_or(|max| entry.age_secs.is_some_and(|age| age <= max));
        urn_ok && reason_ok && cause_ok && older_ok && newer_ok
    }
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn text_of(value: &RawJson) -> Option<String> {
    match value.as_string() {
        Some(s) => Some(s.into_owned()),
        None if value.is_null() => None,
        None => Some(value.as_str().to_owned()),
    }
}

fn members(block: Option<&Object>) -> Vec<Member> {
    block.map_or_else(Vec::new, |b| {
        b.iter()
            .map(|(k, v)| Member {
                name: k.name().into_owned(),
                value: text_of(v).unwrap_or_else(|| "null".to_owned()),
            })
            .collect()
    })
}

fn block(envelope: &Envelope, name: &str) -> Option<Object> {
    envelope
        .get(name)
        .and_then(|raw| Object::parse(raw.as_str()).ok())
}

impl EntryView {
    /// The view of `entry`, found at `position`, `now_ms` being the time of reading.
    pub fn of(entry: &Entry, position: usize, now_ms: u64) -> EntryView {
        let body = entry.body.as_slice();
        let envelope = Envelope::decode_lenient(body).envelope;
        let dead = block(&envelope, "dead_letter");
        let field = |k: &str| dead.as_ref().and_then(|b| b.get(k)).and_then(text_of);
        let poison = check_publishable(body).err().map(|e| e.to_string());
        let error = field("error");
        let reason = field("reason");
        let cause_text = error
            .clone()
            .or_else(|| poison.clone())
            .or_else(|| reason.clone())
            .unwrap_or_default();
        let failed_at_ms = field("failed_at").and_then(|t| t.parse::<u64>().ok());
        EntryView {
            id: entry.id.clone(),
            position,
            urn: envelope.urn().into_owned(),
            message_id: envelope.message_id().map(|id| id.into_owned()),
            reason,
            exception: field("exception"),
            cause: fingerprint(&cause_text),
            error,
            age_secs: failed_at_ms.map(|at| now_ms.saturating_sub(at) / 1000),
            failed_at_ms,
            original_queue: field("original_queue"),
            attempts: field("attempts")
                .or_else(|| envelope.get("attempts").and_then(|a| text_of(&a))),
            poison,
            size: body.len(),
        }
    }
}

impl EntryDetail {
    /// Everything shown of `entry`.
    pub fn of(entry: &Entry, position: usize, now_ms: u64) -> EntryDetail {
        let body = entry.body.as_slice();
        let envelope = Envelope::decode_lenient(body).envelope;
        let pretty = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok());
        let shown = &body[..body.len().min(4096)];
        EntryDetail {
            entry: EntryView::of(entry, position, now_ms),
            pretty,
            facts: members(block(&envelope, "dead_letter").as_ref()),
            meta: members(block(&envelope, "meta").as_ref()),
            text: std::str::from_utf8(body).ok().map(str::to_owned),
            base64: base64::engine::general_purpose::STANDARD.encode(body),
            hex: shown.iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

/// A duration for people: `42s`, `5m`, `3h`, `2d`.
pub(crate) fn human_age(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `body` as an entry (`Entry` is built by the library: through a page of memory://).
    fn entry(body: &[u8]) -> Entry {
        use babelqueue::Transport as _;
        let memory = babelqueue::MemoryTransport::new();
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                memory.publish("d", body).await.unwrap();
                babelqueue::redrive::page(&memory, "d", 0, 1).await.unwrap()
            })
            .remove(0)
    }

    const FAILED: &[u8] = br#"{"job":"urn:babel:orders:created","data":{},"meta":{"id":"m-1"},"attempts":3,"dead_letter":{"reason":"failed","error":"order 42 failed","exception":"Boom","failed_at":1000000,"original_queue":"orders","attempts":3,"lang":"rust"}}"#;

    #[test]
    fn a_failed_entry_shows_its_block() {
        let view = EntryView::of(&entry(FAILED), 7, 61_000_000);
        assert_eq!(view.id, "m-1");
        assert_eq!(view.position, 7);
        assert_eq!(view.urn, "urn:babel:orders:created");
        assert_eq!(view.reason.as_deref(), Some("failed"));
        assert_eq!(view.cause, "order # failed");
        assert_eq!(view.age_secs, Some(60_000));
        assert_eq!(view.original_queue.as_deref(), Some("orders"));
        assert_eq!(view.attempts.as_deref(), Some("3"));
        assert!(view.poison.is_none());
    }

    #[test]
    fn a_poison_body_is_shown_with_its_bytes() {
        let detail = EntryDetail::of(&entry(b"\xff\x00<script>"), 0, 0);
        assert!(detail.entry.id.starts_with("sha256:"));
        assert!(detail.entry.poison.is_some());
        assert!(detail.text.is_none());
        assert_eq!(detail.hex, "ff003c7363726970743e");
        assert_eq!(detail.base64, "/wA8c2NyaXB0Pg==");
    }

    #[test]
    fn the_filter_holds_every_field_set() {
        let view = EntryView::of(&entry(FAILED), 0, 61_000_000);
        let rows: [(Filter, bool); 9] = [
            (Filter::default(), true),
            (
                Filter {
                    urn: Some("orders".into()),
                    ..Filter::default()
                },
                true,
            ),
            (
                Filter {
                    urn: Some("billing".into()),
                    ..Filter::default()
                },
                false,
            ),
            (
                Filter {
                    reason: Some("poison".into()),
                    ..Filter::default()
                },
                false,
            ),
            (
                Filter {
                    cause: Some("order # failed".into()),
                    ..Filter::default()
                },
                true,
            ),
            (
                Filter {
                    cause: Some("ORDER 42".into()),
                    ..Filter::default()
                },
                true,
            ),
            (
                Filter {
                    older_than: Some(3600),
                    ..Filter::default()
                },
                true,
            ),
            (
                Filter {
                    newer_than: Some(3600),
                    ..Filter::default()
                },
                false,
            ),
            (
                Filter {
                    urn: Some("orders".into()),
                    reason: Some("failed".into()),
                    ..Filter::default()
                },
                true,
            ),
        ];
        for (filter, expected) in rows {
            assert_eq!(filter.matches(&view), expected, "{filter:?}");
        }
        let undated = EntryView::of(&entry(br#"{"job":"urn:a"}"#), 0, 0);
        assert!(
            !Filter {
                older_than: Some(0),
                ..Filter::default()
            }
            .matches(&undated)
        );
    }
}
