//! `babelqueue-gdpr` on hostile input: unprotecting any message body, and any value where a
//! protected field should be (garbage, truncated or foreign ciphertexts, ciphertexts of
//! non-JSON), returns `Ok` or a typed error, never panics.
//!
//! Also checked, where the crate promises it:
//! * `unprotect(protect(data)) == data`, byte for byte, for any `data` object;
//! * a failed `unprotect_envelope` leaves the envelope unchanged.
//!
//! Input: a leading NUL byte selects the structured mode (the rest builds a `data` object whose
//! marked fields hold chosen kinds of values); anything else is a message body, optionally
//! followed by `0xFF` and the bytes that pick the schema.
#![no_main]

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use babelqueue_core::schema::MapProvider;
use babelqueue_envelope::{Envelope, RawJson};
use babelqueue_fuzz::{Tree, block_on, split_body, text};
use babelqueue_gdpr::{AesGcmCipher, AesKey, Error, Marks, Protector, protect, unprotect};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// Member names the fixed schema marks, plus near misses (case, escapes are added when
/// writing).
const NAMES: &[&str] = &[
    "email",
    "name",
    "profile",
    "ssn",
    "addresses",
    "line",
    "grid",
    "nested",
    "deep",
    "x",
    "",
    "\u{e9}",
    "Email",
    "other",
];

fn schema() -> Value {
    json!({
        "type": "object",
        "x-gdpr-sensitive": "root",
        "properties": {
            "email": {"type": "string", "x-gdpr-sensitive": "contact"},
            "name": {"x-gdpr-sensitive": true},
            "profile": {"type": "object", "x-gdpr-sensitive": "profile",
                "properties": {"ssn": {"x-gdpr-sensitive": "id"}}},
            "addresses": {"type": "array", "items": {
                "properties": {"line": {"x-gdpr-sensitive": "address"}}}},
            "grid": {"items": {"items": {"x-gdpr-sensitive": "cell"}}},
            "nested": {"properties": {"deep": {"properties": {"x": {"x-gdpr-sensitive": "x"}}}}},
            "": {"x-gdpr-sensitive": "empty name"},
            "\u{e9}": {"x-gdpr-sensitive": "accented name"},
            "ignored": {"x-gdpr-sensitive": false}
        }
    })
}

fn key(byte: u8) -> AesKey {
    AesKey::from_bytes(&[byte; 32]).expect("32 bytes is an AES-256 key")
}

// Built once: key expansion and schema compilation are not what is being fuzzed.
static CIPHER: LazyLock<Arc<AesGcmCipher>> =
    LazyLock::new(|| Arc::new(AesGcmCipher::new(&key(1)).with_previous_key(&key(2))));
static FOREIGN: LazyLock<AesGcmCipher> = LazyLock::new(|| AesGcmCipher::new(&key(3)));
static SCHEMA: LazyLock<Value> = LazyLock::new(schema);
static MARKS: LazyLock<Marks> = LazyLock::new(|| Marks::from_schema(&SCHEMA));

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((0, rest)) => {
            let _ = structured(rest, &CIPHER);
        }
        _ => {
            let (body, params) = split_body(data);
            let _ = body_mode(body, params, &CIPHER);
        }
    }
});

/// Every error must be a well-formed typed error: its accessors and message work.
fn inspect(error: &Error) {
    let _ = (error.kind(), error.path(), error.is_transient());
    assert!(!error.to_string().is_empty());
}

fn marks_from(u: &mut Unstructured<'_>) -> Result<Cow<'static, Marks>> {
    if u.ratio(1, 4)? {
        // A fuzzer-built schema: `Marks::from_schema` must cope with any JSON.
        let tree = Tree::arbitrary(u, 6)?;
        let mut text = String::new();
        tree.write(u, &mut text)?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Cow::Owned(Marks::from_schema(&value)))
    } else {
        Ok(Cow::Borrowed(&*MARKS))
    }
}

fn body_mode(body: &[u8], params: &[u8], cipher: &Arc<AesGcmCipher>) -> Result<()> {
    let mut u = Unstructured::new(params);
    let marks = marks_from(&mut u)?;
    let mut envelope = Envelope::decode_lenient(body).envelope;

    // The function: straight on `data`, whatever it is.
    if let Some(data) = envelope.data() {
        match block_on(unprotect(data, &marks, cipher.as_ref())) {
            Ok(_) => {}
            Err(e) => inspect(&e),
        }
    }

    // The per-URN path the handler wrapper takes, with the schema registered for this URN.
    let urn = envelope.urn().into_owned();
    let schemas = Arc::new(MapProvider::new([(urn, SCHEMA.clone())]));
    let protector = Protector::new(cipher.clone(), schemas);
    let before = envelope.clone();
    if let Err(e) = block_on(protector.unprotect_envelope(&mut envelope)) {
        inspect(&e);
        assert_eq!(
            envelope, before,
            "a failed unprotect must leave the envelope unchanged"
        );
    }
    Ok(())
}

fn structured(rest: &[u8], cipher: &AesGcmCipher) -> Result<()> {
    let mut u = Unstructured::new(rest);
    let marks = marks_from(&mut u)?;
    let mut text = String::new();
    object(&mut u, cipher, 3, &mut text)?;
    let data = RawJson::parse(&text).expect("the generator writes valid JSON");

    match block_on(unprotect(&data, &marks, cipher)) {
        Ok(clear) => {
            // What came out is JSON again (splicing never breaks the text).
            RawJson::parse(clear.as_str()).expect("unprotect returns JSON");
        }
        Err(e) => inspect(&e),
    }

    match block_on(protect(&data, &marks, cipher)) {
        Ok(protected) => match block_on(unprotect(&protected, &marks, cipher)) {
            Ok(back) => assert_eq!(back, data, "unprotect(protect(data)) must be data"),
            Err(e) => panic!("unprotect of what protect wrote failed: {e}"),
        },
        Err(e) => inspect(&e),
    }
    Ok(())
}

/// An object with members named from [`NAMES`] (sometimes escaped), values from [`value`].
fn object(
    u: &mut Unstructured<'_>,
    cipher: &AesGcmCipher,
    depth: u32,
    out: &mut String,
) -> Result<()> {
    out.push('{');
    for i in 0..u.int_in_range(0..=6)? {
        if i > 0 {
            out.push(',');
        }
        let name = *u.choose(NAMES)?;
        if u.ratio(1, 6)? && !name.is_empty() {
            // The same name written with an escape: it must match as the same member.
            let mut chars = name.chars();
            let first = chars.next().unwrap_or('x');
            out.push_str(&format!(
                "\"\\u{:04x}{}\"",
                u32::from(first),
                chars.as_str()
            ));
        } else {
            out.push_str(RawJson::string(name).as_str());
        }
        out.push(':');
        value(u, cipher, depth, out)?;
    }
    out.push('}');
    Ok(())
}

fn value(
    u: &mut Unstructured<'_>,
    cipher: &AesGcmCipher,
    depth: u32,
    out: &mut String,
) -> Result<()> {
    let max = if depth == 0 { 4 } else { 6 };
    match u.int_in_range(0..=max)? {
        // Not a ciphertext at all (a producer that forgot to protect, or garbage).
        0 => out.push_str(RawJson::string(&text(u)?).as_str()),
        // A real ciphertext of arbitrary bytes (decrypts, but maybe not to JSON).
        1 => {
            let plaintext: Vec<u8> = u.arbitrary()?;
            let sealed = cipher.seal(&plaintext).expect("AES-GCM seals any bytes");
            out.push_str(RawJson::string(&maybe_damage(u, sealed)?).as_str());
        }
        // A real ciphertext of a JSON value (the normal case), sometimes damaged.
        2 => {
            let tree = Tree::arbitrary(u, 3)?;
            let mut plaintext = String::new();
            tree.write(u, &mut plaintext)?;
            let sealed = cipher
                .seal(plaintext.as_bytes())
                .expect("AES-GCM seals any bytes");
            out.push_str(RawJson::string(&maybe_damage(u, sealed)?).as_str());
        }
        // A ciphertext under a key this cipher does not know.
        3 => {
            let sealed = FOREIGN.seal(b"\"x\"").expect("AES-GCM seals any bytes");
            out.push_str(RawJson::string(&sealed).as_str());
        }
        // A clear value of any type.
        4 => {
            let tree = Tree::arbitrary(u, 2)?;
            let mut text = String::new();
            tree.write(u, &mut text)?;
            out.push_str(&text);
        }
        // Containers the schema walks into.
        5 => object(u, cipher, depth - 1, out)?,
        _ => {
            out.push('[');
            for i in 0..u.int_in_range(0..=4)? {
                if i > 0 {
                    out.push(',');
                }
                value(u, cipher, depth - 1, out)?;
            }
            out.push(']');
        }
    }
    Ok(())
}

/// A ciphertext, sometimes truncated, extended or with one character changed.
fn maybe_damage(u: &mut Unstructured<'_>, sealed: String) -> Result<String> {
    let mut bytes = sealed.into_bytes();
    match u.int_in_range(0..=3)? {
        0 | 1 => {}
        2 if !bytes.is_empty() => {
            let cut = u.choose_index(bytes.len())?;
            bytes.truncate(cut);
        }
        _ if !bytes.is_empty() => {
            let at = u.choose_index(bytes.len())?;
            bytes[at] = *u.choose(b"A/+=Z0\"")?;
        }
        _ => {}
    }
    // Only ASCII was written or substituted, so the text stays UTF-8.
    Ok(String::from_utf8(bytes).unwrap_or_default())
}
