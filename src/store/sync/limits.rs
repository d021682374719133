//! The local-first limits a table keeps keys of: what every key of one limit shares, kept
//! once for all of them.

use super::view::horizon;
use crate::algorithm::{Algorithm, Quota};
use crate::store::LimitCheck;
use hashbrown::{DefaultHashBuilder, HashTable};
use parking_lot::RwLock;
use std::hash::BuildHasher;
use std::sync::Arc;

/// Fleet totals older than this many intervals are not used: the server keeps to its share.
const FRESH_INTERVALS: u64 = 3;

/// One local-first limit, as its checks describe it: its keys point to it.
#[derive(Debug)]
pub(crate) struct Limit {
    pub(crate) domain: Box<str>,
    /// The limit's label, as logs and metrics name it.
    pub(crate) label: Box<str>,
    pub(crate) algorithm: Algorithm,
    pub(crate) quota: Quota,
    /// `sync_every` (ns).
    pub(crate) every: u64,
}

impl Limit {
    /// Whether `check`, synced every `every` ns, is a check of this limit.
    pub(super) fn is_for(&self, check: &LimitCheck<'_>, every: u64) -> bool {
        self.decides(check, every) && *self.label == *check.limit && *self.domain == *check.domain
    }

    /// Whether this limit decides `check`, synced every `every` ns, as `check` says: the
    /// test on each request of a key kept, which leaves out the strings. A key's domain is in
    /// its id; a label changed alone (a reload) names the keys seen since.
    pub(super) fn decides(&self, check: &LimitCheck<'_>, every: u64) -> bool {
        self.algorithm == check.algorithm && self.every == every && self.quota == *check.quota
    }

    /// How long fleet totals stay fresh enough to decide on (ns).
    pub(super) fn fresh_for(&self) -> u64 {
        self.every.saturating_mul(FRESH_INTERVALS)
    }

    /// How long the fleet's totals of a key are worth keeping after its last sync (ns): as
    /// long as its state matters, and one interval.
    pub(crate) fn keep(&self) -> u64 {
        horizon(self.algorithm, &self.quota).saturating_add(self.every)
    }
}

/// Every limit whose keys a table keeps, found by what describes it.
pub(super) struct Limits {
    hasher: DefaultHashBuilder,
    records: RwLock<Records>,
}

struct Records {
    limits: HashTable<Arc<Limit>>,
    /// How many limits were left at the last pruning.
    pruned_at: usize,
}

/// Limits are pruned once there are this many, at least.
const PRUNE_FROM: usize = 32;

impl Limits {
    pub(super) fn new() -> Self {
        Limits {
            hasher: DefaultHashBuilder::default(),
            records: RwLock::new(Records {
                limits: HashTable::new(),
                pruned_at: 0,
            }),
        }
    }

    /// The limit of `check`, synced every `every` ns: the one kept, or a new one.
    pub(super) fn of(&self, check: &LimitCheck<'_>, every: u64) -> Arc<Limit> {
        let hash = self.hasher.hash_one((
            check.domain,
            check.limit,
            check.algorithm,
            check.quota,
            every,
        ));
        let is_for = |limit: &Arc<Limit>| limit.is_for(check, every);
        if let Some(limit) = self.records.read().limits.find(hash, is_for) {
            return Arc::clone(limit);
        }
        let mut records = self.records.write();
        let Records { limits, pruned_at } = &mut *records;
        let rehash = |limit: &Arc<Limit>| {
            let Limit {
                domain,
                label,
                algorithm,
                quota,
                every,
            } = &**limit;
            self.hasher
                .hash_one((&**domain, &**label, *algorithm, quota, *every))
        };
        // Limits no key points to any more (the rules changed): pruned as they pile up, so
        // that each is looked at about once.
        if limits.len() >= PRUNE_FROM.max(2 * *pruned_at) {
            limits.retain(|limit| Arc::strong_count(limit) > 1);
            *pruned_at = limits.len();
        }
        let entry = limits.entry(hash, is_for, rehash).or_insert_with(|| {
            Arc::new(Limit {
                domain: check.domain.into(),
                label: check.limit.into(),
                algorithm: check.algorithm,
                quota: *check.quota,
                every,
            })
        });
        Arc::clone(entry.get())
    }
}
