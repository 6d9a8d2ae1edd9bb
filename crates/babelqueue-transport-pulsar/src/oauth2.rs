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

use base64::Engine as _;

use crate::error::PulsarError;

mod provider;
pub(crate) use provider::OAuth2Provider;

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

#[cfg(test)]
mod tests;
