//! Making what an admitted request owes once its response is known (see [`crate::owed`]).

use super::Limiter;
use crate::decision::Booking;
use crate::owed::{Charge, Owed};
use crate::rules::Rules;
use crate::store::{LimitCheck, Store};
use smallvec::SmallVec;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

impl<St: Store> Limiter<St> {
    /// What a request that `bookings` charge under `rules` will owe when admitted: the
    /// charges of its enforced limits that settle (`None` when none does).
    pub(super) fn owed(&self, rules: &Rules, bookings: &[Booking]) -> Option<Owed> {
        let domain: Arc<str> = Arc::from(rules.domain());
        let charges: SmallVec<[Charge; 1]> = bookings
            .iter()
            .filter(|booking| !booking.shadow && !booking.check_only && !booking.penalty)
            .filter_map(|booking| {
                let limit = &rules.limits[booking.limit_index];
                let settlement = limit.settlement.clone()?;
                let (algorithm, quota) = limit.limited()?;
                Some(Charge {
                    domain: Arc::clone(&domain),
                    key: booking.key.clone(),
                    tag: booking.tag.clone(),
                    algorithm,
                    quota: *quota,
                    cost: booking.cost,
                    sync_every: limit.sync_every(),
                    label: Arc::clone(limit.shared_label()),
                    settlement,
                })
            })
            .collect();
        if charges.is_empty() {
            return None;
        }
        let limiter = self.clone();
        let settle =
            Arc::new(move |check: &LimitCheck<'_>, extra| limiter.settle_charge(check, extra));
        Some(Owed::new(settle, charges))
    }

    /// Settles `check`'s charge by `extra` in the store: at once when it answers at once,
    /// else in a task on the settling thread's runtime, which ends with the store's answer
    /// (a store that fails, or no runtime, keeps the charge as it was).
    fn settle_charge(&self, check: &LimitCheck<'_>, extra: i64) {
        let mut settling = self.store().settle(check, extra);
        let mut context = Context::from_waker(Waker::noop());
        if let Poll::Ready(result) = settling.as_mut().poll(&mut context) {
            if let Err(error) = result {
                tracing::debug!(%error, limit = check.limit, "a cost could not be settled");
            }
            return;
        }
        let limit = check.limit.to_owned();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(error) = settling.await {
                        tracing::debug!(%error, limit, "a cost could not be settled");
                    }
                });
            }
            Err(_) => tracing::debug!(limit, "a cost could not be settled: no runtime"),
        }
    }
}
