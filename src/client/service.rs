//! [`RateLimitClient`]: holds the requests a server would refuse, and reads every answer.

use super::announcement;
use super::hold::{Holds, Origin, Partition};
use super::layer::DEFAULT_MAX_HOLD;
use super::pace::Pacers;
use super::retry::RequestHead;
use super::{ClientError, Held, ResponseFuture, Retry};
use crate::clock::{saturating_nanos, Clock};
use http::{HeaderValue, Request, Response, Uri};
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// A client service that honours the limits its servers announce; made by
/// [`RateLimitClientLayer`](super::RateLimitClientLayer), which describes what it does.
///
/// The inner service must be `Clone` (hyper-util's client and tonic's `Channel` are): a
/// request that waits out a hold takes a clone, and readies it only when the wait is over,
/// so that it reserves nothing (a connection, a concurrency permit) while it sleeps; a
/// request that may be [retried](super::Retry) keeps a clone for its retries.
///
/// The request body must be an [`http_body::Body`] with a `Default`: a body-less request
/// that is retried is sent again with the default (empty) body.
#[derive(Clone)]
pub struct RateLimitClient<S> {
    inner: S,
    holds: Arc<Holds>,
    pacers: Option<Arc<Pacers>>,
    clock: Arc<dyn Clock>,
    wait_up_to: Duration,
    max_hold: Duration,
    retry: Option<Retry>,
}

impl<S> RateLimitClient<S> {
    pub(crate) fn new(
        inner: S,
        holds: Arc<Holds>,
        clock: Arc<dyn Clock>,
        wait_up_to: Duration,
    ) -> Self {
        RateLimitClient {
            inner,
            holds,
            pacers: None,
            clock,
            wait_up_to,
            max_hold: DEFAULT_MAX_HOLD,
            retry: None,
        }
    }

    /// Holds and paces for at most `max_hold`.
    pub(crate) fn holding_at_most(mut self, max_hold: Duration) -> Self {
        self.max_hold = max_hold;
        self
    }

    /// Retries as `retry` says, or never.
    pub(crate) fn retrying(mut self, retry: Option<Retry>) -> Self {
        self.retry = retry;
        self
    }

    /// Paces requests by the quotas in `pacers`, or not at all.
    pub(crate) fn pacing(mut self, pacers: Option<Arc<Pacers>>) -> Self {
        self.pacers = pacers;
        self
    }

    /// Ends every hold at once and forgets every paced quota, for every service of the
    /// layer that made this one: see
    /// [`RateLimitClientLayer::clear_holds`](super::RateLimitClientLayer::clear_holds).
    pub fn clear_holds(&self) {
        clear(&self.holds, self.pacers.as_deref(), None);
    }

    /// Ends the holds of `origin` at once and forgets its paced quotas, for every service of
    /// the layer that made this one: see
    /// [`RateLimitClientLayer::clear_holds_of`](super::RateLimitClientLayer::clear_holds_of).
    pub fn clear_holds_of(&self, origin: &Origin) {
        clear(&self.holds, self.pacers.as_deref(), Some(origin));
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

impl<S: fmt::Debug> fmt::Debug for RateLimitClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitClient")
            .field("inner", &self.inner)
            .field("holds", &self.holds)
            .field("pacers", &self.pacers)
            .field("wait_up_to", &self.wait_up_to)
            .field("max_hold", &self.max_hold)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// Ends the holds of `origin`, or of every origin when `None`, and forgets its quotas.
pub(crate) fn clear(holds: &Holds, pacers: Option<&Pacers>, origin: Option<&Origin>) {
    holds.clear(origin);
    if let Some(pacers) = pacers {
        pacers.clear(origin);
    }
}

/// Where a request goes, and the table its answer is written into.
pub(crate) struct Recorder {
    holds: Arc<Holds>,
    pacers: Option<Arc<Pacers>>,
    clock: Arc<dyn Clock>,
    max_hold: Duration,
    // The origin is worked out only when it is needed (a hold, an announced wait, pacing),
    // and then once, so that a request to a client that holds nothing allocates nothing for
    // it.
    uri: Uri,
    host: Option<HeaderValue>,
    origin: OnceLock<Origin>,
    partition: Option<Partition>,
}

impl Recorder {
    fn of<B, S>(request: &Request<B>, client: &RateLimitClient<S>) -> Self {
        Recorder {
            holds: client.holds.clone(),
            pacers: client.pacers.clone(),
            clock: client.clock.clone(),
            max_hold: client.max_hold,
            uri: request.uri().clone(),
            host: request.headers().get(http::header::HOST).cloned(),
            origin: OnceLock::new(),
            partition: request.extensions().get::<Partition>().cloned(),
        }
    }

    /// The origin the request goes to.
    pub(crate) fn origin(&self) -> &Origin {
        self.origin
            .get_or_init(|| Origin::of(&self.uri, self.host.as_ref()))
    }

    /// How long the request is still held, if at all.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        if self.holds.is_empty() {
            return None;
        }
        self.holds
            .remaining(self.origin(), self.partition.as_ref(), self.clock.now())
    }

    /// Books the request's send `after` from now under the quotas its server announced:
    /// how much longer it must wait for its turn then, or, if more than `up_to`, that wait
    /// as the error (and nothing booked). The turn comes no later than `max_hold` from now,
    /// or than `after` if that is later.
    pub(crate) fn book(&self, after: Duration, up_to: Duration) -> Result<Duration, Duration> {
        let Some(pacers) = &self.pacers else {
            return Ok(Duration::ZERO);
        };
        let at = self.clock.now().plus(saturating_nanos(after));
        let max_hold = self.max_hold.saturating_sub(after);
        pacers.book(self.origin(), self.partition.as_ref(), at, up_to, max_hold)
    }

    /// The layer clock's time.
    pub(crate) fn now(&self) -> crate::clock::Nanos {
        self.clock.now()
    }

    /// Holds the origin (or the partitions named) for the waits `response` announces, cut
    /// to `max_hold`, and takes in the quotas it announces when pacing; returns the longest
    /// wait if `response` is a refusal.
    pub(crate) fn record<B>(&self, response: &Response<B>) -> Option<Duration> {
        let now = self.clock.now();
        let wall_clock = std::time::UNIX_EPOCH + Duration::from_nanos(now.as_u64());
        let pacing = self.pacers.is_some();
        let mut announced =
            announcement::read(response.status(), response.headers(), wall_clock, pacing);
        announced.cap_waits(self.max_hold);
        let refused_for = announced.refused_for();
        if let Some(pacers) = &self.pacers {
            if !announced.quotas.is_empty() || refused_for.is_some() {
                pacers.learn(self.origin(), &announced.quotas, refused_for, now);
            }
            // A paced quota that this answer spent does not hold the origin: its copy sends
            // the next request when the next unit is back, where the quota's reset may be
            // the time it is full again.
            announced.notices.retain(|notice| !notice.paced);
        }
        if announced.notices.is_empty() {
            return refused_for;
        }
        let origin = self.origin();
        for notice in announced.notices {
            tracing::debug!(
                origin = %origin,
                partitioned = notice.partition.is_some(),
                wait = ?notice.wait,
                "server announced a wait; holding requests",
            );
            let until = now.plus(saturating_nanos(notice.wait));
            self.holds.hold(origin, notice.partition, until, now);
        }
        refused_for
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimitClient<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ReqBody: http_body::Body + Default,
{
    type Response = Response<ResBody>;
    type Error = ClientError<S::Error>;
    type Future = ResponseFuture<S, ReqBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(ClientError::Service)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let recorder = Recorder::of(&request, self);
        // Held by a refusal's wait, or paced by a quota, for longer than it may wait: not
        // sent. Its turn under the quotas is booked for when the hold ends, and not at all
        // if it is held back.
        let hold = recorder.remaining().unwrap_or_default();
        let wait = if hold > self.wait_up_to {
            Err(hold)
        } else {
            recorder
                .book(hold, self.wait_up_to - hold)
                .map(|turn| hold + turn)
                .map_err(|turn| hold + turn)
        };
        let wait = match wait {
            Ok(wait) => wait,
            Err(wait) => return ResponseFuture::held(Held::new(wait, recorder.origin().clone())),
        };
        let (request, head) = match &self.retry {
            Some(retry) => retry.replayable(request),
            None => (request, None),
        };
        let replay = |inner: &S| -> Option<Replay<S>> {
            let retry = self.retry.clone()?;
            retry.deposit();
            Some(Replay {
                head: head?,
                retry,
                retried: 0,
                inner: inner.clone(),
            })
        };
        if wait.is_zero() {
            let replay = replay(&self.inner);
            return ResponseFuture::sending(self.inner.call(request), recorder, replay);
        }
        // The ready service stays here for the next call; the clone readies itself after
        // the wait, so that it reserves nothing while it sleeps.
        ResponseFuture::waiting(
            wait,
            self.wait_up_to,
            request,
            self.inner.clone(),
            recorder,
            replay(&self.inner),
        )
    }
}

/// What a request that may be retried keeps to be sent again.
pub(crate) struct Replay<S> {
    pub(crate) head: RequestHead,
    pub(crate) retry: Retry,
    /// How many times the request has been retried.
    pub(crate) retried: u32,
    /// A clone of the inner service, readied only when a retry is sent.
    pub(crate) inner: S,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, Nanos};
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Tokio's (paused) time as a [`Clock`], so that sleeping moves "now".
    struct TokioClock(tokio::time::Instant);

    impl Clock for TokioClock {
        fn now(&self) -> Nanos {
            ManualClock::START.plus(saturating_nanos(self.0.elapsed()))
        }
    }

    type Body = http_body_util::Empty<bytes::Bytes>;
    type Inner = tower::util::BoxCloneSyncService<Request<Body>, Response<()>, Infallible>;

    /// A server that answers 200 and counts what reaches it.
    fn counting_server() -> (Inner, Arc<AtomicUsize>) {
        let served = Arc::new(AtomicUsize::new(0));
        let counter = served.clone();
        let server = tower::service_fn(move |_: Request<Body>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(Response::new(())) }
        });
        (Inner::new(server), served)
    }

    fn request() -> Request<Body> {
        Request::get("http://a.example/").body(Body::new()).unwrap()
    }

    fn origin() -> Origin {
        Origin::of(request().uri(), None)
    }

    async fn send(
        client: &mut RateLimitClient<Inner>,
    ) -> Result<Response<()>, ClientError<Infallible>> {
        use tower::ServiceExt;
        client.ready().await?.call(request()).await
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_request_is_sent_when_the_hold_ends() {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock(tokio::time::Instant::now()));
        let holds = Arc::new(Holds::default());
        let now = clock.now();
        holds.hold(&origin(), None, now.plus(2_000_000_000), now);
        let (server, served) = counting_server();
        let mut client = RateLimitClient::new(server, holds, clock, Duration::from_secs(2));

        let started = tokio::time::Instant::now();
        send(&mut client).await.expect("sent after the wait");
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(served.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_extended_beyond_wait_up_to_fails_the_waiting_request() {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock(tokio::time::Instant::now()));
        let holds = Arc::new(Holds::default());
        let now = clock.now();
        holds.hold(&origin(), None, now.plus(1_000_000_000), now);
        let (server, served) = counting_server();
        let mut client =
            RateLimitClient::new(server, holds.clone(), clock.clone(), Duration::from_secs(2));

        let waiting = tokio::spawn(async move { send(&mut client).await });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = clock.now();
        holds.hold(&origin(), None, now.plus(5_000_000_000), now);

        let answer = waiting.await.expect("the task ends");
        let held = answer
            .expect_err("held")
            .as_held()
            .cloned()
            .expect("a hold");
        assert_eq!(held.wait(), Duration::from_millis(4_500));
        assert_eq!(served.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_clock_that_never_moves_ends_the_wait_with_a_hold() {
        let clock = ManualClock::new();
        let holds = Arc::new(Holds::default());
        holds.hold(
            &origin(),
            None,
            clock.now().plus(1_000_000_000),
            clock.now(),
        );
        let (server, served) = counting_server();
        let mut client =
            RateLimitClient::new(server, holds, Arc::new(clock), Duration::from_secs(3));

        let answer = send(&mut client).await;
        assert!(answer.expect_err("held").as_held().is_some());
        assert_eq!(served.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_partition_hold_holds_that_partition_and_requests_that_name_none() {
        use tower::ServiceExt;
        // Refuses partition "a" (`YQ==`) for two seconds.
        let server = tower::service_fn(|_: Request<Body>| async {
            let refused = Response::builder()
                .status(http::StatusCode::TOO_MANY_REQUESTS)
                .header("ratelimit", r#""per-user";r=0;t=2;pk=:YQ==:"#)
                .body(())
                .unwrap();
            Ok::<_, Infallible>(refused)
        });
        let clock = ManualClock::new();
        let mut client = RateLimitClient::new(
            Inner::new(server),
            Arc::default(),
            Arc::new(clock),
            Duration::ZERO,
        );
        let in_partition = |key: &'static str| {
            let mut request = request();
            request.extensions_mut().insert(Partition::new(key));
            request
        };

        let refused = client.ready().await.unwrap().call(in_partition("a")).await;
        assert_eq!(
            refused.unwrap().status(),
            http::StatusCode::TOO_MANY_REQUESTS
        );
        let held = client.ready().await.unwrap().call(in_partition("a")).await;
        assert_eq!(
            held.unwrap_err().as_held().unwrap().wait(),
            Duration::from_secs(2)
        );
        let unnamed = client.ready().await.unwrap().call(request()).await;
        assert!(
            unnamed.unwrap_err().as_held().is_some(),
            "may be in partition a"
        );
        let other = client.ready().await.unwrap().call(in_partition("b")).await;
        assert!(other.is_ok(), "partition b was not refused");
    }

    /// A server that refuses everything for a second, and counts what reaches it.
    fn refusing_server() -> (Inner, Arc<AtomicUsize>) {
        let arrived = Arc::new(AtomicUsize::new(0));
        let counter = arrived.clone();
        let server = tower::service_fn(move |_: Request<Body>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async {
                let refused = Response::builder()
                    .status(http::StatusCode::TOO_MANY_REQUESTS)
                    .header("retry-after", "1")
                    .body(())
                    .unwrap();
                Ok(refused)
            }
        });
        (Inner::new(server), arrived)
    }

    fn retrying_client(server: Inner, retry: Retry) -> RateLimitClient<Inner> {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock(tokio::time::Instant::now()));
        RateLimitClient::new(server, Arc::default(), clock, Duration::ZERO).retrying(Some(retry))
    }

    #[tokio::test(start_paused = true)]
    async fn retries_are_sent_after_the_wait_and_bounded() {
        let (server, arrived) = refusing_server();
        let mut client = retrying_client(server, Retry::new().retries(2).jitter(0.0));

        let started = tokio::time::Instant::now();
        let answer = send(&mut client).await.expect("the last refusal");
        assert_eq!(answer.status(), http::StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            arrived.load(Ordering::SeqCst),
            3,
            "sent once, retried twice"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn an_exhausted_budget_stops_retries() {
        let (server, arrived) = refusing_server();
        // One free retry a second, nothing saved from requests.
        // One free retry a second, nothing saved from requests: of two requests refused in
        // the same second, one is retried.
        // Two clients (holding separately) with one retry, so one budget.
        let retry = Retry::new().retries(1).budget(0.0, 1);
        let mut first = retrying_client(server.clone(), retry.clone());
        let mut second = retrying_client(server, retry);
        let (one, two) = tokio::join!(send(&mut first), send(&mut second));
        assert_eq!(one.unwrap().status(), http::StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(two.unwrap().status(), http::StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(arrived.load(Ordering::SeqCst), 3, "two sent, one retried");

        let (server, arrived) = refusing_server();
        let mut client = retrying_client(server, Retry::new().budget(0.0, 0));
        let answer = send(&mut client).await.expect("the refusal");
        assert_eq!(answer.status(), http::StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(arrived.load(Ordering::SeqCst), 1, "no budget, no retry");
    }

    #[tokio::test(start_paused = true)]
    async fn requests_are_not_retried_without_a_retry() {
        let (server, arrived) = refusing_server();
        let clock: Arc<dyn Clock> = Arc::new(TokioClock(tokio::time::Instant::now()));
        let mut client = RateLimitClient::new(server, Arc::default(), clock, Duration::ZERO);
        let answer = send(&mut client).await.expect("the refusal");
        assert_eq!(answer.status(), http::StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(arrived.load(Ordering::SeqCst), 1);
    }

    /// An answer: its status and headers.
    type Answer = (http::StatusCode, &'static [(&'static str, &'static str)]);

    /// A server that answers the `n`th request (from 0) with `answer(n)` 10 ms after it
    /// arrived, and records when each arrived, from tokio's (paused) start.
    fn recording_server(
        answer: fn(usize) -> Answer,
    ) -> (Inner, Arc<parking_lot::Mutex<Vec<Duration>>>) {
        let started = tokio::time::Instant::now();
        let arrivals = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let record = arrivals.clone();
        let server = tower::service_fn(move |_: Request<Body>| {
            let (status, headers) = {
                let mut arrivals = record.lock();
                arrivals.push(started.elapsed());
                answer(arrivals.len() - 1)
            };
            let mut response = Response::builder().status(status);
            for (name, value) in headers {
                response = response.header(*name, *value);
            }
            let response = response.body(()).unwrap();
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok(response)
            }
        });
        (Inner::new(server), arrivals)
    }

    fn pacing_client(server: Inner, wait_up_to: Duration) -> RateLimitClient<Inner> {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock(tokio::time::Instant::now()));
        RateLimitClient::new(server, Arc::default(), clock, wait_up_to).pacing(Some(Arc::default()))
    }

    /// Sends `count` requests at once, each through its own clone of `client`.
    async fn send_together(client: &RateLimitClient<Inner>, count: usize) {
        let mut sends = tokio::task::JoinSet::new();
        for _ in 0..count {
            let mut client = client.clone();
            sends.spawn(async move { send(&mut client).await });
        }
        while sends.join_next().await.is_some() {}
    }

    fn millis(arrivals: &[Duration]) -> Vec<u128> {
        arrivals.iter().map(Duration::as_millis).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_request_takes_its_paced_turn_when_the_hold_ends() {
        // 2 a second, 1 left after the first request.
        let (server, arrivals) = recording_server(|_| {
            let fields = &[
                ("ratelimit-policy", r#""q";q=2;w=1"#),
                ("ratelimit", r#""q";r=1;t=1"#),
            ];
            (http::StatusCode::OK, fields)
        });
        let mut client = pacing_client(server, Duration::from_secs(3));
        send(&mut client).await.expect("admitted");
        // Held for a second by a refusal that said nothing of the quota.
        let now = client.clock.now();
        client
            .holds
            .hold(&origin(), None, now.plus(1_000_000_000), now);

        send_together(&client, 3).await;
        // At the hold's end the quota is full again: two at once, the third 500 ms later.
        // (Booked when sent rather than when the hold ends, all three would go at once.)
        assert_eq!(millis(&arrivals.lock()), [0, 1010, 1010, 1510]);
    }

    #[tokio::test(start_paused = true)]
    async fn paced_retries_take_their_turns() {
        // The first three requests refused for a second by a spent quota of 2 a second,
        // the others admitted.
        let (server, arrivals) = recording_server(|n| match n {
            0..3 => (
                http::StatusCode::TOO_MANY_REQUESTS,
                &[
                    ("retry-after", "1"),
                    ("ratelimit-policy", r#""q";q=2;w=1"#),
                    ("ratelimit", r#""q";r=0;t=1"#),
                ],
            ),
            _ => (http::StatusCode::OK, &[]),
        });
        let client = pacing_client(server, Duration::ZERO)
            .retrying(Some(Retry::new().retries(1).jitter(0.0).budget(1.0, 10)));
        send_together(&client, 3).await;
        // The three retries take the quota's turns once the wait is over: the copy is empty
        // then, so one every 500 ms.
        assert_eq!(millis(&arrivals.lock()), [0, 0, 0, 1510, 2010, 2510]);
    }

    #[tokio::test]
    async fn a_spent_quota_that_is_not_paced_still_holds() {
        use tower::ServiceExt;
        let answer = (
            http::StatusCode::OK,
            &[
                ("ratelimit-policy", r#""burst";q=40;w=2"#),
                ("ratelimit", r#""burst";r=39;t=1, "day";r=0;t=3600"#),
            ][..],
        );
        let server = tower::service_fn(move |_: Request<Body>| {
            let (status, headers) = answer;
            let mut response = Response::builder().status(status);
            for (name, value) in headers {
                response = response.header(*name, *value);
            }
            std::future::ready(Ok::<_, Infallible>(response.body(()).unwrap()))
        });
        let clock = ManualClock::new();
        let mut client = RateLimitClient::new(
            Inner::new(server),
            Arc::default(),
            Arc::new(clock),
            Duration::ZERO,
        )
        .pacing(Some(Arc::default()));
        let first = client.ready().await.unwrap().call(request()).await;
        assert!(first.is_ok());
        let second = client.ready().await.unwrap().call(request()).await;
        let held = second.expect_err("the day's quota is spent");
        assert_eq!(held.as_held().unwrap().wait(), Duration::from_secs(3600));
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_and_the_paced_turn_after_it_last_at_most_max_hold() {
        // Refused for ever by a spent quota of one a day; admitted after that.
        let (server, arrivals) = recording_server(|n| match n {
            0 => (
                http::StatusCode::TOO_MANY_REQUESTS,
                &[
                    ("retry-after", "99999999999"),
                    ("ratelimit-policy", r#""day";q=1;w=86400"#),
                    ("ratelimit", r#""day";r=0;t=86400"#),
                ],
            ),
            _ => (http::StatusCode::OK, &[]),
        });
        let mut client = pacing_client(server, Duration::from_secs(3_600))
            .holding_at_most(Duration::from_secs(10));
        send(&mut client).await.expect("the refusal");
        send(&mut client).await.expect("sent after the hold");
        // Held for 10 s from the refusal's answer (10 ms in), and not paced beyond that.
        assert_eq!(millis(&arrivals.lock()), [0, 10_010]);
    }
}
