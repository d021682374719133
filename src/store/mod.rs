//! Where limit state lives.
//!
//! A [`Store`] keeps one [`State`](crate::algorithm::State) per key and runs the algorithm on
//! it atomically. Stores know nothing of HTTP: they receive the limits that apply to one
//! request, already resolved to keys and quotas, and answer with one
//! [`Decision`](crate::algorithm::Decision) per limit.
//!
//! The contract every store keeps:
//! - **All or nothing.** A request is admitted when every enforced (non-shadow) limit has
//!   room; then each limit that had room is charged. When any enforced limit is full, no limit
//!   is charged.
//! - **Shadow limits never deny.** Their decision is reported, and they are charged only when
//!   they have room.
//! - **Limits only checked are never charged.** They are decided with the others, and one
//!   that has no room refuses the request as any enforced limit does.

#[doc(hidden)]
pub mod decisions;
mod error;
mod memory;
#[cfg(feature = "redis")]
mod redis;
mod shared_slots;
mod sketch;
#[cfg(feature = "redis")]
pub(crate) mod sync;

#[cfg(feature = "redis")]
#[doc(hidden)]
pub use self::redis::RedisPending;
#[cfg(feature = "redis")]
pub use self::redis::{RedisStore, RedisStoreBuilder};
#[doc(hidden)]
pub use decisions::Decisions;
pub use error::{StoreError, StoreErrorKind};
pub use memory::MemoryStore;
#[doc(hidden)]
pub use shared_slots::{Leases, SlotCheck, SlotCount, TakenSlots, TakingSlots};

use crate::algorithm::{Algorithm, Quota};
use crate::clock::{Clock, Nanos, SystemClock};
use smallvec::SmallVec;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

#[doc(hidden)]
/// One limit to check for one request.
#[derive(Debug, Clone, Copy)]
pub struct LimitCheck<'a> {
    /// The rules' domain; a shared store keeps each domain's state apart.
    pub domain: &'a str,
    /// The key whose state this limit keeps (limit identity and descriptor values).
    pub key: &'a [u8],
    /// The part of `key` that says who is limited (a client's address, a user id), its hash
    /// tag: a store that spreads keys over shards keeps the keys of one tag together, so the
    /// limits of one client are decided in one place. A store of one shard may ignore it.
    pub tag: &'a [u8],
    /// The algorithm that decides.
    pub algorithm: Algorithm,
    /// The quota.
    pub quota: &'a Quota,
    /// The weight of the request under this limit (at least 1).
    pub cost: u64,
    /// Whether the limit only reports (never denies).
    pub shadow: bool,
    /// Whether the limit is only checked, never charged (Envoy's descriptors of
    /// `hits_addend: 0`): its decision says whether a request of `cost` would be admitted,
    /// and when it would be if not, with what remains (and when the limit is full again)
    /// as it stands. A check with no room refuses the request as any enforced limit does.
    pub check_only: bool,
    /// `sync_every` of the rules: a store shared by a fleet may decide this limit from local
    /// counts, sent to the shared state and refreshed from it at this interval (see the
    /// guide's "Local-first limits"). `None`: decide it exactly. A store of one process, such
    /// as [`MemoryStore`], is exact either way and ignores it.
    pub sync_every: Option<Duration>,
    /// The limit's label (its `name`, else its descriptor path), as logs and metrics name it.
    pub limit: &'a str,
    /// `approximate` of the rules: the memory store may count this limit's keys in a
    /// count-min sketch of fixed size, exact state only for the keys near their limit (see
    /// the guide's "Approximate limits"). `None`: exact. Stores shared by a fleet ignore it.
    pub approximate: Option<Approximate>,
    /// Where a key of this limit starts from when it has no state yet: the limits this one
    /// replaced at the last reloads (a changed quota, period or algorithm), newest first. A
    /// store that finds the key's state under one of them carries it into this limit (see
    /// [`CarriedFrom`]) and forgets it; empty for a limit no reload changed lately.
    pub carried_from: &'a [CarriedFrom],
}

impl<'a> LimitCheck<'a> {
    /// A check of one request (cost 1) for `key`, its own hash tag, in `domain`, decided
    /// by `algorithm` under `quota`: enforced, charged, exact, carried from nothing, its
    /// limit labelled `test`. For the crate's tests and benches, which set the other fields
    /// by struct update.
    #[inline]
    pub fn new(domain: &'a str, key: &'a [u8], algorithm: Algorithm, quota: &'a Quota) -> Self {
        LimitCheck {
            domain,
            key,
            tag: key,
            algorithm,
            quota,
            cost: 1,
            shadow: false,
            check_only: false,
            sync_every: None,
            limit: "test",
            approximate: None,
            carried_from: &[],
        }
    }
}

/// A limit that a reload replaced, whose keys' state the keys of the limit that took its
/// place start from (see the guide's [what a reload keeps](crate::guide::operations#what-a-reload-keeps)).
///
/// A key's state under the old limit is kept under the same key with its first bytes (the
/// limit's identity) replaced by [`CarriedFrom::prefix`] ([`CarriedFrom::key_of`]), and
/// shares its hash tag, unless the tag is the whole key: then the old key is its own tag.
/// A store carries the old state as it is where it means the same under the new limit (a
/// sliding window log; a window's counts under the same algorithm and period), a token
/// bucket's tokens into a token bucket (at most its burst), and otherwise the requests the
/// key had used, charged to a fresh state of the new limit (at most its capacity).
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, Quota};
/// use tollgate::store::CarriedFrom;
///
/// let before = Quota::new(5, Duration::from_secs(60))?;
/// let carried = CarriedFrom::new(*b"old:", Algorithm::FixedWindow, before);
/// assert_eq!(&carried.key_of(b"new:user 42")[..], b"old:user 42");
/// # Ok::<(), tollgate::algorithm::QuotaError>(())
/// ```
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarriedFrom {
    prefix: Box<[u8]>,
    algorithm: Algorithm,
    quota: Quota,
}

impl CarriedFrom {
    /// The limit decided by `algorithm` under `quota` whose keys begin with `prefix` where
    /// the new limit's begin with their own.
    pub fn new(prefix: impl Into<Box<[u8]>>, algorithm: Algorithm, quota: Quota) -> Self {
        CarriedFrom {
            prefix: prefix.into(),
            algorithm,
            quota,
        }
    }

    /// The bytes the old limit's keys begin with.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The key under the old limit of `key`, a key of the new one: `key` with its first
    /// bytes replaced by [`CarriedFrom::prefix`].
    pub fn key_of(&self, key: &[u8]) -> SmallVec<[u8; 48]> {
        let mut old = SmallVec::from_slice(key);
        let replaced = self.prefix.len().min(old.len());
        old[..replaced].copy_from_slice(&self.prefix[..replaced]);
        old
    }

    /// The algorithm that kept the old state.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The quota the old state was kept under.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }
}

/// How an approximate limit is counted: in a count-min sketch of `memory` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Approximate {
    memory: usize,
}

impl Approximate {
    /// A sketch of `memory` bytes.
    pub const fn new(memory: usize) -> Self {
        Approximate { memory }
    }

    /// The sketch's size, in bytes.
    pub const fn memory(self) -> usize {
        self.memory
    }

    /// What other keys' requests add to a key's estimate on average, with `requests` counted
    /// in a window over every key, for a limit decided by `algorithm` (`fixed_window` or
    /// `sliding_window_counter`).
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    pub fn expected_excess(self, algorithm: Algorithm, requests: u64) -> f64 {
        sketch::Geometry::of(self.memory, algorithm).expected_excess(requests as f64)
    }

    /// An estimate exceeds a key's true count by more than this with probability at most
    /// `1 −` [`Approximate::confidence`]: `e ×` [`Approximate::expected_excess`].
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    pub fn error_bound(self, algorithm: Algorithm, requests: u64) -> f64 {
        sketch::Geometry::of(self.memory, algorithm).error_bound(requests as f64)
    }

    /// The probability that an estimate stays within [`Approximate::error_bound`]:
    /// `1 − e^-c`, `c` the cells a key takes (4 for a fixed window, 3 for a sliding window
    /// counter).
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    pub fn confidence(self, algorithm: Algorithm) -> f64 {
        sketch::Geometry::of(self.memory, algorithm).confidence()
    }

    /// The probability that a client at half its `limit` is denied for other keys'
    /// requests, with `requests` counted in a window over every key: its estimate would
    /// have to exceed its true count by half the limit.
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    pub fn false_denial(self, algorithm: Algorithm, requests: u64, limit: u64) -> f64 {
        sketch::Geometry::of(self.memory, algorithm)
            .excess_probability(requests as f64, limit as f64 / 2.0)
    }
}

/// A store's answer: at once, or later.
///
/// An in-memory store always answers at once, so the middleware can skip the future
/// machinery; a networked store answers later.
#[doc(hidden)]
#[derive(Debug)]
// Moved once per request; boxing the ready answer would allocate on the hot path.
#[allow(clippy::large_enum_variant)]
pub enum Acquisition<F> {
    /// The decisions are already known.
    Ready(Result<Decisions, StoreError>),
    /// The decisions will be known when the future completes.
    Pending(F),
}

/// Keeps limit state and decides requests against it: [`MemoryStore`], or `RedisStore`
/// (feature `redis`).
///
/// The trait is sealed: a store outside this crate cannot implement it, so that a new
/// option never breaks one. Its methods, and the types they take and answer (the limits
/// resolved to keys, the decisions, the slots and leases), are for the limiter's use,
/// hidden from these docs and outside the API's semver promise.
pub trait Store: sealed::Sealed + Send + Sync + 'static {
    /// The future of an answer that is not ready at once.
    #[doc(hidden)]
    type Pending: Future<Output = Result<Decisions, StoreError>> + Send + 'static;

    /// Decides `checks` for one request, all or nothing (see the module docs).
    #[doc(hidden)]
    fn acquire(&self, checks: &[LimitCheck<'_>]) -> Acquisition<Self::Pending>;

    /// The clock the store decides by: the limiter reads the time from it too (its log
    /// throttles, the state carried across reloads). The system clock, unless the store
    /// was given another ([`MemoryStore::with_clock`]).
    #[doc(hidden)]
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(SystemClock)
    }

    /// Gives back what an admitted `check` booked but will not use: the queue place of a
    /// request whose client went away while it waited, booked until `booked_until` (see
    /// [`Algorithm::cancel`](crate::algorithm::Algorithm::cancel)). Best effort.
    #[doc(hidden)]
    fn cancel(&self, check: &LimitCheck<'_>, booked_until: Nanos);

    /// The limits of the rules put in force, one check each (their keys empty): at start and
    /// at each reload, before any request is decided under them, off the request path. A
    /// store may prepare what they need and drop what only limits no longer in force needed.
    /// The memory store builds the sketches of approximate limits here (one never told builds
    /// them on the first request's thread) and frees those of limits gone. The default does
    /// nothing.
    #[doc(hidden)]
    fn limits_in_force(&self, limits: &[LimitCheck<'_>]) {
        let _ = limits;
    }

    /// Takes a slot of each of `slots` for one request, counted in the store so that every
    /// process using it shares the counts (see the guide's
    /// [concurrency limits](crate::guide::rules#concurrency)): all or nothing (none is taken
    /// when an enforced slot is full; a shadow slot is taken whatever the count), each held
    /// as a lease that the store renews until the answer's [`Leases`] are dropped and that
    /// expires otherwise, so that a process that dies frees its slots.
    ///
    /// `None`, the default: the store keeps no slots, and each process counts its own
    /// requests in flight.
    #[doc(hidden)]
    fn take_slots(&self, slots: &[SlotCheck<'_>]) -> Option<TakingSlots> {
        let _ = slots;
        None
    }

    /// Settles what a request admitted under `check` turned out to cost, once its response
    /// said: charges its key `extra` more, past the limit if need be, or gives back
    /// `-extra` of what the request was charged, as
    /// [`Algorithm::settle`](crate::algorithm::Algorithm::settle) does, atomically with the
    /// key's other requests. `check` is the request's own (its cost the one charged).
    ///
    /// The default answers an error: a store that cannot settle.
    #[doc(hidden)]
    fn settle(&self, check: &LimitCheck<'_>, extra: i64) -> Settling {
        let _ = (check, extra);
        Box::pin(std::future::ready(Err(StoreError::new(
            StoreErrorKind::Unsupported,
            "this store cannot settle costs",
        ))))
    }

    /// Forgets what the keys of `checks` (and the keys they are carried from) have used, as
    /// if their clients had never been seen, and a fleet's shared totals of them too:
    /// support's "reset this customer" ([`Limiter::reset`](crate::Limiter::reset)).
    /// Answers how many keys held state.
    ///
    /// The default answers an error: a store that keeps no state it can forget.
    #[doc(hidden)]
    fn reset(&self, checks: &[LimitCheck<'_>]) -> Resetting {
        let _ = checks;
        Box::pin(std::future::ready(Err(StoreError::new(
            StoreErrorKind::Unsupported,
            "this store cannot reset keys",
        ))))
    }
}

/// Makes [`Store`] sealed: only this crate's stores implement it. Public for the crate's
/// own tests, whose stores wrap the memory store; outside the API's semver promise.
#[doc(hidden)]
pub mod sealed {
    /// Implemented by the stores that may implement [`Store`](super::Store).
    pub trait Sealed {}
}

/// The future of a [`Store::settle`].
#[doc(hidden)]
pub type Settling = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>;

/// The future of a [`Store::reset`]: how many keys held state.
#[doc(hidden)]
pub type Resetting = Pin<Box<dyn Future<Output = Result<u64, StoreError>> + Send>>;
