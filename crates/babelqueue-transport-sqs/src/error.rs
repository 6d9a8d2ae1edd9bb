//! The crate's one error type, [`SqsError`], and how it maps onto the runtime's
//! [`TransportError`](babelqueue_core::TransportError).

use babelqueue_core::{BrokerError, TransportErrorKind};

/// Everything the SQS transport can fail with.
///
/// Code branches on [`SqsError::kind`] / [`SqsError::is_transient`], never on the text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqsError {
    /// The `sqs://` URL or an option cannot work.
    #[error("invalid SQS configuration: {0}")]
    Config(String),
    /// Neither the URL nor the AWS provider chain names a region.
    #[error(
        "no AWS region: put it in the URL (sqs://us-east-1) or set AWS_REGION / a profile region"
    )]
    NoRegion,
    /// A per-message delay SQS cannot honour (above 900 s, not whole seconds, or any delay on a
    /// FIFO queue). Nothing was sent.
    #[error("SQS per-message delay refused: {0}; nothing was sent")]
    Delay(String),
    /// The body cannot be an SQS message body (SQS bodies are text in a restricted character
    /// set). Nothing was sent.
    #[error("SQS cannot carry this body: {0}; nothing was sent")]
    Body(String),
    /// An out-of-band header cannot be an SQS message attribute. Nothing was sent.
    #[error("header {name:?} cannot be an SQS message attribute: {reason}; nothing was sent")]
    Attribute {
        /// The header name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The queue does not exist (`AWS.SimpleQueueService.NonExistentQueue`).
    #[error("SQS {operation}: the queue {queue:?} does not exist")]
    QueueDoesNotExist {
        /// The API operation.
        operation: &'static str,
        /// The queue name or URL.
        queue: String,
    },
    /// SQS refused the credentials (`InvalidClientTokenId`, `SignatureDoesNotMatch`,
    /// `UnrecognizedClientException`, an expired token …). Not transient: a consume loop stops
    /// with it.
    #[error("SQS at {endpoint} refused the credentials on {operation}: {code}: {message}")]
    Auth {
        /// The API operation.
        operation: &'static str,
        /// The endpoint (host, or region endpoint) the call went to.
        endpoint: String,
        /// The AWS error code.
        code: String,
        /// The AWS error message.
        message: String,
    },
    /// The AWS provider chain found no credentials anywhere it looks (environment, shared
    /// profile, web identity, container or instance metadata), or the provider it ended with
    /// failed (`detail` says which and why). Nothing was sent. Not transient: a consume loop
    /// stops with it.
    #[error(
        "SQS {operation} at {endpoint}: no AWS credentials found: set AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys), or AWS_PROFILE, or \
         run with a web identity, container or instance role"
    )]
    NoCredentials {
        /// The API operation.
        operation: &'static str,
        /// The endpoint (host, or region endpoint) the call was for.
        endpoint: String,
        /// What the provider chain said (each provider's reason, for `Debug` and logs).
        detail: String,
    },
    /// SQS answered with an error.
    #[error("SQS {operation} failed: {code}: {message}")]
    Service {
        /// The API operation.
        operation: &'static str,
        /// The AWS error code (`ReceiptHandleIsInvalid`, `RequestThrottled` …).
        code: String,
        /// The AWS error message.
        message: String,
    },
    /// The endpoint could not be reached, or the connection dropped.
    #[error("SQS {operation}: cannot reach the endpoint: {message}")]
    Connection {
        /// The API operation.
        operation: &'static str,
        /// What the HTTP client said.
        message: String,
    },
    /// The call timed out.
    #[error("SQS {operation} timed out: {message}")]
    Timeout {
        /// The API operation.
        operation: &'static str,
        /// What the SDK said.
        message: String,
    },
    /// Anything else the SDK reported (a request it could not build, an unreadable response).
    #[error("SQS {operation}: {message}")]
    Other {
        /// The API operation.
        operation: &'static str,
        /// What the SDK said.
        message: String,
    },
}

/// AWS error codes that mean "these credentials are refused" (unknown key, wrong secret,
/// expired or malformed token).
pub(crate) const AUTH_CODES: &[&str] = &[
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "MissingAuthenticationTokenException",
    "InvalidAccessKeyId",
    "ExpiredToken",
    "ExpiredTokenException",
    "AuthFailure",
];

/// AWS error codes that mean "busy or briefly unavailable, try again".
const TRANSIENT_CODES: &[&str] = &[
    "RequestThrottled",
    "ThrottlingException",
    "Throttling",
    "KmsThrottled",
    "ServiceUnavailable",
    "InternalError",
    "InternalFailure",
    "RequestTimeout",
];

impl SqsError {
    /// The runtime's class of this error.
    pub fn kind(&self) -> TransportErrorKind {
        match self {
            SqsError::Config(_) | SqsError::NoRegion | SqsError::NoCredentials { .. } => {
                TransportErrorKind::Config
            }
            SqsError::Delay(_) | SqsError::Body(_) | SqsError::Attribute { .. } => {
                TransportErrorKind::Unsupported
            }
            SqsError::QueueDoesNotExist { .. } => TransportErrorKind::Rejected,
            SqsError::Auth { .. } => TransportErrorKind::Auth,
            // Throttling and 5xx codes are "the broker is busy": transient, like a timeout.
            SqsError::Service { code, .. } if TRANSIENT_CODES.contains(&code.as_str()) => {
                TransportErrorKind::Timeout
            }
            SqsError::Service { .. } => TransportErrorKind::Rejected,
            SqsError::Connection { .. } => TransportErrorKind::Connection,
            SqsError::Timeout { .. } => TransportErrorKind::Timeout,
            SqsError::Other { .. } => TransportErrorKind::Other,
        }
    }

    /// Whether retrying the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            TransportErrorKind::Connection | TransportErrorKind::Timeout
        )
    }

    /// The AWS error code, when SQS answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            SqsError::Service { code, .. } | SqsError::Auth { code, .. } => Some(code),
            SqsError::QueueDoesNotExist { .. } => Some("AWS.SimpleQueueService.NonExistentQueue"),
            _ => None,
        }
    }
}

// The conversion into the runtime's `TransportError` is the contract's one blanket `From`:
// the transport's name as the message, this error as the source.
impl BrokerError for SqsError {
    const NAME: &'static str = "sqs";
    fn transport_kind(&self) -> TransportErrorKind {
        self.kind()
    }
}

/// Converts an SDK error of one operation against `endpoint` (already redacted, for messages)
/// into an [`SqsError`], by its class and AWS error code. Texts the SDK wrote are
/// [`redact`](babelqueue_core::redact::redact)ed.
pub(crate) fn from_sdk<E, R>(
    operation: &'static str,
    queue: &str,
    endpoint: &str,
    err: &aws_sdk_sqs::error::SdkError<E, R>,
) -> SqsError
where
    E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    use aws_sdk_sqs::error::{DisplayErrorContext, SdkError};
    use babelqueue_core::redact::redact;
    if let Some(detail) = no_credentials(err) {
        return SqsError::NoCredentials {
            operation,
            endpoint: endpoint.to_owned(),
            detail: redact(&detail),
        };
    }
    match err {
        SdkError::ServiceError(service) => {
            let inner = service.err();
            let code = inner.code().unwrap_or("Unknown").to_owned();
            if code == "AWS.SimpleQueueService.NonExistentQueue" || code == "QueueDoesNotExist" {
                return SqsError::QueueDoesNotExist {
                    operation,
                    queue: queue.to_owned(),
                };
            }
            let message = redact(inner.message().unwrap_or_default());
            if AUTH_CODES.contains(&code.as_str()) {
                return SqsError::Auth {
                    operation,
                    endpoint: endpoint.to_owned(),
                    code,
                    message,
                };
            }
            SqsError::Service {
                operation,
                code,
                message,
            }
        }
        SdkError::TimeoutError(_) => SqsError::Timeout {
            operation,
            message: redact(&DisplayErrorContext(err).to_string()),
        },
        SdkError::DispatchFailure(failure) if failure.is_timeout() => SqsError::Timeout {
            operation,
            message: redact(&DisplayErrorContext(err).to_string()),
        },
        SdkError::DispatchFailure(failure) if failure.is_io() || failure.is_other() => {
            SqsError::Connection {
                operation,
                message: redact(&DisplayErrorContext(err).to_string()),
            }
        }
        _ => SqsError::Other {
            operation,
            message: redact(&DisplayErrorContext(err).to_string()),
        },
    }
}

/// What the provider chain said, when `err` (or an error behind it) is its failure to find
/// credentials: the SDK reports that as a failed dispatch, whose text speaks of the last
/// provider tried (an instance metadata session token, refused or unreachable off EC2), not of
/// the missing credentials. A provider that timed out is left to the timeout mapping.
pub(crate) fn no_credentials(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    use aws_credential_types::provider::error::CredentialsError;
    let mut current = Some(err);
    while let Some(e) = current {
        match e.downcast_ref::<CredentialsError>() {
            Some(CredentialsError::ProviderTimedOut(_)) => return None,
            Some(_) => return Some(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()),
            None => current = e.source(),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use babelqueue_core::TransportError;

    use super::*;

    #[test]
    fn kinds_and_transience() {
        let service = |code: &str| SqsError::Service {
            operation: "SendMessage",
            code: code.into(),
            message: "m".into(),
        };
        assert_eq!(
            service("ReceiptHandleIsInvalid").kind(),
            TransportErrorKind::Rejected
        );
        assert!(!service("InvalidParameterValue").is_transient());
        assert!(service("RequestThrottled").is_transient());
        assert!(
            SqsError::Connection {
                operation: "ReceiveMessage",
                message: "refused".into()
            }
            .is_transient()
        );
        assert_eq!(
            SqsError::Delay("x".into()).kind(),
            TransportErrorKind::Unsupported
        );
        assert_eq!(SqsError::NoRegion.kind(), TransportErrorKind::Config);
        let missing = SqsError::QueueDoesNotExist {
            operation: "GetQueueUrl",
            queue: "orders".into(),
        };
        assert_eq!(
            missing.code(),
            Some("AWS.SimpleQueueService.NonExistentQueue")
        );
        let t: TransportError = missing.into();
        assert_eq!(t.kind(), TransportErrorKind::Rejected);
        assert!(t.to_string().contains("\"orders\" does not exist"), "{t}");
    }

    #[test]
    fn refused_credentials_are_auth_errors() {
        use aws_sdk_sqs::error::{ErrorMetadata, SdkError};
        use aws_sdk_sqs::operation::get_queue_url::GetQueueUrlError;
        for code in [
            "InvalidClientTokenId",
            "SignatureDoesNotMatch",
            "UnrecognizedClientException",
            "ExpiredToken",
        ] {
            let service = GetQueueUrlError::generic(
                ErrorMetadata::builder()
                    .code(code)
                    .message("The security token included in the request is invalid.")
                    .build(),
            );
            let sdk: SdkError<GetQueueUrlError, ()> = SdkError::service_error(service, ());
            let error = from_sdk("GetQueueUrl", "orders", "127.0.0.1:5000", &sdk);
            assert!(matches!(error, SqsError::Auth { .. }), "{error:?}");
            assert_eq!(error.kind(), TransportErrorKind::Auth);
            assert!(!error.is_transient());
            assert_eq!(error.code(), Some(code));
            let text = error.to_string();
            assert!(
                text.contains("127.0.0.1:5000") && text.contains("refused the credentials"),
                "{text}"
            );
            let mapped = TransportError::from(error);
            assert_eq!(mapped.kind(), TransportErrorKind::Auth);
        }
        // A permission refusal of valid credentials stays a refusal.
        let denied = GetQueueUrlError::generic(
            ErrorMetadata::builder()
                .code("AccessDenied")
                .message("no")
                .build(),
        );
        let sdk: SdkError<GetQueueUrlError, ()> = SdkError::service_error(denied, ());
        assert_eq!(
            from_sdk("GetQueueUrl", "orders", "h", &sdk).kind(),
            TransportErrorKind::Rejected
        );
    }

    #[test]
    fn a_converted_error_shows_its_cause_once() {
        let cause = "cause-7f3a";
        for error in [
            SqsError::Config(cause.into()),
            SqsError::Delay(cause.into()),
            SqsError::Body(cause.into()),
            SqsError::Attribute {
                name: "h".into(),
                reason: cause.into(),
            },
            SqsError::Auth {
                operation: "GetQueueUrl",
                endpoint: "127.0.0.1:5000".into(),
                code: "InvalidClientTokenId".into(),
                message: cause.into(),
            },
            SqsError::Service {
                operation: "SendMessage",
                code: "InvalidParameterValue".into(),
                message: cause.into(),
            },
            SqsError::Connection {
                operation: "ReceiveMessage",
                message: cause.into(),
            },
            SqsError::Timeout {
                operation: "ReceiveMessage",
                message: cause.into(),
            },
            SqsError::Other {
                operation: "DeleteMessage",
                message: cause.into(),
            },
        ] {
            let own = error.to_string();
            let shown = TransportError::from(error).to_string();
            assert_eq!(shown.matches(cause).count(), 1, "{shown}");
            assert_eq!(shown.matches(own.as_str()).count(), 1, "{shown}");
        }
    }
}
