use crate::clock::Nanos;
use std::time::Duration;

/// The answer for one limit: allowed or not, and what to tell the client.
///
/// A denial is data, not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// Whether the request fits.
    pub allowed: bool,
    /// The most requests the client may send at once under this limit: its requests per
    /// period, the token bucket's and GCRA's burst, or the leaky bucket's queue plus one
    /// (see [`Algorithm::capacity`](super::Algorithm::capacity)). `X-Ratelimit-Limit`.
    pub capacity: u64,
    /// Requests the client may still send right now; never overstated.
    pub remaining: u64,
    /// Time until the limit is back to its full allowance.
    pub reset_after: Duration,
    /// When denied: the time after which the same request is admitted (exact to the
    /// nanosecond). Zero when allowed. A request that can never be admitted (a cost above
    /// the limit, or a limit of 0) reports one period.
    pub retry_after: Duration,
    /// When admitted by a shaping leaky bucket: how long the request waits for its turn
    /// before it is forwarded. Zero otherwise.
    pub delay: Duration,
    /// When admitted with a delay: the end of the request's booking in the queue, in the
    /// store's time. It identifies the booking when the request is cancelled, so that only
    /// the newest booking is given back (see [`Algorithm::cancel`](super::Algorithm::cancel)).
    pub booked_until: Option<Nanos>,
}

impl Decision {
    /// The decision on a request only checked, never charged: whether it fits and, if not,
    /// when it would (this decision, on a request of its weight), but with what remains and
    /// when the limit is back to its full allowance as they stand, from `as_it_stands` (the
    /// same state decided for a weight of 0): nothing was charged, and nothing booked.
    pub(crate) fn checked(self, as_it_stands: Decision) -> Decision {
        if !self.allowed {
            return self;
        }
        Decision {
            remaining: as_it_stands.remaining,
            reset_after: as_it_stands.reset_after,
            booked_until: None,
            ..self
        }
    }

    /// This decision on a request of `cost` that its limit admitted but that was not
    /// charged (another limit refused the request): what remains as it stands, `cost`
    /// more than after the charge, in every algorithm.
    pub(crate) fn uncharged(self, cost: u64) -> Decision {
        if !self.allowed {
            return self;
        }
        Decision {
            remaining: self.remaining.saturating_add(cost).min(self.capacity),
            booked_until: None,
            ..self
        }
    }
}
