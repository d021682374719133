//! The IETF `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers).

use super::wait::{seconds_rounded_up, whole_seconds_at_least_one};
use crate::algorithm::{Algorithm, Decision, Quota};
use crate::rules::Limit;
use http::HeaderValue;
use std::time::Duration;

/// `RateLimit-Policy` and `RateLimit` for `decision` of `limit`, e.g.
/// `"api";q=100;w=60` and `"api";r=42;t=17`; `None` if they could not be written, or for a
/// concurrency limit, which has no window to announce a quota over.
pub(super) fn fields(limit: &Limit, decision: &Decision) -> Option<[HeaderValue; 2]> {
    let name = structured_string(limit.label());
    let (algorithm, quota) = limit.limited()?;
    let window = policy_window(algorithm, quota);
    let (remaining, reset) = if decision.allowed {
        (decision.remaining, seconds_rounded_up(decision.reset_after))
    } else {
        (0, whole_seconds_at_least_one(decision.retry_after))
    };
    let policy = format!("{name};q={};w={window}", decision.capacity);
    let state = format!("{name};r={remaining};t={reset}");
    // Both are printable ASCII by construction (the name is escaped).
    Some([
        HeaderValue::try_from(policy).ok()?,
        HeaderValue::try_from(state).ok()?,
    ])
}

/// The `w` of `RateLimit-Policy`, in whole seconds, such that a client that spends
/// `q = capacity` units at once and then `q` per `w` is never refused.
///
/// A window algorithm's window is its period. A bucket (token bucket, GCRA, leaky bucket)
/// holds `capacity` and refills `requests_per_period` per period, so `capacity` units take
/// `capacity × period / requests_per_period` to come back: with 20 a second and bursts of
/// 40, `q=40;w=2`, not `w=1`, which would announce twice the rate. Rounded up to a whole
/// second (at least 1), which announces a rate at most the real one.
fn policy_window(algorithm: Algorithm, quota: &Quota) -> u64 {
    let period = quota.period();
    let refill = match algorithm {
        Algorithm::FixedWindow | Algorithm::SlidingWindowLog | Algorithm::SlidingWindowCounter => {
            period
        }
        Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::LeakyBucket => {
            let requests = u128::from(quota.requests_per_period().max(1));
            let capacity = u128::from(algorithm.capacity(quota));
            let nanos = (period.as_nanos() * capacity).div_ceil(requests);
            Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
        }
    };
    seconds_rounded_up(refill).max(1)
}

/// An RFC 8941 sf-string: quoted, with `"` and `\` escaped and non-ASCII dropped.
fn structured_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars().filter(|c| (' '..='~').contains(c)) {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(algorithm: Algorithm, quota: Quota) -> u64 {
        policy_window(algorithm, &quota)
    }

    #[test]
    fn windows_announce_their_period() {
        let quota = Quota::new(100, Duration::from_secs(60)).unwrap();
        for algorithm in [
            Algorithm::FixedWindow,
            Algorithm::SlidingWindowLog,
            Algorithm::SlidingWindowCounter,
        ] {
            assert_eq!(window(algorithm, quota), 60);
        }
        let short = Quota::new(10, Duration::from_millis(100)).unwrap();
        assert_eq!(
            window(Algorithm::FixedWindow, short),
            1,
            "at least a second"
        );
    }

    #[test]
    fn buckets_announce_the_time_their_capacity_takes_to_refill() {
        let per_second = |requests| Quota::new(requests, Duration::from_secs(1)).unwrap();
        assert_eq!(
            window(Algorithm::TokenBucket, per_second(20).with_burst(40)),
            2
        );
        assert_eq!(window(Algorithm::Gcra, per_second(1).with_burst(3)), 3);
        assert_eq!(window(Algorithm::TokenBucket, per_second(20)), 1);
        // 30 take 1.5 s to come back: announced as 30 per 2 s, a little under the rate.
        assert_eq!(window(Algorithm::Gcra, per_second(20).with_burst(30)), 2);
        // A queue of 9 and the request being served: 10 at 5 a second.
        let queue = per_second(5).with_queue(9);
        assert_eq!(window(Algorithm::LeakyBucket, queue), 2);
        assert_eq!(window(Algorithm::TokenBucket, per_second(0)), 1);
    }

    #[test]
    fn structured_strings_escape_quotes() {
        assert_eq!(structured_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
