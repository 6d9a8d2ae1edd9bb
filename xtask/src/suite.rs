//! `cargo xtask suite`: where the official conformance suite comes from.
//!
//! The suite (cross-SDK conformance 1.8.0: `manifest.json`, `fixtures/`, `schema/`) ships in
//! the source package of the Python SDK `babelqueue==1.24.0` on PyPI, under
//! `tests/conformance/`. A checkout with a sibling `../shared/conformance` (or
//! `$BQ_SHARED_CONFORMANCE`) uses that folder; a clone without one gets the suite from the
//! registry: the pinned archive is downloaded with `curl` into `$BQ_CACHE/conformance` (default
//! `../cache`), its sha256 is checked against the pin below before anything is unpacked, and
//! the unpacked suite must declare the pinned suite version.
//!
//! ```text
//! cargo xtask suite        # prints the folder every conformance consumer will read
//! ```
//!
//! `cargo xtask conformance` and `cargo xtask ci` call [`official_dir`], and `ci` passes the
//! folder on to the tests and benchmarks as `BQ_SHARED_CONFORMANCE`.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

use crate::{root, status};

/// The Python SDK release whose source package carries the suite.
const PACKAGE: &str = "babelqueue-1.24.0";
/// Its sdist on PyPI (from `https://pypi.org/simple/babelqueue/`).
const URL: &str = "https://files.pythonhosted.org/packages/e5/70/6330915d47a18e9876d0eb79c316bc5b95c87590ba92ac2e64f33044e457/babelqueue-1.24.0.tar.gz";
/// The sdist's sha256, as PyPI lists it.
const SHA256: &str = "3918ef1e53ad08be2311f27840d1c949159a1d66701ebe899acabbd86a430da1";
/// The suite version that sdist carries (`tests/conformance/CONFORMANCE_VERSION`).
const SUITE_VERSION: &str = "1.8.0";

pub(crate) fn suite(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!("suite: unknown argument {arg:?}"));
    }
    let dir = official_dir()?;
    println!("{}", dir.display());
    Ok(())
}

/// The sibling checkout's suite: `$BQ_SHARED_CONFORMANCE`, else `../shared/conformance`.
fn shared_dir() -> PathBuf {
    std::env::var_os("BQ_SHARED_CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared/conformance"))
}

/// `$BQ_CACHE`, else `../cache` beside the checkout.
fn cache_dir() -> PathBuf {
    std::env::var_os("BQ_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../cache"))
}

/// The folder holding the official suite's `manifest.json`: the shared one when it exists,
/// else the one fetched from PyPI into the cache (fetched now when it is not there yet).
pub(crate) fn official_dir() -> Result<PathBuf, String> {
    let shared = shared_dir();
    if shared.join("manifest.json").is_file() {
        return Ok(shared);
    }
    println!(
        "suite: {} has no manifest.json; using the suite from the {PACKAGE} source package",
        shared.display()
    );
    fetch(&cache_dir().join("conformance"))
}

/// Makes sure `<cache>/<PACKAGE>/tests/conformance` holds the verified suite; returns it.
fn fetch(cache: &Path) -> Result<PathBuf, String> {
    let unpacked = cache.join(PACKAGE);
    let suite = unpacked.join("tests").join("conformance");
    // Written last, after the checks: its presence means the folder is complete and verified.
    let stamp = unpacked.join(".verified-sha256");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == SHA256) {
        return Ok(suite);
    }
    std::fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    let archive = cache.join(format!("{PACKAGE}.tar.gz"));
    if !archive.is_file() || sha256_of(&archive)? != SHA256 {
        let partial = cache.join(format!("{PACKAGE}.tar.gz.part"));
        println!("suite: downloading {URL}");
        status({
            let mut cmd = Command::new("curl");
            cmd.args(["--fail", "--silent", "--show-error", "--location"])
                .args(["--retry", "3", "--max-time", "300", "--output"])
                .arg(&partial)
                .arg(URL);
            cmd
        })?;
        let got = sha256_of(&partial)?;
        if got != SHA256 {
            let _ = std::fs::remove_file(&partial);
            return Err(format!(
                "suite: {URL} has sha256 {got}, the pin is {SHA256}; nothing was unpacked"
            ));
        }
        std::fs::rename(&partial, &archive).map_err(|e| format!("{}: {e}", archive.display()))?;
    }
    if unpacked.exists() {
        std::fs::remove_dir_all(&unpacked).map_err(|e| format!("{}: {e}", unpacked.display()))?;
    }
    status({
        let mut cmd = Command::new("tar");
        cmd.arg("-xzf").arg(&archive).arg("-C").arg(cache);
        cmd.arg(format!("{PACKAGE}/tests/conformance"))
            .arg(format!("{PACKAGE}/LICENSE"));
        cmd
    })?;
    let version = std::fs::read_to_string(suite.join("CONFORMANCE_VERSION"))
        .map_err(|e| format!("suite: {}: {e}", suite.display()))?;
    if version.trim() != SUITE_VERSION {
        return Err(format!(
            "suite: {PACKAGE} carries suite {:?}, the pin is {SUITE_VERSION}",
            version.trim()
        ));
    }
    for needed in ["manifest.json", "fixtures", "schema/results.schema.json"] {
        if !suite.join(needed).exists() {
            return Err(format!("suite: {} lacks {needed}", suite.display()));
        }
    }
    std::fs::write(&stamp, SHA256).map_err(|e| format!("{}: {e}", stamp.display()))?;
    println!(
        "suite: conformance {SUITE_VERSION} from {PACKAGE} (sha256 {SHA256}) is in {}",
        suite.display()
    );
    Ok(suite)
}

fn sha256_of(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_is_lowercase_hex_of_the_file() {
        let dir = std::env::temp_dir().join(format!("xtask-suite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("abc");
        std::fs::write(&file, b"abc").unwrap();
        assert_eq!(
            sha256_of(&file).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_verified_cache_is_used_without_a_download() {
        let dir = std::env::temp_dir().join(format!("xtask-suite-cache-{}", std::process::id()));
        let unpacked = dir.join(PACKAGE);
        std::fs::create_dir_all(unpacked.join("tests/conformance")).unwrap();
        std::fs::write(unpacked.join(".verified-sha256"), SHA256).unwrap();
        assert_eq!(fetch(&dir).unwrap(), unpacked.join("tests/conformance"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
