//! Metrics through the [`metrics`](::metrics) facade (feature `metrics`); the names are
//! listed in the crate docs and the README.
//!
//! A decision formats no name or label: the handles of every limit are registered once per
//! rules, on their first decision (by then the application has installed its recorder).
//! Labels are the domain and the limit's label (its `name`, else its descriptor path), never a
//! request value, so the rules bound the number of series.

#[cfg(feature = "metrics")]
pub(crate) use self::decisions::{record_tracked_keys, DecisionMetrics, Outcome};

/// Counts a reload of the rules file, successful or not: `tollgate_reloads_total{result}`,
/// `result` being `success` or `failure`. Does nothing without the `metrics` feature.
#[cfg_attr(not(feature = "reload"), allow(dead_code))]
pub(crate) fn record_reload(ok: bool) {
    #[cfg(feature = "metrics")]
    decisions::record_reload(ok);
    #[cfg(not(feature = "metrics"))]
    let _ = ok;
}

#[cfg(feature = "metrics")]
mod decisions {
    use crate::rules::Rules;
    use metrics::{
        counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
        Histogram, Label, Unit,
    };
    use std::time::Duration;

    const REQUESTS: &str = "tollgate_requests_total";
    const STORE_ERRORS: &str = "tollgate_store_errors_total";
    const DECISION_SECONDS: &str = "tollgate_decision_seconds";
    const TRACKED_KEYS: &str = "tollgate_tracked_keys";
    const RELOADS: &str = "tollgate_reloads_total";

    /// What one limit made of one request.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Outcome {
        /// It had room (the request may still have been denied by another limit).
        Allowed,
        /// It was full.
        Denied,
        /// It was full, but in shadow mode: the request was not denied for it.
        ShadowDenied,
        /// A shaping leaky bucket queued the admitted request.
        Delayed,
    }

    /// The handles of one set of rules: per limit, in the order of [`Rules::limits`].
    #[derive(Debug)]
    pub(crate) struct DecisionMetrics {
        limits: Box<[LimitMetrics]>,
        decision_seconds: Histogram,
    }

    #[derive(Debug)]
    struct LimitMetrics {
        allowed: Counter,
        denied: Counter,
        shadow_denied: Counter,
        delayed: Counter,
        store_errors: Counter,
    }

    impl DecisionMetrics {
        /// Registers the handles of `rules` with the recorder installed now.
        pub(crate) fn register(rules: &Rules) -> Self {
            describe();
            let domain = Label::new("domain", rules.domain().to_owned());
            let limits = rules
                .limits()
                .iter()
                .map(|limit| {
                    // `unlimited` entries decide nothing: no series that never move.
                    if limit.quota().is_none() {
                        return LimitMetrics::noop();
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
                    LimitMetrics {
                        allowed: requests("allowed"),
                        denied: requests("denied"),
                        shadow_denied: requests("shadow_denied"),
                        delayed: requests("delayed"),
                        store_errors: counter!(STORE_ERRORS, labels.clone()),
                    }
                })
                .collect();
            DecisionMetrics {
                limits,
                decision_seconds: histogram!(DECISION_SECONDS, vec![domain]),
            }
        }

        /// Counts what limit `limit` (an index into [`Rules::limits`]) made of a request.
        #[inline]
        pub(crate) fn count(&self, limit: usize, outcome: Outcome) {
            if let Some(metrics) = self.limits.get(limit) {
                let counter = match outcome {
                    Outcome::Allowed => &metrics.allowed,
                    Outcome::Denied => &metrics.denied,
                    Outcome::ShadowDenied => &metrics.shadow_denied,
                    Outcome::Delayed => &metrics.delayed,
                };
                counter.increment(1);
            }
        }

        /// Counts a request that the store failed to decide under limit `limit`.
        pub(crate) fn count_store_error(&self, limit: usize) {
            if let Some(metrics) = self.limits.get(limit) {
                metrics.store_errors.increment(1);
            }
        }

        /// Records how long a decision took, store round trip included.
        #[inline]
        pub(crate) fn record_decision_time(&self, elapsed: Duration) {
            self.decision_seconds.record(elapsed);
        }
    }

    impl LimitMetrics {
        fn noop() -> Self {
            LimitMetrics {
                allowed: Counter::noop(),
                denied: Counter::noop(),
                shadow_denied: Counter::noop(),
                delayed: Counter::noop(),
                store_errors: Counter::noop(),
            }
        }
    }

    /// Sets `tollgate_tracked_keys{domain}`.
    pub(crate) fn record_tracked_keys(domain: &str, keys: usize) {
        // Precise below 2^53 keys, far beyond any store's ceiling.
        gauge!(TRACKED_KEYS, "domain" => domain.to_owned()).set(keys as f64);
    }

    pub(super) fn record_reload(ok: bool) {
        let result = if ok { "success" } else { "failure" };
        counter!(RELOADS, "result" => result).increment(1);
    }

    /// Gives the recorder each metric's help text and unit (once per rules: cheap, and a
    /// recorder installed late still gets them).
    fn describe() {
        describe_counter!(
            REQUESTS,
            "Requests decided, per limit and outcome: allowed, denied, shadow_denied (a shadow-mode limit would have denied), delayed (queued by a shaping leaky bucket)"
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
        describe_counter!(
            RELOADS,
            "Reloads of the rules file, by result: success, failure"
        );
    }
}
