//! The environment link: a service principal's client secret, or a workload identity's
//! federated token file, named by the standard `AZURE_*` environment variables, exchanged for a
//! token at Azure AD's OAuth2 token endpoint.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use super::{AccessToken, TokenCredential};
use crate::error::AsbError;

/// The authority used when `AZURE_AUTHORITY_HOST` is not set (the public cloud).
pub const DEFAULT_AUTHORITY_HOST: &str = "https://login.microsoftonline.com";

/// What proves the application's identity to Azure AD.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientProof {
    /// A service principal's client secret (`AZURE_CLIENT_SECRET`).
    Secret(String),
    /// A file holding a federated token, read at each request (`AZURE_FEDERATED_TOKEN_FILE`,
    /// as AKS workload identity mounts it).
    FederatedTokenFile(PathBuf),
}

impl fmt::Debug for ClientProof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientProof::Secret(_) => f.write_str("Secret(***)"),
            ClientProof::FederatedTokenFile(path) => {
                f.debug_tuple("FederatedTokenFile").field(path).finish()
            }
        }
    }
}

/// OAuth2 client credentials against `<authority>/<tenant>/oauth2/v2.0/token`.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvironmentCredential {
    /// The authority (default [`DEFAULT_AUTHORITY_HOST`]).
    pub authority_host: String,
    /// The directory (tenant) id.
    pub tenant_id: String,
    /// The application (client) id.
    pub client_id: String,
    /// The secret or the federated token file.
    pub proof: ClientProof,
}

impl fmt::Debug for EnvironmentCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvironmentCredential")
            .field("authority_host", &self.authority_host)
            .field("tenant_id", &self.tenant_id)
            .field("client_id", &self.client_id)
            .field("proof", &self.proof)
            .finish()
    }
}

impl EnvironmentCredential {
    /// Reads `AZURE_TENANT_ID`, `AZURE_CLIENT_ID` and `AZURE_CLIENT_SECRET` (else
    /// `AZURE_FEDERATED_TOKEN_FILE`), and `AZURE_AUTHORITY_HOST` if set; `None` when they do
    /// not name a credential.
    pub fn from_env() -> Option<EnvironmentCredential> {
        EnvironmentCredential::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`from_env`](Self::from_env), reading the variables through `var`.
    ///
    /// ```
    /// use babelqueue_transport_asb::{ClientProof, EnvironmentCredential};
    /// let vars = |name: &str| match name {
    ///     "AZURE_TENANT_ID" => Some("t".to_owned()),
    ///     "AZURE_CLIENT_ID" => Some("c".to_owned()),
    ///     "AZURE_CLIENT_SECRET" => Some("s3cret".to_owned()),
    ///     _ => None,
    /// };
    /// let credential = EnvironmentCredential::from_vars(vars).unwrap();
    /// assert_eq!(credential.proof, ClientProof::Secret("s3cret".into()));
    /// assert!(!format!("{credential:?}").contains("s3cret"));
    /// ```
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Option<EnvironmentCredential> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let tenant_id = get("AZURE_TENANT_ID")?;
        let client_id = get("AZURE_CLIENT_ID")?;
        let proof = match get("AZURE_CLIENT_SECRET") {
            Some(secret) => ClientProof::Secret(secret),
            None => {
                ClientProof::FederatedTokenFile(PathBuf::from(get("AZURE_FEDERATED_TOKEN_FILE")?))
            }
        };
        Some(EnvironmentCredential {
            authority_host: get("AZURE_AUTHORITY_HOST")
                .unwrap_or_else(|| DEFAULT_AUTHORITY_HOST.to_owned()),
            tenant_id,
            client_id,
            proof,
        })
    }

    /// The token endpoint.
    pub fn token_url(&self) -> String {
        format!(
            "{}/{}/oauth2/v2.0/token",
            self.authority_host.trim_end_matches('/'),
            self.tenant_id
        )
    }

    /// The form body of a token request for `scope`.
    pub fn request_body(&self, scope: &str) -> Result<String, AsbError> {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials")
            .append_pair("client_id", &self.client_id)
            .append_pair("scope", scope);
        match &self.proof {
            ClientProof::Secret(secret) => {
                form.append_pair("client_secret", secret);
            }
            ClientProof::FederatedTokenFile(path) => {
                let assertion = std::fs::read_to_string(path).map_err(|e| {
                    AsbError::Config(format!(
                        "cannot read the federated token file {}: {e}",
                        path.display()
                    ))
                })?;
                form.append_pair(
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                )
                .append_pair("client_assertion", assertion.trim());
            }
        }
        Ok(form.finish())
    }
}

/// Reads a token endpoint's answer: `access_token` and `expires_in` (seconds, a number or a
/// string of digits) on success, `error` / `error_description` otherwise (an auth error).
pub fn parse_token_response(
    status: u16,
    body: &str,
    now: SystemTime,
) -> Result<AccessToken, AsbError> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(|e| {
        AsbError::Auth(format!(
            "Azure AD answered {status} with a body that is not JSON: {e}"
        ))
    })?;
    if !(200..300).contains(&status) {
        let text = |key: &str| value.get(key).and_then(|v| v.as_str()).unwrap_or("");
        let error = AsbError::Auth(format!(
            "Azure AD refused the credentials ({status} {}): {}",
            text("error"),
            text("error_description")
        ));
        // A throttled or failing endpoint is worth another try, a refusal is not.
        return Err(if status == 429 || status >= 500 {
            AsbError::Connection(error.to_string())
        } else {
            error
        });
    }
    let token = value
        .get("access_token")
        .and_then(|v| v.as_str())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| AsbError::Auth("Azure AD's answer has no access_token".into()))?;
    let expires_in = match value.get("expires_in") {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.parse::<u64>().ok(),
        _ => None,
    }
    .ok_or_else(|| AsbError::Auth("Azure AD's answer has no expires_in".into()))?;
    Ok(AccessToken {
        token: token.to_owned(),
        expires_at: now + Duration::from_secs(expires_in),
    })
}

#[async_trait]
impl TokenCredential for EnvironmentCredential {
    async fn get_token(&self, scope: &str) -> Result<AccessToken, AsbError> {
        let body = self.request_body(scope)?;
        let url = self.token_url();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| AsbError::Config(format!("an HTTP client for Azure AD: {e}")))?;
        let response = client
            .post(&url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|e| {
                AsbError::Connection(format!("asking {url} for a token: {}", e.without_url()))
            })?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| {
            AsbError::Connection(format!("reading {url}'s token answer: {}", e.without_url()))
        })?;
        parse_token_response(status, &text, SystemTime::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credential::SERVICE_BUS_SCOPE;
    use crate::credential::test_http::token_endpoint;

    fn credential(authority: &str) -> EnvironmentCredential {
        EnvironmentCredential {
            authority_host: authority.to_owned(),
            tenant_id: "tenant-1".into(),
            client_id: "app-1".into(),
            proof: ClientProof::Secret("s3cr&t".into()),
        }
    }

    #[test]
    fn the_environment_names_a_secret_or_a_federated_token_file() {
        let vars = |secret: bool| {
            move |name: &str| match name {
                "AZURE_TENANT_ID" => Some("t".to_owned()),
                "AZURE_CLIENT_ID" => Some("c".to_owned()),
                "AZURE_CLIENT_SECRET" if secret => Some("s".to_owned()),
                "AZURE_FEDERATED_TOKEN_FILE" => Some("/var/run/token".to_owned()),
                _ => None,
            }
        };
        let c = EnvironmentCredential::from_vars(vars(true)).unwrap();
        assert_eq!(c.proof, ClientProof::Secret("s".into()));
        assert_eq!(
            c.token_url(),
            "https://login.microsoftonline.com/t/oauth2/v2.0/token"
        );
        let c = EnvironmentCredential::from_vars(vars(false)).unwrap();
        assert_eq!(
            c.proof,
            ClientProof::FederatedTokenFile("/var/run/token".into())
        );
        assert!(EnvironmentCredential::from_vars(|_| None).is_none());
        let no_client = |name: &str| (name == "AZURE_TENANT_ID").then(|| "t".to_owned());
        assert!(EnvironmentCredential::from_vars(no_client).is_none());
    }

    #[test]
    fn the_request_carries_the_secret_form_encoded() {
        let body = credential("https://login.example/")
            .request_body(SERVICE_BUS_SCOPE)
            .unwrap();
        assert_eq!(
            body,
            "grant_type=client_credentials&client_id=app-1\
             &scope=https%3A%2F%2Fservicebus.azure.net%2F.default&client_secret=s3cr%26t"
        );
        assert!(!format!("{:?}", credential("h")).contains("s3cr"));
    }

    #[test]
    fn a_federated_token_file_is_sent_as_a_client_assertion() {
        let path = std::env::temp_dir().join(format!("bq-asb-fed-{}", std::process::id()));
        std::fs::write(&path, "ey.fed.jwt\n").unwrap();
        let mut c = credential("https://login.example");
        c.proof = ClientProof::FederatedTokenFile(path.clone());
        let body = c.request_body("s").unwrap();
        assert!(body.ends_with(
            "client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer\
             &client_assertion=ey.fed.jwt"
        ), "{body}");
        std::fs::remove_file(&path).ok();
        assert_eq!(
            c.request_body("s").unwrap_err().kind(),
            babelqueue_core::TransportErrorKind::Config
        );
    }

    #[test]
    fn token_answers() {
        let now = SystemTime::UNIX_EPOCH;
        let t =
            parse_token_response(200, r#"{"access_token":"ey.a","expires_in":3599}"#, now).unwrap();
        assert_eq!(t.token, "ey.a");
        assert_eq!(t.expires_at, now + Duration::from_secs(3599));
        assert!(!format!("{t:?}").contains("ey.a"));
        let t = parse_token_response(200, r#"{"access_token":"x","expires_in":"60"}"#, now);
        assert_eq!(t.unwrap().expires_at, now + Duration::from_secs(60));
        let refused = parse_token_response(
            401,
            r#"{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret"}"#,
            now,
        )
        .unwrap_err();
        assert_eq!(refused.kind(), babelqueue_core::TransportErrorKind::Auth);
        assert!(refused.to_string().contains("AADSTS7000215"), "{refused}");
        let busy = parse_token_response(503, "{}", now).unwrap_err();
        assert!(busy.is_transient(), "{busy:?}");
        assert!(parse_token_response(200, r#"{"expires_in":1}"#, now).is_err());
        assert!(parse_token_response(200, "<html>", now).is_err());
    }

    #[tokio::test]
    async fn get_token_posts_to_the_tenant_endpoint() {
        let (authority, request) = token_endpoint(
            200,
            r#"{"token_type":"Bearer","expires_in":3599,"access_token":"ey.tok"}"#,
        )
        .await;
        let token = credential(&authority)
            .get_token(SERVICE_BUS_SCOPE)
            .await
            .unwrap();
        assert_eq!(token.token, "ey.tok");
        let request = request.await.unwrap();
        assert!(
            request.starts_with("POST /tenant-1/oauth2/v2.0/token HTTP/1.1\r\n"),
            "{request}"
        );
        assert!(request.contains("client_secret=s3cr%26t"), "{request}");
        assert!(
            request
                .to_ascii_lowercase()
                .contains("content-type: application/x-www-form-urlencoded"),
            "{request}"
        );
    }
}
