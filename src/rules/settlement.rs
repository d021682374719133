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
    /// `tollgate serve`: a client checks the limit before a request (a descriptor of
    /// `hits_addend: 0`) and charges what the request cost once its stream is done, by a
    /// second call (Envoy's `apply_on_stream_done`). That charge is kept whole whatever the
    /// call's answer, past the limit if need be, as a settled cost is.
    StreamDone,
}

/// What a response's head says of a request's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Said {
    /// The request cost this.
    Cost(u64),
    /// Nothing: the charge stands.
    Nothing,
    /// The response says it at the end of its body, in its trailers.
    AtEnd,
}

impl Settlement {
    /// What a request charged `charged` turned out to cost, as the head of its response
    /// tells: its `status` and `headers`, or its handler `said` (a
    /// [`SettledCost`](crate::response::SettledCost), which wins over the header).
    pub(crate) fn said_at_head(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        said: Option<u64>,
        charged: u64,
    ) -> Said {
        match self {
            Settlement::ResponseHeader(name) => said
                .or_else(|| number(headers, name))
                .map_or(Said::Nothing, Said::Cost),
            Settlement::ResponseTrailer(_) => Said::AtEnd,
            Settlement::CountWhen(statuses) if statuses.matches(status) => Said::Cost(charged),
            Settlement::CountWhen(statuses) if statuses.has_grpc() => {
                match grpc_status(headers) {
                    // Trailers-Only: the call ended with its head.
                    Some(code) => Said::Cost(statuses.counts_grpc(code, charged)),
                    None if is_grpc(headers) => Said::AtEnd,
                    None => Said::Cost(0),
                }
            }
            Settlement::CountWhen(_) => Said::Cost(0),
            // Charged by a call of its own, not by a response.
            Settlement::StreamDone => Said::Nothing,
        }
    }

    /// What the `trailers` of a response whose head said [`Said::AtEnd`] say the request
    /// cost (`None`: nothing, the charge stands).
    pub(crate) fn said_at_end(&self, trailers: &HeaderMap, charged: u64) -> Option<u64> {
        match self {
            Settlement::ResponseTrailer(name) => number(trailers, name),
            Settlement::CountWhen(statuses) => {
                grpc_status(trailers).map(|code| statuses.counts_grpc(code, charged))
            }
            Settlement::ResponseHeader(_) | Settlement::StreamDone => None,
        }
    }
}

/// The gRPC status code the `fields` of a response hold, if any.
fn grpc_status(fields: &HeaderMap) -> Option<u8> {
    fields
        .get("grpc-status")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether the response of these `headers` is a gRPC call's.
fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/grpc"))
}

/// The whole number the field `name` of `fields` holds, if any.
fn number(fields: &HeaderMap, name: &HeaderName) -> Option<u64> {
    fields.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// Statuses: HTTP codes and classes (`4xx`), and gRPC codes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusSet {
    codes: Vec<u16>,
    /// Bit `n` set: every `n`xx status.
    classes: u8,
    /// Bit `n` set: gRPC code `n`.
    grpc: u32,
}

/// The gRPC status codes' names, by code.
pub(crate) const GRPC_CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl StatusSet {
    /// Adds the status `code`.
    pub(crate) fn code(&mut self, code: u16) {
        self.codes.push(code);
    }

    /// Adds every status of the class `hundreds` (`5` for `5xx`).
    pub(crate) fn class(&mut self, hundreds: u8) {
        self.classes |= 1 << hundreds;
    }

    /// Adds the gRPC status `code` (below 17).
    pub(crate) fn grpc_code(&mut self, code: u8) {
        self.grpc |= 1 << code;
    }

    /// Whether the HTTP `status` is among these.
    pub fn matches(&self, status: StatusCode) -> bool {
        let code = status.as_u16();
        let hundreds = u32::from(code / 100);
        self.codes.contains(&code) || (hundreds < 8 && self.classes & (1 << hundreds) != 0)
    }

    /// Whether the gRPC status `code` is among these.
    pub fn matches_grpc(&self, code: u8) -> bool {
        u32::from(code) < u32::BITS && self.grpc & (1 << code) != 0
    }

    /// Whether any gRPC code is among these.
    fn has_grpc(&self) -> bool {
        self.grpc != 0
    }

    /// What a request charged `charged` counts, its call ended with gRPC status `code`.
    fn counts_grpc(&self, code: u8, charged: u64) -> u64 {
        if self.matches_grpc(code) {
            charged
        } else {
            0
        }
    }
}

impl fmt::Display for Settlement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Settlement::ResponseHeader(name) => write!(f, "settles from {name}"),
            Settlement::ResponseTrailer(name) => write!(f, "settles from trailer {name}"),
            Settlement::CountWhen(statuses) => write!(f, "counts {statuses}"),
            Settlement::StreamDone => f.write_str("charged whole when the stream is done"),
        }
    }
}

impl fmt::Display for StatusSet {
    /// The codes, the classes, then the gRPC codes, e.g. `401, 403, 5xx, UNAUTHENTICATED`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let classes = (1..8u8).filter(|hundreds| self.classes & (1 << hundreds) != 0);
        let codes = self.codes.iter().map(u16::to_string);
        let grpc = (0..GRPC_CODES.len()).filter(|&code| self.grpc & (1 << code) != 0);
        let all: Vec<String> = codes
            .chain(classes.map(|h| format!("{h}xx")))
            .chain(grpc.map(|code| GRPC_CODES[code].to_owned()))
            .collect();
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
        let head = |settlement: &Settlement, status, headers: &HeaderMap, said| {
            settlement.said_at_head(status, headers, said, 1)
        };
        assert_eq!(head(&tokens, ok, &headers, None), Said::Nothing);
        headers.insert("x-tokens-used", " 300 ".parse().unwrap());
        assert_eq!(head(&tokens, ok, &headers, None), Said::Cost(300));
        assert_eq!(head(&tokens, ok, &headers, Some(250)), Said::Cost(250));
        headers.insert("x-tokens-used", "lots".parse().unwrap());
        assert_eq!(head(&tokens, ok, &headers, None), Said::Nothing);

        let mut failures = StatusSet::default();
        failures.code(401);
        failures.class(5);
        let failed = Settlement::CountWhen(failures);
        let empty = HeaderMap::new();
        let counted = |status| head(&failed, status, &empty, None);
        assert_eq!(counted(StatusCode::UNAUTHORIZED), Said::Cost(1));
        assert_eq!(counted(StatusCode::BAD_GATEWAY), Said::Cost(1));
        assert_eq!(counted(StatusCode::FORBIDDEN), Said::Cost(0));
        assert_eq!(counted(ok), Said::Cost(0));
    }

    #[test]
    fn a_grpc_status_counts_from_the_head_or_the_trailers() {
        let mut statuses = StatusSet::default();
        statuses.code(503);
        statuses.grpc_code(16);
        assert_eq!(statuses.to_string(), "503, UNAUTHENTICATED");
        let failed = Settlement::CountWhen(statuses);
        let fields = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for &(name, value) in pairs {
                map.insert(name, value.parse().unwrap());
            }
            map
        };
        let ok = StatusCode::OK;
        let grpc = fields(&[("content-type", "application/grpc")]);
        let head = |status, headers: &HeaderMap| failed.said_at_head(status, headers, None, 1);
        assert_eq!(head(ok, &grpc), Said::AtEnd, "the status comes in trailers");
        assert_eq!(head(StatusCode::SERVICE_UNAVAILABLE, &grpc), Said::Cost(1));
        let only = fields(&[("content-type", "application/grpc"), ("grpc-status", "16")]);
        assert_eq!(head(ok, &only), Said::Cost(1), "Trailers-Only");
        let not_grpc = fields(&[("content-type", "text/plain")]);
        assert_eq!(head(ok, &not_grpc), Said::Cost(0));

        let end = |pairs| failed.said_at_end(&fields(pairs), 1);
        assert_eq!(end(&[("grpc-status", "16")]), Some(1));
        assert_eq!(end(&[("grpc-status", "0")]), Some(0));
        assert_eq!(end(&[]), None, "no status: the charge stands");
    }
}
