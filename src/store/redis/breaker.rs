//! A circuit breaker: after a run of failures, stop asking Redis for a while.

use crate::clock::saturating_nanos;
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
    /// Nanoseconds after `started` until which the breaker is open ([`CLOSED`] when closed).
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
            open_until: AtomicU64::new(CLOSED),
            open: AtomicBool::new(false),
        }
    }

    fn elapsed(&self) -> u64 {
        saturating_nanos(self.started.elapsed())
    }

    /// Whether a call may go to Redis now: always while closed; never while open; once the
    /// cooldown is over, to exactly one caller (the probe), until its answer comes.
    pub(super) fn allows(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        if until == CLOSED {
            return true;
        }
        let now = self.elapsed();
        if now < until {
            return false;
        }
        // The first caller past the cooldown wins the probe; the others keep failing fast.
        let probe_until = now.saturating_add(self.cooldown_nanos()).max(1);
        self.open_until
            .compare_exchange(until, probe_until, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Whether the breaker is open and its cooldown not over (no probe is taken).
    pub(super) fn is_open(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        until != CLOSED && self.elapsed() < until
    }

    /// Ends the cooldown now, when there is reason to think Redis answers again (behind
    /// sentinels: a new master was found): the next call probes, as after the cooldown.
    pub(super) fn probe_now(&self) {
        let until = self.open_until.load(Ordering::Acquire);
        if until != CLOSED {
            let now = self.elapsed().max(1);
            let _ = self.open_until.compare_exchange(
                until,
                now.min(until),
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
    }

    pub(super) fn succeeded(&self) {
        self.failures.store(0, Ordering::Relaxed);
        self.open_until.store(CLOSED, Ordering::Release);
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
        let until = self.elapsed().saturating_add(self.cooldown_nanos()).max(1);
        self.open_until.store(until, Ordering::Release);
        if !self.open.swap(true, Ordering::Relaxed) {
            tracing::error!(%error, cooldown_ms = self.cooldown.as_millis() as u64, "redis keeps failing: rate-limit failure policies apply until it answers");
        }
    }

    fn cooldown_nanos(&self) -> u64 {
        saturating_nanos(self.cooldown)
    }
}

/// `open_until` of a closed breaker.
const CLOSED: u64 = 0;

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
        assert!(breaker.allows());
    }

    #[test]
    fn half_opens_for_one_probe_after_the_cooldown() {
        let breaker = Breaker::new(1, Duration::from_millis(20));
        breaker.failed(&"down");
        assert!(!breaker.allows());
        std::thread::sleep(Duration::from_millis(25));
        assert!(breaker.allows(), "the first call after the cooldown probes");
        assert!(!breaker.allows(), "the others wait for the probe's answer");
        breaker.succeeded();
        assert!(breaker.allows() && breaker.allows(), "closed again");
    }

    #[test]
    fn probe_now_ends_the_cooldown_for_one_probe() {
        let breaker = Breaker::new(1, Duration::from_secs(3_600));
        breaker.probe_now();
        assert!(
            breaker.allows() && breaker.allows(),
            "closed: nothing to end"
        );
        breaker.failed(&"down");
        assert!(!breaker.allows(), "open for an hour");
        breaker.probe_now();
        assert!(breaker.allows(), "the next call probes at once");
        assert!(!breaker.allows(), "the others wait for the probe's answer");
    }
}
