//! One shard's keys: two generations, and deciding a limit against them.

use super::tables::{General, Packed, PackedSlot, Slot, Tables, Timestamp};
use crate::algorithm::{Algorithm, Decision, PackedAlgorithm, Quota, State, Words};
use crate::clock::{saturating_nanos, Nanos};
use crate::store::sketch::{Estimate, Sketch};
use crate::store::LimitCheck;
use parking_lot::RwLock;
use std::num::NonZeroU64;
use std::sync::atomic::Ordering;

/// A key's state as the tables kept it.
pub(super) enum Kept {
    /// In two words, decided by this packed algorithm.
    Packed(PackedAlgorithm, Words),
    /// Whole.
    General(State),
}

impl Kept {
    /// The decision on a request of weight 0 at `now` under `quota`, decided by
    /// `algorithm`: what remains as the state stands.
    pub(super) fn as_it_stands(&self, algorithm: Algorithm, quota: &Quota, now: Nanos) -> Decision {
        match self {
            Kept::Packed(packed, words) => packed.transition(Some(words), now, quota, 0).1,
            Kept::General(state) => algorithm.peek(state, now, quota, 0),
        }
    }
}

#[derive(Default)]
pub(super) struct Generations {
    pub(super) young: Tables,
    pub(super) old: Tables,
}

/// Decides a one-timestamp limit (GCRA, leaky bucket, a token bucket with a whole interval)
/// under the shard's shared lock, when that is enough: the key is young and its timestamp is
/// swapped in atomically, or the request is denied, or it leaves nothing to remember. So a
/// denial writes nothing, and threads deciding on one key do not take turns. `None`: the key
/// must be inserted or moved to the young generation, under the exclusive lock.
// Inlined into the store's one entry point (see `decide`).
#[inline(always)]
pub(super) fn decide_shared(
    shard: &RwLock<Generations>,
    fingerprint: NonZeroU64,
    check: &LimitCheck<'_>,
    now: Nanos,
) -> Option<Decision> {
    let packed = check
        .algorithm
        .packed(check.quota)
        .filter(|p| p.is_timestamp())?;
    let LimitCheck { quota, cost, .. } = *check;
    let generations = shard.read();
    let Some(Timestamp(timestamp)) = generations.young.timestamps.find(fingerprint) else {
        if generations.old.timestamps.find(fingerprint).is_some() {
            return None;
        }
        let (_, decision) = packed.transition(None, now, quota, cost);
        return (!leaves_state(&decision)).then_some(decision);
    };
    let mut current = timestamp.load(Ordering::Acquire);
    loop {
        let (next, decision) = packed.transition(Some(&[current, 0]), now, quota, cost);
        if !decision.allowed {
            return Some(decision);
        }
        match timestamp.compare_exchange_weak(current, next[0], Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Some(decision),
            Err(actual) => current = actual,
        }
    }
}

/// Whether a request on a key not tracked leaves state worth remembering: it was admitted,
/// and the state it leaves is not already the same as a key never seen.
fn leaves_state(decision: &Decision) -> bool {
    decision.allowed && !decision.reset_after.is_zero()
}

/// Whether deciding a limit also charges it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Charge {
    /// Decide only (the first pass over several limits).
    No,
    /// Charge the request if it is admitted.
    IfAdmitted,
}

impl Generations {
    /// Takes out the state of the key with `fingerprint`, kept by `algorithm` under
    /// `quota`, if it is tracked.
    pub(super) fn take(
        &mut self,
        fingerprint: NonZeroU64,
        algorithm: Algorithm,
        quota: &Quota,
    ) -> Option<Kept> {
        let mut young_then_old = [&mut self.young, &mut self.old].into_iter();
        match algorithm.packed(quota) {
            Some(packed) if packed.is_timestamp() => young_then_old
                .find_map(|tables| tables.timestamps.remove(fingerprint))
                .map(|slot| Kept::Packed(packed, slot.state())),
            Some(packed) => young_then_old
                .find_map(|tables| tables.packed.remove(fingerprint))
                .map(|slot| Kept::Packed(packed, slot.state())),
            None => young_then_old
                .find_map(|tables| tables.general.remove(fingerprint))
                .map(|slot| Kept::General(slot.state)),
        }
    }

    /// Decides one limit at `now` and, if asked, charges it when the request is admitted. A
    /// key whose request was denied (or left nothing to remember) stays untracked, but for
    /// an approximate limit's key past half its limit, tracked from then on.
    // Always inlined: returned from a call, the decision is written out and read back at
    // once, and the read stalls behind the writes (benches/hot_key.rs shows it).
    #[inline(always)]
    pub(super) fn decide(
        &mut self,
        fingerprint: NonZeroU64,
        check: &LimitCheck<'_>,
        sketch: Option<&Sketch>,
        now: Nanos,
        capacity: usize,
        charge: Charge,
    ) -> Decision {
        let LimitCheck {
            algorithm,
            quota,
            cost,
            ..
        } = *check;
        // An approximate limit: a key not tracked exactly is counted in the sketch, unless
        // it would pass half its limit, when it is tracked exactly from the sketch's estimate.
        if let Some(sketch) = sketch {
            if !self.tracks(fingerprint, algorithm, quota) {
                let charged = charge == Charge::IfAdmitted;
                match sketch.decide(fingerprint.get(), algorithm, quota, cost, now, charged) {
                    Estimate::Light(decision) => return decision,
                    Estimate::Heavy(state) if !charged => {
                        return algorithm.peek(&state, now, quota, cost);
                    }
                    Estimate::Heavy(state) => self.track(fingerprint, state, now, quota, capacity),
                }
            }
            let decision = self.decide_exactly(fingerprint, check, now, capacity, charge);
            if charge == Charge::IfAdmitted && decision.allowed {
                // The sketch keeps up with the exact count, so a key the tables forget (at
                // the key ceiling) is not counted afresh.
                let used = quota
                    .requests_per_period()
                    .saturating_sub(decision.remaining);
                sketch.raise(fingerprint.get(), quota, now, used, cost);
            }
            return decision;
        }
        self.decide_exactly(fingerprint, check, now, capacity, charge)
    }

    /// Decides a limit only checked, charging nothing (see [`Decision::checked`]).
    pub(super) fn check(
        &mut self,
        fingerprint: NonZeroU64,
        check: &LimitCheck<'_>,
        sketch: Option<&Sketch>,
        now: Nanos,
        capacity: usize,
    ) -> Decision {
        let decision = self.decide(fingerprint, check, sketch, now, capacity, Charge::No);
        if !decision.allowed {
            return decision;
        }
        let weightless = LimitCheck { cost: 0, ..*check };
        decision.checked(self.decide(fingerprint, &weightless, sketch, now, capacity, Charge::No))
    }

    /// [`Generations::decide`] on the key's own state.
    #[inline(always)]
    fn decide_exactly(
        &mut self,
        fingerprint: NonZeroU64,
        check: &LimitCheck<'_>,
        now: Nanos,
        capacity: usize,
        charge: Charge,
    ) -> Decision {
        let LimitCheck {
            algorithm,
            quota,
            cost,
            ..
        } = *check;
        if let Some(packed) = algorithm.packed(quota) {
            return if packed.is_timestamp() {
                self.decide_packed::<Timestamp>(packed, fingerprint, check, now, capacity, charge)
            } else {
                self.decide_packed::<Packed>(packed, fingerprint, check, now, capacity, charge)
            };
        }
        let idle_at = |decision: &Decision| now.plus(saturating_nanos(decision.reset_after));
        if let Some(General {
            idle_at: entry_idle_at,
            state,
        }) = self.find::<General>(fingerprint, now, capacity)
        {
            if charge == Charge::No {
                return algorithm.peek(state, now, quota, cost);
            }
            let decision = algorithm.acquire(state, now, quota, cost);
            if decision.allowed {
                *entry_idle_at = idle_at(&decision);
            }
            return decision;
        }
        let mut state = algorithm.fresh(now, quota);
        if charge == Charge::No {
            return algorithm.peek(&state, now, quota, cost);
        }
        let decision = algorithm.acquire(&mut state, now, quota, cost);
        if leaves_state(&decision) {
            let idle_at = idle_at(&decision);
            self.insert(fingerprint, General { idle_at, state }, now, capacity);
        }
        decision
    }

    /// [`Generations::decide`] for a state kept packed as `S`.
    #[inline(always)]
    fn decide_packed<S: PackedSlot>(
        &mut self,
        packed: PackedAlgorithm,
        fingerprint: NonZeroU64,
        check: &LimitCheck<'_>,
        now: Nanos,
        capacity: usize,
        charge: Charge,
    ) -> Decision {
        let LimitCheck { quota, cost, .. } = *check;
        let slot = self.find::<S>(fingerprint, now, capacity);
        let current = slot.as_ref().map(|slot| slot.state());
        let (state, decision) = packed.transition(current.as_ref(), now, quota, cost);
        if charge == Charge::No || !decision.allowed {
            return decision;
        }
        let charged = S::new(state, now.plus(saturating_nanos(decision.reset_after)));
        match slot {
            Some(slot) => *slot = charged,
            None if !leaves_state(&decision) => {}
            None => {
                self.insert(fingerprint, charged, now, capacity);
            }
        }
        decision
    }

    /// Whether the key with `fingerprint` has state of its own, under `algorithm`.
    pub(super) fn tracks(
        &self,
        fingerprint: NonZeroU64,
        algorithm: Algorithm,
        quota: &Quota,
    ) -> bool {
        let tracked = |tables: &Tables| match algorithm.packed(quota) {
            Some(packed) if packed.is_timestamp() => tables.timestamps.find(fingerprint).is_some(),
            Some(_) => tables.packed.find(fingerprint).is_some(),
            None => tables.general.find(fingerprint).is_some(),
        };
        tracked(&self.young) || tracked(&self.old)
    }

    /// Tracks the key with `fingerprint` from `state` (an approximate limit's estimate).
    fn track(
        &mut self,
        fingerprint: NonZeroU64,
        state: State,
        now: Nanos,
        quota: &Quota,
        capacity: usize,
    ) {
        let reset_after = state.algorithm().peek(&state, now, quota, 0).reset_after;
        let idle_at = now.plus(saturating_nanos(reset_after));
        match state {
            State::FixedWindow(window) => {
                self.insert(
                    fingerprint,
                    Packed::new(window.words(), idle_at),
                    now,
                    capacity,
                );
            }
            state @ (State::TokenBucket(_)
            | State::LeakyBucket(_)
            | State::SlidingWindowLog(_)
            | State::SlidingWindowCounter(_)
            | State::Gcra(_)) => {
                self.insert(fingerprint, General { idle_at, state }, now, capacity);
            }
        }
    }

    /// The state of the key with `fingerprint`, moved to the young generation if it was in
    /// the old one. A key found young (the common case) costs one probe.
    pub(super) fn find<S: Slot>(
        &mut self,
        fingerprint: NonZeroU64,
        now: Nanos,
        capacity: usize,
    ) -> Option<&mut S> {
        let index = match S::table(&mut self.young).index_of(fingerprint) {
            Some(index) => index,
            None => {
                let old = S::table(&mut self.old).remove(fingerprint)?;
                self.insert(fingerprint, old, now, capacity)
            }
        };
        Some(S::table(&mut self.young).slot_mut(index))
    }

    /// Adds a key to the young generation, making room first when it is full, and returns
    /// its place there. Each generation so holds at most `capacity` keys.
    pub(super) fn insert<S: Slot>(
        &mut self,
        fingerprint: NonZeroU64,
        slot: S,
        now: Nanos,
        capacity: usize,
    ) -> usize {
        self.reserve(1, now, capacity);
        S::table(&mut self.young).insert_new(fingerprint, slot)
    }

    /// Makes room for `keys` more keys in the young generation: idle keys go, and if that
    /// frees too little, the old generation goes and the young one takes its place.
    pub(super) fn reserve(&mut self, keys: usize, now: Nanos, capacity: usize) {
        if self.young.len() + keys > capacity {
            self.young.retain_active(now);
            if self.young.len() + keys > capacity - capacity / 4 {
                self.old = std::mem::take(&mut self.young);
            }
        }
    }
}
