//! A `cargo xtask tidy` check: the repository describes the product as it is, so no tracked text
//! file names a work period or an issue number: a work session ("session 27", "sessions 23 to
//! 26", "Session 31's run"), an issue ("issue 17's targets", "issue #14"), a wave of work ("wave
//! 2", "the second wave", "2nd wave"), a numbered stop or round of work ("stop 39", "round 3") or
//! a numbered defect of a review ("defect 6"). A figure is dated instead, a fix says what it
//! fixed, and the history of the benchmark figures lives in `docs/benchmarks.md` and
//! `CHANGELOG.md`.
//!
//! Kafka's session timeout written as a duration ("session 6 s") is not a label, nor is a
//! `Session` type's possessive ("the session's standard error"): neither has a number after it
//! that is not a duration. "stop 5 s" and "round 2 ms" are durations too; "round 3 of 7" counts
//! measurement rounds; "round trip", "a retry round", "phase 1" of a chaos scenario and "the
//! second round" of a benchmark carry no label.

use std::path::Path;
use std::process::Command;

/// The extensions of the tracked files checked.
const CHECKED: &[&str] = &["md", "rs", "sh", "toml"];

/// The one file not checked: it holds the matcher's test rows, half of which must match.
const THIS_FILE: &str = "xtask/src/labels.rs";

/// A unit after "session N" (a session timeout), "stop N" or "round N" that makes it a
/// duration, not a label.
const DURATION_UNITS: &[&str] = &[
    "s", "ms", "sec", "secs", "second", "seconds", "min", "mins", "minute", "minutes",
];

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether `rest`, the text after "session N" (or "stop N", "round N"), starts with a space and a duration unit.
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

/// The words a number after which makes a label, and whether a duration unit after the number
/// (and, for "round", " of " and a count) makes it something else.
const NUMBERED: &[(&str, bool)] = &[
    ("session", true),
    ("issue", false),
    ("wave", false),
    ("defect", false),
    ("stop", true),
    ("round", true),
];

/// The ordinals that make "`<ordinal>` wave" a label ("the second wave"), besides "2nd", "3rd", ….
const ORDINALS: &[&str] = &[
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
    "eleventh", "twelfth",
];

/// Whether `rest`, the text after "round N", counts rounds of a measurement: " of " and a number.
fn count_follows(rest: &str) -> bool {
    rest.strip_prefix(" of ")
        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
}

/// Whether the word before byte `end` of `lower` (spaces skipped) is an ordinal: one of
/// [`ORDINALS`], or digits and "st", "nd", "rd" or "th".
fn ordinal_before(lower: &str, end: usize) -> bool {
    let before = lower[..end].trim_end_matches([' ', '\t', '\n']);
    if before.len() == end {
        return false;
    }
    let start = before
        .rfind(|c: char| !c.is_ascii_alphanumeric())
        .map_or(0, |i| i + 1);
    let word = &before[start..];
    if ORDINALS.contains(&word) {
        return true;
    }
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && ["st", "nd", "rd", "th"].contains(&suffix)
}

/// The byte offsets in `text` where a label starts: one of the [`NUMBERED`] words as a word
/// (case insensitive, plurals too but "rounds"), then spaces or a line break and an optional `#`, or a `#`
/// alone, then a number that is a word of its own, unless a duration (or for "round", a count)
/// follows; and "wave" or "waves" after an ordinal ("second wave", "3rd wave"), where the
/// offset is the ordinal's.
pub(crate) fn labels(text: &str) -> Vec<usize> {
    let lower = text.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut found = Vec::new();
    for &(word, durations) in NUMBERED {
        let mut from = 0;
        while let Some(at) = lower[from..].find(word).map(|i| i + from) {
            from = at + word.len();
            if at > 0 && is_word(bytes[at - 1]) {
                continue;
            }
            let mut i = at + word.len();
            if bytes.get(i) == Some(&b's') {
                // "rounds 266 351" is a figure of measurement rounds, not a label.
                if word == "round" {
                    continue;
                }
                i += 1;
            }
            if word == "wave" && bytes.get(i).copied().is_none_or(|b| !is_word(b)) {
                let before = lower[..at].trim_end_matches([' ', '\t', '\n']);
                if ordinal_before(&lower, at) {
                    let start = before
                        .rfind(|c: char| !c.is_ascii_alphanumeric())
                        .map_or(0, |i| i + 1);
                    found.push(start);
                    continue;
                }
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
            if durations && duration_follows(&lower[i..]) {
                continue;
            }
            if word == "round" && count_follows(&lower[i..]) {
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
    let listing = tracked_files(root, &[])?;
    let mut problems = Vec::new();
    for path in listing.iter().map(String::as_str) {
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
                "{path}:{line}: names a work period or an issue ({shown:?}): state the fact, dated \
                 where it is a measurement (benchmark history: docs/benchmarks.md)"
            ));
        }
    }
    Ok(problems)
}

/// The files git tracks under `root` (relative, `/`-separated), limited to `pathspecs` when
/// there are any.
pub(crate) fn tracked_files(root: &Path, pathspecs: &[&str]) -> Result<Vec<String>, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z", "--"])
        .args(pathspecs)
        .output()
        .map_err(|e| format!("git ls-files could not start: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git ls-files failed in {}: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect())
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
    fn waves_stops_rounds_and_defects_of_work_are_found() {
        for row in [
            "fixed in wave 2",
            "Wave 3's regression tests",
            "waves 2 and 3",
            "wave #4",
            "defect 1 of the run",
            "(defect 6)",
            "the adversarial run's defect 3:",
            "defects 4 and 5",
            "since stop 39",
            "Stop 12's figures",
            "measured in round 3",
            "(round 2)",
            "the second wave",
            "the regression tests of the Third Wave:",
            "a 2nd wave",
            "the first\nwave of fixes",
            "(twelfth waves)",
        ] {
            assert_eq!(labels(row).len(), 1, "must match: {row:?}");
        }
        assert_eq!(labels("defect 1 of the second wave").len(), 2);
        let text = "x the second wave";
        assert_eq!(labels(text), vec![6]);
    }

    #[test]
    fn trips_phases_durations_and_measurement_rounds_are_left_alone() {
        for row in [
            "a round trip byte for byte",
            "round-trips",
            "the retry round",
            "round 3 of 7",
            "the best of seven rounds",
            "run 3's rounds",
            "best rounds 266 351 -> 305 983 msg/s",
            "the second round of each",
            "a round 45 ms long",
            "stop 5 s after the kill",
            "stop 2 seconds later",
            "nonstop 3",
            "stops",
            "stop_2",
            "phase 1 (DLQ broken)",
            "Phase 2: the DLQ works again",
            "a sine wave",
            "microwave 2",
            "wavelength 3",
            "the wave of retries",
            "a second waveform",
            "defective 2",
            "no defect",
            "round2",
        ] {
            assert!(labels(row).is_empty(), "must not match: {row:?}");
        }
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
