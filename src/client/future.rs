//! [`ResponseFuture`]: sending, waiting out a hold, or failing because of one.

use super::service::{Recorder, Replay};
use super::{ClientError, Held};
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};
use tower_service::Service;

/// Timer granularity: a hold that ends within this of a finished sleep's budget is waited
/// out, and each further sleep costs at least this much of the budget.
const TIMER_SLACK: Duration = Duration::from_millis(1);

pin_project! {
    /// The response future of [`RateLimitClient`](super::RateLimitClient).
    pub struct ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S, B>,
        recorder: Option<Recorder>,
        replay: Option<Replay<S>>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, B>
    where
        S: Service<Request<B>>,
    {
        Sending { #[pin] future: S::Future },
        Waiting {
            #[pin] sleep: Sleep,
            budget: Duration,
            request: Option<Request<B>>,
            inner: S,
        },
        Held { held: Option<Held> },
    }
}

impl<S: Service<Request<B>>, B> ResponseFuture<S, B> {
    pub(crate) fn sending(
        future: S::Future,
        recorder: Recorder,
        replay: Option<Replay<S>>,
    ) -> Self {
        ResponseFuture {
            state: State::Sending { future },
            recorder: Some(recorder),
            replay,
        }
    }

    pub(crate) fn waiting(
        wait: Duration,
        wait_up_to: Duration,
        request: Request<B>,
        inner: S,
        recorder: Recorder,
        replay: Option<Replay<S>>,
    ) -> Self {
        ResponseFuture {
            state: State::waiting(wait, wait_up_to, request, inner),
            recorder: Some(recorder),
            replay,
        }
    }

    pub(crate) fn held(held: Held) -> Self {
        ResponseFuture {
            state: State::Held { held: Some(held) },
            recorder: None,
            replay: None,
        }
    }
}

impl<S: Service<Request<B>>, B> State<S, B> {
    /// Sleeps `wait`, then sends `request` through `inner`, unless the hold is extended by
    /// more than `wait_up_to` allows.
    fn waiting(wait: Duration, wait_up_to: Duration, request: Request<B>, inner: S) -> Self {
        State::Waiting {
            sleep: tokio::time::sleep(wait),
            budget: wait_up_to.saturating_add(TIMER_SLACK).saturating_sub(wait),
            request: Some(request),
            inner,
        }
    }
}

impl<S, B, ResBody> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone,
    B: Default,
{
    type Output = Result<Response<ResBody>, ClientError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Sending { future } => {
                    let response = ready!(future.poll(cx)).map_err(ClientError::Service)?;
                    let Some(recorder) = this.recorder.as_ref() else {
                        return Poll::Ready(Ok(response));
                    };
                    let refused_for = recorder.record(&response);
                    let again = this.replay.as_mut().and_then(|replay| {
                        let wait = refused_for?;
                        let after = replay.retry.again(replay.retried, wait, recorder.now())?;
                        // The retry takes its turn under the quotas it is paced by, if that
                        // comes soon enough; else the refusal is the answer (and the budget
                        // the retry took stays spent).
                        let limit = replay
                            .retry
                            .longest_wait()
                            .saturating_add(after.saturating_sub(wait));
                        let turn = recorder.book(after, limit.saturating_sub(after)).ok()?;
                        replay.retried += 1;
                        Some((wait, after + turn, replay))
                    });
                    let Some((wait, after, replay)) = again else {
                        return Poll::Ready(Ok(response));
                    };
                    tracing::debug!(
                        origin = %recorder.origin(),
                        retry = replay.retried,
                        after = ?after,
                        "request refused; retrying after the server's wait",
                    );
                    // Waits out the hold and its jitter, then sends the request again; a
                    // hold extended beyond the retry's limit meanwhile fails it as held.
                    // The jitter does not count against the retry's limit.
                    let jitter = after.saturating_sub(wait);
                    let state = State::waiting(
                        after,
                        replay.retry.longest_wait().saturating_add(jitter),
                        replay.head.request(),
                        replay.inner.clone(),
                    );
                    this.state.set(state);
                }
                StateProj::Held { held } => {
                    let held = held.take().expect("ResponseFuture polled after completion");
                    return Poll::Ready(Err(ClientError::Held(held)));
                }
                StateProj::Waiting {
                    mut sleep,
                    budget,
                    request,
                    inner,
                } => {
                    ready!(sleep.as_mut().poll(cx));
                    let recorder = this.recorder.as_ref().expect("a waiting request records");
                    // Another answer may have extended the hold while this one slept.
                    if let Some(wait) = recorder.remaining() {
                        if wait > *budget {
                            let held = Held::new(wait, recorder.origin().clone());
                            this.state.set(State::Held { held: Some(held) });
                            continue;
                        }
                        *budget = budget.saturating_sub(wait.max(TIMER_SLACK));
                        sleep.reset(Instant::now() + wait);
                        continue;
                    }
                    ready!(inner.poll_ready(cx)).map_err(ClientError::Service)?;
                    let request = request
                        .take()
                        .expect("ResponseFuture polled after completion");
                    let future = inner.call(request);
                    this.state.set(State::Sending { future });
                }
            }
        }
    }
}
