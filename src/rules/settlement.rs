//! What a limit learns from a response: what the request cost (`settle`), or whether it
//! counts at all (`count_when`).

use http::{HeaderMap, HeaderName, StatusCode};
use std::fmt;

/// How a limit settles a request it charged, once the response is known (`settle` or
/// `count_when` in the [rules reference](crate::guide::rules#settle-costs-known-after-the-response)).
///
/// ```
/// use tollgate::rules::Rules;
///
/// let rules = Rules::from_yaml(r#"
/// domain: auth
/// descriptors:
///   - key: remote_address
///     rate_limit: { period: 15m, requests_per_unit: 5, count_when: { status: [401, 5xx] } }
/// "#)?;
/// let settlement = rules.limits()[0].settlement().expect("count_when");
/// assert_eq!(settlement.to_string(), "counts 401, 5xx");
/// # Ok::<(), tollgate::rules::RuleErrors>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settlement {
    /// The request costs what this response header says (a whole number); without one, it
    /// keeps the cost it was charged.
    ResponseHeader(HeaderName),
    /// The request costs what this trailer of the response says, when its body ends (a
    /// stream, gRPC); without one, it keeps the cost it was charged.
    ResponseTrailer(HeaderName),
    /// The request counts only when the response's status is among these.
    CountWhen(StatusSet),
}

impl Settlement {
    /// What a request charged `charged` turned out to cost, as the response's `status` and
    /// `headers` tell, or its handler `said` (a
    /// [`SettledCost`](crate::response::SettledCost), which wins over the header): `None`
    /// when it does not say (the charge stands).
    pub(crate) fn cost(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        said: Option<u64>,
        charged: u64,
    ) -> Option<u64> {
        match self {
            Settlement::ResponseHeader(name) => match said {
                Some(cost) => Some(cost),
                None => number(headers, name),
            },
            // Said at the end of the body: see `cost_in_trailers`.
            Settlement::ResponseTrailer(_) => None,
            Settlement::CountWhen(statuses) => {
                Some(if statuses.matches(status) { charged } else { 0 })
            }
        }
    }
}

impl Settlement {
    /// Whether the response says the cost at the end of its body, in its trailers.
    pub(crate) fn in_trailers(&self) -> bool {
        matches!(self, Settlement::ResponseTrailer(_))
    }

    /// What the response's `trailers` say the request cost, for a settlement in trailers.
    pub(crate) fn cost_in_trailers(&self, trailers: &HeaderMap) -> Option<u64> {
        match self {
            Settlement::ResponseTrailer(name) => number(trailers, name),
            Settlement::ResponseHeader(_) | Settlement::CountWhen(_) => None,
        }
    }
}

/// The whole number the field `name` of `fields` holds, if any.
fn number(fields: &HeaderMap, name: &HeaderName) -> Option<u64> {
    fields.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// Statuses: codes, and classes (`4xx`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusSet {
    codes: Vec<u16>,
    /// Bit `n` set: every `n`xx status.
    classes: u8,
}

impl StatusSet {
    /// Adds the status `code`.
    pub(crate) fn code(&mut self, code: u16) {
        self.codes.push(code);
    }

    /// Adds every status of the class `hundreds` (`5` for `5xx`).
    pub(crate) fn class(&mut self, hundreds: u8) {
        self.classes |= 1 << hundreds;
    }

    /// Whether `status` is among these.
    pub fn matches(&self, status: StatusCode) -> bool {
        let code = status.as_u16();
        let hundreds = u32::from(code / 100);
        self.codes.contains(&code) || (hundreds < 8 && self.classes & (1 << hundreds) != 0)
    }
}

impl fmt::Display for Settlement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Settlement::ResponseHeader(name) => write!(f, "settles from {name}"),
            Settlement::ResponseTrailer(name) => write!(f, "settles from trailer {name}"),
            Settlement::CountWhen(statuses) => write!(f, "counts {statuses}"),
        }
    }
}

impl fmt::Display for StatusSet {
    /// The codes, then the classes, e.g. `401, 403, 5xx`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let classes = (1..8u8).filter(|hundreds| self.classes & (1 << hundreds) != 0);
        let codes = self.codes.iter().map(u16::to_string);
        let all: Vec<String> = codes.chain(classes.map(|h| format!("{h}xx"))).collect();
        f.write_str(&all.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_says_the_cost_and_a_status_whether_it_counts() {
        let tokens = Settlement::ResponseHeader(HeaderName::from_static("x-tokens-used"));
        let mut headers = HeaderMap::new();
        let ok = StatusCode::OK;
        assert_eq!(tokens.cost(ok, &headers, None, 1), None, "keeps its charge");
        headers.insert("x-tokens-used", " 300 ".parse().unwrap());
        assert_eq!(tokens.cost(ok, &headers, None, 1), Some(300));
        assert_eq!(
            tokens.cost(ok, &headers, Some(250), 1),
            Some(250),
            "the handler's"
        );
        headers.insert("x-tokens-used", "lots".parse().unwrap());
        assert_eq!(tokens.cost(ok, &headers, None, 1), None);

        let mut failures = StatusSet::default();
        failures.code(401);
        failures.class(5);
        let failed = Settlement::CountWhen(failures);
        let empty = HeaderMap::new();
        assert_eq!(
            failed.cost(StatusCode::UNAUTHORIZED, &empty, None, 1),
            Some(1)
        );
        assert_eq!(
            failed.cost(StatusCode::BAD_GATEWAY, &empty, None, 1),
            Some(1)
        );
        assert_eq!(failed.cost(StatusCode::FORBIDDEN, &empty, None, 1), Some(0));
        assert_eq!(failed.cost(StatusCode::OK, &empty, None, 1), Some(0));
    }
}
