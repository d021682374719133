//! # A production checklist
//!
//! What to settle before tollgate limits real traffic, one item each; the links lead to
//! where the guide explains it.
//!
//! 1. **The client IP behind a proxy.** `remote_address` is the socket peer. Behind a load
//!    balancer, a CDN or a reverse proxy the peer is the proxy, and every client shares its
//!    one bucket until `client_ip.trusted_proxies` lists the proxies' addresses (and
//!    `client_ip.header` names the one forwarding header they write). Trust only what is
//!    yours: a trusted peer can name any client. ([rules: `client_ip`](super::rules#client_ip),
//!    [operations: the client IP](super::operations#the-client-ip-behind-proxies))
//! 2. **The store and the failure policy.** The memory store keeps each server's counts to
//!    itself: `N` servers admit `N` times a limit. [`RedisStore`](crate::store::RedisStore)
//!    (feature `redis`) shares them. Choose, per limit, what a request gets when Redis cannot
//!    answer: `on_store_error: allow` (fail open, the default), `deny` (fail closed) or
//!    `local` (decided in memory, per server). ([rules: `defaults`](super::rules#defaults),
//!    [operations: Redis](super::operations#shared-limits-across-a-fleet-redis))
//! 3. **Redis timeouts and the circuit breaker.** Each call to Redis fails after
//!    [`timeout`](crate::store::RedisStoreBuilder::timeout) (50 ms); after 5 failures in a
//!    row the [`circuit_breaker`](crate::store::RedisStoreBuilder::circuit_breaker) stops
//!    calling for a second. So an outage costs a request at most the timeout: set it above
//!    your Redis's slowest normal answer and below what your requests can afford to wait.
//!    `tollgate_store_errors_total` counts the requests the policy decided.
//!    ([operations: Redis](super::operations#shared-limits-across-a-fleet-redis))
//! 4. **Metrics: the recorder first.** With the `metrics` feature, a limiter registers its
//!    metrics with the recorder installed when its rules are put in force: install the
//!    recorder before building the [`Limiter`](crate::Limiter), or it sees nothing until the
//!    next reload. ([operations: metrics](super::operations#metrics))
//! 5. **Keep the `RulesWatcher`.** Hot reload lasts as long as the watcher (feature
//!    `reload`): hold it while the server runs (`let _watcher = ...`; `let _ = ...` drops it
//!    at once). A file that does not compile is refused and the old rules stay; alert on
//!    `tollgate_reloads_total{result="failure"}`. ([operations: hot
//!    reload](super::operations#hot-reload))
//! 6. **Graceful shutdown.** Let requests in flight finish (axum's `with_graceful_shutdown`,
//!    tonic's `serve_with_shutdown`): their [concurrency](super::rules#concurrency) slots are
//!    given back as their responses end. Then, with [local-first
//!    limits](super::rules#local-first-limits-sync_every), call
//!    [`RedisStore::sync_now`](crate::store::RedisStore::sync_now): without it, the fleet
//!    loses what this server admitted since its last sync (one interval at most).
//! 7. **Clocks.** In memory, decisions run on a monotonic clock (the wall clock read once):
//!    a step of the server's clock changes no decision. On Redis, Redis's `TIME` decides, so
//!    the servers' clocks do not matter, but the Redis hosts' clocks do: keep them slewed,
//!    not stepped. ([operations: time](super::operations#time-and-clock-steps))
//!
//! A server that does all of it, on Redis:
//!
//! ```rust,no_run
//! # #[cfg(feature = "redis")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{routing::get, Router};
//! use std::net::SocketAddr;
//! use tollgate::{reload::RulesWatcher, rules::Rules, store::RedisStore, Limiter, RateLimitLayer};
//!
//! // (4) Install the metrics recorder here, before the limiter.
//! let store = RedisStore::builder("redis://10.0.0.5:6379").connect().await?; // (2), (3)
//! let rules = Rules::from_file("/etc/tollgate/rules.yaml")?; // (1): its client_ip
//! let limiter = Limiter::with_store(rules, store.clone());
//! let _watcher = RulesWatcher::builder("/etc/tollgate/rules.yaml").watch(limiter.clone())?; // (5)
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(limiter));
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
//!     .with_graceful_shutdown(async {
//!         tokio::signal::ctrl_c().await.ok();
//!     })
//!     .await?; // (6): the requests in flight have ended
//! store.sync_now().await?;
//! # Ok(())
//! # }
//! ```
