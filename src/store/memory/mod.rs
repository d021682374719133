//! The in-memory store: keys sharded over read-write locks, each shard holding two
//! generations of hash tables.

mod carry;
mod fingerprint;
mod generations;
mod probe_table;
mod reset;
mod settle;
mod sketches;
mod tables;

use self::fingerprint::Fingerprinter;
use self::generations::{decide_shared, Charge, Generations};
use self::sketches::Sketches;
use self::tables::{PackedSlot, Timestamp};
use super::{sealed, Acquisition, Decisions, LimitCheck, Resetting, Settling, Store, StoreError};
use crate::algorithm::{Algorithm, Decision};
use crate::clock::{Clock, Nanos, SystemClock};
use parking_lot::{RwLock, RwLockWriteGuard};
use smallvec::SmallVec;
use std::fmt;
use std::num::NonZeroU64;
use std::slice;
use std::sync::Arc;

/// Limit state in process memory: the default store.
///
/// Keys are spread over shards, each a hash table behind its own read-write lock. A request's
/// limits are decided with all their shards locked at once (in shard order, so two requests
/// never wait on each other in a cycle), which makes several limits on one request all or
/// nothing without any global lock. A request with one GCRA or leaky-bucket limit on a key
/// already tracked needs only the shared lock: its state is one timestamp, swapped in with a
/// compare-and-swap, so a denial writes nothing and threads on one hot key do not take
/// turns. Locks are held for a few hash lookups and never across `.await`. DashMap would give
/// the sharding but not a way to hold two keys' locks at once.
///
/// # What a key costs
///
/// A key is not kept: its 64-bit fingerprint is (a hash of the key and the algorithm under a
/// seed drawn at random for each store: multiply-shift, two multiplications per 8 bytes, for
/// keys of up to 127 bytes, and SipHash-1-3 for longer ones), and the state is kept as small
/// as the algorithm allows, with no allocation of its own:
///
/// - GCRA, the leaky bucket, and the token bucket when its emission interval is a whole
///   number of nanoseconds and an empty bucket refills within 146 years (decided as GCRA,
///   with the same answers): one timestamp, which is also when the key goes idle, so an entry
///   is 16 bytes: about 34 bytes per key at 1,000,000 keys, with the hash table's slack
///   (governor's keyed limiter needs 69 for an `IpAddr` key; see `BENCHMARKS.md`). A token
///   bucket's key checked under a quota on the other side of that line starts afresh (the
///   limiter's keys name their quota, so only a direct user of the store can do that);
/// - the fixed window and the other token buckets: two words and the idle time, 32 bytes (67
///   per key);
/// - the sliding windows: the whole 40-byte [`State`](crate::algorithm::State) and the idle
///   time, 56 bytes in a 64-byte place (134 per key, plus the log's entries).
///
/// The tables are probed in place: an entry sits where its fingerprint points or just after,
/// in places grouped four to a cache line, so finding a key usually reads one line (a table
/// with separate control bytes reads two, each a miss to memory once the keys outgrow the
/// cache).
///
/// Two keys would share one state only if their fingerprints were equal. Any two different
/// keys collide with probability 2⁻⁶⁴ over the random seed, however they were chosen: among a
/// million live keys the odds are about 1 in 37 million, and since the seed is secret,
/// clients cannot choose keys that collide.
///
/// # Bounded memory
///
/// Each key remembers when its state becomes the same as a key never seen (a full bucket, an
/// expired window). Such idle keys are dropped as a shard fills, and by [`MemoryStore::sweep`].
///
/// The number of keys has a ceiling ([`MemoryStore::max_keys`], default 1,000,000). Each
/// shard keeps two generations: new keys enter the young one; a key found in the old one moves
/// back to the young one. When the young generation is full (after dropping its idle keys),
/// the old generation is dropped whole and the young one becomes old. So at the ceiling the
/// keys forgotten are those not seen for the longest (roughly least recently used), in O(1)
/// per request. A forgotten key starts afresh: under a flood of distinct keys (a million
/// random client IPs), a quiet client may get a fresh allowance. That is the trade: memory
/// stays bounded and nobody is locked out, and a limit errs towards admitting; refusing new
/// keys instead would let a flood lock out every new client.
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, Quota};
/// use tollgate::clock::ManualClock;
/// use tollgate::store::{Acquisition, LimitCheck, MemoryStore, Store};
///
/// let store = MemoryStore::with_clock(ManualClock::new());
/// let quota = Quota::new(1, Duration::from_secs(1))?;
/// let check = LimitCheck { domain: "demo", key: b"user:42", tag: b"42", algorithm: Algorithm::FixedWindow, quota: &quota, cost: 1, shadow: false, check_only: false, sync_every: None, limit: "per-user", approximate: None, carried_from: &[] };
/// let Acquisition::Ready(Ok(first)) = store.acquire(&[check]) else { unreachable!() };
/// let Acquisition::Ready(Ok(second)) = store.acquire(&[check]) else { unreachable!() };
/// assert!(first[0].allowed);
/// assert!(!second[0].allowed);
/// # Ok::<(), tollgate::algorithm::QuotaError>(())
/// ```
pub struct MemoryStore<C = SystemClock> {
    shards: Box<[Shard]>,
    /// Turns a key into its fingerprint; seeded at random per store.
    fingerprinter: Fingerprinter,
    /// Keys one generation of one shard holds.
    generation_capacity: usize,
    /// The sketches of the approximate limits.
    sketches: Sketches,
    /// Shared with the limiter, which reads the time from its store.
    clock: Arc<C>,
}

// Padded to a cache line so that neighbouring shard locks do not share one. A shared lock is
// enough to decide a one-timestamp limit on a key already tracked (see
// `generations::decide_shared`); everything else takes it exclusively. parking_lot's lock
// rather than the standard library's: threads on one hot key spin briefly instead of
// sleeping in the kernel.
#[repr(align(64))]
struct Shard(RwLock<Generations>);

/// The shards of a [reproducible](MemoryStore::reproducible) store, whatever the machine.
const REPRODUCIBLE_SHARDS: usize = 64;

/// The number of keys tracked at most, unless configured.
const DEFAULT_MAX_KEYS: usize = 1_000_000;

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
        let shards = (parallelism * 4).next_power_of_two();
        Self::with_shards(clock, shards, Fingerprinter::new())
    }

    /// A store that reads the time from `clock` and gives the same answers to the same
    /// requests in every run, on every machine: keys are hashed under `seed` instead of a
    /// secret drawn at random, and spread over a fixed number of shards (64). For replaying
    /// traffic (`tollgate simulate`) and tests; not for a server, whose clients could learn
    /// the seed and choose keys that crowd one shard.
    ///
    /// ```
    /// use tollgate::clock::ManualClock;
    /// use tollgate::store::MemoryStore;
    ///
    /// let store = MemoryStore::reproducible(ManualClock::new(), 7);
    /// ```
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    pub fn reproducible(clock: C, seed: u64) -> Self {
        Self::with_shards(clock, REPRODUCIBLE_SHARDS, Fingerprinter::seeded(seed))
    }

    /// A store of `shard_count` shards (a power of two), fingerprinting keys with
    /// `fingerprinter`.
    fn with_shards(clock: C, shard_count: usize, fingerprinter: Fingerprinter) -> Self {
        let mut store = MemoryStore {
            shards: (0..shard_count)
                .map(|_| Shard(RwLock::new(Generations::default())))
                .collect(),
            fingerprinter,
            generation_capacity: 0,
            sketches: Sketches::default(),
            clock: Arc::new(clock),
        };
        store.set_max_keys(DEFAULT_MAX_KEYS);
        store
    }

    /// The same store, tracking at most `max_keys` keys (see the type's docs for what happens
    /// at the ceiling). The ceiling is spread over the shards, so a shard may start forgetting
    /// keys a little before the store as a whole holds `max_keys`.
    #[must_use]
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.set_max_keys(max_keys);
        self
    }

    fn set_max_keys(&mut self, max_keys: usize) {
        self.generation_capacity = (max_keys / (2 * self.shards.len())).max(1);
    }

    /// The number of keys tracked.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let generations = shard.0.read();
                generations.young.len() + generations.old.len()
            })
            .sum()
    }

    /// Whether no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every idle key (one whose state is the same as never seen), one shard at a time.
    /// Idle keys are also dropped as shards fill; call this (e.g. every few seconds from a
    /// background task) to give memory back after a burst of keys on a server that then
    /// goes quiet.
    pub fn sweep(&self) {
        let now = self.clock.now();
        for shard in self.shards.iter() {
            let mut guard = shard.0.write();
            let generations = &mut *guard;
            for tables in [&mut generations.young, &mut generations.old] {
                tables.retain_active(now);
                // Give the buckets back too, not only the keys.
                tables.timestamps.shrink_to_fit();
                tables.packed.shrink_to_fit();
                tables.general.shrink_to_fit();
            }
        }
    }

    /// What identifies the state of `check` in this store: its key and its algorithm,
    /// hashed under the store's random seed.
    ///
    /// A fingerprint of 0 is taken as 1, since the tables mark empty places with 0. That adds
    /// 2⁻¹²⁷ to the odds that two keys collide.
    fn fingerprint(&self, check: &LimitCheck<'_>) -> NonZeroU64 {
        self.fingerprint_of(check.key, check.algorithm)
    }

    /// [`MemoryStore::fingerprint`] of a key and algorithm.
    #[inline]
    fn fingerprint_of(&self, key: &[u8], algorithm: Algorithm) -> NonZeroU64 {
        let fingerprint = self.fingerprinter.fingerprint(key, algorithm as u8);
        NonZeroU64::new(fingerprint).unwrap_or(NonZeroU64::MIN)
    }

    fn shard_of(&self, fingerprint: NonZeroU64) -> usize {
        // The tables use the low bits; take the shard from the high ones.
        (fingerprint.get() >> 32) as usize & (self.shards.len() - 1)
    }

    fn decide(&self, checks: &[LimitCheck<'_>]) -> Decisions {
        let now = self.clock.now();
        for check in checks {
            if !check.carried_from.is_empty() {
                self.carry(check, now);
            }
        }
        let capacity = self.generation_capacity;
        // One limit (the common case): one hash, one lock, decide and charge in one step.
        if let [check] = checks {
            if check.check_only {
                return Decisions::one(self.check_alone(check, now));
            }
            let fingerprint = self.fingerprint(check);
            let shard = &self.shards[self.shard_of(fingerprint)].0;
            // Each path returns its own result, so that neither decision is copied through
            // the other's.
            if let Some(decision) = decide_shared(shard, fingerprint, check, now) {
                return Decisions::one(decision);
            }
            let sketches = check.approximate.map(|_| self.sketches.load(checks));
            let sketch = sketches.as_ref().and_then(|s| s.of(check));
            let decision = shard.write().decide(
                fingerprint,
                check,
                sketch,
                now,
                capacity,
                Charge::IfAdmitted,
            );
            return Decisions::one(decision);
        }
        self.decide_together(checks, now)
    }

    /// Decides one limit only checked (a rate limit service's, off the layer's path).
    #[inline(never)]
    fn check_alone(&self, check: &LimitCheck<'_>, now: Nanos) -> Decision {
        let fingerprint = self.fingerprint(check);
        let shard = &self.shards[self.shard_of(fingerprint)].0;
        let sketches = check
            .approximate
            .map(|_| self.sketches.load(slice::from_ref(check)));
        let sketch = sketches.as_ref().and_then(|s| s.of(check));
        let capacity = self.generation_capacity;
        shard
            .write()
            .check(fingerprint, check, sketch, now, capacity)
    }

    /// Decides several limits of one request, all or nothing.
    fn decide_together(&self, checks: &[LimitCheck<'_>], now: Nanos) -> Decisions {
        let capacity = self.generation_capacity;
        // Before the locks: a new sketch is allocated here.
        let sketches = checks
            .iter()
            .any(|check| check.approximate.is_some())
            .then(|| self.sketches.load(checks));
        let fingerprints: SmallVec<[NonZeroU64; 4]> =
            checks.iter().map(|c| self.fingerprint(c)).collect();
        let mut shard_ids: SmallVec<[usize; 4]> =
            fingerprints.iter().map(|&f| self.shard_of(f)).collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        let mut guards: SmallVec<[RwLockWriteGuard<'_, Generations>; 4]> = shard_ids
            .iter()
            .map(|&id| self.shards[id].0.write())
            .collect();
        let guard_of = |fingerprint: NonZeroU64| {
            shard_ids
                .binary_search(&self.shard_of(fingerprint))
                .expect("every check's shard is locked")
        };

        // Several: charge only if every enforced limit has room. Room for all of them is made
        // first, so that no generation rolls mid-batch and forgets a key already read (unless
        // one shard's generation is smaller than the batch).
        for (index, generations) in guards.iter_mut().enumerate() {
            let keys = fingerprints
                .iter()
                .filter(|&&f| guard_of(f) == index)
                .count();
            generations.reserve(keys, now, capacity);
        }
        let sketch = |check: &LimitCheck<'_>| sketches.as_ref().and_then(|s| s.of(check));
        let mut decisions: Decisions = checks
            .iter()
            .zip(&fingerprints)
            .map(|(check, &f)| {
                let generations = &mut guards[guard_of(f)];
                if check.check_only {
                    generations.check(f, check, sketch(check), now, capacity)
                } else {
                    generations.decide(f, check, sketch(check), now, capacity, Charge::No)
                }
            })
            .collect();
        if checks
            .iter()
            .zip(&decisions)
            .all(|(c, d)| c.shadow || d.allowed)
        {
            for ((check, &f), decision) in checks.iter().zip(&fingerprints).zip(&mut decisions) {
                if decision.allowed && !check.check_only {
                    *decision = guards[guard_of(f)].decide(
                        f,
                        check,
                        sketch(check),
                        now,
                        capacity,
                        Charge::IfAdmitted,
                    );
                }
            }
        }
        decisions
    }
}

impl<C: Clock> sealed::Sealed for MemoryStore<C> {}

impl<C: Clock> Store for MemoryStore<C> {
    type Pending = std::future::Ready<Result<Decisions, StoreError>>;

    #[inline]
    fn acquire(&self, checks: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
        Acquisition::Ready(Ok(self.decide(checks)))
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    fn cancel(&self, check: &LimitCheck<'_>, booked_until: Nanos) {
        // Only the leaky bucket gives anything back (see `Algorithm::cancel`), and its state
        // is a timestamp.
        let Some(packed) = check
            .algorithm
            .packed(check.quota)
            .filter(|p| p.is_timestamp())
        else {
            return;
        };
        let now = self.clock.now();
        let fingerprint = self.fingerprint(check);
        let capacity = self.generation_capacity;
        let mut generations = self.shards[self.shard_of(fingerprint)].0.write();
        if let Some(slot) = generations.find::<Timestamp>(fingerprint, now, capacity) {
            let mut state = slot.state();
            packed.cancel(&mut state, now, check.quota, check.cost, booked_until);
            *slot = Timestamp::new(state, Nanos::new(state[0]));
        }
    }

    fn limits_in_force(&self, limits: &[LimitCheck<'_>]) {
        self.sketches.in_force(limits);
    }

    fn reset(&self, checks: &[LimitCheck<'_>]) -> Resetting {
        Box::pin(std::future::ready(Ok(self.forget(checks))))
    }

    fn settle(&self, check: &LimitCheck<'_>, extra: i64) -> Settling {
        self.settle_key(check, extra);
        Box::pin(std::future::ready(Ok(())))
    }
}

impl<C> fmt::Debug for MemoryStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.len())
            .field(
                "max_keys",
                &(self.generation_capacity * 2 * self.shards.len()),
            )
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Algorithm, Quota};
    use crate::clock::ManualClock;
    use std::time::Duration;

    fn decide(store: &MemoryStore<ManualClock>, checks: &[LimitCheck<'_>]) -> Decisions {
        match store.acquire(checks) {
            Acquisition::Ready(result) => result.expect("the memory store never fails"),
            Acquisition::Pending(_) => panic!("the memory store answers at once"),
        }
    }

    /// One admitted-or-not request for each key in `keys` (a key is its number's bytes).
    fn fill(
        store: &MemoryStore<ManualClock>,
        keys: std::ops::Range<u32>,
        algorithm: Algorithm,
        quota: &Quota,
    ) {
        for i in keys {
            decide(store, &[check(&i.to_le_bytes(), algorithm, quota)]);
        }
    }

    fn check<'a>(key: &'a [u8], algorithm: Algorithm, quota: &'a Quota) -> LimitCheck<'a> {
        LimitCheck::new("test", key, algorithm, quota)
    }

    #[test]
    fn a_request_denied_by_one_limit_consumes_none_of_the_others() {
        let store = MemoryStore::with_clock(ManualClock::new());
        let wide = Quota::new(10, Duration::from_secs(60)).unwrap();
        let narrow = Quota::new(1, Duration::from_secs(60)).unwrap();
        let both = [
            check(b"wide", Algorithm::FixedWindow, &wide),
            check(b"narrow", Algorithm::TokenBucket, &narrow),
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
        let quota = Quota::new(1, Duration::from_secs(60)).unwrap();
        let shadow = LimitCheck {
            shadow: true,
            ..check(b"k", Algorithm::FixedWindow, &quota)
        };
        let enforced = Quota::new(100, Duration::from_secs(60)).unwrap();
        let both = [shadow, check(b"e", Algorithm::FixedWindow, &enforced)];
        assert!(decide(&store, &both)[0].allowed);
        let second = decide(&store, &both);
        assert!(!second[0].allowed, "the shadow limit reports its denial");
        assert!(second[1].allowed, "and does not stop the enforced one");
    }

    #[test]
    fn the_key_ceiling_holds_under_a_flood_and_active_clients_stay_limited() {
        let clock = ManualClock::new();
        let store = MemoryStore::with_clock(clock.clone()).max_keys(10_000);
        let quota = Quota::new(5, Duration::from_secs(3_600)).unwrap();
        let active = check(b"active client", Algorithm::FixedWindow, &quota);
        let mut active_admitted = 0;
        let mut key = Vec::new();
        for i in 0..1_000_000u32 {
            key.clear();
            key.extend_from_slice(&i.wrapping_mul(2_654_435_761).to_le_bytes());
            decide(&store, &[check(&key, Algorithm::FixedWindow, &quota)]);
            if i % 100 == 0 && decide(&store, &[active])[0].allowed {
                active_admitted += 1;
            }
        }
        assert!(store.len() <= 10_000, "{} keys tracked", store.len());
        assert_eq!(active_admitted, 5, "a client seen often is never forgotten");
    }

    #[test]
    fn idle_keys_go_on_sweep() {
        let clock = ManualClock::new();
        let store = MemoryStore::with_clock(clock.clone());
        let quota = Quota::new(1, Duration::from_secs(1)).unwrap();
        fill(&store, 0..500, Algorithm::TokenBucket, &quota);
        assert_eq!(store.len(), 500);
        clock.advance(Duration::from_secs(1));
        store.sweep();
        assert!(store.is_empty(), "full buckets are the same as never seen");
    }

    #[test]
    fn idle_keys_make_room_before_a_generation_is_forgotten() {
        // One shard, so that a generation holds exactly half the ceiling: 800 keys.
        let clock = ManualClock::new();
        let store =
            MemoryStore::with_shards(clock.clone(), 1, Fingerprinter::new()).max_keys(1_600);
        let brief = Quota::new(1, Duration::from_secs(1)).unwrap();
        fill(&store, 0..500, Algorithm::TokenBucket, &brief);
        clock.advance(Duration::from_secs(1));
        let busy = Quota::new(1, Duration::from_secs(3_600)).unwrap();
        fill(&store, 500..1_100, Algorithm::Gcra, &busy);
        // The 801st key found the young generation full: its 500 idle keys went and the busy
        // ones stayed young. Had the generation rolled instead, the idle keys would still be
        // counted in the old one (1,100 keys).
        assert_eq!(store.len(), 600);
    }

    #[test]
    fn every_algorithm_goes_idle_exactly_when_its_state_is_fresh_again() {
        let quota = Quota::new(2, Duration::from_secs(1)).unwrap();
        for algorithm in Algorithm::ALL {
            let clock = ManualClock::new();
            let store = MemoryStore::with_clock(clock.clone());
            let first = decide(&store, &[check(b"k", algorithm, &quota)])[0];
            assert!(first.allowed && !first.reset_after.is_zero(), "{algorithm}");
            clock.advance(first.reset_after - Duration::from_nanos(1));
            store.sweep();
            assert_eq!(store.len(), 1, "{algorithm}: not idle 1 ns before");
            clock.advance(Duration::from_nanos(1));
            store.sweep();
            assert!(store.is_empty(), "{algorithm}: idle at reset_after");
        }
    }

    #[test]
    fn a_cancelled_place_makes_the_queue_idle_sooner() {
        let clock = ManualClock::new();
        let store = MemoryStore::with_clock(clock.clone());
        let quota = Quota::new(10, Duration::from_secs(1))
            .unwrap()
            .with_queue(1);
        let queued = check(b"k", Algorithm::LeakyBucket, &quota);
        decide(&store, &[queued]);
        let second = decide(&store, &[queued])[0];
        store.cancel(&queued, second.booked_until.expect("queued"));
        clock.advance(Duration::from_millis(100));
        store.sweep();
        assert!(
            store.is_empty(),
            "drained when the first request's turn ends"
        );
    }

    #[test]
    fn one_key_under_two_algorithms_keeps_two_states() {
        let store = MemoryStore::with_clock(ManualClock::new());
        let quota = Quota::new(1, Duration::from_secs(60)).unwrap();
        for algorithm in Algorithm::ALL {
            let first = decide(&store, &[check(b"same key", algorithm, &quota)])[0];
            assert!(first.allowed, "{algorithm} starts afresh");
        }
        assert_eq!(store.len(), Algorithm::ALL.len());
    }

    #[test]
    fn limits_kept_in_different_tables_are_all_or_nothing_together() {
        let store = MemoryStore::with_clock(ManualClock::new());
        let wide = Quota::new(10, Duration::from_secs(60)).unwrap();
        let narrow = Quota::new(1, Duration::from_secs(60)).unwrap();
        let all = [
            check(b"timestamp", Algorithm::Gcra, &wide),
            check(b"packed", Algorithm::TokenBucket, &wide),
            check(b"general", Algorithm::SlidingWindowLog, &narrow),
        ];
        assert!(decide(&store, &all).iter().all(|d| d.allowed));
        for _ in 0..3 {
            let decisions = decide(&store, &all);
            assert!(decisions[0].allowed && decisions[1].allowed && !decisions[2].allowed);
        }
        for wide_only in [&all[..1], &all[1..2]] {
            assert_eq!(
                decide(&store, wide_only)[0].remaining,
                8,
                "denied requests charged nothing"
            );
        }
    }

    #[test]
    fn denied_and_stateless_requests_track_no_key() {
        let store = MemoryStore::with_clock(ManualClock::new());
        let zero = Quota::new(0, Duration::from_secs(1)).unwrap();
        assert!(!decide(&store, &[check(b"k", Algorithm::Gcra, &zero)])[0].allowed);
        assert!(store.is_empty());
    }

    #[test]
    fn a_cancelled_queue_place_is_given_back() {
        let clock = ManualClock::new();
        let store = MemoryStore::with_clock(clock.clone());
        let quota = Quota::new(10, Duration::from_secs(1))
            .unwrap()
            .with_queue(1);
        let queued = check(b"k", Algorithm::LeakyBucket, &quota);
        assert!(decide(&store, &[queued])[0].allowed);
        let second = decide(&store, &[queued])[0];
        assert_eq!(second.delay, Duration::from_millis(100));
        assert!(!decide(&store, &[queued])[0].allowed, "the queue is full");
        store.cancel(&queued, second.booked_until.expect("queued"));
        assert!(
            decide(&store, &[queued])[0].allowed,
            "the place was given back"
        );
    }

    /// Rules of one approximate limit per user, `rate_limit` as given.
    fn approximate_rules(rate_limit: &str) -> crate::rules::Rules {
        crate::rules::Rules::from_yaml(&format!(
            "domain: t\nsources: {{ user: {{ header: x-user }} }}\ndescriptors:\n  - key: user\n    rate_limit: {{ {rate_limit} }}\n"
        ))
        .expect("valid rules")
    }

    #[test]
    fn sketches_are_built_when_rules_are_put_in_force_and_dropped_with_them() {
        let per_minute = approximate_rules(
            "unit: minute, requests_per_unit: 10, approximate: { memory: 64KiB }",
        );
        let limiter =
            crate::Limiter::with_store(per_minute, MemoryStore::with_clock(ManualClock::new()));
        assert_eq!(
            limiter.store().sketches.len(),
            1,
            "built before any request"
        );
        let per_hour =
            approximate_rules("unit: hour, requests_per_unit: 10, approximate: { memory: 64KiB }");
        limiter.set_rules(per_hour);
        assert_eq!(
            limiter.store().sketches.len(),
            1,
            "the minute's sketch is dropped"
        );
        limiter.set_rules(approximate_rules("unit: hour, requests_per_unit: 10"));
        assert_eq!(
            limiter.store().sketches.len(),
            0,
            "no approximate limit left"
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(limiter.check(&[("user", "ann")], 1));
        assert_eq!(
            limiter.store().sketches.len(),
            0,
            "none built on a request's thread"
        );
    }

    #[test]
    fn a_changed_limit_with_the_same_sketch_settings_keeps_the_sketch_s_counts() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let rules = |limit: u64| {
            approximate_rules(&format!(
                "unit: minute, requests_per_unit: {limit}, approximate: {{ memory: 64KiB }}"
            ))
        };
        let limiter =
            crate::Limiter::with_store(rules(10), MemoryStore::with_clock(ManualClock::new()));
        for _ in 0..4 {
            assert!(runtime
                .block_on(limiter.check(&[("user", "ann")], 1))
                .is_allowed());
        }
        limiter.set_rules(rules(20));
        let peeked = runtime.block_on(limiter.peek(&[("user", "ann")])).unwrap();
        assert_eq!(peeked[0].decision().remaining, 16, "4 of 20 used");
    }

    #[test]
    fn a_store_never_told_the_limits_builds_a_sketch_once_for_its_first_check() {
        let store = MemoryStore::with_clock(ManualClock::new());
        let quota = Quota::new(10, Duration::from_secs(60)).unwrap();
        let approximate = LimitCheck {
            approximate: Some(crate::store::Approximate::new(64 * 1024)),
            ..check(b"k", Algorithm::FixedWindow, &quota)
        };
        for _ in 0..3 {
            decide(&store, &[approximate]);
        }
        assert_eq!(store.sketches.len(), 1);
    }

    #[test]
    fn single_and_joint_requests_on_one_key_admit_exactly_its_capacity() {
        // A request with one GCRA, leaky-bucket or token-bucket limit (this quota's interval
        // is whole) decides under the shard's shared lock with a compare-and-swap, one with
        // two limits (and the other algorithms always) under the exclusive locks: on one key
        // at once, they still admit exactly the limit's capacity (the clock stands still).
        // Races are rare on two CPUs, so the scene is played 20 times per algorithm.
        let quota = Quota::new(100, Duration::from_secs(1))
            .unwrap()
            .with_queue(99);
        let roomy = Quota::new(1_000_000, Duration::from_secs(1)).unwrap();
        for algorithm in Algorithm::ALL {
            let key = check(b"shared", algorithm, &quota);
            let other = check(b"other", algorithm, &roomy);
            let capacity = usize::try_from(algorithm.capacity(&quota)).expect("small");
            assert_eq!(capacity, 100, "{algorithm}");
            for round in 0..20 {
                let store = MemoryStore::with_clock(ManualClock::new());
                let start = std::sync::Barrier::new(4);
                let admitted: usize = std::thread::scope(|scope| {
                    let threads: Vec<_> = (0..4)
                        .map(|thread| {
                            let (store, start) = (&store, &start);
                            scope.spawn(move || {
                                let checks = if thread % 2 == 0 {
                                    &[key][..]
                                } else {
                                    &[key, other][..]
                                };
                                start.wait();
                                (0..200)
                                    .filter(|_| decide(store, checks).iter().all(|d| d.allowed))
                                    .count()
                            })
                        })
                        .collect();
                    threads
                        .into_iter()
                        .map(|t| t.join().expect("no thread panics"))
                        .sum()
                });
                assert_eq!(admitted, capacity, "{algorithm}, round {round}");
                assert!(
                    !decide(&store, &[key])[0].allowed,
                    "{algorithm}, round {round}"
                );
            }
        }
    }
}
