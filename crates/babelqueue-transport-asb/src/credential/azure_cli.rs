//! The Azure CLI link: the token of the account signed in with `az login`, from
//! `az account get-access-token --output json --resource https://servicebus.azure.net`.
//!
//! The program is run directly (no shell), bounded by a timeout, its standard input closed.
//! It prints `accessToken` and `expires_on` (epoch seconds; CLI 2.54 and later) or only
//! `expiresOn` (`YYYY-MM-DD HH:MM:SS[.ffffff]`, the machine's local time, read here as UTC, so
//! on a machine east of UTC the token is asked for again early, and west of it late).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use super::{AccessToken, TokenCredential, epoch_seconds, resource_of, text};
use crate::error::AsbError;

/// How long `az` may take by default.
pub const AZ_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest stretch of the program's standard error put into an error.
const STDERR_SHOWN: usize = 600;

/// Tokens from the Azure CLI.
///
/// ```
/// use babelqueue_transport_asb::credential::{AzureCliCredential, SERVICE_BUS_SCOPE};
/// let az = AzureCliCredential::new().with_tenant("contoso.onmicrosoft.com");
/// assert_eq!(
///     az.args(SERVICE_BUS_SCOPE).unwrap(),
///     ["account", "get-access-token", "--output", "json", "--resource",
///      "https://servicebus.azure.net", "--tenant", "contoso.onmicrosoft.com"]
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzureCliCredential {
    /// The program (default `az`, looked up on `PATH`).
    pub program: PathBuf,
    /// The tenant to ask the token of (`--tenant`); `None` for the account's default.
    pub tenant_id: Option<String>,
    /// How long the program may take before it is killed.
    pub timeout: Duration,
}

impl Default for AzureCliCredential {
    fn default() -> AzureCliCredential {
        AzureCliCredential::new()
    }
}

impl AzureCliCredential {
    /// `az` from `PATH`, the account's default tenant, [`AZ_TIMEOUT`].
    pub fn new() -> AzureCliCredential {
        AzureCliCredential {
            program: PathBuf::from("az"),
            tenant_id: None,
            timeout: AZ_TIMEOUT,
        }
    }

    /// Runs `program` instead of `az` (a full path, or a name looked up on `PATH`).
    pub fn with_program(mut self, program: impl Into<PathBuf>) -> AzureCliCredential {
        self.program = program.into();
        self
    }

    /// Asks for a token of this tenant (`--tenant`).
    pub fn with_tenant(mut self, tenant_id: impl Into<String>) -> AzureCliCredential {
        self.tenant_id = Some(tenant_id.into());
        self
    }

    /// Kills the program after `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> AzureCliCredential {
        self.timeout = timeout;
        self
    }

    /// The program's arguments for `scope`.
    pub fn args(&self, scope: &str) -> Result<Vec<String>, AsbError> {
        let resource = resource_of(scope);
        if !plain(resource, ":/") {
            return Err(AsbError::Config(format!(
                "{resource:?} is not a resource the Azure CLI can be asked for"
            )));
        }
        let mut args: Vec<String> = [
            "account",
            "get-access-token",
            "--output",
            "json",
            "--resource",
            resource,
        ]
        .map(str::to_owned)
        .to_vec();
        if let Some(tenant) = &self.tenant_id {
            if !plain(tenant, "") {
                return Err(AsbError::Config(format!(
                    "{tenant:?} is not a tenant id (letters, digits, '-' and '.')"
                )));
            }
            args.extend(["--tenant".to_owned(), tenant.clone()]);
        }
        Ok(args)
    }
}

/// Whether `value` is letters, digits, `-`, `.` and `extra` only, and does not start with `-`
/// (so it can never be read as an option).
fn plain(value: &str, extra: &str) -> bool {
    !value.is_empty()
        && !value.starts_with('-')
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || extra.contains(c))
}

/// Days from 1970-01-01 to the civil date `year-month-day` (proleptic Gregorian).
fn days_since_epoch(year: i64, month: i64, day: i64) -> i64 {
    // Count from 0000-03-01 so the leap day is the last day of the year.
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let days_before_year = 365 * y + y.div_euclid(4) - y.div_euclid(100) + y.div_euclid(400);
    let days_before_month = (153 * m + 2) / 5;
    days_before_year + days_before_month + day - 1 - 719_468
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]`, read as UTC.
fn civil_time(text: &str) -> Option<SystemTime> {
    let (date, time) = text.trim().split_once([' ', 'T'])?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (year, month, day) = (d.next()??, d.next()??, d.next()??);
    let time = time.split('.').next()?;
    let mut t = time.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hour, minute, second) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    let seconds = days_since_epoch(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(seconds).ok()?))
}

/// Reads `az account get-access-token --output json`: `accessToken`, and `expires_on` (epoch
/// seconds) or else `expiresOn` (a local date and time, read as UTC).
pub fn parse_cli_output(stdout: &str) -> Result<AccessToken, AsbError> {
    let value: serde_json::Value = serde_json::from_str(stdout)
        .map_err(|e| AsbError::Auth(format!("the Azure CLI printed no token JSON: {e}")))?;
    let token = text(&value, "accessToken");
    if token.is_empty() {
        return Err(AsbError::Auth(
            "the Azure CLI's answer has no accessToken".into(),
        ));
    }
    let expires_at = epoch_seconds(value.get("expires_on"))
        .or_else(|| civil_time(text(&value, "expiresOn")))
        .ok_or_else(|| AsbError::Auth("the Azure CLI's answer has no expires_on".into()))?;
    Ok(AccessToken {
        token: token.to_owned(),
        expires_at,
    })
}

/// The program's standard error for an error message: trimmed, bounded, and with anything
/// shaped like a JWT blanked.
fn shown_stderr(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let words: Vec<&str> = text
        .split_whitespace()
        .map(|w| if w.contains("eyJ") { "***" } else { w })
        .collect();
    let mut shown = words.join(" ");
    if shown.len() > STDERR_SHOWN {
        let mut end = STDERR_SHOWN;
        while !shown.is_char_boundary(end) {
            end -= 1;
        }
        shown.truncate(end);
        shown.push('…');
    }
    shown
}

#[async_trait]
impl TokenCredential for AzureCliCredential {
    async fn get_token(&self, scope: &str) -> Result<AccessToken, AsbError> {
        let args = self.args(scope)?;
        let program = self.program.display();
        let child = tokio::process::Command::new(&self.program)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output();
        let output = match tokio::time::timeout(self.timeout, child).await {
            Err(_) => {
                return Err(AsbError::Timeout(format!(
                    "`{program} account get-access-token` did not finish within {:?}",
                    self.timeout
                )));
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(AsbError::Config(format!(
                    "the Azure CLI ({program}) is not installed or not on PATH; install it and \
                     sign in with `az login`"
                )));
            }
            Ok(Err(e)) => {
                return Err(AsbError::Config(format!(
                    "cannot run the Azure CLI ({program}): {e}"
                )));
            }
            Ok(Ok(output)) => output,
        };
        if !output.status.success() {
            let stderr = shown_stderr(&output.stderr);
            let what = format!(
                "`{program} account get-access-token` failed ({}): {stderr}",
                output.status
            );
            // Not signed in: this link is not available, as a missing CLI is not.
            return Err(if stderr.contains("az login") {
                AsbError::Config(what)
            } else {
                AsbError::Auth(format!("{what} (is `az login` done for this account?)"))
            });
        }
        parse_cli_output(&String::from_utf8_lossy(&output.stdout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credential::SERVICE_BUS_SCOPE;
    use babelqueue_core::TransportErrorKind;

    #[test]
    fn output_with_epoch_or_civil_expiry() {
        let t = parse_cli_output(
            r#"{"accessToken":"ey.cli","expiresOn":"2023-11-14 22:13:20.000000","expires_on":1700000000,"tokenType":"Bearer"}"#,
        )
        .unwrap();
        assert_eq!(t.token, "ey.cli");
        assert_eq!(
            t.expires_at,
            UNIX_EPOCH + Duration::from_secs(1_700_000_000)
        );
        assert!(!format!("{t:?}").contains("ey.cli"));
        // older CLIs: only expiresOn, read as UTC
        let t = parse_cli_output(r#"{"accessToken":"x","expiresOn":"2023-11-14 22:13:20.123456"}"#)
            .unwrap();
        assert_eq!(
            t.expires_at,
            UNIX_EPOCH + Duration::from_secs(1_700_000_000)
        );
        let t =
            parse_cli_output(r#"{"accessToken":"x","expiresOn":"2024-02-29 00:00:00"}"#).unwrap();
        assert_eq!(
            t.expires_at,
            UNIX_EPOCH + Duration::from_secs(1_709_164_800)
        );
        assert!(parse_cli_output(r#"{"accessToken":"x","expiresOn":"soon"}"#).is_err());
        assert!(parse_cli_output(r#"{"expires_on":1}"#).is_err());
        assert!(parse_cli_output("ERROR").is_err());
    }

    #[test]
    fn arguments_refuse_what_could_be_an_option() {
        let az = AzureCliCredential::new();
        assert_eq!(
            az.args(SERVICE_BUS_SCOPE).unwrap().join(" "),
            "account get-access-token --output json --resource https://servicebus.azure.net"
        );
        let bad = az.clone().with_tenant("--query=x");
        assert_eq!(
            bad.args(SERVICE_BUS_SCOPE).unwrap_err().kind(),
            TransportErrorKind::Config
        );
        assert!(az.args("--x").is_err());
    }

    #[test]
    fn stderr_is_bounded_and_blanks_tokens() {
        let shown = shown_stderr(b"ERROR: bad  eyJhbGciOi.x.y\nline");
        assert_eq!(shown, "ERROR: bad *** line");
        assert!(shown_stderr(&[b'a'; 2000]).chars().count() <= STDERR_SHOWN + 1);
    }

    /// A fake `az` in its own directory: a shell script that records its arguments and prints
    /// `stdout` / `stderr`, exiting with `code`.
    #[cfg(unix)]
    fn fake_az(name: &str, script: &str) -> (PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("bq-asb-az-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let program = dir.join("az");
        let args = dir.join("args");
        let text = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n{script}\n",
            args.display()
        );
        std::fs::write(&program, text).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        (program, args)
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_signed_in_cli_hands_out_its_token() {
        let (program, args) = fake_az(
            "ok",
            r#"echo '{"accessToken":"ey.from-az","expires_on":1900000000,"tokenType":"Bearer"}'"#,
        );
        let az = AzureCliCredential::new()
            .with_program(&program)
            .with_tenant("t-1");
        let token = az.get_token(SERVICE_BUS_SCOPE).await.unwrap();
        assert_eq!(token.token, "ey.from-az");
        assert_eq!(
            token.expires_at,
            UNIX_EPOCH + Duration::from_secs(1_900_000_000)
        );
        assert_eq!(
            std::fs::read_to_string(args).unwrap(),
            "account\nget-access-token\n--output\njson\n--resource\nhttps://servicebus.azure.net\n--tenant\nt-1\n"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn failures_say_why() {
        let (program, _) = fake_az(
            "out",
            "echo \"ERROR: Please run 'az login' to setup account. eyJsecret.a.b\" >&2; exit 1",
        );
        let error = AzureCliCredential::new()
            .with_program(&program)
            .get_token(SERVICE_BUS_SCOPE)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), TransportErrorKind::Config, "{error:?}");
        let text = error.to_string();
        assert!(text.contains("Please run 'az login'"), "{text}");
        assert!(!text.contains("eyJsecret"), "{text}");

        let (program, _) = fake_az("slow", "sleep 5");
        let started = std::time::Instant::now();
        let error = AzureCliCredential::new()
            .with_program(&program)
            .with_timeout(Duration::from_millis(200))
            .get_token(SERVICE_BUS_SCOPE)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_eq!(error.kind(), TransportErrorKind::Timeout);

        let missing = std::env::temp_dir().join("bq-asb-no-such-dir/az");
        let error = AzureCliCredential::new()
            .with_program(missing)
            .get_token(SERVICE_BUS_SCOPE)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), TransportErrorKind::Config);
        assert!(error.to_string().contains("az login"), "{error}");
    }
}
