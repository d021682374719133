//! Quotas (`quota_mode`, envoyproxy/ratelimit's): a rate limit service's call is refused by
//! its quotas only when every quota it reaches is over. Each is booked as a shadow limit
//! (alone, it refuses nothing), then ruled on here, once the store has decided.

use super::active::Active;
use super::decide::checks;
use super::Limiter;
use crate::decision::{Booking, LimitDecision, Ruling};
use crate::rules::{Rules, Settlement};
use crate::store::Store;

impl<St: Store> Limiter<St> {
    /// The refusal of a call the store admitted, `bookings` its limits (`each`: their
    /// decisions, in order, but for block checks), when it reached quotas and every one is
    /// over; what the call charged is given back first, and `each` says what remains as it
    /// stands. `None` when the call stands.
    pub(super) async fn over_every_quota(
        &self,
        active: &Active,
        bookings: &[Booking],
        each: &mut [Option<LimitDecision>],
    ) -> Option<Ruling> {
        let rules = &*active.rules;
        let limits: Vec<&Booking> = bookings.iter().filter(|b| !b.penalty).collect();
        if limits.len() != each.len() {
            return None;
        }
        let mut over = None;
        for (booking, decision) in limits.iter().zip(each.iter()) {
            let Some(decision) = decision.as_ref().filter(|_| self.is_quota(rules, booking)) else {
                continue;
            };
            if decision.decision().allowed {
                return None;
            }
            over = Some((booking.limit_index, *decision.decision()));
        }
        let (limit, decision) = over?;
        let mut charged = Vec::new();
        for (booking, decision) in limits.iter().zip(each.iter_mut()) {
            let Some(limit_decision) = decision.as_mut() else {
                continue;
            };
            // A charge sent after the fact is kept whatever the answer (`stream_done`).
            let kept = rules.limits[booking.limit_index].settlement == Some(Settlement::StreamDone);
            if limit_decision.decision().allowed && !booking.check_only && !kept {
                let uncharged = limit_decision.decision().uncharged(booking.cost);
                *limit_decision = limit_decision.clone().with_decision(uncharged);
                charged.push((*booking).clone());
            }
        }
        for (check, booking) in checks(active, &charged).iter().zip(&charged) {
            let back = -i64::try_from(booking.cost).unwrap_or(i64::MAX);
            if let Err(error) = self.store().settle(check, back).await {
                tracing::debug!(%error, limit = check.limit, "a charge could not be given back");
            }
        }
        Some(Ruling::over_quota(limit, decision))
    }

    /// Whether `booking` is a quota's that counts: its limit a quota, not in shadow mode.
    fn is_quota(&self, rules: &Rules, booking: &Booking) -> bool {
        let limit = &rules.limits[booking.limit_index];
        limit.is_quota() && !limit.is_shadow() && !rules.shadow_mode() && !self.shadow_mode()
    }
}
