//! Reading what a response says about when to send again: pure functions over header values.
//!
//! Nothing here panics on what a server sends: a value that cannot be read is ignored, as if
//! the field were absent.

use super::Partition;
use base64::Engine;
use http::{HeaderMap, HeaderValue, StatusCode};
use smallvec::SmallVec;
use std::time::{Duration, SystemTime};

/// A wait the server announced, for its whole origin (`partition: None`) or one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Notice {
    pub(crate) partition: Option<Partition>,
    pub(crate) wait: Duration,
}

/// The waits that `status` and `headers` announce, read at wall-clock time `now`.
///
/// A refusal (HTTP 429, or gRPC `RESOURCE_EXHAUSTED` in the headers of a trailers-only
/// answer) holds for the longest wait any field gives; for the partitions named by the
/// exhausted `RateLimit` items when every one of them names one, else for the whole origin.
/// A refusal that gives no wait announces nothing. Any other response announces the reset of
/// each `RateLimit` item whose remaining quota is 0: the next request would be refused.
pub(crate) fn notices(
    status: StatusCode,
    headers: &HeaderMap,
    now: SystemTime,
) -> SmallVec<[Notice; 1]> {
    let exhausted: SmallVec<[ServiceLimit; 1]> = headers
        .get_all("ratelimit")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(service_limits)
        .flatten()
        .filter(|limit| limit.remaining == Some(0))
        .collect();
    let refused = status == StatusCode::TOO_MANY_REQUESTS || is_resource_exhausted(headers);
    if !refused {
        return exhausted
            .into_iter()
            .filter_map(|limit| {
                let wait = limit.reset.filter(|wait| !wait.is_zero())?;
                Some(Notice {
                    partition: limit.partition,
                    wait,
                })
            })
            .collect();
    }
    let announced = [
        headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| retry_after(v, now)),
        headers
            .get("x-ratelimit-retry-after")
            .and_then(delta_seconds),
        grpc_pushback(headers),
    ];
    let wait = announced
        .into_iter()
        .flatten()
        .chain(exhausted.iter().filter_map(|limit| limit.reset))
        .max();
    let Some(wait) = wait.filter(|wait| !wait.is_zero()) else {
        return SmallVec::new();
    };
    let every_one_partitioned =
        !exhausted.is_empty() && exhausted.iter().all(|limit| limit.partition.is_some());
    if every_one_partitioned {
        exhausted
            .into_iter()
            .map(|limit| Notice {
                partition: limit.partition,
                wait,
            })
            .collect()
    } else {
        smallvec::smallvec![Notice {
            partition: None,
            wait
        }]
    }
}

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
        .get("grpc-status")
        .is_some_and(|status| status.as_bytes().trim_ascii() == b"8")
}

/// `grpc-retry-pushback-ms` of a `RESOURCE_EXHAUSTED` answer. A negative or unreadable value
/// means "do not retry" (gRPC proposal A6), which announces no wait.
pub(crate) fn grpc_pushback(headers: &HeaderMap) -> Option<Duration> {
    if !is_resource_exhausted(headers) {
        return None;
    }
    let millis = headers.get("grpc-retry-pushback-ms")?.to_str().ok()?.trim();
    if millis.is_empty() || !millis.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Duration::from_millis(millis.parse().unwrap_or(u64::MAX)))
}

/// One item of the `RateLimit` field: the state of a quota policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ServiceLimit {
    /// `r`: quota units left.
    pub(crate) remaining: Option<u64>,
    /// `t`: until the quota resets.
    pub(crate) reset: Option<Duration>,
    /// `pk`: the partition the quota belongs to.
    pub(crate) partition: Option<Partition>,
}

/// One item of the `RateLimit-Policy` field: a quota policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct QuotaPolicy {
    /// `q`: quota units per window.
    pub(crate) quota: Option<u64>,
    /// `w`: the window.
    pub(crate) window: Option<Duration>,
    /// `pk`: the partition the policy applies to.
    pub(crate) partition: Option<Partition>,
}

/// The items of a `RateLimit` field line, e.g. `"api";r=0;t=30;pk=:dXNlcjE=:`; `None` if
/// the line is not a structured-field list.
pub(crate) fn service_limits(field: &str) -> Option<SmallVec<[ServiceLimit; 1]>> {
    let mut limits = SmallVec::new();
    for item in list_items(field)? {
        let mut limit = ServiceLimit::default();
        for (key, value) in item {
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

/// The items of a `RateLimit-Policy` field line, e.g. `"api";q=100;w=60`; `None` if the
/// line is not a structured-field list.
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "pacing (issue 26) sizes its bucket from the policy"
    )
)]
pub(crate) fn quota_policies(field: &str) -> Option<SmallVec<[QuotaPolicy; 1]>> {
    let mut policies = SmallVec::new();
    for item in list_items(field)? {
        let mut policy = QuotaPolicy::default();
        for (key, value) in item {
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

/// The parameters (`key`, raw value; `?1` for a bare key) of each item of an RFC 8941 list.
///
/// Enough of RFC 8941 for the two fields above: items are split at commas and parameters at
/// semicolons outside quoted strings; the item's own value (the policy name) is skipped.
/// `None` for an unterminated string, an empty item, or a parameter without a key.
fn list_items(field: &str) -> Option<Vec<Vec<(&str, &str)>>> {
    let mut items = Vec::new();
    for member in split_outside_strings(field, b',')? {
        let mut parts = split_outside_strings(member, b';')?.into_iter();
        if parts.next()?.trim().is_empty() {
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
        items.push(params);
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
                    remaining: Some(0),
                    reset: Some(Duration::from_secs(30)),
                    partition: Some(Partition::new(&b"user1"[..])),
                },
                ServiceLimit {
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
        assert_eq!(limits.as_slice(), [ServiceLimit::default()]);
        let limits = service_limits(r#""p";r=0;t=9999999999999999"#).unwrap();
        assert_eq!(limits[0].reset, None, "more than 15 digits");
    }

    #[test]
    fn quota_policies_read_quota_window_and_partition() {
        let policies = quota_policies(r#""api";q=100;qu="request";w=60;pk=:YQ==:"#).unwrap();
        assert_eq!(
            policies.as_slice(),
            [QuotaPolicy {
                quota: Some(100),
                window: Some(Duration::from_secs(60)),
                partition: Some(Partition::new(&b"a"[..])),
            }]
        );
    }

    #[test]
    fn a_429_holds_the_origin_for_the_longest_wait() {
        let answer = headers(&[
            ("retry-after", "2"),
            ("x-ratelimit-retry-after", "3"),
            ("ratelimit", r#""api";r=0;t=1"#),
        ]);
        let notices = notices(StatusCode::TOO_MANY_REQUESTS, &answer, rfc_date());
        assert_eq!(
            notices.as_slice(),
            [Notice {
                partition: None,
                wait: Duration::from_secs(3)
            }]
        );
    }

    #[test]
    fn a_429_for_named_partitions_holds_only_them() {
        let answer = headers(&[
            ("retry-after", "4"),
            ("ratelimit", r#""api";r=0;t=4;pk=:YQ==:, "all";r=7;t=60"#),
        ]);
        let notices = notices(StatusCode::TOO_MANY_REQUESTS, &answer, rfc_date());
        assert_eq!(
            notices.as_slice(),
            [Notice {
                partition: Some(Partition::new(&b"a"[..])),
                wait: Duration::from_secs(4)
            }]
        );
    }

    #[test]
    fn a_429_without_a_wait_announces_nothing() {
        let answer = headers(&[("retry-after", "later")]);
        assert!(notices(StatusCode::TOO_MANY_REQUESTS, &answer, rfc_date()).is_empty());
        let zero = headers(&[("retry-after", "0")]);
        assert!(notices(StatusCode::TOO_MANY_REQUESTS, &zero, rfc_date()).is_empty());
    }

    #[test]
    fn grpc_resource_exhausted_holds_for_the_pushback() {
        let answer = headers(&[("grpc-status", "8"), ("grpc-retry-pushback-ms", "250")]);
        let notices = notices(StatusCode::OK, &answer, rfc_date());
        assert_eq!(notices[0].wait, Duration::from_millis(250));
    }

    #[test]
    fn an_admitted_response_with_no_quota_left_holds_until_the_reset() {
        let answer = headers(&[("ratelimit", r#""api";r=0;t=5, "b";r=3;t=9"#)]);
        let notices = notices(StatusCode::OK, &answer, rfc_date());
        assert_eq!(
            notices.as_slice(),
            [Notice {
                partition: None,
                wait: Duration::from_secs(5)
            }]
        );
    }

    #[test]
    fn other_responses_announce_nothing() {
        let answer = headers(&[("retry-after", "5"), ("x-ratelimit-remaining", "0")]);
        assert!(notices(StatusCode::SERVICE_UNAVAILABLE, &answer, rfc_date()).is_empty());
        assert!(notices(StatusCode::OK, &answer, rfc_date()).is_empty());
    }
}
