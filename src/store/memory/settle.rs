//! Settling what an admitted request turned out to cost (see
//! [`Store::settle`](crate::store::Store::settle)).

use super::generations::Kept;
use super::MemoryStore;
use crate::algorithm::{Algorithm, Quota};
use crate::clock::{Clock, Nanos};
use crate::store::LimitCheck;

impl<C: Clock> MemoryStore<C> {
    /// Charges `check`'s key `extra` more, or gives `-extra` back, under its shard's lock.
    /// An approximate limit's light keys are counted in a sketch, which can neither take a
    /// charge back nor tell one key's count apart: only the keys it tracks exactly settle.
    pub(super) fn settle_key(&self, check: &LimitCheck<'_>, extra: i64) {
        if extra == 0 {
            return;
        }
        let now = self.clock.now();
        let fingerprint = self.fingerprint(check);
        let capacity = self.generation_capacity;
        let (algorithm, quota) = (check.algorithm, check.quota);
        let mut generations = self.shards[self.shard_of(fingerprint)].0.write();
        let kept = match generations.take(fingerprint, algorithm, quota) {
            Some(kept) => kept,
            None if check.approximate.is_some() => return,
            None => Kept::fresh(algorithm, quota, now),
        };
        let settled = kept.settled(algorithm, quota, now, extra);
        generations.put_kept(fingerprint, settled, (algorithm, quota), now, capacity);
    }
}

impl Kept {
    /// The state of a key never seen, in the shape the tables keep it.
    fn fresh(algorithm: Algorithm, quota: &Quota, now: Nanos) -> Kept {
        match algorithm.packed(quota) {
            Some(packed) => Kept::Packed(packed, packed.transition(None, now, quota, 0).0),
            None => Kept::General(algorithm.fresh(now, quota)),
        }
    }

    /// This state with `extra` more charged at `now`, or `-extra` given back.
    fn settled(self, algorithm: Algorithm, quota: &Quota, now: Nanos, extra: i64) -> Kept {
        match self {
            Kept::Packed(packed, mut words) => {
                packed.settle(&mut words, now, quota, extra);
                Kept::Packed(packed, words)
            }
            Kept::General(mut state) => {
                algorithm.settle(&mut state, now, quota, extra);
                Kept::General(state)
            }
        }
    }
}
