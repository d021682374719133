//! The rate-limit headers of an answer, for callers that answer for someone else.

use super::headers::headers;
use super::rejection::rejection_headers;
use crate::decision::Verdict;
use crate::rules::Rules;
use http::HeaderMap;

/// The rate-limit headers the layer gives the answer to a request that `verdict`, made
/// under `rules`, decided: an admitted request's (as `response.headers` chooses), or a
/// refused one's (`Retry-After` and the chosen set); none when no limit applied. For a
/// service that answers a proxy, which adds them to its own answer (`tollgate serve`).
///
/// ```
/// use tollgate::response::verdict_headers;
/// use tollgate::{rules::Rules, Limiter};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let rules = Rules::from_yaml(r#"
/// domain: api
/// sources:
///   user: { header: x-user }
/// descriptors:
///   - key: user
///     rate_limit: { unit: minute, requests_per_unit: 1, algorithm: gcra }
/// "#)?;
/// let limiter = Limiter::new(rules);
/// limiter.check(&[("user", "42")], 1).await;
/// let verdict = limiter.check(&[("user", "42")], 1).await;
/// let headers = verdict_headers(&limiter.rules(), &verdict);
/// assert_eq!(headers["retry-after"], "60");
/// assert_eq!(headers["x-ratelimit-remaining"], "0");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// For the `tollgate` command, outside the API's semver promise.
#[doc(hidden)]
pub fn verdict_headers(rules: &Rules, verdict: &Verdict) -> HeaderMap {
    let mut map = HeaderMap::new();
    let (Some(label), Some(decision)) = (verdict.limit(), verdict.decision()) else {
        return map;
    };
    let Some(limit) = rules.limits.iter().find(|limit| limit.label() == label) else {
        return map;
    };
    let options = rules.response();
    if decision.allowed {
        headers(limit, decision, options).write_to(&mut map);
        return map;
    }
    rejection_headers(limit, decision, options, false)
}
