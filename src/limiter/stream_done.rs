//! Charges a rate limit service's client sends once a request's stream is done (Envoy's
//! `apply_on_stream_done`, the limits with `settle: { stream_done: true }`): kept whole
//! whatever the call's answer, past the limit if need be.

use super::active::Active;
use super::decide::checks;
use super::Limiter;
use crate::decision::{Booking, Bookings};
use crate::rules::{Rules, Settlement};
use crate::store::Store;

impl<St: Store> Limiter<St> {
    /// The bookings of `bookings` that charge a `stream_done` limit: charged even when the
    /// call is refused.
    pub(super) fn charged_whatever(rules: &Rules, bookings: &[Booking]) -> Bookings {
        bookings
            .iter()
            .filter(|booking| !booking.shadow && !booking.check_only && !booking.penalty)
            .filter(|booking| {
                rules.limits[booking.limit_index].settlement == Some(Settlement::StreamDone)
            })
            .cloned()
            .collect()
    }

    /// Charges `bookings`, of a call refused (which charged none of them), past their
    /// limits if need be; a store that fails leaves them uncharged.
    pub(super) async fn charge_refused(&self, active: &Active, bookings: &[Booking]) {
        for check in checks(active, bookings) {
            let extra = i64::try_from(check.cost).unwrap_or(i64::MAX);
            if let Err(error) = self.store().settle(&check, extra).await {
                tracing::debug!(%error, limit = check.limit, "a charge could not be kept");
            }
        }
    }
}
