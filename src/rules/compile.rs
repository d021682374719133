//! Validation: raw rules in, [`Rules`] out, or every error found.
//!
//! Each check is a small function that records what is wrong and carries on, so one run
//! reports all the mistakes in a file.

use super::error::{RuleError, RuleErrors};
use super::file::{
    Located, OnStoreError, RawClassifierEntry, RawClientIp, RawCost, RawDescriptor, RawRateLimit,
    RawRules, RawSingleSource, RawSource, Unit,
};
use super::tree::{Group, Level, Node, NodeLimit};
use super::{response_options, Cost, Limit, Rate, Rules};
use crate::algorithm::{Algorithm, Quota};
use crate::source::{Classifier, ClientIpResolver, PathPattern, Source};
use http::{HeaderName, Method};
use ipnet::IpNet;
use serde_saphyr::Location;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::time::Duration;

/// How deep descriptors may nest; deeper trees are certainly mistakes.
const MAX_DEPTH: usize = 16;
/// The longest period a limit may have.
const MAX_PERIOD: Duration = Duration::from_secs(100 * 365 * 86_400);
/// The largest limit or burst: token counts are kept as signed 64-bit numbers.
const MAX_COUNT: u64 = i64::MAX as u64;
/// The IPv6 prefix that groups one client, unless configured.
const DEFAULT_IPV6_PREFIX: u8 = 64;

pub(crate) fn compile(raw: RawRules) -> Result<Rules, RuleErrors> {
    let mut compiler = Compiler {
        errors: Vec::new(),
        declared: HashMap::new(),
        sources: Vec::new(),
        source_ids: HashMap::new(),
        limits: Vec::new(),
        names: Vec::new(),
        replaced: Vec::new(),
        default_algorithm: raw.defaults.algorithm.unwrap_or(Algorithm::FixedWindow),
        on_store_error: raw.defaults.on_store_error.unwrap_or_default(),
    };
    if raw.domain.value.trim().is_empty() {
        compiler.error(
            raw.domain.referenced,
            "domain",
            "the domain must not be empty",
        );
    }
    compiler.declare_sources(&raw.sources);
    let client_ip = compiler.client_ip(raw.client_ip);
    let root = compiler.level(&raw.descriptors, "descriptors", "", &[], 1);
    compiler.check_names();
    let response = response_options::compile(&raw.response, &mut compiler.errors);
    if !compiler.errors.is_empty() {
        // Checks run in passes; report in the order of the file (stable for rules without lines).
        compiler
            .errors
            .sort_by_key(|error| (error.line(), error.column()));
        return Err(RuleErrors::new(compiler.errors));
    }
    Ok(Rules {
        domain: raw.domain.value,
        sources: compiler.sources,
        client_ip,
        has_replaces: compiler.limits.iter().any(|l| !l.replaces().is_empty()),
        limits: compiler.limits,
        root,
        response,
        shadow_mode: raw.shadow_mode,
    })
}

struct Compiler {
    errors: Vec<RuleError>,
    /// Declared sources by name; `None` for one with errors (already reported).
    declared: HashMap<String, Option<Source>>,
    /// The sources that descriptor keys use, by id.
    sources: Vec<(String, Source)>,
    source_ids: HashMap<String, usize>,
    limits: Vec<Limit>,
    /// Every limit name written, with its place: checked once the walk is done, including
    /// names of limits that had errors of their own.
    names: Vec<(Located<String>, String)>,
    /// Every name that `replaces` refers to, with its place.
    replaced: Vec<(Located<String>, String)>,
    default_algorithm: Algorithm,
    on_store_error: OnStoreError,
}

impl Compiler {
    fn error(&mut self, location: Location, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(RuleError::new(location, path, message));
    }

    fn declare_sources(&mut self, declared: &BTreeMap<String, Located<RawSource>>) {
        for (name, raw) in declared {
            if Source::builtin(name).is_some() {
                let message = format!("`{name}` is a built-in key and cannot be redeclared");
                self.error(raw.referenced, format!("sources.{name}"), message);
            } else {
                let source = self.source(name, raw);
                self.declared.insert(name.clone(), source);
            }
        }
    }

    fn source(&mut self, name: &str, raw: &Located<RawSource>) -> Option<Source> {
        let path = format!("sources.{name}");
        match &raw.value {
            RawSource::Single(RawSingleSource::Header(header)) => {
                match HeaderName::from_bytes(header.as_bytes()) {
                    Ok(header) => Some(Source::Header(header)),
                    Err(_) => {
                        self.error(
                            raw.referenced,
                            format!("{path}.header"),
                            format!("`{header}` is not a valid header name"),
                        );
                        None
                    }
                }
            }
            RawSource::Single(RawSingleSource::Query(query)) if query.is_empty() => {
                self.error(
                    raw.referenced,
                    format!("{path}.query"),
                    "the query parameter name must not be empty",
                );
                None
            }
            RawSource::Single(RawSingleSource::Query(query)) => Some(Source::Query(query.clone())),
            RawSource::Single(RawSingleSource::Identity) => Some(Source::Identity),
            RawSource::Classifier(entries) => self
                .classifier(entries, raw.referenced, &path)
                .map(Source::Classifier),
        }
    }

    fn classifier(
        &mut self,
        entries: &[RawClassifierEntry],
        location: Location,
        path: &str,
    ) -> Option<Classifier> {
        if entries.is_empty() {
            self.error(location, path, "a classifier needs at least one entry");
            return None;
        }
        let errors_before = self.errors.len();
        let mut compiled = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let path = format!("{path}[{i}]");
            if entry.value.is_empty() {
                self.error(
                    location,
                    format!("{path}.value"),
                    "the value must not be empty",
                );
            }
            let method = entry.method.as_deref().and_then(|m| {
                match Method::from_bytes(m.to_ascii_uppercase().as_bytes()) {
                    Ok(method) => Some(method),
                    Err(_) => {
                        self.error(
                            location,
                            format!("{path}.method"),
                            format!("`{m}` is not an HTTP method"),
                        );
                        None
                    }
                }
            });
            let pattern = entry.path.as_deref().and_then(|p| {
                if p.starts_with('/') {
                    Some(PathPattern::new(p))
                } else {
                    self.error(
                        location,
                        format!("{path}.path"),
                        format!("`{p}` must start with `/`"),
                    );
                    None
                }
            });
            compiled.push((entry.value.clone(), method, pattern));
        }
        (self.errors.len() == errors_before).then(|| Classifier::new(compiled))
    }

    fn client_ip(&mut self, raw: Option<Located<RawClientIp>>) -> ClientIpResolver {
        let raw = raw.map(|r| r.value).unwrap_or_default();
        let mut trusted = Vec::new();
        for (i, proxy) in raw.trusted_proxies.iter().enumerate() {
            let text = proxy.value.trim();
            match text
                .parse::<IpNet>()
                .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
            {
                Ok(net) => trusted.push(net),
                Err(_) => self.error(
                    proxy.referenced,
                    format!("client_ip.trusted_proxies[{i}]"),
                    format!("`{text}` is neither an IP address nor a CIDR block"),
                ),
            }
        }
        let prefix = match raw.ipv6_prefix {
            Some(prefix) if prefix.value == 0 || prefix.value > 128 => {
                self.error(
                    prefix.referenced,
                    "client_ip.ipv6_prefix",
                    "must be between 1 and 128",
                );
                DEFAULT_IPV6_PREFIX
            }
            Some(prefix) => prefix.value,
            None => DEFAULT_IPV6_PREFIX,
        };
        ClientIpResolver::new(trusted, prefix).with_header(raw.header)
    }

    /// The id of the source named by `key`; `path` is where an unknown name is reported.
    fn source_id(&mut self, key: &Located<String>, path: &str) -> Option<usize> {
        let name = key.value.as_str();
        if let Some(&id) = self.source_ids.get(name) {
            return Some(id);
        }
        let source = match Source::builtin(name) {
            Some(source) => source,
            None => match self.declared.get(name) {
                Some(source) => source.clone()?,
                None => {
                    let message = format!(
                        "unknown key `{name}`: declare it under `sources`, or use a built-in key ({})",
                        Source::BUILTIN_NAMES.join(", ")
                    );
                    self.error(key.referenced, path, message);
                    return None;
                }
            },
        };
        let id = self.sources.len();
        self.sources.push((name.to_owned(), source));
        self.source_ids.insert(name.to_owned(), id);
        Some(id)
    }

    fn level(
        &mut self,
        descriptors: &[Located<RawDescriptor>],
        path: &str,
        parent: &str,
        parent_sources: &[usize],
        depth: usize,
    ) -> Level {
        let mut groups: Vec<Group> = Vec::new();
        let mut seen = HashSet::new();
        for (i, descriptor) in descriptors.iter().enumerate() {
            let path = format!("{path}[{i}]");
            let raw = &descriptor.value;
            if depth > MAX_DEPTH {
                self.error(
                    descriptor.referenced,
                    &path,
                    format!("descriptors nest deeper than {MAX_DEPTH} levels"),
                );
                continue;
            }
            let value = raw.value.as_ref().map(|v| v.value.as_str());
            if !seen.insert((raw.key.value.as_str(), value)) {
                self.error(
                    descriptor.referenced,
                    &path,
                    format!("duplicate entry for key `{}` and this value", raw.key.value),
                );
                continue;
            }
            let source = self.source_id(&raw.key, &format!("{path}.key"));
            let entry = match value {
                Some(value) => format!("{}={value}", raw.key.value),
                None => raw.key.value.clone(),
            };
            let chain = if parent.is_empty() {
                entry
            } else {
                format!("{parent}/{entry}")
            };
            // The sources of the entries down to this one (an unknown key has none).
            let sources: Vec<usize> = parent_sources.iter().copied().chain(source).collect();
            let node = Node {
                limit: self.limit(descriptor, &path, &chain, &sources),
                children: self.level(
                    &raw.descriptors,
                    &format!("{path}.descriptors"),
                    &chain,
                    &sources,
                    depth + 1,
                ),
            };
            // An unknown key was reported; its entry was still compiled for its own errors.
            let Some(source) = source else {
                continue;
            };
            let group_index = match groups.iter().position(|g| g.source == source) {
                Some(index) => index,
                None => {
                    groups.push(Group {
                        source,
                        exact: HashMap::new(),
                        prefixes: Vec::new(),
                        key_only: None,
                    });
                    groups.len() - 1
                }
            };
            let group = &mut groups[group_index];
            match &raw.value {
                None => group.key_only = Some(Box::new(node)),
                Some(value) => match value.value.strip_suffix('*') {
                    Some(prefix) if !prefix.contains('*') => {
                        group.prefixes.push((prefix.to_owned(), node))
                    }
                    _ if value.value.contains('*') => self.error(
                        value.referenced,
                        format!("{path}.value"),
                        "a wildcard `*` may only end a value (`prefix*`)",
                    ),
                    _ => {
                        group.exact.insert(value.value.clone(), node);
                    }
                },
            }
        }
        for group in &mut groups {
            group
                .prefixes
                .sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        }
        Level { groups }
    }

    fn limit(
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
            label_json: serde_json::Value::from(label).to_string().into(),
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
        let mut quota = Quota::new(limit.value, period?).with_burst(burst);
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
        if quota.limit() == 0 {
            return true;
        }
        let interval = u128::from(quota.period_nanos()).div_ceil(u128::from(quota.limit()));
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

    fn check_names(&mut self) {
        let mut seen = HashSet::new();
        let mut errors = Vec::new();
        for (name, path) in &self.names {
            if name.value.is_empty() {
                errors.push(RuleError::new(
                    name.referenced,
                    path,
                    "the name must not be empty",
                ));
            } else if !seen.insert(name.value.as_str()) {
                let message = format!("the name `{}` is used twice", name.value);
                errors.push(RuleError::new(name.referenced, path, message));
            }
        }
        for (name, path) in &self.replaced {
            if !seen.contains(name.value.as_str()) {
                let message = format!(
                    "`replaces` names `{}`, but no rate limit has that name",
                    name.value
                );
                errors.push(RuleError::new(name.referenced, path, message));
            }
        }
        self.errors.extend(errors);
    }
}

/// A stable 64-bit identity of a limit (FNV-1a: the same in every process, unlike std's
/// randomly seeded hasher, so that servers sharing a store agree).
fn state_id(chain: &str, rate: &Rate) -> u64 {
    let mut bytes = chain.as_bytes().to_vec();
    if let Rate::Limited { quota, algorithm } = rate {
        bytes.push(0);
        bytes.extend_from_slice(algorithm.name().as_bytes());
        for number in [quota.limit(), quota.period_nanos(), quota.burst()] {
            bytes.extend_from_slice(&number.to_le_bytes());
        }
    }
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash: u64, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The units of a `period` or `max_delay`, largest first, in milliseconds: what
/// [`parse_period`] reads and [`Unit::format_period`] writes.
const PERIOD_UNITS: [(&str, u128); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// `30s`, `500ms`, `5m`, `2h`, `1d`.
fn parse_period(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let (_, size) = PERIOD_UNITS.iter().find(|(name, _)| *name == unit.trim())?;
    let millis = u128::from(number) * size;
    let seconds = u64::try_from(millis / 1_000).ok()?;
    let nanos = u32::try_from(millis % 1_000).ok()? * 1_000_000;
    let duration = Duration::new(seconds, nanos);
    (!duration.is_zero()).then_some(duration)
}

impl Unit {
    /// `duration` as a rules file writes a `period` or `max_delay`: in whole milliseconds,
    /// the rules' smallest unit (a fraction of one is dropped), with the largest unit that
    /// divides it: `d`, `h`, `m`, `s` or `ms`.
    ///
    /// The rules read the text back as the same whole milliseconds, for any duration from
    /// 1 ms to `u64::MAX` ms. Below 1 ms it is `0ms`, which they refuse like any zero period.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::rules::{Rules, Unit};
    ///
    /// assert_eq!(Unit::format_period(Duration::from_secs(3_600)), "1h");
    /// assert_eq!(Unit::format_period(Duration::from_secs(90)), "90s");
    /// assert_eq!(Unit::format_period(Duration::from_micros(1_500)), "1ms");
    ///
    /// let period = Duration::from_millis(2_500);
    /// let rules = Rules::from_yaml(&format!(
    ///     r#"
    /// domain: d
    /// descriptors:
    ///   - key: method
    ///     rate_limit: {{ period: {}, requests_per_unit: 5 }}
    /// "#,
    ///     Unit::format_period(period),
    /// ))?;
    /// assert_eq!(rules.limits()[0].quota().map(|quota| quota.period()), Some(period));
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn format_period(duration: Duration) -> String {
        let millis = duration.as_millis();
        let (unit, size) = PERIOD_UNITS
            .into_iter()
            .find(|(_, size)| millis >= *size && millis % size == 0)
            .unwrap_or(("ms", 1));
        format!("{}{unit}", millis / size)
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_period, Unit};
    use std::time::Duration;

    #[test]
    fn periods_parse_with_units_and_reject_zero() {
        assert_eq!(parse_period("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_period("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_period("2h"), Some(Duration::from_secs(7_200)));
        assert_eq!(parse_period("0s"), None);
        assert_eq!(parse_period("s"), None);
        assert_eq!(parse_period("10 fortnights"), None);
        assert_eq!(parse_period("99999999999999999999d"), None);
    }

    #[test]
    fn periods_are_written_in_the_largest_exact_unit() {
        assert_eq!(Unit::format_period(Duration::from_secs(60)), "1m");
        assert_eq!(Unit::format_period(Duration::from_secs(30)), "30s");
        assert_eq!(Unit::format_period(Duration::from_secs(90)), "90s");
        assert_eq!(Unit::format_period(Duration::from_millis(500)), "500ms");
        assert_eq!(Unit::format_period(Duration::from_secs(7 * 86_400)), "7d");
    }

    #[test]
    fn written_periods_read_back_as_the_same_whole_milliseconds() {
        let periods = [
            Duration::from_millis(1),
            Duration::from_millis(1_001),
            Duration::from_secs(1),
            Duration::from_secs(59),
            Duration::from_secs(3_600),
            Duration::from_secs(5_400),
            Duration::from_secs(86_400),
            Duration::from_secs(100 * 365 * 86_400),
            Duration::from_millis(u64::MAX),
            Duration::from_secs(u64::MAX / 86_400 * 86_400),
        ];
        for period in periods {
            let text = Unit::format_period(period);
            assert_eq!(parse_period(&text), Some(period), "{text}");
        }
        let fraction = Duration::from_micros(2_500);
        let text = Unit::format_period(fraction);
        assert_eq!(
            parse_period(&text),
            Some(Duration::from_millis(2)),
            "{text}"
        );
    }

    #[test]
    fn periods_below_a_millisecond_are_written_as_zero_which_is_refused() {
        for period in [
            Duration::ZERO,
            Duration::from_nanos(3),
            Duration::from_micros(999),
        ] {
            assert_eq!(Unit::format_period(period), "0ms");
        }
        assert_eq!(parse_period("0ms"), None);
    }
}
