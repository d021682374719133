//! Where the current time comes from.
//!
//! Algorithms never read a clock: a store asks its [`Clock`] once per decision and passes the
//! time in. Tests use [`ManualClock`] and move time by hand instead of sleeping.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::clock::{Clock, ManualClock};
//!
//! let clock = ManualClock::new();
//! let start = clock.now();
//! clock.advance(Duration::from_secs(2));
//! assert_eq!(clock.now().since(start), Duration::from_secs(2));
//! ```
//!
//! # Time that never steps
//!
//! [`SystemClock`], the clock of the memory store, the limiter and the client layer, reads the
//! wall clock once, at its first use, and counts on from there on a monotonic clock: an
//! [`AnchoredClock`]. Windows stay aligned to their unit (a minute window starts at `:00`
//! of the wall clock as it was at start), and when NTP, an administrator or a virtual
//! machine resumed from a snapshot steps the wall clock, decisions neither wait for the
//! step (a step back by an hour does not deny everyone for an hour) nor gain from it (a step
//! forward refills nobody). The process's time then differs from the wall clock by the step
//! until it restarts. The [operations guide](crate::guide::operations#time-and-clock-steps)
//! says what a step does to each store.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A point in time, in nanoseconds since the Unix epoch.
///
/// Wall-clock time (not a monotonic instant) because fixed windows are aligned to the unit:
/// a minute window starts at `:00`, on every server. [`SystemClock`] reads the wall clock
/// once, at start, and counts on monotonically: after a step of the wall clock, its time
/// stays on the clock as it was at start, apart from the wall clock by the step until the
/// process restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(u64);

impl Nanos {
    /// The epoch itself.
    pub const ZERO: Nanos = Nanos(0);

    /// A time `nanos` nanoseconds after the epoch.
    pub const fn new(nanos: u64) -> Self {
        Nanos(nanos)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Nanos) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self` moved forward by `nanos`, saturating at the far future.
    pub const fn plus(self, nanos: u64) -> Nanos {
        Nanos(self.0.saturating_add(nanos))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Nanos;
}

/// The wall clock as it was at the first reading, counted on by a monotonic clock.
///
/// The first [`now`](Clock::now) in the process reads the operating system's wall clock;
/// every reading after that is that time plus the time elapsed since on a monotonic clock
/// (an [`AnchoredClock`]). So its time never goes back, and a step of the wall clock (NTP
/// correcting a large error, an administrator, a virtual machine resumed from a snapshot)
/// changes nothing here: the process's time stays apart from the wall clock by the step
/// until it restarts. NTP's gradual corrections (slewing) reach it as they reach the wall
/// clock.
///
/// The monotonic clock is the CPU's time-stamp counter, read through `quanta` as governor
/// does (reading the operating system's clock costs tens of nanoseconds, more on virtual
/// machines), set again every second to the operating system's monotonic clock
/// ([`Instant`], which NTP slews but never steps) so that the counter's drift never adds up.
/// A correction that would move the time back holds it still instead, for as long as the
/// correction (microseconds), until the counter catches up.
///
/// ```
/// use tollgate::clock::{Clock, Nanos, SystemClock};
///
/// let first = SystemClock.now();
/// assert!(first > Nanos::new(1_577_836_800 * 1_000_000_000)); // after 2020
/// assert!(SystemClock.now() >= first);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Nanos {
        static CLOCK: OnceLock<AnchoredClock<CpuCounter>> = OnceLock::new();
        CLOCK
            .get_or_init(|| AnchoredClock::new(&OsWallClock, CpuCounter::new()))
            .now()
    }
}

/// Wall-clock time, read once, then counted on by a monotonic clock.
///
/// Made from two clocks: `wall` is read once, by [`AnchoredClock::new`]; after that, the time
/// is that reading plus the time `monotonic` has counted since. A window therefore stays
/// aligned to the wall clock as it was when the clock was made, and a step of `wall` changes
/// nothing. [`SystemClock`] is one, on the operating system's clocks; tests make one from two
/// [`ManualClock`]s to step the "wall" and see that decisions do not move. `monotonic` must
/// never go back: this clock's time moves exactly as `monotonic`'s does (and stands at the
/// anchor while `monotonic` is behind where it was at the start).
///
/// ```
/// use std::time::Duration;
/// use tollgate::clock::{AnchoredClock, Clock, ManualClock, Nanos};
///
/// let wall = ManualClock::new();
/// let monotonic = ManualClock::starting_at(Nanos::ZERO);
/// let clock = AnchoredClock::new(&wall, monotonic.clone());
/// assert_eq!(clock.now(), wall.now());
///
/// // NTP steps the wall clock back by an hour, while a second goes by.
/// wall.set(Nanos::new(wall.now().as_u64() - 3_600_000_000_000));
/// monotonic.advance(Duration::from_secs(1));
/// assert_eq!(clock.now(), ManualClock::START.plus(1_000_000_000));
/// ```
#[derive(Debug, Clone)]
pub struct AnchoredClock<M> {
    /// The wall clock's time when this clock was made.
    wall_at_anchor: Nanos,
    /// `monotonic`'s time when this clock was made.
    monotonic_at_anchor: Nanos,
    monotonic: M,
}

impl<M: Clock> AnchoredClock<M> {
    /// A clock that reads `wall` now, once, and from then on counts on with `monotonic`.
    pub fn new<W: Clock + ?Sized>(wall: &W, monotonic: M) -> Self {
        let monotonic_at_anchor = monotonic.now();
        AnchoredClock {
            wall_at_anchor: wall.now(),
            monotonic_at_anchor,
            monotonic,
        }
    }
}

impl<M: Clock> Clock for AnchoredClock<M> {
    #[inline]
    fn now(&self) -> Nanos {
        let elapsed = self
            .monotonic
            .now()
            .0
            .saturating_sub(self.monotonic_at_anchor.0);
        self.wall_at_anchor.plus(elapsed)
    }
}

/// The operating system's wall clock ([`SystemTime`]), read where a [`Clock`] is expected.
struct OsWallClock;

impl Clock for OsWallClock {
    fn now(&self) -> Nanos {
        // A clock set before 1970 reads as the epoch rather than panicking.
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Nanos(saturating_nanos(since_epoch))
    }
}

/// The CPU's counter, kept to the operating system's monotonic clock: nanoseconds since it
/// was made. Its corrections never move it back.
struct CpuCounter {
    counter: quanta::Clock,
    counter_start: u64,
    monotonic_start: Instant,
    time: CorrectedCounter,
}

impl CpuCounter {
    fn new() -> Self {
        let counter = quanta::Clock::new();
        CpuCounter {
            counter_start: counter.raw(),
            counter,
            monotonic_start: Instant::now(),
            time: CorrectedCounter::new(0, 0),
        }
    }
}

impl Clock for CpuCounter {
    #[inline]
    fn now(&self) -> Nanos {
        let counter = self
            .counter
            .delta_as_nanos(self.counter_start, self.counter.raw());
        let monotonic = || saturating_nanos(self.monotonic_start.elapsed());
        Nanos(self.time.at(counter, monotonic))
    }
}

/// How often the counter is set again to the operating system's monotonic clock.
const CORRECTION_INTERVAL_NANOS: u64 = 1_000_000_000;

/// Counter nanoseconds turned into monotonic ones: the counter plus its offset to the
/// monotonic clock, taken again every [`CORRECTION_INTERVAL_NANOS`] of the counter. The
/// readings come from the caller, so that tests can make the counter drift.
struct CorrectedCounter {
    /// Monotonic minus counter nanoseconds at the last correction (two's complement).
    offset: AtomicU64,
    /// The time at the last correction, as the offset before it gave it: the time stands
    /// here while a correction back has not been caught up.
    floor: AtomicU64,
    /// Counter nanoseconds at the last correction.
    corrected_at: AtomicU64,
}

impl CorrectedCounter {
    /// Starts with the counter reading `counter` while the monotonic clock reads `monotonic`.
    fn new(counter: u64, monotonic: u64) -> Self {
        CorrectedCounter {
            offset: AtomicU64::new(monotonic.wrapping_sub(counter)),
            floor: AtomicU64::new(0),
            corrected_at: AtomicU64::new(counter),
        }
    }

    /// The time when the counter reads `counter`; `monotonic` reads the monotonic clock,
    /// only when a correction is due.
    #[inline]
    fn at(&self, counter: u64, monotonic: impl FnOnce() -> u64) -> u64 {
        let corrected_at = self.corrected_at.load(Ordering::Relaxed);
        // Wrapping: a counter that jumped back (a virtual machine moved to another host)
        // is corrected at once.
        if counter.wrapping_sub(corrected_at) >= CORRECTION_INTERVAL_NANOS {
            self.correct(corrected_at, counter, monotonic);
        }
        // Acquire pairs with the correction's Release: whoever sees the new offset sees the
        // floor that goes with it.
        let offset = self.offset.load(Ordering::Acquire);
        let floor = self.floor.load(Ordering::Relaxed);
        counter.wrapping_add(offset).max(floor)
    }

    #[cold]
    #[inline(never)]
    fn correct(&self, corrected_at: u64, counter: u64, monotonic: impl FnOnce() -> u64) {
        // One thread corrects; the others go on with the offset they have. (Readings on
        // different threads are not ordered anyway: a store decides them in the order they
        // take its lock, which may differ from the order of their clock readings.)
        let claimed = self.corrected_at.compare_exchange(
            corrected_at,
            counter,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        if claimed.is_err() {
            return;
        }
        let monotonic = monotonic();
        let offset = self.offset.load(Ordering::Relaxed);
        let floor = self.floor.load(Ordering::Relaxed);
        self.floor
            .store(counter.wrapping_add(offset).max(floor), Ordering::Relaxed);
        self.offset
            .store(monotonic.wrapping_sub(counter), Ordering::Release);
    }
}

/// `duration` in nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) fn saturating_nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A clock that moves only when told to; clones share one time.
///
/// Starts at a whole day after the epoch, so windows of every unit up to a day begin at
/// the start time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// The start time of a new manual clock.
    pub const START: Nanos = Nanos(86_400 * 1_000_000_000);

    /// A clock standing at [`ManualClock::START`].
    pub fn new() -> Self {
        Self::starting_at(Self::START)
    }

    /// A clock standing at `start`.
    pub fn starting_at(start: Nanos) -> Self {
        ManualClock {
            now: Arc::new(AtomicU64::new(start.0)),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let nanos = saturating_nanos(by);
        self.now.fetch_add(nanos, Ordering::SeqCst);
    }

    /// Sets the clock to `to` (which may be earlier than now).
    pub fn set(&self, to: Nanos) {
        self.now.store(to.0, Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        Nanos(self.now.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;
    const HOUR: u64 = 3_600 * SECOND;

    #[test]
    fn manual_clock_clones_share_time() {
        let clock = ManualClock::new();
        let other = clock.clone();
        clock.advance(Duration::from_millis(1500));
        assert_eq!(other.now(), ManualClock::START.plus(1_500_000_000));
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now() > Nanos::new(1_577_836_800 * 1_000_000_000));
    }

    #[test]
    fn system_clock_starts_on_the_operating_system_clock() {
        for _ in 0..1_000 {
            let before = OsWallClock.now().as_u64();
            let now = SystemClock.now().as_u64();
            let after = OsWallClock.now().as_u64();
            // Within a millisecond of the operating system's clock, either way, as long as
            // nobody steps the machine's clock while the tests run.
            assert!(
                now + 1_000_000 >= before && now <= after + 1_000_000,
                "{before} <= {now} <= {after}"
            );
        }
    }

    #[test]
    fn an_anchored_clock_counts_on_from_the_wall_clock_and_ignores_its_steps() {
        let wall = ManualClock::new();
        let monotonic = ManualClock::starting_at(Nanos::new(42));
        let clock = AnchoredClock::new(&wall, monotonic.clone());
        assert_eq!(clock.now(), ManualClock::START);

        wall.set(Nanos::new(ManualClock::START.as_u64() - HOUR));
        monotonic.advance(Duration::from_secs(1));
        assert_eq!(clock.now(), ManualClock::START.plus(SECOND));

        wall.advance(Duration::from_secs(2 * 3_600));
        monotonic.advance(Duration::from_secs(1));
        assert_eq!(clock.now(), ManualClock::START.plus(2 * SECOND));
    }

    #[test]
    fn an_anchored_clock_clone_keeps_the_anchor() {
        let wall = ManualClock::new();
        let monotonic = ManualClock::starting_at(Nanos::ZERO);
        let clock = AnchoredClock::new(&wall, monotonic.clone());
        wall.advance(Duration::from_secs(3_600));
        let clone = clock.clone();
        monotonic.advance(Duration::from_secs(1));
        assert_eq!(clone.now(), clock.now());
    }

    /// A monotonic reading for a correction that is not due.
    fn not_due() -> u64 {
        panic!("the monotonic clock was read before a correction was due")
    }

    #[test]
    fn the_counter_is_corrected_once_a_second() {
        let time = CorrectedCounter::new(0, 0);
        assert_eq!(time.at(SECOND - 1, not_due), SECOND - 1);
        assert_eq!(time.at(SECOND, || SECOND + 7), SECOND + 7);
        assert_eq!(time.at(2 * SECOND - 1, not_due), 2 * SECOND + 6);
        assert_eq!(time.at(2 * SECOND, || 2 * SECOND + 7), 2 * SECOND + 7);
    }

    #[test]
    fn a_correction_back_holds_the_time_still_instead_of_going_back() {
        let time = CorrectedCounter::new(0, 0);
        assert_eq!(time.at(SECOND / 2, not_due), SECOND / 2);
        // Over the first second, the counter ran 100 µs fast.
        let fast = 100_000;
        assert_eq!(time.at(SECOND, || SECOND - fast), SECOND);
        assert_eq!(time.at(SECOND + fast / 2, not_due), SECOND);
        assert_eq!(time.at(SECOND + fast, not_due), SECOND);
        assert_eq!(time.at(SECOND + 2 * fast, not_due), SECOND + fast);
    }

    #[test]
    fn a_correction_forward_moves_the_time_forward() {
        let time = CorrectedCounter::new(0, 0);
        // Over the first second, the counter ran 100 µs slow.
        assert_eq!(time.at(SECOND, || SECOND + 100_000), SECOND + 100_000);
        assert_eq!(time.at(SECOND + 1, not_due), SECOND + 100_001);
    }

    #[test]
    fn a_counter_that_jumped_back_is_corrected_at_once_and_never_goes_back() {
        let time = CorrectedCounter::new(0, 0);
        assert_eq!(time.at(SECOND, || SECOND), SECOND);
        // The counter is behind its last correction (a virtual machine moved to a host whose
        // counter is behind), and the monotonic clock went on 10 ns.
        assert_eq!(time.at(SECOND / 2, || SECOND + 10), SECOND + 10);
        assert_eq!(time.at(SECOND / 2 + 5, not_due), SECOND + 15);
    }

    #[test]
    fn since_saturates_instead_of_underflowing() {
        assert_eq!(Nanos::new(5).since(Nanos::new(9)), Duration::ZERO);
    }
}
