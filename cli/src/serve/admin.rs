//! The admin endpoints of `tollgate serve`, on a listener of their own (`--admin ADDR`,
//! off without it): support's "why is this client limited?" and "reset them".
//!
//! Both take the body of `POST /json`, a `RateLimitRequest` in proto3 JSON (its
//! `hitsAddend`s are not used), checked as `POST /json` checks it:
//!
//! - `POST /v1/peek`: what each descriptor's limit would answer a call of weight 1 now,
//!   charging nothing and counting nothing in metrics. `200 OK`, over the limit or not, with
//!   the overall code and one status per descriptor, each written as `POST /json` writes it
//!   and followed by what support needs besides: `limit`, the limit's label (its name, else
//!   its descriptor path); `shadow: true` for a limit that only reports; `retryAfter`, when
//!   the call would be refused, the time until it would be admitted.
//!
//!   ```text
//!   {"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"name":
//!   "per-user","requestsPerUnit":3,"unit":"MINUTE"},"durationUntilReset":"19.2s",
//!   "limit":"per-user","retryAfter":"19.2s"}]}
//!   ```
//!
//! - `POST /v1/reset`: forgets the state of the limit each descriptor reaches, as if the
//!   client had never been seen: `200 OK` with `{"reset":N}`, the keys that held state.
//!
//! They refuse what `POST /json` refuses, with the same status and reason: `503` until the
//! service is ready, `400` for a body that is not a `RateLimitRequest` or a malformed call,
//! `404` for another domain. A store that cannot answer is `503`, with its error; a reset
//! it failed may have forgotten some keys and not others.

use super::http::{domains_and_call, json, refused, unavailable, Refusal};
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use super::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use super::readiness::Readiness;
use super::rls::{duration, limiter_for, statuses, CallEntries};
use super::store::Backing;
use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use http::StatusCode;
use serde::Serialize;
use tollgate::envoy::{CallVerdict, Descriptor};
use tollgate::{LimitDecision, Limiter};

/// The admin endpoints, `POST /v1/peek` and `POST /v1/reset`, on the limiter of
/// `readiness`.
pub(crate) fn router<St: Backing>(readiness: Readiness<St>) -> Router {
    let resetting = readiness.clone();
    Router::new()
        .route(
            "/v1/peek",
            post(move |body: Bytes| peek(readiness.clone(), body)),
        )
        .route(
            "/v1/reset",
            post(move |body: Bytes| reset(resetting.clone(), body)),
        )
}

/// `POST /v1/peek`: what the descriptors of the call in `body` would get now.
async fn peek<St: Backing>(readiness: Readiness<St>, body: Bytes) -> Response {
    let (limiter, request) = match checked_call(&readiness, &body) {
        Ok(call) => call,
        Err(refusal) => return refusal.into_response(),
    };
    let entries = CallEntries::new(&request);
    let descriptors = entries.descriptors();
    match limiter.peek_descriptors(&descriptors).await {
        Ok(peeked) => json(StatusCode::OK, &Peek::new(&peeked, &descriptors)),
        Err(error) => unavailable(&format!("the store could not answer: {error}")).into_response(),
    }
}

/// `POST /v1/reset`: forgets the state of the descriptors of the call in `body`.
async fn reset<St: Backing>(readiness: Readiness<St>, body: Bytes) -> Response {
    let (limiter, request) = match checked_call(&readiness, &body) {
        Ok(call) => call,
        Err(refusal) => return refusal.into_response(),
    };
    let entries = CallEntries::new(&request);
    match limiter.reset_descriptors(&entries.descriptors()).await {
        Ok(reset) => json(StatusCode::OK, &Reset { reset }),
        Err(error) => unavailable(&format!(
            "the store could not reset every key (some may be): {error}"
        ))
        .into_response(),
    }
}

/// The limiter of the domain of the call in `body`, and the call, checked as `POST /json`
/// checks it; else why it is refused, as `POST /json` refuses it, or `404` for a domain
/// the service does not limit.
fn checked_call<St: Backing>(
    readiness: &Readiness<St>,
    body: &[u8],
) -> Result<(Limiter<St>, RateLimitRequest), Refusal> {
    let (domains, request) = domains_and_call(readiness, body)?;
    let limiter = limiter_for(domains, &request).map_err(|status| refused(&status))?;
    Ok((limiter, request))
}

/// `POST /v1/peek`'s answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Peek {
    /// `OVER_LIMIT` when a status is, else `OK`.
    overall_code: Code,
    /// One per descriptor, in the call's order.
    statuses: Vec<PeekedStatus>,
}

/// A descriptor's status, as `POST /json` writes it, and what support needs besides.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PeekedStatus {
    /// What `POST /json` would answer for the descriptor.
    #[serde(flatten)]
    status: DescriptorStatus,
    /// The label of the limit the descriptor reaches (its name, else its descriptor
    /// path), when it reaches one.
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<String>,
    /// Whether that limit only counts and reports (shadow mode): left out when not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    shadow: bool,
    /// When a call would be refused (or, in shadow mode, would be if the limit were
    /// enforced): the time until it would be admitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<pbjson_types::Duration>,
}

impl Peek {
    /// The answer for `descriptors`, which `peeked` decided.
    fn new(peeked: &CallVerdict, descriptors: &[Descriptor<'_>]) -> Peek {
        let decisions = peeked.descriptors();
        let statuses: Vec<PeekedStatus> = statuses(peeked, descriptors)
            .into_iter()
            .zip(decisions)
            .map(|(status, decision)| PeekedStatus {
                status,
                limit: decision.as_ref().map(|limit| limit.limit().to_owned()),
                shadow: decision.as_ref().is_some_and(LimitDecision::is_shadow),
                retry_after: decision
                    .as_ref()
                    .map(LimitDecision::decision)
                    .filter(|decided| !decided.allowed)
                    .map(|refused| duration(refused.retry_after)),
            })
            .collect();
        let over = statuses
            .iter()
            .any(|peeked| peeked.status.code() == Code::OverLimit);
        Peek {
            overall_code: if over { Code::OverLimit } else { Code::Ok },
            statuses,
        }
    }
}

/// `POST /v1/reset`'s answer.
#[derive(Debug, Serialize)]
struct Reset {
    /// How many keys held state.
    reset: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate::clock::ManualClock;
    use tollgate::rules::{KeySources, Rules};
    use tollgate::store::MemoryStore;

    /// A limiter of 2 requests a minute per user, one a minute in shadow mode per canary,
    /// on a clock that only moves when told.
    fn limiter() -> Limiter<MemoryStore<ManualClock>> {
        let yaml = "
domain: edge
defaults: { algorithm: gcra }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2, name: per-user }
  - key: canary
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
";
        let rules = Rules::from_yaml_with(yaml, KeySources::Given).unwrap();
        Limiter::with_store(rules, MemoryStore::with_clock(ManualClock::new()))
    }

    /// The peek answer for `descriptors` on `limiter`, in JSON.
    async fn peeked(
        limiter: &Limiter<MemoryStore<ManualClock>>,
        descriptors: &[Descriptor<'_>],
    ) -> String {
        let peeked = limiter.peek_descriptors(descriptors).await.unwrap();
        serde_json::to_string(&Peek::new(&peeked, descriptors)).unwrap()
    }

    fn one<'a>(entries: &'a [(&'a str, &'a str)]) -> Descriptor<'a> {
        Descriptor {
            entries,
            cost: 1,
            limit: None,
        }
    }

    #[tokio::test]
    async fn a_peek_is_the_json_status_with_the_limit_and_when_a_call_is_admitted() {
        let limiter = limiter();
        let ann = [("user", "ann")];
        let other = [("tenant", "acme")];
        for _ in 0..2 {
            let call = [one(&ann)];
            assert!(limiter
                .check_descriptors(&call)
                .await
                .verdict()
                .is_allowed());
        }
        let call = [one(&ann), one(&other)];
        assert_eq!(
            peeked(&limiter, &call).await,
            r#"{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"name":"per-user","requestsPerUnit":2,"unit":"MINUTE"},"durationUntilReset":"30s","limit":"per-user","retryAfter":"30s"},{"code":"OK"}]}"#
        );
    }

    #[tokio::test]
    async fn a_shadow_limit_is_ok_and_says_it_would_refuse() {
        let limiter = limiter();
        let canary = [("canary", "on")];
        let call = [one(&canary)];
        assert!(limiter
            .check_descriptors(&call)
            .await
            .verdict()
            .is_allowed());
        assert_eq!(
            peeked(&limiter, &call).await,
            r#"{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":1,"unit":"MINUTE"},"durationUntilReset":"60s","limit":"canary","shadow":true,"retryAfter":"60s"}]}"#
        );
    }

    #[tokio::test]
    async fn a_client_with_room_has_no_retry_after() {
        let limiter = limiter();
        let bob = [("user", "bob")];
        let call = [one(&bob)];
        assert!(limiter
            .check_descriptors(&call)
            .await
            .verdict()
            .is_allowed());
        let answer = peeked(&limiter, &call).await;
        assert_eq!(
            answer,
            r#"{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"per-user","requestsPerUnit":2,"unit":"MINUTE"},"limitRemaining":1,"durationUntilReset":"30s","limit":"per-user"}]}"#
        );
    }
}
