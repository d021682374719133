//! Reading the rate-limit fields of a response, one by one: pure functions over header
//! values.
//!
//! Nothing here panics on what a server sends: a value that cannot be read is ignored, as if
//! the field were absent.

use super::Partition;
use crate::response::{
    GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING,
};
use base64::Engine;
use http::{HeaderMap, HeaderName, HeaderValue};
use smallvec::SmallVec;
use std::time::{Duration, SystemTime};

/// `Retry-After` (RFC 9110, 10.2.3): delta-seconds, or an HTTP-date read relative to `now`
/// (a date in the past is no wait).
pub(crate) fn retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    if let Some(wait) = delta_seconds(value) {
        return Some(wait);
    }
    let date = httpdate::parse_http_date(value.to_str().ok()?.trim()).ok()?;
    Some(date.duration_since(now).unwrap_or_default())
}

/// A whole number of seconds (`Retry-After`'s delta-seconds, `X-Ratelimit-Retry-After`);
/// one too large to count is the longest wait there is.
pub(crate) fn delta_seconds(value: &HeaderValue) -> Option<Duration> {
    let digits = value.to_str().ok()?.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Duration::from_secs(digits.parse().unwrap_or(u64::MAX)))
}

/// Whether `headers` carry gRPC status 8, `RESOURCE_EXHAUSTED` (a trailers-only answer
/// carries its status in the headers).
pub(crate) fn is_resource_exhausted(headers: &HeaderMap) -> bool {
    headers
        .get(GRPC_STATUS)
        .is_some_and(|status| status.as_bytes().trim_ascii() == b"8")
}

/// `grpc-retry-pushback-ms` of a `RESOURCE_EXHAUSTED` answer. A negative or unreadable value
/// means "do not retry" (gRPC proposal A6), which announces no wait.
pub(crate) fn grpc_pushback(headers: &HeaderMap) -> Option<Duration> {
    if !is_resource_exhausted(headers) {
        return None;
    }
    let millis = headers.get(GRPC_RETRY_PUSHBACK_MS)?.to_str().ok()?.trim();
    if millis.is_empty() || !millis.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Duration::from_millis(millis.parse().unwrap_or(u64::MAX)))
}

/// One item of the `RateLimit` field: the state of a quota policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ServiceLimit<'a> {
    /// The policy's name, as written (a quoted string or a token).
    pub(crate) name: &'a str,
    /// `r`: quota units left.
    pub(crate) remaining: Option<u64>,
    /// `t`: until the quota resets.
    pub(crate) reset: Option<Duration>,
    /// `pk`: the partition the quota belongs to.
    pub(crate) partition: Option<Partition>,
}

/// The items of a `RateLimit` field line, e.g. `"api";r=0;t=30;pk=:dXNlcjE=:`; `None` if
/// the line is not a structured-field list.
pub(crate) fn service_limits(field: &str) -> Option<SmallVec<[ServiceLimit<'_>; 1]>> {
    let mut limits = SmallVec::new();
    for item in list_items(field)? {
        let mut limit = ServiceLimit {
            name: item.value,
            ..ServiceLimit::default()
        };
        for (key, value) in item.params {
            match key {
                "r" => limit.remaining = integer(value),
                "t" => limit.reset = integer(value).map(Duration::from_secs),
                "pk" => limit.partition = byte_sequence(value),
                _ => {}
            }
        }
        limits.push(limit);
    }
    Some(limits)
}

/// One item of the `RateLimit-Policy` field: a quota policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct QuotaPolicy<'a> {
    /// The policy's name, as written (a quoted string or a token).
    pub(crate) name: &'a str,
    /// `q`: quota units per window.
    pub(crate) quota: Option<u64>,
    /// `w`: the window.
    pub(crate) window: Option<Duration>,
    /// `pk`: the partition the quota belongs to.
    pub(crate) partition: Option<Partition>,
}

/// The items of a `RateLimit-Policy` field line, e.g. `"api";q=100;w=60`; `None` if the
/// line is not a structured-field list.
pub(crate) fn quota_policies(field: &str) -> Option<SmallVec<[QuotaPolicy<'_>; 1]>> {
    let mut policies = SmallVec::new();
    for item in list_items(field)? {
        let mut policy = QuotaPolicy {
            name: item.value,
            ..QuotaPolicy::default()
        };
        for (key, value) in item.params {
            match key {
                "q" => policy.quota = integer(value),
                "w" => policy.window = integer(value).map(Duration::from_secs),
                "pk" => policy.partition = byte_sequence(value),
                _ => {}
            }
        }
        policies.push(policy);
    }
    Some(policies)
}

/// The items of every line of the structured-field list `name` in `headers`; lines that
/// are not lists are left out.
pub(crate) fn field_items<'h, T>(
    headers: &'h HeaderMap,
    name: HeaderName,
    items: fn(&'h str) -> Option<SmallVec<[T; 1]>>,
) -> SmallVec<[T; 1]> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(items)
        .flatten()
        .collect()
}

/// The quota policies of `X-Ratelimit-Limit` in the form of draft-03 that Envoy sends
/// (`10, 10;w=60, 1000;w=3600`): each member with a `w`, as (quota, window, remaining);
/// `X-Ratelimit-Remaining` counts down the limit in force, the first member. A bare
/// `X-Ratelimit-Limit: 10` names no window, and so no policy.
pub(crate) fn draft_03_policies(
    headers: &HeaderMap,
) -> SmallVec<[(u64, Duration, Option<u64>); 1]> {
    let Some(items) = headers
        .get(X_RATELIMIT_LIMIT)
        .and_then(|value| value.to_str().ok())
        .and_then(list_items)
    else {
        return SmallVec::new();
    };
    let in_force = items.first().and_then(|item| integer(item.value));
    let remaining = headers
        .get(X_RATELIMIT_REMAINING)
        .and_then(|value| integer(value.to_str().ok()?.trim()));
    items
        .iter()
        .filter_map(|item| {
            let quota = integer(item.value)?;
            let (_, window) = item.params.iter().find(|(key, _)| *key == "w")?;
            let window = Duration::from_secs(integer(window)?);
            Some((quota, window, remaining.filter(|_| in_force == Some(quota))))
        })
        .collect()
}

/// One member of an RFC 8941 list: its bare value (a policy's name, a number) and its
/// parameters (`key`, raw value; `?1` for a bare key).
struct Item<'a> {
    value: &'a str,
    params: Vec<(&'a str, &'a str)>,
}

/// The members of an RFC 8941 list.
///
/// Enough of RFC 8941 for the fields read here: members are split at commas and parameters
/// at semicolons outside quoted strings. `None` for an unterminated string, an empty
/// member, or a parameter without a key.
fn list_items(field: &str) -> Option<Vec<Item<'_>>> {
    let mut items = Vec::new();
    for member in split_outside_strings(field, b',')? {
        let mut parts = split_outside_strings(member, b';')?.into_iter();
        let value = parts.next()?.trim();
        if value.is_empty() {
            return None;
        }
        let mut params = Vec::new();
        for param in parts {
            let param = param.trim();
            let (key, value) = param.split_once('=').unwrap_or((param, "?1"));
            if key.is_empty() {
                return None;
            }
            params.push((key, value));
        }
        items.push(Item { value, params });
    }
    Some(items)
}

/// `text` split at `separator` where it is not inside a quoted string (`"..."`, with `\`
/// escapes); `None` if a string is left open.
fn split_outside_strings(text: &str, separator: u8) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let (mut start, mut in_string, mut escaped) = (0, false, false);
    for (i, byte) in text.bytes().enumerate() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b if b == separator && !in_string => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if in_string {
        return None;
    }
    parts.push(&text[start..]);
    Some(parts)
}

/// An sf-integer that is not negative (at most 15 digits, as RFC 8941 allows).
fn integer(value: &str) -> Option<u64> {
    if value.is_empty() || value.len() > 15 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// An sf-binary, `:base64:`, decoded.
fn byte_sequence(value: &str) -> Option<Partition> {
    let encoded = value.strip_prefix(':')?.strip_suffix(':')?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    Some(Partition::new(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn value(text: &str) -> HeaderValue {
        HeaderValue::from_str(text).unwrap()
    }

    /// 1994-11-06T08:49:37Z, the example date of RFC 9110.
    fn rfc_date() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(784_111_777)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, text)| (http::HeaderName::from_static(name), value(text)))
            .collect()
    }

    #[test]
    fn retry_after_reads_delta_seconds() {
        let now = rfc_date();
        assert_eq!(
            retry_after(&value("120"), now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(retry_after(&value(" 0 "), now), Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_reads_http_dates_relative_to_now() {
        let now = rfc_date() - Duration::from_secs(30);
        let date = value("Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(retry_after(&date, now), Some(Duration::from_secs(30)));
    }

    #[test]
    fn retry_after_in_the_past_is_no_wait() {
        let now = rfc_date() + Duration::from_secs(5);
        let date = value("Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(retry_after(&date, now), Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_ignores_malformed_values() {
        for text in ["", "-5", "1.5", "soon", "12s", "Sun, 06 Nov 1994", "+3"] {
            assert_eq!(retry_after(&value(text), rfc_date()), None, "{text:?}");
        }
        let not_text = HeaderValue::from_bytes(b"\xff1").unwrap();
        assert_eq!(retry_after(&not_text, rfc_date()), None);
    }

    #[test]
    fn delta_seconds_too_large_to_count_is_the_longest_wait() {
        let huge = value("99999999999999999999999999");
        assert_eq!(delta_seconds(&huge), Some(Duration::from_secs(u64::MAX)));
    }

    #[test]
    fn grpc_pushback_needs_resource_exhausted() {
        let exhausted = headers(&[("grpc-status", "8"), ("grpc-retry-pushback-ms", "1500")]);
        assert_eq!(grpc_pushback(&exhausted), Some(Duration::from_millis(1500)));
        let unavailable = headers(&[("grpc-status", "14"), ("grpc-retry-pushback-ms", "1500")]);
        assert_eq!(grpc_pushback(&unavailable), None);
    }

    #[test]
    fn grpc_pushback_ignores_negative_and_malformed_values() {
        for text in ["-1", "", "1e3", "soon"] {
            let answer = headers(&[("grpc-status", "8"), ("grpc-retry-pushback-ms", text)]);
            assert_eq!(grpc_pushback(&answer), None, "{text:?}");
        }
    }

    #[test]
    fn service_limits_read_remaining_reset_and_partition() {
        let limits =
            service_limits(r#""default";r=0;t=30;pk=:dXNlcjE=:, "burst";r=5;t=1"#).unwrap();
        assert_eq!(
            limits.as_slice(),
            [
                ServiceLimit {
                    name: r#""default""#,
                    remaining: Some(0),
                    reset: Some(Duration::from_secs(30)),
                    partition: Some(Partition::new(&b"user1"[..])),
                },
                ServiceLimit {
                    name: r#""burst""#,
                    remaining: Some(5),
                    reset: Some(Duration::from_secs(1)),
                    partition: None,
                },
            ]
        );
    }

    #[test]
    fn service_limits_take_token_names_and_quoted_separators() {
        let limits = service_limits(r#"day;r=1;t=9, "a,b;c";r=0;t=2"#).unwrap();
        assert_eq!(limits.len(), 2);
        assert_eq!(limits[0].name, "day");
        assert_eq!(limits[1].name, r#""a,b;c""#);
        assert_eq!(limits[1].remaining, Some(0));
        assert_eq!(limits[1].reset, Some(Duration::from_secs(2)));
    }

    #[test]
    fn service_limits_reject_lists_that_are_not_lists() {
        for text in [r#""open;r=0;t=3"#, "", "a;r=0,,b;r=0", "a;=3"] {
            assert_eq!(service_limits(text), None, "{text:?}");
        }
    }

    #[test]
    fn service_limits_ignore_malformed_parameters() {
        let limits = service_limits(r#""p";r=-1;t=1.5;pk=:not base64:;pk2"#).unwrap();
        let nothing_read = ServiceLimit {
            name: r#""p""#,
            ..ServiceLimit::default()
        };
        assert_eq!(limits.as_slice(), [nothing_read]);
        let limits = service_limits(r#""p";r=0;t=9999999999999999"#).unwrap();
        assert_eq!(limits[0].reset, None, "more than 15 digits");
    }

    #[test]
    fn quota_policies_read_quota_window_and_partition() {
        let policies = quota_policies(r#""api";q=100;qu="request";w=60;pk=:YQ==:"#).unwrap();
        assert_eq!(
            policies.as_slice(),
            [QuotaPolicy {
                name: r#""api""#,
                quota: Some(100),
                window: Some(Duration::from_secs(60)),
                partition: Some(Partition::new(&b"a"[..])),
            }]
        );
    }

    #[test]
    fn envoy_draft_03_x_ratelimit_limit_announces_its_policies() {
        let answer = headers(&[
            (
                "x-ratelimit-limit",
                r#"10, 10;w=60;name="per-ip", 1000;w=3600"#,
            ),
            ("x-ratelimit-remaining", "4"),
        ]);
        assert_eq!(
            draft_03_policies(&answer).as_slice(),
            [
                (10, Duration::from_secs(60), Some(4)),
                (1000, Duration::from_secs(3600), None),
            ]
        );
        let bare = headers(&[("x-ratelimit-limit", "10"), ("x-ratelimit-remaining", "4")]);
        assert!(draft_03_policies(&bare).is_empty(), "no window");
    }
}
