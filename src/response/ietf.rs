//! The IETF `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers).

use super::wait::{seconds_rounded_up, whole_seconds_at_least_one};
use crate::algorithm::Decision;
use crate::rules::Limit;
use http::HeaderValue;

/// `RateLimit-Policy` and `RateLimit` for `decision` of `limit`, e.g.
/// `"api";q=100;w=60` and `"api";r=42;t=17`; `None` if they could not be written.
pub(super) fn fields(limit: &Limit, decision: &Decision) -> Option<[HeaderValue; 2]> {
    let name = structured_string(limit.label());
    let window = limit.quota().map_or(0, |q| q.period().as_secs().max(1));
    let (remaining, reset) = if decision.allowed {
        (decision.remaining, seconds_rounded_up(decision.reset_after))
    } else {
        (0, whole_seconds_at_least_one(decision.retry_after))
    };
    let policy = format!("{name};q={};w={window}", decision.capacity);
    let state = format!("{name};r={remaining};t={reset}");
    // Both are printable ASCII by construction (the name is escaped).
    Some([
        HeaderValue::try_from(policy).ok()?,
        HeaderValue::try_from(state).ok()?,
    ])
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

    #[test]
    fn structured_strings_escape_quotes() {
        assert_eq!(structured_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
