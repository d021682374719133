use super::{Acquisition, Decisions, LimitCheck, Store, StoreError};
use crate::algorithm::State;
use crate::clock::{Clock, SystemClock};
use hashbrown::{DefaultHashBuilder, HashTable};
use smallvec::SmallVec;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Limit state in process memory: the default store.
///
/// Keys are spread over shards, each a hash table behind its own mutex. A request's limits
/// are decided with all their shards locked at once (in shard order, so two requests never
/// wait on each other in a cycle), which makes several limits on one request all or nothing
/// without any global lock. Locks are held for a few hash lookups and never across `.await`.
///
/// DashMap would give the sharding but not a way to hold two keys' locks at once, which is
/// what all-or-nothing needs.
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, Quota};
/// use tollgate::clock::ManualClock;
/// use tollgate::store::{Acquisition, LimitCheck, MemoryStore, Store};
///
/// let store = MemoryStore::with_clock(ManualClock::new());
/// let quota = Quota::new(1, Duration::from_secs(1));
/// let check = LimitCheck { key: b"user:42", algorithm: Algorithm::FixedWindow, quota: &quota, shadow: false };
/// let Acquisition::Ready(Ok(first)) = store.acquire(&[check], 1) else { unreachable!() };
/// let Acquisition::Ready(Ok(second)) = store.acquire(&[check], 1) else { unreachable!() };
/// assert!(first[0].allowed);
/// assert!(!second[0].allowed);
/// ```
pub struct MemoryStore<C = SystemClock> {
    shards: Box<[Shard]>,
    hasher: DefaultHashBuilder,
    clock: C,
}

// Padded to a cache line so that neighbouring shard locks do not share one.
#[repr(align(64))]
struct Shard(Mutex<HashTable<Entry>>);

struct Entry {
    key: Box<[u8]>,
    state: State,
}

impl MemoryStore {
    /// A store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Clock> MemoryStore<C> {
    /// A store that reads the time from `clock`.
    pub fn with_clock(clock: C) -> Self {
        let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
        let shard_count = (parallelism * 4).next_power_of_two();
        MemoryStore {
            shards: (0..shard_count)
                .map(|_| Shard(Mutex::new(HashTable::new())))
                .collect(),
            hasher: DefaultHashBuilder::default(),
            clock,
        }
    }

    /// The number of keys tracked.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }

    /// Whether no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn shard_of(&self, hash: u64) -> usize {
        // The table uses the low bits; take the shard from the high ones.
        (hash >> 32) as usize & (self.shards.len() - 1)
    }

    fn decide(&self, checks: &[LimitCheck<'_>], cost: u64) -> Decisions {
        let now = self.clock.now();
        let hashes: SmallVec<[u64; 4]> =
            checks.iter().map(|c| self.hasher.hash_one(c.key)).collect();
        let mut shard_ids: SmallVec<[usize; 4]> =
            hashes.iter().map(|&h| self.shard_of(h)).collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        let mut guards: SmallVec<[MutexGuard<'_, HashTable<Entry>>; 4]> =
            shard_ids.iter().map(|&id| lock(&self.shards[id])).collect();
        let guard_of = |hash: u64| {
            shard_ids
                .binary_search(&self.shard_of(hash))
                .unwrap_or_default()
        };

        let mut next_states: SmallVec<[State; 4]> = SmallVec::new();
        let mut decisions = Decisions::new();
        for (check, &hash) in checks.iter().zip(&hashes) {
            let table = &guards[guard_of(hash)];
            let state = table.find(hash, |e| *e.key == *check.key).map(|e| &e.state);
            let (next, decision) = check.algorithm.acquire(state, now, check.quota, cost);
            next_states.push(next);
            decisions.push(decision);
        }

        let admitted = checks
            .iter()
            .zip(&decisions)
            .all(|(c, d)| c.shadow || d.allowed);
        if admitted {
            for ((check, &hash), (next, decision)) in checks
                .iter()
                .zip(&hashes)
                .zip(next_states.into_iter().zip(&decisions))
            {
                if !decision.allowed {
                    continue;
                }
                let table = &mut guards[guard_of(hash)];
                match table.find_mut(hash, |e| *e.key == *check.key) {
                    Some(entry) => entry.state = next,
                    None => {
                        let entry = Entry {
                            key: check.key.into(),
                            state: next,
                        };
                        table.insert_unique(hash, entry, |e| self.hasher.hash_one(&e.key));
                    }
                }
            }
        }
        decisions
    }
}

impl<C: Clock> Store for MemoryStore<C> {
    type Pending = std::future::Ready<Result<Decisions, StoreError>>;

    #[inline]
    fn acquire(&self, checks: &[LimitCheck<'_>], cost: u64) -> Acquisition<Self::Pending> {
        Acquisition::Ready(Ok(self.decide(checks, cost)))
    }
}

impl<C> fmt::Debug for MemoryStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

// The state is plain data that is never left half-written, so a panic elsewhere while a
// lock was held does not make it unusable.
fn lock(shard: &Shard) -> MutexGuard<'_, HashTable<Entry>> {
    shard.0.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Algorithm, Quota};
    use crate::clock::ManualClock;
    use std::time::Duration;

    fn decide(store: &MemoryStore<ManualClock>, checks: &[LimitCheck<'_>]) -> Decisions {
        match store.acquire(checks, 1) {
            Acquisition::Ready(result) => result.expect("memory store never fails"),
            Acquisition::Pending(_) => panic!("memory store answers at once"),
        }
    }

    #[test]
    fn a_request_denied_by_one_limit_consumes_none_of_the_others() {
        let store = MemoryStore::with_clock(ManualClock::new());
        let wide = Quota::new(10, Duration::from_secs(60));
        let narrow = Quota::new(1, Duration::from_secs(60));
        let both = [
            LimitCheck {
                key: b"wide",
                algorithm: Algorithm::FixedWindow,
                quota: &wide,
                shadow: false,
            },
            LimitCheck {
                key: b"narrow",
                algorithm: Algorithm::TokenBucket,
                quota: &narrow,
                shadow: false,
            },
        ];
        assert!(decide(&store, &both).iter().all(|d| d.allowed));
        for _ in 0..5 {
            let decisions = decide(&store, &both);
            assert!(decisions[0].allowed && !decisions[1].allowed);
        }
        let wide_only = decide(&store, &both[..1]);
        assert_eq!(
            wide_only[0].remaining, 8,
            "denied requests must not charge the wide limit"
        );
    }

    #[test]
    fn shadow_limits_report_but_never_deny() {
        let store = MemoryStore::with_clock(ManualClock::new());
        let quota = Quota::new(1, Duration::from_secs(60));
        let shadow = [LimitCheck {
            key: b"k",
            algorithm: Algorithm::FixedWindow,
            quota: &quota,
            shadow: true,
        }];
        assert!(decide(&store, &shadow)[0].allowed);
        assert!(!decide(&store, &shadow)[0].allowed);
    }

    #[test]
    fn many_threads_on_one_key_admit_exactly_the_limit() {
        let store = MemoryStore::with_clock(ManualClock::new());
        let quota = Quota::new(1000, Duration::from_secs(60));
        let admitted = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    let check = [LimitCheck {
                        key: b"hot",
                        algorithm: Algorithm::SlidingWindowCounter,
                        quota: &quota,
                        shadow: false,
                    }];
                    for _ in 0..500 {
                        if decide(&store, &check)[0].allowed {
                            admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(admitted.into_inner(), 1000);
        assert_eq!(store.len(), 1);
    }
}
