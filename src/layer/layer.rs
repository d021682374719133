use super::rejection::{DefaultRejection, OnRejection, Rejected};
use super::RateLimit;
use crate::rules::{RuleErrors, Rules};
use crate::store::MemoryStore;
use crate::Limiter;
use bytes::Bytes;
use http::Response;
use std::fmt;
use std::path::Path;
use tower_layer::Layer;

/// Applies rate limits from rules to a service; see the [module docs](crate::layer).
///
/// Clones share the limiter, so every clone counts against the same limits.
///
/// ```
/// use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};
/// use tollgate::RateLimitLayer;
///
/// let rules = Rules::builder("api")
///     .descriptor(DescriptorSpec::key("remote_address").rate_limit(LimitSpec::per(10, Unit::Second)))
///     .build()?;
/// let app: axum::Router = axum::Router::new().layer(RateLimitLayer::from_rules(rules));
/// # Ok::<(), tollgate::rules::RuleErrors>(())
/// ```
pub struct RateLimitLayer<St = MemoryStore, R = DefaultRejection> {
    limiter: Limiter<St>,
    on_rejection: R,
}

impl<St, R: Clone> Clone for RateLimitLayer<St, R> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            limiter: self.limiter.clone(),
            on_rejection: self.on_rejection.clone(),
        }
    }
}

impl<St: fmt::Debug, R> fmt::Debug for RateLimitLayer<St, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// A layer for the rules in `path`, with state in memory.
    ///
    /// # Errors
    ///
    /// Every mistake in the file, with line and column.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, RuleErrors> {
        Limiter::from_file(path).map(RateLimitLayer::new)
    }

    /// A layer for `rules`, with state in memory.
    pub fn from_rules(rules: Rules) -> Self {
        RateLimitLayer::new(Limiter::new(rules))
    }
}

impl<St> RateLimitLayer<St> {
    /// A layer deciding with `limiter` (any store).
    pub fn new(limiter: Limiter<St>) -> Self {
        RateLimitLayer {
            limiter,
            on_rejection: DefaultRejection,
        }
    }
}

impl<St, R> RateLimitLayer<St, R> {
    /// The limiter, e.g. to replace its rules.
    pub fn limiter(&self) -> &Limiter<St> {
        &self.limiter
    }

    /// Answers the requests the limits deny with what `hook` makes of them, instead of
    /// tollgate's own `429` (gRPC: `RESOURCE_EXHAUSTED`). The hook reads the request, the
    /// [`Verdict`](crate::Verdict) and the limit from [`Rejected`], and may start from
    /// [`Rejected::default_response`]. Requests a limit admits never reach it, and cost what
    /// they did.
    ///
    /// tollgate adds its rate-limit headers ([`Rejected::headers`]: `Retry-After`, the set
    /// the rules choose, a gRPC call's pushback) to the hook's response, each one the response
    /// does not set itself; a response carrying
    /// [`NoRateLimitHeaders`](super::NoRateLimitHeaders) in its extensions gets none.
    ///
    /// ```
    /// use axum::http::{header::CONTENT_TYPE, HeaderValue, Response, StatusCode};
    /// use bytes::Bytes;
    /// use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};
    /// use tollgate::RateLimitLayer;
    ///
    /// let rules = Rules::builder("api")
    ///     .descriptor(DescriptorSpec::key("remote_address").rate_limit(LimitSpec::per(10, Unit::Second)))
    ///     .build()?;
    /// let layer = RateLimitLayer::from_rules(rules).on_rejection(|rejected| {
    ///     if rejected.is_grpc() {
    ///         return rejected.default_response();
    ///     }
    ///     let limit = rejected.limit().label();
    ///     let mut response = Response::new(Bytes::from(format!("slow down ({limit})")));
    ///     *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    ///     let text = HeaderValue::from_static("text/plain; charset=utf-8");
    ///     response.headers_mut().insert(CONTENT_TYPE, text);
    ///     response
    /// });
    /// let app: axum::Router = axum::Router::new().layer(layer);
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn on_rejection<F, B>(self, hook: F) -> RateLimitLayer<St, F>
    where
        F: Fn(&Rejected<'_>) -> Response<B> + Clone + Send + Sync + 'static,
        B: Into<Bytes>,
    {
        RateLimitLayer {
            limiter: self.limiter,
            on_rejection: hook,
        }
    }
}

impl<S, St, R: OnRejection> Layer<S> for RateLimitLayer<St, R> {
    type Service = RateLimit<S, St, R>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::with_rejection(inner, self.limiter.clone(), self.on_rejection.clone())
    }
}
