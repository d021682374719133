//! One `rate_limit` entry: its rate, algorithm options, cost and names.

use super::Compiler;
use crate::algorithm::{Algorithm, Quota};
use crate::rules::file::{Located, RawCost, RawDescriptor, RawRateLimit};
use crate::rules::period::parse_period;
use crate::rules::state_id::state_id;
use crate::rules::tree::NodeLimit;
use crate::rules::{Cost, Limit, Rate};
use serde_saphyr::Location;
use std::time::Duration;

/// The longest period a limit may have.
const MAX_PERIOD: Duration = Duration::from_secs(100 * 365 * 86_400);
/// The largest limit or burst: token counts are kept as signed 64-bit numbers.
const MAX_COUNT: u64 = i64::MAX as u64;

impl Compiler {
    pub(super) fn limit(
        &mut self,
        descriptor: &Located<RawDescriptor>,
        path: &str,
        chain: &str,
        sources: &[usize],
    ) -> Option<NodeLimit> {
        let raw = descriptor.value.rate_limit.as_ref()?;
        let path = format!("{path}.rate_limit");
        if let Some(name) = &raw.value.name {
            self.names.push((name.clone(), format!("{path}.name")));
        }
        for (i, replaced) in raw.value.replaces.iter().enumerate() {
            let name = Located::new(
                replaced.value.name.clone(),
                replaced.referenced,
                replaced.defined,
            );
            self.replaced.push((name, format!("{path}.replaces[{i}]")));
        }
        let rate = self.rate(&raw.value, raw.referenced, &path);
        let cost = self.cost(&raw.value, &path);
        let (rate, cost) = (rate?, cost?);
        let name = raw.value.name.as_ref().map(|n| n.value.clone());
        let label = name.as_deref().unwrap_or(chain);
        self.limits.push(Limit {
            label: label.into(),
            cost,
            name,
            descriptor: chain.to_owned(),
            sources: sources.into(),
            rate,
            shadow: descriptor.value.shadow_mode,
            on_store_error: raw.value.on_store_error.unwrap_or(self.on_store_error),
            replaces: raw
                .value
                .replaces
                .iter()
                .map(|r| r.value.name.clone())
                .collect(),
        });
        Some(NodeLimit {
            index: self.limits.len() - 1,
            state_id: state_id(chain, &rate),
        })
    }

    fn rate(&mut self, raw: &RawRateLimit, location: Location, path: &str) -> Option<Rate> {
        if raw.unlimited {
            let extra = [
                raw.unit.is_some(),
                raw.unit_multiplier.is_some(),
                raw.period.is_some(),
                raw.requests_per_unit.is_some(),
                raw.algorithm.is_some(),
                raw.burst.is_some(),
                raw.queue.is_some(),
                raw.mode.is_some(),
                raw.max_delay.is_some(),
                raw.cost.is_some(),
            ];
            if extra.contains(&true) {
                let message = "`unlimited: true` takes no other setting but `name` and `replaces`";
                self.error(location, path, message);
                return None;
            }
            return Some(Rate::Unlimited);
        }
        let period = self.period(raw, location, path);
        let Some(limit) = &raw.requests_per_unit else {
            let message = "missing (or set `unlimited: true`)";
            self.error(location, format!("{path}.requests_per_unit"), message);
            return None;
        };
        if limit.value > MAX_COUNT {
            let message = format!("must be at most {MAX_COUNT}");
            self.error(
                limit.referenced,
                format!("{path}.requests_per_unit"),
                message,
            );
            return None;
        }
        let algorithm = raw
            .algorithm
            .as_ref()
            .map_or(self.default_algorithm, |a| a.value);
        let options_fit = self.check_options_fit(raw, algorithm, path);
        let burst = self.burst(raw, limit.value, path)?;
        let mut quota = match Quota::new(limit.value, period?) {
            Ok(quota) => quota.with_burst(burst),
            Err(error) => {
                self.error(location, format!("{path}.period"), error.to_string());
                return None;
            }
        };
        if let Some(queue) = &raw.queue {
            quota = quota.with_queue(queue.value);
        }
        if let Some(max_delay) = &raw.max_delay {
            match parse_period(&max_delay.value).filter(|delay| *delay <= MAX_PERIOD) {
                Some(max_delay) => quota = quota.with_max_delay(max_delay),
                None => {
                    let message = format!(
                        "`{}` is not a duration up to 100 years: write e.g. 500ms or 2s",
                        max_delay.value
                    );
                    self.error(max_delay.referenced, format!("{path}.max_delay"), message);
                    return None;
                }
            }
        }
        if raw.is_policing() {
            quota = quota.policing();
        }
        let horizon_fits = self.check_horizon(raw, algorithm, &quota, path);
        (options_fit && horizon_fits).then_some(Rate::Limited { quota, algorithm })
    }

    /// GCRA and the leaky bucket book time ahead: `burst` (or `queue + 1`) intervals of
    /// `period / requests_per_unit`. That must stay within the longest period.
    fn check_horizon(
        &mut self,
        raw: &RawRateLimit,
        algorithm: Algorithm,
        quota: &Quota,
        path: &str,
    ) -> bool {
        let field = match algorithm {
            Algorithm::Gcra => raw.burst.as_ref().map(|b| (b.referenced, "burst")),
            Algorithm::LeakyBucket => raw.queue.as_ref().map(|q| (q.referenced, "queue")),
            _ => return true,
        };
        let slots = algorithm.capacity(quota);
        if quota.requests_per_period() == 0 {
            return true;
        }
        let interval =
            u128::from(quota.period_nanos()).div_ceil(u128::from(quota.requests_per_period()));
        if u128::from(slots) * interval <= MAX_PERIOD.as_nanos() {
            return true;
        }
        let (location, name) = field.unwrap_or((Location::UNKNOWN, "requests_per_unit"));
        let message = "books more than 100 years ahead: lower it, or raise requests_per_unit";
        self.error(location, format!("{path}.{name}"), message);
        false
    }

    /// Settings that only some algorithms take: `burst` (token_bucket, gcra), `queue`,
    /// `mode` and `max_delay` (leaky_bucket).
    fn check_options_fit(&mut self, raw: &RawRateLimit, algorithm: Algorithm, path: &str) -> bool {
        let bursty = matches!(algorithm, Algorithm::TokenBucket | Algorithm::Gcra);
        let leaky = algorithm == Algorithm::LeakyBucket;
        let options = [
            (
                "burst",
                raw.burst.as_ref().map(|b| b.referenced),
                bursty,
                "token_bucket and gcra",
            ),
            (
                "queue",
                raw.queue.as_ref().map(|q| q.referenced),
                leaky,
                "leaky_bucket",
            ),
            (
                "mode",
                raw.mode.as_ref().map(|m| m.referenced),
                leaky,
                "leaky_bucket",
            ),
            (
                "max_delay",
                raw.max_delay.as_ref().map(|m| m.referenced),
                leaky,
                "leaky_bucket",
            ),
        ];
        let mut fit = true;
        for (name, location, applies, owners) in options {
            if let (Some(location), false) = (location, applies) {
                let message = format!("`{name}` applies to {owners}, not {algorithm}");
                self.error(location, format!("{path}.{name}"), message);
                fit = false;
            }
        }
        let policing = raw.is_policing();
        if let (true, Some(max_delay)) = (policing, &raw.max_delay) {
            let message = "`mode: police` admits without waiting: `max_delay` has no effect";
            self.error(max_delay.referenced, format!("{path}.max_delay"), message);
            fit = false;
        }
        fit
    }

    fn burst(&mut self, raw: &RawRateLimit, limit: u64, path: &str) -> Option<u64> {
        let Some(burst) = &raw.burst else {
            return Some(limit);
        };
        let message = if limit == 0 {
            "`requests_per_unit: 0` denies everything and takes no burst".to_owned()
        } else if burst.value == 0 || burst.value > MAX_COUNT {
            format!("must be between 1 and {MAX_COUNT}")
        } else {
            return Some(burst.value);
        };
        self.error(burst.referenced, format!("{path}.burst"), message);
        None
    }

    /// The weight of each request under a limit: a number, or a source whose value is one.
    fn cost(&mut self, raw: &RawRateLimit, path: &str) -> Option<Option<Cost>> {
        let Some(cost) = &raw.cost else {
            return Some(None);
        };
        let path = format!("{path}.cost");
        match &cost.value {
            RawCost::Fixed(0) => {
                self.error(cost.referenced, path, "must be at least 1");
                None
            }
            RawCost::Fixed(weight) => Some(Some(Cost::Fixed(*weight))),
            RawCost::Source(name) => {
                let key = Located::new(name.clone(), cost.referenced, cost.defined);
                let source = self.source_id(&key, &path)?;
                Some(Some(Cost::Source(source)))
            }
        }
    }

    fn period(&mut self, raw: &RawRateLimit, location: Location, path: &str) -> Option<Duration> {
        let period = match (&raw.unit, &raw.period) {
            (Some(_), Some(period)) => {
                self.error(
                    period.referenced,
                    format!("{path}.period"),
                    "give either `unit` or `period`, not both",
                );
                return None;
            }
            (None, None) => {
                self.error(
                    location,
                    format!("{path}.unit"),
                    "missing: give a `unit` (second to year) or a `period` (e.g. 30s)",
                );
                return None;
            }
            (None, Some(period)) => {
                if let Some(multiplier) = &raw.unit_multiplier {
                    self.error(
                        multiplier.referenced,
                        format!("{path}.unit_multiplier"),
                        "`unit_multiplier` needs a `unit`",
                    );
                    return None;
                }
                match parse_period(&period.value) {
                    Some(duration) => duration,
                    None => {
                        self.error(
                            period.referenced,
                            format!("{path}.period"),
                            format!("`{}` is not a period: write a positive number and ms, s, m, h or d (e.g. 30s)", period.value),
                        );
                        return None;
                    }
                }
            }
            (Some(unit), None) => {
                let multiplier = match &raw.unit_multiplier {
                    Some(multiplier) if multiplier.value == 0 => {
                        let path = format!("{path}.unit_multiplier");
                        self.error(multiplier.referenced, path, "must be at least 1");
                        return None;
                    }
                    Some(multiplier) => multiplier.value,
                    None => 1,
                };
                Duration::from_secs(unit.value.seconds().saturating_mul(multiplier))
            }
        };
        if period > MAX_PERIOD {
            self.error(location, path, "the period is longer than 100 years");
            return None;
        }
        Some(period)
    }
}
