//! The store errors of Redis's failures: what failed, of the kind the cause says.

use crate::store::{StoreError, StoreErrorKind};
use redis::{ErrorKind, RedisError};
use std::borrow::Cow;
use std::time::Duration;

/// `error`, from redis-rs, with `message` saying what failed.
pub(super) fn redis_error(message: impl Into<Cow<'static, str>>, error: RedisError) -> StoreError {
    StoreError::new(kind_of(&error), message).with_source(error)
}

/// The error of a call that Redis did not answer within `timeout`.
pub(super) fn timeout_error(timeout: Duration) -> StoreError {
    let message = format!("Redis did not answer within {timeout:?}");
    StoreError::new(StoreErrorKind::Timeout, message)
}

/// The error of a call the circuit breaker kept from Redis.
pub(super) fn circuit_open() -> StoreError {
    let message =
        "Redis keeps failing: calls fail at once until the circuit breaker's cooldown ends";
    StoreError::new(StoreErrorKind::CircuitOpen, message)
}

/// The error of a call whose reply Redis sent with another shape than the one asked for:
/// `what` answered `got`.
pub(super) fn unexpected_reply(what: &str, got: impl std::fmt::Display) -> StoreError {
    let message = format!("Redis answered {what} with {got}");
    StoreError::new(StoreErrorKind::Protocol, message)
}

/// What kind of failure `error` is.
fn kind_of(error: &RedisError) -> StoreErrorKind {
    if error.is_timeout() {
        return StoreErrorKind::Timeout;
    }
    if error.is_io_error() || error.is_connection_refusal() || error.is_connection_dropped() {
        return StoreErrorKind::Connection;
    }
    match error.kind() {
        ErrorKind::AuthenticationFailed
        | ErrorKind::InvalidClientConfig
        | ErrorKind::EmptySentinelList => StoreErrorKind::Configuration,
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType | ErrorKind::RESP3NotSupported => {
            StoreErrorKind::Protocol
        }
        ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::NoValidReplicasFoundBySentinel
        | ErrorKind::ClusterConnectionNotFound => StoreErrorKind::Connection,
        // An error reply (`ERR`, `OOM`, `READONLY`, `NOPERM`...), or one redis-rs adds later.
        _ => StoreErrorKind::Server,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_errors_are_sorted_by_their_cause() {
        let kind = |error: RedisError| redis_error("the call", error).kind();
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(kind(refused.into()), StoreErrorKind::Connection);
        let timed_out = std::io::Error::from(std::io::ErrorKind::TimedOut);
        assert_eq!(kind(timed_out.into()), StoreErrorKind::Timeout);
        let password = (ErrorKind::AuthenticationFailed, "WRONGPASS").into();
        assert_eq!(kind(password), StoreErrorKind::Configuration);
        let shape = (ErrorKind::UnexpectedReturnType, "not a number").into();
        assert_eq!(kind(shape), StoreErrorKind::Protocol);
    }

    #[test]
    fn the_redis_error_is_the_source() {
        let error = redis_error("the call", (ErrorKind::Client, "no").into());
        let source = std::error::Error::source(&error).expect("a source");
        assert!(source.downcast_ref::<RedisError>().is_some());
    }
}
