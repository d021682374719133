//! The counts of the fixed window and the sliding window counter: the newest window and the
//! one before.

use super::{signed, stricter, Carried, Charge, Counts, Payload, Totals};
use crate::algorithm::{Algorithm, Decision, Quota, State, WindowCount};
use crate::clock::Nanos;
use crate::store::sync::Limit;
use crate::store::LimitCheck;

/// One key's windows.
#[derive(Debug, Default, Clone)]
pub(in crate::store::sync) struct Windows {
    /// The newest window's number; the other window is the one before.
    number: u64,
    /// The newest window, then the one before.
    windows: [Window; 2],
}

/// Counts of one window.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    /// The fleet's count at the last sync, this server's synced counts included.
    fleet: u64,
    /// This server's admissions in the window, synced or not: what it decides on alone.
    own: u64,
    /// Admitted here and not in the fleet's count yet, sent or not (negative: given back
    /// after it was synced).
    unsynced: i64,
}

impl Window {
    /// Everything this server knows was admitted in the window.
    fn seen(&self) -> u64 {
        self.fleet.saturating_add_signed(self.unsynced)
    }
}

impl Windows {
    /// Moves on to window `number` (never back).
    fn roll(&mut self, number: u64) {
        if number == self.number {
            return;
        }
        self.windows[1] = if self.number.checked_add(1) == Some(number) {
            self.windows[0]
        } else {
            Window::default()
        };
        self.windows[0] = Window::default();
        self.number = number;
    }

    /// Window `number`, if it is still kept.
    fn window_mut(&mut self, number: u64) -> Option<&mut Window> {
        if number == self.number {
            Some(&mut self.windows[0])
        } else if self.number.checked_sub(1) == Some(number) {
            Some(&mut self.windows[1])
        } else {
            None
        }
    }
}

impl Counts for Windows {
    fn acquire(
        &mut self,
        check: &LimitCheck<'_>,
        now: u64,
        share: Option<&Quota>,
    ) -> (Decision, Option<Charge>) {
        let LimitCheck {
            algorithm,
            quota,
            cost,
            check_only,
            ..
        } = *check;
        let number = quota.period_divisor().div_u64(now).max(self.number);
        self.roll(number);
        let [current, previous] = self.windows;
        let at = Nanos::new(now);
        let state = |of: fn(&Window) -> u64| {
            counted(algorithm, quota, at, number, [of(&current), of(&previous)])
        };
        let mut decision = algorithm.peek(&state(Window::seen), at, quota, cost);
        if let Some(share) = share {
            let own = algorithm.peek(&state(|w| w.own), at, share, cost);
            decision = stricter(decision, own);
        }
        if !decision.allowed || check_only {
            return (decision, None);
        }
        let window = &mut self.windows[0];
        window.own = window.own.saturating_add(cost);
        window.unsynced = window.unsynced.saturating_add(signed(cost));
        (decision, Some(Charge::Window { number, cost }))
    }

    /// What was already synced is given back to the fleet at the next send.
    fn give_back(&mut self, charge: Charge) {
        let Charge::Window { number, cost } = charge else {
            return;
        };
        if let Some(window) = self.window_mut(number) {
            window.own = window.own.saturating_sub(cost);
            window.unsynced = window.unsynced.saturating_sub(signed(cost));
        }
    }

    /// In the window of now, as the algorithms settle; what is given back comes off this
    /// server's own count there (the others' are theirs to give back).
    fn adjust(&mut self, extra: i64, now: u64, quota: &Quota, _share: Option<&Quota>) {
        self.roll(quota.period_divisor().div_u64(now).max(self.number));
        let window = &mut self.windows[0];
        let change = if extra >= 0 {
            extra
        } else {
            -signed(window.own.min(extra.unsigned_abs()))
        };
        window.own = window.own.saturating_add_signed(change);
        window.unsynced = window.unsynced.saturating_add(change);
    }

    fn payload(&self) -> Payload {
        let [current, previous] = self.windows;
        Payload::Windows {
            added: [
                (self.number, current.unsynced),
                (self.number.saturating_sub(1), previous.unsynced),
            ],
        }
    }

    fn settle(&mut self, sent: &Payload, totals: Totals, limit: &Limit, now: u64) -> u64 {
        let (Payload::Windows { added }, Totals::Windows { current, previous }) = (sent, totals)
        else {
            return 0;
        };
        for &(number, count) in added {
            if let Some(window) = self.window_mut(number) {
                window.unsynced = window.unsynced.saturating_sub(count);
            }
        }
        // Windows may have moved on since the send: the answer is for the one current then,
        // and the one before.
        let number = added[0].0;
        if let Some(window) = self.window_mut(number) {
            window.fleet = current;
        }
        if let Some(window) = number.checked_sub(1).and_then(|n| self.window_mut(n)) {
            window.fleet = previous;
        }
        windows_over(
            limit.algorithm,
            &limit.quota,
            number,
            current,
            previous,
            now,
        )
    }

    fn is_spent(&self, now: u64, quota: &Quota) -> bool {
        // Both windows are older than the one before the current: a request starts afresh,
        // and the fleet takes no count for them any more (the library's `sync`).
        quota.period_divisor().div_u64(now) > self.number.saturating_add(1)
    }

    fn carried(&self, now: u64, limit: &Limit) -> Carried {
        let Limit {
            algorithm, quota, ..
        } = *limit;
        let number = quota.period_divisor().div_u64(now).max(self.number);
        let mut windows = self.clone();
        windows.roll(number);
        let [current, previous] = windows.windows;
        let at = Nanos::new(now);
        let seen = counted(
            algorithm,
            &quota,
            at,
            number,
            [current.seen(), previous.seen()],
        );
        Carried {
            algorithm,
            quota,
            as_it_stands: algorithm.peek(&seen, at, &quota, 0),
            own: Some((number, [current.own, previous.own])),
        }
    }

    fn seed(&mut self, carried: &Carried, now: u64, limit: &Limit) {
        let Some((number, own)) = carried.own else {
            return;
        };
        let seeded = if carried.quota.period_nanos() == limit.quota.period_nanos() {
            (number, own)
        } else if carried.quota.period_divisor().div_u64(now) == number {
            // Another period: what this server admitted in the old window of now, in the new.
            (limit.quota.period_divisor().div_u64(now), [own[0], 0])
        } else {
            return;
        };
        self.number = seeded.0;
        for (window, own) in self.windows.iter_mut().zip(seeded.1) {
            *window = Window {
                fleet: 0,
                own,
                unsynced: signed(own),
            };
        }
    }
}

/// The state of `algorithm` under `quota` that has counted `counts` in window `number` and
/// the one before. Only the algorithms that count in windows are counted here (the others
/// in a schedule, see [`counts_windows`](super::counts_windows)); another would decide as a
/// key never seen.
fn counted(
    algorithm: Algorithm,
    quota: &Quota,
    now: Nanos,
    number: u64,
    [current, previous]: [u64; 2],
) -> State {
    match algorithm.window_count() {
        Some(windows) => windows.state(number, current, previous),
        None => algorithm.fresh(now, quota),
    }
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
    match algorithm.window_count() {
        Some(WindowCount::One) => return current.saturating_sub(limit),
        Some(WindowCount::Two) => {}
        // Never: only the algorithms that count in windows have windows (see `counted`).
        None => return 0,
    }
    // The sliding estimate: the previous window weighted by how much of it still overlaps.
    let period = u128::from(quota.period_nanos());
    let start = u128::from(number) * period;
    let elapsed = u128::from(now).saturating_sub(start).min(period);
    let estimate =
        (u128::from(previous) * (period - elapsed)).div_ceil(period) + u128::from(current);
    u64::try_from(estimate.saturating_sub(u128::from(limit))).unwrap_or(u64::MAX)
}
