//! The rate-limit headers of a response: the `X-Ratelimit-*` headers (under the names the
//! rules give them) and the IETF fields, as the rules choose.

use super::ietf;
use super::numbers::{limit_number, number, remaining_number};
use super::wait::seconds_rounded_up;
use crate::algorithm::Decision;
use crate::rules::{Limit, ResponseOptions, XRatelimitHeader};
use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

/// `X-Ratelimit-Limit`: the most requests the client may send at once.
pub const X_RATELIMIT_LIMIT: HeaderName =
    HeaderName::from_static(XRatelimitHeader::Limit.default_name());
/// `X-Ratelimit-Remaining`: requests the client may still send now.
pub const X_RATELIMIT_REMAINING: HeaderName =
    HeaderName::from_static(XRatelimitHeader::Remaining.default_name());
/// `X-Ratelimit-Retry-After`: whole seconds to wait after a denial (same as `Retry-After`).
pub const X_RATELIMIT_RETRY_AFTER: HeaderName =
    HeaderName::from_static(XRatelimitHeader::RetryAfter.default_name());
/// `X-Ratelimit-Reset`: whole seconds until the limit is full again (optional).
pub const X_RATELIMIT_RESET: HeaderName =
    HeaderName::from_static(XRatelimitHeader::Reset.default_name());
/// IETF `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers), optional.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// IETF `RateLimit` (draft-ietf-httpapi-ratelimit-headers), optional.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// `X-Ratelimit-Remaining` of a denial.
const NONE_REMAINING: HeaderValue = HeaderValue::from_static("0");

/// The rate-limit headers of an admitted request's response, made before the inner service
/// runs and written once it has answered. Kept small: the response future carries them.
#[derive(Debug, Default)]
pub(crate) struct RateLimitHeaders {
    /// The names of `X-Ratelimit-Limit` and `X-Ratelimit-Remaining` and their counts, kept
    /// as numbers until they are written: two header values would make the future larger.
    counts: Option<([HeaderName; 2], [u64; 2])>,
    /// The other headers the rules choose: `X-Ratelimit-Reset`, the IETF fields. Most rules
    /// choose none, and an empty `Vec` allocates nothing.
    others: Vec<(HeaderName, HeaderValue)>,
}

impl RateLimitHeaders {
    /// Adds the headers to `headers`, replacing any of the same name (`HeaderMap`'s `extend`
    /// would append beside them).
    pub(crate) fn write_to(self, headers: &mut HeaderMap) {
        if let Some(([limit_name, remaining_name], [limit, remaining])) = self.counts {
            headers.insert(limit_name, limit_number(limit));
            headers.insert(remaining_name, remaining_number(remaining));
        }
        for (name, value) in self.others {
            headers.insert(name, value);
        }
    }
}

/// The headers for an admitted request's decision of `limit`.
pub(crate) fn headers(
    limit: &Limit,
    decision: &Decision,
    options: &ResponseOptions,
) -> RateLimitHeaders {
    let counts = options.x_ratelimit_headers.then(|| {
        let names = [XRatelimitHeader::Limit, XRatelimitHeader::Remaining];
        (
            names.map(|header| options.name(header).clone()),
            [decision.capacity, decision.remaining],
        )
    });
    let mut others = Vec::new();
    if let Some(reset) = reset_header(decision, options) {
        others.push(reset);
    }
    if options.ietf_headers {
        others.extend(ietf_fields(limit, decision));
    }
    RateLimitHeaders { counts, others }
}

/// The headers of a denial of `limit` that `options` choose, apart from `Retry-After` and
/// `X-Ratelimit-Reset`: those depend on the limit, its size and the wait in whole seconds
/// alone (see `RecentRejections`).
pub(super) fn denial_headers(
    limit: &Limit,
    decision: &Decision,
    options: &ResponseOptions,
    retry_after: HeaderValue,
    headers: &mut HeaderMap,
) {
    if options.x_ratelimit_headers {
        let name = |header| options.name(header).clone();
        headers.insert(
            name(XRatelimitHeader::Limit),
            limit_number(decision.capacity),
        );
        headers.insert(name(XRatelimitHeader::Remaining), NONE_REMAINING);
        headers.insert(name(XRatelimitHeader::RetryAfter), retry_after);
    }
    if options.ietf_headers {
        for (name, value) in ietf_fields(limit, decision) {
            headers.insert(name, value);
        }
    }
}

/// `X-Ratelimit-Reset` when `options` ask for it.
pub(super) fn reset_header(
    decision: &Decision,
    options: &ResponseOptions,
) -> Option<(HeaderName, HeaderValue)> {
    options.reset_header.then(|| {
        let reset = number(seconds_rounded_up(decision.reset_after));
        (options.name(XRatelimitHeader::Reset).clone(), reset)
    })
}

/// `RateLimit-Policy` and `RateLimit`, when they can be written.
fn ietf_fields(
    limit: &Limit,
    decision: &Decision,
) -> impl Iterator<Item = (HeaderName, HeaderValue)> {
    let fields = ietf::fields(limit, decision);
    fields
        .into_iter()
        .flat_map(|[policy, state]| [(RATELIMIT_POLICY, policy), (RATELIMIT, state)])
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::rules::{DescriptorSpec, HeaderSet, LimitSpec, Rules, RulesBuilder, Unit};
    use std::time::Duration;

    /// Rules of one limit, 5 requests per minute per client address, whose response options
    /// `options` sets.
    pub(in crate::response) fn five_per_minute(
        options: impl FnOnce(RulesBuilder) -> RulesBuilder,
    ) -> Rules {
        let builder = Rules::builder("api").descriptor(
            DescriptorSpec::key("remote_address").rate_limit(LimitSpec::per(5, Unit::Minute)),
        );
        options(builder).build().expect("valid rules")
    }

    /// A denial by [`five_per_minute`] that may retry after `retry_after`.
    pub(in crate::response) fn denial(retry_after: Duration) -> Decision {
        Decision {
            allowed: false,
            capacity: 5,
            remaining: 0,
            reset_after: Duration::from_secs(60),
            retry_after,
            delay: Duration::ZERO,
            booked_until: None,
        }
    }

    /// The names of the headers of an admitted response under `rules`, sorted.
    fn admitted_names(rules: &Rules) -> Vec<String> {
        let admitted = Decision {
            allowed: true,
            remaining: 4,
            ..denial(Duration::ZERO)
        };
        let mut response = HeaderMap::new();
        headers(&rules.limits()[0], &admitted, rules.response()).write_to(&mut response);
        let mut names: Vec<String> = response.keys().map(|n| n.to_string()).collect();
        names.sort_unstable();
        names
    }

    #[test]
    fn an_admitted_response_gets_only_the_headers_the_rules_ask_for() {
        assert_eq!(
            admitted_names(&five_per_minute(|rules| rules)),
            ["x-ratelimit-limit", "x-ratelimit-remaining"]
        );
        assert_eq!(
            admitted_names(&five_per_minute(|rules| rules.reset_header(true))),
            [
                "x-ratelimit-limit",
                "x-ratelimit-remaining",
                "x-ratelimit-reset"
            ]
        );
        assert_eq!(
            admitted_names(&five_per_minute(|rules| rules.headers(HeaderSet::Ietf))),
            ["ratelimit", "ratelimit-policy"]
        );
        assert_eq!(
            admitted_names(&five_per_minute(|rules| rules.headers(HeaderSet::Both))),
            [
                "ratelimit",
                "ratelimit-policy",
                "x-ratelimit-limit",
                "x-ratelimit-remaining"
            ]
        );
        let none: [&str; 0] = [];
        assert_eq!(
            admitted_names(&five_per_minute(|rules| rules.headers(HeaderSet::None))),
            none
        );
        assert_eq!(
            admitted_names(&five_per_minute(|rules| rules
                .header_name(XRatelimitHeader::Limit, "x-rate-limit-limit")
                .header_name(XRatelimitHeader::Remaining, "x-rate-limit-remaining"))),
            ["x-rate-limit-limit", "x-rate-limit-remaining"]
        );
    }

    #[test]
    fn rate_limit_headers_replace_those_of_the_same_name() {
        let rules = five_per_minute(|rules| rules);
        let mut response = HeaderMap::new();
        response.insert(X_RATELIMIT_LIMIT, HeaderValue::from_static("9"));
        let admitted = Decision {
            allowed: true,
            ..denial(Duration::ZERO)
        };
        headers(&rules.limits()[0], &admitted, rules.response()).write_to(&mut response);
        let limits: Vec<_> = response.get_all(X_RATELIMIT_LIMIT).iter().collect();
        assert_eq!(limits, ["5"]);
    }

    #[test]
    fn the_default_names_are_the_public_constants() {
        let options = ResponseOptions::default();
        let constants = [
            X_RATELIMIT_LIMIT,
            X_RATELIMIT_REMAINING,
            X_RATELIMIT_RETRY_AFTER,
            X_RATELIMIT_RESET,
        ];
        for (header, constant) in XRatelimitHeader::ALL.into_iter().zip(constants) {
            assert_eq!(options.name(header), constant);
        }
    }
}
