//! A concurrency limit's decision on one request: whether a slot was free.

use crate::algorithm::Decision;
use std::time::Duration;

/// How long a request refused for want of a slot is told to wait (`Retry-After`,
/// `grpc-retry-pushback-ms`): the shortest the header can say. A slot frees when any of the
/// key's requests in flight ends, which no schedule foretells; most requests end within a
/// second, and a client that retries after it competes only with its own requests.
pub(crate) const SLOT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The decision of a concurrency limit of `max_in_flight` on a request that found `before`
/// requests of its key in flight and `took` a slot or not: admitted when a slot was free.
/// It holds nothing over time: no reset, nothing booked.
pub(crate) fn slot_decision(max_in_flight: u32, before: u32, took: bool) -> Decision {
    let allowed = before < max_in_flight;
    let in_flight = if took {
        before.saturating_add(1)
    } else {
        before
    };
    Decision {
        allowed,
        capacity: u64::from(max_in_flight),
        remaining: u64::from(max_in_flight.saturating_sub(in_flight)),
        reset_after: Duration::ZERO,
        retry_after: if allowed {
            Duration::ZERO
        } else {
            SLOT_RETRY_AFTER
        },
        delay: Duration::ZERO,
        booked_until: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_slot_admits_and_a_full_limit_refuses_for_a_second() {
        let admitted = slot_decision(3, 1, true);
        assert!(admitted.allowed);
        assert_eq!((admitted.capacity, admitted.remaining), (3, 1));
        let refused = slot_decision(3, 3, false);
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        assert_eq!(refused.retry_after, SLOT_RETRY_AFTER);
        // Shadow mode takes the slot anyway, and reports the would-be refusal.
        let shadow = slot_decision(3, 3, true);
        assert!(!shadow.allowed);
        assert_eq!(shadow.remaining, 0);
    }
}
