//! The requests in flight of every key of the concurrency limits, in this process.

use super::AdaptiveLimit;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

/// Shards of the table: requests of different keys rarely wait for one another's lock.
const SHARDS: usize = 16;

/// The requests in flight by key, counted. A key is forgotten when its last request ends,
/// so the table holds only keys with requests in flight.
#[derive(Debug)]
pub(crate) struct InFlight {
    shards: Box<[Mutex<HashMap<u64, u32>>]>,
    /// Keys are fingerprinted: a state key is a limit's id and a request's values.
    hasher: RandomState,
    /// The fingerprint of the server's own key, the load shedder's.
    server: u64,
    /// The server's adaptive limit, when the load shedder's is (kept across reloads).
    adaptive: AdaptiveLimit,
}

impl Default for InFlight {
    fn default() -> Self {
        let hasher = RandomState::new();
        InFlight {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            // No state key is empty: each starts with its limit's id.
            server: hasher.hash_one(b""),
            hasher,
            adaptive: AdaptiveLimit::default(),
        }
    }
}

impl InFlight {
    /// The fingerprint the table knows `key` by.
    pub(crate) fn fingerprint(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The fingerprint of the server's key: every request the load shedder admits.
    pub(crate) fn server(&self) -> u64 {
        self.server
    }

    /// The server's adaptive limit.
    pub(crate) fn adaptive(&self) -> &AdaptiveLimit {
        &self.adaptive
    }

    fn shard(&self, fingerprint: u64) -> &Mutex<HashMap<u64, u32>> {
        // The high bits: the low ones also pick the key's bucket within the shard.
        &self.shards[(fingerprint >> 60) as usize % SHARDS]
    }

    /// Takes a slot of the key `fingerprint` if fewer than `max` are taken, or whatever the
    /// count when `always` (a shadow-mode limit). The requests in flight before, and whether
    /// the slot was taken.
    pub(crate) fn take(&self, fingerprint: u64, max: u32, always: bool) -> (u32, bool) {
        let mut shard = self.shard(fingerprint).lock();
        let count = shard.entry(fingerprint).or_insert(0);
        let before = *count;
        let taken = always || before < max;
        if taken {
            *count = before.saturating_add(1);
        } else if before == 0 {
            shard.remove(&fingerprint);
        }
        (before, taken)
    }

    /// Gives back a slot of the key `fingerprint`.
    pub(crate) fn give_back(&self, fingerprint: u64) {
        let mut shard = self.shard(fingerprint).lock();
        if let Some(count) = shard.get_mut(&fingerprint) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                shard.remove(&fingerprint);
            }
        }
    }

    /// The requests of `key` in flight.
    #[cfg(test)]
    pub(crate) fn in_flight(&self, key: &[u8]) -> u32 {
        let fingerprint = self.fingerprint(key);
        let shard = self.shard(fingerprint).lock();
        shard.get(&fingerprint).copied().unwrap_or(0)
    }

    /// The requests in flight, over every key.
    #[cfg(test)]
    pub(crate) fn total(&self) -> u64 {
        self.shards
            .iter()
            .map(|shard| shard.lock().values().map(|&n| u64::from(n)).sum::<u64>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::InFlight;

    #[test]
    fn a_key_admits_its_maximum_and_forgets_itself_when_its_last_request_ends() {
        let table = InFlight::default();
        let key = table.fingerprint(b"user=alice");
        assert_eq!(table.take(key, 2, false), (0, true));
        assert_eq!(table.take(key, 2, false), (1, true));
        assert_eq!(table.take(key, 2, false), (2, false));
        table.give_back(key);
        assert_eq!(table.take(key, 2, false), (1, true));
        table.give_back(key);
        table.give_back(key);
        assert_eq!(table.total(), 0);
        assert!(table.shards.iter().all(|shard| shard.lock().is_empty()));
    }

    #[test]
    fn a_shadow_slot_is_taken_past_the_maximum() {
        let table = InFlight::default();
        let key = table.fingerprint(b"k");
        assert_eq!(table.take(key, 1, true), (0, true));
        assert_eq!(table.take(key, 1, true), (1, true));
        assert_eq!(table.in_flight(b"k"), 2);
    }
}
