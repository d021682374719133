//! The Redis store: see [`RedisStore`].

mod breaker;
mod builder;
mod call;
mod coalesce;
mod denials;
mod errors;
mod keys;
mod layout;
mod leases;
mod program;
mod sentinel;
mod slots;
mod synced;
mod ticks;
mod tls;

use super::{
    sealed, Acquisition, CarriedFrom, Decisions, LimitCheck, Resetting, Settling, SlotCheck, Store,
    StoreError, StoreErrorKind, TakingSlots,
};
use crate::algorithm::{Algorithm, Decision, Quota};
use crate::clock::{saturating_nanos, Clock, Nanos};
use breaker::Breaker;
pub use builder::RedisStoreBuilder;
use builder::Topology;
use coalesce::Coalescer;
use denials::Denials;
use errors::{circuit_open, redis_error, timeout_error};
use keys::RedisKey;
use layout::Layout;
use program::{Entry, Program};
use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::RedisError;
use smallvec::SmallVec;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use ticks::{clamped_cost, Tick};

/// Limit state in Redis, shared by every server of a fleet (feature `redis`).
///
/// All the limits of one request are decided by one call of a Lua function (`FCALL`; the
/// store loads its library of functions into Redis, and again by itself after a `FUNCTION
/// FLUSH`; a Redis before 7 runs the same text as scripts), atomically and all or nothing, with the same
/// arithmetic as the in-memory store. Time comes from Redis (`TIME`), so servers whose clocks
/// disagree still agree on every limit. Keys are hashes of bounded size, whatever clients
/// send, and expire by themselves once their state is back to "never seen".
///
/// On a Redis Cluster ([`RedisStore::cluster_builder`]), keys spread over the masters by who
/// is limited (their [tag](LimitCheck::tag)): the limits of one client share a slot and are
/// one call. A request whose limits are in several slots is one call per slot, sent
/// together, and stays all or nothing: when one slot denies, what the others charged is given
/// back before the request is answered (see the [operations guide](crate::guide::operations)).
///
/// The slots of [concurrency limits](crate::guide::rules#concurrency) are leases in Redis,
/// shared by the fleet: renewed by the store while their requests run, given back when
/// they end, expired when their server dies.
///
/// Every call has a timeout (50 ms by default). After a run of failures a circuit breaker
/// stops calling Redis for a while, so a Redis outage costs each request at most the timeout,
/// then nothing; what happens to the request is each limit's `on_store_error` policy. Keys
/// Redis reported full are denied locally until they free up, without a round trip (Redis is
/// asked again every second, so that what changed there is seen).
///
/// # Background tasks
///
/// The store's connections run on the Tokio runtime that awaited
/// [`connect`](RedisStoreBuilder::connect), and so do its tasks that outlive a request,
/// wherever its requests come from (another runtime, a thread outside any): keep that
/// runtime running for as long as the store is used. There are three: the sync of
/// [local-first limits](crate::guide::rules#local-first-limits-sync_every), started by the
/// first request with one, every shortest `sync_every`; the renewal of the leases of
/// [concurrency limits](crate::guide::rules#concurrency), started by the first request that
/// takes a slot, every 100 ms; behind sentinels, the search for a master lost, until found.
/// They hold the store only while they work: once its last clone is dropped, its
/// connections close and each task ends at its next tick. Before a planned stop, call
/// [`sync_now`](RedisStore::sync_now), then drop the store (see the operations guide's
/// [background work](crate::guide::operations#background-work)).
///
/// ```no_run
/// use tollgate::store::RedisStore;
/// use tollgate::{rules::Rules, Limiter, RateLimitLayer};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::builder("redis://127.0.0.1:6379").key_prefix("api:").connect().await?;
/// let layer = RateLimitLayer::new(Limiter::with_store(Rules::from_file("rules.yaml")?, store));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    connection: Connection,
    /// The library of functions (or scripts) that the calls run.
    program: Program,
    /// The requests waiting for a call, on a single server (none on a cluster).
    coalescer: Option<Coalescer>,
    /// Whether fixed windows and logs are kept as text (`legacy_layout`).
    legacy_layout: bool,
    prefix: String,
    timeout: Duration,
    /// Shared with a connection behind sentinels, which ends its cooldown on a new master.
    breaker: Arc<Breaker>,
    denials: Option<Denials>,
    clock: Arc<dyn Clock>,
    /// The origin of the monotonic time of the over-limit cache.
    started: std::time::Instant,
    /// Whether `clock` is a test clock whose time the scripts use instead of Redis's.
    clock_overrides_redis: bool,
    /// Whether a limit that Redis cannot hold was reported (once per store).
    reported_unfit: AtomicBool,
    /// The local-first limits.
    synced: synced::Synced,
    /// The slots of concurrency limits this store holds.
    leases: leases::LeaseBook,
    /// The runtime that connected the store, where its connections and its tasks that
    /// outlive a request run.
    runtime: tokio::runtime::Handle,
}

impl Inner {
    /// The time of the over-limit cache: the test clock, or a monotonic one (immune to
    /// wall-clock steps).
    fn local_now(&self) -> Nanos {
        if self.clock_overrides_redis {
            self.clock.now()
        } else {
            Nanos::new(saturating_nanos(self.started.elapsed()))
        }
    }

    /// Whether keys spread over the slots of a Redis Cluster.
    fn is_cluster(&self) -> bool {
        matches!(self.connection, Connection::Cluster(_))
    }

    /// What the scripts take as now: "" for Redis's own clock, or the test clock's time.
    fn script_now(&self) -> Result<String, StoreError> {
        if !self.clock_overrides_redis {
            return Ok(String::new());
        }
        let now = self.clock.now().as_u64();
        if now >= ticks::TEST_CLOCK_LIMIT_NS {
            return Err(StoreError::new(
                StoreErrorKind::Configuration,
                "a test clock for the Redis store must stay below 2^52 ns",
            ));
        }
        Ok(now.to_string())
    }

    fn base_ns(&self) -> u64 {
        if self.clock_overrides_redis {
            1
        } else {
            1_000
        }
    }

    /// Runs `task`, one request's work that ends with its call, on the runtime the request
    /// runs on (where it waits for the answer), or on the store's outside any.
    fn spawn_for_request(&self, task: impl Future<Output = ()> + Send + 'static) {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime.spawn(task),
            Err(_) => self.runtime.spawn(task),
        };
    }

    fn report_unfit(&self, error: &StoreError) {
        if !self.reported_unfit.swap(true, Ordering::Relaxed) {
            tracing::error!(%error, "a limit cannot be decided by Redis: its on_store_error policy applies");
        }
    }
}

#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    /// The master named by Redis Sentinel, followed through failovers.
    Sentinel(sentinel::SentinelConnection),
}

impl redis::aio::ConnectionLike for Connection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Connection::Single(connection) => connection.req_packed_command(cmd),
            Connection::Cluster(connection) => connection.req_packed_command(cmd),
            Connection::Sentinel(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Connection::Single(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
            Connection::Cluster(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
            Connection::Sentinel(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(connection) => connection.get_db(),
            Connection::Cluster(connection) => connection.get_db(),
            Connection::Sentinel(connection) => connection.get_db(),
        }
    }
}

impl RedisStore {
    /// Starts configuring a store on one Redis server, e.g. `redis://127.0.0.1:6379`.
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder::new(vec![url.into()], Topology::Server)
    }

    /// Starts configuring a store on a Redis Cluster, given some of its nodes.
    pub fn cluster_builder<I, S>(nodes: I) -> RedisStoreBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RedisStoreBuilder::new(
            nodes.into_iter().map(Into::into).collect(),
            Topology::Cluster,
        )
    }

    /// Starts configuring a store on the master that Redis Sentinel knows as `master_name`,
    /// given some of its sentinels' URLs (`redis://host:26379`; `rediss://` over TLS, and
    /// `redis://:password@host:26379` for sentinels that ask for one).
    ///
    /// The store asks the sentinels for the master's address when it connects, and again
    /// when the master is lost (a call's connection drops or is refused, a call times out,
    /// or the server answers `READONLY`): after a failover, calls reach the promoted replica
    /// as soon as the sentinels name it. Meanwhile calls fail, within the timeout, and each
    /// limit's `on_store_error` decides (see the
    /// [operations guide](crate::guide::operations#redis-sentinel)).
    ///
    /// ```no_run
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), tollgate::store::StoreError> {
    /// let store = RedisStore::sentinel_builder(
    ///     "mymaster",
    ///     ["redis://10.0.0.5:26379", "redis://10.0.0.6:26379", "redis://10.0.0.7:26379"],
    /// )
    /// .connect()
    /// .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn sentinel_builder<I, S>(
        master_name: impl Into<String>,
        sentinel_urls: I,
    ) -> RedisStoreBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let master = master_name.into();
        let sentinels = sentinel_urls.into_iter().map(Into::into).collect();
        RedisStoreBuilder::new(sentinels, Topology::Sentinel { master })
    }
}

/// The largest sliding window log the store keeps: it holds one sorted set member a request
/// (about 70 KB of Redis's memory a client at this size), and, kept as text
/// (`legacy_layout`), is read and written whole on every request (about 1.5 ms of Redis's
/// time at this size).
const MAX_LOG_LIMIT: u64 = 1_000;

/// One check as the library takes it.
struct Planned {
    key: RedisKey,
    layout: Layout,
    args: [i64; 12],
    /// The keys its key's state is carried from (see [`LimitCheck::carried_from`]).
    carried: Vec<PlannedCarry>,
}

/// A key a check's state is carried from, as `acquire` takes it.
struct PlannedCarry {
    key: RedisKey,
    /// Algorithm, ticks per base unit, limit, period, burst, queue, max_delay, shaping.
    args: [i64; 8],
}

impl Planned {
    /// Whether the limit only reports.
    fn shadow(&self) -> bool {
        self.args[9] & SHADOW != 0
    }

    /// Whether the limit is only checked, never charged.
    fn check_only(&self) -> bool {
        self.args[9] & CHECK_ONLY != 0
    }

    /// The decision from the first seven numbers `acquire` answered for this check.
    fn decision(&self, values: &[i64]) -> Decision {
        let tick = self.layout.tick;
        let duration =
            |value: i64| Duration::from_nanos(tick.nanos_of(u64::try_from(value).unwrap_or(0)));
        Decision {
            allowed: values[0] == 1,
            capacity: u64::try_from(values[1]).unwrap_or(0),
            remaining: u64::try_from(values[2]).unwrap_or(0),
            reset_after: duration(values[3]),
            retry_after: duration(values[4]),
            delay: duration(values[5]),
            booked_until: u64::try_from(values[6])
                .ok()
                .map(|ticks| Nanos::new(tick.nanos_of(ticks))),
        }
    }

    /// The library's function that decides this check, a request's only one, without the
    /// lists of `acquire`, when one can, and what it takes after now. Each decides one limit
    /// in ticks of the base unit, charged when admitted, carried from nothing:
    /// `acquire_counter` a fixed window kept as one integer whose answer fits a double
    /// (period, limit, cost, ticks per ms), `acquire_token_bucket` a token bucket (period,
    /// limit, burst, cost, ticks per ms), `acquire_log` a log kept as a sorted set (period,
    /// limit, cost, ticks per ms), of a limit above 0.
    fn single_limit_call(&self) -> Option<(Entry, SmallVec<[i64; 5]>)> {
        let a = &self.args;
        if self.shadow() || self.check_only() || !self.carried.is_empty() {
            return None;
        }
        if self.layout.is_window() && a[5] >= 0 {
            // A calendar's window, which `acquire_counter` does not take.
            return None;
        }
        let period = u64::try_from(a[3]).unwrap_or(u64::MAX);
        if self.layout.counter_answers_in_one_number(period) {
            return Some((
                Entry::AcquireCounter,
                SmallVec::from_slice(&[a[3], a[2], a[8], a[10]]),
            ));
        }
        if self.layout.tick.per_base != 1 || a[2] <= 0 {
            return None;
        }
        match self.layout.code {
            layout::TOKEN_BUCKET => Some((
                Entry::AcquireTokenBucket,
                SmallVec::from_slice(&[a[3], a[2], a[4], a[8], a[10]]),
            )),
            layout::LOG_SET => Some((
                Entry::AcquireLog,
                SmallVec::from_slice(&[a[3], a[2], a[8], a[10]]),
            )),
            _ => None,
        }
    }

    /// The decision `acquire_counter` answered for this check: `until_next × scale + code`,
    /// `code` the window's count after the request when admitted (at most the limit), else
    /// the limit and one more than the count before it.
    fn counter_decision(&self, reply: i64) -> Decision {
        let [_, _, limit, period, scale, ..] = self.args.map(|a| u64::try_from(a).unwrap_or(0));
        let cost = u64::try_from(self.args[8]).unwrap_or(0);
        let reply = u64::try_from(reply).unwrap_or(0);
        let (until_next, code) = (reply / scale.max(1), reply % scale.max(1));
        let allowed = code <= limit;
        let count = if allowed { code } else { code - limit - 1 };
        let tick = self.layout.tick;
        let ticks = |ticks: u64| Duration::from_nanos(tick.nanos_of(ticks));
        let retry_after = match () {
            _ if allowed => 0,
            _ if cost > limit => period,
            _ => until_next,
        };
        Decision {
            allowed,
            capacity: limit,
            remaining: limit.saturating_sub(count),
            reset_after: ticks(if count > 0 { until_next } else { 0 }),
            retry_after: ticks(retry_after),
            delay: Duration::ZERO,
            booked_until: None,
        }
    }

    /// The decision `acquire_token_bucket` or `acquire_log` answered for this check: what
    /// remains (`-1 -` what remains, refused), reset_after, retry_after.
    fn single_limit_decision(&self, values: &[i64; 3]) -> Decision {
        let tick = self.layout.tick;
        let ticks =
            |value: i64| Duration::from_nanos(tick.nanos_of(u64::try_from(value).unwrap_or(0)));
        let allowed = values[0] >= 0;
        let remaining = if allowed { values[0] } else { -1 - values[0] };
        // A token bucket admits its burst at once, a log its limit.
        let capacity = if self.layout.code == layout::TOKEN_BUCKET {
            self.args[4]
        } else {
            self.args[2]
        };
        Decision {
            allowed,
            capacity: u64::try_from(capacity).unwrap_or(0),
            remaining: u64::try_from(remaining).unwrap_or(0),
            reset_after: ticks(values[1]),
            retry_after: ticks(values[2]),
            delay: Duration::ZERO,
            booked_until: None,
        }
    }

    /// What `refund` takes to give back this check's charge, filed at `mark`: algorithm,
    /// ticks per base unit, limit, period, burst, cost, mark.
    fn refund_args(&self, mark: i64) -> [i64; 7] {
        let a = &self.args;
        [a[0], a[1], a[2], a[3], a[4], a[8], mark]
    }
}

impl Inner {
    /// Sends `command` (no timeout: the caller's).
    async fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> Result<T, RedisError> {
        command.query_async(&mut self.connection.clone()).await
    }
}

impl Inner {
    /// Deletes `keys`, in one call per slot (one call on a single server), sent together,
    /// each within the timeout; how many existed.
    async fn delete(&self, keys: &[RedisKey]) -> Result<u64, StoreError> {
        let mut slots: Vec<u16> = keys.iter().map(|key| key.slot).collect();
        slots.sort_unstable();
        slots.dedup();
        if !self.is_cluster() {
            slots.truncate(1);
        }
        let calls = slots.iter().map(|&slot| {
            let mut command = redis::cmd("DEL");
            for key in keys {
                if !self.is_cluster() || key.slot == slot {
                    command.arg(&key.name);
                }
            }
            self.command::<u64>(command)
        });
        let mut deleted = 0;
        for result in futures_util::future::join_all(calls).await {
            deleted += result?;
        }
        Ok(deleted)
    }

    /// Sends `command`, within the timeout.
    async fn command<T: redis::FromRedisValue>(
        &self,
        command: redis::Cmd,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout, self.query(&command)).await {
            Ok(result) => result.map_err(|error| redis_error("the Redis command failed", error)),
            Err(_) => Err(timeout_error(self.timeout)),
        }
    }
}

/// The decision reported for a limit Redis was not asked about (another denied): it had room
/// as far as this request knows; the request is denied anyway.
fn unasked(check: &LimitCheck<'_>) -> Decision {
    Decision {
        allowed: true,
        capacity: check.quota.requests_per_period(),
        remaining: 0,
        reset_after: Duration::ZERO,
        retry_after: Duration::ZERO,
        delay: Duration::ZERO,
        booked_until: None,
    }
}

pub(super) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl RedisStore {
    /// Whether this store can keep a limit decided by `algorithm` under `quota`, and why
    /// not: a sliding window log of more than 1,000 requests (it keeps every request), or
    /// numbers too large for the scripts' exact arithmetic (a
    /// very large limit over a very long period). A request with such a limit is a store
    /// error, which its limits' `on_store_error` policies decide: a rate limit service
    /// checks the quotas its calls bring with it first.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, Quota};
    /// use tollgate::store::RedisStore;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let store = RedisStore::builder("redis://127.0.0.1:6379").connect().await?;
    /// let log = Quota::new(5_000, Duration::from_secs(60))?;
    /// assert!(store.holds(Algorithm::SlidingWindowLog, &log).is_err());
    /// assert!(store.holds(Algorithm::SlidingWindowCounter, &log).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// The reason, when the store cannot keep such a limit.
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    pub fn holds(&self, algorithm: Algorithm, quota: &Quota) -> Result<(), StoreError> {
        self.tick_for(algorithm, quota).map(drop)
    }

    /// The tick a limit decided by `algorithm` under `quota` is kept in (see
    /// [`RedisStore::holds`]).
    fn tick_for(&self, algorithm: Algorithm, quota: &Quota) -> Result<Tick, StoreError> {
        if algorithm == Algorithm::SlidingWindowLog && quota.requests_per_period() > MAX_LOG_LIMIT {
            let message = format!(
                "a sliding_window_log of {} is too large for Redis, which keeps every request of its window (at most {MAX_LOG_LIMIT}; sliding_window_counter scales)",
                quota.requests_per_period()
            );
            return Err(StoreError::new(StoreErrorKind::Unsupported, message));
        }
        Tick::choose(algorithm, quota, self.inner.base_ns()).ok_or_else(|| {
            let message = format!(
                "the limit `{}` per {:?} is too large for the Redis store's exact arithmetic",
                quota.requests_per_period(),
                quota.period()
            );
            StoreError::new(StoreErrorKind::Unsupported, message)
        })
    }

    fn plan(&self, check: &LimitCheck<'_>) -> Result<Planned, StoreError> {
        let quota = check.quota;
        let layout = self.layout(check.algorithm, quota)?;
        let key = RedisKey::of(&self.inner.prefix, check, layout);
        let carried: Vec<PlannedCarry> = check
            .carried_from
            .iter()
            .filter_map(|from| self.plan_carry(check, from))
            // One call holds keys of one slot: a key elsewhere is not carried.
            .filter(|carry| !self.inner.is_cluster() || carry.key.slot == key.slot)
            .collect();
        let [code, per_base, limit, period, burst, queue, max_delay, shaping] =
            quota_args(layout, quota, || self.inner.clock.now());
        let args = [
            code,
            per_base,
            limit,
            period,
            burst,
            queue,
            max_delay,
            shaping,
            int(clamped_cost(check.cost, check.algorithm, quota)),
            flags(check),
            layout.tick.per_ms(),
            int(carried.len() as u64),
        ];
        Ok(Planned {
            key,
            layout,
            args,
            carried,
        })
    }

    /// How a limit decided by `algorithm` under `quota` is kept (see [`RedisStore::holds`]).
    fn layout(&self, algorithm: Algorithm, quota: &Quota) -> Result<Layout, StoreError> {
        let tick = self.tick_for(algorithm, quota)?;
        Ok(Layout::of(algorithm, quota, tick, self.inner.legacy_layout))
    }

    /// `from`, a key `check`'s state is carried from, as `library.lua` takes it; `None`
    /// when no tick fits its old limit (no state could have been kept under it).
    fn plan_carry(&self, check: &LimitCheck<'_>, from: &CarriedFrom) -> Option<PlannedCarry> {
        let layout = self.layout(from.algorithm(), from.quota()).ok()?;
        Some(PlannedCarry {
            key: RedisKey::carried(&self.inner.prefix, check, from, layout),
            args: quota_args(layout, from.quota(), || self.inner.clock.now()),
        })
    }
}

/// What `library.lua` takes of a limit under `quota`, kept as `layout` says: its algorithm's
/// code, ticks per base unit, limit, period, burst (a counter's scale), queue, max_delay
/// (-1: none), shaping. A fixed window takes no queue or delay: in their place, the number
/// of its calendar's window at `now` and that window's end in ticks (-1 and -1 without a
/// calendar: the window is Redis's, of its own clock). The server's clock (`now`, read only
/// for a calendar) numbers a
/// calendar's window, as it alone knows the time zone: at a window's edge, servers whose
/// clocks disagree may count one request in either window.
fn quota_args(layout: Layout, quota: &Quota, now: impl FnOnce() -> Nanos) -> [i64; 8] {
    let tick = layout.tick;
    let (queue, max_delay) = match (layout.is_window(), quota.calendar()) {
        (true, Some(_)) => {
            let window = quota.window_at(now());
            (
                int(window),
                int(tick.count(quota.window_end(window).as_u64())),
            )
        }
        (true, None) => (-1, -1),
        (false, _) => (
            int(quota.queue()),
            quota
                .max_delay()
                .map_or(-1, |d| int(tick.count(saturating_nanos(d)))),
        ),
    };
    [
        layout.code,
        int(tick.per_base),
        int(quota.requests_per_period()),
        int(tick.count(quota.period_nanos())),
        int(layout.scale.unwrap_or(quota.burst())),
        queue,
        max_delay,
        i64::from(quota.is_shaping()),
    ]
}

/// The flag of a shadow limit's check in `acquire`'s arguments.
const SHADOW: i64 = 1;
/// The flag of a check that is never charged.
const CHECK_ONLY: i64 = 2;

/// The flags of `check`, as `acquire` reads them.
fn flags(check: &LimitCheck<'_>) -> i64 {
    let flag = |set: bool, flag: i64| if set { flag } else { 0 };
    flag(check.shadow, SHADOW) | flag(check.check_only, CHECK_ONLY)
}

/// A [`LimitCheck`] that a future can keep.
struct OwnedCheck {
    domain: String,
    key: Vec<u8>,
    tag: Vec<u8>,
    algorithm: Algorithm,
    quota: Quota,
    cost: u64,
    shadow: bool,
    check_only: bool,
    sync_every: Option<Duration>,
    limit: String,
    approximate: Option<super::Approximate>,
    carried_from: Vec<super::CarriedFrom>,
}

impl From<&LimitCheck<'_>> for OwnedCheck {
    fn from(check: &LimitCheck<'_>) -> Self {
        OwnedCheck {
            domain: check.domain.to_owned(),
            key: check.key.to_vec(),
            tag: check.tag.to_vec(),
            algorithm: check.algorithm,
            quota: *check.quota,
            cost: check.cost,
            shadow: check.shadow,
            check_only: check.check_only,
            sync_every: check.sync_every,
            limit: check.limit.to_owned(),
            approximate: check.approximate,
            carried_from: check.carried_from.to_vec(),
        }
    }
}

impl OwnedCheck {
    fn as_check(&self) -> LimitCheck<'_> {
        LimitCheck {
            domain: &self.domain,
            key: &self.key,
            tag: &self.tag,
            algorithm: self.algorithm,
            quota: &self.quota,
            cost: self.cost,
            shadow: self.shadow,
            check_only: self.check_only,
            sync_every: self.sync_every,
            limit: &self.limit,
            approximate: self.approximate,
            carried_from: &self.carried_from,
        }
    }
}

/// The future of a decision from Redis.
#[doc(hidden)]
pub type RedisPending = Pin<Box<dyn Future<Output = Result<Decisions, StoreError>> + Send>>;

impl sealed::Sealed for RedisStore {}

impl Store for RedisStore {
    type Pending = RedisPending;

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    fn acquire(&self, checks: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
        if checks.iter().any(|check| check.sync_every.is_some()) {
            return self.acquire_with_synced(checks);
        }
        self.acquire_exact(checks)
    }

    /// Gives the queue place back in a task of its own, which ends with its call.
    fn cancel(&self, check: &LimitCheck<'_>, booked_until: Nanos) {
        // Local-first limits book no queue places.
        if check.sync_every.is_some() {
            return;
        }
        if let Some(denials) = &self.inner.denials {
            denials.forget(check);
        }
        // While Redis is failing, a cancel would only wait for a timeout.
        if self.inner.breaker.is_open() {
            return;
        }
        let (Ok(planned), Ok(now)) = (self.plan(check), self.inner.script_now()) else {
            return;
        };
        let mark = int(planned.layout.tick.count(booked_until.as_u64()));
        let store = self.clone();
        self.inner.spawn_for_request(async move {
            if let Err(error) = slots::refund(&store.inner, vec![(&planned, mark)], &now).await {
                tracing::debug!(%error, "could not give a queue place back");
            }
        });
    }

    fn settle(&self, check: &LimitCheck<'_>, extra: i64) -> Settling {
        if let Some(denials) = &self.inner.denials {
            denials.forget(check);
        }
        if check.sync_every.is_some() {
            self.settle_synced(check, extra);
            return Box::pin(std::future::ready(Ok(())));
        }
        let (planned, now) = match (self.plan(check), self.inner.script_now()) {
            (Ok(planned), Ok(now)) => (planned, now),
            (Err(error), _) | (_, Err(error)) => return Box::pin(std::future::ready(Err(error))),
        };
        let store = self.clone();
        Box::pin(async move {
            let a = &planned.args;
            let args = a[..8].iter().copied().chain([extra, a[10]]);
            let key = [&planned.key.name[..]];
            // With other calls when the connection is busy, as decisions go.
            store
                .inner
                .decide::<i64>(Entry::Settle, key, &now, args)
                .await
                .map(drop)
        })
    }

    fn take_slots(&self, slots: &[SlotCheck<'_>]) -> Option<TakingSlots> {
        Some(self.take_leases(slots))
    }

    fn reset(&self, checks: &[LimitCheck<'_>]) -> Resetting {
        for check in checks {
            if let Some(denials) = &self.inner.denials {
                denials.forget(check);
            }
        }
        let (synced, exact): (Vec<_>, Vec<_>) =
            checks.iter().partition(|check| check.sync_every.is_some());
        // A local-first key is kept here and in the fleet's totals: reset if either held it.
        let forgotten_here = self.inner.synced.forget(&synced);
        let synced_keys: Vec<RedisKey> = synced
            .iter()
            .flat_map(|check| self.synced_keys_of(check))
            .collect();
        let exact_keys: Vec<RedisKey> =
            exact.iter().flat_map(|check| self.keys_of(check)).collect();
        let store = self.clone();
        Box::pin(async move {
            let exact = store.inner.delete(&exact_keys).await?;
            let synced = store.inner.delete(&synced_keys).await?;
            Ok(exact + synced.max(forgotten_here))
        })
    }
}

impl RedisStore {
    /// The Redis keys that hold `check`'s state: its state key and the keys it is carried
    /// from.
    fn keys_of(&self, check: &LimitCheck<'_>) -> Vec<RedisKey> {
        let Ok(planned) = self.plan(check) else {
            return Vec::new();
        };
        let carried = planned.carried.into_iter().map(|carry| carry.key);
        std::iter::once(planned.key).chain(carried).collect()
    }

    /// The Redis keys of the fleet's totals of `check`, a local-first limit, and of the keys
    /// it is carried from.
    fn synced_keys_of(&self, check: &LimitCheck<'_>) -> Vec<RedisKey> {
        let prefix = &self.inner.prefix;
        let carried = check.carried_from.iter().map(|from| {
            let key = from.key_of(check.key);
            RedisKey::synced_of(prefix, &keys::carried_check(check, from, &key))
        });
        std::iter::once(RedisKey::synced_of(prefix, check))
            .chain(carried)
            .collect()
    }

    /// Decides `checks`, none of them local-first, in Redis.
    fn acquire_exact(&self, checks: &[LimitCheck<'_>]) -> Acquisition<RedisPending> {
        let sent_at = self.inner.local_now();
        // A call that only checks asks how each limit stands, which the cache does not know
        // (it answers for the one limit known full, and nothing of the others).
        let only_checks = checks.iter().all(|check| check.check_only);
        if let Some(decisions) = self
            .inner
            .denials
            .as_ref()
            .filter(|_| !only_checks)
            .and_then(|d| d.answer(checks, sent_at))
        {
            return Acquisition::Ready(Ok(decisions));
        }
        // Checked before the breaker, so that a limit Redis cannot hold uses up no probe.
        let planned: Result<Vec<Planned>, StoreError> =
            checks.iter().map(|check| self.plan(check)).collect();
        let (planned, now) = match (planned, self.inner.script_now()) {
            (Ok(planned), Ok(now)) => (planned, now),
            (Err(error), _) | (_, Err(error)) => {
                self.inner.report_unfit(&error);
                return Acquisition::Ready(Err(error));
            }
        };
        if !self.inner.breaker.allows() {
            return Acquisition::Ready(Err(circuit_open()));
        }
        // What the over-limit cache needs to remember denials, owned for the future.
        let remembered: Option<Vec<OwnedCheck>> = self
            .inner
            .denials
            .is_some()
            .then(|| checks.iter().map(OwnedCheck::from).collect());
        let store = self.clone();
        Acquisition::Pending(Box::pin(async move {
            let decisions = slots::acquire(&store.inner, &planned, &now).await?;
            if let (Some(denials), Some(remembered)) = (&store.inner.denials, &remembered) {
                let checks: Vec<LimitCheck<'_>> =
                    remembered.iter().map(OwnedCheck::as_check).collect();
                // From the time the request was sent: Redis decided later, so a cached denial
                // never outlasts the one Redis gave.
                denials.record(&checks, &decisions, sent_at);
            }
            Ok(decisions)
        }))
    }
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}
