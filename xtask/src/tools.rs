//! The cargo subcommands the xtask runs (cargo-deny, cargo-fuzz, cargo-semver-checks), installed on demand into
//! `<cache>/tools` (beside the build cache, outside the checkout), so a CI machine that keeps
//! its cache installs each once, and one that does not pays for a quick build:
//!
//! * `cargo install --locked` with the exact version below (a reproducible tool);
//! * the release profile overridden to `opt-level = 1`, no LTO, 16 codegen units: cargo-deny's
//!   own profile (fat LTO, one codegen unit) took 12 minutes to build on the 2-core CI machine;
//!   this one takes about 5, and checking this workspace still takes seconds.
//!
//! [`cargo`] puts `<cache>/tools/bin` first on `PATH`, so `cargo deny` and
//! `cargo fuzz` find the installed binaries.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::{cargo, root, status};

/// Where the build, the corpora and the tools live: the parent of `CARGO_TARGET_DIR` when it is
/// set (`../cache` for `.ci/run`), else `target/` in the repository.
pub(crate) fn cache_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            // Cargo reads a relative CARGO_TARGET_DIR from the directory it was started in.
            let dir = std::env::current_dir().unwrap_or_default().join(dir);
            match dir.parent() {
                Some(parent) if parent != Path::new("") => parent.to_path_buf(),
                _ => dir,
            }
        }
        None => root().join("target"),
    }
}

/// `<cache>/tools/bin`, where the installed subcommands are.
pub(crate) fn bin_dir() -> PathBuf {
    cache_dir().join("tools").join("bin")
}

/// A cargo subcommand the xtask needs: `cargo <name>`, from the crate `krate` at `version`.
pub(crate) struct Tool {
    pub(crate) name: &'static str,
    pub(crate) krate: &'static str,
    pub(crate) version: &'static str,
}

pub(crate) const CARGO_DENY: Tool = Tool {
    name: "deny",
    krate: "cargo-deny",
    version: "0.20.2",
};

/// The API check of `cargo xtask release-check`.
pub(crate) const CARGO_SEMVER_CHECKS: Tool = Tool {
    name: "semver-checks",
    krate: "cargo-semver-checks",
    version: "0.51.0",
};

pub(crate) const CARGO_FUZZ: Tool = Tool {
    name: "fuzz",
    krate: "cargo-fuzz",
    version: "0.13.2",
};

/// Makes sure `cargo <tool>` runs, installing it into `<cache>/tools` when it does not.
pub(crate) fn ensure(tool: &Tool) -> Result<(), String> {
    let found = cargo()
        .args([tool.name, "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Ok(());
    }
    let root = cache_dir().join("tools");
    println!(
        "==> cargo {} is not installed: cargo install {} --version {} --locked --root {}",
        tool.name,
        tool.krate,
        tool.version,
        root.display()
    );
    let build = cache_dir().join("tools-build");
    let mut cmd = cargo();
    cmd.args([
        "install",
        tool.krate,
        "--version",
        tool.version,
        "--locked",
        "--root",
    ])
    .arg(&root)
    // A build directory of its own: the workspace's CARGO_TARGET_DIR holds debug builds
    // with other flags.
    .env("CARGO_TARGET_DIR", &build)
    .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1")
    .env("CARGO_PROFILE_RELEASE_LTO", "false")
    .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16");
    let installed = status(cmd);
    // The installed binary is all that is kept: the build directory (hundreds of MB) would
    // only ever serve a reinstall of the same version.
    let _ = std::fs::remove_dir_all(&build);
    installed
}
