//! The BabelQueue conformance runner.
//!
//! It reads any manifest in the official format (the cross-SDK suite in
//! `../shared/conformance/`, or the project's own vectors in `conformance/`), runs every case
//! through the real crates, and writes a results file that validates against the suite's
//! `schema/results.schema.json`.
//!
//! The runner holds no copy of a rule: each case calls the public API of the crate that owns
//! the behaviour (the codec, the runtime, a transport's pure projection) and compares what comes
//! out with what the case expects.
//!
//! ```no_run
//! use babelqueue_conformance::{Manifest, run};
//!
//! let manifest = Manifest::load("../shared/conformance/manifest.json".as_ref())?;
//! let report = run(&manifest);
//! println!("{} of {} in-scope cases pass", report.passed_in_scope(), report.in_scope());
//! # Ok::<(), String>(())
//! ```

#![allow(clippy::print_stdout)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

pub mod check;
mod fate;
mod hop;
mod sections;
mod time;

/// A loaded manifest.
#[derive(Debug)]
pub struct Manifest {
    root: Map<String, Value>,
    dir: PathBuf,
    /// The manifest's `conformance_version`.
    pub conformance_version: String,
    /// The `sections` map: (name, scope), in manifest order.
    pub sections: Vec<(String, String)>,
}

impl Manifest {
    /// Reads and parses a manifest file.
    pub fn load(path: &Path) -> Result<Manifest, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the manifest {}: {e}", path.display()))?;
        let root: Map<String, Value> = serde_json::from_str(&text)
            .map_err(|e| format!("the manifest {} is not a JSON object: {e}", path.display()))?;
        let conformance_version = root
            .get("conformance_version")
            .and_then(Value::as_str)
            .ok_or("the manifest has no string `conformance_version`")?
            .to_string();
        let sections = root
            .get("sections")
            .and_then(Value::as_object)
            .ok_or("the manifest has no `sections` map")?
            .iter()
            .map(|(name, spec)| {
                let scope = spec.get("scope").and_then(Value::as_str).unwrap_or("core");
                (name.clone(), scope.to_string())
            })
            .collect();
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(Manifest {
            root,
            dir,
            conformance_version,
            sections,
        })
    }

    /// The data of section `name`.
    pub fn section(&self, name: &str) -> Option<&Value> {
        self.root.get(name)
    }

    /// Reads a fixture named relative to the manifest, as raw bytes.
    pub fn fixture(&self, relative: &str) -> Result<Vec<u8>, String> {
        let path = self.dir.join(relative);
        std::fs::read(&path).map_err(|e| format!("cannot read fixture {}: {e}", path.display()))
    }

    /// The cases of section `name`, with their ids, in manifest order.
    pub fn cases(&self, name: &str) -> Vec<Case<'_>> {
        self.section(name)
            .map(|value| cases_of(name, value))
            .unwrap_or_default()
    }
}

/// One case of a section.
#[derive(Debug, Clone)]
pub struct Case<'m> {
    /// The case id, by the suite's naming rule.
    pub id: String,
    /// The case object.
    pub value: &'m Value,
    /// The sub-block holding the case (`schema_version_gate`, …) and its object, when any.
    pub group: Option<(&'m str, &'m Value)>,
}

/// The case-id rule of the suite (results.schema.json, §2 of the runner guide).
pub fn cases_of<'m>(section: &str, value: &'m Value) -> Vec<Case<'m>> {
    let list =
        |items: &'m [Value], prefix: &str, sep: &str, group: Option<(&'m str, &'m Value)>| {
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let id = match item.get("name").and_then(Value::as_str) {
                        Some(name) if group.is_some() => format!("{prefix}/{name}"),
                        Some(name) => name.to_string(),
                        None => format!("{prefix}{sep}{i}"),
                    };
                    Case {
                        id,
                        value: item,
                        group,
                    }
                })
                .collect::<Vec<_>>()
        };
    match value {
        Value::Array(items) => list(items, section, "#", None),
        Value::Object(map) => {
            let mut out = Vec::new();
            if let Some(Value::Array(items)) = map.get("cases") {
                out.extend(list(items, section, "#", None));
            }
            for (key, sub) in map {
                if matches!(key.as_str(), "description" | "schema" | "cases") || !sub.is_object() {
                    continue;
                }
                match sub.get("cases") {
                    Some(Value::Array(items)) => {
                        out.extend(list(items, key, "/", Some((key, sub))))
                    }
                    _ => out.push(Case {
                        id: key.clone(),
                        value: sub,
                        group: Some((key, sub)),
                    }),
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The case passed.
    Pass,
    /// The case failed, with the reason.
    Fail(String),
}

/// The results of one section.
#[derive(Debug, Clone)]
pub struct SectionReport {
    /// Section name.
    pub name: String,
    /// Its scope (`core` or a binding).
    pub scope: String,
    /// Whether this package carries the scope (core always; a binding when its crate is here).
    pub in_scope: bool,
    /// Case id and outcome, in manifest order.
    pub cases: Vec<(String, Outcome)>,
}

/// The results of a whole manifest.
#[derive(Debug, Clone)]
pub struct Report {
    /// The manifest's conformance version.
    pub conformance_version: String,
    /// The bindings this package carries, derived from the runner modules compiled in.
    pub bindings: Vec<String>,
    /// Per section, in manifest order.
    pub sections: Vec<SectionReport>,
}

impl Report {
    /// Number of in-scope cases.
    pub fn in_scope(&self) -> usize {
        self.sections
            .iter()
            .filter(|s| s.in_scope)
            .map(|s| s.cases.len())
            .sum()
    }

    /// Number of in-scope cases that pass.
    pub fn passed_in_scope(&self) -> usize {
        self.sections
            .iter()
            .filter(|s| s.in_scope)
            .flat_map(|s| &s.cases)
            .filter(|(_, o)| *o == Outcome::Pass)
            .count()
    }

    /// Whether every in-scope case passes.
    pub fn all_in_scope_pass(&self) -> bool {
        self.passed_in_scope() == self.in_scope()
    }

    /// The results file (`schema/results.schema.json`).
    pub fn to_json(&self) -> Value {
        let mut sections = Map::new();
        for section in &self.sections {
            let mut cases = Map::new();
            for (id, outcome) in &section.cases {
                let entry = match outcome {
                    Outcome::Pass => json!({"status": "pass"}),
                    Outcome::Fail(reason) => json!({"status": "fail", "reason": reason}),
                };
                cases.insert(id.clone(), entry);
            }
            sections.insert(section.name.clone(), Value::Object(cases));
        }
        json!({
            "sdk": "babelqueue-rust",
            "version": env!("CARGO_PKG_VERSION"),
            "conformance_version": self.conformance_version,
            "generated_at": time::rfc3339_now(),
            "bindings": self.bindings,
            "sections": sections,
        })
    }

    /// A short human summary: one line per section, then the totals.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for s in &self.sections {
            let passed = s.cases.iter().filter(|(_, o)| *o == Outcome::Pass).count();
            let mark = if passed == s.cases.len() {
                "ok  "
            } else {
                "FAIL"
            };
            let scope = if s.in_scope {
                s.scope.clone()
            } else {
                format!("{} (not carried)", s.scope)
            };
            out.push_str(&format!(
                "{mark} {:<24} {:>3}/{:<3} {scope}\n",
                s.name,
                passed,
                s.cases.len()
            ));
        }
        out.push_str(&format!(
            "in scope: {}/{} pass; bindings carried: [{}]\n",
            self.passed_in_scope(),
            self.in_scope(),
            self.bindings.join(", ")
        ));
        out
    }

    /// The failing cases, as `section/case: reason` lines.
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.sections {
            for (id, outcome) in &s.cases {
                if let Outcome::Fail(reason) = outcome {
                    out.push(format!("{}[{}]: {reason}", s.name, id));
                }
            }
        }
        out
    }
}

/// The bindings whose runner modules are compiled into this runner (`core` excluded).
pub fn carried_bindings() -> Vec<String> {
    let set: BTreeSet<&str> = sections::registry()
        .iter()
        .map(|r| r.scope)
        .filter(|scope| *scope != "core")
        .collect();
    set.into_iter().map(String::from).collect()
}

/// Runs every section of the manifest.
pub fn run(manifest: &Manifest) -> Report {
    let registry = sections::registry();
    let bindings = carried_bindings();
    let mut reports = Vec::new();
    for (name, scope) in &manifest.sections {
        let in_scope = scope == "core" || bindings.iter().any(|b| b == scope);
        let runner = registry.iter().find(|r| r.section == name);
        let ctx = sections::Ctx {
            manifest,
            section: name,
            data: manifest.section(name),
        };
        let cases = manifest
            .cases(name)
            .into_iter()
            .map(|case| {
                let outcome = match runner {
                    None => Outcome::Fail(format!(
                        "not implemented: no runner for section `{name}` (scope `{scope}`) in this SDK yet"
                    )),
                    Some(runner) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        (runner.run)(&ctx, &case)
                    })) {
                        Ok(Ok(())) => Outcome::Pass,
                        Ok(Err(reason)) => Outcome::Fail(reason),
                        Err(_) => Outcome::Fail("the case panicked".to_string()),
                    },
                };
                (case.id, outcome)
            })
            .collect();
        reports.push(SectionReport {
            name: name.clone(),
            scope: scope.clone(),
            in_scope,
            cases,
        });
    }
    Report {
        conformance_version: manifest.conformance_version.clone(),
        bindings,
        sections: reports,
    }
}
