//! Configuring and connecting a [`RedisStore`].

use super::breaker::Breaker;
use super::coalesce::Coalescer;
use super::denials::Denials;
use super::errors::redis_error;
use super::leases::LeaseBook;
use super::program::{self, Program};
use super::sentinel::SentinelConnection;
use super::synced::Synced;
use super::tls::{self, TlsFiles};
use super::{Connection, Inner, RedisStore};
use crate::clock::{Clock, SystemClock};
use crate::store::{StoreError, StoreErrorKind};
use redis::aio::ConnectionManager;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Configures and connects a [`RedisStore`].
#[must_use]
pub struct RedisStoreBuilder {
    /// The server's URL, some nodes of the cluster, or the sentinels.
    nodes: Vec<String>,
    topology: Topology,
    tls: TlsFiles,
    /// The master's username and password, behind sentinels.
    master_auth: Option<(String, String)>,
    prefix: String,
    timeout: Duration,
    breaker_threshold: u32,
    breaker_cooldown: Duration,
    over_limit_cache: bool,
    max_keys: usize,
    legacy_layout: bool,
    clock: Option<Arc<dyn Clock>>,
}

/// What the builder connects to.
#[derive(Debug, Clone)]
pub(super) enum Topology {
    /// One server.
    Server,
    /// A Redis Cluster.
    Cluster,
    /// The master that Redis Sentinel names `master`.
    Sentinel { master: String },
}

/// The most keys of local-first limits a store keeps, unless configured.
const DEFAULT_MAX_KEYS: usize = 1_000_000;

impl RedisStoreBuilder {
    pub(super) fn new(nodes: Vec<String>, topology: Topology) -> Self {
        RedisStoreBuilder {
            nodes,
            topology,
            tls: TlsFiles::default(),
            master_auth: None,
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
    /// [`ManualClock`](crate::clock::ManualClock)'s) instead of Redis's `TIME`, which every
    /// server of a fleet shares. A test hook, outside the API's semver promise.
    #[doc(hidden)]
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Trusts the certificate authorities in `path` (PEM, one or more certificates) for
    /// connections over TLS, instead of the system's: Redis's own CA.
    ///
    /// TLS is asked for by the URL: `rediss://` (for a cluster, every node's). Behind
    /// sentinels, the master is reached over TLS when the sentinels are (`rediss://`) or
    /// when TLS files are given; the sentinels by their own URLs. The file is read when the
    /// store connects.
    ///
    /// ```no_run
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), tollgate::store::StoreError> {
    /// let store = RedisStore::builder("rediss://redis.internal:6380")
    ///     .tls_ca("/etc/tollgate/redis-ca.pem")
    ///     .connect()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn tls_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.ca = Some(path.into());
        self
    }

    /// Presents the certificate in `cert` (PEM, the client's first, then any intermediates)
    /// with its private key in `key` (PEM: PKCS #8, PKCS #1 or SEC 1) to a Redis that asks
    /// for one (`tls-auth-clients yes`): mutual TLS. Read when the store connects; see
    /// [`tls_ca`](Self::tls_ca) for when TLS is used.
    ///
    /// ```no_run
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), tollgate::store::StoreError> {
    /// let store = RedisStore::builder("rediss://redis.internal:6380")
    ///     .tls_ca("/etc/tollgate/redis-ca.pem")
    ///     .tls_client_cert("/etc/tollgate/client.pem", "/etc/tollgate/client.key")
    ///     .connect()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn tls_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls.client = Some((cert.into(), key.into()));
        self
    }

    /// The username and password of the master (and of the replica that takes over) behind
    /// sentinels ([`RedisStore::sentinel_builder`]): `"default"` and the `requirepass` of a
    /// Redis without ACL users. The sentinels' own credentials go in their URLs
    /// (`redis://:password@host:26379`); a single server's or a cluster's in theirs.
    ///
    /// ```no_run
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), tollgate::store::StoreError> {
    /// let store = RedisStore::sentinel_builder("mymaster", ["redis://10.0.0.5:26379"])
    ///     .master_auth("default", "s3cret")
    ///     .connect()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn master_auth(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.master_auth = Some((username.into(), password.into()));
        self
    }

    /// Connects, on the Tokio runtime that awaits it: the store's connections and its tasks
    /// that outlive a request run there, so it must keep running for as long as the store is
    /// used (see [`RedisStore`'s background tasks](RedisStore#background-tasks)).
    ///
    /// # Errors
    ///
    /// When not awaited in a Tokio runtime, no node can be reached (behind sentinels: none
    /// names a master that answers as one), a URL is not one, a TLS file cannot be read or
    /// holds no PEM of its kind, TLS files are given for a URL that is not `rediss://`, or
    /// [`master_auth`](Self::master_auth) is given without sentinels. Once connected, the
    /// store reconnects by itself (behind sentinels, to the master they name after a
    /// failover).
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        if self.prefix.contains(['{', '}']) {
            // A brace in the prefix would become the Redis Cluster hash tag instead of the client's.
            let message = format!(
                "the key prefix `{}` must not contain `{{` or `}}`",
                self.prefix
            );
            return Err(StoreError::new(StoreErrorKind::Configuration, message));
        }
        // The connections' own tasks run where they are opened: the store's run there too.
        let runtime = tokio::runtime::Handle::try_current().map_err(|error| {
            let message = "a Redis store connects in a Tokio runtime";
            StoreError::new(StoreErrorKind::Configuration, message).with_source(error)
        })?;
        let certificates = self.certificates()?;
        let breaker = Arc::new(Breaker::new(self.breaker_threshold, self.breaker_cooldown));
        let connection = match &self.topology {
            Topology::Server => self.connect_server(certificates).await?,
            Topology::Cluster => self.connect_cluster(certificates).await?,
            Topology::Sentinel { master } => {
                self.connect_sentinel(master, certificates, breaker.clone(), runtime.clone())
                    .await?
            }
        };
        let program = Program::new();
        load(&program, &connection).await?;
        let clock_overrides_redis = self.clock.is_some();
        let coalescer = (!matches!(self.topology, Topology::Cluster)).then(Coalescer::default);
        Ok(RedisStore {
            inner: Arc::new(Inner {
                connection,
                program,
                coalescer,
                legacy_layout: self.legacy_layout,
                prefix: self.prefix,
                timeout: self.timeout,
                breaker,
                denials: self.over_limit_cache.then(|| Denials::new(100_000)),
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
                started: std::time::Instant::now(),
                clock_overrides_redis,
                reported_unfit: AtomicBool::new(false),
                synced: Synced::new(self.max_keys),
                leases: LeaseBook::new(),
                runtime,
            }),
        })
    }
}

impl RedisStoreBuilder {
    /// The longest a connection to a node may take to open: the timeout, at least a second.
    fn connection_timeout(&self) -> Duration {
        self.timeout.max(Duration::from_secs(1))
    }

    /// The TLS files read, when any were given, after checking the URLs ask for TLS and
    /// `master_auth` is given only behind sentinels.
    fn certificates(&self) -> Result<Option<redis::TlsCertificates>, StoreError> {
        let sentinels = matches!(self.topology, Topology::Sentinel { .. });
        if self.master_auth.is_some() && !sentinels {
            return Err(StoreError::new(
                StoreErrorKind::Configuration,
                "master_auth is for a store behind sentinels (RedisStore::sentinel_builder): put a server's credentials in its URL, redis://user:password@host:port",
            ));
        }
        if self.tls.is_set() && !sentinels {
            if let Some(url) = self.nodes.iter().find(|url| !url.starts_with("rediss://")) {
                return Err(StoreError::new(
                    StoreErrorKind::Configuration,
                    format!("TLS files were given, but `{url}` is not a `rediss://` URL"),
                ));
            }
        }
        if self.tls.is_set() || self.nodes.iter().any(|url| url.starts_with("rediss://")) {
            tls::ensure_crypto_provider();
        }
        if !self.tls.is_set() {
            return Ok(None);
        }
        self.tls.certificates().map(Some)
    }

    /// A connection to one server, which reconnects by itself.
    async fn connect_server(
        &self,
        certificates: Option<redis::TlsCertificates>,
    ) -> Result<Connection, StoreError> {
        let url = self.nodes.first().cloned().unwrap_or_default();
        let client = match certificates {
            Some(certificates) => redis::Client::build_with_tls(url.as_str(), certificates),
            None => redis::Client::open(url.as_str()),
        }
        .map_err(|e| configuration(format!("invalid Redis URL `{url}`"), e))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connection_timeout()))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let manager = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| redis_error(format!("cannot connect to Redis at `{url}`"), e))?;
        Ok(Connection::Single(manager))
    }

    /// A connection to a Redis Cluster, which follows its slots.
    async fn connect_cluster(
        &self,
        certificates: Option<redis::TlsCertificates>,
    ) -> Result<Connection, StoreError> {
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
        let mut builder = redis::cluster::ClusterClient::builder(self.nodes.clone())
            .connection_timeout(self.connection_timeout())
            .response_timeout(self.timeout)
            .retries(64)
            .min_retry_wait(1)
            .max_retry_wait(max_retry_wait)
            .retry_wait_formula(2, 2);
        if let Some(certificates) = certificates {
            builder = builder.certs(certificates);
        }
        let client = builder
            .build()
            .map_err(|e| configuration("invalid Redis Cluster configuration", e))?;
        let connection = client
            .get_async_connection()
            .await
            .map_err(|e| redis_error("cannot connect to the Redis Cluster", e))?;
        Ok(Connection::Cluster(connection))
    }

    /// A connection to the master the sentinels name `master`, which follows failovers (its
    /// searches run on `runtime`) and lets `breaker` probe the new master at once.
    async fn connect_sentinel(
        &self,
        master: &str,
        certificates: Option<redis::TlsCertificates>,
        breaker: Arc<Breaker>,
        runtime: tokio::runtime::Handle,
    ) -> Result<Connection, StoreError> {
        use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
        use redis::IntoConnectionInfo;
        let invalid = |e| configuration("invalid Redis Sentinel configuration", e);
        let mut sentinels = Vec::with_capacity(self.nodes.len());
        for url in &self.nodes {
            let info = url
                .as_str()
                .into_connection_info()
                .map_err(|e| configuration(format!("invalid Redis Sentinel URL `{url}`"), e))?;
            sentinels.push(info);
        }
        if sentinels.is_empty() {
            return Err(StoreError::new(
                StoreErrorKind::Configuration,
                "no sentinel to ask for the master: the list of sentinels is empty",
            ));
        }
        let sentinels_tls = sentinels
            .iter()
            .any(|info| matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }));
        let addresses = sentinels.iter().map(|info| info.addr().clone());
        let mut builder = SentinelClientBuilder::new(addresses, master, SentinelServerType::Master)
            .map_err(invalid)?;
        // The sentinels share one set of credentials: the first URL that has some.
        if let Some(settings) = sentinels
            .iter()
            .map(redis::ConnectionInfo::redis_settings)
            .find(|settings| settings.password().is_some())
        {
            if let Some(username) = settings.username() {
                builder = builder.set_client_to_sentinel_username(username);
            }
            if let Some(password) = settings.password() {
                builder = builder.set_client_to_sentinel_password(password);
            }
        }
        if let Some((username, password)) = &self.master_auth {
            builder = builder
                .set_client_to_redis_username(username)
                .set_client_to_redis_password(password);
        }
        if sentinels_tls || certificates.is_some() {
            builder = builder.set_client_to_redis_tls_mode(redis::TlsMode::Secure);
        }
        if let Some(certificates) = certificates {
            if sentinels_tls {
                builder = builder.set_client_to_sentinel_certificates(certificates.clone());
            }
            builder = builder.set_client_to_redis_certificates(certificates);
        }
        let client = builder.build().map_err(invalid)?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connection_timeout()))
            .set_response_timeout(Some(self.timeout));
        let connection = SentinelConnection::connect(
            client,
            master.to_owned(),
            config,
            self.connection_timeout(),
            breaker,
            runtime,
        )
        .await
        .map_err(|e| {
            let message = format!(
                "cannot connect to the Redis master `{master}` through the sentinels {}",
                self.nodes.join(", ")
            );
            redis_error(message, e)
        })?;
        Ok(Connection::Sentinel(connection))
    }
}

/// The error of a configuration that redis-rs refused as `error`: no retry fixes it, whatever
/// kind redis-rs gives it.
fn configuration(
    message: impl Into<std::borrow::Cow<'static, str>>,
    error: redis::RedisError,
) -> StoreError {
    StoreError::new(StoreErrorKind::Configuration, message).with_source(error)
}

/// Loads the library of functions into the Redis behind `connection` (every master of a
/// cluster); on a Redis without functions (before Redis 7), its scripts run instead.
///
/// # Errors
///
/// When Redis could not be asked.
async fn load(program: &Program, connection: &Connection) -> Result<(), StoreError> {
    let command = program.load_command();
    let loaded: Result<String, redis::RedisError> =
        command.query_async(&mut connection.clone()).await;
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
            return Err(redis_error(
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
