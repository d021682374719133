//! How the store calls the library: within the timeout, loading it again when Redis lost it,
//! and telling the circuit breaker how Redis answered.

use super::coalesce;
use super::errors::{redis_error, timeout_error};
use super::program::{self, Entry};
use super::Inner;
use crate::store::StoreError;
use redis::{FromRedisValue, RedisWrite, ToRedisArgs};
use smallvec::SmallVec;
use std::sync::Arc;
use std::time::Duration;

/// A call of the library that failed.
pub(super) struct Failure {
    pub(super) error: StoreError,
    /// Whether Redis could not be reached or did not answer (rather than answered an error).
    pub(super) unreachable: bool,
}

impl Failure {
    /// Redis did not answer within `timeout`.
    pub(super) fn timed_out(timeout: Duration) -> Self {
        Failure {
            unreachable: true,
            error: timeout_error(timeout),
        }
    }

    /// A failure that says nothing of whether Redis can be reached: Redis answered an error,
    /// or the request never went.
    pub(super) fn other(error: StoreError) -> Self {
        Failure {
            error,
            unreachable: false,
        }
    }
}

/// An argument of a call: now, as text ("" for Redis's clock), or a number.
#[derive(Debug, Clone, Copy)]
pub(super) enum Arg<'a> {
    Text(&'a str),
    Number(i64),
}

impl ToRedisArgs for Arg<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        match self {
            Arg::Text(text) => text.write_redis_args(out),
            Arg::Number(number) => number.write_redis_args(out),
        }
    }
}

impl Inner {
    /// Runs `entry` with `keys`, then `now` and `args` as arguments, within the timeout; a
    /// Redis that does not answer counts towards the circuit breaker.
    pub(super) async fn invoke<'k, T: FromRedisValue>(
        &self,
        entry: Entry,
        keys: impl IntoIterator<Item = &'k [u8]>,
        now: &str,
        args: impl IntoIterator<Item = i64>,
    ) -> Result<T, StoreError> {
        let result = self.run(entry, keys, now, args, self.timeout).await;
        self.accounted(result)
    }

    /// Decides a request: as [`invoke`](Self::invoke), in a batch with others when the
    /// connection is busy (see [`coalesce`]).
    pub(super) async fn decide<'k, T: FromRedisValue>(
        self: &Arc<Self>,
        entry: Entry,
        keys: impl IntoIterator<Item = &'k [u8]>,
        now: &str,
        args: impl IntoIterator<Item = i64>,
    ) -> Result<T, StoreError> {
        let keys: SmallVec<[&[u8]; 4]> = keys.into_iter().collect();
        let args: SmallVec<[i64; 16]> = args.into_iter().collect();
        let result = coalesce::call(self, entry, &keys, now, &args)
            .await
            .and_then(|value| {
                T::from_redis_value(value).map_err(|error| {
                    Failure::other(redis_error(
                        "Redis answered a call with a reply of another shape",
                        error.into(),
                    ))
                })
            });
        self.accounted(result)
    }

    /// `result`, once the circuit breaker knows whether Redis answered.
    fn accounted<T>(&self, result: Result<T, Failure>) -> Result<T, StoreError> {
        match result {
            Ok(value) => {
                self.breaker.succeeded();
                Ok(value)
            }
            Err(failure) => {
                // Only an unreachable or unresponsive Redis trips the breaker; an error from
                // the server itself says nothing about the other keys.
                if failure.unreachable {
                    self.breaker.failed(&failure.error);
                }
                Err(failure.error)
            }
        }
    }

    /// Runs `entry` with `keys`, then `now` and `args` as arguments, within `timeout`.
    pub(super) async fn run<'k, T: FromRedisValue>(
        &self,
        entry: Entry,
        keys: impl IntoIterator<Item = &'k [u8]>,
        now: &str,
        args: impl IntoIterator<Item = i64>,
        timeout: Duration,
    ) -> Result<T, Failure> {
        let keys: SmallVec<[&[u8]; 4]> = keys.into_iter().collect();
        let args: SmallVec<[Arg<'_>; 16]> = std::iter::once(Arg::Text(now))
            .chain(args.into_iter().map(Arg::Number))
            .collect();
        self.run_with(entry, &keys, &args, timeout).await
    }

    /// Runs `entry` with `keys` and `args` within `timeout`: the library's function (loaded
    /// again, once, if Redis lost it), or its script.
    pub(super) async fn run_with<T: FromRedisValue>(
        &self,
        entry: Entry,
        keys: &[&[u8]],
        args: &[Arg<'_>],
        timeout: Duration,
    ) -> Result<T, Failure> {
        let call = async {
            if !self.program.uses_functions() {
                let mut invocation = self.program.script(entry).prepare_invoke();
                for key in keys {
                    invocation.key(*key);
                }
                for arg in args {
                    invocation.arg(*arg);
                }
                return invocation.invoke_async(&mut self.connection.clone()).await;
            }
            let mut fcall = redis::cmd("FCALL");
            fcall
                .arg(self.program.name(entry))
                .arg(keys.len())
                .arg(keys)
                .arg(args);
            match self.query(&fcall).await {
                Err(error) if program::is_function_missing(&error) => {
                    self.query::<()>(&self.program.load_command()).await?;
                    self.query(&fcall).await
                }
                result => result,
            }
        };
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(Failure {
                unreachable: error.is_io_error()
                    || error.is_timeout()
                    || error.is_connection_dropped()
                    || error.is_connection_refusal()
                    || error.is_unrecoverable_error(),
                error: redis_error("the Redis call failed", error),
            }),
            Err(_) => Err(Failure::timed_out(timeout)),
        }
    }
}
