//! The store-failure policy: what each limit's `on_store_error` makes of a request that the
//! store could not decide.

use super::booking::{Booking, Bookings, INLINE_LIMITS};
use super::ruling::Ruling;
use crate::algorithm::Decision;
use crate::rules::{OnStoreError, Rules};
use smallvec::SmallVec;
use std::time::Duration;

/// What a client that was denied because the store failed is told to wait.
pub(crate) const STORE_ERROR_RETRY: Duration = Duration::from_secs(1);

/// What a limit's `on_store_error` policy makes of a request the store could not decide:
/// the one reading of the policy, for the ruling and for what is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreFailure {
    /// Admitted, charged nothing: `allow`, or `local` when a `deny` limit refuses the request
    /// anyway.
    Admitted,
    /// Refused (`deny`).
    Denied,
    /// Would have been refused (`deny` in shadow mode).
    ShadowDenied,
    /// Decided by the in-memory fallback store (`local`).
    Local,
}

impl StoreFailure {
    /// The outcome under `policy` of a limit (`shadow` when it only reports), `closed` when an
    /// enforced `deny` limit refuses the request.
    fn of(policy: OnStoreError, shadow: bool, closed: bool) -> StoreFailure {
        match policy {
            OnStoreError::Allow => StoreFailure::Admitted,
            OnStoreError::Deny if shadow => StoreFailure::ShadowDenied,
            OnStoreError::Deny => StoreFailure::Denied,
            OnStoreError::Local if closed => StoreFailure::Admitted,
            OnStoreError::Local => StoreFailure::Local,
        }
    }
}

/// The outcome of each booking of a request that the store could not decide, in order.
#[derive(Debug)]
pub(crate) struct StoreFailures {
    outcomes: SmallVec<[StoreFailure; INLINE_LIMITS]>,
}

impl StoreFailures {
    /// The outcomes of `bookings` under the policies of their limits in `rules`.
    pub(crate) fn of(rules: &Rules, bookings: &[Booking]) -> Self {
        let policy = |booking: &Booking| rules.limits[booking.limit_index].on_store_error();
        let closed = bookings
            .iter()
            .any(|b| !b.shadow && policy(b) == OnStoreError::Deny);
        StoreFailures {
            outcomes: bookings
                .iter()
                .map(|b| StoreFailure::of(policy(b), b.shadow, closed))
                .collect(),
        }
    }

    /// One outcome per booking, in order.
    pub(crate) fn outcomes(&self) -> &[StoreFailure] {
        &self.outcomes
    }

    /// Whether a shadow-mode `deny` limit would have refused the request.
    pub(crate) fn shadow_denied(&self) -> bool {
        self.outcomes.contains(&StoreFailure::ShadowDenied)
    }

    /// The ruling when an enforced `deny` limit refuses the request: reported as the first
    /// such limit, with nothing remaining and a short wait.
    pub(crate) fn denial(&self, rules: &Rules, bookings: &[Booking]) -> Option<Ruling> {
        let denying = self.with(bookings, StoreFailure::Denied).next()?;
        let limit = denying.limit_index;
        let quota = denying.quota.as_deref().copied();
        let quota = quota.or_else(|| rules.limits[limit].quota());
        let decision = Decision {
            allowed: false,
            capacity: quota.map_or(0, |quota| quota.requests_per_period()),
            remaining: 0,
            reset_after: STORE_ERROR_RETRY,
            retry_after: STORE_ERROR_RETRY,
            delay: Duration::ZERO,
            booked_until: None,
        };
        Some(Ruling::store_denied(limit, decision).with_shadow_denied(self.shadow_denied()))
    }

    /// The bookings that the in-memory fallback decides (`local`).
    pub(crate) fn local(&self, bookings: &[Booking]) -> Bookings {
        self.with(bookings, StoreFailure::Local).cloned().collect()
    }

    fn with<'b>(
        &'b self,
        bookings: &'b [Booking],
        wanted: StoreFailure,
    ) -> impl Iterator<Item = &'b Booking> + 'b {
        bookings
            .iter()
            .zip(&self.outcomes)
            .filter(move |(_, &outcome)| outcome == wanted)
            .map(|(booking, _)| booking)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_limits_are_admitted_uncharged_when_a_deny_limit_refuses_anyway() {
        use OnStoreError::{Allow, Deny, Local};
        assert_eq!(StoreFailure::of(Local, false, false), StoreFailure::Local);
        assert_eq!(StoreFailure::of(Local, false, true), StoreFailure::Admitted);
        assert_eq!(
            StoreFailure::of(Deny, true, true),
            StoreFailure::ShadowDenied
        );
        assert_eq!(StoreFailure::of(Deny, false, true), StoreFailure::Denied);
        assert_eq!(StoreFailure::of(Allow, false, true), StoreFailure::Admitted);
    }
}
