//! The HTTP endpoints of `tollgate serve`, as envoyproxy/ratelimit serves them:
//!
//! - `POST /json`: one `ShouldRateLimit` call in proto3 JSON, for clients that cannot speak
//!   gRPC and for testing by hand. The answer is `200 OK`, or `429 Too Many Requests` when
//!   the call is over the limit, with the `RateLimitResponse` as JSON:
//!
//!   ```text
//!   $ curl -d '{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "ann"}]}]}' \
//!       localhost:8080/json
//!   {"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"per-user",
//!   "requestsPerUnit":3,"unit":"MINUTE"},"limitRemaining":2,"durationUntilReset":"20s"}],...}
//!   ```
//!
//!   A body that is not such a request is `400`; a call the service refuses is `400` (a
//!   malformed call), `404` (a domain it does not limit) or `500`, with the reason as text.
//!
//!   The JSON is the serde impls that `pbjson-build` generates with the messages (see
//!   `serve::proto`): protojson's mapping, as envoyproxy/ratelimit's `/json` has it, with names
//!   written in lowerCamelCase and read in either case, defaults left out, enums by name and
//!   unknown fields refused. Unlike protojson, pbjson refuses `null` for a field that is not a
//!   message (protojson: the default), integers written `1e1` or `1.0`, and enum numbers
//!   that the proto does not name, which it cannot write either (a `500`; never set here).
//! - `GET /healthcheck`: `200 OK` once the service is [ready](Readiness), `503` with the
//!   reason otherwise: `starting: loading the rules`, `starting: cannot connect to Redis at
//!   ...`, and `shutting down` once it is stopping, so that a load balancer sends it
//!   nothing more.
//! - `GET /metrics`: tollgate's metrics (see the guide's "Metrics") in Prometheus' text format.
//!
//! The endpoints answer from the start, before the rules are loaded and the store connected:
//! until the service is ready, `POST /json` answers `503` with the same reason as
//! `GET /healthcheck`, and `GET /metrics` answers as always.

use super::domains::Domains;
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use super::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use super::readiness::Readiness;
use super::rls::{should_rate_limit, Answering};
use super::store::Backing;
use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http::header::CONTENT_TYPE;
use http::StatusCode;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde::Serialize;
use std::future::ready;
use std::time::Duration;
use tonic::Status;

/// How often the Prometheus recorder folds its histogram samples into summaries, so that
/// they do not pile up between scrapes (the exporter's own listener does it every 5 s).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Installs the Prometheus recorder of `GET /metrics`, and the task that keeps it up.
///
/// Call it before building the [`Limiter`]: a limiter registers its metrics when it is built
/// and when its rules are reloaded, and a recorder installed later sees none of them until
/// the next reload.
///
/// # Errors
///
/// When a recorder is already installed.
///
/// # Panics
///
/// Outside a Tokio runtime.
pub(crate) fn install_metrics() -> Result<PrometheusHandle, String> {
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .map_err(|error| format!("cannot record metrics: {error}"))?;
    let kept = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP_EVERY);
        loop {
            every.tick().await;
            kept.run_upkeep();
        }
    });
    Ok(handle)
}

/// The HTTP endpoints: `POST /json` deciding with the limiter of `readiness` (answering as
/// `answering` says), `GET /healthcheck` telling whether it is ready and `GET /metrics`
/// rendering `metrics`.
pub(crate) fn router<St: Backing>(
    readiness: Readiness<St>,
    metrics: PrometheusHandle,
    answering: Answering,
) -> Router {
    let deciding = readiness.clone();
    Router::new()
        .route(
            "/json",
            post(move |body: Bytes| decide(deciding.clone(), body, answering.clone())),
        )
        .route("/healthcheck", get(move || ready(healthcheck(&readiness))))
        .route("/metrics", get(move || ready(prometheus_text(&metrics))))
}

/// `POST /json`: decides the call in `body`, or answers `503` with the reason while the
/// service is not ready.
async fn decide<St: Backing>(
    readiness: Readiness<St>,
    body: Bytes,
    answering: Answering,
) -> Response {
    let (domains, request) = match domains_and_call(&readiness, &body) {
        Ok(ready) => ready,
        Err(refusal) => return refusal.into_response(),
    };
    match should_rate_limit(domains, &request, &answering).await {
        Ok(answer) => answer_json(&answer),
        Err(status) => refused(&status).into_response(),
    }
}

/// A call refused: its HTTP status, and the reason as text.
pub(crate) type Refusal = (StatusCode, String);

/// For an endpoint that takes a `RateLimitRequest` in JSON: the domains of `readiness` and
/// the call in `body`; else `503` with the reason while the service is not ready, and
/// `400` with the reason for a body that is not such a request.
pub(crate) fn domains_and_call<'r, St: Backing>(
    readiness: &'r Readiness<St>,
    body: &[u8],
) -> Result<(&'r Domains<St>, RateLimitRequest), Refusal> {
    let domains = readiness.domains().map_err(|reason| unavailable(&reason))?;
    let request = serde_json::from_slice::<RateLimitRequest>(body).map_err(|error| {
        let message = format!("not a RateLimitRequest in JSON: {error}\n");
        (StatusCode::BAD_REQUEST, message)
    })?;
    Ok((domains, request))
}

/// The refusal of a call the service refused with `status`: its HTTP status, and its
/// message.
pub(crate) fn refused(status: &Status) -> Refusal {
    let message = format!("{}\n", status.message());
    (error_status(status.code()), message)
}

/// `answer` in proto3 JSON, with the HTTP status of its overall code.
fn answer_json(answer: &RateLimitResponse) -> Response {
    json(answer_status(answer.overall_code), answer)
}

/// `value` in JSON, with `status`.
pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_string(value) {
        Ok(json) => (status, [(CONTENT_TYPE, "application/json")], json).into_response(),
        // Only for an enum value that the proto does not name, which the service never sets.
        Err(error) => {
            let message = format!("cannot write the answer in JSON: {error}\n");
            (StatusCode::INTERNAL_SERVER_ERROR, message).into_response()
        }
    }
}

/// `GET /healthcheck`: `OK`, or `503` with the reason while the service is not ready.
fn healthcheck<St: Backing>(readiness: &Readiness<St>) -> Response {
    match readiness.health() {
        Ok(()) => "OK".into_response(),
        Err(reason) => unavailable(&reason).into_response(),
    }
}

/// `503 Service Unavailable`, saying why.
pub(crate) fn unavailable(reason: &str) -> Refusal {
    (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n"))
}

/// `GET /metrics`: the metrics in Prometheus' text exposition format.
fn prometheus_text(metrics: &PrometheusHandle) -> Response {
    let content_type = "text/plain; version=0.0.4; charset=utf-8";
    ([(CONTENT_TYPE, content_type)], metrics.render()).into_response()
}

/// The HTTP status of an answer, as envoyproxy/ratelimit's `/json` gives it: `429` over the
/// limit, `500` for an `UNKNOWN` overall code.
fn answer_status(overall_code: i32) -> StatusCode {
    match Code::try_from(overall_code) {
        Ok(Code::Ok) => StatusCode::OK,
        Ok(Code::OverLimit) => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The HTTP status of a call the service refused with `code`.
fn error_status(code: tonic::Code) -> StatusCode {
    match code {
        tonic::Code::InvalidArgument => StatusCode::BAD_REQUEST,
        tonic::Code::NotFound => StatusCode::NOT_FOUND,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::proto::envoy::config::core::v3::HeaderValue;
    use crate::serve::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
        Entry, RateLimitOverride,
    };
    use crate::serve::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
    use crate::serve::proto::envoy::r#type::v3::RateLimitUnit;
    use crate::serve::proto::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
    use crate::serve::proto::envoy::service::ratelimit::v3::rate_limit_response::{
        DescriptorStatus, RateLimit,
    };
    use crate::serve::rules_source::Loaded;
    use axum::body::Body;
    use http::Request;
    use tollgate::rules::{KeySources, Rules};
    use tollgate::store::MemoryStore;
    use tower_service::Service as _;

    fn entry(key: &str, value: &str) -> Entry {
        Entry {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }

    /// `body` read as `POST /json` reads it.
    fn read(body: &str) -> Result<RateLimitRequest, serde_json::Error> {
        serde_json::from_slice(body.as_bytes())
    }

    #[test]
    fn a_request_reads_as_envoyproxy_ratelimit_writes_it() {
        let body = r#"{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address",
            "value": "203.0.113.9"}], "hits_addend": 2}], "hits_addend": 1}"#;
        assert_eq!(
            read(body).unwrap(),
            RateLimitRequest {
                domain: "edge".to_owned(),
                descriptors: vec![RateLimitDescriptor {
                    entries: vec![entry("remote_address", "203.0.113.9")],
                    limit: None,
                    hits_addend: Some(2.into()),
                }],
                hits_addend: 1,
            }
        );
    }

    #[test]
    fn a_request_reads_both_names_and_integers_in_strings_as_protojson_does() {
        let body = r#"{"domain": "edge", "hitsAddend": "3", "descriptors": [
            {"entries": [{"key": "perday"}], "hitsAddend": null,
             "limit": {"requestsPerUnit": 10, "unit": "HOUR"}},
            {"entries": [{"key": "user"}], "hits_addend": "0",
             "limit": {"requests_per_unit": "7", "unit": 4}}]}"#;
        let request = read(body).unwrap();
        assert_eq!(request.hits_addend, 3);
        let [first, second] = &request.descriptors[..] else {
            panic!("two descriptors: {request:?}");
        };
        assert_eq!(first.entries, [entry("perday", "")]);
        assert_eq!(first.hits_addend, None);
        let hourly = RateLimitOverride {
            requests_per_unit: 10,
            unit: RateLimitUnit::Hour.into(),
        };
        assert_eq!(first.limit, Some(hourly));
        assert_eq!(second.entries, [entry("user", "")]);
        assert_eq!(second.hits_addend, Some(0.into()));
        let daily = RateLimitOverride {
            requests_per_unit: 7,
            unit: RateLimitUnit::Day.into(),
        };
        assert_eq!(second.limit, Some(daily));
        assert_eq!(read("{}").unwrap(), RateLimitRequest::default());
    }

    #[test]
    fn nulls_exponents_and_unnamed_enum_numbers_are_refused_unlike_protojson() {
        for body in [
            r#"{"domain": null}"#,
            r#"{"descriptors": [{"entries": [{"key": "user", "value": null}]}]}"#,
            r#"{"hits_addend": 1e1}"#,
            r#"{"hits_addend": 1.0}"#,
            r#"{"descriptors": [{"limit": {"unit": 9}}]}"#,
        ] {
            assert!(read(body).is_err(), "{body}");
        }
    }

    #[test]
    fn a_malformed_request_is_refused_with_its_reason() {
        let refused = |body: &str| read(body).unwrap_err().to_string();
        assert!(refused(r#"{"domain": "edge", "colour": 1}"#).contains("unknown field `colour`"));
        let both = r#"{"hits_addend": 1, "hitsAddend": 1}"#;
        assert!(refused(both).contains("duplicate field `hitsAddend`"));
        for hits in [r#"-1"#, r#"1.5"#, r#""x""#, r#""4294967296""#, r#"true"#] {
            let body = format!(r#"{{"hits_addend": {hits}}}"#);
            assert!(read(&body).is_err(), "{body}");
        }
        let unit = r#"{"descriptors": [{"limit": {"unit": "FORTNIGHT"}}]}"#;
        assert!(refused(unit).contains("unknown variant `FORTNIGHT`"));
        assert!(refused("").contains("EOF"));
        assert!(refused(r#"{"domain": 5}"#).contains("invalid type"));
    }

    #[test]
    fn an_answer_is_written_as_protojson_writes_it() {
        let over = DescriptorStatus {
            code: Code::OverLimit.into(),
            current_limit: Some(RateLimit {
                name: String::new(),
                requests_per_unit: 5,
                unit: Unit::Minute.into(),
            }),
            limit_remaining: 0,
            duration_until_reset: Some(pbjson_types::Duration {
                seconds: 53,
                nanos: 0,
            }),
            ..DescriptorStatus::default()
        };
        let unlimited = DescriptorStatus {
            code: Code::Ok.into(),
            ..DescriptorStatus::default()
        };
        let answer = RateLimitResponse {
            overall_code: Code::OverLimit.into(),
            statuses: vec![over, unlimited],
            ..RateLimitResponse::default()
        };
        assert_eq!(
            serde_json::to_string(&answer).unwrap(),
            r#"{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":5,"unit":"MINUTE"},"durationUntilReset":"53s"},{"code":"OK"}]}"#
        );
    }

    #[test]
    fn an_answer_names_its_limits_and_writes_its_headers() {
        let status = DescriptorStatus {
            code: Code::Ok.into(),
            current_limit: Some(RateLimit {
                name: "login".to_owned(),
                requests_per_unit: 5,
                unit: Unit::Hour.into(),
            }),
            limit_remaining: 4,
            duration_until_reset: Some(pbjson_types::Duration {
                seconds: 0,
                nanos: 500_000_000,
            }),
            ..DescriptorStatus::default()
        };
        let header = HeaderValue {
            key: "x-ratelimit-limit".to_owned(),
            value: "5".to_owned(),
            ..HeaderValue::default()
        };
        let answer = RateLimitResponse {
            overall_code: Code::Ok.into(),
            statuses: vec![status],
            response_headers_to_add: vec![header],
            ..RateLimitResponse::default()
        };
        assert_eq!(
            serde_json::to_string(&answer).unwrap(),
            r#"{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"login","requestsPerUnit":5,"unit":"HOUR"},"limitRemaining":4,"durationUntilReset":"0.500s"}],"responseHeadersToAdd":[{"key":"x-ratelimit-limit","value":"5"}]}"#
        );
        assert_eq!(
            serde_json::to_string(&RateLimitResponse::default()).unwrap(),
            "{}"
        );
    }

    #[test]
    fn an_answer_with_an_unnamed_enum_number_is_a_500_unlike_protojson() {
        let status = DescriptorStatus {
            current_limit: Some(RateLimit {
                unit: 9,
                ..RateLimit::default()
            }),
            ..DescriptorStatus::default()
        };
        let answer = RateLimitResponse {
            overall_code: Code::Ok.into(),
            statuses: vec![status],
            ..RateLimitResponse::default()
        };
        let response = answer_json(&answer);
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn durations_have_0_3_6_or_9_decimals() {
        let text = |seconds, nanos| {
            serde_json::to_string(&pbjson_types::Duration { seconds, nanos }).unwrap()
        };
        assert_eq!(text(0, 0), r#""0s""#);
        assert_eq!(text(60, 10_000_000), r#""60.010s""#);
        assert_eq!(text(1, 1_000), r#""1.000001s""#);
        assert_eq!(text(1, 1), r#""1.000000001s""#);
        assert_eq!(text(-1, -500_000_000), r#""-1.500s""#);
        assert_eq!(text(0, -1_000), r#""-0.000001s""#);
    }

    #[test]
    fn statuses_follow_envoyproxy_ratelimit() {
        assert_eq!(answer_status(Code::Ok.into()), StatusCode::OK);
        assert_eq!(
            answer_status(Code::OverLimit.into()),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(
            answer_status(Code::Unknown.into()),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            error_status(tonic::Code::InvalidArgument),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(error_status(tonic::Code::NotFound), StatusCode::NOT_FOUND);
        assert_eq!(
            error_status(tonic::Code::Unavailable),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }

    /// What `router` answers to `request`: status, content type, body.
    async fn call(router: &mut Router, request: Request<Body>) -> (StatusCode, String, String) {
        let response = router.call(request).await.unwrap();
        let status = response.status();
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let content_type =
            content_type.map_or(String::new(), |value| value.to_str().unwrap().to_owned());
        (
            status,
            content_type,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    /// One domain, `edge`, of one limit, 1 request a minute per `user`.
    fn domains() -> Domains<MemoryStore> {
        let yaml = "
domain: edge
defaults: { algorithm: gcra }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, name: per-user }
";
        let rules = Rules::from_yaml_with(yaml, KeySources::Given).unwrap();
        let loaded = Loaded {
            compiled: vec![("edge.yaml".into(), rules)],
            failed: Vec::new(),
        };
        Domains::new(loaded, MemoryStore::new, false)
    }

    /// The endpoints of a service in the phase `readiness` tells.
    fn endpoints(readiness: &Readiness<MemoryStore>) -> Router {
        let metrics = PrometheusBuilder::new().build_recorder().handle();
        router(readiness.clone(), metrics, Answering::default())
    }

    /// The endpoints of a ready service, over [`domains`].
    fn ready_endpoints() -> Router {
        let readiness = Readiness::starting("loading the rules");
        readiness.set_ready(domains());
        endpoints(&readiness)
    }

    fn post_json(body: &str) -> Request<Body> {
        let request = Request::post("/json");
        request.body(Body::from(body.to_owned())).unwrap()
    }

    #[tokio::test]
    async fn json_answers_200_then_429_over_the_limit() {
        let mut router = ready_endpoints();
        let body = r#"{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "ann"}]}]}"#;
        let (status, content_type, allowed) = call(&mut router, post_json(body)).await;
        assert_eq!(
            (status, content_type.as_str()),
            (StatusCode::OK, "application/json")
        );
        assert!(
            allowed.starts_with(r#"{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"per-user","requestsPerUnit":1,"unit":"MINUTE"},"durationUntilReset":""#),
            "{allowed}"
        );
        let (status, _, denied) = call(&mut router, post_json(body)).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert!(
            denied.starts_with(r#"{"overallCode":"OVER_LIMIT","#),
            "{denied}"
        );
    }

    #[tokio::test]
    async fn json_refuses_malformed_bodies_and_calls_with_their_reason() {
        let mut router = ready_endpoints();
        let (status, _, message) = call(&mut router, post_json("{")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            message.starts_with("not a RateLimitRequest in JSON: "),
            "{message}"
        );
        let other = r#"{"domain": "other", "descriptors": [{"entries": [{"key": "user"}]}]}"#;
        let (status, _, answer) = call(&mut router, post_json(other)).await;
        assert_eq!(status, StatusCode::OK, "another domain limits nothing");
        assert!(answer.starts_with(r#"{"overallCode":"OK","#), "{answer}");
        let empty = r#"{"domain": "edge"}"#;
        let (status, _, message) = call(&mut router, post_json(empty)).await;
        assert_eq!(
            (status, message.as_str()),
            (
                StatusCode::BAD_REQUEST,
                "rate limit descriptor list must not be empty\n"
            )
        );
    }

    #[tokio::test]
    async fn healthcheck_and_json_are_503_with_the_reason_until_ready() {
        let readiness = Readiness::starting("loading the rules");
        let mut router = endpoints(&readiness);
        let probe = || Request::get("/healthcheck").body(Body::empty()).unwrap();
        let call_body = r#"{"domain": "edge", "descriptors": [{"entries": [{"key": "user"}]}]}"#;
        let starting = (
            StatusCode::SERVICE_UNAVAILABLE,
            "starting: loading the rules\n",
        );
        let (status, _, body) = call(&mut router, probe()).await;
        assert_eq!((status, body.as_str()), starting);
        let (status, _, body) = call(&mut router, post_json(call_body)).await;
        assert_eq!((status, body.as_str()), starting);
        readiness.set_ready(domains());
        let (status, _, body) = call(&mut router, probe()).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "OK"));
        let (status, _, _) = call(&mut router, post_json(call_body)).await;
        assert_eq!(status, StatusCode::OK);
        readiness.set_stopping();
        let (status, _, body) = call(&mut router, probe()).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
        );
    }

    #[tokio::test]
    async fn metrics_are_prometheus_text() {
        // Before the service is ready, too.
        let mut router = endpoints(&Readiness::starting("loading the rules"));
        let scrape = Request::get("/metrics").body(Body::empty()).unwrap();
        let (status, content_type, _) = call(&mut router, scrape).await;
        assert_eq!(status, StatusCode::OK);
        assert!(content_type.starts_with("text/plain; version=0.0.4"));
    }
}
