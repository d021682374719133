//! What the limiter tells operators about its decisions.
//!
//! - A `debug` span per decision, with the domain and the limits that applied.
//! - A `warn` event when a request is denied and an `info` event when a shadow-mode limit
//!   would have denied one: each at most once a second per limit, carrying the number of
//!   events left out since the last one (`suppressed`), so a flood does not flood the logs.
//! - With the `metrics` feature, counters and a latency histogram ([`crate::metrics`]).
//!
//! Disabled levels cost a level check; without the `metrics` feature nothing is measured.

mod throttle;

use crate::algorithm::Decision;
use crate::limiter::{Booking, Verdict};
use crate::rules::Rules;
use crate::store::StoreError;
use std::fmt;
use std::sync::OnceLock;
use throttle::LogThrottle;
use tracing::Level;

#[cfg(feature = "metrics")]
use crate::metrics::{DecisionMetrics, Outcome};

/// What one set of rules keeps for reporting: the log throttles of each limit and the
/// metric handles. Made on the first decision under the rules.
#[derive(Debug)]
pub(crate) struct Observer {
    limits: Box<[LimitLogs]>,
    #[cfg(feature = "metrics")]
    metrics: DecisionMetrics,
}

#[derive(Debug)]
struct LimitLogs {
    denied: LogThrottle,
    shadow_denied: LogThrottle,
}

impl Observer {
    fn new(rules: &Rules) -> Self {
        let limits = rules
            .limits()
            .iter()
            .map(|_| LimitLogs {
                denied: LogThrottle::new(),
                shadow_denied: LogThrottle::new(),
            })
            .collect();
        Observer {
            limits,
            #[cfg(feature = "metrics")]
            metrics: DecisionMetrics::register(rules),
        }
    }
}

/// The [`Observer`] of one set of rules, made when first needed. A clone of the rules starts
/// with its own.
#[derive(Default)]
pub(crate) struct ObserverCell(OnceLock<Observer>);

impl ObserverCell {
    /// The observer of `rules` (the rules holding this cell).
    pub(crate) fn get(&self, rules: &Rules) -> &Observer {
        self.0.get_or_init(|| Observer::new(rules))
    }
}

impl Clone for ObserverCell {
    fn clone(&self) -> Self {
        ObserverCell::default()
    }
}

impl fmt::Debug for ObserverCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObserverCell").finish_non_exhaustive()
    }
}

/// When a decision started, for `tollgate_decision_seconds`; nothing without the `metrics`
/// feature.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecisionStart {
    #[cfg(feature = "metrics")]
    at: quanta::Instant,
}

impl DecisionStart {
    /// Now, for a decision under `rules`.
    #[inline]
    pub(crate) fn now(rules: &Rules) -> Self {
        // The first decision under new rules registers their metrics: not part of its time.
        #[cfg(feature = "metrics")]
        rules.observer();
        #[cfg(not(feature = "metrics"))]
        let _ = rules;
        DecisionStart {
            #[cfg(feature = "metrics")]
            at: quanta::Instant::now(),
        }
    }
}

/// The span of one decision: `debug`, with the domain and the labels of the limits that apply.
pub(crate) fn decision_span(rules: &Rules, bookings: &[Booking]) -> tracing::Span {
    // The labels are written only when the span is enabled.
    tracing::debug_span!(
        "rate_limit",
        domain = rules.domain(),
        limits = %Labels { rules, bookings }
    )
}

/// Reports the store's `decisions` on `bookings`, and the shadow denials among them.
pub(crate) fn decided(
    rules: &Rules,
    bookings: &[Booking],
    decisions: &[Decision],
    verdict: &Verdict,
) {
    #[cfg(feature = "metrics")]
    {
        let metrics = &rules.observer().metrics;
        for (booking, decision) in bookings.iter().zip(decisions) {
            let outcome = match (decision.allowed, booking.shadow) {
                (false, false) => Outcome::Denied,
                (false, true) => Outcome::ShadowDenied,
                (true, false) if verdict.is_allowed() && !decision.delay.is_zero() => {
                    Outcome::Delayed
                }
                (true, _) => Outcome::Allowed,
            };
            metrics.count(booking.limit, outcome);
        }
    }
    if verdict.is_shadow_denied() && tracing::enabled!(Level::INFO) {
        let observer = rules.observer();
        let shadow_denials = bookings
            .iter()
            .zip(decisions)
            .filter(|(booking, decision)| booking.shadow && !decision.allowed);
        for (booking, _) in shadow_denials {
            if let Some(suppressed) = observer.limits[booking.limit].shadow_denied.admit() {
                tracing::info!(
                    domain = rules.domain(),
                    limit = rules.limits[booking.limit].label(),
                    suppressed,
                    "shadow mode: this limit would deny the request"
                );
            }
        }
    }
}

/// Reports that the store could not decide `bookings`; `fail_closed` when the request is
/// denied for it.
pub(crate) fn store_failed(
    rules: &Rules,
    bookings: &[Booking],
    error: &StoreError,
    fail_closed: bool,
) {
    #[cfg(feature = "metrics")]
    {
        let metrics = &rules.observer().metrics;
        for booking in bookings {
            metrics.count_store_error(booking.limit);
        }
    }
    // At debug: the store reports its own failures, once per outage, and a denial that
    // follows is reported as one.
    tracing::debug!(
        domain = rules.domain(),
        limits = %Labels { rules, bookings },
        %error,
        fail_closed,
        "the rate-limit store failed; on_store_error decides"
    );
}

/// Reports the end of a decision that started at `start`: its time, and the denial.
#[inline]
pub(crate) fn finished(rules: &Rules, verdict: &Verdict, start: DecisionStart) {
    #[cfg(feature = "metrics")]
    rules
        .observer()
        .metrics
        .record_decision_time(start.at.elapsed());
    #[cfg(not(feature = "metrics"))]
    let _ = start;
    if !verdict.is_allowed() {
        denied(rules, verdict);
    }
}

fn denied(rules: &Rules, verdict: &Verdict) {
    let (Some(index), Some(decision)) = (verdict.limit_index(), verdict.decision()) else {
        return;
    };
    let limit = &rules.limits[index];
    let retry_after_ms = u64::try_from(decision.retry_after.as_millis()).unwrap_or(u64::MAX);
    tracing::debug!(
        domain = rules.domain(),
        limit = limit.label(),
        retry_after_ms,
        "rate limited"
    );
    if !tracing::enabled!(Level::WARN) {
        return;
    }
    if let Some(suppressed) = rules.observer().limits[index].denied.admit() {
        tracing::warn!(
            domain = rules.domain(),
            limit = limit.label(),
            retry_after_ms,
            suppressed,
            "rate limited: requests over this limit are denied"
        );
    }
}

/// The labels of the limits booked, comma-separated, written on demand.
struct Labels<'a> {
    rules: &'a Rules,
    bookings: &'a [Booking],
}

impl fmt::Display for Labels<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, booking) in self.bookings.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(self.rules.limits[booking.limit].label())?;
        }
        Ok(())
    }
}
