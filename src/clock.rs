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

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time, in nanoseconds since the Unix epoch.
///
/// Wall-clock time (not a monotonic instant) because fixed windows are aligned to the unit:
/// a minute window starts at `:00`, on every server.
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

/// The wall clock, read cheaply.
///
/// Reading the operating system's clock costs tens of nanoseconds on every decision (more
/// on virtual machines). This clock reads the CPU's time-stamp counter instead (through
/// `quanta`, as governor does) and adds the offset to the operating system's wall clock,
/// taken again every second so that the two never drift apart by more than a second's
/// worth of clock correction (microseconds).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

/// The counter, and the wall clock's offset from it.
struct WallClock {
    counter: quanta::Clock,
    start: u64,
    /// Wall-clock nanoseconds minus counter nanoseconds since `start`.
    offset: AtomicU64,
    /// Counter nanoseconds at which the offset was last taken.
    synced_at: AtomicU64,
}

/// How often the offset to the operating system's clock is taken again.
const RESYNC_NANOS: u64 = 1_000_000_000;

impl WallClock {
    #[inline]
    fn get() -> &'static WallClock {
        static CLOCK: OnceLock<WallClock> = OnceLock::new();
        CLOCK.get_or_init(|| {
            let counter = quanta::Clock::new();
            let start = counter.raw();
            let clock = WallClock {
                counter,
                start,
                offset: AtomicU64::new(0),
                synced_at: AtomicU64::new(0),
            };
            clock.sync(0);
            clock
        })
    }

    #[inline]
    fn elapsed(&self) -> u64 {
        self.counter.delta_as_nanos(self.start, self.counter.raw())
    }

    fn sync(&self, elapsed: u64) {
        self.offset
            .store(os_wall_clock().wrapping_sub(elapsed), Ordering::Relaxed);
        self.synced_at.store(elapsed, Ordering::Relaxed);
    }

    #[inline]
    fn now(&self) -> Nanos {
        let elapsed = self.elapsed();
        if elapsed.wrapping_sub(self.synced_at.load(Ordering::Relaxed)) >= RESYNC_NANOS {
            // Racy by design: two threads may both take the offset; either result is right.
            self.sync(elapsed);
        }
        Nanos(elapsed.wrapping_add(self.offset.load(Ordering::Relaxed)))
    }
}

/// `duration` in nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) fn saturating_nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The operating system's wall clock, in nanoseconds since the epoch.
fn os_wall_clock() -> u64 {
    // A clock set before 1970 reads as the epoch rather than panicking.
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    saturating_nanos(since_epoch)
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Nanos {
        WallClock::get().now()
    }
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
    fn system_clock_follows_the_operating_system_clock() {
        for _ in 0..1_000 {
            let before = os_wall_clock();
            let now = SystemClock.now().as_u64();
            let after = os_wall_clock();
            // Within a millisecond of the operating system's clock, either way.
            assert!(
                now + 1_000_000 >= before && now <= after + 1_000_000,
                "{before} <= {now} <= {after}"
            );
        }
    }

    #[test]
    fn since_saturates_instead_of_underflowing() {
        assert_eq!(Nanos::new(5).since(Nanos::new(9)), Duration::ZERO);
    }
}
