use super::gcra::Schedule;
use super::packed::{Pack, Words};
use super::{Algorithm, CopyTransition, Decision, Quota};
use crate::clock::Nanos;

/// Leaky bucket state: when the bucket will have drained, one timestamp per key.
///
/// The bucket is a FIFO queue drained at `limit` requests per period. Shaping (the
/// default): a request that finds room among the `queue` waiting places is admitted with a
/// delay (its turn in the queue) and then forwarded; requests leave at the outflow rate, in
/// arrival order. Policing: the same arithmetic decides, but an admitted request goes at
/// once. A request that finds the queue full, or whose wait would exceed `max_delay`, is
/// denied. The same virtual-scheduling arithmetic as [`Gcra`](super::Gcra), with
/// `queue + 1` slots. 8 bytes per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucket {
    drained_at: Nanos,
}

impl Pack for LeakyBucket {
    fn pack(self) -> Words {
        [self.drained_at.as_u64(), 0]
    }

    fn unpack([drained_at, _]: Words) -> Self {
        LeakyBucket {
            drained_at: Nanos::new(drained_at),
        }
    }
}

impl LeakyBucket {
    fn schedule(quota: &Quota) -> Schedule {
        Schedule {
            slots: Algorithm::LeakyBucket.capacity(quota),
            // Policing admits at once: there is no wait to bound.
            max_delay: quota.max_delay().filter(|_| quota.is_shaping()),
            shaping: quota.is_shaping(),
        }
    }
}

impl CopyTransition for LeakyBucket {
    /// Books `cost` places in the queue if there is room.
    // Always inlined: callers read the decision at once, and a decision returned through
    // memory makes that read wait behind its writes (benches/hot_key.rs shows it).
    #[inline(always)]
    fn transition(
        state: Option<&LeakyBucket>,
        now: Nanos,
        quota: &Quota,
        cost: u64,
    ) -> (LeakyBucket, Decision) {
        let drained_at = state.map_or(now, |s| s.drained_at);
        Self::schedule(quota).transition(drained_at, now, quota, cost, |drained_at| LeakyBucket {
            drained_at,
        })
    }

    fn settle(&mut self, now: Nanos, quota: &Quota, extra: i64) {
        self.drained_at = Schedule::settled(self.drained_at, now, quota, extra);
    }

    /// Gives back the places of a queued request whose client went away, if it is still the
    /// newest booking. An earlier request's places are not given back: the requests queued
    /// after it already have their times, and moving the end of the queue forward would
    /// release two requests at once.
    fn cancel(&mut self, now: Nanos, quota: &Quota, cost: u64, booked_until: Nanos) {
        let newest = self.drained_at == booked_until;
        if let (Some(interval), true) = (quota.emission_interval(), newest) {
            let freed = super::to_u64(u128::from(cost) * u128::from(interval.get()));
            self.drained_at = Nanos::new(booked_until.as_u64().saturating_sub(freed)).max(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Transition;
    use std::time::Duration;

    const MS: u64 = 1_000_000;

    #[test]
    fn shaping_queues_in_order_and_rejects_a_full_queue() {
        // 10 per second: one every 100 ms; 3 may wait.
        let quota = Quota::new(10, Duration::from_secs(1))
            .unwrap()
            .with_queue(3);
        let mut state = LeakyBucket::fresh(Nanos::new(0), &quota);
        let delays: Vec<_> = (0..5)
            .map(|_| state.acquire(Nanos::new(0), &quota, 1))
            .collect();
        let admitted: Vec<_> = delays
            .iter()
            .filter(|d| d.allowed)
            .map(|d| d.delay.as_millis())
            .collect();
        assert_eq!(admitted, [0, 100, 200, 300]);
        assert!(!delays[4].allowed);
        assert_eq!(delays[4].retry_after, Duration::from_millis(100));
        assert_eq!(delays[3].remaining, 0);
    }

    #[test]
    fn a_cancelled_request_frees_its_place() {
        let quota = Quota::new(10, Duration::from_secs(1))
            .unwrap()
            .with_queue(1);
        let mut state = LeakyBucket::fresh(Nanos::new(0), &quota);
        assert!(state.acquire(Nanos::new(0), &quota, 1).allowed);
        let queued = state.acquire(Nanos::new(0), &quota, 1);
        assert!(!state.acquire(Nanos::new(0), &quota, 1).allowed);
        state.cancel(
            Nanos::new(10 * MS),
            &quota,
            1,
            queued.booked_until.expect("queued"),
        );
        let next = state.acquire(Nanos::new(10 * MS), &quota, 1);
        assert!(next.allowed);
        assert_eq!(next.delay, Duration::from_millis(90));
    }

    #[test]
    fn only_the_newest_booking_gives_its_place_back() {
        let quota = Quota::new(10, Duration::from_secs(1))
            .unwrap()
            .with_queue(3);
        let mut state = LeakyBucket::fresh(Nanos::new(0), &quota);
        let bookings: Vec<_> = (0..4)
            .map(|_| state.acquire(Nanos::new(0), &quota, 1).booked_until)
            .collect();
        assert_eq!(bookings[0], None, "served at once: nothing to give back");
        // The second request (released at 100 ms) leaves: the third and fourth keep their
        // times (200, 300 ms), so no new request may be released with the fourth.
        state.cancel(Nanos::new(10 * MS), &quota, 1, bookings[1].expect("queued"));
        assert!(
            !state.acquire(Nanos::new(10 * MS), &quota, 1).allowed,
            "the queue is still full"
        );
        // The newest leaves: its place (300 ms) goes to the next request.
        state.cancel(Nanos::new(10 * MS), &quota, 1, bookings[3].expect("queued"));
        assert_eq!(
            state.acquire(Nanos::new(10 * MS), &quota, 1).delay,
            Duration::from_millis(290)
        );
    }

    #[test]
    fn max_delay_bounds_the_wait() {
        let quota = Quota::new(10, Duration::from_secs(1))
            .unwrap()
            .with_queue(10)
            .with_max_delay(Duration::from_millis(150));
        let mut state = LeakyBucket::fresh(Nanos::new(0), &quota);
        let admitted = (0..5)
            .filter(|_| state.acquire(Nanos::new(0), &quota, 1).allowed)
            .count();
        assert_eq!(admitted, 2, "waits of 0 and 100 ms fit, 200 ms does not");
        let denied = state.acquire(Nanos::new(0), &quota, 1);
        assert_eq!(denied.retry_after, Duration::from_millis(50));
        assert!(state.acquire(Nanos::new(50 * MS), &quota, 1).allowed);
    }

    #[test]
    fn policing_admits_without_delay() {
        let quota = Quota::new(10, Duration::from_secs(1))
            .unwrap()
            .with_queue(2)
            .with_policing();
        let mut state = LeakyBucket::fresh(Nanos::new(0), &quota);
        let decisions: Vec<_> = (0..4)
            .map(|_| state.acquire(Nanos::new(0), &quota, 1))
            .collect();
        assert!(decisions[..3]
            .iter()
            .all(|d| d.allowed && d.delay.is_zero()));
        assert!(!decisions[3].allowed);
    }
}
