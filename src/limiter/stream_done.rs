//! Charges a rate limit service's client sends once a request's stream is done (Envoy's
//! `apply_on_stream_done`, the limits with `settle: { stream_done: true }`): kept whole
//! whatever the call's answer, past the limit if need be.

use super::active::Active;
use super::decide::checks;
use super::Limiter;
use crate::decision::{Booking, LimitDecision};
use crate::rules::Settlement;
use crate::store::Store;

impl<St: Store> Limiter<St> {
    /// Charges, past their limits if need be, the charges of `stream_done` limits among
    /// `bookings` that the call did not charge (`each`: their decisions, in order, but for
    /// block checks; `admitted`: whether the store admitted the call, charging what it
    /// allowed). A store that fails leaves them uncharged.
    pub(super) async fn keep_stream_done_charges(
        &self,
        active: &Active,
        bookings: &[Booking],
        each: &[Option<LimitDecision>],
        admitted: bool,
    ) {
        let limits = bookings.iter().filter(|booking| !booking.penalty);
        if limits.clone().count() != each.len() {
            return;
        }
        let rules = &*active.rules;
        let uncharged: Vec<Booking> = limits
            .zip(each)
            .filter(|(booking, decision)| {
                let limit = &rules.limits[booking.limit_index];
                let charged = admitted && decision.as_ref().is_some_and(|d| d.decision().allowed);
                limit.settlement == Some(Settlement::StreamDone)
                    && !booking.check_only
                    && !limit.is_shadow()
                    && !charged
            })
            .map(|(booking, _)| booking.clone())
            .collect();
        for check in checks(active, &uncharged) {
            let extra = i64::try_from(check.cost).unwrap_or(i64::MAX);
            if let Err(error) = self.store().settle(&check, extra).await {
                tracing::debug!(%error, limit = check.limit, "a charge could not be kept");
            }
        }
    }
}
