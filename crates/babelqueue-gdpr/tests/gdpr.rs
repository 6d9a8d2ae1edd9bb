//! GDPR field protection end to end: byte-for-byte round trips, every kind of mark, typed
//! failures, the runtime failing (retry, then dead-letter) a message it cannot decrypt, and
//! interop with the Python reference SDK 1.24.0 (`BQ_PYTHON`, default `../cache/venv/bin/python`
//! next to the checkout; with `BQ_REQUIRE_BROKERS` set a missing Python fails instead of
//! skipping).

#![allow(clippy::print_stdout)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::schema::MapProvider;
use babelqueue_core::{App, Consume, Context, HandlerError, Headers, MemoryTransport, RawJson};
use babelqueue_gdpr::{
    AesGcmCipher, AesKey, Cipher, CipherError, Error, ErrorKind, Marks, Protector, protect,
    unprotect, unprotected,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

const URN: &str = "urn:babel:customers:registered";
/// The shared test key (32 bytes, base64); never a real one.
const TEST_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn key(text: &str) -> AesKey {
    AesKey::from_base64(text).unwrap()
}

fn cipher() -> AesGcmCipher {
    AesGcmCipher::new(&key(TEST_KEY))
}

fn other_cipher() -> AesGcmCipher {
    AesGcmCipher::new(&AesKey::from_bytes(&[9; 32]).unwrap())
}

/// A schema with every kind of mark.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "customer_id": {"type": "integer"},
            "email": {"type": "string", "x-gdpr-sensitive": "contact"},
            "profile": {"type": "object", "properties": {
                "full_name": {"type": "string", "x-gdpr-sensitive": true},
                "nickname": {"type": "string"},
                "birth": {"type": "object", "properties": {
                    "date": {"type": "string", "x-gdpr-sensitive": "dob"}
                }}
            }},
            "addresses": {"type": "array", "items": {"type": "object", "properties": {
                "line": {"type": "string", "x-gdpr-sensitive": "address"},
                "country": {"type": "string"}
            }}},
            "phones": {"type": "array", "items": {"type": "string", "x-gdpr-sensitive": "phone"}},
            "card": {"type": "object", "x-gdpr-sensitive": "payment", "properties": {
                "number": {"type": "string", "x-gdpr-sensitive": true}
            }},
            "history": {"type": "array", "x-gdpr-sensitive": true},
            "age": {"type": "integer", "x-gdpr-sensitive": true},
            "vip": {"type": "boolean", "x-gdpr-sensitive": true},
            "note": {"x-gdpr-sensitive": true}
        }
    })
}

/// `data` with awkward bytes everywhere: big and exotic number literals, `\u` escapes (BMP,
/// surrogate pair), `\/`, non-ASCII text, key order that is not sorted.
const DATA: &str = concat!(
    r#"{"zeta":1,"customer_id":123456789012345678901234567890,"big":-0.000000000000000000001e-5,"#,
    r#""email":"alice@example.com","#,
    r#""profile":{"nickname":"caf\u00e9 \ud83d\ude00 \/","full_name":"Ælfrida O\"Brien","#,
    r#""birth":{"date":"1990-01-01","place":"İstanbul"}},"#,
    r#""addresses":[{"line":"1 Main St","country":"NL"},{"country":"BE","line":"2 Rue \u00e9"},"not an object"],"#,
    r#""phones":["+31 6 1234","+32 4 5678"],"#,
    r#""card":{"number":"4111111111111111","exp":"12/30","cvv":123},"#,
    r#""history":[1,{"b":2,"a":1},[]],"age":42,"vip":true,"note":null,"#,
    r#""tags":["x","y"],"score":1.5e300,"neg":-0}"#
);

/// Every clear value the schema marks, as it appears in `DATA` (none may survive `protect`).
const SECRETS: &[&str] = &[
    "alice@example.com",
    "lfrida",
    "1990-01-01",
    "1 Main St",
    "2 Rue",
    "+31 6 1234",
    "+32 4 5678",
    "4111111111111111",
    "12/30",
    r#"{"b":2,"a":1}"#,
    r#""age":42"#,
    r#""vip":true"#,
    r#""note":null"#,
];

/// The unmarked members, as they appear in `DATA` (all must survive `protect` byte for byte).
const KEPT: &[&str] = &[
    r#"{"zeta":1,"customer_id":123456789012345678901234567890,"big":-0.000000000000000000001e-5,"#,
    r#""nickname":"caf\u00e9 \ud83d\ude00 \/""#,
    r#""place":"İstanbul""#,
    r#""country":"NL""#,
    r#"{"country":"BE","line":"#,
    r#""not an object"]"#,
    r#""tags":["x","y"],"score":1.5e300,"neg":-0}"#,
];

/// Decodes the JSON string literal starting at `at` in `text`.
fn string_at(text: &str, at: usize) -> String {
    let mut de = serde_json::Deserializer::from_str(&text[at..]).into_iter::<String>();
    de.next().unwrap().unwrap()
}

#[tokio::test]
async fn protect_then_unprotect_is_byte_for_byte() {
    let data = RawJson::parse(DATA).unwrap();
    assert_eq!(data.as_str(), DATA, "the fixture is compact");
    let marks = Marks::from_schema(&schema());
    let c = cipher();

    let protected = protect(&data, &marks, &c).await.unwrap();
    let text = protected.as_str();
    for secret in SECRETS {
        assert!(!text.contains(secret), "{secret} is still in clear: {text}");
    }
    for kept in KEPT {
        assert!(text.contains(kept), "{kept} did not survive: {text}");
    }
    // Twelve values are ciphertexts now: email, full_name, birth.date, two address lines, two
    // phones, card, history, age, vip, note. The third address is not an object: skipped.
    let decoded: Value = serde_json::from_str(text).unwrap();
    let strings = [
        &decoded["email"],
        &decoded["profile"]["full_name"],
        &decoded["profile"]["birth"]["date"],
        &decoded["addresses"][0]["line"],
        &decoded["addresses"][1]["line"],
        &decoded["phones"][0],
        &decoded["phones"][1],
        &decoded["card"],
        &decoded["history"],
        &decoded["age"],
        &decoded["vip"],
        &decoded["note"],
    ];
    for value in strings {
        let sealed = value.as_str().expect("a protected value is a string");
        assert!(c.open(sealed).is_ok(), "{sealed} is one ciphertext");
    }
    // A container mark protects the whole value as it was written (key order kept).
    let at = text.find(r#""card":"#).unwrap() + 7;
    assert_eq!(
        c.open(&string_at(text, at)).unwrap(),
        br#"{"number":"4111111111111111","exp":"12/30","cvv":123}"#
    );
    assert_eq!(decoded["addresses"][2], "not an object");

    let restored = unprotect(&protected, &marks, &c).await.unwrap();
    assert_eq!(restored.as_str(), DATA);

    // Running unprotect again on clear data: non-string leaves are left alone, string leaves
    // are not ciphertexts and fail (as in the reference).
    let again = unprotect(&restored, &marks, &c).await.unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Malformed);
}

#[tokio::test]
async fn non_string_leaves_are_skipped_by_unprotect_and_round_trip_through_protect() {
    let schema = json!({"properties": {
        "n": {"x-gdpr-sensitive": true}, "b": {"x-gdpr-sensitive": true},
        "z": {"x-gdpr-sensitive": true}, "o": {"x-gdpr-sensitive": true},
        "a": {"x-gdpr-sensitive": true}
    }});
    let marks = Marks::from_schema(&schema);
    let data = RawJson::parse(r#"{"n":1e2,"b":false,"z":null,"o":{"k":[1]},"a":[]}"#).unwrap();
    // Nothing is a string: unprotect leaves it all as is.
    assert_eq!(unprotect(&data, &marks, &cipher()).await.unwrap(), data);
    let protected = protect(&data, &marks, &cipher()).await.unwrap();
    let v: Value = serde_json::from_str(protected.as_str()).unwrap();
    assert!(["n", "b", "z", "o", "a"].iter().all(|k| v[k].is_string()));
    assert_eq!(
        unprotect(&protected, &marks, &cipher()).await.unwrap(),
        data
    );
}

#[tokio::test]
async fn escaped_and_repeated_member_names_are_all_protected() {
    let marks = Marks::from_schema(&json!({"properties": {"email": {"x-gdpr-sensitive": true}}}));
    let data = RawJson::parse(r#"{"email":"first@example.com","em\u0061il":"second@example.com"}"#)
        .unwrap();
    let protected = protect(&data, &marks, &cipher()).await.unwrap();
    assert!(!protected.as_str().contains("example.com"), "{protected}");
    assert!(protected.as_str().contains(r#""em\u0061il":""#));
    assert_eq!(
        unprotect(&protected, &marks, &cipher()).await.unwrap(),
        data
    );
}

#[tokio::test]
async fn root_marks_absent_fields_and_shape_mismatches() {
    // A root mark protects nothing by itself; the marks below it still apply.
    let marks = Marks::from_schema(&json!({
        "x-gdpr-sensitive": "customer",
        "properties": {"email": {"x-gdpr-sensitive": true},
                       "profile": {"properties": {"name": {"x-gdpr-sensitive": true}}},
                       "list": {"items": {"x-gdpr-sensitive": true}}}
    }));
    assert_eq!(marks.root_category(), Some("customer"));
    let c = cipher();
    let data = RawJson::parse(r#"{"email":"a@b.c","id":7}"#).unwrap();
    let protected = protect(&data, &marks, &c).await.unwrap();
    assert!(protected.as_str().ends_with(r#","id":7}"#));
    assert!(!protected.as_str().contains("a@b.c"));

    // Only a root mark: data is unchanged.
    let only_root = Marks::from_schema(&json!({"x-gdpr-sensitive": true}));
    assert_eq!(protect(&data, &only_root, &c).await.unwrap(), data);

    // Absent fields, an object where a string parent was expected, a non-array under `[]`:
    // skipped, byte for byte.
    let odd = RawJson::parse(r#"{"profile":"text","list":{"0":"x"},"other":1}"#).unwrap();
    assert_eq!(protect(&odd, &marks, &c).await.unwrap(), odd);
    assert_eq!(unprotect(&odd, &marks, &c).await.unwrap(), odd);

    // data that is not an object, and an empty object.
    for text in ["[1,2]", "{}", "null"] {
        let raw = RawJson::parse(text).unwrap();
        assert_eq!(protect(&raw, &marks, &c).await.unwrap(), raw);
    }
}

#[tokio::test]
async fn a_container_mark_covers_the_marks_below_it_on_both_sides() {
    // `card` and `card.number` are both marked: the reference SDK encrypts `card` once and
    // then fails its own unprotect on `card.number`; here the container mark wins both ways.
    let marks = Marks::from_schema(&schema());
    let paths: Vec<String> = marks.paths().into_iter().map(|p| p.path).collect();
    assert!(paths.contains(&"card".to_owned()));
    assert!(!paths.contains(&"card.number".to_owned()));
    let data = RawJson::parse(r#"{"card":{"number":"4111","exp":"12/30"}}"#).unwrap();
    let protected = protect(&data, &marks, &cipher()).await.unwrap();
    assert!(serde_json::from_str::<Value>(protected.as_str()).unwrap()["card"].is_string());
    assert_eq!(
        unprotect(&protected, &marks, &cipher()).await.unwrap(),
        data
    );
}

#[tokio::test]
async fn wrong_key_tampering_and_plain_strings_are_typed_errors() {
    let marks = Marks::from_schema(&schema());
    let data = RawJson::parse(r#"{"customer_id":1,"email":"alice@example.com"}"#).unwrap();
    let protected = protect(&data, &marks, &cipher()).await.unwrap();

    // Wrong key.
    let err = unprotect(&protected, &marks, &other_cipher())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authentication);
    assert_eq!(err.path(), Some("email"));
    assert!(matches!(err, Error::Decrypt { .. }));
    let shown = err.to_string();
    assert!(
        shown.contains("`email`") && !shown.contains("alice"),
        "{shown}"
    );

    // One character of the ciphertext changed, in place.
    let text = protected.as_str();
    let at = text.find(r#""email":""#).unwrap() + 9;
    let sealed = string_at(text, at - 1);
    let mut raw = STANDARD.decode(&sealed).unwrap();
    raw[14] ^= 0x04;
    let tampered_text = text.replacen(&sealed, &STANDARD.encode(&raw), 1);
    let tampered = RawJson::parse(&tampered_text).unwrap();
    assert_ne!(tampered, protected);
    let err = unprotect(&tampered, &marks, &cipher()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authentication);

    // A producer that never protected the field.
    let err = unprotect(&data, &marks, &cipher()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Malformed);

    // A ciphertext whose plaintext is not JSON.
    let garbage = cipher().seal(b"not json{").unwrap();
    let foreign = RawJson::parse(&format!(r#"{{"email":"{garbage}"}}"#)).unwrap();
    let err = unprotect(&foreign, &marks, &cipher()).await.unwrap_err();
    assert_eq!(
        (err.kind(), err.path()),
        (ErrorKind::NotJson, Some("email"))
    );
}

#[tokio::test]
async fn rotation_reads_old_values_and_writes_new_ones() {
    let marks = Marks::from_schema(&schema());
    let data = RawJson::parse(r#"{"email":"alice@example.com","phones":["1","2"]}"#).unwrap();
    let old_key = AesKey::from_bytes(&[1; 32]).unwrap();
    let new_key = AesKey::from_bytes(&[2; 32]).unwrap();
    let before = protect(&data, &marks, &AesGcmCipher::new(&old_key))
        .await
        .unwrap();
    let rotated = AesGcmCipher::new(&new_key).with_previous_key(&old_key);
    assert_eq!(unprotect(&before, &marks, &rotated).await.unwrap(), data);
    let after = protect(&data, &marks, &rotated).await.unwrap();
    let err = unprotect(&after, &marks, &AesGcmCipher::new(&old_key))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authentication);
    assert_eq!(
        unprotect(&after, &marks, &AesGcmCipher::new(&new_key))
            .await
            .unwrap(),
        data
    );
}

/// A cipher that is down (a KMS outage).
#[derive(Debug)]
struct Down;

#[async_trait]
impl Cipher for Down {
    async fn encrypt(&self, _: &[u8]) -> Result<String, CipherError> {
        Err(CipherError::unavailable("kms unreachable"))
    }
    async fn decrypt(&self, _: &str) -> Result<Vec<u8>, CipherError> {
        Err(CipherError::unavailable("kms unreachable"))
    }
}

#[tokio::test]
async fn a_failing_cipher_fails_protect_without_a_half_protected_result() {
    let marks = Marks::from_schema(&schema());
    let data = RawJson::parse(r#"{"email":"alice@example.com"}"#).unwrap();
    let err = protect(&data, &marks, &Down).await.unwrap_err();
    assert!(matches!(err, Error::Encrypt { .. }));
    assert!(err.is_transient());
    assert_eq!(err.kind(), ErrorKind::Unavailable);

    // The envelope form leaves the envelope unchanged on an error.
    let gdpr = Protector::new(
        Arc::new(Down),
        Arc::new(MapProvider::new([(URN.to_owned(), schema())])),
    );
    let mut envelope = babelqueue_core::Envelope::builder(URN)
        .data_raw(data.clone())
        .build()
        .unwrap();
    let before = envelope.clone();
    assert!(gdpr.protect_envelope(&mut envelope).await.is_err());
    assert_eq!(envelope, before);
}

#[tokio::test]
async fn the_envelope_frame_is_untouched() {
    let gdpr = Protector::new(
        Arc::new(cipher()),
        Arc::new(MapProvider::new([(URN.to_owned(), schema())])),
    );
    let mut envelope = babelqueue_core::Envelope::builder(URN)
        .queue("customers")
        .trace_id("trace-1")
        .data_raw(RawJson::parse(r#"{"email":"alice@example.com","id":1}"#).unwrap())
        .build()
        .unwrap();
    let before = envelope.clone();
    gdpr.protect_envelope(&mut envelope).await.unwrap();
    for member in ["job", "trace_id", "meta", "attempts"] {
        assert_eq!(envelope.get(member), before.get(member), "{member}");
    }
    assert_ne!(envelope.data(), before.data());
    // A URN with no schema passes through.
    let mut other = babelqueue_core::Envelope::builder("urn:babel:other")
        .data_raw(RawJson::parse(r#"{"email":"x"}"#).unwrap())
        .build()
        .unwrap();
    let other_before = other.clone();
    gdpr.protect_envelope(&mut other).await.unwrap();
    assert_eq!(other, other_before);
    gdpr.unprotect_envelope(&mut envelope).await.unwrap();
    assert_eq!(envelope, before);
}

// ------------------------------------------------------------------------------------------------
// Through the runtime, on the memory transport.

fn app(memory: &MemoryTransport) -> babelqueue_core::AppBuilder {
    App::builder(memory.clone())
        .queue("customers")
        .poll_timeout(Duration::from_millis(20))
        .rewind_pause(Duration::from_millis(20))
        .retry_backoff(Duration::from_millis(1))
}

fn drain() -> Consume {
    Consume::new()
        .max_messages(100)
        .idle_timeout(Duration::from_millis(300))
        .handle_signals(false)
}

fn protector(c: AesGcmCipher) -> Arc<Protector> {
    Arc::new(Protector::new(
        Arc::new(c),
        Arc::new(MapProvider::new([(URN.to_owned(), schema())])),
    ))
}

/// Flips one bit of the GCM tag of the ciphertext stored in `email`.
fn tamper_email(data: &RawJson) -> RawJson {
    let mut value: Value = serde_json::from_str(data.as_str()).unwrap();
    let mut framed = STANDARD.decode(value["email"].as_str().unwrap()).unwrap();
    *framed.last_mut().unwrap() ^= 0x01;
    value["email"] = Value::String(STANDARD.encode(framed));
    RawJson::from_serialize(&value).unwrap()
}

#[tokio::test]
async fn a_message_that_cannot_be_decrypted_is_retried_then_dead_lettered_and_never_handled() {
    // A consumer holding the wrong key.
    undecryptable_is_dead_lettered(protector(other_cipher()), false).await;
}

#[tokio::test]
async fn a_tampered_message_is_retried_then_dead_lettered_and_never_handled() {
    // The right key, but one bit of the ciphertext changed on the way.
    undecryptable_is_dead_lettered(protector(cipher()), true).await;
}

/// Publishes a protected message that `consumer` cannot decrypt (a wrong key, or `tamper`ed)
/// and checks the runtime: three failed deliveries, the handler never run, one dead-letter
/// record that names the field and carries no clear text.
async fn undecryptable_is_dead_lettered(consumer: Arc<Protector>, tamper: bool) {
    let memory = MemoryTransport::new();
    let producer = protector(cipher());
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let app = app(&memory)
        .max_attempts(3)
        .dead_letter(true)
        .handle(
            URN,
            unprotected(consumer, move |_ctx: Context| {
                let r = r.clone();
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), HandlerError>(())
                }
            }),
        )
        .build()
        .unwrap();
    let mut envelope = app
        .envelope(URN)
        .data_raw(RawJson::parse(r#"{"customer_id":7,"email":"alice@example.com"}"#).unwrap())
        .build()
        .unwrap();
    producer.protect_envelope(&mut envelope).await.unwrap();
    if tamper {
        let spoiled = tamper_email(envelope.data().unwrap());
        envelope.set("data", spoiled);
    }
    let protected_data = envelope.data().unwrap().clone();
    app.publish_envelope("customers", &envelope, &Headers::new())
        .await
        .unwrap();

    let summary = app.consume(drain()).await.unwrap();
    assert_eq!(
        summary.processed, 3,
        "three deliveries: two retries, then the DLQ"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the handler never ran");
    assert!(memory.is_empty("customers"));
    let dlq = memory.bodies("customers.dlq");
    assert_eq!(dlq.len(), 1);
    let text = String::from_utf8(dlq[0].clone()).unwrap();
    assert!(!text.contains("alice"), "no clear text in the DLQ: {text}");
    let record: Value = serde_json::from_str(&text).unwrap();
    let block = &record["dead_letter"];
    assert_eq!(block["reason"], "failed");
    assert_eq!(block["exception"], "DecryptError");
    assert_eq!(block["attempts"], 3);
    assert_eq!(block["original_queue"], "customers");
    let error = block["error"].as_str().unwrap();
    assert!(
        error.contains("`email`") && error.contains("wrong key"),
        "{error}"
    );
    // The record still carries the protected data, unchanged, for a later redrive.
    let carried = RawJson::from_serialize(&record["data"]).unwrap();
    assert_eq!(carried, protected_data);
    assert_eq!(record["attempts"], 3);
}

#[tokio::test]
async fn the_handler_sees_clear_text_and_unprotected_messages_pass() {
    let memory = MemoryTransport::new();
    let gdpr = protector(cipher());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = app(&memory)
        .max_attempts(1)
        .dead_letter(true)
        .handle_any(unprotected(gdpr.clone(), move |ctx: Context| {
            let s = s.clone();
            async move {
                s.lock()
                    .unwrap()
                    .push((ctx.urn().into_owned(), ctx.data().into_string()));
                Ok::<(), HandlerError>(())
            }
        }))
        .build()
        .unwrap();
    let mut envelope = app
        .envelope(URN)
        .data_raw(RawJson::parse(DATA).unwrap())
        .build()
        .unwrap();
    gdpr.protect_envelope(&mut envelope).await.unwrap();
    assert_ne!(envelope.data().unwrap().as_str(), DATA);
    app.publish_envelope("customers", &envelope, &Headers::new())
        .await
        .unwrap();
    app.publish("urn:babel:no-schema", &json!({"email": "plain"}))
        .await
        .unwrap();
    app.consume(drain()).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (URN.to_owned(), DATA.to_owned()),
            (
                "urn:babel:no-schema".to_owned(),
                r#"{"email":"plain"}"#.to_owned()
            )
        ]
    );
    assert!(memory.is_empty("customers.dlq"));
}

// ------------------------------------------------------------------------------------------------
// Interop with the Python reference SDK 1.24.0.

fn python() -> Option<PathBuf> {
    let path = std::env::var_os("BQ_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python")
        });
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("BQ_REQUIRE_BROKERS").is_none(),
        "the Python reference SDK is required: {}",
        path.display()
    );
    println!("SKIPPED: no Python reference SDK at {}", path.display());
    None
}

/// Runs the Python peer; `Ok(stdout)` or `Err((status, stderr))`.
fn peer(py: &PathBuf, command: &str, schema: &Value, input: &str) -> Result<String, (i32, String)> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/gdpr_peer.py");
    let mut child = Command::new(py)
        .arg(script)
        .args([command, &schema.to_string(), TEST_KEY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }
}

/// The interop schema: no mark below a container mark (the reference cannot unprotect those).
fn interop_schema() -> Value {
    json!({"type": "object", "properties": {
        "customer_id": {"type": "integer"},
        "email": {"type": "string", "x-gdpr-sensitive": "contact"},
        "profile": {"type": "object", "properties": {
            "full_name": {"type": "string", "x-gdpr-sensitive": true}}},
        "addresses": {"type": "array", "items": {"type": "object", "properties": {
            "line": {"type": "string", "x-gdpr-sensitive": "address"}}}},
        "phones": {"type": "array", "items": {"x-gdpr-sensitive": "phone"}},
        "card": {"type": "object", "x-gdpr-sensitive": "payment"},
        "age": {"type": "integer", "x-gdpr-sensitive": true},
        "vip": {"type": "boolean", "x-gdpr-sensitive": true}
    }})
}

const INTEROP_DATA: &str = concat!(
    r#"{"customer_id":1042,"email":"alice@example.com","#,
    r#""profile":{"full_name":"Ælfrida \"Al\" O'Brien ☕","nickname":"al"},"#,
    r#""addresses":[{"line":"1 Main St","country":"NL"},{"line":"İstiklal Cd. 5","country":"TR"}],"#,
    r#""phones":["+31 6 1234","+90 212"],"card":{"number":"4111111111111111","exp":"12/30"},"#,
    r#""age":42,"vip":true,"score":2.5}"#
);

#[tokio::test]
async fn interop_python_protects_and_rust_unprotects() {
    let Some(py) = python() else { return };
    let schema = interop_schema();
    let marks = Marks::from_schema(&schema);
    let protected_text = peer(&py, "protect", &schema, INTEROP_DATA).expect("python protect");
    for secret in ["alice", "lfrida", "Main St", "+31", "4111", r#""age": 42"#] {
        assert!(!protected_text.contains(secret), "{protected_text}");
    }
    let protected = RawJson::parse(&protected_text).unwrap();
    let clear = unprotect(&protected, &marks, &cipher()).await.unwrap();
    let want: Value = serde_json::from_str(INTEROP_DATA).unwrap();
    let got: Value = serde_json::from_str(clear.as_str()).unwrap();
    assert_eq!(got, want);

    // Through the runtime too: a Python-protected body decrypted by the handler wrapper.
    let memory = MemoryTransport::new();
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let gdpr = Arc::new(Protector::new(
        Arc::new(cipher()),
        Arc::new(MapProvider::new([(URN.to_owned(), schema.clone())])),
    ));
    let app = app(&memory)
        .handle(
            URN,
            unprotected(gdpr, move |ctx: Context| {
                let s = s.clone();
                async move {
                    *s.lock().unwrap() = Some(ctx.data().to_value()?);
                    Ok::<(), HandlerError>(())
                }
            }),
        )
        .build()
        .unwrap();
    app.publish_envelope(
        "customers",
        &app.envelope(URN).data_raw(protected).build().unwrap(),
        &Headers::new(),
    )
    .await
    .unwrap();
    app.consume(drain()).await.unwrap();
    assert_eq!(seen.lock().unwrap().clone(), Some(want));
}

#[tokio::test]
async fn interop_rust_protects_and_python_unprotects() {
    let Some(py) = python() else { return };
    let schema = interop_schema();
    let marks = Marks::from_schema(&schema);
    let data = RawJson::parse(INTEROP_DATA).unwrap();
    let protected = protect(&data, &marks, &cipher()).await.unwrap();
    let clear = peer(&py, "unprotect", &schema, protected.as_str()).expect("python unprotect");
    let want: Value = serde_json::from_str(INTEROP_DATA).unwrap();
    let got: Value = serde_json::from_str(&clear).unwrap();
    assert_eq!(got, want);

    // Python under another key refuses Rust's ciphertext with its own DecryptError.
    let wrong = protect(&data, &marks, &other_cipher()).await.unwrap();
    let (status, stderr) = peer(&py, "unprotect", &schema, wrong.as_str()).unwrap_err();
    assert_eq!((status, stderr.trim()), (3, "DecryptError"));
}
