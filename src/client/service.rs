//! [`RateLimitClient`]: holds the requests a server would refuse, and reads every answer.

use super::hold::{Holds, Origin, Partition};
use super::{ClientError, Held, ResponseFuture};
use crate::clock::Clock;
use http::{HeaderValue, Request, Response, Uri};
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// A client service that honours the limits its servers announce; made by
/// [`RateLimitClientLayer`](super::RateLimitClientLayer), which describes what it does.
///
/// The inner service must be `Clone` (hyper-util's client and tonic's `Channel` are): a
/// request that waits out a hold takes a clone, and readies it only when the wait is over,
/// so that it reserves nothing (a connection, a concurrency permit) while it sleeps.
#[derive(Clone)]
pub struct RateLimitClient<S> {
    inner: S,
    holds: Arc<Holds>,
    clock: Arc<dyn Clock>,
    wait_up_to: Duration,
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
            clock,
            wait_up_to,
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

impl<S: fmt::Debug> fmt::Debug for RateLimitClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitClient")
            .field("inner", &self.inner)
            .field("holds", &self.holds)
            .field("wait_up_to", &self.wait_up_to)
            .finish_non_exhaustive()
    }
}

/// Where a request goes, and the table its answer is written into.
pub(crate) struct Recorder {
    holds: Arc<Holds>,
    clock: Arc<dyn Clock>,
    // The origin is worked out only when it is needed (a hold, an announced wait), so that a
    // request to a client that holds nothing allocates nothing for it.
    uri: Uri,
    host: Option<HeaderValue>,
    partition: Option<Partition>,
}

impl Recorder {
    fn of<B>(request: &Request<B>, holds: &Arc<Holds>, clock: &Arc<dyn Clock>) -> Self {
        Recorder {
            holds: holds.clone(),
            clock: clock.clone(),
            uri: request.uri().clone(),
            host: request.headers().get(http::header::HOST).cloned(),
            partition: request.extensions().get::<Partition>().cloned(),
        }
    }

    /// The origin the request goes to.
    pub(crate) fn origin(&self) -> Origin {
        Origin::of(&self.uri, self.host.as_ref())
    }

    /// How long the request is still held, if at all.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        if self.holds.is_empty() {
            return None;
        }
        self.holds
            .remaining(&self.origin(), self.partition.as_ref(), self.clock.now())
    }

    /// Holds the origin (or the partitions named) for the waits `response` announces.
    pub(crate) fn record<B>(&self, response: &Response<B>) {
        let now = self.clock.now();
        let wall_clock = std::time::UNIX_EPOCH + Duration::from_nanos(now.as_u64());
        let notices = super::headers::notices(response.status(), response.headers(), wall_clock);
        if notices.is_empty() {
            return;
        }
        let origin = self.origin();
        for notice in notices {
            tracing::debug!(
                origin = %origin,
                partitioned = notice.partition.is_some(),
                wait = ?notice.wait,
                "server announced a wait; holding requests",
            );
            let until = now.plus(crate::clock::saturating_nanos(notice.wait));
            self.holds.hold(&origin, notice.partition, until, now);
        }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimitClient<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<ResBody>;
    type Error = ClientError<S::Error>;
    type Future = ResponseFuture<S, ReqBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(ClientError::Service)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let recorder = Recorder::of(&request, &self.holds, &self.clock);
        match recorder.remaining() {
            None => ResponseFuture::sending(self.inner.call(request), recorder),
            // The ready service stays here for the next call; the clone readies itself
            // after the wait, so that it reserves nothing while it sleeps.
            Some(wait) if wait <= self.wait_up_to => ResponseFuture::waiting(
                wait,
                self.wait_up_to,
                request,
                self.inner.clone(),
                recorder,
            ),
            Some(wait) => ResponseFuture::held(Held::new(wait, recorder.origin())),
        }
    }
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
            ManualClock::START.plus(crate::clock::saturating_nanos(self.0.elapsed()))
        }
    }

    type Inner = tower::util::BoxCloneSyncService<Request<()>, Response<()>, Infallible>;

    /// A server that answers 200 and counts what reaches it.
    fn counting_server() -> (Inner, Arc<AtomicUsize>) {
        let served = Arc::new(AtomicUsize::new(0));
        let counter = served.clone();
        let server = tower::service_fn(move |_: Request<()>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(Response::new(())) }
        });
        (Inner::new(server), served)
    }

    fn request() -> Request<()> {
        Request::get("http://a.example/").body(()).unwrap()
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
        let server = tower::service_fn(|_: Request<()>| async {
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
}
