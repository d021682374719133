//! How the layer answers a request it denies: tollgate's own answer
//! ([`DefaultRejection`]), or one of the application's ([`RateLimitLayer::on_rejection`]).
//!
//! [`RateLimitLayer::on_rejection`]: super::RateLimitLayer::on_rejection

use crate::algorithm::Decision;
use crate::decision::{Ruling, Verdict};
use crate::response;
use crate::rules::{Limit, Rules};
use bytes::Bytes;
use http::{Extensions, HeaderMap, Method, Request, Response, Uri};

/// What the layer knows of a request it denies, for the hook of
/// [`RateLimitLayer::on_rejection`](super::RateLimitLayer::on_rejection) to answer it.
#[derive(Debug)]
pub struct Rejected<'a> {
    rules: &'a Rules,
    limit: &'a Limit,
    ruling: &'a Ruling,
    decision: &'a Decision,
    method: &'a Method,
    uri: &'a Uri,
    request_headers: &'a HeaderMap,
    extensions: &'a Extensions,
    grpc: bool,
}

impl<'a> Rejected<'a> {
    /// The denial of `request` by `limit`'s `decision`, reported by `ruling` under `rules`;
    /// `grpc` when it is a gRPC call.
    #[inline]
    pub(super) fn new<B>(
        rules: &'a Rules,
        ruling: &'a Ruling,
        (limit, decision): (&'a Limit, &'a Decision),
        request: &'a Request<B>,
        grpc: bool,
    ) -> Self {
        Rejected {
            rules,
            limit,
            ruling,
            decision,
            method: request.method(),
            uri: request.uri(),
            request_headers: request.headers(),
            extensions: request.extensions(),
            grpc,
        }
    }

    /// The outcome: why the request is denied ([`Verdict::denial`]), and the limit and
    /// decision that denied it.
    pub fn verdict(&self) -> Verdict {
        Verdict::new(*self.ruling, self.rules)
    }

    /// The limit that denied the request.
    pub fn limit(&self) -> &Limit {
        self.limit
    }

    /// The request's method.
    pub fn method(&self) -> &Method {
        self.method
    }

    /// The request's URI.
    pub fn uri(&self) -> &Uri {
        self.uri
    }

    /// The request's headers (tollgate's own for the answer are [`Rejected::headers`]).
    pub fn request_headers(&self) -> &HeaderMap {
        self.request_headers
    }

    /// The request's extensions: what the layers before put there (an identity, a tenant).
    pub fn extensions(&self) -> &Extensions {
        self.extensions
    }

    /// Whether the request is a gRPC call (`content-type: application/grpc*`), which is
    /// answered with a gRPC status rather than an HTTP error.
    pub fn is_grpc(&self) -> bool {
        self.grpc
    }

    /// The rate-limit headers tollgate gives the denial: `Retry-After`, the set the rules
    /// choose ([`ResponseOptions`](crate::rules::ResponseOptions)) and, for a gRPC call,
    /// `grpc-retry-pushback-ms`.
    pub fn headers(&self) -> HeaderMap {
        response::rejection_headers(self.limit, self.decision, self.rules.response(), self.grpc)
    }

    /// tollgate's own answer: `429` with a problem document (`503` when the load shedder
    /// turned the request away), or for a gRPC call a Trailers-Only `RESOURCE_EXHAUSTED`
    /// (`UNAVAILABLE`), with [`Rejected::headers`].
    #[inline]
    pub fn default_response(&self) -> Response<Bytes> {
        response::rejection(self.limit, self.decision, self.rules.response(), self.grpc)
    }
}

/// How a [`RateLimit`](super::RateLimit) answers the requests it denies: [`DefaultRejection`],
/// or the closure given to [`RateLimitLayer::on_rejection`](super::RateLimitLayer::on_rejection).
///
/// Sealed: those are its only implementations.
pub trait OnRejection: sealed::Sealed + Clone + Send + Sync + 'static {
    /// The answer to the denial that `rejected` describes.
    fn response(&self, rejected: &Rejected<'_>) -> Response<Bytes>;
}

mod sealed {
    /// Keeps [`OnRejection`](super::OnRejection) to tollgate's implementations, so that it
    /// may grow.
    #[allow(unreachable_pub)]
    pub trait Sealed {}
}

/// tollgate's own answer to a denial ([`Rejected::default_response`]): the layer's answer
/// unless [`RateLimitLayer::on_rejection`](super::RateLimitLayer::on_rejection) gives another.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRejection;

impl sealed::Sealed for DefaultRejection {}

impl OnRejection for DefaultRejection {
    #[inline]
    fn response(&self, rejected: &Rejected<'_>) -> Response<Bytes> {
        rejected.default_response()
    }
}

/// Put into the extensions of the response of a rejection hook, tells the layer to add none
/// of tollgate's rate-limit headers ([`Rejected::headers`]) to it.
///
/// ```
/// use http::{Response, StatusCode};
/// use tollgate::layer::NoRateLimitHeaders;
///
/// let mut forbidden = Response::new("blocked");
/// *forbidden.status_mut() = StatusCode::FORBIDDEN;
/// forbidden.extensions_mut().insert(NoRateLimitHeaders);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRateLimitHeaders;

impl<F, B> sealed::Sealed for F where F: Fn(&Rejected<'_>) -> Response<B> {}

impl<F, B> OnRejection for F
where
    F: Fn(&Rejected<'_>) -> Response<B> + Clone + Send + Sync + 'static,
    B: Into<Bytes>,
{
    fn response(&self, rejected: &Rejected<'_>) -> Response<Bytes> {
        let mut response = self(rejected).map(Into::into);
        if response
            .extensions_mut()
            .remove::<NoRateLimitHeaders>()
            .is_none()
        {
            let headers = response.headers_mut();
            for (name, value) in &rejected.headers() {
                headers.entry(name).or_insert_with(|| value.clone());
            }
        }
        response
    }
}
