//! Approximate limits: the per-key counts of a limit in a count-min sketch of fixed size.
//!
//! A sketch is an array of cache lines of 14 counting cells. A key's fingerprint picks one
//! line and a few cells in it (4 of 14 for a fixed window; 3 of 7 for each of the two
//! windows of a sliding window counter); the key's estimate is the smallest of its cells,
//! and a request adds to them conservatively: each cell becomes at least the estimate plus
//! the request, never less than it was. Cells only ever count a key's own requests and other
//! keys' on top, so an estimate is never below the key's true count: a key is never admitted
//! beyond what the exact algorithm would admit.
//!
//! A key whose estimate passes half its limit is *heavy*: the store decides it exactly from
//! then on, from state that starts at the estimate. So the client being limited sees exact
//! `remaining` and `Retry-After`, and only keys that are being limited cost memory of their
//! own.
//!
//! Each line carries the window its cells count, and is rolled to a new window by the first
//! request that finds it old: clearing costs nothing up front, line by line as keys come.
//! A line is locked (a spin on its window word) for the few loads and stores of a request,
//! always inside the memory store's shard lock, never the other way round.

mod line;

use self::line::{Line, Locked, CELLS};
use crate::algorithm::{Algorithm, Decision, Quota, State, WindowCount};
use crate::clock::Nanos;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The metrics of a sketch, per limit.
#[cfg(feature = "metrics")]
const SKETCH_BYTES: &str = "tollgate_sketch_bytes";
#[cfg(feature = "metrics")]
const SKETCH_REQUESTS: &str = "tollgate_sketch_requests";
#[cfg(feature = "metrics")]
const SKETCH_ERROR_BOUND: &str = "tollgate_sketch_error_bound";
#[cfg(feature = "metrics")]
const SKETCH_FILL: &str = "tollgate_sketch_fill";

/// The most memory a sketch takes, whatever it is asked for.
pub(crate) const MAX_MEMORY: usize = 1 << 30;

/// Bytes of one line.
const LINE_BYTES: usize = std::mem::size_of::<Line>();

/// A count-min sketch of one limit's keys.
pub(crate) struct Sketch {
    /// The size asked for, in bytes (the lines take it rounded down to whole lines).
    pub(crate) requested: usize,
    /// The limit counted, as metrics and logs name it.
    domain: Box<str>,
    limit: Box<str>,
    geometry: Geometry,
    /// Whether the sketch was reported too small for its load (once).
    warned: AtomicBool,
    lines: Box<[Line]>,
    windows: Windows,
    /// Requests counted in window `counted_window`, over every key: the load the error
    /// bound grows with.
    counted: AtomicU64,
    counted_window: AtomicU64,
}

/// How a sketch's lines count: one window (a fixed window: all 14 cells of a line, 4 of
/// them a key's), or two (a sliding window counter: 7 cells for the current window, 7 for
/// the one before, 3 of each a key's).
type Windows = WindowCount;

/// The windows of a sketch for `algorithm`. Only the algorithms that count in windows are
/// approximated; the figures of another are those of one window.
fn windows_of(algorithm: Algorithm) -> Windows {
    algorithm.window_count().unwrap_or(Windows::One)
}

impl Windows {
    /// A line's cells for one window.
    fn cells(self) -> usize {
        match self {
            Windows::One => CELLS,
            Windows::Two => CELLS / 2,
        }
    }

    /// The cells a key takes in each window.
    fn per_key(self) -> usize {
        match self {
            Windows::One => 4,
            Windows::Two => 3,
        }
    }
}

/// What a sketch makes of one request.
#[derive(Debug)]
pub(crate) enum Estimate {
    /// The key is light: decided on its estimate, and charged if asked and admitted.
    Light(Decision),
    /// The key would pass half its limit: it is to be decided exactly from now on, from
    /// this state (counts at least the key's true ones).
    Heavy(State),
}

impl Sketch {
    /// A sketch of `memory` bytes (rounded down to whole lines, at least one) for
    /// `algorithm`, a fixed window or a sliding window counter.
    pub(crate) fn new(memory: usize, algorithm: Algorithm, domain: &str, limit: &str) -> Self {
        let memory = memory.min(MAX_MEMORY);
        let windows = windows_of(algorithm);
        Sketch {
            requested: memory,
            domain: domain.into(),
            limit: limit.into(),
            geometry: Geometry::of(memory, algorithm),
            warned: AtomicBool::new(false),
            lines: (0..(memory / LINE_BYTES).max(1))
                .map(|_| Line::default())
                .collect(),
            windows,
            counted: AtomicU64::new(0),
            counted_window: AtomicU64::new(0),
        }
    }

    /// Whether this sketch and `other` count the same limit.
    pub(crate) fn same_limit(&self, other: &Sketch) -> bool {
        self.limit == other.limit && self.domain == other.domain
    }

    /// Whether this sketch counts the limit `limit` of `domain`.
    pub(crate) fn counts(&self, domain: &str, limit: &str) -> bool {
        *self.limit == *limit && *self.domain == *domain
    }

    /// Reports a finished window of `requests` over all keys: the metrics, and a warning
    /// (once) when the error bound passes a quarter of the limit, where clients at half
    /// their limit start to be denied for other clients' requests.
    fn report(&self, requests: u64, quota: &Quota) {
        let bound = self.geometry.error_bound(requests as f64);
        let limit = quota.requests_per_period() as f64;
        if bound > limit / 4.0 && !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                domain = %self.domain,
                limit = %self.limit,
                requests,
                bound,
                "an approximate limit's sketch is small for its load: estimates may exceed true counts by {bound:.0} (a quarter of the limit or more); give it more memory"
            );
        }
        #[cfg(feature = "metrics")]
        {
            let labels = [
                ("domain", self.domain.to_string()),
                ("limit", self.limit.to_string()),
            ];
            metrics::gauge!(SKETCH_BYTES, &labels).set((self.lines.len() * LINE_BYTES) as f64);
            metrics::gauge!(SKETCH_REQUESTS, &labels).set(requests as f64);
            metrics::gauge!(SKETCH_ERROR_BOUND, &labels).set(bound);
            metrics::gauge!(SKETCH_FILL, &labels).set(self.geometry.fill(requests as f64));
        }
    }

    /// Decides a request of `cost` at `now` on the key with `fingerprint`, under `quota`;
    /// charges it when `charge` and it is admitted as a light key.
    pub(crate) fn decide(
        &self,
        fingerprint: u64,
        algorithm: Algorithm,
        quota: &Quota,
        cost: u64,
        now: Nanos,
        charge: bool,
    ) -> Estimate {
        let (line, cells) = self.place(fingerprint);
        let now_window = quota.period_divisor().div_u64(now.as_u64());
        let mut locked = self.lines[line].lock();
        let rolled = roll(&mut locked, now_window, self.windows);
        let window = locked.window;
        let half = self.windows.cells();
        let estimate = |offset: usize| {
            cells
                .iter()
                .take(self.windows.per_key())
                .map(|&cell| locked.cells[offset + cell])
                .min()
                .map_or(0, u64::from)
        };
        let current = estimate(0);
        let state = match self.windows {
            // The window before is read only when there is one.
            Windows::One => Windows::One.state(window, current, 0),
            Windows::Two => Windows::Two.state(window, current, estimate(half)),
        };
        let decision = algorithm.peek(&state, now, quota, cost);
        let limit = quota.requests_per_period();
        let charged = current.saturating_add(cost);
        // What the key has used: after this request if it fits, else before it (a request
        // denied for its own cost alone leaves nothing to track).
        let used = if decision.allowed {
            limit.saturating_sub(decision.remaining)
        } else {
            limit.saturating_sub(algorithm.peek(&state, now, quota, 0).remaining)
        };
        // Heavy: past half the limit, or a count the cells cannot hold (the exact state
        // counts in 64 bits).
        let heavy = charged >= u64::from(u32::MAX) || used > limit / 2;
        if heavy || !decision.allowed {
            if rolled {
                locked.write();
            }
            return if heavy {
                Estimate::Heavy(state)
            } else {
                Estimate::Light(decision)
            };
        }
        let mut finished = None;
        if charge {
            // Below u32::MAX: checked above.
            let charged = u32::try_from(charged).unwrap_or(u32::MAX);
            for &cell in cells.iter().take(self.windows.per_key()) {
                let value = &mut locked.cells[cell];
                *value = (*value).max(charged);
            }
            finished = self.count(window, cost);
        }
        if charge || rolled {
            locked.write();
        }
        drop(locked);
        if let Some(requests) = finished {
            self.report(requests, quota);
        }
        Estimate::Light(decision)
    }

    /// What the sketch estimates the key with `fingerprint` has used at `now`, under
    /// `quota`, charging nothing: at least what it used.
    pub(crate) fn used(
        &self,
        fingerprint: u64,
        algorithm: Algorithm,
        quota: &Quota,
        now: Nanos,
    ) -> u64 {
        let as_it_stands = match self.decide(fingerprint, algorithm, quota, 0, now, false) {
            Estimate::Light(decision) => decision,
            Estimate::Heavy(state) => algorithm.peek(&state, now, quota, 0),
        };
        as_it_stands.capacity.saturating_sub(as_it_stands.remaining)
    }

    /// Raises the current window's cells of the key with `fingerprint`, tracked exactly,
    /// to at least `count` (at least what its exact state counts in the window: a sliding
    /// window counter's weighted previous window included), after a request of `cost`.
    pub(crate) fn raise(&self, fingerprint: u64, quota: &Quota, now: Nanos, count: u64, cost: u64) {
        let (line, cells) = self.place(fingerprint);
        let now_window = quota.period_divisor().div_u64(now.as_u64());
        let mut locked = self.lines[line].lock();
        roll(&mut locked, now_window, self.windows);
        // Saturated, the cells make the key heavy again if its exact state is forgotten.
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        for &cell in cells.iter().take(self.windows.per_key()) {
            let value = &mut locked.cells[cell];
            *value = (*value).max(count);
        }
        locked.write();
        let finished = self.count(locked.window, cost);
        drop(locked);
        if let Some(requests) = finished {
            self.report(requests, quota);
        }
    }

    /// The line and the cells (within a window's half) of the key with `fingerprint`: any
    /// of the sets of distinct cells (1,001 of 4 in 14; 35 of 3 in 7), so that two keys of a
    /// line rarely share all of theirs.
    fn place(&self, fingerprint: u64) -> (usize, [usize; 4]) {
        let mixed = fingerprint.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let lines = self.lines.len() as u128;
        let line = ((u128::from(mixed) * lines) >> 64) as usize;
        // The low bits: the line took the high ones.
        let mut bits = mixed as usize & 0xFFFF_FFFF;
        let cells = self.windows.cells();
        let mut chosen = [usize::MAX; 4];
        for taken in 0..self.windows.per_key() {
            // The `cell`-th of the cells not chosen yet (`chosen` is kept sorted).
            let mut cell = bits % (cells - taken);
            bits /= cells - taken;
            for &before in &chosen[..taken] {
                if cell >= before {
                    cell += 1;
                }
            }
            chosen[taken] = cell;
            chosen[..=taken].sort_unstable();
        }
        (line, chosen)
    }

    /// Adds `cost` to the requests counted in `window`; the count of the window before, when
    /// this is the first request of a new one.
    fn count(&self, window: u64, cost: u64) -> Option<u64> {
        let mut finished = None;
        let counted_window = self.counted_window.load(Ordering::Relaxed);
        if counted_window < window
            && self
                .counted_window
                .compare_exchange(counted_window, window, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            finished = Some(self.counted.swap(0, Ordering::Relaxed));
        }
        self.counted.fetch_add(cost, Ordering::Relaxed);
        finished
    }
}

/// The cells a key's estimate could be inflated through, and what a sketch promises.
///
/// Other keys' requests land in a key's cells: on average, with `requests` counted in a
/// window over all keys, each cell takes `requests × cells per key ÷ cells` of them (the
/// *expected excess*). By Markov's inequality a cell exceeds `e ×` that with probability at
/// most `1/e`, and a key's estimate (the smallest of its cells) with probability about
/// `e^-(cells per key)`, taking its cells as independent (they share a line, so this is an
/// estimate, not a proof). Conservative updates only lower the excess.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    cells: f64,
    per_key: i32,
}

impl Geometry {
    pub(crate) fn of(memory: usize, algorithm: Algorithm) -> Self {
        let windows = windows_of(algorithm);
        let lines = (memory.min(MAX_MEMORY) / LINE_BYTES).max(1);
        Geometry {
            cells: (lines * windows.cells()) as f64,
            per_key: windows.per_key() as i32,
        }
    }

    /// What other keys add to a key's estimate on average, at `requests` a window.
    pub(crate) fn expected_excess(self, requests: f64) -> f64 {
        requests * f64::from(self.per_key) / self.cells
    }

    /// The excess an estimate passes with probability at most [`Geometry::confidence`]'s
    /// complement, at `requests` a window.
    pub(crate) fn error_bound(self, requests: f64) -> f64 {
        std::f64::consts::E * self.expected_excess(requests)
    }

    /// The share of cells that hold a count at `requests` a window, as expected when
    /// requests land on cells at random: `1 − e^-(expected excess)`.
    #[cfg(feature = "metrics")]
    pub(crate) fn fill(self, requests: f64) -> f64 {
        1.0 - (-self.expected_excess(requests)).exp()
    }

    /// The probability that an estimate stays within [`Geometry::error_bound`].
    pub(crate) fn confidence(self) -> f64 {
        1.0 - (-f64::from(self.per_key)).exp()
    }

    /// The probability that a key's estimate exceeds its true count by more than `excess`,
    /// at `requests` a window: `(expected excess / excess)^(cells per key)`, at most 1.
    pub(crate) fn excess_probability(self, requests: f64, excess: f64) -> f64 {
        if excess <= 0.0 {
            return 1.0;
        }
        (self.expected_excess(requests) / excess)
            .powi(self.per_key)
            .min(1.0)
    }
}

/// Moves `locked` on to window `now` (never back): a new window starts at zero, and for two
/// windows the current one becomes the previous one. Whether it moved.
fn roll(locked: &mut Locked<'_>, now: u64, windows: Windows) -> bool {
    let line = locked.window;
    if now <= line {
        return false;
    }
    let half = windows.cells();
    if windows == Windows::Two && line.checked_add(1) == Some(now) {
        locked.cells.copy_within(0..half, half);
        locked.cells[..half].fill(0);
    } else {
        locked.cells.fill(0);
    }
    locked.window = now;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Keys take every set of distinct cells: 1,001 sets of 4 in 14, 35 of 3 in 7.
    #[test]
    fn keys_take_every_set_of_distinct_cells() {
        for (algorithm, sets) in [
            (Algorithm::FixedWindow, 1_001),
            (Algorithm::SlidingWindowCounter, 35),
        ] {
            let sketch = Sketch::new(64 << 10, algorithm, "test", "test");
            let per_key = sketch.windows.per_key();
            let mut seen = HashSet::new();
            let mut x = 0x2545_F491_4F6C_DD1Du64;
            for _ in 0..200_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (_, cells) = sketch.place(x);
                let cells = &cells[..per_key];
                assert!(cells.windows(2).all(|pair| pair[0] < pair[1]), "{cells:?}");
                assert!(cells.iter().all(|&cell| cell < sketch.windows.cells()));
                seen.insert(cells.to_vec());
            }
            assert_eq!(seen.len(), sets, "{algorithm}");
        }
    }
}
