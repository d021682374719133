//! Rule-driven rate limiting for Tower services.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod algorithm;
pub mod clock;
pub mod rules;
pub mod source;
pub mod store;
mod limiter;

pub use limiter::{Limiter, Verdict};
