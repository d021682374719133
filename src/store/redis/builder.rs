//! Configuring and connecting a [`RedisStore`].

use super::breaker::Breaker;
use super::coalesce::Coalescer;
use super::denials::Denials;
use super::leases::LeaseBook;
use super::program::{self, Program};
use super::synced::Synced;
use super::{Connection, Inner, RedisStore};
use crate::clock::{Clock, SystemClock};
use crate::store::StoreError;
use redis::aio::ConnectionManager;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Configures and connects a [`RedisStore`].
#[must_use]
pub struct RedisStoreBuilder {
    nodes: Vec<String>,
    cluster: bool,
    prefix: String,
    timeout: Duration,
    breaker_threshold: u32,
    breaker_cooldown: Duration,
    over_limit_cache: bool,
    max_keys: usize,
    legacy_layout: bool,
    clock: Option<Arc<dyn Clock>>,
}

/// The most keys of local-first limits a store keeps, unless configured.
const DEFAULT_MAX_KEYS: usize = 1_000_000;

impl RedisStoreBuilder {
    pub(super) fn new(nodes: Vec<String>, cluster: bool) -> Self {
        RedisStoreBuilder {
            nodes,
            cluster,
            prefix: "tollgate:".to_owned(),
            timeout: Duration::from_millis(50),
            breaker_threshold: 5,
            breaker_cooldown: Duration::from_secs(1),
            over_limit_cache: true,
            max_keys: DEFAULT_MAX_KEYS,
            legacy_layout: false,
            clock: None,
        }
    }

    /// A prefix for every key (default `tollgate:`), so that several services can share one
    /// Redis. It may not contain braces: the hash tag that follows it places keys in a Redis
    /// Cluster.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest a call to Redis may take (default 50 ms); a slower call is a failure.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// After `failures` failed calls in a row, calls fail at once for `cooldown` (defaults:
    /// 5 and 1 s); then one call tries Redis again.
    pub fn circuit_breaker(mut self, failures: u32, cooldown: Duration) -> Self {
        self.breaker_threshold = failures;
        self.breaker_cooldown = cooldown;
        self
    }

    /// Whether keys Redis reported full are denied locally until they free up (default on),
    /// asking Redis again at least every second: a flood of refused requests costs one call
    /// a second per key, and a client reset on another server is free here within a second.
    pub fn over_limit_cache(mut self, enabled: bool) -> Self {
        self.over_limit_cache = enabled;
        self
    }

    /// The most keys of local-first limits (`sync_every`) this server keeps in memory
    /// (default 1,000,000, as [`MemoryStore`](crate::store::MemoryStore)), whether Redis is
    /// up or not. The ceiling is spread over 64 shards, so a shard may start forgetting keys
    /// a little before the server as a whole keeps `max_keys`.
    ///
    /// At the ceiling, the key asked for least recently (roughly) is forgotten to make room.
    /// A forgotten key starts afresh when it is asked for again: on this server's share of
    /// the limit until its next sync brings the fleet's totals; what this server admitted
    /// for it and had not sent yet is lost to the fleet. Keys whose counts no longer matter
    /// are forgotten first, and on their own, Redis down or not. See the
    /// [guide](crate::guide::rules#local-first-limits-sync_every).
    ///
    /// ```no_run
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), tollgate::store::StoreError> {
    /// let store = RedisStore::builder("redis://127.0.0.1:6379").max_keys(100_000).connect().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// Whether fixed windows and sliding window logs are kept as text (`window count`, `total
    /// t1 c1 t2 c2 …`) under the keys where tollgate 0.1 keeps them and reads them (default
    /// off): set it while a fleet mixes servers of 0.1 and of this version, a rolling
    /// upgrade, so that these limits stay exact across them.
    ///
    /// Off, a fixed window is kept as one integer charged with `INCRBY`, under a key of its
    /// own (`…:us:n`), and a sliding window log as a sorted set, one member a request, under
    /// `…:us:z`: a fixed window then costs Redis about half the time a decision as text
    /// does, and a log a few commands where the text was read and written whole (see
    /// `BENCHMARKS.md`). 0.1 does not read these keys: while both run, each side counts
    /// such a limit on its own, and a client spread over both may be admitted up to twice
    /// its limit in a window. Turning it off later is the same change, at a time of one's
    /// choosing. The other algorithms keep the same state, under the same keys, in both. See
    /// the [guide](crate::guide::operations#upgrading-a-fleet-on-redis).
    ///
    /// ```no_run
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), tollgate::store::StoreError> {
    /// // While servers of tollgate 0.1 share the Redis:
    /// let store = RedisStore::builder("redis://127.0.0.1:6379")
    ///     .legacy_layout(true)
    ///     .connect()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn legacy_layout(mut self, legacy: bool) -> Self {
        self.legacy_layout = legacy;
        self
    }

    /// For tests: the scripts take the time from `clock` (nanoseconds, below 2^52, as a
    /// [`ManualClock`](crate::clock::ManualClock)'s) instead of Redis's `TIME`.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Connects.
    ///
    /// # Errors
    ///
    /// When no node can be reached. Once connected, the store reconnects by itself.
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        if self.prefix.contains(['{', '}']) {
            // A brace in the prefix would become the Redis Cluster hash tag instead of the client's.
            let message = format!(
                "the key prefix `{}` must not contain `{{` or `}}`",
                self.prefix
            );
            return Err(StoreError::new(message, "invalid key prefix"));
        }
        let connection = if self.cluster {
            // Redirections (MOVED, ASK) are followed at once, but TRYAGAIN (during a slot
            // migration, a call whose keys are split, or that creates a key next to existing
            // ones), CLUSTERDOWN and MASTERDOWN wait before the retry: by default 1.28 s at
            // least, longer than any sensible timeout, so every such call failed. Waits from
            // 1 ms, doubling, up to a quarter of the timeout retry within it. And more retries
            // than the default 16: redis-rs sends ASKING apart from the command it is for, so
            // another command on the shared connection can take it, and the command comes back
            // MOVED (two retries gone, without a wait). The timeout still bounds every call.
            let max_retry_wait = u64::try_from(self.timeout.as_millis() / 4)
                .unwrap_or(u64::MAX)
                .max(2);
            let client = redis::cluster::ClusterClient::builder(self.nodes.clone())
                .connection_timeout(self.timeout.max(Duration::from_secs(1)))
                .response_timeout(self.timeout)
                .retries(64)
                .min_retry_wait(1)
                .max_retry_wait(max_retry_wait)
                .retry_wait_formula(2, 2)
                .build()
                .map_err(|e| StoreError::new("invalid Redis Cluster configuration", e))?;
            let connection = client
                .get_async_connection()
                .await
                .map_err(|e| StoreError::new("cannot connect to the Redis Cluster", e))?;
            Connection::Cluster(connection)
        } else {
            let url = self.nodes.first().cloned().unwrap_or_default();
            let client = redis::Client::open(url.as_str())
                .map_err(|e| StoreError::new(format!("invalid Redis URL `{url}`"), e))?;
            let config = redis::aio::ConnectionManagerConfig::new()
                .set_connection_timeout(Some(self.timeout.max(Duration::from_secs(1))))
                .set_response_timeout(Some(self.timeout))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_millis(500));
            let manager = ConnectionManager::new_with_config(client, config)
                .await
                .map_err(|e| StoreError::new(format!("cannot connect to Redis at `{url}`"), e))?;
            Connection::Single(manager)
        };
        let program = Program::new();
        load(&program, &connection).await?;
        let clock_overrides_redis = self.clock.is_some();
        let coalescer = (!self.cluster).then(Coalescer::default);
        Ok(RedisStore {
            inner: Arc::new(Inner {
                connection,
                program,
                coalescer,
                legacy_layout: self.legacy_layout,
                prefix: self.prefix,
                timeout: self.timeout,
                breaker: Breaker::new(self.breaker_threshold, self.breaker_cooldown),
                denials: self.over_limit_cache.then(|| Denials::new(100_000)),
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
                started: std::time::Instant::now(),
                clock_overrides_redis,
                reported_unfit: AtomicBool::new(false),
                synced: Synced::new(self.max_keys),
                leases: LeaseBook::new(),
            }),
        })
    }
}

/// Loads the library of functions into the Redis behind `connection` (every master of a
/// cluster); on a Redis without functions (before Redis 7), its scripts run instead.
///
/// # Errors
///
/// When Redis could not be asked.
async fn load(program: &Program, connection: &Connection) -> Result<(), StoreError> {
    let command = program.load_command();
    let loaded: Result<String, redis::RedisError> = match connection.clone() {
        Connection::Single(mut connection) => command.query_async(&mut connection).await,
        Connection::Cluster(mut connection) => command.query_async(&mut connection).await,
    };
    match loaded {
        Ok(_) => program.loaded(true),
        Err(error) if program::has_no_functions(&error) => {
            tracing::info!("Redis has no functions (before Redis 7): the store runs scripts");
            program.loaded(false);
        }
        // Redis down, loading its data or slow to answer: the store cannot start yet. Only a
        // lasting refusal (a permission, a proxy that does not pass functions) runs scripts.
        Err(error)
            if error.is_io_error()
                || error.is_timeout()
                || !matches!(error.retry_method(), redis::RetryMethod::NoRetry) =>
        {
            return Err(StoreError::new(
                "cannot load the store's functions into Redis",
                error,
            ));
        }
        Err(error) => {
            tracing::warn!(%error, "the store's functions could not be loaded into Redis: it runs scripts");
            program.loaded(false);
        }
    }
    Ok(())
}
