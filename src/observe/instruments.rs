//! The metric handles, through the [`metrics`] facade (feature `metrics`); the names are
//! listed in the guide (`crate::guide::operations`).
//!
//! A decision formats no name or label: the handles of every limit are registered when the
//! rules are put in force, with the recorder installed then. Labels are the domain and the
//! limit's label (its `name`, else its descriptor path), never a request value, so the rules
//! bound the number of series.

use crate::algorithm::Decision;
use crate::rules::{MaxInFlight, Rules};
use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
    Gauge, Histogram, Label, Unit,
};
use std::time::Duration;

const REQUESTS: &str = "tollgate_requests_total";
const STORE_ERRORS: &str = "tollgate_store_errors_total";
const DECISION_SECONDS: &str = "tollgate_decision_seconds";
const TRACKED_KEYS: &str = "tollgate_tracked_keys";
const RELOADS: &str = "tollgate_reloads_total";
const IN_FLIGHT: &str = "tollgate_in_flight";
const ADAPTIVE_LIMIT: &str = "tollgate_adaptive_limit";

/// What one limit made of one request: exactly one per limit that applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It admitted the request at once (the request may still have been denied by another
    /// limit, in which case it was not charged).
    Allowed,
    /// It denied the request.
    Denied,
    /// It would have denied the request, but is in shadow mode.
    ShadowDenied,
    /// A shaping leaky bucket queued the admitted request.
    Delayed,
    /// A shaping leaky bucket in shadow mode would have queued the admitted request.
    ShadowDelayed,
}

impl Outcome {
    /// What a limit made of a request from its store `decision`: `shadow` when the limit only
    /// reports, `admitted` when the request as a whole was admitted.
    pub(crate) fn of(decision: &Decision, shadow: bool, admitted: bool) -> Outcome {
        // A request denied elsewhere was queued nowhere: its places were not booked.
        let queued = admitted && !decision.delay.is_zero();
        match (decision.allowed, shadow, queued) {
            (false, false, _) => Outcome::Denied,
            (false, true, _) => Outcome::ShadowDenied,
            (true, false, true) => Outcome::Delayed,
            (true, true, true) => Outcome::ShadowDelayed,
            (true, _, false) => Outcome::Allowed,
        }
    }
}

/// The handles of one set of rules: per limit, in the order of [`Rules::limits`].
#[derive(Debug)]
pub(crate) struct Instruments {
    limits: Box<[LimitInstruments]>,
    decision_seconds: Histogram,
    tracked_keys: Gauge,
    /// The adaptive limit found, when the rules' load shedding has one.
    adaptive_limit: Gauge,
}

#[derive(Debug)]
struct LimitInstruments {
    allowed: Counter,
    denied: Counter,
    shadow_denied: Counter,
    delayed: Counter,
    shadow_delayed: Counter,
    store_errors: Counter,
    /// A concurrency limit's requests in flight.
    in_flight: Option<Gauge>,
}

impl Instruments {
    /// Registers the handles of `rules` with the recorder installed now.
    pub(crate) fn register(rules: &Rules) -> Self {
        describe();
        let domain = Label::new("domain", rules.domain().to_owned());
        let limits = rules
            .limits
            .iter()
            .map(|limit| {
                // `unlimited` entries decide nothing: no series that never move.
                if limit.quota().is_none() && limit.max_in_flight().is_none() {
                    return LimitInstruments::noop();
                }
                let labels = vec![
                    domain.clone(),
                    Label::new("limit", limit.label().to_owned()),
                ];
                let requests = |outcome: &'static str| {
                    let mut labels = labels.clone();
                    labels.push(Label::new("outcome", outcome));
                    counter!(REQUESTS, labels)
                };
                LimitInstruments {
                    allowed: requests("allowed"),
                    denied: requests("denied"),
                    shadow_denied: requests("shadow_denied"),
                    delayed: requests("delayed"),
                    shadow_delayed: requests("shadow_delayed"),
                    store_errors: counter!(STORE_ERRORS, labels.clone()),
                    in_flight: limit
                        .max_in_flight()
                        .map(|_| gauge!(IN_FLIGHT, labels.clone())),
                }
            })
            .collect();
        Instruments {
            limits,
            decision_seconds: histogram!(DECISION_SECONDS, vec![domain.clone()]),
            tracked_keys: gauge!(TRACKED_KEYS, vec![domain.clone()]),
            adaptive_limit: match rules.load_shedding.as_ref().map(|s| s.max_in_flight) {
                Some(MaxInFlight::Adaptive(_)) => gauge!(ADAPTIVE_LIMIT, vec![domain]),
                _ => Gauge::noop(),
            },
        }
    }

    /// Sets `tollgate_adaptive_limit{domain}`.
    pub(crate) fn record_adaptive_limit(&self, limit: u32) {
        self.adaptive_limit.set(f64::from(limit));
    }

    /// Sets `tollgate_tracked_keys{domain}`.
    pub(crate) fn record_tracked_keys(&self, keys: usize) {
        // Precise below 2^53 keys, far beyond any store's ceiling.
        self.tracked_keys.set(keys as f64);
    }

    /// Counts what limit `limit` (an index into [`Rules::limits`]) made of a request.
    #[inline]
    pub(crate) fn count(&self, limit: usize, outcome: Outcome) {
        if let Some(limit) = self.limits.get(limit) {
            let counter = match outcome {
                Outcome::Allowed => &limit.allowed,
                Outcome::Denied => &limit.denied,
                Outcome::ShadowDenied => &limit.shadow_denied,
                Outcome::Delayed => &limit.delayed,
                Outcome::ShadowDelayed => &limit.shadow_delayed,
            };
            counter.increment(1);
        }
    }

    /// `tollgate_in_flight{domain,limit}` of the concurrency limit `limit`, one more: the
    /// handle to take it back down with.
    pub(crate) fn slot_taken(&self, limit: usize) -> Option<Gauge> {
        let gauge = self.limits.get(limit)?.in_flight.clone()?;
        gauge.increment(1.0);
        Some(gauge)
    }

    /// Counts a request that the store failed to decide under limit `limit`.
    pub(crate) fn count_store_error(&self, limit: usize) {
        if let Some(limit) = self.limits.get(limit) {
            limit.store_errors.increment(1);
        }
    }

    /// Records how long a decision took, store round trip included.
    #[inline]
    pub(crate) fn record_decision_time(&self, elapsed: Duration) {
        self.decision_seconds.record(elapsed);
    }
}

impl LimitInstruments {
    fn noop() -> Self {
        LimitInstruments {
            allowed: Counter::noop(),
            denied: Counter::noop(),
            shadow_denied: Counter::noop(),
            delayed: Counter::noop(),
            shadow_delayed: Counter::noop(),
            store_errors: Counter::noop(),
            in_flight: None,
        }
    }
}

/// Counts a reload. Both `result` series are registered on every reload (reloads are rare),
/// so the first reading of a watched file makes `failure` show as 0 rather than missing.
pub(crate) fn record_reload(ok: bool) {
    let success = counter!(RELOADS, "result" => "success");
    let failure = counter!(RELOADS, "result" => "failure");
    if ok { success } else { failure }.increment(1);
}

/// Gives the recorder each metric's help text and unit (on every set of rules: cheap, and
/// a recorder installed between two sets still gets them).
fn describe() {
    describe_counter!(
        REQUESTS,
        "Requests decided, per limit and outcome (one outcome per limit that applied): allowed, denied, shadow_denied (a shadow-mode limit would have denied), delayed (queued by a shaping leaky bucket), shadow_delayed (a shadow-mode shaping leaky bucket would have queued)"
    );
    describe_counter!(
        STORE_ERRORS,
        "Requests the store failed to decide, per limit; the limit's on_store_error policy decided them"
    );
    describe_histogram!(
        DECISION_SECONDS,
        Unit::Seconds,
        "Time to decide a request, store round trip included"
    );
    describe_gauge!(TRACKED_KEYS, "Keys the in-memory store tracks");
    describe_gauge!(
        ADAPTIVE_LIMIT,
        "The most requests in flight that load shedding's adaptive limit admits now, as found from latency"
    );
    describe_gauge!(
        IN_FLIGHT,
        "Requests holding a slot of a concurrency limit, over its keys, in this process"
    );
    describe_gauge!(
        "tollgate_sketch_bytes",
        Unit::Bytes,
        "The memory of an approximate limit's count-min sketch"
    );
    describe_gauge!(
        "tollgate_sketch_requests",
        "Requests an approximate limit counted in its last finished window, over every client"
    );
    describe_gauge!(
        "tollgate_sketch_fill",
        "The share of an approximate limit's sketch cells holding a count at the last window's load (expected)"
    );
    describe_gauge!(
        "tollgate_sketch_error_bound",
        "By how much an approximate limit's estimate may exceed a client's true count at the last window's load"
    );
    describe_gauge!(
        "tollgate_sync_overshoot",
        "Requests a fleet admitted beyond a local-first limit, the most among its keys at the last sync"
    );
    describe_counter!(
        RELOADS,
        "Reloads of the rules file, by result: success, failure"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(allowed: bool, delay: Duration) -> Decision {
        Decision {
            allowed,
            capacity: 1,
            remaining: 0,
            reset_after: Duration::ZERO,
            retry_after: Duration::ZERO,
            delay,
            booked_until: None,
        }
    }

    #[test]
    fn a_would_be_queue_in_shadow_mode_is_its_own_outcome() {
        let queued = decision(true, Duration::from_millis(200));
        assert_eq!(Outcome::of(&queued, false, true), Outcome::Delayed);
        assert_eq!(Outcome::of(&queued, true, true), Outcome::ShadowDelayed);
        // Denied by another limit: queued nowhere.
        assert_eq!(Outcome::of(&queued, false, false), Outcome::Allowed);
        assert_eq!(Outcome::of(&queued, true, false), Outcome::Allowed);
    }

    #[test]
    fn a_full_limit_denies_or_would_deny() {
        let full = decision(false, Duration::ZERO);
        assert_eq!(Outcome::of(&full, false, false), Outcome::Denied);
        assert_eq!(Outcome::of(&full, true, true), Outcome::ShadowDenied);
        assert_eq!(
            Outcome::of(&decision(true, Duration::ZERO), true, true),
            Outcome::Allowed
        );
    }
}
