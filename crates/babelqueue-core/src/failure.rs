//! How a handler reports failure: a [`HandlerError`] and the [`Action`] it asks for.
//!
//! A leaf: it names nothing else in the crate, so the decision tables
//! ([`decide`](crate::decide)) read a handler's wish without depending on the handler types or
//! on the runtime that runs them.

use std::fmt;
use std::time::Duration;

/// What a failed handler asks the runtime to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Retry with the configured back-off (until `max_attempts`, then dead-letter or drop).
    Retry,
    /// Retry after this delay instead of the back-off.
    RetryAfter(Duration),
    /// The message can never succeed: dead-letter it now (reason `poison`), no retry.
    Reject,
}

/// A handler failure: a message, a type name for the dead-letter record, and an [`Action`].
///
/// Any `std::error::Error` converts with `?` (action [`Action::Retry`], type name from the
/// error's type).
pub struct HandlerError {
    action: Action,
    message: String,
    exception: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl HandlerError {
    /// A failure to retry.
    pub fn new(message: impl Into<String>) -> HandlerError {
        HandlerError {
            action: Action::Retry,
            message: message.into(),
            exception: "HandlerError".into(),
            source: None,
        }
    }

    /// A failure to retry after `delay` (instead of the configured back-off).
    pub fn retry_after(message: impl Into<String>, delay: Duration) -> HandlerError {
        HandlerError {
            action: Action::RetryAfter(delay),
            ..HandlerError::new(message)
        }
    }

    /// A message that can never succeed: dead-letter it now, without retrying.
    pub fn reject(message: impl Into<String>) -> HandlerError {
        HandlerError {
            action: Action::Reject,
            ..HandlerError::new(message)
        }
    }

    /// Sets the type name recorded in the dead-letter block's `exception`.
    #[must_use]
    pub fn with_exception(mut self, name: impl Into<String>) -> HandlerError {
        self.exception = name.into();
        self
    }

    /// Sets the action.
    #[must_use]
    pub fn with_action(mut self, action: Action) -> HandlerError {
        self.action = action;
        self
    }

    /// The action.
    pub fn action(&self) -> Action {
        self.action
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The type name recorded as `exception`.
    pub fn exception(&self) -> &str {
        &self.exception
    }

    /// The underlying error, when there is one.
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

fn short_type_name<E: ?Sized>() -> String {
    let full = std::any::type_name::<E>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base).to_owned()
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(error: E) -> Self {
        HandlerError {
            action: Action::Retry,
            message: error.to_string(),
            exception: short_type_name::<E>(),
            source: Some(Box::new(error)),
        }
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerError")
            .field("action", &self.action)
            .field("message", &self.message)
            .field("exception", &self.exception)
            .finish()
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("disk full")]
    struct DiskFull;

    #[test]
    fn errors_convert_with_their_type_name() {
        fn fails() -> Result<(), HandlerError> {
            Err(DiskFull)?;
            Ok(())
        }
        let e = fails().unwrap_err();
        assert_eq!(
            (e.message(), e.exception(), e.action()),
            ("disk full", "DiskFull", Action::Retry)
        );
        assert_eq!(HandlerError::reject("bad").action(), Action::Reject);
    }
}
