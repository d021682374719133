use super::future::{Waited, WaitingFuture};
use super::rejection::{DefaultRejection, OnRejection, Rejected};
use super::{ResponseBody, ResponseFuture};
use crate::algorithm::Decision;
use crate::decision::Ruling;
use crate::limiter::Deciding;
use crate::response::{self, RateLimitHeaders};
use crate::rules::{Limit, Rules};
use crate::source::{MissingPeerAddr, RequestView};
use crate::store::{MemoryStore, Store};
use crate::Limiter;
use bytes::Bytes;
use http::{Request, Response};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// Rate-limits requests to the inner service; made by [`RateLimitLayer`](super::RateLimitLayer).
///
/// `R` answers the requests it denies ([`OnRejection`]).
pub struct RateLimit<S, St = MemoryStore, R = DefaultRejection> {
    inner: S,
    limiter: Limiter<St>,
    on_rejection: R,
}

/// Put into the extensions of a request that a shadow-mode limit would have denied, so the
/// application (or its metrics) can see what enforcing the limit would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShadowDenied;

impl<S, St> RateLimit<S, St> {
    /// Wraps `inner`, deciding with `limiter`.
    pub fn new(inner: S, limiter: Limiter<St>) -> Self {
        RateLimit::with_rejection(inner, limiter, DefaultRejection)
    }
}

impl<S, St, R> RateLimit<S, St, R> {
    /// Wraps `inner`, deciding with `limiter`, answering denials with `on_rejection`.
    pub(super) fn with_rejection(inner: S, limiter: Limiter<St>, on_rejection: R) -> Self {
        RateLimit {
            inner,
            limiter,
            on_rejection,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, St, R: Clone> Clone for RateLimit<S, St, R> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            limiter: self.limiter.clone(),
            on_rejection: self.on_rejection.clone(),
        }
    }
}

impl<S: fmt::Debug, St: fmt::Debug, R> fmt::Debug for RateLimit<S, St, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl<S, St, R, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, St, R>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    St: Store,
    R: OnRejection,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let deciding = match self.limiter.deciding(RequestView::of(&request), 1) {
            Ok(deciding) => deciding,
            Err(MissingPeerAddr) => return missing_peer_addr(&request),
        };
        let Some(ruling) = deciding.ruling() else {
            let deciding = deciding.into_owned();
            return self.wait_for_store(deciding, request);
        };
        match plan(deciding.rules(), ruling, &mut request) {
            Plan::Reject(rejection) => {
                let answer = rejection.answer(&self.on_rejection, deciding.rules(), &request);
                ResponseFuture::answered(answer)
            }
            Plan::Admit(headers) if ruling.delay().is_zero() => {
                let slots = deciding.go_ahead();
                ResponseFuture::admitted(self.inner.call(request), headers, slots)
            }
            Plan::Admit(headers) => {
                let release_at = release_at(ruling.delay());
                let deciding = deciding.into_owned();
                self.wait_in_queue(release_at, deciding, request, headers)
            }
        }
    }
}

// The few requests that wait: for their turn in a queue, or for a networked store.
impl<S, St, R> RateLimit<S, St, R>
where
    S: Clone + Send + 'static,
    St: Store,
    R: OnRejection,
{
    /// An admitted request that waits until `release_at` for its turn in a shaping leaky
    /// bucket's queue, holding the places `deciding` booked.
    fn wait_in_queue<ReqBody>(
        &mut self,
        release_at: Option<tokio::time::Instant>,
        deciding: Deciding<'static, St>,
        request: Request<ReqBody>,
        headers: RateLimitHeaders,
    ) -> ResponseFuture<S::Future>
    where
        S: Service<Request<ReqBody>>,
        S::Future: Send + 'static,
        ReqBody: Send + 'static,
    {
        let inner = self.take_ready_inner();
        let waiting = wait_then_call(release_at, deciding, inner, request, headers);
        ResponseFuture::waiting(Box::pin(waiting))
    }

    /// A request whose decision waits for a networked store's answer.
    fn wait_for_store<ReqBody>(
        &mut self,
        mut deciding: Deciding<'static, St>,
        mut request: Request<ReqBody>,
    ) -> ResponseFuture<S::Future>
    where
        S: Service<Request<ReqBody>>,
        S::Future: Send + 'static,
        ReqBody: Send + 'static,
    {
        let inner = self.take_ready_inner();
        let on_rejection = self.on_rejection.clone();
        let waiting: WaitingFuture<_> = Box::pin(async move {
            let ruling = deciding.settle().await;
            match plan(deciding.rules(), &ruling, &mut request) {
                Plan::Reject(rejection) => {
                    Waited::Answered(rejection.answer(&on_rejection, deciding.rules(), &request))
                }
                Plan::Admit(headers) => {
                    let release_at = release_at(ruling.delay());
                    wait_then_call(release_at, deciding, inner, request, headers).await
                }
            }
        });
        ResponseFuture::waiting(waiting)
    }
}

/// The answer to a request without a peer address when the rules need one.
fn missing_peer_addr<B, F: Future>(request: &Request<B>) -> ResponseFuture<F> {
    report_missing_peer_addr();
    let grpc = response::is_grpc(request.headers());
    ResponseFuture::answered(response::missing_peer_addr(grpc, MissingPeerAddr::FIX))
}

impl<S: Clone, St, R> RateLimit<S, St, R> {
    /// The ready inner service, to call later from a future; a fresh clone takes its place.
    fn take_ready_inner(&mut self) -> S {
        let clone = self.inner.clone();
        std::mem::replace(&mut self.inner, clone)
    }
}

/// When a request delayed by `delay` from now is released (`None`: at once). Fixed at
/// decision time, so that a future first polled late still keeps its turn.
fn release_at(delay: Duration) -> Option<tokio::time::Instant> {
    (!delay.is_zero()).then(|| tokio::time::Instant::now() + delay)
}

/// Waits for the request's turn in the queue, then calls the inner service. Dropped while
/// waiting (the client went away), `deciding` gives the queue places back, and the slots of
/// its concurrency limits.
///
/// The wait is a Tokio timer: servers that queue requests run on a Tokio runtime with time
/// enabled (as axum and tonic servers do).
async fn wait_then_call<S, St, ReqBody>(
    release_at: Option<tokio::time::Instant>,
    deciding: Deciding<'static, St>,
    mut inner: S,
    request: Request<ReqBody>,
    headers: RateLimitHeaders,
) -> Waited<Result<S::Response, S::Error>>
where
    S: Service<Request<ReqBody>>,
    St: Store,
{
    // A request a networked store admitted without a delay starts no timer.
    if let Some(release_at) = release_at {
        tokio::time::sleep_until(release_at).await;
    }
    let slots = deciding.go_ahead();
    Waited::Served(inner.call(request).await, headers, slots)
}

/// What to do with a request. Small, as the common request's copies of it are: a rejection
/// is made only where it is answered.
enum Plan<'a> {
    /// Admitted: these headers go on the inner service's response.
    Admit(RateLimitHeaders),
    /// Denied: answered with this rejection.
    Reject(Rejection<'a>),
}

/// A request denied by `limit`'s `decision`, which `ruling` reports; `grpc` when it is a
/// gRPC call.
struct Rejection<'a> {
    ruling: &'a Ruling,
    limit: &'a Limit,
    decision: &'a Decision,
    grpc: bool,
}

impl Rejection<'_> {
    /// The answer `on_rejection` gives `request` under `rules` (by default a 429, or gRPC's
    /// `RESOURCE_EXHAUSTED`).
    #[inline]
    fn answer<B>(
        self,
        on_rejection: &impl OnRejection,
        rules: &Rules,
        request: &Request<B>,
    ) -> Response<Bytes> {
        let denied_by = (self.limit, self.decision);
        let rejected = Rejected::new(rules, self.ruling, denied_by, request, self.grpc);
        on_rejection.response(&rejected)
    }
}

/// What to do with `request` after `ruling`: reject it, or add headers to its response. An
/// admitted request that a shadow limit would have denied is marked.
fn plan<'a, B>(rules: &'a Rules, ruling: &'a Ruling, request: &mut Request<B>) -> Plan<'a> {
    if ruling.is_allowed() && ruling.is_shadow_denied() {
        request.extensions_mut().insert(ShadowDenied);
    }
    let reported = ruling
        .reported()
        .map(|(index, decision)| (&rules.limits[index], decision));
    match reported {
        Some((limit, decision)) if !ruling.is_allowed() => Plan::Reject(Rejection {
            ruling,
            limit,
            decision,
            grpc: response::is_grpc(request.headers()),
        }),
        Some((limit, decision)) => {
            Plan::Admit(response::headers(limit, decision, rules.response()))
        }
        None => Plan::Admit(RateLimitHeaders::default()),
    }
}

/// Logged once per process: every request would fail the same way until the server is fixed.
fn report_missing_peer_addr() {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    if !REPORTED.swap(true, Ordering::Relaxed) {
        tracing::error!("{}", MissingPeerAddr::FIX);
    }
}
