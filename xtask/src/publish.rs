//! The publishing check (part of `cargo xtask tidy` and `cargo xtask release-check`): every crate
//! the workspace publishes carries what crates.io and docs.rs show, the crates move together on
//! one version, and the dependency graph can be packaged.
//!
//! A crate is published unless its manifest says `publish = false`. For each one:
//!
//! * `description`, `repository`, `homepage`, `license`, `readme` (the file exists),
//!   `rust-version` are set;
//! * 1 to 5 `keywords`, each one crates.io accepts (at most 20 ASCII letters, digits, `-` or
//!   `_`, starting with a letter);
//! * 1 to 5 `categories`, each a slug crates.io knows ([`CATEGORIES`]);
//! * `[package.metadata.docs.rs]` says which features docs.rs builds (`all-features` or
//!   `features`);
//! * its version is the one every other published crate has (the workspace's);
//! * each dependency on another workspace crate asks for exactly that version (`^X.Y.Z`),
//!   except a path-only dev-dependency, which Cargo drops from the published manifest;
//! * it depends (normal or build) on no crate that is not published;
//! * a dev-dependency on a workspace crate that depends back on it is path-only: `cargo
//!   package` cannot order a versioned dependency cycle.
//!
//! Everything is read from `cargo metadata`, so the check tests against a JSON value.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::cargo;

/// The category slugs crates.io accepts (its `src/boot/categories.toml`).
pub(crate) const CATEGORIES: &[&str] = &[
    "accessibility",
    "aerospace",
    "aerospace::drones",
    "aerospace::protocols",
    "aerospace::simulation",
    "aerospace::space-protocols",
    "aerospace::unmanned-aerial-vehicles",
    "algorithms",
    "api-bindings",
    "asynchronous",
    "authentication",
    "caching",
    "command-line-interface",
    "command-line-utilities",
    "compilers",
    "compression",
    "computer-vision",
    "concurrency",
    "config",
    "cryptography",
    "cryptography::cryptocurrencies",
    "data-structures",
    "database",
    "database-implementations",
    "date-and-time",
    "development-tools",
    "development-tools::build-utils",
    "development-tools::cargo-plugins",
    "development-tools::debugging",
    "development-tools::ffi",
    "development-tools::procedural-macro-helpers",
    "development-tools::profiling",
    "development-tools::testing",
    "email",
    "embedded",
    "emulators",
    "encoding",
    "external-ffi-bindings",
    "filesystem",
    "finance",
    "game-development",
    "game-engines",
    "games",
    "graphics",
    "gui",
    "hardware-support",
    "internationalization",
    "localization",
    "mathematics",
    "memory-management",
    "multimedia",
    "multimedia::audio",
    "multimedia::encoding",
    "multimedia::images",
    "multimedia::video",
    "network-programming",
    "no-std",
    "no-std::no-alloc",
    "os",
    "os::android-apis",
    "os::freebsd-apis",
    "os::linux-apis",
    "os::macos-apis",
    "os::unix-apis",
    "os::windows-apis",
    "parser-implementations",
    "parsing",
    "rendering",
    "rendering::data-formats",
    "rendering::engine",
    "rendering::graphics-api",
    "rust-patterns",
    "science",
    "science::bioinformatics",
    "science::geo",
    "science::neuroscience",
    "science::robotics",
    "simulation",
    "template-engine",
    "text-editors",
    "text-processing",
    "value-formatting",
    "virtualization",
    "visualization",
    "wasm",
    "web-programming",
    "web-programming::http-client",
    "web-programming::http-server",
    "web-programming::websocket",
];

/// `cargo metadata` of the workspace (no dependencies resolved: the manifests are enough).
pub(crate) fn metadata() -> Result<Value, String> {
    let output = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .map_err(|e| format!("cargo metadata could not start: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("cargo metadata printed no JSON: {e}"))
}

/// Whether a package of `cargo metadata` is published (`publish` is null, or names registries).
pub(crate) fn is_published(package: &Value) -> bool {
    package["publish"]
        .as_array()
        .is_none_or(|registries| !registries.is_empty())
}

/// The names of the published workspace crates, in `cargo metadata` order.
pub(crate) fn published(metadata: &Value) -> Vec<String> {
    members(metadata)
        .into_iter()
        .filter(|p| is_published(p))
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect()
}

fn members(metadata: &Value) -> Vec<&Value> {
    let ids: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["id"].as_str().is_some_and(|id| ids.contains(id)))
        .collect()
}

fn keyword_ok(k: &str) -> bool {
    let mut chars = k.chars();
    k.len() <= 20
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn text(p: &Value, field: &str) -> bool {
    p[field].as_str().is_some_and(|s| !s.trim().is_empty())
}

/// Every problem of the published crates of `metadata`, one line each. `readme_exists` says
/// whether a package's readme file is there (a closure, so tests need no files).
pub(crate) fn problems(metadata: &Value, readme_exists: &dyn Fn(&Value) -> bool) -> Vec<String> {
    let members = members(metadata);
    let by_name: BTreeMap<&str, &Value> = members
        .iter()
        .filter_map(|p| Some((p["name"].as_str()?, *p)))
        .collect();
    // Normal and build dependencies among workspace crates, for the cycle check.
    let built: BTreeMap<&str, Vec<&str>> = by_name
        .iter()
        .map(|(name, p)| {
            let deps = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].is_null() || d["kind"] == "build")
                .filter_map(|d| d["name"].as_str())
                .filter(|d| by_name.contains_key(d))
                .collect();
            (*name, deps)
        })
        .collect();
    let reaches = |from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if seen.insert(n) {
                stack.extend(built.get(n).into_iter().flatten().copied());
            }
        }
        false
    };
    let mut out = Vec::new();
    let published: Vec<&Value> = members
        .iter()
        .copied()
        .filter(|p| is_published(p))
        .collect();
    let version = published
        .first()
        .and_then(|p| p["version"].as_str())
        .unwrap_or("");
    for p in &published {
        let name = p["name"].as_str().unwrap_or("?");
        let mut say = |what: String| out.push(format!("{name}: {what}"));
        for field in [
            "description",
            "repository",
            "homepage",
            "license",
            "rust_version",
        ] {
            if !text(p, field) {
                say(format!("`{}` is not set", field.replace('_', "-")));
            }
        }
        if !text(p, "readme") {
            say("`readme` is not set".into());
        } else if !readme_exists(p) {
            say(format!("its readme {} does not exist", p["readme"]));
        }
        let keywords: Vec<&str> = p["keywords"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if keywords.is_empty() || keywords.len() > 5 {
            say(format!(
                "{} keywords; crates.io takes 1 to 5",
                keywords.len()
            ));
        }
        for k in keywords.iter().filter(|k| !keyword_ok(k)) {
            say(format!("keyword {k:?} is not one crates.io accepts"));
        }
        let categories: Vec<&str> = p["categories"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if categories.is_empty() || categories.len() > 5 {
            say(format!(
                "{} categories; crates.io takes 1 to 5",
                categories.len()
            ));
        }
        for c in categories.iter().filter(|c| !CATEGORIES.contains(c)) {
            say(format!("category {c:?} is not a crates.io slug"));
        }
        let docs_rs = &p["metadata"]["docs"]["rs"];
        if docs_rs["all-features"].is_null() && docs_rs["features"].is_null() {
            say("`[package.metadata.docs.rs]` does not say which features docs.rs builds".into());
        }
        let own = p["version"].as_str().unwrap_or("");
        if own != version {
            say(format!(
                "version {own}, but the published crates are at {version}: they move together"
            ));
        }
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let Some(dep) = d["name"].as_str().filter(|d| *d != name) else {
                continue;
            };
            let Some(target) = by_name.get(dep) else {
                continue;
            };
            let dev = d["kind"] == "dev";
            let req = d["req"].as_str().unwrap_or("");
            let path_only = req == "*";
            if !dev && !is_published(target) {
                say(format!("depends on {dep}, which is not published"));
            }
            if dev && path_only {
                continue;
            }
            if dev && reaches(dep, name) {
                say(format!(
                    "dev-depends on {dep} with a version, and {dep} depends on {name}: make it \
                     path-only (`{{ path = \"../{dep}\" }}`, Cargo drops it on publish)"
                ));
            } else if req != format!("^{version}") {
                say(format!(
                    "asks for {dep} {req:?}; the workspace's crates are at {version} (`^{version}`)"
                ));
            }
        }
    }
    out
}

/// The check on this workspace: `metadata` from `cargo metadata`, readmes on disk.
pub(crate) fn check() -> Result<Vec<String>, String> {
    let metadata = metadata()?;
    let exists = |p: &Value| {
        let manifest = Path::new(p["manifest_path"].as_str().unwrap_or(""));
        manifest
            .parent()
            .zip(p["readme"].as_str())
            .is_some_and(|(dir, readme)| dir.join(readme).is_file())
    };
    Ok(problems(&metadata, &exists))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A published crate with everything set, depending on `deps`.
    fn good(name: &str, deps: Value) -> Value {
        let mut p = json!({
            "id": name, "name": name, "version": "0.2.0", "publish": null,
            "description": "d", "repository": "https://example.com/r", "homepage": "https://example.com",
            "license": "MIT OR Apache-2.0", "readme": "README.md", "rust_version": "1.89",
            "keywords": ["queue", "babelqueue"], "categories": ["asynchronous"],
            "metadata": {"docs": {"rs": {"all-features": true}}},
            "manifest_path": format!("/ws/{name}/Cargo.toml"),
        });
        p["dependencies"] = deps;
        p
    }

    fn dep(name: &str, req: &str, kind: Option<&str>) -> Value {
        json!({"name": name, "req": req, "kind": kind})
    }

    fn workspace(packages: &[Value]) -> Value {
        let ids: Vec<Value> = packages.iter().map(|p| p["id"].clone()).collect();
        json!({"packages": packages, "workspace_members": ids})
    }

    fn run(ws: &Value) -> Vec<String> {
        problems(ws, &|_| true)
    }

    #[test]
    fn a_complete_workspace_has_no_problem() {
        let ws = workspace(&[
            good("core", json!([dep("kit", "*", Some("dev"))])),
            good("kit", json!([dep("core", "^0.2.0", None)])),
        ]);
        assert_eq!(run(&ws), Vec::<String>::new());
    }

    #[test]
    fn each_missing_field_is_named() {
        for (field, expected) in [
            ("description", "core: `description` is not set"),
            ("repository", "core: `repository` is not set"),
            ("homepage", "core: `homepage` is not set"),
            ("license", "core: `license` is not set"),
            ("rust_version", "core: `rust-version` is not set"),
            ("readme", "core: `readme` is not set"),
        ] {
            let mut p = good("core", json!([]));
            p[field] = Value::Null;
            assert_eq!(run(&workspace(&[p])), [expected], "{field}");
        }
        let mut p = good("core", json!([]));
        p["metadata"] = Value::Null;
        assert_eq!(
            run(&workspace(&[p])),
            ["core: `[package.metadata.docs.rs]` does not say which features docs.rs builds"]
        );
        let ws = workspace(&[good("core", json!([]))]);
        assert_eq!(
            problems(&ws, &|_| false),
            ["core: its readme \"README.md\" does not exist"]
        );
    }

    #[test]
    fn keywords_and_categories_follow_crates_io() {
        let mut p = good("core", json!([]));
        p["keywords"] = json!(["a", "b", "c", "d", "e", "f"]);
        assert_eq!(
            run(&workspace(&[p])),
            ["core: 6 keywords; crates.io takes 1 to 5"]
        );
        let mut p = good("core", json!([]));
        p["keywords"] = json!([]);
        assert_eq!(
            run(&workspace(&[p])),
            ["core: 0 keywords; crates.io takes 1 to 5"]
        );
        let mut p = good("core", json!([]));
        p["keywords"] = json!(["job queue"]);
        assert_eq!(
            run(&workspace(&[p])),
            ["core: keyword \"job queue\" is not one crates.io accepts"]
        );
        let mut p = good("core", json!([]));
        p["categories"] = json!(["asynchronous", "messaging"]);
        assert_eq!(
            run(&workspace(&[p])),
            ["core: category \"messaging\" is not a crates.io slug"]
        );
        let mut p = good("core", json!([]));
        p["categories"] = json!([]);
        assert_eq!(
            run(&workspace(&[p])),
            ["core: 0 categories; crates.io takes 1 to 5"]
        );
    }

    #[test]
    fn a_versioned_dev_dependency_cycle_is_refused() {
        let ws = workspace(&[
            good("core", json!([dep("kit", "^0.2.0", Some("dev"))])),
            good("kit", json!([dep("core", "^0.2.0", None)])),
        ]);
        let got = run(&ws);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("core: dev-depends on kit with a version, and kit depends on core")
        );
        // Through a third crate too.
        let ws = workspace(&[
            good("core", json!([dep("kit", "^0.2.0", Some("dev"))])),
            good("kit", json!([dep("mid", "^0.2.0", None)])),
            good("mid", json!([dep("core", "^0.2.0", None)])),
        ]);
        assert_eq!(run(&ws).len(), 1);
    }

    #[test]
    fn versions_move_together() {
        let mut late = good("kit", json!([dep("core", "^0.1.0", None)]));
        late["version"] = json!("0.1.0");
        let ws = workspace(&[good("core", json!([])), late]);
        assert_eq!(
            run(&ws),
            [
                "kit: version 0.1.0, but the published crates are at 0.2.0: they move together",
                "kit: asks for core \"^0.1.0\"; the workspace's crates are at 0.2.0 (`^0.2.0`)",
            ]
        );
    }

    #[test]
    fn unpublished_crates_are_not_checked_and_cannot_be_depended_on() {
        let mut tool = good("tool", json!([]));
        tool["publish"] = json!([]);
        tool["keywords"] = json!([]);
        let ws = workspace(&[
            good("core", json!([dep("tool", "^0.2.0", None)])),
            tool.clone(),
        ]);
        assert_eq!(run(&ws), ["core: depends on tool, which is not published"]);
        let ws = workspace(&[good("core", json!([dep("tool", "*", Some("dev"))])), tool]);
        assert!(run(&ws).is_empty(), "a path-only dev-dependency is fine");
        assert_eq!(published(&ws), ["core"]);
    }
}
