//! The slots of concurrency limits in Redis, shared by a fleet: each key's slots a sorted set
//! of leases, one a request in flight, that expire unless renewed (`take_slots` and
//! `renew_slots` in `library.lua`).
//!
//! A request's slots are taken in one call per cluster slot of their keys (one call on a
//! single server), all or nothing: when one call refuses or fails, the leases the others
//! took are given back. The leases a request holds are renewed by a task of the store, every
//! third of their lease, until the request's [`Leases`] are dropped, which gives them back
//! (`release_slots`, in a task of its own). The first request that takes slots starts the
//! renewing task, on the store's runtime; it ends at the tick after the store is dropped.
//! A server that dies stops renewing: its leases expire, and the next request of their keys
//! drops them. Taking and giving back go in a batch with other calls when the connection is
//! busy (see [`coalesce`](super::coalesce)), as decisions do.

use super::errors::{circuit_open, unexpected_reply};
use super::keys::RedisKey;
use super::program::Entry;
use super::{Inner, RedisStore};
use crate::store::{
    Leases, SlotCheck, SlotCount, StoreError, StoreErrorKind, TakenSlots, TakingSlots,
};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How often the renewing task looks for leases due: well within a third of the shortest
/// lease the rules allow (1 s).
const RENEW_TICK: Duration = Duration::from_millis(100);

/// The most leases one renewing call carries.
const LEASES_PER_CALL: usize = 500;

/// The leases this store holds, by number.
pub(super) struct LeaseBook {
    /// This store's part of its leases' members (the high 31 bits): random, so that two
    /// servers' rarely meet.
    server: i64,
    next: AtomicU64,
    held: Mutex<HashMap<u64, Held>>,
    /// Whether the renewing task was started (once a store: it ends with the store, or its
    /// runtime).
    renewing: AtomicBool,
}

/// A lease held: its key, its member in the key's set, how long it lasts, and when it was
/// last renewed.
struct Held {
    key: Arc<RedisKey>,
    member: i64,
    lease: Duration,
    renewed: Instant,
}

impl LeaseBook {
    pub(super) fn new() -> Self {
        LeaseBook {
            // Random: two servers started at once must not share a name.
            server: (RandomState::new().hash_one(std::process::id()) & 0x7fff_ffff) as i64,
            next: AtomicU64::new(0),
            held: Mutex::default(),
            renewing: AtomicBool::new(false),
        }
    }

    /// A new lease of `key`, held from now: its number and member (this server's part, and
    /// the number's low 32 bits: a number comes back after 2^32 leases).
    fn hold(&self, key: &Arc<RedisKey>, lease: Duration) -> (u64, i64) {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let member = (self.server << 32) | (number & 0xffff_ffff) as i64;
        let held = Held {
            key: Arc::clone(key),
            member,
            lease,
            renewed: Instant::now(),
        };
        self.held.lock().insert(number, held);
        (number, member)
    }

    /// Forgets the leases `numbers`; their keys and members.
    fn forget(&self, numbers: &[u64]) -> Vec<(Arc<RedisKey>, i64)> {
        let mut held = self.held.lock();
        numbers
            .iter()
            .filter_map(|number| held.remove(number))
            .map(|lease| (lease.key, lease.member))
            .collect()
    }

    /// The leases a third of their lease old or more, at `now`.
    fn due(&self, now: Instant) -> Vec<(u64, Arc<RedisKey>, i64, Duration)> {
        self.held
            .lock()
            .iter()
            .filter(|(_, lease)| now.duration_since(lease.renewed) >= lease.lease / 3)
            .map(|(&number, lease)| (number, Arc::clone(&lease.key), lease.member, lease.lease))
            .collect()
    }

    /// Notes the leases `numbers` renewed at `at`.
    fn renewed(&self, numbers: &[u64], at: Instant) {
        let mut held = self.held.lock();
        for number in numbers {
            if let Some(lease) = held.get_mut(number) {
                lease.renewed = at;
            }
        }
    }
}

/// Leases of one request in one call: given back when dropped, unless forgotten.
struct Holder {
    inner: Arc<Inner>,
    numbers: SmallVec<[u64; 2]>,
}

impl Holder {
    /// Forgets the leases without giving them back: the call that was to take them refused.
    fn forget(mut self) {
        self.inner.leases.forget(&self.numbers);
        self.numbers.clear();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let leases = self.inner.leases.forget(&self.numbers);
        // While Redis is failing, the leases expire by themselves.
        if leases.is_empty() || self.inner.breaker.is_open() {
            return;
        }
        let inner = Arc::clone(&self.inner);
        self.inner.spawn_for_request(async move {
            // The leases of one call: of one cluster slot.
            let keys = leases.iter().map(|(key, _)| &key.name[..]);
            let members = leases.iter().map(|&(_, member)| member);
            let released = inner.decide::<i64>(Entry::ReleaseSlots, keys, "", members);
            if let Err(error) = released.await {
                tracing::debug!(%error, "could not give slots back: their leases expire");
            }
        });
    }
}

/// The slots of one call, of one cluster slot: their positions among the request's, their
/// leases, keys and arguments.
struct Call {
    cluster_slot: u16,
    positions: SmallVec<[usize; 2]>,
    holder: Holder,
    keys: SmallVec<[Arc<RedisKey>; 2]>,
    args: SmallVec<[i64; 8]>,
}

impl RedisStore {
    /// Takes `slots` for one request, as leases (see the module docs).
    pub(super) fn take_leases(&self, slots: &[SlotCheck<'_>]) -> TakingSlots {
        if !self.inner.breaker.allows() {
            return Box::pin(std::future::ready(Err(circuit_open())));
        }
        self.start_renewing();
        let mut calls: SmallVec<[Call; 1]> = SmallVec::new();
        for (position, slot) in slots.iter().enumerate() {
            let key = Arc::new(RedisKey::lease(&self.inner.prefix, slot));
            let cluster_slot = if self.inner.is_cluster() { key.slot } else { 0 };
            let at = match calls.iter().position(|c| c.cluster_slot == cluster_slot) {
                Some(at) => at,
                None => {
                    calls.push(Call {
                        cluster_slot,
                        positions: SmallVec::new(),
                        holder: Holder {
                            inner: Arc::clone(&self.inner),
                            numbers: SmallVec::new(),
                        },
                        keys: SmallVec::new(),
                        args: SmallVec::new(),
                    });
                    calls.len() - 1
                }
            };
            let call = &mut calls[at];
            let (number, member) = self.inner.leases.hold(&key, slot.lease);
            call.positions.push(position);
            call.holder.numbers.push(number);
            call.args.extend([
                i64::from(slot.max_in_flight),
                i64::from(slot.shadow),
                millis(slot.lease),
                member,
            ]);
            call.keys.push(key);
        }
        let inner = Arc::clone(&self.inner);
        let count = slots.len();
        let taking = async move {
            let replies = futures_util::future::join_all(calls.iter().map(|call| {
                let keys = call.keys.iter().map(|key| &key.name[..]);
                let args = call.args.iter().copied();
                inner.decide::<Vec<i64>>(Entry::TakeSlots, keys, "", args)
            }))
            .await;
            rule(calls, &replies, count)
        };
        // A task of its own: a request that goes away while its slots are being taken must
        // not give them back before Redis took them (the leases would outlive it). The task
        // sees the call through, and gives back what it took to a request no longer there.
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.inner.spawn_for_request(async move {
            // Unsent, the slots taken are dropped here: given back.
            let _ = answer.send(taking.await);
        });
        Box::pin(async move {
            answered.await.unwrap_or_else(|_| {
                Err(StoreError::new(
                    StoreErrorKind::Interrupted,
                    "the call taking the slots ended with its runtime",
                ))
            })
        })
    }

    /// Starts the task that renews this store's leases on the store's runtime, unless it was
    /// started.
    fn start_renewing(&self) {
        let leases = &self.inner.leases;
        if leases.renewing.load(Ordering::Relaxed) || leases.renewing.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.runtime.spawn(renew(Arc::downgrade(&self.inner)));
    }
}

/// What the `replies` of `calls` make of a request of `count` slots: taken all (their
/// holders kept), or none (what a call took given back when another refused or failed).
fn rule(
    calls: SmallVec<[Call; 1]>,
    replies: &[Result<Vec<i64>, StoreError>],
    count: usize,
) -> Result<TakenSlots, StoreError> {
    let mut counts = vec![
        SlotCount {
            in_flight: 0,
            taken: false,
        };
        count
    ];
    let mut all_taken = true;
    let mut failure = None;
    for (call, reply) in calls.iter().zip(replies) {
        match reply {
            Ok(reply) if reply.len() == call.positions.len() + 1 => {
                all_taken &= reply[0] == 1;
                for (&position, &held) in call.positions.iter().zip(&reply[1..]) {
                    counts[position].in_flight = u32::try_from(held).unwrap_or(u32::MAX);
                }
            }
            Ok(reply) => {
                let got = format_args!("{} numbers", reply.len());
                failure = Some(unexpected_reply("taking slots", got));
            }
            Err(error) => failure = Some(error.clone()),
        }
    }
    let mut holders = Vec::with_capacity(calls.len());
    for (call, reply) in calls.into_iter().zip(replies) {
        match reply {
            Ok(reply) if reply.first() == Some(&0) => call.holder.forget(),
            // Taken, or failed: it may have taken them before its answer was lost.
            _ => holders.push(call.holder),
        }
    }
    // Dropped, the holders give back what they hold.
    if let Some(error) = failure {
        return Err(error);
    }
    if !all_taken {
        return Ok(TakenSlots::new(counts, Leases::none()));
    }
    for count in &mut counts {
        count.taken = true;
    }
    Ok(TakenSlots::new(counts, Leases::new(holders)))
}

/// The renewing task: every tick, renews the leases due, while the store lives. It holds the
/// store only while it renews, so that dropping the store's last clone ends it at its next
/// tick.
async fn renew(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(RENEW_TICK).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let now = Instant::now();
        let mut due = inner.leases.due(now);
        if inner.is_cluster() {
            due.sort_unstable_by_key(|(_, key, ..)| key.slot);
        }
        let mut rest = &due[..];
        while !rest.is_empty() {
            let same_call = if inner.is_cluster() {
                let slot = rest[0].1.slot;
                rest.iter()
                    .take(LEASES_PER_CALL)
                    .take_while(|(_, key, ..)| key.slot == slot)
                    .count()
            } else {
                rest.len().min(LEASES_PER_CALL)
            };
            let (batch, after) = rest.split_at(same_call);
            rest = after;
            let keys = batch.iter().map(|(_, key, ..)| &key.name[..]);
            let args = batch
                .iter()
                .flat_map(|&(_, _, member, lease)| [millis(lease), member]);
            match inner.invoke::<i64>(Entry::RenewSlots, keys, "", args).await {
                Ok(_) => {
                    let numbers: Vec<u64> = batch.iter().map(|(number, ..)| *number).collect();
                    inner.leases.renewed(&numbers, now);
                }
                Err(error) => {
                    tracing::debug!(%error, "could not renew leases: tried again at the next tick");
                }
            }
        }
    }
}

/// `duration` in whole milliseconds, as the library takes a lease.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
