//! One `rate_limit` entry: its rate, algorithm options, cost, `sync_every`, `approximate`
//! and names.

use super::Compiler;
use crate::algorithm::{Algorithm, Quota};
use crate::rules::file::{
    Located, RawApproximate, RawCost, RawDescriptor, RawRateLimit, RawSyncEvery,
};
use crate::rules::period::parse_period;
use crate::rules::size::{format_size, parse_size};
use crate::rules::state_id::state_id;
use crate::rules::tree::NodeLimit;
use crate::rules::KeySources;
use crate::rules::{Cost, Limit, Rate, Unit};
use crate::store::Approximate;
use serde_saphyr::Location;
use std::sync::Arc;
use std::time::Duration;

/// The longest period a limit may have.
const MAX_PERIOD: Duration = Duration::from_secs(100 * 365 * 86_400);
/// The largest limit or burst: token counts are kept as signed 64-bit numbers.
const MAX_COUNT: u64 = i64::MAX as u64;
/// The shortest `sync_every`: each interval costs every synced key a round trip to the
/// shared store, and much shorter ones would save little over asking it each time.
const MIN_SYNC_EVERY: Duration = Duration::from_millis(10);

/// The largest limit an approximate limit may have: its sketch counts in 32-bit cells.
const MAX_APPROXIMATE_LIMIT: u64 = 1_000_000_000;

/// The smallest `approximate` sketch: in less, so many keys would share each counter that
/// the counts would be too coarse to limit by.
const MIN_SKETCH_MEMORY: u128 = 64 * 1024;
/// Whether `algorithm` under `quota` books at most the longest period ahead: GCRA and the
/// leaky bucket book `burst` (or `queue + 1`) intervals of `period / requests_per_unit`.
pub(in crate::rules) fn books_within_horizon(algorithm: Algorithm, quota: &Quota) -> bool {
    if !algorithm.books_ahead() || quota.requests_per_period() == 0 {
        return true;
    }
    let slots = algorithm.capacity(quota);
    let interval =
        u128::from(quota.period_nanos()).div_ceil(u128::from(quota.requests_per_period()));
    u128::from(slots) * interval <= MAX_PERIOD.as_nanos()
}

/// The largest `approximate` sketch: a sketch takes all of its size, for each approximate
/// limit, and more than this is likelier a slip (`4GiB` for `4MiB`) than a need.
const MAX_SKETCH_MEMORY: u128 = 1024 * 1024 * 1024;
/// Why `approximate` and `sync_every` exclude each other.
const APPROXIMATE_OR_LOCAL_FIRST: &str = "a limit is either approximate (counted in this process's memory) or local-first (sync_every, shared through Redis), not both";

/// A per-limit option (`sync_every`, `approximate`) as a limit would have it, before it is
/// checked against the limit: the limit's own, or else the one in `defaults`.
#[derive(Debug, Clone, Copy)]
struct Setting<T> {
    value: T,
    /// Where errors about it point: the value, or the limit when it comes from `defaults`.
    location: Location,
    from_defaults: bool,
}

impl<T> Setting<T> {
    /// The limit's own `value`, written at `location`.
    fn own(value: Option<T>, location: Location) -> Option<Self> {
        value.map(|value| Setting {
            value,
            location,
            from_defaults: false,
        })
    }

    /// The `value` of `defaults`, for the limit at `limit`.
    fn from_defaults(value: Option<T>, limit: Location) -> Option<Self> {
        value.map(|value| Setting {
            value,
            location: limit,
            from_defaults: true,
        })
    }

    /// What errors about the option `field` add: when it came from `defaults`, how the
    /// limit opts out.
    fn opt_out(&self, field: &str) -> String {
        if self.from_defaults {
            format!(
                " (this limit takes {field} from `defaults`; it can opt out with `{field}: none`)"
            )
        } else {
            String::new()
        }
    }
}

impl Compiler {
    pub(super) fn limit(
        &mut self,
        descriptor: &Located<RawDescriptor>,
        path: &str,
        chain: &str,
        sources: &[usize],
    ) -> Option<NodeLimit> {
        if descriptor.value.quota_mode && self.keys == KeySources::Request {
            let message = "quota_mode is a rate limit service's (tollgate serve): a call is refused only when every quota it reaches is over";
            self.error(descriptor.referenced, path, message);
        }
        let raw = descriptor.value.rate_limit.as_ref()?;
        let path = format!("{path}.rate_limit");
        self.written_name(raw.value.name.as_ref(), &path);
        let own_name = raw.value.name.as_ref().map(|name| name.value.trim());
        for (i, replaced) in raw.value.replaces.iter().enumerate() {
            let replaced_path = format!("{path}.replaces[{i}]");
            let name = replaced.value.name.as_deref().map(str::trim);
            let message = match name {
                None | Some("") => "a `replaces` entry names no limit: write `- name: LIMIT`",
                Some(name) if Some(name) == own_name => {
                    "a limit cannot replace itself: `replaces` names this limit's own name"
                }
                Some(name) => {
                    let name = Located::new(name.to_owned(), replaced.referenced, replaced.defined);
                    self.replaced.push((name, replaced_path));
                    continue;
                }
            };
            self.error(replaced.referenced, replaced_path, message);
        }
        let name = raw.value.name.as_ref().map(|n| n.value.clone());
        let label = name.as_deref().unwrap_or(chain);
        let rate = self.rate(&raw.value, raw.referenced, &path);
        let cost = self.cost(&raw.value, &path);
        let sync_every = self.sync_every(&raw.value, raw.referenced, &path);
        let approximate = self.approximate(&raw.value, raw.referenced, &path, label);
        let block_for = self.block_for(&raw.value, &path);
        let settlement = self.settlement(&raw.value, &path);
        let (rate, cost, sync_every, approximate) = (rate?, cost?, sync_every?, approximate?);
        let (block_for, settlement) = (block_for?, settlement?);
        let checked_approximate =
            self.check_approximate(approximate, sync_every, &rate, label, &path);
        let sync_every = self.check_sync_every(sync_every, &rate, label, &path);
        let (sync_every, approximate) = (sync_every?, checked_approximate?);
        self.limits.push(Limit {
            label: label.into(),
            cost,
            name,
            descriptor: chain.to_owned(),
            sources: sources.into(),
            rate,
            shadow: descriptor.value.shadow_mode,
            quota: descriptor.value.quota_mode,
            metadata: descriptor.value.metadata.clone().map(Arc::new),
            stats_path: Arc::from(self.stats_path.as_slice()),
            on_store_error: raw.value.on_store_error.unwrap_or(self.on_store_error),
            sync_every,
            approximate,
            replaces: raw
                .value
                .replaces
                .iter()
                .filter_map(|r| r.value.name.as_deref())
                .map(|name| name.trim().to_owned())
                .filter(|name| !name.is_empty())
                .collect(),
            lease: None,
            sheds: false,
            block: None,
            settlement,
        });
        let index = self.limits.len() - 1;
        if let Some(duration) = block_for {
            self.blocked.push((index, duration));
        }
        Some(NodeLimit {
            index,
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
                raw.calendar.is_some(),
                raw.time_zone.is_some(),
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
        let calendar = self.calendar(raw, algorithm, path);
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
            quota = quota.with_policing();
        }
        if let Some(calendar) = calendar? {
            quota = quota.with_calendar(calendar);
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
        if books_within_horizon(algorithm, quota) {
            return true;
        }
        // The setting that says how far it books: the queue, or else the burst.
        let field = if algorithm.queues() {
            raw.queue.as_ref().map(|q| (q.referenced, "queue"))
        } else {
            raw.burst.as_ref().map(|b| (b.referenced, "burst"))
        };
        let (location, name) = field.unwrap_or((Location::UNKNOWN, "requests_per_unit"));
        let message = "books more than 100 years ahead: lower it, or raise requests_per_unit";
        self.error(location, format!("{path}.{name}"), message);
        false
    }

    /// Settings that only some algorithms take: `burst` (token_bucket, gcra), `queue`,
    /// `mode` and `max_delay` (leaky_bucket).
    fn check_options_fit(&mut self, raw: &RawRateLimit, algorithm: Algorithm, path: &str) -> bool {
        let bursty = algorithm.takes_burst();
        let leaky = algorithm.queues();
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

    /// The limit's own `sync_every`, else `defaults.sync_every`: `Some(None)` for neither
    /// (or `none`), `None` after an error.
    fn sync_every(
        &mut self,
        raw: &RawRateLimit,
        location: Location,
        path: &str,
    ) -> Option<Option<Setting<Duration>>> {
        let Some(written) = &raw.sync_every else {
            return Some(Setting::from_defaults(self.default_sync_every, location));
        };
        let interval = self.sync_interval(written, &format!("{path}.sync_every"))?;
        Some(Setting::own(interval, written.referenced))
    }

    /// A `sync_every` at `path` (in a `rate_limit` or in `defaults`), whatever limit it ends
    /// up on: `Some(None)` for `none`, `None` after an error.
    pub(super) fn sync_interval(
        &mut self,
        written: &Located<RawSyncEvery>,
        path: &str,
    ) -> Option<Option<Duration>> {
        let RawSyncEvery::Every(text) = &written.value else {
            return Some(None);
        };
        let message = match parse_period(text) {
            Some(interval) if interval >= MIN_SYNC_EVERY => return Some(Some(interval)),
            Some(interval) => format!(
                "{} is too short: sync_every must be at least {}",
                Unit::format_period(interval),
                Unit::format_period(MIN_SYNC_EVERY),
            ),
            None => format!(
                "`{text}` is not an interval: write a positive number and ms, s, m, h or d (e.g. 100ms), or `none`"
            ),
        };
        self.error(written.referenced, path, message);
        None
    }

    /// `sync_every` must suit the limit `label` it applies to: an algorithm that can be
    /// decided local-first, and an interval no longer than the period. An `unlimited` entry
    /// has nothing to sync and ignores it.
    fn check_sync_every(
        &mut self,
        sync: Option<Setting<Duration>>,
        rate: &Rate,
        label: &str,
        path: &str,
    ) -> Option<Option<Duration>> {
        let (Some(sync), Rate::Limited { quota, algorithm }) = (sync, rate) else {
            return Some(None);
        };
        let path = format!("{path}.sync_every");
        let opt_out = sync.opt_out("sync_every");
        let mut fits = true;
        if !algorithm.syncs_local_first() {
            let message = format!(
                "limit `{label}` uses {algorithm}: sync_every works with fixed_window, sliding_window_counter, token_bucket and gcra; choose one of those or remove sync_every{opt_out}"
            );
            self.error(sync.location, &path, message);
            fits = false;
        }
        if quota.calendar().is_some() {
            let message = format!(
                "limit `{label}` counts in calendar windows, which are decided exactly: remove sync_every{opt_out}"
            );
            self.error(sync.location, &path, message);
            fits = false;
        }
        if sync.value > quota.period() {
            let message = format!(
                "limit `{label}`: sync_every {} is longer than its period, {}{opt_out}",
                Unit::format_period(sync.value),
                Unit::format_period(quota.period()),
            );
            self.error(sync.location, &path, message);
            fits = false;
        }
        fits.then_some(Some(sync.value))
    }

    /// The limit's own `approximate`, else `defaults.approximate`: `Some(None)` for neither
    /// (or `none`), `None` after an error.
    fn approximate(
        &mut self,
        raw: &RawRateLimit,
        location: Location,
        path: &str,
        label: &str,
    ) -> Option<Option<Setting<Approximate>>> {
        let Some(written) = &raw.approximate else {
            return Some(Setting::from_defaults(self.default_approximate, location));
        };
        let sketch = self.sketch(written, &format!("{path}.approximate"), Some(label))?;
        Some(Setting::own(sketch, written.referenced))
    }

    /// An `approximate` at `path` (in a `rate_limit` of the limit `label`, or in `defaults`),
    /// whatever limit it ends up on: `Some(None)` for `none`, `None` after an error.
    pub(super) fn sketch(
        &mut self,
        written: &Located<RawApproximate>,
        path: &str,
        label: Option<&str>,
    ) -> Option<Option<Approximate>> {
        let RawApproximate::Sketch(sketch) = &written.value else {
            return Some(None);
        };
        let memory = &sketch.memory;
        let text = memory.value.0.as_str();
        let message = match parse_size(text) {
            Some(bytes) => match usize::try_from(bytes) {
                Ok(memory) if (MIN_SKETCH_MEMORY..=MAX_SKETCH_MEMORY).contains(&bytes) => {
                    return Some(Some(Approximate::new(memory)));
                }
                _ => {
                    let limit = label.map_or(String::new(), |label| format!("limit `{label}`: "));
                    format!(
                        "{limit}approximate memory must be at least {} and at most {}, not {}",
                        format_size(MIN_SKETCH_MEMORY),
                        format_size(MAX_SKETCH_MEMORY),
                        format_size(bytes),
                    )
                }
            },
            None => format!(
                "`{text}` is not a size: write a number of bytes, or one and KiB, MiB or GiB (e.g. 4MiB)"
            ),
        };
        self.error(memory.referenced, format!("{path}.memory"), message);
        None
    }

    /// `defaults` may not make every limit both approximate and local-first: said once,
    /// there, rather than on each limit that takes both.
    pub(super) fn check_defaults_approximate(&mut self, written: &Located<RawApproximate>) {
        if self.default_approximate.is_some() && self.default_sync_every.is_some() {
            let message = format!(
                "defaults set both approximate and sync_every: {APPROXIMATE_OR_LOCAL_FIRST}; keep one in `defaults` and set the other on the limits that need it"
            );
            self.error(written.referenced, "defaults.approximate", message);
        }
    }

    /// `approximate` must suit the limit `label` it applies to: an algorithm the memory
    /// store can count in a sketch, and no `sync_every` beside it (both from `defaults` is
    /// reported once, there). An `unlimited` entry counts nothing and ignores it.
    fn check_approximate(
        &mut self,
        approximate: Option<Setting<Approximate>>,
        sync: Option<Setting<Duration>>,
        rate: &Rate,
        label: &str,
        path: &str,
    ) -> Option<Option<Approximate>> {
        let (Some(approximate), Rate::Limited { algorithm, quota }) = (approximate, rate) else {
            return Some(None);
        };
        let mut fits = true;
        if quota.requests_per_period() > MAX_APPROXIMATE_LIMIT {
            let message = format!(
                "limit `{label}`: an approximate limit counts in 32-bit cells: at most {MAX_APPROXIMATE_LIMIT} requests a period, not {}{}",
                quota.requests_per_period(),
                approximate.opt_out("approximate"),
            );
            self.error(approximate.location, format!("{path}.approximate"), message);
            fits = false;
        }
        if !algorithm.can_be_approximated() {
            let message = format!(
                "limit `{label}` uses {algorithm}: approximate works with fixed_window and sliding_window_counter; choose one of those or remove approximate{}",
                approximate.opt_out("approximate"),
            );
            self.error(approximate.location, format!("{path}.approximate"), message);
            fits = false;
        }
        if quota.calendar().is_some() {
            let message = format!(
                "limit `{label}` counts in calendar windows, which are counted exactly: remove approximate{}",
                approximate.opt_out("approximate"),
            );
            self.error(approximate.location, format!("{path}.approximate"), message);
            fits = false;
        }
        if let Some(sync) = sync {
            // Pointed at what the limit wrote itself: that is the line to change.
            let at_fault = match (approximate.from_defaults, sync.from_defaults) {
                (true, true) => None,
                (false, _) => Some((
                    approximate.location,
                    "approximate",
                    sync.opt_out("sync_every"),
                )),
                (true, false) => Some((
                    sync.location,
                    "sync_every",
                    approximate.opt_out("approximate"),
                )),
            };
            if let Some((location, field, opt_out)) = at_fault {
                let message = format!("limit `{label}`: {APPROXIMATE_OR_LOCAL_FIRST}{opt_out}");
                self.error(location, format!("{path}.{field}"), message);
            }
            fits = false;
        }
        fits.then_some(Some(approximate.value))
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

#[cfg(test)]
mod tests {
    use crate::algorithm::Algorithm;
    use crate::rules::{DescriptorSpec, LimitSpec, RuleError, RuleErrors, Rules, Unit};
    use std::time::Duration;

    const MS_100: Duration = Duration::from_millis(100);

    fn compile(yaml: &str) -> Rules {
        Rules::from_yaml(yaml).unwrap_or_else(|errors| panic!("valid rules, but:\n{errors}"))
    }

    fn reject(yaml: &str) -> RuleErrors {
        match Rules::from_yaml(yaml) {
            Ok(rules) => panic!("rules to reject, but they compiled: {:#?}", rules.limits()),
            Err(errors) => errors,
        }
    }

    #[track_caller]
    fn only_error(errors: &RuleErrors) -> &RuleError {
        match errors.errors() {
            [error] => error,
            _ => panic!("one error, but:\n{errors}"),
        }
    }

    /// The 1-based line of the only line of `yaml` holding `needle`.
    #[track_caller]
    fn line_of(yaml: &str, needle: &str) -> u64 {
        let mut lines = yaml.lines().enumerate().filter(|(_, l)| l.contains(needle));
        let (index, _) = lines.next().expect("the needle is in the text");
        assert!(
            lines.next().is_none(),
            "`{needle}` is on more than one line"
        );
        u64::try_from(index + 1).expect("a line number")
    }

    fn sync_everies(rules: &Rules) -> Vec<Option<Duration>> {
        rules
            .limits()
            .iter()
            .map(|limit| limit.sync_every())
            .collect()
    }

    /// Each limit's `approximate` memory, in bytes.
    fn sketches(rules: &Rules) -> Vec<Option<usize>> {
        rules
            .limits()
            .iter()
            .map(|limit| limit.approximate().map(|sketch| sketch.memory()))
            .collect()
    }

    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    const GIB: usize = 1024 * MIB;
    const NOT_BOTH: &str = "a limit is either approximate (counted in this process's memory) or local-first (sync_every, shared through Redis), not both";

    #[test]
    fn sync_every_is_the_limits_own_else_the_default_and_none_opts_out() {
        let own = compile(
            r#"
domain: t
descriptors:
  - key: method
    rate_limit: { unit: second, requests_per_unit: 5, sync_every: 250ms }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5 }
"#,
        );
        assert_eq!(sync_everies(&own), [Some(Duration::from_millis(250)), None]);

        let defaulted = compile(
            r#"
domain: t
defaults: { algorithm: token_bucket, sync_every: 100ms }
descriptors:
  - key: method
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5, sync_every: none }
  - key: host
    rate_limit: { unit: minute, requests_per_unit: 5, sync_every: 1s }
  - key: route
    rate_limit: { unit: second, requests_per_unit: 5, algorithm: leaky_bucket, sync_every: none }
"#,
        );
        assert_eq!(
            sync_everies(&defaulted),
            [Some(MS_100), None, Some(Duration::from_secs(1)), None]
        );

        let off = compile(
            "domain: t\ndefaults: { sync_every: none }\ndescriptors:\n  - key: method\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
        );
        assert_eq!(sync_everies(&off), [None]);
    }

    #[test]
    fn sync_every_works_with_the_four_algorithms_that_can_be_decided_local_first() {
        for algorithm in Algorithm::ALL.into_iter().filter(|a| a.syncs_local_first()) {
            let rules = compile(&format!(
                "domain: t\ndescriptors:\n  - key: method\n    rate_limit: {{ unit: second, requests_per_unit: 5, algorithm: {algorithm}, sync_every: 100ms }}\n"
            ));
            assert_eq!(sync_everies(&rules), [Some(MS_100)], "{algorithm}");
        }
    }

    #[test]
    fn sync_every_equal_to_the_period_is_accepted_and_so_is_ten_milliseconds() {
        let rules = compile(
            r#"
domain: t
descriptors:
  - key: method
    rate_limit: { unit: second, requests_per_unit: 5, sync_every: 1s }
  - key: path
    rate_limit: { period: 500ms, requests_per_unit: 5, sync_every: 10ms }
"#,
        );
        assert_eq!(
            sync_everies(&rules),
            [
                Some(Duration::from_secs(1)),
                Some(Duration::from_millis(10))
            ]
        );
    }

    #[test]
    fn sync_every_below_ten_milliseconds_is_refused_saying_both() {
        let yaml = "domain: t\ndescriptors:\n  - key: method\n    rate_limit: { unit: second, requests_per_unit: 5, sync_every: 5ms }\n";
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_eq!(error.path(), "descriptors[0].rate_limit.sync_every");
        assert_eq!(error.line(), Some(line_of(yaml, "5ms")));
        assert_eq!(
            error.message(),
            "5ms is too short: sync_every must be at least 10ms"
        );
    }

    #[test]
    fn sync_every_longer_than_the_period_is_refused_naming_the_limit_and_both() {
        let yaml = "domain: t\ndescriptors:\n  - key: method\n    rate_limit: { unit: second, requests_per_unit: 5, sync_every: 2s, name: writes }\n";
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_eq!(error.path(), "descriptors[0].rate_limit.sync_every");
        assert_eq!(error.line(), Some(line_of(yaml, "2s")));
        assert_eq!(
            error.message(),
            "limit `writes`: sync_every 2s is longer than its period, 1s"
        );
    }

    #[test]
    fn sync_every_on_a_log_or_a_leaky_bucket_names_the_limit_and_the_algorithms_that_take_it() {
        for algorithm in [Algorithm::SlidingWindowLog, Algorithm::LeakyBucket] {
            let yaml = format!(
                "domain: t\ndescriptors:\n  - key: path\n    value: /login\n    descriptors:\n      - key: remote_address\n        rate_limit: {{ unit: minute, requests_per_unit: 5, algorithm: {algorithm}, sync_every: 100ms }}\n"
            );
            let errors = reject(&yaml);
            let error = only_error(&errors);
            assert_eq!(
                error.path(),
                "descriptors[0].descriptors[0].rate_limit.sync_every"
            );
            assert_eq!(error.line(), Some(7));
            assert_eq!(
                error.message(),
                format!(
                    "limit `path=/login/remote_address` uses {algorithm}: sync_every works with fixed_window, sliding_window_counter, token_bucket and gcra; choose one of those or remove sync_every"
                )
            );
        }
    }

    #[test]
    fn sync_every_from_defaults_on_a_limit_it_does_not_fit_says_how_to_opt_out() {
        let yaml = r#"
domain: t
defaults: { sync_every: 2s }
descriptors:
  - key: method
    rate_limit: { unit: minute, requests_per_unit: 5, algorithm: sliding_window_log, name: log }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5, name: short }
  - key: host
    rate_limit: { unit: second, requests_per_unit: 5, algorithm: leaky_bucket, sync_every: none }
"#;
        let errors = reject(yaml);
        let opt_out =
            " (this limit takes sync_every from `defaults`; it can opt out with `sync_every: none`)";
        let found: Vec<(&str, Option<u64>, &str)> = errors
            .errors()
            .iter()
            .map(|e| (e.path(), e.line(), e.message()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "descriptors[0].rate_limit.sync_every",
                    Some(line_of(yaml, "name: log")),
                    format!("limit `log` uses sliding_window_log: sync_every works with fixed_window, sliding_window_counter, token_bucket and gcra; choose one of those or remove sync_every{opt_out}").as_str(),
                ),
                (
                    "descriptors[1].rate_limit.sync_every",
                    Some(line_of(yaml, "name: short")),
                    format!("limit `short`: sync_every 2s is longer than its period, 1s{opt_out}")
                        .as_str(),
                ),
            ]
        );
    }

    #[test]
    fn unlimited_entries_ignore_sync_every() {
        let rules = compile(
            r#"
domain: t
defaults: { sync_every: 100ms }
descriptors:
  - key: path
    value: /health
    rate_limit: { unlimited: true }
  - key: path
    value: /metrics
    rate_limit: { unlimited: true, sync_every: 1h }
"#,
        );
        assert_eq!(sync_everies(&rules), [None, None]);
    }

    #[test]
    fn a_malformed_sync_every_is_reported_once_where_it_is_written() {
        let yaml = r#"
domain: t
defaults: { sync_every: 5ms }
descriptors:
  - key: method
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: host
    rate_limit: { unit: second, requests_per_unit: 5, sync_every: often }
  - key: route
    rate_limit: { unit: second, requests_per_unit: 5, sync_every: 0ms }
"#;
        let errors = reject(yaml);
        let found: Vec<(&str, Option<u64>)> = errors
            .errors()
            .iter()
            .map(|e| (e.path(), e.line()))
            .collect();
        assert_eq!(
            found,
            [
                ("defaults.sync_every", Some(3)),
                (
                    "descriptors[2].rate_limit.sync_every",
                    Some(line_of(yaml, "often"))
                ),
                (
                    "descriptors[3].rate_limit.sync_every",
                    Some(line_of(yaml, "0ms"))
                ),
            ],
            "{errors}"
        );
        assert_eq!(
            errors.errors()[1].message(),
            "`often` is not an interval: write a positive number and ms, s, m, h or d (e.g. 100ms), or `none`"
        );
    }

    #[test]
    fn the_builder_checks_sync_every_as_a_file_does() {
        let build = |limit: LimitSpec| {
            Rules::builder("t")
                .descriptor(DescriptorSpec::key("method").rate_limit(limit))
                .build()
        };
        let rules = build(LimitSpec::per(5, Unit::Second).sync_every(MS_100)).expect("valid");
        assert_eq!(sync_everies(&rules), [Some(MS_100)]);

        let refused = [
            (
                LimitSpec::per(5, Unit::Second).sync_every(Duration::from_millis(5)),
                "5ms is too short: sync_every must be at least 10ms",
            ),
            (
                LimitSpec::per(5, Unit::Second).sync_every(Duration::from_secs(2)),
                "limit `method`: sync_every 2s is longer than its period, 1s",
            ),
            (
                LimitSpec::per(5, Unit::Second)
                    .algorithm(Algorithm::LeakyBucket)
                    .sync_every(MS_100),
                "limit `method` uses leaky_bucket: sync_every works with fixed_window, sliding_window_counter, token_bucket and gcra; choose one of those or remove sync_every",
            ),
        ];
        for (limit, message) in refused {
            let errors = build(limit).expect_err("refused");
            let error = only_error(&errors);
            assert_eq!(error.path(), "descriptors[0].rate_limit.sync_every");
            assert_eq!((error.line(), error.message()), (None, message));
        }
    }

    #[test]
    fn approximate_is_the_limits_own_else_the_default_and_none_opts_out() {
        let own = compile(
            r#"
domain: t
descriptors:
  - key: method
    rate_limit: { unit: second, requests_per_unit: 5, approximate: { memory: 4MiB } }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: host
    rate_limit: { unit: second, requests_per_unit: 5, approximate: { memory: 65536 } }
"#,
        );
        assert_eq!(sketches(&own), [Some(4 * MIB), None, Some(64 * KIB)]);

        let defaulted = compile(
            r#"
domain: t
defaults: { algorithm: sliding_window_counter, approximate: { memory: 1GiB } }
descriptors:
  - key: method
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5, approximate: none }
  - key: host
    rate_limit:
      unit: minute
      requests_per_unit: 5
      approximate:
        memory: 256KiB
  - key: route
    rate_limit: { unit: second, requests_per_unit: 5, algorithm: token_bucket, approximate: none }
"#,
        );
        assert_eq!(
            sketches(&defaulted),
            [Some(GIB), None, Some(256 * KIB), None]
        );

        let off = compile(
            "domain: t\ndefaults: { approximate: none }\ndescriptors:\n  - key: method\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
        );
        assert_eq!(sketches(&off), [None]);
    }

    #[test]
    fn approximate_works_with_fixed_window_and_sliding_window_counter() {
        for algorithm in Algorithm::ALL
            .into_iter()
            .filter(|a| a.can_be_approximated())
        {
            let rules = compile(&format!(
                "domain: t\ndescriptors:\n  - key: method\n    rate_limit: {{ unit: second, requests_per_unit: 5, algorithm: {algorithm}, approximate: {{ memory: 4MiB }} }}\n"
            ));
            assert_eq!(sketches(&rules), [Some(4 * MIB)], "{algorithm}");
        }
    }

    #[test]
    fn approximate_memory_outside_64kib_to_1gib_is_refused_naming_the_limit_and_both_bounds() {
        for (memory, shown) in [
            ("63KiB", "63KiB"),
            ("65535", "65535 bytes"),
            ("0", "0 bytes"),
            ("1025MiB", "1025MiB"),
            ("99999999999999GiB", "99999999999999GiB"),
        ] {
            let yaml = format!(
                "domain: t\ndescriptors:\n  - key: method\n    rate_limit: {{ unit: second, requests_per_unit: 5, name: writes, approximate: {{ memory: {memory} }} }}\n"
            );
            let errors = reject(&yaml);
            let error = only_error(&errors);
            assert_eq!(error.path(), "descriptors[0].rate_limit.approximate.memory");
            assert_eq!(error.line(), Some(4));
            let column = yaml.lines().nth(3).and_then(|line| line.find(memory));
            assert_eq!(
                error.column(),
                column.map(|c| u64::try_from(c + 1).expect("a column"))
            );
            assert_eq!(
                error.message(),
                format!("limit `writes`: approximate memory must be at least 64KiB and at most 1GiB, not {shown}")
            );
        }

        let yaml = "domain: t\ndefaults:\n  approximate: { memory: 2GiB }\ndescriptors:\n  - key: method\n    rate_limit: { unit: second, requests_per_unit: 5 }\n";
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_eq!(error.path(), "defaults.approximate.memory");
        assert_eq!(error.line(), Some(line_of(yaml, "2GiB")));
        assert_eq!(
            error.message(),
            "approximate memory must be at least 64KiB and at most 1GiB, not 2GiB"
        );
    }

    #[test]
    fn a_memory_that_is_not_a_size_is_refused_saying_how_to_write_one() {
        for memory in ["4MB", "4mib", "1.5MiB", "lots", "-1"] {
            let yaml = format!(
                "domain: t\ndescriptors:\n  - key: method\n    rate_limit: {{ unit: second, requests_per_unit: 5, approximate: {{ memory: {memory} }} }}\n"
            );
            let errors = reject(&yaml);
            let error = only_error(&errors);
            assert_eq!(error.path(), "descriptors[0].rate_limit.approximate.memory");
            assert_eq!(
                error.message(),
                format!("`{memory}` is not a size: write a number of bytes, or one and KiB, MiB or GiB (e.g. 4MiB)")
            );
        }
    }

    #[test]
    fn approximate_is_a_map_with_memory_only_or_none() {
        for (approximate, expected) in [
            ("{ memory: 4MiB, depth: 4 }", "unknown field `depth`"),
            ("{ }", "missing field `memory`"),
            ("4MiB", "{ memory: SIZE }"),
            ("true", "{ memory: SIZE }"),
        ] {
            let yaml = format!(
                "domain: t\ndescriptors:\n  - key: method\n    rate_limit: {{ unit: second, requests_per_unit: 5, approximate: {approximate} }}\n"
            );
            let errors = reject(&yaml);
            let error = only_error(&errors);
            assert_eq!(error.line(), Some(4), "{error}");
            assert!(error.message().contains(expected), "{approximate}: {error}");
        }
    }

    #[test]
    fn approximate_on_another_algorithm_names_the_limit_and_the_algorithms_that_take_it() {
        for algorithm in [
            Algorithm::TokenBucket,
            Algorithm::Gcra,
            Algorithm::SlidingWindowLog,
            Algorithm::LeakyBucket,
        ] {
            let yaml = format!(
                "domain: t\ndescriptors:\n  - key: path\n    value: /login\n    descriptors:\n      - key: remote_address\n        rate_limit: {{ unit: minute, requests_per_unit: 5, algorithm: {algorithm}, approximate: {{ memory: 4MiB }} }}\n"
            );
            let errors = reject(&yaml);
            let error = only_error(&errors);
            assert_eq!(
                error.path(),
                "descriptors[0].descriptors[0].rate_limit.approximate"
            );
            assert_eq!(error.line(), Some(7));
            assert_eq!(
                error.message(),
                format!(
                    "limit `path=/login/remote_address` uses {algorithm}: approximate works with fixed_window and sliding_window_counter; choose one of those or remove approximate"
                )
            );
        }
    }

    #[test]
    fn approximate_from_defaults_on_a_limit_it_does_not_fit_says_how_to_opt_out() {
        let yaml = r#"
domain: t
defaults: { approximate: { memory: 4MiB } }
descriptors:
  - key: method
    rate_limit: { unit: minute, requests_per_unit: 5, algorithm: gcra, name: bursty }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5, name: plain }
  - key: host
    rate_limit: { unit: second, requests_per_unit: 5, algorithm: leaky_bucket, approximate: none }
"#;
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_eq!(error.path(), "descriptors[0].rate_limit.approximate");
        assert_eq!(error.line(), Some(line_of(yaml, "name: bursty")));
        assert_eq!(
            error.message(),
            "limit `bursty` uses gcra: approximate works with fixed_window and sliding_window_counter; choose one of those or remove approximate (this limit takes approximate from `defaults`; it can opt out with `approximate: none`)"
        );
    }

    #[test]
    fn approximate_and_sync_every_on_one_limit_are_refused_saying_which_came_from_defaults() {
        let own = "domain: t\ndescriptors:\n  - key: method\n    rate_limit: { unit: second, requests_per_unit: 5, name: both, sync_every: 100ms, approximate: { memory: 4MiB } }\n";
        let errors = reject(own);
        let error = only_error(&errors);
        assert_eq!(error.path(), "descriptors[0].rate_limit.approximate");
        assert_eq!(error.line(), Some(4));
        assert_eq!(error.message(), format!("limit `both`: {NOT_BOTH}"));

        let yaml = r#"
domain: t
defaults: { sync_every: 100ms }
descriptors:
  - key: method
    rate_limit: { unit: second, requests_per_unit: 5, name: counted, approximate: { memory: 4MiB } }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5, sync_every: none, approximate: { memory: 4MiB } }
"#;
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_eq!(error.path(), "descriptors[0].rate_limit.approximate");
        assert_eq!(error.line(), Some(line_of(yaml, "name: counted")));
        assert_eq!(
            error.message(),
            format!("limit `counted`: {NOT_BOTH} (this limit takes sync_every from `defaults`; it can opt out with `sync_every: none`)")
        );

        let yaml = r#"
domain: t
defaults: { approximate: { memory: 4MiB } }
descriptors:
  - key: method
    rate_limit: { unit: second, requests_per_unit: 5, name: synced, sync_every: 250ms }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5, sync_every: 100ms, approximate: none }
"#;
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_eq!(error.path(), "descriptors[0].rate_limit.sync_every");
        assert_eq!(error.line(), Some(line_of(yaml, "250ms")));
        assert_eq!(
            error.message(),
            format!("limit `synced`: {NOT_BOTH} (this limit takes approximate from `defaults`; it can opt out with `approximate: none`)")
        );
    }

    #[test]
    fn defaults_with_both_approximate_and_sync_every_are_refused_once_there() {
        let yaml = r#"
domain: t
defaults:
  sync_every: 100ms
  approximate: { memory: 4MiB }
descriptors:
  - key: method
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5 }
"#;
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_eq!(error.path(), "defaults.approximate");
        assert_eq!(error.line(), Some(line_of(yaml, "approximate")));
        assert_eq!(
            error.message(),
            format!("defaults set both approximate and sync_every: {NOT_BOTH}; keep one in `defaults` and set the other on the limits that need it")
        );
    }

    #[test]
    fn unlimited_entries_ignore_approximate() {
        let rules = compile(
            r#"
domain: t
defaults: { approximate: { memory: 4MiB } }
descriptors:
  - key: path
    value: /health
    rate_limit: { unlimited: true }
  - key: path
    value: /metrics
    rate_limit: { unlimited: true, approximate: { memory: 1MiB }, sync_every: 100ms }
"#,
        );
        assert_eq!(sketches(&rules), [None, None]);
    }

    #[test]
    fn the_builder_checks_approximate_as_a_file_does() {
        let build = |limit: LimitSpec| {
            Rules::builder("t")
                .descriptor(DescriptorSpec::key("method").rate_limit(limit))
                .build()
        };
        let rules = build(LimitSpec::per(5, Unit::Second).approximate(4 * MIB)).expect("valid");
        assert_eq!(sketches(&rules), [Some(4 * MIB)]);

        let refused = [
            (
                LimitSpec::per(5, Unit::Second).approximate(1000),
                "descriptors[0].rate_limit.approximate.memory",
                "limit `method`: approximate memory must be at least 64KiB and at most 1GiB, not 1000 bytes".to_owned(),
            ),
            (
                LimitSpec::per(5, Unit::Second).approximate(2 * GIB),
                "descriptors[0].rate_limit.approximate.memory",
                "limit `method`: approximate memory must be at least 64KiB and at most 1GiB, not 2GiB".to_owned(),
            ),
            (
                LimitSpec::per(5, Unit::Second)
                    .algorithm(Algorithm::TokenBucket)
                    .approximate(4 * MIB),
                "descriptors[0].rate_limit.approximate",
                "limit `method` uses token_bucket: approximate works with fixed_window and sliding_window_counter; choose one of those or remove approximate".to_owned(),
            ),
            (
                LimitSpec::per(5, Unit::Second)
                    .sync_every(MS_100)
                    .approximate(4 * MIB),
                "descriptors[0].rate_limit.approximate",
                format!("limit `method`: {NOT_BOTH}"),
            ),
        ];
        for (limit, path, message) in refused {
            let errors = build(limit).expect_err("refused");
            let error = only_error(&errors);
            assert_eq!(error.path(), path);
            assert_eq!((error.line(), error.message()), (None, message.as_str()));
        }
    }

    #[test]
    fn an_approximate_limit_counts_at_most_a_billion() {
        let yaml = "domain: t\ndescriptors:\n  - key: method\n    rate_limit: { unit: second, requests_per_unit: 2000000000, approximate: { memory: 1MiB } }\n";
        let errors = Rules::from_yaml(yaml).expect_err("too large for the cells");
        let text = errors.to_string();
        assert!(
            text.contains("at most 1000000000 requests a period, not 2000000000"),
            "{text}"
        );
    }
}
