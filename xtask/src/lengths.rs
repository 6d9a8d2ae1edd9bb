//! A `cargo xtask tidy` check: files a reader can hold in their head. The production part of a
//! Rust source file (everything before its first top-level `#[cfg(test)]`) is at most
//! [`MAX_LINES`] lines, unless the file says in its header why it is longer, with a line
//! holding [`REASON`]. Test files (under a `tests/` or `benches/` directory, or a module named
//! `tests.rs`) are not production files.

use std::path::Path;

/// The most production lines a source file holds without a reason.
pub(crate) const MAX_LINES: usize = 800;

/// What a header line says to allow a longer file; the rest of the line is the reason.
pub(crate) const REASON: &str = "Why this file is long:";

/// How many of the first lines make the header.
const HEADER_LINES: usize = 40;

/// The production lines of `text`: those before the first top-level `#[cfg(test)]`.
pub(crate) fn production_lines(text: &str) -> usize {
    text.lines()
        .take_while(|line| !line.starts_with("#[cfg(test)]"))
        .count()
}

/// Whether the header of `text` gives a reason for its length (a non-empty one).
pub(crate) fn gives_reason(text: &str) -> bool {
    text.lines().take(HEADER_LINES).any(|line| {
        line.find(REASON)
            .is_some_and(|at| !line[at + REASON.len()..].trim().is_empty())
    })
}

/// Whether `path` (relative, `/`-separated) is a test file rather than a production one.
fn is_test_file(path: &str) -> bool {
    path.split('/')
        .any(|part| part == "tests" || part == "benches")
        || path.ends_with("/tests.rs")
}

/// Every tracked production `.rs` file longer than [`MAX_LINES`] without a reason.
pub(crate) fn check(root: &Path) -> Result<Vec<String>, String> {
    let listing = crate::labels::tracked_files(root, &["*.rs"])?;
    let mut problems = Vec::new();
    for path in listing.iter().map(String::as_str) {
        if is_test_file(path) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(path)) else {
            continue;
        };
        let lines = production_lines(&text);
        if lines > MAX_LINES && !gives_reason(&text) {
            problems.push(format!(
                "{path}: {lines} production lines (at most {MAX_LINES}): split it into modules, \
                 or say in its header why it is long (a line with `{REASON} …`)"
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_production_part_ends_at_the_first_test_module() {
        let text = "fn a() {}\n\nfn b() {}\n#[cfg(test)]\nmod tests {\n}\n";
        assert_eq!(production_lines(text), 3);
        assert_eq!(production_lines("fn a() {}\n"), 1);
        // An indented cfg(test) item inside the code is not the test module.
        assert_eq!(
            production_lines("mod m {\n    #[cfg(test)]\n    fn t() {}\n}\n"),
            4
        );
    }

    #[test]
    fn a_reason_is_a_header_line_that_says_something() {
        assert!(gives_reason(
            "//! The decoder.\n//!\n//! Why this file is long: one state machine.\n"
        ));
        assert!(!gives_reason("//! Why this file is long:   \n"));
        assert!(!gives_reason("//! The decoder.\n"));
        let late = format!("{}// Why this file is long: too late\n", "\n".repeat(50));
        assert!(!gives_reason(&late));
    }

    #[test]
    fn test_files_are_not_production_files() {
        assert!(is_test_file("crates/x/tests/it.rs"));
        assert!(is_test_file("crates/x/benches/b.rs"));
        assert!(is_test_file("crates/x/src/tests.rs"));
        assert!(!is_test_file("crates/x/src/transport.rs"));
        assert!(!is_test_file("crates/x/src/contests.rs"));
    }
}
