//! A key's state carried from a limit that a reload replaced (see
//! [`CarriedFrom`](crate::store::CarriedFrom)): taken out of the old key, converted, and put
//! under the new one.

use super::generations::{Generations, Kept};
use super::tables::{General, Packed, PackedSlot, Timestamp};
use super::MemoryStore;
use crate::algorithm::{Algorithm, Carry, Quota};
use crate::clock::{saturating_nanos, Clock, Nanos};
use crate::store::sketch::Sketch;
use crate::store::LimitCheck;
use std::num::NonZeroU64;
use std::slice;

impl<C: Clock> MemoryStore<C> {
    /// Gives `check`'s key, if it has no state, the state of the first of the keys it is
    /// carried from that has one (see [`LimitCheck::carried_from`]), which is forgotten.
    #[cold]
    #[inline(never)]
    pub(super) fn carry(&self, check: &LimitCheck<'_>, now: Nanos) {
        let fingerprint = self.fingerprint(check);
        let shard = self.shard_of(fingerprint);
        let tracked = |generations: &Generations| {
            generations.tracks(fingerprint, check.algorithm, check.quota)
        };
        // Once carried or charged, a key is tracked: the common case, under the shared lock.
        if tracked(&self.shards[shard].0.read()) {
            return;
        }
        let capacity = self.generation_capacity;
        // Before the locks, as in `decide_together`.
        let sketches = check
            .approximate
            .map(|_| self.sketches.load(slice::from_ref(check)));
        let sketch = sketches.as_ref().and_then(|s| s.of(check));
        for from in check.carried_from {
            let old = self.fingerprint_of(&from.key_of(check.key), from.algorithm());
            let old_shard = self.shard_of(old);
            // Both locked, in shard order (see `decide_together`).
            let (mut first, mut second) = (
                self.shards[shard.min(old_shard)].0.write(),
                (shard != old_shard).then(|| self.shards[shard.max(old_shard)].0.write()),
            );
            let (new_generations, old_generations) = match &mut second {
                None => (&mut *first, None),
                Some(second) if shard < old_shard => (&mut *first, Some(&mut **second)),
                Some(second) => (&mut **second, Some(&mut *first)),
            };
            if tracked(new_generations) {
                return;
            }
            let taken = match old_generations {
                Some(old_generations) => old_generations.take(old, from.algorithm(), from.quota()),
                None => new_generations.take(old, from.algorithm(), from.quota()),
            };
            if let Some(kept) = taken {
                new_generations.put_carried(
                    fingerprint,
                    kept,
                    (from.algorithm(), from.quota()),
                    (check.algorithm, check.quota),
                    now,
                    capacity,
                );
                return;
            }
            // A light key of an approximate limit: counted in the sketch, which counted the
            // old limit too when their algorithm and period are the same.
            let same_sketch = from.algorithm() == check.algorithm
                && from.quota().period_nanos() == check.quota.period_nanos();
            if let Some(sketch) = sketch.filter(|_| same_sketch) {
                let limit = (check.algorithm, check.quota);
                if new_generations.put_estimated(fingerprint, (sketch, old), limit, now, capacity) {
                    return;
                }
            }
        }
    }
}

impl Kept {
    /// The state of a key of a limit decided by `algorithm` under `quota` that has used
    /// `used` requests at `now`, in the shape the tables keep it.
    fn having_used(algorithm: Algorithm, quota: &Quota, now: Nanos, used: u64) -> Kept {
        match algorithm.packed(quota) {
            Some(packed) => Kept::Packed(packed, packed.having_used(algorithm, now, quota, used)),
            None => Kept::General(algorithm.having_used(now, quota, used)),
        }
    }
}

impl Generations {
    /// Puts `kept`, a key's state under `from` and `from_quota`, under the key with
    /// `fingerprint` of a limit decided by `algorithm` under `quota` (which the key has no
    /// state of), converted as [`Algorithm::carry_from`] says. Nothing is kept when the
    /// state carried is the same as a key never seen.
    pub(super) fn put_carried(
        &mut self,
        fingerprint: NonZeroU64,
        kept: Kept,
        (from, from_quota): (Algorithm, &Quota),
        (algorithm, quota): (Algorithm, &Quota),
        now: Nanos,
        capacity: usize,
    ) {
        let carry = algorithm.carry_from(quota, from, from_quota);
        let kept = match carry {
            // The same algorithm and shape (see `carry_from`): the state as it is.
            Carry::AsIs => kept,
            _ => {
                let used = carry.used(algorithm, quota, &kept.as_it_stands(from, from_quota, now));
                Kept::having_used(algorithm, quota, now, used)
            }
        };
        self.put_kept(fingerprint, kept, (algorithm, quota), now, capacity);
    }

    /// Puts the state of a key its limit's sketch counted under `old` (the limit before the
    /// reload, under the same sketch settings) under the key with `fingerprint`, tracked
    /// exactly from then on. Whether the sketch counted anything.
    pub(super) fn put_estimated(
        &mut self,
        fingerprint: NonZeroU64,
        (sketch, old): (&Sketch, NonZeroU64),
        (algorithm, quota): (Algorithm, &Quota),
        now: Nanos,
        capacity: usize,
    ) -> bool {
        let used = sketch.used(old.get(), algorithm, quota, now);
        if used == 0 {
            return false;
        }
        let kept = Kept::having_used(algorithm, quota, now, used);
        self.put_kept(fingerprint, kept, (algorithm, quota), now, capacity);
        true
    }

    /// Puts `kept`, a state of `algorithm` under `quota`, under the key with `fingerprint`,
    /// unless it is the same as a key never seen.
    pub(super) fn put_kept(
        &mut self,
        fingerprint: NonZeroU64,
        kept: Kept,
        (algorithm, quota): (Algorithm, &Quota),
        now: Nanos,
        capacity: usize,
    ) {
        let reset_after = kept.as_it_stands(algorithm, quota, now).reset_after;
        if reset_after.is_zero() {
            return;
        }
        let idle_at = now.plus(saturating_nanos(reset_after));
        match kept {
            Kept::Packed(packed, words) if packed.is_timestamp() => {
                self.insert(fingerprint, Timestamp::new(words, idle_at), now, capacity);
            }
            Kept::Packed(_, words) => {
                self.insert(fingerprint, Packed::new(words, idle_at), now, capacity);
            }
            Kept::General(state) => {
                self.insert(fingerprint, General { idle_at, state }, now, capacity);
            }
        }
    }
}
