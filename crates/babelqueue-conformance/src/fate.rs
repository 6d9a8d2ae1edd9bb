//! The fate of a body on the real runtime (`babelqueue-core` on `memory://`, dead-lettering on,
//! `max_attempts` 3).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, MemoryTransport, Transport};

/// An `ok` body reaches its handler once and nothing is dead-lettered; a `poison` body never
/// reaches a handler and lands exactly once in `orders.dlq` as the ADR-0035 record.
pub(crate) fn identity(body: &[u8], ok: bool) -> Result<(), String> {
    crate::hop::block_on(async {
        let memory = MemoryTransport::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let urn = Envelope::decode_lenient(body).envelope.urn().into_owned();
        let urn = if urn.is_empty() {
            "urn:babel:orders:created".to_owned()
        } else {
            urn
        };
        let app = App::builder(memory.clone())
            .queue("orders")
            .dead_letter(true)
            .max_attempts(3)
            .poll_timeout(Duration::from_millis(10))
            .handle(urn, move |_ctx: Context| {
                let c = c.clone();
                async move {
                    c.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), HandlerError>(())
                }
            })
            .build()
            .map_err(|e| e.to_string())?;
        memory
            .publish("orders", body)
            .await
            .map_err(|e| e.to_string())?;
        app.consume(Consume::new().max_messages(10).handle_signals(false))
            .await
            .map_err(|e| e.to_string())?;
        let handled = calls.load(Ordering::SeqCst);
        let records = memory.bodies("orders.dlq");
        if !memory.is_empty("orders") || memory.in_flight() != 0 {
            return Err("the message was neither handled nor dead-lettered".into());
        }
        if ok {
            return if handled == 1 && records.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "fate: handler ran {handled} time(s), {} DLQ record(s); expected 1 and 0",
                    records.len()
                ))
            };
        }
        if handled != 0 || records.len() != 1 {
            return Err(format!(
                "fate: handler ran {handled} time(s), {} DLQ record(s); expected 0 and 1",
                records.len()
            ));
        }
        // Either the text wrapper (raw == body), the base64 wrapper, or a byte-level splice that
        // starts with the trimmed body minus its closing brace.
        let record = String::from_utf8(records[0].clone())
            .map_err(|_| "the record is not UTF-8".to_string())?;
        let members = crate::check::top_level_members(&record)
            .ok_or_else(|| format!("the record is not an object: {record}"))?;
        let block = members
            .iter()
            .find(|(k, _)| k == "dead_letter")
            .ok_or("the record has no dead_letter")?;
        let block: serde_json::Value = serde_json::from_str(&block.1).map_err(|e| e.to_string())?;
        if block["reason"] != "poison" || block["original_queue"] != "orders" {
            return Err(format!(
                "dead_letter is {block}, expected reason poison from orders"
            ));
        }
        let raw = members
            .iter()
            .find(|(k, _)| k == "raw")
            .map(|(_, v)| v.clone());
        match (std::str::from_utf8(body), raw) {
            (Err(_), Some(_)) if record.contains("\"raw_encoding\":\"base64\"") => Ok(()),
            (Ok(text), Some(raw)) => {
                let raw: String = serde_json::from_str(&raw).map_err(|e| e.to_string())?;
                if raw == text {
                    Ok(())
                } else {
                    Err(format!("raw is {raw:?}, expected the body {text:?}"))
                }
            }
            (Ok(text), None) => {
                let trimmed = text.trim_matches([' ', '\t', '\n', '\r']);
                let prefix = trimmed
                    .strip_suffix('}')
                    .unwrap_or(trimmed)
                    .trim_end_matches([' ', '\t', '\n', '\r']);
                if record.starts_with(prefix) || trimmed[1..trimmed.len() - 1].trim().is_empty() {
                    Ok(())
                } else {
                    Err(format!("the splice does not start with the body: {record}"))
                }
            }
            _ => Err(format!("unexpected record for a non-UTF-8 body: {record}")),
        }
    })
}
