//! The rate-limiting algorithms, as pure state transitions.
//!
//! Each algorithm is a function `(state, now, quota, cost) -> (new state, Decision)`: no I/O,
//! no clock reads, no locks. A [`Store`](crate::store::Store) keeps the state per key and runs
//! the transition atomically; the same arithmetic is what every store must reproduce.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::algorithm::{Algorithm, Quota};
//! use tollgate::clock::Nanos;
//!
//! let quota = Quota::new(2, Duration::from_secs(1));
//! let now = Nanos::new(0);
//! let (state, first) = Algorithm::FixedWindow.acquire(None, now, &quota, 1);
//! let (state, second) = Algorithm::FixedWindow.acquire(Some(&state), now, &quota, 1);
//! let (_, third) = Algorithm::FixedWindow.acquire(Some(&state), now, &quota, 1);
//! assert!(first.allowed && second.allowed && !third.allowed);
//! assert_eq!(third.retry_after, Duration::from_secs(1));
//! ```

mod decision;
mod fixed_window;
mod quota;
mod sliding_window_counter;
mod token_bucket;

pub use decision::Decision;
pub use fixed_window::FixedWindow;
pub use quota::Quota;
pub use sliding_window_counter::SlidingWindowCounter;
pub use token_bucket::TokenBucket;

use crate::clock::Nanos;
use serde::Deserialize;
use std::fmt;

/// Which algorithm decides a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Algorithm {
    /// A bucket of `burst` tokens refilled at the limit's rate; smooth, allows bursts.
    TokenBucket,
    /// A counter per calendar-aligned window; cheapest, but allows 2× at a window edge.
    FixedWindow,
    /// The current window's count plus the previous one's, weighted by overlap.
    SlidingWindowCounter,
}

impl Algorithm {
    /// The name used in rules files.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindowCounter => "sliding_window_counter",
        }
    }

    /// Runs this algorithm on `state` (`None`: a key never seen) for a request of `cost`.
    ///
    /// A state left by another algorithm (after the rules changed) counts as never seen.
    /// The returned state is what the store keeps if the request is admitted.
    pub fn acquire(
        self,
        state: Option<&State>,
        now: Nanos,
        quota: &Quota,
        cost: u64,
    ) -> (State, Decision) {
        match self {
            Algorithm::TokenBucket => {
                let state = match state {
                    Some(State::TokenBucket(s)) => Some(s),
                    _ => None,
                };
                let (next, decision) = TokenBucket::acquire(state, now, quota, cost);
                (State::TokenBucket(next), decision)
            }
            Algorithm::FixedWindow => {
                let state = match state {
                    Some(State::FixedWindow(s)) => Some(s),
                    _ => None,
                };
                let (next, decision) = FixedWindow::acquire(state, now, quota, cost);
                (State::FixedWindow(next), decision)
            }
            Algorithm::SlidingWindowCounter => {
                let state = match state {
                    Some(State::SlidingWindowCounter(s)) => Some(s),
                    _ => None,
                };
                let (next, decision) = SlidingWindowCounter::acquire(state, now, quota, cost);
                (State::SlidingWindowCounter(next), decision)
            }
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The state one key keeps, whichever algorithm limits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum State {
    /// See [`TokenBucket`].
    TokenBucket(TokenBucket),
    /// See [`FixedWindow`].
    FixedWindow(FixedWindow),
    /// See [`SlidingWindowCounter`].
    SlidingWindowCounter(SlidingWindowCounter),
}

/// Nanoseconds as a `u64`, saturating (periods are bounded, so this never saturates in practice).
fn to_u64(nanos: u128) -> u64 {
    u64::try_from(nanos).unwrap_or(u64::MAX)
}
