//! The outcome for one request, as users of [`Limiter::check`](crate::Limiter::check) see it.

use super::ruling::Ruling;
use crate::algorithm::Decision;
use crate::rules::Rules;
use std::sync::Arc;
use std::time::Duration;

/// The outcome for one request: admitted or not, and the limit and decision its headers
/// report.
///
/// ```
/// use tollgate::{Denial, Limiter};
/// use tollgate::rules::Rules;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let rules = Rules::from_yaml(r#"
/// domain: jobs
/// sources: { tenant: { header: x-tenant } }
/// descriptors:
///   - key: tenant
///     rate_limit: { unit: minute, requests_per_unit: 1, name: per_tenant }
/// "#)?;
/// let limiter = Limiter::new(rules);
/// let first = limiter.check(&[("tenant", "acme")], 1).await;
/// assert!(first.is_allowed());
/// let second = limiter.check(&[("tenant", "acme")], 1).await;
/// assert_eq!(second.denial(), Some(Denial::OverLimit));
/// assert_eq!(second.limit(), Some("per_tenant"));
/// assert!(second.decision().is_some_and(|d| d.retry_after.as_secs() <= 60));
/// # Ok::<(), tollgate::rules::RuleErrors>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    ruling: Ruling,
    /// The label of the reported limit: its index in `ruling` is valid only under the rules
    /// it was made under, which a reload may since have replaced.
    limit: Option<Arc<str>>,
}

/// Why a request was denied ([`Verdict::denial`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Denial {
    /// A limit had no room for it.
    OverLimit,
    /// The store failed to decide, and the limit's `on_store_error` is `deny`.
    StoreError,
    /// The server was full for the request's priority: `load_shedding` turned it away.
    Shed,
}

impl Verdict {
    /// The verdict of `ruling`, made under `rules`.
    pub(crate) fn new(ruling: Ruling, rules: &Rules) -> Self {
        let limit = ruling
            .reported()
            .map(|(index, _)| Arc::clone(rules.limits[index].shared_label()));
        Verdict { ruling, limit }
    }

    /// Whether the request is admitted.
    pub fn is_allowed(&self) -> bool {
        self.ruling.is_allowed()
    }

    /// Why the request is denied: over a limit, or because the store failed; `None` when it
    /// is admitted.
    pub fn denial(&self) -> Option<Denial> {
        self.ruling.denial()
    }

    /// How long an admitted request waits for its turn in a shaping leaky bucket before it
    /// goes ahead; zero for most requests.
    pub fn delay(&self) -> Duration {
        self.ruling.delay()
    }

    /// The label ([`Limit::label`](crate::rules::Limit::label)) of the limit that
    /// [`Verdict::decision`] belongs to: its `name`, else its descriptor path.
    pub fn limit(&self) -> Option<&str> {
        self.limit.as_deref()
    }

    /// The decision to report: when admitted, the enforced limit with the least room left;
    /// when denied, the denying limit that frees up last. `None` when no enforced limit applied.
    pub fn decision(&self) -> Option<&Decision> {
        self.ruling.reported().map(|(_, decision)| decision)
    }

    /// Whether a shadow-mode limit would have denied the request (over the limit, or because
    /// the store failed and its `on_store_error` is `deny`).
    pub fn is_shadow_denied(&self) -> bool {
        self.ruling.is_shadow_denied()
    }
}
