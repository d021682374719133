//! How a limit's state is laid out in Redis: which of `library.lua`'s forms keeps it, and
//! under which key suffix.
//!
//! Every algorithm keeps its state as text (`anchor level`, a theoretical arrival time, ...),
//! as tollgate always has, but two. The fixed window keeps one integer,
//! `(window + 1) × scale + count`, charged with one `INCRBY`: a decision then costs Redis
//! about what a minimal fixed-window script does. The sliding window log keeps a sorted set,
//! one member a request unit, scored by its time, which a decision reads and charges in a
//! few commands, where its text was read and written whole. Each lives under a suffix of its
//! own (`:us:n`, `:us:z`, not `:us`), where servers that keep them as text (tollgate 0.1, or
//! with [`legacy_layout`](super::RedisStoreBuilder::legacy_layout)) never look.

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

// The algorithms' codes in `library.lua`, by the form their state takes.
pub(super) const TOKEN_BUCKET: i64 = 1;
const LEAKY_BUCKET: i64 = 2;
/// A fixed window kept as text.
const FIXED_WINDOW: i64 = 3;
/// A sliding window log kept as text.
const LOG: i64 = 4;
const SLIDING_WINDOW_COUNTER: i64 = 5;
const GCRA: i64 = 6;
/// A fixed window kept as one integer.
const COUNTER: i64 = 7;
/// A sliding window log kept as a sorted set.
pub(super) const LOG_SET: i64 = 8;

impl Layout {
    /// The layout of a limit decided by `algorithm` under `quota`, kept in `tick`; fixed
    /// windows and logs are kept as text when `legacy` (and a fixed window also when its
    /// integers would not stay exact).
    pub(super) fn of(algorithm: Algorithm, quota: &Quota, tick: Tick, legacy: bool) -> Self {
        let scale = (algorithm == Algorithm::FixedWindow && !legacy)
            .then(|| tick.counter_scale(quota))
            .flatten();
        let code = match (algorithm, scale) {
            (_, Some(_)) => COUNTER,
            (Algorithm::TokenBucket, _) => TOKEN_BUCKET,
            (Algorithm::LeakyBucket, _) => LEAKY_BUCKET,
            (Algorithm::FixedWindow, _) => FIXED_WINDOW,
            (Algorithm::SlidingWindowLog, _) if !legacy => LOG_SET,
            (Algorithm::SlidingWindowLog, _) => LOG,
            (Algorithm::SlidingWindowCounter, _) => SLIDING_WINDOW_COUNTER,
            (Algorithm::Gcra, _) => GCRA,
        };
        Layout { code, scale, tick }
    }

    /// Whether this is a fixed window's layout (as text or as one integer).
    pub(super) fn is_window(self) -> bool {
        matches!(self.code, FIXED_WINDOW | COUNTER)
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

    /// The suffix of the state's key, in parts: the tick's unit, and `:n` for a counter, `:z`
    /// for a log kept as a sorted set.
    pub(super) fn suffix(self) -> [&'static str; 2] {
        let form = match self.code {
            COUNTER => ":n",
            LOG_SET => ":z",
            _ => "",
        };
        [self.tick.unit(), form]
    }
}
