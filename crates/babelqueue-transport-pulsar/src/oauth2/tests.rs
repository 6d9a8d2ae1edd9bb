//! The OAuth2 client credentials flow against a tiny identity provider on 127.0.0.1 (plain
//! HTTP/1.1 written by hand), the private key forms and the URL keys.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use babelqueue_core::TransportErrorKind;
use base64::Engine as _;
use pulsar::authentication::Authentication as _;
use pulsar::error::AuthenticationError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::client::PulsarOptions;
use crate::{PulsarAuth, PulsarTransport};

const SECRET: &str = "s3cr3t-Zq9";

/// One request the identity provider received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    content_type: Option<String>,
    authorization: Option<String>,
    body: String,
}

impl Seen {
    fn form(&self) -> Vec<(String, String)> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .into_owned()
            .collect()
    }
}

/// An identity provider: discovery under `/issuer`, the token endpoint `/oauth/token`
/// answering what `answer(n)` says for the n-th token request (1-based).
struct Idp {
    base: String,
    seen: Arc<StdMutex<Vec<Seen>>>,
}

impl Idp {
    async fn start(answer: impl Fn(usize) -> (u16, String) + Send + Sync + 'static) -> Idp {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let seen = Arc::new(StdMutex::new(Vec::new()));
        let answer = Arc::new(answer);
        let (endpoint, log) = (format!("{base}/oauth/token"), seen.clone());
        tokio::spawn(async move {
            let mut tokens = 0;
            while let Ok((stream, _)) = listener.accept().await {
                let Some(request) = read_request(stream).await else {
                    continue;
                };
                let (mut stream, seen) = request;
                let (status, body) = match (seen.method.as_str(), seen.path.as_str()) {
                    ("GET", "/issuer/.well-known/openid-configuration") => (
                        200,
                        serde_json::json!({"issuer": "x", "token_endpoint": endpoint}).to_string(),
                    ),
                    ("POST", "/oauth/token") => {
                        tokens += 1;
                        answer(tokens)
                    }
                    _ => (404, "{}".to_owned()),
                };
                log.lock().expect("log").push(seen);
                let response = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            }
        });
        Idp { base, seen }
    }

    fn issuer(&self) -> String {
        format!("{}/issuer/", self.base)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("log").clone()
    }

    fn token_requests(&self) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.path == "/oauth/token")
            .collect()
    }
}

/// Reads one HTTP/1.1 request (headers, then `Content-Length` bytes of body).
async fn read_request(mut stream: TcpStream) -> Option<(TcpStream, Seen)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut start = lines.next()?.split(' ');
    let (method, path) = (start.next()?.to_owned(), start.next()?.to_owned());
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    };
    let length: usize = header("content-length").map_or(0, |v| v.parse().unwrap_or(0));
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buffer[head_end..]).into_owned();
    let content_type = header("content-type");
    let authorization = header("authorization");
    Some((
        stream,
        Seen {
            method,
            path,
            content_type,
            authorization,
            body,
        },
    ))
}

fn token(n: usize, expires_in: u64) -> (u16, String) {
    (
        200,
        serde_json::json!({"access_token": format!("tok-{n}"), "token_type": "Bearer", "expires_in": expires_in})
            .to_string(),
    )
}

fn grant(issuer: &str) -> OAuth2Grant {
    OAuth2Params::new(
        issuer,
        OAuth2Credentials::client_secret("bq-client", SECRET),
    )
    .resolve()
    .expect("a grant")
}

fn provider(grant: OAuth2Grant) -> OAuth2Provider {
    OAuth2Provider::new(grant, None, Duration::from_secs(5)).expect("a provider")
}

fn plain() -> PulsarOptions {
    PulsarOptions {
        auth: None,
        ca_file: None,
        ..PulsarOptions::default()
    }
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[tokio::test]
async fn a_client_credentials_grant_is_posted_to_the_discovered_endpoint_and_cached() {
    let idp = Idp::start(|n| token(n, 3600)).await;
    let mut grant = grant(&idp.issuer());
    grant.audience = Some("urn:pulsar:test".into());
    grant.scope = Some("read write".into());
    let mut provider = provider(grant);
    assert_eq!(provider.auth_method_name(), "token");
    provider.initialize().await.expect("the first token");
    assert_eq!(provider.auth_data().await.expect("a token"), b"tok-1");
    assert_eq!(provider.auth_data().await.expect("a token"), b"tok-1");

    let seen = idp.seen();
    assert_eq!(seen.len(), 2, "one discovery, one token request: {seen:?}");
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("GET", "/issuer/.well-known/openid-configuration")
    );
    let request = &seen[1];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/oauth/token")
    );
    assert_eq!(
        request.content_type.as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    let form = request.form();
    let expected = [
        ("grant_type", "client_credentials"),
        ("client_id", "bq-client"),
        ("client_secret", SECRET),
        ("audience", "urn:pulsar:test"),
        ("scope", "read write"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(form, expected);
}

#[tokio::test]
async fn a_new_token_is_requested_shortly_before_the_old_one_expires() {
    let idp = Idp::start(|n| token(n, 1)).await;
    let mut provider = provider(grant(&idp.issuer()));
    assert_eq!(provider.auth_data().await.expect("a token"), b"tok-1");
    assert_eq!(provider.auth_data().await.expect("a token"), b"tok-1");
    assert_eq!(idp.token_requests().len(), 1, "the token is cached");
    // Refreshed a tenth of its lifetime (here 100 ms) ahead of the expiry.
    tokio::time::sleep(Duration::from_millis(950)).await;
    assert_eq!(provider.auth_data().await.expect("a token"), b"tok-2");
    let requests = idp.token_requests();
    assert_eq!(requests.len(), 2);
    let keys: Vec<String> = requests[1].form().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        ["grant_type", "client_id", "client_secret"],
        "no audience, no scope"
    );
    let discoveries = idp.seen().len() - requests.len();
    assert_eq!(discoveries, 1, "the token endpoint is discovered once");
}

#[tokio::test]
async fn a_refused_grant_is_an_auth_error_naming_the_endpoint_and_not_the_secret() {
    let idp = Idp::start(|_| {
        (
            401,
            serde_json::json!({"error": "invalid_client", "echo": SECRET}).to_string(),
        )
    })
    .await;
    let mut provider = provider(grant(&idp.issuer()));
    let error = provider.access_token().await.unwrap_err();
    assert_eq!(error.kind(), TransportErrorKind::Auth, "{error:?}");
    assert!(!error.is_transient());
    let text = error.to_string();
    let endpoint = format!("{}/oauth/token", idp.base);
    assert!(
        text.contains(&endpoint) && text.contains("401") && text.contains("invalid_client"),
        "{text}"
    );
    assert!(
        !text.contains(SECRET) && !format!("{error:?}").contains(SECRET),
        "{text}"
    );

    // Through the pulsar crate's trait, as the client's connect sees it.
    let refused = provider.initialize().await.unwrap_err();
    assert!(
        matches!(refused, AuthenticationError::Custom(_)),
        "{refused:?}"
    );
    let connect = PulsarError::from_client("connecting", &pulsar::Error::Authentication(refused));
    assert_eq!(connect.kind(), TransportErrorKind::Auth);
    assert!(connect.to_string().contains(&endpoint), "{connect}");
}

#[tokio::test]
async fn an_unavailable_token_endpoint_is_transient_and_a_wrong_issuer_is_not() {
    let idp = Idp::start(|_| (503, "{}".to_owned())).await;
    let mut unavailable = provider(grant(&idp.issuer()));
    let error = unavailable.access_token().await.unwrap_err();
    assert!(error.is_transient(), "{error:?}");
    let retriable = unavailable.auth_data().await.unwrap_err();
    assert!(
        matches!(retriable, AuthenticationError::Retriable(_)),
        "{retriable:?}"
    );

    let wrong = provider(grant(&format!("{}/elsewhere", idp.base)));
    let error = wrong.access_token().await.unwrap_err();
    assert_eq!(error.kind(), TransportErrorKind::Config, "{error:?}");
    assert!(
        error
            .to_string()
            .contains("/elsewhere/.well-known/openid-configuration answered 404"),
        "{error}"
    );
}

#[tokio::test]
async fn debug_never_shows_the_secret_or_the_token() {
    let idp = Idp::start(|_| token(7, 3600)).await;
    let grant = grant(&idp.issuer());
    let provider = provider(grant.clone());
    assert_eq!(provider.access_token().await.expect("a token"), "tok-7");
    let key = format!(r#"{{"client_id":"bq","client_secret":"{SECRET}"}}"#);
    let shown = [
        format!("{provider:?}"),
        format!("{grant:?}"),
        format!(
            "{:?}",
            PulsarAuth::OAuth2(OAuth2Params::new(
                "https://i",
                OAuth2Credentials::client_secret("bq", SECRET)
            ))
        ),
        format!("{:?}", OAuth2Credentials::KeyJson(key.clone())),
        format!(
            "{:?}",
            crate::auth::settings(
                &format!(
                    "pulsar://h:6650?oauth2_issuer_url=https://i&oauth2_private_key=data:application/json;base64,{}",
                    b64(&key)
                ),
                &plain()
            )
            .expect("settings")
        ),
    ];
    for text in shown {
        assert!(!text.contains(SECRET) && !text.contains("tok-7"), "{text}");
        assert!(text.contains("***"), "{text}");
    }
}

#[test]
fn the_private_key_forms_are_read() {
    let json = format!(
        r#"{{"client_id":"from-key","client_secret":"{SECRET}","issuer_url":"https://key-issuer"}}"#
    );
    let path = std::env::temp_dir().join(format!("bq-pulsar-oauth2-{}.json", std::process::id()));
    std::fs::write(&path, &json).expect("write the key");
    let from_file =
        OAuth2Credentials::private_key(&format!("file://{}", path.display())).expect("a file key");
    // The key file's issuer is used when none is given; one given wins.
    let grant = OAuth2Params::from_key(from_file.clone())
        .resolve()
        .expect("a grant");
    assert_eq!(
        (grant.client_id.as_str(), grant.client_secret.as_str()),
        ("from-key", SECRET)
    );
    assert_eq!(grant.issuer_url, "https://key-issuer");
    let grant = OAuth2Params::new("https://mine", from_file.clone())
        .resolve()
        .expect("a grant");
    assert_eq!(grant.issuer_url, "https://mine");
    std::fs::remove_file(&path).ok();
    let error = OAuth2Params::from_key(from_file).resolve().unwrap_err();
    assert_eq!(error.kind(), TransportErrorKind::Config);
    assert!(
        error.to_string().contains(&path.display().to_string()),
        "{error}"
    );

    // data: URLs, base64 (also with the + a URL query turned into a space) or percent-encoded.
    let plus = r#"{"client_id":"a>>>","client_secret":"b??"}"#;
    let encoded = b64(plus);
    assert!(encoded.contains('+'), "{encoded}");
    for reference in [
        format!("data:application/json;base64,{encoded}"),
        format!("data:application/json;base64,{}", encoded.replace('+', " ")),
        format!(
            "data:application/json,{}",
            percent_encoding::utf8_percent_encode(plus, percent_encoding::NON_ALPHANUMERIC)
        ),
    ] {
        let key = OAuth2Credentials::private_key(&reference).expect("a data key");
        let grant = OAuth2Params::new("https://i", key)
            .resolve()
            .expect("a grant");
        assert_eq!(
            (grant.client_id.as_str(), grant.client_secret.as_str()),
            ("a>>>", "b??")
        );
    }

    // What is refused, never showing the key's content.
    for reference in [
        "https://x/key.json",
        "file://",
        "data:application/json;base64",
    ] {
        let error = OAuth2Credentials::private_key(reference).unwrap_err();
        assert_eq!(error.kind(), TransportErrorKind::Config, "{reference}");
    }
    let missing_secret = OAuth2Credentials::KeyJson(r#"{"client_id":"x"}"#.into());
    let error = OAuth2Params::new("https://i", missing_secret)
        .resolve()
        .unwrap_err();
    assert!(error.to_string().contains("client_secret"), "{error}");
    let not_json = OAuth2Credentials::KeyJson(format!("client_secret={SECRET}"));
    let error = OAuth2Params::new("https://i", not_json)
        .resolve()
        .unwrap_err();
    assert!(!error.to_string().contains(SECRET), "{error}");
    let no_issuer = OAuth2Credentials::KeyJson(r#"{"client_id":"x","client_secret":"y"}"#.into());
    let error = OAuth2Params::from_key(no_issuer).resolve().unwrap_err();
    assert!(error.to_string().contains("issuer URL"), "{error}");
}

#[test]
fn the_four_url_keys_are_decoded_and_leave_the_url() {
    let key = b64(&format!(
        r#"{{"client_id":"bq","client_secret":"{SECRET}"}}"#
    ));
    let url = format!(
        "pulsar+ssl://h:6651?x=1&oauth2_issuer_url=https%3A%2F%2Fauth.example.com%2Frealm\
         &oauth2_private_key=data%3Aapplication%2Fjson%3Bbase64%2C{key}\
         &oauth2_audience=urn%3Apulsar%3Ac1&oauth2_scope=a%20b"
    );
    let settings = crate::auth::settings(&url, &plain()).expect("settings");
    assert_eq!(settings.service_url, "pulsar+ssl://h:6651?x=1");
    assert_eq!(settings.token, None);
    let grant = settings.oauth2.expect("an OAuth2 grant");
    assert_eq!(grant.issuer_url, "https://auth.example.com/realm");
    assert_eq!(
        (grant.client_id.as_str(), grant.client_secret.as_str()),
        ("bq", SECRET)
    );
    assert_eq!(grant.audience.as_deref(), Some("urn:pulsar:c1"));
    assert_eq!(grant.scope.as_deref(), Some("a b"));
}

#[test]
fn url_keys_and_options_combine_or_are_refused_clearly() {
    let key = format!(
        "data:application/json;base64,{}",
        b64(r#"{"client_id":"bq","client_secret":"x"}"#)
    );
    // Token and OAuth2 at once.
    let url =
        format!("pulsar://h:6650?token=abc&oauth2_issuer_url=https://i&oauth2_private_key={key}");
    let error = crate::auth::settings(&url, &plain()).unwrap_err();
    assert_eq!(error.kind(), TransportErrorKind::Config);
    assert!(error.to_string().contains("cannot be combined"), "{error}");
    // OAuth2 keys without a key anywhere.
    let error =
        crate::auth::settings("pulsar://h:6650?oauth2_issuer_url=https://i", &plain()).unwrap_err();
    assert!(error.to_string().contains("oauth2_private_key"), "{error}");
    // No issuer anywhere.
    let error = crate::auth::settings(
        &format!("pulsar://h:6650?oauth2_private_key={key}"),
        &plain(),
    )
    .unwrap_err();
    assert!(error.to_string().contains("issuer URL"), "{error}");
    // The URL adds to the options' OAuth2 settings, field by field.
    let mut options = plain();
    options.auth = Some(PulsarAuth::OAuth2(
        OAuth2Params::new(
            "https://from-options",
            OAuth2Credentials::client_secret("o", "p"),
        )
        .scope("s"),
    ));
    let grant = crate::auth::settings("pulsar://h:6650?oauth2_audience=aud", &options)
        .expect("settings")
        .oauth2
        .expect("a grant");
    assert_eq!(
        (grant.issuer_url.as_str(), grant.client_id.as_str()),
        ("https://from-options", "o")
    );
    assert_eq!(
        (grant.audience.as_deref(), grant.scope.as_deref()),
        (Some("aud"), Some("s"))
    );
    // The URL's OAuth2 replaces a token the options (or BQ_PULSAR_TOKEN) hold.
    let mut options = plain();
    options.auth = Some(PulsarAuth::token("env-token"));
    let settings = crate::auth::settings(
        &format!("pulsar://h:6650?oauth2_issuer_url=https://i&oauth2_private_key={key}"),
        &options,
    )
    .expect("settings");
    assert_eq!(settings.token, None);
    assert!(settings.oauth2.is_some());
}

/// A broker stand-in that records the first bytes a client sends (its CONNECT command) and
/// hangs up.
async fn recording_broker() -> (String, Arc<StdMutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("pulsar://{}", listener.local_addr().expect("address"));
    let received = Arc::new(StdMutex::new(Vec::new()));
    let log = received.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut chunk = [0u8; 4096];
            if let Ok(Ok(n)) =
                tokio::time::timeout(Duration::from_secs(2), stream.read(&mut chunk)).await
            {
                log.lock().expect("log").extend_from_slice(&chunk[..n]);
            }
        }
    });
    (url, received)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn the_native_client_sends_the_fetched_token_with_the_token_method() {
    let idp = Idp::start(|n| token(n, 3600)).await;
    let (broker, received) = recording_broker().await;
    let key = b64(&format!(
        r#"{{"client_id":"bq","client_secret":"{SECRET}"}}"#
    ));
    let url = format!(
        "{broker}?oauth2_issuer_url={}&oauth2_private_key=data:application/json;base64,{key}",
        idp.issuer()
    );
    let error = PulsarTransport::builder(&url)
        .expect("a builder")
        .options(plain())
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .await
        .expect_err("the stand-in hangs up");
    assert!(!error.to_string().contains(SECRET), "{error}");
    assert_eq!(idp.token_requests().len(), 1, "{:?}", idp.seen());
    let bytes = received.lock().expect("log").clone();
    assert!(
        contains(&bytes, b"token") && contains(&bytes, b"tok-1"),
        "{bytes:?}"
    );
    assert!(!contains(&bytes, SECRET.as_bytes()));
}

#[tokio::test]
async fn a_refused_grant_fails_the_connect_as_an_auth_error() {
    let idp = Idp::start(|_| (401, r#"{"error":"invalid_client"}"#.to_owned())).await;
    let (broker, received) = recording_broker().await;
    let url = format!(
        "{broker}?oauth2_issuer_url={}&oauth2_private_key=data:application/json;base64,{}",
        idp.issuer(),
        b64(&format!(
            r#"{{"client_id":"bq","client_secret":"{SECRET}"}}"#
        ))
    );
    let error = PulsarTransport::builder(&url)
        .expect("a builder")
        .options(plain())
        .connect()
        .await
        .expect_err("the grant is refused");
    assert_eq!(error.kind(), TransportErrorKind::Auth, "{error:?}");
    assert!(
        error.to_string().contains("/oauth/token answered 401"),
        "{error}"
    );
    assert!(!error.to_string().contains(SECRET), "{error}");
    assert!(
        received.lock().expect("log").is_empty(),
        "nothing reached the broker"
    );
}

#[tokio::test]
async fn the_admin_api_gets_the_same_access_token_as_a_bearer_token() {
    let idp = Idp::start(|n| token(n, 3600)).await;
    let provider = provider(grant(&idp.issuer()));
    // The admin API here is the same stand-in: it answers 404 (no such topic: empty).
    let peek = crate::browse::AdminPeek::new(
        &idp.base,
        "babelqueue",
        true,
        Some("static-token".into()),
        None,
        Duration::from_secs(5),
    )
    .expect("an admin client")
    .with_oauth2(provider.clone());
    assert!(!format!("{peek:?}").contains(SECRET));
    let listed = peek
        .browse("persistent://public/default/orders", 0)
        .await
        .expect("an empty listing");
    assert!(listed.is_empty());
    assert_eq!(provider.access_token().await.expect("a token"), "tok-1");
    let admin: Vec<Seen> = idp
        .seen()
        .into_iter()
        .filter(|s| s.path.starts_with("/admin/"))
        .collect();
    assert_eq!(admin.len(), 1, "{:?}", idp.seen());
    assert_eq!(admin[0].authorization.as_deref(), Some("Bearer tok-1"));
    assert_eq!(idp.token_requests().len(), 1, "one token for both");
}
