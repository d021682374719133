//! # Operations
//!
//! Running tollgate in production: [hot reload](#hot-reload), [Redis](#shared-limits-across-a-fleet-redis)
//! (over [TLS](#redis-over-tls), behind [Sentinel](#redis-sentinel)) and what happens when it
//! fails, [time and clock steps](#time-and-clock-steps), [what
//! lasts](#what-lasts-clock-steps-reloads-and-outages) through steps, reloads and outages,
//! [metrics](#metrics) and [tracing](#tracing), [the client IP](#the-client-ip-behind-proxies)
//! behind proxies, [the headers and gRPC answers](#headers-and-grpc-answers), [seeing and
//! resetting a client](#seeing-and-resetting-a-client), and [the `tollgate`
//! command](#the-tollgate-command-check-and-explain).
//!
//! # Hot reload
//!
//! Change the rules file while the server runs: a `RulesWatcher` (feature `reload`) puts the
//! new rules in force within a moment (150–180 ms from the write to the first request
//! decided under them, in the tests), without a restart.
//!
//! ```rust,no_run
//! use axum::{routing::get, Router};
//! use std::net::SocketAddr;
//! use tollgate::{reload::RulesWatcher, Limiter, RateLimitLayer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let limiter = Limiter::from_file("/etc/tollgate/rules.yaml")?; // a bad file at start is an error
//! let watcher = RulesWatcher::builder("/etc/tollgate/rules.yaml").watch(limiter.clone())?;
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(limiter));
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! drop(watcher); // keep the watcher while serving: dropping it stops watching
//! # Ok(())
//! # }
//! ```
//!
//! - **What is seen.** The watcher listens to the file's directory, not the file, so it sees
//!   a file written in place, a new file renamed over it (`mv new.yaml rules.yaml`, and
//!   editors that save that way) and a Kubernetes ConfigMap update (below). When `rules.yaml`
//!   leads through symlinks (up to 40), the directory of each symlink and of the file they
//!   lead to is watched too, and again after any of them is re-pointed. Only events about
//!   those paths count: other files in the same directories, however busy, never delay a
//!   reload.
//! - **When the file is read.** After a change the watcher reads the file, waits until the
//!   file has been quiet for the debounce time (`.debounce(Duration)`, default 150 ms), and
//!   reads it again: the content is put in force only when both readings hold the same
//!   bytes. A file that is never quiet is read again every debounce from 10 debounces after
//!   the change on, until two readings agree.
//! - **Atomic replacement is safe everywhere; in-place writes on Linux.** Write a temporary
//!   file in the same directory and rename it over the rules, as editors and Kubernetes do:
//!   the watcher can then only ever read a whole file. On Linux, where the kernel reports a
//!   writer closing the file, a file written in place is read only once its writer has
//!   closed it, if it does so within the poll interval (5 s without one). A writer that keeps
//!   the file open longer (a log-like writer, a stuck editor) does not hold reloads back: a
//!   warning is logged, and until that writer closes the file it is read as where no close
//!   event exists. On macOS, the BSDs and Windows no such event exists: a writer that pauses
//!   for longer than the debounce in the middle of an in-place write may have what it wrote
//!   so far read, and applied if it is valid rules on its own (say, cut right after a limit).
//!   Polling (below) cannot tell either. Use a rename there.
//! - **Off the request path.** The file is read and compiled on the watcher's own thread and
//!   swapped in atomically. Requests being decided finish under the rules they started with.
//!   A limit keeps what each client used, wherever it moved in the file and whatever of its
//!   quota, period or algorithm changed ([what a reload keeps](#what-a-reload-keeps)). A
//!   file whose bytes did not change is not compiled again. Dropping the watcher waits for
//!   its thread to end: at once, unless it is reading the file (from async code, drop it in
//!   `spawn_blocking` if a slow network filesystem makes that matter).
//! - **A bad file never replaces working rules.** If the file cannot be read or does not
//!   compile, the previous rules keep serving, and every error is logged (`tracing`, error
//!   level) with line and column:
//!
//!   ```text
//!   ERROR tollgate::reload::reloader: rate-limit rules not reloaded, the previous rules stay in force: /etc/tollgate/rules.yaml: 1 error(s) in the rate-limit rules:
//!     /etc/tollgate/rules.yaml:41:52: invalid u64
//!   ```
//!
//!   `watcher.stats()` counts reloads `applied` and `failed` and keeps the `last_error` while
//!   the file is refused. The same failure seen again (a poll of a file still broken) is
//!   counted once, in `stats()` and in the `tollgate_reloads_total{result="failure"}` metric
//!   alike. The next change is picked up as usual.
//! - **Explicit reload and polling.** `watcher.reload()` reads the file at once, once (e.g.
//!   from a `SIGHUP` handler or an admin endpoint), and answers `Ok(Applied)`,
//!   `Ok(Unchanged)` or the errors. Some network and FUSE filesystems send no events: add
//!   `.poll_interval(Duration::from_secs(10))` to also compare the file's bytes every 10 s
//!   (an unchanged file costs one reading; a changed one is confirmed by a second reading as
//!   above), and `.events(false)` to rely on polling alone.
//!
//! **Kubernetes ConfigMap.** Mount the ConfigMap as a directory and give the path of the file
//! in it. The kubelet writes each version to a new timestamped directory and re-points a
//! `..data` symlink at it in one rename (`rules.yaml -> ..data/rules.yaml`); the watcher sees
//! the swap. The kubelet itself takes up to about a minute to bring an edited ConfigMap to
//! the pod. Do not use `subPath`: such mounts never receive updates.
//!
//! ```yaml
//! volumes:
//!   - name: rules
//!     configMap: { name: tollgate-rules }
//! containers:
//!   - name: api
//!     volumeMounts:
//!       - { name: rules, mountPath: /etc/tollgate }   # the server reads /etc/tollgate/rules.yaml
//! ```
//!
//! ## What a reload keeps
//!
//! A limit is known across reloads by its descriptor entries (`endpoint=login/remote_address`),
//! not by its place in the file or its `name`. When a reload changes its quota, its period
//! or its algorithm, every client keeps what it used: an operator who lowers a limit from
//! 1,000 to 100 a minute in an incident hands nobody 100 fresh requests, and one who raises
//! 5 to 8 gives a client that used 5 the 3 it has left. Each client's state is carried over
//! on its next request (nothing is rewritten at the reload), in every store:
//!
//! | the limit was | and becomes | what each client keeps |
//! |---|---|---|
//! | a fixed window or sliding window counter | the same algorithm, the same period | its counts, as they are: 5 of 5 used and raised to 8, 3 more in that window; lowered to 3, none until the window allows |
//! | a sliding window log | a sliding window log | its log, as it is: each request counts until a (new) period after it |
//! | a token bucket | a token bucket | its tokens (its level), at most the new burst: 6 of 10 left and the burst raised to 20, 6; lowered to 3, 3 |
//! | anything else: GCRA, a leaky bucket, a window whose period changed, a change of algorithm | | the requests it has used (the old limit's capacity less what remained of it, never understated), charged at once to the new limit, at most its capacity: a window counts them in the window of now, GCRA and the leaky bucket book them from now, a token bucket takes them from its tokens, a log files them at now |
//!
//! So GCRA used 5 of 5 and raised to 8 admits 3 more at once, then refills at the new rate;
//! lowered to 3 it admits the next request when one request's interval (a third of the
//! period) has passed.
//!
//! - **Memory**: the first decision of a client under the changed limit finds its state under
//!   the old one, converts it and forgets the old. Only the first decision pays for that
//!   (another lookup); a limit no reload changed pays nothing. Several reloads in a row carry
//!   from the newest state a client has, for as long as an old limit's state could still
//!   matter (its period, or a bucket's refill).
//! - **Redis** (and a Redis Cluster): the same, inside the atomic call that decides
//!   the request: the old key is read, converted and deleted, and the new one written, in one
//!   round trip. On a Redis Cluster, a limit with no varying value (one state for everybody,
//!   as `method=DELETE`) keeps its state in a slot named by the limit itself: it changes
//!   slot with the limit and starts afresh.
//! - **Approximate limits**: a client decided exactly (past half its limit) is carried as
//!   above. The sketch that counts the others is kept when its algorithm, period and memory
//!   are unchanged, and the clients it counted keep their counts; a sketch whose settings
//!   changed is dropped at the reload (and built anew, then), its clients starting afresh.
//! - **Local-first limits** (`sync_every`): through each server, on the key's first decision
//!   under the new limit: windows carry each server's own admissions (they add up to the
//!   fleet's once synced), a schedule what the fleet had used, counted once (details in
//!   [local-first limits](super::rules#local-first-limits-sync_every)).
//!
//! A limit is carried from the rules in force just before (and what they carried from): one
//! taken out of the file and put back at a later reload with another quota starts afresh;
//! put back unchanged, it finds its state where it left it, if that has not expired.
//!
//! # Shared limits across a fleet (Redis)
//!
//! With the `redis` feature, the state lives in Redis and every server of a fleet shares each
//! limit exactly:
//!
//! ```rust,no_run
//! # #[cfg(feature = "redis")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tollgate::{rules::Rules, store::RedisStore, Limiter, RateLimitLayer};
//!
//! let store = RedisStore::builder("redis://10.0.0.5:6379")    // or cluster_builder([...]), sentinel_builder(..)
//!     .key_prefix("checkout:")                                 // several services, one Redis
//!     .timeout(std::time::Duration::from_millis(50))           // the default
//!     .connect()
//!     .await?;
//! let layer = RateLimitLayer::new(Limiter::with_store(Rules::from_file("rules.yaml")?, store));
//! # Ok(())
//! # }
//! ```
//!
//! The demo shares its limits when started with `TOLLGATE_REDIS_URL=redis://127.0.0.1:6379
//! cargo run --example server --features redis` (start two on two `TOLLGATE_LISTEN` ports),
//! or on a cluster with `TOLLGATE_REDIS_CLUSTER=redis://127.0.0.1:7000,redis://127.0.0.1:7001`
//! (some of its nodes, comma-separated).
//!
//! - **One round trip per request.** Every limit that applies is decided by one call of a
//!   Lua function (`FCALL`: the store loads its library into Redis when it connects, and again
//!   by itself after a `FUNCTION FLUSH` or on a new master; on a Redis before 7, which has no
//!   functions, the same text runs as scripts, `EVALSHA`),
//!   atomically and all or nothing, with the same arithmetic as the in-memory store: the same
//!   reference suite passes on both with identical decisions. (On a cluster: one call per
//!   slot, [below](#on-a-redis-cluster).) A request with
//!   [concurrency limits](super::rules#concurrency) takes its slots first, in a call of their
//!   own (leases in Redis, shared by the fleet), and gives them back in another when its
//!   response ends; long requests renew their leases every third of their `lease`.
//! - **Busy, requests go together.** Redis runs one call at a time and each costs it a
//!   dispatch and a reply whatever it decides. On a single server, a request that finds
//!   four calls in flight on the store's connection waits for the first to end, and goes
//!   with every request then waiting (up to 64) in one call that decides each as its own
//!   call would: still one round trip and all or nothing per request, and a request that
//!   fails in Redis fails no other. An idle store sends each request at once; under load
//!   one Redis serves about twice the decisions (`BENCHMARKS.md`). A cluster's calls are
//!   not batched (one call's keys share a slot).
//! - **Time comes from Redis** (`TIME`), so servers with skewed clocks agree. Lua numbers are
//!   doubles, so each limit is kept in the finest tick whose numbers stay exact (2^53): the
//!   microsecond for everyday limits, the millisecond or second for very large limits over
//!   long periods.
//! - **Keys** are `prefix{tag}:domain:state:tick`, for example
//!   `tollgate:{12ca17b49af22894}:demo:ec050075c73181832dd5aadd1c9eaf2e:us`: the prefix
//!   (`tollgate:` by default; it may not contain braces), 16 hex digits of the SHA-256 of the
//!   limit's [hash tag](super::rules#hash-tags-where-state-lives-in-a-redis-cluster), the
//!   domain, 32 hex digits of the SHA-256 of the state key (limit and client values), and
//!   the tick, followed by `:n` for a fixed window, which is kept as one integer that
//!   `INCRBY` charges, and `:z` for a sliding window log, kept as a sorted set of one member
//!   a request. Whatever a client sends (a 30 KB header), a key is about 60 bytes plus prefix
//!   and domain, and holds no client value in clear; a state key costs Redis about 150
//!   bytes. Keys expire by themselves once their state is back to "never seen"; a key
//!   holding anything else reads as never seen.
//! - **Requirements and limits.** Redis 6 or later (`SET ... KEEPTTL`); Redis 7 or later
//!   runs the store's functions, loaded once, where Redis 6 runs the same code as scripts,
//!   which cost it about twice the time a decision. A `sliding_window_log` keeps every
//!   request, so on Redis its limit is capped at 1,000 (use `sliding_window_counter` for
//!   larger ones); a
//!   limit that Redis cannot hold exactly is reported once and decided by its
//!   `on_store_error` policy.
//! - **Failures.** Each call has a timeout (50 ms). After 5 failures in a row a circuit
//!   breaker stops calling Redis for a second, then lets one call try
//!   (`.circuit_breaker(failures, cooldown)`): a Redis outage costs a request at most the
//!   timeout, then nothing. Each limit's `on_store_error` decides the request meanwhile:
//!   `allow` (fail open, the default), `deny` (fail closed), or `local` (an in-memory store
//!   with the same rules: limits then hold per server). Set it in `defaults` or per
//!   `rate_limit`. The outage is logged once when it starts and once when Redis answers
//!   again.
//! - **What failed.** A [`StoreError`](crate::store::StoreError) (in the logs, and from
//!   [`Limiter::peek`](crate::Limiter::peek), [`Limiter::reset`](crate::Limiter::reset),
//!   [`RedisStoreBuilder::connect`](crate::store::RedisStoreBuilder::connect)) says what
//!   failed in words, and its [`kind`](crate::store::StoreError::kind) says it to code:
//!   `Timeout` (Redis slower than the timeout), `Connection` (nothing listens, the
//!   connection dropped, no master), `CircuitOpen` (the breaker answered, Redis was not
//!   asked), `Server` (Redis refused: out of memory, read-only, no permission), `Protocol`
//!   (a reply of the wrong shape), `Unsupported` (a limit Redis cannot keep, an operation
//!   the store does not offer), `Configuration` (a bad URL, key prefix or TLS file, a
//!   password Redis refuses: no retry fixes it) and `Interrupted` (the runtime shut down
//!   mid-call). Its [`source`](std::error::Error::source) is the redis-rs or I/O error
//!   underneath, when there is one.
//! - **Over-limit cache.** A key Redis reported full is denied locally until the time Redis
//!   gave, without a round trip, asking Redis again every second (so that a client reset on
//!   another server is free everywhere within a second, and a flood of refused requests
//!   costs one call a second per key); `.over_limit_cache(false)` turns it off.
//! - **Queueing across servers.** A leaky bucket's release time comes from Redis; each server
//!   waits locally.
//! - **Local-first limits.** A limit with `sync_every` is decided in memory and agreed
//!   through Redis every interval: no round trip per request, a stated overshoot, and no
//!   change for clients while Redis is down ([rules: local-first
//!   limits](super::rules#local-first-limits-sync_every)). Call
//!   [`RedisStore::sync_now`](crate::store::RedisStore::sync_now) before a planned stop.
//!   Each server keeps at most
//!   [`max_keys`](crate::store::RedisStoreBuilder::max_keys) of their keys in memory
//!   (default 1,000,000, about 128 MB), Redis down or not.
//!
//! ## Upgrading a fleet on Redis
//!
//! Servers of two versions of tollgate may share one Redis while a fleet is upgraded: each
//! loads its own library of functions (its name carries a hash of its code), and every
//! algorithm keeps the same state under the same keys in every version, but two. Before this
//! version, a fixed window was kept as text, `window count`, under `…:us`; now it is one
//! integer under `…:us:n` (one `INCRBY` a decision, about half the time in Redis). A sliding
//! window log was text too, read and written whole; now it is a sorted set under `…:us:z`.
//! During a rolling upgrade, old and new servers then each count these limits on their own
//! side: a client spread over both may be admitted up to twice its limit in a window, until
//! the last old server is gone (the old keys then expire by themselves within their
//! windows). To keep them exact while both run, start the new servers with
//! [`legacy_layout(true)`](crate::store::RedisStoreBuilder::legacy_layout),
//! which keeps them as the old servers do; turning it off once all are upgraded is the same
//! change again, at a quiet time of one's choosing. `tests/redis_upgrade.rs` runs 0.1's
//! script beside this version's store on one Redis.
//!
//! ## On a Redis Cluster
//!
//! `RedisStore::cluster_builder(["redis://10.0.0.5:7000", "redis://10.0.0.6:7000"])` takes
//! some of the cluster's nodes and finds the others. Keys spread over the masters by
//! [hash tag](super::rules#hash-tags-where-state-lives-in-a-redis-cluster), that is by who is
//! limited: 10,000 clients put 33.0 to 33.7 % of the keys on each of 3 masters, and each
//! master did a third of the work (BENCHMARKS.md).
//!
//! - **One client, one call.** The limits of a request that share a tag share a slot: one
//!   script decides them, atomically, as on a single server.
//! - **Several slots, still all or nothing.** A request whose limits are in several slots
//!   (a per-user and a per-tenant limit) is one call per slot, sent together: one round trip
//!   of wall time. Each slot charges its limits only when all of its enforced limits have
//!   room. When a slot denies (or fails), the slots that charged are refunded by a second
//!   call, before the request is answered: a denied request consumes no limit, as on
//!   one server. The refund is exact for `fixed_window`, `sliding_window_counter`,
//!   `sliding_window_log` and `token_bucket`; a `gcra` or `leaky_bucket` booking is given back
//!   only while no later request was scheduled after it (otherwise it stays charged: moving
//!   the schedule back under a later booking would let two requests share one interval).
//! - **What others see in between.** Between the charge and the refund (one round trip,
//!   when a request is denied in another slot), a concurrent request sees the charge: it
//!   may be denied because of it, never admitted beyond a limit. The same holds for a failed
//!   slot: the others are refunded, and the request is decided by `on_store_error`.
//! - **A crash in between** (the server dies after the charge, before the refund) leaves
//!   the charge in place: the limit counts a request that did not happen, until its window
//!   passes, its bucket refills or its key expires (at most one period). Limits err on the
//!   side of denying, never of admitting.
//! - **Resharding.** Redirections while slots migrate (`MOVED`, `ASK`) are followed, and
//!   `TRYAGAIN` (a call whose keys the migration splits) is retried within the timeout,
//!   after 1 ms, then 2, 4, ... up to a quarter of the timeout. State moves with its slot,
//!   so counts carry over: the tests move a slot under load and count exactly the limit.
//! - **Failover.** When a master dies, its slots fail until its replica takes over (the
//!   cluster's `cluster-node-timeout`, plus an election: 2.4 to 3.2 s in the tests, with a
//!   1 s node timeout); each request costs at most the store's timeout, or nothing once the
//!   circuit breaker has opened, and `on_store_error` decides it. Limits are enforced again
//!   within a second of the promotion, from the state the replica had (Redis replicates
//!   asynchronously: the last charges before the crash may be lost, so a limit may admit a
//!   few requests more right after a failover). Once the other nodes mark the master failed,
//!   a cluster with the default `cluster-require-full-coverage yes` refuses every command
//!   until the failover ends; with `no`, the healthy masters keep deciding their clients.
//!   The circuit breaker is the store's, not a node's: a run of failures on one master pauses
//!   calls to all of them for the cooldown.
//!
//! Measured throughput against `redis-benchmark` running the same call is in the
//! repository's BENCHMARKS.md.
//!
//! ## Redis over TLS
//!
//! A `rediss://` URL reaches Redis over TLS (rustls; the process's crypto provider, or
//! `ring`, installed when the process has none). The server's certificate is checked against
//! the system's CAs, or against Redis's own CA given as a PEM file; a Redis that asks clients
//! for a certificate (`tls-auth-clients yes`) gets the one given with its key:
//!
//! ```rust,no_run
//! # #[cfg(feature = "redis")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tollgate::store::RedisStore;
//!
//! let store = RedisStore::builder("rediss://redis.internal:6380")
//!     .tls_ca("/etc/tollgate/redis-ca.pem")                                      // Redis's CA
//!     .tls_client_cert("/etc/tollgate/client.pem", "/etc/tollgate/client.key")  // mutual TLS
//!     .connect()
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! The files are read when the store connects: one that is missing or holds no PEM of its
//! kind fails `connect` with its path, and so do TLS files given for a `redis://` URL. A
//! certificate the CA did not sign fails it with `invalid peer certificate: UnknownIssuer`; a
//! Redis that wants a client certificate and got none, with `received fatal alert:
//! CertificateRequired`. The host in the URL must be one the server's certificate names
//! (an IP address too, as a subject alternative name). A Redis Cluster over TLS takes
//! `rediss://` nodes and the same files, used for every node it finds (its nodes announce
//! their TLS ports with `tls-cluster yes`). The demo reads `TOLLGATE_REDIS_CA`, `TOLLGATE_REDIS_CERT` and
//! `TOLLGATE_REDIS_KEY` beside a `rediss://` `TOLLGATE_REDIS_URL`. Tested with redis-server
//! 7.0 serving TLS only, a server and a cluster of three masters, with and without mutual
//! TLS, with certificates made at test time (`tests/redis_tls.rs`).
//!
//! ## Redis Sentinel
//!
//! [`RedisStore::sentinel_builder`](crate::store::RedisStore::sentinel_builder) takes the
//! master's name and some of its sentinels, and asks them for the master:
//!
//! ```rust,no_run
//! # #[cfg(feature = "redis")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tollgate::store::RedisStore;
//!
//! let store = RedisStore::sentinel_builder(
//!     "mymaster",
//!     ["redis://10.0.0.5:26379", "redis://10.0.0.6:26379", "redis://10.0.0.7:26379"],
//! )
//! .master_auth("default", "s3cret")     // the master's requirepass, if it has one
//! .connect()
//! .await?;
//! # Ok(())
//! # }
//! ```
//!
//! - **Finding the master.** The sentinels are asked when the store connects, and the
//!   master's `ROLE` checked. When a call fails as a lost master does (its connection drops or
//!   is refused, it times out, or the server answers `READONLY`, demoted to a replica), one
//!   search runs in the background, asking the sentinels again every 25 ms, doubling up to
//!   200 ms, until they name a master that answers as one; its connection then takes every
//!   call, and the circuit breaker's cooldown ends, so the next request tries it at once.
//! - **During a failover** there is no master: each request costs at most the store's
//!   timeout, then nothing once the circuit breaker opens, and each limit's
//!   `on_store_error` decides it, as in any outage.
//! - **How long.** With a master killed under load (`kill -9`), one sentinel
//!   (`down-after-milliseconds 1000`, `failover-timeout 2000`, quorum 1), a store timeout of
//!   200 ms and the default breaker, the sentinel named the promoted replica 2.6 to 2.8 s
//!   after the kill, and Redis decided again 2.8 s after it, every time: the sentinel's
//!   detection (`down-after-milliseconds`) and election make most of it; the store follows
//!   within 0.1 to 0.2 s. Measured by `cargo test --all-features --test redis_sentinel
//!   decisions_follow_the_master_through_a_failover -- --nocapture`, which prints both.
//!   A manual `SENTINEL FAILOVER` (the old master demoted, not dead) is followed the same way.
//! - **Limits after a failover** are exact again, from the state the replica had: Redis
//!   replicates asynchronously, so the last charges before the crash may be lost, and a limit
//!   may admit a few requests more right after a failover (none in the test, which waits for
//!   the replica with `WAIT` before the kill).
//! - **Credentials and TLS.** The sentinels' credentials go in their URLs
//!   (`redis://:password@host:26379`), the master's in
//!   [`master_auth`](crate::store::RedisStoreBuilder::master_auth). `rediss://` sentinels are
//!   reached over TLS, and so is the master then; TLS files
//!   ([above](#redis-over-tls)) apply to both, and alone make the master's connection TLS.
//! - **The demo** reads `TOLLGATE_REDIS_SENTINEL`: the master's name, `@`, then its
//!   sentinels, comma-separated, each `host:port` or a URL:
//!   `TOLLGATE_REDIS_SENTINEL=mymaster@127.0.0.1:26379,127.0.0.1:26380 cargo run --example
//!   server --features redis`.
//!
//! # Time and clock steps
//!
//! When a wall clock is stepped (NTP correcting a large error, an administrator, a virtual
//! machine resumed from a snapshot), what changes depends on where a limit is decided:
//!
//! - **In memory** (`Limiter::new`, [`MemoryStore`](crate::store::MemoryStore), and the
//!   `on_store_error: local` fallback): decisions run on
//!   [`SystemClock`](crate::clock::SystemClock), the wall clock read once, at the first
//!   decision, and counted on from there by a monotonic clock. A step of the server's clock
//!   changes no decision: a step back by an hour does not deny limited clients for an hour
//!   more, and a step forward refills nobody; `Retry-After` and the other headers are what
//!   they would have been. Windows keep the alignment they had at start (a minute window
//!   starts at `:00` of the clock as it was then), so after a step they are off the wall
//!   clock's minutes by the step, until the process restarts. NTP's gradual corrections
//!   (slewing) reach this clock as they reach the wall clock. Tests build the same clock from
//!   two [`ManualClock`](crate::clock::ManualClock)s, an
//!   [`AnchoredClock`](crate::clock::AnchoredClock), and step the "wall" one.
//! - **In Redis**: decisions take Redis's own clock (`TIME`), so the servers' clocks do not
//!   matter, stepped or skewed. A step of the Redis host's clock reaches the limits kept in
//!   Redis as it reaches Redis itself (its key expiries too): a step back holds waiting
//!   clients for as much longer, a step forward refills them. On a Redis Cluster, each
//!   master's clock decides the limits in its slots. Keep those hosts' clocks slewed, not
//!   stepped, once Redis runs. The over-limit cache waits on the server's monotonic clock.
//! - **Local-first limits** (`sync_every`): decided on the server's clock (the monotonic
//!   one of the memory store) corrected by its offset to Redis's clock, measured at every
//!   sync as Redis's `TIME` minus the midpoint of the server's times when the sync call was
//!   sent and when it was answered. A step of the server's clock changes nothing. A step of
//!   the Redis host's clock reaches each server at its next sync, as it reaches the limits
//!   kept in Redis; between syncs, and while Redis is down, a server goes on from the offset
//!   it last measured. Each measurement moves the fleet's time by its error (at most half the
//!   sync call's round trip), forward or back.
//! - **The client layer** (feature `client`): holds and pacing run on the layer's clock,
//!   `SystemClock` unless given another, so a step of the client host's clock neither
//!   shortens nor lengthens a hold. Waits given as durations (`Retry-After` in seconds, as
//!   tollgate sends it, `X-Ratelimit-Retry-After`, `grpc-retry-pushback-ms`, the `t` of
//!   `RateLimit`) are unaffected. A `Retry-After` given as a date is read against the
//!   layer's clock: after a step of the client host's clock, it is off by the step, until
//!   the client restarts (as it always is by the difference between the two hosts' clocks).
//!
//! # What lasts: clock steps, reloads and outages
//!
//! In short, what each place that keeps state does when the server's clock is stepped, when
//! a reload changes a limit, and when Redis is down (the sections above and the rules
//! reference say more):
//!
//! | state | a step of the wall clock | a reload that changes a limit | Redis down | bounded by |
//! |---|---|---|---|---|
//! | memory | nothing: monotonic time, anchored once ([time](#time-and-clock-steps)) | each client keeps what it used ([reload](#what-a-reload-keeps)) | — | a key ceiling; idle keys dropped |
//! | Redis, Redis Cluster | Redis's own clock decides | kept, in the decision's own call (on a cluster, a limit with no varying value starts afresh) | `on_store_error` decides, after the timeout; then the circuit breaker ([Redis](#shared-limits-across-a-fleet-redis)) | keys expire once fresh again |
//! | local-first limits | the server's monotonic clock, set to Redis's at each sync | kept through each server ([local-first](super::rules#local-first-limits-sync_every)) | each server decides alone on its share, and sends what it admitted when Redis is back | `max_keys` per server; keys whose counts no longer matter forgotten, sent or not |
//! | approximate limits | nothing (memory's clock) | the sketch kept when its settings are, its clients' counts with it; else freed | — | the sketch's fixed size, allocated when the rules are put in force |
//! | the client layer | nothing (holds run on a monotonic clock) | — | — | holds of at most `max_hold` (an hour), `clear_holds()`; 1,024 origins, 64 partitions each ([client](super::client)) |
//!
//! [`Limiter::peek`](crate::Limiter::peek) and [`Limiter::reset`](crate::Limiter::reset)
//! reach a client's state in each of them ([below](#seeing-and-resetting-a-client)).
//!
//! # Background work
//!
//! Every task and thread tollgate runs, where it runs and how it ends. The Redis store's
//! tasks that outlive a request run on the runtime that awaited
//! [`connect`](crate::store::RedisStoreBuilder::connect), wherever its requests come from:
//! keep that runtime running for as long as the store is used (its connections run there
//! too). They hold the store only while they work, so dropping the store's last clone (the
//! layer's, the limiter's, yours) ends them. The others are a request's, and end with
//! their call, within the store's `timeout`:
//!
//! | task | started by | runs on | ends when | to stop or flush |
//! |---|---|---|---|---|
//! | rules watcher | [`RulesWatcherBuilder::watch`](crate::reload::RulesWatcherBuilder::watch) | a thread of its own, `tollgate-rules-watcher` (and `notify`'s, for file events) | the [`RulesWatcher`](crate::reload::RulesWatcher) is dropped | drop it (the drop waits for the thread); [`reload`](crate::reload::RulesWatcher::reload) reads the file at once |
//! | local-first sync (Redis) | the first request with a [`sync_every`](super::rules#local-first-limits-sync_every) limit | the store's runtime | the tick (the shortest `sync_every`) after the store is dropped | [`sync_now`](crate::store::RedisStore::sync_now) sends this server's counts, then drop the store |
//! | lease renewal (Redis) | the first request that takes a [concurrency](super::rules#concurrency) slot | the store's runtime | 100 ms after the store is dropped (a request holding slots keeps it until its response ends and gives them back) | drop the store |
//! | master search (Redis Sentinel) | a call that finds the master lost | the store's runtime | the sentinels name a master, or the store is dropped | drop the store |
//! | batch of waiting requests (Redis) | a call ending while requests wait for one (a single server, busy) | the runtime of that call (outside any, the store's) | its call answers | — |
//! | taking or giving back a request's slots, giving back a queue place (Redis) | a request with concurrency limits, its response's end, a queued request whose client left | the request's runtime (outside any, the store's) | its call answers | — |
//! | settling a cost ([`settle`](super::rules#settle-costs-known-after-the-response)) | a response whose cost the store cannot settle at once (Redis) | the runtime of the thread where the response ends (none: the charge stays) | the store answers | — |
//! | keeping a block ([`block_for`](super::rules#block_for-a-penalty)) | a refusal answered at once that starts a block the store keeps later (Redis) | the request's runtime (none: the block is not kept) | the store answers | — |
//!
//! A planned stop is: stop taking requests (e.g. axum's `with_graceful_shutdown`), call
//! [`RedisStore::sync_now`](crate::store::RedisStore::sync_now) if the rules have
//! local-first limits, then drop the store's clones, and the
//! [`RulesWatcher`](crate::reload::RulesWatcher), before the runtime stops.
//!
//! # Metrics
//!
//! With the `metrics` feature, tollgate reports through the
//! [`metrics`](https://docs.rs/metrics) facade to whichever recorder the application installs
//! (Prometheus, StatsD, ...). Without it, nothing is measured and nothing is paid. Labels
//! are the rules' `domain` and the limit's label (its `name`, else its descriptor path such
//! as `endpoint=login/remote_address`), never a client address, user ID or any other request
//! value, so the rules bound the number of series.
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `tollgate_requests_total` | counter | `domain`, `limit`, `outcome` | requests decided under each limit; `outcome` is `allowed`, `denied`, `delayed` (queued by a shaping leaky bucket), `shadow_denied` (a shadow-mode limit would have denied) or `shadow_delayed` (a shadow-mode shaping leaky bucket would have queued) |
//! | `tollgate_store_errors_total` | counter | `domain`, `limit` | requests the store failed to decide; `on_store_error` decided them |
//! | `tollgate_decision_seconds` | histogram | `domain` | time to decide a request, Redis round trip included (the Prometheus exporter renders a summary unless given buckets) |
//! | `tollgate_tracked_keys` | gauge | `domain` | keys in the in-memory store, set by `Limiter::record_tracked_keys()` |
//! | `tollgate_adaptive_limit` | gauge | `domain` | the most requests in flight that [`load_shedding`](crate::guide::rules#load_shedding)'s adaptive limit admits now, as found from latency |
//! | `tollgate_in_flight` | gauge | `domain`, `limit` | requests of this process holding a slot of a [`concurrency`](crate::guide::rules#concurrency) limit (in memory or in Redis), over its keys; back to 0 when they end |
//! | `tollgate_reloads_total` | counter | `result` | reloads of the rules file: `success` or `failure` |
//! | `tollgate_sketch_bytes` | gauge | `domain`, `limit` | the memory of an [approximate](crate::guide::rules#approximate-limits) limit's sketch |
//! | `tollgate_sketch_requests` | gauge | `domain`, `limit` | requests an approximate limit counted in its last finished window, over every client |
//! | `tollgate_sketch_fill` | gauge | `domain`, `limit` | the share of the sketch's cells holding a count at that load, `1 − e^-μ` (see the guide's `μ`) |
//! | `tollgate_sketch_error_bound` | gauge | `domain`, `limit` | by how much an estimate may exceed a client's true count at that load (with probability 98 % for a fixed window, 95 % for a sliding window counter) |
//! | `tollgate_sync_overshoot` | gauge | `domain`, `limit` | requests the fleet admitted beyond a [local-first](crate::guide::rules#local-first-limits-sync_every) limit, the most among its keys at this server's last sync (Redis store) |
//!
//! Each limit that applies to a request counts exactly one outcome for it, so for each limit
//! `allowed + denied + delayed + shadow_denied + shadow_delayed` is the number of requests it
//! saw. When a request is denied by one limit, another limit that had room counts it as
//! `allowed` (it was not charged, nor queued). When the store fails, the limit's
//! `on_store_error` decides the outcome: `allow` counts `allowed`, `deny` counts `denied`
//! (`shadow_denied` in shadow mode), `local` counts what the in-memory fallback decided; each
//! of those requests is also counted in `tollgate_store_errors_total`, and a denial for it is
//! logged as a store failure, not as a rate limit.
//!
//! Install the recorder before building the [`Limiter`](crate::Limiter): the metric handles
//! of a set of rules (labels, registry entries) are registered when the rules are put in
//! force, by `Limiter::new`/`with_store` and by `set_rules` (each hot reload), never by a
//! request. A recorder installed later sees nothing until the next reload.
//!
//! With the feature on, each decision of a request that some limit applies to also reads the
//! clock twice (for `tollgate_decision_seconds`), records one histogram sample and increments
//! one counter per limit; requests that no limit applies to pay nothing.
//!
//! [`MemoryStore::len`](crate::store::MemoryStore::len) locks each shard in turn, so the key
//! gauge is set when you ask, e.g. every few seconds from the task that sweeps the store:
//!
//! ```rust,no_run
//! # use tollgate::{rules::Rules, Limiter};
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let rules = Rules::from_file("rules.yaml")?;
//! let limiter = Limiter::new(rules);
//! let maintained = limiter.clone();
//! tokio::spawn(async move {
//!     let mut every = tokio::time::interval(std::time::Duration::from_secs(10));
//!     loop {
//!         every.tick().await;
//!         maintained.store().sweep();
//!         # #[cfg(feature = "metrics")]
//!         maintained.record_tracked_keys();
//!     }
//! });
//! # Ok(())
//! # }
//! ```
//!
//! The demo serves them at `/metrics` when built with the feature (`cargo run --example
//! server --features metrics`); it installs the recorder first thing, before the limiter and
//! the rules watcher. After six logins from one client against the `login` limit of 5 a
//! minute, scraped ten seconds later (the sweep had dropped the idle `per-client` key; a
//! debug build, hence the decision times), trimmed:
//!
//! ```text
//! # TYPE tollgate_requests_total counter
//! tollgate_requests_total{domain="demo",limit="login",outcome="allowed"} 5
//! tollgate_requests_total{domain="demo",limit="login",outcome="denied"} 1
//! tollgate_requests_total{domain="demo",limit="login",outcome="delayed"} 0
//! tollgate_requests_total{domain="demo",limit="login",outcome="shadow_denied"} 0
//! tollgate_requests_total{domain="demo",limit="login",outcome="shadow_delayed"} 0
//! tollgate_requests_total{domain="demo",limit="per-client",outcome="allowed"} 6
//! # TYPE tollgate_store_errors_total counter
//! tollgate_store_errors_total{domain="demo",limit="login"} 0
//! # TYPE tollgate_tracked_keys gauge
//! tollgate_tracked_keys{domain="demo"} 1
//! # TYPE tollgate_decision_seconds summary
//! tollgate_decision_seconds{domain="demo",quantile="0.5"} 0.00017957815628350334
//! tollgate_decision_seconds{domain="demo",quantile="0.99"} 0.00019290744695981486
//! tollgate_decision_seconds_sum{domain="demo"} 0.001089382
//! tollgate_decision_seconds_count{domain="demo"} 6
//! ```
//!
//! # Tracing
//!
//! Through [`tracing`](https://docs.rs/tracing), every decision of a request that some limit
//! applies to runs in a `debug` span `rate_limit` with the fields `domain` and `limits` (the
//! labels of the limits that applied), so store errors and events carry them; a request that
//! no limit applies to returns before the span. A request denied over a limit logs a `warn`
//! event, one denied because the store failed under `on_store_error: deny` another `warn`
//! event that says so, and a would-be denial of a shadow-mode limit an `info` event: each at
//! most once a second per limit, with `suppressed`, the number of such events left out since
//! the previous one, so a flood of denials writes one line a second per limit. The throttle
//! reads the limiter's clock, its store's, only for an event whose level is enabled (tests
//! drive it with a store on a [`ManualClock`](crate::clock::ManualClock),
//! [`MemoryStore::with_clock`](crate::store::MemoryStore::with_clock)); nothing is
//! formatted for admitted requests.
//!
//! ```text
//! WARN tollgate::observe: rate limited: requests over this limit are denied domain="demo" limit="login" retry_after_ms=59881 suppressed=0
//! WARN tollgate::observe: the rate-limit store failed: requests under this limit are denied (on_store_error: deny) domain="demo" limit="login" retry_after_ms=1000 suppressed=0
//! ```
//!
//! # The client IP behind proxies
//!
//! The socket peer is the truth: axum's `ConnectInfo<SocketAddr>` (serve with
//! `into_make_service_with_connect_info::<SocketAddr>()`), tonic's `TcpConnectInfo` (which
//! tonic records itself), or a [`PeerAddr`](crate::source::PeerAddr) in the request
//! extensions. A server started without any of them answers `500` with the fix in the body
//! (and logs it once) rather than silently limiting nobody.
//!
//! Only when the peer is in `client_ip.trusted_proxies` is one forwarding header read: the
//! one those proxies write (`client_ip.header`: `x-forwarded-for` by default, `forwarded` for
//! RFC 7239, or `x-real-ip`). Other forwarding headers are ignored, because a proxy passes
//! them through from the client. The list is walked from the right past trusted hops to the
//! first untrusted address; a hop that cannot be parsed stops the walk at the nearest trusted
//! address, so a client cannot pick its own key. At most 64 hops are read. IPv4-mapped IPv6
//! addresses count as IPv4; IPv6 clients are grouped by `ipv6_prefix` (default 64).
//!
//! ```rust
//! use tollgate::rules::Rules;
//! use tollgate::source::PeerAddr;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: demo
//! client_ip:
//!   trusted_proxies: [10.0.0.0/8]
//! descriptors:
//!   - key: remote_address
//!     rate_limit: { unit: second, requests_per_unit: 20 }
//! "#)?;
//! let mut request = http::Request::builder()
//!     .header("x-forwarded-for", "198.51.100.1, 203.0.113.9")
//!     .body(())?;
//! request.extensions_mut().insert(PeerAddr("10.0.0.7:4000".parse()?));
//! let explanation = rules.explain(&request)?;
//! assert_eq!(explanation.applied()[0].state_key(), "remote_address=203.0.113.9");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Headers and gRPC answers
//!
//! | when | headers |
//! |---|---|
//! | admitted | `X-Ratelimit-Limit`, `X-Ratelimit-Remaining` of the most restrictive limit (none when no limit applied) |
//! | denied (`429`) | `X-Ratelimit-Limit`, `X-Ratelimit-Remaining: 0`, `X-Ratelimit-Retry-After`, `Retry-After`; body `application/problem+json` (RFC 9457) |
//! | optional | `X-Ratelimit-Reset` (`response.reset_header: true`); `RateLimit-Policy: "name";q=100;w=60` and `RateLimit: "name";r=42;t=17` (`response.headers: ietf` or `both`, draft-ietf-httpapi-ratelimit-headers; a bucket's `w` is the time its `q` takes to come back, see [algorithms](super::algorithms#what-the-headers-report)) |
//!
//! That is the default set, `response.headers: x_ratelimit`. `ietf` sends the IETF fields
//! instead, `both` sends both, and `none` sends no rate-limit header on admitted responses;
//! a denial always carries `Retry-After`, with the headers of the chosen set beside it. The
//! `X-Ratelimit-*` names can be changed (`response.names`); see
//! [the rules file](super::rules#response).
//!
//! `Retry-After` is whole seconds rounded up and never 0 while denied; a retry after that
//! long is admitted (`grpc-retry-pushback-ms` is likewise rounded up). For the token bucket,
//! the limit reported is the burst (what a client may send at once; see
//! [algorithms](super::algorithms#what-the-headers-report)). A limit that can never admit the
//! request (`requests_per_unit: 0`, or a request larger than the limit) reports one period.
//!
//! gRPC requests (`content-type: application/grpc*`) are answered Trailers-Only: HTTP 200
//! with `grpc-status: 8` (RESOURCE_EXHAUSTED), a `grpc-message`, `grpc-retry-pushback-ms` and
//! the headers above. (An HTTP 429 would reach gRPC clients as UNAVAILABLE, which they retry
//! at once.) Rules see a gRPC call as a `POST` to `/package.Service/Method`, so the `path`
//! key limits single methods.
//!
//! On the other end of the wire, the client layer (feature `client`,
//! `tollgate::client::RateLimitClientLayer`) reads exactly these answers: after a refusal,
//! or an `ietf` answer with `r=0`, it does not send to that server again until the wait has
//! passed (the module's documentation shows it on a hyper client). With `pace`, it spreads
//! its requests over the quota that `RateLimit-Policy` announces, and is not refused at
//! all. With `retry`, it sends refused idempotent requests again once the wait is over,
//! within a retry budget. The guide's `client` chapter (built with the feature) has the
//! details and figures.
//!
//! # Seeing and resetting a client
//!
//! For support's "why is this customer limited?" and "reset them",
//! [`Limiter::peek`](crate::Limiter::peek) takes a client's values as
//! [`Limiter::check`](crate::Limiter::check) takes them and tells what each limit they
//! reach would answer a request now, charging and counting nothing;
//! [`Limiter::reset`](crate::Limiter::reset) forgets that client's state under those
//! limits (in Redis too, for the whole fleet) and answers how many keys held state. Serve
//! them where only operators reach, never beside the limited routes. `tollgate serve` has
//! them as `POST /v1/peek` and `POST /v1/reset` on its `--admin` listener ([the
//! service](super::service#seeing-and-resetting-a-client)).
//!
//! ```rust
//! use tollgate::{rules::Rules, Limiter};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let limiter = Limiter::new(Rules::from_yaml(r#"
//! domain: api
//! sources: { user: { header: x-user } }
//! descriptors:
//!   - key: user
//!     rate_limit: { unit: minute, requests_per_unit: 3, name: per-user }
//! "#)?);
//! let ann = [("user", "ann")];
//! for _ in 0..4 {
//!     limiter.check(&ann, 1).await;                // the fourth is refused
//! }
//! let limits = limiter.peek(&ann).await?;          // one per limit her values reach
//! let per_user = limits[0].decision();
//! assert_eq!(limits[0].limit(), "per-user");
//! assert!(!per_user.allowed && per_user.remaining == 0);
//! println!("ann is admitted again in {:?}", per_user.retry_after);
//!
//! assert_eq!(limiter.reset(&ann).await?, 1);       // one key held her state
//! assert!(limiter.check(&ann, 1).await.is_allowed());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # The `tollgate` command: `check` and `explain`
//!
//! The `tollgate` command (the `tollgate-cli` crate in the repository's `cli/` directory)
//! validates a rules file before it is deployed, and answers "which limits would this request
//! meet?" with the layer's own matching code
//! ([`Rules::explain`](crate::rules::Rules::explain) in the library). A third command,
//! `tollgate simulate`, replays traffic through the rules: it has [a chapter of its
//! own](super::simulate).
//!
//! ```sh
//! cargo install --path cli          # or, from the repository: cargo run -p tollgate-cli -- check rules.yaml
//! tollgate check rules.example.yaml
//! tollgate explain rules.example.yaml --method POST --path /auth/login \
//!     --ip 10.0.0.7 --header 'x-forwarded-for: 203.0.113.9'
//! ```
//!
//! `check` prints every limit the file compiles to:
//!
//! ```text
//! $ tollgate check rules.example.yaml
//! rules.example.yaml: valid, domain `demo`, 13 limit(s)
//!
//! NAME        DESCRIPTOR                     ALGORITHM               QUOTA                             SHADOW  ON STORE ERROR  SYNC EVERY  APPROXIMATE  REPLACES
//! per-client  remote_address                 token_bucket            20 per 1s, burst 40               no      allow           -           -            -
//! login       endpoint=login/remote_address  sliding_window_log      5 per 1m                          no      allow           -           -            -
//! -           endpoint=posts/user_id         token_bucket            1 per 1s, burst 1                 no      allow           -           -            -
//! -           endpoint=friends/user_id       fixed_window            150 per 1d                        no      allow           -           -            -
//! -           tenant                         sliding_window_counter  100 per 30s                       no      allow           -           -            -
//! -           path=/reports                  leaky_bucket            5 per 1s, queue 10, max delay 3s  no      allow           -           -            -
//! -           path=/search/remote_address    gcra                    1 per 1s, burst 3                 no      allow           -           -            -
//! -           api_key=internal-*             -                       unlimited                         no      allow           -           -            -
//! -           api_key=premium-*              sliding_window_counter  1000 per 1m                       no      allow           -           -            per-client
//! -           path=/export/remote_address    concurrency             2 in flight                       no      allow           -           -            -
//! -           method=DELETE                  sliding_window_counter  0 per 1s                          no      allow           -           -            -
//! -           method=PUT                     sliding_window_counter  2 per 1m                          yes     allow           -           -            -
//! -           load_shedding                  concurrency             32 in flight                      no      allow           -           -            -
//! ```
//!
//! A limit in shadow mode shows `yes`; when the file sets the top-level `shadow_mode: true`,
//! every limit shows at least `yes (file)`, under a line saying that nothing is denied.
//!
//! It prints every error instead, each with `line:column`, and exits with 1 (2 for a wrong
//! command line):
//!
//! ```text
//! $ tollgate check bad.yaml
//! bad.yaml: 2 error(s) in the rate-limit rules:
//!   bad.yaml:3:10: descriptors[0].key: unknown key `user`: declare it under `sources`, or use a built-in key (remote_address, method, path, route, host)
//!   bad.yaml:8:17: descriptors[2].rate_limit.requests_per_unit: missing (or set `unlimited: true`)
//! ```
//!
//! `explain` builds the request from its options (`--method`, `--path`, `--query
//! NAME=VALUE`, `--header NAME=VALUE` or `'NAME: VALUE'`, `--host`, `--identity`, `--route`
//! for the matched route template such as `/users/{id}`, and `--ip` for the socket peer) and
//! shows each limit it meets with its state key: the request's value for every descriptor key
//! on the way, so two requests with the same state key share a counter. The client address
//! is resolved as the layer resolves it, forwarding headers included:
//!
//! ```text
//! $ tollgate explain rules.example.yaml --method POST --path /auth/login --ip 10.0.0.7 --header 'x-forwarded-for: 203.0.113.9'
//! request: POST /auth/login
//! client:  203.0.113.9 (forwarded by the trusted proxy 10.0.0.7)
//! result:  2 limits apply; the request must fit all of them
//!
//! LIMIT       STATE KEY                                  ALGORITHM           QUOTA                NOTE
//! per-client  remote_address=203.0.113.9                 token_bucket        20 per 1s, burst 40
//! login       endpoint=login/remote_address=203.0.113.9  sliding_window_log  5 per 1m
//!
//! $ tollgate explain rules.example.yaml --path /search --ip 203.0.113.9 --header x-api-key=internal-batch
//! request: GET /search
//! client:  203.0.113.9
//! result:  exempt (unlimited): api_key=internal-batch matches the unlimited entry `api_key=internal-*`; no limit applies
//! ```
//!
//! It also says "no limit applies", marks shadow-mode limits, and lists the limits a
//! matching `replaces` set aside.
