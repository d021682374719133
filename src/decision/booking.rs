//! A limit booked for one request: which limit, its state key, the request's weight.

use crate::algorithm::{Decision, Quota};
use crate::clock::Nanos;
use crate::rules::tree::StateKey;
use smallvec::SmallVec;
use std::ops::Range;

/// A limit that applies to a request: its state key and the request's weight under it.
#[derive(Debug, Clone)]
pub(crate) struct Booking {
    /// The limit's index in the rules' limits.
    pub(crate) limit_index: usize,
    pub(crate) key: StateKey,
    /// The bytes of `key` that make its hash tag (see [`LimitCheck::tag`](crate::store::LimitCheck::tag)).
    pub(crate) tag: Range<usize>,
    pub(crate) cost: u64,
    /// Whether the limit only reports: in shadow mode itself, or all limits are.
    pub(crate) shadow: bool,
    /// Whether the limit is only checked, never charged (see [`Weight::Checked`]).
    pub(crate) check_only: bool,
    /// The quota the call gave instead of the limit's (a rate limit service's descriptor
    /// with its own, [`LimitOverride`](crate::envoy::LimitOverride)); boxed, as the layer never
    /// has one.
    pub(crate) quota: Option<Box<Quota>>,
    /// The end of its place in a queue, once a shaping leaky bucket queued it.
    pub(crate) booked_until: Option<Nanos>,
    /// Whether its key starts from its state under the limits a reload replaced, when it
    /// has none (see [`LimitCheck::carried_from`](crate::store::LimitCheck::carried_from)):
    /// its limit replaced some lately.
    pub(crate) carries: bool,
    /// Whether it only checks another limit's block (`block_for`): reported when it refuses,
    /// never for its room.
    pub(crate) penalty: bool,
}

/// A request's weight under one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Weight {
    /// Charged when the request is admitted.
    Charged(u64),
    /// Decided as a request of this weight would be, with the other limits, and never
    /// charged: a rate limit service's descriptor of `hits_addend: 0`.
    Checked(u64),
}

/// How many limits of one request are kept without allocating: most requests meet one or two.
pub(crate) const INLINE_LIMITS: usize = 2;

/// The limits booked for one request, in the order the rules' walk met them.
pub(crate) type Bookings = SmallVec<[Booking; INLINE_LIMITS]>;

/// The bookings that hold queue places, boxed: only requests that a shaping leaky bucket
/// delays have any, and every other request should not carry their size from step to step.
pub(crate) type Queued = Option<Box<Bookings>>;

impl Booking {
    /// The bookings of an admitted request that hold queue places (their enforced shaping
    /// leaky buckets booked one, as `decisions` say, unless only checked), each with the end
    /// of its place, taken out of `bookings`.
    pub(crate) fn take_queued(bookings: &mut Bookings, decisions: &[Decision]) -> Queued {
        if !decisions.iter().any(|d| d.booked_until.is_some()) {
            return None;
        }
        let mut decisions = decisions.iter();
        bookings.retain(|booking| {
            booking.booked_until = decisions.next().and_then(|d| d.booked_until);
            booking.booked_until.is_some() && !booking.shadow && !booking.check_only
        });
        (!bookings.is_empty()).then(|| Box::new(std::mem::take(bookings)))
    }
}

#[cfg(test)]
impl Booking {
    /// A booking of the limit at `limit_index`, enforced or `shadow`, of weight 1.
    pub(crate) fn of_limit(limit_index: usize, shadow: bool) -> Booking {
        Booking {
            limit_index,
            key: StateKey::new(),
            tag: 0..0,
            cost: 1,
            shadow,
            check_only: false,
            quota: None,
            booked_until: None,
            carries: false,
            penalty: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn queued_until(booked_until: Option<Nanos>) -> Decision {
        Decision {
            allowed: true,
            capacity: 1,
            remaining: 0,
            reset_after: Duration::ZERO,
            retry_after: Duration::ZERO,
            delay: Duration::from_millis(1),
            booked_until,
        }
    }

    #[test]
    fn only_enforced_bookings_with_a_queue_place_are_taken() {
        let mut bookings: Bookings = [
            Booking::of_limit(0, false),
            Booking::of_limit(1, true),
            Booking::of_limit(2, false),
        ]
        .into_iter()
        .collect();
        let decisions = [
            queued_until(Some(Nanos::new(5))),
            queued_until(Some(Nanos::new(6))),
            queued_until(None),
        ];
        let queued = Booking::take_queued(&mut bookings, &decisions).expect("one place");
        assert_eq!(queued.len(), 1);
        assert_eq!(
            (queued[0].limit_index, queued[0].booked_until),
            (0, Some(Nanos::new(5)))
        );
    }

    #[test]
    fn a_request_that_booked_no_place_takes_nothing() {
        let mut bookings: Bookings = [Booking::of_limit(0, false)].into_iter().collect();
        assert!(Booking::take_queued(&mut bookings, &[queued_until(None)]).is_none());
        assert_eq!(bookings.len(), 1);
    }
}
