//! What clients are told: rate-limit headers, the `429` problem document, the gRPC status.
//!
//! Which rate-limit headers a response carries is chosen in the rules
//! ([`ResponseOptions`](crate::rules::ResponseOptions)): by default `X-Ratelimit-Limit` and
//! `X-Ratelimit-Remaining` on admitted responses; the IETF `RateLimit-Policy` and `RateLimit`
//! fields instead, both, or none; the `X-Ratelimit-*` headers may be renamed.
//!
//! A denied HTTP request gets `429 Too Many Requests` with an `application/problem+json`
//! body (RFC 9457), `Retry-After`, and the headers of the chosen set (`X-Ratelimit-Remaining:
//! 0` and `X-Ratelimit-Retry-After` among the `X-Ratelimit-*` ones). A denied gRPC call
//! (`content-type: application/grpc*`) gets a Trailers-Only `RESOURCE_EXHAUSTED` with
//! `grpc-retry-pushback-ms`, `Retry-After` and the same headers: an HTTP 429 would reach gRPC
//! clients as UNAVAILABLE, which they retry at once. Waits are whole seconds (milliseconds
//! for the pushback), rounded up and never 0: a client that waits that long is admitted.
//!
//! ```
//! use tollgate::response::{RATELIMIT, X_RATELIMIT_LIMIT};
//!
//! assert_eq!(X_RATELIMIT_LIMIT.as_str(), "x-ratelimit-limit");
//! assert_eq!(RATELIMIT.as_str(), "ratelimit");
//! ```

mod grpc;
mod headers;
mod ietf;
mod missing_peer_addr;
mod numbers;
mod recent;
mod recent_rejections;
mod rejection;
mod settled_cost;
mod verdict_headers;
mod wait;

pub(crate) use grpc::is_grpc;
#[cfg(feature = "client")]
pub(crate) use grpc::{GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS};
pub(crate) use headers::{headers, RateLimitHeaders};
pub use headers::{
    RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET,
    X_RATELIMIT_RETRY_AFTER,
};
pub(crate) use missing_peer_addr::missing_peer_addr;
pub(crate) use rejection::{rejection, rejection_headers};
pub use settled_cost::SettledCost;
pub use verdict_headers::verdict_headers;
pub(crate) use wait::millis_at_least_one;
