//! Which unit of time each limit's state is kept in on Redis.
//!
//! Redis runs its scripts in Lua, whose numbers are doubles: integers are exact only below
//! 2^53. Each limit is therefore kept in the finest tick (ns in tests, µs, ms or s) for which
//! its period is a whole number of ticks and every value the script computes stays below
//! 2^53 until the year 2100. Decisions are exact to the tick: to the microsecond (Redis's
//! clock) for all but very long periods with very large limits.

use crate::algorithm::{Algorithm, Quota};
use crate::clock::saturating_nanos;

/// The tick of one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tick {
    /// The tick's length in nanoseconds.
    pub(super) nanos: u64,
    /// Ticks per unit of the script's clock (µs from `TIME`, or ns from a test clock).
    pub(super) per_base: u64,
}

/// 2^53: the first integer a double cannot tell from its neighbour.
const EXACT: u128 = 1 << 53;
/// 2100-01-01 in nanoseconds since the epoch: the latest `now` a tick must hold.
const YEAR_2100_NS: u128 = 4_102_444_800 * 1_000_000_000;
/// A test clock's time must stay below this (2^52 ns, about 52 days after the epoch).
pub(super) const TEST_CLOCK_LIMIT_NS: u64 = 1 << 52;

/// The latest `now` (ns) a tick must hold when the script's clock counts `base_ns`
/// nanoseconds a unit.
fn latest_now(base_ns: u64) -> u128 {
    if base_ns == 1 {
        u128::from(TEST_CLOCK_LIMIT_NS)
    } else {
        YEAR_2100_NS
    }
}

impl Tick {
    /// The finest tick for `quota`, when the script's clock counts `base_ns` nanoseconds a
    /// unit (1000 for Redis's microseconds, 1 for a test clock); `None` if none fits.
    pub(super) fn choose(algorithm: Algorithm, quota: &Quota, base_ns: u64) -> Option<Tick> {
        let latest_now = latest_now(base_ns);
        [1, 1_000, 1_000_000, 1_000_000_000]
            .into_iter()
            .filter(|&nanos| nanos >= base_ns && quota.period_nanos().is_multiple_of(nanos))
            .map(|nanos| Tick {
                nanos,
                per_base: nanos / base_ns,
            })
            .find(|tick| {
                latest_now / u128::from(tick.nanos) + tick.largest_value(algorithm, quota) < EXACT
            })
    }

    /// The scale of a fixed window of `quota` kept in this tick as one integer,
    /// `(window + 1) × scale + count` (see `library.lua`): above twice the limit and one, so
    /// that a count and a request's cost stay below it; `None` when such integers would not
    /// stay below 2^53 until the latest `now`.
    pub(super) fn counter_scale(self, quota: &Quota) -> Option<u64> {
        let scale = u128::from(quota.requests_per_period()) * 2 + 2;
        let base_ns = self.nanos / self.per_base.max(1);
        let windows = latest_now(base_ns) / u128::from(quota.period_nanos()) + 2;
        (windows.checked_mul(scale)? < EXACT).then(|| u64::try_from(scale).ok())?
    }

    /// The tick's unit, for keys: `ns`, `us`, `ms` or `s`.
    pub(super) fn unit(self) -> &'static str {
        match self.nanos {
            1 => "ns",
            1_000 => "us",
            1_000_000 => "ms",
            _ => "s",
        }
    }

    /// `nanos` in this tick, rounded down.
    pub(super) fn count(self, nanos: u64) -> u64 {
        nanos / self.nanos
    }

    /// `ticks` of this tick in nanoseconds, saturating.
    pub(super) fn nanos_of(self, ticks: u64) -> u64 {
        ticks.saturating_mul(self.nanos)
    }

    /// The script's `per_ms` argument: ticks per millisecond, or milliseconds per tick negated.
    pub(super) fn per_ms(self) -> i64 {
        if self.nanos <= 1_000_000 {
            i64::try_from(1_000_000 / self.nanos).unwrap_or(i64::MAX)
        } else {
            -i64::try_from(self.nanos / 1_000_000).unwrap_or(i64::MAX)
        }
    }

    /// A bound on the largest value, beyond `now`, that the script computes for `quota`.
    fn largest_value(self, algorithm: Algorithm, quota: &Quota) -> u128 {
        let period = u128::from(self.count(quota.period_nanos()));
        let limit = u128::from(quota.requests_per_period());
        let burst = u128::from(quota.burst());
        let cost = u128::from(clamped_cost(u64::MAX, algorithm, quota));
        match algorithm {
            Algorithm::TokenBucket => (burst + limit + cost + 1) * period,
            Algorithm::Gcra | Algorithm::LeakyBucket if limit > 0 => {
                let slots = u128::from(algorithm.capacity(quota));
                let max_delay = quota
                    .max_delay()
                    .map_or(0, |d| u128::from(self.count(saturating_nanos(d))));
                (slots + cost + 1) * period.div_ceil(limit) + max_delay
            }
            Algorithm::SlidingWindowCounter => (2 * limit + cost + 2) * period,
            // The windows, and a schedule of no requests at all.
            Algorithm::FixedWindow
            | Algorithm::SlidingWindowLog
            | Algorithm::Gcra
            | Algorithm::LeakyBucket => 2 * period + limit + cost,
        }
    }
}

/// A request larger than the limit can ever hold is denied whatever its size: costs above
/// that size are sent as that size plus one, which keeps the script's numbers small. A
/// cost of 0 (a check) stays 0: refused only past the limit.
pub(super) fn clamped_cost(cost: u64, algorithm: Algorithm, quota: &Quota) -> u64 {
    cost.min(algorithm.capacity(quota).saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn everyday_limits_are_kept_in_microseconds() {
        let quota = Quota::new(100, Duration::from_secs(60)).unwrap();
        for algorithm in Algorithm::ALL {
            assert_eq!(
                Tick::choose(algorithm, &quota, 1_000).map(|t| t.nanos),
                Some(1_000),
                "{algorithm}"
            );
        }
    }

    #[test]
    fn huge_daily_limits_fall_back_to_coarser_ticks() {
        let quota = Quota::new(1_000_000, Duration::from_secs(86_400)).unwrap();
        let tick =
            Tick::choose(Algorithm::SlidingWindowCounter, &quota, 1_000).expect("some tick fits");
        assert!(tick.nanos > 1_000);
        assert_eq!(tick.per_base, tick.nanos / 1_000);
    }

    #[test]
    fn test_clocks_get_nanoseconds() {
        let quota = Quota::new(3, Duration::from_secs(1)).unwrap();
        assert_eq!(
            Tick::choose(Algorithm::Gcra, &quota, 1).map(|t| t.nanos),
            Some(1)
        );
    }

    #[test]
    fn sub_microsecond_periods_have_no_tick_on_redis_time() {
        let quota = Quota::new(1, Duration::from_nanos(1_500)).unwrap();
        assert_eq!(Tick::choose(Algorithm::FixedWindow, &quota, 1_000), None);
    }

    #[test]
    fn costs_beyond_capacity_are_clamped() {
        let quota = Quota::new(5, Duration::from_secs(1))
            .unwrap()
            .with_burst(10);
        assert_eq!(clamped_cost(u64::MAX, Algorithm::TokenBucket, &quota), 11);
        assert_eq!(
            clamped_cost(0, Algorithm::FixedWindow, &quota),
            0,
            "a check"
        );
        assert_eq!(clamped_cost(3, Algorithm::FixedWindow, &quota), 3);
    }
}
