//! The rules file as written: serde types that reject unknown keys and keep each entry's
//! location, so that [`compile`](super::compile) can point at the line of every mistake.

use crate::algorithm::Algorithm;
use crate::source::{ExtensionSource, ForwardedHeader};
use serde::de::{self, IntoDeserializer, Visitor};
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// A value with the place in the file it came from (unknown for rules built in Rust).
pub(crate) type Located<T> = Spanned<T>;

/// `value` without a location, for rules built in Rust.
pub(crate) fn unlocated<T>(value: T) -> Located<T> {
    Spanned::new(value, Location::UNKNOWN, Location::UNKNOWN)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRules {
    /// Checked when compiled: missing, it is reported as the file's mistake.
    #[serde(default)]
    pub(crate) domain: Option<Located<String>>,
    #[serde(default)]
    pub(crate) sources: BTreeMap<String, Located<RawSource>>,
    #[serde(default)]
    pub(crate) client_ip: Option<Located<RawClientIp>>,
    #[serde(default)]
    pub(crate) defaults: RawDefaults,
    #[serde(default)]
    pub(crate) response: RawResponse,
    #[serde(default)]
    pub(crate) shadow_mode: bool,
    #[serde(default)]
    pub(crate) load_shedding: Option<Located<RawLoadShedding>>,
    /// Empty when written empty (`descriptors:`), as envoyproxy/ratelimit reads it.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub(crate) descriptors: Vec<Located<RawDescriptor>>,
}

/// A list that may be written empty (`descriptors:`, a null): then no items.
fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// `load_shedding`: the requests the server runs at once, at most, by priority.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLoadShedding {
    pub(crate) max_in_flight: Located<RawMaxInFlight>,
    /// With `max_in_flight: adaptive`: the least and most it may be.
    #[serde(default)]
    pub(crate) min: Option<Located<u64>>,
    #[serde(default)]
    pub(crate) max: Option<Located<u64>>,
    #[serde(default)]
    pub(crate) priority: Option<Located<RawPriority>>,
}

/// `load_shedding.max_in_flight`: a number, or `adaptive`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawMaxInFlight {
    Fixed(u64),
    Named(String),
}

/// `load_shedding.priority`: where a request's priority comes from, and the levels, most
/// important first.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPriority {
    pub(crate) key: Located<String>,
    pub(crate) order: Vec<Located<String>>,
    /// Per level, the share of `max_in_flight` it may fill, in percent.
    #[serde(default)]
    pub(crate) shares: Option<Located<Vec<u64>>>,
    /// The level of a request whose value is missing or not in `order`.
    #[serde(default)]
    pub(crate) default: Option<Located<String>>,
}

/// A source: one of the single-value kinds, or a classifier (a list of entries).
#[derive(Debug, Clone)]
pub(crate) enum RawSource {
    Classifier(Vec<RawClassifierEntry>),
    Single(RawSingleSource),
}

// By hand rather than `untagged`, so that a mistake inside a source is reported as itself
// ("unknown variant `cookie`") instead of "did not match any variant".
impl<'de> Deserialize<'de> for RawSource {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SourceVisitor;

        impl<'de> Visitor<'de> for SourceVisitor {
            type Value = RawSource;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`identity`, `{ header: NAME }`, `{ query: NAME }`, `{ extension: NAME }` or a list of classifier entries")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<RawSource, E> {
                RawSingleSource::deserialize(text.into_deserializer()).map(RawSource::Single)
            }

            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<RawSource, A::Error> {
                RawSingleSource::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawSource::Single)
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<RawSource, A::Error> {
                Vec::deserialize(de::value::SeqAccessDeserializer::new(seq))
                    .map(RawSource::Classifier)
            }
        }

        deserializer.deserialize_any(SourceVisitor)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum RawSingleSource {
    Header(String),
    Query(String),
    Identity,
    /// A type in the request extensions, named here and bound in Rust
    /// ([`Rules::with_extension`](super::Rules::with_extension)).
    Extension(String),
    /// A type in the request extensions, given in Rust ([`SourceSpec::extension`](super::SourceSpec::extension)).
    #[serde(skip)]
    Typed(ExtensionSource),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClassifierEntry {
    pub(crate) value: String,
    #[serde(default)]
    pub(crate) method: Option<String>,
    #[serde(default)]
    pub(crate) path: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClientIp {
    #[serde(default)]
    pub(crate) trusted_proxies: Vec<Located<String>>,
    #[serde(default)]
    pub(crate) ipv6_prefix: Option<Located<u8>>,
    #[serde(default)]
    pub(crate) header: ForwardedHeader,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDefaults {
    #[serde(default)]
    pub(crate) algorithm: Option<Algorithm>,
    #[serde(default)]
    pub(crate) on_store_error: Option<OnStoreError>,
    #[serde(default)]
    pub(crate) sync_every: Option<Located<RawSyncEvery>>,
    #[serde(default)]
    pub(crate) approximate: Option<Located<RawApproximate>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResponse {
    #[serde(default)]
    pub(crate) headers: Option<Located<HeaderSet>>,
    /// The older spelling of `headers: both` (`true`) and of the default (`false`).
    #[serde(default)]
    pub(crate) ietf_headers: Option<Located<bool>>,
    #[serde(default)]
    pub(crate) reset_header: Option<Located<bool>>,
    #[serde(default)]
    pub(crate) names: RawHeaderNames,
}

/// New names for the `X-Ratelimit-*` headers, each optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHeaderNames {
    #[serde(default)]
    pub(crate) limit: Option<Located<String>>,
    #[serde(default)]
    pub(crate) remaining: Option<Located<String>>,
    #[serde(default)]
    pub(crate) retry_after: Option<Located<String>>,
    #[serde(default)]
    pub(crate) reset: Option<Located<String>>,
}

/// Which rate-limit headers responses carry (`response.headers` in the rules file).
///
/// Denials carry `Retry-After` whatever the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HeaderSet {
    /// `X-Ratelimit-Limit` and `X-Ratelimit-Remaining`, and on denials
    /// `X-Ratelimit-Retry-After` (the default).
    #[default]
    XRatelimit,
    /// The IETF `RateLimit-Policy` and `RateLimit` fields
    /// (draft-ietf-httpapi-ratelimit-headers).
    Ietf,
    /// Both of the above.
    Both,
    /// No rate-limit headers: denials carry only `Retry-After`.
    None,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDescriptor {
    pub(crate) key: Located<String>,
    #[serde(default)]
    pub(crate) value: Option<Located<String>>,
    /// Boxed: reading nested descriptors recurses, and unboxed, every level's frames would
    /// hold a whole rate limit (several copies in debug builds): the deepest files the YAML
    /// budget admits came within a few KiB of a 2 MiB thread stack.
    #[serde(default)]
    pub(crate) rate_limit: Option<Box<Located<RawRateLimit>>>,
    /// Boxed, as `rate_limit` is.
    #[serde(default)]
    pub(crate) concurrency: Option<Box<Located<RawConcurrency>>>,
    #[serde(default)]
    pub(crate) shadow_mode: bool,
    #[serde(default)]
    pub(crate) hash_tag: bool,
    /// Whether the values the entry's wildcard matches share one count.
    #[serde(default)]
    pub(crate) share_threshold: bool,
    /// Whether the entry's limit is a quota (envoyproxy/ratelimit's `quota_mode`).
    #[serde(default)]
    pub(crate) quota_mode: bool,
    /// What a rate limit service returns of the entry's limit (envoyproxy/ratelimit's
    /// `metadata`): any map.
    #[serde(default)]
    pub(crate) metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// envoyproxy/ratelimit's metric options: how its statistics name the entry's limit
    /// (tollgate's own metrics are per limit whatever they say).
    #[serde(default)]
    pub(crate) detailed_metric: bool,
    #[serde(default)]
    pub(crate) value_to_metric: bool,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub(crate) descriptors: Vec<Located<RawDescriptor>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRateLimit {
    #[serde(default)]
    pub(crate) name: Option<Located<String>>,
    #[serde(default)]
    pub(crate) unit: Option<Located<Unit>>,
    #[serde(default)]
    pub(crate) unit_multiplier: Option<Located<u64>>,
    #[serde(default)]
    pub(crate) period: Option<Located<String>>,
    #[serde(default)]
    pub(crate) requests_per_unit: Option<Located<u64>>,
    #[serde(default)]
    pub(crate) unlimited: bool,
    #[serde(default)]
    pub(crate) algorithm: Option<Located<Algorithm>>,
    #[serde(default)]
    pub(crate) burst: Option<Located<u64>>,
    #[serde(default)]
    pub(crate) queue: Option<Located<u64>>,
    #[serde(default)]
    pub(crate) mode: Option<Located<LeakyMode>>,
    #[serde(default)]
    pub(crate) max_delay: Option<Located<String>>,
    #[serde(default)]
    pub(crate) cost: Option<Located<RawCost>>,
    #[serde(default)]
    pub(crate) on_store_error: Option<OnStoreError>,
    #[serde(default)]
    pub(crate) sync_every: Option<Located<RawSyncEvery>>,
    #[serde(default)]
    pub(crate) approximate: Option<Located<RawApproximate>>,
    #[serde(default)]
    pub(crate) replaces: Vec<Located<RawReplaces>>,
    /// How long a key this limit refuses stays refused, e.g. `15m`.
    #[serde(default)]
    pub(crate) block_for: Option<Located<String>>,
    /// Windows on calendar boundaries (`day`, `week`, `month`, `year`).
    #[serde(default)]
    pub(crate) calendar: Option<Located<bool>>,
    /// The time zone of the calendar, e.g. `Europe/Paris` (default UTC).
    #[serde(default)]
    pub(crate) time_zone: Option<Located<String>>,
    /// Where the response says what the request cost.
    #[serde(default)]
    pub(crate) settle: Option<Located<RawSettle>>,
    /// The responses whose requests count.
    #[serde(default)]
    pub(crate) count_when: Option<Located<RawCountWhen>>,
}

/// `settle`: where the response says what its request cost.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSettle {
    #[serde(default)]
    pub(crate) response_header: Option<Located<String>>,
    #[serde(default)]
    pub(crate) response_trailer: Option<Located<String>>,
    /// Charged by a rate limit service's call once the stream is done.
    #[serde(default)]
    pub(crate) stream_done: Option<Located<bool>>,
}

/// `count_when`: the responses whose requests count.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCountWhen {
    /// HTTP statuses.
    #[serde(default)]
    pub(crate) status: Vec<Located<RawStatus>>,
    /// gRPC status codes.
    #[serde(default)]
    pub(crate) grpc_status: Vec<Located<RawStatus>>,
}

/// A status as written: a number (`401`, `16`), or a word (a class such as `"5xx"`, a gRPC
/// code's name such as `UNAUTHENTICATED`), checked when compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RawStatus {
    Code(u64),
    Word(String),
}

impl<'de> Deserialize<'de> for RawStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StatusVisitor;

        impl Visitor<'_> for StatusVisitor {
            type Value = RawStatus;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a status (e.g. 401, 5xx, UNAUTHENTICATED)")
            }

            fn visit_u64<E: de::Error>(self, code: u64) -> Result<RawStatus, E> {
                Ok(RawStatus::Code(code))
            }

            fn visit_i64<E: de::Error>(self, code: i64) -> Result<RawStatus, E> {
                u64::try_from(code)
                    .map(RawStatus::Code)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(code), &self))
            }

            fn visit_str<E: de::Error>(self, word: &str) -> Result<RawStatus, E> {
                Ok(RawStatus::Word(word.to_owned()))
            }
        }

        deserializer.deserialize_any(StatusVisitor)
    }
}

/// A `concurrency` entry: how many of a client's requests may run at once.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConcurrency {
    #[serde(default)]
    pub(crate) name: Option<Located<String>>,
    pub(crate) max_in_flight: Located<u64>,
    /// How long a slot is held in a shared store unless renewed, e.g. `30s`.
    #[serde(default)]
    pub(crate) lease: Option<Located<String>>,
}

impl RawRateLimit {
    /// Whether `mode: police` is set.
    pub(crate) fn is_policing(&self) -> bool {
        self.mode
            .as_ref()
            .is_some_and(|mode| mode.value == LeakyMode::Police)
    }
}

/// How a leaky bucket treats the requests it queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LeakyMode {
    /// Delay them until their turn (the default).
    Shape,
    /// Admit them at once; the queue only measures.
    Police,
}

/// `sync_every` as written: an interval, kept as text so that
/// [`compile`](super::compile) can say what is wrong with it, or `none`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub(crate) enum RawSyncEvery {
    /// `none`: decided exactly, even when `defaults` sets an interval.
    Off,
    /// An interval, e.g. `100ms` (checked when compiled).
    Every(String),
}

impl From<String> for RawSyncEvery {
    fn from(text: String) -> Self {
        if text.trim() == "none" {
            RawSyncEvery::Off
        } else {
            RawSyncEvery::Every(text)
        }
    }
}

/// `approximate` as written: `{ memory: SIZE }`, or `none`.
#[derive(Debug, Clone)]
pub(crate) enum RawApproximate {
    /// `none`: counted exactly, even when `defaults` sets `approximate`.
    Off,
    /// `{ memory: SIZE }`: counted in a sketch of that size (checked when compiled).
    Sketch(RawSketch),
}

/// The map of an `approximate` that is not `none`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSketch {
    pub(crate) memory: Located<RawSize>,
}

// By hand, as `RawSource`: a mistake inside the map is reported as itself ("unknown field").
impl<'de> Deserialize<'de> for RawApproximate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ApproximateVisitor;

        impl<'de> Visitor<'de> for ApproximateVisitor {
            type Value = RawApproximate;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`{ memory: SIZE }` (e.g. `{ memory: 4MiB }`) or `none`")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<RawApproximate, E> {
                if text.trim() == "none" {
                    Ok(RawApproximate::Off)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(text), &self))
                }
            }

            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<RawApproximate, A::Error> {
                RawSketch::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawApproximate::Sketch)
            }
        }

        deserializer.deserialize_any(ApproximateVisitor)
    }
}

/// A size in bytes as written, `64KiB`, `4MiB`, `1GiB` or a bare number of bytes, kept as
/// text so that [`compile`](super::compile) can say what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawSize(pub(crate) String);

impl<'de> Deserialize<'de> for RawSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;

        impl Visitor<'_> for SizeVisitor {
            type Value = RawSize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size: a number of bytes, or one and KiB, MiB or GiB (e.g. 4MiB)")
            }

            fn visit_u64<E: de::Error>(self, bytes: u64) -> Result<RawSize, E> {
                Ok(RawSize(bytes.to_string()))
            }

            fn visit_i64<E: de::Error>(self, bytes: i64) -> Result<RawSize, E> {
                Ok(RawSize(bytes.to_string()))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<RawSize, E> {
                Ok(RawSize(text.to_owned()))
            }
        }

        deserializer.deserialize_any(SizeVisitor)
    }
}

/// A request's weight: a number, or the name of a source whose value is the number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RawCost {
    Fixed(u64),
    Source(String),
}

impl<'de> Deserialize<'de> for RawCost {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CostVisitor;

        impl Visitor<'_> for CostVisitor {
            type Value = RawCost;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a positive whole number, or the name of a source (e.g. a header) giving one",
                )
            }

            fn visit_u64<E: de::Error>(self, cost: u64) -> Result<RawCost, E> {
                Ok(RawCost::Fixed(cost))
            }

            fn visit_i64<E: de::Error>(self, cost: i64) -> Result<RawCost, E> {
                u64::try_from(cost)
                    .map(RawCost::Fixed)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(cost), &self))
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<RawCost, E> {
                Ok(RawCost::Source(name.to_owned()))
            }
        }

        deserializer.deserialize_any(CostVisitor)
    }
}

/// Envoy writes `replaces: [{name: other}]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReplaces {
    /// Checked when compiled: written empty, it is reported as the file's mistake.
    #[serde(default)]
    pub(crate) name: Option<String>,
}

/// The length of a rate limit's period, as in Envoy's ratelimit service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// One second.
    #[serde(alias = "SECOND")]
    Second,
    /// 60 seconds.
    #[serde(alias = "MINUTE")]
    Minute,
    /// 3,600 seconds.
    #[serde(alias = "HOUR")]
    Hour,
    /// 86,400 seconds.
    #[serde(alias = "DAY")]
    Day,
    /// 7 days.
    #[serde(alias = "WEEK")]
    Week,
    /// 30 days, as in Envoy.
    #[serde(alias = "MONTH")]
    Month,
    /// 365 days, as in Envoy.
    #[serde(alias = "YEAR")]
    Year,
}

impl Unit {
    /// Every unit, shortest first.
    pub const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// The unit's name in a rules file.
    ///
    /// ```
    /// use tollgate::rules::Unit;
    ///
    /// assert_eq!(Unit::Minute.name(), "minute");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }

    /// The unit's length in seconds.
    pub fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
            Unit::Year => 365 * 86_400,
        }
    }

    /// The unit's length.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::rules::Unit;
    ///
    /// assert_eq!(Unit::Hour.period(), Duration::from_secs(3_600));
    /// ```
    pub fn period(self) -> Duration {
        Duration::from_secs(self.seconds())
    }
}

/// What to do with a request when the store cannot decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OnStoreError {
    /// Fail open: admit the request.
    #[default]
    Allow,
    /// Fail closed: deny the request.
    Deny,
    /// Decide from an in-memory store with the same rules (limits then hold per server)
    /// until the shared store is back.
    Local,
}

impl OnStoreError {
    /// The name used in rules files.
    ///
    /// ```
    /// use tollgate::rules::OnStoreError;
    ///
    /// assert_eq!(OnStoreError::Local.name(), "local");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            OnStoreError::Allow => "allow",
            OnStoreError::Deny => "deny",
            OnStoreError::Local => "local",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::OnStoreError;

    #[test]
    fn store_error_policies_are_named_as_the_rules_file_spells_them() {
        for policy in [OnStoreError::Allow, OnStoreError::Deny, OnStoreError::Local] {
            let read: OnStoreError = serde_saphyr::from_str(policy.name()).expect("a policy");
            assert_eq!(read, policy);
        }
    }
}
