//! The answer to a denied request: `429` with a problem document (RFC 9457), or for gRPC a
//! Trailers-Only `RESOURCE_EXHAUSTED`; `Retry-After` and the chosen rate-limit headers on
//! both. A request the load shedder turned away gets `503` (gRPC `UNAVAILABLE`): the server
//! is busy, the client asked nothing wrong.

use super::grpc;
use super::headers::{denial_headers, reset_header};
use super::numbers::number;
use super::recent_rejections::{Answer, RecentRejections, RejectionKey};
use super::wait::{millis_at_least_one, whole_seconds_at_least_one};
use crate::algorithm::Decision;
use crate::rules::{Limit, ResponseOptions};
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, Response, StatusCode};
use serde::Serialize;
use std::cell::RefCell;
use std::thread::LocalKey;

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// The most headers a denial adds to its answer's own: `Retry-After`, four `X-Ratelimit-*`,
/// two IETF fields, the pushback and the length. Room is made for them at once, so that the
/// map never grows.
const DENIAL_HEADERS: usize = 9;

/// The answer to a request denied by `limit`'s `decision` (a gRPC call when `grpc`), with
/// the rate-limit headers `options` choose. An HTTP 429 would reach gRPC clients as
/// UNAVAILABLE, which they retry at once.
pub(crate) fn rejection(
    limit: &Limit,
    decision: &Decision,
    options: &ResponseOptions,
    grpc: bool,
) -> Response<Bytes> {
    debug_assert!(!decision.allowed, "a rejection reports a denying decision");
    let retry_after = whole_seconds_at_least_one(decision.retry_after);
    let mut response = if grpc {
        grpc_rejection(limit, decision, options, retry_after)
    } else {
        problem_rejection(limit, decision, options, retry_after)
    };
    // It changes from request to request, so no kept answer holds it.
    if let Some((name, value)) = reset_header(decision, options) {
        let headers = response.headers_mut();
        // A copied map has no room to spare.
        headers.reserve(1);
        headers.insert(name, value);
    }
    response
}

/// The headers of the answer to a request denied by `limit`'s `decision` (a gRPC call when
/// `grpc`): `Retry-After`, the rate-limit headers `options` choose, and for gRPC the
/// pushback. Made afresh, for answers that are not tollgate's own.
pub(crate) fn rejection_headers(
    limit: &Limit,
    decision: &Decision,
    options: &ResponseOptions,
    grpc: bool,
) -> HeaderMap {
    let retry_after = whole_seconds_at_least_one(decision.retry_after);
    let mut headers = HeaderMap::with_capacity(DENIAL_HEADERS);
    insert_denial_headers(&mut headers, limit, decision, options, retry_after);
    if let Some((name, value)) = reset_header(decision, options) {
        headers.insert(name, value);
    }
    if grpc {
        let pushback = number(millis_at_least_one(decision.retry_after));
        headers.insert(grpc::GRPC_RETRY_PUSHBACK_MS, pushback);
    }
    headers
}

/// `429` with a problem document, copied from the one kept on this thread for the same limit
/// and wait when there is one.
fn problem_rejection(
    limit: &Limit,
    decision: &Decision,
    options: &ResponseOptions,
    retry_after: u64,
) -> Response<Bytes> {
    thread_local! {
        static RECENT: RefCell<RecentRejections> = const { RefCell::new(RecentRejections::new()) };
    }
    let status = if limit.sheds_load() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    let (headers, body) = kept_answer(&RECENT, limit, decision, retry_after, || {
        let body = problem_document(status, limit, retry_after);
        let mut headers = HeaderMap::with_capacity(1 + DENIAL_HEADERS);
        headers.insert(CONTENT_TYPE, PROBLEM_JSON);
        insert_denial_headers(&mut headers, limit, decision, options, retry_after);
        (headers, body)
    });
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// A Trailers-Only `RESOURCE_EXHAUSTED`, with the wait in its message and pushback, copied
/// like a 429 from the one kept on this thread for the same limit and wait when there is
/// one. Only the pushback, in milliseconds, is written for each request.
fn grpc_rejection(
    limit: &Limit,
    decision: &Decision,
    options: &ResponseOptions,
    retry_after: u64,
) -> Response<Bytes> {
    thread_local! {
        static RECENT: RefCell<RecentRejections> = const { RefCell::new(RecentRejections::new()) };
    }
    // Rounded up like Retry-After: a client that waits this long is admitted.
    let pushback = number(millis_at_least_one(decision.retry_after));
    let (mut headers, body) = kept_answer(&RECENT, limit, decision, retry_after, || {
        let message = match limit.max_in_flight() {
            _ if limit.sheds_load() => {
                format!("the server is busy (load shedding); retry after {retry_after}s")
            }
            Some(max) => format!(
                "too many requests in flight ({}: {max} at once); retry after {retry_after}s",
                limit.label()
            ),
            None => format!(
                "rate limit exceeded ({}); retry after {retry_after}s",
                limit.label()
            ),
        };
        let code = if limit.sheds_load() {
            grpc::UNAVAILABLE
        } else {
            grpc::RESOURCE_EXHAUSTED
        };
        let status = grpc::status(code, &message, DENIAL_HEADERS);
        let (mut parts, body) = status.into_parts();
        let headers = &mut parts.headers;
        headers.insert(grpc::GRPC_RETRY_PUSHBACK_MS, pushback.clone());
        insert_denial_headers(headers, limit, decision, options, retry_after);
        (parts.headers, body)
    });
    // A kept answer holds the pushback of the request it was made for. Replacing a header
    // does not grow the copied map, as adding one would.
    headers.insert(grpc::GRPC_RETRY_PUSHBACK_MS, pushback);
    let mut response = Response::new(body);
    *response.headers_mut() = headers;
    response
}

/// Adds `Retry-After` and the rate-limit headers `options` choose (apart from
/// `X-Ratelimit-Reset`) to the headers of a denial.
fn insert_denial_headers(
    headers: &mut HeaderMap,
    limit: &Limit,
    decision: &Decision,
    options: &ResponseOptions,
    retry_after: u64,
) {
    let retry_after = number(retry_after);
    headers.insert(RETRY_AFTER, retry_after.clone());
    denial_headers(limit, decision, options, retry_after, headers);
}

/// The answer kept in `recent` for a denial by `limit` with this wait, or the one `make`
/// makes (see [`RecentRejections`]), with its `Content-Length`. axum's router (tonic's too)
/// inserts that header into a response that lacks it, and a copied map has no room to spare:
/// the insert would grow every copy. Said here, the length is kept with the answer.
///
/// The key needs no part of the response options: they belong to the rules that `limit`
/// belongs to, and a kept answer holds its limit's label, so no limit of other rules has its
/// address.
fn kept_answer(
    recent: &'static LocalKey<RefCell<RecentRejections>>,
    limit: &Limit,
    decision: &Decision,
    retry_after: u64,
    make: impl FnOnce() -> Answer,
) -> Answer {
    let key = RejectionKey {
        label: limit.shared_label(),
        capacity: decision.capacity,
        retry_after,
    };
    recent.with_borrow_mut(|recent| {
        recent.answer(&key, || {
            let (mut headers, body) = make();
            let length = u64::try_from(body.len()).unwrap_or(u64::MAX);
            headers.insert(CONTENT_LENGTH, number(length));
            (headers, body)
        })
    })
}

/// The problem document (RFC 9457) of a `429`.
#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    #[serde(serialize_with = "serialize_detail")]
    detail: (u64, bool),
    /// The limit's label.
    limit: &'a str,
    /// Whole seconds, as `Retry-After`.
    retry_after: u64,
    /// A concurrency limit's most requests in flight at once: it refused the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_in_flight: Option<u32>,
}

/// The `detail` of a wait of `retry_after` seconds, written straight into the document.
fn serialize_detail<S: serde::Serializer>(
    &(retry_after, shed): &(u64, bool),
    s: S,
) -> Result<S::Ok, S::Error> {
    let what = if shed {
        "The server is busy"
    } else {
        "Rate limit exceeded"
    };
    s.collect_str(&format_args!(
        "{what}; retry after {retry_after} second(s)."
    ))
}

/// The problem document of a denial by `limit`, answered with `status`, as JSON.
fn problem_document(status: StatusCode, limit: &Limit, retry_after: u64) -> Bytes {
    let label = limit.label();
    let problem = Problem {
        kind: "about:blank",
        title: status.canonical_reason().unwrap_or("Too Many Requests"),
        status: status.as_u16(),
        detail: (retry_after, limit.sheds_load()),
        limit: label,
        retry_after,
        // The server's share for a priority is no client's maximum.
        max_in_flight: limit.max_in_flight().filter(|_| !limit.sheds_load()),
    };
    // The document without the label is under 160 bytes: one allocation.
    let mut document = Vec::with_capacity(160 + label.len());
    // Strings and numbers always serialise.
    match serde_json::to_writer(&mut document, &problem) {
        Ok(()) => Bytes::from(document),
        Err(_) => Bytes::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::headers::tests::{denial, five_per_minute};
    use crate::rules::{HeaderSet, XRatelimitHeader};
    use std::time::Duration;

    #[test]
    fn the_problem_document_is_the_json_it_claims_to_be() {
        let rules = crate::rules::Rules::from_yaml(
            "domain: d\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: hour, requests_per_unit: 1, name: 'api \"v2\"' }\n",
        )
        .expect("valid rules");
        let document = problem_document(StatusCode::TOO_MANY_REQUESTS, &rules.limits()[0], 3600);
        let parsed: serde_json::Value =
            serde_json::from_slice(&document).expect("the document is JSON");
        assert_eq!(
            parsed,
            serde_json::json!({
                "type": "about:blank",
                "title": "Too Many Requests",
                "status": 429,
                "detail": "Rate limit exceeded; retry after 3600 second(s).",
                "limit": "api \"v2\"",
                "retry_after": 3600
            })
        );
    }

    #[test]
    fn a_429_states_its_length_when_made_and_when_copied() {
        let rules = five_per_minute(|rules| rules);
        let decision = denial(Duration::from_secs(12));
        // Made, made again and kept, then copied (see `RecentRejections`).
        for _ in 0..3 {
            let response = rejection(&rules.limits()[0], &decision, rules.response(), false);
            let length = response.body().len().to_string();
            assert_eq!(response.headers()[CONTENT_LENGTH], length.as_str());
        }
    }

    #[test]
    fn a_grpc_denial_tells_its_own_pushback_when_made_and_when_copied() {
        let rules = five_per_minute(|rules| rules);
        // One wait in whole seconds (12), so one kept answer: made, made again and kept, then
        // copied twice (see `RecentRejections`).
        for pushback_ms in [11_500, 11_200, 11_900, 11_001] {
            let decision = denial(Duration::from_millis(pushback_ms));
            let response = rejection(&rules.limits()[0], &decision, rules.response(), true);
            let headers = response.headers();
            let expected = pushback_ms.to_string();
            assert_eq!(headers[grpc::GRPC_RETRY_PUSHBACK_MS], expected.as_str());
            assert_eq!(headers["grpc-status"], "8");
            assert_eq!(headers[RETRY_AFTER], "12");
            assert_eq!(headers[CONTENT_LENGTH], "0");
            assert!(response.body().is_empty());
        }
    }

    /// The names of the headers of a 429 under `rules`, sorted.
    fn denial_names(rules: &crate::rules::Rules) -> Vec<String> {
        let decision = denial(Duration::from_secs(12));
        let response = rejection(&rules.limits()[0], &decision, rules.response(), false);
        let mut names: Vec<String> = response.headers().keys().map(|n| n.to_string()).collect();
        names.sort_unstable();
        names
    }

    #[test]
    fn a_denial_carries_retry_after_and_the_chosen_headers() {
        assert_eq!(
            denial_names(&five_per_minute(|rules| rules)),
            [
                "content-length",
                "content-type",
                "retry-after",
                "x-ratelimit-limit",
                "x-ratelimit-remaining",
                "x-ratelimit-retry-after"
            ]
        );
        assert_eq!(
            denial_names(&five_per_minute(|rules| rules.headers(HeaderSet::None))),
            ["content-length", "content-type", "retry-after"]
        );
        assert_eq!(
            denial_names(&five_per_minute(|rules| rules.headers(HeaderSet::Ietf))),
            [
                "content-length",
                "content-type",
                "ratelimit",
                "ratelimit-policy",
                "retry-after"
            ]
        );
        let renamed = five_per_minute(|rules| {
            rules
                .reset_header(true)
                .header_name(XRatelimitHeader::RetryAfter, "x-wait")
                .header_name(XRatelimitHeader::Reset, "x-full-in")
        });
        assert_eq!(
            denial_names(&renamed),
            [
                "content-length",
                "content-type",
                "retry-after",
                "x-full-in",
                "x-ratelimit-limit",
                "x-ratelimit-remaining",
                "x-wait"
            ]
        );
    }

    #[test]
    fn the_most_headers_a_denial_carries_fit_the_room_made_for_them() {
        let rules = five_per_minute(|rules| rules.headers(HeaderSet::Both).reset_header(true));
        let decision = denial(Duration::from_secs(12));
        for grpc in [false, true] {
            let response = rejection(&rules.limits()[0], &decision, rules.response(), grpc);
            let own = if grpc { 3 } else { 1 };
            assert_eq!(
                response.headers().len(),
                own + DENIAL_HEADERS - usize::from(!grpc)
            );
        }
    }
}
