//! Rules in Rust, compiled through the same validation as a file.

use super::file::{
    unlocated, LeakyMode, RawApproximate, RawClassifierEntry, RawClientIp, RawConcurrency, RawCost,
    RawDescriptor, RawRateLimit, RawReplaces, RawRules, RawSingleSource, RawSize, RawSketch,
    RawSource, RawSyncEvery,
};
use super::{HeaderSet, OnStoreError, RuleErrors, Rules, Unit, XRatelimitHeader};
use crate::algorithm::Algorithm;
use crate::source::{ExtensionSource, ForwardedHeader};
use std::time::Duration;

/// Builds [`Rules`] without a file.
///
/// ```
/// use tollgate::algorithm::Algorithm;
/// use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, SourceSpec, Unit};
///
/// let rules = Rules::builder("demo")
///     .source("user_id", SourceSpec::header("x-user-id"))
///     .trusted_proxy("10.0.0.0/8")
///     .descriptor(DescriptorSpec::key("remote_address").rate_limit(
///         LimitSpec::per(20, Unit::Second).algorithm(Algorithm::TokenBucket).burst(40),
///     ))
///     .descriptor(DescriptorSpec::key("user_id").rate_limit(LimitSpec::per(100, Unit::Minute)))
///     .build()?;
/// assert_eq!(rules.limits().len(), 2);
/// # Ok::<(), tollgate::rules::RuleErrors>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct RulesBuilder {
    raw: RawRules,
}

impl RulesBuilder {
    pub(super) fn new(domain: impl Into<String>) -> Self {
        RulesBuilder {
            raw: RawRules {
                domain: Some(unlocated(domain.into())),
                sources: Default::default(),
                client_ip: None,
                defaults: Default::default(),
                response: Default::default(),
                shadow_mode: false,
                load_shedding: None,
                descriptors: Vec::new(),
            },
        }
    }

    /// Declares where the value of descriptor key `name` comes from.
    pub fn source(mut self, name: impl Into<String>, source: SourceSpec) -> Self {
        self.raw.sources.insert(name.into(), unlocated(source.0));
        self
    }

    /// Trusts forwarding headers from peers in `cidr` (an address or a CIDR block).
    pub fn trusted_proxy(mut self, cidr: impl Into<String>) -> Self {
        let client_ip = self
            .raw
            .client_ip
            .get_or_insert_with(|| unlocated(RawClientIp::default()));
        client_ip.value.trusted_proxies.push(unlocated(cidr.into()));
        self
    }

    /// Groups IPv6 clients by this prefix length (default 64).
    pub fn ipv6_prefix(mut self, prefix: u8) -> Self {
        let client_ip = self
            .raw
            .client_ip
            .get_or_insert_with(|| unlocated(RawClientIp::default()));
        client_ip.value.ipv6_prefix = Some(unlocated(prefix));
        self
    }

    /// The forwarding header the trusted proxies write (default `X-Forwarded-For`).
    pub fn forwarded_header(mut self, header: ForwardedHeader) -> Self {
        let client_ip = self
            .raw
            .client_ip
            .get_or_insert_with(|| unlocated(RawClientIp::default()));
        client_ip.value.header = header;
        self
    }

    /// The algorithm of limits that name none (default `fixed_window`, as in Envoy).
    pub fn default_algorithm(mut self, algorithm: Algorithm) -> Self {
        self.raw.defaults.algorithm = Some(algorithm);
        self
    }

    /// What to do when the store fails (default: allow).
    pub fn on_store_error(mut self, policy: OnStoreError) -> Self {
        self.raw.defaults.on_store_error = Some(policy);
        self
    }

    /// Which rate-limit headers responses carry (default [`HeaderSet::XRatelimit`]); see
    /// [`ResponseOptions`](super::ResponseOptions).
    ///
    /// ```
    /// use tollgate::rules::{HeaderSet, Rules, XRatelimitHeader};
    ///
    /// let rules = Rules::builder("api")
    ///     .headers(HeaderSet::Both)
    ///     .header_name(XRatelimitHeader::Remaining, "x-rate-limit-remaining")
    ///     .build()?;
    /// assert!(rules.response().ietf_headers);
    /// assert_eq!(
    ///     rules.response().header_name(XRatelimitHeader::Remaining),
    ///     "x-rate-limit-remaining"
    /// );
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn headers(mut self, headers: HeaderSet) -> Self {
        self.raw.response.headers = Some(unlocated(headers));
        self
    }

    /// Sends `X-Ratelimit-Reset`.
    pub fn reset_header(mut self, enabled: bool) -> Self {
        self.raw.response.reset_header = Some(unlocated(enabled));
        self
    }

    /// Sends `header` under `name` instead of its usual name.
    pub fn header_name(mut self, header: XRatelimitHeader, name: impl Into<String>) -> Self {
        *self.raw.response.names.get_mut(header) = Some(unlocated(name.into()));
        self
    }

    /// Puts every limit in shadow mode: they count and report, but deny and delay nothing.
    pub fn shadow_mode(mut self, shadow: bool) -> Self {
        self.raw.shadow_mode = shadow;
        self
    }

    /// Adds a top-level descriptor entry.
    pub fn descriptor(mut self, descriptor: DescriptorSpec) -> Self {
        self.raw.descriptors.push(unlocated(descriptor.0));
        self
    }

    /// Validates and compiles the rules.
    ///
    /// # Errors
    ///
    /// Every mistake, each with the path of the entry (there are no lines without a file).
    pub fn build(self) -> Result<Rules, RuleErrors> {
        super::compile::compile(self.raw, super::KeySources::Request)
    }
}

/// Where a descriptor key's value comes from; see [`RulesBuilder::source`].
#[derive(Debug, Clone)]
pub struct SourceSpec(RawSource);

impl SourceSpec {
    /// A request header.
    pub fn header(name: impl Into<String>) -> Self {
        SourceSpec(RawSource::Single(RawSingleSource::Header(name.into())))
    }

    /// A query-string parameter.
    pub fn query(name: impl Into<String>) -> Self {
        SourceSpec(RawSource::Single(RawSingleSource::Query(name.into())))
    }

    /// The [`Identity`](crate::source::Identity) an authentication layer stored in the request.
    pub fn identity() -> Self {
        SourceSpec(RawSource::Single(RawSingleSource::Identity))
    }

    /// The `T` an earlier layer stored in the request extensions, such as a tenant that an
    /// authentication middleware found: the key's value is its [`AsRef<str>`] text, read
    /// without a copy. A request without a `T` has no value for the key, and does not match
    /// the entries on it.
    ///
    /// ```
    /// use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, SourceSpec, Unit};
    ///
    /// /// Inserted into the request extensions by the authentication middleware.
    /// #[derive(Clone)]
    /// struct TenantId(String);
    ///
    /// impl AsRef<str> for TenantId {
    ///     fn as_ref(&self) -> &str {
    ///         &self.0
    ///     }
    /// }
    ///
    /// let rules = Rules::builder("api")
    ///     .source("tenant", SourceSpec::extension::<TenantId>())
    ///     .descriptor(DescriptorSpec::key("tenant").rate_limit(LimitSpec::per(100, Unit::Second)))
    ///     .build()?;
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn extension<T: AsRef<str> + Send + Sync + 'static>() -> Self {
        SourceSpec(RawSource::Single(RawSingleSource::Typed(
            ExtensionSource::of::<T>(),
        )))
    }

    /// A classifier: `(value, method, path pattern)` entries, the first match giving the value.
    pub fn classifier<'a>(
        entries: impl IntoIterator<Item = (&'a str, Option<&'a str>, Option<&'a str>)>,
    ) -> Self {
        let entries = entries
            .into_iter()
            .map(|(value, method, path)| RawClassifierEntry {
                value: value.to_owned(),
                method: method.map(str::to_owned),
                path: path.map(str::to_owned),
            })
            .collect();
        SourceSpec(RawSource::Classifier(entries))
    }
}

/// A descriptor entry; see [`RulesBuilder::descriptor`].
#[derive(Debug, Clone)]
#[must_use]
pub struct DescriptorSpec(RawDescriptor);

impl DescriptorSpec {
    /// An entry for descriptor key `key`, matching every value (each limited separately).
    pub fn key(key: impl Into<String>) -> Self {
        DescriptorSpec(RawDescriptor {
            key: unlocated(key.into()),
            value: None,
            rate_limit: None,
            concurrency: None,
            shadow_mode: false,
            hash_tag: false,
            share_threshold: false,
            quota_mode: false,
            metadata: None,
            detailed_metric: false,
            value_to_metric: false,
            descriptors: Vec::new(),
        })
    }

    /// Matches only this value (or, with a `*`, the values it matches: `prefix*`,
    /// `foo*bar`).
    pub fn value(mut self, value: impl Into<String>) -> Self {
        self.0.value = Some(unlocated(value.into()));
        self
    }

    /// The limit of this entry.
    pub fn rate_limit(mut self, limit: LimitSpec) -> Self {
        self.0.rate_limit = Some(Box::new(unlocated(limit.0)));
        self
    }

    /// At most `max_in_flight` requests of each value of this entry run at once (see the
    /// [rules reference](crate::guide::rules#concurrency)).
    pub fn concurrency(mut self, max_in_flight: u64) -> Self {
        self.0.concurrency = Some(Box::new(unlocated(RawConcurrency {
            name: None,
            max_in_flight: unlocated(max_in_flight),
            lease: None,
        })));
        self
    }

    /// Only report would-be denials.
    pub fn shadow_mode(mut self, shadow: bool) -> Self {
        self.0.shadow_mode = shadow;
        self
    }

    /// Makes this entry's value the hash tag of the limits at and below it: a store that
    /// spreads keys over shards (a Redis Cluster) keeps them with the other keys of the same
    /// value (see the [rules reference](crate::guide::rules)).
    pub fn hash_tag(mut self, hash_tag: bool) -> Self {
        self.0.hash_tag = hash_tag;
        self
    }

    /// Counts every value this entry's wildcard matches as one (`share_threshold` in the
    /// [rules reference](crate::guide::rules#descriptors-and-matching)): compiling refuses
    /// it on a value without `*`.
    ///
    /// ```
    /// use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};
    ///
    /// let files = DescriptorSpec::key("path")
    ///     .value("files/*")
    ///     .share_threshold(true)
    ///     .rate_limit(LimitSpec::per(100, Unit::Minute));
    /// let rules = Rules::builder("downloads").descriptor(files).build()?;
    /// assert_eq!(rules.limits().len(), 1);
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn share_threshold(mut self, shared: bool) -> Self {
        self.0.share_threshold = shared;
        self
    }

    /// Nests an entry under this one.
    pub fn nested(mut self, descriptor: DescriptorSpec) -> Self {
        self.0.descriptors.push(unlocated(descriptor.0));
        self
    }
}

/// A rate limit; see [`DescriptorSpec::rate_limit`].
#[derive(Debug, Clone)]
#[must_use]
pub struct LimitSpec(RawRateLimit);

impl LimitSpec {
    /// `requests` per `unit`, in the order of [`Quota::new`](crate::algorithm::Quota::new).
    pub fn per(requests: u64, unit: Unit) -> Self {
        LimitSpec(RawRateLimit {
            unit: Some(unlocated(unit)),
            requests_per_unit: Some(unlocated(requests)),
            ..RawRateLimit::default()
        })
    }

    /// `requests` per `period`, in whole milliseconds.
    pub fn every(requests: u64, period: Duration) -> Self {
        LimitSpec(RawRateLimit {
            period: Some(unlocated(Unit::format_period(period))),
            requests_per_unit: Some(unlocated(requests)),
            ..RawRateLimit::default()
        })
    }

    /// No limit: requests that match are never limited.
    pub fn unlimited() -> Self {
        LimitSpec(RawRateLimit {
            unlimited: true,
            ..RawRateLimit::default()
        })
    }

    /// Multiplies the unit (e.g. 5 × minute).
    pub fn unit_multiplier(mut self, multiplier: u64) -> Self {
        self.0.unit_multiplier = Some(unlocated(multiplier));
        self
    }

    /// The algorithm (default: the rules' default).
    pub fn algorithm(mut self, algorithm: Algorithm) -> Self {
        self.0.algorithm = Some(unlocated(algorithm));
        self
    }

    /// The token bucket's capacity (default: the limit).
    pub fn burst(mut self, burst: u64) -> Self {
        self.0.burst = Some(unlocated(burst));
        self
    }

    /// Waiting places in a leaky bucket's queue (default 0).
    pub fn queue(mut self, queue: u64) -> Self {
        self.0.queue = Some(unlocated(queue));
        self
    }

    /// Leaky bucket policing: queued requests are admitted at once instead of waiting.
    pub fn policing(mut self) -> Self {
        self.0.mode = Some(unlocated(LeakyMode::Police));
        self
    }

    /// The longest a request may wait in a leaky bucket's queue, in whole milliseconds.
    pub fn max_delay(mut self, max_delay: Duration) -> Self {
        self.0.max_delay = Some(unlocated(Unit::format_period(max_delay)));
        self
    }

    /// Every request weighs `cost` under this limit.
    pub fn cost(mut self, cost: u64) -> Self {
        self.0.cost = Some(unlocated(RawCost::Fixed(cost)));
        self
    }

    /// A request's weight is the value of the source named `source` (a whole number; 1
    /// when the request has none).
    pub fn cost_from(mut self, source: impl Into<String>) -> Self {
        self.0.cost = Some(unlocated(RawCost::Source(source.into())));
        self
    }

    /// What to do when the store fails, for this limit (default: the rules' default).
    pub fn on_store_error(mut self, policy: OnStoreError) -> Self {
        self.0.on_store_error = Some(policy);
        self
    }

    /// Decides this limit local-first: a store shared by a fleet (Redis) decides it from
    /// local counts and agrees with the fleet every `interval`, in whole milliseconds
    /// (`sync_every` in the [rules reference](crate::guide::rules#rate_limit)). Checked as in
    /// a file when the rules are built: at least 10 ms, at most the limit's period, and only
    /// with `fixed_window`, `sliding_window_counter`, `token_bucket` or `gcra`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::Algorithm;
    /// use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};
    ///
    /// let every = Duration::from_millis(100);
    /// let rules = Rules::builder("api")
    ///     .descriptor(DescriptorSpec::key("remote_address").rate_limit(
    ///         LimitSpec::per(20, Unit::Second).sync_every(every),
    ///     ))
    ///     .build()?;
    /// assert_eq!(rules.limits()[0].sync_every(), Some(every));
    ///
    /// let log = LimitSpec::per(20, Unit::Second)
    ///     .algorithm(Algorithm::SlidingWindowLog)
    ///     .sync_every(every);
    /// let refused = Rules::builder("api")
    ///     .descriptor(DescriptorSpec::key("remote_address").rate_limit(log))
    ///     .build();
    /// assert!(refused.is_err());
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn sync_every(mut self, interval: Duration) -> Self {
        let interval = RawSyncEvery::Every(Unit::format_period(interval));
        self.0.sync_every = Some(unlocated(interval));
        self
    }

    /// A penalty: a key this limit refuses stays refused for `block`, in whole milliseconds
    /// (`block_for` in the [rules reference](crate::guide::rules#block_for-a-penalty)), at
    /// least a second.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};
    ///
    /// let block = Duration::from_secs(15 * 60);
    /// let rules = Rules::builder("api")
    ///     .descriptor(DescriptorSpec::key("remote_address").rate_limit(
    ///         LimitSpec::per(5, Unit::Minute).block_for(block),
    ///     ))
    ///     .build()?;
    /// assert_eq!(rules.limits()[0].block_for(), Some(block));
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn block_for(mut self, block: Duration) -> Self {
        self.0.block_for = Some(unlocated(Unit::format_period(block)));
        self
    }

    /// Counts in the calendar's days, weeks, months or years (this limit's unit) in the
    /// time zone named `time_zone` (`calendar: true` in the
    /// [rules reference](crate::guide::rules#calendar-quotas)). Checked as in a file when the
    /// rules are built: a fixed window of a day, week, month or year, and a time zone of
    /// the IANA database.
    ///
    /// ```
    /// use tollgate::algorithm::Algorithm;
    /// use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};
    ///
    /// let plan = LimitSpec::per(10_000, Unit::Month)
    ///     .algorithm(Algorithm::FixedWindow)
    ///     .calendar("Europe/Paris");
    /// let rules = Rules::builder("api")
    ///     .descriptor(DescriptorSpec::key("remote_address").rate_limit(plan))
    ///     .build()?;
    /// let calendar = rules.limits()[0].quota().and_then(|quota| quota.calendar());
    /// assert_eq!(calendar.map(|c| c.time_zone()), Some("Europe/Paris"));
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn calendar(mut self, time_zone: impl Into<String>) -> Self {
        self.0.calendar = Some(unlocated(true));
        self.0.time_zone = Some(unlocated(time_zone.into()));
        self
    }

    /// Counts this limit in a count-min sketch of `memory_bytes`: the memory store then keeps
    /// millions of clients in that fixed memory (`approximate` in the
    /// [rules reference](crate::guide::rules#rate_limit)). Checked as in a file when the
    /// rules are built: at least 64 KiB, at most 1 GiB, only with `fixed_window` or
    /// `sliding_window_counter`, and not with [`sync_every`](LimitSpec::sync_every).
    ///
    /// ```
    /// use tollgate::algorithm::Algorithm;
    /// use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};
    ///
    /// let memory = 4 * 1024 * 1024;
    /// let rules = Rules::builder("api")
    ///     .descriptor(DescriptorSpec::key("remote_address").rate_limit(
    ///         LimitSpec::per(20, Unit::Second).approximate(memory),
    ///     ))
    ///     .build()?;
    /// let sketch = rules.limits()[0].approximate().map(|sketch| sketch.memory());
    /// assert_eq!(sketch, Some(memory));
    ///
    /// let bucket = LimitSpec::per(20, Unit::Second)
    ///     .algorithm(Algorithm::TokenBucket)
    ///     .approximate(memory);
    /// let refused = Rules::builder("api")
    ///     .descriptor(DescriptorSpec::key("remote_address").rate_limit(bucket))
    ///     .build();
    /// assert!(refused.is_err());
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn approximate(mut self, memory_bytes: usize) -> Self {
        let memory = unlocated(RawSize(memory_bytes.to_string()));
        let sketch = RawApproximate::Sketch(RawSketch { memory });
        self.0.approximate = Some(unlocated(sketch));
        self
    }

    /// A name, for `replaces`, logs and headers.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.0.name = Some(unlocated(name.into()));
        self
    }

    /// Drops the limit called `name` when both apply to a request.
    pub fn replaces(mut self, name: impl Into<String>) -> Self {
        self.0.replaces.push(unlocated(RawReplaces {
            name: Some(name.into()),
        }));
        self
    }
}
