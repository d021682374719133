//! What clients are told: rate-limit headers, the `429` problem document, the gRPC status.

mod recent;
mod recent_rejections;

use crate::algorithm::Decision;
use crate::rules::{Limit, ResponseOptions};
use bytes::{Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, Response, StatusCode};
use recent::Recent;
use recent_rejections::{Answer, RecentRejections, RejectionKey};
use std::cell::RefCell;
use std::sync::OnceLock;
use std::thread::LocalKey;
use std::time::Duration;

/// `X-Ratelimit-Limit`: the most requests the client may send at once.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-Ratelimit-Remaining`: requests the client may still send now.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-Ratelimit-Retry-After`: whole seconds to wait after a denial (same as `Retry-After`).
pub const X_RATELIMIT_RETRY_AFTER: HeaderName = HeaderName::from_static("x-ratelimit-retry-after");
/// `X-Ratelimit-Reset`: whole seconds until the limit is full again (optional).
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
/// IETF `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers), optional.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// IETF `RateLimit` (draft-ietf-httpapi-ratelimit-headers), optional.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC_RETRY_PUSHBACK_MS: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");
/// RESOURCE_EXHAUSTED.
const GRPC_RESOURCE_EXHAUSTED: HeaderValue = HeaderValue::from_static("8");
/// INTERNAL.
const GRPC_INTERNAL: HeaderValue = HeaderValue::from_static("13");
const GRPC_CONTENT_TYPE: HeaderValue = HeaderValue::from_static("application/grpc");
const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
/// `X-Ratelimit-Remaining` of a denial.
const NONE_REMAINING: HeaderValue = HeaderValue::from_static("0");

/// The rate-limit headers of an admitted request's response, prepared before the inner
/// service runs. Kept small: the response future carries them.
#[derive(Debug, Default)]
pub(crate) struct RateLimitHeaders(Option<AdmittedHeaders>);

#[derive(Debug)]
struct AdmittedHeaders {
    /// `X-Ratelimit-Limit` and `X-Ratelimit-Remaining`, kept as numbers until they are
    /// written: two header values would make the response future 80 bytes larger.
    counts: [u64; 2],
    /// The headers the rules opt into (`X-Ratelimit-Reset`, IETF); see [`optional_headers`].
    optional: Option<Vec<(HeaderName, HeaderValue)>>,
}

impl RateLimitHeaders {
    /// Adds the headers to `headers`, replacing any of the same name.
    pub(crate) fn write_to(self, headers: &mut HeaderMap) {
        let Some(AdmittedHeaders {
            counts: [limit, remaining],
            optional,
        }) = self.0
        else {
            return;
        };
        // Two inserts grow a map at most once, as reserving would; more may grow it twice.
        if let Some(optional) = &optional {
            headers.reserve(2 + optional.len());
        }
        headers.insert(X_RATELIMIT_LIMIT, limit_number(limit));
        headers.insert(X_RATELIMIT_REMAINING, remaining_number(remaining));
        if let Some(optional) = optional {
            insert_all(headers, optional);
        }
    }
}

/// The numbers below this one have their header values made once per process ([`number`]).
const SMALL_NUMBERS: u64 = 1024;

/// A header value for `n`. These are sent on every response, and a `HeaderValue` made from
/// a number allocates, so values below 1024 (most limits, counts and waits) come from a table
/// made once, and larger ones are cut from a block shared with the values made before them
/// ([`large_number`]).
fn number(n: u64) -> HeaderValue {
    if n < SMALL_NUMBERS {
        small_number(n)
    } else {
        large_number(n)
    }
}

/// The header value for `n`, below [`SMALL_NUMBERS`], from the table made once per process.
fn small_number(n: u64) -> HeaderValue {
    static SMALL: OnceLock<Box<[HeaderValue]>> = OnceLock::new();
    let small = SMALL.get_or_init(|| {
        // Leaked once per process (a few kilobytes), so that every clone is free.
        (0..SMALL_NUMBERS)
            .map(|n| HeaderValue::from_static(Box::leak(n.to_string().into_boxed_str())))
            .collect()
    });
    small[usize::try_from(n).unwrap_or_default()].clone()
}

/// The size of the blocks [`large_number`] cuts header values from: a few hundred numbers
/// written on one thread share one allocation, so a number costs a reference count rather
/// than an allocation of its own. A block is freed once every header value cut from it is
/// dropped with the response that carried it.
const NUMBER_BLOCK_BYTES: usize = 4096;

/// A header value for `n`, its digits written into this thread's current number block.
fn large_number(n: u64) -> HeaderValue {
    thread_local! {
        static BLOCK: RefCell<BytesMut> = RefCell::new(BytesMut::new());
    }
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n).as_bytes();
    let bytes = BLOCK.with_borrow_mut(|block| {
        if block.capacity() < digits.len() {
            *block = BytesMut::with_capacity(NUMBER_BLOCK_BYTES);
        }
        block.extend_from_slice(digits);
        // The digits leave the block; the rest of its capacity stays for the next number.
        block.split().freeze()
    });
    HeaderValue::from_maybe_shared(bytes).expect("digits are a valid header value")
}

/// The last few header values made on one thread for one kind of count, kept so that a
/// large count that repeats is not formatted again.
type KeptNumbers = RefCell<Recent<(u64, HeaderValue), 4>>;

/// [`number`] for a limit's size, which repeats on every response of that limit.
fn limit_number(n: u64) -> HeaderValue {
    thread_local! {
        static KEPT: KeptNumbers = const { RefCell::new(Recent::new()) };
    }
    kept_number(&KEPT, n)
}

/// [`number`] for `X-Ratelimit-Remaining` of an admitted request, which repeats while a
/// client stays far below its limit: a bucket that refills faster than the client spends
/// reports the same count on every request.
fn remaining_number(n: u64) -> HeaderValue {
    thread_local! {
        static KEPT: KeptNumbers = const { RefCell::new(Recent::new()) };
    }
    kept_number(&KEPT, n)
}

/// [`number`] for `n`, taken from `kept` when it was made there before, and kept there when
/// it is large (small numbers come from [`number`]'s table, which is cheaper to look up).
fn kept_number(kept: &'static LocalKey<KeptNumbers>, n: u64) -> HeaderValue {
    if n < SMALL_NUMBERS {
        return small_number(n);
    }
    kept.with_borrow_mut(|recent| {
        if let Some((_, value)) = recent.find_mut(|(made, _)| *made == n) {
            return value.clone();
        }
        let value = large_number(n);
        recent.push((n, value.clone()));
        value
    })
}

/// Whether a request is a gRPC call (`content-type: application/grpc*`).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// Whole seconds, rounded up, and at least 1: a client that waits this long will be admitted.
pub(crate) fn whole_seconds_at_least_one(duration: Duration) -> u64 {
    seconds_rounded_up(duration).max(1)
}

/// Whole milliseconds, rounded up, and at least 1: gRPC's retry pushback, and what the logs
/// report of a wait.
pub(crate) fn millis_at_least_one(duration: Duration) -> u64 {
    millis_rounded_up(duration).max(1)
}

// Both below work from the whole seconds and the nanoseconds left over: a whole second is a
// whole number of milliseconds, so only the part left over is rounded, and no 128-bit
// division is needed (every 429 works out its wait).

/// `duration` in whole seconds, rounded up, saturating.
fn seconds_rounded_up(duration: Duration) -> u64 {
    let part = u64::from(duration.subsec_nanos() > 0);
    duration.as_secs().saturating_add(part)
}

/// `duration` in whole milliseconds, rounded up, saturating.
fn millis_rounded_up(duration: Duration) -> u64 {
    let part = u64::from(duration.subsec_nanos().div_ceil(1_000_000));
    duration.as_secs().saturating_mul(1000).saturating_add(part)
}

/// The headers for an admitted request's decision of `limit`.
pub(crate) fn headers(
    limit: &Limit,
    decision: &Decision,
    options: ResponseOptions,
) -> RateLimitHeaders {
    RateLimitHeaders(Some(AdmittedHeaders {
        counts: [decision.limit, remaining(decision)],
        optional: optional_headers(limit, decision, options),
    }))
}

/// The requests the client may still send now: none after a denial.
fn remaining(decision: &Decision) -> u64 {
    if decision.allowed {
        decision.remaining
    } else {
        0
    }
}

/// The headers `options` ask for beyond the counts and `Retry-After`; `None` when they ask
/// for none, as most rules do, so that their requests run no code for these headers (a
/// request's cost in a server follows the lines of code it runs: scripts/bench-footprint.sh).
#[inline]
fn optional_headers(
    limit: &Limit,
    decision: &Decision,
    options: ResponseOptions,
) -> Option<Vec<(HeaderName, HeaderValue)>> {
    (options.reset_header || options.ietf_headers)
        .then(|| opted_in_headers(limit, decision, options))
}

/// The headers of [`optional_headers`], when `options` ask for some.
fn opted_in_headers(
    limit: &Limit,
    decision: &Decision,
    options: ResponseOptions,
) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = Vec::new();
    let reset_seconds = || seconds_rounded_up(decision.reset_after);
    if options.reset_header {
        headers.push((X_RATELIMIT_RESET, number(reset_seconds())));
    }
    if options.ietf_headers {
        let name = structured_string(limit.label());
        let window = limit.quota().map_or(0, |q| q.period().as_secs().max(1));
        let remaining = remaining(decision);
        let reset = if decision.allowed {
            reset_seconds()
        } else {
            whole_seconds_at_least_one(decision.retry_after)
        };
        let policy = format!("{name};q={};w={window}", decision.limit);
        let state = format!("{name};r={remaining};t={reset}");
        // Both are ASCII by construction (the name is escaped), so these cannot fail.
        if let (Ok(policy), Ok(state)) =
            (HeaderValue::try_from(policy), HeaderValue::try_from(state))
        {
            headers.push((RATELIMIT_POLICY, policy));
            headers.push((RATELIMIT, state));
        }
    }
    headers
}

/// The answer to a denied request: `429` with a problem document, or for gRPC a
/// Trailers-Only `RESOURCE_EXHAUSTED` (an HTTP 429 would reach gRPC clients as UNAVAILABLE,
/// which they retry at once).
pub(crate) fn rejection(
    limit: &Limit,
    decision: &Decision,
    options: ResponseOptions,
    grpc: bool,
) -> Response<Bytes> {
    debug_assert!(!decision.allowed, "a rejection reports a denying decision");
    let retry_after = whole_seconds_at_least_one(decision.retry_after);
    let mut response = if grpc {
        grpc_rejection(limit, decision, retry_after)
    } else {
        problem_rejection(limit, decision, retry_after)
    };
    if let Some(optional) = optional_headers(limit, decision, options) {
        let headers = response.headers_mut();
        // A copied map has no room to spare.
        headers.reserve(optional.len());
        insert_all(headers, optional);
    }
    response
}

/// `429` with a problem document, copied from the one kept on this thread for the same limit
/// and wait when there is one.
fn problem_rejection(limit: &Limit, decision: &Decision, retry_after: u64) -> Response<Bytes> {
    thread_local! {
        static RECENT: RefCell<RecentRejections> = const { RefCell::new(RecentRejections::new()) };
    }
    let (headers, body) = kept_answer(&RECENT, limit, decision, retry_after, || {
        let body = problem_document(limit.label_json(), retry_after);
        // Room for its length too (see `kept_answer`).
        let mut headers = HeaderMap::with_capacity(6);
        headers.insert(CONTENT_TYPE, PROBLEM_JSON);
        insert_denial_counts(
            &mut headers,
            limit_number(decision.limit),
            number(retry_after),
        );
        (headers, body)
    });
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    *response.headers_mut() = headers;
    response
}

/// A Trailers-Only `RESOURCE_EXHAUSTED`, with the wait in its message and pushback, copied
/// like a 429 from the one kept on this thread for the same limit and wait when there is
/// one. Only the pushback, in milliseconds, is written for each request.
fn grpc_rejection(limit: &Limit, decision: &Decision, retry_after: u64) -> Response<Bytes> {
    thread_local! {
        static RECENT: RefCell<RecentRejections> = const { RefCell::new(RecentRejections::new()) };
    }
    // Rounded up like Retry-After: a client that waits this long is admitted.
    let pushback = number(millis_at_least_one(decision.retry_after));
    let (mut headers, body) = kept_answer(&RECENT, limit, decision, retry_after, || {
        let message = format!(
            "rate limit exceeded ({}); retry after {retry_after}s",
            limit.label()
        );
        let (mut parts, body) = grpc_status(GRPC_RESOURCE_EXHAUSTED, message).into_parts();
        let headers = &mut parts.headers;
        headers.insert(GRPC_RETRY_PUSHBACK_MS, pushback.clone());
        insert_denial_counts(headers, limit_number(decision.limit), number(retry_after));
        (parts.headers, body)
    });
    // A kept answer holds the pushback of the request it was made for. Replacing a header
    // does not grow the copied map, as adding one would.
    headers.insert(GRPC_RETRY_PUSHBACK_MS, pushback);
    let mut response = Response::new(body);
    *response.headers_mut() = headers;
    response
}

/// The answer kept in `recent` for a denial by `limit` with this wait, or the one `make`
/// makes (see [`RecentRejections`]), with its `Content-Length`. axum's router (tonic's too)
/// inserts that header into a response that lacks it, and a copied map has no room to spare:
/// the insert would grow every copy. Said here, the length is kept with the answer. A kept
/// answer may hold the block its numbers were cut from ([`large_number`]): a few kilobytes
/// per thread at most.
fn kept_answer(
    recent: &'static LocalKey<RefCell<RecentRejections>>,
    limit: &Limit,
    decision: &Decision,
    retry_after: u64,
    make: impl FnOnce() -> Answer,
) -> Answer {
    let key = RejectionKey {
        label_json: limit.label_json(),
        limit: decision.limit,
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

/// The headers of every denial: `X-Ratelimit-Limit` (`limit`), `X-Ratelimit-Remaining: 0`,
/// and the wait (`retry_after`) as `X-Ratelimit-Retry-After` and `Retry-After`.
fn insert_denial_counts(headers: &mut HeaderMap, limit: HeaderValue, retry_after: HeaderValue) {
    headers.insert(X_RATELIMIT_LIMIT, limit);
    headers.insert(X_RATELIMIT_REMAINING, NONE_REMAINING);
    headers.insert(X_RATELIMIT_RETRY_AFTER, retry_after.clone());
    headers.insert(RETRY_AFTER, retry_after);
}

/// Inserts each of `optional` into `headers`, replacing any header of the same name
/// (`HeaderMap`'s `extend` would append beside it, and costs a call even when there is
/// nothing to add, as there usually is not).
fn insert_all(headers: &mut HeaderMap, optional: Vec<(HeaderName, HeaderValue)>) {
    for (name, value) in optional {
        headers.insert(name, value);
    }
}

/// The `429` problem document (RFC 9457), written by hand in one allocation; the label's
/// JSON was prepared when the rules compiled.
fn problem_document(label_json: &str, retry_after: u64) -> Bytes {
    const START: &str = r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"Rate limit exceeded; retry after "#;
    const LIMIT: &str = r#" second(s).","limit":"#;
    const RETRY_AFTER: &str = r#","retry_after":"#;
    let mut digits = itoa::Buffer::new();
    let retry_after = digits.format(retry_after);
    let length = START.len() + LIMIT.len() + RETRY_AFTER.len() + 1;
    let mut document = String::with_capacity(length + label_json.len() + 2 * retry_after.len());
    for part in [
        START,
        retry_after,
        LIMIT,
        label_json,
        RETRY_AFTER,
        retry_after,
        "}",
    ] {
        document.push_str(part);
    }
    Bytes::from(document)
}

/// The answer when the server records no peer address: a loud `500` that says how to fix it.
pub(crate) fn missing_peer_addr(grpc: bool, fix: &str) -> Response<Bytes> {
    if grpc {
        return grpc_status(GRPC_INTERNAL, fix.to_owned());
    }
    let mut response = Response::new(Bytes::from(fix.to_owned()));
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The most headers a gRPC answer carries: its three, and a rejection's six (its length,
/// pushback and the denial counts); the length is also what axum's router (tonic's too) adds
/// to the other answers.
const GRPC_ANSWER_HEADERS: usize = 9;

/// A Trailers-Only gRPC response: HTTP 200, the status in the headers, no body. Its headers
/// have room for what is added after them, so that they never grow.
fn grpc_status(status: HeaderValue, message: String) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    let headers = response.headers_mut();
    *headers = HeaderMap::with_capacity(GRPC_ANSWER_HEADERS);
    headers.insert(CONTENT_TYPE, GRPC_CONTENT_TYPE);
    headers.insert(GRPC_STATUS, status);
    if let Ok(message) = HeaderValue::try_from(percent_encode(message)) {
        headers.insert(GRPC_MESSAGE, message);
    }
    response
}

/// gRPC's percent-encoding of `grpc-message`: printable ASCII except `%` stays as is, and a
/// message that is all such bytes (as most are) is returned as it is.
fn percent_encode(message: String) -> String {
    if message.bytes().all(stays_unencoded) {
        return message;
    }
    let mut encoded = String::with_capacity(message.len());
    for byte in message.bytes() {
        if stays_unencoded(byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// Whether `byte` stands for itself in a `grpc-message`.
fn stays_unencoded(byte: u8) -> bool {
    (0x20..=0x7e).contains(&byte) && byte != b'%'
}

/// An RFC 8941 sf-string: quoted, with `"` and `\` escaped and non-ASCII dropped.
fn structured_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars().filter(|c| (' '..='~').contains(c)) {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};

    #[test]
    fn retry_after_is_rounded_up_and_never_zero() {
        assert_eq!(whole_seconds_at_least_one(Duration::ZERO), 1);
        assert_eq!(whole_seconds_at_least_one(Duration::from_nanos(1)), 1);
        assert_eq!(whole_seconds_at_least_one(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds_at_least_one(Duration::from_millis(2001)), 3);
        assert_eq!(millis_at_least_one(Duration::ZERO), 1);
        assert_eq!(millis_at_least_one(Duration::from_micros(1_001)), 2);
        assert_eq!(millis_at_least_one(Duration::from_millis(7)), 7);
    }

    #[test]
    fn rounding_up_agrees_with_dividing_the_nanoseconds_and_saturates() {
        let nanos_rounded_up = |duration: Duration, unit: u128| {
            u64::try_from(duration.as_nanos().div_ceil(unit)).unwrap_or(u64::MAX)
        };
        let durations = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(999_999),
            Duration::from_nanos(1_000_001),
            Duration::new(59, 999_999_999),
            Duration::new(3_600, 0),
            Duration::new(u64::MAX / 1000, 999_000_001),
            Duration::new(u64::MAX / 1000 + 1, 0),
            Duration::new(u64::MAX, 1),
            Duration::MAX,
        ];
        for duration in durations {
            assert_eq!(
                seconds_rounded_up(duration),
                nanos_rounded_up(duration, 1_000_000_000),
                "{duration:?}"
            );
            assert_eq!(
                millis_rounded_up(duration),
                nanos_rounded_up(duration, 1_000_000),
                "{duration:?}"
            );
        }
    }

    #[test]
    fn the_problem_document_is_the_json_it_claims_to_be() {
        let document = problem_document(r#""api \"v2\"""#, 3600);
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

    /// Rules of one limit, 5 requests per minute per client address.
    fn five_per_minute() -> Rules {
        Rules::builder("api")
            .descriptor(
                DescriptorSpec::key("remote_address").rate_limit(LimitSpec::per(Unit::Minute, 5)),
            )
            .build()
            .expect("valid rules")
    }

    /// A denial by [`five_per_minute`] that may retry after `retry_after`.
    fn denial(retry_after: Duration) -> Decision {
        Decision {
            allowed: false,
            limit: 5,
            remaining: 0,
            reset_after: Duration::from_secs(60),
            retry_after,
            delay: Duration::ZERO,
            booked_until: None,
        }
    }

    #[test]
    fn an_admitted_response_gets_only_the_headers_the_rules_ask_for() {
        let rules = five_per_minute();
        let admitted = Decision {
            allowed: true,
            remaining: 4,
            ..denial(Duration::ZERO)
        };
        let names = |options: ResponseOptions| {
            let mut response = HeaderMap::new();
            headers(&rules.limits()[0], &admitted, options).write_to(&mut response);
            let mut names: Vec<String> = response.keys().map(|n| n.to_string()).collect();
            names.sort_unstable();
            names
        };
        assert_eq!(
            names(ResponseOptions::default()),
            ["x-ratelimit-limit", "x-ratelimit-remaining"]
        );
        let with_reset = ResponseOptions {
            reset_header: true,
            ..ResponseOptions::default()
        };
        assert_eq!(
            names(with_reset),
            [
                "x-ratelimit-limit",
                "x-ratelimit-remaining",
                "x-ratelimit-reset"
            ]
        );
    }

    #[test]
    fn a_429_states_its_length_when_made_and_when_copied() {
        let rules = five_per_minute();
        let decision = denial(Duration::from_secs(12));
        // Made, made again and kept, then copied (see `RecentRejections`).
        for _ in 0..3 {
            let response = rejection(
                &rules.limits()[0],
                &decision,
                ResponseOptions::default(),
                false,
            );
            let length = response.body().len().to_string();
            assert_eq!(response.headers()[CONTENT_LENGTH], length.as_str());
        }
    }

    #[test]
    fn numbers_are_written_whatever_their_size_and_however_often() {
        for n in [0, 7, 1023, 1024, 3600, 1_000_000_000, u64::MAX] {
            assert_eq!(number(n), n.to_string().as_str());
        }
        // More distinct counts than are kept, small and large, twice over, in turn.
        let counts = [
            5_000,
            60_000,
            1_000_000,
            7,
            86_400,
            2_000_000_000,
            1024,
            1023,
        ];
        for _ in 0..2 {
            for n in counts {
                assert_eq!(limit_number(n), n.to_string().as_str());
                assert_eq!(remaining_number(n), n.to_string().as_str());
            }
        }
    }

    #[test]
    fn a_grpc_denial_tells_its_own_pushback_when_made_and_when_copied() {
        let rules = five_per_minute();
        // One wait in whole seconds (12), so one kept answer: made, made again and kept, then
        // copied twice (see `RecentRejections`).
        for pushback_ms in [11_500, 11_200, 11_900, 11_001] {
            let decision = denial(Duration::from_millis(pushback_ms));
            let response = rejection(
                &rules.limits()[0],
                &decision,
                ResponseOptions::default(),
                true,
            );
            let headers = response.headers();
            let expected = pushback_ms.to_string();
            assert_eq!(headers[GRPC_RETRY_PUSHBACK_MS], expected.as_str());
            assert_eq!(headers[GRPC_STATUS], "8");
            assert_eq!(headers[RETRY_AFTER], "12");
            assert_eq!(headers[CONTENT_LENGTH], "0");
            assert!(response.body().is_empty());
        }
    }

    #[test]
    fn a_large_count_that_repeats_is_not_written_again() {
        for count in [limit_number, remaining_number] {
            let first = count(999_999_999);
            let again = count(999_999_999);
            assert_eq!(again, "999999999");
            assert_eq!(first.as_bytes().as_ptr(), again.as_bytes().as_ptr());
        }
    }

    #[test]
    fn numbers_cut_from_shared_blocks_keep_their_own_digits() {
        // Enough numbers to fill several blocks, all alive at once.
        let numbers: Vec<u64> = (0..3_000u64).map(|i| 1_000_000_007 * (i + 1)).collect();
        let values: Vec<HeaderValue> = numbers.iter().map(|&n| number(n)).collect();
        for (n, value) in numbers.iter().zip(&values) {
            assert_eq!(value, n.to_string().as_str());
        }
    }

    #[test]
    fn optional_headers_replace_those_of_the_same_name() {
        let mut headers = HeaderMap::new();
        headers.insert(X_RATELIMIT_RESET, HeaderValue::from_static("9"));
        insert_all(
            &mut headers,
            vec![(X_RATELIMIT_RESET, HeaderValue::from_static("1"))],
        );
        let resets: Vec<_> = headers.get_all(X_RATELIMIT_RESET).iter().collect();
        assert_eq!(resets, ["1"]);
    }

    #[test]
    fn grpc_messages_are_percent_encoded() {
        assert_eq!(
            percent_encode("50% off, née".to_owned()),
            "50%25 off, n%C3%A9e"
        );
        assert_eq!(percent_encode("plain (api)".to_owned()), "plain (api)");
    }

    #[test]
    fn structured_strings_escape_quotes() {
        assert_eq!(structured_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
