//! The local over-limit cache: keys Redis reported full, denied here until they free up
//! (asking Redis again every second).

use crate::algorithm::Decision;
use crate::clock::{saturating_nanos, Nanos};
use crate::store::{Decisions, LimitCheck};
use hashbrown::{DefaultHashBuilder, HashMap};
use std::hash::BuildHasher;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Remembers, per key, that a request of at least some cost is denied until a time Redis
/// gave. While that holds, a request with such a key is denied without a round trip: the
/// state can only free up by then, never sooner (other servers only add to it).
#[derive(Debug)]
pub(super) struct Denials {
    hasher: DefaultHashBuilder,
    entries: Mutex<HashMap<u64, Denial>>,
    capacity: usize,
}

#[derive(Debug, Clone, Copy)]
struct Denial {
    /// The smallest cost known to be denied.
    cost: u64,
    capacity: u64,
    retry_at: Nanos,
    reset_at: Nanos,
    /// Until when this entry answers: the retry time, or [`ASK_AGAIN_AFTER`] from the
    /// denial, whichever is sooner.
    answers_until: Nanos,
}

/// The longest a cached denial answers before Redis is asked again: what changed in Redis
/// meanwhile (a client reset from another server, a charge given back) is seen within it,
/// and a flood of refused requests still costs one call a second per key.
const ASK_AGAIN_AFTER: Duration = Duration::from_secs(1);

impl Denials {
    pub(super) fn new(capacity: usize) -> Self {
        Denials {
            hasher: DefaultHashBuilder::default(),
            entries: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    /// The entry of `check`'s key under its quota: a rate limit service's call may bring
    /// another quota for the same key, whose denials are its own.
    fn id(&self, check: &LimitCheck<'_>) -> u64 {
        let quota = (
            check.quota.requests_per_period(),
            check.quota.period_nanos(),
        );
        self.hasher.hash_one((check.domain, check.key, quota))
    }

    /// Decisions for `checks` if each is enforced and known to be denied at `now`; else
    /// Redis is asked, so that each limit's decision says what remains of it.
    pub(super) fn answer(&self, checks: &[LimitCheck<'_>], now: Nanos) -> Option<Decisions> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.is_empty() {
            return None;
        }
        let denied: Vec<Option<Denial>> = checks
            .iter()
            .map(|check| {
                let denial = entries.get(&self.id(check))?;
                (!check.shadow && check.cost >= denial.cost && denial.answers_until > now)
                    .then_some(*denial)
            })
            .collect();
        denied
            .into_iter()
            .map(|denial| {
                denial.map(|denial| Decision {
                    allowed: false,
                    capacity: denial.capacity,
                    remaining: 0,
                    reset_after: denial.reset_at.since(now),
                    retry_after: denial.retry_at.since(now),
                    delay: Duration::ZERO,
                    booked_until: None,
                })
            })
            .collect()
    }

    /// Forgets what is known of `check`'s key (its queue just gave a place back).
    pub(super) fn forget(&self, check: &LimitCheck<'_>) {
        let id = self.id(check);
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    /// Remembers the enforced checks that Redis denied at `now`.
    pub(super) fn record(&self, checks: &[LimitCheck<'_>], decisions: &Decisions, now: Nanos) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        for (check, decision) in checks.iter().zip(decisions) {
            if check.shadow || decision.allowed || decision.retry_after.is_zero() {
                continue;
            }
            if entries.len() >= self.capacity {
                entries.retain(|_, denial| denial.answers_until > now);
                if entries.len() >= self.capacity {
                    entries.clear();
                }
            }
            let retry_at = now.plus(saturating_nanos(decision.retry_after));
            let denial = Denial {
                cost: check.cost,
                capacity: decision.capacity,
                retry_at,
                reset_at: now.plus(saturating_nanos(decision.reset_after)),
                answers_until: retry_at.min(now.plus(saturating_nanos(ASK_AGAIN_AFTER))),
            };
            entries.insert(self.id(check), denial);
        }
    }
}
