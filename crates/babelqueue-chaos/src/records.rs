//! Checking dead-letter records against what was published, byte for byte, with the codec's own
//! record builders (`babelqueue::envelope::poison_record`, `Envelope::annotate`).
//!
//! * A poison body's record is rebuilt from the body and the record's own `dead_letter` block
//!   ([`poison_record`]) and must be identical to the record, byte for byte (a splice, a `raw`
//!   wrapper, or a base64 `raw` for bytes that are not UTF-8).
//! * A valid envelope that failed is dead-lettered with its `dead_letter` block (reason
//!   `failed`); its `data` must be the published text exactly and its `meta.id` unchanged.

use babelqueue::envelope::{DeadLetter, Envelope, Reason, poison_cause, poison_record};
use serde_json::Value;

/// What a body must become in a dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expect {
    /// A poison record (ADR-0035) of the exact body.
    Poison,
    /// The envelope with a `dead_letter` block of reason `failed`, `data` unchanged.
    Failed {
        /// `meta.id`.
        id: String,
        /// The exact text of `data`.
        data: String,
    },
}

/// What the codec says a body must become.
pub(crate) fn expectation(body: &[u8]) -> Expect {
    if poison_cause(body, true).is_some() {
        return Expect::Poison;
    }
    match Envelope::decode(body) {
        Ok(decoded) => Expect::Failed {
            id: decoded
                .envelope
                .message_id()
                .map(|id| id.into_owned())
                .unwrap_or_default(),
            data: decoded
                .envelope
                .data()
                .map(|d| d.as_str().to_owned())
                .unwrap_or_default(),
        },
        Err(_) => Expect::Poison,
    }
}

/// The `dead_letter` block of a JSON text (`{"reason":…,"lang":…}`).
pub(crate) fn block_from_json(text: &str) -> Option<DeadLetter> {
    let value: Value = serde_json::from_str(text).ok()?;
    let reason = match value.get("reason")?.as_str()? {
        "failed" => Reason::Failed,
        "unknown_urn" => Reason::UnknownUrn,
        "poison" => Reason::Poison,
        _ => return None,
    };
    let optional = |key: &str| -> Option<Option<String>> {
        match value.get(key)? {
            Value::Null => Some(None),
            Value::String(s) => Some(Some(s.clone())),
            _ => None,
        }
    };
    let mut block = DeadLetter::new(
        reason,
        value.get("original_queue")?.as_str()?,
        value.get("attempts")?.as_i64()?,
        value.get("failed_at")?.as_i64()?,
    );
    block.error = optional("error")?;
    block.exception = optional("exception")?;
    block.lang = value.get("lang")?.as_str()?.to_owned();
    Some(block)
}

/// The `dead_letter` block at the end of a poison record: the last `"dead_letter":{` member,
/// which every record shape puts last. Found by position, not by parsing the whole record, so a
/// record of a body nested 100 000 deep is read too.
pub(crate) fn trailing_block(record: &[u8]) -> Option<DeadLetter> {
    const KEY: &[u8] = b"\"dead_letter\":{";
    let at = record.windows(KEY.len()).rposition(|w| w == KEY)?;
    let start = at + KEY.len() - 1;
    let end = record.len().checked_sub(1)?;
    if record.get(end) != Some(&b'}') || start >= end {
        return None;
    }
    block_from_json(std::str::from_utf8(&record[start..end]).ok()?)
}

/// Whether `record` is the poison record of `body`, byte for byte.
pub(crate) fn is_poison_record_of(record: &[u8], body: &[u8]) -> bool {
    // Every record shape is at least as long as the body it carries, minus surrounding
    // whitespace (a splice trims it): a cheap rejection before rebuilding a large record.
    let content = body
        .iter()
        .filter(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .count();
    if record.len() < content {
        return false;
    }
    match trailing_block(record) {
        Some(block) => block.reason == Reason::Poison && poison_record(body, &block) == record,
        None => false,
    }
}

/// Checks a failed envelope's record: `meta.id`, reason `failed`, and `data` byte for byte.
pub(crate) fn check_failed_record(record: &[u8], id: &str, data: &str) -> Result<(), String> {
    let decoded = Envelope::decode(record)
        .map_err(|e| format!("the record is not a readable envelope: {e}"))?
        .envelope;
    let got_id = decoded
        .message_id()
        .map(|i| i.into_owned())
        .unwrap_or_default();
    if got_id != id {
        return Err(format!("meta.id is {got_id:?}, expected {id:?}"));
    }
    let block = decoded
        .dead_letter()
        .and_then(|raw| block_from_json(raw.as_str()))
        .ok_or_else(|| "no readable dead_letter block".to_owned())?;
    if block.reason != Reason::Failed {
        return Err(format!(
            "dead_letter.reason is {:?}, expected \"failed\"",
            block.reason.as_str()
        ));
    }
    let got = decoded
        .data()
        .map(|d| d.as_str().to_owned())
        .unwrap_or_default();
    if got != data {
        return Err(format!(
            "data changed: {} bytes (fnv {:016x}) instead of {} bytes (fnv {:016x}){}",
            got.len(),
            crate::tally::fnv1a(got.as_bytes()),
            data.len(),
            crate::tally::fnv1a(data.as_bytes()),
            if got.len() < 200 && data.len() < 200 {
                format!(": {got:?} vs {data:?}")
            } else {
                String::new()
            }
        ));
    }
    Ok(())
}

/// `meta.id` of a record that is a readable envelope.
pub(crate) fn record_id(record: &[u8]) -> Option<String> {
    Envelope::decode(record)
        .ok()?
        .envelope
        .message_id()
        .map(|id| id.into_owned())
}

/// Which published body a dead-letter record belongs to, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Match {
    /// The index of the body, when the record belongs to one.
    pub(crate) body: Option<usize>,
    /// What is wrong: `None` when the record is exactly what it must be.
    pub(crate) problem: Option<String>,
}

/// Matches a dead-letter record against the published bodies and their expectations.
pub(crate) fn match_record(record: &[u8], bodies: &[(&[u8], &Expect)]) -> Match {
    for (i, (body, expect)) in bodies.iter().enumerate() {
        if is_poison_record_of(record, body) {
            let problem = match expect {
                Expect::Poison => None,
                Expect::Failed { .. } => Some(
                    "dead-lettered as poison, but it is a valid envelope (expected reason failed)"
                        .to_owned(),
                ),
            };
            return Match {
                body: Some(i),
                problem,
            };
        }
    }
    if let Some(id) = record_id(record) {
        for (i, (_, expect)) in bodies.iter().enumerate() {
            if let Expect::Failed { id: want, data } = expect
                && *want == id
            {
                return Match {
                    body: Some(i),
                    problem: check_failed_record(record, want, data).err(),
                };
            }
        }
    }
    let shown: String = String::from_utf8_lossy(&record[..record.len().min(160)]).into_owned();
    Match {
        body: None,
        problem: Some(format!(
            "a record of {} bytes matches no published body byte for byte: {shown:?}",
            record.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bodies::{self, Malformed};

    fn block(reason: Reason) -> DeadLetter {
        DeadLetter::new(reason, "orders", 3, 1_750_000_000_123).with_error("boom \"x\" é", "E")
    }

    #[test]
    fn the_block_is_read_back_exactly() {
        let b = block(Reason::Poison);
        let text = b.to_raw().as_str().to_owned();
        assert_eq!(block_from_json(&text), Some(b.clone()));
        let none = DeadLetter::new(Reason::Failed, "q", 0, 1);
        assert_eq!(block_from_json(none.to_raw().as_str()), Some(none));
        assert_eq!(block_from_json("{\"reason\":\"other\"}"), None);
    }

    #[test]
    fn every_poison_shape_is_recognised_byte_for_byte() {
        let b = block(Reason::Poison);
        let deep = format!("{}null{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
        let cases: Vec<Vec<u8>> = vec![
            b"not json".to_vec(),                    // raw wrapper
            vec![0xff, 0xfe, b'{'],                  // base64 wrapper
            b" {\"n\":1e400} ".to_vec(),             // splice
            b"{}".to_vec(),                          // splice into an empty object
            deep.into_bytes(),                       // splice, 100 000 deep
            b"\xEF\xBB\xBF{\"job\":\"x\"}".to_vec(), // BOM: raw wrapper
        ];
        for body in &cases {
            let record = poison_record(body, &b);
            assert!(is_poison_record_of(&record, body), "{body:?}");
            assert_eq!(trailing_block(&record), Some(b.clone()));
            // One byte more, one byte less, one byte changed: never the same body.
            let mut changed = body.clone();
            changed.push(b' ');
            changed.insert(0, b'x');
            assert!(!is_poison_record_of(&record, &changed));
            let mut flipped = record.clone();
            flipped[1] ^= 0x01;
            assert!(!is_poison_record_of(&flipped, body));
        }
        // A block of another reason is not a poison record.
        let failed = poison_record(b"x", &block(Reason::Failed));
        assert!(!is_poison_record_of(&failed, b"x"));
    }

    #[test]
    fn failed_records_keep_their_data_bytes() {
        let data = bodies::data_text(5);
        let body = bodies::envelope_body(bodies::URN_FAIL, "q", "id-5", &data);
        let envelope = Envelope::decode(&body).unwrap().envelope;
        let record = envelope
            .annotate(&DeadLetter::new(Reason::Failed, "q", 1, 7).with_error("no", "E"))
            .encode()
            .unwrap()
            .into_bytes();
        assert_eq!(check_failed_record(&record, "id-5", &data), Ok(()));
        assert!(check_failed_record(&record, "id-6", &data).is_err());
        let other = bodies::data_text(6);
        assert!(
            check_failed_record(&record, "id-5", &other)
                .unwrap_err()
                .contains("data changed")
        );
        let unknown = envelope
            .annotate(&DeadLetter::new(Reason::UnknownUrn, "q", 1, 7))
            .encode()
            .unwrap();
        assert!(
            check_failed_record(unknown.as_bytes(), "id-5", &data)
                .unwrap_err()
                .contains("reason")
        );
    }

    #[test]
    fn records_are_matched_to_the_malformed_set() {
        let set: Vec<Malformed> = bodies::malformed_set("q", "run")
            .into_iter()
            .filter(|m| m.name != "10mb")
            .collect();
        let expects: Vec<Expect> = set.iter().map(|m| expectation(&m.body)).collect();
        let pairs: Vec<(&[u8], &Expect)> = set
            .iter()
            .map(|m| m.body.as_slice())
            .zip(expects.iter())
            .collect();
        let poison = block(Reason::Poison);
        for (i, m) in set.iter().enumerate() {
            let record = match &expects[i] {
                Expect::Poison => poison_record(&m.body, &poison),
                Expect::Failed { .. } => Envelope::decode(&m.body)
                    .unwrap()
                    .envelope
                    .annotate(&block(Reason::Failed))
                    .encode()
                    .unwrap()
                    .into_bytes(),
            };
            assert_eq!(
                match_record(&record, &pairs),
                Match {
                    body: Some(i),
                    problem: None
                },
                "{}",
                m.name
            );
        }
        // The duplicate-keys envelope keeps its last `data`.
        let dup = set.iter().position(|m| m.name == "duplicate-keys").unwrap();
        assert!(matches!(&expects[dup], Expect::Failed { data, .. } if data == "{\"k\":2}"));
        // A valid envelope dead-lettered as poison is matched, and flagged.
        let neg = set.iter().position(|m| m.name == "attempts-neg5").unwrap();
        let wrong = poison_record(&set[neg].body, &poison);
        let m = match_record(&wrong, &pairs);
        assert_eq!(m.body, Some(neg));
        assert!(m.problem.unwrap().contains("valid envelope"));
        // A record whose data changed is matched by id, and flagged.
        let mut envelope = Envelope::decode(&set[neg].body).unwrap().envelope;
        envelope.set(
            "data",
            babelqueue::envelope::RawJson::parse("{\"k\":\"w\"}").unwrap(),
        );
        let changed = envelope.annotate(&block(Reason::Failed)).encode().unwrap();
        let m = match_record(changed.as_bytes(), &pairs);
        assert_eq!(m.body, Some(neg));
        assert!(m.problem.unwrap().contains("data changed"));
        // Garbage matches nothing.
        assert_eq!(match_record(b"{\"x\":1}", &pairs).body, None);
    }
}
