//! Kept by hand: with hashbrown's `HashTable`, a decision at 1,000,000 keys took 1.4 × as long.
//!
//! A hash table of fingerprinted entries probed in place: an entry sits at the place its
//! fingerprint names, or in one of the places just after it (linear probing), so finding a
//! key usually reads one cache line. hashbrown first reads a line of control bytes, then
//! the line of the entry they point to; with a million keys, each is a miss to memory.

use std::num::NonZeroU64;

/// One tracked key: its fingerprint, which is also its hash, and its state.
struct Entry<S> {
    /// Never zero: a zero is an empty place.
    fingerprint: NonZeroU64,
    /// The key's state.
    slot: S,
}

/// Places per line. Four 16-byte entries fill a cache line exactly, and four 32-byte ones
/// two, so neither straddles a line boundary. Four 56-byte entries (the sliding windows)
/// take 224 bytes padded to 256: three of them cross a boundary.
const PLACES_PER_LINE: usize = 4;

/// Four places, aligned to a cache line. `None` is an empty place: the fingerprint is never
/// zero, so an empty place costs no more than a full one.
#[repr(align(64))]
struct Line<S>([Option<Entry<S>>; PLACES_PER_LINE]);

/// Entries keyed by their fingerprints, each present at most once.
pub(super) struct ProbeTable<S> {
    /// Empty, or a power of two of places, at most three quarters full: a probe for a key
    /// that is not there stops at the first empty place.
    lines: Box<[Line<S>]>,
    /// Entries held.
    len: usize,
}

/// Whether `places` places may hold `entries`: at most three quarters full, so that a probe
/// always meets an empty place.
fn may_hold(places: usize, entries: usize) -> bool {
    4 * entries <= 3 * places
}

/// The place count after `places`: twice as many, and two lines at least.
fn grown(places: usize) -> usize {
    (2 * places).max(2 * PLACES_PER_LINE)
}

impl<S> Default for ProbeTable<S> {
    fn default() -> Self {
        ProbeTable {
            lines: Box::new([]),
            len: 0,
        }
    }
}

impl<S> ProbeTable<S> {
    /// The number of entries.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The state of the entry with `fingerprint`.
    #[inline]
    pub(super) fn find(&self, fingerprint: NonZeroU64) -> Option<&S> {
        self.probe(fingerprint).map(|(_, entry)| &entry.slot)
    }

    /// The state of the entry at `index`, which [`ProbeTable::index_of`] or
    /// [`ProbeTable::insert_new`] gave, to change.
    #[inline]
    pub(super) fn slot_mut(&mut self, index: usize) -> &mut S {
        let entry = self.place_mut(index).as_mut();
        &mut entry.expect("an index from index_of holds an entry").slot
    }

    /// Adds an entry for `fingerprint`, which the table must not hold; its place.
    pub(super) fn insert_new(&mut self, fingerprint: NonZeroU64, slot: S) -> usize {
        debug_assert!(self.index_of(fingerprint).is_none(), "inserted twice");
        if !may_hold(self.places(), self.len + 1) {
            self.resize(grown(self.places()));
        }
        self.put(Entry { fingerprint, slot })
    }

    /// Removes the entry with `fingerprint`, returning its state.
    pub(super) fn remove(&mut self, fingerprint: NonZeroU64) -> Option<S> {
        let index = self.index_of(fingerprint)?;
        Some(self.remove_at(index).slot)
    }

    /// Keeps only the entries whose state satisfies `keep`, asking it once about each.
    ///
    /// One pass over the places, starting after an empty one (no run of entries crosses
    /// it): a refused entry leaves a hole in its run, and each later entry of that run is
    /// put again, which moves it back to the first empty place from its home. Runs without a
    /// refused entry are left as they are. `keep` must not panic: the run it was asked about
    /// would be left with a hole.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&S) -> bool) {
        if self.len == 0 {
            return;
        }
        let mask = self.places() - 1;
        let start = (0..=mask)
            .find(|&index| self.place(index).is_none())
            .expect("at most three quarters full");
        let mut holes_in_run = false;
        for offset in 1..=mask {
            let index = (start + offset) & mask;
            let Some(entry) = self.place(index) else {
                // Entries after this place have their homes after it.
                holes_in_run = false;
                continue;
            };
            if !keep(&entry.slot) {
                self.remove_only(index);
                holes_in_run = true;
            } else if holes_in_run {
                let entry = self.remove_only(index);
                self.put(entry);
            }
        }
    }

    /// Gives back the places the entries do not need.
    pub(super) fn shrink_to_fit(&mut self) {
        let mut places = 0;
        while !may_hold(places, self.len) {
            places = grown(places);
        }
        if places < self.places() {
            self.resize(places);
        }
    }

    fn places(&self) -> usize {
        self.lines.len() * PLACES_PER_LINE
    }

    fn place(&self, index: usize) -> &Option<Entry<S>> {
        &self.lines[index / PLACES_PER_LINE].0[index % PLACES_PER_LINE]
    }

    fn place_mut(&mut self, index: usize) -> &mut Option<Entry<S>> {
        &mut self.lines[index / PLACES_PER_LINE].0[index % PLACES_PER_LINE]
    }

    /// Where an entry with `fingerprint` is put first. The low bits: the store takes its
    /// shard from the high ones.
    fn home(&self, fingerprint: NonZeroU64) -> usize {
        fingerprint.get() as usize & (self.places() - 1)
    }

    /// The place of the entry with `fingerprint`.
    #[inline]
    pub(super) fn index_of(&self, fingerprint: NonZeroU64) -> Option<usize> {
        self.probe(fingerprint).map(|(index, _)| index)
    }

    /// The entry with `fingerprint` and its place: at its home, or after it before the first
    /// empty place.
    #[inline]
    fn probe(&self, fingerprint: NonZeroU64) -> Option<(usize, &Entry<S>)> {
        if self.len == 0 {
            return None;
        }
        let mask = self.places() - 1;
        let mut index = self.home(fingerprint);
        loop {
            match self.place(index) {
                None => return None,
                Some(entry) if entry.fingerprint == fingerprint => return Some((index, entry)),
                Some(_) => index = (index + 1) & mask,
            }
        }
    }

    /// Puts `entry` in the first empty place from its home (there is one); that place.
    fn put(&mut self, entry: Entry<S>) -> usize {
        let mask = self.places() - 1;
        let mut index = self.home(entry.fingerprint);
        while self.place(index).is_some() {
            index = (index + 1) & mask;
        }
        *self.place_mut(index) = Some(entry);
        self.len += 1;
        index
    }

    /// Takes the entry at `index` out, leaving its run broken until it is mended.
    fn remove_only(&mut self, index: usize) -> Entry<S> {
        let entry = self.place_mut(index).take();
        self.len -= 1;
        entry.expect("an occupied place")
    }

    /// Takes the entry at `index` out, then moves back each later entry of the run that would
    /// otherwise no longer be found from its home (Knuth's algorithm R: no tombstones).
    fn remove_at(&mut self, index: usize) -> Entry<S> {
        let removed = self.remove_only(index);
        let mask = self.places() - 1;
        let mut hole = index;
        let mut next = (hole + 1) & mask;
        while let Some(entry) = self.place(next) {
            // It may fill the hole if the hole lies between its home and it.
            let home = self.home(entry.fingerprint);
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                *self.place_mut(hole) = self.place_mut(next).take();
                hole = next;
            }
            next = (next + 1) & mask;
        }
        removed
    }

    /// Moves every entry into a table of `places` places (a power of two, or zero).
    fn resize(&mut self, places: usize) {
        let lines = (0..places / PLACES_PER_LINE)
            .map(|_| Line(std::array::from_fn(|_| None)))
            .collect();
        let old = std::mem::replace(&mut self.lines, lines);
        self.len = 0;
        for entry in Vec::from(old).into_iter().flat_map(|line| line.0).flatten() {
            self.put(entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn fingerprint(n: u64) -> NonZeroU64 {
        NonZeroU64::new(n).expect("not zero")
    }

    /// Fingerprints that share their low bits, so that they compete for the same places: one
    /// long run from place 7.
    fn crowded(count: u64) -> Vec<NonZeroU64> {
        (1..=count).map(|n| fingerprint(n << 40 | 7)).collect()
    }

    #[test]
    fn finds_what_was_inserted_and_nothing_else() {
        let mut table = ProbeTable::default();
        assert_eq!(table.find(fingerprint(1)), None);
        for n in 1..=1000u64 {
            table.insert_new(fingerprint(n * 0x9e37_79b9), n);
        }
        assert_eq!(table.len(), 1000);
        for n in 1..=1000u64 {
            assert_eq!(table.find(fingerprint(n * 0x9e37_79b9)), Some(&n));
        }
        assert_eq!(table.find(fingerprint(12345)), None);
        let index = table.index_of(fingerprint(0x9e37_79b9)).expect("inserted");
        *table.slot_mut(index) = 0;
        assert_eq!(table.find(fingerprint(0x9e37_79b9)), Some(&0));
    }

    #[test]
    fn removing_from_a_crowded_run_keeps_every_other_entry_reachable() {
        for removed in 0..12 {
            let mut table = ProbeTable::default();
            let fingerprints = crowded(12);
            for (n, &f) in fingerprints.iter().enumerate() {
                table.insert_new(f, n);
            }
            assert_eq!(table.remove(fingerprints[removed]), Some(removed));
            assert_eq!(table.remove(fingerprints[removed]), None);
            assert_eq!(table.len(), 11);
            for (n, &f) in fingerprints.iter().enumerate() {
                let expected = (n != removed).then_some(&n);
                assert_eq!(table.find(f), expected, "removed {removed}, looked for {n}");
            }
        }
    }

    /// Homes 6, 7, 6, 1, 7 in a table of eight places fill places 6, 7, 0, 1, 2: a run that
    /// wraps, in which some entries sit at their home and others after it. Entry `n` holds `n`.
    fn wrapping_run() -> (Vec<NonZeroU64>, ProbeTable<usize>) {
        let fingerprints: Vec<NonZeroU64> = [6u64, 7, 6, 1, 7]
            .iter()
            .enumerate()
            .map(|(n, home)| fingerprint((n as u64 + 1) << 32 | home))
            .collect();
        let mut table = ProbeTable::default();
        for (n, &f) in fingerprints.iter().enumerate() {
            table.insert_new(f, n);
        }
        assert_eq!(table.places(), 8);
        (fingerprints, table)
    }

    #[test]
    fn removing_from_a_run_across_the_end_keeps_entries_that_must_not_move() {
        for removed in 0..5 {
            let (fingerprints, mut table) = wrapping_run();
            assert_eq!(table.remove(fingerprints[removed]), Some(removed));
            for (n, &f) in fingerprints.iter().enumerate() {
                let expected = (n != removed).then_some(&n);
                assert_eq!(table.find(f), expected, "removed {removed}, looked for {n}");
            }
        }
    }

    #[test]
    fn retain_across_the_end_asks_once_about_each_entry_and_keeps_the_rest_reachable() {
        // Every set of the run's entries refused.
        for refused in 0..1u32 << 5 {
            let (fingerprints, mut table) = wrapping_run();
            let mut asked = [0u32; 5];
            table.retain(|&n| {
                asked[n] += 1;
                refused & 1 << n == 0
            });
            assert_eq!(asked, [1; 5], "refused {refused:#07b}");
            assert_eq!(table.len(), 5 - refused.count_ones() as usize);
            for (n, &f) in fingerprints.iter().enumerate() {
                let expected = (refused & 1 << n == 0).then_some(&n);
                assert_eq!(
                    table.find(f),
                    expected,
                    "refused {refused:#07b}, looked for {n}"
                );
            }
        }
    }

    #[test]
    fn retain_drops_exactly_the_entries_refused() {
        let mut table = ProbeTable::default();
        let fingerprints: Vec<NonZeroU64> = crowded(40)
            .into_iter()
            .chain((1..=400).map(|n| fingerprint(n * 0x2545_f491)))
            .collect();
        for (n, &f) in fingerprints.iter().enumerate() {
            table.insert_new(f, n);
        }
        table.retain(|&n| n % 3 != 0);
        for (n, &f) in fingerprints.iter().enumerate() {
            let expected = (n % 3 != 0).then_some(&n);
            assert_eq!(table.find(f), expected, "entry {n}");
        }
        assert_eq!(
            table.len(),
            fingerprints.len() - fingerprints.len().div_ceil(3)
        );
    }

    #[test]
    fn shrinking_keeps_the_entries_and_stays_at_most_three_quarters_full() {
        let mut table = ProbeTable::default();
        for n in 1..=1000u64 {
            table.insert_new(fingerprint(n), n);
        }
        table.retain(|&n| n <= 10);
        table.shrink_to_fit();
        assert_eq!(table.places(), 16);
        for n in 1..=10u64 {
            assert_eq!(table.find(fingerprint(n)), Some(&n));
        }
        table.retain(|_| false);
        table.shrink_to_fit();
        assert_eq!((table.len(), table.places()), (0, 0));
        assert_eq!(table.find(fingerprint(1)), None);
    }

    #[test]
    fn agrees_with_a_hash_map_over_random_operations() {
        // A small fingerprint space, so that inserts, removals and lookups hit often.
        let mut table = ProbeTable::default();
        let mut model = HashMap::new();
        let mut random = 0x853c_49e6_748f_ea9bu64;
        for step in 0..20_000u64 {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            // 300 fingerprints crowded onto 16 homes: long runs, which wrap in small tables.
            let id = random % 300 + 1;
            let f = fingerprint((id << 32) | (id % 16));
            match random >> 60 {
                0..=7 if !model.contains_key(&f) => {
                    table.insert_new(f, step);
                    model.insert(f, step);
                }
                8..=11 => assert_eq!(table.remove(f), model.remove(&f)),
                12 => {
                    table.retain(|&s| s % 7 != 0);
                    model.retain(|_, s| *s % 7 != 0);
                    table.shrink_to_fit();
                }
                _ => assert_eq!(table.find(f), model.get(&f)),
            }
            assert_eq!(table.len(), model.len());
        }
        for (f, s) in &model {
            assert_eq!(table.find(*f), Some(s));
        }
    }
}
