//! The decision core: what the limits that apply to one request make of it.
//!
//! A leaf of the crate: it depends on [`algorithm`](crate::algorithm), [`rules`](crate::rules)
//! and [`clock`](crate::clock) only. The limiter books the limits that apply
//! ([`Booking`]), asks a store for their [`Decision`](crate::algorithm::Decision)s, and this
//! module combines them into a [`Ruling`]: admitted or not, and which limit to report. The
//! layer, `observe` and `response` read decisions from here, never from the limiter.
//!
//! - [`Ruling`]: the outcome under one snapshot of the rules (crate-private: it names its
//!   limit by index, valid only under that snapshot).
//! - [`Verdict`]: the outcome handed to users, naming its limit by label.
//! - [`LimitDecision`]: one limit's own decision, for tools that show each limit's part.
//! - [`slot_decision`]: a concurrency limit's decision, from the requests in flight.
//! - [`StoreFailures`]: what each limit's `on_store_error` policy makes of a request that
//!   the store could not decide.

mod booking;
mod failure;
mod limit_decision;
mod ruling;
mod slot;
mod verdict;

pub(crate) use booking::{Booking, Bookings, Queued, Weight, INLINE_LIMITS};
pub(crate) use failure::{StoreFailure, StoreFailures, STORE_ERROR_RETRY};
pub use limit_decision::LimitDecision;
pub(crate) use ruling::{Ruling, SlotRuling};
pub(crate) use slot::slot_decision;
pub use verdict::{Denial, Verdict};
