//! The managed-identity link: a token from the identity Azure gives the machine.
//!
//! * App Service, Functions, Container Apps: the platform sets `IDENTITY_ENDPOINT` and
//!   `IDENTITY_HEADER`; the token is a `GET {IDENTITY_ENDPOINT}?api-version=2019-08-01&resource=…`
//!   carrying the header value as `X-IDENTITY-HEADER`.
//! * A VM or a scale set: the instance metadata service (IMDS),
//!   `GET http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=…`
//!   with `Metadata: true`. Off Azure nothing answers there, so the connection is given
//!   [`IMDS_CONNECT_TIMEOUT`] and then fails with "no managed identity here".
//!
//! `AZURE_POD_IDENTITY_AUTHORITY_HOST` (the variable Azure's own SDKs read for it) moves the IMDS
//! host elsewhere, e.g. `http://127.0.0.1:9` where a test must keep its traffic on loopback.
//!
//! A user-assigned identity is picked by its client id (`client_id=`, from `AZURE_CLIENT_ID`).
//! Both answer `{"access_token": …, "expires_on": <epoch seconds, a number or a string>}`.

use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use super::{AccessToken, TokenCredential, epoch_seconds, resource_of, text};
use crate::error::AsbError;

/// The instance metadata service's token endpoint.
pub const IMDS_ENDPOINT: &str = "http://169.254.169.254/metadata/identity/oauth2/token";

/// The variable naming another IMDS host (its scheme and authority; the token path is added).
pub const IMDS_HOST_ENV: &str = "AZURE_POD_IDENTITY_AUTHORITY_HOST";

/// How long a connection to the identity endpoint may take: IMDS answers at once on Azure, and
/// nothing answers off Azure.
pub const IMDS_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a whole token request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the managed identity's token comes from.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManagedIdentitySource {
    /// App Service, Functions, Container Apps: `IDENTITY_ENDPOINT` and `IDENTITY_HEADER`.
    AppService {
        /// The endpoint URL.
        endpoint: String,
        /// The value sent as `X-IDENTITY-HEADER` (a secret: never shown).
        header: String,
    },
    /// A VM's instance metadata service (default [`IMDS_ENDPOINT`]).
    Imds {
        /// The endpoint URL.
        endpoint: String,
    },
}

impl fmt::Debug for ManagedIdentitySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManagedIdentitySource::AppService { endpoint, .. } => f
                .debug_struct("AppService")
                .field("endpoint", endpoint)
                .field("header", &"***")
                .finish(),
            ManagedIdentitySource::Imds { endpoint } => {
                f.debug_struct("Imds").field("endpoint", endpoint).finish()
            }
        }
    }
}

/// The GET that asks a managed identity endpoint for a token.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenRequest {
    /// The endpoint with its query (`api-version`, `resource`, `client_id`).
    pub url: String,
    /// The headers (`Metadata: true`, or `X-IDENTITY-HEADER`, whose value `Debug` hides).
    pub headers: Vec<(&'static str, String)>,
}

impl fmt::Debug for TokenRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| *name).collect();
        f.debug_struct("TokenRequest")
            .field("url", &self.url)
            .field("headers", &names)
            .finish()
    }
}

/// A token from the machine's managed identity.
///
/// ```
/// use babelqueue_transport_asb::credential::{ManagedIdentityCredential, SERVICE_BUS_SCOPE};
/// let vars = |name: &str| match name {
///     "IDENTITY_ENDPOINT" => Some("http://127.0.0.1:41000/msi/token".to_owned()),
///     "IDENTITY_HEADER" => Some("h-secret".to_owned()),
///     _ => None,
/// };
/// let credential = ManagedIdentityCredential::from_vars(vars);
/// let request = credential.request(SERVICE_BUS_SCOPE).unwrap();
/// assert_eq!(
///     request.url,
///     "http://127.0.0.1:41000/msi/token?api-version=2019-08-01&resource=https%3A%2F%2Fservicebus.azure.net"
/// );
/// assert_eq!(request.headers, [("X-IDENTITY-HEADER", "h-secret".to_owned())]);
/// assert!(!format!("{credential:?}{request:?}").contains("h-secret"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedIdentityCredential {
    /// The endpoint.
    pub source: ManagedIdentitySource,
    /// A user-assigned identity's client id; `None` for the system-assigned identity.
    pub client_id: Option<String>,
    /// How long connecting to the endpoint may take.
    pub connect_timeout: Duration,
}

impl ManagedIdentityCredential {
    /// App Service style when `IDENTITY_ENDPOINT` and `IDENTITY_HEADER` are set, else IMDS;
    /// `AZURE_CLIENT_ID` picks a user-assigned identity.
    pub fn from_env() -> ManagedIdentityCredential {
        ManagedIdentityCredential::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`from_env`](Self::from_env), reading the variables through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> ManagedIdentityCredential {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let source = match (get("IDENTITY_ENDPOINT"), get("IDENTITY_HEADER")) {
            (Some(endpoint), Some(header)) => {
                ManagedIdentitySource::AppService { endpoint, header }
            }
            _ => ManagedIdentitySource::Imds {
                endpoint: get(IMDS_HOST_ENV).map_or_else(
                    || IMDS_ENDPOINT.to_owned(),
                    |host| {
                        format!(
                            "{}/metadata/identity/oauth2/token",
                            host.trim().trim_end_matches('/')
                        )
                    },
                ),
            },
        };
        ManagedIdentityCredential {
            source,
            client_id: get("AZURE_CLIENT_ID"),
            connect_timeout: IMDS_CONNECT_TIMEOUT,
        }
    }

    /// The IMDS at `endpoint` (a VM's is [`IMDS_ENDPOINT`]), the system-assigned identity.
    pub fn imds(endpoint: impl Into<String>) -> ManagedIdentityCredential {
        ManagedIdentityCredential {
            source: ManagedIdentitySource::Imds {
                endpoint: endpoint.into(),
            },
            client_id: None,
            connect_timeout: IMDS_CONNECT_TIMEOUT,
        }
    }

    /// An App Service style endpoint with its `X-IDENTITY-HEADER` value.
    pub fn app_service(
        endpoint: impl Into<String>,
        header: impl Into<String>,
    ) -> ManagedIdentityCredential {
        ManagedIdentityCredential {
            source: ManagedIdentitySource::AppService {
                endpoint: endpoint.into(),
                header: header.into(),
            },
            client_id: None,
            connect_timeout: IMDS_CONNECT_TIMEOUT,
        }
    }

    /// The user-assigned identity with this client id.
    pub fn with_client_id(mut self, client_id: impl Into<String>) -> ManagedIdentityCredential {
        self.client_id = Some(client_id.into());
        self
    }

    /// The URL and the headers of a token request for `scope`.
    pub fn request(&self, scope: &str) -> Result<TokenRequest, AsbError> {
        let (endpoint, version, header) = match &self.source {
            ManagedIdentitySource::AppService { endpoint, header } => (
                endpoint,
                "2019-08-01",
                ("X-IDENTITY-HEADER", header.clone()),
            ),
            ManagedIdentitySource::Imds { endpoint } => {
                (endpoint, "2018-02-01", ("Metadata", "true".to_owned()))
            }
        };
        let mut url = url::Url::parse(endpoint).map_err(|e| {
            AsbError::Config(format!(
                "the managed identity endpoint {endpoint:?} is not a URL: {e}"
            ))
        })?;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("api-version", version)
                .append_pair("resource", resource_of(scope));
            if let Some(client_id) = &self.client_id {
                query.append_pair("client_id", client_id);
            }
        }
        Ok(TokenRequest {
            url: url.into(),
            headers: vec![header],
        })
    }

    fn endpoint(&self) -> &str {
        match &self.source {
            ManagedIdentitySource::AppService { endpoint, .. }
            | ManagedIdentitySource::Imds { endpoint } => endpoint,
        }
    }
}

/// Reads a managed identity endpoint's answer: `access_token` and `expires_on` (epoch seconds;
/// `expires_in` from `now` if that is absent) on success; otherwise the error it names, a
/// configuration error for an identity that is not there (400, 404), an auth error for a
/// refusal (401, 403), a connection error (transient) for 429 and 5xx.
pub fn parse_managed_identity_response(
    status: u16,
    body: &str,
    now: SystemTime,
) -> Result<AccessToken, AsbError> {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    if !(200..300).contains(&status) {
        let why = [
            text(&value, "error"),
            text(&value, "error_description"),
            text(&value, "message"),
        ]
        .into_iter()
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(": ");
        let what = format!("the managed identity endpoint answered {status}: {why}");
        return Err(match status {
            401 | 403 => AsbError::Auth(what),
            429 | 500.. => AsbError::Connection(what),
            _ => AsbError::Config(format!("no usable managed identity here ({what})")),
        });
    }
    let token = value
        .get("access_token")
        .and_then(|v| v.as_str())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            AsbError::Auth("the managed identity's answer has no access_token".into())
        })?;
    let expires_at = epoch_seconds(value.get("expires_on"))
        .or_else(|| {
            epoch_seconds(value.get("expires_in"))
                .and_then(|d| d.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map(|d| now + d)
        })
        .ok_or_else(|| AsbError::Auth("the managed identity's answer has no expires_on".into()))?;
    Ok(AccessToken {
        token: token.to_owned(),
        expires_at,
    })
}

#[async_trait]
impl TokenCredential for ManagedIdentityCredential {
    async fn get_token(&self, scope: &str) -> Result<AccessToken, AsbError> {
        let TokenRequest { url, headers } = self.request(scope)?;
        let endpoint = self.endpoint();
        let client = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(self.connect_timeout)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| {
                AsbError::Config(format!("an HTTP client for the managed identity: {e}"))
            })?;
        let mut request = client.get(&url);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(|e| {
            let cause = e.without_url();
            match &self.source {
                ManagedIdentitySource::Imds { .. } if cause.is_connect() || cause.is_timeout() => {
                    AsbError::Config(format!(
                        "no managed identity here: nothing answered at {endpoint} within {:?} \
                         (not an Azure VM, or no identity assigned): {cause}",
                        self.connect_timeout
                    ))
                }
                _ => AsbError::Connection(format!(
                    "asking {endpoint} for a managed identity token: {cause}"
                )),
            }
        })?;
        let status = response.status().as_u16();
        let body = response.text().await.map_err(|e| {
            AsbError::Connection(format!(
                "reading {endpoint}'s managed identity answer: {}",
                e.without_url()
            ))
        })?;
        // IMDS always answers JSON; anything else came from something in the way (a proxy, a
        // captive portal), so there is no managed identity here either.
        if matches!(self.source, ManagedIdentitySource::Imds { .. })
            && serde_json::from_str::<serde_json::Value>(&body).is_err()
        {
            return Err(AsbError::Config(format!(
                "no managed identity here: {endpoint} answered {status} without JSON, so it is \
                 not the instance metadata service"
            )));
        }
        parse_managed_identity_response(status, &body, SystemTime::now())
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::credential::SERVICE_BUS_SCOPE;
    use crate::credential::test_http::token_endpoint;
    use babelqueue_core::TransportErrorKind;

    #[test]
    fn the_environment_picks_app_service_or_imds() {
        let app = ManagedIdentityCredential::from_vars(|name| match name {
            "IDENTITY_ENDPOINT" => Some("http://localhost:8081/msi/token".into()),
            "IDENTITY_HEADER" => Some("hdr".into()),
            "AZURE_CLIENT_ID" => Some("uai-1".into()),
            _ => None,
        });
        assert_eq!(
            app,
            ManagedIdentityCredential::app_service("http://localhost:8081/msi/token", "hdr")
                .with_client_id("uai-1")
        );
        // an endpoint without its header is not App Service: IMDS
        let vm = ManagedIdentityCredential::from_vars(|name| {
            (name == "IDENTITY_ENDPOINT").then(|| "http://x".to_owned())
        });
        assert_eq!(vm, ManagedIdentityCredential::imds(IMDS_ENDPOINT));
        // another IMDS host, as Azure's SDKs read it
        let moved = ManagedIdentityCredential::from_vars(|name| {
            (name == IMDS_HOST_ENV).then(|| "http://127.0.0.1:9/".to_owned())
        });
        assert_eq!(
            moved,
            ManagedIdentityCredential::imds("http://127.0.0.1:9/metadata/identity/oauth2/token")
        );
        let request = vm.request(SERVICE_BUS_SCOPE).unwrap();
        assert_eq!(
            request.url,
            "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01\
             &resource=https%3A%2F%2Fservicebus.azure.net"
        );
        assert_eq!(request.headers, [("Metadata", "true".to_owned())]);
        assert_eq!(vm.connect_timeout, Duration::from_secs(1));
        let error = ManagedIdentityCredential::imds("not a url")
            .request(SERVICE_BUS_SCOPE)
            .unwrap_err();
        assert_eq!(error.kind(), TransportErrorKind::Config);
    }

    #[test]
    fn answers() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let t = parse_managed_identity_response(
            200,
            r#"{"access_token":"ey.mi","expires_on":"1700000000","resource":"https://servicebus.azure.net"}"#,
            now,
        )
        .unwrap();
        assert_eq!(t.token, "ey.mi");
        assert_eq!(
            t.expires_at,
            UNIX_EPOCH + Duration::from_secs(1_700_000_000)
        );
        let t = parse_managed_identity_response(
            200,
            r#"{"access_token":"x","expires_on":1700000001}"#,
            now,
        )
        .unwrap();
        assert_eq!(
            t.expires_at,
            UNIX_EPOCH + Duration::from_secs(1_700_000_001)
        );
        let t =
            parse_managed_identity_response(200, r#"{"access_token":"x","expires_in":"60"}"#, now)
                .unwrap();
        assert_eq!(t.expires_at, now + Duration::from_secs(60));
        assert!(parse_managed_identity_response(200, r#"{"access_token":"x"}"#, now).is_err());
        assert!(parse_managed_identity_response(200, r#"{"expires_on":1}"#, now).is_err());
        let missing = parse_managed_identity_response(
            400,
            r#"{"error":"invalid_request","error_description":"Identity not found"}"#,
            now,
        )
        .unwrap_err();
        assert_eq!(missing.kind(), TransportErrorKind::Config);
        assert!(
            missing.to_string().contains("Identity not found"),
            "{missing}"
        );
        let busy = parse_managed_identity_response(503, "busy", now).unwrap_err();
        assert!(busy.is_transient(), "{busy:?}");
        let refused =
            parse_managed_identity_response(403, r#"{"statusCode":403,"message":"no"}"#, now)
                .unwrap_err();
        assert_eq!(refused.kind(), TransportErrorKind::Auth);
    }

    #[tokio::test]
    async fn app_service_endpoint_gets_the_header_and_the_client_id() {
        let (address, request) = token_endpoint(
            200,
            r#"{"access_token":"ey.app","expires_on":"1900000000","token_type":"Bearer"}"#,
        )
        .await;
        let credential =
            ManagedIdentityCredential::app_service(format!("{address}/msi/token"), "hdr-s3cret")
                .with_client_id("uai-7");
        let token = credential.get_token(SERVICE_BUS_SCOPE).await.unwrap();
        assert_eq!(token.token, "ey.app");
        assert_eq!(
            token.expires_at,
            UNIX_EPOCH + Duration::from_secs(1_900_000_000)
        );
        let request = request.await.unwrap();
        assert!(
            request.starts_with(
                "GET /msi/token?api-version=2019-08-01&resource=https%3A%2F%2Fservicebus.azure.net\
                 &client_id=uai-7 HTTP/1.1\r\n"
            ),
            "{request}"
        );
        assert!(
            request
                .to_ascii_lowercase()
                .contains("x-identity-header: hdr-s3cret\r\n"),
            "{request}"
        );
        assert!(!format!("{credential:?}{token:?}").contains("s3cret"));
        assert!(!format!("{token:?}").contains("ey.app"));
    }

    #[tokio::test]
    async fn imds_gets_the_metadata_header() {
        let (address, request) =
            token_endpoint(200, r#"{"access_token":"ey.vm","expires_on":"1900000000"}"#).await;
        let token =
            ManagedIdentityCredential::imds(format!("{address}/metadata/identity/oauth2/token"))
                .get_token(SERVICE_BUS_SCOPE)
                .await
                .unwrap();
        assert_eq!(token.token, "ey.vm");
        let request = request.await.unwrap();
        assert!(
            request.starts_with(
                "GET /metadata/identity/oauth2/token?api-version=2018-02-01\
                 &resource=https%3A%2F%2Fservicebus.azure.net HTTP/1.1\r\n"
            ),
            "{request}"
        );
        assert!(
            request.to_ascii_lowercase().contains("metadata: true\r\n"),
            "{request}"
        );
    }

    #[tokio::test]
    async fn an_identity_endpoint_refusal_is_reported() {
        let (address, _request) = token_endpoint(
            400,
            r#"{"error":"invalid_request","error_description":"Identity not found"}"#,
        )
        .await;
        let error = ManagedIdentityCredential::imds(address)
            .get_token(SERVICE_BUS_SCOPE)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), TransportErrorKind::Config);
        assert!(error.to_string().contains("Identity not found"), "{error}");
    }

    #[tokio::test]
    async fn an_answer_that_is_not_imds_means_no_managed_identity() {
        let (address, _request) = token_endpoint(502, "<html>Bad Gateway</html>").await;
        let error = ManagedIdentityCredential::imds(address)
            .get_token(SERVICE_BUS_SCOPE)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), TransportErrorKind::Config, "{error:?}");
        assert!(
            error.to_string().contains("no managed identity here"),
            "{error}"
        );
        // the App Service endpoint was named by the platform: its failure may pass
        let (address, _request) = token_endpoint(502, "<html>Bad Gateway</html>").await;
        let error = ManagedIdentityCredential::app_service(address, "h")
            .get_token(SERVICE_BUS_SCOPE)
            .await
            .unwrap_err();
        assert!(error.is_transient(), "{error:?}");
    }

    #[tokio::test]
    async fn no_imds_fails_fast_and_says_so() {
        // nothing listens on this loopback port: the connection is refused at once
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let started = std::time::Instant::now();
        let error = ManagedIdentityCredential::imds(format!("http://127.0.0.1:{port}/token"))
            .get_token(SERVICE_BUS_SCOPE)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(error.kind(), TransportErrorKind::Config, "{error:?}");
        assert!(
            error.to_string().contains("no managed identity here"),
            "{error}"
        );
    }
}
