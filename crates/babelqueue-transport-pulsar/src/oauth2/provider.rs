//! The token source: discovery, the client credentials grant, and the token cache.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pulsar::authentication::Authentication;
use pulsar::error::AuthenticationError;
use tokio::sync::Mutex;

use super::OAuth2Grant;
use crate::error::PulsarError;

/// Requests and caches access tokens for one grant; clones share the cache.
#[derive(Clone)]
pub(crate) struct OAuth2Provider {
    inner: Arc<Inner>,
}

struct Inner {
    grant: OAuth2Grant,
    http: reqwest::Client,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    token_endpoint: Option<String>,
    token: Option<Cached>,
}

struct Cached {
    access_token: String,
    /// When to ask for a new token (`None`: the token did not say when it expires).
    refresh_at: Option<Instant>,
}

impl fmt::Debug for OAuth2Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth2Provider")
            .field("grant", &self.inner.grant)
            .finish_non_exhaustive()
    }
}

/// The most a token is refreshed ahead of its expiry (else a tenth of its lifetime).
const REFRESH_AHEAD: Duration = Duration::from_secs(60);

impl OAuth2Provider {
    /// A provider for `grant`, trusting `ca_pem` beside the webpki roots; each request may
    /// take `timeout`.
    pub(crate) fn new(
        grant: OAuth2Grant,
        ca_pem: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<OAuth2Provider, PulsarError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none());
        let http = crate::auth::trusting(http, ca_pem)?
            .build()
            .map_err(|e| PulsarError::Config(format!("OAuth2 HTTP client: {e}")))?;
        Ok(OAuth2Provider {
            inner: Arc::new(Inner {
                grant,
                http,
                state: Mutex::new(State::default()),
            }),
        })
    }

    /// The cached access token, or a new one when there is none or it is about to expire.
    pub(crate) async fn access_token(&self) -> Result<String, PulsarError> {
        let mut state = self.inner.state.lock().await;
        if let Some(cached) = &state.token
            && cached.refresh_at.is_none_or(|at| Instant::now() < at)
        {
            return Ok(cached.access_token.clone());
        }
        let endpoint = match &state.token_endpoint {
            Some(endpoint) => endpoint.clone(),
            None => {
                let endpoint = self.discover().await?;
                state.token_endpoint = Some(endpoint.clone());
                endpoint
            }
        };
        let cached = self.request_token(&endpoint).await?;
        let token = cached.access_token.clone();
        state.token = Some(cached);
        Ok(token)
    }

    /// The token endpoint the issuer's discovery document names.
    async fn discover(&self) -> Result<String, PulsarError> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.inner.grant.issuer_url.trim_end_matches('/')
        );
        let shown = babelqueue_core::redact::redact(&url);
        let response = self
            .inner
            .http
            .get(&url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| request_error(&shown, e))?;
        let status = response.status();
        if !status.is_success() {
            let text = format!("the OAuth2 discovery document {shown} answered {status}");
            return Err(if is_transient_status(status) {
                PulsarError::Connection(text)
            } else {
                PulsarError::Config(text)
            });
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| request_error(&shown, e))?;
        serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("token_endpoint")?.as_str().map(str::to_owned))
            .ok_or_else(|| {
                PulsarError::Client(format!(
                    "the OAuth2 discovery document {shown} names no token_endpoint"
                ))
            })
    }

    /// POSTs the client credentials grant to `endpoint`.
    async fn request_token(&self, endpoint: &str) -> Result<Cached, PulsarError> {
        let grant = &self.inner.grant;
        let shown = babelqueue_core::redact::redact(endpoint);
        let requested = Instant::now();
        let response = self
            .inner
            .http
            .post(endpoint)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(token_form(grant))
            .send()
            .await
            .map_err(|e| request_error(&shown, e))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| request_error(&shown, e))?;
        let json = serde_json::from_slice::<serde_json::Value>(&body).ok();
        if !status.is_success() {
            // The OAuth2 error code (`invalid_client`, ...) says why; nothing else of the
            // answer is shown.
            let code = json
                .as_ref()
                .and_then(|v| v.get("error")?.as_str())
                .map(|c| format!(" ({})", c.chars().take(64).collect::<String>()))
                .unwrap_or_default();
            let text = format!("the OAuth2 token endpoint {shown} answered {status}{code}");
            return Err(if is_transient_status(status) {
                PulsarError::Connection(text)
            } else {
                PulsarError::Auth(text)
            });
        }
        let json = json.ok_or_else(|| {
            PulsarError::Client(format!(
                "the OAuth2 token endpoint {shown} answered no JSON"
            ))
        })?;
        let access_token = json
            .get("access_token")
            .and_then(serde_json::Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                PulsarError::Client(format!(
                    "the OAuth2 token endpoint {shown} answered no access_token"
                ))
            })?
            .to_owned();
        let lifetime = json
            .get("expires_in")
            .and_then(|v| v.as_u64().or_else(|| v.as_str()?.trim().parse().ok()));
        // A lifetime past what an Instant can hold never needs a refresh.
        let refresh_at = lifetime.and_then(|seconds| {
            let lifetime = Duration::from_secs(seconds);
            requested.checked_add(lifetime - (lifetime / 10).min(REFRESH_AHEAD))
        });
        Ok(Cached {
            access_token,
            refresh_at,
        })
    }
}

/// The form body of the client credentials grant.
fn token_form(grant: &OAuth2Grant) -> String {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "client_credentials")
        .append_pair("client_id", &grant.client_id)
        .append_pair("client_secret", &grant.client_secret);
    if let Some(audience) = &grant.audience {
        form.append_pair("audience", audience);
    }
    if let Some(scope) = &grant.scope {
        form.append_pair("scope", scope);
    }
    form.finish()
}

/// 5xx and 429 may pass; other refusals will not.
fn is_transient_status(status: reqwest::StatusCode) -> bool {
    status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS
}

fn request_error(shown: &str, e: reqwest::Error) -> PulsarError {
    // reqwest's text names the URL; ours is already redacted.
    let (timeout, connection) = (
        e.is_timeout(),
        e.is_connect() || e.is_request() || e.is_body(),
    );
    let text = format!("OAuth2 request to {shown}: {}", e.without_url());
    if timeout {
        PulsarError::Timeout(text)
    } else if connection {
        PulsarError::Connection(text)
    } else {
        PulsarError::Client(text)
    }
}

#[async_trait]
impl Authentication for OAuth2Provider {
    fn auth_method_name(&self) -> String {
        "token".to_owned()
    }

    /// Fetches the first token, so a refused grant fails the connect.
    async fn initialize(&mut self) -> Result<(), AuthenticationError> {
        self.access_token()
            .await
            .map(drop)
            .map_err(|e| to_pulsar(&e))
    }

    async fn auth_data(&mut self) -> Result<Vec<u8>, AuthenticationError> {
        self.access_token()
            .await
            .map(String::into_bytes)
            .map_err(|e| to_pulsar(&e))
    }
}

/// A transient failure may pass on the client's next connection attempt.
fn to_pulsar(e: &PulsarError) -> AuthenticationError {
    if e.is_transient() {
        AuthenticationError::Retriable(e.to_string())
    } else {
        AuthenticationError::Custom(e.to_string())
    }
}
