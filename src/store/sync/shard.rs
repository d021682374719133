//! One shard of a table: the entries of its keys in dense arrays, one per shape of counts,
//! found through an index of their places; the keys to send; and the clock hand that
//! forgets keys.

use super::entry::{Entry, Keyed, Mark};
use super::table::Outgoing;
use super::view::{counts_windows, Payload, Schedule, Totals, Windows};
use super::Limit;
use hashbrown::HashTable;
use std::sync::Arc;

/// At each sync the clock hand visits this share of a shard's keys, and at least
/// [`SWEEP_AT_LEAST`]: every key is looked at within a few syncs, and no sync walks them all.
const SWEEP_SHARE: usize = 8;
const SWEEP_AT_LEAST: usize = 64;

/// The list of keys to send is rid of the ids of keys forgotten since they were listed once
/// it is twice as long as the shard, and this much.
const LISTED_SLACK: usize = 64;

/// The keys of one shard.
pub(super) struct Shard<K> {
    /// Where each key's entry is, by id. An index of 4-byte places, rather than a table of
    /// entries: a hash table's empty slots then cost 4 bytes each, not a whole entry.
    places: HashTable<Place>,
    entries: Entries<K>,
    /// The ids of the keys to send, each [listed](Mark::Listed) when put here. A key forgotten
    /// meanwhile stays until the next send, or the next compaction, looks for it.
    listed: Vec<u64>,
    /// The clock hand: the position (windows first, then schedules) of the next key it looks
    /// at.
    hand: usize,
}

/// Every entry of a shard, in one array per shape of counts, each entry sized to its own.
struct Entries<K> {
    windows: Vec<Entry<Windows, K>>,
    schedules: Vec<Entry<Schedule, K>>,
}

/// Where an entry is: its array (the top bit set: schedules) and its index there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Place(u32);

const IN_SCHEDULES: u32 = 1 << 31;

/// The most keys a shard holds: a place has 31 bits of index.
pub(super) const MOST_PER_SHARD: usize = (IN_SCHEDULES - 1) as usize;

impl Place {
    fn new(in_schedules: bool, index: usize) -> Place {
        debug_assert!(index < MOST_PER_SHARD);
        let array = if in_schedules { IN_SCHEDULES } else { 0 };
        // No truncation: a shard holds fewer keys than 2³¹.
        Place(array | index as u32)
    }

    fn in_schedules(self) -> bool {
        self.0 & IN_SCHEDULES != 0
    }

    fn index(self) -> usize {
        (self.0 & !IN_SCHEDULES) as usize
    }
}

impl<K> Entries<K> {
    fn len(&self) -> usize {
        self.windows.len() + self.schedules.len()
    }

    fn get(&mut self, place: Place) -> &mut dyn Keyed<K> {
        if place.in_schedules() {
            &mut self.schedules[place.index()]
        } else {
            &mut self.windows[place.index()]
        }
    }

    fn id(&self, place: Place) -> u64 {
        if place.in_schedules() {
            self.schedules[place.index()].id
        } else {
            self.windows[place.index()].id
        }
    }

    /// The place of the entry at `position`, counting the windows first.
    fn at(&self, position: usize) -> Place {
        match position.checked_sub(self.windows.len()) {
            None => Place::new(false, position),
            Some(index) => Place::new(true, index),
        }
    }

    /// Adds a key with fresh counts for its limit's algorithm.
    fn push(&mut self, id: u64, key: K, limit: Arc<Limit>) -> Place {
        if counts_windows(limit.algorithm) {
            self.windows.push(Entry::new(id, key, limit));
            Place::new(false, self.windows.len() - 1)
        } else {
            self.schedules.push(Entry::new(id, key, limit));
            Place::new(true, self.schedules.len() - 1)
        }
    }

    /// Removes the entry at `place`, the last of its array taking its place; returns its key,
    /// and the id and former place of the entry moved, if one was.
    fn swap_remove(&mut self, place: Place) -> (K, Option<(u64, Place)>) {
        fn swap_remove<C, K>(entries: &mut Vec<Entry<C, K>>, index: usize) -> (K, Option<u64>) {
            let removed = entries.swap_remove(index);
            (removed.key, entries.get(index).map(|moved| moved.id))
        }
        let (key, moved) = if place.in_schedules() {
            swap_remove(&mut self.schedules, place.index())
        } else {
            swap_remove(&mut self.windows, place.index())
        };
        let array_len = if place.in_schedules() {
            self.schedules.len()
        } else {
            self.windows.len()
        };
        let from = Place::new(place.in_schedules(), array_len);
        (key, moved.map(|id| (id, from)))
    }
}

/// The place of the key with `id` among `entries`.
fn find<K>(places: &HashTable<Place>, entries: &Entries<K>, id: u64) -> Option<Place> {
    places.find(id, |&place| entries.id(place) == id).copied()
}

impl<K: Clone> Shard<K> {
    pub(super) fn new() -> Self {
        Shard {
            places: HashTable::new(),
            entries: Entries {
                windows: Vec::new(),
                schedules: Vec::new(),
            },
            listed: Vec::new(),
            hand: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn find(&self, id: u64) -> Option<Place> {
        find(&self.places, &self.entries, id)
    }

    pub(super) fn get(&mut self, place: Place) -> &mut dyn Keyed<K> {
        self.entries.get(place)
    }

    /// Adds the key with `id`, first forgetting one if the shard holds `capacity` keys.
    pub(super) fn insert(
        &mut self,
        id: u64,
        key: K,
        limit: Arc<Limit>,
        now: u64,
        capacity: usize,
    ) -> Place {
        if self.len() >= capacity {
            self.evict(now);
        }
        self.add(id, key, limit)
    }

    /// Points the key at `place` to `limit`, which the rules changed its limit to. A changed
    /// algorithm starts it afresh: what was counted no longer applies.
    pub(super) fn relimit(&mut self, place: Place, limit: Arc<Limit>) -> Place {
        let entry = self.entries.get(place);
        if entry.limit().algorithm == limit.algorithm {
            entry.set_limit(limit);
            return place;
        }
        let id = self.entries.id(place);
        let key = self.remove(place);
        self.add(id, key, limit)
    }

    fn add(&mut self, id: u64, key: K, limit: Arc<Limit>) -> Place {
        let place = self.entries.push(id, key, limit);
        let Shard {
            places, entries, ..
        } = self;
        places.insert_unique(id, place, |&place| entries.id(place));
        place
    }

    /// Forgets the key at `place`; returns its key.
    pub(super) fn remove(&mut self, place: Place) -> K {
        let id = self.entries.id(place);
        let (key, moved) = self.entries.swap_remove(place);
        if let Ok(found) = self.places.find_entry(id, |&p| p == place) {
            found.remove();
        }
        if let Some((moved, from)) = moved {
            if let Some(found) = self.places.find_mut(moved, |&p| p == from) {
                *found = place;
            }
        }
        key
    }

    /// Notes that the key at `place` was asked for: it is sent at the next sync due.
    pub(super) fn touch(&mut self, place: Place) {
        self.entries.get(place).marks().raise_uses();
        self.list(place);
    }

    /// Puts the key at `place` in the list of keys to send, unless it is there.
    fn list(&mut self, place: Place) {
        let marks = self.entries.get(place).marks();
        if marks.has(Mark::Listed) {
            return;
        }
        marks.set(Mark::Listed, true);
        self.listed.push(self.entries.id(place));
        if self.listed.len() > 2 * self.len() + LISTED_SLACK {
            // Ids of keys forgotten since they were listed pile up while no sync runs.
            let Shard {
                places,
                entries,
                listed,
                ..
            } = self;
            listed.retain(|&id| {
                find(places, entries, id)
                    .is_some_and(|place| entries.get(place).marks().has(Mark::Listed))
            });
            listed.sort_unstable();
            listed.dedup();
        }
    }

    /// Moves what is due at fleet time `now` (with `force`, every key listed) to `outgoing`,
    /// until it holds `most`.
    pub(super) fn take_due(
        &mut self,
        now: u64,
        force: bool,
        most: usize,
        outgoing: &mut Vec<Outgoing<K>>,
    ) {
        let Shard {
            places,
            entries,
            listed,
            ..
        } = self;
        listed.retain(|&id| {
            if outgoing.len() >= most {
                return true;
            }
            let Some(place) = find(places, entries, id) else {
                return false;
            };
            let entry = entries.get(place);
            // Not listed: listed twice, and sent for the first.
            if !entry.marks().has(Mark::Listed) {
                return false;
            }
            let Some(payload) = entry.send(now, force) else {
                return true;
            };
            outgoing.push(Outgoing {
                id,
                key: entry.key().clone(),
                limit: Arc::clone(entry.limit()),
                payload,
            });
            false
        });
    }

    /// Takes the fleet's `totals` for what was `sent` for the key with `id` (`None`: the send
    /// failed, and the key is listed to send again). Returns by how many requests the fleet
    /// is over the limit.
    pub(super) fn settle(
        &mut self,
        id: u64,
        sent: &Payload,
        totals: Option<Totals>,
        now: u64,
    ) -> Option<u64> {
        let place = self.find(id)?;
        let entry = self.entries.get(place);
        // Not sending: forgotten since it was sent, and another key of the same id since.
        if !entry.marks().has(Mark::Sending) {
            return None;
        }
        let over = entry.settle(sent, totals, now);
        if totals.is_none() {
            self.list(place);
        }
        over
    }

    /// Looks at the key under the clock hand: forgets it if it is idle or, when `evicting`,
    /// if its [uses](super::entry::Marks::uses) are down to 0; else lowers them and moves on.
    /// Returns whether it forgot the key.
    fn step(&mut self, now: u64, evicting: bool) -> bool {
        if self.hand >= self.len() {
            self.hand = 0;
        }
        let place = self.entries.at(self.hand);
        let entry = self.entries.get(place);
        if entry.is_idle(now) || (evicting && entry.marks().uses() == 0) {
            self.remove(place);
            return true;
        }
        entry.marks().lower_uses();
        self.hand += 1;
        false
    }

    /// Makes room for a key: forgets the first key from the clock hand on that is idle or was
    /// not asked for in the hand's last passes (a key asked for once, in its last pass):
    /// roughly the one asked for least recently, and least often.
    fn evict(&mut self, now: u64) {
        while self.len() > 0 && !self.step(now, true) {}
    }

    /// Forgets the idle keys among a share of the keys from the clock hand on, and gives
    /// memory back once the shard holds far fewer keys than it did.
    pub(super) fn sweep(&mut self, now: u64) {
        let visits = (self.len() / SWEEP_SHARE + SWEEP_AT_LEAST).min(self.len());
        for _ in 0..visits {
            if self.len() == 0 {
                break;
            }
            self.step(now, false);
        }
        fn shrink<T>(vec: &mut Vec<T>) {
            if vec.len() * 4 < vec.capacity() {
                vec.shrink_to(vec.len() * 2);
            }
        }
        shrink(&mut self.entries.windows);
        shrink(&mut self.entries.schedules);
        shrink(&mut self.listed);
        let Shard {
            places, entries, ..
        } = self;
        if places.len() * 4 < places.capacity() {
            places.shrink_to(places.len() * 2, |&place| entries.id(place));
        }
    }

    /// The bytes the shard's arrays and index take (an estimate of their allocations).
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        // hashbrown: a power of two of buckets, filled to 7/8 at most, each a place and a
        // control byte.
        let buckets = match self.places.capacity() {
            0 => 0,
            capacity => (capacity * 8 / 7).next_power_of_two(),
        };
        buckets * (size_of::<Place>() + 1)
            + self.entries.windows.capacity() * size_of::<Entry<Windows, K>>()
            + self.entries.schedules.capacity() * size_of::<Entry<Schedule, K>>()
            + self.listed.capacity() * size_of::<u64>()
    }
}
