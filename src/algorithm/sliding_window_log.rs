use super::{Decision, Quota, Transition};
use crate::clock::Nanos;
use std::collections::VecDeque;
use std::time::Duration;

/// Sliding window log state: the time and cost of every admitted request still in the window.
///
/// Exact: in any window of one period, at most `limit` is admitted. A request admitted at
/// `t` counts until `t + period`. Requests at the same instant share one entry, and every
/// entry holds a cost of at least 1, so a key keeps at most `limit` entries of 16 bytes
/// (plus the 40-byte state): the most memory of all the algorithms, in exchange for exactness.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlidingWindowLog {
    entries: VecDeque<(Nanos, u64)>,
    total: u64,
}

impl SlidingWindowLog {
    /// When a request at `now` is filed: now, or, if the wall clock stepped back, with the
    /// newest entry, keeping the log in order (the request then leaves the window a little
    /// later: never too early).
    fn filing_time(&self, now: Nanos) -> Nanos {
        self.entries
            .back()
            .map_or(now, |(newest, _)| now.max(*newest))
    }

    /// The number and cost of the entries that have left the window by `now`.
    fn expired(&self, now: Nanos, quota: &Quota) -> (usize, u64) {
        let mut count = 0;
        let mut cost = 0;
        for (at, entry_cost) in &self.entries {
            if at.plus(quota.period_nanos()) > now {
                break;
            }
            count += 1;
            cost += entry_cost;
        }
        (count, cost)
    }

    /// The decision for `cost` at `now`, ignoring the first `expired` entries (cost `freed`).
    fn decide(&self, now: Nanos, quota: &Quota, cost: u64, expired: usize, freed: u64) -> Decision {
        let used = self.total - freed;
        let allowed = used.saturating_add(cost) <= quota.requests_per_period();
        let used_after = if allowed { used + cost } else { used };
        let retry_after = if allowed {
            Duration::ZERO
        } else if cost > quota.requests_per_period() {
            quota.period()
        } else {
            // Wait until enough of the oldest entries have left the window.
            let mut still_used = used;
            let leaving = self.entries.iter().skip(expired).find(|(_, entry_cost)| {
                still_used -= entry_cost;
                still_used + cost <= quota.requests_per_period()
            });
            leaving.map_or(Duration::ZERO, |(at, _)| {
                at.plus(quota.period_nanos()).since(now)
            })
        };
        let newest = if allowed {
            Some(self.filing_time(now))
        } else {
            self.entries.back().map(|(at, _)| *at)
        };
        Decision {
            allowed,
            capacity: quota.requests_per_period(),
            remaining: quota.requests_per_period().saturating_sub(used_after),
            reset_after: newest.map_or(Duration::ZERO, |at| {
                at.plus(quota.period_nanos()).since(now)
            }),
            retry_after,
            delay: Duration::ZERO,
            booked_until: None,
        }
    }
}

impl Transition for SlidingWindowLog {
    fn fresh(_now: Nanos, _quota: &Quota) -> Self {
        SlidingWindowLog::default()
    }

    fn acquire(&mut self, now: Nanos, quota: &Quota, cost: u64) -> Decision {
        let (expired, freed) = self.expired(now, quota);
        self.entries.drain(..expired);
        self.total -= freed;
        let decision = self.decide(now, quota, cost, 0, 0);
        // A request of cost 0 takes nothing and leaves no entry, so the log stays bounded.
        if decision.allowed && cost > 0 {
            let filed_at = self.filing_time(now);
            match self.entries.back_mut() {
                Some((at, entry_cost)) if *at == filed_at => *entry_cost += cost,
                _ => self.entries.push_back((filed_at, cost)),
            }
            self.total += cost;
        }
        decision
    }

    fn peek(&self, now: Nanos, quota: &Quota, cost: u64) -> Decision {
        let (expired, freed) = self.expired(now, quota);
        self.decide(now, quota, cost, expired, freed)
    }

    /// Files `extra` more at `now` (with the newest entry when they share a time), or takes
    /// `-extra` off the newest entries.
    fn settle(&mut self, now: Nanos, quota: &Quota, extra: i64) {
        let (expired, freed) = self.expired(now, quota);
        self.entries.drain(..expired);
        self.total -= freed;
        let amount = extra.unsigned_abs();
        if extra >= 0 {
            let filed_at = self.filing_time(now);
            match self.entries.back_mut() {
                Some((at, entry_cost)) if *at == filed_at => *entry_cost += amount,
                _ if amount == 0 => {}
                _ => self.entries.push_back((filed_at, amount)),
            }
            self.total += amount;
            return;
        }
        let mut left = amount;
        while let Some((_, entry_cost)) = self.entries.back_mut().filter(|_| left > 0) {
            let taken = left.min(*entry_cost);
            *entry_cost -= taken;
            self.total -= taken;
            left -= taken;
            if *entry_cost == 0 {
                self.entries.pop_back();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn no_rolling_window_admits_more_than_the_limit() {
        let quota = Quota::new(3, Duration::from_secs(1)).unwrap();
        let mut log = SlidingWindowLog::fresh(Nanos::new(0), &quota);
        for at in [0, SECOND / 2, SECOND - 1] {
            assert!(log.acquire(Nanos::new(at), &quota, 1).allowed);
        }
        let denied = log.acquire(Nanos::new(SECOND - 1), &quota, 1);
        assert!(!denied.allowed);
        assert_eq!(
            denied.retry_after,
            Duration::from_nanos(1),
            "the first entry leaves at 1 s"
        );
        assert!(log.acquire(Nanos::new(SECOND), &quota, 1).allowed);
        assert!(
            !log.acquire(Nanos::new(SECOND + SECOND / 2 - 1), &quota, 1)
                .allowed
        );
    }

    #[test]
    fn peek_agrees_with_acquire_and_changes_nothing() {
        let quota = Quota::new(5, Duration::from_secs(1)).unwrap();
        let mut log = SlidingWindowLog::fresh(Nanos::new(0), &quota);
        log.acquire(Nanos::new(0), &quota, 3);
        log.acquire(Nanos::new(SECOND / 2), &quota, 2);
        let before = log.clone();
        for (at, cost) in [(SECOND / 4, 1), (SECOND, 3), (SECOND, 4), (2 * SECOND, 5)] {
            let peeked = log.peek(Nanos::new(at), &quota, cost);
            assert_eq!(log, before);
            assert_eq!(peeked, log.clone().acquire(Nanos::new(at), &quota, cost));
        }
    }

    #[test]
    fn a_clock_stepping_back_never_ages_the_log_early() {
        let quota = Quota::new(2, Duration::from_secs(60)).unwrap();
        let mut log = SlidingWindowLog::fresh(Nanos::new(0), &quota);
        let at = Nanos::new(100 * SECOND);
        log.acquire(at, &quota, 1);
        let stepped_back = log.acquire(Nanos::new(90 * SECOND), &quota, 1);
        assert!(stepped_back.allowed);
        assert_eq!(
            stepped_back.reset_after,
            Duration::from_secs(70),
            "filed at 100 s, measured from 90 s"
        );
        let denied = log.acquire(Nanos::new(90 * SECOND), &quota, 1);
        assert_eq!(denied.retry_after, Duration::from_secs(70));
    }

    #[test]
    fn entries_are_bounded_by_the_limit() {
        let quota = Quota::new(100, Duration::from_secs(60)).unwrap();
        let mut log = SlidingWindowLog::fresh(Nanos::new(0), &quota);
        for at in 0..10_000 {
            log.acquire(Nanos::new(at * 1_000), &quota, 1);
        }
        assert!(log.entries.len() <= 100);
    }
}
