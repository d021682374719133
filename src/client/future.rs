//! [`ResponseFuture`]: sending, waiting out a hold, or failing because of one.

use super::service::Recorder;
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
    pub(crate) fn sending(future: S::Future, recorder: Recorder) -> Self {
        ResponseFuture {
            state: State::Sending { future },
            recorder: Some(recorder),
        }
    }

    pub(crate) fn waiting(
        wait: Duration,
        wait_up_to: Duration,
        request: Request<B>,
        inner: S,
        recorder: Recorder,
    ) -> Self {
        ResponseFuture {
            state: State::Waiting {
                sleep: tokio::time::sleep(wait),
                budget: wait_up_to.saturating_add(TIMER_SLACK).saturating_sub(wait),
                request: Some(request),
                inner,
            },
            recorder: Some(recorder),
        }
    }

    pub(crate) fn held(held: Held) -> Self {
        ResponseFuture {
            state: State::Held { held: Some(held) },
            recorder: None,
        }
    }
}

impl<S, B, ResBody> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResBody>, ClientError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Sending { future } => {
                    let response = ready!(future.poll(cx)).map_err(ClientError::Service)?;
                    if let Some(recorder) = this.recorder.take() {
                        recorder.record(&response);
                    }
                    return Poll::Ready(Ok(response));
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
                            let held = Held::new(wait, recorder.origin());
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
