//! What an admitted request owes once its response is known: the charges of its limits
//! with `settle` or `count_when`, settled in the store when the response's head arrives
//! (made by [`Limiter`](crate::Limiter), carried with the request's slots).

use crate::algorithm::{Algorithm, Quota};
use crate::response::SettledCost;
use crate::rules::settlement::Said;
use crate::rules::tree::StateKey;
use crate::rules::Settlement;
use crate::store::LimitCheck;
use http::{Extensions, HeaderMap, StatusCode};
use smallvec::SmallVec;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// Settles one charge in the store, by its extra cost (negative: given back).
pub(crate) type Settle = Arc<dyn Fn(&LimitCheck<'_>, i64) + Send + Sync>;

/// The charges a request's response settles, and the store that settles them.
pub(crate) struct Owed {
    settle: Settle,
    charges: SmallVec<[Charge; 1]>,
}

/// One limit's charge of an admitted request: what the store was asked, and how the
/// response settles it.
pub(crate) struct Charge {
    pub(crate) domain: Arc<str>,
    pub(crate) key: StateKey,
    pub(crate) tag: Range<usize>,
    pub(crate) algorithm: Algorithm,
    pub(crate) quota: Quota,
    pub(crate) cost: u64,
    pub(crate) sync_every: Option<Duration>,
    pub(crate) label: Arc<str>,
    pub(crate) settlement: Settlement,
}

impl Owed {
    /// `charges`, settled by `settle`.
    pub(crate) fn new(settle: Settle, charges: SmallVec<[Charge; 1]>) -> Self {
        Owed { settle, charges }
    }

    /// Settles each charge whose cost the response's head says (its `status`, `headers`
    /// and `extensions`): the difference between what it says the request cost and what it
    /// was charged, charged or given back. A head that says nothing leaves the charge as it
    /// was; the charges said at the end of the body wait for [`Owed::settle_trailers`].
    /// Whether any does.
    pub(crate) fn settle_head(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
        extensions: &Extensions,
    ) -> bool {
        let said = extensions
            .get::<SettledCost>()
            .map(|&SettledCost(cost)| cost);
        let settle = &self.settle;
        self.charges.retain(|charge| {
            let cost = match charge
                .settlement
                .said_at_head(status, headers, said, charge.cost)
            {
                Said::AtEnd => return true,
                Said::Cost(cost) => Some(cost),
                Said::Nothing => None,
            };
            charge.settle(settle, cost);
            false
        });
        !self.charges.is_empty()
    }

    /// Settles the charges said at the end of the body, as its `trailers` say.
    pub(crate) fn settle_trailers(self, trailers: &HeaderMap) {
        for charge in &self.charges {
            let cost = charge.settlement.said_at_end(trailers, charge.cost);
            charge.settle(&self.settle, cost);
        }
    }
}

impl Charge {
    /// Settles this charge by `settle` to `cost`, when the response said it.
    fn settle(&self, settle: &Settle, cost: Option<u64>) {
        let Some(cost) = cost else {
            return;
        };
        let extra = i128::from(cost) - i128::from(self.cost);
        let extra = i64::try_from(extra).unwrap_or(if extra < 0 { i64::MIN } else { i64::MAX });
        if extra != 0 {
            settle(&self.check(), extra);
        }
    }

    /// The check the store settles.
    fn check(&self) -> LimitCheck<'_> {
        LimitCheck {
            domain: &self.domain,
            key: &self.key,
            tag: &self.key[self.tag.clone()],
            algorithm: self.algorithm,
            quota: &self.quota,
            cost: self.cost,
            shadow: false,
            check_only: false,
            sync_every: self.sync_every,
            limit: &self.label,
            approximate: None,
            carried_from: &[],
        }
    }
}
