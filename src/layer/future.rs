use super::ResponseBody;
use crate::concurrency::Slots;
use crate::response::RateLimitHeaders;
use bytes::Bytes;
use http::Response;
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// What a request waiting on a networked store ends in.
pub(crate) enum Waited<T> {
    /// The inner service's result, the headers to add to it, and the slots its body holds.
    Served(T, RateLimitHeaders, Option<Slots>),
    /// An answer of tollgate's own (a rejection).
    Answered(Response<Bytes>),
}

/// The boxed work of a request that waits: for a networked store's answer, or for its turn
/// in a shaping leaky bucket's queue. Every other request is decided inside `call` and
/// boxes nothing.
pub(crate) type WaitingFuture<T> = Pin<Box<dyn Future<Output = Waited<T>> + Send>>;

pin_project! {
    /// The response future of [`RateLimit`](super::RateLimit).
    pub struct ResponseFuture<F: Future> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F: Future> {
        Admitted { #[pin] future: F, headers: RateLimitHeaders },
        /// Admitted, holding the request's slots for its body.
        Holding { #[pin] future: F, headers: RateLimitHeaders, slots: Option<Slots> },
        Answered { response: Option<Response<Bytes>> },
        Waiting { future: WaitingFuture<F::Output> },
    }
}

impl<F: Future> ResponseFuture<F> {
    /// The inner service's `future`, its response to carry `headers`, and its body `slots`
    /// (held meanwhile: dropped, the future gives them back).
    pub(crate) fn admitted(future: F, headers: RateLimitHeaders, slots: Option<Slots>) -> Self {
        let kind = match slots {
            None => Kind::Admitted { future, headers },
            slots => Kind::Holding {
                future,
                headers,
                slots,
            },
        };
        ResponseFuture { kind }
    }

    pub(crate) fn answered(response: Response<Bytes>) -> Self {
        ResponseFuture {
            kind: Kind::Answered {
                response: Some(response),
            },
        }
    }

    pub(crate) fn waiting(future: WaitingFuture<F::Output>) -> Self {
        ResponseFuture {
            kind: Kind::Waiting { future },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Admitted { future, headers } => {
                let response = ready!(future.poll(cx))?;
                Poll::Ready(Ok(with_headers(response, std::mem::take(headers), None)))
            }
            KindProj::Holding {
                future,
                headers,
                slots,
            } => {
                let response = ready!(future.poll(cx))?;
                let (headers, slots) = (std::mem::take(headers), slots.take());
                Poll::Ready(Ok(with_headers(response, headers, slots)))
            }
            KindProj::Answered { response } => {
                let response = response
                    .take()
                    .expect("ResponseFuture polled after completion");
                Poll::Ready(Ok(response.map(ResponseBody::rejection)))
            }
            KindProj::Waiting { future } => poll_waiting(future, cx),
        }
    }
}

/// [`ResponseFuture::poll`] for a request that waits.
fn poll_waiting<B, E>(
    future: &mut WaitingFuture<Result<Response<B>, E>>,
    cx: &mut Context<'_>,
) -> Poll<Result<Response<ResponseBody<B>>, E>> {
    Poll::Ready(match ready!(future.as_mut().poll(cx)) {
        Waited::Served(result, headers, slots) => {
            result.map(|response| with_headers(response, headers, slots))
        }
        Waited::Answered(response) => Ok(response.map(ResponseBody::rejection)),
    })
}

/// `response` with `headers`, its body holding `slots` until it ends, once they have
/// settled what the request owes as the response says.
fn with_headers<B>(
    response: Response<B>,
    headers: RateLimitHeaders,
    mut slots: Option<Slots>,
) -> Response<ResponseBody<B>> {
    if let Some(slots) = &mut slots {
        slots.settle(response.status(), response.headers(), response.extensions());
    }
    let mut response = response.map(|body| ResponseBody::inner(body, slots));
    headers.write_to(response.headers_mut());
    response
}

impl<F: Future> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
