//! What the codec costs per message, against plain `serde_json`.
//!
//! Over every fixture of the cross-SDK suite (`../shared/conformance/fixtures`, or the folder
//! named by `BQ_SHARED_CONFORMANCE` + `/fixtures`; skipped when neither exists) and over three
//! envelopes of typical sizes (small ≈ 400 bytes, medium ≈ 2 KB, large ≈ 55 KB), it measures:
//!
//! * `babelqueue`: the consume-side work of one retry hop, as the runtime does it: the strict
//!   verdict and the lenient decode in one pass (`Envelope::decode_classified`),
//!   `attempts + 1`, encode;
//! * `serde_json`: `from_slice::<Value>` + `to_string` of the same bytes (no verdict, no
//!   normalisation, lossy numbers: the floor any JSON round trip pays).
//!
//! Run with `cargo bench -p babelqueue-envelope --bench codec`; it prints criterion's figures,
//! then one line per body set with both per-message costs and their ratio. With
//! `BQ_BENCH_FIGURES_ONLY=1` it skips criterion and prints only those lines (each also as a
//! `BQ-FIGURE` line for `cargo xtask bench runtime`); with `BQ_BENCH_BODIES_OUT=DIR` it first
//! writes the three sized bodies to `DIR/{small,medium,large}.json`, so that the Python SDK's
//! hop can be timed on the same bytes.

#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use babelqueue_envelope::{Envelope, poison_cause};
use criterion::{Criterion, Throughput};

fn fixtures() -> Vec<Vec<u8>> {
    let dir = std::env::var_os("BQ_SHARED_CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance")
        })
        .join("fixtures");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("{}: not found; the fixture set is skipped", dir.display());
        return Vec::new();
    };
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// An envelope whose `data` holds `items` order lines: 1 gives about 400 bytes, 12 about
/// 2 KB, 400 about 55 KB.
fn sized(items: usize) -> Vec<u8> {
    let lines: Vec<String> = (0..items)
        .map(|i| {
            format!(
                r#"{{"sku":"SKU-{i:05}","qty":{},"price":{}.{:02},"note":"gift wrap, leave at the door"}}"#,
                i % 7 + 1,
                i % 90 + 10,
                i % 100
            )
        })
        .collect();
    format!(
        r#"{{"job":"urn:babel:orders:created","trace_id":"0b9a4f3e-6c1d-4a8e-9f2b-7d5c3e1a0f42","data":{{"order_id":1042,"customer_id":"c-88123","total":99.9,"currency":"EUR","items":[{}],"express":false}},"meta":{{"queue":"orders","schema_version":1,"source_lang":"rust","id":"5f0c2a9b-3e7d-4c1a-b8f6-2d9e4a7c1b03","created_at":1764633600000}},"attempts":0}}"#,
        lines.join(",")
    )
    .into_bytes()
}

fn sized_bodies() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("small", sized(1)),
        ("medium", sized(14)),
        ("large", sized(520)),
    ]
}

fn babelqueue_hop(body: &[u8]) -> usize {
    match Envelope::decode_classified(body) {
        Ok(decoded) => {
            let mut envelope = decoded.envelope;
            envelope.set_attempts(envelope.attempts() + 1);
            envelope.encode().map_or(0, |t| t.len())
        }
        Err(cause) => usize::from(poison_cause(body, true) == Some(cause)),
    }
}

fn serde_json_hop(body: &[u8]) -> usize {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => serde_json::to_string(&value).map_or(0, |t| t.len()),
        Err(_) => 0,
    }
}

/// The cost per message of `f` over `bodies`: the best of seven rounds of about 100 ms each.
/// On a shared machine other work only ever adds time, so the fastest round is the closest to
/// the code's own cost (the Python side of `cargo xtask bench runtime` is timed the same way).
fn per_message(bodies: &[Vec<u8>], f: fn(&[u8]) -> usize) -> Duration {
    let round = Duration::from_millis(100);
    (0..7)
        .map(|_| {
            let start = Instant::now();
            let mut messages = 0u32;
            while start.elapsed() < round {
                for body in bodies {
                    black_box(f(black_box(body)));
                }
                messages += u32::try_from(bodies.len()).unwrap_or(u32::MAX);
            }
            start.elapsed() / messages.max(1)
        })
        .min()
        .unwrap_or_default()
}

fn figures(name: &str, bodies: &[Vec<u8>]) {
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    let ours = per_message(bodies, babelqueue_hop);
    let theirs = per_message(bodies, serde_json_hop);
    println!(
        "codec hop, {name} ({} bodies, {bytes} bytes): babelqueue {ours:?}/msg, serde_json {theirs:?}/msg, ratio {:.2}x",
        bodies.len(),
        ours.as_secs_f64() / theirs.as_secs_f64()
    );
    println!(
        "BQ-FIGURE codec_hop_ns {name} {bytes} {} {}",
        ours.as_nanos(),
        theirs.as_nanos()
    );
}

fn main() {
    let fixtures = fixtures();
    let sized = sized_bodies();
    if let Some(dir) = std::env::var_os("BQ_BENCH_BODIES_OUT") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("the bodies directory");
        for (name, body) in &sized {
            std::fs::write(dir.join(format!("{name}.json")), body).expect("a body file");
        }
    }
    let figures_only = std::env::var_os("BQ_BENCH_FIGURES_ONLY").is_some();
    if !figures_only {
        let mut criterion = Criterion::default().configure_from_args();
        let mut sets: Vec<(&str, Vec<Vec<u8>>)> = vec![("fixtures", fixtures.clone())];
        sets.extend(sized.iter().map(|(name, body)| (*name, vec![body.clone()])));
        for (name, bodies) in sets.iter().filter(|(_, b)| !b.is_empty()) {
            let mut group = criterion.benchmark_group(format!("retry_hop_{name}"));
            group.throughput(Throughput::Elements(bodies.len() as u64));
            group.bench_function("babelqueue", |b| {
                b.iter(|| {
                    bodies
                        .iter()
                        .map(|body| babelqueue_hop(black_box(body)))
                        .sum::<usize>()
                })
            });
            group.bench_function("serde_json", |b| {
                b.iter(|| {
                    bodies
                        .iter()
                        .map(|body| serde_json_hop(black_box(body)))
                        .sum::<usize>()
                })
            });
            group.finish();
        }
        criterion.final_summary();
    }

    // `cargo test --benches` runs each benchmark once as a smoke test; skip the figures there.
    if figures_only || std::env::args().any(|a| a == "--bench") {
        if !fixtures.is_empty() {
            figures("fixtures", &fixtures);
        }
        for (name, body) in &sized {
            figures(name, std::slice::from_ref(body));
        }
    }
}
