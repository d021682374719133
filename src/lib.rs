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
//! # Crate layout
//!
//! - [`layer`]: the Tower middleware. It knows nothing of algorithms.
//! - [`Limiter`]: rules + store; also decides requests that are not HTTP ([`Limiter::check`]).
//! - [`rules`]: the rules file, its validation and descriptor matching.
//! - [`source`]: where descriptor values come from, including the client IP behind proxies.
//! - [`algorithm`]: pure state transitions, no I/O and no clock reads.
//! - [`store`]: where state lives ([`store::MemoryStore`] by default).
//! - [`clock`]: time, injected; [`clock::ManualClock`] for tests.
//! - [`response`]: the headers and rejection bodies.
//! - `reload` (feature `reload`): hot reload of the rules file.
//!
//! # Features
//!
//! - `axum` (default): reads axum's `ConnectInfo` and `MatchedPath` (the `route` key).
//! - `tonic`: reads tonic's `TcpConnectInfo`, so gRPC servers get the client address.
//! - The `tollgate` command is a crate of its own, `tollgate-cli`, so that no feature brings
//!   command-line dependencies: `tollgate check` validates a rules file, `tollgate explain`
//!   shows which limits apply to a request ([`rules::Rules::explain`]).
//! - `reload` (default): `reload::RulesWatcher` keeps a limiter's rules in step with its file.
//! - `metrics`: counters, a latency histogram and gauges through the [`metrics`](https://docs.rs/metrics)
//!   facade, for whichever recorder the application installs (e.g. Prometheus). Off, nothing
//!   is measured.
//!
//! # Metrics and tracing
//!
//! With the `metrics` feature, labelled by `domain` and `limit` (the limit's
//! [`label`](rules::Limit::label): its `name`, else its descriptor path), never by a request
//! value:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `tollgate_requests_total` | counter | `domain`, `limit`, `outcome`: `allowed`, `denied`, `shadow_denied`, `delayed`, `shadow_delayed` |
//! | `tollgate_store_errors_total` | counter | `domain`, `limit` |
//! | `tollgate_decision_seconds` | histogram | `domain` |
//! | `tollgate_tracked_keys` | gauge, set by `Limiter::record_tracked_keys` | `domain` |
//! | `tollgate_reloads_total` | counter | `result`: `success`, `failure` |
//!
//! Each limit that applies to a request counts exactly one outcome for it: a request denied by
//! one limit counts as `allowed` under another that had room. Install the recorder before
//! building the [`Limiter`]: the handles of a set of rules are registered when the rules are
//! put in force ([`Limiter::with_store`], [`Limiter::set_rules`]), never by a decision.
//!
//! Through [`tracing`](https://docs.rs/tracing): a `debug` span `rate_limit` per decision of
//! a request that some limit applies to (fields `domain` and `limits`); a `warn` event when a
//! request is denied (over a limit, or because the store failed) and an `info` event when a
//! shadow-mode limit would have denied one, each at most once a second per limit, with
//! `suppressed`: how many were left out since the last one.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod algorithm;
pub mod clock;
pub mod layer;
mod limiter;
mod observe;
#[cfg(feature = "reload")]
pub mod reload;
pub mod response;
pub mod rules;
pub mod source;
pub mod store;

pub use layer::{RateLimit, RateLimitLayer};
pub use limiter::{Denial, Limiter, Verdict};
