//! Masking secrets in broker URLs, connection strings and the messages that quote them.
//!
//! Every transport formats its URL or connection string through [`redact`] before it reaches
//! an error message, a log line or a `Debug`/`Display` implementation, so a password is never
//! printed in any of the shapes people write it:
//!
//! * the password of a URL's userinfo: `amqp://guest:***@host/` (the user name stays; an `@`
//!   or a `/` inside an unencoded password is still masked up to the last `@` of the URL);
//! * the values of parameters that carry secrets, in a query string, a `;`-separated
//!   connection string (Azure's `SharedAccessKey=`) or a space-separated `key=value` string
//!   (PostgreSQL's `password=`); the keys are matched case-insensitively, percent-decoded,
//!   with `_`, `-` and `.` ignored (see [`is_secret_key`]);
//! * a URL nested, percent-encoded or not, in a parameter value
//!   (`sqs://r?endpoint=http%3A%2F%2Fu%3Ap%40h`);
//! * text with no `://` at all that still looks like credentials: `amqp:/guest:***@host`
//!   (a typo), `guest:***@host`.
//!
//! The input need not be a valid URL: [`redact`] works on any text, so it can also clean the
//! message of a client library that quotes the URL it was given.
//!
//! ```
//! use babelqueue_transport::redact::{redact, scrub};
//!
//! assert_eq!(redact("amqp://guest:hunter2@127.0.0.1:5672/%2f"), "amqp://guest:***@127.0.0.1:5672/%2f");
//! assert_eq!(redact("amqp:/guest:hunter2@127.0.0.1"), "amqp:/guest:***@127.0.0.1");
//! assert_eq!(redact("sqs://eu-west-1?token=abc&wait_time=5"), "sqs://eu-west-1?token=***&wait_time=5");
//! assert_eq!(redact("redis://127.0.0.1:6379/0"), "redis://127.0.0.1:6379/0");
//!
//! // A message that quotes the password in some other shape loses it too.
//! let url = "amqp://guest:hunter2@127.0.0.1";
//! assert_eq!(scrub("login as guest/hunter2 refused", url), "login as guest/*** refused");
//! ```

use percent_encoding::percent_decode_str;

/// What replaces a secret.
pub const MASK: &str = "***";

/// Secrets shorter than this are not [`scrub`]bed out of free text (they cannot be told apart
/// from ordinary words); [`redact`] masks them wherever its rules find them.
pub const SCRUB_MIN_LEN: usize = 4;

/// `text` with every password and secret parameter value replaced by [`MASK`].
///
/// Text without a secret comes back unchanged.
pub fn redact(text: &str) -> String {
    scan(text).0
}

/// The secrets [`redact`] masks in `text`, as written there and percent-decoded (each once).
pub fn secrets(text: &str) -> Vec<String> {
    scan(text).1
}

/// `text` (a message, a log line) with every occurrence of a secret of `source` (the URL or
/// connection string the message is about) replaced by [`MASK`], then [`redact`]ed.
///
/// This catches a password that a client library echoes in a shape [`redact`] cannot
/// recognise (`guest/hunter2`, a percent-decoded copy …). Secrets shorter than
/// [`SCRUB_MIN_LEN`] are only masked where [`redact`]'s rules find them.
pub fn scrub(text: &str, source: &str) -> String {
    let mut found = secrets(source);
    // Longest first, so a secret that contains another is masked whole.
    found.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_owned();
    for secret in found.iter().filter(|s| s.chars().count() >= SCRUB_MIN_LEN) {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), MASK);
        }
    }
    redact(&out)
}

/// The host (and port) of a URL, without its userinfo, path or query: `127.0.0.1:5672` for
/// `amqp://guest:pw@127.0.0.1:5672/%2f`, `[::1]:6379` for `redis://[::1]:6379`. `None` when
/// `url` has no `://` or names no host. Read from the [`redact`]ed URL, so a password with an
/// unencoded `/` is never taken for the host.
pub fn host(url: &str) -> Option<String> {
    let redacted = redact(url);
    let (_, rest) = redacted.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    (!host.is_empty()).then(|| host.to_owned())
}

/// Whether a parameter named `key` carries a secret.
///
/// `key` is percent-decoded and compared case-insensitively with `_`, `-` and `.` left out,
/// so `sasl.password`, `SASL_PASSWORD` and `pass%77ord` all match. The names: `password`,
/// `passwd`, `pass`, `pwd`, `secret`, `token`, `auth`, `key`, `sas`, `sig`, `jwt`,
/// `authparams`, and any name ending in `password`, `passwd`, `pass`, `passphrase`,
/// `secret`, `token`, `accesskey`, `secretkey`, `privatekey`, `apikey`, `accountkey`,
/// `sharedaccesskey`, `signature`, `credential` or `credentials` (`access_key`,
/// `secret_key`, `SharedAccessKey`, `client_secret`, `X-Amz-Security-Token` …).
/// `SharedAccessKeyName`, `auth_mechanism`, `routing_key` are not secrets.
pub fn is_secret_key(key: &str) -> bool {
    const EXACT: &[&str] = &[
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "token",
        "auth",
        "key",
        "sas",
        "sig",
        "jwt",
        "authparams",
    ];
    const SUFFIXES: &[&str] = &[
        "password",
        "passwd",
        "pass",
        "passphrase",
        "secret",
        "token",
        "accesskey",
        "secretkey",
        "privatekey",
        "apikey",
        "accountkey",
        "sharedaccesskey",
        "signature",
        "credential",
        "credentials",
    ];
    let decoded = percent_decode_str(key).decode_utf8_lossy();
    let normalized: String = decoded
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    !normalized.is_empty()
        && (EXACT.contains(&normalized.as_str())
            || SUFFIXES.iter().any(|s| normalized.ends_with(s)))
}

/// One replacement: the byte range `start..end` of the text becomes `with`.
struct Edit {
    start: usize,
    end: usize,
    with: String,
}

/// Applies `edits` (sorted, not overlapping) to `text`.
fn apply(text: &str, edits: &[Edit]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for edit in edits {
        out.push_str(&text[at..edit.start]);
        out.push_str(&edit.with);
        at = edit.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The redacted text and the secrets found.
fn scan(text: &str) -> (String, Vec<String>) {
    let mut found = Vec::new();
    let mut edits = Vec::new();
    parameters(text, &mut edits, &mut found);
    let first = apply(text, &edits);
    edits.clear();
    userinfo_in_urls(&first, &mut edits, &mut found);
    userinfo_without_scheme(&first, &mut edits, &mut found);
    edits.sort_by_key(|e| e.start);
    let out = apply(&first, &edits);
    let mut secrets = Vec::new();
    for secret in found.into_iter().filter(|s| !s.is_empty() && s != MASK) {
        let decoded = percent_decode_str(&secret).decode_utf8_lossy().into_owned();
        for s in [secret, decoded] {
            if !secrets.contains(&s) {
                secrets.push(s);
            }
        }
    }
    (out, secrets)
}

/// Where a `key=value` pair starts, which decides where its value ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// After `?` or `&`: a query string.
    Query,
    /// After `;`: a connection string.
    Semicolon,
    /// At the start of the text, after white space or punctuation.
    Free,
}

fn context_before(byte: u8) -> Option<Context> {
    match byte {
        b'?' | b'&' => Some(Context::Query),
        b';' => Some(Context::Semicolon),
        b if b.is_ascii_whitespace() => Some(Context::Free),
        b'"' | b'\'' | b'(' | b'[' | b'{' | b',' | b'|' | b'<' => Some(Context::Free),
        _ => None,
    }
}

fn is_key_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.' | b'%')
}

/// Where the value starting at `start` ends (exclusive).
fn value_end(bytes: &[u8], start: usize, context: Context) -> usize {
    if context != Context::Query
        && let Some(&quote @ (b'\'' | b'"')) = bytes.get(start)
    {
        let mut i = start + 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b if b == quote => return i + 1,
                _ => i += 1,
            }
        }
        return bytes.len();
    }
    let mut i = start;
    while i < bytes.len() {
        let b = bytes[i];
        let ends = b.is_ascii_whitespace()
            || b == b'"'
            || match context {
                Context::Query => matches!(b, b'&' | b'#'),
                Context::Semicolon => b == b';',
                Context::Free => matches!(b, b';' | b'&'),
            };
        if ends {
            break;
        }
        i += 1;
    }
    i
}

/// Masks the values of secret parameters, and URLs nested in other parameters' values.
fn parameters(text: &str, edits: &mut Vec<Edit>, found: &mut Vec<String>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let context = if i == 0 {
            Some(Context::Free)
        } else {
            context_before(bytes[i - 1])
        };
        let Some(context) = context.filter(|_| is_key_byte(bytes[i])) else {
            i += 1;
            continue;
        };
        let mut k = i;
        while k < bytes.len() && is_key_byte(bytes[k]) {
            k += 1;
        }
        if bytes.get(k) != Some(&b'=') {
            i = k.max(i + 1);
            continue;
        }
        let start = k + 1;
        let end = value_end(bytes, start, context);
        let value = &text[start..end];
        if is_secret_key(&text[i..k]) {
            if !value.is_empty() {
                let inner = value
                    .strip_prefix(['\'', '"'])
                    .map_or(value, |v| v.strip_suffix(['\'', '"']).unwrap_or(v));
                found.push(inner.to_owned());
                edits.push(Edit {
                    start,
                    end,
                    with: MASK.to_owned(),
                });
            }
        } else if value.contains(['@', '%', '=']) {
            // A URL or a connection string in a value (`endpoint=http://u:p@h`, percent-encoded
            // or not): redact it on its own, in its decoded form when that is what held it.
            let decoded = percent_decode_str(value).decode_utf8_lossy();
            let (clean, inner) = scan(&decoded);
            if !inner.is_empty() {
                found.extend(inner);
                edits.push(Edit {
                    start,
                    end,
                    with: if decoded == value {
                        clean
                    } else {
                        clean.replace('&', "%26").replace(' ', "%20")
                    },
                });
            }
        }
        i = end.max(start);
    }
}

/// Characters that end a URL, or a credential-looking word, inside a message.
fn ends_word(byte: u8) -> bool {
    byte.is_ascii_whitespace() || matches!(byte, b'"' | b'`' | b'<' | b'>')
}

fn is_scheme_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'-' | b'.')
}

/// The index where the scheme of the `://` at `sep` starts.
fn scheme_start(bytes: &[u8], sep: usize) -> usize {
    let mut s = sep;
    while s > 0 && is_scheme_byte(bytes[s - 1]) {
        s -= 1;
    }
    s
}

/// Masks `user:password@` in every `scheme://` URL of the text.
fn userinfo_in_urls(text: &str, edits: &mut Vec<Edit>, found: &mut Vec<String>) {
    let bytes = text.as_bytes();
    let seps: Vec<usize> = text.match_indices("://").map(|(i, _)| i).collect();
    for (n, &sep) in seps.iter().enumerate() {
        let start = sep + 3;
        // The URL runs to the end of the word, or to the scheme of the next URL in it.
        let next = seps
            .get(n + 1)
            .map_or(bytes.len(), |&s| scheme_start(bytes, s));
        let mut end = start;
        while end < next && !ends_word(bytes[end]) {
            end += 1;
        }
        if end <= start {
            continue;
        }
        let span = &text[start..end];
        let authority_end = span.find(['/', '?', '#']).unwrap_or(span.len());
        let at = match span[..authority_end].rfind('@') {
            Some(at) => at,
            // An unencoded `/`, `?` or `#` in the password hides the `@`: when the text before
            // the first `@` has a `:`, everything up to the last `@` is taken as userinfo.
            None => match (span.find('@'), span.rfind('@')) {
                (Some(first), Some(last)) if span[..first].contains(':') => last,
                _ => continue,
            },
        };
        let userinfo = &span[..at];
        if let Some(colon) = userinfo.find(':') {
            found.push(userinfo[colon + 1..].to_owned());
            edits.push(Edit {
                start: start + colon + 1,
                end: start + at,
                with: MASK.to_owned(),
            });
        }
    }
}

/// Masks `user:password@host` in words without `://` (`amqp:/guest:pw@h`, `guest:pw@h`).
fn userinfo_without_scheme(text: &str, edits: &mut Vec<Edit>, found: &mut Vec<String>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if ends_word(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !ends_word(bytes[i]) {
            i += 1;
        }
        let word = &text[start..i];
        if word.contains("://") {
            continue;
        }
        let Some(at) = word.rfind('@') else {
            continue;
        };
        let before = &word[..at];
        // `scheme:` followed by slashes is kept; the userinfo follows it.
        let kept = typo_scheme_len(before);
        let userinfo = &before[kept..];
        if let Some(colon) = userinfo.find(':') {
            found.push(userinfo[colon + 1..].to_owned());
            edits.push(Edit {
                start: start + kept + colon + 1,
                end: start + at,
                with: MASK.to_owned(),
            });
        }
    }
}

/// The length of a leading `scheme:/`, `scheme:\\`, … in `text` (0 when there is none).
fn typo_scheme_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return 0;
    }
    let mut i = 0;
    while i < bytes.len() && is_scheme_byte(bytes[i]) {
        i += 1;
    }
    if bytes.get(i) != Some(&b':') {
        return 0;
    }
    let mut j = i + 1;
    while j < bytes.len() && matches!(bytes[j], b'/' | b'\\') {
        j += 1;
    }
    if j == i + 1 { 0 } else { j }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let cases: &[(&str, &str)] = &[
            // No secret: unchanged.
            ("", ""),
            ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
            ("amqp://guest@h/%2f", "amqp://guest@h/%2f"),
            (
                "sqs://us-east-1?endpoint=http://127.0.0.1:5000&wait_time=5",
                "sqs://us-east-1?endpoint=http://127.0.0.1:5000&wait_time=5",
            ),
            (
                "artemis://h?credit=2&queue_capability=off",
                "artemis://h?credit=2&queue_capability=off",
            ),
            (
                "amqp://h?auth_mechanism=PLAIN&routing_key=a",
                "amqp://h?auth_mechanism=PLAIN&routing_key=a",
            ),
            ("pulsar://[::1]:6650", "pulsar://[::1]:6650"),
            (
                "persistent://public/default/orders",
                "persistent://public/default/orders",
            ),
            (
                "connection refused (os error 111)",
                "connection refused (os error 111)",
            ),
            ("user@example.com", "user@example.com"),
            // Userinfo.
            (
                "amqp://guest:hunter2@127.0.0.1:5672/%2f",
                "amqp://guest:***@127.0.0.1:5672/%2f",
            ),
            ("redis://:hunter2@h:6379", "redis://:***@h:6379"),
            (
                "rediss://bq-auth:wrong@127.0.0.1",
                "rediss://bq-auth:***@127.0.0.1",
            ),
            ("amqp://u:p@ss@h/v", "amqp://u:***@h/v"),
            ("amqp://u:p%40ss@h/v", "amqp://u:***@h/v"),
            ("amqp://u:pa/ss@h/v", "amqp://u:***@h/v"),
            ("amqp://u:pa?ss@h", "amqp://u:***@h"),
            ("amqp://u:pa#ss@h", "amqp://u:***@h"),
            ("amqp://u:p@[::1]:5672/", "amqp://u:***@[::1]:5672/"),
            (
                "amqp://u:p@[fe80::1%25eth0]",
                "amqp://u:***@[fe80::1%25eth0]",
            ),
            ("amqp://[::1]:5672/%2f", "amqp://[::1]:5672/%2f"),
            (
                "sb://RootKey:k%2Fe%3Dy@ns.servicebus.windows.net",
                "sb://RootKey:***@ns.servicebus.windows.net",
            ),
            // In a message, quoted or not, one or several.
            (
                "connecting to amqp://g:pw1@a:1 then \"redis://:pw2@b\" failed",
                "connecting to amqp://g:***@a:1 then \"redis://:***@b\" failed",
            ),
            // Query parameters.
            (
                "sqs://eu-west-1?token=abc&wait_time=5",
                "sqs://eu-west-1?token=***&wait_time=5",
            ),
            ("x://h?password=a;b&c=1", "x://h?password=***&c=1"),
            (
                "x://h?PassWord=a&PWD=b&passwd=c&pass=d",
                "x://h?PassWord=***&PWD=***&passwd=***&pass=***",
            ),
            (
                "kafka://h?sasl.password=s1&sasl_password=s2&sasl.username=u",
                "kafka://h?sasl.password=***&sasl_password=***&sasl.username=u",
            ),
            (
                "x://h?access_key=a&secret_key=b&SharedAccessKey=c&sig=d&sas=e&auth=f&key=g",
                "x://h?access_key=***&secret_key=***&SharedAccessKey=***&sig=***&sas=***&auth=***&key=***",
            ),
            (
                "x://h?pass%77ord=a&secret=b",
                "x://h?pass%77ord=***&secret=***",
            ),
            (
                "x://h?X-Amz-Security-Token=t#frag",
                "x://h?X-Amz-Security-Token=***#frag",
            ),
            ("x://h?token=", "x://h?token="),
            // Azure connection string.
            (
                "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=abc+/=;EntityPath=q",
                "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=***;EntityPath=q",
            ),
            (
                "SharedAccessSignature sr=sb%3A%2F%2Fns%2Fq&sig=abc%3D&se=1&skn=k",
                "SharedAccessSignature sr=sb%3A%2F%2Fns%2Fq&sig=***&se=1&skn=k",
            ),
            // key=value strings (PostgreSQL).
            (
                "host=h user=u password=secret dbname=d",
                "host=h user=u password=*** dbname=d",
            ),
            (
                "host=h password='a b c' dbname=d",
                "host=h password=*** dbname=d",
            ),
            // Nested URLs in parameter values, plain and percent-encoded.
            (
                "sqs://r?endpoint=http://u:p@h:5000&wait_time=1",
                "sqs://r?endpoint=http://u:***@h:5000&wait_time=1",
            ),
            (
                "sqs://r?endpoint=http%3A%2F%2Fu%3Ap%40h%3A5000&wait_time=1",
                "sqs://r?endpoint=http://u:***@h:5000&wait_time=1",
            ),
            // No `://`: typos and bare credentials.
            ("amqp:/guest:hunter2@127.0.0.1", "amqp:/guest:***@127.0.0.1"),
            (
                "amqp:\\\\guest:hunter2@127.0.0.1:5672",
                "amqp:\\\\guest:***@127.0.0.1:5672",
            ),
            ("amqp:guest:hunter2@127.0.0.1", "amqp:***@127.0.0.1"),
            ("amqp:/guest:hun/ter:2@h", "amqp:/guest:***@h"),
            ("guest:hunter2@127.0.0.1:5672", "guest:***@127.0.0.1:5672"),
            ("amqp//guest:hunter2@h", "amqp//guest:***@h"),
            ("in \"amqp:/u:p@ss@h\"", "in \"amqp:/u:***@h\""),
            ("amqp:/u:p@[::1]:5672", "amqp:/u:***@[::1]:5672"),
        ];
        for (input, want) in cases {
            assert_eq!(&redact(input), want, "redact({input:?})");
            // Redacting twice changes nothing more.
            assert_eq!(&redact(want), want, "redact({want:?})");
        }
    }

    #[test]
    fn no_secret_survives_any_shape() {
        for (input, secret) in [
            ("amqp://guest:hunter2@127.0.0.1:5672/%2f", "hunter2"),
            ("amqp:/guest:hunter2@127.0.0.1", "hunter2"),
            ("amqp:hunter2@127.0.0.1", "hunter2"),
            ("amqp://u:hunter2@", "hunter2"),
            ("x://h?endpoint=http%3A%2F%2Fu%3Ahunter2%40h", "hunter2"),
            ("redis://u:hunter2@h?password=hunter3", "hunter3"),
            ("Endpoint=sb://h/;SharedAccessKey=hunter2", "hunter2"),
            ("{url: \"amqp://u:hunter2@h\"}", "hunter2"),
        ] {
            let out = redact(input);
            assert!(!out.contains(secret), "{input:?} -> {out:?}");
        }
    }

    #[test]
    fn secrets_and_scrub() {
        assert_eq!(
            secrets("amqp://u:p%40ssword@h?token=t0k3n"),
            vec!["t0k3n", "p%40ssword", "p@ssword"]
        );
        assert!(secrets("amqp://u@h/%2f").is_empty());
        let url = "amqp://guest:s%2Fcret@127.0.0.1";
        assert_eq!(
            scrub(
                "ACCESS_REFUSED for guest with s/cret at amqp://guest:s%2Fcret@127.0.0.1",
                url
            ),
            "ACCESS_REFUSED for guest with *** at amqp://guest:***@127.0.0.1"
        );
        // Short secrets are only masked where a rule finds them.
        assert_eq!(scrub("a pw b", "amqp://u:pw@h"), "a pw b");
        assert_eq!(scrub("no secret here", "redis://h"), "no secret here");
    }

    #[test]
    fn secret_keys() {
        for key in [
            "password",
            "PASSWORD",
            "passwd",
            "pass",
            "pwd",
            "secret",
            "token",
            "auth",
            "key",
            "sas",
            "sig",
            "SharedAccessKey",
            "access_key",
            "secret_key",
            "sasl.password",
            "sasl_password",
            "ssl.key.password",
            "client_secret",
            "aws_secret_access_key",
            "X-Amz-Signature",
            "pass%77ord",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in [
            "",
            "SharedAccessKeyName",
            "auth_mechanism",
            "routing_key",
            "user",
            "username",
            "sasl.username",
            "prefetch",
            "endpoint",
            "host",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn hosts() {
        let host = |url: &str| super::host(url);
        assert_eq!(
            host("amqp://g:pw@127.0.0.1:5672/%2f").as_deref(),
            Some("127.0.0.1:5672")
        );
        assert_eq!(
            host("redis://[::1]:6379?x=1").as_deref(),
            Some("[::1]:6379")
        );
        assert_eq!(host("sqs://us-east-1").as_deref(), Some("us-east-1"));
        assert_eq!(host("amqp://u:pa/ss@h:1/v").as_deref(), Some("h:1"));
        assert_eq!(host("sqs://"), None);
        assert_eq!(host("amqp:/g:pw@h"), None);
    }
}
