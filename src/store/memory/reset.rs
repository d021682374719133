//! Forgetting what a client used: [`Store::reset`](crate::store::Store::reset) in memory.

use super::generations::Generations;
use super::tables::{General, Packed, PackedSlot};
use super::MemoryStore;
use crate::algorithm::{Algorithm, FixedWindow, Quota, WindowCount};
use crate::clock::{Clock, Nanos};
use crate::store::LimitCheck;
use std::num::NonZeroU64;

impl<C: Clock> MemoryStore<C> {
    /// Forgets the state of `checks`' keys and of the keys they are carried from; how many
    /// keys were reset. An approximate limit's key is reset even where only its sketch
    /// counted it (see [`Generations::set_sketch_aside`]).
    pub(super) fn forget(&self, checks: &[LimitCheck<'_>]) -> u64 {
        let now = self.clock.now();
        let capacity = self.generation_capacity;
        let mut reset = 0;
        for check in checks {
            let carried = check.carried_from.iter().map(|from| {
                let key = from.key_of(check.key);
                (
                    self.fingerprint_of(&key, from.algorithm()),
                    from.algorithm(),
                    from.quota(),
                )
            });
            let own = (self.fingerprint(check), check.algorithm, check.quota);
            for (i, (fingerprint, algorithm, quota)) in [own].into_iter().chain(carried).enumerate()
            {
                let mut generations = self.shards[self.shard_of(fingerprint)].0.write();
                let mut forgotten = generations.take(fingerprint, algorithm, quota).is_some();
                if i == 0 && check.approximate.is_some() {
                    forgotten |=
                        generations.set_sketch_aside(fingerprint, algorithm, quota, now, capacity);
                }
                reset += u64::from(forgotten);
            }
        }
        reset
    }
}

impl Generations {
    /// Tracks the key with `fingerprint` of an approximate limit as a key never seen, until
    /// its sketch no longer counts what it used: the sketch's cells are shared with other
    /// keys and cannot be taken down for one, so the key is decided exactly from a fresh
    /// state instead (to the end of the window; of the next one for a sliding window
    /// counter, whose sketch counts the window before). Whether it did (the algorithm has a
    /// sketch).
    fn set_sketch_aside(
        &mut self,
        fingerprint: NonZeroU64,
        algorithm: Algorithm,
        quota: &Quota,
        now: Nanos,
        capacity: usize,
    ) -> bool {
        let window = quota.period_divisor().div_u64(now.as_u64());
        let window_end = |windows: u64| {
            Nanos::new(
                window
                    .saturating_add(windows)
                    .saturating_mul(quota.period_nanos()),
            )
        };
        match algorithm.window_count() {
            Some(WindowCount::One) => {
                let fresh = FixedWindow::counted(window, 0).words();
                self.insert(
                    fingerprint,
                    Packed::new(fresh, window_end(1)),
                    now,
                    capacity,
                );
            }
            Some(WindowCount::Two) => {
                let state = WindowCount::Two.state(window, 0, 0);
                let idle_at = window_end(2);
                self.insert(fingerprint, General { idle_at, state }, now, capacity);
            }
            None => return false,
        }
        true
    }
}
