//! At most one log event per second for a kind of event, counting the ones left out.

use crate::clock::saturating_nanos;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The shortest time between two events a throttle lets through.
const EVERY: Duration = Duration::from_secs(1);

/// Lets one event a second through and counts the others, without a lock: a flood of
/// denials becomes one warning a second that says how many it stands for.
#[derive(Debug)]
pub(crate) struct LogThrottle {
    origin: Instant,
    /// Nanoseconds after `origin` from which the next event may be logged.
    next_at: AtomicU64,
    /// Events left out since the last one logged.
    suppressed: AtomicU64,
}

impl LogThrottle {
    pub(crate) fn new() -> Self {
        LogThrottle {
            origin: Instant::now(),
            next_at: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether to log an event now: the number of events left out since the last one
    /// logged, or `None` when this one is left out (and counted).
    pub(crate) fn admit(&self) -> Option<u64> {
        self.admit_at(saturating_nanos(self.origin.elapsed()))
    }

    /// [`LogThrottle::admit`] at `now` nanoseconds after the throttle was made.
    fn admit_at(&self, now: u64) -> Option<u64> {
        let next_at = self.next_at.load(Ordering::Relaxed);
        let due = now >= next_at
            && self
                .next_at
                .compare_exchange(
                    next_at,
                    now.saturating_add(saturating_nanos(EVERY)),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
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

    #[test]
    fn one_event_a_second_gets_through_with_the_count_of_the_others() {
        let throttle = LogThrottle::new();
        assert_eq!(throttle.admit_at(0), Some(0));
        assert!((0..1000).all(|i| throttle.admit_at(i * 1000).is_none()));
        assert_eq!(throttle.admit_at(SECOND - 1), None);
        assert_eq!(throttle.admit_at(SECOND), Some(1001));
        assert_eq!(throttle.admit_at(SECOND + 1), None);
        assert_eq!(throttle.admit_at(5 * SECOND), Some(1));
    }

    #[test]
    fn concurrent_callers_let_one_event_through() {
        let throttle = LogThrottle::new();
        let admitted: usize = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..250).filter_map(|_| throttle.admit_at(7)).count()))
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("no panic"))
                .sum()
        });
        assert_eq!(admitted, 1);
        assert_eq!(throttle.admit_at(7 + SECOND), Some(999));
    }
}
