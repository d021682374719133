//! The two verdicts the decision benches measure, the quotas that produce them, and one
//! measured decision (shared by `benches/decisions.rs` and `benches/hot_key.rs`).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;
use tollgate::algorithm::{Algorithm, Quota};
use tollgate::store::{Acquisition, LimitCheck, MemoryStore, Store};

/// One decision of `store` on `check`: whether it was admitted.
pub fn admitted(store: &MemoryStore, check: &LimitCheck<'_>) -> bool {
    match black_box(store.acquire(black_box(std::slice::from_ref(check)))) {
        Acquisition::Ready(Ok(decisions)) => decisions[0].allowed,
        Acquisition::Ready(Err(error)) => panic!("the memory store failed: {error}"),
        Acquisition::Pending(_) => panic!("the memory store answers at once"),
    }
}

/// What every measured decision answers.
#[derive(Clone, Copy, PartialEq)]
pub enum Verdict {
    /// 1,000,000,000 per second: every request is admitted.
    Allowed,
    /// 1 per hour, used up by a first request: every later one is denied.
    Denied,
}

impl Verdict {
    /// The name in benchmark ids and tables.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Denied => "denied",
        }
    }

    /// tollgate's quota for `algorithm` (the leaky bucket polices: an admitted request goes
    /// at once rather than waiting its turn).
    pub fn quota(self, algorithm: Algorithm) -> Quota {
        let quota = match self {
            Verdict::Allowed => Quota::new(1_000_000_000, Duration::from_secs(1)).unwrap(),
            Verdict::Denied => Quota::new(1, Duration::from_secs(3_600)).unwrap(),
        };
        match (algorithm, self) {
            (Algorithm::LeakyBucket, Verdict::Allowed) => {
                quota.with_queue(1_000_000_000).with_policing()
            }
            (Algorithm::LeakyBucket, Verdict::Denied) => quota.with_policing(),
            _ => quota,
        }
    }

    /// A token bucket quota for this verdict whose emission interval is not a whole number
    /// of nanoseconds, so that the token bucket keeps its own two-word state rather than being
    /// decided as GCRA: 999,999,999 per second (an interval of 1.000000001 ns), or 7 per
    /// 25,201 seconds with a burst of 1 (one request, then a wait of an hour).
    pub fn rounded_token_bucket_quota(self) -> Quota {
        match self {
            Verdict::Allowed => Quota::new(999_999_999, Duration::from_secs(1)).unwrap(),
            Verdict::Denied => Quota::new(7, Duration::from_secs(25_201))
                .unwrap()
                .with_burst(1),
        }
    }

    /// governor's quota.
    pub fn governor_quota(self) -> governor::Quota {
        match self {
            Verdict::Allowed => {
                governor::Quota::per_second(NonZeroU32::new(1_000_000_000).expect("not zero"))
            }
            Verdict::Denied => governor::Quota::per_hour(NonZeroU32::MIN),
        }
    }
}
