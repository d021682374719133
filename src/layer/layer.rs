use super::RateLimit;
use crate::rules::{RuleErrors, Rules};
use crate::store::MemoryStore;
use crate::Limiter;
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
#[derive(Debug)]
pub struct RateLimitLayer<St = MemoryStore> {
    limiter: Limiter<St>,
}

impl<St> Clone for RateLimitLayer<St> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            limiter: self.limiter.clone(),
        }
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
        RateLimitLayer { limiter }
    }

    /// The limiter, e.g. to replace its rules.
    pub fn limiter(&self) -> &Limiter<St> {
        &self.limiter
    }
}

impl<S, St> Layer<S> for RateLimitLayer<St> {
    type Service = RateLimit<S, St>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::new(inner, self.limiter.clone())
    }
}
