//! A circuit breaker: after a run of failures, stop asking Redis for a while.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counts consecutive failures; opens after `threshold` of them and stays open for
/// `cooldown`, during which calls fail at once. The first call after the cooldown goes
/// through (half-open): success closes the breaker, failure opens it again. Each transition
/// is logged once.
#[derive(Debug)]
pub(super) struct Breaker {
    threshold: u32,
    cooldown: Duration,
    started: Instant,
    failures: AtomicU32,
    /// Nanoseconds after `started` until which the breaker is open.
    open_until: AtomicU64,
    open: AtomicBool,
}

impl Breaker {
    pub(super) fn new(threshold: u32, cooldown: Duration) -> Self {
        Breaker {
            threshold: threshold.max(1),
            cooldown,
            started: Instant::now(),
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            open: AtomicBool::new(false),
        }
    }

    fn elapsed(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether a call may go to Redis now.
    pub(super) fn allows(&self) -> bool {
        self.elapsed() >= self.open_until.load(Ordering::Relaxed)
    }

    pub(super) fn succeeded(&self) {
        self.failures.store(0, Ordering::Relaxed);
        if self.open.swap(false, Ordering::Relaxed) {
            tracing::info!("redis answers again: rate limits are shared again");
        }
    }

    pub(super) fn failed(&self, error: &dyn std::fmt::Display) {
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures < self.threshold {
            tracing::debug!(%error, failures, "redis call failed");
            return;
        }
        let cooldown = u64::try_from(self.cooldown.as_nanos()).unwrap_or(u64::MAX);
        self.open_until
            .store(self.elapsed().saturating_add(cooldown), Ordering::Relaxed);
        if !self.open.swap(true, Ordering::Relaxed) {
            tracing::error!(%error, cooldown_ms = self.cooldown.as_millis() as u64, "redis keeps failing: rate-limit failure policies apply until it answers");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_the_threshold_and_closes_on_success() {
        let breaker = Breaker::new(2, Duration::from_secs(3_600));
        breaker.failed(&"down");
        assert!(breaker.allows(), "one failure is not a run");
        breaker.failed(&"down");
        assert!(!breaker.allows(), "open: calls fail at once");
        breaker.succeeded();
        breaker.open_until.store(0, Ordering::Relaxed);
        assert!(breaker.allows());
    }

    #[test]
    fn half_opens_after_the_cooldown() {
        let breaker = Breaker::new(1, Duration::ZERO);
        breaker.failed(&"down");
        assert!(breaker.allows(), "a zero cooldown lets the next call try");
    }
}
