//! How a limit's state is laid out in Redis: which of `library.lua`'s forms keeps it, and
//! under which key suffix.
//!
//! Every algorithm keeps its state as text (`anchor level`, a theoretical arrival time, ...),
//! as tollgate always has, but for the fixed window, which keeps one integer,
//! `(window + 1) × scale + count`, charged with one `INCRBY`: a decision then costs Redis
//! about what a minimal fixed-window script does. A fixed window kept so lives under its own
//! suffix (`:us:n`, not `:us`), where servers that keep it as text (tollgate 0.1, or with
//! [`legacy_fixed_windows`](super::RedisStoreBuilder::legacy_fixed_windows)) never look.

use super::ticks::Tick;
use crate::algorithm::{Algorithm, Quota};

/// Where and how one limit's state is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// The algorithm's code in `library.lua`.
    pub(super) code: i64,
    /// For a fixed window kept as one integer, its scale.
    pub(super) scale: Option<u64>,
    pub(super) tick: Tick,
}

/// The code of the fixed window kept as one integer in `library.lua`.
const COUNTER: i64 = 7;
/// The code of the token bucket in `library.lua`.
pub(super) const TOKEN_BUCKET: i64 = 1;

impl Layout {
    /// The layout of a limit decided by `algorithm` under `quota`, kept in `tick`; a fixed
    /// window is kept as text when `text_windows` (or when its integers would not stay
    /// exact).
    pub(super) fn of(algorithm: Algorithm, quota: &Quota, tick: Tick, text_windows: bool) -> Self {
        let scale = (algorithm == Algorithm::FixedWindow && !text_windows)
            .then(|| tick.counter_scale(quota))
            .flatten();
        let code = match (algorithm, scale) {
            (_, Some(_)) => COUNTER,
            (Algorithm::TokenBucket, _) => TOKEN_BUCKET,
            (Algorithm::LeakyBucket, _) => 2,
            (Algorithm::FixedWindow, _) => 3,
            (Algorithm::SlidingWindowLog, _) => 4,
            (Algorithm::SlidingWindowCounter, _) => 5,
            (Algorithm::Gcra, _) => 6,
        };
        Layout { code, scale, tick }
    }

    /// Whether the state is one integer that `INCRBY` charges.
    pub(super) fn is_counter(self) -> bool {
        self.scale.is_some()
    }

    /// Whether `acquire_counter` can decide this limit, of a period of `period` ticks,
    /// alone: a counter in ticks of the base unit, whose answer, `until_next × scale +
    /// code`, stays below 2^53.
    pub(super) fn counter_answers_in_one_number(self, period: u64) -> bool {
        let Some(scale) = self.scale else {
            return false;
        };
        self.tick.per_base == 1 && (u128::from(period) + 1) * u128::from(scale) < 1 << 53
    }

    /// The suffix of the state's key: the tick's unit, and `:n` for a counter.
    pub(super) fn suffix(self) -> String {
        let unit = self.tick.unit();
        if self.is_counter() {
            format!("{unit}:n")
        } else {
            unit.to_owned()
        }
    }
}
