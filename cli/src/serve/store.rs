//! Where `tollgate serve` keeps its state: in memory, in a Redis server or in a Redis
//! Cluster, chosen from its arguments; and what each store needs besides deciding.
//!
//! A Redis that is not up yet does not stop the service: it connects with retries, waiting
//! longer each time (100 ms, doubling, up to 5 s), and tells why it is not ready meanwhile.
//! An address that no wait can make work (not a URL, a scheme other than `redis://` or
//! `rediss://`, cluster nodes that disagree on their password) is an error at once.

use super::domains::Domains;
use super::readiness::Readiness;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;
use tollgate::algorithm::{Algorithm, Quota};
use tollgate::store::{MemoryStore, RedisStore, RedisStoreBuilder, Store, StoreErrorKind};

/// The first wait before connecting to Redis again.
const FIRST_WAIT: Duration = Duration::from_millis(100);
/// The longest wait between two attempts to connect to Redis.
const LONGEST_WAIT: Duration = Duration::from_secs(5);

/// How often the memory store forgets its idle keys and counts the ones it keeps.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Where the state lives.
pub(crate) enum StoreChoice {
    /// In this process: each instance counts alone.
    Memory,
    /// In Redis, shared by every instance using it.
    Redis(RedisTarget, RedisOptions),
}

/// A Redis server, Redis Cluster or master behind Redis Sentinel, its addresses checked.
pub(crate) enum RedisTarget {
    /// One server, at this URL.
    Server(String),
    /// A cluster, given some of its nodes.
    Cluster(Vec<String>),
    /// The master Redis Sentinel knows by this name, given some of its sentinels' URLs.
    Sentinel(String, Vec<String>),
}

/// What the store needs to know of Redis beyond its URLs: how it proves itself, and its
/// keys' prefix.
#[derive(Debug, Clone, Default)]
pub(crate) struct RedisOptions {
    /// The CA of Redis's certificate (PEM), for `rediss://`.
    pub(crate) ca: Option<PathBuf>,
    /// A client certificate and its key (PEM), for mutual TLS.
    pub(crate) client: Option<(PathBuf, PathBuf)>,
    /// The master's user and password, behind Redis Sentinel.
    pub(crate) master_auth: Option<(String, String)>,
    /// What every key starts with, instead of `tollgate:` (checked: no braces).
    pub(crate) key_prefix: Option<String>,
}

impl StoreChoice {
    /// The store of `--redis URL` or `--redis-cluster URLS`, in memory without either.
    ///
    /// # Errors
    ///
    /// An address that retrying cannot fix.
    pub(crate) fn new(server: Option<&str>, cluster: &[String]) -> Result<StoreChoice, String> {
        // `RedisStoreBuilder::connect` tells an address that can never work from a Redis
        // that is down (`StoreErrorKind::Configuration`), but only once the service listens.
        // So the addresses are parsed here, by the parsers `connect` runs before it reaches
        // the network: what fails here stops the start before anything listens. What else
        // `connect` finds wrong for good (a TLS file, a password) stops it once it listens;
        // the rest is retried.
        match (server, cluster) {
            (Some(url), _) => {
                check_url(url)?;
                let target = RedisTarget::Server(url.to_owned());
                Ok(StoreChoice::Redis(target, RedisOptions::default()))
            }
            (None, []) => Ok(StoreChoice::Memory),
            (None, nodes) => {
                nodes.iter().try_for_each(|node| check_url(node))?;
                redis::cluster::ClusterClient::new(nodes.to_vec())
                    .map_err(|error| format!("invalid Redis Cluster nodes: {error}"))?;
                let target = RedisTarget::Cluster(nodes.to_vec());
                Ok(StoreChoice::Redis(target, RedisOptions::default()))
            }
        }
    }
}

impl StoreChoice {
    /// The store of `target`, Redis (its addresses checked as [`StoreChoice::new`] checks
    /// them), in memory without one.
    ///
    /// # Errors
    ///
    /// An address that retrying cannot fix.
    pub(crate) fn of(
        target: Option<RedisTarget>,
        options: RedisOptions,
    ) -> Result<StoreChoice, String> {
        let checked = match target {
            None => return Ok(StoreChoice::Memory),
            Some(RedisTarget::Server(url)) => StoreChoice::new(Some(&url), &[])?,
            Some(RedisTarget::Cluster(nodes)) => StoreChoice::new(None, &nodes)?,
            Some(RedisTarget::Sentinel(master, sentinels)) => {
                sentinels.iter().try_for_each(|url| check_url(url))?;
                StoreChoice::Redis(RedisTarget::Sentinel(master, sentinels), options.clone())
            }
        };
        Ok(match checked {
            StoreChoice::Redis(target, _) => StoreChoice::Redis(target, options),
            memory => memory,
        })
    }
}

/// Whether `url` can name a Redis server, whether one answers there or not.
fn check_url(url: &str) -> Result<(), String> {
    redis::Client::open(url)
        .map(drop)
        .map_err(|error| format!("invalid Redis URL `{url}`: {error}"))
}

impl RedisTarget {
    /// Connects, trying again after each failure until it succeeds; `readiness` tells why
    /// the service waits meanwhile, and each failure is printed.
    ///
    /// # Errors
    ///
    /// A failure no retry fixes ([`StoreErrorKind::Configuration`]: a TLS file that cannot
    /// be read, credentials Redis refuses), at once.
    pub(crate) async fn connect(
        &self,
        options: &RedisOptions,
        readiness: &Readiness<RedisStore>,
    ) -> Result<RedisStore, String> {
        readiness.waiting_for(format!("connecting to {self}"));
        let mut wait = FIRST_WAIT;
        loop {
            match self.builder(options).connect().await {
                Ok(store) => return Ok(store),
                Err(error) if error.kind() == StoreErrorKind::Configuration => {
                    return Err(format!("cannot use {self}: {error}"));
                }
                Err(error) => {
                    eprintln!("tollgate serve: {error}, retrying in {wait:?}");
                    readiness.waiting_for(error.to_string());
                    tokio::time::sleep(wait).await;
                    wait = next_wait(wait);
                }
            }
        }
    }

    fn builder(&self, options: &RedisOptions) -> RedisStoreBuilder {
        let mut builder = match self {
            RedisTarget::Server(url) => RedisStore::builder(url.clone()),
            RedisTarget::Cluster(nodes) => RedisStore::cluster_builder(nodes.clone()),
            RedisTarget::Sentinel(master, sentinels) => {
                RedisStore::sentinel_builder(master.clone(), sentinels.clone())
            }
        };
        if let Some(ca) = &options.ca {
            builder = builder.tls_ca(ca.clone());
        }
        if let Some((cert, key)) = &options.client {
            builder = builder.tls_client_cert(cert.clone(), key.clone());
        }
        if let Some((user, password)) = &options.master_auth {
            builder = builder.master_auth(user.clone(), password.clone());
        }
        if let Some(prefix) = &options.key_prefix {
            builder = builder.key_prefix(prefix.clone());
        }
        builder
    }
}

impl fmt::Display for RedisTarget {
    /// Where it is, a password in its URLs left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisTarget::Server(url) => write!(f, "Redis at {}", without_password(url)),
            RedisTarget::Cluster(nodes) => {
                let nodes: Vec<String> = nodes.iter().map(|node| without_password(node)).collect();
                write!(f, "the Redis Cluster at {}", nodes.join(", "))
            }
            RedisTarget::Sentinel(master, sentinels) => {
                let sentinels: Vec<String> =
                    sentinels.iter().map(|url| without_password(url)).collect();
                write!(
                    f,
                    "Redis master `{master}` of the sentinels at {}",
                    sentinels.join(", ")
                )
            }
        }
    }
}

/// `url` with its credentials (`user:password@`), if any, written `***@`: fit for a log.
fn without_password(url: &str) -> String {
    let credentials = url
        .split_once("://")
        .and_then(|(scheme, rest)| Some((scheme, rest.rsplit_once('@')?.1)));
    match credentials {
        Some((scheme, host)) => format!("{scheme}://***@{host}"),
        None => url.to_owned(),
    }
}

/// The wait after `wait` between two attempts to connect: twice as long, up to
/// [`LONGEST_WAIT`].
fn next_wait(wait: Duration) -> Duration {
    (wait * 2).min(LONGEST_WAIT)
}

/// What `tollgate serve` does with its store besides deciding.
pub(crate) trait Backing: Store + Sized {
    /// The store of one more domain: the same Redis, or a memory of its own.
    fn for_another_domain(&self) -> Self;

    /// Starts what the stores need done while `domains` decide with them.
    fn keep_up(domains: &Domains<Self>);

    /// Whether the store can keep a limit decided by `algorithm` under `quota` (a
    /// descriptor's own, which comes with the call), or why not.
    fn holds(&self, algorithm: Algorithm, quota: &Quota) -> Result<(), String>;

    /// Finishes the store's work, before the process exits.
    async fn finish(&self);
}

impl Backing for MemoryStore {
    fn for_another_domain(&self) -> Self {
        MemoryStore::new()
    }

    /// Forgets idle keys, and sets `tollgate_tracked_keys`, every [`SWEEP_EVERY`], in each
    /// domain's store: without it, memory grows with every client ever seen. The task ends
    /// with the process.
    fn keep_up(domains: &Domains<Self>) {
        let domains = domains.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SWEEP_EVERY);
            loop {
                every.tick().await;
                for (_, limiter) in domains.limiters() {
                    limiter.store().sweep();
                    limiter.record_tracked_keys();
                }
            }
        });
    }

    /// Any: the memory store keeps every quota exactly.
    fn holds(&self, _algorithm: Algorithm, _quota: &Quota) -> Result<(), String> {
        Ok(())
    }

    /// Nothing: the state ends with the process.
    async fn finish(&self) {}
}

impl Backing for RedisStore {
    fn for_another_domain(&self) -> Self {
        self.clone()
    }

    /// Nothing: the store keeps its connection and syncs by itself.
    fn keep_up(_domains: &Domains<Self>) {}

    fn holds(&self, algorithm: Algorithm, quota: &Quota) -> Result<(), String> {
        RedisStore::holds(self, algorithm, quota).map_err(|error| error.to_string())
    }

    /// Sends Redis what the local-first limits admitted since their last sync, so that a
    /// planned stop loses no counts.
    async fn finish(&self) {
        if let Err(error) = self.sync_now().await {
            eprintln!("tollgate serve: cannot send the local-first counts to Redis: {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_from_100_ms_up_to_5_s() {
        let waits: Vec<Duration> =
            std::iter::successors(Some(FIRST_WAIT), |&wait| Some(next_wait(wait)))
                .take(8)
                .collect();
        let millis: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(millis, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    }

    #[test]
    fn addresses_that_no_wait_fixes_are_refused_at_once() {
        let refused = |server: Option<&str>, cluster: &[&str]| {
            let cluster: Vec<String> = cluster.iter().map(|node| (*node).to_owned()).collect();
            StoreChoice::new(server, &cluster).err()
        };
        let error = refused(Some("localhost:6379"), &[]).expect("no scheme");
        assert!(
            error.starts_with("invalid Redis URL `localhost:6379`"),
            "{error}"
        );
        assert!(refused(Some("http://127.0.0.1:6379"), &[]).is_some());
        let error = refused(None, &["redis://127.0.0.1:7000", "nonsense"]).expect("a bad node");
        assert!(error.starts_with("invalid Redis URL `nonsense`"), "{error}");
        let passwords = ["redis://:one@127.0.0.1:7000", "redis://:two@127.0.0.1:7001"];
        let error = refused(None, &passwords).expect("two passwords");
        assert!(error.starts_with("invalid Redis Cluster nodes"), "{error}");
        // Nothing listens there: that is for retrying, not an error.
        assert_eq!(refused(Some("redis://127.0.0.1:1"), &[]), None);
        assert_eq!(refused(None, &["redis://127.0.0.1:1"]), None);
        assert_eq!(refused(None, &[]), None);
    }
}
