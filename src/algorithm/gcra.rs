use super::packed::{Pack, Words};
use super::{to_u64, Algorithm, CopyTransition, Decision, Quota};
use crate::clock::Nanos;
use std::time::Duration;

/// GCRA state (generic cell rate algorithm): one timestamp per key.
///
/// `tat`, the theoretical arrival time, is when the key would be back to a full allowance.
/// Each request of cost `c` moves it `c` emission intervals (`period / limit`) later, starting
/// from now if it lies in the past; a request fits when `tat` stays within `burst` intervals
/// of now. The interval is rounded up to a whole nanosecond, so the configured rate is never
/// exceeded (for 3 per second it is 333,333,334 ns). 8 bytes per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    tat: Nanos,
}

impl Pack for Gcra {
    fn pack(self) -> Words {
        [self.tat.as_u64(), 0]
    }

    fn unpack([tat, _]: Words) -> Self {
        Gcra {
            tat: Nanos::new(tat),
        }
    }
}

impl CopyTransition for Gcra {
    /// Admits `cost` requests if they fit within `burst` intervals.
    #[inline(always)]
    fn transition(state: Option<&Gcra>, now: Nanos, quota: &Quota, cost: u64) -> (Gcra, Decision) {
        let schedule = Schedule {
            slots: Algorithm::Gcra.capacity(quota),
            max_delay: None,
            shaping: false,
        };
        schedule.transition(state.map_or(now, |s| s.tat), now, quota, cost, |tat| Gcra {
            tat,
        })
    }
}

/// The virtual-scheduling arithmetic shared by GCRA and the leaky bucket: requests take
/// consecutive slots of one emission interval each, and at most `slots` may be taken ahead
/// of now.
#[derive(Debug, Clone, Copy)]
pub(super) struct Schedule {
    /// How many intervals may be booked ahead of now (GCRA: the burst; leaky bucket: the
    /// queue plus the request being served).
    pub(super) slots: u64,
    /// The longest a request may wait for its slot (leaky bucket shaping).
    pub(super) max_delay: Option<Duration>,
    /// Whether an admitted request waits for its slot (shaping) or goes at once (policing).
    pub(super) shaping: bool,
}

impl Schedule {
    #[inline(always)]
    pub(super) fn transition<S>(
        self,
        tat: Nanos,
        now: Nanos,
        quota: &Quota,
        cost: u64,
        state: impl Fn(Nanos) -> S,
    ) -> (S, Decision) {
        let Some(divisor) = quota.emission_interval() else {
            // A limit of 0: nothing is ever admitted, and there is nothing to book.
            let decision = Decision {
                allowed: false,
                limit: 0,
                remaining: 0,
                reset_after: Duration::ZERO,
                retry_after: quota.period(),
                delay: Duration::ZERO,
                booked_until: None,
            };
            return (state(tat), decision);
        };
        let now_ns = u128::from(now.as_u64());
        let start = now_ns.max(u128::from(tat.as_u64()));
        let interval = u128::from(divisor.get());
        let booked_until = start + u128::from(cost) * interval;
        let horizon = u128::from(self.slots) * interval;
        let delay = start - now_ns;
        let within_delay = self.max_delay.is_none_or(|max| delay <= max.as_nanos());
        // A booking past the representable future is refused, never clamped (a clamped one
        // would let every later request fit).
        let representable = booked_until <= u128::from(u64::MAX);
        let allowed = booked_until - now_ns <= horizon && within_delay && representable;

        let tat_after = if allowed { booked_until } else { start };
        let ahead = tat_after - now_ns;
        let retry_after = if allowed {
            Duration::ZERO
        } else if cost > self.slots {
            quota.period()
        } else {
            // The first t with start(t) + cost×interval - t <= horizon (start is tat for
            // every t before tat), and, when bounded, tat - t <= max_delay.
            let fits_at = booked_until.saturating_sub(horizon);
            let waits_at = self
                .max_delay
                .map_or(0, |max| start.saturating_sub(max.as_nanos()));
            Duration::from_nanos(to_u64(fits_at.max(waits_at).saturating_sub(now_ns)))
        };
        let mut limit = self.slots;
        let mut remaining = divisor.div(horizon.saturating_sub(ahead));
        if let Some(max) = self.max_delay.map(|max| max.as_nanos()) {
            // The k-th next request would wait ahead + (k - 1) intervals.
            let within = |wait: u128| {
                if wait <= max {
                    divisor.div(max - wait) + 1
                } else {
                    0
                }
            };
            limit = limit.min(to_u64(within(0)));
            remaining = remaining.min(within(ahead));
        }
        let decision = Decision {
            allowed,
            limit,
            remaining: to_u64(remaining),
            reset_after: Duration::from_nanos(to_u64(ahead)),
            retry_after,
            delay: if allowed && self.shaping {
                Duration::from_nanos(to_u64(delay))
            } else {
                Duration::ZERO
            },
            booked_until: (allowed && self.shaping && delay > 0)
                .then(|| Nanos::new(to_u64(booked_until))),
        };
        (state(Nanos::new(to_u64(tat_after))), decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Transition;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn admits_the_burst_then_one_per_interval() {
        let quota = Quota::new(4, Duration::from_secs(1)).with_burst(2);
        let mut state = Gcra::fresh(Nanos::new(0), &quota);
        assert!(state.acquire(Nanos::new(0), &quota, 1).allowed);
        assert!(state.acquire(Nanos::new(0), &quota, 1).allowed);
        let denied = state.acquire(Nanos::new(0), &quota, 1);
        assert!(!denied.allowed);
        assert_eq!(denied.retry_after, Duration::from_millis(250));
        assert!(!state.acquire(Nanos::new(SECOND / 4 - 1), &quota, 1).allowed);
        assert!(state.acquire(Nanos::new(SECOND / 4), &quota, 1).allowed);
    }

    #[test]
    fn the_interval_rounds_up_so_the_rate_is_never_exceeded() {
        let quota = Quota::new(3, Duration::from_secs(1)).with_burst(1);
        assert_eq!(
            quota.emission_interval().map(|i| i.get()),
            Some(333_333_334)
        );
        let mut state = Gcra::fresh(Nanos::new(0), &quota);
        let admitted = (0..=SECOND)
            .step_by(1_000)
            .filter(|&t| state.acquire(Nanos::new(t), &quota, 1).allowed)
            .count();
        assert_eq!(admitted, 3);
    }
}
