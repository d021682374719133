//! Rule-driven rate limiting for Tower services: axum routers, tonic gRPC servers, any
//! `tower::Service` over `http::Request`.
//!
//! Operators describe limits in a YAML rules file (a superset of Envoy's ratelimit service
//! format). [`RateLimitLayer`] reads the values the rules ask for (client IP, a header, the
//! route, an authenticated identity, ...), asks a [`store`] whether every matching limit
//! has room, and either forwards the request or answers `429 Too Many Requests` (gRPC:
//! `RESOURCE_EXHAUSTED`) with `X-Ratelimit-*` and `Retry-After` headers.
//!
//! # Quick start
//!
//! tollgate needs Rust 1.89 or newer. Add it with the feature of your server; no feature is
//! on by default ([the list](#features)):
//!
//! ```toml
//! [dependencies]
//! tollgate = { version = "0.1", features = ["axum"] }   # a tonic server: features = ["tonic"]
//! ```
//!
//! ```
//! use axum::{routing::get, Router};
//! use tollgate::{rules::Rules, RateLimitLayer};
//!
//! let rules = Rules::from_yaml(r#"
//! domain: api
//! descriptors:
//!   - key: remote_address          # each client IP: 20 requests a second, bursts of 40
//!     rate_limit: { unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 40 }
//! "#)?;
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::from_rules(rules));
//! // Serve with connect info, so that the layer knows each client's address:
//! // axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>())
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! Behind a load balancer or a proxy, the address is the proxy's, and every client shares
//! one bucket until the rules' [`client_ip.trusted_proxies`](guide::rules#client_ip) names
//! the proxies. The [production checklist](guide::production) lists this and the rest.
//!
//! # The guide
//!
//! The [`guide`] is the user's reference: [the rules file](guide::rules) key by key,
//! [the algorithms](guide::algorithms) and when to choose each, and
//! [operations](guide::operations): hot reload, Redis, metrics, tracing, the client IP behind
//! proxies, the response headers and the `tollgate` command; and [a production
//! checklist](guide::production).
//!
//! # Crate layout
//!
//! - [`layer`]: the Tower middleware. It knows nothing of algorithms.
//! - [`Limiter`]: rules + store; also decides requests that are not HTTP ([`Limiter::check`]).
//!   Its outcomes: a [`Verdict`] on the request, a [`LimitDecision`] for each limit (where
//!   one is asked for: [`Limiter::peek`]), the figures of each in an
//!   [`algorithm::Decision`].
//! - [`envoy`]: Envoy's rate limit service API, calls of descriptors decided all or nothing
//!   (what `tollgate serve` answers with).
//! - [`rules`]: the rules file, its validation and descriptor matching.
//! - [`source`]: where descriptor values come from, including the client IP behind proxies.
//! - [`algorithm`]: pure state transitions, no I/O and no clock reads.
//! - [`store`]: where state lives ([`store::MemoryStore`] by default).
//! - [`clock`]: time, injected: the wall clock read once, then counted on monotonically;
//!   [`clock::ManualClock`] for tests.
//! - [`response`]: the headers and rejection bodies.
//! - `reload` (feature `reload`): hot reload of the rules file.
//! - `client` (feature `client`): the other end of the wire, a layer for clients that holds
//!   the requests their servers announced they would refuse, and paces itself by the
//!   quotas they announce.
//!
//! # Features
//!
//! None is on by default: the layer itself, the rules, the memory store and [`Limiter`]
//! need none, and each feature brings only its own dependencies.
//!
//! - `axum`: reads axum's `ConnectInfo` and `MatchedPath` (the `route` key).
//! - `tonic`: reads tonic's `TcpConnectInfo`, so gRPC servers get the client address.
//! - `reload`: `reload::RulesWatcher` keeps a limiter's rules in step with its file.
//! - `redis`: `store::RedisStore`, limits shared by a fleet of servers.
//! - `metrics`: counters, a latency histogram and gauges through the
//!   [`metrics`](https://docs.rs/metrics) facade, for whichever recorder the application
//!   installs; off, nothing is measured ([the list](guide::operations#metrics)).
//! - `client`: `client::RateLimitClientLayer`, for clients: honours `Retry-After`, the
//!   `X-Ratelimit-*` and IETF `RateLimit` fields and gRPC pushback, may pace itself by the
//!   announced quota, and may retry idempotent requests after the server's wait.
//!
//! The `tollgate` command (`tollgate check`, `tollgate explain`) is the separate
//! `tollgate-cli` crate.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
// On docs.rs (built with every feature), each item says which feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod algorithm;
#[cfg(feature = "client")]
pub mod client;
pub mod clock;
mod concurrency;
mod decision;
pub mod envoy;
// The guide links to the items of every feature, as docs.rs builds it; built with fewer
// features (`cargo doc` without `--all-features`), those links cannot resolve.
#[cfg_attr(
    not(all(
        feature = "axum",
        feature = "tonic",
        feature = "reload",
        feature = "redis",
        feature = "metrics",
        feature = "client"
    )),
    allow(rustdoc::broken_intra_doc_links)
)]
pub mod guide;
pub mod layer;
mod limiter;
mod observe;
mod owed;
#[cfg(feature = "reload")]
pub mod reload;
pub mod response;
pub mod rules;
pub mod source;
pub mod store;

pub use decision::{Denial, LimitDecision, Verdict};
pub use layer::{RateLimit, RateLimitLayer};
#[doc(hidden)]
pub use limiter::HeldSlots;
pub use limiter::Limiter;
