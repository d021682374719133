//! Every key of the local-first limits a server decides, and what to send.

use super::limits::{Limit, Limits};
use super::shard::{Shard, MOST_PER_SHARD};
use super::view::{Charge, Payload, Totals};
use crate::algorithm::Decision;
use crate::clock::saturating_nanos;
use crate::store::LimitCheck;
use hashbrown::DefaultHashBuilder;
use parking_lot::Mutex;
use std::hash::BuildHasher;
use std::sync::Arc;

/// Shards of the table: requests for different keys rarely wait on one another.
const SHARDS: usize = 64;

/// Every key's counts, by a keyed hash of its domain and state key, in shards of at most a
/// share of the key ceiling. `K` is a key's own part of where its fleet totals live (its
/// limit has the rest).
pub(crate) struct SyncTable<K> {
    hasher: DefaultHashBuilder,
    shards: Box<[Padded<K>]>,
    limits: Limits,
    /// The most keys a shard keeps.
    capacity: usize,
}

// A cache line each, so that neighbouring shards' locks do not share one.
#[repr(align(64))]
struct Padded<K>(Mutex<Shard<K>>);

/// What to send for one key.
pub(crate) struct Outgoing<K> {
    pub(super) id: u64,
    /// The key's part of where its fleet totals live.
    pub(crate) key: K,
    /// Its limit: the rest of where they live, and how it is decided.
    pub(crate) limit: Arc<Limit>,
    /// What to send.
    pub(crate) payload: Payload,
}

/// What one admission charged, to give back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admission {
    id: u64,
    charge: Charge,
}

impl<K: Clone> SyncTable<K> {
    /// A table keeping about `max_keys` keys at most (the ceiling is spread over the shards).
    pub(crate) fn new(max_keys: usize) -> Self {
        SyncTable {
            hasher: DefaultHashBuilder::default(),
            shards: (0..SHARDS)
                .map(|_| Padded(Mutex::new(Shard::new())))
                .collect(),
            limits: Limits::new(),
            capacity: (max_keys / SHARDS).clamp(1, MOST_PER_SHARD),
        }
    }

    fn shard(&self, id: u64) -> &Mutex<Shard<K>> {
        // The high bits: the index inside takes the low ones.
        &self.shards[(id >> 58) as usize % SHARDS].0
    }

    /// Decides `check` (which has a `sync_every`) at fleet time `now`, `servers` last seen;
    /// `key` makes the key's part of where its fleet totals live, asked for a key seen first.
    pub(crate) fn acquire(
        &self,
        check: &LimitCheck<'_>,
        now: u64,
        servers: u64,
        key: impl FnOnce() -> K,
    ) -> (Decision, Option<Admission>) {
        let id = self.hasher.hash_one((check.domain, check.key));
        let every = check.sync_every.map_or(0, saturating_nanos);
        let mut shard = self.shard(id).lock();
        let place = match shard.find(id) {
            Some(place) if shard.get(place).limit().decides(check, every) => place,
            Some(place) => shard.relimit(place, self.limits.of(check, every)),
            None => {
                let limit = self.limits.of(check, every);
                shard.insert(id, key(), limit, now, self.capacity)
            }
        };
        let (decision, charge) = shard.get(place).acquire(check, now, servers);
        shard.touch(place);
        (decision, charge.map(|charge| Admission { id, charge }))
    }

    /// Gives back what `admission` charged.
    pub(crate) fn give_back(&self, admission: Admission) {
        let mut shard = self.shard(admission.id).lock();
        if let Some(place) = shard.find(admission.id) {
            shard.get(place).give_back(admission.charge);
            shard.touch(place);
        }
    }

    /// The number of keys kept.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.0.lock().len()).sum()
    }

    /// Whether no key is kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.shards.iter().all(|shard| shard.0.lock().len() == 0)
    }

    /// What to send at fleet time `now`, `most` keys at most: the keys asked for since their
    /// last sync whose limit's interval has passed since (with `force`, all of them), and
    /// those whose send failed. Forgets the idle keys among a share of the others.
    pub(crate) fn due(&self, now: u64, force: bool, most: usize) -> Vec<Outgoing<K>> {
        let mut outgoing = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.0.lock();
            shard.sweep(now);
            if outgoing.len() < most {
                shard.take_due(now, force, most, &mut outgoing);
            }
        }
        outgoing
    }

    /// Takes the fleet's `totals` for what `outgoing` sent, or, when the send failed
    /// (`None`), keeps its counts to send again. Returns by how many requests the fleet is
    /// over the limit at fleet time `now`.
    pub(crate) fn settle(
        &self,
        outgoing: &Outgoing<K>,
        totals: Option<Totals>,
        now: u64,
    ) -> Option<u64> {
        self.shard(outgoing.id)
            .lock()
            .settle(outgoing.id, &outgoing.payload, totals, now)
    }

    /// The bytes the shards' arrays and indexes take (an estimate of their allocations).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.0.lock().heap_bytes())
            .sum()
    }
}
