//! Who may do what: the listen check, the admin token (bearer on the API, a login and a
//! session cookie on the pages), CSRF tokens for every action, and the response headers that
//! keep a page inert (a content security policy without scripts).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest as _, Sha256};
use tower_http::set_header::SetResponseHeaderLayer;

use crate::Console;
use crate::actions::Who;
use crate::error::ConsoleError;

/// The environment variable that holds the admin token.
pub const TOKEN_ENV: &str = "BABELQUEUE_ADMIN_TOKEN";
/// The session cookie's name.
pub(crate) const COOKIE: &str = "bq_session";
/// The header a script sends the CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";
/// How long a login lasts.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// The admin token, kept as its SHA-256 (compared digest to digest: the comparison's timing
/// says nothing of the token).
#[derive(Clone)]
pub(crate) struct Token([u8; 32]);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Token {
    pub(crate) fn new(secret: &str) -> Token {
        Token(Sha256::digest(secret.as_bytes()).into())
    }

    pub(crate) fn matches(&self, candidate: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(candidate.as_bytes()).into();
        digest == self.0
    }
}

/// A fresh unguessable value: 128 bits of the SHA-256 of the operating system's randomness
/// and the clock.
pub(crate) fn random() -> String {
    let mut seed = [0u8; 32];
    seed[..16].copy_from_slice(&os_random());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    seed[16..].copy_from_slice(&nanos.to_le_bytes());
    Sha256::digest(seed)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// 16 bytes of the operating system's generator (never failing on a supported system; a
/// seeded generator stands in if it does).
fn os_random() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        bytes = fastrand::u128(..).to_le_bytes();
    }
    bytes
}

/// The logins: session id to its CSRF token; and the CSRF token of the token-less console.
#[derive(Debug)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<String, (String, Instant)>>,
    local: String,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            open: Mutex::new(HashMap::new()),
            local: random(),
        }
    }
}

impl Sessions {
    /// A new session: its id (the cookie) and its CSRF token.
    pub(crate) fn open(&self) -> (String, String) {
        let id = random();
        let csrf = random();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, (_, at)| at.elapsed() < SESSION_TTL);
        open.insert(id.clone(), (csrf.clone(), Instant::now()));
        (id, csrf)
    }

    fn csrf_of(&self, id: &str) -> Option<String> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(id)
            .filter(|(_, at)| at.elapsed() < SESSION_TTL)
            .map(|(csrf, _)| csrf.clone())
    }

    pub(crate) fn close(&self, id: &str) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.remove(id);
    }
}

/// A non-loopback address needs a token.
pub(crate) fn check_listen(addr: SocketAddr, has_token: bool) -> Result<(), ConsoleError> {
    if addr.ip().is_loopback() || has_token {
        Ok(())
    } else {
        Err(ConsoleError::TokenRequired { addr })
    }
}

/// Who a request comes from, and the CSRF token its actions must carry (`None`: a bearer
/// request, which no browser sends by itself, needs none).
#[derive(Debug, Clone)]
pub(crate) struct Auth {
    pub(crate) who: Who,
    pub(crate) csrf: Option<String>,
}

impl Auth {
    /// Whether `offered` is this request's CSRF token (always, for a bearer request).
    pub(crate) fn csrf_ok(&self, offered: Option<&str>) -> bool {
        match &self.csrf {
            None => true,
            Some(expected) => offered.is_some_and(|o| {
                let a: [u8; 32] = Sha256::digest(o.as_bytes()).into();
                let b: [u8; 32] = Sha256::digest(expected.as_bytes()).into();
                a == b
            }),
        }
    }
}

/// The value of cookie `name` in `headers`.
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

fn is_api(path: &str) -> bool {
    path.starts_with("/api/") || path == "/metrics"
}

async fn authenticate(
    State(console): State<Console>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    if path == "/login" || path.starts_with("/static/") {
        return next.run(request).await;
    }
    let inner = &console.inner;
    let headers = request.headers();
    let auth = match &inner.token {
        None => Some(Auth {
            who: Who("local"),
            csrf: Some(inner.sessions.local.clone()),
        }),
        Some(token) => match bearer(headers) {
            Some(offered) if token.matches(offered) => Some(Auth {
                who: Who("token"),
                csrf: None,
            }),
            Some(_) => None,
            None => cookie(headers, COOKIE)
                .and_then(|id| inner.sessions.csrf_of(&id))
                .map(|csrf| Auth {
                    who: Who("token"),
                    csrf: Some(csrf),
                }),
        },
    };
    let Some(auth) = auth else {
        if is_api(&path) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                axum::Json(
                    serde_json::json!({"error": "unauthorized: send Authorization: Bearer TOKEN"}),
                ),
            )
                .into_response();
        }
        return Redirect::to("/login").into_response();
    };
    // A script's action on the API carries the CSRF token in a header; a page's form carries
    // it in a field, checked by the page's handler.
    if path.starts_with("/api/") && request.method() != Method::GET {
        let offered = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !auth.csrf_ok(offered) {
            return (
                StatusCode::FORBIDDEN,
                axum::Json(serde_json::json!({"error": "missing or wrong CSRF token (header x-csrf-token; GET /api/v1/session gives it)"})),
            )
                .into_response();
        }
    }
    request.extensions_mut().insert(auth);
    next.run(request).await
}

/// The console's routes behind authentication and the security headers.
pub(crate) fn layers(router: axum::Router, console: Console) -> axum::Router {
    router
        .layer(middleware::from_fn_with_state(console, authenticate))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(1 << 20))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; style-src 'self'; img-src 'self' data:; \
                 form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            ),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_loopback_listener_needs_a_token() {
        let rows = [
            ("127.0.0.1:8025", false, true),
            ("[::1]:8025", false, true),
            ("0.0.0.0:8025", false, false),
            ("192.168.1.5:8025", false, false),
            ("0.0.0.0:8025", true, true),
        ];
        for (addr, token, ok) in rows {
            let addr: SocketAddr = addr.parse().unwrap();
            assert_eq!(check_listen(addr, token).is_ok(), ok, "{addr} {token}");
        }
    }

    #[test]
    fn a_token_matches_itself_only_and_never_prints() {
        let token = Token::new("s3cret-token");
        assert!(token.matches("s3cret-token"));
        assert!(!token.matches("s3cret-toke"));
        assert!(!format!("{token:?}").contains("s3cret"));
    }

    #[test]
    fn random_values_differ() {
        assert_ne!(random(), random());
        assert_eq!(random().len(), 32);
    }

    #[test]
    fn a_cookie_is_read_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; bq_session=xyz; b=2"),
        );
        assert_eq!(cookie(&headers, COOKIE).as_deref(), Some("xyz"));
        assert_eq!(cookie(&headers, "c"), None);
    }
}
