//! The counts of GCRA and the token bucket (kept as GCRA's timestamp): a schedule shared by
//! the fleet, and this server's bookings in it.

use super::{booked, stricter, Carried, Charge, Counts, Payload, Totals};
use crate::algorithm::{Algorithm, Decision, Gcra, Quota, State};
use crate::clock::Nanos;
use crate::store::sync::Limit;
use crate::store::LimitCheck;

/// One key's schedule.
#[derive(Debug, Default)]
pub(in crate::store::sync) struct Schedule {
    /// The fleet's theoretical arrival time at the last sync.
    fleet_tat: u64,
    /// Bookings made here and not in the fleet's schedule yet, sent or not.
    unsynced: Bookings,
    /// This server's own theoretical arrival time under its share of the limit, moved only
    /// while it decides alone.
    own_tat: u64,
}

/// Bookings of a schedule, folded: in order, they move a theoretical arrival time `t` to
/// `max(t, after) + add`. Folding keeps that form, so any number of bookings is two numbers
/// and the fleet's total applies them exactly as one by one.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bookings {
    /// The earliest time the bookings can start from (fleet time, ns).
    pub(crate) after: u64,
    /// Their length (ns).
    pub(crate) add: u64,
}

impl Bookings {
    pub(in crate::store::sync) fn apply(self, tat: u64) -> u64 {
        tat.max(self.after).saturating_add(self.add)
    }

    /// These bookings, then `next`.
    pub(in crate::store::sync) fn then(self, next: Bookings) -> Bookings {
        Bookings {
            after: self.after.max(next.after.saturating_sub(self.add)),
            add: self.add.saturating_add(next.add),
        }
    }

    /// What is left of these bookings once `sent`, the ones they began with, are in a
    /// schedule: that schedule is at least `sent.after + sent.add`, so the rest, from there,
    /// move it exactly as the bookings made after `sent` do.
    pub(in crate::store::sync) fn without(self, sent: Bookings) -> Bookings {
        if sent.add == 0 {
            // An empty send: the fleet applied nothing.
            return self;
        }
        match self.add.saturating_sub(sent.add) {
            0 => Bookings::default(),
            add => Bookings {
                after: self.after.saturating_add(sent.add),
                add,
            },
        }
    }
}

impl Counts for Schedule {
    fn acquire(
        &mut self,
        check: &LimitCheck<'_>,
        now: u64,
        share: Option<&Quota>,
    ) -> (Decision, Option<Charge>) {
        let LimitCheck {
            quota,
            cost,
            check_only,
            ..
        } = *check;
        let at = Nanos::new(now);
        let gcra = |tat: u64, quota: &Quota| {
            Algorithm::Gcra.peek(&State::Gcra(Gcra::at(Nanos::new(tat))), at, quota, cost)
        };
        let mut decision = gcra(self.unsynced.apply(self.fleet_tat), quota);
        // Alone, this server's own schedule under its share; from where it stands when it
        // starts deciding alone.
        let own = share.map(|share| (gcra(self.own_tat, share), booked(share, cost)));
        if let Some((own_decision, _)) = own {
            decision = stricter(decision, own_decision);
        }
        if !decision.allowed || check_only {
            return (decision, None);
        }
        let add = booked(quota, cost);
        let own = own.map_or(0, |(_, own)| own);
        self.unsynced = self.unsynced.then(Bookings { after: now, add });
        if own > 0 {
            self.own_tat = self.own_tat.max(now).saturating_add(own);
        }
        (decision, Some(Charge::Schedule { add, own }))
    }

    /// The length is taken back from the unsynced bookings, as much as they hold: what was
    /// synced stays booked, on the side of denying.
    fn give_back(&mut self, charge: Charge) {
        let Charge::Schedule { add, own } = charge else {
            return;
        };
        // What is left starts no earlier: a booking's own start was at most now, and a
        // carried schedule's (see `seed`) is kept.
        self.unsynced.add = self.unsynced.add.saturating_sub(add);
        self.own_tat = self.own_tat.saturating_sub(own);
    }

    /// Booked from now on, or given back from the unsynced bookings, not before now (what
    /// was synced stays booked, as in `give_back`).
    fn adjust(&mut self, extra: i64, now: u64, quota: &Quota, share: Option<&Quota>) {
        let cost = extra.unsigned_abs();
        if extra >= 0 {
            let add = booked(quota, cost);
            self.unsynced = self.unsynced.then(Bookings { after: now, add });
            if let Some(share) = share {
                self.own_tat = self.own_tat.max(now).saturating_add(booked(share, cost));
            }
            return;
        }
        // The bookings start at `start`: they keep at least what reaches now.
        let start = self.fleet_tat.max(self.unsynced.after);
        let kept = now.saturating_sub(start).min(self.unsynced.add);
        self.unsynced.add = self
            .unsynced
            .add
            .saturating_sub(booked(quota, cost))
            .max(kept);
        if let Some(share) = share {
            let own = self.own_tat.saturating_sub(booked(share, cost));
            self.own_tat = own.max(now.min(self.own_tat));
        }
    }

    fn payload(&self) -> Payload {
        Payload::Schedule(self.unsynced)
    }

    fn settle(&mut self, sent: &Payload, totals: Totals, limit: &Limit, now: u64) -> u64 {
        let (Payload::Schedule(sent), Totals::Schedule { tat }) = (sent, totals) else {
            return 0;
        };
        self.fleet_tat = tat;
        self.unsynced = self.unsynced.without(*sent);
        schedule_over(&limit.quota, tat, now)
    }

    fn is_spent(&self, now: u64, _quota: &Quota) -> bool {
        self.unsynced.apply(self.fleet_tat) <= now && self.own_tat <= now
    }

    fn carried(&self, now: u64, limit: &Limit) -> Carried {
        let tat = Nanos::new(self.unsynced.apply(self.fleet_tat));
        let as_it_stands = Algorithm::Gcra.peek(
            &State::Gcra(Gcra::at(tat)),
            Nanos::new(now),
            &limit.quota,
            0,
        );
        Carried {
            algorithm: limit.algorithm,
            quota: limit.quota,
            as_it_stands,
            own: None,
        }
    }

    fn seed(&mut self, carried: &Carried, now: u64, limit: &Limit) {
        let Limit {
            algorithm, quota, ..
        } = *limit;
        let carry = algorithm.carry_from(&quota, carried.algorithm, &carried.quota);
        let used = carry.used(algorithm, &quota, &carried.as_it_stands);
        let until = now.saturating_add(booked(&quota, algorithm.carried_cost(&quota, used)));
        if until > now {
            // "At least this far": no length, so that every server may send it.
            self.unsynced = Bookings {
                after: until,
                add: 0,
            };
        }
    }
}

/// By how many requests the fleet's schedule is booked beyond the burst at `now`.
fn schedule_over(quota: &Quota, tat: u64, now: u64) -> u64 {
    let Some(interval) = quota.emission_interval() else {
        return 0;
    };
    interval
        .div_ceil_u64(tat.saturating_sub(now))
        .saturating_sub(Algorithm::Gcra.capacity(quota))
}
