//! The views of every key of the local-first limits a server decided, and what to send.

use super::view::{horizon, Charge, Fleet, Payload, Totals, View};
use crate::algorithm::{Algorithm, Decision, Quota};
use crate::clock::saturating_nanos;
use crate::store::LimitCheck;
use hashbrown::{DefaultHashBuilder, HashMap};
use parking_lot::Mutex;
use std::hash::BuildHasher;

/// Shards of the table: requests for different keys rarely wait on one another.
const SHARDS: usize = 64;

/// Fleet totals older than this many intervals are not used: the server keeps to its share.
const FRESH_INTERVALS: u64 = 3;

/// Every key's view, by a keyed hash of its domain and state key.
pub(crate) struct SyncTable<A> {
    hasher: DefaultHashBuilder,
    shards: Box<[Shard<A>]>,
}

type Shard<A> = Mutex<HashMap<u64, Entry<A>>>;

struct Entry<A> {
    view: View,
    /// Where the key's fleet totals live.
    address: A,
    algorithm: Algorithm,
    quota: Quota,
    /// The limit's `sync_every` (ns).
    every: u64,
}

/// What to send for one key.
pub(crate) struct Outgoing<A> {
    id: u64,
    /// Where the key's fleet totals live.
    pub(crate) address: A,
    /// What to send.
    pub(crate) payload: Payload,
}

/// What one admission charged, to give back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admission {
    id: u64,
    charge: Charge,
}

impl<A: Clone> SyncTable<A> {
    pub(crate) fn new() -> Self {
        SyncTable {
            hasher: DefaultHashBuilder::default(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    fn shard(&self, id: u64) -> &Shard<A> {
        // The high bits: the map inside takes the low ones.
        &self.shards[(id >> 58) as usize % SHARDS]
    }

    /// Decides `check` (which has a `sync_every`) at fleet time `now`, `servers` last seen;
    /// `address` names where the key's fleet totals live, asked for a key seen first.
    pub(crate) fn acquire(
        &self,
        check: &LimitCheck<'_>,
        now: u64,
        servers: u64,
        address: impl FnOnce() -> A,
    ) -> (Decision, Option<Admission>) {
        let id = self.hasher.hash_one((check.domain, check.key));
        let every = check.sync_every.map_or(0, saturating_nanos);
        let mut shard = self.shard(id).lock();
        let entry = shard.entry(id).or_insert_with(|| Entry {
            view: View::new(check.algorithm),
            address: address(),
            algorithm: check.algorithm,
            quota: *check.quota,
            every,
        });
        if entry.algorithm != check.algorithm {
            // The rules changed the algorithm: what was counted no longer applies.
            entry.view = View::new(check.algorithm);
            entry.algorithm = check.algorithm;
        }
        entry.quota = *check.quota;
        entry.every = every;
        let fleet = Fleet {
            servers,
            fresh_for: every.saturating_mul(FRESH_INTERVALS),
        };
        let (decision, charge) = entry.view.acquire(check, now, fleet);
        if check.check_only && decision.allowed {
            let weightless = LimitCheck { cost: 0, ..*check };
            let (as_it_stands, _) = entry.view.acquire(&weightless, now, fleet);
            return (decision.checked(as_it_stands), None);
        }
        (decision, charge.map(|charge| Admission { id, charge }))
    }

    /// Gives back what `admission` charged.
    pub(crate) fn give_back(&self, admission: Admission) {
        if let Some(entry) = self.shard(admission.id).lock().get_mut(&admission.id) {
            entry.view.give_back(admission.charge);
        }
    }

    /// Whether no key is kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.shards.iter().all(|shard| shard.lock().is_empty())
    }

    /// What to send at fleet time `now` (every key due; with `force`, every key with
    /// something new), forgetting the keys idle for longer than their [`horizon`] and a few
    /// intervals.
    pub(crate) fn due(&self, now: u64, force: bool) -> Vec<Outgoing<A>> {
        let mut outgoing = Vec::new();
        for shard in self.shards.iter() {
            shard.lock().retain(|&id, entry| {
                let idle = horizon(entry.algorithm, &entry.quota)
                    .saturating_add(entry.every.saturating_mul(FRESH_INTERVALS));
                if entry.view.is_idle(now, idle) {
                    return false;
                }
                if let Some(payload) = entry.view.send(now, entry.every, force) {
                    outgoing.push(Outgoing {
                        id,
                        address: entry.address.clone(),
                        payload,
                    });
                }
                true
            });
        }
        outgoing
    }

    /// Takes the fleet's `totals` for what `outgoing` sent, or, when the send failed
    /// (`None`), keeps its counts to send again. Returns by how many requests the fleet is
    /// over the limit at fleet time `now`, with the limit's quota.
    pub(crate) fn settle(
        &self,
        outgoing: &Outgoing<A>,
        totals: Option<Totals>,
        now: u64,
    ) -> Option<u64> {
        let mut shard = self.shard(outgoing.id).lock();
        let entry = shard.get_mut(&outgoing.id)?;
        match totals {
            Some(totals) => Some(entry.view.settle(
                &outgoing.payload,
                totals,
                entry.algorithm,
                &entry.quota,
                now,
            )),
            None => {
                entry.view.unsend();
                None
            }
        }
    }
}
