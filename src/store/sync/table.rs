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
        key: impl Fn() -> K,
    ) -> (Decision, Option<Admission>) {
        let id = self.id(check.domain, check.key);
        let every = check.sync_every.map_or(0, saturating_nanos);
        if !check.carried_from.is_empty() {
            self.carry(check, id, (now, every), &key);
        }
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

    /// The id of the key `key` of `domain`.
    fn id(&self, domain: &str, key: &[u8]) -> u64 {
        self.hasher.hash_one((domain, key))
    }

    /// Gives the key of `check` (with `id`), which has no counts yet, the counts of the first
    /// key it is carried from that this server keeps (see [`LimitCheck::carried_from`]),
    /// which is forgotten; `key` makes the new key's part of where its fleet totals live.
    /// At fleet time `now`, the limit synced `every` ns.
    fn carry(
        &self,
        check: &LimitCheck<'_>,
        id: u64,
        (now, every): (u64, u64),
        key: impl Fn() -> K,
    ) {
        let shard_of = |id: u64| (id >> 58) as usize % SHARDS;
        for from in check.carried_from {
            let old = self.id(check.domain, &from.key_of(check.key));
            let (new_at, old_at) = (shard_of(id), shard_of(old));
            // Both locked, in shard order.
            let mut first = self.shards[new_at.min(old_at)].0.lock();
            let mut second = (new_at != old_at).then(|| self.shards[new_at.max(old_at)].0.lock());
            let (new_shard, old_shard) = match &mut second {
                None => (&mut *first, None),
                Some(second) if new_at < old_at => (&mut *first, Some(&mut **second)),
                Some(second) => (&mut **second, Some(&mut *first)),
            };
            if new_shard.find(id).is_some() {
                return;
            }
            let old_shard = old_shard.unwrap_or(&mut *new_shard);
            let Some(place) = old_shard.find(old) else {
                continue;
            };
            let carried = old_shard.get(place).carried(now);
            old_shard.remove(place);
            let limit = self.limits.of(check, every);
            let place = new_shard.insert(id, key(), limit, now, self.capacity);
            new_shard.get(place).seed(&carried, now);
            return;
        }
    }

    /// Forgets the keys of `check` and those it is carried from; how many were kept.
    pub(crate) fn forget(&self, check: &LimitCheck<'_>) -> u64 {
        let carried = check
            .carried_from
            .iter()
            .map(|from| self.id(check.domain, &from.key_of(check.key)));
        let mut forgotten = 0;
        for id in std::iter::once(self.id(check.domain, check.key)).chain(carried) {
            let mut shard = self.shard(id).lock();
            if let Some(place) = shard.find(id) {
                shard.remove(place);
                forgotten += 1;
            }
        }
        forgotten
    }

    /// Gives back what `admission` charged.
    pub(crate) fn give_back(&self, admission: Admission) {
        let mut shard = self.shard(admission.id).lock();
        if let Some(place) = shard.find(admission.id) {
            shard.get(place).give_back(admission.charge);
            shard.touch(place);
        }
    }

    /// Settles a request `check` admitted by `extra` at fleet time `now`, `servers` last
    /// seen: charges it more or gives some back (see [`Store::settle`]). A key forgotten
    /// or limited otherwise since is not settled: what it owed is lost, on the side of admitting, as its
    /// unsent counts are.
    ///
    /// [`Store::settle`]: crate::store::Store::settle
    pub(crate) fn adjust(&self, check: &LimitCheck<'_>, extra: i64, now: u64, servers: u64) {
        let id = self.id(check.domain, check.key);
        let every = check.sync_every.map_or(0, saturating_nanos);
        let mut shard = self.shard(id).lock();
        let found = shard.find(id);
        if let Some(place) = found.filter(|&place| shard.get(place).limit().decides(check, every)) {
            shard.get(place).adjust(extra, now, servers);
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
