//! What each algorithm can do besides deciding: whether it counts in windows, can be
//! counted in a sketch, decided local-first, follow a calendar, book time ahead, take a
//! burst or queue. Each answer is one exhaustive match, so that a new algorithm makes the
//! compiler list every question it must answer; the rules and the stores ask here instead
//! of matching on algorithms themselves.

use super::{Algorithm, FixedWindow, SlidingWindowCounter, State};

/// How many windows of its period an algorithm counts requests in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WindowCount {
    /// The current window alone: the fixed window.
    One,
    /// The current window and the one before, weighted by overlap: the sliding window
    /// counter.
    Two,
}

impl WindowCount {
    /// The state that has counted `current` requests in window `number` and `previous` in
    /// the one before (which one window ignores).
    pub(crate) fn state(self, number: u64, current: u64, previous: u64) -> State {
        match self {
            WindowCount::One => State::FixedWindow(FixedWindow::counted(number, current)),
            WindowCount::Two => State::SlidingWindowCounter(SlidingWindowCounter::counted(
                number, current, previous,
            )),
        }
    }
}

impl Algorithm {
    /// The windows it counts requests in; `None` for a bucket, a schedule or a log.
    pub(crate) const fn window_count(self) -> Option<WindowCount> {
        match self {
            Algorithm::FixedWindow => Some(WindowCount::One),
            Algorithm::SlidingWindowCounter => Some(WindowCount::Two),
            Algorithm::TokenBucket
            | Algorithm::LeakyBucket
            | Algorithm::SlidingWindowLog
            | Algorithm::Gcra => None,
        }
    }

    /// Whether the memory store can count it in a count-min sketch (`approximate`): the
    /// algorithms that count in windows, whose counts a sketch can add up.
    pub(crate) const fn can_be_approximated(self) -> bool {
        self.window_count().is_some()
    }

    /// Whether a store shared by a fleet can decide it local-first (`sync_every`): its
    /// state adds up across servers, as windows' counts or a schedule's bookings (token
    /// bucket, GCRA). A leaky bucket's queue and a log's timestamps do not.
    pub(crate) const fn syncs_local_first(self) -> bool {
        match self {
            Algorithm::FixedWindow
            | Algorithm::SlidingWindowCounter
            | Algorithm::TokenBucket
            | Algorithm::Gcra => true,
            Algorithm::LeakyBucket | Algorithm::SlidingWindowLog => false,
        }
    }

    /// Whether its windows can follow a calendar (days, months in a time zone): only the
    /// fixed window's, which count each window apart.
    pub(crate) const fn follows_calendar(self) -> bool {
        match self {
            Algorithm::FixedWindow => true,
            Algorithm::TokenBucket
            | Algorithm::LeakyBucket
            | Algorithm::SlidingWindowLog
            | Algorithm::SlidingWindowCounter
            | Algorithm::Gcra => false,
        }
    }

    /// Whether it books time ahead, one interval of `period / requests_per_unit` a request
    /// (GCRA's burst, the leaky bucket's queue).
    pub(crate) const fn books_ahead(self) -> bool {
        match self {
            Algorithm::Gcra | Algorithm::LeakyBucket => true,
            Algorithm::TokenBucket
            | Algorithm::FixedWindow
            | Algorithm::SlidingWindowLog
            | Algorithm::SlidingWindowCounter => false,
        }
    }

    /// Whether it takes a `burst`.
    pub(crate) const fn takes_burst(self) -> bool {
        match self {
            Algorithm::TokenBucket | Algorithm::Gcra => true,
            Algorithm::LeakyBucket
            | Algorithm::FixedWindow
            | Algorithm::SlidingWindowLog
            | Algorithm::SlidingWindowCounter => false,
        }
    }

    /// Whether it queues requests, and so takes a `queue`, a `mode` and a `max_delay`.
    pub(crate) const fn queues(self) -> bool {
        match self {
            Algorithm::LeakyBucket => true,
            Algorithm::TokenBucket
            | Algorithm::FixedWindow
            | Algorithm::SlidingWindowLog
            | Algorithm::SlidingWindowCounter
            | Algorithm::Gcra => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Quota;
    use crate::clock::Nanos;
    use std::time::Duration;

    #[test]
    fn window_states_decide_as_the_algorithm_that_counts_in_them() {
        let quota = Quota::new(4, Duration::from_secs(60)).expect("a quota");
        let now = Nanos::new(90_000_000_000);
        for algorithm in Algorithm::ALL {
            let Some(windows) = algorithm.window_count() else {
                continue;
            };
            let state = windows.state(1, 3, 2);
            assert_eq!(state.algorithm(), algorithm);
            let fresh = algorithm.peek(&windows.state(1, 0, 0), now, &quota, 1);
            assert_eq!(
                fresh,
                algorithm.peek(&algorithm.fresh(now, &quota), now, &quota, 1)
            );
        }
    }

    #[test]
    fn what_each_algorithm_can_do() {
        let can = |ask: fn(Algorithm) -> bool| -> Vec<&str> {
            Algorithm::ALL
                .into_iter()
                .filter(|a| ask(*a))
                .map(Algorithm::name)
                .collect()
        };
        assert_eq!(
            can(Algorithm::can_be_approximated),
            ["fixed_window", "sliding_window_counter"]
        );
        assert_eq!(
            can(Algorithm::syncs_local_first),
            [
                "token_bucket",
                "fixed_window",
                "sliding_window_counter",
                "gcra"
            ]
        );
        assert_eq!(can(Algorithm::follows_calendar), ["fixed_window"]);
        assert_eq!(can(Algorithm::books_ahead), ["leaky_bucket", "gcra"]);
        assert_eq!(can(Algorithm::takes_burst), ["token_bucket", "gcra"]);
        assert_eq!(can(Algorithm::queues), ["leaky_bucket"]);
    }
}
