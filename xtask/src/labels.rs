//! A `cargo xtask tidy` check: the repository describes the product as it is, so no tracked text
//! file names a work session or an issue number ("session 27", "sessions 23 to 26", "Session
//! 31's run", "issue 17's targets", "issue #14"). A figure is dated instead, and the history of
//! the benchmark figures lives in `docs/benchmarks.md` and `CHANGELOG.md`.
//!
//! Kafka's session timeout written as a duration ("session 6 s") is not a label, nor is a
//! `Session` type's possessive ("the session's standard error"): neither has a number after it
//! that is not a duration.

use std::path::Path;
use std::process::Command;

/// The extensions of the tracked files checked.
const CHECKED: &[&str] = &["md", "rs", "sh", "toml"];

/// The one file not checked: it holds the matcher's test rows, half of which must match.
const THIS_FILE: &str = "xtask/src/labels.rs";

/// A unit after "session N" that makes it a duration (a session timeout), not a label.
const DURATION_UNITS: &[&str] = &[
    "s", "ms", "sec", "secs", "second", "seconds", "min", "mins", "minute", "minutes",
];

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether `rest`, the text after "session N", starts with a space and a duration unit.
fn duration_follows(rest: &str) -> bool {
    let trimmed = rest.trim_start_matches([' ', '\t']);
    if trimmed.len() == rest.len() {
        return false;
    }
    let unit: String = trimmed
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    DURATION_UNITS.contains(&unit.as_str())
}

/// The byte offsets in `text` where a label starts: "session" or "issue" as a word (case
/// insensitive, "sessions" and "issues" too), then spaces or a line break and an optional `#`,
/// or a `#` alone, then a number that is a word of its own; "session N" followed by a duration
/// unit is left alone.
pub(crate) fn labels(text: &str) -> Vec<usize> {
    let lower = text.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut found = Vec::new();
    for word in ["session", "issue"] {
        let mut from = 0;
        while let Some(at) = lower[from..].find(word).map(|i| i + from) {
            from = at + word.len();
            if at > 0 && is_word(bytes[at - 1]) {
                continue;
            }
            let mut i = at + word.len();
            if bytes.get(i) == Some(&b's') {
                i += 1;
            }
            let gap = i;
            while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
                i += 1;
            }
            if bytes.get(i) == Some(&b'#') {
                i += 1;
            }
            if i == gap {
                continue;
            }
            let digits = i;
            while bytes.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == digits || bytes.get(i).copied().is_some_and(is_word) {
                continue;
            }
            if word == "session" && duration_follows(&lower[i..]) {
                continue;
            }
            found.push(at);
        }
    }
    found.sort_unstable();
    found
}

/// Every label in the tracked md, rs, sh and toml files under `root` (symbolic links left to the
/// file they point to), as `file:line: ...`.
pub(crate) fn check(root: &Path) -> Result<Vec<String>, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .output()
        .map_err(|e| format!("git ls-files could not start: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git ls-files failed in {}: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let listing = String::from_utf8_lossy(&out.stdout);
    let mut problems = Vec::new();
    for path in listing.split('\0').filter(|p| !p.is_empty()) {
        let checked = Path::new(path)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| CHECKED.contains(&e));
        if !checked || path == THIS_FILE {
            continue;
        }
        // A symbolic link (crates/babelqueue/README.md) is checked as the file it points to; a
        // tracked file deleted in the work tree, or not UTF-8, has nothing to check.
        let full = root.join(path);
        if full
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&full) else {
            continue;
        };
        for at in labels(&text) {
            let line = text[..at].matches('\n').count() + 1;
            let shown: String = text[at..]
                .chars()
                .take_while(|&c| c != '\n')
                .take(24)
                .collect();
            problems.push(format!(
                "{path}:{line}: names a work session or an issue ({shown:?}): state the fact, dated \
                 where it is a measurement (benchmark history: docs/benchmarks.md)"
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::labels;

    #[test]
    fn session_and_issue_numbers_are_found_wherever_they_stand() {
        for row in [
            "measured in session 27",
            "Session 31's later run",
            "SESSION 4 ran it",
            "sessions 23 to 26",
            "(session 32,",
            "since session\n27 the codec",
            "issue 17's targets",
            "(issue 14: the retry)",
            "Issue 7",
            "issues 16 and 17",
            "issue #14",
            "issues #3 and #4",
            "see issue#9",
            "the target of issue 16.",
            "session 6 of the run",
            "before session 29's lent records",
        ] {
            assert_eq!(labels(row).len(), 1, "must match: {row:?}");
        }
        assert_eq!(labels("session 28 then issue 17").len(), 2);
    }

    #[test]
    fn durations_types_and_other_words_are_left_alone() {
        for row in [
            "(\"dynamic, session 6 s\", short.to_owned()),",
            "\"static, session 6 s, cooperative-sticky\",",
            "a session 45 ms long",
            "session 10 seconds",
            "session 6s",
            "session.timeout.ms=6000",
            "the session's standard error",
            "this session's run",
            "a Session type",
            "tissue 3",
            "issued 4 times",
            "subsession 2",
            "session27",
            "session_2",
            "issue 2nd",
            "sessions",
            "an open issue",
            "",
        ] {
            assert!(labels(row).is_empty(), "must not match: {row:?}");
        }
    }

    #[test]
    fn the_offset_is_where_the_word_starts() {
        let text = "line one\nmeasured in Session 27\n";
        assert_eq!(labels(text), vec![21]);
        assert_eq!(&text[21..28], "Session");
    }
}
