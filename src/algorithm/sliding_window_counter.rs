use super::{to_u64, CopyTransition, Decision, Quota};
use crate::clock::Nanos;
use std::time::Duration;

/// Sliding window counter state: the counts of the current and the previous fixed window.
///
/// The estimate at time `t` is `current + previous × (period - elapsed) / period`, where
/// `elapsed` is the time since the current window began. Admission compares exactly
/// (`previous × (period - elapsed) + (current + cost) × period <= limit × period`, in integers),
/// so nothing is rounded in the client's favour; `remaining` is rounded down, so it never
/// overstates. 24 bytes per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindowCounter {
    window: u64,
    current: u64,
    previous: u64,
}

impl SlidingWindowCounter {
    /// The state of `current` requests in window number `window` (since the epoch) and
    /// `previous` in the one before.
    pub(crate) fn counted(window: u64, current: u64, previous: u64) -> Self {
        SlidingWindowCounter {
            window,
            current,
            previous,
        }
    }
}

impl CopyTransition for SlidingWindowCounter {
    /// Counts `cost` requests if the weighted estimate leaves room for them.
    fn transition(
        state: Option<&SlidingWindowCounter>,
        now: Nanos,
        quota: &Quota,
        cost: u64,
    ) -> (SlidingWindowCounter, Decision) {
        let period = u128::from(quota.period_nanos());
        let limit = u128::from(quota.requests_per_period());
        // A wall clock stepped back into an earlier window decides at the start of the stored
        // one: going back in time must not hand out fresh windows. Durations are still
        // measured from the real now.
        let now_window = quota.period_divisor().div_u64(now.as_u64());
        let (at, window) = match state {
            Some(s) if s.window > now_window => {
                let at = Nanos::new(s.window.saturating_mul(quota.period_nanos()));
                (at, quota.period_divisor().div_u64(at.as_u64()))
            }
            _ => (now, now_window),
        };
        let (current, previous) = match state {
            Some(s) if s.window == window => (s.current, s.previous),
            Some(s) if s.window.checked_add(1) == Some(window) => (0, s.current),
            _ => (0, 0),
        };
        let window_start = u128::from(window) * period;
        let elapsed = u128::from(at.as_u64()) - window_start;
        // Everything below is scaled by `period` to stay in integers.
        let weighted_previous = u128::from(previous) * (period - elapsed);
        let used = weighted_previous + u128::from(current) * period;
        let capacity = limit * period;
        let cost_scaled = u128::from(cost) * period;
        let allowed = used + cost_scaled <= capacity;
        let current = if allowed { current + cost } else { current };
        let used = if allowed { used + cost_scaled } else { used };

        let retry_after = if allowed {
            Duration::ZERO
        } else if u128::from(cost) > limit {
            quota.period()
        } else {
            let retry_at =
                Self::earliest_admission(window_start, period, limit, current, previous, cost);
            Nanos::new(to_u64(retry_at)).since(now)
        };
        let reset_at = if current > 0 {
            window_start + 2 * period
        } else if previous > 0 {
            window_start + period
        } else {
            u128::from(at.as_u64())
        };
        let decision = Decision {
            allowed,
            capacity: quota.requests_per_period(),
            remaining: to_u64(capacity.saturating_sub(used) / period),
            reset_after: Nanos::new(to_u64(reset_at)).since(now),
            retry_after,
            delay: Duration::ZERO,
            booked_until: None,
        };
        let next = SlidingWindowCounter {
            window,
            current,
            previous,
        };
        (next, decision)
    }

    /// Counts `extra` more in the window of `now`, or takes `-extra` off its count.
    fn settle(&mut self, now: Nanos, quota: &Quota, extra: i64) {
        let current = quota.period_divisor().div_u64(now.as_u64());
        if current > self.window {
            let previous = if self.window.checked_add(1) == Some(current) {
                self.current
            } else {
                0
            };
            *self = SlidingWindowCounter {
                window: current,
                current: 0,
                previous,
            };
        }
        self.current = super::fixed_window::settled(self.current, extra);
    }
}

impl SlidingWindowCounter {
    /// The first instant at which `cost` more requests fit, for `cost <= limit`.
    fn earliest_admission(
        window_start: u128,
        period: u128,
        limit: u128,
        current: u64,
        previous: u64,
        cost: u64,
    ) -> u128 {
        let (current, previous, cost) =
            (u128::from(current), u128::from(previous), u128::from(cost));
        if current + cost <= limit {
            // Later in this window: previous × (period - e) <= room × period.
            let room = limit - current - cost;
            // previous > 0 here, or the request would have fitted.
            let e = period - (room * period / previous).min(period);
            return window_start + e;
        }
        // In the next window the current count becomes the previous one, weighted down as
        // that window goes by: current × (period - e) <= (limit - cost) × period.
        let room = limit - cost;
        let e = period - (room * period / current).min(period);
        window_start + period + e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn acquire(state: &mut Option<SlidingWindowCounter>, at: u64, quota: &Quota) -> Decision {
        let (next, decision) =
            SlidingWindowCounter::transition(state.as_ref(), Nanos::new(at), quota, 1);
        if decision.allowed {
            *state = Some(next);
        }
        decision
    }

    #[test]
    fn previous_window_is_weighted_by_overlap() {
        let quota = Quota::new(10, Duration::from_secs(1)).unwrap();
        let mut state = None;
        for _ in 0..10 {
            assert!(acquire(&mut state, 0, &quota).allowed);
        }
        // A quarter into the next window, 7.5 of the previous 10 still count: 2 more fit.
        let at = SECOND + SECOND / 4;
        assert!(acquire(&mut state, at, &quota).allowed);
        assert!(acquire(&mut state, at, &quota).allowed);
        let denied = acquire(&mut state, at, &quota);
        assert!(!denied.allowed);
        assert_eq!(denied.remaining, 0);
    }

    #[test]
    fn retry_after_is_exact_in_both_windows() {
        let quota = Quota::new(10, Duration::from_secs(1)).unwrap();
        for fill_at in [0, SECOND / 2, SECOND - 1] {
            for probe_at in [fill_at, SECOND + SECOND / 4, SECOND + SECOND / 2] {
                let mut state = None;
                for _ in 0..10 {
                    acquire(&mut state, fill_at, &quota);
                }
                let mut probe_state = state;
                while acquire(&mut probe_state, probe_at, &quota).allowed {}
                let denied = acquire(&mut probe_state, probe_at, &quota);
                let wait = u64::try_from(denied.retry_after.as_nanos()).unwrap();
                assert!(wait > 0);
                let mut early = probe_state;
                assert!(
                    !acquire(&mut early, probe_at + wait - 1, &quota).allowed,
                    "early at {fill_at}/{probe_at}"
                );
                let mut on_time = probe_state;
                assert!(
                    acquire(&mut on_time, probe_at + wait, &quota).allowed,
                    "on time at {fill_at}/{probe_at}"
                );
            }
        }
    }

    #[test]
    fn a_clock_stepping_back_over_a_window_edge_grants_nothing() {
        let quota = Quota::new(1, Duration::from_secs(1)).unwrap();
        let mut state = None;
        assert!(acquire(&mut state, SECOND, &quota).allowed);
        let stepped_back = acquire(&mut state, SECOND - 20, &quota);
        assert!(!stepped_back.allowed);
        // The window of 1 s counts until 3 s, measured from the real (earlier) now.
        assert_eq!(
            stepped_back.reset_after,
            Duration::from_nanos(2 * SECOND + 20)
        );
    }

    #[test]
    fn keys_idle_for_two_windows_start_fresh() {
        let quota = Quota::new(1, Duration::from_secs(1)).unwrap();
        let mut state = None;
        assert!(acquire(&mut state, 0, &quota).allowed);
        assert!(acquire(&mut state, 2 * SECOND, &quota).allowed);
    }
}
