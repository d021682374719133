//! # The rate limit service: `tollgate serve`
//!
//! `tollgate serve` answers Envoy's rate limit service API,
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` from the official
//! `rls.proto`, with the rules, algorithms and stores of the
//! [`RateLimitLayer`](crate::RateLimitLayer). For each request, the gateway sends the
//! request's *descriptors* and asks whether they are within their limits; it answers the
//! client `429` itself when they are not. It replaces envoyproxy/ratelimit: a
//! configuration written for it loads unchanged.
//!
//! Choose the layer when the service that handles the requests is yours, in Rust: it sees
//! the whole request, decides in process and can hold a request back for a shaping leaky
//! bucket. Choose the service when requests pass through Envoy (or a gateway built on it)
//! and the limits must hold in front of services you do not change, whatever their
//! language: each request costs the gateway one gRPC call, and the rules see only what the
//! gateway's rate limit actions put in the descriptors.
//!
//! # Running it
//!
//! ```sh
//! tollgate serve --rules rules.yaml     # gRPC on 127.0.0.1:8081, HTTP on :8080, state in memory
//! tollgate serve --rules rules.yaml --grpc 0.0.0.0:8081 --redis redis://10.0.0.5:6379
//! tollgate serve --rules rules.yaml --redis-cluster redis://10.0.0.5:7000,redis://10.0.0.6:7000
//! ```
//!
//! - `--grpc ADDR` (default `127.0.0.1:8081`): `ShouldRateLimit`, over plaintext HTTP/2.
//! - `--http ADDR` (default `127.0.0.1:8080`): `POST /json`, `GET /healthcheck` and
//!   `GET /metrics` ([below](#http-endpoints)).
//! - `--tls-cert FILE --tls-key FILE`: gRPC over TLS (PEM files); with `--tls-client-ca
//!   FILE`, mutual TLS (a client must show a certificate that CA signed), and with
//!   `--tls-client-san NAME`, that certificate must name it (else `UNAUTHENTICATED`).
//! - `--admin ADDR` (off without it): `POST /v1/peek` and `POST /v1/reset`, to see and
//!   reset a client's state, on a listener of their own ([below](#seeing-and-resetting-a-client)).
//! - The state is in memory by default: each instance counts alone. With `--redis URL`, or
//!   `--redis-cluster URLS` (some of the cluster's nodes, comma-separated), it lives in
//!   Redis, and every instance using the same Redis shares each limit (exactly, or within
//!   the stated bound for a [local-first](super::rules#local-first-limits-sync_every) one),
//!   with the timeout, circuit breaker and per-limit `on_store_error` policy of
//!   [operations: Redis](super::operations#shared-limits-across-a-fleet-redis).
//!
//! It listens first: a bad or busy address is an error (exit status 1), and otherwise its
//! servers answer at once, while it starts. It prints where it listens
//! (`tollgate serve: starting; gRPC on 127.0.0.1:8081 and HTTP on 127.0.0.1:8080`), then:
//!
//! 1. It loads the rules. Rules that do not compile are an error: each mistake is printed
//!    with its `line:column`, and the exit status is 1.
//! 2. It connects the store. A Redis that is not up yet is waited for, not an error: each
//!    failed attempt is printed (``tollgate serve: cannot connect to Redis at
//!    `redis://10.0.0.5:6379`: Connection refused (os error 111), retrying in 1.6s``) and
//!    tried again after 100 ms, then twice as long each time, up to 5 s. Only an address
//!    that no wait can fix, such as `--redis 10.0.0.5:6379` without its `redis://`, is an
//!    error at once.
//! 3. It is ready, and says so in a second line (``tollgate serve: domain `edge`, 3
//!    limit(s) from rules.yaml; gRPC on 127.0.0.1:8081 and HTTP on 127.0.0.1:8080``).
//!
//! Until then, `GET /healthcheck` answers `503` with the reason as text, `POST /json` and
//! the admin endpoints the same, and a gRPC call `UNAVAILABLE` with it: `starting: loading the rules`, then
//! `starting: connecting to Redis at redis://10.0.0.5:6379` and, after a failed attempt,
//! `starting: cannot connect to Redis at ...` with the error. Envoy's
//! `failure_mode_deny` decides the requests meanwhile; a probe on `/healthcheck` keeps the
//! instance out of a load balancer until it is ready.
//!
//! Once it is ready, the rules are read again every second (a change saved while it waited
//! for Redis included): a saved change is in force within a second, and a bad edit is
//! logged while the rules in force keep serving. `tollgate check --service rules.yaml`
//! validates a file before it ships, Envoy's files included, and lists how the service
//! reads it differently from envoyproxy/ratelimit.
//!
//! `--rules DIR` serves a directory: every `*.yaml` (and `*.yml`) file in it is a domain,
//! all served at once; a call names its domain, and a domain without a file limits
//! nothing. A file added, changed or removed takes effect within a second; a file that no
//! longer compiles keeps its domain's rules (logged), and leaves the other domains alone.
//! Two files of one domain are refused, unless `--merge-domain-config` (or
//! `MERGE_DOMAIN_CONFIG=true`) merges them, their descriptors in the files' order.
//!
//! ## In envoyproxy/ratelimit's place
//!
//! Started without `--rules`, `tollgate serve` is configured as envoyproxy/ratelimit is, from
//! its environment variables, so that its container's deployment runs unchanged: the rules
//! are the directory `$RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY`, served as
//! above. Each setting is honoured, or said at start to have no effect, or stops the start
//! with a message naming it when it asks for what tollgate does not do; none is ignored
//! silently. Flags still win over the environment.
//!
//! | Setting | Default | tollgate serve |
//! |---|---|---|
//! | `RUNTIME_ROOT`, `RUNTIME_SUBDIRECTORY`, `RUNTIME_APPDIRECTORY` | `/srv/runtime_data/current`, empty, `config` | the rules directory, read every second |
//! | `RUNTIME_WATCH_ROOT`, `RUNTIME_IGNOREDOTFILES` | | no effect (said): the directory is read every second, `*.yaml` files only |
//! | `MERGE_DOMAIN_CONFIG` | `false` | honoured |
//! | `GRPC_HOST`, `GRPC_PORT` | `0.0.0.0`, `8081` | the gRPC listener |
//! | `HOST`, `PORT` | `0.0.0.0`, `8080` | `POST /json`, `GET /healthcheck`, `GET /metrics` |
//! | `BACKEND_TYPE` | `redis` | `redis`; `memory` (tollgate's) keeps the state in the process; `memcache` (or `MEMCACHE_HOST_PORT`) stops the start, its `MEMCACHE_*` unread |
//! | `REDIS_SOCKET_TYPE`, `REDIS_URL` | `unix`, `/var/run/nutcracker/ratelimit.sock` | honoured (`host:port` over `tcp`, a socket path over `unix`) |
//! | `REDIS_TYPE` | `SINGLE` | `single`, `cluster` (`REDIS_URL` a comma-separated list of nodes), `sentinel` (`REDIS_URL` the master's name, then its sentinels: `mymaster,host:26379,...`), each honoured |
//! | `REDIS_AUTH`, `REDIS_SENTINEL_AUTH` | empty | honoured (`password` or `user:password`; the master's, and the sentinels') |
//! | `REDIS_TLS`, `REDIS_TLS_CACERT`, `REDIS_TLS_CLIENT_CERT`, `REDIS_TLS_CLIENT_KEY` | `false`, empty | honoured: `rediss://`, Redis's CA, a client certificate (mutual TLS) |
//! | `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION` | `false` | `true` stops the start: Redis's certificate is always verified |
//! | `REDIS_POOL_SIZE`, `REDIS_POOL_ON_EMPTY_BEHAVIOR`, `REDIS_PIPELINE_WINDOW`, `REDIS_PIPELINE_LIMIT`, `REDIS_CLUSTER_PIPELINE_PARALLELISM`, `REDIS_TIMEOUT` | | no effect (said): one multiplexed connection, calls batched while it is busy, 50 ms timeout |
//! | `REDIS_STARTUP_INITIAL_INTERVAL`, `REDIS_STARTUP_MAX_INTERVAL`, `REDIS_STARTUP_MAX_ELAPSED_TIME` | `1s`, `30s`, `0` | no effect (said): Redis is tried again after 100 ms, twice as long each time up to 5 s, without end |
//! | `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION` | `false` | no effect (said): `/healthcheck` is OK from when the rules loaded and Redis first answered |
//! | `GRPC_MAX_CONNECTION_AGE`, `GRPC_MAX_CONNECTION_AGE_GRACE` | `24h`, `1h` | no effect (said): a connection lasts until its client closes it |
//! | `REDIS_PERSECOND` (and its `REDIS_PERSECOND_*`) | `false` | `true` stops the start: one Redis keeps every limit |
//! | `LOCAL_CACHE_SIZE_IN_BYTES` | `0` | no effect (said): the over-limit cache is always on, bounded |
//! | `EXPIRATION_JITTER_MAX_SECONDS`, `STATS_FLUSH_INTERVAL` | | no effect (said): keys expire with their state; each call's counts are sent at once |
//! | `NEAR_LIMIT_RATIO` | `0.8` | no effect (said): `near_limit` counts past 0.8 of a limit |
//! | `CACHE_KEY_PREFIX` | empty | honoured: tollgate's keys start with it instead of `tollgate:` (the rest is tollgate's layout), so services can share a Redis |
//! | `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` | `false` | `true` is what tollgate always does: a refused call charges none of its descriptors (*All or nothing*, [below](#how-a-descriptor-matches)) |
//! | `SHADOW_MODE` | `false` | honoured: every limit only reports |
//! | `QUOTA_MODE` | `false` | `true` stops the start: write `quota_mode: true` on each descriptor |
//! | `RESPONSE_DYNAMIC_METADATA` | `false` | honoured (also `--response-dynamic-metadata`) |
//! | `LIMIT_RESPONSE_HEADERS_ENABLED`, `LIMIT_LIMIT_HEADER`, `LIMIT_REMAINING_HEADER`, `LIMIT_RESET_HEADER` | `false`, `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` | honoured: without it, no headers, as upstream |
//! | `USE_STATSD`, `STATSD_HOST`, `STATSD_PORT` | `true`, `localhost`, `8125` | honoured: upstream's statistics, under its names, over UDP (also `--statsd HOST:PORT`; [below](#statistics)) |
//! | `EXTRA_TAGS`, `DISABLE_STATS` | empty, `false` | honoured: tags in each statistic's name as upstream writes them (`…total_hits.__a=b.__foo=bar`); no statistics |
//! | `USE_DOG_STATSD`, `USE_PROMETHEUS` | `false` | `true` stops the start: `GET /metrics` serves Prometheus (their `USE_DOG_STATSD_MOGRIFIERS`, `PROMETHEUS_*` unread) |
//! | `GRPC_SERVER_USE_TLS`, `GRPC_SERVER_TLS_CERT`, `GRPC_SERVER_TLS_KEY` | `false` | honoured: gRPC over TLS (rustls; also `--tls-cert`, `--tls-key`) |
//! | `GRPC_CLIENT_TLS_CACERT`, `GRPC_CLIENT_TLS_SAN` | empty | honoured: mutual TLS, a client's certificate signed by that CA, naming that SAN (also `--tls-client-ca`, `--tls-client-san`); another name is `UNAUTHENTICATED` |
//! | `GRPC_UDS` | empty | set, it stops the start: the gRPC listener is TCP |
//! | `CONFIG_TYPE` | `FILE` | `FILE`; `GRPC_XDS_SOTW` stops the start (its `CONFIG_GRPC_XDS_*`, `XDS_CLIENT_*` unread) |
//! | `TRACING_ENABLED`, `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`, `FORCE_START_WITHOUT_INITIAL_CONFIG` | `false` | `true` stops the start (the `TRACING_*` unread) |
//! | `LOG_LEVEL`, `LOG_FORMAT`, `DEBUG_HOST`, `DEBUG_PORT` | | no effect (said) |
//!
//! ## Statistics
//!
//! With `USE_STATSD` (upstream's default) or `--statsd HOST:PORT`, each call's counts go to
//! a statsd server over UDP, under envoyproxy/ratelimit's names, so that its dashboards and
//! `statsd_exporter` mappings keep working: for each descriptor with a limit,
//! `ratelimit.service.rate_limit.<key>.total_hits`, `.over_limit`, `.near_limit` (past 80 %
//! of the limit), `.within_limit` and `.shadow_mode`, and
//! `ratelimit.service.rate_limit.<domain>.domain_not_found` for a domain not served, and
//! `ratelimit.service.config_load_success` (or `config_load_error`, a file failing) for
//! each load of the rules, at start and at each change. The key is upstream's
//! (`Limit::stats_key`): the domain, then the entries on
//! the way as the file names them (`rl.foo.bar_bkthomps`), the call's values with
//! `detailed_metric` (`rl.unspec_unspecified_value`) or `value_to_metric`, a
//! `share_threshold` wildcard as written. A refused call's hits are counted as upstream
//! counts them, though tollgate charged none. `GET /metrics` has `near_limit` too, as
//! `tollgate_near_limit_total{domain, limit}`.
//!
//! With `--rules`, the environment plays no part (but `MERGE_DOMAIN_CONFIG` and
//! `RESPONSE_DYNAMIC_METADATA`), and the defaults are tollgate's: loopback addresses, the
//! state in memory, the rate-limit headers of the rules' `response` section.
//!
//! envoyproxy/ratelimit's own tests run against it in this repository, on its own files
//! (`cli/tests/upstream*.rs`): its config tests, its integration tests on its runtime
//! directory and a real Redis, and its integration-test scripts on its
//! `examples/ratelimit/config/example.yaml`.
//!
//! ## Stopping
//!
//! SIGTERM (what Kubernetes and systemd send) or Ctrl-C stops the service gracefully.
//! `GET /healthcheck` answers `503 shutting down` at once, so that a load balancer sends
//! nothing more; the servers stop accepting connections and answer the calls in flight
//! (a gRPC client is told with HTTP/2's `GOAWAY`, and Envoy moves to another instance);
//! after a grace period of 10 s, calls still in flight or not, the service stops anyway.
//! Then, with Redis, it sends what its
//! [local-first](super::rules#local-first-limits-sync_every) limits admitted since their
//! last sync ([`RedisStore::sync_now`](crate::store::RedisStore::sync_now)), so that a
//! planned stop loses no counts, and it exits with status 0. A signal during start-up
//! stops it the same way, at once.
//!
//! # The rules file
//!
//! The file is tollgate's [rules file](super::rules), or an envoyproxy/ratelimit
//! configuration as it is: `domain`, `descriptors` with `key`, `value`, `shadow_mode`,
//! `quota_mode`, `metadata`, `share_threshold` and `rate_limit: { name, unit,
//! requests_per_unit, unlimited, replaces }` (its
//! `detailed_metric` and `value_to_metric` are accepted and ignored: tollgate's metrics are
//! per limit; units may be written in capitals), wildcards anywhere in a value (`foo*bar`)
//! and `share_threshold`, which mean what they mean there.
//!
//! No key needs declaring: the service compiles the file with
//! [`KeySources::Given`](crate::rules::KeySources::Given), so any key is accepted and its
//! value is the one the call gives. `sources` and `client_ip` play no part: every value,
//! `remote_address` included, is what Envoy puts in the descriptor.
//!
//! ## How a descriptor matches
//!
//! A descriptor is a list of entries, `(key, value)`, in the order of the actions that
//! produced it. It walks the tree from the top as envoyproxy/ratelimit walks it: each entry
//! selects, among the rules' entries for its key at the next level,
//!
//! 1. the one whose `value` is the entry's value exactly;
//! 2. else the first wildcard in the file that matches (`foo*`, `foo*bar`; the layer takes
//!    the most specific);
//! 3. else the key-only one (no `value`), which counts each distinct value apart.
//!
//! Only the limit of the entry that the *last* one selects applies. The limits on the way
//! do not, unlike in the layer, which applies every limit on its walk ([rules:
//! matching](super::rules#descriptors-and-matching)): Envoy sends one descriptor for each
//! limit it wants checked. A descriptor with an entry that selects nothing, or with more
//! entries than the tree has levels, reaches no limit, and neither does one that stops at
//! an entry without a `rate_limit`: its status is `OK`, with no limit.
//!
//! - `unlimited: true` lifts the descriptor that reaches it, and only that one (in the layer
//!   it exempts the whole request).
//! - `replaces: [{ name: x }]`: when one descriptor of a call reaches a limit that replaces
//!   the limit named `x`, a descriptor of the same call reaching `x` is not limited; an
//!   `unlimited` or shadow-mode entry's `replaces` too (in the layer, a shadow-mode entry
//!   replaces nothing).
//! - `shadow_mode: true` on an entry: its limit counts and reports, but its descriptor is
//!   `OK` even over the limit (its status still carries its figures). The top-level
//!   `shadow_mode: true` does so for every limit ([shadow mode](super::rules#shadow-mode)).
//! - Every setting of a [`rate_limit`](super::rules#rate_limit) applies per limit:
//!   `algorithm` (any of the [six](super::algorithms)), `burst`, `period`, `cost`,
//!   `on_store_error`, `sync_every`, `approximate`. A limit that names no algorithm is a
//!   fixed window, as in Envoy; `defaults: { algorithm: gcra }` changes that for the file.
//!   Envoy cannot hold a request back: a leaky bucket decides as it would shape, but a
//!   request that finds a place in its queue is `OK` at once.
//!
//! # The answer
//!
//! A `RateLimitResponse`:
//!
//! - `overall_code`: `OVER_LIMIT` when a descriptor is over its limit, else `OK`.
//! - `statuses`: one `DescriptorStatus` per descriptor, in the call's order, with
//!   - `code`: `OK` or `OVER_LIMIT`;
//!   - `current_limit`: the limit as Envoy's API names one: `requests_per_unit`, `unit`
//!     (`SECOND` to `YEAR`) and the limit's `name`. A period that is no whole unit
//!     (`period: 30s`, `unit_multiplier: 30`) reports the requests per period and the unit
//!     `UNKNOWN`. No `current_limit` when no limit applies;
//!   - `limit_remaining`: the requests the client may still send now;
//!   - `duration_until_reset`: when admitted, the time until the limit is back to its full
//!     allowance; when over the limit, the time until the same call is admitted.
//! - `response_headers_to_add`: the headers the layer would give the response, as the
//!   rules' [`response`](super::rules#response) section chooses ([operations:
//!   headers](super::operations#headers-and-grpc-answers)): `X-Ratelimit-Limit` and
//!   `X-Ratelimit-Remaining` by default, the IETF `RateLimit-Policy` and `RateLimit` with
//!   `headers: ietf`, and `Retry-After` on a refusal. Envoy adds them to what it sends the
//!   client: its `429`, or the upstream's response.
//!
//! **Weight.** The call's `hits_addend` is the request's cost under each of its
//! descriptors (0, its default, counts as 1); a descriptor's own `hits_addend` wins over
//! it. A limit with a fixed [`cost`](super::rules#cost-weighted-requests) counts that
//! instead. (Envoy takes the call's `hits_addend` from the filter state
//! `envoy.ratelimit.hits_addend`.)
//!
//! **A descriptor's own limit.** A descriptor may bring its own quota, `limit: {
//! requests_per_unit, unit }` (Envoy's override, which a route sets from, say, a tenant's
//! plan in dynamic metadata). As in envoyproxy/ratelimit, it is limited by that quota
//! alone, whatever entry of the file it reaches (`unlimited`, `replaces` and `shadow_mode`
//! included), counted per distinct entries and unit; its status' `current_limit` is the
//! override. It is decided by the file's default algorithm (`defaults.algorithm`: a fixed
//! window, as there, unless the file says otherwise) and `on_store_error`, exactly, all or
//! nothing with the call's other descriptors; metrics and logs name it `override per
//! minute` (or the unit's). A unit of `UNKNOWN` is `INVALID_ARGUMENT`, and so is a quota
//! the store cannot keep (with Redis, a sliding window log of more than 1,000, or numbers
//! too large for its exact arithmetic), rather than a store error that would leave the
//! call's other limits to their `on_store_error` policy.
//!
//! **Checks.** A descriptor of `hits_addend: 0` is only checked, as in envoyproxy/ratelimit:
//! it is charged nothing, and its status is `OVER_LIMIT` only once its limit's count has
//! gone past the limit (a full limit is still `OK`, `limit_remaining: 0`), with
//! `limit_remaining` as it stands. A check over its limit refuses the call like any
//! descriptor, so the call charges nothing.
//!
//! **A check, then a charge.** A gateway checks a request this way and charges it once its
//! cost is known, by a second call when the stream is done (Envoy's
//! `apply_on_stream_done`, with a `hits_addend` read from the response: a language
//! model's tokens, say). Envoy ignores the answer to that call, so its charge must count
//! even past the limit: mark the limit `settle: { stream_done: true }`, and a call that
//! reaches it is charged whatever its answer, past the limit if need be (answered
//! `OVER_LIMIT` then, as envoyproxy/ratelimit answers), and the next requests' checks are
//! refused until it has been paid back. With 1,000 tokens a minute per user and answers
//! of 300 tokens, four requests pass their checks, the fourth's charge takes the user to
//! 1,200, and the fifth's check is refused.
//!
//! ```yaml
//! domain: llm
//! descriptors:
//!   - key: user
//!     rate_limit: { unit: minute, requests_per_unit: 1000, settle: { stream_done: true } }
//! ```
//!
//! On Envoy's side, the route's `rate_limits` send the same descriptor twice: once with
//! `hits_addend: { number: 0 }` (the check), once with `apply_on_stream_done: true` and a
//! `hits_addend` of the tokens (the charge). Without `stream_done`, a charge larger than
//! what is left is refused, all or nothing, and counted nowhere.
//!
//! **All or nothing.** A call is admitted only when every descriptor has room, and a call
//! over one limit charges none of the others: their statuses say `OK` (they had room), and
//! their counts are untouched. envoyproxy/ratelimit charges every descriptor of a refused
//! call, so a client refused by one limit uses up the others, unless
//! `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true`: tollgate answers as it does then (and
//! atomically, where upstream reads the counts before it adds to them). On a Redis Cluster
//! this holds across slots too ([operations](super::operations#on-a-redis-cluster)). This
//! is the one difference with envoyproxy/ratelimit's answers, kept by design; its own test
//! suite, ported in `cli/tests/upstream*.rs`, shows where it shows: a charge sent after the
//! fact that goes past the limit is not counted unless its limit says `stream_done`
//! (above).
//!
//! **Quotas.** A descriptor entry with `quota_mode: true` (envoyproxy/ratelimit's) makes its
//! limit a quota: a call is refused by its quotas only when every quota it reaches is over
//! (and, as always, by any other limit over). A quota over its limit says `OVER_LIMIT` in
//! a call admitted; a refused call charges nothing, quotas included. Upstream's
//! `examples/ratelimit/config/example.yaml` routes with it: `/quota` sends `service_1` (1
//! a minute) and `service_2` (2 a minute); the second call is admitted with `service_1`
//! over, the third refused.
//!
//! **Metadata.** An entry's `metadata` (any map) comes back in the answer's dynamic
//! metadata when the service runs with `--response-dynamic-metadata` (or
//! `RESPONSE_DYNAMIC_METADATA=true`), as envoyproxy/ratelimit builds it: `domain`, the
//! call's `descriptors` (`entries` as `key=value`, a descriptor's own `limit` and
//! `hitsAddend`), the call's `hitsAddend`, and `metadata`: the maps of the limits of the
//! descriptors that passed, merged in order (a key keeps its first value; maps merge).
//! Envoy can route on it, e.g. to the first service whose quota is left.
//!
//! **Malformed calls** are refused with `INVALID_ARGUMENT` and decide nothing: an empty
//! `domain` or no descriptors (in envoyproxy/ratelimit's words), more than 64 descriptors
//! or 16 entries in one, or a key or value over 4096 bytes. To Envoy, they are failed
//! calls, which its `failure_mode_deny` decides. A call for another domain than the
//! rules', and a descriptor without entries, limit nothing: `OK`, as envoyproxy/ratelimit
//! answers them.
//!
//! **Statuses** are upstream's: an `unlimited` descriptor is `OK` with `limit_remaining`
//! 4294967295 and no limit; `duration_until_reset` is in whole seconds, rounded up; a
//! refused call's other descriptors say what remains of them as it stands (they were not
//! charged).
//!
//! **When the store fails**, each limit's `on_store_error` policy decides, as in the layer:
//! a `deny` limit's descriptor is `OVER_LIMIT`, a `local` limit's status carries the
//! decision made in the service's memory, and an `allow` limit's descriptor is `OK` with no
//! limit.
//!
//! # The Envoy side
//!
//! Envoy's HTTP rate limit filter calls the service; each entry of a route's (or virtual
//! host's) `rate_limits` turns its `actions` into one descriptor, one entry per action, in
//! their order. An `envoy.yaml` for Envoy 1.3x, with tollgate on `127.0.0.1:8081`:
//!
//! ```yaml
//! static_resources:
//!   listeners:
//!     - address: { socket_address: { address: 0.0.0.0, port_value: 10000 } }
//!       filter_chains:
//!         - filters:
//!             - name: envoy.filters.network.http_connection_manager
//!               typed_config:
//!                 "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
//!                 stat_prefix: ingress
//!                 use_remote_address: true                  # remote_address is the peer (behind a proxy: xff_num_trusted_hops)
//!                 http_filters:
//!                   - name: envoy.filters.http.ratelimit
//!                     typed_config:
//!                       "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
//!                       domain: edge                        # the rules' domain
//!                       failure_mode_deny: false            # tollgate failed or unreachable: let requests through (true: 500)
//!                       timeout: 0.1s                       # default 20ms; above the Redis store's 50 ms
//!                       enable_x_ratelimit_headers: DRAFT_VERSION_03   # optional: see below
//!                       rate_limit_service:
//!                         grpc_service:
//!                           envoy_grpc: { cluster_name: tollgate }
//!                         transport_api_version: V3
//!                   - name: envoy.filters.http.router
//!                     typed_config:
//!                       "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
//!                 route_config:
//!                   virtual_hosts:
//!                     - name: api
//!                       domains: ["*"]
//!                       routes:
//!                         - match: { prefix: /auth/login }
//!                           route:
//!                             cluster: api
//!                             rate_limits:
//!                               - actions: [{ remote_address: {} }]
//!                               - actions:
//!                                   - generic_key: { descriptor_value: login }
//!                                   - remote_address: {}
//!                         - match: { prefix: / }
//!                           route:
//!                             cluster: api
//!                             rate_limits:
//!                               - actions: [{ remote_address: {} }]
//!                               - actions:
//!                                   - request_headers: { header_name: x-user-id, descriptor_key: user }
//!   clusters:
//!     - name: tollgate
//!       type: STATIC
//!       connect_timeout: 1s
//!       typed_extension_protocol_options:                   # gRPC needs HTTP/2
//!         envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
//!           "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
//!           explicit_http_config:
//!             http2_protocol_options: {}
//!       load_assignment:
//!         cluster_name: tollgate
//!         endpoints:
//!           - lb_endpoints:
//!               - endpoint:
//!                   address: { socket_address: { address: 127.0.0.1, port_value: 8081 } }
//!     # ... and the `api` cluster, your service
//! ```
//!
//! A login from 203.0.113.9 is then one call with two descriptors, and a request to
//! another path with `x-user-id: 42` one with two others (without the header, only the
//! first: an action that finds nothing to add drops its descriptor):
//!
//! ```text
//! /auth/login:  [("remote_address", "203.0.113.9")]
//!               [("generic_key", "login"), ("remote_address", "203.0.113.9")]
//! /orders:      [("remote_address", "203.0.113.9")]
//!               [("user", "42")]
//! ```
//!
//! The rules that match them:
//!
//! ```yaml
//! domain: edge
//! response: { headers: none }             # Envoy writes the X-RateLimit-* headers (enable_x_ratelimit_headers)
//! descriptors:
//!   - key: remote_address                 # each address: 20 a second, in fixed windows (Envoy's default)
//!     rate_limit: { unit: second, requests_per_unit: 20 }
//!   - key: generic_key
//!     value: login
//!     descriptors:
//!       - key: remote_address             # each address: 5 logins a minute
//!         rate_limit: { unit: minute, requests_per_unit: 5, name: login, algorithm: sliding_window_log }
//!   - key: user                           # each user: 100 a minute, in bursts of up to 20
//!     rate_limit: { unit: minute, requests_per_unit: 100, algorithm: token_bucket, burst: 20 }
//! ```
//!
//! The keys are what the actions send: `remote_address` (the client address, as the
//! connection manager's `use_remote_address` and `xff_num_trusted_hops` find it),
//! `generic_key` (or the action's own `descriptor_key`), the `descriptor_key` you chose for
//! `request_headers`, `header_match` for `header_value_match`, `destination_cluster` and
//! `source_cluster`. A header is the client's to choose: limit by one that your gateway or
//! an authentication filter sets, such as a verified user id.
//!
//! A route can also give a descriptor [its own limit](#the-answer), read per request from
//! dynamic metadata that a filter before it set (a JWT's claim, an external authorization
//! service's answer), a struct of `requests_per_unit` and `unit`:
//!
//! ```yaml
//! rate_limits:
//!   - actions:
//!       - request_headers: { header_name: x-tenant, descriptor_key: tenant }
//!     limit:
//!       dynamic_metadata:
//!         metadata_key: { key: envoy.filters.http.ext_authz, path: [{ key: rate_limit }] }
//! ```
//!
//! `enable_x_ratelimit_headers: DRAFT_VERSION_03` makes Envoy write `X-RateLimit-Limit`,
//! `X-RateLimit-Remaining` and `X-RateLimit-Reset` itself, from the statuses. tollgate's
//! own headers have the same names: keep one set. With Envoy's, set
//! `response: { headers: none }` as above (a refusal then carries tollgate's `Retry-After`
//! alone); without them, leave it out.
//!
//! # The same decision in process
//!
//! [`Limiter::check_descriptors`](crate::Limiter::check_descriptors) decides a call's
//! descriptors without the network: the service compiles its rules with
//! `KeySources::Given` and hands each call to it. Five logins a minute per address, in
//! Envoy's fixed windows:
//!
//! ```rust
//! use std::time::Duration;
//! use tollgate::clock::ManualClock;
//! use tollgate::rules::{KeySources, Rules};
//! use tollgate::envoy::Descriptor;
//! use tollgate::store::MemoryStore;
//! use tollgate::Limiter;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let rules = Rules::from_yaml_with(r#"
//! domain: edge
//! descriptors:
//!   - key: generic_key
//!     value: login
//!     descriptors:
//!       - key: remote_address
//!         rate_limit: { unit: minute, requests_per_unit: 5, name: login }
//! "#, KeySources::Given)?;
//! let clock = ManualClock::new();
//! let limiter = Limiter::with_store(rules, MemoryStore::with_clock(clock.clone()));
//!
//! // What Envoy sends for a login from 203.0.113.9: one descriptor of two entries.
//! let login = [("generic_key", "login"), ("remote_address", "203.0.113.9")];
//! let call = [Descriptor { entries: &login, cost: 1, limit: None }];
//! for remaining in (0..5).rev() {
//!     let checked = limiter.check_descriptors(&call).await;
//!     assert!(checked.verdict().is_allowed());                         // overall_code: OK
//!     let decision = checked.descriptors()[0].as_ref().expect("the login limit").decision();
//!     assert_eq!(decision.remaining, remaining);                       // limit_remaining
//! }
//! let checked = limiter.check_descriptors(&call).await;
//! assert!(!checked.verdict().is_allowed());                            // OVER_LIMIT
//! let refused = checked.descriptors()[0].as_ref().expect("the login limit").decision();
//! assert_eq!(refused.retry_after, Duration::from_secs(60));            // duration_until_reset
//!
//! // Another address has its own five; `generic_key: login` alone reaches no limit.
//! let other = [("generic_key", "login"), ("remote_address", "203.0.113.10")];
//! let alone = [("generic_key", "login")];
//! let call = [
//!     Descriptor { entries: &other, cost: 1, limit: None },
//!     Descriptor { entries: &alone, cost: 1, limit: None },
//! ];
//! let checked = limiter.check_descriptors(&call).await;
//! let limits = checked.descriptors();
//! assert!(checked.verdict().is_allowed() && limits[0].is_some() && limits[1].is_none());
//!
//! clock.advance(Duration::from_secs(60));                              // the next window
//! let call = [Descriptor { entries: &login, cost: 1, limit: None }];
//! assert!(limiter.check_descriptors(&call).await.verdict().is_allowed());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # HTTP endpoints
//!
//! On `--http`, as envoyproxy/ratelimit serves them:
//!
//! - `POST /json`: one call in proto3 JSON, to try the rules by hand or for a client
//!   without gRPC (field names in lowerCamelCase or as the proto spells them). The answer
//!   is the `RateLimitResponse` in JSON, with `200 OK`, or `429 Too Many Requests` when the
//!   call is over the limit. A body that is not a `RateLimitRequest`, or a malformed call,
//!   is `400`; another domain is `404`; each with the reason as text.
//!
//!   Under the rules of the in-process example above, a first login (the answer is one line):
//!
//!   ```text
//!   $ curl -d '{"domain": "edge", "descriptors": [{"entries": [{"key": "generic_key", "value": "login"},
//!       {"key": "remote_address", "value": "203.0.113.9"}]}]}' localhost:8080/json
//!   {"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"login","requestsPerUnit":5,
//!   "unit":"MINUTE"},"limitRemaining":4,"durationUntilReset":"38.339827709s"}],"responseHeadersToAdd":
//!   [{"key":"x-ratelimit-limit","value":"5"},{"key":"x-ratelimit-remaining","value":"4"}]}
//!   ```
//!
//! - `GET /healthcheck`: `200 OK` once the service is ready to decide; `503` with the
//!   reason as text before ([running it](#running-it)) and once it is
//!   [stopping](#stopping) (`shutting down`): for a load balancer's or Kubernetes' probe.
//!   Until the service is ready, `POST /json` answers `503` with the same reason.
//! - `GET /metrics`: tollgate's [metrics](super::operations#metrics) in Prometheus' text
//!   format, as the layer records them: `tollgate_requests_total` per limit and outcome,
//!   `tollgate_decision_seconds`, `tollgate_store_errors_total`, `tollgate_reloads_total`,
//!   and, with the memory store, `tollgate_tracked_keys` (set every 10 s, when idle keys
//!   are swept).
//!
//! # Seeing and resetting a client
//!
//! "Why is this customer limited?" and "reset them": with `--admin ADDR`, the service
//! answers both on a listener of its own, and only there (the `--http` port answers `404`
//! to these paths).
//!
//! **Keep the admin listener private.** It has no authentication: whoever reaches it can
//! read any client's state and give any client its full quota back. Bind it to a loopback
//! address (`127.0.0.1:8082`, not `0.0.0.0:8082`) or to a network that only operators
//! reach, and never route the gateway's traffic to it.
//!
//! ```sh
//! tollgate serve --rules rules.yaml --admin 127.0.0.1:8082
//! ```
//!
//! Both endpoints take the body of `POST /json`: the descriptors as Envoy sends them for
//! the client (their `hitsAddend` is not used). They refuse what `POST /json` refuses, with
//! the same status and reason (`400` for a body that is not a `RateLimitRequest` or a
//! malformed call, `404` for another domain), answer `503` with the reason until the
//! service is [ready](#running-it), and `503` with the store's error when the store cannot
//! answer.
//!
//! With these rules, user 42 has sent four requests this minute, and the fourth was
//! refused:
//!
//! ```yaml
//! domain: edge
//! descriptors:
//!   - key: user
//!     rate_limit: { unit: minute, requests_per_unit: 3, name: per-user }
//! ```
//!
//! ```text
//! $ for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code} ' \
//!     -d '{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "42"}]}]}' localhost:8080/json; done
//! 200 200 200 429
//! ```
//!
//! `POST /v1/peek` shows what each descriptor's limit would answer a call of weight 1 now,
//! and charges nothing: nothing is counted, in the limits or in the metrics, so a second
//! peek finds the client as the first did. The answer is one line (cut here):
//!
//! ```text
//! $ curl -d '{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "42"}]}]}' localhost:8082/v1/peek
//! {"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"name":"per-user",
//! "requestsPerUnit":3,"unit":"MINUTE"},"durationUntilReset":"16.886584832s","limit":"per-user",
//! "retryAfter":"16.886584832s"}]}
//! ```
//!
//! It is `200 OK`, over the limit or not. `overallCode` is `OVER_LIMIT` when a status is;
//! each status, one per descriptor in the call's order, is what `POST /json` would answer
//! for it ([the answer](#the-answer): `code`, `currentLimit`, `limitRemaining`, left out
//! when 0 as proto3 JSON leaves out defaults, and `durationUntilReset`), followed by what a
//! status lacks:
//!
//! - `limit`: the limit's label, its `name` or else its descriptor path
//!   (`generic_key=login/remote_address`); `override per minute` for a descriptor's own
//!   limit. Left out when the descriptor reaches no limit.
//! - `shadow: true` for a limit in shadow mode (its `code` is `OK` even over the limit).
//! - `retryAfter`: when a call would be refused (or, in shadow mode, would be if the
//!   limit were enforced), the time until it would be admitted.
//!
//! `POST /v1/reset` forgets the state of the limit each descriptor reaches (and of a
//! descriptor's own limit), as if the client had never been seen, and answers how many
//! keys held state; the client's other limits, and other clients, keep theirs:
//!
//! ```text
//! $ curl -d '{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "42"}]}]}' localhost:8082/v1/reset
//! {"reset":1}
//! $ curl -d '{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "42"}]}]}' localhost:8082/v1/peek
//! {"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"per-user","requestsPerUnit":3,
//! "unit":"MINUTE"},"limitRemaining":3,"durationUntilReset":"0s","limit":"per-user"}]}
//! $ curl -s -o /dev/null -w '%{http_code}' \
//!     -d '{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "42"}]}]}' localhost:8080/v1/reset
//! 404
//! ```
//!
//! With Redis, the state is the fleet's: a reset on one instance frees the client on
//! every instance sharing the Redis, the one that reset it at once and the others within
//! a second (each asks Redis again about a client it remembers as refused every second).
//! A [local-first](super::rules#local-first-limits-sync_every) limit lets the client in
//! again once the instances have synced. A store that fails in the middle of a reset may
//! have forgotten some of the keys: reset again.
//!
//! A Rust service using the layer has the same two as
//! [`Limiter::peek`](crate::Limiter::peek) and [`Limiter::reset`](crate::Limiter::reset)
//! ([operations](super::operations#seeing-and-resetting-a-client)).
