//! What one server knows of one key of a local-first limit: the fleet's totals at the last
//! sync, and what it admitted since.

use crate::algorithm::{
    Algorithm, Decision, FixedWindow, Gcra, Quota, SlidingWindowCounter, State,
};
use crate::clock::Nanos;
use crate::store::LimitCheck;

/// One key's local view.
#[derive(Debug)]
pub(super) struct View {
    counts: Counts,
    /// Fleet time of the send whose answer last refreshed the fleet's totals; `None`: never.
    synced_at: Option<u64>,
    /// Fleet time of the last send.
    sent_at: u64,
    /// Whether a request asked for this key since the last send.
    touched: bool,
    /// Fleet time of the last request for this key.
    used_at: u64,
}

#[derive(Debug)]
enum Counts {
    /// Fixed window and sliding window counter: the newest window and the one before.
    Windows([Window; 2]),
    /// GCRA, and the token bucket kept as GCRA's timestamp: a shared schedule.
    Schedule(Schedule),
}

/// Counts of one window.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    number: u64,
    /// The fleet's count at the last sync, this server's sent counts included.
    fleet: u64,
    /// This server's admissions in the window, sent or not: what it decides on alone.
    own: u64,
    /// Admitted here, not yet sent (negative: given back after it was sent).
    unsent: i64,
    /// Sent, answer awaited.
    sending: i64,
}

impl Window {
    /// Everything this server knows was admitted in the window.
    fn seen(&self) -> u64 {
        add_signed(self.fleet, self.sending.saturating_add(self.unsent))
    }
}

fn add_signed(count: u64, delta: i64) -> u64 {
    count.saturating_add_signed(delta)
}

#[derive(Debug, Default, Clone, Copy)]
struct Schedule {
    /// The fleet's theoretical arrival time at the last sync.
    fleet_tat: u64,
    sending: Bookings,
    unsent: Bookings,
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
    pub(super) fn apply(self, tat: u64) -> u64 {
        tat.max(self.after).saturating_add(self.add)
    }

    /// These bookings, then `next`.
    pub(super) fn then(self, next: Bookings) -> Bookings {
        Bookings {
            after: self.after.max(next.after.saturating_sub(self.add)),
            add: self.add.saturating_add(next.add),
        }
    }
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

/// How a server decides a key: with fresh fleet totals, or alone with its share.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fleet {
    /// The servers last seen (at least 1).
    pub(crate) servers: u64,
    /// How old fleet totals may be and still be used (ns).
    pub(crate) fresh_for: u64,
}

/// `quota` divided among `servers`, rounded up (a server alone never gets nothing).
fn share(quota: &Quota, servers: u64) -> Quota {
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

impl View {
    pub(super) fn new(algorithm: Algorithm) -> Self {
        let counts = match algorithm {
            Algorithm::FixedWindow | Algorithm::SlidingWindowCounter => {
                Counts::Windows([Window::default(); 2])
            }
            _ => Counts::Schedule(Schedule::default()),
        };
        View {
            counts,
            synced_at: None,
            sent_at: 0,
            touched: false,
            used_at: 0,
        }
    }

    /// Decides `check` at fleet time `now`, charging this view when it is admitted (unless
    /// it is only checked).
    ///
    /// With fleet totals fresher than `fleet.fresh_for`, the request is decided against the
    /// limit on everything known to be admitted (the totals plus what this server admitted
    /// since). Without, this server also keeps to its share of the limit, the limit divided
    /// among the servers last seen, on its own admissions alone.
    pub(super) fn acquire(
        &mut self,
        check: &LimitCheck<'_>,
        now: u64,
        fleet: Fleet,
    ) -> (Decision, Option<Charge>) {
        let LimitCheck {
            algorithm,
            quota,
            cost,
            check_only,
            ..
        } = *check;
        self.touched = true;
        self.used_at = self.used_at.max(now);
        let fresh = self
            .synced_at
            .is_some_and(|at| now.saturating_sub(at) <= fleet.fresh_for);
        let share = (!fresh).then(|| share(quota, fleet.servers));
        let at = Nanos::new(now);
        match &mut self.counts {
            Counts::Windows(windows) => {
                let number = quota.period_divisor().div_u64(now).max(windows[0].number);
                roll(windows, number);
                let [current, previous] = *windows;
                let state = |of: fn(&Window) -> u64| match algorithm {
                    Algorithm::FixedWindow => {
                        State::FixedWindow(FixedWindow::counted(number, of(&current)))
                    }
                    _ => State::SlidingWindowCounter(SlidingWindowCounter::counted(
                        number,
                        of(&current),
                        of(&previous),
                    )),
                };
                let mut decision = algorithm.peek(&state(Window::seen), at, quota, cost);
                if let Some(share) = &share {
                    let own = algorithm.peek(&state(|w| w.own), at, share, cost);
                    decision = stricter(decision, own);
                }
                if !decision.allowed || check_only {
                    return (decision, None);
                }
                let window = &mut windows[0];
                window.own = window.own.saturating_add(cost);
                window.unsent = window.unsent.saturating_add(signed(cost));
                (decision, Some(Charge::Window { number, cost }))
            }
            Counts::Schedule(schedule) => {
                let seen = schedule
                    .unsent
                    .apply(schedule.sending.apply(schedule.fleet_tat));
                let gcra = |tat: u64, quota: &Quota| {
                    Algorithm::Gcra.peek(&State::Gcra(Gcra::at(Nanos::new(tat))), at, quota, cost)
                };
                let mut decision = gcra(seen, quota);
                // Alone, this server's own schedule under its share; from where it stands
                // when it starts deciding alone.
                let own = share.map(|share| (gcra(schedule.own_tat, &share), booked(&share, cost)));
                if let Some((own_decision, _)) = own {
                    decision = stricter(decision, own_decision);
                }
                if !decision.allowed || check_only {
                    return (decision, None);
                }
                let add = booked(quota, cost);
                let own = own.map_or(0, |(_, own)| own);
                schedule.unsent = schedule.unsent.then(Bookings { after: now, add });
                if own > 0 {
                    schedule.own_tat = schedule.own_tat.max(now).saturating_add(own);
                }
                (decision, Some(Charge::Schedule { add, own }))
            }
        }
    }

    /// Gives back what an admission charged (another limit denied the request). What was
    /// already sent is given back at the next send, for the windows. A schedule takes the
    /// length back from its unsent bookings, as much as they hold: what was sent stays
    /// booked, on the side of denying.
    pub(super) fn give_back(&mut self, charge: Charge) {
        self.touched = true;
        match (&mut self.counts, charge) {
            (Counts::Windows(windows), Charge::Window { number, cost }) => {
                if let Some(window) = windows.iter_mut().find(|w| w.number == number) {
                    window.own = window.own.saturating_sub(cost);
                    window.unsent = window.unsent.saturating_sub(signed(cost));
                }
            }
            (Counts::Schedule(schedule), Charge::Schedule { add, own }) => {
                schedule.unsent.add = schedule.unsent.add.saturating_sub(add);
                schedule.own_tat = schedule.own_tat.saturating_sub(own);
            }
            _ => {}
        }
    }

    /// What to send for this key at fleet time `now`, if anything: what it admitted since the
    /// last send, when a request asked for it since and `every` ns have passed (at once when
    /// `force`). Nothing while an answer is awaited.
    pub(super) fn send(&mut self, now: u64, every: u64, force: bool) -> Option<Payload> {
        let waited = now.saturating_sub(self.sent_at) >= every;
        if !self.touched || !(waited || force) || self.is_sending() {
            return None;
        }
        self.touched = false;
        self.sent_at = now;
        Some(match &mut self.counts {
            Counts::Windows(windows) => {
                for window in windows.iter_mut() {
                    window.sending = std::mem::take(&mut window.unsent);
                }
                Payload::Windows {
                    added: windows.map(|w| (w.number, w.sending)),
                }
            }
            Counts::Schedule(schedule) => {
                schedule.sending = std::mem::take(&mut schedule.unsent);
                Payload::Schedule(schedule.sending)
            }
        })
    }

    fn is_sending(&self) -> bool {
        match &self.counts {
            Counts::Windows(windows) => windows.iter().any(|w| w.sending != 0),
            Counts::Schedule(schedule) => schedule.sending != Bookings::default(),
        }
    }

    /// Takes the fleet's answer to what `payload` sent. Returns by how many requests the
    /// fleet is over the limit at fleet time `now`.
    pub(super) fn settle(
        &mut self,
        payload: &Payload,
        totals: Totals,
        algorithm: Algorithm,
        quota: &Quota,
        now: u64,
    ) -> u64 {
        self.synced_at = Some(self.sent_at);
        match (&mut self.counts, payload, totals) {
            (
                Counts::Windows(windows),
                Payload::Windows {
                    added: [(number, _), _],
                },
                Totals::Windows { current, previous },
            ) => {
                // Windows may have moved on since the send: the answer is for the one current
                // then, and the one before.
                for window in windows.iter_mut() {
                    window.sending = 0;
                    if window.number == *number {
                        window.fleet = current;
                    } else if window.number.checked_add(1) == Some(*number) {
                        window.fleet = previous;
                    }
                }
                windows_over(algorithm, quota, *number, current, previous, now)
            }
            (Counts::Schedule(schedule), _, Totals::Schedule { tat }) => {
                schedule.fleet_tat = tat;
                schedule.sending = Bookings::default();
                schedule_over(quota, tat, now)
            }
            _ => 0,
        }
    }

    /// The send failed: what it carried is sent again next time.
    pub(super) fn unsend(&mut self) {
        self.touched = true;
        match &mut self.counts {
            Counts::Windows(windows) => {
                for window in windows.iter_mut() {
                    window.unsent = window
                        .unsent
                        .saturating_add(std::mem::take(&mut window.sending));
                }
            }
            Counts::Schedule(schedule) => {
                schedule.unsent = std::mem::take(&mut schedule.sending).then(schedule.unsent);
            }
        }
    }

    /// Whether the view holds nothing worth keeping at fleet time `now`: nothing to send,
    /// nothing awaited, and no request for longer than `idle` ns.
    pub(super) fn is_idle(&self, now: u64, idle: u64) -> bool {
        let unsent = match &self.counts {
            Counts::Windows(windows) => windows.iter().any(|w| w.unsent != 0),
            Counts::Schedule(schedule) => schedule.unsent != Bookings::default(),
        };
        !self.touched && !unsent && !self.is_sending() && now.saturating_sub(self.used_at) > idle
    }
}

/// Moves `windows` on to window `number` (never back).
fn roll(windows: &mut [Window; 2], number: u64) {
    let newest = windows[0].number;
    if number == newest {
        return;
    }
    let fresh = |number| Window {
        number,
        ..Window::default()
    };
    windows[1] = if newest.checked_add(1) == Some(number) {
        windows[0]
    } else {
        fresh(number.saturating_sub(1))
    };
    windows[0] = fresh(number);
}

/// By how many requests the fleet's counts are over the limit at `now`.
fn windows_over(
    algorithm: Algorithm,
    quota: &Quota,
    number: u64,
    current: u64,
    previous: u64,
    now: u64,
) -> u64 {
    let limit = quota.requests_per_period();
    if algorithm == Algorithm::FixedWindow {
        return current.saturating_sub(limit);
    }
    // The sliding estimate: the previous window weighted by how much of it still overlaps.
    let period = u128::from(quota.period_nanos());
    let start = u128::from(number) * period;
    let elapsed = u128::from(now).saturating_sub(start).min(period);
    let estimate =
        (u128::from(previous) * (period - elapsed)).div_ceil(period) + u128::from(current);
    u64::try_from(estimate.saturating_sub(u128::from(limit))).unwrap_or(u64::MAX)
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
pub(crate) fn horizon(algorithm: Algorithm, quota: &Quota) -> u64 {
    let windows = quota.period_nanos().saturating_mul(2);
    match algorithm {
        Algorithm::FixedWindow | Algorithm::SlidingWindowCounter => windows,
        _ => windows.max(booked(quota, Algorithm::Gcra.capacity(quota))),
    }
}
