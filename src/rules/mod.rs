//! The rules: which limits apply to which requests.
//!
//! Rules come from a YAML file in the format of Envoy's ratelimit service, extended with
//! sources, client-IP settings and a choice of algorithm (the reference is
//! [`crate::guide::rules`]), or from [`RulesBuilder`] in Rust. Both go through the same validation, which reports every
//! mistake at once, with line and column when there is a file.
//!
//! ```
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: auth
//! sources:
//!   auth_type:
//!     - { value: login, method: POST, path: /auth/login }
//! descriptors:
//!   - key: auth_type
//!     value: login
//!     rate_limit: { unit: minute, requests_per_unit: 5 }
//! "#)?;
//! assert_eq!(rules.domain(), "auth");
//! assert_eq!(rules.limits()[0].descriptor(), "auth_type=login");
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```

mod builder;
mod compile;
mod error;
mod explain;
mod extensions;
mod file;
mod limit;
pub(crate) mod limit_override;
mod load_shedding;
mod period;
pub(crate) mod request_values;
mod response_options;
pub(crate) mod settlement;
mod size;
mod state_id;
pub(crate) mod stats_key;
pub(crate) mod tree;
mod wildcard;

pub use builder::{DescriptorSpec, LimitSpec, RulesBuilder, SourceSpec};
pub use error::{RuleError, RuleErrors};
pub use explain::{AppliedLimit, Explanation};
pub use file::{HeaderSet, OnStoreError, Unit};
pub(crate) use limit::Cost;
pub use limit::{Limit, Rate};
pub(crate) use limit_override::LimitOverride;
pub use response_options::{ResponseOptions, XRatelimitHeader};
pub use settlement::{Settlement, StatusSet};

use crate::algorithm::{Algorithm, Quota};
use crate::source::{ClientIpResolver, MissingPeerAddr, Source};
use load_shedding::LoadShedding;
pub(crate) use load_shedding::{Bounds, MaxInFlight};
use serde_saphyr::{Budget, Location, Options};
use smallvec::SmallVec;
use std::io::Read;
use std::path::Path;
use tree::{Level, Matches, Values};

/// Rules files larger than this are refused before parsing.
const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// An error about the rules file as a whole, naming it.
fn file_error(path: &Path, message: String) -> RuleErrors {
    RuleErrors::new(vec![RuleError::new(Location::UNKNOWN, "", message)])
        .in_file(path.display().to_string())
}

/// Where the values of a rules file's descriptor keys come from, which decides the keys it
/// may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeySources {
    /// From each HTTP request: every key is built in (`remote_address`, `path`, ...) or
    /// declared under `sources`, and an unknown key is an error. The default.
    #[default]
    Request,
    /// Given with each call: any key is accepted, and one neither built in nor declared is
    /// read from what the caller gives ([`Limiter::check`](crate::Limiter::check), a rate
    /// limit service's descriptors), never from an HTTP request.
    Given,
}

/// Compiled, validated rules.
#[derive(Debug, Clone)]
pub struct Rules {
    domain: String,
    pub(crate) sources: Vec<(String, Source)>,
    pub(crate) client_ip: ClientIpResolver,
    /// The file's limits, then, for a rate limit service (`KeySources::Given`), one
    /// [override limit](Rules::override_limit) per unit.
    pub(crate) limits: Vec<Limit>,
    /// How many of `limits` are the file's.
    declared: usize,
    root: Level,
    /// Whether any limit replaces another (most rules have none: skip the check).
    has_replaces: bool,
    /// Whether any limit is a `concurrency` limit or the load shedder (most rules have
    /// none: take no slots).
    pub(crate) has_concurrency: bool,
    /// Whether any limit has a `block_for` (most rules have none: start no block).
    pub(crate) has_blocks: bool,
    /// Whether any limit settles from the response (most rules have none: owe nothing).
    pub(crate) has_settlements: bool,
    /// Whether any limit is a quota (`quota_mode`; most rules have none).
    pub(crate) has_quotas: bool,
    /// `load_shedding`, if set.
    pub(crate) load_shedding: Option<LoadShedding>,
    pub(crate) response: ResponseOptions,
    /// The top-level `shadow_mode`: every limit only reports.
    shadow_mode: bool,
    /// Where the keys' values come from: for a rate limit service (`Given`), matching
    /// follows envoyproxy/ratelimit where it differs from the layer.
    keys: KeySources,
}

impl Rules {
    /// Compiles rules from YAML text.
    ///
    /// # Errors
    ///
    /// Every mistake found: YAML syntax, unknown keys, wrong types, and invalid rules, each
    /// with its line, column and path. Hostile input (huge, deeply nested, alias bombs) is
    /// refused with an error too.
    pub fn from_yaml(yaml: &str) -> Result<Rules, RuleErrors> {
        Rules::from_yaml_with(yaml, KeySources::Request)
    }

    /// Compiles rules from YAML text whose descriptor keys' values come from `keys`: with
    /// [`KeySources::Given`], any key is accepted, as a rate limit service accepts the keys
    /// of the descriptors it is sent (an envoyproxy/ratelimit configuration file loads
    /// unchanged).
    ///
    /// ```
    /// use tollgate::rules::{KeySources, Rules};
    ///
    /// let envoy = r#"
    /// domain: edge
    /// descriptors:
    ///   - key: generic_key
    ///     value: login
    ///     rate_limit: { unit: minute, requests_per_unit: 5 }
    /// "#;
    /// assert!(Rules::from_yaml(envoy).is_err(), "generic_key is not read from requests");
    /// assert!(Rules::from_yaml_with(envoy, KeySources::Given).is_ok());
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Rules::from_yaml`].
    pub fn from_yaml_with(yaml: &str, keys: KeySources) -> Result<Rules, RuleErrors> {
        if yaml.len() > MAX_FILE_BYTES {
            let message = format!(
                "the rules are {} bytes; the limit is {MAX_FILE_BYTES}",
                yaml.len()
            );
            return Err(RuleErrors::new(vec![RuleError::new(
                Location::UNKNOWN,
                "",
                message,
            )]));
        }
        compile::compile(Rules::parse(yaml)?, keys)
    }

    /// The rules file `yaml`, read, not compiled yet.
    fn parse(yaml: &str) -> Result<file::RawRules, RuleErrors> {
        let mut budget = Budget::default();
        budget.max_depth = 48;
        budget.max_nodes = 100_000;
        budget.max_aliases = 1_000;
        budget.max_anchors = 1_000;
        budget.max_documents = 1;
        let mut options = Options::default();
        options.budget = Some(budget);
        serde_saphyr::from_str_with_options(yaml, options).map_err(|error| {
            let location = error.location().unwrap_or(Location::UNKNOWN);
            let message = error.without_snippet().to_string();
            // The location is reported on its own; drop the parser's copy of it.
            let suffix = format!(" at line {}, column {}", location.line(), location.column());
            let message = message
                .strip_suffix(&suffix)
                .map_or(message.clone(), str::to_owned);
            RuleErrors::new(vec![RuleError::new(location, "", message)])
        })
    }

    /// Reads and compiles several rules files of one domain as one, as
    /// envoyproxy/ratelimit merges them with `MERGE_DOMAIN_CONFIG=true`: their descriptors
    /// in the files' order, every other setting the first file's. Two entries of the same
    /// key and value at one level are an error, as in one file.
    ///
    /// ```
    /// use tollgate::rules::{KeySources, Rules};
    ///
    /// let directory = std::env::temp_dir().join(format!("merge-{}", std::process::id()));
    /// std::fs::create_dir_all(&directory)?;
    /// let (first, second) = (directory.join("a.yaml"), directory.join("b.yaml"));
    /// let limit = |key: &str| format!(
    ///     "domain: shop\ndescriptors:\n  - key: {key}\n    rate_limit: {{ unit: minute, requests_per_unit: 5 }}\n"
    /// );
    /// std::fs::write(&first, limit("user"))?;
    /// std::fs::write(&second, limit("tenant"))?;
    /// let rules = Rules::from_files_with(&[&first, &second], KeySources::Given)?;
    /// assert_eq!((rules.domain(), rules.limits().len()), ("shop", 2));
    /// # std::fs::remove_dir_all(&directory)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Rules::from_file_with`], each file's own mistakes naming it; files of
    /// different domains; the merged rules' mistakes name every file.
    pub fn from_files_with(
        paths: &[impl AsRef<Path>],
        keys: KeySources,
    ) -> Result<Rules, RuleErrors> {
        let mut merged: Option<file::RawRules> = None;
        for path in paths {
            let path = path.as_ref();
            let bytes = Rules::read_file(path)?;
            let text = std::str::from_utf8(&bytes).map_err(|error| {
                file_error(path, format!("the rules file is not UTF-8 text: {error}"))
            })?;
            let raw =
                Rules::parse(text).map_err(|errors| errors.in_file(path.display().to_string()))?;
            let Some(first) = &mut merged else {
                merged = Some(raw);
                continue;
            };
            let domain = |raw: &file::RawRules| raw.domain.as_ref().map(|d| d.value.clone());
            if domain(&raw) != domain(first) {
                let message = format!(
                    "its domain is not the first file's (`{}`): only files of one domain merge",
                    domain(first).unwrap_or_default()
                );
                return Err(file_error(path, message));
            }
            first.descriptors.extend(raw.descriptors);
        }
        let merged = merged.ok_or_else(|| {
            RuleErrors::new(vec![RuleError::new(
                Location::UNKNOWN,
                "",
                "no rules file to merge",
            )])
        })?;
        let names: Vec<String> = paths
            .iter()
            .map(|path| path.as_ref().display().to_string())
            .collect();
        compile::compile(merged, keys).map_err(|errors| errors.in_file(names.join(" + ")))
    }

    /// Reads and compiles a rules file.
    ///
    /// # Errors
    ///
    /// As [`Rules::from_yaml`], naming the file; or the file could not be read.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Rules, RuleErrors> {
        Rules::from_file_with(path, KeySources::Request)
    }

    /// Reads and compiles a rules file whose descriptor keys' values come from `keys` (see
    /// [`Rules::from_yaml_with`]).
    ///
    /// # Errors
    ///
    /// As [`Rules::from_file`].
    pub fn from_file_with(path: impl AsRef<Path>, keys: KeySources) -> Result<Rules, RuleErrors> {
        let path = path.as_ref();
        Rules::from_file_bytes(path, &Rules::read_file(path)?, keys)
    }

    /// Reads the bytes of the rules file at `path`: at most one byte past the largest rules
    /// accepted, so that a huge file or a device such as `/dev/zero` is refused by
    /// [`Rules::from_file_bytes`] instead of filling memory.
    pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, RuleErrors> {
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|file| file.take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut bytes))
            .map_err(|error| file_error(path, format!("cannot read the rules file: {error}")))?;
        Ok(bytes)
    }

    /// Compiles the bytes [`Rules::read_file`] read from `path`, which errors name.
    pub(crate) fn from_file_bytes(
        path: &Path,
        bytes: &[u8],
        keys: KeySources,
    ) -> Result<Rules, RuleErrors> {
        let text = std::str::from_utf8(bytes).map_err(|error| {
            file_error(path, format!("the rules file is not UTF-8 text: {error}"))
        })?;
        Rules::from_yaml_with(text, keys)
            .map_err(|errors| errors.in_file(path.display().to_string()))
    }

    /// Starts rules for `domain` in Rust, without a file.
    pub fn builder(domain: impl Into<String>) -> RulesBuilder {
        RulesBuilder::new(domain)
    }

    /// The domain, which namespaces the rules' state in a shared store.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// Every rate limit, in the order of the file.
    pub fn limits(&self) -> &[Limit] {
        &self.limits[..self.declared]
    }

    /// The index, past [`Rules::limits`], of the limit that a rate limit service's
    /// descriptor of its own quota per `unit` books ([`LimitOverride`]);
    /// `None` for rules not compiled with [`KeySources::Given`], which have none.
    pub(crate) fn override_limit(&self, unit: Unit) -> Option<usize> {
        let at = Unit::ALL.iter().position(|u| *u == unit)?;
        (self.limits.len() > self.declared).then_some(self.declared + at)
    }

    /// The algorithm and quota that a descriptor's own quota `own` is decided with under
    /// these rules (the defaults' algorithm, see [`LimitOverride`]); `None` for rules not
    /// compiled with [`KeySources::Given`], which ignore it. For a service to check that its
    /// store can keep such a limit before it is asked to
    /// ([`RedisStore::holds`](crate::store::RedisStore::holds)).
    ///
    /// ```
    /// use tollgate::algorithm::Algorithm;
    /// use tollgate::rules::{KeySources, Rules, Unit};
    /// use tollgate::envoy::LimitOverride;
    ///
    /// let rules = Rules::from_yaml_with("domain: edge\ndescriptors: []\n", KeySources::Given)?;
    /// let own = LimitOverride { requests_per_unit: 10, unit: Unit::Minute };
    /// let (algorithm, quota) = rules.override_decided_by(own).expect("a service's rules");
    /// assert_eq!((algorithm, quota.requests_per_period()), (Algorithm::FixedWindow, 10));
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    // The link to `RedisStore::holds` resolves only with the `redis` feature (as on docs.rs).
    #[cfg_attr(not(feature = "redis"), allow(rustdoc::broken_intra_doc_links))]
    pub fn override_decided_by(&self, own: LimitOverride) -> Option<(Algorithm, Quota)> {
        let limit = &self.limits[self.override_limit(own.unit)?];
        let (algorithm, _) = limit.limited()?;
        Some((algorithm, own.quota()))
    }

    /// What a descriptor of `entries` with its own quota per `unit` books: the
    /// [override limit](Rules::override_limit) of the unit, its state keyed by every entry.
    pub(crate) fn override_match(
        &self,
        unit: Unit,
        entries: &[(&str, &str)],
    ) -> Option<tree::Matched> {
        let index = self.override_limit(unit)?;
        let limit = &self.limits[index];
        let id = state_id::state_id(limit.label(), &limit.rate());
        Some(tree::Matched::of_entries(index, id, entries))
    }

    /// These rules with every limit decided by `algorithm`, each keeping its quota: the
    /// same requests per period, and the same number of requests admitted at once (the
    /// token bucket's and GCRA's `burst`, the leaky bucket's `queue` and the request being
    /// served, fewer when its `max_delay` cuts the queue short). A window admits its limit
    /// at once whatever the burst was: a token bucket of 20 a second with bursts of 40
    /// becomes a window of 20. For comparing algorithms on the same traffic, as
    /// `tollgate simulate --compare-algorithms` does.
    ///
    /// A limit's `sync_every` is dropped where `algorithm` cannot be decided local-first,
    /// and `approximate` where it cannot be counted in a sketch. `unlimited` entries stay,
    /// and so do `block_for` and `calendar` (which only a fixed window reads).
    /// Each limit keeps its state apart from the original's in a shared store, as a limit
    /// whose algorithm changed in the file would.
    ///
    /// ```
    /// use tollgate::algorithm::Algorithm;
    /// use tollgate::rules::{Rate, Rules};
    ///
    /// let rules = Rules::from_yaml(r#"
    /// domain: api
    /// descriptors:
    ///   - key: remote_address
    ///     rate_limit: { unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 40 }
    /// "#)?;
    /// let leaky = rules.with_algorithm(Algorithm::LeakyBucket)?;
    /// let Rate::Limited { quota, algorithm } = leaky.limits()[0].rate() else { panic!() };
    /// assert_eq!(algorithm, Algorithm::LeakyBucket);
    /// assert_eq!((quota.requests_per_period(), quota.queue()), (20, 39));
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A limit the rules would refuse under `algorithm`: one that would book more than 100
    /// years ahead (GCRA and the leaky bucket book their capacity's intervals ahead).
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    pub fn with_algorithm(&self, algorithm: Algorithm) -> Result<Rules, RuleErrors> {
        let mut rules = self.clone();
        let mut errors = Vec::new();
        // The file's limits: those past them keep blocks, or a service's own quotas, by
        // their own algorithm.
        for limit in &mut rules.limits[..self.declared] {
            match limit.with_algorithm(algorithm) {
                Ok(changed) => *limit = changed,
                Err(message) => {
                    errors.push(RuleError::new(Location::UNKNOWN, limit.label(), message))
                }
            }
        }
        if !errors.is_empty() {
            return Err(RuleErrors::new(errors));
        }
        let Rules { limits, root, .. } = &mut rules;
        root.for_each_limit_mut(&mut |node| {
            let limit = &limits[node.index];
            node.state_id = state_id::state_id(limit.descriptor(), &limit.rate());
        });
        Ok(rules)
    }

    /// The descriptor keys whose values can only be given with each call, never read from
    /// an HTTP request: the keys of rules compiled with [`KeySources::Given`] that are
    /// neither built in nor declared under `sources`.
    ///
    /// ```
    /// use tollgate::rules::{KeySources, Rules};
    ///
    /// let rules = Rules::from_yaml_with(r#"
    /// domain: edge
    /// descriptors:
    ///   - key: generic_key
    ///     value: login
    ///     descriptors:
    ///       - key: remote_address
    ///         rate_limit: { unit: minute, requests_per_unit: 5 }
    /// "#, KeySources::Given)?;
    /// assert_eq!(rules.given_keys().collect::<Vec<_>>(), ["generic_key"]);
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    pub fn given_keys(&self) -> impl Iterator<Item = &str> {
        self.sources
            .iter()
            .filter(|(_, source)| matches!(source, Source::Given))
            .map(|(name, _)| name.as_str())
    }

    /// How the client address is found.
    pub fn client_ip(&self) -> &ClientIpResolver {
        &self.client_ip
    }

    /// Which rate-limit headers responses carry, and under which names.
    pub fn response(&self) -> &ResponseOptions {
        &self.response
    }

    /// Whether every limit only counts and reports, denying and delaying nothing (the
    /// top-level `shadow_mode: true`; see also [`Limiter::set_shadow_mode`](crate::Limiter::set_shadow_mode)).
    pub fn shadow_mode(&self) -> bool {
        self.shadow_mode
    }

    /// Puts into `matches` the limits that apply to a request whose values `values` gives,
    /// after `unlimited` and `replaces` are taken into account. (Filled in place rather than
    /// returned: the matches are large enough that each return would copy them.)
    pub(crate) fn applicable(
        &self,
        values: &mut dyn Values,
        matches: &mut Matches,
    ) -> Result<(), MissingPeerAddr> {
        self.matched(values, matches)?;
        self.set_aside(matches);
        Ok(())
    }

    /// Puts into `matches` every entry on the walk of a request whose values `values` gives.
    pub(crate) fn matched(
        &self,
        values: &mut dyn Values,
        matches: &mut Matches,
    ) -> Result<(), MissingPeerAddr> {
        self.root.walk(values, matches)
    }

    /// Drops from `matches` what an `unlimited` match exempts (everything) and what
    /// `replaces` replaces.
    pub(crate) fn set_aside(&self, matches: &mut Matches) {
        let limits = &self.limits;
        // Shadow entries only report: they neither exempt a request nor replace a limit.
        let exempt = matches
            .iter()
            .map(|m| &limits[m.limit_index])
            .any(Limit::exempts);
        if exempt {
            matches.clear();
        } else if self.has_replaces {
            let mut replaced = self.replaced(matches).into_iter();
            matches.retain(|_| !replaced.next().unwrap_or(false));
        }
    }

    /// The limit the descriptor `entries` reach, as a rate limit service matches its calls'
    /// descriptors (see [`Limiter::check_descriptors`](crate::Limiter::check_descriptors));
    /// `None` when a key is unknown to the rules or the walk reaches no limit.
    pub(crate) fn descriptor_limit(&self, entries: &[(&str, &str)]) -> Option<tree::Matched> {
        let mut walk = SmallVec::<[(usize, &str); 4]>::new();
        for &(key, value) in entries {
            let source = self.sources.iter().position(|(name, _)| name == key)?;
            walk.push((source, value));
        }
        self.root.descriptor(&walk)
    }

    /// For each of `matches`, whether another of them `replaces` it. A shadow-mode limit
    /// replaces nothing in the layer (it only reports), and replaces as any other for a rate
    /// limit service, as in envoyproxy/ratelimit.
    pub(crate) fn replaced(&self, matches: &Matches) -> SmallVec<[bool; 4]> {
        let limits = &self.limits;
        let shadow_replaces = self.keys == KeySources::Given;
        let replaces = |limit: &Limit, name: &str| {
            (shadow_replaces || !limit.shadow) && limit.replaces.iter().any(|r| r == name)
        };
        matches
            .iter()
            .map(|m| {
                limits[m.limit_index].name.as_deref().is_some_and(|name| {
                    matches
                        .iter()
                        .any(|other| replaces(&limits[other.limit_index], name))
                })
            })
            .collect()
    }
}
