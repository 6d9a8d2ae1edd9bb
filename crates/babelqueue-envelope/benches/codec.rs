//! What the codec costs per message, against plain `serde_json`.
//!
//! Over every fixture of the cross-SDK suite (`../shared/conformance/fixtures`, or the folder
//! named by `BQ_SHARED_CONFORMANCE` + `/fixtures`), it measures:
//!
//! * `babelqueue`: the consume-side work of one retry hop: strict verdict (`poison_cause`),
//!   lenient decode, `attempts + 1`, encode;
//! * `serde_json`: `from_slice::<Value>` + `to_string` of the same bytes (no verdict, no
//!   normalisation, lossy numbers: the floor any JSON round trip pays).
//!
//! Run with `cargo bench -p babelqueue-envelope --bench codec`; it prints criterion's figures,
//! then one line with both per-message costs and their ratio.

#![allow(missing_docs, clippy::print_stdout)]

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
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn babelqueue_hop(body: &[u8]) -> usize {
    let verdict = poison_cause(body, true);
    let mut envelope = Envelope::decode_lenient(body).envelope;
    envelope.set_attempts(envelope.attempts() + 1);
    envelope.encode().map_or(0, |t| t.len()) + usize::from(verdict.is_some())
}

fn serde_json_hop(body: &[u8]) -> usize {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => serde_json::to_string(&value).map_or(0, |t| t.len()),
        Err(_) => 0,
    }
}

fn per_message(bodies: &[Vec<u8>], f: fn(&[u8]) -> usize) -> Duration {
    let budget = Duration::from_millis(400);
    let start = Instant::now();
    let mut messages = 0u32;
    while start.elapsed() < budget {
        for body in bodies {
            black_box(f(black_box(body)));
        }
        messages += u32::try_from(bodies.len()).unwrap_or(u32::MAX);
    }
    start.elapsed() / messages.max(1)
}

fn main() {
    let bodies = fixtures();
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("retry_hop");
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
    criterion.final_summary();

    // `cargo test --benches` runs each benchmark once as a smoke test; skip the figures there.
    if std::env::args().any(|a| a == "--bench") {
        let ours = per_message(&bodies, babelqueue_hop);
        let theirs = per_message(&bodies, serde_json_hop);
        println!(
            "\ncodec hop over {} fixtures ({} bytes): babelqueue {:?}/msg, serde_json {:?}/msg, ratio {:.2}x",
            bodies.len(),
            bytes,
            ours,
            theirs,
            ours.as_secs_f64() / theirs.as_secs_f64()
        );
    }
}
