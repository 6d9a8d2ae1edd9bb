//! Azure AD (Microsoft Entra ID) credentials: the [`TokenCredential`] seam the client asks for
//! a bearer token, and the links of a chain like the reference SDK's `DefaultAzureCredential`:
//!
//! 1. [`EnvironmentCredential`]: a service principal's client secret, or a workload
//!    identity's federated token file, named by the standard `AZURE_*` environment variables;
//! 2. [`ManagedIdentityCredential`]: the identity Azure gives the machine (App Service,
//!    Functions and Container Apps through `IDENTITY_ENDPOINT`, a VM through the instance
//!    metadata service);
//! 3. [`AzureCliCredential`]: the account signed in with `az login`.
//!
//! [`DefaultCredential`] tries them in that order and uses the first that hands out a token.
//! The client puts the token on the namespace's `$cbs` node with the token type `jwt`, for the
//! scope [`SERVICE_BUS_SCOPE`], and asks again before it expires. Any other source of tokens
//! is a [`TokenCredential`] of the application's own, given to
//! [`AmqpServiceBus::connect_with_credential`](crate::AmqpServiceBus::connect_with_credential).
//!
//! No token, secret or identity header ever reaches `Debug`, `Display` or an error.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use crate::error::AsbError;

mod azure_cli;
mod chain;
mod environment;
mod managed_identity;
#[cfg(test)]
pub(crate) mod test_http;

pub use azure_cli::{AZ_TIMEOUT, AzureCliCredential, parse_cli_output};
pub use chain::DefaultCredential;
pub use environment::{
    ClientProof, DEFAULT_AUTHORITY_HOST, EnvironmentCredential, parse_token_response,
};
pub use managed_identity::{
    IMDS_CONNECT_TIMEOUT, IMDS_ENDPOINT, IMDS_HOST_ENV, ManagedIdentityCredential,
    ManagedIdentitySource, TokenRequest, parse_managed_identity_response,
};

/// The scope of a Service Bus token.
pub const SERVICE_BUS_SCOPE: &str = "https://servicebus.azure.net/.default";

/// A bearer token and when it expires. `Debug` never shows the token.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken {
    /// The JWT.
    pub token: String,
    /// When it stops being accepted.
    pub expires_at: SystemTime,
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessToken")
            .field("token", &"***")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Something that hands out Azure AD bearer tokens (the seam; tests put a fake behind it).
#[async_trait]
pub trait TokenCredential: Send + Sync + fmt::Debug {
    /// A token for `scope` (for Service Bus: [`SERVICE_BUS_SCOPE`]).
    async fn get_token(&self, scope: &str) -> Result<AccessToken, AsbError>;
}

/// The resource a scope names, as managed identity and the Azure CLI take it:
/// `https://servicebus.azure.net/.default` is `https://servicebus.azure.net`.
///
/// ```
/// use babelqueue_transport_asb::credential::{SERVICE_BUS_SCOPE, resource_of};
/// assert_eq!(resource_of(SERVICE_BUS_SCOPE), "https://servicebus.azure.net");
/// assert_eq!(resource_of("https://example.net"), "https://example.net");
/// ```
pub fn resource_of(scope: &str) -> &str {
    scope.strip_suffix("/.default").unwrap_or(scope)
}

/// Seconds since the epoch, as a JSON number or a string of digits.
fn epoch_seconds(value: Option<&serde_json::Value>) -> Option<SystemTime> {
    let seconds = match value? {
        serde_json::Value::Number(n) => n.as_u64()?,
        serde_json::Value::String(s) => s.trim().parse::<u64>().ok()?,
        _ => return None,
    };
    Some(UNIX_EPOCH + Duration::from_secs(seconds))
}

/// The text of a JSON string field, or "".
fn text<'a>(value: &'a serde_json::Value, key: &str) -> &'a str {
    value.get(key).and_then(|v| v.as_str()).unwrap_or("")
}
