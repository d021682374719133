//! What a limit learns from a response: what the request cost (`settle`), or whether it
//! counts at all (`count_when`).

use http::{HeaderMap, HeaderName, StatusCode};

/// How a limit settles a request it charged, once the response is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settlement {
    /// The request costs what this response header says (a whole number); without one, it
    /// keeps the cost it was charged.
    ResponseHeader(HeaderName),
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
                None => headers.get(name)?.to_str().ok()?.trim().parse().ok(),
            },
            Settlement::CountWhen(statuses) => {
                Some(if statuses.matches(status) { charged } else { 0 })
            }
        }
    }
}

/// Statuses: codes, and classes (`4xx`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct StatusSet {
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
    pub(crate) fn matches(&self, status: StatusCode) -> bool {
        let code = status.as_u16();
        let hundreds = u32::from(code / 100);
        self.codes.contains(&code) || (hundreds < 8 && self.classes & (1 << hundreds) != 0)
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
