use super::packed::{Pack, Words};
use super::{CopyTransition, Decision, Quota};
use crate::clock::Nanos;
use std::time::Duration;

/// Fixed window state: the count of requests in the current window.
///
/// Windows are aligned to multiples of the period since the Unix epoch, so a minute window
/// starts at `:00` on every server and a day window at midnight UTC; or, with a
/// [calendar](super::Calendar), they are its days, weeks, months or years. 16 bytes per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    window: u64,
    count: u64,
}

impl FixedWindow {
    /// The state of `count` requests in window number `window` (since the epoch).
    pub(crate) fn counted(window: u64, count: u64) -> Self {
        FixedWindow { window, count }
    }

    /// The state as the memory store keeps it packed.
    pub(crate) fn words(self) -> Words {
        self.pack()
    }
}

impl Pack for FixedWindow {
    fn pack(self) -> Words {
        [self.window, self.count]
    }

    fn unpack([window, count]: Words) -> Self {
        FixedWindow { window, count }
    }
}

impl CopyTransition for FixedWindow {
    /// Counts `cost` requests in the window of `now` if they fit.
    // Always inlined: callers read the decision at once, and a decision returned through
    // memory makes that read wait behind its writes (benches/hot_key.rs shows it).
    #[inline(always)]
    fn transition(
        state: Option<&FixedWindow>,
        now: Nanos,
        quota: &Quota,
        cost: u64,
    ) -> (FixedWindow, Decision) {
        // A wall clock stepped back into an earlier window still decides in the stored one:
        // going back in time must not hand out a fresh window.
        let current = quota.window_at(now);
        let window = current.max(state.map_or(0, |s| s.window));
        let count = match state {
            Some(s) if s.window == window => s.count,
            _ => 0,
        };
        let until_next_window = quota.window_end(window).since(now);
        let allowed = count.saturating_add(cost) <= quota.requests_per_period();
        let count = if allowed { count + cost } else { count };
        let retry_after = if allowed {
            Duration::ZERO
        } else if cost > quota.requests_per_period() {
            quota.period()
        } else {
            until_next_window
        };
        let decision = Decision {
            allowed,
            capacity: quota.requests_per_period(),
            // Saturating: a state counted under a larger limit may exceed this one.
            remaining: quota.requests_per_period().saturating_sub(count),
            reset_after: if count == 0 {
                Duration::ZERO
            } else {
                until_next_window
            },
            retry_after,
            delay: Duration::ZERO,
            booked_until: None,
        };
        (FixedWindow { window, count }, decision)
    }

    /// Counts `extra` more in the window of `now` (a window the count has not reached
    /// starts with them), or takes `-extra` off its count.
    fn settle(&mut self, now: Nanos, quota: &Quota, extra: i64) {
        let current = quota.window_at(now);
        if current > self.window {
            *self = FixedWindow {
                window: current,
                count: 0,
            };
        }
        self.count = settled(self.count, extra);
    }
}

/// `count` with `extra` added, or `-extra` taken off (not below 0).
pub(super) fn settled(count: u64, extra: i64) -> u64 {
    if extra >= 0 {
        count.saturating_add(extra.unsigned_abs())
    } else {
        count.saturating_sub(extra.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn windows_align_to_the_period() {
        let quota = Quota::new(1, Duration::from_secs(60)).unwrap();
        let (state, first) = FixedWindow::transition(None, Nanos::new(59 * SECOND), &quota, 1);
        assert!(first.allowed);
        assert_eq!(first.reset_after, Duration::from_secs(1));
        let (_, second) =
            FixedWindow::transition(Some(&state), Nanos::new(59 * SECOND + 1), &quota, 1);
        assert!(!second.allowed);
        assert_eq!(second.retry_after, Duration::from_nanos(SECOND - 1));
        let (_, next_window) =
            FixedWindow::transition(Some(&state), Nanos::new(60 * SECOND), &quota, 1);
        assert!(next_window.allowed);
    }

    #[test]
    fn a_clock_stepping_back_over_a_window_edge_grants_nothing() {
        let quota = Quota::new(1, Duration::from_secs(1)).unwrap();
        let (state, first) = FixedWindow::transition(None, Nanos::new(SECOND), &quota, 1);
        assert!(first.allowed);
        let (_, stepped_back) =
            FixedWindow::transition(Some(&state), Nanos::new(SECOND - 20), &quota, 1);
        assert!(!stepped_back.allowed);
    }

    #[test]
    fn cost_above_limit_is_never_admitted() {
        let quota = Quota::new(5, Duration::from_secs(1)).unwrap();
        let (_, decision) = FixedWindow::transition(None, Nanos::new(0), &quota, 6);
        assert!(!decision.allowed);
        assert_eq!(decision.remaining, 5);
        assert_eq!(decision.retry_after, Duration::from_secs(1));
    }
}
