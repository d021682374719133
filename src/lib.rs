//! Rule-driven rate limiting for Tower services.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod algorithm;
pub mod clock;
mod limiter;
pub mod rules;
pub mod source;
pub mod store;

pub use limiter::{Limiter, Verdict};
pub mod layer;
pub mod response;

pub use layer::{RateLimit, RateLimitLayer};
