//! A key's state carried from a limit that a reload replaced (see
//! [`CarriedFrom`](crate::store::CarriedFrom)): taken out of the old key, converted, and put
//! under the new one.

use super::generations::{Generations, Kept};
use super::tables::{General, Packed, PackedSlot, Timestamp};
use crate::algorithm::{Algorithm, Carry, Quota};
use crate::clock::{saturating_nanos, Nanos};
use crate::store::sketch::Sketch;
use std::num::NonZeroU64;

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
    fn put_kept(
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
