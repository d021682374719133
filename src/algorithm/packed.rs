//! States small enough to be kept as two machine words, without a tag saying whose they are.
//!
//! The memory store keeps one key's state inline in its hash table, so every byte of state is
//! paid for about twice (tables are kept between half and seven eighths full). [`State`] is as
//! large as its largest variant (the sliding window log), so the algorithms whose state is one
//! or two words are kept packed instead: the algorithm is known from the limit being checked,
//! and the state alone is [`Words`].
//!
//! [`State`]: super::State

use super::{
    Algorithm, CopyTransition, Decision, FixedWindow, Gcra, LeakyBucket, Quota, TokenBucket,
};
use crate::clock::Nanos;

/// A packed state: two words whose meaning depends on the algorithm.
pub(crate) type Words = [u64; 2];

/// The algorithms whose state packs into [`Words`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PackedAlgorithm {
    TokenBucket,
    LeakyBucket,
    FixedWindow,
    Gcra,
}

impl Algorithm {
    /// The packed algorithm that decides this one under `quota`, if its state packs into
    /// [`Words`].
    ///
    /// A token bucket whose quota has a whole emission interval (100 per second: one token
    /// every 10 ms) is decided as GCRA, with the same answers: its bucket is full `burst`
    /// intervals after the time it was last empty, and that time is the one timestamp GCRA
    /// keeps, in one word that a shared lock and a compare-and-swap can update. Other
    /// token buckets (7 per minute, or a burst that takes centuries to refill) keep their
    /// exact two-word state.
    ///
    /// The same answers, that is, for clock readings that never go back. Requests decided
    /// concurrently may reach the store with readings a little out of order: there the token
    /// bucket counts an earlier reading as its own last one, and GCRA counts from the
    /// earlier reading itself, so GCRA is the stricter, never the more lenient.
    pub(crate) fn packed(self, quota: &Quota) -> Option<PackedAlgorithm> {
        match self {
            Algorithm::TokenBucket if quota.token_bucket_fits_a_timestamp() => {
                Some(PackedAlgorithm::Gcra)
            }
            Algorithm::TokenBucket => Some(PackedAlgorithm::TokenBucket),
            Algorithm::LeakyBucket => Some(PackedAlgorithm::LeakyBucket),
            Algorithm::FixedWindow => Some(PackedAlgorithm::FixedWindow),
            Algorithm::Gcra => Some(PackedAlgorithm::Gcra),
            Algorithm::SlidingWindowLog | Algorithm::SlidingWindowCounter => None,
        }
    }
}

impl PackedAlgorithm {
    /// Whether the state is one timestamp (the first word) that is also the time the key
    /// goes idle: GCRA's theoretical arrival time and the time a leaky bucket has drained.
    pub(crate) fn is_timestamp(self) -> bool {
        matches!(self, PackedAlgorithm::LeakyBucket | PackedAlgorithm::Gcra)
    }

    /// The state after a request of `cost` at `now` (`state` `None`: a key never seen) and the
    /// decision: [`Algorithm::acquire`] keeps the state returned when the request is
    /// admitted, [`Algorithm::peek`] drops it.
    // Always inlined: callers read the decision at once, and a decision returned through
    // memory makes that read wait behind its writes (benches/hot_key.rs shows it).
    #[inline(always)]
    pub(crate) fn transition(
        self,
        state: Option<&Words>,
        now: Nanos,
        quota: &Quota,
        cost: u64,
    ) -> (Words, Decision) {
        match self {
            PackedAlgorithm::TokenBucket => transition::<TokenBucket>(state, now, quota, cost),
            PackedAlgorithm::LeakyBucket => transition::<LeakyBucket>(state, now, quota, cost),
            PackedAlgorithm::FixedWindow => transition::<FixedWindow>(state, now, quota, cost),
            PackedAlgorithm::Gcra => transition::<Gcra>(state, now, quota, cost),
        }
    }

    /// [`Algorithm::settle`] on a packed state.
    pub(crate) fn settle(self, state: &mut Words, now: Nanos, quota: &Quota, extra: i64) {
        match self {
            PackedAlgorithm::TokenBucket => settle::<TokenBucket>(state, now, quota, extra),
            PackedAlgorithm::LeakyBucket => settle::<LeakyBucket>(state, now, quota, extra),
            PackedAlgorithm::FixedWindow => settle::<FixedWindow>(state, now, quota, extra),
            PackedAlgorithm::Gcra => settle::<Gcra>(state, now, quota, extra),
        }
    }

    /// [`Algorithm::cancel`] on a packed state.
    pub(crate) fn cancel(
        self,
        state: &mut Words,
        now: Nanos,
        quota: &Quota,
        cost: u64,
        booked_until: Nanos,
    ) {
        if self == PackedAlgorithm::LeakyBucket {
            let mut bucket = LeakyBucket::unpack(*state);
            bucket.cancel(now, quota, cost, booked_until);
            *state = bucket.pack();
        }
    }
}

// Always inlined: callers read the decision at once, and a decision returned through
// memory makes that read wait behind its writes (benches/hot_key.rs shows it).
#[inline(always)]
fn transition<T: Pack>(
    state: Option<&Words>,
    now: Nanos,
    quota: &Quota,
    cost: u64,
) -> (Words, Decision) {
    let state = state.map(|words| T::unpack(*words));
    let (next, decision) = T::transition(state.as_ref(), now, quota, cost);
    (next.pack(), decision)
}

/// [`Algorithm::settle`] on the packed `state` of a `T`.
fn settle<T: Pack>(state: &mut Words, now: Nanos, quota: &Quota, extra: i64) {
    let mut unpacked = T::unpack(*state);
    unpacked.settle(now, quota, extra);
    *state = unpacked.pack();
}

/// A state that converts to and from [`Words`] without loss.
pub(super) trait Pack: CopyTransition {
    fn pack(self) -> Words;
    fn unpack(words: Words) -> Self;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every packed algorithm decides a trace exactly as its unpacked state does, under a
    /// quota whose interval is rounded (3 per second) and one whose interval is whole (4 per
    /// second, where the token bucket is decided as GCRA).
    #[test]
    fn packed_states_decide_as_the_states_they_pack() {
        for limit in [3, 4] {
            let quota = Quota::new(limit, Duration::from_secs(1))
                .unwrap()
                .with_burst(5)
                .with_queue(2);
            for algorithm in Algorithm::ALL {
                let Some(packed) = algorithm.packed(&quota) else {
                    continue;
                };
                let mut state = algorithm.fresh(Nanos::new(0), &quota);
                let mut words = None;
                for step in 0..40u64 {
                    let now = Nanos::new(step * 70_000_000);
                    let cost = step % 3;
                    let expected = algorithm.acquire(&mut state, now, &quota, cost);
                    let (next, decision) = packed.transition(words.as_ref(), now, &quota, cost);
                    assert_eq!(
                        decision, expected,
                        "{algorithm}, {limit} per second, step {step}"
                    );
                    if decision.allowed {
                        words = Some(next);
                    }
                }
            }
        }
    }

    #[test]
    fn a_token_bucket_is_decided_as_gcra_only_when_its_interval_is_whole_and_it_fits() {
        let per_second = |limit| Quota::new(limit, Duration::from_secs(1)).unwrap();
        let packed = |quota: &Quota| Algorithm::TokenBucket.packed(quota);
        assert_eq!(packed(&per_second(4)), Some(PackedAlgorithm::Gcra));
        assert_eq!(
            packed(&per_second(1_000_000_000)),
            Some(PackedAlgorithm::Gcra)
        );
        assert_eq!(packed(&per_second(3)), Some(PackedAlgorithm::TokenBucket));
        assert_eq!(packed(&per_second(0)), Some(PackedAlgorithm::TokenBucket));
        // A limit over the period's nanoseconds: an interval of 1 ns, rounded up.
        assert_eq!(
            packed(&per_second(1_000_000_001)),
            Some(PackedAlgorithm::TokenBucket)
        );
        // An empty bucket refilled in 2⁶² ns, and one a nanosecond slower.
        let one_ns = Quota::new(1, Duration::from_nanos(1)).unwrap();
        assert_eq!(
            packed(&one_ns.with_burst(1 << 62)),
            Some(PackedAlgorithm::Gcra)
        );
        assert_eq!(
            packed(&one_ns.with_burst((1 << 62) + 1)),
            Some(PackedAlgorithm::TokenBucket)
        );
        // A limit past `i64::MAX` tokens, whose count the token bucket saturates.
        let huge = 3 << 62;
        assert_eq!(
            packed(
                &Quota::new(huge, Duration::from_nanos(huge))
                    .unwrap()
                    .with_burst(1 << 62)
            ),
            Some(PackedAlgorithm::TokenBucket)
        );
        // A burst set after a burst: the last one counts.
        assert_eq!(
            packed(&per_second(4).with_burst(u64::MAX).with_burst(8)),
            Some(PackedAlgorithm::Gcra)
        );
    }
}
