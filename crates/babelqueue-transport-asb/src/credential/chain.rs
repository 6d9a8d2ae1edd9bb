//! [`DefaultCredential`]: the links tried in order, the first token wins.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    AccessToken, AzureCliCredential, EnvironmentCredential, ManagedIdentityCredential,
    TokenCredential,
};
use crate::error::AsbError;

/// Tries each link in order and returns the first token. A link that is not set up here (it
/// fails with a configuration error: no variables, no managed identity, no `az`) passes to the
/// next; a link that is set up but fails (refused, unreachable) ends the chain with its own
/// error, as Azure's own SDKs do: a wrong client secret is reported as such, and the chain
/// never goes on to probe the metadata service. When no link is set up, the error lists why
/// each was not. [`from_env`](Self::from_env) builds the reference SDK's order: environment,
/// managed identity, Azure CLI.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use babelqueue_transport_asb::credential::{
///     AzureCliCredential, DefaultCredential, TokenCredential, SERVICE_BUS_SCOPE,
/// };
/// let chain = DefaultCredential::empty()
///     .with_link("Azure CLI", Arc::new(AzureCliCredential::new().with_program("/nonexistent/az")));
/// let error = chain.get_token(SERVICE_BUS_SCOPE).await.unwrap_err();
/// assert!(error.to_string().contains("Azure CLI: "));
/// # }
/// ```
#[derive(Clone, Default)]
pub struct DefaultCredential {
    links: Vec<(String, Arc<dyn TokenCredential>)>,
}

impl fmt::Debug for DefaultCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.links.iter().map(|(name, link)| (name, link)))
            .finish()
    }
}

/// A link that is known not to work: it fails with a configuration error saying why.
#[derive(Debug)]
struct Unavailable(String);

#[async_trait]
impl TokenCredential for Unavailable {
    async fn get_token(&self, _scope: &str) -> Result<AccessToken, AsbError> {
        Err(AsbError::Config(self.0.clone()))
    }
}

impl DefaultCredential {
    /// A chain with no links (add them with [`with_link`](Self::with_link)).
    pub fn empty() -> DefaultCredential {
        DefaultCredential::default()
    }

    /// Environment ([`EnvironmentCredential::from_env`]), managed identity
    /// ([`ManagedIdentityCredential::from_env`]), Azure CLI ([`AzureCliCredential::new`]).
    pub fn from_env() -> DefaultCredential {
        DefaultCredential::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`from_env`](Self::from_env), reading the variables through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> DefaultCredential {
        let environment: Arc<dyn TokenCredential> = match EnvironmentCredential::from_vars(&var) {
            Some(credential) => Arc::new(credential),
            None => Arc::new(Unavailable(
                "AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (or \
                 AZURE_FEDERATED_TOKEN_FILE) are not all set"
                    .into(),
            )),
        };
        DefaultCredential::empty()
            .with_link("environment", environment)
            .with_link(
                "managed identity",
                Arc::new(ManagedIdentityCredential::from_vars(&var)),
            )
            .with_link("Azure CLI", Arc::new(AzureCliCredential::new()))
    }

    /// Adds `link`, tried after those already there; `name` says which link failed how.
    pub fn with_link(
        mut self,
        name: impl Into<String>,
        link: Arc<dyn TokenCredential>,
    ) -> DefaultCredential {
        self.links.push((name.into(), link));
        self
    }

    /// The links' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.links.iter().map(|(name, _)| name.as_str()).collect()
    }
}

#[async_trait]
impl TokenCredential for DefaultCredential {
    /// The first set-up link's token, or its error (same kind, naming the link); else, when no
    /// link is set up, a configuration error naming why each is not.
    async fn get_token(&self, scope: &str) -> Result<AccessToken, AsbError> {
        let mut failures = Vec::with_capacity(self.links.len());
        for (name, link) in &self.links {
            match link.get_token(scope).await {
                Ok(token) => return Ok(token),
                Err(AsbError::Config(why)) => failures.push(format!("{name}: {why}")),
                Err(e) => return Err(e.map_detail(|detail| format!("Azure AD ({name}): {detail}"))),
            }
        }
        let what = format!(
            "no Azure AD credential gave a token ({}); or authenticate with the namespace's \
             shared access key: a connection string in AZURE_SERVICEBUS_CONNECTION_STRING, or \
             sb://<key name>:<url-encoded key>@<host>",
            if failures.is_empty() {
                "the chain has no links".to_owned()
            } else {
                failures.join("; ")
            }
        );
        Err(AsbError::Config(what))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::credential::SERVICE_BUS_SCOPE;
    use babelqueue_core::TransportErrorKind;

    #[derive(Debug, Clone, Copy)]
    enum Fail {
        Config,
        Auth,
        Connection,
    }

    /// A link that answers with a fixed result and records that it was asked.
    #[derive(Debug)]
    struct Fixed {
        name: &'static str,
        answer: Result<&'static str, Fail>,
        asked: Arc<Mutex<Vec<&'static str>>>,
    }

    #[async_trait]
    impl TokenCredential for Fixed {
        async fn get_token(&self, _scope: &str) -> Result<AccessToken, AsbError> {
            self.asked.lock().unwrap().push(self.name);
            match self.answer {
                Ok(token) => Ok(AccessToken {
                    token: token.to_owned(),
                    expires_at: SystemTime::UNIX_EPOCH + Duration::from_secs(9),
                }),
                Err(fail) => {
                    let why = format!("{} is not here", self.name);
                    Err(match fail {
                        Fail::Config => AsbError::Config(why),
                        Fail::Auth => AsbError::Auth(why),
                        Fail::Connection => AsbError::Connection(why),
                    })
                }
            }
        }
    }

    fn links(
        links: &[(&'static str, Result<&'static str, Fail>)],
    ) -> (DefaultCredential, Arc<Mutex<Vec<&'static str>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let chain = links
            .iter()
            .fold(DefaultCredential::empty(), |c, (name, answer)| {
                c.with_link(
                    *name,
                    Arc::new(Fixed {
                        name,
                        answer: *answer,
                        asked: asked.clone(),
                    }),
                )
            });
        (chain, asked)
    }

    #[tokio::test]
    async fn the_first_link_that_gives_a_token_wins() {
        let (chain, asked) = links(&[
            ("a", Err(Fail::Config)),
            ("b", Ok("ey.b")),
            ("c", Ok("ey.c")),
        ]);
        let token = chain.get_token(SERVICE_BUS_SCOPE).await.unwrap();
        assert_eq!(token.token, "ey.b");
        assert_eq!(*asked.lock().unwrap(), ["a", "b"]);
    }

    #[tokio::test]
    async fn with_no_link_set_up_the_error_lists_every_link_in_order() {
        let (chain, asked) = links(&[
            ("a", Err(Fail::Config)),
            ("b", Err(Fail::Config)),
            ("c", Err(Fail::Config)),
        ]);
        let error = chain.get_token(SERVICE_BUS_SCOPE).await.unwrap_err();
        assert_eq!(*asked.lock().unwrap(), ["a", "b", "c"]);
        assert_eq!(error.kind(), TransportErrorKind::Config);
        let text = error.to_string();
        assert!(
            text.contains("(a: a is not here; b: b is not here; c: c is not here)"),
            "{text}"
        );
        assert!(
            text.contains("AZURE_SERVICEBUS_CONNECTION_STRING"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_link_set_up_but_failing_ends_the_chain_with_its_own_error() {
        for (fail, kind) in [
            (Fail::Auth, TransportErrorKind::Auth),
            (Fail::Connection, TransportErrorKind::Connection),
        ] {
            let (chain, asked) = links(&[
                ("a", Err(Fail::Config)),
                ("b", Err(fail)),
                ("c", Ok("ey.c")),
            ]);
            let error = chain.get_token(SERVICE_BUS_SCOPE).await.unwrap_err();
            assert_eq!(*asked.lock().unwrap(), ["a", "b"], "c is never asked");
            assert_eq!(error.kind(), kind);
            assert!(
                error.to_string().contains("Azure AD (b): b is not here"),
                "{error}"
            );
        }
    }

    #[test]
    fn from_vars_builds_the_reference_order_and_hides_secrets() {
        let vars = |name: &str| match name {
            "AZURE_TENANT_ID" => Some("t".to_owned()),
            "AZURE_CLIENT_ID" => Some("c".to_owned()),
            "AZURE_CLIENT_SECRET" => Some("client-s3cret".to_owned()),
            "IDENTITY_ENDPOINT" => Some("http://127.0.0.1:1/token".to_owned()),
            "IDENTITY_HEADER" => Some("header-s3cret".to_owned()),
            _ => None,
        };
        let chain = DefaultCredential::from_vars(vars);
        assert_eq!(
            chain.names(),
            ["environment", "managed identity", "Azure CLI"]
        );
        let shown = format!("{chain:?}");
        assert!(shown.contains("EnvironmentCredential"), "{shown}");
        assert!(shown.contains("AppService"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[tokio::test]
    async fn an_unset_environment_says_which_variables() {
        let chain = DefaultCredential::from_vars(|_| None);
        let environment = &chain.links[0].1;
        let error = environment.get_token(SERVICE_BUS_SCOPE).await.unwrap_err();
        assert_eq!(error.kind(), TransportErrorKind::Config);
        assert!(error.to_string().contains("AZURE_TENANT_ID"), "{error}");
    }
}
