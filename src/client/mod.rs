//! The client side (feature `client`): a Tower layer that honours the limits servers
//! announce, so that a client never sends a request it already knows would be refused.
//!
//! [`RateLimitClientLayer`] wraps any client service over `http::Request` (hyper-util's
//! client, a tonic `Channel`, anything built on them). It reads every answer:
//!
//! - HTTP 429 with `Retry-After` (seconds or an HTTP-date), `X-Ratelimit-Retry-After`
//!   (seconds) or the IETF `RateLimit` field (draft-ietf-httpapi-ratelimit-headers-11,
//!   `"policy";r=0;t=30`, with a partition key `pk=:base64:`);
//! - gRPC `RESOURCE_EXHAUSTED` (`grpc-status: 8`) with `grpc-retry-pushback-ms`, in the
//!   headers of a trailers-only answer (as tollgate's server layer sends it);
//! - any answer whose `RateLimit` field says no quota is left (`r=0`): the next request would
//!   be refused until the reset `t` (unless the layer paces by that quota, see below).
//!
//! Requests to the same origin (scheme, host and port), and the same [`Partition`] where the
//! server named one, are then held until the wait has passed: they fail at once with
//! [`ClientError::Held`], without being sent, or wait when the layer is built with
//! [`wait_up_to`](RateLimitClientLayer::wait_up_to) and the wait is short enough. Other
//! origins are not held. A refusal without a readable wait holds nothing. No hold lasts
//! longer than [`max_hold`](RateLimitClientLayer::max_hold) (an hour by default), and
//! [`clear_holds`](RateLimitClientLayer::clear_holds) ends them all at once.
//!
//! With [`pace`](RateLimitClientLayer::pace), the layer also keeps a copy of each quota the
//! server announces (`RateLimit-Policy`, or Envoy's `X-Ratelimit-Limit: 10, 10;w=60`) and
//! spreads requests over it, so that a client that asks for more than its quota holds the
//! surplus back instead of being refused for it.
//!
//! With [`retry`](RateLimitClientLayer::retry), a refused idempotent request with an empty
//! body is sent again after the server's wait (see [`Retry`] for the rules and the budget).
//!
//! What is not read: statuses in the trailers of a streamed gRPC response (only
//! trailers-only answers, which is how servers refuse a call before any message, tollgate's
//! and tonic's alike), and `X-Ratelimit-Remaining: 0` without a reset time.
//!
//! ```
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode};
//! use http_body_util::Empty;
//! use std::time::Duration;
//! use tollgate::client::{ClientError, RateLimitClientLayer};
//! use tollgate::clock::ManualClock;
//! use tower::{service_fn, Layer, Service, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A server that refuses everything for two seconds.
//! let server = service_fn(|_request: Request<Empty<Bytes>>| async {
//!     let refused = Response::builder()
//!         .status(StatusCode::TOO_MANY_REQUESTS)
//!         .header("retry-after", "2")
//!         .body(())
//!         .unwrap();
//!     Ok::<_, std::convert::Infallible>(refused)
//! });
//! let clock = ManualClock::new();
//! let mut client = RateLimitClientLayer::with_clock(clock.clone()).layer(server);
//! let get = || Request::get("http://api.example.com/").body(Empty::new()).unwrap();
//!
//! // The first request is sent and refused.
//! let response = client.ready().await.unwrap().call(get()).await.unwrap();
//! assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
//!
//! // The next one is not sent at all.
//! clock.advance(Duration::from_millis(500));
//! match client.ready().await.unwrap().call(get()).await {
//!     Err(ClientError::Held(held)) => assert_eq!(held.wait(), Duration::from_millis(1500)),
//!     other => panic!("expected a hold, got {other:?}"),
//! }
//!
//! // Two seconds after the refusal, requests go out again.
//! clock.advance(Duration::from_millis(1500));
//! assert!(client.ready().await.unwrap().call(get()).await.is_ok());
//! # }
//! ```

mod announcement;
mod error;
mod future;
mod headers;
mod hold;
mod layer;
mod pace;
mod retry;
mod service;

pub use error::{ClientError, Held};
pub use future::ResponseFuture;
pub use hold::{Origin, Partition};
pub use layer::RateLimitClientLayer;
pub use retry::Retry;
pub use service::RateLimitClient;
