use crate::concurrency::Slots;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project! {
    /// The body of a response from [`RateLimit`](super::RateLimit): the inner service's body,
    /// or the body of a rejection.
    ///
    /// The inner service's body holds the request's slots of its `concurrency` limits until
    /// it ends: its last frame or an error, or dropped (the client went away, or the server
    /// gave up on the response).
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B, slots: Option<Slots> },
        Rejection { data: Option<Bytes> },
    }
}

impl<B> ResponseBody<B> {
    /// The inner service's `body`, holding `slots` until it ends.
    pub(crate) fn inner(body: B, slots: Option<Slots>) -> Self {
        ResponseBody {
            kind: Kind::Inner { body, slots },
        }
    }

    pub(crate) fn rejection(data: Bytes) -> Self {
        // An empty body ends the stream with the headers (gRPC's Trailers-Only form).
        let data = (!data.is_empty()).then_some(data);
        ResponseBody {
            kind: Kind::Rejection { data },
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { mut body, slots } => {
                let frame = body.as_mut().poll_frame(cx);
                if slots.is_some() && response_ended(&frame, || body.is_end_stream()) {
                    *slots = None;
                }
                frame
            }
            KindProj::Rejection { data } => {
                Poll::Ready(data.take().map(|data| Ok(Frame::data(data))))
            }
        }
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::Rejection { data } => data.is_none(),
        }
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::Rejection { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

/// Whether a body that answered `frame` has ended: its last frame, an error, or a frame
/// after which `is_end_stream` says no more come.
fn response_ended<T, E>(
    frame: &Poll<Option<Result<T, E>>>,
    is_end_stream: impl FnOnce() -> bool,
) -> bool {
    match frame {
        Poll::Ready(None | Some(Err(_))) => true,
        Poll::Ready(Some(Ok(_))) => is_end_stream(),
        Poll::Pending => false,
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Inner { .. } => f.write_str("ResponseBody::Inner"),
            Kind::Rejection { .. } => f.write_str("ResponseBody::Rejection"),
        }
    }
}
