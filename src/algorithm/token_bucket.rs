use super::packed::{Pack, Words};
use super::{to_u64, CopyTransition, Decision, Quota};
use crate::clock::Nanos;
use std::time::Duration;

/// Token bucket state: a bucket of `burst` tokens, refilled at `limit` tokens per period.
///
/// Kept exactly, without rounding: `level` is the token count at `anchor`, and the count at a
/// later time `t` is `min(burst, level + floor((t - anchor) × limit / period))`. Taking tokens
/// lowers `level` (it may go negative); the anchor moves only when the bucket is full, when the
/// fraction of a token lost is the one a full bucket would overflow anyway. 16 bytes per key.
///
/// When `period / limit` is a whole number of nanoseconds (100 per second, not 7 per minute)
/// and an empty bucket refills within 2⁶² ns (146 years), the memory store keeps and decides
/// the bucket as [`Gcra`](super::Gcra) instead: the same answers from one 8-byte timestamp,
/// updated without an exclusive lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    anchor: Nanos,
    level: i64,
}

impl Pack for TokenBucket {
    fn pack(self) -> Words {
        // The level's bits as they are: `unpack` reads them back as the same `i64`.
        [self.anchor.as_u64(), self.level as u64]
    }

    fn unpack([anchor, level]: Words) -> Self {
        TokenBucket {
            anchor: Nanos::new(anchor),
            level: level as i64,
        }
    }
}

impl CopyTransition for TokenBucket {
    /// Takes `cost` tokens if the bucket holds them at `now`.
    // Always inlined: callers read the decision at once, and a decision returned through
    // memory makes that read wait behind its writes (benches/hot_key.rs shows it).
    #[inline(always)]
    fn transition(
        state: Option<&TokenBucket>,
        now: Nanos,
        quota: &Quota,
        cost: u64,
    ) -> (TokenBucket, Decision) {
        // A limit of 0 never refills: the bucket holds nothing, whatever the burst.
        let burst = if quota.requests_per_period() == 0 {
            0
        } else {
            quota.burst()
        };
        let capacity = i128::from(burst);
        let mut bucket = state.copied().unwrap_or(TokenBucket {
            anchor: now,
            level: i64::try_from(burst).unwrap_or(i64::MAX),
        });
        let mut tokens = bucket.tokens_at(now, quota);
        if tokens >= capacity {
            bucket = TokenBucket {
                anchor: now,
                level: i64::try_from(capacity).unwrap_or(i64::MAX),
            };
            tokens = capacity;
        } else {
            bucket.advance_whole_periods(now, quota);
        }
        let cost_tokens = i128::from(cost);
        let allowed = cost_tokens <= tokens;
        let retry_after = if allowed {
            Duration::ZERO
        } else if cost_tokens > capacity || quota.requests_per_period() == 0 {
            quota.period()
        } else {
            bucket.time_until(cost_tokens, now, quota)
        };
        if allowed {
            bucket.level =
                i64::try_from(i128::from(bucket.level) - cost_tokens).unwrap_or(i64::MIN);
            tokens -= cost_tokens;
        }
        let reset_after = if quota.requests_per_period() == 0 {
            Duration::ZERO
        } else {
            bucket.time_until(capacity, now, quota)
        };
        let decision = Decision {
            allowed,
            capacity: burst,
            remaining: u64::try_from(tokens.max(0)).unwrap_or(0),
            reset_after,
            retry_after,
            delay: Duration::ZERO,
            booked_until: None,
        };
        (bucket, decision)
    }

    /// Takes `extra` more tokens (the level may go below zero: a debt the refill pays
    /// back), or puts `-extra` back (never above the burst).
    fn settle(&mut self, now: Nanos, quota: &Quota, extra: i64) {
        let burst = i128::from(quota.burst());
        let tokens = self.tokens_at(now, quota).min(burst);
        let after = (tokens - i128::from(extra)).min(burst);
        // Anchored at now: the count there is exactly `after`, whole periods or not.
        *self = TokenBucket {
            anchor: now,
            level: i64::try_from(after).unwrap_or(if after < 0 { i64::MIN } else { i64::MAX }),
        };
    }
}

impl TokenBucket {
    /// Moves the anchor forward by the whole periods elapsed, crediting `limit` tokens for
    /// each: the count at any time is unchanged (exactly), and `level` stays between
    /// `-limit` and `burst` however long the bucket is kept busy.
    fn advance_whole_periods(&mut self, now: Nanos, quota: &Quota) {
        let elapsed = now.as_u64().saturating_sub(self.anchor.as_u64());
        let periods = quota.period_divisor().div_u64(elapsed);
        if periods > 0 {
            self.anchor = self.anchor.plus(periods * quota.period_nanos());
            let credited = i128::from(self.level)
                + i128::from(periods) * i128::from(quota.requests_per_period());
            // Below the capacity (the caller checked), so within i64.
            self.level = i64::try_from(credited).unwrap_or(i64::MAX);
        }
    }

    /// Whole tokens in the bucket at `now`, before the cap at `burst`.
    fn tokens_at(&self, now: Nanos, quota: &Quota) -> i128 {
        let elapsed = u128::from(now.as_u64().saturating_sub(self.anchor.as_u64()));
        let refilled = quota
            .period_divisor()
            .div(elapsed * u128::from(quota.requests_per_period()));
        i128::from(self.level) + i128::try_from(refilled).unwrap_or(i128::MAX)
    }

    /// Time from `now` until the bucket holds `tokens` (zero if it already does).
    fn time_until(&self, tokens: i128, now: Nanos, quota: &Quota) -> Duration {
        let missing = tokens - i128::from(self.level);
        if missing <= 0 {
            return Duration::ZERO;
        }
        // The first t with (t - anchor) × limit >= missing × period.
        let wait = quota
            .requests_divisor()
            .div_ceil(missing.unsigned_abs() * u128::from(quota.period_nanos()));
        let ready_at = self.anchor.plus(to_u64(wait));
        ready_at.since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn run(quota: &Quota, trace: &[(u64, u64)]) -> Vec<Decision> {
        let mut state = None;
        trace
            .iter()
            .map(|&(at, cost)| {
                let (next, decision) =
                    TokenBucket::transition(state.as_ref(), Nanos::new(at), quota, cost);
                if decision.allowed {
                    state = Some(next);
                }
                decision
            })
            .collect()
    }

    #[test]
    fn admits_burst_then_refills_at_rate() {
        let quota = Quota::new(2, Duration::from_secs(1)).unwrap().with_burst(4);
        let decisions = run(
            &quota,
            &[
                (0, 1),
                (0, 1),
                (0, 1),
                (0, 1),
                (0, 1),
                (SECOND / 2, 1),
                (SECOND / 2, 1),
            ],
        );
        let allowed: Vec<bool> = decisions.iter().map(|d| d.allowed).collect();
        assert_eq!(allowed, [true, true, true, true, false, true, false]);
        assert_eq!(decisions[3].remaining, 0);
        assert_eq!(decisions[4].retry_after, Duration::from_millis(500));
    }

    #[test]
    fn retry_after_is_exact_to_the_nanosecond() {
        let quota = Quota::new(3, Duration::from_secs(1)).unwrap();
        let denied = run(&quota, &[(0, 3), (0, 1)])[1];
        let wait = u64::try_from(denied.retry_after.as_nanos()).unwrap();
        assert_eq!(wait, SECOND.div_ceil(3));
        assert!(!run(&quota, &[(0, 3), (wait - 1, 1)])[1].allowed);
        assert!(run(&quota, &[(0, 3), (wait, 1)])[1].allowed);
    }

    #[test]
    fn a_full_bucket_does_not_store_more_than_burst() {
        let quota = Quota::new(10, Duration::from_secs(1)).unwrap();
        let decisions = run(&quota, &[(0, 1), (100 * SECOND, 10), (100 * SECOND, 1)]);
        assert!(decisions[1].allowed);
        assert!(!decisions[2].allowed);
    }

    #[test]
    fn no_drift_over_many_fractional_refills() {
        // 3 per second: token k arrives at k/3 s, a fraction of a nanosecond off the grid.
        // Taking each token the first nanosecond it exists, for 1000 seconds, must never be
        // refused, and the next one must not come early.
        let quota = Quota::new(3, Duration::from_secs(1)).unwrap();
        let token_at = |k: u64| (k * SECOND).div_ceil(3);
        let mut trace = vec![(0, 3)];
        trace.extend((1..=3000).map(|k| (token_at(k), 1)));
        trace.push((token_at(3001) - 1, 1));
        trace.push((token_at(3001), 1));
        let decisions = run(&quota, &trace);
        assert!(decisions[..=3000].iter().all(|d| d.allowed));
        assert!(!decisions[3001].allowed);
        assert!(decisions[3002].allowed);
    }

    #[test]
    fn a_bucket_kept_busy_forever_never_over_admits() {
        // Half an i64 of tokens a second with a burst of two seconds, asked for every half
        // second: the bucket never fills again, so without moving the anchor its level would
        // run below what i64 holds within seconds.
        let limit = u64::try_from(i64::MAX / 2).unwrap();
        let quota = Quota::new(limit, Duration::from_secs(1))
            .unwrap()
            .with_burst(2 * limit);
        let trace: Vec<(u64, u64)> = (0..=8).map(|i| (i * SECOND / 2, limit)).collect();
        let allowed: Vec<bool> = run(&quota, &trace).iter().map(|d| d.allowed).collect();
        assert_eq!(
            allowed,
            [true, true, true, false, true, false, true, false, true]
        );
    }

    #[test]
    fn zero_limit_denies_everything() {
        let quota = Quota::new(0, Duration::from_secs(1)).unwrap();
        let decision = run(&quota, &[(0, 1)])[0];
        assert!(!decision.allowed);
        assert_eq!(decision.retry_after, Duration::from_secs(1));
    }
}
