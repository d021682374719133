//! Local-first limits on Redis: decided here from local counts, agreed with the fleet by a
//! background task that sends this server's counts every interval and takes back the fleet's
//! totals (see [`crate::store::sync`]). The first request with a local-first limit starts the
//! task, on the store's runtime; it ends at the tick after the store is dropped.

use super::errors::unexpected_reply;
use super::keys::{Digests, RedisKey};
use super::program::Entry;
use super::{int, unasked, Inner, RedisPending, RedisStore};
use crate::algorithm::Decision;
use crate::clock::saturating_nanos;
use crate::store::sync::{Admission, Bookings, Limit, Outgoing, Payload, SyncTable, Totals};
use crate::store::{Acquisition, Decisions, LimitCheck, StoreError};
use futures_util::future::join_all;
use smallvec::SmallVec;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How many of the shortest intervals a server stays counted without a sync, and the least.
const PRESENT_INTERVALS: u32 = 10;
const PRESENT_AT_LEAST: Duration = Duration::from_secs(1);

/// The local-first part of a [`RedisStore`].
pub(super) struct Synced {
    table: SyncTable<Digests>,
    /// The servers counted at the last sync (at least 1).
    servers: AtomicU64,
    /// Redis's clock minus this server's (ns), from the last sync.
    offset: AtomicI64,
    /// The shortest `sync_every` seen (ns): how often the task wakes.
    tick: AtomicU64,
    /// Whether the task was started (once a store: it ends with the store, or its runtime).
    started: AtomicBool,
    /// Whether the last sync reached Redis: after one that did not, a sync sends one call's
    /// worth of keys, not every key with counts kept (an outage costs one call an interval).
    reached: AtomicBool,
    /// This server's name in the registry.
    id: i64,
    /// Taken for the length of a sync: a sync asked for waits for the one under way, so that
    /// it returns with every key's totals taken back.
    syncing: tokio::sync::Mutex<()>,
}

/// The metric of what the fleet admitted beyond a local-first limit.
#[cfg(feature = "metrics")]
const OVERSHOOT: &str = "tollgate_sync_overshoot";

impl Synced {
    /// Keeping about `max_keys` keys at most.
    pub(super) fn new(max_keys: usize) -> Self {
        // Random: two servers started at once must not share a name.
        let id = RandomState::new()
            .hash_one(std::process::id())
            .to_ne_bytes();
        Synced {
            table: SyncTable::new(max_keys),
            servers: AtomicU64::new(1),
            offset: AtomicI64::new(0),
            tick: AtomicU64::new(u64::MAX),
            started: AtomicBool::new(false),
            reached: AtomicBool::new(true),
            id: i64::from_ne_bytes(id),
            syncing: tokio::sync::Mutex::new(()),
        }
    }
}

impl Synced {
    /// Forgets this server's counts of the local-first `checks` and of the keys they are
    /// carried from; how many keys it kept.
    pub(super) fn forget(&self, checks: &[&LimitCheck<'_>]) -> u64 {
        checks.iter().map(|check| self.table.forget(check)).sum()
    }
}

impl RedisStore {
    /// Decides `checks`, some of them local-first: those here, the others in Redis, all or
    /// nothing. When a local-first limit denies, Redis is not asked.
    pub(super) fn acquire_with_synced(
        &self,
        checks: &[LimitCheck<'_>],
    ) -> Acquisition<RedisPending> {
        let synced = &self.inner.synced;
        let now = self.inner.fleet_now();
        let servers = synced.servers.load(Ordering::Relaxed);
        let mut decisions: SmallVec<[Option<Decision>; 4]> = SmallVec::new();
        let mut admissions: SmallVec<[Admission; 4]> = SmallVec::new();
        let mut exact: SmallVec<[LimitCheck<'_>; 4]> = SmallVec::new();
        let mut denied = false;
        for check in checks {
            let Some(every) = check.sync_every else {
                exact.push(*check);
                decisions.push(None);
                continue;
            };
            self.start_syncing(every);
            let (decision, admission) = synced
                .table
                .acquire(check, now, servers, || Digests::of(check));
            denied |= !check.shadow && !decision.allowed;
            admissions.extend(admission);
            decisions.push(Some(decision));
        }
        if denied || exact.is_empty() {
            if denied {
                self.give_back(&admissions);
            }
            return Acquisition::Ready(Ok(with_unasked(decisions, checks)));
        }
        let shadows: SmallVec<[bool; 4]> = exact.iter().map(|check| check.shadow).collect();
        let finish = move |store: &RedisStore, result: Result<Decisions, StoreError>| {
            // When Redis fails, the request is the exact limits' on_store_error policy's to
            // decide, and the local-first limits that admitted it keep counting it: giving
            // their charges back would let them admit everything while Redis is down.
            let denied = result.as_ref().is_ok_and(|exact| {
                exact
                    .iter()
                    .zip(&shadows)
                    .any(|(decision, &shadow)| !shadow && !decision.allowed)
            });
            if denied {
                store.give_back(&admissions);
            }
            with_exact(decisions, &result?)
        };
        match self.acquire_exact(&exact) {
            Acquisition::Ready(result) => Acquisition::Ready(finish(self, result)),
            Acquisition::Pending(future) => {
                let store = self.clone();
                Acquisition::Pending(Box::pin(async move { finish(&store, future.await) }))
            }
        }
    }

    /// Settles the local-first `check`'s request by `extra` in this server's counts, sent
    /// to the fleet with them.
    pub(super) fn settle_synced(&self, check: &LimitCheck<'_>, extra: i64) {
        let synced = &self.inner.synced;
        let servers = synced.servers.load(Ordering::Relaxed);
        synced
            .table
            .adjust(check, extra, self.inner.fleet_now(), servers);
    }

    fn give_back(&self, admissions: &[Admission]) {
        for admission in admissions {
            self.inner.synced.table.give_back(*admission);
        }
    }

    /// Starts the task that syncs on the store's runtime, unless it was started, and makes
    /// it wake at least every `every`.
    fn start_syncing(&self, every: Duration) {
        let synced = &self.inner.synced;
        let every = saturating_nanos(every);
        // Read first: a write on every request would bounce the line between cores.
        if every < synced.tick.load(Ordering::Relaxed) {
            synced.tick.fetch_min(every, Ordering::Relaxed);
        }
        if synced.started.load(Ordering::Relaxed) || synced.started.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.runtime.spawn(run(Arc::downgrade(&self.inner)));
    }

    /// The number of keys of local-first limits this server keeps in memory: at most about
    /// [`max_keys`](super::RedisStoreBuilder::max_keys).
    pub fn local_first_keys(&self) -> usize {
        self.inner.synced.table.len()
    }

    /// Sends this server's counts of local-first limits to Redis now and takes back the
    /// fleet's totals, instead of at the next interval: before a server stops, so that the
    /// fleet loses none of its counts (a server that dies loses at most one interval's).
    ///
    /// ```no_run
    /// # async fn run(store: tollgate::store::RedisStore) {
    /// // The server stopped taking requests (and dropped its layer's clone of the store).
    /// if let Err(error) = store.sync_now().await {
    ///     tracing::warn!(%error, "this server's last counts are lost");
    /// }
    /// drop(store); // its tasks end, its connections close
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// When Redis could not be reached: the counts are kept, to be sent at the next interval.
    pub async fn sync_now(&self) -> Result<(), StoreError> {
        let probing = !self.inner.synced.reached.load(Ordering::Relaxed);
        sync(&self.inner, true).await?;
        if probing {
            // That one reached Redis again with one call's worth of keys: now the others.
            sync(&self.inner, true).await?;
        }
        Ok(())
    }
}

/// The task: syncs every tick while the store lives. It holds the store only for the length
/// of a sync, so that dropping the store's last clone ends it at its next tick.
async fn run(inner: Weak<Inner>) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        if let Err(error) = sync(&strong, false).await {
            tracing::debug!(%error, "local-first limits: sync failed, deciding alone");
        }
        let tick = Duration::from_nanos(strong.synced.tick.load(Ordering::Relaxed));
        drop(strong);
        tokio::time::sleep(tick).await;
    }
}

/// One sync: every key due (every key with new counts, when `force`; one call's worth after
/// a sync that did not reach Redis) and this server's presence, in one call per slot (one
/// call on a single server) of at most [`KEYS_PER_CALL`] keys, sent together.
async fn sync(inner: &Inner, force: bool) -> Result<(), StoreError> {
    let synced = &inner.synced;
    let _turn = synced.syncing.lock().await;
    let now = inner.fleet_now();
    let most = if synced.reached.load(Ordering::Relaxed) {
        usize::MAX
    } else {
        KEYS_PER_CALL
    };
    let mut in_flight = InFlight {
        outgoing: synced.table.due(now, force, most),
        settled: Vec::new(),
        table: &synced.table,
        now,
    };
    in_flight.settled = vec![false; in_flight.outgoing.len()];
    if in_flight.outgoing.is_empty() && synced.table.is_empty() {
        // No local-first limit here (any more): this server is not one of the fleet's.
        return Ok(());
    }
    let script_now = inner.script_now()?;
    let registry = RedisKey::servers(&inner.prefix);
    let calls = plan(inner, &in_flight.outgoing, registry.slot);
    let present = inner.present_for(synced);
    let timeout = inner.timeout.max(SYNC_TIMEOUT);
    let sent_local = inner.clock.now().as_u64();
    let script_now = &script_now;
    let registry = &registry.name;
    let replies = join_all(calls.iter().map(|call| {
        let outgoing = call.members.iter().map(|&i| &in_flight.outgoing[i]);
        // Made for the call: a key keeps only the digests its name is made from.
        let names: Vec<Vec<u8>> = outgoing
            .clone()
            .map(|out| RedisKey::synced(&inner.prefix, &out.limit, &out.key).name)
            .collect();
        let with_registry = call.with_registry;
        let header = [
            i64::from(call.with_registry),
            synced.id,
            present.0,
            present.1,
        ];
        let args: Vec<i64> = header
            .into_iter()
            .chain(outgoing.flat_map(|out| arguments(&out.payload, &out.limit, inner.base_ns())))
            .collect();
        async move {
            let keys = with_registry
                .then_some(registry.as_slice())
                .into_iter()
                .chain(names.iter().map(Vec::as_slice));
            // Apart from the breaker: a sync never holds a request up.
            inner
                .run::<Vec<i64>>(Entry::Sync, keys, script_now, args, timeout)
                .await
        }
    }))
    .await;
    let received_local = inner.clock.now().as_u64();
    let reached = replies
        .iter()
        .any(|reply| !matches!(reply, Err(failure) if failure.unreachable));
    synced.reached.store(reached, Ordering::Relaxed);
    let mut failure = None;
    let mut overshoots: Vec<(usize, u64)> = Vec::new();
    for (call, reply) in calls.iter().zip(replies) {
        let reply = match reply {
            Ok(reply) if reply.len() == 2 + 2 * call.members.len() => reply,
            Ok(reply) => {
                let got = format_args!("{} numbers", reply.len());
                failure = Some(unexpected_reply("a sync", got));
                continue;
            }
            Err(error) => {
                failure = Some(error.error);
                continue;
            }
        };
        if call.with_registry {
            if !inner.clock_overrides_redis {
                let redis_now = u64::try_from(reply[0])
                    .unwrap_or(0)
                    .saturating_mul(inner.base_ns());
                let midpoint = sent_local / 2 + received_local / 2;
                let offset = i128::from(redis_now) - i128::from(midpoint);
                synced
                    .offset
                    .store(i64::try_from(offset).unwrap_or_default(), Ordering::Relaxed);
            }
            if let Ok(servers @ 1..) = u64::try_from(reply[1]) {
                synced.servers.store(servers, Ordering::Relaxed);
            }
        }
        for (&i, values) in call.members.iter().zip(reply[2..].chunks(2)) {
            let totals = totals(&in_flight.outgoing[i].payload, values, inner.base_ns());
            let over = in_flight.settle(i, totals);
            let limit = &in_flight.outgoing[i].limit;
            match overshoots
                .iter_mut()
                .find(|(j, _)| same_limit(&in_flight.outgoing[*j].limit, limit))
            {
                Some((_, most)) => *most = (*most).max(over),
                None => overshoots.push((i, over)),
            }
        }
    }
    for (i, over) in overshoots {
        report_overshoot(&in_flight.outgoing[i].limit, over);
    }
    failure.map_or(Ok(()), Err)
}

/// The most keys in one call: about 5 ms of Redis's time.
const KEYS_PER_CALL: usize = 500;

/// The longest a sync call may take (the store's timeout, if longer): it holds no request
/// up, and one that times out after Redis applied it counts twice.
const SYNC_TIMEOUT: Duration = Duration::from_secs(1);

/// One call of a sync: whether it carries the registry, and which outgoing keys.
struct Call {
    with_registry: bool,
    members: Vec<usize>,
}

/// The calls that send `outgoing`: by slot (one slot on a single server), the registry's
/// first and with the registry, at most [`KEYS_PER_CALL`] keys each.
fn plan(inner: &Inner, outgoing: &[Outgoing<Digests>], registry_slot: u16) -> Vec<Call> {
    let mut groups: Vec<(u16, Vec<usize>)> = vec![(registry_slot, Vec::new())];
    for (i, out) in outgoing.iter().enumerate() {
        let slot = if inner.is_cluster() {
            out.key.slot()
        } else {
            registry_slot
        };
        match groups.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, group)) => group.push(i),
            None => groups.push((slot, vec![i])),
        }
    }
    let mut calls = Vec::new();
    for (_, group) in groups {
        if group.is_empty() {
            calls.push(Call {
                with_registry: calls.is_empty(),
                members: Vec::new(),
            });
        }
        for chunk in group.chunks(KEYS_PER_CALL) {
            calls.push(Call {
                with_registry: calls.is_empty(),
                members: chunk.to_vec(),
            });
        }
    }
    calls
}

/// What a sync sent and has not settled yet: whatever ends the sync (an answer, an error,
/// the sync's future dropped), what was not answered is kept, to be sent again.
struct InFlight<'t> {
    outgoing: Vec<Outgoing<Digests>>,
    settled: Vec<bool>,
    table: &'t SyncTable<Digests>,
    now: u64,
}

impl InFlight<'_> {
    /// Takes the fleet's totals for outgoing key `i`; by how much the fleet is over its limit.
    fn settle(&mut self, i: usize, totals: Totals) -> u64 {
        self.settled[i] = true;
        self.table
            .settle(&self.outgoing[i], Some(totals), self.now)
            .unwrap_or(0)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        for (out, &settled) in self.outgoing.iter().zip(&self.settled) {
            if !settled {
                self.table.settle(out, None, self.now);
            }
        }
    }
}

/// Whether two limits are one as metrics name them (a reload may have changed its quota).
fn same_limit(a: &Limit, b: &Limit) -> bool {
    a.label == b.label && a.domain == b.domain
}

/// Reports by how many requests the fleet was over a limit, the most among its keys synced.
fn report_overshoot(limit: &Limit, over: u64) {
    if over > 0 {
        tracing::debug!(domain = %limit.domain, limit = %limit.label, over, "local-first limit: the fleet admitted beyond the limit");
    }
    #[cfg(feature = "metrics")]
    {
        let labels = [
            ("domain", limit.domain.to_string()),
            ("limit", limit.label.to_string()),
        ];
        #[allow(clippy::cast_precision_loss)] // Counts of requests, far below 2^52.
        metrics::gauge!(OVERSHOOT, &labels).set(over as f64);
    }
}

/// What the library's `sync` takes for one key of `limit`: kind, ms to keep, and five numbers.
fn arguments(payload: &Payload, limit: &Limit, base_ns: u64) -> [i64; 7] {
    let keep_ms = int(limit.keep() / 1_000_000);
    match *payload {
        Payload::Windows {
            added: [(current, current_count), (previous, previous_count)],
        } => [
            1,
            keep_ms,
            int(current),
            int(current),
            current_count,
            int(previous),
            previous_count,
        ],
        Payload::Schedule(Bookings { after, add }) => [
            2,
            keep_ms,
            int(after / base_ns),
            int(add.div_ceil(base_ns)),
            0,
            0,
            0,
        ],
    }
}

/// What the library's `sync` answered for one key.
fn totals(payload: &Payload, values: &[i64], base_ns: u64) -> Totals {
    let count = |value: i64| u64::try_from(value).unwrap_or(0);
    match payload {
        Payload::Windows { .. } => Totals::Windows {
            current: count(values[0]),
            previous: count(values[1]),
        },
        Payload::Schedule(_) => Totals::Schedule {
            tat: count(values[0]).saturating_mul(base_ns),
        },
    }
}

impl Inner {
    /// The fleet's time: this server's clock, corrected by Redis's at the last sync.
    pub(super) fn fleet_now(&self) -> u64 {
        let offset = self.synced.offset.load(Ordering::Relaxed);
        self.clock.now().as_u64().saturating_add_signed(offset)
    }

    /// How long a server stays counted without a sync: in base units, and in ms.
    fn present_for(&self, synced: &Synced) -> (i64, i64) {
        let tick = Duration::from_nanos(synced.tick.load(Ordering::Relaxed));
        let present = tick.saturating_mul(PRESENT_INTERVALS).max(PRESENT_AT_LEAST);
        let base = saturating_nanos(present) / self.base_ns();
        (
            int(base),
            i64::try_from(present.as_millis()).unwrap_or(i64::MAX),
        )
    }
}

/// The local decisions, with [`unasked`] ones for the exact checks.
fn with_unasked(
    decisions: SmallVec<[Option<Decision>; 4]>,
    checks: &[LimitCheck<'_>],
) -> Decisions {
    decisions
        .into_iter()
        .zip(checks)
        .map(|(decision, check)| decision.unwrap_or_else(|| unasked(check)))
        .collect()
}

/// The local decisions, with Redis's for the exact checks in their places.
fn with_exact(
    decisions: SmallVec<[Option<Decision>; 4]>,
    exact: &Decisions,
) -> Result<Decisions, StoreError> {
    let mut exact = exact.iter().copied();
    decisions
        .into_iter()
        .map(|decision| {
            decision
                .or_else(|| exact.next())
                .ok_or_else(|| unexpected_reply("the exact limits", "fewer decisions"))
        })
        .collect()
}
