//! A descriptor's own quota, which a rate limit service's call may bring instead of what
//! the rules say of it.

use super::Unit;
use crate::algorithm::Quota;

/// A descriptor's own quota (Envoy's `limit` override, which the gateway sets from, say,
/// a tenant's plan): the descriptor is limited to `requests_per_unit` per `unit` alone,
/// as envoyproxy/ratelimit limits it, whatever entry of the rules it reaches (its
/// `unlimited`, `replaces` and `shadow_mode` included). Its state is kept per distinct
/// entries and unit (a fixed window, the default, counts calls of another
/// `requests_per_unit` in the same window; other algorithms may keep them apart).
///
/// It is decided by the rules' default algorithm (`defaults.algorithm`, a fixed window
/// unless it says otherwise, with a burst of `requests_per_unit`) and `on_store_error`,
/// exactly (no `sync_every`, no `approximate`), all or nothing with the call's other
/// descriptors. Its decision's [`limit`](crate::LimitDecision::limit) is `override per UNIT`.
/// Only rules compiled with [`KeySources::Given`](crate::rules::KeySources::Given) take
/// it; others ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitOverride {
    /// The requests admitted per unit.
    pub requests_per_unit: u64,
    /// The unit.
    pub unit: Unit,
}

impl LimitOverride {
    /// The quota: `requests_per_unit` per `unit`, with a burst of as many.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::rules::Unit;
    /// use tollgate::envoy::LimitOverride;
    ///
    /// let own = LimitOverride { requests_per_unit: 10, unit: Unit::Minute };
    /// assert_eq!(own.quota().period(), Duration::from_secs(60));
    /// ```
    pub fn quota(self) -> Quota {
        Quota::new(self.requests_per_unit, self.unit.period())
            .expect("a unit is a period a quota takes")
    }
}
