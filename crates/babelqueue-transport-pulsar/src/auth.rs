//! Authentication and TLS settings: what a Pulsar URL's query and the environment add to
//! [`PulsarOptions`], and [`ClientSettings`], what the client is then built with (the seam the
//! offline tests read, since the local broker runs without authentication).
//!
//! Query keys (percent-decoded): `token` (a JWT, `token:<jwt>`, or `file:///path` to read it
//! from), `ca_file` (a PEM file of CA certificates to trust) and `tls_trust_certs_file` (the
//! deprecated older name of `ca_file`). `cert_file` / `key_file` are refused: the `pulsar`
//! crate (6.9) cannot present a client certificate. OAuth2 client credentials
//! ([`crate::oauth2`]): `oauth2_issuer_url`, `oauth2_private_key` (`file:///path` or a `data:`
//! URL), `oauth2_audience`, `oauth2_scope`; they cannot be combined with `token`.

use std::fmt;
use std::path::PathBuf;

use crate::client::PulsarOptions;
use crate::error::PulsarError;
use crate::oauth2::{OAuth2Credentials, OAuth2Grant, OAuth2Params};

/// The environment variable holding the token `connect(url)` and the CLI authenticate with
/// when neither the URL nor the options name one (a JWT, `token:<jwt>` or `file:///path`).
pub const TOKEN_ENV: &str = "BQ_PULSAR_TOKEN";

/// How the client authenticates with the broker.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PulsarAuth {
    /// A JWT sent with the `token` auth method.
    Token(String),
    /// A file holding the JWT, read when the client connects.
    TokenFile(PathBuf),
    /// OAuth2 client credentials: the client requests access tokens from the issuer and sends
    /// them with the `token` auth method ([`crate::oauth2`]).
    OAuth2(OAuth2Params),
}

impl PulsarAuth {
    /// Reads a token the way Pulsar's own clients spell one: `file:///path` names a file that
    /// holds it, `token:<jwt>` is the JWT, anything else is the JWT itself.
    ///
    /// ```
    /// use babelqueue_transport_pulsar::PulsarAuth;
    /// assert_eq!(PulsarAuth::token("token:abc"), PulsarAuth::Token("abc".into()));
    /// assert_eq!(
    ///     PulsarAuth::token("file:///run/secrets/jwt"),
    ///     PulsarAuth::TokenFile("/run/secrets/jwt".into())
    /// );
    /// assert!(!format!("{:?}", PulsarAuth::token("abc")).contains("abc"));
    /// ```
    pub fn token(text: &str) -> PulsarAuth {
        let text = text.trim();
        if let Some(path) = text.strip_prefix("file://") {
            PulsarAuth::TokenFile(PathBuf::from(path))
        } else {
            PulsarAuth::Token(text.strip_prefix("token:").unwrap_or(text).to_owned())
        }
    }
}

impl fmt::Debug for PulsarAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PulsarAuth::Token(_) => f.write_str("Token(***)"),
            PulsarAuth::TokenFile(path) => f.debug_tuple("TokenFile").field(path).finish(),
            // `OAuth2Params`' Debug masks the secret.
            PulsarAuth::OAuth2(params) => f.debug_tuple("OAuth2").field(params).finish(),
        }
    }
}

/// What the client is built with: the service URL without BabelQueue's query keys, the token
/// or the OAuth2 grant, and the extra CA certificates (PEM).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// The URL handed to the `pulsar` crate.
    pub service_url: String,
    /// The JWT sent with the `token` auth method, when the client authenticates with one.
    pub token: Option<String>,
    /// The PEM certificates trusted beside the webpki roots.
    pub ca_pem: Option<Vec<u8>>,
    /// The OAuth2 client credentials the client requests its tokens with, when it
    /// authenticates with OAuth2 (the key file read).
    pub oauth2: Option<OAuth2Grant>,
}

impl fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSettings")
            .field(
                "service_url",
                &babelqueue_core::redact::redact(&self.service_url),
            )
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .field("oauth2", &self.oauth2)
            .finish()
    }
}

/// Splits `url` into the service URL and its BabelQueue query keys, applied onto `options`
/// (what the URL names wins over the options).
pub(crate) fn apply_url(url: &str, options: &mut PulsarOptions) -> Result<String, PulsarError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(url.to_owned());
    };
    let mut rest = Vec::new();
    let mut token = None;
    let mut oauth2 = OAuth2Keys::default();
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let value = value.into_owned();
        match key.as_ref() {
            "token" => token = Some(PulsarAuth::token(&value)),
            "oauth2_issuer_url" => oauth2.issuer_url = Some(value),
            "oauth2_private_key" => oauth2.private_key = Some(value),
            "oauth2_audience" => oauth2.audience = Some(value),
            "oauth2_scope" => oauth2.scope = Some(value),
            "ca_file" | "tls_trust_certs_file" => options.ca_file = Some(PathBuf::from(value)),
            "cert_file" | "key_file" => {
                return Err(PulsarError::Config(format!(
                    "{key}: the pulsar crate cannot present a client certificate (mutual TLS); \
                     authenticate with token= instead"
                )));
            }
            _ => rest.push((key.into_owned(), value)),
        }
    }
    if oauth2.any() {
        if token.is_some() {
            return Err(PulsarError::Config(
                "token= and the oauth2_* keys cannot be combined: choose one authentication".into(),
            ));
        }
        options.auth = Some(PulsarAuth::OAuth2(oauth2.onto(options.auth.take())?));
    } else if token.is_some() {
        options.auth = token;
    }
    if rest.is_empty() {
        return Ok(base.to_owned());
    }
    let kept = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(rest)
        .finish();
    Ok(format!("{base}?{kept}"))
}

/// The settings for `url` and `options`, with the token file and the CA file read.
pub(crate) fn settings(url: &str, options: &PulsarOptions) -> Result<ClientSettings, PulsarError> {
    let mut options = options.clone();
    let service_url = apply_url(url, &mut options)?;
    let mut oauth2 = None;
    let token = match options.auth {
        None => None,
        Some(PulsarAuth::OAuth2(params)) => {
            oauth2 = Some(params.resolve()?);
            None
        }
        Some(PulsarAuth::Token(jwt)) => Some(jwt),
        Some(PulsarAuth::TokenFile(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                PulsarError::Config(format!(
                    "cannot read the token file {}: {e}",
                    path.display()
                ))
            })?;
            Some(text.trim().to_owned())
        }
    };
    if token.as_deref().is_some_and(str::is_empty) {
        return Err(PulsarError::Config("the Pulsar token is empty".into()));
    }
    let ca_pem = match &options.ca_file {
        Some(file) => Some(std::fs::read(file).map_err(|e| {
            PulsarError::Config(format!("cannot read the CA file {}: {e}", file.display()))
        })?),
        None => None,
    };
    Ok(ClientSettings {
        service_url,
        token,
        ca_pem,
        oauth2,
    })
}

/// The `oauth2_*` query keys of a URL.
#[derive(Default)]
struct OAuth2Keys {
    issuer_url: Option<String>,
    private_key: Option<String>,
    audience: Option<String>,
    scope: Option<String>,
}

impl OAuth2Keys {
    fn any(&self) -> bool {
        self.issuer_url.is_some()
            || self.private_key.is_some()
            || self.audience.is_some()
            || self.scope.is_some()
    }

    /// The keys over the OAuth2 settings of the options, if any (the URL wins field by field);
    /// without a private key in either, an error.
    fn onto(self, current: Option<PulsarAuth>) -> Result<OAuth2Params, PulsarError> {
        let current = match current {
            Some(PulsarAuth::OAuth2(params)) => Some(params),
            _ => None,
        };
        let credentials = match (self.private_key, &current) {
            (Some(key), _) => OAuth2Credentials::private_key(&key)?,
            (None, Some(params)) => params.credentials.clone(),
            (None, None) => {
                return Err(PulsarError::Config(
                    "the oauth2_* keys need oauth2_private_key (file:///path or a data: URL)"
                        .into(),
                ));
            }
        };
        let mut params = current.unwrap_or_else(|| OAuth2Params::from_key(credentials.clone()));
        params.credentials = credentials;
        if self.issuer_url.is_some() {
            params.issuer_url = self.issuer_url;
        }
        if self.audience.is_some() {
            params.audience = self.audience;
        }
        if self.scope.is_some() {
            params.scope = self.scope;
        }
        Ok(params)
    }
}

/// `http` trusting the PEM certificates `ca_pem` (what `ca_file` names) beside the webpki
/// roots: the admin API's client and the OAuth2 identity provider's.
pub(crate) fn trusting(
    mut http: reqwest::ClientBuilder,
    ca_pem: Option<&[u8]>,
) -> Result<reqwest::ClientBuilder, PulsarError> {
    if let Some(pem) = ca_pem {
        let certificates = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| PulsarError::Config(format!("CA certificates: {e}")))?;
        for certificate in certificates {
            http = http.add_root_certificate(certificate);
        }
    }
    Ok(http)
}

/// The token [`TOKEN_ENV`] names, if set and not empty.
pub(crate) fn auth_from_env() -> Option<PulsarAuth> {
    std::env::var(TOKEN_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| PulsarAuth::token(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> PulsarOptions {
        PulsarOptions {
            auth: None,
            ca_file: None,
            ..PulsarOptions::default()
        }
    }

    fn temp_file(name: &str, text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("bq-pulsar-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write a temporary file");
        path
    }

    #[test]
    fn a_token_in_the_url_reaches_the_client_and_leaves_the_url() {
        let s = settings("pulsar+ssl://h:6651?token=ey.J%2Bw", &plain()).unwrap();
        assert_eq!(s.service_url, "pulsar+ssl://h:6651");
        assert_eq!(s.token.as_deref(), Some("ey.J+w"));
        let shown = format!("{s:?}");
        assert!(!shown.contains("ey.J"), "{shown}");
    }

    #[test]
    fn the_url_wins_over_the_options_and_keeps_other_keys() {
        let mut options = plain();
        options.auth = Some(PulsarAuth::token("from-options"));
        let s = settings("pulsar://h:6650?token=token:from-url&x=1", &options).unwrap();
        assert_eq!(s.token.as_deref(), Some("from-url"));
        assert_eq!(s.service_url, "pulsar://h:6650?x=1");
        let s = settings("pulsar://h:6650", &options).unwrap();
        assert_eq!(s.token.as_deref(), Some("from-options"));
    }

    #[test]
    fn a_token_file_is_read_and_trimmed() {
        let path = temp_file("jwt", "  abc.def.ghi\n");
        let url = format!("pulsar://h:6650?token=file://{}", path.display());
        let s = settings(&url, &plain()).unwrap();
        assert_eq!(s.token.as_deref(), Some("abc.def.ghi"));
        std::fs::remove_file(&path).ok();
        let err = settings(&url, &plain()).unwrap_err();
        assert!(
            err.to_string().contains("cannot read the token file"),
            "{err}"
        );
        assert!(
            settings("pulsar://h?token=", &plain()).is_err(),
            "an empty token"
        );
    }

    #[test]
    fn ca_file_and_its_old_name_read_the_pem() {
        let path = temp_file("ca", "-----BEGIN CERTIFICATE-----\n");
        for key in ["ca_file", "tls_trust_certs_file"] {
            let url = format!("pulsar+ssl://h:6651?{key}={}", path.display());
            let s = settings(&url, &plain()).unwrap();
            assert_eq!(
                s.ca_pem.as_deref(),
                Some(&b"-----BEGIN CERTIFICATE-----\n"[..])
            );
            assert_eq!(s.service_url, "pulsar+ssl://h:6651");
        }
        std::fs::remove_file(&path).ok();
        let err = settings("pulsar+ssl://h?ca_file=/nonexistent/ca.pem", &plain()).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
    }

    #[test]
    fn client_certificates_are_refused_by_name() {
        let err =
            settings("pulsar+ssl://h?cert_file=/c.pem&key_file=/k.pem", &plain()).unwrap_err();
        assert!(err.to_string().contains("client certificate"), "{err}");
    }
}
