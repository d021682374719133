//! What a store says when it could not decide: which kind of failure, in words, and the
//! error underneath.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// A store could not decide (it was unreachable, timed out, or answered nonsense).
///
/// What happens then is the limit's `on_store_error` policy. [`StoreError::kind`] says what
/// failed, to tell a Redis that is down from one that is slow or misconfigured;
/// [`source`](StdError::source) is the error underneath, when there is one (a redis-rs
/// error, an I/O error).
///
/// ```
/// use tollgate::store::{StoreError, StoreErrorKind};
///
/// fn worth_retrying(error: &StoreError) -> bool {
///     matches!(
///         error.kind(),
///         StoreErrorKind::Timeout | StoreErrorKind::Connection | StoreErrorKind::CircuitOpen
///     )
/// }
///
/// let error = StoreError::new(StoreErrorKind::Timeout, "Redis did not answer within 50ms");
/// assert!(worth_retrying(&error));
/// assert_eq!(error.to_string(), "Redis did not answer within 50ms");
/// ```
#[derive(Debug, Clone)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: Cow<'static, str>,
    /// Shared, so that one failed call can answer each of the requests it carried.
    source: Option<Arc<dyn StdError + Send + Sync>>,
}

/// What kind of failure a [`StoreError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The store did not answer within its timeout (a slow or paused Redis).
    Timeout,
    /// The store could not be reached: nothing listens at its address, the connection was
    /// refused, reset or dropped, or no node (behind sentinels: no master) answers.
    Connection,
    /// The store's circuit breaker is open: after a run of failures, calls fail at once,
    /// without asking the store, until its cooldown ends.
    CircuitOpen,
    /// The store answered something other than what was asked for: a reply of the wrong
    /// shape, or a wrong number of decisions.
    Protocol,
    /// The store refused the call with an error of its own: out of memory, a read-only
    /// replica, a script that failed, a missing permission.
    Server,
    /// The store cannot do what was asked: keep a limit (a `sliding_window_log` too large
    /// for Redis, numbers too large for its exact arithmetic), or an operation it does not
    /// offer (settling costs, resetting keys).
    Unsupported,
    /// The store is configured wrongly, which no retry fixes: a URL that is not one, a key
    /// prefix with braces, a TLS file that cannot be read, credentials that Redis refuses,
    /// options that do not go together.
    Configuration,
    /// The call was abandoned before the store answered: the runtime it ran on shut down.
    Interrupted,
}

impl StoreError {
    /// An error of `kind`, saying in `message` what failed. For the stores of the crate's
    /// own tests ([`Store`](super::Store) is sealed), outside the API's semver promise.
    #[doc(hidden)]
    pub fn new(kind: StoreErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        StoreError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The same error, caused by `source`, the error underneath (shown after the message).
    #[must_use]
    #[cfg(any(feature = "redis", test))]
    pub(crate) fn with_source(mut self, source: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The error of a store that answered `answered` decisions for `asked` limits.
    pub(crate) fn miscounted(answered: usize, asked: usize) -> Self {
        let message = format!("the store answered {answered} decisions for {asked} limits");
        StoreError::new(StoreErrorKind::Protocol, message)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{}: {source}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl StdError for StoreError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_the_source_and_follows_the_message() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let error = StoreError::new(StoreErrorKind::Connection, "cannot connect to Redis")
            .with_source(refused);
        assert_eq!(error.kind(), StoreErrorKind::Connection);
        let source = error.source().expect("the I/O error");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(
            error.to_string(),
            format!("cannot connect to Redis: {source}")
        );
    }

    #[test]
    fn a_copy_keeps_the_kind_and_the_source() {
        let error = StoreError::new(StoreErrorKind::Server, "the Redis call failed")
            .with_source(std::io::Error::other("OOM"));
        let copy = error.clone();
        assert_eq!(copy.kind(), StoreErrorKind::Server);
        assert_eq!(copy.to_string(), error.to_string());
        assert!(copy.source().is_some());
    }
}
