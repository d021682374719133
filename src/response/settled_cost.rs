//! [`SettledCost`]: what a handler says its request cost.

/// What a request turned out to cost, put in the response's extensions by the handler that
/// knows (an LLM gateway, the tokens of its answer): a limit with `settle` charges the request
/// this instead of its reservation, whatever its `response_header` says (see the
/// [rules reference](crate::guide::rules#settle-costs-known-after-the-response)).
///
/// ```
/// use tollgate::response::SettledCost;
///
/// let mut response = http::Response::new("an answer of 300 tokens");
/// response.extensions_mut().insert(SettledCost(300));
/// assert_eq!(response.extensions().get::<SettledCost>(), Some(&SettledCost(300)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettledCost(pub u64);
