//! The server list of a cluster URL: `nats://[user[:password]@]h1[:p1],h2[:p2],…[?options]`
//! (each further server may repeat the scheme, `nats://h1:4222,nats://h2:4222`, as the `nats`
//! command-line tool writes it). Split here into the URL of the first server, which
//! [`NatsOptions::from_url`](crate::NatsOptions::from_url) reads as before, and the others.
//!
//! The credentials are everything up to the last `@` before the first `/`, as for a URL of one
//! server, and apply to every server.

use crate::error::NatsError;
use crate::projection::DEFAULT_PORT;

const SCHEME: &str = "nats://";

/// `url` with its server list cut down to the first server (credentials, path and query kept),
/// and the other servers as `nats://host:port`. A URL with one server comes back as it is, with
/// no others; so does anything that does not start with `nats://` (the caller refuses it).
///
/// An empty entry (`nats://h1,,h2`, a trailing comma) or one that is not `host[:port]` is a
/// [`NatsError::Config`]; `shown` is the URL as messages may show it (redacted).
pub(crate) fn split(url: &str, shown: &str) -> Result<(String, Vec<String>), NatsError> {
    let Some(rest) = url.strip_prefix(SCHEME) else {
        return Ok((url.to_owned(), Vec::new()));
    };
    // The query and the fragment are left alone: a comma or `nats://` there is a value.
    let tail_at = rest.find(['?', '#']).unwrap_or(rest.len());
    let (head, tail) = rest.split_at(tail_at);
    let head = head.replace(",nats://", ",");
    let (authority, path) = head.split_at(head.find('/').unwrap_or(head.len()));
    if !authority.contains(',') {
        return Ok((url.to_owned(), Vec::new()));
    }
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    if hosts.split(',').any(str::is_empty) {
        return Err(NatsError::Config(format!(
            "{shown:?}: an empty server in the list (nats://host1:port1,host2:port2,…)"
        )));
    }
    let mut entries = hosts.split(',');
    let first = entries.next().unwrap_or_default();
    let others = entries
        .map(|entry| server(entry, shown))
        .collect::<Result<_, _>>()?;
    Ok((format!("{SCHEME}{userinfo}{first}{path}{tail}"), others))
}

/// One further server of the list, `host[:port]`, as `nats://host:port`.
fn server(entry: &str, shown: &str) -> Result<String, NatsError> {
    let parsed = url::Url::parse(&format!("{SCHEME}{entry}"))
        .ok()
        .filter(|u| {
            u.host_str().is_some_and(|h| !h.is_empty())
                && u.path().is_empty()
                && u.username().is_empty()
                && u.password().is_none()
        })
        .ok_or_else(|| {
            NatsError::Config(format!(
                "{shown:?}: {entry:?} in the server list is not host:port"
            ))
        })?;
    let host = parsed.host_str().unwrap_or_default();
    Ok(format!(
        "{SCHEME}{host}:{}",
        parsed.port().unwrap_or(DEFAULT_PORT)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(url: &str) -> (String, Vec<String>) {
        split(url, url).unwrap()
    }

    #[test]
    fn the_first_server_keeps_the_url_and_the_others_are_listed() {
        assert_eq!(
            ok("nats://u:p%40ss@h1:4222,h2:4223,h3?replicas=3&consumer=w"),
            (
                "nats://u:p%40ss@h1:4222?replicas=3&consumer=w".to_owned(),
                vec!["nats://h2:4223".to_owned(), "nats://h3:4222".to_owned()]
            )
        );
        // the nats command-line tool's spelling, a path, IPv6
        assert_eq!(
            ok("nats://127.0.0.1:1,nats://127.0.0.1:2,[::1]:3/"),
            (
                "nats://127.0.0.1:1/".to_owned(),
                vec!["nats://127.0.0.1:2".to_owned(), "nats://[::1]:3".to_owned()]
            )
        );
        // one server, or not nats://: unchanged
        for url in ["nats://h:1?x=a,b", "redis://a,b", "nats://h#a,b"] {
            assert_eq!(ok(url), (url.to_owned(), Vec::new()), "{url}");
        }
        // a comma in the password: the credentials end at the last `@`
        assert_eq!(
            ok("nats://u:p,w@h1,h2:5"),
            ("nats://u:p,w@h1".to_owned(), vec!["nats://h2:5".to_owned()])
        );
    }

    #[test]
    fn empty_entries_and_entries_that_are_not_host_and_port_are_refused() {
        for url in [
            "nats://h1,,h2",
            "nats://h1,",
            "nats://,h1",
            "nats://h1,h2:port",
            "nats://h1,h2 h3",
            "nats://h1,h2:99999",
        ] {
            let err = split(url, "shown").unwrap_err();
            assert!(matches!(err, NatsError::Config(_)), "{url}: {err}");
            assert!(err.to_string().contains("\"shown\""), "{url}: {err}");
        }
    }
}
