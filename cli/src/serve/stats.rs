//! envoyproxy/ratelimit's statistics of each call: for each descriptor with a limit, its
//! hits counted under its limit's key (`ratelimit.service.rate_limit.<key>.total_hits`,
//! `over_limit`, `near_limit`, `within_limit`, `shadow_mode`), as upstream counts them, so
//! that its dashboards keep working; and each load of the rules (`config_load_success`,
//! `config_load_error`). Sent to a statsd server (`USE_STATSD`, over UDP,
//! through `metrics-exporter-statsd`); `near_limit` also goes to `GET /metrics`, as
//! `tollgate_near_limit_total`.

use super::proto::envoy::service::ratelimit::v3::rate_limit_response::DescriptorStatus;
use metrics::{Key, Metadata, Recorder};
use metrics_exporter_statsd::{StatsdBuilder, StatsdRecorder};
use std::collections::BTreeMap;
use tollgate::envoy::{CallVerdict, Descriptor};
use tollgate::LimitDecision;

/// envoyproxy/ratelimit's `NEAR_LIMIT_RATIO`: a count past this share of its limit is near it.
const NEAR_LIMIT_RATIO: f32 = 0.8;

/// Where the statistics go, and the tags each carries (`EXTRA_TAGS`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct StatsdTarget {
    /// The statsd server's host name or address.
    pub(crate) host: String,
    /// Its UDP port.
    pub(crate) port: u16,
    /// The tags of every statistic, by name.
    pub(crate) tags: BTreeMap<String, String>,
}

/// Where the statistics go.
pub(crate) struct Statsd {
    recorder: StatsdRecorder,
    /// What each name ends with: its tags, as upstream's statsd client writes them.
    tags: String,
}

impl std::fmt::Debug for Statsd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Statsd")
    }
}

/// What one descriptor's hits count as.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    total_hits: u64,
    over_limit: u64,
    near_limit: u64,
    within_limit: u64,
    shadow_mode: u64,
}

impl Statsd {
    /// Statistics sent to the statsd server `target` names, with its tags.
    ///
    /// # Errors
    ///
    /// The address is not one, or no UDP socket could be opened.
    pub(crate) fn new(target: &StatsdTarget) -> Result<Self, String> {
        let StatsdTarget { host, port, tags } = target;
        let recorder = StatsdBuilder::from(host, *port)
            // Each count is sent at once: a statsd server sums them.
            .with_buffer_size(1)
            .build(None)
            .map_err(|error| format!("statsd at {host}:{port}: {error}"))?;
        Ok(Statsd {
            recorder,
            tags: in_names(tags),
        })
    }

    /// Counts a call of `descriptors` descriptors for `domain`, which the service does not
    /// limit: `ratelimit.service.rate_limit.<domain>.domain_not_found`.
    pub(crate) fn domain_not_found(&self, domain: &str, descriptors: usize) {
        let count = u64::try_from(descriptors).unwrap_or(u64::MAX);
        self.increment(
            format_args!("ratelimit.service.rate_limit.{domain}.domain_not_found"),
            count,
        );
    }

    /// Counts a load of the rules, at start or when a file changed:
    /// `ratelimit.service.config_load_success`, or `config_load_error` when a file failed
    /// (its domain keeping its rules).
    pub(crate) fn config_loaded(&self, every_file: bool) {
        let outcome = if every_file { "success" } else { "error" };
        self.increment(format_args!("ratelimit.service.config_load_{outcome}"), 1);
    }

    /// Sends `counts` of the limit whose statistics key is `key`.
    fn send(&self, key: &str, counts: &Counts) {
        for (name, value) in [
            ("total_hits", counts.total_hits),
            ("over_limit", counts.over_limit),
            ("near_limit", counts.near_limit),
            ("within_limit", counts.within_limit),
            ("shadow_mode", counts.shadow_mode),
        ] {
            if value > 0 {
                self.increment(
                    format_args!("ratelimit.service.rate_limit.{key}.{name}"),
                    value,
                );
            }
        }
    }

    /// Adds `value` to the counter `name`, tagged: the name written once.
    fn increment(&self, name: std::fmt::Arguments<'_>, value: u64) {
        let key = Key::from_name(format!("{name}{}", self.tags));
        let metadata = Metadata::new(module_path!(), metrics::Level::INFO, None);
        self.recorder
            .register_counter(&key, &metadata)
            .increment(value);
    }
}

/// `tags` as lyft/gostats, upstream's statsd client, writes them in a name:
/// `.__name=value` each, by name, `.`, `:` and `|` made `_`.
fn in_names(tags: &BTreeMap<String, String>) -> String {
    let clean = |text: &str| text.replace(['.', ':', '|'], "_");
    tags.iter()
        .filter(|(name, value)| !name.is_empty() && !value.is_empty())
        .map(|(name, value)| format!(".__{}={}", clean(name), clean(value)))
        .collect()
}

/// Counts a call in `domain` of `descriptors`, which `call` decided with `statuses`: each
/// descriptor with a limit once, its near-limit hits in `GET /metrics`, and, to `statsd`
/// when given, all its counts under its limit's statistics key.
pub(crate) fn count(
    statsd: Option<&Statsd>,
    domain: &str,
    call: &CallVerdict,
    descriptors: &[Descriptor<'_>],
    statuses: &[DescriptorStatus],
) {
    let admitted = call.verdict().is_allowed();
    let limited = call
        .descriptors()
        .iter()
        .zip(descriptors.iter().zip(statuses));
    for (decision, (descriptor, status)) in limited {
        let Some(decision) = decision else { continue };
        let allowed = decision.decision().allowed;
        let counts = counts(
            descriptor.cost,
            status,
            allowed,
            shadow(call, decision),
            admitted,
        );
        if counts.near_limit > 0 {
            let (domain, limit) = (domain.to_owned(), decision.limit().to_owned());
            metrics::counter!("tollgate_near_limit_total", "domain" => domain, "limit" => limit)
                .increment(counts.near_limit);
        }
        let Some(statsd) = statsd else { continue };
        let key = match call.limit_of(decision) {
            Some(limit) if descriptor.limit.is_none() => {
                limit.stats_key(domain, descriptor.entries)
            }
            // A descriptor's own limit: named by its entries, as upstream names it.
            _ => own_limit_key(domain, descriptor.entries),
        };
        statsd.send(&key, &counts);
    }
}

/// Whether `decision`'s limit only reports: in shadow mode, not a quota (booked as a
/// shadow limit, but counted over its limit).
fn shadow(call: &CallVerdict, decision: &LimitDecision) -> bool {
    let quota = call
        .limit_of(decision)
        .is_some_and(|limit| limit.is_quota());
    decision.is_shadow() && !quota
}

/// The key of a descriptor's own limit: the domain and each entry, `key_value` (`key`
/// for an empty value).
fn own_limit_key(domain: &str, entries: &[(&str, &str)]) -> String {
    let mut key = domain.to_owned();
    for (entry, value) in entries {
        key.push('.');
        key.push_str(entry);
        if !value.is_empty() {
            key.push('_');
            key.push_str(value);
        }
    }
    key
}

/// What `hits` of a descriptor whose status is `status` count as (its limit `allowed` it
/// or not, `shadow` or not, in a call `admitted` or not), as envoyproxy/ratelimit counts
/// them from the count before and after the hits (its `base_limiter.go`). A refused
/// call's hits are counted as upstream would, though tollgate charged none of them.
fn counts(
    hits: u64,
    status: &DescriptorStatus,
    allowed: bool,
    shadow: bool,
    admitted: bool,
) -> Counts {
    let Some(limit) = status
        .current_limit
        .as_ref()
        .map(|l| u64::from(l.requests_per_unit))
    else {
        return Counts::default();
    };
    let remaining = u64::from(status.limit_remaining);
    let (before, after) = match (allowed, admitted) {
        // Charged: what remains is after the hits.
        (true, true) => {
            let after = limit.saturating_sub(remaining);
            (after.saturating_sub(hits), after)
        }
        // Not charged, what remains as it stands.
        (true, false) => {
            let before = limit.saturating_sub(remaining);
            (before, before + hits)
        }
        // Over: the count stands at the limit at least.
        (false, _) => (limit, limit + hits),
    };
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let near = (limit as f32 * NEAR_LIMIT_RATIO).floor() as u64;
    let mut counts = Counts {
        total_hits: hits,
        ..Counts::default()
    };
    if after > limit {
        if before >= limit {
            counts.over_limit = hits;
        } else {
            counts.over_limit = after - limit;
            counts.near_limit = limit - near.max(before);
        }
        if shadow {
            counts.shadow_mode = if before >= limit { hits } else { after - limit };
        }
    } else {
        counts.within_limit = hits;
        if after > near {
            counts.near_limit = if before >= near { hits } else { after - near };
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::proto::envoy::service::ratelimit::v3::rate_limit_response::{
        Code, RateLimit,
    };

    fn status(code: Code, limit: u32, remaining: u32) -> DescriptorStatus {
        DescriptorStatus {
            code: code.into(),
            current_limit: Some(RateLimit {
                requests_per_unit: limit,
                ..RateLimit::default()
            }),
            limit_remaining: remaining,
            ..DescriptorStatus::default()
        }
    }

    /// envoyproxy/ratelimit's fixed_cache_impl_test.go: 15 an hour, counts 11, 13, 16.
    #[test]
    fn hits_count_as_upstream_counts_them() {
        let ok = |remaining| counts(1, &status(Code::Ok, 15, remaining), true, false, true);
        assert_eq!(
            ok(4),
            Counts {
                total_hits: 1,
                within_limit: 1,
                ..Counts::default()
            }
        );
        assert_eq!(
            ok(2),
            Counts {
                total_hits: 1,
                within_limit: 1,
                near_limit: 1,
                ..Counts::default()
            }
        );
        let over = counts(1, &status(Code::OverLimit, 15, 0), false, false, false);
        assert_eq!(
            over,
            Counts {
                total_hits: 1,
                over_limit: 1,
                ..Counts::default()
            }
        );
        // 20 a second, 3 hits to 19: near from 16.
        let heavy = counts(3, &status(Code::Ok, 20, 1), true, false, true);
        assert_eq!(
            heavy,
            Counts {
                total_hits: 3,
                within_limit: 3,
                near_limit: 3,
                ..Counts::default()
            }
        );
        let shadow = counts(1, &status(Code::Ok, 3, 0), false, true, true);
        assert_eq!(
            shadow,
            Counts {
                total_hits: 1,
                over_limit: 1,
                shadow_mode: 1,
                ..Counts::default()
            }
        );
    }

    #[test]
    fn an_own_limit_is_named_by_its_entries() {
        assert_eq!(
            own_limit_key("d", &[("k1", "v1"), ("k2", "")]),
            "d.k1_v1.k2"
        );
    }
}
