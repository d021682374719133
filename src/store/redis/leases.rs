//! The slots of concurrency limits in Redis, shared by a fleet: each key's slots a sorted set
//! of leases, one a request in flight, that expire unless renewed (`take_slots` and
//! `renew_slots` in `library.lua`).
//!
//! A request's slots are taken in one call per cluster slot of their keys (one call on a
//! single server), all or nothing: when one call refuses or fails, the leases the others
//! took are given back. The leases a request holds are renewed by a task of the store, every
//! third of their lease, until the request's [`Leases`] are dropped, which gives them back
//! (`ZREM`). A server that dies stops renewing: its leases expire, and the next request of
//! their keys drops them.

use super::call::Arg;
use super::keys::RedisKey;
use super::program::Entry;
use super::{Inner, RedisStore};
use crate::store::{Leases, SlotCheck, SlotCount, StoreError, TakenSlots, TakingSlots};
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
    /// This store's part of its leases' members: random, so two servers' never meet.
    server: u64,
    next: AtomicU64,
    held: Mutex<HashMap<u64, Held>>,
    /// Whether the renewing task runs.
    renewing: AtomicBool,
}

/// A lease held: its key, its member in the key's set, how long it lasts, and when it was
/// last renewed.
struct Held {
    key: Arc<RedisKey>,
    member: String,
    lease: Duration,
    renewed: Instant,
}

impl LeaseBook {
    pub(super) fn new() -> Self {
        LeaseBook {
            // Random: two servers started at once must not share a name.
            server: RandomState::new().hash_one(std::process::id()),
            next: AtomicU64::new(0),
            held: Mutex::default(),
            renewing: AtomicBool::new(false),
        }
    }

    /// A new lease of `key`, held from now: its number and member.
    fn hold(&self, key: &Arc<RedisKey>, lease: Duration) -> (u64, String) {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let member = format!("{:016x}:{number}", self.server);
        let held = Held {
            key: Arc::clone(key),
            member: member.clone(),
            lease,
            renewed: Instant::now(),
        };
        self.held.lock().insert(number, held);
        (number, member)
    }

    /// Forgets the leases `numbers`; their keys and members.
    fn forget(&self, numbers: &[u64]) -> Vec<(Arc<RedisKey>, String)> {
        let mut held = self.held.lock();
        numbers
            .iter()
            .filter_map(|number| held.remove(number))
            .map(|lease| (lease.key, lease.member))
            .collect()
    }

    /// The leases a third of their lease old or more, at `now`.
    fn due(&self, now: Instant) -> Vec<(u64, Arc<RedisKey>, String, Duration)> {
        self.held
            .lock()
            .iter()
            .filter(|(_, lease)| now.duration_since(lease.renewed) >= lease.lease / 3)
            .map(|(&number, lease)| {
                (
                    number,
                    Arc::clone(&lease.key),
                    lease.member.clone(),
                    lease.lease,
                )
            })
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
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let inner = Arc::clone(&self.inner);
        runtime.spawn(async move {
            for (key, member) in leases {
                let mut command = redis::cmd("ZREM");
                command.arg(&key.name).arg(&member);
                if let Err(error) = inner.command::<u64>(command).await {
                    tracing::debug!(%error, "could not give a slot back: its lease expires");
                }
            }
        });
    }
}

/// The slots of one call: their keys' positions among the request's, and their leases.
struct Call {
    positions: SmallVec<[usize; 2]>,
    holder: Holder,
    keys: SmallVec<[Arc<RedisKey>; 2]>,
    args: Vec<String>,
}

impl RedisStore {
    /// Takes `slots` for one request, as leases (see the module docs).
    pub(super) fn take_leases(&self, slots: &[SlotCheck<'_>]) -> TakingSlots {
        if !self.inner.breaker.allows() {
            return Box::pin(std::future::ready(Err(StoreError::new(
                "redis is failing: calls are paused (circuit breaker)",
                "circuit open",
            ))));
        }
        self.start_renewing();
        let mut calls: Vec<(u16, Call)> = Vec::new();
        for (position, slot) in slots.iter().enumerate() {
            let key = Arc::new(RedisKey::lease(&self.inner.prefix, slot));
            let cluster_slot = if self.inner.is_cluster() { key.slot } else { 0 };
            let at = match calls.iter().position(|(s, _)| *s == cluster_slot) {
                Some(at) => at,
                None => {
                    calls.push((
                        cluster_slot,
                        Call {
                            positions: SmallVec::new(),
                            holder: Holder {
                                inner: Arc::clone(&self.inner),
                                numbers: SmallVec::new(),
                            },
                            keys: SmallVec::new(),
                            args: Vec::new(),
                        },
                    ));
                    calls.len() - 1
                }
            };
            let call = &mut calls[at].1;
            let (number, member) = self.inner.leases.hold(&key, slot.lease);
            let lease_ms = u64::try_from(slot.lease.as_millis()).unwrap_or(u64::MAX);
            call.positions.push(position);
            call.holder.numbers.push(number);
            call.args.extend([
                slot.max_in_flight.to_string(),
                u8::from(slot.shadow).to_string(),
                lease_ms.to_string(),
                member,
            ]);
            call.keys.push(key);
        }
        let inner = Arc::clone(&self.inner);
        let count = slots.len();
        Box::pin(async move {
            let replies = futures_util::future::join_all(calls.iter().map(|(_, call)| {
                let keys: SmallVec<[&[u8]; 2]> =
                    call.keys.iter().map(|key| &key.name[..]).collect();
                let args: Vec<Arg<'_>> = std::iter::once(Arg::Text(""))
                    .chain(call.args.iter().map(|arg| Arg::Text(arg)))
                    .collect();
                let inner = &inner;
                async move { inner.call::<Vec<i64>>(Entry::TakeSlots, &keys, &args).await }
            }))
            .await;
            let mut counts = vec![
                SlotCount {
                    in_flight: 0,
                    taken: false,
                };
                count
            ];
            let mut all_taken = true;
            let mut failure = None;
            for ((_, call), reply) in calls.iter().zip(&replies) {
                match reply {
                    Ok(reply) if reply.len() == call.positions.len() + 1 => {
                        all_taken &= reply[0] == 1;
                        for (&position, &held) in call.positions.iter().zip(&reply[1..]) {
                            counts[position].in_flight = u32::try_from(held).unwrap_or(u32::MAX);
                        }
                    }
                    Ok(reply) => {
                        failure = Some(StoreError::new(
                            format!("take_slots answered {} numbers", reply.len()),
                            "bad reply",
                        ));
                    }
                    Err(error) => failure = Some(error.copied()),
                }
            }
            let mut holders = Vec::with_capacity(calls.len());
            for ((_, call), reply) in calls.into_iter().zip(&replies) {
                match reply {
                    Ok(reply) if reply.first() == Some(&0) => call.holder.forget(),
                    // Taken, or failed: it may have taken them before its answer was lost.
                    _ => holders.push(call.holder),
                }
            }
            if let Some(error) = failure {
                // Dropped, the holders give back what they may hold.
                drop(holders);
                return Err(error);
            }
            if !all_taken {
                drop(holders);
                return Ok(TakenSlots::new(counts, Leases::none()));
            }
            for count in &mut counts {
                count.taken = true;
            }
            Ok(TakenSlots::new(counts, Leases::new(holders)))
        })
    }

    /// Starts the task that renews this store's leases, unless it runs.
    fn start_renewing(&self) {
        let leases = &self.inner.leases;
        if leases.renewing.load(Ordering::Relaxed) || leases.renewing.swap(true, Ordering::AcqRel) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(renew(Arc::downgrade(&self.inner)));
            }
            Err(_) => leases.renewing.store(false, Ordering::Release),
        }
    }
}

/// The renewing task: every tick, renews the leases due, while the store lives.
async fn renew(inner: Weak<Inner>) {
    let _stopped = Stopped(inner.clone());
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
            let keys: Vec<&[u8]> = batch.iter().map(|(_, key, ..)| &key.name[..]).collect();
            let texts: Vec<String> = batch
                .iter()
                .flat_map(|(_, _, member, lease)| {
                    let ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
                    [ms.to_string(), member.clone()]
                })
                .collect();
            let args: Vec<Arg<'_>> = std::iter::once(Arg::Text(""))
                .chain(texts.iter().map(|text| Arg::Text(text)))
                .collect();
            match inner.call::<i64>(Entry::RenewSlots, &keys, &args).await {
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

/// Marks the task stopped however it ends (its store dropped, or its runtime shut down), so
/// that the next request starts another.
struct Stopped(Weak<Inner>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.leases.renewing.store(false, Ordering::Release);
        }
    }
}
