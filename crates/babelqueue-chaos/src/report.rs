//! The result table: one row per broker and scenario, printed fixed-width and written as JSON.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// How a row ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Ok,
    Fail,
    NotApplicable,
}

/// One broker × scenario.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) broker: String,
    pub(crate) scenario: String,
    pub(crate) messages: u64,
    /// Worker SIGKILLs or broker restarts.
    pub(crate) kills: u32,
    pub(crate) lost: u64,
    pub(crate) duplicated: u64,
    /// Left on the broker after the drain.
    pub(crate) stranded: u64,
    /// A handler or a dead-letter record saw bytes that differ from what was published.
    pub(crate) corrupted: u64,
    /// Worker processes that exited abnormally without being killed by the harness.
    pub(crate) crashes: u32,
    pub(crate) elapsed: Duration,
    /// Checks that failed beyond the counters (a wedged worker, head-of-line blocking, a record
    /// count that is not exactly one …).
    pub(crate) failures: Vec<String>,
    /// What happened, for the reader (how the DLQ was broken, join times, refused bodies …).
    pub(crate) notes: Vec<String>,
    /// Why the row does not apply to this broker (then nothing else counts).
    pub(crate) not_applicable: Option<String>,
    /// HA rows: from the fault to the first message handled after it (`None`: not measured, or
    /// no message was handled).
    pub(crate) recovery: Option<Duration>,
    /// HA rows: the connections the worker opened over the row (`None`: not counted).
    pub(crate) connects: Option<u64>,
}

impl Row {
    pub(crate) fn new(broker: &str, scenario: &str) -> Row {
        Row {
            broker: broker.to_owned(),
            scenario: scenario.to_owned(),
            messages: 0,
            kills: 0,
            lost: 0,
            duplicated: 0,
            stranded: 0,
            corrupted: 0,
            crashes: 0,
            elapsed: Duration::ZERO,
            failures: Vec::new(),
            notes: Vec::new(),
            not_applicable: None,
            recovery: None,
            connects: None,
        }
    }

    pub(crate) fn status(&self) -> Status {
        if self.not_applicable.is_some() {
            Status::NotApplicable
        } else if self.lost > 0
            || self.stranded > 0
            || self.corrupted > 0
            || self.crashes > 0
            || !self.failures.is_empty()
        {
            Status::Fail
        } else {
            Status::Ok
        }
    }

    pub(crate) fn fail(&mut self, why: impl Into<String>) {
        self.failures.push(why.into());
    }

    pub(crate) fn note(&mut self, what: impl Into<String>) {
        self.notes.push(what.into());
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut value = json!({
            "broker": self.broker,
            "scenario": self.scenario,
            "result": match self.status() {
                Status::Ok => "ok",
                Status::Fail => "FAIL",
                Status::NotApplicable => "n/a",
            },
            "messages": self.messages,
            "kills_or_restarts": self.kills,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "stranded": self.stranded,
            "corrupted": self.corrupted,
            "worker_crashes": self.crashes,
            "seconds": (self.elapsed.as_secs_f64() * 10.0).round() / 10.0,
            "failures": self.failures,
            "notes": self.notes,
            "not_applicable": self.not_applicable,
        });
        if let Value::Object(map) = &mut value {
            if let Some(recovery) = self.recovery {
                map.insert(
                    "recovery_seconds".into(),
                    json!((recovery.as_secs_f64() * 100.0).round() / 100.0),
                );
            }
            if let Some(connects) = self.connects {
                map.insert("connects".into(), json!(connects));
            }
        }
        value
    }
}

/// `12.3s`, `4m05s`.
pub(crate) fn duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 100.0 {
        format!("{secs:.1}s")
    } else {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

const HEADER: [&str; 11] = [
    "broker", "scenario", "messages", "kills", "lost", "dup", "stranded", "corrupt", "crashes",
    "time", "result",
];
const WIDTH: [usize; 11] = [14, 15, 9, 6, 5, 5, 9, 8, 8, 8, 6];

/// The fixed-width table.
pub(crate) fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let line = |cells: [String; 11]| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i < 2 {
                let _ = write!(text, "{cell:<w$}", w = WIDTH[i]);
            } else {
                let _ = write!(text, "{cell:>w$}", w = WIDTH[i]);
            }
            if i + 1 < cells.len() {
                text.push(' ');
            }
        }
        text.trim_end().to_owned()
    };
    out.push_str(&line(HEADER.map(str::to_owned)));
    out.push('\n');
    out.push_str(&"-".repeat(WIDTH.iter().sum::<usize>() + WIDTH.len() - 1));
    out.push('\n');
    for row in rows {
        let na = row.status() == Status::NotApplicable;
        let n = |v: u64| if na { "-".to_owned() } else { v.to_string() };
        out.push_str(&line([
            row.broker.clone(),
            row.scenario.clone(),
            n(row.messages),
            n(u64::from(row.kills)),
            n(row.lost),
            n(row.duplicated),
            n(row.stranded),
            n(row.corrupted),
            n(u64::from(row.crashes)),
            duration(row.elapsed),
            match row.status() {
                Status::Ok => "ok".into(),
                Status::Fail => "FAIL".into(),
                Status::NotApplicable => "n/a".into(),
            },
        ]));
        out.push('\n');
    }
    out
}

const HA_HEADER: [&str; 11] = [
    "topology", "fault", "messages", "lost", "dup", "stranded", "corrupt", "recovery", "connects",
    "time", "result",
];
const HA_WIDTH: [usize; 11] = [16, 10, 9, 5, 5, 9, 8, 9, 9, 8, 6];

/// `1.23s` below 10 s (a recovery is short), else as [`duration`].
pub(crate) fn recovery(d: Duration) -> String {
    if d < Duration::from_secs(10) {
        format!("{:.2}s", d.as_secs_f64())
    } else {
        duration(d)
    }
}

/// The fixed-width table of the HA rows (`--ha`): topology and fault instead of broker and
/// scenario, recovery and connects instead of kills and crashes.
pub(crate) fn ha_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let line = |cells: [String; 11]| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i < 2 {
                let _ = write!(text, "{cell:<w$}", w = HA_WIDTH[i]);
            } else {
                let _ = write!(text, "{cell:>w$}", w = HA_WIDTH[i]);
            }
            if i + 1 < cells.len() {
                text.push(' ');
            }
        }
        text.trim_end().to_owned()
    };
    out.push_str(&line(HA_HEADER.map(str::to_owned)));
    out.push('\n');
    out.push_str(&"-".repeat(HA_WIDTH.iter().sum::<usize>() + HA_WIDTH.len() - 1));
    out.push('\n');
    for row in rows {
        let na = row.status() == Status::NotApplicable;
        let n = |v: u64| if na { "-".to_owned() } else { v.to_string() };
        out.push_str(&line([
            row.broker.clone(),
            row.scenario.clone(),
            n(row.messages),
            n(row.lost),
            n(row.duplicated),
            n(row.stranded),
            n(row.corrupted),
            row.recovery.map_or_else(|| "-".to_owned(), recovery),
            row.connects
                .map_or_else(|| "-".to_owned(), |c| c.to_string()),
            duration(row.elapsed),
            match row.status() {
                Status::Ok => "ok".into(),
                Status::Fail => "FAIL".into(),
                Status::NotApplicable => "n/a".into(),
            },
        ]));
        out.push('\n');
    }
    out
}

/// The failures, reasons and notes under the table.
pub(crate) fn details(rows: &[Row]) -> String {
    let mut out = String::new();
    for row in rows {
        if row.failures.is_empty() && row.notes.is_empty() && row.not_applicable.is_none() {
            continue;
        }
        let status = match row.status() {
            Status::Ok => "ok",
            Status::Fail => "FAIL",
            Status::NotApplicable => "n/a",
        };
        let _ = writeln!(out, "{}/{} ({status}):", row.broker, row.scenario);
        if let Some(why) = &row.not_applicable {
            let _ = writeln!(out, "  n/a: {why}");
        }
        for f in &row.failures {
            let _ = writeln!(out, "  FAIL: {f}");
        }
        for n in &row.notes {
            let _ = writeln!(out, "  note: {n}");
        }
    }
    out
}

/// The one-line verdict.
pub(crate) fn verdict(rows: &[Row], total: Duration) -> (bool, String) {
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| r.status() == Status::Fail)
        .map(|r| format!("{}/{}", r.broker, r.scenario))
        .collect();
    let na = rows
        .iter()
        .filter(|r| r.status() == Status::NotApplicable)
        .count();
    let ok = rows.iter().filter(|r| r.status() == Status::Ok).count();
    let sum = |f: fn(&Row) -> u64| rows.iter().map(f).sum::<u64>();
    let counters = format!(
        "lost {}, stranded {}, corrupted {}, duplicated {}, worker crashes {}",
        sum(|r| r.lost),
        sum(|r| r.stranded),
        sum(|r| r.corrupted),
        sum(|r| r.duplicated),
        sum(|r| u64::from(r.crashes)),
    );
    if failed.is_empty() {
        (
            true,
            format!(
                "chaos: PASS: {ok} rows ok, {na} not applicable ({counters}) in {}",
                duration(total)
            ),
        )
    } else {
        (
            false,
            format!(
                "chaos: FAIL: {} of {} rows failed ({}); {ok} ok, {na} not applicable ({counters}) in {}",
                failed.len(),
                rows.len(),
                failed.join(", "),
                duration(total)
            ),
        )
    }
}

/// Now, as `2026-12-01T15:46:28Z`.
pub(crate) fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// Seconds since the epoch as an RFC 3339 UTC timestamp (proleptic Gregorian calendar). An
/// instant past the year 9999, which `time` does not represent, is shown as the epoch.
pub(crate) fn utc(secs: u64) -> String {
    let at = i64::try_from(secs)
        .ok()
        .and_then(|secs| time::OffsetDateTime::from_unix_timestamp(secs).ok())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_fails_on_loss_stranding_corruption_crashes_and_failed_checks() {
        let mut row = Row::new("redis", "sigkill");
        row.duplicated = 7;
        assert_eq!(
            row.status(),
            Status::Ok,
            "duplicates are allowed (at least once)"
        );
        for set in [
            |r: &mut Row| r.lost = 1,
            |r: &mut Row| r.stranded = 1,
            |r: &mut Row| r.corrupted = 1,
            |r: &mut Row| r.crashes = 1,
            |r: &mut Row| r.fail("worker wedged"),
        ] {
            let mut r = row.clone();
            set(&mut r);
            assert_eq!(r.status(), Status::Fail);
        }
        let mut na = Row::new("sqs", "broker-restart");
        na.not_applicable = Some("moto keeps nothing".into());
        assert_eq!(na.status(), Status::NotApplicable);
        let (pass, text) = verdict(&[row.clone(), na.clone()], Duration::from_secs(65));
        assert!(pass, "{text}");
        let mut bad = row;
        bad.lost = 3;
        let (pass, text) = verdict(&[bad, na], Duration::from_secs(65));
        assert!(!pass);
        assert!(
            text.contains("redis/sigkill") && text.contains("lost 3"),
            "{text}"
        );
    }

    #[test]
    fn the_table_is_fixed_width() {
        let mut a = Row::new("redis-laravel", "broker-restart");
        a.messages = 2000;
        a.elapsed = Duration::from_millis(123_400);
        let mut b = Row::new("sqs", "broker-restart");
        b.not_applicable = Some("x".into());
        let text = table(&[a, b]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(
            lines[2].contains("2m03s") && lines[2].ends_with("ok"),
            "{}",
            lines[2]
        );
        assert!(lines[3].ends_with("n/a"));
        let result_col = lines[0].find("result").unwrap();
        assert_eq!(lines[2].len(), result_col + "result".len());
    }

    #[test]
    fn the_ha_table_shows_recovery_and_connects() {
        let mut a = Row::new("redis-laravel", "blackhole");
        a.messages = 300;
        a.duplicated = 2;
        a.recovery = Some(Duration::from_millis(1_234));
        a.connects = Some(6);
        a.elapsed = Duration::from_millis(52_000);
        let mut b = Row::new("rabbitmq", "bandwidth");
        b.messages = 300;
        b.fail("slow recovery");
        let text = ha_table(&[a.clone(), b]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("topology") && lines[0].contains("recovery  connects"));
        assert!(
            lines[2].contains("1.23s") && lines[2].contains(" 6 "),
            "{}",
            lines[2]
        );
        assert!(lines[2].ends_with("ok"), "{}", lines[2]);
        assert!(lines[3].ends_with("FAIL"), "{}", lines[3]);
        let result_col = lines[0].find("result").unwrap();
        assert_eq!(lines[2].len(), result_col + "result".len());
        assert_eq!(lines[3].len(), result_col + "result".len());
        let json = a.to_json();
        assert_eq!(json["recovery_seconds"], 1.23);
        assert_eq!(json["connects"], 6);
        assert!(
            Row::new("redis", "sigkill")
                .to_json()
                .get("connects")
                .is_none()
        );
        assert_eq!(recovery(Duration::from_secs(12)), "12.0s");
    }

    #[test]
    fn utc_dates_are_right() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_139_988), "2026-12-01T15:46:28Z");
        assert_eq!(utc(4_107_542_399), "2100-02-28T23:59:59Z");
        assert_eq!(utc(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(utc(253_402_300_799), "9999-12-31T23:59:59Z");
    }
}
