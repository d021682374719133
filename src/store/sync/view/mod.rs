//! What one server knows of one key of a local-first limit, as its algorithm counts it: the
//! fleet's totals at the last sync, and what it admitted since.
//!
//! Counts are kept in the form each algorithm needs ([`Windows`], [`Schedule`]), so that a
//! key costs no more than its own algorithm's numbers. What was sent stays in the counts
//! until the fleet's answer comes, and the answer takes it out: a key keeps no copy of what
//! it sent.

mod schedule;
mod windows;

use super::Limit;
use crate::algorithm::{Algorithm, Decision, Quota};
use crate::store::LimitCheck;
pub(crate) use schedule::Bookings;
pub(super) use schedule::Schedule;
pub(super) use windows::Windows;

/// The counts of one key, as its algorithm keeps them.
pub(super) trait Counts: Default {
    /// Decides `check` at fleet time `now` against everything known to be admitted and,
    /// with a `share` (no fresh fleet totals), against this server's own admissions under
    /// its share of the limit; charges the request when it is admitted, unless it is only
    /// checked.
    fn acquire(
        &mut self,
        check: &LimitCheck<'_>,
        now: u64,
        share: Option<&Quota>,
    ) -> (Decision, Option<Charge>);

    /// Gives back what an admission charged (another limit denied the request).
    fn give_back(&mut self, charge: Charge);

    /// Settles a request admitted here, its response known at fleet time `now`: charges
    /// `extra` more from now (past the limit if need be), or gives back `-extra` of what
    /// this server counted, as [`Algorithm::settle`] does; under `share` too while this
    /// server decides alone.
    fn adjust(&mut self, extra: i64, now: u64, quota: &Quota, share: Option<&Quota>);

    /// Everything the fleet's totals do not hold yet, to send.
    fn payload(&self) -> Payload;

    /// Takes the fleet's `totals`, which hold what was `sent`. Returns by how many requests
    /// the fleet is over `limit` at fleet time `now`.
    fn settle(&mut self, sent: &Payload, totals: Totals, limit: &Limit, now: u64) -> u64;

    /// Whether, at fleet time `now`, the counts decide as a key never seen would and hold
    /// nothing the fleet would still take: windows that ended, bookings that ran out, sent
    /// or not.
    fn is_spent(&self, now: u64, quota: &Quota) -> bool;
    /// What the counts carry, at fleet time `now`, into the key of the limit that replaced
    /// `limit` at a reload (see [`Carried`]).
    fn carried(&self, now: u64, limit: &Limit) -> Carried;

    /// Starts fresh counts of a key of `limit` at fleet time `now` from what the key of the
    /// limit it replaced `carried`.
    fn seed(&mut self, carried: &Carried, now: u64, limit: &Limit);
}

/// What a key's counts carry into the key of the limit that replaced theirs at a reload
/// (its quota, period or algorithm changed). Each server carries its own part, so that the
/// fleet's totals of the new key add up to the old one's once every server has sent them:
///
/// - into windows, from windows: this server's own admissions, in their windows when the
///   period is unchanged, else those of the window of now in the new window of now;
/// - into a schedule, from either: what the fleet had used as this server sees it, as the
///   [algorithms](crate::algorithm) carry it, booked from now, and sent as "the schedule is
///   at least this far": whichever server sends it first, it counts once;
/// - into windows, from a schedule: nothing (a shared schedule does not split into the
///   servers' shares).
#[derive(Debug, Clone, Copy)]
pub(super) struct Carried {
    algorithm: Algorithm,
    quota: Quota,
    /// The decision on a request of weight 0 as the counts stand: what remains.
    as_it_stands: Decision,
    /// For windows: the newest window's number, and this server's own admissions in it and
    /// in the one before.
    own: Option<(u64, [u64; 2])>,
}

/// What an admission charged, to give it back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Charge {
    /// `cost` in window `number`.
    Window { number: u64, cost: u64 },
    /// `add` ns of the fleet's schedule, `own` of this server's share.
    Schedule { add: u64, own: u64 },
}

/// What one send carries for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Payload {
    /// Counts to add to the current window and the one before, by window number: the fleet
    /// answers the totals of both.
    Windows { added: [(u64, i64); 2] },
    /// Bookings to apply to the fleet's schedule.
    Schedule(Bookings),
}

/// What the fleet answered for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Totals {
    /// The counts of the payload's current window, and of the one before.
    Windows { current: u64, previous: u64 },
    /// The schedule's theoretical arrival time.
    Schedule { tat: u64 },
}

/// Whether `algorithm` counts in windows (else in a schedule).
pub(super) fn counts_windows(algorithm: Algorithm) -> bool {
    algorithm.window_count().is_some()
}

/// `quota` divided among `servers`, rounded up (a server alone never gets nothing).
pub(super) fn share(quota: &Quota, servers: u64) -> Quota {
    if servers <= 1 {
        return *quota;
    }
    let divide = |n: u64| n.div_ceil(servers);
    Quota::new(divide(quota.requests_per_period()).max(1), quota.period())
        .map(|q| q.with_burst(divide(quota.burst()).max(1)))
        .unwrap_or(*quota)
}

/// The stricter of two decisions: a denial, else the one with less room.
fn stricter(a: Decision, b: Decision) -> Decision {
    match (a.allowed, b.allowed) {
        (false, _) => a,
        (true, false) => b,
        (true, true) if b.remaining < a.remaining => b,
        (true, true) => a,
    }
}

/// How long `cost` requests book in `quota`'s schedule (ns).
fn booked(quota: &Quota, cost: u64) -> u64 {
    quota
        .emission_interval()
        .map_or(0, |interval| cost.saturating_mul(interval.get()))
}

fn signed(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// How long a key's state matters after its last request (ns): two windows, or as far as a
/// schedule books ahead (its burst of intervals), whichever is longer.
pub(super) fn horizon(algorithm: Algorithm, quota: &Quota) -> u64 {
    let windows = quota.period_nanos().saturating_mul(2);
    if counts_windows(algorithm) {
        return windows;
    }
    windows.max(booked(quota, Algorithm::Gcra.capacity(quota)))
}
