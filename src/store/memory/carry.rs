//! A key's state carried from a limit that a reload replaced (see
//! [`CarriedFrom`](crate::store::CarriedFrom)): taken out of the old key, converted, and put
//! under the new one.

use super::generations::Generations;
use super::tables::{General, Packed, PackedSlot, Timestamp};
use crate::algorithm::{Algorithm, Carry, Decision, PackedAlgorithm, Quota, State, Words};
use crate::clock::{saturating_nanos, Nanos};
use std::num::NonZeroU64;

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
    fn as_it_stands(&self, algorithm: Algorithm, quota: &Quota, now: Nanos) -> Decision {
        match self {
            Kept::Packed(packed, words) => packed.transition(Some(words), now, quota, 0).1,
            Kept::General(state) => algorithm.peek(state, now, quota, 0),
        }
    }
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

    /// Puts `kept`, a key's state under `from` and `from_quota`, under the key with
    /// `fingerprint` of a limit decided by `algorithm` under `quota` (which the key has no
    /// state of), converted as [`Algorithm::carry_from`] says. Nothing is kept when the
    /// state carried is the same as a key never seen.
    #[allow(clippy::too_many_arguments)] // One call site; a struct would only rename them.
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
                let cost = algorithm.carried_cost(quota, used);
                match algorithm.packed(quota) {
                    Some(packed) => {
                        Kept::Packed(packed, packed.transition(None, now, quota, cost).0)
                    }
                    None => Kept::General(algorithm.having_used(now, quota, used)),
                }
            }
        };
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
