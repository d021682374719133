//! One key of a table: its counts, its limit, where its fleet totals live, and where it
//! stands with the fleet.

use super::view::{share, Carried, Charge, Counts, Payload, Totals};
use super::Limit;
use crate::algorithm::Decision;
use crate::store::LimitCheck;
use std::sync::Arc;

/// One key, its counts `C` kept as its algorithm needs them.
pub(super) struct Entry<C, K> {
    /// The keyed hash of the key's domain and state key.
    pub(super) id: u64,
    /// The key's part of where its fleet totals live (its limit has the rest).
    pub(super) key: K,
    limit: Arc<Limit>,
    marks: Marks,
    counts: C,
}

/// When a key last synced, its [`Mark`]s and how much it was asked for lately, in one word
/// (an entry is a few words, and there may be a million): the fleet time of the sync in µs,
/// plus 1 (0: never), above the bits of the marks and of the uses.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Marks(u64);

/// What a key is in the middle of.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mark {
    /// In its shard's list of keys to send.
    Listed = 1,
    /// Sent; the fleet's answer is awaited.
    Sending = 2,
}

/// Uses are two bits above the marks: 0 to 3.
const USES_SHIFT: u32 = 2;
const MOST_USES: u64 = 3;
const LOW_BITS: u32 = 4;
const LOW: u64 = (1 << LOW_BITS) - 1;

impl Marks {
    pub(super) fn has(self, mark: Mark) -> bool {
        self.0 & mark as u64 != 0
    }

    pub(super) fn set(&mut self, mark: Mark, on: bool) {
        if on {
            self.0 |= mark as u64;
        } else {
            self.0 &= !(mark as u64);
        }
    }

    /// How much the key was asked for lately, 0 to 3: each request raises it, each pass of
    /// its shard's clock hand lowers it.
    pub(super) fn uses(self) -> u64 {
        (self.0 >> USES_SHIFT) & MOST_USES
    }

    pub(super) fn raise_uses(&mut self) {
        if self.uses() < MOST_USES {
            self.0 += 1 << USES_SHIFT;
        }
    }

    pub(super) fn lower_uses(&mut self) {
        if self.uses() > 0 {
            self.0 -= 1 << USES_SHIFT;
        }
    }

    /// The fleet time of the last sync (ns, to the µs below), if any.
    pub(super) fn synced_at(self) -> Option<u64> {
        (self.0 >> LOW_BITS)
            .checked_sub(1)
            .map(|micros| micros.saturating_mul(1_000))
    }

    fn set_synced_at(&mut self, now: u64) {
        let micros = (now / 1_000).saturating_add(1).min(u64::MAX >> LOW_BITS);
        self.0 = (micros << LOW_BITS) | (self.0 & LOW);
    }
}

/// A key's entry, whatever its counts: what its shard does with it.
pub(super) trait Keyed<K> {
    fn key(&self) -> &K;
    fn limit(&self) -> &Arc<Limit>;
    fn marks(&mut self) -> &mut Marks;

    /// Points the key to `limit`, a limit of the same algorithm (the rules changed it).
    fn set_limit(&mut self, limit: Arc<Limit>);

    /// Decides `check` at fleet time `now` with `servers` last seen: against the fleet's
    /// totals while they are fresh, else also against this server's share.
    fn acquire(
        &mut self,
        check: &LimitCheck<'_>,
        now: u64,
        servers: u64,
    ) -> (Decision, Option<Charge>);

    fn give_back(&mut self, charge: Charge);

    /// Settles a request admitted here by `extra` (see [`Counts::adjust`]) at fleet time
    /// `now`, with `servers` last seen.
    fn adjust(&mut self, extra: i64, now: u64, servers: u64);

    /// What to send at fleet time `now`, when its limit's interval has passed since the last
    /// sync (at once when `force`): marks the key sending, no longer listed. Nothing while an
    /// answer is awaited.
    fn send(&mut self, now: u64, force: bool) -> Option<Payload>;

    /// Takes the fleet's `totals` for what was `sent` at fleet time `now`, the key being
    /// [sending](Mark::Sending) (`None`: the send failed; what it carried is sent again).
    /// Returns by how many requests the fleet is over the limit.
    fn settle(&mut self, sent: &Payload, totals: Option<Totals>, now: u64) -> Option<u64>;

    /// Whether nothing is kept for a reason at fleet time `now`: no answer awaited, no fresh
    /// totals, and counts that decide as a key never seen would.
    fn is_idle(&self, now: u64) -> bool;
    /// What the key carries at fleet time `now` into the key of the limit that replaced its
    /// own at a reload.
    fn carried(&self, now: u64) -> Carried;

    /// Starts the key's fresh counts at fleet time `now` from what a key of the limit its
    /// own replaced `carried`.
    fn seed(&mut self, carried: &Carried, now: u64);
}

impl<C: Counts, K> Entry<C, K> {
    pub(super) fn new(id: u64, key: K, limit: Arc<Limit>) -> Self {
        Entry {
            id,
            key,
            limit,
            marks: Marks::default(),
            counts: C::default(),
        }
    }

    fn is_fresh(&self, now: u64) -> bool {
        self.marks
            .synced_at()
            .is_some_and(|at| now.saturating_sub(at) <= self.limit.fresh_for())
    }
}

impl<C: Counts, K> Keyed<K> for Entry<C, K> {
    fn key(&self) -> &K {
        &self.key
    }

    fn limit(&self) -> &Arc<Limit> {
        &self.limit
    }

    fn marks(&mut self) -> &mut Marks {
        &mut self.marks
    }

    fn set_limit(&mut self, limit: Arc<Limit>) {
        self.limit = limit;
    }

    fn acquire(
        &mut self,
        check: &LimitCheck<'_>,
        now: u64,
        servers: u64,
    ) -> (Decision, Option<Charge>) {
        let share = (!self.is_fresh(now)).then(|| share(check.quota, servers));
        let (decision, charge) = self.counts.acquire(check, now, share.as_ref());
        if check.check_only && decision.allowed {
            let weightless = LimitCheck { cost: 0, ..*check };
            let (as_it_stands, _) = self.counts.acquire(&weightless, now, share.as_ref());
            return (decision.checked(as_it_stands), None);
        }
        (decision, charge)
    }

    fn give_back(&mut self, charge: Charge) {
        self.counts.give_back(charge);
    }

    fn adjust(&mut self, extra: i64, now: u64, servers: u64) {
        let quota = self.limit.quota;
        let share = (!self.is_fresh(now)).then(|| share(&quota, servers));
        self.counts.adjust(extra, now, &quota, share.as_ref());
    }

    fn send(&mut self, now: u64, force: bool) -> Option<Payload> {
        let waited = self
            .marks
            .synced_at()
            .is_none_or(|at| now.saturating_sub(at) >= self.limit.every);
        if self.marks.has(Mark::Sending) || !(waited || force) {
            return None;
        }
        self.marks.set(Mark::Listed, false);
        self.marks.set(Mark::Sending, true);
        Some(self.counts.payload())
    }

    fn settle(&mut self, sent: &Payload, totals: Option<Totals>, now: u64) -> Option<u64> {
        self.marks.set(Mark::Sending, false);
        let totals = totals?;
        self.marks.set_synced_at(now);
        Some(self.counts.settle(sent, totals, &self.limit, now))
    }

    fn is_idle(&self, now: u64) -> bool {
        !self.marks.has(Mark::Sending)
            && !self.is_fresh(now)
            && self.counts.is_spent(now, &self.limit.quota)
    }
    fn carried(&self, now: u64) -> Carried {
        self.counts.carried(now, &self.limit)
    }

    fn seed(&mut self, carried: &Carried, now: u64) {
        self.counts.seed(carried, now, &self.limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_uses_and_the_sync_time_share_a_word_without_touching() {
        let mut marks = Marks::default();
        assert_eq!(marks.synced_at(), None);
        marks.set(Mark::Listed, true);
        for _ in 0..5 {
            marks.raise_uses();
        }
        marks.set_synced_at(1_234_567_891);
        assert_eq!(marks.synced_at(), Some(1_234_567_000));
        assert!(marks.has(Mark::Listed) && !marks.has(Mark::Sending));
        assert_eq!(marks.uses(), 3);
        marks.set(Mark::Listed, false);
        marks.set(Mark::Sending, true);
        marks.lower_uses();
        marks.set_synced_at(0);
        assert_eq!(marks.synced_at(), Some(0));
        assert!(!marks.has(Mark::Listed) && marks.has(Mark::Sending));
        assert_eq!(marks.uses(), 2);
        for _ in 0..5 {
            marks.lower_uses();
        }
        assert_eq!(marks.uses(), 0);
        assert_eq!(marks.synced_at(), Some(0));
    }
}
