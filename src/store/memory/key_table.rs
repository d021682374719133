//! Keys' states by fingerprint, in a `hashbrown::HashTable` whose hash is the fingerprint.

use hashbrown::HashTable;

/// One tracked key: its fingerprint, which is also its hash, and its state.
struct Entry<S> {
    fingerprint: u64,
    slot: S,
}

/// States keyed by their fingerprints, each present at most once. A fingerprint is already a
/// uniform hash under the store's secret seed, so the table takes it as the hash as it is.
pub(super) struct KeyTable<S>(HashTable<Entry<S>>);

/// The hash of an entry: its fingerprint.
fn hash<S>(entry: &Entry<S>) -> u64 {
    entry.fingerprint
}

impl<S> Default for KeyTable<S> {
    fn default() -> Self {
        KeyTable(HashTable::new())
    }
}

impl<S> KeyTable<S> {
    /// The number of entries.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// The state of the entry with `fingerprint`.
    pub(super) fn find(&self, fingerprint: u64) -> Option<&S> {
        let entry = self.0.find(fingerprint, |e| e.fingerprint == fingerprint)?;
        Some(&entry.slot)
    }

    /// The place of the entry with `fingerprint`, for [`KeyTable::slot_mut`].
    pub(super) fn index_of(&self, fingerprint: u64) -> Option<usize> {
        self.0
            .find_bucket_index(fingerprint, |e| e.fingerprint == fingerprint)
    }

    /// The state at `index`, which [`KeyTable::index_of`] or [`KeyTable::insert_new`] gave
    /// since the table last changed, to change.
    pub(super) fn slot_mut(&mut self, index: usize) -> &mut S {
        let entry = self.0.get_bucket_mut(index);
        &mut entry.expect("an index of a present entry").slot
    }

    /// Adds an entry for `fingerprint`, which the table must not hold; its place.
    pub(super) fn insert_new(&mut self, fingerprint: u64, slot: S) -> usize {
        debug_assert!(self.index_of(fingerprint).is_none(), "inserted twice");
        let entry = Entry { fingerprint, slot };
        self.0
            .insert_unique(fingerprint, entry, hash)
            .bucket_index()
    }

    /// Removes the entry with `fingerprint`, returning its state.
    pub(super) fn remove(&mut self, fingerprint: u64) -> Option<S> {
        let entry = self
            .0
            .find_entry(fingerprint, |e| e.fingerprint == fingerprint)
            .ok()?;
        Some(entry.remove().0.slot)
    }

    /// Keeps only the entries whose state satisfies `keep`.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&S) -> bool) {
        self.0.retain(|entry| keep(&entry.slot));
    }

    /// Gives back the places the entries do not need.
    pub(super) fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit(hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Fingerprints that share their low and high bits, so that they compete for the same
    /// places.
    fn crowded(count: u64) -> Vec<u64> {
        (1..=count).map(|n| n << 40 | 7).collect()
    }

    #[test]
    fn finds_what_was_inserted_and_nothing_else() {
        let mut table = KeyTable::default();
        assert_eq!(table.find(1), None);
        for n in 1..=1000u64 {
            table.insert_new(n * 0x9e37_79b9, n);
        }
        assert_eq!(table.len(), 1000);
        for n in 1..=1000u64 {
            assert_eq!(table.find(n * 0x9e37_79b9), Some(&n));
        }
        assert_eq!(table.find(12345), None);
        let index = table.index_of(0x9e37_79b9).expect("inserted");
        *table.slot_mut(index) = 0;
        assert_eq!(table.find(0x9e37_79b9), Some(&0));
    }

    #[test]
    fn removing_from_a_crowded_run_keeps_every_other_entry_reachable() {
        for removed in 0..12 {
            let mut table = KeyTable::default();
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

    #[test]
    fn retain_drops_exactly_the_entries_refused() {
        let mut table = KeyTable::default();
        let fingerprints: Vec<u64> = crowded(40)
            .into_iter()
            .chain((1..=400).map(|n| n * 0x2545_f491))
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
    fn shrinking_keeps_the_entries_and_gives_back_the_rest() {
        let mut table = KeyTable::default();
        for n in 1..=1000u64 {
            table.insert_new(n, n);
        }
        table.retain(|&n| n <= 10);
        table.shrink_to_fit();
        assert!(
            table.0.num_buckets() <= 16,
            "{} places",
            table.0.num_buckets()
        );
        for n in 1..=10u64 {
            assert_eq!(table.find(n), Some(&n));
        }
        table.retain(|_| false);
        table.shrink_to_fit();
        assert_eq!((table.len(), table.0.allocation_size()), (0, 0));
        assert_eq!(table.find(1), None);
    }

    #[test]
    fn agrees_with_a_hash_map_over_random_operations() {
        // A small fingerprint space, so that inserts, removals and lookups hit often.
        let mut table = KeyTable::default();
        let mut model = HashMap::new();
        let mut random = 0x853c_49e6_748f_ea9bu64;
        for step in 0..20_000u64 {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            // 300 fingerprints crowded onto 16 homes.
            let id = random % 300 + 1;
            let f = (id << 32) | (id % 16);
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
