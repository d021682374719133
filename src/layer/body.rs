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
        Inner { #[pin] body: B },
        /// The inner service's body, holding the request's slots until it ends.
        Holding { #[pin] body: B, slots: Option<Slots> },
        Rejection { data: Option<Bytes> },
    }
}

impl<B> ResponseBody<B> {
    /// The inner service's `body`, holding `slots` until it ends.
    pub(crate) fn inner(body: B, slots: Option<Slots>) -> Self {
        let kind = match slots {
            None => Kind::Inner { body },
            slots => Kind::Holding { body, slots },
        };
        ResponseBody { kind }
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
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Holding { mut body, slots } => {
                let frame = body.as_mut().poll_frame(cx);
                if let (Poll::Ready(Some(Ok(frame))), Some(slots)) = (&frame, slots.as_mut()) {
                    if let Some(trailers) = frame.trailers_ref() {
                        slots.settle_trailers(trailers);
                    }
                }
                match &frame {
                    Poll::Ready(None) => finish(slots),
                    Poll::Ready(Some(Ok(_))) if body.is_end_stream() => finish(slots),
                    Poll::Ready(Some(Err(_))) => *slots = None,
                    Poll::Ready(Some(Ok(_))) | Poll::Pending => {}
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
            Kind::Inner { body } | Kind::Holding { body, .. } => body.is_end_stream(),
            Kind::Rejection { data } => data.is_none(),
        }
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } | Kind::Holding { body, .. } => body.size_hint(),
            Kind::Rejection { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

/// The body's response ended as it should: its slots are given back, the adaptive limit
/// learning from it.
fn finish(slots: &mut Option<Slots>) {
    if let Some(slots) = slots.take() {
        slots.finish();
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Inner { .. } | Kind::Holding { .. } => f.write_str("ResponseBody::Inner"),
            Kind::Rejection { .. } => f.write_str("ResponseBody::Rejection"),
        }
    }
}
