//! One `ShouldRateLimit` call: the request checked, its descriptors decided all or nothing,
//! and the answer, one status per descriptor. Shared by the gRPC service and `POST /json`;
//! the admin endpoints check, read and answer a call with the same parts.

use super::domains::Domains;
use super::metadata::{dynamic_metadata, passed_metadata};
use super::proto::envoy::config::core::v3::HeaderValue;
use super::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use super::proto::envoy::r#type::v3::RateLimitUnit;
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use super::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use super::stats::{self, Statsd};
use super::store::Backing;
use serde_json::Map;
use std::sync::Arc;
use std::time::Duration;
use tollgate::envoy::{CallVerdict, Descriptor, LimitOverride};
use tollgate::response::verdict_headers;
use tollgate::rules::{self, Limit, Rate, Rules};
use tollgate::{LimitDecision, Limiter};
use tonic::Status;

/// The most descriptors in one call.
const MOST_DESCRIPTORS: usize = 64;
/// The most entries in one descriptor.
const MOST_ENTRIES: usize = 16;
/// The longest key or value of an entry, in bytes.
const LONGEST_TEXT: usize = 4096;

/// How the service answers, besides its decisions: envoyproxy/ratelimit's settings.
#[derive(Debug, Clone, Default)]
pub(crate) struct Answering {
    /// Whether answers carry dynamic metadata (`RESPONSE_DYNAMIC_METADATA`).
    pub(crate) dynamic_metadata: bool,
    /// The headers answers carry.
    pub(crate) headers: Headers,
    /// Where envoyproxy/ratelimit's statistics of each call go (`USE_STATSD`), if anywhere.
    pub(crate) statsd: Option<Arc<Statsd>>,
}

/// The headers an answer gives the response (`response_headers_to_add`).
#[derive(Debug, Clone, Default)]
pub(crate) enum Headers {
    /// Those the rules' `response` section chooses, as the layer would.
    #[default]
    Rules,
    /// None: envoyproxy/ratelimit's default.
    None,
    /// envoyproxy/ratelimit's (`LIMIT_RESPONSE_HEADERS_ENABLED`), under these names: the
    /// limit, what remains and the seconds until the reset, of the descriptor with the least
    /// left (or of the last over its limit).
    Upstream {
        limit: String,
        remaining: String,
        reset: String,
    },
}

/// Decides `request` with the limiter of its domain among `domains`, answering as
/// `answering` says: the answer, or why the request is malformed. A call for a domain the
/// service does not limit is answered `OK`, nothing limited, as envoyproxy/ratelimit
/// answers it.
///
/// # Errors
///
/// `INVALID_ARGUMENT` for a request with no domain, no descriptors, too many of them or
/// text too long.
pub(crate) async fn should_rate_limit<St: Backing>(
    domains: &Domains<St>,
    request: &RateLimitRequest,
    answering: &Answering,
) -> Result<RateLimitResponse, Status> {
    well_formed(request)?;
    let Some(limiter) = domains.get(&request.domain) else {
        if let Some(statsd) = &answering.statsd {
            statsd.domain_not_found(&request.domain, request.descriptors.len());
        }
        let mut answer = unlimited(request);
        if answering.dynamic_metadata {
            answer.dynamic_metadata = Some(dynamic_metadata(request, Map::new()));
        }
        return Ok(answer);
    };
    malformed(request, &limiter.rules(), limiter.store())?;
    let entries = CallEntries::new(request);
    let descriptors = entries.descriptors();
    let checked = limiter.check_descriptors(&descriptors).await;
    // The rules the call was decided under: a reload may have swapped them since `check`.
    let (verdict, rules) = (checked.verdict(), checked.rules());
    let overall = if verdict.is_allowed() {
        Code::Ok
    } else {
        Code::OverLimit
    };
    let statuses = statuses(&checked, &descriptors);
    stats::count(
        answering.statsd.as_deref(),
        &request.domain,
        &checked,
        &descriptors,
        &statuses,
    );
    let response_headers_to_add = match &answering.headers {
        Headers::Rules => verdict_headers(rules, verdict)
            .iter()
            .filter_map(|(name, value)| Some(header(name.as_str(), value.to_str().ok()?)))
            .collect(),
        Headers::None => Vec::new(),
        Headers::Upstream {
            limit,
            remaining,
            reset,
        } => upstream_headers(&checked, &statuses)
            .map(|(l, r, s)| {
                vec![
                    header(limit, &l.to_string()),
                    header(remaining, &r.to_string()),
                    header(reset, &s.to_string()),
                ]
            })
            .unwrap_or_default(),
    };
    let dynamic_metadata = answering
        .dynamic_metadata
        .then(|| dynamic_metadata(request, passed_metadata(&checked, &statuses)));
    Ok(RateLimitResponse {
        overall_code: overall.into(),
        statuses,
        response_headers_to_add,
        dynamic_metadata,
        ..RateLimitResponse::default()
    })
}

/// The entries of a call's descriptors, as the library takes them: what its
/// [`Descriptor`]s borrow.
pub(crate) struct CallEntries<'r> {
    request: &'r RateLimitRequest,
    /// Each descriptor's `(key, value)` pairs, in the call's order.
    entries: Vec<Vec<(&'r str, &'r str)>>,
}

impl<'r> CallEntries<'r> {
    /// The entries of `request`'s descriptors.
    pub(crate) fn new(request: &'r RateLimitRequest) -> Self {
        let entries = request
            .descriptors
            .iter()
            .map(|descriptor| {
                let entries = descriptor.entries.iter();
                entries
                    .map(|entry| (entry.key.as_str(), entry.value.as_str()))
                    .collect()
            })
            .collect();
        CallEntries { request, entries }
    }

    /// The call's descriptors, each with its weight and its own limit.
    pub(crate) fn descriptors(&self) -> Vec<Descriptor<'_>> {
        // A call's weight: `hits_addend` (0 means 1), unless a descriptor sets its own,
        // where 0 only checks its limit, as envoyproxy/ratelimit does.
        let weight = u64::from(self.request.hits_addend.max(1));
        self.request
            .descriptors
            .iter()
            .zip(&self.entries)
            .map(|(descriptor, entries)| Descriptor {
                entries,
                cost: descriptor.hits_addend.map_or(weight, |hits| hits.value),
                limit: descriptor.limit.as_ref().and_then(own_limit),
            })
            .collect()
    }
}

/// The status of each of `descriptors`, which `call` decided.
pub(crate) fn statuses(
    call: &CallVerdict,
    descriptors: &[Descriptor<'_>],
) -> Vec<DescriptorStatus> {
    let decisions = call.descriptors().iter().zip(descriptors).enumerate();
    decisions
        .map(|(position, (decision, descriptor))| {
            if call.is_unlimited(position) {
                // As envoyproxy/ratelimit answers an unlimited descriptor.
                return DescriptorStatus {
                    code: Code::Ok.into(),
                    limit_remaining: u32::MAX,
                    ..DescriptorStatus::default()
                };
            }
            status(call, decision.as_ref(), descriptor.limit)
        })
        .collect()
}

/// A header of an answer.
fn header(name: &str, value: &str) -> HeaderValue {
    HeaderValue {
        key: name.to_owned(),
        value: value.to_owned(),
        ..HeaderValue::default()
    }
}

/// What envoyproxy/ratelimit's headers say of `statuses`, which `call` decided: the limit,
/// what remains and the seconds until the reset of the status with a limit and the least
/// left (the first, on a tie), or of the last over its limit but for quotas; `None` when
/// no status has a limit.
fn upstream_headers(call: &CallVerdict, statuses: &[DescriptorStatus]) -> Option<(u32, u32, i64)> {
    let mut least: Option<&DescriptorStatus> = None;
    let mut over: Option<&DescriptorStatus> = None;
    for (decision, status) in call.descriptors().iter().zip(statuses) {
        if status.current_limit.is_none() {
            continue;
        }
        let quota = decision
            .as_ref()
            .and_then(|decision| call.limit_of(decision))
            .is_some_and(|limit| limit.is_quota());
        if status.code() == Code::OverLimit && !quota {
            over = Some(status);
        }
        if least.is_none_or(|least| status.limit_remaining < least.limit_remaining) {
            least = Some(status);
        }
    }
    let status = over.or(least)?;
    let limit = status.current_limit.as_ref()?.requests_per_unit;
    let reset = status
        .duration_until_reset
        .as_ref()
        .map_or(0, |d| d.seconds);
    Some((limit, status.limit_remaining, reset))
}

/// The answer to a well-formed `request` for a domain no rules limit: `OK`, each
/// descriptor `OK` with no limit.
fn unlimited(request: &RateLimitRequest) -> RateLimitResponse {
    let ok = DescriptorStatus {
        code: Code::Ok.into(),
        ..DescriptorStatus::default()
    };
    RateLimitResponse {
        overall_code: Code::Ok.into(),
        statuses: vec![ok; request.descriptors.len()],
        ..RateLimitResponse::default()
    }
}

/// Checks that `request` has a domain and descriptors, as envoyproxy/ratelimit asks of
/// every call (in its words).
///
/// # Errors
///
/// `INVALID_ARGUMENT` when it has not.
fn well_formed(request: &RateLimitRequest) -> Result<(), Status> {
    if request.domain.is_empty() {
        return Err(Status::invalid_argument(
            "rate limit domain must not be empty",
        ));
    }
    if request.descriptors.is_empty() {
        return Err(Status::invalid_argument(
            "rate limit descriptor list must not be empty",
        ));
    }
    Ok(())
}

/// The limiter of `request`'s domain among `domains`, for the admin endpoints, once the
/// call is found well formed (see [`malformed`]).
///
/// # Errors
///
/// As [`malformed`]; `NOT_FOUND` for a domain the service does not limit.
pub(crate) fn limiter_for<St: Backing>(
    domains: &Domains<St>,
    request: &RateLimitRequest,
) -> Result<Limiter<St>, Status> {
    well_formed(request)?;
    let limiter = domains.get(&request.domain).ok_or_else(|| {
        let served: Vec<String> = domains
            .limiters()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        Status::not_found(format!(
            "unknown domain `{}`: this service limits {}",
            shortened(&request.domain),
            served.join(", ")
        ))
    })?;
    malformed(request, &limiter.rules(), limiter.store())?;
    Ok(limiter)
}

/// Why `request` cannot be decided under `rules` with `store`, if it cannot: see
/// [`should_rate_limit`].
fn malformed<St: Backing>(
    request: &RateLimitRequest,
    rules: &Rules,
    store: &St,
) -> Result<(), Status> {
    well_formed(request)?;
    if request.descriptors.len() > MOST_DESCRIPTORS {
        return Err(Status::invalid_argument(format!(
            "{} descriptors: at most {MOST_DESCRIPTORS} in one call",
            request.descriptors.len()
        )));
    }
    for (i, descriptor) in request.descriptors.iter().enumerate() {
        if descriptor.entries.len() > MOST_ENTRIES {
            return Err(Status::invalid_argument(format!(
                "descriptor {i} has {} entries: at most {MOST_ENTRIES}",
                descriptor.entries.len()
            )));
        }
        if let Some(own) = &descriptor.limit {
            own_limit_fits(own, rules, store)
                .map_err(|why| Status::invalid_argument(format!("descriptor {i}: {why}")))?;
        }
        for (j, entry) in descriptor.entries.iter().enumerate() {
            if entry.key.len() > LONGEST_TEXT || entry.value.len() > LONGEST_TEXT {
                return Err(Status::invalid_argument(format!(
                    "descriptor {i}, entry {j}: a key or value longer than {LONGEST_TEXT} bytes"
                )));
            }
        }
    }
    Ok(())
}

/// At most 64 characters of `text`, for an error message.
fn shortened(text: &str) -> String {
    let mut chars = text.chars();
    let mut short: String = chars.by_ref().take(64).collect();
    if chars.next().is_some() {
        short.push('…');
    }
    short
}

/// Why a descriptor's own limit `own` cannot be decided under `rules` with `store`, if it
/// cannot: a unit it does not know, or a quota the store cannot keep.
fn own_limit_fits<St: Backing>(
    own: &RateLimitOverride,
    rules: &Rules,
    store: &St,
) -> Result<(), String> {
    let own = own_limit(own).ok_or("its limit override has no unit (SECOND to YEAR)")?;
    match rules.override_decided_by(own) {
        Some((algorithm, quota)) => store
            .holds(algorithm, &quota)
            .map_err(|why| format!("its limit override cannot be kept: {why}")),
        None => Ok(()),
    }
}

/// A descriptor's own limit, as the library takes it; `None` for a unit it does not know.
fn own_limit(limit: &RateLimitOverride) -> Option<LimitOverride> {
    let unit = match RateLimitUnit::try_from(limit.unit).ok()? {
        RateLimitUnit::Unknown => return None,
        RateLimitUnit::Second => rules::Unit::Second,
        RateLimitUnit::Minute => rules::Unit::Minute,
        RateLimitUnit::Hour => rules::Unit::Hour,
        RateLimitUnit::Day => rules::Unit::Day,
        RateLimitUnit::Month => rules::Unit::Month,
        RateLimitUnit::Year => rules::Unit::Year,
    };
    Some(LimitOverride {
        requests_per_unit: u64::from(limit.requests_per_unit),
        unit,
    })
}

/// The status of a descriptor whose limit decided `decision` (`None`: no limit applies to
/// it), `own` the descriptor's own limit if it brought one. A shadow-mode limit only
/// reports: its descriptor is `OK`, its figures its own; a quota over its limit is
/// `OVER_LIMIT` even in a call admitted (another quota had room).
fn status(
    call: &CallVerdict,
    decision: Option<&LimitDecision>,
    own: Option<LimitOverride>,
) -> DescriptorStatus {
    let Some(limit) = decision else {
        return DescriptorStatus {
            code: Code::Ok.into(),
            ..DescriptorStatus::default()
        };
    };
    let decided = limit.decision();
    // A quota refuses no call alone (it is booked as a shadow limit), but says it is over.
    let quota = call
        .limit_of(limit)
        .is_some_and(|rule| rule.is_quota() && !rule.is_shadow())
        && !call.rules().shadow_mode();
    let over = !decided.allowed && (!limit.is_shadow() || quota);
    let until_reset = if decided.allowed {
        decided.reset_after
    } else {
        decided.retry_after
    };
    DescriptorStatus {
        code: if over { Code::OverLimit } else { Code::Ok }.into(),
        current_limit: own
            .map(override_limit)
            .or_else(|| call.limit_of(limit).map(current_limit)),
        limit_remaining: u32::try_from(decided.remaining).unwrap_or(u32::MAX),
        // In whole seconds, rounded up, as envoyproxy/ratelimit says it.
        duration_until_reset: Some(duration(whole_seconds(until_reset))),
        ..DescriptorStatus::default()
    }
}

/// The limit as Envoy's API names one: requests per unit. A period that is no whole unit
/// (`period: 30s`) is `UNKNOWN`, with its requests per period.
fn current_limit(limit: &Limit) -> RateLimit {
    let (requests, unit) = match limit.rate() {
        Rate::Limited { quota, .. } => (quota.requests_per_period(), unit_of(quota.period())),
        _ => (0, Unit::Unknown),
    };
    RateLimit {
        name: limit.name().unwrap_or_default().to_owned(),
        requests_per_unit: u32::try_from(requests).unwrap_or(u32::MAX),
        unit: unit.into(),
    }
}

/// A descriptor's own limit as Envoy's API names a limit.
fn override_limit(own: LimitOverride) -> RateLimit {
    RateLimit {
        requests_per_unit: u32::try_from(own.requests_per_unit).unwrap_or(u32::MAX),
        unit: unit_of(own.unit.period()).into(),
        ..RateLimit::default()
    }
}

/// The unit that is exactly `period`, if one is.
fn unit_of(period: Duration) -> Unit {
    const DAY: u64 = 86_400;
    match period.as_secs() {
        _ if period.subsec_nanos() != 0 => Unit::Unknown,
        1 => Unit::Second,
        60 => Unit::Minute,
        3_600 => Unit::Hour,
        DAY => Unit::Day,
        seconds if seconds == 7 * DAY => Unit::Week,
        seconds if seconds == 30 * DAY => Unit::Month,
        seconds if seconds == 365 * DAY => Unit::Year,
        _ => Unit::Unknown,
    }
}

/// `duration` rounded up to whole seconds.
fn whole_seconds(duration: Duration) -> Duration {
    let whole = Duration::from_secs(duration.as_secs());
    if whole == duration {
        whole
    } else {
        whole.saturating_add(Duration::from_secs(1))
    }
}

/// `duration` as a protobuf `Duration`.
pub(crate) fn duration(duration: Duration) -> pbjson_types::Duration {
    pbjson_types::Duration {
        seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_of_a_whole_unit_are_named_and_others_unknown() {
        let day = 86_400;
        let named = [
            (1, Unit::Second),
            (60, Unit::Minute),
            (3_600, Unit::Hour),
            (day, Unit::Day),
            (7 * day, Unit::Week),
            (30 * day, Unit::Month),
            (365 * day, Unit::Year),
            (30, Unit::Unknown),
            (2 * day, Unit::Unknown),
        ];
        for (seconds, unit) in named {
            assert_eq!(unit_of(Duration::from_secs(seconds)), unit, "{seconds} s");
        }
        assert_eq!(unit_of(Duration::from_millis(1500)), Unit::Unknown);
    }

    #[test]
    fn long_texts_are_shortened_for_messages() {
        assert_eq!(shortened("edge"), "edge");
        let long = "é".repeat(100);
        assert_eq!(shortened(&long).chars().count(), 65);
        assert!(shortened(&long).ends_with('…'));
    }
}
