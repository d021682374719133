//! One generation's tables, one per shape of state, and those shapes.

use super::probe_table::ProbeTable;
use crate::algorithm::{State, Words};
use crate::clock::Nanos;
use std::sync::atomic::{AtomicU64, Ordering};

/// One generation's keys, by the shape of their state.
#[derive(Default)]
pub(super) struct Tables {
    pub(super) timestamps: ProbeTable<Timestamp>,
    pub(super) packed: ProbeTable<Packed>,
    pub(super) general: ProbeTable<General>,
}

/// A state that is one timestamp which is also the time the key goes idle (GCRA's
/// theoretical arrival time, the time a leaky bucket has drained, the time a token bucket
/// decided as GCRA is full): 16 bytes an entry.
/// Atomic, so that it can be replaced under the shard's shared lock.
pub(super) struct Timestamp(pub(super) AtomicU64);

/// A state packed into two words (fixed window, a token bucket whose interval is not whole),
/// and when it goes idle: 32 bytes an entry.
pub(super) struct Packed {
    idle_at: Nanos,
    state: Words,
}

/// A state that does not pack (the sliding windows), and when it goes idle.
pub(super) struct General {
    pub(super) idle_at: Nanos,
    pub(super) state: State,
}

impl Tables {
    pub(super) fn len(&self) -> usize {
        self.timestamps.len() + self.packed.len() + self.general.len()
    }

    /// Drops the keys that are idle at `now`.
    pub(super) fn retain_active(&mut self, now: Nanos) {
        self.timestamps.retain(|slot| slot.idle_at() > now);
        self.packed.retain(|slot| slot.idle_at() > now);
        self.general.retain(|slot| slot.idle_at() > now);
    }
}

/// A shape of state, kept in one of a generation's tables.
pub(super) trait Slot: Sized {
    /// From this time on the state is the same as a key never seen.
    fn idle_at(&self) -> Nanos;
    /// The table of `tables` that holds this shape.
    fn table(tables: &mut Tables) -> &mut ProbeTable<Self>;
}

/// A shape that holds a packed state.
pub(super) trait PackedSlot: Slot {
    fn new(state: Words, idle_at: Nanos) -> Self;
    fn state(&self) -> Words;
}

impl Slot for Timestamp {
    fn idle_at(&self) -> Nanos {
        Nanos::new(self.0.load(Ordering::Relaxed))
    }

    fn table(tables: &mut Tables) -> &mut ProbeTable<Self> {
        &mut tables.timestamps
    }
}

// The timestamp is the idle time: a decision's `reset_after` runs from now to it.
impl PackedSlot for Timestamp {
    fn new([at, _]: Words, idle_at: Nanos) -> Self {
        debug_assert_eq!(idle_at, Nanos::new(at), "the timestamp is the idle time");
        Timestamp(AtomicU64::new(at))
    }

    fn state(&self) -> Words {
        [self.0.load(Ordering::Relaxed), 0]
    }
}

impl Slot for Packed {
    fn idle_at(&self) -> Nanos {
        self.idle_at
    }

    fn table(tables: &mut Tables) -> &mut ProbeTable<Self> {
        &mut tables.packed
    }
}

impl PackedSlot for Packed {
    fn new(state: Words, idle_at: Nanos) -> Self {
        Packed { idle_at, state }
    }

    fn state(&self) -> Words {
        self.state
    }
}

impl Slot for General {
    fn idle_at(&self) -> Nanos {
        self.idle_at
    }

    fn table(tables: &mut Tables) -> &mut ProbeTable<Self> {
        &mut tables.general
    }
}
