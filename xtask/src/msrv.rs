//! The rust-version check (part of `cargo xtask tidy`): no workspace crate may declare a
//! `rust-version` below what its dependencies need.
//!
//! A crate's floor is the highest of 1.85 (edition 2024) and the `rust-version` of every other
//! package it builds on: its normal and build dependencies, transitively, with every feature
//! on (what docs.rs builds), on every platform. Workspace crates in that closure count with the
//! version they declare, so a crate never claims less than a crate it depends on. Dev
//! dependencies do not count: a user of the crate never builds them. The floor comes from
//! `cargo metadata`, so a dependency bump that raises it fails the check until the manifest
//! follows.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::cargo;

/// A `major.minor.patch` version, compared numerically (`1.9` < `1.89`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Version(u32, u32, u32);

/// The floor edition 2024 sets.
const EDITION_2024: Version = Version(1, 85, 0);

impl Version {
    fn parse(text: &str) -> Option<Version> {
        let mut parts = text.split('.').map(str::parse::<u32>);
        let major = parts.next()?.ok()?;
        let minor = parts.next().unwrap_or(Ok(0)).ok()?;
        let patch = parts.next().unwrap_or(Ok(0)).ok()?;
        parts
            .next()
            .is_none()
            .then_some(Version(major, minor, patch))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// One workspace crate: what it declares and what its closure needs.
#[derive(Debug, PartialEq, Eq)]
struct Floor {
    name: String,
    declared: Option<Version>,
    floor: Version,
    /// The package that sets the floor (`edition 2024` when none is higher).
    because: String,
}

/// Runs `cargo metadata` and returns one problem per crate that declares too little.
pub(crate) fn check() -> Result<Vec<String>, String> {
    let output = cargo()
        .args(["metadata", "--format-version", "1", "--all-features"])
        .output()
        .map_err(|e| format!("cargo metadata could not start: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
    Ok(problems(&floors(&metadata)?))
}

/// One line per crate that declares less than its floor, or nothing.
fn problems(floors: &[Floor]) -> Vec<String> {
    floors
        .iter()
        .filter(|f| f.declared.is_none_or(|declared| declared < f.floor))
        .map(|f| {
            format!(
                "{}: rust-version is {}, but its dependencies need {} ({})",
                f.name,
                f.declared
                    .map_or_else(|| "not declared".to_owned(), |v| v.to_string()),
                f.floor,
                f.because
            )
        })
        .collect()
}

/// The floor of every workspace member of `metadata` (`cargo metadata --format-version 1`).
fn floors(metadata: &Value) -> Result<Vec<Floor>, String> {
    let bad = |what: &str| format!("cargo metadata: {what}");
    let packages: BTreeMap<&str, &Value> = metadata["packages"]
        .as_array()
        .ok_or_else(|| bad("no packages"))?
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p)))
        .collect();
    let deps: BTreeMap<&str, Vec<&str>> = metadata["resolve"]["nodes"]
        .as_array()
        .ok_or_else(|| bad("no resolve graph"))?
        .iter()
        .filter_map(|node| {
            let built = node["deps"]
                .as_array()?
                .iter()
                .filter(|d| {
                    d["dep_kinds"].as_array().is_some_and(|kinds| {
                        kinds
                            .iter()
                            .any(|k| k["kind"].is_null() || k["kind"] == "build")
                    })
                })
                .filter_map(|d| d["pkg"].as_str())
                .collect();
            Some((node["id"].as_str()?, built))
        })
        .collect();
    let rust_version = |id: &str| {
        packages
            .get(id)
            .and_then(|p| p["rust_version"].as_str())
            .and_then(Version::parse)
    };
    let mut out = Vec::new();
    for member in metadata["workspace_members"]
        .as_array()
        .ok_or_else(|| bad("no workspace members"))?
        .iter()
        .filter_map(Value::as_str)
    {
        let mut seen = BTreeSet::new();
        let mut stack = vec![member];
        while let Some(id) = stack.pop() {
            if seen.insert(id) {
                stack.extend(deps.get(id).into_iter().flatten().copied());
            }
        }
        let (mut floor, mut because) = (EDITION_2024, "edition 2024".to_owned());
        for id in seen.into_iter().filter(|id| *id != member) {
            if let Some(v) = rust_version(id).filter(|v| *v > floor) {
                floor = v;
                because = format!("{} {v}", packages[id]["name"].as_str().unwrap_or(id));
            }
        }
        out.push(Floor {
            name: packages
                .get(member)
                .and_then(|p| p["name"].as_str())
                .unwrap_or(member)
                .to_owned(),
            declared: rust_version(member),
            floor,
            because,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn package(id: &str, rust_version: Option<&str>) -> Value {
        json!({"id": id, "name": id, "rust_version": rust_version})
    }

    fn dep(pkg: &str, kind: Option<&str>) -> Value {
        json!({"pkg": pkg, "dep_kinds": [{"kind": kind}]})
    }

    /// `app` -> `lib` (workspace) -> `aws` (1.91); `app` -> `tool` only as a dev dependency
    /// (1.99); `lib` -> `gen` as a build dependency (1.87).
    fn metadata(app: &str, lib: &str) -> Value {
        json!({
            "workspace_members": ["app", "lib"],
            "packages": [
                package("app", Some(app)), package("lib", Some(lib)),
                package("aws", Some("1.91")), package("tool", Some("1.99")),
                package("gen", Some("1.87")), package("old", None),
            ],
            "resolve": {"nodes": [
                {"id": "app", "deps": [dep("lib", None), dep("tool", Some("dev"))]},
                {"id": "lib", "deps": [dep("gen", Some("build")), dep("old", None)]},
                {"id": "gen", "deps": [dep("aws", None)]},
                {"id": "aws", "deps": []}, {"id": "tool", "deps": []}, {"id": "old", "deps": []},
            ]},
        })
    }

    #[test]
    fn the_floor_is_the_highest_of_the_built_closure() {
        let got = floors(&metadata("1.91", "1.91")).unwrap();
        assert_eq!(got[0].name, "app");
        assert_eq!(
            got[0].floor,
            Version(1, 91, 0),
            "dev-only 1.99 does not count"
        );
        assert_eq!(
            got[1].floor,
            Version(1, 91, 0),
            "through the build dependency"
        );
        assert_eq!(got[1].because, "aws 1.91.0");
    }

    #[test]
    fn a_workspace_dependency_counts_with_what_it_declares() {
        let got = floors(&metadata("1.91", "1.93")).unwrap();
        assert_eq!(got[0].floor, Version(1, 93, 0));
        assert_eq!(got[0].because, "lib 1.93.0");
    }

    #[test]
    fn a_crate_below_its_floor_is_a_problem() {
        let got = problems(&floors(&metadata("1.90", "1.91")).unwrap());
        assert_eq!(
            got,
            ["app: rust-version is 1.90.0, but its dependencies need 1.91.0 (aws 1.91.0)"]
        );
        let unset = metadata("1.91", "1.91");
        let mut unset = unset;
        unset["packages"][1]["rust_version"] = Value::Null;
        assert_eq!(
            problems(&floors(&unset).unwrap()).len(),
            1,
            "lib declares nothing"
        );
        assert!(problems(&floors(&metadata("1.95", "1.91")).unwrap()).is_empty());
    }

    #[test]
    fn versions_compare_as_numbers() {
        assert!(Version::parse("1.9").unwrap() < Version::parse("1.89").unwrap());
        assert_eq!(Version::parse("1.94.1"), Some(Version(1, 94, 1)));
        assert_eq!(Version::parse("1.x"), None);
        assert!(EDITION_2024 > Version::parse("1.84.9").unwrap());
    }
}
