//! # The rules file
//!
//! The rules say which limits apply to which requests. They are a superset of the
//! configuration of Envoy's ratelimit service (`domain`, `descriptors`, `key`, `value`,
//! `rate_limit: { unit, requests_per_unit }`), so a file written for Envoy reads the same
//! here, plus what an HTTP middleware needs: where each key's value comes from
//! ([`sources`](#keys-and-sources)), how to find the client IP ([`client_ip`](#client_ip)), and a
//! choice of algorithm per limit.
//!
//! Load a file with [`Rules::from_file`](crate::rules::Rules::from_file),
//! [`Limiter::from_file`](crate::Limiter::from_file) or
//! [`RateLimitLayer::from_file`](crate::RateLimitLayer::from_file); text with
//! [`Rules::from_yaml`](crate::rules::Rules::from_yaml); or build the same rules in Rust with
//! [`Rules::builder`](crate::rules::Rules::builder), which goes through the same validation.
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: demo                     # namespaces the state
//!
//! sources:                         # where each key's value comes from
//!   user_id: { header: x-user-id } # a header
//!   tenant: { query: tenant }      # a query parameter (percent-decoded)
//!   account: identity              # tollgate::source::Identity, put in the request extensions by an auth layer
//!   endpoint:                      # a classifier: the first matching entry gives the value
//!     - { value: login, method: POST, path: /auth/login }
//!     - { value: friends, method: POST, path: "/users/*/friends" }   # * = one path segment
//!
//! client_ip:
//!   trusted_proxies: [10.0.0.0/8]  # forwarding headers are believed only from these peers
//!   header: x-forwarded-for        # the one header those proxies write: x-forwarded-for (default), forwarded, x-real-ip
//!   ipv6_prefix: 64                # default 64
//!
//! defaults:
//!   algorithm: sliding_window_counter   # default: fixed_window, as in Envoy
//!   on_store_error: allow               # or deny, or local; also per rate_limit
//!
//! response:
//!   headers: both                  # x_ratelimit (default), ietf, both or none
//!   reset_header: true             # X-Ratelimit-Reset
//!
//! shadow_mode: false               # true: every limit counts and reports, nothing is denied
//!
//! descriptors:
//!   - key: remote_address
//!     rate_limit: { unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 40 }
//!   - key: endpoint
//!     value: login
//!     descriptors:
//!       - key: remote_address
//!         rate_limit: { unit: minute, requests_per_unit: 5 }
//! "#)?;
//! assert_eq!(rules.domain(), "demo");
//! assert_eq!(rules.limits().len(), 2);
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! The repository's `rules.example.yaml` uses every feature, with comments; it compiles to
//! 16 limits (the load shedder one of them):
//!
//! ```rust
//! # use tollgate::rules::Rules;
//! let example = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/rules.example.yaml"));
//! assert_eq!(Rules::from_yaml(example)?.limits().len(), 16);
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! # The top level
//!
//! | key | meaning | default |
//! |---|---|---|
//! | `domain` | names the rules and namespaces their state (in Redis, the keys' prefix); must not be empty | required |
//! | `sources` | where the value of each declared key comes from ([below](#keys-and-sources)) | none |
//! | `client_ip` | how to find the client address behind proxies ([below](#client_ip)) | the socket peer |
//! | `defaults` | `algorithm`, `on_store_error`, `sync_every` and `approximate` for limits that set none ([below](#defaults)) | `fixed_window`, `allow`, none, none |
//! | `response` | optional response headers ([below](#response)) | none |
//! | `shadow_mode` | `true`: every limit counts and reports but denies nothing ([shadow mode](#shadow-mode)) | `false` |
//! | `load_shedding` | the requests the server runs at once, by priority ([below](#load_shedding)) | none |
//! | `descriptors` | the tree of limits ([below](#descriptors-and-matching)) | none |
//!
//! # Keys and `sources`
//!
//! Every descriptor `key` names where its value comes from. Built in, no declaration
//! needed:
//!
//! | key | value |
//! |---|---|
//! | `remote_address` | the client IP ([`client_ip`](#client_ip)) |
//! | `method` | the request method, e.g. `POST` |
//! | `path` | the request path, without the query |
//! | `route` | axum's matched route template, e.g. `/users/{id}`; axum sets it for layers added with `Router::route_layer`, and the fallback has none |
//! | `host` | the `Host` header (the URI's authority in HTTP/2), without the port |
//!
//! Other keys are declared under `sources`; a built-in name cannot be redeclared.
//!
//! ```yaml
//! sources:
//!   user_id: { header: x-user-id }        # a request header
//!   tenant: { query: tenant }             # a query-string parameter, percent-decoded
//!   account: identity                     # the tollgate::source::Identity an auth layer stored
//!   org: { extension: tenant }            # a type of yours an earlier layer stored, bound in Rust
//!   endpoint:                             # a classifier: the first entry that matches gives the value
//!     - { value: login,   method: POST, path: /auth/login }
//!     - { value: friends, method: POST, path: "/users/*/friends" }   # * = exactly one path segment
//! ```
//!
//! - `{ header: NAME }`: a valid header name.
//! - `{ query: NAME }`: a non-empty parameter name.
//! - `identity`: the [`Identity`](crate::source::Identity) that an authentication layer
//!   running before tollgate put into the request extensions.
//! - `{ extension: NAME }`: a type of the application's that a layer running before
//!   tollgate put into the request extensions (a tenant, an API key's owner), its
//!   [`AsRef<str>`] text the value. A file names the type, Rust binds it:
//!   [`Rules::with_extension`](crate::rules::Rules::with_extension) (or, without a file,
//!   [`SourceSpec::extension`](crate::rules::SourceSpec::extension)). A reload keeps the
//!   types bound to the names; until a type is bound to a name, its source has no value (and
//!   the limiter logs a warning).
//! - A classifier: a non-empty list of entries, each a non-empty `value` with an optional
//!   `method` (an HTTP method) and an optional `path` (starting with `/`, where `*` matches
//!   exactly one segment). The first entry that matches gives the value.
//!
//! A request that has no value for a key does not match the entries on that key.
//!
//! An extension source, end to end: an axum middleware finds the tenant and stores it, and
//! a limit keys on it.
//!
//! ```rust
//! use axum::{extract::Request, middleware::{self, Next}, response::Response, routing::get, Router};
//! use tollgate::rules::Rules;
//! use tollgate::RateLimitLayer;
//!
//! /// The tenant of the caller, as the authentication middleware found it.
//! #[derive(Clone)]
//! struct TenantId(String);
//!
//! impl AsRef<str> for TenantId {
//!     fn as_ref(&self) -> &str {
//!         &self.0
//!     }
//! }
//!
//! async fn authenticate(mut request: Request, next: Next) -> Response {
//!     let tenant = request.headers().get("x-api-key").and_then(|key| key.to_str().ok());
//!     // A real application looks the key up; here the key names the tenant.
//!     if let Some(tenant) = tenant.map(|key| TenantId(key.to_owned())) {
//!         request.extensions_mut().insert(tenant);
//!     }
//!     next.run(request).await
//! }
//!
//! let rules = Rules::from_yaml(r#"
//! domain: api
//! sources:
//!   tenant: { extension: tenant }
//! descriptors:
//!   - key: tenant
//!     rate_limit: { unit: second, requests_per_unit: 100 }
//! "#)?
//! .with_extension::<TenantId>("tenant")?;
//! // Layers run outside-in: authentication first, then the limit.
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::from_rules(rules))
//!     .layer(middleware::from_fn(authenticate));
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! ## A key from the authenticated user
//!
//! An `identity` key limits each user (or tenant, or API client) that your authentication
//! found, wherever they connect from. The authentication must run first, to store the
//! [`Identity`](crate::source::Identity) before the rate limit reads it: in axum the layer
//! added last runs first, so `.layer(rate_limit)` then `.layer(auth)`; in a
//! `tower::ServiceBuilder` the layer added first runs first. In the other order the rate
//! limit finds no identity, and the limits on it apply to nobody.
//!
//! ```rust
//! use axum::{body::Body, extract::Request, http::StatusCode, middleware::{self, Next}};
//! use axum::{response::Response, routing::get, Router};
//! use tollgate::{rules::Rules, source::Identity, RateLimitLayer};
//! use tower::ServiceExt;
//!
//! // Your authentication; here, a bearer token that is the user's ID.
//! async fn authenticate(mut request: Request, next: Next) -> Result<Response, StatusCode> {
//!     let token = request.headers().get("authorization").and_then(|v| v.to_str().ok());
//!     let user = token.and_then(|t| t.strip_prefix("Bearer ")).ok_or(StatusCode::UNAUTHORIZED)?;
//!     let identity = Identity::new(user);
//!     request.extensions_mut().insert(identity);
//!     Ok(next.run(request).await)
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let rules = Rules::from_yaml(r#"
//! domain: api
//! sources:
//!   user: identity
//! descriptors:
//!   - key: user                     # each user: 1 request a minute
//!     rate_limit: { unit: minute, requests_per_unit: 1 }
//! "#)?;
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::from_rules(rules))       // runs second
//!     .layer(middleware::from_fn(authenticate));      // runs first
//!
//! let call = |user: &str| {
//!     let request = Request::get("/").header("authorization", format!("Bearer {user}"));
//!     app.clone().oneshot(request.body(Body::empty()).unwrap())
//! };
//! assert_eq!(call("ann").await?.status(), StatusCode::OK);
//! assert_eq!(call("ann").await?.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert_eq!(call("bob").await?.status(), StatusCode::OK);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # `client_ip`
//!
//! ```yaml
//! client_ip:
//!   trusted_proxies: [127.0.0.1/32, 10.0.0.0/8]   # IP addresses or CIDR blocks
//!   header: x-forwarded-for                        # x-forwarded-for (default), forwarded (RFC 7239) or x-real-ip
//!   ipv6_prefix: 64                                # 1 to 128, default 64: one IPv6 client = one /64
//! ```
//!
//! The socket peer is the client unless it is one of `trusted_proxies`; only then is the one
//! forwarding `header` those proxies write read. How the address is found is in
//! [operations: the client IP](super::operations#the-client-ip-behind-proxies).
//!
//! # `defaults`
//!
//! ```yaml
//! defaults:
//!   algorithm: sliding_window_counter   # for limits that name none; without it fixed_window, as in Envoy
//!   on_store_error: allow               # allow (fail open), deny (fail closed) or local (decide in memory)
//!   sync_every: 100ms                   # decide limits local-first (Redis); a limit opts out with sync_every: none
//!   # approximate: { memory: 4MiB }     # or count limits in fixed-size sketches (memory store), not both; a limit opts out with approximate: none
//! ```
//!
//! `on_store_error` decides a request when the store cannot (Redis down or too slow); each
//! `rate_limit` may set its own. See [operations: Redis](super::operations#shared-limits-across-a-fleet-redis).
//!
//! # Descriptors and matching
//!
//! `descriptors` is a tree. Each entry has a `key`, an optional `value`, an optional
//! `rate_limit`, an optional [`concurrency`](#concurrency) limit, an optional `shadow_mode`,
//! an optional `hash_tag` ([below](#hash-tags-where-state-lives-in-a-redis-cluster)) and
//! optional nested `descriptors` (at most 16 levels deep).
//!
//! Matching is Envoy's: at each level, for each key the request has a value for, the most
//! specific entry applies:
//!
//! 1. an entry whose `value` is the request's value exactly;
//! 2. else the most specific wildcard that matches: a `*` in a `value` matches any run of
//!    characters, the empty one too (`files/*`, `/api*v1`, `svc*ep*rpc`), and the wildcard
//!    with the most text besides its `*`s wins;
//! 3. else the key-only entry (no `value`).
//!
//! A key-only or wildcard entry limits each distinct value separately: its state key holds
//! the request's value. A wildcard entry with `share_threshold: true` counts every value it
//! matches as one (`files/a.pdf` and `files/b.csv` share the count of `files/*`), as
//! envoyproxy/ratelimit does; `share_threshold` without a `*` to share is an error. Every entry on the walk that has a `rate_limit` applies, and a
//! request must fit all of them: when one denies, none is charged. Two entries for the same
//! key and value at one level are an error.
//!
//! ```rust
//! use tollgate::rules::Rules;
//! use tollgate::source::PeerAddr;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: demo
//! sources:
//!   api_key: { header: x-api-key }
//! descriptors:
//!   - key: remote_address                  # every client: 20 a second
//!     rate_limit: { unit: second, requests_per_unit: 20, name: per-client }
//!   - key: api_key                         # each key starting with partner-: 100 a minute
//!     value: "partner-*"
//!     rate_limit: { unit: minute, requests_per_unit: 100, name: partners }
//!   - key: api_key
//!     value: partner-big                   # this one key: 1000 a minute (exact beats wildcard)
//!     rate_limit: { unit: minute, requests_per_unit: 1000, name: big-partner }
//! "#)?;
//!
//! let mut request = http::Request::builder().header("x-api-key", "partner-big").body(())?;
//! request.extensions_mut().insert(PeerAddr("203.0.113.9:4000".parse()?));
//! let explanation = rules.explain(&request)?;
//! let applied: Vec<_> = explanation.applied().iter().map(|a| a.limit().label()).collect();
//! assert_eq!(applied, ["per-client", "big-partner"]);
//! assert_eq!(explanation.applied()[0].state_key(), "remote_address=203.0.113.9");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Counters belong to a limit's descriptor entries, algorithm and quota: rules replaced with
//! [`Limiter::set_rules`](crate::Limiter::set_rules) (or a hot reload) keep the counters of
//! unchanged limits wherever they moved in the file, and a limit whose quota changed starts
//! afresh.
//!
//! # Hash tags: where state lives in a Redis Cluster
//!
//! On a Redis Cluster, each limit's state lives in the slot of its *hash tag*, the part of
//! its key that says who is limited, so that one client's limits share a slot and are
//! decided by one call, while clients spread evenly over the masters. A limit's tag
//! is, along the entries that led to it:
//!
//! 1. the value of the nearest entry marked `hash_tag: true`;
//! 2. else the value of the first key-only or wildcard entry (the value that varies from
//!    client to client: an address, a user id; not a shared wildcard's);
//! 3. else, for a limit reached through exact values only (one global counter), its whole
//!    key: each such limit is a slot of its own.
//!
//! So a per-client limit and a per-client login limit share a slot whichever comes first in
//! the tree, as do all of one user's limits:
//!
//! ```yaml
//! descriptors:
//!   - key: remote_address                    # tag: the address
//!     rate_limit: { unit: second, requests_per_unit: 20 }
//!   - key: endpoint
//!     value: login
//!     descriptors:
//!       - key: remote_address                # tag: the address (endpoint=login is exact)
//!         rate_limit: { unit: minute, requests_per_unit: 5 }
//! ```
//!
//! A request whose limits have different tags (a per-user and a per-tenant limit) is
//! decided in each slot concurrently, still all or nothing (see
//! [operations](super::operations#on-a-redis-cluster)): one round trip of wall time, one
//! call per slot. Mark an entry `hash_tag: true` where the default does not fit. For
//! example, under `key: tenant` with `key: user` nested, every limit is tagged by the tenant,
//! so one large tenant is one hot slot; marking the user entry spreads the per-user limits
//! by user instead:
//!
//! ```rust
//! # use tollgate::rules::Rules;
//! let rules = Rules::from_yaml(r#"
//! domain: demo
//! sources: { tenant: { header: x-tenant }, user: { header: x-user } }
//! descriptors:
//!   - key: tenant                          # tag: the tenant
//!     rate_limit: { unit: second, requests_per_unit: 1000 }
//!     descriptors:
//!       - key: user
//!         hash_tag: true                   # tag: the user, not the tenant
//!         rate_limit: { unit: second, requests_per_unit: 10 }
//! "#)?;
//! # assert_eq!(rules.limits().len(), 2);
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! Tags only place state: they change no decision, and the memory store ignores them.
//! Changing a tag moves a limit's state to a new key, so its counts start afresh.
//!
//! # `rate_limit`
//!
//! | field | meaning |
//! |---|---|
//! | `unit` | `second`, `minute`, `hour`, `day`, `week` (7 days), `month` (30 days), `year` (365 days), as in Envoy |
//! | `unit_multiplier` | a custom period as a multiple of the unit (at least 1), e.g. `unit: second, unit_multiplier: 30` |
//! | `period` | a custom period instead of `unit`: a positive number and `ms`, `s`, `m`, `h` or `d`, e.g. `500ms`, `30s`, `5m`, `2h`, `1d` |
//! | `requests_per_unit` | the limit, up to 2<sup>63</sup> − 1; `0` denies every request (as in Envoy) |
//! | `algorithm` | `token_bucket`, `leaky_bucket`, `fixed_window`, `sliding_window_log`, `sliding_window_counter`, `gcra` (default: `defaults.algorithm`, else `fixed_window`); see [algorithms](super::algorithms) |
//! | `burst` | `token_bucket` capacity, `gcra` burst (default: the limit) |
//! | `queue` | `leaky_bucket`: how many requests may wait their turn (default 0) |
//! | `mode` | `leaky_bucket`: `shape` (default: queued requests wait, then go) or `police` (the same decision, no waiting) |
//! | `max_delay` | `leaky_bucket` shaping: refuse a request that would wait longer, e.g. `2s` |
//! | `cost` | the weight of each request: a number (at least 1), or the name of a source whose value is one ([cost](#cost-weighted-requests)) |
//! | `on_store_error` | `allow`, `deny` or `local`: overrides `defaults.on_store_error` for this limit |
//! | `sync_every` | an interval, e.g. `100ms`: decide this limit local-first (see below); `none` opts out of `defaults.sync_every` |
//! | `approximate` | `{ memory: 4MiB }`: count this limit in a sketch of that fixed size (see below); `none` opts out of `defaults.approximate` |
//! | `unlimited: true` | a matching request is not limited at all ([exemptions](#unlimited-and-replaces)); takes no other setting but `name` and `replaces` (a `sync_every` or `approximate` is ignored) |
//! | `name` | names the limit for `replaces`, logs, metrics and headers; names are unique |
//! | `replaces: [{name: x}]` | when this limit applies, the limit named `x` does not |
//! | `block_for` | a penalty, e.g. `15m`: a key this limit refuses stays refused that long ([below](#block_for-a-penalty)) |
//! | `settle` | `{ response_header: x-tokens-used }` (or `response_trailer`): the request costs what its response says ([below](#settle-costs-known-after-the-response)); `tollgate serve`: `{ stream_done: true }`, a charge sent when the stream is done counts whole ([service](super::service)) |
//! | `count_when` | `{ status: [401, 403] }` (and `grpc_status: [UNAUTHENTICATED]`): only requests whose responses have these statuses count ([below](#count_when-counting-outcomes)) |
//! | `calendar` | `true`: a `fixed_window` of a `day`, `week`, `month` or `year` counts in the calendar's, not in multiples of the unit since 1970 ([below](#calendar-quotas)) |
//! | `time_zone` | with `calendar`: the calendar's time zone, e.g. `Europe/Paris` (default `UTC`) |
//!
//! A limit gives either `unit` (with an optional `unit_multiplier`) or `period`, not both,
//! and a `requests_per_unit` unless it is `unlimited`. Periods are at most 100 years. A
//! `burst`, `queue`, `mode` or `max_delay` on an algorithm it does not apply to is an error,
//! and so is `max_delay` with `mode: police`. GCRA and the leaky bucket book time ahead
//! (`burst`, or `queue + 1`, intervals of `period / requests_per_unit`), which must stay
//! within 100 years.
//!
//! `sync_every`: decide this limit from local counts and agree with the fleet through Redis
//! every interval; only with the Redis store (the others decide exactly and ignore it); see
//! [local-first limits](#local-first-limits-sync_every). The interval is at least `10ms` and at most
//! the limit's period, and the algorithm `fixed_window`, `sliding_window_counter`,
//! `token_bucket` or `gcra`.
//!
//! `approximate: { memory: 4MiB }`: count this limit's keys in a count-min sketch of that
//! fixed size, `64KiB` to `1GiB` (or a number of bytes): millions of clients in fixed memory,
//! for a bounded error; memory store only; see [approximate limits](#approximate-limits).
//! Only with `fixed_window` or `sliding_window_counter`, and not with `sync_every`.
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: periods
//! sources:
//!   tenant: { query: tenant }
//! descriptors:
//!   - key: tenant                          # 100 per 30 seconds, twice over
//!     rate_limit: { period: 30s, requests_per_unit: 100, name: by-period }
//!   - key: method
//!     value: POST
//!     rate_limit: { unit: second, unit_multiplier: 30, requests_per_unit: 100, name: by-multiplier }
//!   - key: path                            # shape a slow upstream: 10 wait their turn, 5 go a second
//!     value: /reports
//!     rate_limit: { unit: second, requests_per_unit: 5, algorithm: leaky_bucket, queue: 10, max_delay: 3s }
//! "#)?;
//! assert_eq!(rules.limits().len(), 3);
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! # `cost`: weighted requests
//!
//! `cost` makes a request count as more than one: a fixed number per limit, or a source's
//! value (say, a header an upstream GraphQL layer sets to the query's complexity). A source
//! value that is missing or not a number counts as 1 over HTTP (with
//! [`Limiter::check`](crate::Limiter::check), its `cost` argument counts instead), 0 counts
//! as 1, and a number too large to count is denied. Take a cost only from a value the client
//! cannot choose: a header your own gateway or an upstream layer sets.
//!
//! ```yaml
//! sources:
//!   weight: { header: x-request-weight }
//! descriptors:
//!   - key: tenant
//!     rate_limit: { period: 30s, requests_per_unit: 100, cost: weight }
//! ```
//!
//! # `settle`: costs known after the response
//!
//! An LLM gateway limits tokens, and the tokens are counted when the answer ends.
//! `settle: { response_header: x-tokens-used }` admits a request if its up-front cost (its
//! `cost`, 1 by default: a reservation) fits, and, when the response comes, charges it what
//! the response says instead: the difference is charged, or given back, in the store,
//! atomically with the key's other requests, on every server of a fleet. A handler can say
//! it in the response's extensions instead of a header,
//! [`SettledCost`](crate::response::SettledCost), which wins over the header. A streamed
//! answer (gRPC, server-sent events) says it when it ends: `settle: { response_trailer:
//! x-tokens-used }` settles from the body's trailers, and a stream cancelled before them
//! keeps its reservation. A charge that
//! goes past the limit is kept: later requests are refused until it has been paid back (the
//! window ends, the tokens refill), with an exact `Retry-After`.
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: llm
//! sources: { user: { header: x-user-id } }
//! descriptors:
//!   - key: user                  # 1,000 tokens a minute per user
//!     rate_limit: { unit: minute, requests_per_unit: 1000, settle: { response_header: x-tokens-used } }
//! "#)?;
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! With answers of 300 tokens: the first four are admitted (each reserves 1, then is
//! charged 299 more: 1,200 of 1,000 after the fourth), and the fifth is refused until the
//! window allows. A response that does not say (no header, not a number) keeps its
//! reservation; so does a request whose response never comes (the handler failed or was
//! cancelled), and one decided by [`Limiter::check`](crate::Limiter::check), which has no
//! response. The response's head settles it: a header, or the handler's extension.
//!
//! # `count_when`: counting outcomes
//!
//! A login endpoint limits failed attempts, not attempts. `count_when: { status: [401,
//! 403] }` (codes, or classes such as `5xx`) checks the limit before the request (refused
//! once exhausted) and counts the request only when its response has one of these
//! statuses: each request reserves its cost, given back when the response does not match,
//! so that concurrent attempts stay within the limit. For tonic services, `grpc_status:
//! [UNAUTHENTICATED, PERMISSION_DENIED]` (names, or codes 0 to 16) counts the calls that
//! end with these gRPC codes, read from the response's head (a call that fails at once) or
//! from its trailers when the call ends; a call cut off before its status keeps its
//! reservation. A response counts when it matches either list.
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: auth
//! sources: { user: { header: x-user-id } }
//! descriptors:
//!   - key: user                  # 5 failed logins per 15 minutes per user and address
//!     descriptors:
//!       - key: remote_address
//!         rate_limit: { period: 15m, requests_per_unit: 5, count_when: { status: [401, 403] } }
//! "#)?;
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! Successful logins never count; after five failures, every attempt of that user from
//! that address is refused until the window allows (add `block_for` to shut it out for
//! longer). `settle` and `count_when` exclude each other, and are refused with
//! `approximate` (a sketch cannot give a charge back) and by `tollgate serve`, whose
//! clients settle by a second call ([`apply_on_stream_done`](super::service)). Shadow-mode
//! limits keep their reservations.
//!
//! Every store settles: memory, Redis and a Redis Cluster atomically with the key's other
//! requests; a [local-first](#local-first-limits-sync_every) limit in the server's own
//! counts, sent to the fleet at its next sync as its admissions are. A request admitted
//! while the store failed (`on_store_error`) was not charged its reservation: its
//! settlement charges the difference only.
//!
//! # Calendar quotas
//!
//! A plan that sells 10,000 requests a month means a calendar month, in the customer's time
//! zone: from the 1st at midnight to the next 1st, 28 to 31 days. `calendar: true` makes a
//! fixed window count in the calendar's days, weeks (Monday to Monday), months or years in
//! `time_zone`, each starting at local midnight, across daylight-saving changes (a day of
//! 23 or 25 hours; where the clocks skip midnight, the day starts when it exists). Without
//! it, a `month` is 30 days since 1970, as in Envoy.
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: api
//! sources: { customer: { header: x-customer-id } }
//! descriptors:
//!   - key: customer
//!     rate_limit:
//!       unit: month
//!       requests_per_unit: 10000
//!       calendar: true
//!       time_zone: Europe/Paris     # months end at midnight in Paris
//! "#)?;
//! let quota = rules.limits()[0].quota().expect("a quota");
//! assert_eq!(quota.calendar().map(|c| c.time_zone()), Some("Europe/Paris"));
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! A request refused on January 31 at 23:30 in Paris is told `Retry-After: 1800`; at
//! midnight the customer has 10,000 again. Customers in several time zones take one entry
//! each (a descriptor per region or plan, `value:` the region). Calendar windows are fixed
//! windows: another algorithm, a unit under a day, a `period`, a `unit_multiplier`,
//! `sync_every` or `approximate` with `calendar` is refused. On Redis, the server numbers
//! the window and tells Redis when it ends, as only it knows the time zone: at a window's
//! edge, servers whose clocks disagree may count a request in either window, by as much as
//! their clocks differ. Changing a limit's `calendar` or `time_zone` starts its windows
//! afresh.
//!
//! # `block_for`: a penalty
//!
//! `block_for: 15m` shuts a client out once it goes over: when the limit refuses a key, every
//! request of that key is refused for the next 15 minutes, whatever the limit's own count
//! (a new window, refilled tokens), and admitted again after. The refusal that starts the
//! block says `Retry-After` the whole block, and each refusal during it the time left
//! (`X-Ratelimit-Remaining: 0`, `X-Ratelimit-Limit` the limit's), named `<limit> (blocked)`
//! in the problem document, logs and metrics. A request refused during a block charges
//! nothing and does not lengthen it.
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: shop
//! sources: { user: { header: x-user-id } }
//! descriptors:
//!   - key: user                       # 100 searches a minute; over that, 15 minutes out
//!     rate_limit: { unit: minute, requests_per_unit: 100, block_for: 15m }
//! "#)?;
//! assert_eq!(rules.limits()[0].block_for(), Some(std::time::Duration::from_secs(900)));
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! A block is kept as any limit's state: a limit of one request per `block_for` (GCRA, a
//! burst of one) that the refused key is charged once, and that each request checks with
//! its other limits, all or nothing. So it lives where the limit's state lives and is shared as that
//! is: in memory, in Redis and a Redis Cluster (in the key's slot; the refusal is answered
//! once the block is kept), local-first with the limit's `sync_every`. It survives reloads
//! that keep the limit's descriptor. In `shadow_mode` a block is kept and reported
//! (`tollgate_requests_total{outcome="shadow_denied"}`, and logs) but refuses nothing.
//! `block_for` is at least `1s`; it is refused on an `unlimited` entry, and by `tollgate
//! serve` (Envoy's protocol has no penalty).
//!
//! # `unlimited` and `replaces`
//!
//! `unlimited: true` is an allowlist. One deliberate difference from Envoy: there, the
//! client chooses which descriptors to send, so `unlimited` only lifts one descriptor. Here
//! every rule sees the whole request, so a match on an `unlimited` entry exempts the request
//! from every limit: that is how "internal callers are never limited" is written. Header
//! and query values are chosen by the client: exempt by them only when a gateway in front
//! validates them, or key the exemption on `identity`, which your authentication layer sets.
//!
//! `replaces: [{ name: x }]` (Envoy's form) sets the limit named `x` aside for the requests
//! the replacing limit applies to. Shadow-mode entries never exempt or replace anything.
//!
//! ```rust
//! use tollgate::rules::Rules;
//! use tollgate::source::PeerAddr;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: demo
//! sources:
//!   api_key: { header: x-api-key }
//! descriptors:
//!   - key: remote_address
//!     rate_limit: { unit: second, requests_per_unit: 20, name: per-client }
//!   - key: api_key                         # internal callers are never limited
//!     value: "internal-*"
//!     rate_limit: { unlimited: true }
//!   - key: api_key                         # premium keys: 1000 a minute instead of per-client
//!     value: "premium-*"
//!     rate_limit: { unit: minute, requests_per_unit: 1000, replaces: [{ name: per-client }] }
//! "#)?;
//!
//! let request = |key: &str| -> Result<http::Request<()>, Box<dyn std::error::Error>> {
//!     let mut request = http::Request::builder().header("x-api-key", key).body(())?;
//!     request.extensions_mut().insert(PeerAddr("203.0.113.9:4000".parse()?));
//!     Ok(request)
//! };
//! let internal = rules.explain(&request("internal-batch")?)?;
//! assert!(internal.exemption().is_some() && internal.applied().is_empty());
//! let premium = rules.explain(&request("premium-7")?)?;
//! assert_eq!(premium.applied()[0].limit().label(), "api_key=premium-*");
//! assert_eq!(premium.replaced()[0].limit().label(), "per-client");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # `concurrency`
//!
//! `concurrency: { max_in_flight: 5 }` on a descriptor entry limits how many requests run at
//! once rather than how many start in a period: each value of the entry (each client, for
//! `remote_address`) may have at most 5 requests in flight. It sits beside or instead of the
//! entry's `rate_limit` and matches as a rate limit does: a key-only entry limits each value,
//! `value:` one value, nested entries their combination, and `shadow_mode` only reports.
//! Its `name` labels it as a rate limit's does (default: the entry's path and
//! `(concurrency)`, e.g. `remote_address (concurrency)`).
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: demo
//! sources: { user: { header: x-user-id } }
//! descriptors:
//!   - key: remote_address
//!     rate_limit: { unit: second, requests_per_unit: 20 }
//!     concurrency: { max_in_flight: 5 }    # and at most 5 at once per client
//!   - key: user
//!     concurrency: { max_in_flight: 2, lease: 10s }   # lease: see below
//! "#)?;
//! assert_eq!(rules.limits()[1].max_in_flight(), Some(5));
//! assert_eq!(rules.limits()[2].lease(), Some(std::time::Duration::from_secs(10)));
//! assert_eq!(rules.limits()[1].label(), "remote_address (concurrency)");
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! - **A slot per request, held until its response ends.** An admitted request takes a slot
//!   of each concurrency limit that applies and gives it back when its response body ends,
//!   or is dropped: the client went away, the handler returned an error, panicked or was
//!   cancelled (a timeout), over HTTP/1, HTTP/2 and gRPC streams alike. A streamed response
//!   holds its slot until its last frame.
//! - **All or nothing with the rate limits.** Slots are taken first: a request refused for a
//!   slot charges no rate limit, and a request a rate limit refuses gives its slots back at
//!   once.
//! - **A refusal** answers `429` (gRPC: `RESOURCE_EXHAUSTED`) with `Retry-After: 1`,
//!   `X-Ratelimit-Limit` the maximum and `X-Ratelimit-Remaining: 0`, and `max_in_flight` in
//!   the problem document; no `RateLimit-Policy`, which announces a quota over a window. One
//!   second is the shortest wait the header can say: a slot frees when any of the client's
//!   requests ends, which nothing foretells, and a client that retries competes only with its
//!   own requests.
//! - **Admitted responses** report the rate limits as always; a request that only
//!   concurrency limits apply to reports the slots left (`X-Ratelimit-Remaining`).
//! - **Counted where the state lives.** In memory, each server counts its own requests: a
//!   fleet of 3 allows 3 × `max_in_flight` of a client. On Redis (or a Redis Cluster), the
//!   fleet shares the count: each slot is a lease in Redis, taken in one call with the
//!   request's other slots (one call per cluster slot, all or nothing), renewed by its server
//!   every third of `lease` while the request runs, and given back when it ends. A server
//!   killed with requests in flight frees their slots when their leases end (`lease: 30s` by
//!   default, at least `1s`: a shorter lease frees sooner and costs more renewals). When
//!   Redis fails, the limit's `on_store_error` decides: `deny` refuses, `local` counts in
//!   the process, `allow` admits. A request with concurrency limits costs Redis a call for
//!   its slots before its rate limits, and one to give them back when it ends (batched with
//!   others on a busy server): about twice Redis's time of a rate limit alone
//!   (`BENCHMARKS.md`). `tollgate_in_flight{domain,limit}` (feature `metrics`) shows the
//!   slots this server holds.
//! - **A request that waits holds its slots**: in a shaping leaky bucket's queue, or for a
//!   networked store's answer. An upgraded connection (`101 Switching Protocols`, a
//!   WebSocket) gives its slot back with the response that upgrades it.
//! - **Only the layer holds slots.** [`Limiter::check`](crate::Limiter::check) has no response
//!   to hold a slot until, so it gives a slot back as soon as it is decided, and
//!   `tollgate serve` refuses rules with concurrency limits.
//!
//! # `load_shedding`
//!
//! `load_shedding` limits the requests the whole server runs at once, and turns the least
//! important away first when it is full: each priority level may fill only its share of
//! `max_in_flight`, so critical traffic still gets in through a flood of the rest.
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: demo
//! sources:
//!   priority: { header: x-priority }     # or a route classifier, or the identity
//! load_shedding:
//!   max_in_flight: 64
//!   priority:
//!     key: priority
//!     order: [critical, default, sheddable]   # most important first
//!     shares: [100, 75, 50]                   # the default: percent of max_in_flight
//!     default: sheddable                      # the default: the last level
//! "#)?;
//! assert!(rules.limits()[0].sheds_load());
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! | key | meaning | default |
//! |---|---|---|
//! | `max_in_flight` | the most requests the server runs at once, or `adaptive` ([below](#an-adaptive-limit)) | required |
//! | `min`, `max` | with `adaptive`: the least and most it may be | 4, 1000 |
//! | `priority.key` | a declared key whose value is the request's level | none: one level |
//! | `priority.order` | the levels, most important first (at most 16) | required with `priority` |
//! | `priority.shares` | per level, the percent of `max_in_flight` it may fill: non-increasing, 1 to 100 | 100 for the first, 50 for the last, evenly between |
//! | `priority.default` | the level of a request whose value is missing or not in `order` | the last level |
//!
//! A request of a level whose share is 75 % of 64 is admitted while fewer than 48 requests
//! of any level run; the first level fills all 64. Shedding comes first, before any
//! concurrency or rate limit: a request turned away charges nothing. It answers `503`
//! (gRPC `UNAVAILABLE`) with `Retry-After: 1`: the server is busy, the client asked nothing
//! wrong, and retrying elsewhere or a second later is right. Its slot is held and given back
//! as a [`concurrency`](#concurrency) slot is; the file's `shadow_mode` applies to it, and
//! it shows in metrics, `tollgate check` and logs as the limit `load_shedding`. An
//! `unlimited` entry exempts a request from rate and concurrency limits, not from load
//! shedding: serve health checks that must answer under load outside the layer (or give
//! them the first level).
//!
//! ## An adaptive limit
//!
//! `max_in_flight: adaptive` finds the server's capacity from the latencies it observes,
//! and sheds beyond it, so a slowed backend is protected instead of queueing without bound.
//! It is TCP Vegas's congestion avoidance as Netflix's concurrency-limits applies it: the
//! least latency seen is the latency without a queue, and a request that took longer waited
//! behind others, so `limit × (1 − least / latency)` estimates the queue. The limit grows
//! while that queue is short, holds while it is a few requests (3 to 6 × log10 of the limit,
//! at least 1), and shrinks beyond; it starts at 20, and forgets the least latency every
//! 30 × limit requests so that a backend whose own latency grew is followed. A backend of
//! fixed capacity settles near that capacity plus a few queued requests: 4 workers of 20 ms
//! under 64 clients settle near 8, the admitted requests taking 2 to 4 × 20 ms at the median
//! (43 ms over 4 s, 82 ms over 10 s, as the probes let the limit creep) where they take
//! 339 ms unlimited, with 96 to 98 % of the capacity served (BENCHMARKS.md). (Gradient2, concurrency-limits' default, compares latency with its own
//! long-term average, which a sustained overload drags up until the queue is no longer seen;
//! Envoy's adaptive concurrency re-measures the least latency by pinning the concurrency to
//! a minimum at intervals, refusing traffic meanwhile.) The priority shares apply to the
//! limit found; the limit is the server's, kept across reloads. It learns from the requests
//! whose responses end as they should, timed from when they go ahead (a wait in a queue
//! left out) to the end of the response body: requests refused, abandoned or failed teach it
//! nothing, and a long stream reads as a slow request, so serve long-lived streams outside an
//! adaptive limit.
//!
//! ```yaml
//! load_shedding: { max_in_flight: adaptive, min: 4, max: 256 }
//! ```
//!
//! # Local-first limits (`sync_every`)
//!
//! A limit is exact by default: with the Redis store, each request is one round trip, and
//! the fleet admits exactly the limit. A limit with `sync_every: 100ms` is *local-first*:
//! each server decides it in memory, at memory speed, and every interval sends Redis what it
//! admitted (one call for all its keys) and takes back the fleet's totals, which its next
//! decisions use. The trade: a bounded overshoot for no round trip, and limits that go on
//! holding, without a round trip, while Redis is down.
//!
//! ```yaml
//! descriptors:
//!   - key: api_key                # 1,000 a second per API key, over the whole fleet
//!     rate_limit: { unit: second, requests_per_unit: 1000, algorithm: sliding_window_counter, sync_every: 100ms }
//!   - key: endpoint               # exact: a few logins a minute must not double
//!     value: login
//!     descriptors:
//!       - key: remote_address
//!         rate_limit: { unit: minute, requests_per_unit: 5, algorithm: sliding_window_log }
//! ```
//!
//! Both kinds can apply to one request, all or nothing: the local-first limits are decided
//! first, and when one denies, Redis is not asked; when an exact limit denies, what the
//! local-first ones charged is given back. When Redis cannot decide the exact limits, their
//! `on_store_error` policy decides the request, and the local-first limits that admitted it
//! keep counting it (so they still deny once full).
//!
//! **The bound.** Each server admits a request when the fleet's totals at its last sync,
//! plus what it admitted since, leave room. What it cannot see is what the other servers
//! admitted since their last sync. With `N` servers, each admitting at most `r` requests a
//! second, an interval `t` and a sync that takes `d` (a round trip, plus the task's wake-up):
//! one task per server syncs at the shortest `sync_every` of its limits, and sends each key
//! once its own interval has passed, so `t` is the limit's `sync_every` rounded up to a
//! multiple of that shortest one.
//!
//! | algorithm | the fleet admits at most |
//! |---|---|
//! | `fixed_window` | `limit + (N − 1) × r × (t + d)` in each window |
//! | `sliding_window_counter` | the same, on the sliding estimate |
//! | `gcra`, `token_bucket` | `burst + rate × T + (N − 1) × r × (t + d)` in any span `T` |
//!
//! and never more than `N × limit` in a window. Measured (`tests/redis_sync.rs`, two HTTP
//! servers on one Redis, 200 requests a second each, a limit of 100 a second, `sync_every:
//! 100ms`): 120 admitted in every second, the bound to the request (the test allows two
//! intervals, for a busy machine). For a key in steady use, the fleet admits at least the
//! limit less one interval of one server's requests. The measured overshoot of each limit
//! is the metric `tollgate_sync_overshoot` ([operations](super::operations#metrics)), set
//! at each sync.
//!
//! **Without fresh totals** a server decides alone: while Redis is unreachable; for a key
//! it has not synced for three intervals (it had no request for it: a client that comes
//! back after a pause); and for a key before its first sync, at most one interval after
//! its first request. Alone, it keeps, in addition, to its share of the limit,
//! `⌈limit / N⌉` (and `⌈burst / N⌉`) on its own admissions, `N` being the servers last
//! seen in Redis; a server that has not reached Redis since it started knows of none but
//! itself, and keeps to the whole limit. Requests never wait on Redis. What was admitted
//! meanwhile is sent when Redis answers again, if it still matters then (see **Memory**
//! below). A server that joins starts from the fleet's
//! totals at its first sync; a server that dies loses what it admitted since its last sync
//! (at most one interval), and
//! [`RedisStore::sync_now`](crate::store::RedisStore::sync_now) before a planned stop loses
//! nothing. A sync that fails or times out is sent again: if Redis had applied it after
//! all, it counts twice, on the side of denying. Keys in Redis expire one interval after
//! they stop mattering: two periods after their last sync, or, for a schedule, as far as it
//! books ahead (its burst of intervals) if that is longer.
//!
//! **Algorithms.** `fixed_window` and `sliding_window_counter` send counts per window. `gcra`
//! and `token_bucket` (decided as GCRA's timestamp: the same answers, but for rates whose
//! interval is not a whole nanosecond, such as 7 a minute, rounded up) share one schedule:
//! each server's bookings since its last sync fold into two numbers, which Redis applies as
//! if one by one. `sliding_window_log` (every request's time) and `leaky_bucket` (a queue in
//! order) cannot be added up this way, and are refused with `sync_every`.
//!
//! **When to choose it.** Local-first suits limits of hundreds or thousands a second, where
//! one interval's overshoot is a small share of the limit: per API key, per tenant, a global
//! limit; a fleet across zones, where a round trip costs milliseconds; and limits that must
//! hold while Redis is down. Keep exact the small limits where every request counts (a few
//! logins a minute, quotas that are billed): there one interval may be the whole limit.
//!
//! **What it costs.** At most one Redis call per server per interval on one Redis, whatever
//! the request rate: a call carries up to 500 keys (about 5 ms of Redis's time), so a
//! server with more keys due makes one call per 500; on a Redis Cluster, one per slot with
//! keys due, and one for the registry of servers. A sync sends only the keys asked for
//! since their last one (and those whose send failed). While Redis cannot be reached, one
//! call an interval, of 500 keys at most, until one answers. A server with no local-first
//! key left (after a reload, say) stops calling. Syncs never trip the circuit breaker of the
//! exact limits. The memory store decides exactly and ignores `sync_every`.
//!
//! **Memory.** Each server keeps each key while its counts matter: for the windows, until
//! both are older than the one before the current (two periods at most after its last
//! request); for a schedule, until its bookings run out; and three intervals after its last
//! sync. About 128 bytes a key for `fixed_window` and `sliding_window_counter`, 103 for
//! `gcra` and `token_bucket` (at 1,000,000 keys: its counts, and the 24 bytes its Redis name
//! is made from; what a limit's keys share is kept once). Each sync looks at an eighth of
//! the keys and forgets those that no longer matter. Counts never sent (Redis down) do not
//! keep a key: once its windows ended or its bookings ran out they are dropped with it, so
//! an outage costs no memory that outlasts the clients it saw. The keys have a ceiling,
//! [`RedisStoreBuilder::max_keys`](crate::store::RedisStoreBuilder::max_keys) (default
//! 1,000,000, about 128 MB at most): a flood of new clients, Redis down or not, makes the
//! server forget the keys asked for least recently (roughly). A forgotten key starts
//! afresh: alone, on the server's share, until its next sync brings the fleet's totals;
//! what the server admitted for it and had not sent is lost to the fleet, on the side of
//! admitting. [`RedisStore::local_first_keys`](crate::store::RedisStore::local_first_keys)
//! says how many keys a server keeps.
//!
//! **Reloads.** A local-first limit whose quota, period or algorithm a reload changes keeps
//! what was used (see [what a reload keeps](super::operations#what-a-reload-keeps)), through
//! each server: a key's first decision under the new limit takes the counts this server kept
//! for the old key. Into windows, each server carries its own admissions (in their windows
//! when the period is unchanged; else those of the window of now, into the new window of
//! now), so that the fleet's totals of the new key add up to the old one's once every server
//! has synced; into a schedule (`gcra`, `token_bucket`), what the fleet had used as this
//! server saw it, booked from now and sent as "at least this far", which counts once
//! whichever server sends it. A schedule changed into windows starts afresh: a shared
//! schedule does not split into the servers' shares. A server that did not keep the old key
//! carries nothing for it. Until its first sync after the reload, a server decides the new
//! key alone, as for any key (above).
//!
//! **Reset.** [`Limiter::reset`](crate::Limiter::reset) forgets this server's counts of a
//! local-first key at once, and the fleet's totals in Redis; another server forgets what
//! it counted at its next sync of the key (what it had not sent yet is sent again).
//!
//! # Approximate limits
//!
//! An exact limit keeps state for every client it has seen: 34 to 134 bytes a key in the
//! memory store, up to its key ceiling, where it starts forgetting quiet clients. A flood
//! of distinct clients (an IPv6 sprayer, a botnet) fills it. A limit with `approximate:
//! { memory: 4MiB }` counts its clients in a count-min sketch of that fixed size instead,
//! whatever their number, and keeps exact state only for the clients near their limit.
//!
//! ```yaml
//! descriptors:
//!   - key: remote_address           # every client address, 100 an hour, in 4 MiB whatever their number
//!     rate_limit: { unit: hour, requests_per_unit: 100, approximate: { memory: 4MiB } }
//! ```
//!
//! **How.** The sketch is an array of 64-byte lines of 14 cells. A client's key picks one
//! line and 4 of its cells (a sliding window counter: 3 of 7 for each of its two windows);
//! its estimate is the smallest of them, and a request raises each to at least the estimate
//! plus the request. Lines count one window and start afresh, line by line, in the next.
//! When a client's estimate would pass half its limit, it gets exact state, starting from
//! the estimate: the client being limited sees exact `remaining` and `Retry-After`, and the
//! sketch keeps up with its exact count. A key's estimate of 0 is the "never seen" answer,
//! so no Bloom filter is kept: a light client costs two probes of the exact tables (their
//! two generations) and one line of the sketch (measured below).
//!
//! **What it guarantees.** Cells only add other clients' requests to a client's own, so an
//! estimate is never below the true count: no client is ever admitted beyond what the exact
//! algorithm admits (a property test checks it against the exact algorithm). A clock
//! stepped forward and back (one given to `with_clock`: the system clock never steps) leaves
//! the lines it touched in the later window until it comes: their keys are counted together
//! there, on the side of denying. The error goes the other way, as false denials. With `R`
//! requests counted in a window over all clients, a sketch of `M` bytes, `k` cells a line
//! for a window (14; a sliding window counter 7) and `c` cells a key (4; 3):
//!
//! - other clients add `μ = R × c ÷ (M ÷ 64 × k)` to a client's estimate on average (a
//!   sliding window counter: to each of its two windows, so up to `2μ` to its estimate near
//!   a window's start);
//! - an estimate exceeds the true count by more than `e × μ` with probability about
//!   `e^-c` (2 % for a fixed window, 5 % for a sliding window counter);
//! - a client at half its limit is denied for others' requests only if its estimate
//!   exceeds its count by half the limit: with probability about `(2μ ÷ limit)^c`;
//! - a client whose cells are all covered by heavy clients' cells (a client past half its
//!   limit raises its cells to its exact count) starts near their counts, and may be
//!   denied from its first request. With one heavy client in its line, one client in 1,001
//!   shares all its cells (a sliding window counter: 35); with two, 7 %; with three, half.
//!   So keep heavy clients far fewer than lines: `M ÷ 64` is 65,536 lines for 4 MiB.
//!
//! (Markov's inequality on each cell, a key's cells taken as independent; they share a
//! line, so these are estimates, not proofs. Conservative updates only lower the error.)
//! For 4 MiB, a fixed window and 1,000,000 requests a window: `μ = 4.4`, an estimate within
//! 12 of the truth with 98 % probability, and a client at half a limit of 100 denied with
//! probability 0.006 %. `tollgate check` shows each approximate limit's memory and its bound (`+11.9`)
//! at 1,000,000 keys; the metrics `tollgate_sketch_requests`, `tollgate_sketch_fill` and
//! `tollgate_sketch_error_bound` show the load, the fill and the bound of each finished
//! window, and a
//! warning is logged once when the bound passes a quarter of the limit: then give the
//! sketch more memory.
//!
//! **Memory.** The sketch's size, plus the exact state of the clients past half their
//! limit, bounded by the store's key ceiling ([`MemoryStore`](crate::store::MemoryStore)).
//! A request denied for its own cost (more than the limit) leaves no state. A store keeps
//! the sketches of the last 64 approximate limits (and settings) it decided: a reload that
//! changes a limit's memory, period or algorithm starts a new sketch, and old ones go.
//! Limits of at most 1,000,000,000 requests a period (the cells count in 32 bits).
//! Measured: 10,000,000 distinct clients through a 4 MiB sketch left the process at
//! 6.2 MiB resident, with no client state of its own (`benches/approximate.rs`).
//!
//! **When to choose it.** Limits on values a client chooses freely and in numbers (client
//! addresses on a public endpoint, IPv6 prefixes, session ids), where most clients stay
//! well under the limit. Keep exact the limits whose keys are few (per API key, per tenant)
//! and small limits where half the limit is a request or two. Only `fixed_window` and
//! `sliding_window_counter`; only the memory store (the Redis store decides every limit
//! exactly, its keys bounded by expiry), and not with `sync_every`.
//!
//! # Shadow mode
//!
//! On a descriptor entry, `shadow_mode: true` counts and logs its limit but never denies;
//! the request gets a [`ShadowDenied`](crate::layer::ShadowDenied) extension when the limit
//! would have denied it.
//!
//! A top-level `shadow_mode: true` puts every limit in shadow mode, and so does
//! [`Limiter::set_shadow_mode(true)`](crate::Limiter::set_shadow_mode) at run time (from an
//! admin endpoint or a feature flag; it applies from the next request). Limits then count and
//! report (the `ShadowDenied` extension, an `info` log line,
//! `tollgate_requests_total{outcome="shadow_denied"}`, and `outcome="shadow_delayed"` when a
//! shaping leaky bucket would have queued the request), but no request is denied or delayed:
//! not by `requests_per_unit: 0`, not by a leaky bucket's queue, not by
//! `on_store_error: deny` (a request that a failed store would have denied is marked and
//! counted as a shadow denial). Rules with the top-level switch stay in shadow mode whatever
//! the run-time switch says: to enforce them, remove it from the file (with hot reload,
//! saving the file is enough).
//!
//! To roll out new limits: deploy them in shadow mode, watch what they would deny, then
//! switch shadow mode off.
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: demo
//! descriptors:
//!   - key: method                          # a new limit under observation: counted and logged, never enforced
//!     value: PUT
//!     shadow_mode: true
//!     rate_limit: { unit: minute, requests_per_unit: 2 }
//! "#)?;
//! assert!(rules.limits()[0].is_shadow());
//! assert!(!rules.shadow_mode());
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! # `response`
//!
//! Which rate-limit headers responses carry, and under which names:
//!
//! ```yaml
//! response:
//!   headers: x_ratelimit   # x_ratelimit (default): X-Ratelimit-Limit, X-Ratelimit-Remaining
//!                          # ietf: RateLimit-Policy, RateLimit (draft-ietf-httpapi-ratelimit-headers)
//!                          # both: all of the above;  none: no rate-limit headers
//!   reset_header: false    # true adds X-Ratelimit-Reset (needs x_ratelimit or both)
//!   names:                 # optional new names for the X-Ratelimit-* headers
//!     limit: x-rate-limit-limit
//!     remaining: x-rate-limit-remaining
//!     retry_after: x-rate-limit-retry-after
//!     reset: x-rate-limit-reset
//! ```
//!
//! As tower_governor's `use_headers` and Envoy's `LIMIT_RESPONSE_HEADERS_ENABLED` do, `none`
//! sends nothing on admitted responses. Denied requests always carry `Retry-After` (whole
//! seconds, rounded up, never 0), plus the headers of the chosen set: with `x_ratelimit` or
//! `both`, `X-Ratelimit-Limit`, `X-Ratelimit-Remaining: 0` and `X-Ratelimit-Retry-After`,
//! under their new names if renamed; with `none`, only `Retry-After`. gRPC denials also carry
//! `grpc-retry-pushback-ms`.
//!
//! `ietf_headers: true` is the older spelling of `headers: both` and may not be combined with
//! `headers`. Names must be valid header names, distinct, and not a header tollgate writes
//! itself (`retry-after`, `ratelimit`, `ratelimit-policy`, `content-type`, `content-length`,
//! `grpc-*`); each mistake is reported with its `line:column` like every other.
//!
//! ```rust
//! use tollgate::rules::{HeaderSet, Rules, XRatelimitHeader};
//!
//! let rules = Rules::from_yaml(r#"
//! domain: api
//! response:
//!   headers: both
//!   names: { limit: x-rate-limit-limit }
//! descriptors:
//!   - key: remote_address
//!     rate_limit: { unit: second, requests_per_unit: 20 }
//! "#)?;
//! assert_eq!(rules.response().header_name(XRatelimitHeader::Limit), "x-rate-limit-limit");
//! assert_eq!(rules.response().header_name(XRatelimitHeader::Remaining), "x-ratelimit-remaining");
//!
//! let errors = Rules::from_yaml("domain: api\nresponse: { headers: none, names: { limit: 'bad name' } }\ndescriptors: []\n")
//!     .unwrap_err();
//! assert!(errors.errors().iter().any(|e| e.path() == "response.names.limit"));
//! # let _ = HeaderSet::Both;
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! Which headers each answer carries is in
//! [operations: headers](super::operations#headers-and-grpc-answers).
//!
//! # Errors
//!
//! Unknown keys, wrong types and duplicate keys are rejected, and the compiler reports every
//! mistake at once, each with `line:column` and the entry's path
//! (`descriptors[2].descriptors[0].rate_limit.unit`). Hostile files (over 4 MiB, nested too
//! deep, alias bombs) get an error, never a panic.
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let errors = Rules::from_yaml(r#"
//! domain: demo
//! descriptors:
//!   - key: nope
//!     rate_limit: { unit: second }
//! "#).unwrap_err();
//! let paths: Vec<_> = errors.errors().iter().map(|e| e.path()).collect();
//! assert_eq!(paths, ["descriptors[0].key", "descriptors[0].rate_limit.requests_per_unit"]);
//! assert!(errors.errors()[0].message().starts_with("unknown key `nope`"));
//! ```
//!
//! A file loaded with `from_file` names itself in each error, as the demo server and
//! `tollgate check` print them:
//!
//! ```text
//! bad.yaml: 2 error(s) in the rate-limit rules:
//!   bad.yaml:3:10: descriptors[0].key: unknown key `user`: declare it under `sources`, or use a built-in key (remote_address, method, path, route, host)
//!   bad.yaml:8:17: descriptors[2].rate_limit.requests_per_unit: missing (or set `unlimited: true`)
//! ```
