//! Cost of GDPR field protection per message, with the built-in AES-256-GCM cipher.
//!
//! `cargo bench -p babelqueue-gdpr --bench gdpr` prints criterion's figures for:
//!
//! * `protect/typical` and `unprotect/typical`: a 472-byte customer message with 5 protected
//!   values (a string, a nested string, two array items, a container object);
//! * `protect/wide` and `unprotect/wide`: 50 array items, each protected;
//! * `protect/unmarked`: the same typical message under a schema without marks (the walk alone);
//! * `aes_gcm/seal_one_value` and `aes_gcm/open_one_value`: the cipher alone, one 19-byte value.

#![allow(missing_docs, clippy::print_stdout)]

use babelqueue_envelope::RawJson;
use babelqueue_gdpr::{AesGcmCipher, AesKey, Marks, protect, unprotect};
use criterion::{Criterion, Throughput};
use serde_json::json;

const TYPICAL: &str = concat!(
    r#"{"customer_id":1042,"email":"alice@example.com","created_at":1749132727000,"#,
    r#""profile":{"full_name":"Alice Example","locale":"nl-NL","newsletter":true},"#,
    r#""addresses":[{"line":"1 Main St","city":"Amsterdam","country":"NL"},"#,
    r#"{"line":"2 Side St","city":"Utrecht","country":"NL"}],"#,
    r#""card":{"brand":"visa","last4":"1111","exp":"12/30"},"#,
    r#""items":[{"sku":"A-1","qty":2,"price":19.99},{"sku":"B-7","qty":1,"price":5.5}],"#,
    r#""total":45.48,"currency":"EUR","channel":"web","campaign":"spring"}"#
);

fn typical_schema() -> serde_json::Value {
    json!({"type": "object", "properties": {
        "email": {"x-gdpr-sensitive": "contact"},
        "profile": {"properties": {"full_name": {"x-gdpr-sensitive": true}}},
        "addresses": {"items": {"properties": {"line": {"x-gdpr-sensitive": "address"}}}},
        "card": {"x-gdpr-sensitive": "payment"}
    }})
}

fn wide() -> String {
    let phones: Vec<String> = (0..50).map(|i| format!("+31 6 {i:08}")).collect();
    json!({"customer_id": 1, "phones": phones}).to_string()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let key = AesKey::from_bytes(&[7; 32]).unwrap();
    let cipher = AesGcmCipher::new(&key);
    let typical = RawJson::parse(TYPICAL).unwrap();
    let typical_marks = Marks::from_schema(&typical_schema());
    let unmarked = Marks::from_schema(&json!({"properties": {"email": {}}}));
    let wide = RawJson::parse(&wide()).unwrap();
    let wide_marks = Marks::from_schema(
        &json!({"properties": {"phones": {"items": {"x-gdpr-sensitive": true}}}}),
    );

    let protected_typical = runtime
        .block_on(protect(&typical, &typical_marks, &cipher))
        .unwrap();
    let protected_wide = runtime
        .block_on(protect(&wide, &wide_marks, &cipher))
        .unwrap();
    println!(
        "typical message: {} bytes clear, {} bytes protected (5 values); wide: {} -> {} bytes (50 values)",
        typical.as_str().len(),
        protected_typical.as_str().len(),
        wide.as_str().len(),
        protected_wide.as_str().len()
    );

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("protect");
    group.throughput(Throughput::Elements(1));
    group.bench_function("typical", |b| {
        b.to_async(&runtime)
            .iter(|| protect(&typical, &typical_marks, &cipher));
    });
    group.bench_function("wide", |b| {
        b.to_async(&runtime)
            .iter(|| protect(&wide, &wide_marks, &cipher));
    });
    group.bench_function("unmarked", |b| {
        b.to_async(&runtime)
            .iter(|| protect(&typical, &unmarked, &cipher));
    });
    group.finish();

    let mut group = criterion.benchmark_group("unprotect");
    group.throughput(Throughput::Elements(1));
    group.bench_function("typical", |b| {
        b.to_async(&runtime)
            .iter(|| unprotect(&protected_typical, &typical_marks, &cipher));
    });
    group.bench_function("wide", |b| {
        b.to_async(&runtime)
            .iter(|| unprotect(&protected_wide, &wide_marks, &cipher));
    });
    group.finish();

    let mut group = criterion.benchmark_group("aes_gcm");
    group.throughput(Throughput::Elements(1));
    let sealed = cipher.seal(b"\"alice@example.com\"").unwrap();
    group.bench_function("seal_one_value", |b| {
        b.iter(|| cipher.seal(b"\"alice@example.com\""));
    });
    group.bench_function("open_one_value", |b| b.iter(|| cipher.open(&sealed)));
    group.finish();

    criterion.final_summary();
}
