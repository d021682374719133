//! One limit's own decision on a request, before all or nothing combined them.

use crate::algorithm::Decision;
use crate::rules::Rules;
use std::sync::Arc;

/// What one limit decided about a request, beside the [`Verdict`](crate::Verdict) on the
/// whole: from [`Limiter::peek`](crate::Limiter::peek), and for each descriptor of a rate
/// limit service's call ([`CallVerdict`](crate::envoy::CallVerdict)).
///
/// All or nothing: when one limit refuses a request, the others charge nothing for it, and
/// their decisions say what they would have done (`allowed`: they had room). A shadow-mode
/// limit's decision says what it would have done; it never refuses or delays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitDecision {
    limit: Arc<str>,
    limit_index: usize,
    shadow: bool,
    decision: Decision,
}

impl LimitDecision {
    /// The decision of the limit at `limit_index` of `rules`.
    pub(crate) fn new(rules: &Rules, limit_index: usize, shadow: bool, decision: Decision) -> Self {
        LimitDecision {
            limit: rules.limits[limit_index].shared_label().clone(),
            limit_index,
            shadow,
            decision,
        }
    }

    /// This limit's decision, said to be `decision` instead.
    pub(crate) fn with_decision(self, decision: Decision) -> Self {
        LimitDecision { decision, ..self }
    }

    /// This limit's decision on a key whose block (`block_for`) is in force and refused it,
    /// as `block` decided: refused until the block ends, whatever the limit's own count.
    pub(crate) fn blocked(&self, block: &Decision) -> Self {
        LimitDecision {
            decision: Decision {
                allowed: false,
                remaining: 0,
                reset_after: self.decision.reset_after.max(block.reset_after),
                retry_after: block.retry_after,
                ..self.decision
            },
            ..self.clone()
        }
    }

    /// The limit's [label](crate::rules::Limit::label).
    pub fn limit(&self) -> &str {
        &self.limit
    }

    /// The limit's index in [`Rules::limits`](crate::rules::Rules::limits) of the rules
    /// the request was decided under; past their end for a rate limit service's
    /// descriptor that brought its own quota ([`LimitOverride`](crate::envoy::LimitOverride)).
    /// For `tollgate simulate`, outside the API's promise: name a limit by
    /// [`CallVerdict::limit_of`](crate::envoy::CallVerdict::limit_of).
    #[doc(hidden)]
    pub fn limit_index(&self) -> usize {
        self.limit_index
    }

    /// Whether the limit only counts and reports (shadow mode).
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The limit's decision.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }
}
