use super::packed::{Pack, Words};
use super::{to_u64, Algorithm, CopyTransition, Decision, Quota};
use crate::clock::{saturating_nanos, Nanos};
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

// For local-first limits, which only the Redis store keeps.
#[cfg(feature = "redis")]
impl Gcra {
    /// The state whose theoretical arrival time is `tat`.
    pub(crate) fn at(tat: Nanos) -> Self {
        Gcra { tat }
    }
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
    // Always inlined: callers read the decision at once, and a decision returned through
    // memory makes that read wait behind its writes (benches/hot_key.rs shows it).
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

    fn settle(&mut self, now: Nanos, quota: &Quota, extra: i64) {
        self.tat = Schedule::settled(self.tat, now, quota, extra);
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
    /// The schedule `tat` with `extra` more intervals booked from `now` on (past the slots
    /// if need be), or `-extra` given back (not before `now`).
    pub(super) fn settled(tat: Nanos, now: Nanos, quota: &Quota, extra: i64) -> Nanos {
        let Some(interval) = quota.emission_interval() else {
            return tat;
        };
        let span = super::to_u64(u128::from(extra.unsigned_abs()) * u128::from(interval.get()));
        if extra >= 0 {
            tat.max(now).plus(span)
        } else {
            Nanos::new(tat.as_u64().saturating_sub(span)).max(now)
        }
    }

    // Always inlined: callers read the decision at once, and a decision returned through
    // memory makes that read wait behind its writes (benches/hot_key.rs shows it).
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
                capacity: 0,
                remaining: 0,
                reset_after: Duration::ZERO,
                retry_after: quota.period(),
                delay: Duration::ZERO,
                booked_until: None,
            };
            return (state(tat), decision);
        };
        // In 64 bits: every time and wait is one, and the products that may not be (`cost`
        // or `slots` intervals) are compared or subtracted in forms that cannot overflow.
        let interval = divisor.get();
        let now_ns = now.as_u64();
        let start = now_ns.max(tat.as_u64());
        let delay = start - now_ns;
        // None: the booking ends past the representable future, and is refused, never
        // clamped (a clamped one would let every later request fit).
        let booked_until = cost
            .checked_mul(interval)
            .and_then(|span| start.checked_add(span));
        // How long after now a request may start and still fit, `(slots - cost)×interval`
        // (from `start + cost×interval - now <= slots×interval`); None when the cost exceeds
        // the slots. Saturating is exact here: past u64::MAX it exceeds every delay.
        let slack = self
            .slots
            .checked_sub(cost)
            .map(|spare| spare.saturating_mul(interval));
        let max_delay = self.max_delay.map(saturating_nanos);
        let within_delay = max_delay.is_none_or(|max| delay <= max);
        let booked = match (booked_until, slack) {
            (Some(until), Some(slack)) if delay <= slack && within_delay => Some(until),
            _ => None,
        };
        let allowed = booked.is_some();

        let tat_after = booked.unwrap_or(start);
        let ahead = tat_after - now_ns;
        let retry_after = match (booked_until, slack) {
            _ if allowed => Duration::ZERO,
            // Never admitted, which reports one period: the cost exceeds the slots, or the
            // booking ends past the representable future, as it will at every later time
            // (its start only moves later).
            (None, _) | (_, None) => quota.period(),
            // The first t with start(t) + cost×interval - t <= slots×interval (start is tat
            // for every t before tat), and, when bounded, tat - t <= max_delay.
            (Some(_), Some(slack)) => {
                let fits_at = start.saturating_sub(slack);
                let waits_at = max_delay.map_or(0, |max| start.saturating_sub(max));
                Duration::from_nanos(fits_at.max(waits_at).saturating_sub(now_ns))
            }
        };
        // Whole intervals left before the horizon: slots - ⌈ahead / interval⌉.
        let mut remaining = self.slots.saturating_sub(divisor.div_ceil_u64(ahead));
        let mut capacity = self.slots;
        // In 128 bits: a `max_delay` set in code may be longer than u64::MAX nanoseconds,
        // and these counts are exact for it (the comparisons above saturate exactly).
        if let Some(max) = self.max_delay.map(|max| max.as_nanos()) {
            // The k-th next request would wait ahead + (k - 1) intervals.
            let within = |wait: u128| {
                if wait <= max {
                    to_u64(divisor.div(max - wait) + 1)
                } else {
                    0
                }
            };
            capacity = capacity.min(within(0));
            remaining = remaining.min(within(u128::from(ahead)));
        }
        let decision = Decision {
            allowed,
            capacity,
            remaining,
            reset_after: Duration::from_nanos(ahead),
            retry_after,
            delay: if allowed && self.shaping {
                Duration::from_nanos(delay)
            } else {
                Duration::ZERO
            },
            booked_until: booked.filter(|_| self.shaping && delay > 0).map(Nanos::new),
        };
        (state(Nanos::new(tat_after)), decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Transition;
    use proptest::prelude::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn admits_the_burst_then_one_per_interval() {
        let quota = Quota::new(4, Duration::from_secs(1)).unwrap().with_burst(2);
        let mut state = Gcra::fresh(Nanos::new(0), &quota);
        assert!(state.acquire(Nanos::new(0), &quota, 1).allowed);
        assert!(state.acquire(Nanos::new(0), &quota, 1).allowed);
        let denied = state.acquire(Nanos::new(0), &quota, 1);
        assert!(!denied.allowed);
        assert_eq!(denied.retry_after, Duration::from_millis(250));
        assert!(!state.acquire(Nanos::new(SECOND / 4 - 1), &quota, 1).allowed);
        assert!(state.acquire(Nanos::new(SECOND / 4), &quota, 1).allowed);
    }

    /// `slots × interval` past `u64::MAX` (here exactly 2⁶⁴, which wrapping would make 0):
    /// requests still fit, and the counts stay exact.
    #[test]
    fn a_horizon_past_u64_max_still_counts_exactly() {
        let interval = 1 << 30;
        let burst = (1 << 34) + 1;
        let quota = Quota::new(1, Duration::from_nanos(interval))
            .unwrap()
            .with_burst(burst);
        let mut state = Gcra::fresh(Nanos::new(0), &quota);
        for taken in 1..=2 {
            let admitted = state.acquire(Nanos::new(0), &quota, 1);
            assert!(admitted.allowed, "request {taken}");
            assert_eq!(admitted.remaining, burst - taken);
            assert_eq!(admitted.reset_after, Duration::from_nanos(taken * interval));
        }
        let too_many = state.acquire(Nanos::new(0), &quota, burst - 1);
        assert!(!too_many.allowed);
        assert_eq!(too_many.retry_after, Duration::from_nanos(interval));
    }

    /// A booking that would end past `u64::MAX` nanoseconds is refused, never clamped, and
    /// since it will be refused at every later time too, it reports one period to wait.
    #[test]
    fn a_booking_past_the_representable_future_is_refused() {
        let quota = Quota::new(1, Duration::from_secs(1)).unwrap().with_burst(3);
        let now = Nanos::new(u64::MAX - SECOND / 2);
        let mut state = Gcra::fresh(now, &quota);
        let refused = state.acquire(now, &quota, 1);
        assert!(!refused.allowed);
        assert_eq!(state, Gcra::fresh(now, &quota), "nothing was booked");
        assert_eq!(
            refused.retry_after,
            quota.period(),
            "never admitted: one period, as for a cost above the burst"
        );
    }

    /// The schedule's arithmetic as it was written in 128 bits, where nothing overflows, with
    /// plain divisions: the oracle for the 64-bit schedule. Returns the state after, and the
    /// decision.
    fn wide_schedule(
        schedule: Schedule,
        tat: u64,
        now: u64,
        quota: &Quota,
        cost: u64,
    ) -> (u64, Decision) {
        let wide = u128::from;
        let narrow = |n: u128| u64::try_from(n).unwrap_or(u64::MAX);
        let interval = wide(quota.emission_interval().expect("a limit above 0").get());
        let max_delay = schedule.max_delay.map(|max| max.as_nanos());
        let (now, start) = (wide(now), wide(now.max(tat)));
        let booked_until = start + wide(cost) * interval;
        let horizon = wide(schedule.slots) * interval;
        let delay = start - now;
        let allowed = booked_until - now <= horizon
            && max_delay.is_none_or(|max| delay <= max)
            && booked_until <= wide(u64::MAX);
        let ahead = if allowed { booked_until } else { start } - now;
        let retry_after = if allowed {
            0
        } else if cost > schedule.slots || booked_until > wide(u64::MAX) {
            quota.period().as_nanos()
        } else {
            let waits_at = max_delay.map_or(0, |max| start.saturating_sub(max));
            let fits_at = booked_until.saturating_sub(horizon);
            fits_at.max(waits_at).saturating_sub(now)
        };
        // Requests that would wait no longer than `max_delay`, the first waiting `wait`.
        let within = |wait: u128| match max_delay {
            Some(max) if wait > max => 0,
            Some(max) => (max - wait) / interval + 1,
            None => u128::MAX,
        };
        let shaped = allowed && schedule.shaping;
        let decision = Decision {
            allowed,
            capacity: narrow(wide(schedule.slots).min(within(0))),
            remaining: narrow((horizon.saturating_sub(ahead) / interval).min(within(ahead))),
            reset_after: Duration::from_nanos(narrow(ahead)),
            retry_after: Duration::from_nanos(narrow(retry_after)),
            delay: Duration::from_nanos(if shaped { narrow(delay) } else { 0 }),
            booked_until: (shaped && delay > 0).then(|| Nanos::new(narrow(booked_until))),
        };
        (narrow(now + ahead), decision)
    }

    /// Small numbers, numbers near `u64::MAX`, and anything between.
    fn extreme() -> impl Strategy<Value = u64> {
        prop_oneof![0..1_000u64, any::<u64>(), u64::MAX - 1_000..=u64::MAX]
    }

    proptest! {
        // No regression files: a failure prints its minimal case.
        #![proptest_config(ProptestConfig {
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// The schedule answers as the same arithmetic in 128 bits, over the whole range of
        /// times, costs, slots, intervals and waits, overflowing products included.
        #[test]
        fn the_64_bit_schedule_answers_as_128_bit_arithmetic(
            (tat, now, cost, slots) in (extreme(), extreme(), extreme(), extreme()),
            limit in 1..=u64::MAX,
            period in extreme().prop_map(|period| period.max(1)),
            max_delay in proptest::option::of(extreme().prop_map(Duration::from_nanos)),
            shaping in any::<bool>(),
        ) {
            let quota = Quota::new(limit, Duration::from_nanos(period)).unwrap();
            let schedule = Schedule { slots, max_delay, shaping };
            let (tat, now_ns) = (Nanos::new(tat), Nanos::new(now));
            let answer = schedule.transition(tat, now_ns, &quota, cost, |after| after.as_u64());
            prop_assert_eq!(answer, wide_schedule(schedule, tat.as_u64(), now, &quota, cost));
        }
    }

    #[test]
    fn the_interval_rounds_up_so_the_rate_is_never_exceeded() {
        let quota = Quota::new(3, Duration::from_secs(1)).unwrap().with_burst(1);
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
