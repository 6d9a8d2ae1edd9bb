//! Counting what the handlers saw: one log line per handler call, read back from the logs of
//! every worker incarnation, turned into lost / duplicated / corrupted.
//!
//! A worker's handler appends one line per call with a single `write(2)` of the whole line on an
//! `O_APPEND` file, so a SIGKILL keeps every line written before it and never leaves half of one
//! in the middle of the file (a torn last line is counted, never parsed).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Payloads up to this many bytes are logged as their exact text; larger ones as their length and
/// FNV-1a 64 hash (a 10 MB payload must not be copied into the log on every attempt).
pub(crate) const INLINE_LIMIT: usize = 4096;

/// FNV-1a, 64 bits: a stable digest of a large payload, with no dependency.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// What a handler saw of `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The exact text.
    Text(String),
    /// The length in bytes and the FNV-1a hash of a large payload.
    Digest { len: u64, fnv: u64 },
}

impl Seen {
    /// What a handler logs for `data`.
    pub(crate) fn of(data: &str) -> Seen {
        if data.len() <= INLINE_LIMIT {
            Seen::Text(data.to_owned())
        } else {
            Seen::Digest {
                len: data.len() as u64,
                fnv: fnv1a(data.as_bytes()),
            }
        }
    }

    /// Whether this is exactly `expected`, byte for byte.
    pub(crate) fn matches(&self, expected: &str) -> bool {
        match self {
            Seen::Text(text) => text == expected,
            Seen::Digest { len, fnv } => {
                *len == expected.len() as u64 && *fnv == fnv1a(expected.as_bytes())
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Seen::Text(text) => {
                let mut shown: String = text.chars().take(160).collect();
                if shown.len() < text.len() {
                    shown.push('…');
                }
                format!("{shown:?}")
            }
            Seen::Digest { len, fnv } => format!("{len} bytes, fnv {fnv:016x}"),
        }
    }
}

/// One handler call, as a worker logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    /// `meta.id` of the message (empty when it had none).
    pub(crate) id: String,
    /// The URN the runtime routed it by.
    pub(crate) urn: String,
    /// `attempts` as the handler saw it.
    pub(crate) attempts: i64,
    /// The worker incarnation that made the call.
    pub(crate) worker: u32,
    /// What the handler saw of `data`.
    pub(crate) seen: Seen,
    /// When, in milliseconds since the epoch (evidence for the report; 0 when unknown).
    pub(crate) at_ms: u64,
}

impl Call {
    /// The log line, newline included.
    pub(crate) fn to_line(&self) -> String {
        let mut value = json!({
            "id": self.id,
            "urn": self.urn,
            "a": self.attempts,
            "w": self.worker,
            "t": self.at_ms,
        });
        if let Value::Object(map) = &mut value {
            match &self.seen {
                Seen::Text(text) => {
                    map.insert("data".into(), Value::String(text.clone()));
                }
                Seen::Digest { len, fnv } => {
                    map.insert("len".into(), json!(len));
                    map.insert("fnv".into(), json!(fnv));
                }
            }
        }
        let mut line = value.to_string();
        line.push('\n');
        line
    }

    /// Reads one log line back; `None` when it is not one.
    pub(crate) fn parse(line: &str) -> Option<Call> {
        let value: Value = serde_json::from_str(line).ok()?;
        let seen = match value.get("data") {
            Some(Value::String(text)) => Seen::Text(text.clone()),
            _ => Seen::Digest {
                len: value.get("len")?.as_u64()?,
                fnv: value.get("fnv")?.as_u64()?,
            },
        };
        Some(Call {
            id: value.get("id")?.as_str()?.to_owned(),
            urn: value.get("urn")?.as_str()?.to_owned(),
            attempts: value.get("a")?.as_i64()?,
            worker: u32::try_from(value.get("w")?.as_u64()?).ok()?,
            seen,
            at_ms: value.get("t").and_then(Value::as_u64).unwrap_or(0),
        })
    }
}

/// What the logs say about a set of published messages.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    /// Handler calls per published id.
    pub(crate) calls: BTreeMap<String, u64>,
    /// Calls beyond the first, summed over the published ids.
    pub(crate) duplicated: u64,
    /// Calls whose `data` differs from what was published (or whose id was never published).
    pub(crate) corrupted: u64,
    /// A few examples of corruption, for the report.
    pub(crate) corruption_examples: Vec<String>,
    /// Lines that are not handler calls (a torn last line, or garbage).
    pub(crate) unreadable: u64,
    /// Every call, in log order.
    pub(crate) all: Vec<Call>,
}

impl Tally {
    /// Counts `lines` against `expected` (published id → exact `data` text).
    #[cfg(test)]
    pub(crate) fn count<'a>(
        expected: &BTreeMap<String, String>,
        lines: impl IntoIterator<Item = &'a str>,
    ) -> Tally {
        let mut tally = Tally::default();
        for line in lines {
            if line.trim().is_empty() {
                continue;
            }
            tally.add(expected, line);
        }
        tally
    }

    /// Adds one line.
    pub(crate) fn add(&mut self, expected: &BTreeMap<String, String>, line: &str) {
        let Some(call) = Call::parse(line) else {
            self.unreadable += 1;
            return;
        };
        match expected.get(&call.id) {
            Some(data) => {
                let n = self.calls.entry(call.id.clone()).or_insert(0);
                *n += 1;
                if *n > 1 {
                    self.duplicated += 1;
                }
                if !call.seen.matches(data) {
                    self.corrupted += 1;
                    self.example(format!(
                        "{} (worker {}, attempts {}): handler saw {} instead of {}",
                        call.id,
                        call.worker,
                        call.attempts,
                        call.seen.describe(),
                        Seen::of(data).describe()
                    ));
                }
            }
            None => {
                self.corrupted += 1;
                self.example(format!(
                    "a handler saw id {:?} (urn {:?}), which was never published",
                    call.id, call.urn
                ));
            }
        }
        self.all.push(call);
    }

    fn example(&mut self, text: String) {
        if self.corruption_examples.len() < 5 {
            self.corruption_examples.push(text);
        }
    }

    /// Whether `id` was handled at least once.
    pub(crate) fn handled(&self, id: &str) -> bool {
        self.calls.contains_key(id)
    }

    /// The published ids never handled.
    pub(crate) fn missing<'a>(
        &self,
        published: impl IntoIterator<Item = &'a String>,
    ) -> Vec<String> {
        published
            .into_iter()
            .filter(|id| !self.handled(id))
            .cloned()
            .collect()
    }
}

/// Lost: published, never handled, and not found on the broker either.
pub(crate) fn lost(
    published: &BTreeMap<String, String>,
    tally: &Tally,
    on_broker: &BTreeSet<String>,
) -> Vec<String> {
    tally
        .missing(published.keys())
        .into_iter()
        .filter(|id| !on_broker.contains(id))
        .collect()
}

/// Reads the complete lines appended to a set of log files since the last call.
#[derive(Debug, Default)]
pub(crate) struct LogReader {
    files: Vec<(PathBuf, u64, Vec<u8>)>,
}

impl LogReader {
    /// Follows one more file (a new worker incarnation's log).
    pub(crate) fn follow(&mut self, path: &Path) {
        if !self.files.iter().any(|(p, _, _)| p == path) {
            self.files.push((path.to_path_buf(), 0, Vec::new()));
        }
    }

    /// The complete lines written since the last poll.
    pub(crate) fn poll(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        for (path, offset, partial) in &mut self.files {
            let Ok(mut file) = File::open(&*path) else {
                continue;
            };
            if file.seek(SeekFrom::Start(*offset)).is_err() {
                continue;
            }
            let mut fresh = Vec::new();
            if file.read_to_end(&mut fresh).is_err() {
                continue;
            }
            *offset += fresh.len() as u64;
            partial.extend_from_slice(&fresh);
            while let Some(end) = partial.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = partial.drain(..=end).collect();
                lines.push(String::from_utf8_lossy(&line[..end]).into_owned());
            }
        }
        lines
    }

    /// Bytes left after the last newline of each file (a line torn by a kill), as lines.
    pub(crate) fn torn(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|(_, _, partial)| !partial.is_empty())
            .map(|(path, _, partial)| {
                format!(
                    "{}: {:?}",
                    path.display(),
                    String::from_utf8_lossy(&partial[..partial.len().min(120)])
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published(n: u64) -> BTreeMap<String, String> {
        (0..n)
            .map(|i| (format!("id-{i}"), crate::bodies::data_text(i)))
            .collect()
    }

    fn line(id: &str, data: &str, worker: u32) -> String {
        Call {
            id: id.into(),
            urn: "urn:chaos:ok".into(),
            attempts: 0,
            worker,
            seen: Seen::of(data),
            at_ms: 1_750_000_000_000,
        }
        .to_line()
    }

    #[test]
    fn lines_round_trip_with_exact_bytes() {
        let data = crate::bodies::data_text(7);
        let text = line("id-7", &data, 3);
        assert!(text.ends_with('\n'));
        assert_eq!(
            text.matches('\n').count(),
            1,
            "one line, whatever the payload"
        );
        let call = Call::parse(text.trim_end()).unwrap();
        assert_eq!(call.id, "id-7");
        assert_eq!(call.worker, 3);
        assert!(call.seen.matches(&data));
        // A raw U+2028, an escaped one, a big integer: all must survive the log.
        assert!(data.contains("\\u2028"));
        assert!(data.contains("18446744073709551616"));
    }

    #[test]
    fn large_payloads_are_logged_as_a_digest() {
        let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(INLINE_LIMIT * 3));
        let call = Call::parse(line("id-0", &big, 0).trim_end()).unwrap();
        assert!(matches!(call.seen, Seen::Digest { .. }));
        assert!(call.seen.matches(&big));
        let mut other = big.clone();
        other.replace_range(10..11, "y");
        assert!(!call.seen.matches(&other), "one changed byte is seen");
    }

    #[test]
    fn lost_duplicated_and_corrupted_are_counted() {
        let expected = published(5);
        let mut lines = vec![
            line("id-0", &expected["id-0"], 0),
            line("id-1", &expected["id-1"], 0),
            // handled again by the next incarnation: a duplicate, not an error
            line("id-1", &expected["id-1"], 1),
            line("id-1", &expected["id-1"], 2),
            // one byte differs: é became e
            line("id-2", &expected["id-2"].replace('é', "e"), 1),
            // a message nobody published
            line("id-99", "{}", 1),
        ];
        lines.push("{\"id\":\"id-3\",\"urn\":\"urn:chaos".into()); // torn by a kill
        let tally = Tally::count(&expected, lines.iter().map(|l| l.trim_end()));
        assert_eq!(tally.duplicated, 2);
        assert_eq!(tally.corrupted, 2);
        assert_eq!(tally.unreadable, 1);
        assert_eq!(tally.corruption_examples.len(), 2);
        assert!(tally.corruption_examples[0].contains("id-2"));
        // id-3 and id-4 were never handled; id-4 is still on the broker: only id-3 is lost.
        let on_broker: BTreeSet<String> = ["id-4".to_owned()].into();
        assert_eq!(lost(&expected, &tally, &on_broker), vec!["id-3".to_owned()]);
        assert_eq!(tally.missing(expected.keys()).len(), 2);
    }

    #[test]
    fn the_reader_returns_only_complete_lines_across_incarnations() {
        let dir = std::env::temp_dir().join(format!("bq-chaos-tally-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("w0.jsonl");
        let b = dir.join("w1.jsonl");
        std::fs::write(&a, "one\ntwo\nthr").unwrap();
        let mut reader = LogReader::default();
        reader.follow(&a);
        reader.follow(&b);
        reader.follow(&a);
        assert_eq!(reader.poll(), vec!["one".to_owned(), "two".to_owned()]);
        assert_eq!(reader.torn().len(), 1);
        std::fs::write(&a, "one\ntwo\nthree\n").unwrap();
        std::fs::write(&b, "four\n").unwrap();
        assert_eq!(reader.poll(), vec!["three".to_owned(), "four".to_owned()]);
        assert!(reader.torn().is_empty());
        assert!(reader.poll().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fnv_matches_the_reference_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
