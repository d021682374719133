//! What an admitted request owes once its response is known: the charges of its limits
//! with `settle` or `count_when`, settled in the store when the response's head arrives
//! (made by [`Limiter`](crate::Limiter), carried with the request's slots).

use crate::algorithm::{Algorithm, Quota};
use crate::response::SettledCost;
use crate::rules::tree::StateKey;
use crate::rules::Settlement;
use crate::store::LimitCheck;
use http::{Extensions, HeaderMap, StatusCode};
use smallvec::SmallVec;
use std::ops::Range;
use std::sync::Arc;

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
    pub(crate) label: Arc<str>,
    pub(crate) settlement: Settlement,
}

impl Owed {
    /// `charges`, settled by `settle`.
    pub(crate) fn new(settle: Settle, charges: SmallVec<[Charge; 1]>) -> Self {
        Owed { settle, charges }
    }

    /// Settles each charge as the response (its `status`, `headers` and `extensions`)
    /// says: the difference between what it says the request cost and what it was charged,
    /// charged or given back. A response that says nothing leaves the charge as it was.
    pub(crate) fn settle(self, status: StatusCode, headers: &HeaderMap, extensions: &Extensions) {
        let said = extensions
            .get::<SettledCost>()
            .map(|&SettledCost(cost)| cost);
        for charge in &self.charges {
            let Some(cost) = charge.settlement.cost(status, headers, said, charge.cost) else {
                continue;
            };
            let extra = i128::from(cost) - i128::from(charge.cost);
            let extra = i64::try_from(extra).unwrap_or(if extra < 0 { i64::MIN } else { i64::MAX });
            if extra != 0 {
                (self.settle)(&charge.check(), extra);
            }
        }
    }
}

impl Charge {
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
            sync_every: None,
            limit: &self.label,
            approximate: None,
            carried_from: &[],
        }
    }
}
