//! What the limiter tells operators about its decisions.
//!
//! - A `debug` span per decision of a request that some limit applies to, with the domain
//!   and the limits that applied.
//! - A `warn` event when a request is denied (over a limit, or because the store failed under
//!   `on_store_error: deny`) and an `info` event when a shadow-mode limit would have denied
//!   one: each at most once a second per limit, carrying the number of events left out since
//!   the last one (`suppressed`), so a flood does not flood the logs.
//! - With the `metrics` feature, counters and a latency histogram (`instruments`).
//!
//! An [`Observer`] is made when rules are put in force, off the request path. Disabled levels
//! cost a level check; without the `metrics` feature nothing is measured.

#[cfg(feature = "metrics")]
mod instruments;
mod throttle;

use crate::algorithm::Decision;
use crate::clock::Clock;
use crate::decision::{Booking, Denial, Ruling, StoreFailure};
use crate::response;
use crate::rules::Rules;
use crate::store::StoreError;
use std::fmt;
use std::sync::Arc;
use throttle::LogThrottle;
use tracing::Level;

#[cfg(feature = "metrics")]
use instruments::{Instruments, Outcome};

/// The handle of a held slot's `tollgate_in_flight` series, to take it back down with;
/// empty without the `metrics` feature.
pub(crate) struct InFlightGauge {
    #[cfg(feature = "metrics")]
    gauge: Option<metrics::Gauge>,
}

impl InFlightGauge {
    /// Takes a given-back slot off its series.
    pub(crate) fn given_back(&self) {
        #[cfg(feature = "metrics")]
        if let Some(gauge) = &self.gauge {
            gauge.decrement(1.0);
        }
    }
}

/// Reports the decisions made under one set of rules: the log throttles of each limit and
/// the metric handles.
pub(crate) struct Observer {
    /// The time of the log throttles.
    clock: Arc<dyn Clock>,
    limits: Box<[LimitLogs]>,
    #[cfg(feature = "metrics")]
    instruments: Instruments,
}

// Padded to a cache line: in a flood, each denial writes to its limit's throttle, and one
// limit's writes must not slow its neighbours'.
#[derive(Debug, Default)]
#[repr(align(64))]
struct LimitLogs {
    denied: LogThrottle,
    store_denied: LogThrottle,
    shadow_denied: LogThrottle,
}

impl Observer {
    /// The observer of `rules`, its log throttles reading the time from `clock`. With the
    /// `metrics` feature, registers the metric handles of `rules` with the recorder installed
    /// now.
    pub(crate) fn new(rules: &Rules, clock: Arc<dyn Clock>) -> Self {
        Observer {
            clock,
            limits: rules.limits.iter().map(|_| LimitLogs::default()).collect(),
            #[cfg(feature = "metrics")]
            instruments: Instruments::register(rules),
        }
    }

    /// Reports the store's `decisions` on `bookings`, and the shadow denials among them.
    // Inline: without the `metrics` feature, a request that no shadow limit denied reports
    // nothing here, and should not pay for a call to learn it.
    #[inline]
    pub(crate) fn decided(
        &self,
        rules: &Rules,
        bookings: &[Booking],
        decisions: &[Decision],
        ruling: &Ruling,
    ) {
        let log_shadow_denials = ruling.is_shadow_denied() && tracing::enabled!(Level::INFO);
        for (booking, decision) in bookings.iter().zip(decisions) {
            #[cfg(feature = "metrics")]
            self.instruments.count(
                booking.limit_index,
                Outcome::of(decision, booking.shadow, ruling.is_allowed()),
            );
            if log_shadow_denials && booking.shadow && !decision.allowed {
                self.shadow_denied(rules, booking.limit_index);
            }
        }
    }

    /// Reports that the store could not decide `bookings`, and what their `on_store_error`
    /// policies made of the request, one `outcomes` each (the in-memory fallback reports
    /// its own decisions).
    pub(crate) fn store_failed(
        &self,
        rules: &Rules,
        bookings: &[Booking],
        outcomes: &[StoreFailure],
        error: &StoreError,
    ) {
        // At debug: the store reports its own failures, once per outage, and a denial that
        // follows is reported as one.
        tracing::debug!(
            domain = rules.domain(),
            limits = %Labels { rules, bookings },
            %error,
            "the rate-limit store failed; on_store_error decides"
        );
        let log_shadow_denials =
            outcomes.contains(&StoreFailure::ShadowDenied) && tracing::enabled!(Level::INFO);
        for (booking, &outcome) in bookings.iter().zip(outcomes) {
            if log_shadow_denials && outcome == StoreFailure::ShadowDenied {
                self.shadow_denied(rules, booking.limit_index);
            }
            #[cfg(feature = "metrics")]
            {
                self.instruments.count_store_error(booking.limit_index);
                let outcome = match outcome {
                    StoreFailure::Admitted => Outcome::Allowed,
                    StoreFailure::Denied => Outcome::Denied,
                    StoreFailure::ShadowDenied => Outcome::ShadowDenied,
                    // Counted by the fallback store's decision.
                    StoreFailure::Local => continue,
                };
                self.instruments.count(booking.limit_index, outcome);
            }
        }
    }

    /// Reports that the store failed to take a slot of concurrency limit `limit` (an index
    /// into the rules' limits): its `on_store_error` decides.
    pub(crate) fn slot_store_failed(&self, rules: &Rules, limit: usize, error: &StoreError) {
        // At debug: the store reports its own failures, once per outage.
        tracing::debug!(
            domain = rules.domain(),
            limit = rules.limits[limit].label(),
            %error,
            "the store failed to take a slot; on_store_error decides"
        );
        #[cfg(feature = "metrics")]
        self.instruments.count_store_error(limit);
    }

    /// Reports that concurrency limit `limit` (an index into the rules' limits) took a slot
    /// for a request: one more on its `tollgate_in_flight`, whose handle it returns.
    pub(crate) fn slot_taken(&self, limit: usize) -> InFlightGauge {
        #[cfg(not(feature = "metrics"))]
        let _ = limit;
        InFlightGauge {
            #[cfg(feature = "metrics")]
            gauge: self.instruments.slot_taken(limit),
        }
    }

    /// Reports what the concurrency limit `limit` decided of a request: `decision`, `shadow`
    /// when the limit only reports, `admitted` when the request as a whole was (so far).
    pub(crate) fn slot_decided(
        &self,
        rules: &Rules,
        limit: usize,
        shadow: bool,
        decision: &Decision,
        admitted: bool,
    ) {
        #[cfg(feature = "metrics")]
        self.instruments
            .count(limit, Outcome::of(decision, shadow, admitted));
        #[cfg(not(feature = "metrics"))]
        let _ = admitted;
        if shadow && !decision.allowed && tracing::enabled!(Level::INFO) {
            self.shadow_denied(rules, limit);
        }
    }

    /// Sets `tollgate_adaptive_limit{domain}` to `limit`, the adaptive limit a request met.
    #[cfg_attr(not(feature = "metrics"), allow(clippy::unused_self))]
    pub(crate) fn record_adaptive_limit(&self, limit: u32) {
        #[cfg(feature = "metrics")]
        self.instruments.record_adaptive_limit(limit);
        #[cfg(not(feature = "metrics"))]
        let _ = limit;
    }

    /// Sets `tollgate_tracked_keys{domain}` to `keys`.
    #[cfg(feature = "metrics")]
    pub(crate) fn record_tracked_keys(&self, keys: usize) {
        self.instruments.record_tracked_keys(keys);
    }

    /// Reports the end of a decision that started at `start`: its time, and the denial.
    #[inline]
    pub(crate) fn finished(&self, rules: &Rules, ruling: &Ruling, start: DecisionStart) {
        #[cfg(feature = "metrics")]
        self.instruments.record_decision_time(start.at.elapsed());
        #[cfg(not(feature = "metrics"))]
        let _ = start;
        if let Some(denial) = ruling.denial() {
            self.denied(rules, ruling, denial);
        }
    }

    fn denied(&self, rules: &Rules, ruling: &Ruling, denial: Denial) {
        let Some((index, decision)) = ruling.reported() else {
            return;
        };
        let domain = rules.domain();
        let limit = rules.limits[index].label();
        // As the client is told it (gRPC's pushback): rounded up. Worked out only for an
        // event that is logged: most denials log nothing.
        let retry_after_ms = || response::millis_at_least_one(decision.retry_after);
        if denial == Denial::OverLimit {
            tracing::debug!(
                domain,
                limit,
                retry_after_ms = retry_after_ms(),
                "rate limited"
            );
        }
        if !tracing::enabled!(Level::WARN) {
            return;
        }
        let logs = &self.limits[index];
        let throttle = match denial {
            // The load shedder's limit sheds and never limits a rate: one throttle serves.
            Denial::OverLimit | Denial::Shed => &logs.denied,
            Denial::StoreError => &logs.store_denied,
        };
        let Some(suppressed) = throttle.admit(self.clock.now()) else {
            return;
        };
        match denial {
            Denial::OverLimit => tracing::warn!(
                domain,
                limit,
                retry_after_ms = retry_after_ms(),
                suppressed,
                "rate limited: requests over this limit are denied"
            ),
            Denial::StoreError => tracing::warn!(
                domain,
                limit,
                retry_after_ms = retry_after_ms(),
                suppressed,
                "the rate-limit store failed: requests under this limit are denied (on_store_error: deny)"
            ),
            Denial::Shed => tracing::warn!(
                domain,
                retry_after_ms = retry_after_ms(),
                suppressed,
                "load shedding: the server is full for these requests' priority; they are turned away"
            ),
        }
    }

    /// Logs, throttled, that shadow-mode limit `index` would have denied a request.
    fn shadow_denied(&self, rules: &Rules, index: usize) {
        if let Some(suppressed) = self.limits[index].shadow_denied.admit(self.clock.now()) {
            tracing::info!(
                domain = rules.domain(),
                limit = rules.limits[index].label(),
                suppressed,
                "shadow mode: this limit would deny the request"
            );
        }
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Observer");
        debug.field("limits", &self.limits);
        #[cfg(feature = "metrics")]
        debug.field("instruments", &self.instruments);
        debug.finish_non_exhaustive()
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
    /// Now.
    #[inline]
    pub(crate) fn now() -> Self {
        DecisionStart {
            #[cfg(feature = "metrics")]
            at: quanta::Instant::now(),
        }
    }
}

/// Counts a reload of the rules file, successful or not: `tollgate_reloads_total{result}`,
/// `result` being `success` or `failure`. Does nothing without the `metrics` feature.
#[cfg_attr(not(feature = "reload"), allow(dead_code))]
pub(crate) fn record_reload(ok: bool) {
    #[cfg(feature = "metrics")]
    instruments::record_reload(ok);
    #[cfg(not(feature = "metrics"))]
    let _ = ok;
}

/// The span of one decision: `debug`, with the domain and the labels of the limits that
/// apply; `None` when no subscriber wants it.
#[inline]
pub(crate) fn decision_span(rules: &Rules, bookings: &[Booking]) -> Option<tracing::Span> {
    // Asked first: a disabled span is still made, entered and dropped on every request, and
    // even `Span::none()` runs code to be entered and dropped.
    if !tracing::enabled!(target: "tollgate::observe", tracing::Level::DEBUG) {
        return None;
    }
    enabled_decision_span(rules, bookings)
}

/// [`decision_span`] once a subscriber wants it. The labels are written only then.
fn enabled_decision_span(rules: &Rules, bookings: &[Booking]) -> Option<tracing::Span> {
    Some(tracing::debug_span!(
        "rate_limit",
        domain = rules.domain(),
        limits = %Labels { rules, bookings }
    ))
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
            f.write_str(self.rules.limits[booking.limit_index].label())?;
        }
        Ok(())
    }
}
