//! How the decisions of the limits of one request combine into one outcome.

use super::booking::Booking;
use super::verdict::Denial;
use crate::algorithm::Decision;
use std::time::Duration;

/// What the concurrency limits of a request made of it, when each took its slot: the limit
/// to report if no rate limit is (the first enforced one with the least room), and whether
/// a shadow-mode one would have refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotRuling {
    pub(crate) reported: Option<(usize, Decision)>,
    pub(crate) shadow_denied: bool,
}

impl SlotRuling {
    /// The ruling of a request that took no slot.
    pub(crate) const NONE: SlotRuling = SlotRuling {
        reported: None,
        shadow_denied: false,
    };
}

/// The outcome for one request under one snapshot of the rules: admitted or not, and the
/// decision its headers report, with the index of its limit in that snapshot's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ruling {
    /// Why the request is denied; `None` when it is admitted.
    denial: Option<Denial>,
    reported: Option<(usize, Decision)>,
    delay: Duration,
    shadow_denied: bool,
}

impl Ruling {
    /// The ruling on a request that no enforced limit applies to.
    pub(crate) fn unlimited() -> Self {
        Ruling {
            denial: None,
            reported: None,
            delay: Duration::ZERO,
            shadow_denied: false,
        }
    }

    /// The ruling on `bookings` given one decision each, in one pass over them. Reported:
    /// when admitted, the first of the enforced limits with the least room left; when
    /// denied, the last of the denying limits that free up last.
    #[inline]
    pub(crate) fn of(bookings: &[Booking], decisions: &[Decision]) -> Self {
        let mut ruling = Ruling::unlimited();
        let mut least_room: Option<(usize, &Decision)> = None;
        let mut last_freed: Option<(usize, &Decision)> = None;
        for (booking, decision) in bookings.iter().zip(decisions) {
            if booking.shadow {
                ruling.shadow_denied |= !decision.allowed;
            } else if decision.allowed && booking.penalty {
                // A block not in force has no room to report.
            } else if decision.allowed {
                ruling.delay = ruling.delay.max(decision.delay);
                let room = |d: &Decision| (d.remaining, d.capacity);
                if least_room.is_none_or(|(_, least)| room(decision) < room(least)) {
                    least_room = Some((booking.limit_index, decision));
                }
            } else if last_freed.is_none_or(|(_, last)| decision.retry_after >= last.retry_after) {
                last_freed = Some((booking.limit_index, decision));
            }
        }
        if last_freed.is_some() {
            ruling.denial = Some(Denial::OverLimit);
            ruling.delay = Duration::ZERO;
        }
        ruling.reported = last_freed
            .or(least_room)
            .map(|(limit, decision)| (limit, *decision));
        ruling
    }

    /// A denial by the concurrency limit `limit`, whose slot `decision` refused the request
    /// (see [`crate::concurrency`]): no rate limit was asked.
    pub(crate) fn refused_by_slot(limit: usize, decision: Decision, shadow_denied: bool) -> Self {
        Ruling {
            denial: Some(Denial::OverLimit),
            reported: Some((limit, decision)),
            delay: Duration::ZERO,
            shadow_denied,
        }
    }

    /// A rate limit service's call refused because every quota it reached is over, the
    /// quota `limit` reported with its `decision` (see `Limiter::check_descriptors`).
    pub(crate) fn over_quota(limit: usize, decision: Decision) -> Self {
        Ruling {
            denial: Some(Denial::OverLimit),
            reported: Some((limit, decision)),
            delay: Duration::ZERO,
            shadow_denied: false,
        }
    }

    /// A request the load shedder (limit `limit`) turned away: its `decision` had no room.
    pub(crate) fn shed(limit: usize, decision: Decision, shadow_denied: bool) -> Self {
        Ruling {
            denial: Some(Denial::Shed),
            reported: Some((limit, decision)),
            delay: Duration::ZERO,
            shadow_denied,
        }
    }

    /// This ruling on a request's rate limits, with what its concurrency limits made of it
    /// (all of them took its slot): a shadow one's would-be denial, and the slot reported
    /// when no rate limit is.
    pub(crate) fn with_slots(mut self, slots: &SlotRuling) -> Self {
        self.shadow_denied |= slots.shadow_denied;
        if self.reported.is_none() && self.denial.is_none() {
            self.reported = slots.reported;
        }
        self
    }

    /// A denial because the store failed, reported as limit `limit`'s `decision`.
    pub(crate) fn store_denied(limit: usize, decision: Decision) -> Self {
        Ruling {
            denial: Some(Denial::StoreError),
            reported: Some((limit, decision)),
            delay: Duration::ZERO,
            shadow_denied: false,
        }
    }

    /// This ruling, also marked as one that a shadow-mode limit would have denied when
    /// `shadow_denied`.
    pub(crate) fn with_shadow_denied(mut self, shadow_denied: bool) -> Self {
        self.shadow_denied |= shadow_denied;
        self
    }

    /// This refusal, which starts a block of `duration` (`block_for`): its reported
    /// decision says to retry no sooner than the block ends.
    pub(crate) fn blocked_for(mut self, duration: Duration) -> Self {
        if let Some((_, decision)) = &mut self.reported {
            decision.retry_after = decision.retry_after.max(duration);
            decision.reset_after = decision.reset_after.max(duration);
            decision.remaining = 0;
        }
        self
    }

    /// This ruling, its decision said to allow `capacity` when the limit `limit` reports it.
    pub(crate) fn with_capacity_of(mut self, limit: usize, capacity: u64) -> Self {
        if let Some((reported, decision)) = &mut self.reported {
            if *reported == limit {
                decision.capacity = capacity;
            }
        }
        self
    }

    /// Whether the request is admitted.
    pub(crate) fn is_allowed(&self) -> bool {
        self.denial.is_none()
    }

    /// Why the request is denied; `None` when it is admitted.
    pub(crate) fn denial(&self) -> Option<Denial> {
        self.denial
    }

    /// How long an admitted request waits for its turn in a shaping leaky bucket.
    pub(crate) fn delay(&self) -> Duration {
        self.delay
    }

    /// Whether a shadow-mode limit would have denied the request.
    pub(crate) fn is_shadow_denied(&self) -> bool {
        self.shadow_denied
    }

    /// The limit to report, by index in the rules the ruling was made under, and its
    /// decision. `None` when no enforced limit applied.
    pub(crate) fn reported(&self) -> Option<(usize, &Decision)> {
        self.reported
            .as_ref()
            .map(|(index, decision)| (*index, decision))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decision with `remaining` left of `capacity`, waiting `wait` seconds to admit the
    /// next request (denied when `remaining` is 0 and `wait` is not) after `delay` ms in a queue.
    fn decision(remaining: u64, capacity: u64, wait: u64, delay: u64) -> Decision {
        Decision {
            allowed: remaining > 0 || wait == 0,
            capacity,
            remaining,
            reset_after: Duration::from_secs(60),
            retry_after: Duration::from_secs(wait),
            delay: Duration::from_millis(delay),
            booked_until: None,
        }
    }

    fn reported_limit(ruling: &Ruling) -> Option<usize> {
        ruling.reported().map(|(index, _)| index)
    }

    #[test]
    fn the_ruling_reports_the_least_room_when_admitted_and_the_last_to_free_up_when_denied() {
        let enforced = [
            Booking::of_limit(0, false),
            Booking::of_limit(1, false),
            Booking::of_limit(2, false),
        ];
        // Admitted: the least room left, the smaller limit on a tie, the first on a full tie;
        // the longest queue delay of them all.
        let admitted = Ruling::of(
            &enforced,
            &[
                decision(3, 10, 0, 5),
                decision(3, 5, 0, 20),
                decision(3, 5, 0, 0),
            ],
        );
        assert!(admitted.is_allowed());
        assert_eq!(reported_limit(&admitted), Some(1));
        assert_eq!(admitted.delay(), Duration::from_millis(20));
        // Denied: of the denying limits, the one that frees up last, the last on a tie; no
        // delay, whatever the admitting limits queued.
        let denied = Ruling::of(
            &enforced,
            &[
                decision(0, 5, 30, 0),
                decision(2, 5, 0, 20),
                decision(0, 5, 30, 0),
            ],
        );
        assert_eq!(denied.denial(), Some(Denial::OverLimit));
        assert_eq!(reported_limit(&denied), Some(2));
        assert_eq!(denied.delay(), Duration::ZERO);
        let longest = Ruling::of(
            &enforced,
            &[
                decision(0, 5, 30, 0),
                decision(0, 5, 40, 0),
                decision(0, 5, 10, 0),
            ],
        );
        assert_eq!(reported_limit(&longest), Some(1));
        // A shadow limit neither denies nor is reported, but is seen to have denied.
        let shadowed = Ruling::of(
            &[Booking::of_limit(0, true), Booking::of_limit(1, false)],
            &[decision(0, 1, 30, 0), decision(4, 5, 0, 0)],
        );
        assert!(shadowed.is_allowed() && shadowed.is_shadow_denied());
        assert_eq!(reported_limit(&shadowed), Some(1));
    }
}
