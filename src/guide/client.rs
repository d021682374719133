//! # The client layer (feature `client`)
//!
//! A server that limits its clients tells them how: `429` with `Retry-After`, the
//! `X-Ratelimit-*` headers, the IETF `RateLimit-Policy` and `RateLimit` fields, gRPC's
//! `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms`. A client that reads none of it sends
//! what the server will refuse: at ten times its quota, nine requests in ten come back as
//! `429`, each costing a round trip and the server's time.
//! [`RateLimitClientLayer`](crate::client::RateLimitClientLayer) reads all of it, on any
//! Tower client over `http::Request` (hyper-util's client, a tonic `Channel`), so that a
//! request the server would refuse is not sent.
//!
//! ```toml
//! tollgate = { version = "0.1", features = ["client"] }
//! ```
//!
//! # What it does
//!
//! | the server says | the layer |
//! |---|---|
//! | `429` with `Retry-After` (seconds or a date), `X-Ratelimit-Retry-After`, or an exhausted `RateLimit` item; gRPC `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms` | holds every request to that origin (scheme, host, port) until the longest wait given has passed; only the partitions named (`pk`), when every exhausted item names one |
//! | `RateLimit: "name";r=0;t=5` on an admitted answer | holds the origin for `t`: the next request would be refused (while pacing by that quota, its copy decides instead) |
//! | `RateLimit-Policy: "name";q=40;w=2`, or Envoy's `X-Ratelimit-Limit: 10, 10;w=60` | with [`pace`](crate::client::RateLimitClientLayer::pace), spreads requests over the quota |
//!
//! A held request fails at once with
//! [`ClientError::Held`](crate::client::ClientError::Held), which carries the wait and the
//! origin, without being sent; with
//! [`wait_up_to`](crate::client::RateLimitClientLayer::wait_up_to) it waits instead when the
//! wait is short enough. With [`retry`](crate::client::RateLimitClientLayer::retry), a refused
//! idempotent request with an empty body is sent again after the server's wait, within a
//! retry budget ([`Retry`](crate::client::Retry)).
//!
//! Nothing stays stuck. No wait is honoured for longer than
//! [`max_hold`](crate::client::RateLimitClientLayer::max_hold), an hour by default: a
//! `Retry-After: 99999999999`, a date in the year 9999 or a quota of one request a day holds
//! the origin for an hour, after which the next request asks the server again.
//! [`clear_holds`](crate::client::RateLimitClientLayer::clear_holds), on the layer or on a
//! service it made, ends every hold and forgets the paced quotas at once, for an operator who
//! knows better; `clear_holds_of(held.origin())` does so for the origin a
//! [`Held`](crate::client::Held) names. What the layer remembers is bounded: the holds and
//! quotas of at most 1,024 origins and of 64 partitions of each. Past that, the hold that
//! ends soonest, or the quota announced longest ago, is dropped: what it held back may be
//! sent, and refused, until the server says it again.
//!
//! # Pacing
//!
//! Holding back after a refusal still lets a client meet one refusal per wait: when the
//! wait ends, it sends everything it has queued and is refused again. Pacing keeps a copy
//! of each quota the server announces, as a bucket of `q` units that refills `q` per `w`,
//! and sends a request only when the copy has a unit for it: what is left at once, then one
//! request every `w / q`. Every answer that says how much is left (`r`) brings the copy down
//! to the server's count if the server has less (another client of the same quota spent
//! some).
//!
//! On the server, announce the quota with the IETF fields (`response.headers: ietf` or
//! `both`; see [the rules file](super::rules#response)). tollgate's server layer announces
//! a bucket by the time its capacity takes to come back: a token bucket of 20 a second with
//! bursts of 40 is `"per-client";q=40;w=2`, so that a client's copy matches it exactly.
//! `w` is whole seconds, rounded up: where the capacity comes back in less than a second
//! (100 a second with bursts of 10 is `q=10;w=1`) or in no whole number of seconds, the
//! announced rate is below the real one, and a paced client sends less than it may.
//!
//! Against the demo server's per-client limit (that token bucket), a client asking 200
//! requests a second for 10 s (`examples/client.rs`; figures in `BENCHMARKS.md`):
//!
//! | client | served of the 240 the limit allows | `429`s received |
//! |---|---:|---:|
//! | without the layer | 239 | 1,761 |
//! | the layer, not pacing | 220 | 0 |
//! | the layer, pacing | 236–238 | 0 |
//!
//! Without pacing, the layer honours the `r=0;t=2` of the answer that empties the bucket,
//! and waits for the bucket to be full again: bursts, and 8 % less served. Against a fixed
//! window a paced client meets one refusal in all, early in the first window, once it has
//! spent the window's quota (its copy gives a unit back before the window does); that
//! refusal's wait then lines it up with the windows.
//!
//! Pacing in a test, on a [`ManualClock`](crate::clock::ManualClock), against a server
//! that announces 2 requests a second:
//!
//! ```
//! use bytes::Bytes;
//! use http::{Request, Response};
//! use http_body_util::Empty;
//! use std::time::Duration;
//! use tollgate::client::{ClientError, RateLimitClientLayer};
//! use tollgate::clock::ManualClock;
//! use tower::{service_fn, Layer, Service, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A server that admits everything, and announces a quota of 2 a second with 1 left.
//! let server = service_fn(|_request: Request<Empty<Bytes>>| async {
//!     let admitted = Response::builder()
//!         .header("ratelimit-policy", r#""api";q=2;w=1"#)
//!         .header("ratelimit", r#""api";r=1;t=1"#)
//!         .body(())
//!         .unwrap();
//!     Ok::<_, std::convert::Infallible>(admitted)
//! });
//! let clock = ManualClock::new();
//! let mut client = RateLimitClientLayer::with_clock(clock.clone())
//!     .pace()
//!     .layer(server);
//! let get = || Request::get("http://api.example.com/").body(Empty::new()).unwrap();
//!
//! // The first request teaches the layer the quota, with 1 left; the second spends it.
//! for _ in 0..2 {
//!     assert!(client.ready().await.unwrap().call(get()).await.is_ok());
//! }
//! // The third would go over 2 a second: held for the half second until its unit is back.
//! match client.ready().await.unwrap().call(get()).await {
//!     Err(ClientError::Held(held)) => assert_eq!(held.wait(), Duration::from_millis(500)),
//!     other => panic!("expected a hold, got {other:?}"),
//! }
//! clock.advance(Duration::from_millis(500));
//! assert!(client.ready().await.unwrap().call(get()).await.is_ok());
//! # }
//! ```
//!
//! # On a hyper client, and on tonic
//!
//! ```no_run
//! use bytes::Bytes;
//! use http_body_util::Empty;
//! use hyper_util::{client::legacy::Client, rt::TokioExecutor};
//! use std::time::Duration;
//! use tollgate::client::{RateLimitClientLayer, Retry};
//! use tower::ServiceBuilder;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // One layer per client: its clones share what the servers said.
//! let layer = RateLimitClientLayer::new()
//!     .pace()
//!     .wait_up_to(Duration::from_millis(200))
//!     .retry(Retry::new().retries(1));
//!
//! let http = ServiceBuilder::new()
//!     .layer(layer.clone())
//!     .service(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
//!
//! // A tonic channel: a generated client takes the layered channel as it takes the channel
//! // (`GreeterClient::new(layer.layer(channel))`); a held call fails with a `Status` whose
//! // message says why.
//! let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
//!     .connect()
//!     .await?;
//! let grpc = tonic::client::Grpc::new(tower::Layer::layer(&layer, channel));
//! # drop((http, grpc));
//! # Ok(())
//! # }
//! ```
//!
//! # Partitions
//!
//! Holds and quotas belong to an origin. A server that limits each user or API key apart
//! names the partition in `pk` (`RateLimit: "per-user";r=0;t=5;pk=:dXNlcjE=:`, and the same
//! `pk` on its `RateLimit-Policy` item); a client that sends for several users tells the
//! layer which partition each request is in with a [`Partition`](crate::client::Partition)
//! in its extensions, so that one user's refusal does not hold the others, and each user is
//! paced by their own quota. A quota or a hold that names no partition is the whole
//! origin's: every request to it counts against it. Requests that name no partition are
//! held and paced by every partition of their origin: they may be in any of them.
//!
//! A server that limits routes apart without naming partitions announces, on each route's
//! answers, that route's quota: the layer paces every request to the origin by all of
//! them, which is safe but slower than the server allows.
//!
//! # What it does not read
//!
//! - a status in the trailers of a streamed gRPC response: servers refuse a call before its
//!   first message, in a trailers-only answer, which the layer reads;
//! - `X-Ratelimit-Remaining: 0` without a reset time, and a bare `X-Ratelimit-Limit: 10`,
//!   which names no window to pace by;
//! - renamed `X-Ratelimit-*` headers (`response.names` on a tollgate server).
