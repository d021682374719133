//! At most one log event per second for a kind of event, counting the ones left out.

use crate::clock::Nanos;
use std::sync::atomic::{AtomicU64, Ordering};

/// The shortest time between two events a throttle lets through: a second, in nanoseconds.
const EVERY: u64 = 1_000_000_000;

/// Lets one event a second through and counts the others, without a lock: a flood of
/// denials becomes one warning a second that says how many it stands for.
///
/// The caller reads the time (from the limiter's [`Clock`](crate::clock::Clock)), so tests
/// move it by hand.
#[derive(Debug, Default)]
pub(crate) struct LogThrottle {
    /// The time, in nanoseconds since the epoch, from which the next event may be logged.
    next_at: AtomicU64,
    /// Events left out since the last one logged.
    suppressed: AtomicU64,
}

impl LogThrottle {
    /// Whether to log an event happening at `now`: the number of events left out since the
    /// last one logged, or `None` when this one is left out (and counted). Every event left
    /// out is counted once; one left out on another thread while this one is let through
    /// may be counted in this number rather than the next.
    pub(crate) fn admit(&self, now: Nanos) -> Option<u64> {
        let next = now.plus(EVERY).as_u64();
        let now = now.as_u64();
        let next_at = self.next_at.load(Ordering::Relaxed);
        // The wall clock stepped back by more than the interval: start again rather than
        // stay silent until it catches up. (Less than that is jitter between threads.)
        let stepped_back = next < next_at.saturating_sub(EVERY);
        let due = (now >= next_at || stepped_back)
            && self
                .next_at
                .compare_exchange(next_at, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if due {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn at(nanos: u64) -> Nanos {
        Nanos::new(1_700_000_000 * SECOND + nanos)
    }

    #[test]
    fn one_event_a_second_gets_through_with_the_count_of_the_others() {
        let throttle = LogThrottle::default();
        assert_eq!(throttle.admit(at(0)), Some(0));
        assert!((0..1000).all(|i| throttle.admit(at(i * 1000)).is_none()));
        assert_eq!(throttle.admit(at(SECOND - 1)), None);
        assert_eq!(throttle.admit(at(SECOND)), Some(1001));
        assert_eq!(throttle.admit(at(SECOND + 1)), None);
        assert_eq!(throttle.admit(at(5 * SECOND)), Some(1));
    }

    #[test]
    fn concurrent_callers_let_one_event_through() {
        let throttle = LogThrottle::default();
        let logged: Vec<u64> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        (0..250)
                            .filter_map(|_| throttle.admit(at(7)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("no panic"))
                .collect()
        });
        assert_eq!(logged.len(), 1, "one of the 1000 events is logged");
        // An event left out while the logged one was being let through may be counted in
        // its report rather than the next: each of the other 999 is counted once.
        let next = throttle
            .admit(at(7 + SECOND))
            .expect("a second later, one more");
        assert_eq!(logged[0] + next, 999);
    }

    #[test]
    fn a_clock_stepped_back_does_not_silence_the_throttle() {
        let throttle = LogThrottle::default();
        assert_eq!(throttle.admit(at(60 * SECOND)), Some(0));
        // Jitter between threads' clocks is not a step back.
        assert_eq!(throttle.admit(at(60 * SECOND - 1000)), None);
        assert_eq!(throttle.admit(at(30 * SECOND)), Some(1));
        assert_eq!(throttle.admit(at(30 * SECOND + 1)), None);
    }
}
