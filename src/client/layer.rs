//! [`RateLimitClientLayer`]: how a client is told to honour its servers' limits.

use super::hold::{Holds, Origin};
use super::pace::Pacers;
use super::service::clear;
use super::{RateLimitClient, Retry};
use crate::clock::{Clock, SystemClock};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer;

/// The longest a layer holds a request back unless told otherwise: an hour.
pub(crate) const DEFAULT_MAX_HOLD: Duration = Duration::from_secs(3_600);

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
/// build one layer per client. [`RateLimitClientLayer::new`] starts an empty table. No hold
/// lasts longer than [`max_hold`](Self::max_hold) (an hour by default), and
/// [`clear_holds`](Self::clear_holds) ends them all at once.
///
/// The table is bounded: it keeps the holds of at most 1,024 origins, and of at most 64
/// partitions of each (besides the whole origin's hold). Past either, the hold that ends
/// soonest is dropped, the new one included: it holds back the fewest requests, and one of
/// them may be sent and refused, which holds it again. The quotas kept for
/// [pacing](Self::pace) are bounded by the same numbers; past them, the origin or partition
/// whose quotas were announced longest ago is forgotten, and not paced until they are
/// announced again.
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
    pacers: Option<Arc<Pacers>>,
    clock: Arc<dyn Clock>,
    wait_up_to: Duration,
    max_hold: Duration,
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
            pacers: None,
            clock: Arc::new(clock),
            wait_up_to: Duration::ZERO,
            max_hold: DEFAULT_MAX_HOLD,
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

    /// Holds no request back for longer than `max_hold` (an hour by default), whatever its
    /// server announced: a longer wait in `Retry-After` (seconds or an HTTP-date),
    /// `X-Ratelimit-Retry-After`, the reset (`t`) of a `RateLimit` item or
    /// `grpc-retry-pushback-ms` holds for `max_hold`, and so does a [paced](Self::pace)
    /// quota whose next unit is further away (a quota of one a day sends one request an
    /// hour). A server that still refuses after that says so again, and is honoured again.
    ///
    /// A hold is cut when it is written: it lasts at most the `max_hold` of the layer that
    /// read the answer. `Duration::ZERO` turns holding off: nothing is held, paced or
    /// [retried](Self::retry).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::client::RateLimitClientLayer;
    ///
    /// // Whatever a server asks, try it again after five minutes at most.
    /// let layer = RateLimitClientLayer::new().max_hold(Duration::from_secs(300));
    /// ```
    #[must_use]
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = max_hold;
        self
    }

    /// Ends every hold at once and forgets every quota kept for [pacing](Self::pace), for
    /// every service this layer made and every clone of it: requests go out as if no server
    /// had announced anything, until one does again. For an operator to unstick a client;
    /// [`RateLimitClient::clear_holds`] does the same from a service.
    ///
    /// A request already waiting out a hold (see [`wait_up_to`](Self::wait_up_to)) still
    /// sleeps until its wait would have ended, then is sent.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http::{Request, Response, StatusCode};
    /// use http_body_util::Empty;
    /// use tollgate::client::RateLimitClientLayer;
    /// use tower::{service_fn, Layer, Service, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A server that asks for a day's wait.
    /// let server = service_fn(|_request: Request<Empty<Bytes>>| async {
    ///     let refused = Response::builder()
    ///         .status(StatusCode::TOO_MANY_REQUESTS)
    ///         .header("retry-after", "86400")
    ///         .body(())
    ///         .unwrap();
    ///     Ok::<_, std::convert::Infallible>(refused)
    /// });
    /// let layer = RateLimitClientLayer::new();
    /// let mut client = layer.layer(server);
    /// let get = || Request::get("http://api.example.com/").body(Empty::new()).unwrap();
    ///
    /// client.ready().await.unwrap().call(get()).await.unwrap();
    /// let held = client.ready().await.unwrap().call(get()).await;
    /// assert!(held.unwrap_err().as_held().is_some());
    ///
    /// layer.clear_holds();
    /// let sent = client.ready().await.unwrap().call(get()).await;
    /// assert_eq!(sent.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    /// # }
    /// ```
    pub fn clear_holds(&self) {
        clear(&self.holds, self.pacers.as_deref(), None);
    }

    /// Like [`clear_holds`](Self::clear_holds), for one origin only: the one a
    /// [`Held`](super::Held) error names, for instance.
    ///
    /// ```
    /// use tollgate::client::{ClientError, RateLimitClientLayer};
    ///
    /// fn unstick<E>(layer: &RateLimitClientLayer, error: &ClientError<E>) {
    ///     if let Some(held) = error.as_held() {
    ///         layer.clear_holds_of(held.origin());
    ///     }
    /// }
    /// ```
    pub fn clear_holds_of(&self, origin: &Origin) {
        clear(&self.holds, self.pacers.as_deref(), Some(origin));
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

    /// Spreads requests over the quotas their servers announce, so that a client asking for
    /// more than its quota holds the surplus back (or lets it wait, with
    /// [`wait_up_to`](Self::wait_up_to)) instead of sending it to be refused. Off by default.
    ///
    /// A quota is read from `RateLimit-Policy` (`"api";q=40;w=2`: 40 units per 2 seconds),
    /// or from `X-Ratelimit-Limit` in the form Envoy sends (`10, 10;w=60`); a bare
    /// `X-Ratelimit-Limit: 10` names no window, and paces nothing. The layer keeps each quota
    /// as a bucket of `q` that refills `q` per `w` (as GCRA does): what is left is sent at
    /// once, then one request every `w / q`. Each response that says what is left
    /// (`RateLimit: "api";r=7` of the same name, or `X-Ratelimit-Remaining` with Envoy's
    /// form) brings the bucket down to the server's count when the server has less (another
    /// client spent some), never up.
    ///
    /// An answer that spends a paced quota (`r=0`) does not hold the origin, as it does
    /// without pacing: the copy sends the next request when the next unit is back, where
    /// the answer's reset (`t`) may be when the whole quota is. A refusal still holds for
    /// its wait, and the quotas it says are spent start empty when the wait ends. A request
    /// held back takes its turn under the quotas when the hold ends. Requests sent before
    /// the first answer are not paced, and a quota that comes back all at once (a fixed
    /// window) may see one request too early, once: its refusal lines the client up with
    /// the window.
    ///
    /// Quotas belong to their origin, and to the partition the server names (`pk`), as holds
    /// do: a request is paced by the quotas of the whole origin and of its
    /// [`Partition`](super::Partition), or by every quota of the origin if it names none. A
    /// quota not announced again within its window is forgotten. The quotas of every origin
    /// are kept in one table behind one lock, taken twice per request.
    ///
    /// Pacing needs the server's quota to describe it: a token bucket of 20 a second with
    /// bursts of 40 is `q=40;w=2` (tollgate's server layer announces it so with
    /// `response.headers: ietf` or `both`). A server that announces its quota as larger than
    /// it is still refuses, and its refusals still hold requests back.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::client::RateLimitClientLayer;
    ///
    /// // Send at the server's pace; a request whose turn is more than 100 ms away fails at
    /// // once with `ClientError::Held`.
    /// let layer = RateLimitClientLayer::new()
    ///     .pace()
    ///     .wait_up_to(Duration::from_millis(100));
    /// ```
    #[must_use]
    pub fn pace(mut self) -> Self {
        self.pacers = Some(Arc::default());
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
            .field("pacers", &self.pacers)
            .field("wait_up_to", &self.wait_up_to)
            .field("max_hold", &self.max_hold)
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
        .holding_at_most(self.max_hold)
        .retrying(self.retry.clone())
        .pacing(self.pacers.clone())
    }
}
