//! Reading what a response says about when to send again: pure functions over header values.
//!
//! Nothing here panics on what a server sends: a value that cannot be read is ignored, as if
//! the field were absent.

use super::Partition;
use crate::response::{
    GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS, RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT,
    X_RATELIMIT_REMAINING, X_RATELIMIT_RETRY_AFTER,
};
use base64::Engine;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
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
        .get_all(RATELIMIT)
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
        headers.get(X_RATELIMIT_RETRY_AFTER).and_then(delta_seconds),
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
pub(crate) struct ServiceLimit {
    /// `r`: quota units left.
    pub(crate) remaining: Option<u64>,
    /// `t`: until the quota resets.
    pub(crate) reset: Option<Duration>,
    /// `pk`: the partition the quota belongs to.
    pub(crate) partition: Option<Partition>,
}

/// The items of a `RateLimit` field line, e.g. `"api";r=0;t=30;pk=:dXNlcjE=:`; `None` if
/// the line is not a structured-field list.
pub(crate) fn service_limits(field: &str) -> Option<SmallVec<[ServiceLimit; 1]>> {
    let mut limits = SmallVec::new();
    for item in list_items(field)? {
        let mut limit = ServiceLimit::default();
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

/// A quota a response announces, `quota` units per `window`, and what is left of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AnnouncedQuota {
    pub(crate) quota: u64,
    pub(crate) window: Duration,
    /// The units left, when the server said.
    pub(crate) remaining: Option<u64>,
}

/// The quotas `headers` announce: each `RateLimit-Policy` item with a `q` and a `w`, with the
/// `r` of the `RateLimit` item of the same name; without any, the quota policies of
/// `X-Ratelimit-Limit` in the form of draft-03 that Envoy sends (`10, 10;w=60`), with
/// `X-Ratelimit-Remaining` for the one in force. A bare `X-Ratelimit-Limit: 10` names no
/// window, and so no quota. A quota of 0 units or a window of 0 seconds is no quota either:
/// what it refuses, the refusal's wait holds.
pub(crate) fn announced_quotas(headers: &HeaderMap) -> SmallVec<[AnnouncedQuota; 1]> {
    let ietf = ietf_quotas(headers);
    if !ietf.is_empty() {
        return ietf;
    }
    draft_03_quotas(headers)
}

/// The quotas of `RateLimit-Policy`, with what `RateLimit` says is left of each.
fn ietf_quotas(headers: &HeaderMap) -> SmallVec<[AnnouncedQuota; 1]> {
    let items = |name: HeaderName| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .filter_map(list_items)
            .flatten()
    };
    let states: SmallVec<[Item<'_>; 1]> = items(RATELIMIT).collect();
    items(RATELIMIT_POLICY)
        .filter_map(|policy| {
            let quota = integer(param(&policy, "q")?)?;
            let window = integer(param(&policy, "w")?).map(Duration::from_secs)?;
            let remaining = states
                .iter()
                .find(|state| state.value == policy.value)
                .and_then(|state| integer(param(state, "r")?));
            let quota = AnnouncedQuota {
                quota,
                window,
                remaining,
            };
            is_paceable(&quota).then_some(quota)
        })
        .collect()
}

/// The quota policies of a draft-03 `X-Ratelimit-Limit` (`10, 10;w=60, 1000;w=3600`): each
/// member with a `w`; `X-Ratelimit-Remaining` counts down the limit in force, the first
/// member.
fn draft_03_quotas(headers: &HeaderMap) -> SmallVec<[AnnouncedQuota; 1]> {
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
            let window = integer(param(item, "w")?).map(Duration::from_secs)?;
            let quota = AnnouncedQuota {
                quota,
                window,
                remaining: remaining.filter(|_| in_force == Some(quota)),
            };
            is_paceable(&quota).then_some(quota)
        })
        .collect()
}

/// The raw value of `item`'s parameter `key`.
fn param<'a>(item: &Item<'a>, key: &str) -> Option<&'a str> {
    item.params
        .iter()
        .find(|(name, _)| *name == key)
        .map(|&(_, value)| value)
}

fn is_paceable(quota: &AnnouncedQuota) -> bool {
    quota.quota > 0 && !quota.window.is_zero()
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
    fn quotas_come_from_the_policy_with_the_state_of_the_same_name() {
        let answer = headers(&[
            (
                "ratelimit-policy",
                r#""burst";q=40;w=2, "day";q=1000;qu="request";w=86400"#,
            ),
            ("ratelimit", r#""day";r=7;t=60, "burst";r=39;t=1"#),
        ]);
        assert_eq!(
            announced_quotas(&answer).as_slice(),
            [
                AnnouncedQuota {
                    quota: 40,
                    window: Duration::from_secs(2),
                    remaining: Some(39),
                },
                AnnouncedQuota {
                    quota: 1000,
                    window: Duration::from_secs(86_400),
                    remaining: Some(7),
                },
            ]
        );
    }

    #[test]
    fn quotas_without_a_quota_or_a_window_are_not_announced() {
        for policy in [
            r#""a";q=10"#,
            r#""a";w=10"#,
            r#""a";q=0;w=1"#,
            r#""a";q=5;w=0"#,
        ] {
            let answer = headers(&[("ratelimit-policy", policy)]);
            assert!(announced_quotas(&answer).is_empty(), "{policy}");
        }
        let unnamed_state = headers(&[
            ("ratelimit-policy", r#""a";q=10;w=1"#),
            ("ratelimit", r#""b";r=0;t=1"#),
        ]);
        assert_eq!(announced_quotas(&unnamed_state)[0].remaining, None);
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
            announced_quotas(&answer).as_slice(),
            [
                AnnouncedQuota {
                    quota: 10,
                    window: Duration::from_secs(60),
                    remaining: Some(4),
                },
                AnnouncedQuota {
                    quota: 1000,
                    window: Duration::from_secs(3600),
                    remaining: None,
                },
            ]
        );
        let bare = headers(&[("x-ratelimit-limit", "10"), ("x-ratelimit-remaining", "4")]);
        assert!(announced_quotas(&bare).is_empty(), "no window");
    }

    #[test]
    fn ietf_quotas_win_over_x_ratelimit_limit() {
        let answer = headers(&[
            ("x-ratelimit-limit", "10, 10;w=60"),
            ("ratelimit-policy", r#""a";q=5;w=1"#),
        ]);
        assert_eq!(announced_quotas(&answer)[0].quota, 5);
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
