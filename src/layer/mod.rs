//! The Tower middleware: [`RateLimitLayer`] wraps a service in [`RateLimit`].
//!
//! For each request the middleware reads the values its rules need, asks the store whether
//! every matching limit has room (all or nothing), and then either calls the inner service,
//! adding `X-Ratelimit-Limit` and `X-Ratelimit-Remaining` to its response, or answers at once
//! with `429 Too Many Requests` (gRPC: `RESOURCE_EXHAUSTED`). The inner service's error type
//! is unchanged: a rejection is an ordinary response, so the connection stays open. The
//! application may answer denials itself ([`RateLimitLayer::on_rejection`]).
//!
//! ```no_run
//! use axum::{routing::get, Router};
//! use std::net::SocketAddr;
//! use tollgate::RateLimitLayer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::from_file("rules.yaml")?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // Connect info gives the middleware the client's address.
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(())
//! # }
//! ```

mod body;
mod future;
#[allow(clippy::module_inception)]
mod layer;
mod rejection;
mod service;

pub use body::ResponseBody;
pub use future::ResponseFuture;
pub use layer::RateLimitLayer;
pub use rejection::{DefaultRejection, NoRateLimitHeaders, OnRejection, Rejected};
pub use service::{RateLimit, ShadowDenied};
