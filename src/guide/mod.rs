//! # The tollgate guide
//!
//! The rest of this crate's documentation describes its types and functions one by one.
//! This module holds no code: it is the user guide, versioned with the crate and rendered
//! on docs.rs, and every Rust example in it is compiled and run as a doc test.
//!
//! - [`rules`]: the rules file, key by key: sources, `client_ip`, `defaults`, descriptors
//!   and how they match, units and periods, `cost`, shadow mode, `replaces`, `response`.
//! - [`algorithms`]: the six algorithms, when to choose each, bursts and queues, what each
//!   reports in the headers, and what a key costs in memory.
//! - [`operations`]: running it: hot reload, Redis and the failure policy, metrics and
//!   tracing, the client IP behind proxies, the headers and gRPC answers, and the `tollgate`
//!   command (`tollgate check`, `tollgate explain`).
//! - [`production`]: a checklist before limiting real traffic: trusted proxies, the store
//!   and its failure policy, Redis timeouts, metrics, hot reload, shutdown and clocks.
//! - [`simulate`]: `tollgate simulate`, replaying traffic through a rules file before it
//!   ships: trace formats, synthetic traffic, the comparison of algorithms and of rules, and
//!   a worked example.
//! - [`service`]: `tollgate serve`, Envoy's rate limit service: running it, how a call's
//!   descriptors match the rules, the answer, the Envoy side (`envoy.yaml` and its rate
//!   limit actions), and the HTTP endpoints.
//! - `client` (feature `client`): the other end of the wire, a layer for clients that holds
//!   back what their servers would refuse and paces itself by the quotas they announce.
//!
//! # One request, start to end
//!
//! A [`RateLimitLayer`](crate::RateLimitLayer) wraps an axum router, a tonic server or any
//! `tower::Service` over `http::Request`. For each request it
//!
//! 1. takes the rules in force (a hot reload swaps them between requests, never during one);
//! 2. reads the values the rules ask for: the client IP, the method, the path, the matched
//!    route, the host, a header, a query parameter, an [`Identity`](crate::source::Identity)
//!    or a type of the application's that an earlier layer stored;
//! 3. walks the descriptor tree to find every limit that applies, each with its state key
//!    (the request's value for every descriptor key on the way);
//! 4. asks the store (memory, or Redis) whether every one of them has room, all or nothing:
//!    a request denied by one limit consumes none of the others;
//! 5. forwards the request with `X-Ratelimit-Limit` and `X-Ratelimit-Remaining` of the most
//!    restrictive limit, delays it first when a shaping leaky bucket queued it, or answers
//!    `429 Too Many Requests` (gRPC: `RESOURCE_EXHAUSTED`) with `Retry-After`, or with what
//!    the application's hook makes of the denial
//!    ([`RateLimitLayer::on_rejection`](crate::RateLimitLayer::on_rejection)).
//!
//! The same [`Limiter`](crate::Limiter) decides requests that are not HTTP (WebSocket
//! messages, jobs, tests) through [`Limiter::check`](crate::Limiter::check), with the values
//! given by the caller:
//!
//! ```rust
//! use tollgate::{rules::Rules, Limiter};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let rules = Rules::from_yaml(r#"
//! domain: jobs
//! sources:
//!   user_id: { header: x-user-id }
//! descriptors:
//!   - key: user_id
//!     rate_limit: { unit: minute, requests_per_unit: 1 }
//! "#)?;
//! let limiter = Limiter::new(rules);
//! assert!(limiter.check(&[("user_id", "42")], 1).await.is_allowed());
//! let verdict = limiter.check(&[("user_id", "42")], 1).await;
//! assert!(!verdict.is_allowed());
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! # }).unwrap();
//! ```

pub mod algorithms;
#[cfg(feature = "client")]
pub mod client;
pub mod operations;
pub mod production;
pub mod rules;
pub mod service;
pub mod simulate;
