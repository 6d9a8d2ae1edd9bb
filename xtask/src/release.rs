//! `cargo xtask release-check [--package NAME]...`: what must hold before the workspace is
//! published. Opt-in (it builds every published crate from its packaged sources); `cargo xtask
//! ci` runs the quick form, `cargo package --no-verify`.
//!
//! 1. The publishing check of `tidy` ([`publish`]) and the changelog's structure
//!    ([`changelog_problems`]).
//! 2. `cargo package` of every published crate, verify included: each `.crate` is unpacked and
//!    built on its own, so a file left out of the package or a dependency that only resolves
//!    inside the workspace fails here, not on crates.io.
//! 3. The API check: `cargo semver-checks` (installed on demand into `<cache>/tools`, as
//!    cargo-deny is) compares each published library crate with the last packaged version kept
//!    in `$BQ_CACHE/release/<crate>-<version>.crate`. The first run keeps the baseline and says
//!    so; later runs compare against it, so a breaking change to a crate (the contract crate
//!    `babelqueue-transport` above all) fails the command until the version says it is
//!    breaking. `--rebaseline` replaces the kept baselines with this tree's packages after the
//!    check (do it when a release is cut).
//!
//! `--package NAME` (repeatable) limits the packaging (with the workspace crates the named ones
//! depend on, which `cargo package` needs beside them) and the API check to those crates.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{cargo, publish, root, status, target_dir, tools};

/// `$BQ_CACHE/release`, else `<cache>/release` beside the build cache.
fn baseline_dir() -> PathBuf {
    std::env::var_os("BQ_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(tools::cache_dir)
        .join("release")
}

/// The changelog's structure: an `## [Unreleased]` section first, then one `## [X.Y.Z] -
/// YYYY-MM-DD` section per release, newest first.
pub(crate) fn changelog_problems(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).collect();
    if headings.first() != Some(&"## [Unreleased]") {
        out.push("CHANGELOG.md: the first section must be `## [Unreleased]`".to_owned());
    }
    let mut previous: Option<(Vec<u64>, &str)> = None;
    for h in headings.iter().skip(1) {
        let parsed = h
            .strip_prefix("## [")
            .and_then(|rest| rest.split_once("] - "))
            .and_then(|(version, date)| {
                let parts: Vec<u64> = version
                    .split('.')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .ok()?;
                let date_ok = date.len() == 10
                    && date.char_indices().all(|(i, c)| {
                        if i == 4 || i == 7 {
                            c == '-'
                        } else {
                            c.is_ascii_digit()
                        }
                    });
                (parts.len() == 3 && date_ok).then_some((parts, date))
            });
        match parsed {
            None => out.push(format!(
                "CHANGELOG.md: {h:?} is not a release heading (`## [X.Y.Z] - YYYY-MM-DD`)"
            )),
            Some((version, date)) => {
                if let Some((before, before_date)) = &previous
                    && (version >= *before || date > *before_date)
                {
                    out.push(format!(
                        "CHANGELOG.md: {h:?} is not older than the section above it"
                    ));
                }
                previous = Some((version, date));
            }
        }
    }
    out
}

/// The publishing problems of the workspace and its changelog.
pub(crate) fn problems() -> Result<Vec<String>, String> {
    let mut out = publish::check()?;
    let changelog = std::fs::read_to_string(root().join("CHANGELOG.md"))
        .map_err(|e| format!("CHANGELOG.md: {e}"))?;
    out.extend(changelog_problems(&changelog));
    Ok(out)
}

/// `--package` names plus the workspace crates they need, transitively: every kind of
/// dependency, since a versioned dev-dependency stays in the published manifest and `cargo
/// package` resolves it. Every published crate when none is named.
fn selection(metadata: &Value, named: &[String]) -> Result<Vec<String>, String> {
    let published = publish::published(metadata);
    if named.is_empty() {
        return Ok(published);
    }
    for n in named {
        if !published.contains(n) {
            return Err(format!(
                "release-check: {n} is not a published crate of the workspace"
            ));
        }
    }
    let deps = |name: &str| -> Vec<String> {
        metadata["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["name"] == name)
            .flat_map(|p| p["dependencies"].as_array().into_iter().flatten())
            .filter(|d| d["req"] != "*")
            .filter_map(|d| d["name"].as_str())
            .filter(|d| published.iter().any(|p| p == d))
            .map(str::to_owned)
            .collect()
    };
    let mut seen = BTreeSet::new();
    let mut stack: Vec<String> = named.to_vec();
    while let Some(n) = stack.pop() {
        if seen.insert(n.clone()) {
            stack.extend(deps(&n));
        }
    }
    // cargo metadata order, which lists dependencies first for the reader.
    Ok(published.into_iter().filter(|p| seen.contains(p)).collect())
}

/// Removes what an earlier verify left unpacked of `crates` at `version`. The verify build
/// reads the packages through a local registry (`<target>/package/tmp-registry`) that Cargo
/// unpacks into `$CARGO_HOME/registry/src/-<hash>/`, and it reuses a directory unpacked there
/// before: a second run with the same version would build a crate's dependents against the
/// first run's sources. Only `<crate>-<version>` directories of this workspace's crates, in
/// local-registry directories (their names start with `-`), are removed.
fn clear_unpacked(crates: &[String], version: &str) {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(src) = home.map(|h| h.join("registry").join("src")) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(&src) else {
        return;
    };
    for dir in entries.flatten() {
        if !dir.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for c in crates {
            let stale = dir.path().join(format!("{c}-{version}"));
            if stale.is_dir() {
                let _ = std::fs::remove_dir_all(&stale);
            }
        }
    }
}

/// Removes the build fingerprints of the workspace's crates (`<target>/debug/.fingerprint/
/// babelqueue-*`). Cargo takes a registry package for immutable and fingerprints it by its
/// version alone, so the verify build would reuse what an earlier verify compiled from the
/// earlier sources of the same version. The next ordinary build recompiles these crates once.
fn clear_fingerprints() {
    let dir = target_dir().join("debug").join(".fingerprint");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("babelqueue")
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// `cargo package` of `crates`, with or without the verify build.
pub(crate) fn package(crates: &[String], verify: bool) -> Result<(), String> {
    if verify {
        let version = publish::metadata()
            .ok()
            .and_then(|m| {
                m["packages"]
                    .as_array()
                    .and_then(|p| p.iter().find(|p| publish::is_published(p)))
                    .and_then(|p| p["version"].as_str().map(str::to_owned))
            })
            .unwrap_or_default();
        clear_unpacked(crates, &version);
        clear_fingerprints();
    }
    let mut cmd = cargo();
    cmd.arg("package");
    if !verify {
        cmd.arg("--no-verify");
    }
    // A dirty tree packages what is on disk: the check is about the tree under test.
    cmd.arg("--allow-dirty");
    for c in crates {
        cmd.args(["--package", c]);
    }
    status(cmd)
}

fn has_lib(metadata: &Value, name: &str) -> bool {
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["name"] == name)
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .any(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "lib"))
        })
}

/// Unpacks `<crate>-<version>.crate` into `into/<crate>-<version>`, each workspace crate it
/// depends on pointed at its unpacked sibling (they are not on a registry).
fn unpack(archive: &Path, into: &Path, siblings: &[String]) -> Result<PathBuf, String> {
    let mut tar = std::process::Command::new("tar");
    tar.arg("-xzf").arg(archive).arg("-C").arg(into);
    status(tar)?;
    let stem = archive
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| format!("{}: not a .crate file", archive.display()))?;
    let dir = into.join(stem);
    let manifest = dir.join("Cargo.toml");
    let text =
        std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let mut out = String::new();
    // Dev-dependencies are left out: nothing of the API depends on them, and a workspace crate
    // among them may have no baseline of its own.
    let mut in_dev = false;
    for line in text.lines() {
        let table = line
            .trim()
            .strip_prefix('[')
            .and_then(|l| l.strip_suffix(']'));
        if let Some(table) = table {
            in_dev = table.contains("dev-dependencies");
        }
        if in_dev {
            continue;
        }
        out.push_str(line);
        out.push('\n');
        // `[dependencies.NAME]`, `[build-dependencies.NAME]`, `[target.'…'.dependencies.NAME]`.
        if let Some(name) = table
            .and_then(|t| t.rsplit_once("dependencies."))
            .map(|(_, n)| n)
            && let Some(sibling) = siblings.iter().rev().find(|s| {
                s.strip_prefix(name)
                    .and_then(|v| v.strip_prefix('-'))
                    .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            })
        {
            out.push_str(&format!("path = \"../{sibling}\"\n"));
        }
    }
    // Its own workspace root, whatever directory the cache sits in.
    out.push_str("\n[workspace]\n");
    std::fs::write(&manifest, out).map_err(|e| format!("{}: {e}", manifest.display()))?;
    Ok(dir)
}

/// The API check of `checked` against the kept baselines. A packaged library crate without a
/// baseline (`packaged`: the crates `cargo package` just wrote) has this package kept as its
/// baseline, so the crates a checked one depends on have theirs too.
fn semver(
    metadata: &Value,
    packaged_crates: &[String],
    checked: &[String],
    rebaseline: bool,
) -> Result<(), String> {
    let kept = baseline_dir();
    std::fs::create_dir_all(&kept).map_err(|e| format!("{}: {e}", kept.display()))?;
    let packaged = target_dir().join("package");
    let version = |name: &str| {
        metadata["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .and_then(|p| p["version"].as_str())
            .unwrap_or("")
            .to_owned()
    };
    // The newest kept archive of each crate.
    let entries: Vec<String> = std::fs::read_dir(&kept)
        .map_err(|e| format!("{}: {e}", kept.display()))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.ends_with(".crate"))
        .collect();
    let newest = |name: &str| -> Option<String> {
        entries
            .iter()
            .filter_map(|e| {
                let v = e
                    .strip_prefix(name)?
                    .strip_prefix('-')?
                    .strip_suffix(".crate")?;
                let parts: Vec<u64> = v
                    .split('.')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .ok()?;
                Some((parts, e.clone()))
            })
            .max()
            .map(|(_, e)| e)
    };
    let mut compare = Vec::new();
    let mut keep = Vec::new();
    for name in packaged_crates.iter().filter(|c| has_lib(metadata, c)) {
        match newest(name) {
            Some(archive) if checked.contains(name) => compare.push((name.clone(), archive)),
            Some(_) => {}
            None => keep.push(name.clone()),
        }
    }
    if rebaseline {
        keep = packaged_crates
            .iter()
            .filter(|c| has_lib(metadata, c))
            .cloned()
            .collect();
    }
    let store = |names: &[String]| -> Result<(), String> {
        for name in names {
            let file = format!("{name}-{}.crate", version(name));
            std::fs::copy(packaged.join(&file), kept.join(&file))
                .map_err(|e| format!("keeping the baseline {file}: {e}"))?;
            println!(
                "==> {name}: baseline kept as {}",
                kept.join(&file).display()
            );
        }
        Ok(())
    };
    if compare.is_empty() || !rebaseline {
        // Missing baselines first (the comparisons below do not read them).
        store(&keep)?;
    }
    if compare.is_empty() {
        return Ok(());
    }
    tools::ensure(&tools::CARGO_SEMVER_CHECKS)?;
    // Every kept archive unpacked afresh, so baselines depend on baselines.
    let unpacked = kept.join("unpacked");
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked).map_err(|e| format!("{}: {e}", unpacked.display()))?;
    let siblings: Vec<String> = entries
        .iter()
        .map(|e| e.trim_end_matches(".crate").to_owned())
        .collect();
    for e in &entries {
        unpack(&kept.join(e), &unpacked, &siblings)?;
    }
    let mut broken = Vec::new();
    for (name, archive) in compare {
        let baseline = unpacked.join(archive.trim_end_matches(".crate"));
        println!("==> cargo semver-checks: {name} against {archive}");
        let mut cmd = cargo();
        cmd.args([
            "semver-checks",
            "check-release",
            "--package",
            &name,
            "--baseline-root",
        ])
        .arg(&baseline);
        // Its report (above) says what changed; the command line adds nothing to it.
        if status(cmd).is_err() {
            broken.push(name);
        }
    }
    if broken.is_empty() {
        if rebaseline {
            store(&keep)?;
        }
        Ok(())
    } else {
        Err(format!(
            "cargo semver-checks found a change the version does not allow in {} (its report is \
             above): raise the version, or keep the API",
            broken.join(", ")
        ))
    }
}

pub(crate) fn release_check(args: &[String]) -> Result<(), String> {
    let mut named = Vec::new();
    let mut rebaseline = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--package" | "-p" => named.push(it.next().cloned().ok_or("--package needs a name")?),
            "--rebaseline" => rebaseline = true,
            other => return Err(format!("release-check: unknown argument {other:?}")),
        }
    }
    println!("==> publishing metadata and changelog");
    let problems = problems()?;
    if !problems.is_empty() {
        return Err(problems.join("\n"));
    }
    let metadata = publish::metadata()?;
    let crates = selection(&metadata, &named)?;
    println!("==> cargo package (verify included): {}", crates.join(" "));
    package(&crates, true)?;
    let checked: Vec<String> = if named.is_empty() {
        crates.clone()
    } else {
        named
    };
    semver(&metadata, &crates, &checked, rebaseline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_changelog_opens_with_unreleased_then_dated_releases_newest_first() {
        let good = "# Changelog\n\n## [Unreleased]\n\n### Added\n\n## [0.2.0] - 2027-01-10\n\n## [0.1.0] - 2026-12-20\n";
        assert!(changelog_problems(good).is_empty());
        assert_eq!(
            changelog_problems("# Changelog\n\n## [0.1.0] - 2026-12-20\n"),
            ["CHANGELOG.md: the first section must be `## [Unreleased]`"]
        );
        assert_eq!(
            changelog_problems("## [Unreleased]\n## 0.1.0\n"),
            ["CHANGELOG.md: \"## 0.1.0\" is not a release heading (`## [X.Y.Z] - YYYY-MM-DD`)"]
        );
        assert_eq!(
            changelog_problems("## [Unreleased]\n## [0.1.0] - 20 Dec 2026\n").len(),
            1
        );
        assert_eq!(
            changelog_problems(
                "## [Unreleased]\n## [0.1.0] - 2026-12-20\n## [0.2.0] - 2027-01-10\n"
            ),
            ["CHANGELOG.md: \"## [0.2.0] - 2027-01-10\" is not older than the section above it"]
        );
    }
}
