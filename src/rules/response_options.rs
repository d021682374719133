//! Which rate-limit headers responses carry, and under which names: the `response` section
//! of the rules, validated.

use super::error::RuleError;
use super::file::{HeaderSet, Located, RawHeaderNames, RawResponse};
use http::HeaderName;

/// Which rate-limit headers responses carry, and the names of the `X-Ratelimit-*` ones.
///
/// Set in the rules file's `response` section (or with [`RulesBuilder`](super::RulesBuilder)):
///
/// ```yaml
/// response:
///   headers: x_ratelimit   # x_ratelimit (default) | ietf | both | none
///   reset_header: false    # true adds X-Ratelimit-Reset (needs x_ratelimit or both)
///   names:                 # new names for the X-Ratelimit-* headers, each optional
///     limit: x-rate-limit-limit
///     remaining: x-rate-limit-remaining
///     retry_after: x-rate-limit-retry-after
///     reset: x-rate-limit-reset
/// ```
///
/// | `headers` | admitted responses | denials, beside `Retry-After` |
/// |---|---|---|
/// | `x_ratelimit` | `X-Ratelimit-Limit`, `X-Ratelimit-Remaining` | `X-Ratelimit-Limit`, `X-Ratelimit-Remaining: 0`, `X-Ratelimit-Retry-After` |
/// | `ietf` | `RateLimit-Policy`, `RateLimit` | `RateLimit-Policy`, `RateLimit` |
/// | `both` | all four | all five |
/// | `none` | nothing | nothing |
///
/// Denials always carry `Retry-After` (and gRPC denials `grpc-retry-pushback-ms`), whatever
/// the set. `ietf_headers: true` is the older spelling of `headers: both` and still works;
/// a file may not write both `ietf_headers` and `headers`.
///
/// ```
/// use tollgate::rules::{Rules, XRatelimitHeader};
///
/// let rules = Rules::from_yaml(r#"
/// domain: api
/// response: { headers: both, names: { limit: x-rate-limit-limit } }
/// "#)?;
/// let response = rules.response();
/// assert!(response.x_ratelimit_headers && response.ietf_headers);
/// assert_eq!(response.header_name(XRatelimitHeader::Limit), "x-rate-limit-limit");
/// assert_eq!(response.header_name(XRatelimitHeader::Remaining), "x-ratelimit-remaining");
/// # Ok::<(), tollgate::rules::RuleErrors>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponseOptions {
    /// Send the `X-Ratelimit-*` headers (`headers: x_ratelimit`, the default, or `both`).
    pub x_ratelimit_headers: bool,
    /// Send the IETF `RateLimit-Policy` and `RateLimit` fields (`headers: ietf` or `both`).
    pub ietf_headers: bool,
    /// Send `X-Ratelimit-Reset` (seconds until the limit is full again).
    pub reset_header: bool,
    /// The names of the `X-Ratelimit-*` headers, in the order of [`XRatelimitHeader::ALL`].
    names: [HeaderName; 4],
}

impl Default for ResponseOptions {
    /// `X-Ratelimit-Limit` and `X-Ratelimit-Remaining` under their usual names.
    fn default() -> Self {
        ResponseOptions {
            x_ratelimit_headers: true,
            ietf_headers: false,
            reset_header: false,
            names: XRatelimitHeader::ALL.map(XRatelimitHeader::default_header_name),
        }
    }
}

impl ResponseOptions {
    /// The name `header` is sent under: its usual one unless the rules rename it.
    pub fn header_name(&self, header: XRatelimitHeader) -> &str {
        self.name(header).as_str()
    }

    pub(crate) fn name(&self, header: XRatelimitHeader) -> &HeaderName {
        &self.names[header as usize]
    }
}

/// One of the `X-Ratelimit-*` headers, which the rules may rename (`response.names`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum XRatelimitHeader {
    /// `X-Ratelimit-Limit` (`names.limit`): the most requests the client may send at once.
    Limit,
    /// `X-Ratelimit-Remaining` (`names.remaining`): requests the client may still send now.
    Remaining,
    /// `X-Ratelimit-Retry-After` (`names.retry_after`): whole seconds to wait after a denial.
    RetryAfter,
    /// `X-Ratelimit-Reset` (`names.reset`): whole seconds until the limit is full again.
    Reset,
}

impl XRatelimitHeader {
    /// Every header that may be renamed.
    pub const ALL: [XRatelimitHeader; 4] = [
        XRatelimitHeader::Limit,
        XRatelimitHeader::Remaining,
        XRatelimitHeader::RetryAfter,
        XRatelimitHeader::Reset,
    ];

    /// The name the header has unless renamed, e.g. `x-ratelimit-limit`.
    pub const fn default_name(self) -> &'static str {
        match self {
            XRatelimitHeader::Limit => "x-ratelimit-limit",
            XRatelimitHeader::Remaining => "x-ratelimit-remaining",
            XRatelimitHeader::RetryAfter => "x-ratelimit-retry-after",
            XRatelimitHeader::Reset => "x-ratelimit-reset",
        }
    }

    /// The path of its entry in the rules file.
    fn path(self) -> String {
        format!("response.names.{}", self.key())
    }

    /// Its key under `response.names`.
    fn key(self) -> &'static str {
        match self {
            XRatelimitHeader::Limit => "limit",
            XRatelimitHeader::Remaining => "remaining",
            XRatelimitHeader::RetryAfter => "retry_after",
            XRatelimitHeader::Reset => "reset",
        }
    }

    fn default_header_name(self) -> HeaderName {
        HeaderName::from_static(self.default_name())
    }
}

impl RawHeaderNames {
    /// The new name written for `header`, if any.
    pub(crate) fn get_mut(&mut self, header: XRatelimitHeader) -> &mut Option<Located<String>> {
        match header {
            XRatelimitHeader::Limit => &mut self.limit,
            XRatelimitHeader::Remaining => &mut self.remaining,
            XRatelimitHeader::RetryAfter => &mut self.retry_after,
            XRatelimitHeader::Reset => &mut self.reset,
        }
    }

    fn get(&self, header: XRatelimitHeader) -> Option<&Located<String>> {
        match header {
            XRatelimitHeader::Limit => self.limit.as_ref(),
            XRatelimitHeader::Remaining => self.remaining.as_ref(),
            XRatelimitHeader::RetryAfter => self.retry_after.as_ref(),
            XRatelimitHeader::Reset => self.reset.as_ref(),
        }
    }
}

/// Headers tollgate writes for other purposes, which no rate-limit header may be renamed to.
const TAKEN_NAMES: [&str; 8] = [
    "retry-after",
    "ratelimit",
    "ratelimit-policy",
    "content-type",
    "content-length",
    "grpc-status",
    "grpc-message",
    "grpc-retry-pushback-ms",
];

/// The options `raw` describes; every mistake is added to `errors`.
pub(super) fn compile(raw: &RawResponse, errors: &mut Vec<RuleError>) -> ResponseOptions {
    let set = match (&raw.headers, &raw.ietf_headers) {
        (Some(headers), Some(ietf)) => {
            let message =
                "`ietf_headers` is the older spelling of `headers: both`; write only `headers`";
            errors.push(RuleError::new(
                ietf.referenced,
                "response.ietf_headers",
                message,
            ));
            headers.value
        }
        (Some(headers), None) => headers.value,
        (None, Some(ietf)) if ietf.value => HeaderSet::Both,
        (None, _) => HeaderSet::XRatelimit,
    };
    let x_ratelimit_headers = matches!(set, HeaderSet::XRatelimit | HeaderSet::Both);
    let reset_header = match &raw.reset_header {
        Some(reset) if reset.value && !x_ratelimit_headers => {
            let message =
                "`reset_header` adds `X-Ratelimit-Reset` to the `X-Ratelimit-*` headers, \
                           which this `headers` leaves out: use `x_ratelimit` or `both`";
            errors.push(RuleError::new(
                reset.referenced,
                "response.reset_header",
                message,
            ));
            false
        }
        reset => reset.as_ref().is_some_and(|reset| reset.value),
    };
    ResponseOptions {
        x_ratelimit_headers,
        ietf_headers: matches!(set, HeaderSet::Ietf | HeaderSet::Both),
        reset_header,
        names: names(&raw.names, errors),
    }
}

/// The names of the `X-Ratelimit-*` headers: those `raw` gives, valid and distinct, in place
/// of the usual ones.
fn names(raw: &RawHeaderNames, errors: &mut Vec<RuleError>) -> [HeaderName; 4] {
    // `None` for a name with a mistake (reported), so that it is not also reported as a clash.
    let names = XRatelimitHeader::ALL.map(|header| {
        let Some(name) = raw.get(header) else {
            return Some(header.default_header_name());
        };
        let error = match HeaderName::from_bytes(name.value.as_bytes()) {
            Ok(valid) if TAKEN_NAMES.contains(&valid.as_str()) => {
                format!("`{valid}` is a header tollgate writes for another purpose")
            }
            Ok(valid) => return Some(valid),
            Err(_) => format!("`{}` is not a valid header name", name.value),
        };
        errors.push(RuleError::new(name.referenced, header.path(), error));
        None
    });
    for header in XRatelimitHeader::ALL {
        let (Some(renamed), Some(name)) = (raw.get(header), &names[header as usize]) else {
            continue;
        };
        for other in XRatelimitHeader::ALL {
            if other != header && names[other as usize].as_ref() == Some(name) {
                let message = format!("the `{}` header is named `{name}` too", other.key());
                errors.push(RuleError::new(renamed.referenced, header.path(), message));
            }
        }
    }
    XRatelimitHeader::ALL.map(|header| {
        names[header as usize]
            .clone()
            .unwrap_or_else(|| header.default_header_name())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::Rules;

    /// The options of rules whose `response` section is `response`, or the errors as text.
    fn options(response: &str) -> Result<ResponseOptions, Vec<String>> {
        let yaml = format!("domain: d\nresponse: {response}\n");
        Rules::from_yaml(&yaml)
            .map(|rules| rules.response().clone())
            .map_err(|errors| errors.errors().iter().map(ToString::to_string).collect())
    }

    /// Which of the header families `response` turns on: (X-Ratelimit-*, IETF, reset).
    fn families(response: &str) -> (bool, bool, bool) {
        let options = options(response).expect("valid options");
        (
            options.x_ratelimit_headers,
            options.ietf_headers,
            options.reset_header,
        )
    }

    #[test]
    fn each_header_set_turns_on_its_families() {
        assert_eq!(families("{}"), (true, false, false));
        assert_eq!(families("{ headers: x_ratelimit }"), (true, false, false));
        assert_eq!(families("{ headers: ietf }"), (false, true, false));
        assert_eq!(families("{ headers: both }"), (true, true, false));
        assert_eq!(families("{ headers: none }"), (false, false, false));
        assert_eq!(
            families("{ headers: both, reset_header: true }"),
            (true, true, true)
        );
        assert_eq!(options("{}"), Ok(ResponseOptions::default()));
    }

    #[test]
    fn ietf_headers_is_the_older_spelling_of_both() {
        assert_eq!(families("{ ietf_headers: true }"), (true, true, false));
        assert_eq!(families("{ ietf_headers: false }"), (true, false, false));
        assert_eq!(
            families("{ ietf_headers: true, reset_header: true }"),
            (true, true, true)
        );
    }

    #[test]
    fn ietf_headers_and_headers_together_are_refused() {
        let errors = options("{ headers: both, ietf_headers: true }").unwrap_err();
        assert_eq!(
            errors,
            [
                "2:42: response.ietf_headers: `ietf_headers` is the older spelling of \
              `headers: both`; write only `headers`"
            ]
        );
    }

    #[test]
    fn a_reset_header_without_the_x_ratelimit_headers_is_refused() {
        for set in ["ietf", "none"] {
            let errors =
                options(&format!("{{ headers: {set}, reset_header: true }}")).expect_err("refused");
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(
                errors[0].contains("response.reset_header: `reset_header` adds"),
                "{errors:?}"
            );
        }
        assert_eq!(
            families("{ headers: none, reset_header: false }"),
            (false, false, false)
        );
    }

    #[test]
    fn headers_may_be_renamed() {
        let options = options(
            "{ names: { limit: X-Rate-Limit-Limit, remaining: x-rate-limit-remaining, \
             retry_after: x-wait, reset: x-full-in } }",
        )
        .expect("valid names");
        let names = XRatelimitHeader::ALL.map(|header| options.header_name(header));
        // Header names are lower case, however written.
        assert_eq!(
            names,
            [
                "x-rate-limit-limit",
                "x-rate-limit-remaining",
                "x-wait",
                "x-full-in"
            ]
        );
    }

    #[test]
    fn invalid_taken_and_clashing_names_are_refused_with_their_place() {
        let errors = options(
            "\n  names:\n    limit: \"x limit\"\n    remaining: retry-after\n    \
             retry_after: x-ratelimit-reset",
        )
        .unwrap_err();
        assert_eq!(
            errors,
            [
                "4:12: response.names.limit: `x limit` is not a valid header name",
                "5:16: response.names.remaining: `retry-after` is a header tollgate writes \
                 for another purpose",
                "6:18: response.names.retry_after: the `reset` header is named \
                 `x-ratelimit-reset` too",
            ]
        );
        let errors = options("{ names: { limit: x-count, remaining: X-Count } }").unwrap_err();
        assert_eq!(errors.len(), 2, "each renamed header is told: {errors:?}");
    }

    #[test]
    fn unknown_header_sets_and_name_keys_are_refused() {
        assert!(options("{ headers: draft }").is_err());
        assert!(options("{ names: { policy: x-policy } }").is_err());
    }
}
