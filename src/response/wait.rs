//! How long a client is told to wait: whole seconds or milliseconds, rounded up, so that a
//! client that waits that long is admitted.

use std::time::Duration;

/// Whole seconds, rounded up, and at least 1: `Retry-After` and `X-Ratelimit-Retry-After`.
pub(super) fn whole_seconds_at_least_one(duration: Duration) -> u64 {
    seconds_rounded_up(duration).max(1)
}

/// Whole milliseconds, rounded up, and at least 1: gRPC's retry pushback, and what the logs
/// report of a wait.
pub(crate) fn millis_at_least_one(duration: Duration) -> u64 {
    millis_rounded_up(duration).max(1)
}

// Both below work from the whole seconds and the nanoseconds left over: a whole second is a
// whole number of milliseconds, so only the part left over is rounded, and nothing overflows.

/// `duration` in whole seconds, rounded up, saturating.
pub(super) fn seconds_rounded_up(duration: Duration) -> u64 {
    let part = u64::from(duration.subsec_nanos() > 0);
    duration.as_secs().saturating_add(part)
}

/// `duration` in whole milliseconds, rounded up, saturating.
fn millis_rounded_up(duration: Duration) -> u64 {
    let part = u64::from(duration.subsec_nanos().div_ceil(1_000_000));
    duration.as_secs().saturating_mul(1000).saturating_add(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_rounded_up_and_never_zero() {
        assert_eq!(whole_seconds_at_least_one(Duration::ZERO), 1);
        assert_eq!(whole_seconds_at_least_one(Duration::from_nanos(1)), 1);
        assert_eq!(whole_seconds_at_least_one(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds_at_least_one(Duration::from_millis(2001)), 3);
        assert_eq!(millis_at_least_one(Duration::ZERO), 1);
        assert_eq!(millis_at_least_one(Duration::from_micros(1_001)), 2);
        assert_eq!(millis_at_least_one(Duration::from_millis(7)), 7);
    }

    #[test]
    fn rounding_up_agrees_with_dividing_the_nanoseconds_and_saturates() {
        let nanos_rounded_up = |duration: Duration, unit: u128| {
            u64::try_from(duration.as_nanos().div_ceil(unit)).unwrap_or(u64::MAX)
        };
        let durations = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(999_999),
            Duration::from_nanos(1_000_001),
            Duration::new(59, 999_999_999),
            Duration::new(3_600, 0),
            Duration::new(u64::MAX / 1000, 999_000_001),
            Duration::new(u64::MAX / 1000 + 1, 0),
            Duration::new(u64::MAX, 1),
            Duration::MAX,
        ];
        for duration in durations {
            assert_eq!(
                seconds_rounded_up(duration),
                nanos_rounded_up(duration, 1_000_000_000),
                "{duration:?}"
            );
            assert_eq!(
                millis_rounded_up(duration),
                nanos_rounded_up(duration, 1_000_000),
                "{duration:?}"
            );
        }
    }
}
