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
//! - `GET /healthcheck`: `200 OK` once the service is [ready](Readiness), `503` with the
//!   reason otherwise: `starting: loading the rules`, `starting: cannot connect to Redis at
//!   ...`, and `shutting down` once it is stopping, so that a load balancer sends it
//!   nothing more.
//! - `GET /metrics`: tollgate's metrics (see the guide's "Metrics") in Prometheus' text format.
//!
//! The endpoints answer from the start, before the rules are loaded and the store connected:
//! until the service is ready, `POST /json` answers `503` with the same reason as
//! `GET /healthcheck`, and `GET /metrics` answers as always.

use super::proto::envoy::config::core::v3::HeaderValue;
use super::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use super::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use super::proto::envoy::r#type::v3::RateLimitUnit;
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use super::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use super::readiness::Readiness;
use super::rls::should_rate_limit;
use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http::header::CONTENT_TYPE;
use http::StatusCode;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};
use std::future::ready;
use std::time::Duration;
use tollgate::store::Store;

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

/// The HTTP endpoints: `POST /json` deciding with the limiter of `readiness`, `GET
/// /healthcheck` telling whether it is ready and `GET /metrics` rendering `metrics`.
pub(crate) fn router<St: Store>(readiness: Readiness<St>, metrics: PrometheusHandle) -> Router {
    let deciding = readiness.clone();
    Router::new()
        .route(
            "/json",
            post(move |body: Bytes| decide(deciding.clone(), body)),
        )
        .route("/healthcheck", get(move || ready(healthcheck(&readiness))))
        .route("/metrics", get(move || ready(prometheus_text(&metrics))))
}

/// `POST /json`: decides the call in `body`, or answers `503` with the reason while the
/// service is not ready.
async fn decide<St: Store>(readiness: Readiness<St>, body: Bytes) -> Response {
    let limiter = match readiness.limiter() {
        Ok(limiter) => limiter,
        Err(reason) => return unavailable(&reason),
    };
    let request = match parse_request(&body) {
        Ok(request) => request,
        Err(error) => {
            let message = format!("not a RateLimitRequest in JSON: {error}\n");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    match should_rate_limit(limiter, &request).await {
        Ok(answer) => (
            answer_status(answer.overall_code),
            [(CONTENT_TYPE, "application/json")],
            response_json(&answer),
        )
            .into_response(),
        Err(status) => {
            let message = format!("{}\n", status.message());
            (error_status(status.code()), message).into_response()
        }
    }
}

/// `GET /healthcheck`: `OK`, or `503` with the reason while the service is not ready.
fn healthcheck<St: Store>(readiness: &Readiness<St>) -> Response {
    match readiness.health() {
        Ok(()) => "OK".into_response(),
        Err(reason) => unavailable(&reason),
    }
}

/// `503 Service Unavailable`, saying why.
fn unavailable(reason: &str) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response()
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

/// Reads a `RateLimitRequest` written in proto3 JSON, as protojson reads one: each field
/// under its JSON name (`hitsAddend`) or its proto name (`hits_addend`), missing or `null`
/// for its default, integers as numbers or strings, enums by name or number, and no
/// unknown fields.
fn parse_request(body: &[u8]) -> Result<RateLimitRequest, serde_json::Error> {
    serde_json::from_slice::<JsonRequest>(body).map(RateLimitRequest::from)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    #[serde(default)]
    domain: Option<String>,
    #[serde(default)]
    descriptors: Option<Vec<JsonDescriptor>>,
    #[serde(default, rename = "hitsAddend", alias = "hits_addend")]
    #[serde(deserialize_with = "integer")]
    hits_addend: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Option<Vec<JsonEntry>>,
    #[serde(default)]
    limit: Option<JsonOverride>,
    #[serde(default, rename = "hitsAddend", alias = "hits_addend")]
    #[serde(deserialize_with = "integer")]
    hits_addend: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEntry {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    value: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonOverride {
    #[serde(default, rename = "requestsPerUnit", alias = "requests_per_unit")]
    #[serde(deserialize_with = "integer")]
    requests_per_unit: Option<u32>,
    #[serde(default, deserialize_with = "unit")]
    unit: Option<i32>,
}

impl From<JsonRequest> for RateLimitRequest {
    fn from(request: JsonRequest) -> Self {
        let descriptors = request.descriptors.unwrap_or_default();
        RateLimitRequest {
            domain: request.domain.unwrap_or_default(),
            descriptors: descriptors.into_iter().map(Into::into).collect(),
            hits_addend: request.hits_addend.unwrap_or_default(),
        }
    }
}

impl From<JsonDescriptor> for RateLimitDescriptor {
    fn from(descriptor: JsonDescriptor) -> Self {
        let entries = descriptor.entries.unwrap_or_default();
        RateLimitDescriptor {
            entries: entries
                .into_iter()
                .map(|entry| Entry {
                    key: entry.key.unwrap_or_default(),
                    value: entry.value.unwrap_or_default(),
                })
                .collect(),
            limit: descriptor.limit.map(|limit| RateLimitOverride {
                requests_per_unit: limit.requests_per_unit.unwrap_or_default(),
                unit: limit.unit.unwrap_or_default(),
            }),
            hits_addend: descriptor.hits_addend,
        }
    }
}

/// An unsigned integer in proto3 JSON: a number or a string holding one (`2`, `"2"`, `2e0`);
/// `null` is none.
fn integer<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    let number = match Option::<Value>::deserialize(deserializer)? {
        None => return Ok(None),
        Some(Value::Number(number)) => Some(number),
        Some(Value::String(text)) => text.parse::<Number>().ok(),
        Some(_) => None,
    };
    number
        .as_ref()
        .and_then(unsigned)
        .and_then(|number| T::try_from(number).ok())
        .map(Some)
        .ok_or_else(|| D::Error::custom("expected an unsigned integer in range"))
}

/// `number` if it is a whole number that a `u64` holds.
fn unsigned(number: &Number) -> Option<u64> {
    number.as_u64().or_else(|| {
        let float = number.as_f64()?;
        let whole = float.fract() == 0.0 && (0.0..2f64.powi(64)).contains(&float);
        whole.then_some(float as u64)
    })
}

/// A `RateLimitUnit` in proto3 JSON: its name (`"MINUTE"`) or its number; `null` is none.
fn unit<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i32>, D::Error> {
    let unit = match Option::<Value>::deserialize(deserializer)? {
        None => return Ok(None),
        Some(Value::String(name)) => RateLimitUnit::from_str_name(&name).map(i32::from),
        Some(Value::Number(number)) => number.as_i64().and_then(|n| i32::try_from(n).ok()),
        Some(_) => None,
    };
    unit.map(Some)
        .ok_or_else(|| D::Error::custom("expected a unit: SECOND, MINUTE, HOUR, DAY, ..."))
}

/// Writes `response` in proto3 JSON as protojson writes it: fields in the order the proto
/// declares them, named in lowerCamelCase, default values left out, enums by name, 32-bit
/// integers as numbers and durations as `"53s"` or `"0.500s"`.
///
/// Only the fields tollgate's service sets are written: the response's `raw_body`,
/// `dynamic_metadata` and `quota`, a status' `quota` and a header's `raw_value` are never
/// set.
fn response_json(response: &RateLimitResponse) -> String {
    let json = JsonResponse {
        overall_code: enum_value(response.overall_code, |code: Code| code.as_str_name()),
        statuses: response.statuses.iter().map(JsonStatus::from).collect(),
        response_headers_to_add: headers(&response.response_headers_to_add),
        request_headers_to_add: headers(&response.request_headers_to_add),
    };
    serde_json::to_string(&json).expect("plain data serializes")
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonResponse<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    overall_code: Option<EnumValue>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    statuses: Vec<JsonStatus<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    response_headers_to_add: Vec<JsonHeader<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    request_headers_to_add: Vec<JsonHeader<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonStatus<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<EnumValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    current_limit: Option<JsonRateLimit<'a>>,
    #[serde(skip_serializing_if = "is_zero")]
    limit_remaining: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_until_reset: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonRateLimit<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    requests_per_unit: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    unit: Option<EnumValue>,
}

#[derive(Serialize)]
struct JsonHeader<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    key: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    value: &'a str,
}

/// An enum value in proto3 JSON: its name, or its number when the proto does not name it.
#[derive(Serialize)]
#[serde(untagged)]
enum EnumValue {
    Name(&'static str),
    Number(i32),
}

impl<'a> From<&'a DescriptorStatus> for JsonStatus<'a> {
    fn from(status: &'a DescriptorStatus) -> Self {
        JsonStatus {
            code: enum_value(status.code, |code: Code| code.as_str_name()),
            current_limit: status.current_limit.as_ref().map(JsonRateLimit::from),
            limit_remaining: status.limit_remaining,
            duration_until_reset: status.duration_until_reset.as_ref().map(duration_text),
        }
    }
}

impl<'a> From<&'a RateLimit> for JsonRateLimit<'a> {
    fn from(limit: &'a RateLimit) -> Self {
        JsonRateLimit {
            name: &limit.name,
            requests_per_unit: limit.requests_per_unit,
            unit: enum_value(limit.unit, |unit: Unit| unit.as_str_name()),
        }
    }
}

fn headers(headers: &[HeaderValue]) -> Vec<JsonHeader<'_>> {
    headers.iter().map(JsonHeader::from).collect()
}

impl<'a> From<&'a HeaderValue> for JsonHeader<'a> {
    fn from(header: &'a HeaderValue) -> Self {
        JsonHeader {
            key: &header.key,
            value: &header.value,
        }
    }
}

/// The value of an enum field numbered `number`, named by `name`; `None` for the default, 0.
fn enum_value<E: TryFrom<i32>>(number: i32, name: fn(E) -> &'static str) -> Option<EnumValue> {
    (number != 0).then(|| {
        E::try_from(number).map_or(EnumValue::Number(number), |known| {
            EnumValue::Name(name(known))
        })
    })
}

/// Whether a field is left out: proto3 JSON does not write zeros.
fn is_zero(number: &u32) -> bool {
    *number == 0
}

/// A `Duration` in proto3 JSON: seconds with 0, 3, 6 or 9 decimals and an `s`.
fn duration_text(duration: &prost_types::Duration) -> String {
    let sign = if duration.seconds < 0 || duration.nanos < 0 {
        "-"
    } else {
        ""
    };
    let seconds = duration.seconds.unsigned_abs();
    let nanos = duration.nanos.unsigned_abs();
    match nanos {
        0 => format!("{sign}{seconds}s"),
        _ if nanos % 1_000_000 == 0 => format!("{sign}{seconds}.{:03}s", nanos / 1_000_000),
        _ if nanos % 1_000 == 0 => format!("{sign}{seconds}.{:06}s", nanos / 1_000),
        _ => format!("{sign}{seconds}.{nanos:09}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http::Request;
    use tollgate::rules::{KeySources, Rules};
    use tollgate::store::MemoryStore;
    use tollgate::Limiter;
    use tower_service::Service as _;

    fn entry(key: &str, value: &str) -> Entry {
        Entry {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }

    #[test]
    fn a_request_reads_as_envoyproxy_ratelimit_writes_it() {
        let body = r#"{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address",
            "value": "203.0.113.9"}], "hits_addend": 2}], "hits_addend": 1}"#;
        let request = parse_request(body.as_bytes()).unwrap();
        assert_eq!(
            request,
            RateLimitRequest {
                domain: "edge".to_owned(),
                descriptors: vec![RateLimitDescriptor {
                    entries: vec![entry("remote_address", "203.0.113.9")],
                    limit: None,
                    hits_addend: Some(2),
                }],
                hits_addend: 1,
            }
        );
    }

    #[test]
    fn a_request_reads_camel_case_strings_and_nulls_as_protojson_does() {
        let body = r#"{"domain": "edge", "hitsAddend": "3", "descriptors": [
            {"entries": [{"key": "perday"}], "hitsAddend": null,
             "limit": {"requestsPerUnit": 1e1, "unit": "HOUR"}},
            {"entries": [{"key": "user", "value": null}], "hits_addend": "0",
             "limit": {"requests_per_unit": "7", "unit": 4}}]}"#;
        let request = parse_request(body.as_bytes()).unwrap();
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
        assert_eq!(second.hits_addend, Some(0));
        let daily = RateLimitOverride {
            requests_per_unit: 7,
            unit: RateLimitUnit::Day.into(),
        };
        assert_eq!(second.limit, Some(daily));
        assert_eq!(parse_request(b"{}").unwrap(), RateLimitRequest::default());
    }

    #[test]
    fn a_malformed_request_is_refused_with_its_reason() {
        let refused = |body: &str| parse_request(body.as_bytes()).unwrap_err().to_string();
        assert!(refused(r#"{"domain": "edge", "colour": 1}"#).contains("unknown field `colour`"));
        let both = r#"{"hits_addend": 1, "hitsAddend": 1}"#;
        assert!(refused(both).contains("duplicate field `hitsAddend`"));
        for hits in [r#"-1"#, r#"1.5"#, r#""x""#, r#""4294967296""#, r#"true"#] {
            let body = format!(r#"{{"hits_addend": {hits}}}"#);
            assert!(
                refused(&body).contains("expected an unsigned integer"),
                "{body}"
            );
        }
        let unit = r#"{"descriptors": [{"limit": {"unit": "FORTNIGHT"}}]}"#;
        assert!(refused(unit).contains("expected a unit"));
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
            duration_until_reset: Some(prost_types::Duration {
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
            response_json(&answer),
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
                unit: 9,
            }),
            limit_remaining: 4,
            duration_until_reset: Some(prost_types::Duration {
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
            response_json(&answer),
            r#"{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"login","requestsPerUnit":5,"unit":9},"limitRemaining":4,"durationUntilReset":"0.500s"}],"responseHeadersToAdd":[{"key":"x-ratelimit-limit","value":"5"}]}"#
        );
        assert_eq!(response_json(&RateLimitResponse::default()), "{}");
    }

    #[test]
    fn durations_have_0_3_6_or_9_decimals() {
        let text = |seconds, nanos| duration_text(&prost_types::Duration { seconds, nanos });
        assert_eq!(text(0, 0), "0s");
        assert_eq!(text(60, 10_000_000), "60.010s");
        assert_eq!(text(1, 1_000), "1.000001s");
        assert_eq!(text(1, 1), "1.000000001s");
        assert_eq!(text(-1, -500_000_000), "-1.500s");
        assert_eq!(text(0, -1_000), "-0.000001s");
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

    /// A limiter of one limit, 1 request a minute per `user`.
    fn limiter() -> Limiter<MemoryStore> {
        let yaml = "
domain: edge
defaults: { algorithm: gcra }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, name: per-user }
";
        let rules = Rules::from_yaml_with(yaml, KeySources::Given).unwrap();
        Limiter::with_store(rules, MemoryStore::new())
    }

    /// The endpoints of a service in the phase `readiness` tells.
    fn endpoints(readiness: &Readiness<MemoryStore>) -> Router {
        let metrics = PrometheusBuilder::new().build_recorder().handle();
        router(readiness.clone(), metrics)
    }

    /// The endpoints of a ready service, over [`limiter`].
    fn ready_endpoints() -> Router {
        let readiness = Readiness::starting("loading the rules");
        readiness.set_ready(limiter());
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
        let (status, _, message) = call(&mut router, post_json(other)).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(message.starts_with("unknown domain `other`"), "{message}");
        let empty = r#"{"domain": "edge"}"#;
        let (status, _, message) = call(&mut router, post_json(empty)).await;
        assert_eq!(
            (status, message.as_str()),
            (StatusCode::BAD_REQUEST, "the call has no descriptors\n")
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
        readiness.set_ready(limiter());
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
