//! What a reload keeps: a key's usage under a limit, carried into the limit that replaced it.
//!
//! When a reload changes a limit's quota, period or algorithm, each key starts the new limit
//! from what it had used under the old one, in one of two ways:
//!
//! - **as it is**, where the state means the same under the new limit: a sliding window
//!   log's entries (the times of its requests, whatever the limit and period), and the counts
//!   of a fixed window or a sliding window counter whose algorithm and period are unchanged;
//! - **a token bucket's level**, into a token bucket: the tokens it holds now, at most the
//!   new burst;
//! - **as the requests it has used**, otherwise: the old limit's capacity less what remains
//!   of it now (never understated), charged at once to a fresh state of the new limit, at most
//!   its capacity. A window counts them in the window of now, GCRA and the leaky bucket book
//!   them from now (their level is what is used), a token bucket takes them from its tokens,
//!   a log files them at now.

use super::{Algorithm, Decision, PackedAlgorithm, Quota, State, Words};
use crate::clock::Nanos;

/// How a key's state under one limit carries into the limit that replaced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carry {
    /// The state itself: it means the same under the new limit.
    AsIs,
    /// What remains of it (a token bucket's tokens): the new limit starts with as much, at
    /// most its capacity.
    Remaining,
    /// The requests it has used, charged to a fresh state of the new limit (see [`used`]).
    Used,
}

impl Algorithm {
    /// How a state of `from` under `from_quota` carries into this algorithm under `quota`.
    pub(crate) fn carry_from(self, quota: &Quota, from: Algorithm, from_quota: &Quota) -> Carry {
        let same_period = quota.period_nanos() == from_quota.period_nanos()
            && quota.calendar() == from_quota.calendar();
        let same_algorithm = from == self;
        match self {
            Algorithm::SlidingWindowLog if same_algorithm => Carry::AsIs,
            Algorithm::FixedWindow | Algorithm::SlidingWindowCounter
                if same_algorithm && same_period =>
            {
                Carry::AsIs
            }
            Algorithm::TokenBucket if same_algorithm => Carry::Remaining,
            Algorithm::TokenBucket
            | Algorithm::LeakyBucket
            | Algorithm::FixedWindow
            | Algorithm::SlidingWindowLog
            | Algorithm::SlidingWindowCounter
            | Algorithm::Gcra => Carry::Used,
        }
    }

    /// What a request that has used `used` requests is charged under `quota` when it starts
    /// afresh: all of them, at most the capacity (more could never be admitted, and the
    /// state would refuse them).
    pub(crate) fn carried_cost(self, quota: &Quota, used: u64) -> u64 {
        used.min(self.capacity(quota))
    }

    /// The state of a key that has used `used` requests at `now`, under `quota`: a fresh
    /// state charged with them (see [`Algorithm::carried_cost`]).
    pub(crate) fn having_used(self, now: Nanos, quota: &Quota, used: u64) -> State {
        let mut state = self.fresh(now, quota);
        self.acquire(&mut state, now, quota, self.carried_cost(quota, used));
        state
    }

    /// How long after its last request a state of this algorithm under `quota` may still
    /// differ from a fresh one: a window's period (two for the sliding window counter, whose
    /// previous window still counts; a day more for a calendar's, whose months and years
    /// run a day past their nominal length), a bucket's capacity of intervals.
    pub(crate) fn horizon(self, quota: &Quota) -> u64 {
        const DAY: u64 = 86_400_000_000_000;
        let period = match quota.calendar() {
            None => quota.period_nanos(),
            Some(_) => quota.period_nanos().saturating_add(DAY),
        };
        match self {
            Algorithm::FixedWindow | Algorithm::SlidingWindowLog => period,
            Algorithm::SlidingWindowCounter => period.saturating_mul(2),
            Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::LeakyBucket => {
                quota.emission_interval().map_or(0, |interval| {
                    interval.get().saturating_mul(self.capacity(quota))
                })
            }
        }
    }
}

impl PackedAlgorithm {
    /// [`Algorithm::having_used`] for `algorithm`, which this one decides, packed.
    pub(crate) fn having_used(
        self,
        algorithm: Algorithm,
        now: Nanos,
        quota: &Quota,
        used: u64,
    ) -> Words {
        let cost = algorithm.carried_cost(quota, used);
        let (charged, decision) = self.transition(None, now, quota, cost);
        // The state returned is the one to keep when the charge fits; it may not (a limit of
        // 0): then the fresh state, charged nothing.
        if decision.allowed {
            charged
        } else {
            self.transition(None, now, quota, 0).0
        }
    }
}

impl Carry {
    /// The requests a state carried this way has used under the new limit, `algorithm` under
    /// `quota`, from the old limit's decision on it of weight 0 (what remains, as it stands;
    /// never overstated, so that what is used is never understated). Not for
    /// [`Carry::AsIs`], which carries the state itself.
    pub(crate) fn used(self, algorithm: Algorithm, quota: &Quota, as_it_stands: &Decision) -> u64 {
        match self {
            Carry::Remaining => algorithm
                .capacity(quota)
                .saturating_sub(as_it_stands.remaining),
            Carry::AsIs | Carry::Used => {
                as_it_stands.capacity.saturating_sub(as_it_stands.remaining)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MINUTE: Duration = Duration::from_secs(60);

    /// `limit` a minute, all of them at once whatever the algorithm.
    fn per_minute(limit: u64) -> Quota {
        Quota::new(limit, MINUTE)
            .unwrap()
            .with_queue(limit.saturating_sub(1))
    }

    /// The state of `algorithm` under `quota` after `requests` admitted at `now`.
    fn after(algorithm: Algorithm, quota: &Quota, requests: u64, now: Nanos) -> State {
        let mut state = algorithm.fresh(now, quota);
        for _ in 0..requests {
            assert!(algorithm.acquire(&mut state, now, quota, 1).allowed);
        }
        state
    }

    /// What `algorithm` admits one by one at `now` from `state` under `quota`.
    fn admits(algorithm: Algorithm, mut state: State, quota: &Quota, now: Nanos) -> usize {
        (0..100)
            .take_while(|_| algorithm.acquire(&mut state, now, quota, 1).allowed)
            .count()
    }

    /// `state` of `from` under `from_quota`, carried into `to` under `quota` at `now`.
    fn carried(
        state: &State,
        from: Algorithm,
        from_quota: &Quota,
        to: Algorithm,
        quota: &Quota,
        now: Nanos,
    ) -> State {
        match to.carry_from(quota, from, from_quota) {
            Carry::AsIs => state.clone(),
            carry => {
                let used = carry.used(to, quota, &from.peek(state, now, from_quota, 0));
                to.having_used(now, quota, used)
            }
        }
    }

    #[test]
    fn a_raised_limit_admits_what_is_left_of_it_and_a_lowered_one_nothing() {
        let now = Nanos::new(3_600_000_000_000);
        // A token bucket keeps its tokens instead (below).
        for algorithm in Algorithm::ALL
            .into_iter()
            .filter(|a| *a != Algorithm::TokenBucket)
        {
            let five = per_minute(5);
            let used = after(algorithm, &five, 5, now);
            for (limit, more) in [(8, 3), (3, 0), (5, 0)] {
                let quota = per_minute(limit);
                let state = carried(&used, algorithm, &five, algorithm, &quota, now);
                assert_eq!(
                    admits(algorithm, state, &quota, now),
                    more,
                    "{algorithm}: 5 of 5 used, then {limit} a minute"
                );
            }
        }
    }

    #[test]
    fn a_token_bucket_keeps_its_level_capped_at_the_new_burst() {
        let now = Nanos::new(3_600_000_000_000);
        let bucket = per_minute(10).with_burst(10);
        let used = after(Algorithm::TokenBucket, &bucket, 4, now);
        let smaller = per_minute(10).with_burst(3);
        let larger = per_minute(10).with_burst(20);
        let empty = after(Algorithm::TokenBucket, &bucket, 10, now);
        for (used, quota, more) in [(&used, smaller, 3), (&used, larger, 6), (&empty, larger, 0)] {
            let state = carried(
                used,
                Algorithm::TokenBucket,
                &bucket,
                Algorithm::TokenBucket,
                &quota,
                now,
            );
            assert_eq!(admits(Algorithm::TokenBucket, state, &quota, now), more);
        }
    }

    #[test]
    fn a_log_keeps_its_entries_whatever_changed() {
        let start = Nanos::new(3_600_000_000_000);
        let five = per_minute(5);
        let mut log = Algorithm::SlidingWindowLog.fresh(start, &five);
        for second in 0..5 {
            let at = start.plus(second * 10_000_000_000);
            assert!(
                Algorithm::SlidingWindowLog
                    .acquire(&mut log, at, &five, 1)
                    .allowed
            );
        }
        // Ten a half minute: the entries of the last 30 s (at 20, 30 and 40 s) count.
        let half_minute = Quota::new(10, Duration::from_secs(30)).unwrap();
        let now = start.plus(45_000_000_000);
        let state = carried(
            &log,
            Algorithm::SlidingWindowLog,
            &five,
            Algorithm::SlidingWindowLog,
            &half_minute,
            now,
        );
        assert_eq!(state, log, "the same entries");
        assert_eq!(
            admits(Algorithm::SlidingWindowLog, state, &half_minute, now),
            7
        );
    }

    #[test]
    fn a_changed_algorithm_starts_from_the_requests_used() {
        let now = Nanos::new(3_600_000_000_000);
        let quota = per_minute(5);
        for from in Algorithm::ALL {
            let used = after(from, &quota, 2, now);
            for to in Algorithm::ALL {
                let state = carried(&used, from, &quota, to, &quota, now);
                assert_eq!(admits(to, state, &quota, now), 3, "{from} to {to}");
            }
        }
    }

    #[test]
    fn a_window_whose_period_changed_counts_its_requests_in_the_window_of_now() {
        let now = Nanos::new(3_600_000_000_000 + 30_000_000_000);
        let per_minute = per_minute(10);
        let used = after(Algorithm::FixedWindow, &per_minute, 4, now);
        let per_hour = Quota::new(10, Duration::from_secs(3_600)).unwrap();
        let state = carried(
            &used,
            Algorithm::FixedWindow,
            &per_minute,
            Algorithm::FixedWindow,
            &per_hour,
            now,
        );
        assert_eq!(admits(Algorithm::FixedWindow, state, &per_hour, now), 6);
    }

    #[test]
    fn horizons_cover_how_long_a_state_outlives_its_last_request() {
        let quota = per_minute(5).with_burst(10).with_queue(2);
        for algorithm in Algorithm::ALL {
            let now = Nanos::new(3_600_000_000_000);
            let decision = algorithm.acquire(&mut algorithm.fresh(now, &quota), now, &quota, 1);
            assert!(
                decision.reset_after.as_nanos() <= u128::from(algorithm.horizon(&quota)),
                "{algorithm}"
            );
        }
    }
}
