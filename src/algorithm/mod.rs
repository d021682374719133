//! The rate-limiting algorithms, as pure state transitions.
//!
//! Each algorithm is a state transition `(state, now, quota, cost) -> Decision` that charges
//! the state only when the request is admitted: no I/O, no clock reads, no locks. `peek` gives
//! the same decision without charging, so a store can check several limits before charging
//! any. A [`Store`](crate::store::Store) keeps the state per key and runs the transition
//! atomically; the same arithmetic is what every store must reproduce.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::algorithm::{Algorithm, Quota};
//! use tollgate::clock::Nanos;
//!
//! let quota = Quota::new(2, Duration::from_secs(1))?;
//! let now = Nanos::new(0);
//! let algorithm = Algorithm::FixedWindow;
//! let mut state = algorithm.fresh(now, &quota);
//! assert!(algorithm.acquire(&mut state, now, &quota, 1).allowed);
//! assert!(algorithm.acquire(&mut state, now, &quota, 1).allowed);
//! let third = algorithm.acquire(&mut state, now, &quota, 1);
//! assert!(!third.allowed);
//! assert_eq!(third.retry_after, Duration::from_secs(1));
//! # Ok::<(), tollgate::algorithm::QuotaError>(())
//! ```

mod calendar;
mod capabilities;
mod carry;
mod decision;
mod divisor;
mod fixed_window;
mod gcra;
mod leaky_bucket;
mod packed;
mod quota;
mod sliding_window_counter;
mod sliding_window_log;
mod token_bucket;

pub use calendar::{Calendar, CalendarUnit, UnknownTimeZone};
pub(crate) use capabilities::WindowCount;
pub(crate) use carry::Carry;
pub use decision::Decision;
pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use leaky_bucket::LeakyBucket;
pub(crate) use packed::{PackedAlgorithm, Words};
pub use quota::{Quota, QuotaError};
pub use sliding_window_counter::SlidingWindowCounter;
pub use sliding_window_log::SlidingWindowLog;
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
    /// A FIFO queue drained at the limit's rate: excess requests wait their turn (shaping)
    /// or are measured against it (policing).
    LeakyBucket,
    /// A counter per calendar-aligned window; cheapest, but allows 2× at a window edge.
    FixedWindow,
    /// Every admitted request's time: exact in any rolling window, memory grows with the limit.
    SlidingWindowLog,
    /// The current window's count plus the previous one's, weighted by overlap.
    SlidingWindowCounter,
    /// The generic cell rate algorithm: one timestamp per key, exact, with a burst.
    Gcra,
}

impl Algorithm {
    /// Every algorithm.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindowLog,
        Algorithm::SlidingWindowCounter,
        Algorithm::Gcra,
    ];

    /// The name used in rules files.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::LeakyBucket => "leaky_bucket",
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindowLog => "sliding_window_log",
            Algorithm::SlidingWindowCounter => "sliding_window_counter",
            Algorithm::Gcra => "gcra",
        }
    }

    /// The largest cost one request can ever be admitted with: the token bucket's and GCRA's
    /// burst, the leaky bucket's queue plus the request being served, the windows' limit.
    pub fn capacity(self, quota: &Quota) -> u64 {
        match self {
            Algorithm::TokenBucket | Algorithm::Gcra => quota.burst(),
            Algorithm::LeakyBucket => quota.queue().saturating_add(1),
            Algorithm::FixedWindow
            | Algorithm::SlidingWindowLog
            | Algorithm::SlidingWindowCounter => quota.requests_per_period(),
        }
    }

    /// The state of a key never seen.
    pub fn fresh(self, now: Nanos, quota: &Quota) -> State {
        match self {
            Algorithm::TokenBucket => State::TokenBucket(TokenBucket::fresh(now, quota)),
            Algorithm::LeakyBucket => State::LeakyBucket(LeakyBucket::fresh(now, quota)),
            Algorithm::FixedWindow => State::FixedWindow(FixedWindow::fresh(now, quota)),
            Algorithm::SlidingWindowLog => {
                State::SlidingWindowLog(SlidingWindowLog::fresh(now, quota))
            }
            Algorithm::SlidingWindowCounter => {
                State::SlidingWindowCounter(SlidingWindowCounter::fresh(now, quota))
            }
            Algorithm::Gcra => State::Gcra(Gcra::fresh(now, quota)),
        }
    }

    /// Decides a request of `cost` at `now`, charging `state` when it is admitted.
    ///
    /// A state left by another algorithm counts as never seen.
    pub fn acquire(self, state: &mut State, now: Nanos, quota: &Quota, cost: u64) -> Decision {
        if state.algorithm() != self {
            *state = self.fresh(now, quota);
        }
        match state {
            State::TokenBucket(s) => s.acquire(now, quota, cost),
            State::LeakyBucket(s) => s.acquire(now, quota, cost),
            State::FixedWindow(s) => s.acquire(now, quota, cost),
            State::SlidingWindowLog(s) => s.acquire(now, quota, cost),
            State::SlidingWindowCounter(s) => s.acquire(now, quota, cost),
            State::Gcra(s) => s.acquire(now, quota, cost),
        }
    }

    /// The decision [`Algorithm::acquire`] would make, without charging anything.
    pub fn peek(self, state: &State, now: Nanos, quota: &Quota, cost: u64) -> Decision {
        if state.algorithm() != self {
            return self.peek(&self.fresh(now, quota), now, quota, cost);
        }
        match state {
            State::TokenBucket(s) => s.peek(now, quota, cost),
            State::LeakyBucket(s) => s.peek(now, quota, cost),
            State::FixedWindow(s) => s.peek(now, quota, cost),
            State::SlidingWindowLog(s) => s.peek(now, quota, cost),
            State::SlidingWindowCounter(s) => s.peek(now, quota, cost),
            State::Gcra(s) => s.peek(now, quota, cost),
        }
    }

    /// Settles what an admitted request cost once its response said (see the
    /// [rules reference](crate::guide::rules)): charges `extra` more at `now` whatever the
    /// room left, or, `extra` negative, gives back `-extra` of what it was charged. A charge
    /// past the limit is kept: later requests are refused until it has been paid back (the
    /// window ends, the tokens refill, the schedule catches up), with an exact
    /// `retry_after`. What is given back never makes a key fuller than a fresh one; a
    /// window's charge is given back only in the window it was made in (`now`'s).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, Quota};
    /// use tollgate::clock::Nanos;
    ///
    /// // 1,000 tokens a minute; each answer reserves 1 and turns out to use 300.
    /// let quota = Quota::new(1_000, Duration::from_secs(60))?;
    /// let window = Algorithm::FixedWindow;
    /// let mut state = window.fresh(Nanos::new(0), &quota);
    /// for _ in 0..4 {
    ///     assert!(window.acquire(&mut state, Nanos::new(0), &quota, 1).allowed);
    ///     window.settle(&mut state, Nanos::new(0), &quota, 299);
    /// }
    /// let fifth = window.acquire(&mut state, Nanos::new(0), &quota, 1);
    /// assert!(!fifth.allowed);
    /// assert_eq!(fifth.retry_after, Duration::from_secs(60));
    /// # Ok::<(), tollgate::algorithm::QuotaError>(())
    /// ```
    pub fn settle(self, state: &mut State, now: Nanos, quota: &Quota, extra: i64) {
        if state.algorithm() != self {
            *state = self.fresh(now, quota);
        }
        match state {
            State::TokenBucket(s) => Transition::settle(s, now, quota, extra),
            State::LeakyBucket(s) => Transition::settle(s, now, quota, extra),
            State::FixedWindow(s) => Transition::settle(s, now, quota, extra),
            State::SlidingWindowLog(s) => Transition::settle(s, now, quota, extra),
            State::SlidingWindowCounter(s) => Transition::settle(s, now, quota, extra),
            State::Gcra(s) => Transition::settle(s, now, quota, extra),
        }
    }

    /// Gives back what an admitted request of `cost` booked but will not use: the place in
    /// the queue of a leaky bucket whose client went away before its turn, when it is still
    /// the newest booking (`booked_until`, from its [`Decision`]). Other algorithms keep the
    /// charge (the request was admitted and counted).
    pub fn cancel(
        self,
        state: &mut State,
        now: Nanos,
        quota: &Quota,
        cost: u64,
        booked_until: Nanos,
    ) {
        match state {
            State::LeakyBucket(s) => s.cancel(now, quota, cost, booked_until),
            State::TokenBucket(_)
            | State::FixedWindow(_)
            | State::SlidingWindowLog(_)
            | State::SlidingWindowCounter(_)
            | State::Gcra(_) => {}
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The state one key keeps, whichever algorithm limits it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum State {
    /// See [`TokenBucket`].
    TokenBucket(TokenBucket),
    /// See [`LeakyBucket`].
    LeakyBucket(LeakyBucket),
    /// See [`FixedWindow`].
    FixedWindow(FixedWindow),
    /// See [`SlidingWindowLog`].
    SlidingWindowLog(SlidingWindowLog),
    /// See [`SlidingWindowCounter`].
    SlidingWindowCounter(SlidingWindowCounter),
    /// See [`Gcra`].
    Gcra(Gcra),
}

impl State {
    /// The algorithm this state belongs to.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            State::TokenBucket(_) => Algorithm::TokenBucket,
            State::LeakyBucket(_) => Algorithm::LeakyBucket,
            State::FixedWindow(_) => Algorithm::FixedWindow,
            State::SlidingWindowLog(_) => Algorithm::SlidingWindowLog,
            State::SlidingWindowCounter(_) => Algorithm::SlidingWindowCounter,
            State::Gcra(_) => Algorithm::Gcra,
        }
    }
}

/// One algorithm's state transitions.
trait Transition: Sized {
    /// The state of a key never seen.
    fn fresh(now: Nanos, quota: &Quota) -> Self;
    /// Decides `cost` at `now`, charging the state when admitted.
    fn acquire(&mut self, now: Nanos, quota: &Quota, cost: u64) -> Decision;
    /// Decides without charging.
    fn peek(&self, now: Nanos, quota: &Quota, cost: u64) -> Decision;
    /// Charges `extra` more at `now` whatever the room, or gives back `-extra` (see
    /// [`Algorithm::settle`]).
    fn settle(&mut self, now: Nanos, quota: &Quota, extra: i64);
}

/// An algorithm whose small `Copy` state is replaced whole: one pure function gives the
/// next state and the decision, and the [`Transition`] methods follow from it.
trait CopyTransition: Copy {
    /// The state after a request of `cost` at `now` (`None`: never seen), and the decision.
    /// The state returned is the one to keep if the request is admitted.
    fn transition(state: Option<&Self>, now: Nanos, quota: &Quota, cost: u64) -> (Self, Decision);

    /// Gives back what an admitted request booked (see [`Algorithm::cancel`]).
    fn cancel(&mut self, _now: Nanos, _quota: &Quota, _cost: u64, _booked_until: Nanos) {}

    /// Charges `extra` more at `now` whatever the room, or gives back `-extra` (see
    /// [`Algorithm::settle`]).
    fn settle(&mut self, now: Nanos, quota: &Quota, extra: i64);
}

impl<T: CopyTransition> Transition for T {
    fn fresh(now: Nanos, quota: &Quota) -> Self {
        // A request of cost 0 always fits and charges nothing: what remains is the fresh state.
        T::transition(None, now, quota, 0).0
    }

    fn acquire(&mut self, now: Nanos, quota: &Quota, cost: u64) -> Decision {
        let (next, decision) = T::transition(Some(self), now, quota, cost);
        if decision.allowed {
            *self = next;
        }
        decision
    }

    fn peek(&self, now: Nanos, quota: &Quota, cost: u64) -> Decision {
        T::transition(Some(self), now, quota, cost).1
    }

    fn settle(&mut self, now: Nanos, quota: &Quota, extra: i64) {
        CopyTransition::settle(self, now, quota, extra);
    }
}

/// Nanoseconds as a `u64`, saturating (periods are bounded, so this never saturates in practice).
fn to_u64(nanos: u128) -> u64 {
    u64::try_from(nanos).unwrap_or(u64::MAX)
}
