//! The codec in five steps: produce, classify, decode, retry hop, dead-letter a poison body.
//!
//! `cargo run -p babelqueue-envelope --example codec`

#![allow(clippy::print_stdout)]

use babelqueue_envelope::{DeadLetter, Envelope, poison_cause, poison_record};

fn main() -> Result<(), babelqueue_envelope::Error> {
    let envelope = Envelope::builder("urn:babel:orders:created")
        .queue("orders")
        .data(&serde_json::json!({"order_id": 1042, "total": 12345678901234567890_u128}))
        .meta("ext", &serde_json::json!({"acme": {"tier": "gold"}}))
        .build()?;
    let body = envelope.encode()?;
    println!("produced:     {body}");

    println!("verdict:      {:?}", poison_cause(body.as_bytes(), true));
    let mut received = Envelope::decode(body.as_bytes())?.envelope;
    println!("routed by:    {}", received.urn());

    received.set_attempts(received.attempts() + 1);
    println!("retry hop:    {}", received.encode()?);

    let legacy = br#"{"job":"urn:babel:orders:created","timestamp":1,"attempts":0}"#;
    let decoded = Envelope::decode(legacy)?;
    println!(
        "legacy body:  {} warning(s): {}",
        decoded.warnings.len(),
        decoded.warnings[0]
    );

    let poison = b"{\"job\":\"urn:babel:orders:created\",\"attempts\":1.5}";
    let cause = poison_cause(poison, true).expect("1.5 is not an integer");
    let block = DeadLetter::poison(Some(&cause), "orders", 0, babelqueue_envelope::now_millis());
    println!("poison cause: {cause}");
    println!(
        "DLQ record:   {}",
        String::from_utf8_lossy(&poison_record(poison, &block))
    );
    Ok(())
}
