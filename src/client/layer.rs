//! [`RateLimitClientLayer`]: how a client is told to honour its servers' limits.

use super::hold::Holds;
use super::{RateLimitClient, Retry};
use crate::clock::{Clock, SystemClock};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer;

/// Makes a client honour the limits its servers announce: wraps a service in
/// [`RateLimitClient`].
///
/// After a server refuses a request with a wait (HTTP 429 with `Retry-After`,
/// `X-Ratelimit-Retry-After` or an exhausted IETF `RateLimit` item; gRPC
/// `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms`), or tells it that no quota is left
/// (`RateLimit` with `r=0`), requests to that origin are held until the wait has passed. A
/// held request fails at once with [`ClientError::Held`](super::ClientError::Held) and is not
/// sent, unless [`wait_up_to`](Self::wait_up_to) lets it wait.
///
/// Every service this layer makes, and every clone of the layer, shares one table of holds:
/// build one layer per client. [`RateLimitClientLayer::new`] starts an empty table.
///
/// ```no_run
/// use bytes::Bytes;
/// use http_body_util::Empty;
/// use hyper_util::{client::legacy::Client, rt::TokioExecutor};
/// use std::time::Duration;
/// use tollgate::client::{ClientError, RateLimitClientLayer};
/// use tower::{Service, ServiceBuilder, ServiceExt};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
/// let mut client = ServiceBuilder::new()
///     .layer(RateLimitClientLayer::new().wait_up_to(Duration::from_secs(2)))
///     .service(http);
///
/// let request = http::Request::get("http://127.0.0.1:3000/").body(Empty::new())?;
/// match client.ready().await?.call(request).await {
///     Ok(response) => println!("{}", response.status()),
///     // Held for more than two seconds: not sent.
///     Err(ClientError::Held(held)) => println!("try again in {:?}", held.wait()),
///     Err(error) => return Err(error.into()),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RateLimitClientLayer {
    holds: Arc<Holds>,
    clock: Arc<dyn Clock>,
    wait_up_to: Duration,
    retry: Option<Retry>,
}

impl RateLimitClientLayer {
    /// A layer that holds nobody yet, reads the system clock, and fails held requests at once.
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }

    /// Like [`new`](Self::new), with the time taken from `clock`
    /// ([`ManualClock`](crate::clock::ManualClock) in tests). Held requests that
    /// [wait](Self::wait_up_to) still sleep on tokio's timer.
    pub fn with_clock(clock: impl Clock) -> Self {
        RateLimitClientLayer {
            holds: Arc::default(),
            clock: Arc::new(clock),
            wait_up_to: Duration::ZERO,
            retry: None,
        }
    }

    /// Lets a held request wait (on tokio's timer) when the remaining wait is at most `limit`,
    /// and then be sent; a request held for longer still fails at once. If the hold is
    /// extended while it waits, it waits on within the same `limit`, else fails.
    ///
    /// The default, `Duration::ZERO`, fails every held request at once.
    ///
    /// # Panics
    ///
    /// A request that waits sleeps on tokio's timer: sending one outside a tokio runtime
    /// panics.
    #[must_use]
    pub fn wait_up_to(mut self, limit: Duration) -> Self {
        self.wait_up_to = limit;
        self
    }

    /// Sends refused requests again after the server's wait, as `retry` says: only
    /// idempotent requests with an empty body, a bounded number of times, within a budget
    /// (see [`Retry`]). Off by default: a refusal is the answer.
    ///
    /// Like a request that [waits](Self::wait_up_to), a retry sleeps on tokio's timer and
    /// then reads the layer's clock: with a [`ManualClock`](crate::clock::ManualClock) that
    /// has not moved, the retry finds the hold still there and fails as held.
    ///
    /// # Panics
    ///
    /// A retry sleeps on tokio's timer: retrying outside a tokio runtime panics.
    #[must_use]
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = Some(retry);
        self
    }
}

impl Default for RateLimitClientLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RateLimitClientLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitClientLayer")
            .field("holds", &self.holds)
            .field("wait_up_to", &self.wait_up_to)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for RateLimitClientLayer {
    type Service = RateLimitClient<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitClient::new(
            inner,
            self.holds.clone(),
            self.clock.clone(),
            self.wait_up_to,
        )
        .retrying(self.retry.clone())
    }
}
