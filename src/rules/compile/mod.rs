//! Validation: raw rules in, [`Rules`] out, or every error found.
//!
//! Each check is a small function that records what is wrong and carries on, so one run
//! reports all the mistakes in a file.

mod block;
mod calendar;
mod concurrency;
mod load_shedding;
mod overrides;
mod rate_limit;
mod settlement;
mod sources;

use super::error::{RuleError, RuleErrors};
use super::file::{Located, OnStoreError, RawDescriptor, RawRules};
use super::stats_key::StatsEntry;
use super::tree::{Group, Level, Node};
use super::wildcard::Wildcard;
use super::{response_options, Limit, Rules};
use crate::algorithm::Algorithm;
use crate::rules::KeySources;
use crate::source::Source;
use crate::store::Approximate;
use serde_saphyr::Location;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// How deep descriptors may nest; deeper trees are certainly mistakes.
const MAX_DEPTH: usize = 16;

pub(super) use rate_limit::books_within_horizon;

pub(crate) fn compile(raw: RawRules, keys: KeySources) -> Result<Rules, RuleErrors> {
    let mut compiler = Compiler {
        errors: Vec::new(),
        keys,
        declared: HashMap::new(),
        sources: Vec::new(),
        source_ids: HashMap::new(),
        limits: Vec::new(),
        names: Vec::new(),
        replaced: Vec::new(),
        default_algorithm: raw.defaults.algorithm.unwrap_or(Algorithm::FixedWindow),
        on_store_error: raw.defaults.on_store_error.unwrap_or_default(),
        default_sync_every: None,
        default_approximate: None,
        blocked: Vec::new(),
        stats_path: Vec::new(),
    };
    if let Some(written) = &raw.defaults.sync_every {
        compiler.default_sync_every = compiler
            .sync_interval(written, "defaults.sync_every")
            .flatten();
    }
    if let Some(written) = &raw.defaults.approximate {
        compiler.default_approximate = compiler
            .sketch(written, "defaults.approximate", None)
            .flatten();
        compiler.check_defaults_approximate(written);
    }
    let domain = match raw.domain {
        Some(domain) if !domain.value.trim().is_empty() => domain.value,
        written => {
            let location = written.map_or(Location::UNKNOWN, |domain| domain.referenced);
            let message = "the file names no domain: write `domain: NAME` at its top (the domain Envoy's calls name)";
            compiler.error(location, "domain", message);
            String::new()
        }
    };
    compiler.declare_sources(&raw.sources);
    let client_ip = compiler.client_ip(raw.client_ip);
    let root = compiler.level(&raw.descriptors, "descriptors", "", &[], 1);
    let load_shedding = compiler.load_shedding(raw.load_shedding.as_ref());
    compiler.check_names();
    let declared = compiler.limits.len();
    if keys == KeySources::Given {
        compiler.add_override_limits();
    }
    compiler.add_block_limits();
    let response = response_options::compile(&raw.response, &mut compiler.errors);
    if !compiler.errors.is_empty() {
        // Checks run in passes; report in the order of the file (stable for rules without lines).
        compiler
            .errors
            .sort_by_key(|error| (error.line(), error.column()));
        return Err(RuleErrors::new(compiler.errors));
    }
    Ok(Rules {
        domain,
        sources: compiler.sources,
        client_ip,
        has_replaces: compiler.limits.iter().any(|l| !l.replaces().is_empty()),
        has_concurrency: compiler.limits.iter().any(|l| l.max_in_flight().is_some()),
        has_blocks: compiler.limits.iter().any(|l| l.block.is_some()),
        has_settlements: compiler.limits.iter().any(|l| l.settlement.is_some()),
        has_quotas: compiler.limits.iter().any(|l| l.quota),
        load_shedding,
        limits: compiler.limits,
        declared,
        root,
        response,
        shadow_mode: raw.shadow_mode,
        keys,
    })
}

struct Compiler {
    errors: Vec<RuleError>,
    /// Which keys the rules may use.
    keys: KeySources,
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
    /// The limits with a `block_for`, by index, and its duration: each gets a limit that
    /// keeps its blocks once the file's are compiled.
    blocked: Vec<(usize, Duration)>,
    /// `defaults.sync_every`; `None` also when it is `none` or wrong (reported once, there).
    default_sync_every: Option<Duration>,
    /// `defaults.approximate`; `None` also when it is `none` or wrong (reported once, there).
    default_approximate: Option<Approximate>,
    /// The entries from the top to the one being compiled, as statistics name them.
    stats_path: Vec<StatsEntry>,
}

impl Compiler {
    fn error(&mut self, location: Location, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(RuleError::new(location, path, message));
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
            self.stats_path.push(StatsEntry {
                key: raw.key.value.clone(),
                value: value.map(str::to_owned),
                value_to_metric: raw.value_to_metric,
                share_threshold: raw.share_threshold,
                detailed_metric: raw.detailed_metric,
            });
            let node = Node {
                limit: self.limit(descriptor, &path, &chain, &sources),
                concurrency: self.concurrency(descriptor, &path, &chain, &sources),
                hash_tag: raw.hash_tag,
                share_threshold: raw.share_threshold,
                children: self.level(
                    &raw.descriptors,
                    &format!("{path}.descriptors"),
                    &chain,
                    &sources,
                    depth + 1,
                ),
            };
            self.stats_path.pop();
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
                        wildcards: Vec::new(),
                        key_only: None,
                    });
                    groups.len() - 1
                }
            };
            let group = &mut groups[group_index];
            let wildcard = raw.value.as_ref().and_then(|v| Wildcard::parse(&v.value));
            if raw.share_threshold && wildcard.is_none() {
                let message = "share_threshold counts the values a wildcard matches as one: give the entry a value with `*` (e.g. `files/*`)";
                self.error(descriptor.referenced, &path, message);
            }
            match (&raw.value, wildcard) {
                (None, _) => group.key_only = Some(Box::new(node)),
                (Some(_), Some(wildcard)) => group.wildcards.push((wildcard, node)),
                (Some(value), None) => {
                    group.exact.insert(value.value.clone(), node);
                }
            }
        }
        // For the layer, the most specific wildcard wins; for a rate limit service, the
        // first in the file, as envoyproxy/ratelimit takes it.
        if self.keys == KeySources::Request {
            for group in &mut groups {
                group
                    .wildcards
                    .sort_by_key(|(wildcard, _)| std::cmp::Reverse(wildcard.literal_len()));
            }
        }
        Level { groups }
    }

    /// Records the `name` of the limit at `path`, if it has one, for `check_names`.
    fn written_name(&mut self, name: Option<&Located<String>>, path: &str) {
        if let Some(name) = name {
            self.names.push((name.clone(), format!("{path}.name")));
        }
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
