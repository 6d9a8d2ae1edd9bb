//! OAuth2 client credentials, the way Pulsar's own clients authenticate with an identity
//! provider: the client exchanges a client id and secret for an access token at the issuer's
//! token endpoint and hands that token to the broker with the `token` auth method.
//!
//! * [`OAuth2Params`]: the issuer URL, the credentials ([`OAuth2Credentials`]: a JSON "private
//!   key" `{"client_id": .., "client_secret": .., "issuer_url"?: ..}` named by `file:///path`
//!   or `data:application/json;base64,...`, or the id and secret given directly), the
//!   optional audience and scope. The URL query keys `oauth2_issuer_url`,
//!   `oauth2_private_key`, `oauth2_audience` and `oauth2_scope` set them too.
//! * [`OAuth2Grant`]: the same with the key read, what the client is built with
//!   ([`ClientSettings::oauth2`](crate::ClientSettings::oauth2)).
//! * The token source behind the client: it reads the token endpoint from
//!   `{issuer_url}/.well-known/openid-configuration`, POSTs a `client_credentials` grant as a
//!   form, keeps the `access_token` and asks for a new one shortly before `expires_in` runs
//!   out.
//!
//! The `pulsar` crate's own `auth-oauth2` feature is not used: it brings a second TLS provider
//! (`ring`) into the build. The requests go through `reqwest` with the crate's rustls setup
//! (the `ca_file` certificates are trusted for the issuer too), never follow redirects, and no
//! error or `Debug` output shows the secret or a token.
//!
//! ```
//! use babelqueue_transport_pulsar::PulsarAuth;
//! use babelqueue_transport_pulsar::oauth2::{OAuth2Credentials, OAuth2Params};
//!
//! let params = OAuth2Params::new(
//!     "https://auth.example.com/",
//!     OAuth2Credentials::client_secret("my-client", "s3cr3t"),
//! )
//! .audience("urn:pulsar:my-cluster");
//! let auth = PulsarAuth::OAuth2(params);
//! assert!(!format!("{auth:?}").contains("s3cr3t"));
//! ```

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine as _;
use pulsar::authentication::Authentication;
use pulsar::error::AuthenticationError;
use tokio::sync::Mutex;

use crate::error::PulsarError;

/// Where the client id and secret come from.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OAuth2Credentials {
    /// A JSON key file, read when the client connects (`file:///path`).
    KeyFile(PathBuf),
    /// The JSON key itself (what a `data:` URL carries, decoded).
    KeyJson(String),
    /// The client id and secret, given directly.
    ClientSecret {
        /// The OAuth2 client id.
        client_id: String,
        /// The OAuth2 client secret.
        client_secret: String,
    },
}

impl OAuth2Credentials {
    /// The id and secret given directly.
    pub fn client_secret(
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> OAuth2Credentials {
        OAuth2Credentials::ClientSecret {
            client_id: client_id.into(),
            client_secret: client_secret.into(),
        }
    }

    /// Reads a private key reference the way Pulsar spells it: `file:///path` (read when the
    /// client connects) or a `data:` URL (`data:application/json;base64,...`, or percent-encoded
    /// JSON after the comma). Spaces in the base64 text are read as `+`, which a URL query
    /// turns into spaces when the key is not percent-encoded.
    ///
    /// ```
    /// use babelqueue_transport_pulsar::oauth2::OAuth2Credentials;
    /// let key = OAuth2Credentials::private_key("file:///run/secrets/pulsar.json").unwrap();
    /// assert_eq!(key, OAuth2Credentials::KeyFile("/run/secrets/pulsar.json".into()));
    /// let key = OAuth2Credentials::private_key("data:application/json;base64,e30=").unwrap();
    /// assert_eq!(key, OAuth2Credentials::KeyJson("{}".into()));
    /// assert!(OAuth2Credentials::private_key("https://example.com/key.json").is_err());
    /// ```
    pub fn private_key(reference: &str) -> Result<OAuth2Credentials, PulsarError> {
        let reference = reference.trim();
        if let Some(path) = reference.strip_prefix("file://") {
            if path.is_empty() {
                return Err(PulsarError::Config(
                    "the OAuth2 private key file:// URL names no file".into(),
                ));
            }
            return Ok(OAuth2Credentials::KeyFile(PathBuf::from(path)));
        }
        if let Some(rest) = reference.strip_prefix("data:") {
            let (header, data) = rest.split_once(',').ok_or_else(|| {
                PulsarError::Config("the OAuth2 private key data: URL has no comma".into())
            })?;
            let bytes = if header.ends_with(";base64") {
                let text: String = data
                    .chars()
                    .map(|c| if c == ' ' { '+' } else { c })
                    .collect();
                base64::engine::general_purpose::STANDARD
                    .decode(text.trim())
                    .map_err(|e| {
                        PulsarError::Config(format!(
                            "the OAuth2 private key data: URL is not valid base64: {e}"
                        ))
                    })?
            } else {
                percent_encoding::percent_decode_str(data).collect()
            };
            let json = String::from_utf8(bytes).map_err(|_| {
                PulsarError::Config("the OAuth2 private key data: URL is not UTF-8".into())
            })?;
            return Ok(OAuth2Credentials::KeyJson(json));
        }
        Err(PulsarError::Config(
            "the OAuth2 private key must be a file:///path or a data: URL".into(),
        ))
    }
}

impl fmt::Debug for OAuth2Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OAuth2Credentials::KeyFile(path) => f.debug_tuple("KeyFile").field(path).finish(),
            OAuth2Credentials::KeyJson(_) => f.write_str("KeyJson(***)"),
            OAuth2Credentials::ClientSecret { client_id, .. } => f
                .debug_struct("ClientSecret")
                .field("client_id", client_id)
                .field("client_secret", &"***")
                .finish(),
        }
    }
}

/// OAuth2 client credentials settings ([`PulsarAuth::OAuth2`](crate::PulsarAuth::OAuth2)).
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct OAuth2Params {
    /// The issuer (its discovery document is `{issuer_url}/.well-known/openid-configuration`).
    /// `None` takes the key file's `issuer_url`.
    pub issuer_url: Option<String>,
    /// The client id and secret, or where to read them.
    pub credentials: OAuth2Credentials,
    /// The `audience` form field of the token request, if any.
    pub audience: Option<String>,
    /// The `scope` form field of the token request, if any.
    pub scope: Option<String>,
}

impl OAuth2Params {
    /// Settings for `issuer_url` with `credentials`, no audience and no scope.
    pub fn new(issuer_url: impl Into<String>, credentials: OAuth2Credentials) -> OAuth2Params {
        OAuth2Params {
            issuer_url: Some(issuer_url.into()),
            credentials,
            audience: None,
            scope: None,
        }
    }

    /// Settings whose issuer is the one the key file names (`issuer_url` in the JSON).
    pub fn from_key(credentials: OAuth2Credentials) -> OAuth2Params {
        OAuth2Params {
            issuer_url: None,
            credentials,
            audience: None,
            scope: None,
        }
    }

    /// Sets the audience.
    #[must_use]
    pub fn audience(mut self, audience: impl Into<String>) -> OAuth2Params {
        self.audience = Some(audience.into());
        self
    }

    /// Sets the scope.
    #[must_use]
    pub fn scope(mut self, scope: impl Into<String>) -> OAuth2Params {
        self.scope = Some(scope.into());
        self
    }

    /// The grant, with the key file read and parsed. The issuer given here wins over the key
    /// file's. Errors name the file, never its content.
    pub fn resolve(&self) -> Result<OAuth2Grant, PulsarError> {
        let (client_id, client_secret, key_issuer) = match &self.credentials {
            OAuth2Credentials::ClientSecret {
                client_id,
                client_secret,
            } => (client_id.clone(), client_secret.clone(), None),
            OAuth2Credentials::KeyFile(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    PulsarError::Config(format!(
                        "cannot read the OAuth2 private key file {}: {e}",
                        path.display()
                    ))
                })?;
                parse_key(
                    &text,
                    &format!("the OAuth2 private key file {}", path.display()),
                )?
            }
            OAuth2Credentials::KeyJson(text) => {
                parse_key(text, "the OAuth2 private key data: URL")?
            }
        };
        let issuer_url = self
            .issuer_url
            .clone()
            .or(key_issuer)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                PulsarError::Config(
                    "OAuth2 needs an issuer URL (oauth2_issuer_url, or issuer_url in the key)"
                        .into(),
                )
            })?;
        if client_id.is_empty() || client_secret.is_empty() {
            return Err(PulsarError::Config(
                "the OAuth2 client id and secret must not be empty".into(),
            ));
        }
        Ok(OAuth2Grant {
            issuer_url,
            client_id,
            client_secret,
            audience: self.audience.clone().filter(|s| !s.is_empty()),
            scope: self.scope.clone().filter(|s| !s.is_empty()),
        })
    }
}

/// `client_id`, `client_secret` and the optional `issuer_url` of a JSON key.
fn parse_key(text: &str, what: &str) -> Result<(String, String, Option<String>), PulsarError> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| PulsarError::Config(format!("{what} is not JSON: {e}")))?;
    let field = |name: &str| value.get(name).and_then(serde_json::Value::as_str);
    let (Some(id), Some(secret)) = (field("client_id"), field("client_secret")) else {
        return Err(PulsarError::Config(format!(
            "{what} needs the string fields client_id and client_secret"
        )));
    };
    Ok((
        id.to_owned(),
        secret.to_owned(),
        field("issuer_url").map(str::to_owned),
    ))
}

/// OAuth2 client credentials with the key read: what the client requests tokens with.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuth2Grant {
    /// The issuer URL.
    pub issuer_url: String,
    /// The client id.
    pub client_id: String,
    /// The client secret (never shown by `Debug`).
    pub client_secret: String,
    /// The audience, if any.
    pub audience: Option<String>,
    /// The scope, if any.
    pub scope: Option<String>,
}

impl fmt::Debug for OAuth2Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth2Grant")
            .field(
                "issuer_url",
                &babelqueue_core::redact::redact(&self.issuer_url),
            )
            .field("client_id", &self.client_id)
            .field("client_secret", &"***")
            .field("audience", &self.audience)
            .field("scope", &self.scope)
            .finish()
    }
}

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
        let mut http = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(pem) = ca_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| PulsarError::Config(format!("CA certificates: {e}")))?;
            for certificate in certificates {
                http = http.add_root_certificate(certificate);
            }
        }
        let http = http
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

#[cfg(test)]
#[path = "oauth2_tests.rs"]
mod tests;
