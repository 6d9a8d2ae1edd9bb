//! Checks of the runner itself against the official suite and the project's own manifest.
//!
//! The official suite is the folder `cargo xtask suite` names: `BQ_SHARED_CONFORMANCE` (which
//! `cargo xtask ci` sets) or `../shared/conformance` when it holds a `manifest.json`, else the
//! copy fetched from PyPI into `$BQ_CACHE/conformance` (default `../cache`). The two tables of
//! the suite's guide these tests compare with (`tests/spec/*.tsv`: the case ids and the section
//! counts of suite 1.8.0) are kept here, so a clone without `../shared` runs them too; when
//! `../shared/spec` is there, a test checks that they still agree with it.

use std::path::PathBuf;

use babelqueue_conformance::{Manifest, Outcome, cases_of, run};
use serde_json::Value;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shared() -> PathBuf {
    let named = std::env::var_os("BQ_SHARED_CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared/conformance"));
    if named.join("manifest.json").is_file() {
        return named;
    }
    let fetched = std::env::var_os("BQ_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../cache"))
        .join("conformance/babelqueue-1.24.0/tests/conformance");
    assert!(
        fetched.join("manifest.json").is_file(),
        "no official suite in {} or {}: run `cargo xtask suite`",
        named.display(),
        fetched.display()
    );
    fetched
}

/// A table of the suite's guide, as kept in `tests/spec`.
fn spec(file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/spec")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_kept_spec_tables_match_the_shared_spec() {
    let shared = workspace().join("../shared/spec");
    if !shared.is_dir() {
        // A clone without ../shared: the tables kept here are the only copy.
        return;
    }
    for file in ["conformance-case-ids.tsv", "conformance-sections.tsv"] {
        let theirs = std::fs::read_to_string(shared.join(file)).unwrap();
        assert_eq!(
            spec(file),
            theirs,
            "tests/spec/{file} differs from ../shared/spec"
        );
    }
}

fn official() -> Manifest {
    Manifest::load(&shared().join("manifest.json")).expect("the official suite is readable")
}

#[test]
fn case_ids_follow_the_suite_naming_rule() {
    let manifest = official();
    let mut got = Vec::new();
    for (section, scope) in &manifest.sections {
        for case in manifest.cases(section) {
            got.push(format!("{section}\t{scope}\t{}", case.id));
        }
    }
    let want: Vec<String> = spec("conformance-case-ids.tsv")
        .lines()
        .skip(1)
        .map(String::from)
        .collect();
    assert_eq!(got.len(), 710);
    assert_eq!(got, want, "case ids differ from conformance-case-ids.tsv");
}

#[test]
fn section_counts_match_the_guide() {
    let manifest = official();
    for line in spec("conformance-sections.tsv").lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (section, scope, count) = (cols[0], cols[1], cols[2].parse::<usize>().unwrap());
        assert_eq!(manifest.cases(section).len(), count, "{section}");
        assert!(
            manifest
                .sections
                .iter()
                .any(|(s, sc)| s == section && sc == scope),
            "{section}"
        );
    }
    assert_eq!(manifest.sections.len(), 32);
    assert_eq!(manifest.conformance_version, "1.8.0");
}

#[test]
fn identity_verdict_mirrors_kafka_poison() {
    let manifest = official();
    let kafka = manifest.cases("kafka_poison");
    let identity = manifest.cases("identity_verdict");
    assert_eq!(kafka.len(), 92);
    assert_eq!(identity.len(), 97);
    for (k, i) in kafka.iter().zip(&identity) {
        assert_eq!(k.id, i.id);
        assert_eq!(k.value["body"], i.value["body"]);
        let mapped = match k.value["expect"].as_str().unwrap() {
            "no_identity" => "poison",
            other => other,
        };
        assert_eq!(i.value["expect"], mapped, "{}", k.id);
    }
}

#[test]
fn unnamed_sub_cases_are_numbered_without_a_hash() {
    let section = serde_json::json!({
        "cases": [{"name": "a"}, {}],
        "block": {"cases": [{"name": "x"}, {}]},
        "single": {"k": 1},
        "description": {"not": "a case"},
        "list": [1, 2]
    });
    let ids: Vec<String> = cases_of("s", &section).into_iter().map(|c| c.id).collect();
    assert_eq!(ids, ["a", "s#1", "block/x", "block/1", "single"]);
}

fn section_outcomes<'r>(
    report: &'r babelqueue_conformance::Report,
    name: &str,
) -> &'r [(String, Outcome)] {
    &report
        .sections
        .iter()
        .find(|s| s.name == name)
        .expect(name)
        .cases
}

#[test]
fn every_codec_section_of_the_official_suite_passes() {
    let report = run(&official());
    for name in [
        "cases",
        "roundtrip",
        "data_shape",
        "forbidden_keys",
        "extension_write",
        "encode_reject",
        "trim",
        "job_type",
        "poison_dlq",
    ] {
        for (id, outcome) in section_outcomes(&report, name) {
            assert_eq!(*outcome, Outcome::Pass, "{name}[{id}]");
        }
    }
    let codec: usize = report
        .sections
        .iter()
        .filter(|s| {
            [
                "cases",
                "roundtrip",
                "data_shape",
                "forbidden_keys",
                "extension_write",
                "encode_reject",
                "trim",
                "job_type",
                "poison_dlq",
            ]
            .contains(&s.name.as_str())
        })
        .map(|s| s.cases.len())
        .sum();
    assert_eq!(codec, 133);
}

#[test]
fn sections_without_a_runner_fail_as_not_implemented_and_are_never_absent() {
    let manifest = official();
    let report = run(&manifest);
    assert_eq!(report.sections.len(), 32);
    let json = report.to_json();
    for (section, _) in &manifest.sections {
        let cases = json["sections"][section].as_object().expect(section);
        assert_eq!(cases.len(), manifest.cases(section).len(), "{section}");
        for (id, result) in cases {
            let status = result["status"].as_str().unwrap();
            assert_ne!(status, "skip", "{section}[{id}] must never be skipped");
            if status == "fail" {
                assert!(
                    !result["reason"].as_str().unwrap_or_default().is_empty(),
                    "{section}[{id}]"
                );
            }
        }
    }
}

#[test]
fn the_results_file_validates_against_the_suite_schema() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(shared().join("schema/results.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the results schema compiles");
    for manifest in [
        official(),
        Manifest::load(&workspace().join("conformance/manifest.json")).unwrap(),
    ] {
        let results = run(&manifest).to_json();
        let errors: Vec<String> = validator
            .iter_errors(&results)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "results do not validate: {errors:?}");
    }
    // The validator is not vacuous: a skip without an ADR and a bad timestamp are rejected.
    let mut bad = run(&official()).to_json();
    bad["sections"]["cases"]["order-created"] =
        serde_json::json!({"status": "skip", "reason": "later"});
    assert!(!validator.is_valid(&bad));
    let mut bad = run(&official()).to_json();
    bad["generated_at"] = Value::from("30 November 2026");
    assert!(!validator.is_valid(&bad));
}

#[test]
fn the_projects_own_vectors_pass() {
    let manifest = Manifest::load(&workspace().join("conformance/manifest.json")).unwrap();
    let report = run(&manifest);
    let failures = report.failures();
    assert!(
        failures.is_empty(),
        "own vectors failing:\n{}",
        failures.join("\n")
    );
    assert!(report.in_scope() > 80);
}
