//! `tollgate serve --admin`, run as a user runs it: the binary on free ports, its admin
//! endpoints called over HTTP, in memory, on Redis and on a Redis Cluster.
#![cfg(feature = "server")]

mod common;
#[path = "../../tests/common/redis_server.rs"]
#[allow(dead_code)]
mod redis_server;

use common::{http_call, path, temp_file, tollgate, Served};
use serde_json::Value;
use tempfile::NamedTempFile;

/// 3 requests a minute per user, GCRA so that no test straddles the turn of a minute.
const RULES: &str = r"
domain: edge
defaults: { algorithm: gcra }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3, name: per-user }
";

/// The admin listener's arguments, on a free port.
const ADMIN: [&str; 2] = ["--admin", "127.0.0.1:0"];

/// A `tollgate serve` process on its own rules file, killed when dropped.
struct Service {
    served: Served,
    _rules: NamedTempFile,
}

impl Service {
    /// Starts `tollgate serve` on [`RULES`] with `extra` arguments, and waits until it is
    /// ready.
    fn start(extra: &[&str]) -> Service {
        let rules = temp_file(RULES, ".yaml");
        let served = Served::start(rules.path(), extra);
        Service {
            served,
            _rules: rules,
        }
    }

    /// Starts `tollgate serve` like [`Service::start`], but waits only until it listens.
    fn start_listening(extra: &[&str]) -> Service {
        let rules = temp_file(RULES, ".yaml");
        let served = Served::start_listening(rules.path(), extra);
        Service {
            served,
            _rules: rules,
        }
    }

    /// Its admin address.
    fn admin(&self) -> &str {
        self.served.admin.as_deref().expect("started with --admin")
    }

    /// `POST /json` for `user`: the status, and the answer.
    fn decide(&self, user: &str) -> (u16, Value) {
        let (status, body) = http_call(&self.served.http, "POST /json HTTP/1.1", &call(user));
        (status, parsed(&body))
    }

    /// `POST /v1/peek` for `user`: the answer, which must be `200`.
    fn peek(&self, user: &str) -> Value {
        let (status, body) = http_call(self.admin(), "POST /v1/peek HTTP/1.1", &call(user));
        assert_eq!(status, 200, "{body}");
        parsed(&body)
    }

    /// `POST /v1/reset` for `user`: the answer, which must be `200`.
    fn reset(&self, user: &str) -> Value {
        let (status, body) = http_call(self.admin(), "POST /v1/reset HTTP/1.1", &call(user));
        assert_eq!(status, 200, "{body}");
        parsed(&body)
    }

    /// The requests `GET /metrics` counts under the `per-user` limit, by outcome.
    fn requests_counted(&self) -> Vec<(String, u64)> {
        let (status, body) = http_call(&self.served.http, "GET /metrics HTTP/1.1", "");
        assert_eq!(status, 200, "{body}");
        let series = r#"tollgate_requests_total{domain="edge",limit="per-user",outcome=""#;
        let mut counted: Vec<(String, u64)> = body
            .lines()
            .filter_map(|line| {
                let (outcome, count) = line.strip_prefix(series)?.split_once("\"} ")?;
                Some((outcome.to_owned(), count.parse().ok()?))
            })
            .collect();
        counted.sort();
        counted
    }
}

/// A call of one descriptor, `user`, in proto3 JSON.
fn call(user: &str) -> String {
    format!(
        r#"{{"domain":"edge","descriptors":[{{"entries":[{{"key":"user","value":"{user}"}}]}}]}}"#
    )
}

fn parsed(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {body}"))
}

/// A protojson duration (`"19.5s"`) in seconds.
fn seconds(duration: &Value) -> f64 {
    let text = duration.as_str().expect("a duration");
    let number = text.strip_suffix('s').expect("in seconds");
    number.parse().expect("a number of seconds")
}

/// A descriptor's `limitRemaining`: left out when 0, as protojson leaves out defaults.
fn remaining(status: &Value) -> u64 {
    match &status["limitRemaining"] {
        Value::Null => 0,
        remaining => remaining.as_u64().expect("a count"),
    }
}

/// Exhausts a client through `POST /json`, peeks at it, resets it; another client stays
/// as it was, and peeking charges and counts nothing.
fn peek_shows_a_limited_client_and_reset_frees_it(service: &Service) {
    for left in [2, 1, 0] {
        let (status, answer) = service.decide("ann");
        assert_eq!((status, remaining(&answer["statuses"][0])), (200, left));
    }
    assert_eq!(service.decide("ann").0, 429, "ann is limited");
    assert_eq!(service.decide("bob").0, 200);

    let counted = service.requests_counted();
    for decided in [("allowed", 4), ("denied", 1)] {
        assert!(
            counted.contains(&(decided.0.to_owned(), decided.1)),
            "{counted:?}"
        );
    }
    let peeked = service.peek("ann");
    assert_eq!(peeked["overallCode"], "OVER_LIMIT", "{peeked}");
    let status = &peeked["statuses"][0];
    assert_eq!(status["code"], "OVER_LIMIT", "{peeked}");
    assert_eq!(status["limitRemaining"], Value::Null, "0 left: {peeked}");
    assert_eq!(status["currentLimit"]["requestsPerUnit"], 3, "{peeked}");
    assert_eq!(status["limit"], "per-user", "{peeked}");
    // One request every 20 s: the next is admitted within 20 s.
    let frees_up = seconds(&status["retryAfter"]);
    assert!(0.0 < frees_up && frees_up <= 20.0, "{peeked}");
    // The status says it in whole seconds, as envoyproxy/ratelimit does.
    assert_eq!(seconds(&status["durationUntilReset"]), frees_up.ceil());

    // Peeking charges nothing: a new client peeked twice still has its three.
    for _ in 0..2 {
        let fresh = service.peek("cy");
        assert_eq!(fresh["overallCode"], "OK", "{fresh}");
        assert_eq!(remaining(&fresh["statuses"][0]), 3, "{fresh}");
        assert_eq!(fresh["statuses"][0].get("retryAfter"), None, "{fresh}");
    }
    let first = service.decide("cy");
    assert_eq!(remaining(&first.1["statuses"][0]), 2, "{first:?}");
    let peeked_twice = [service.peek("bob"), service.peek("bob")];
    for bob in &peeked_twice {
        assert_eq!(
            (&bob["statuses"][0]["code"], remaining(&bob["statuses"][0])),
            (&Value::from("OK"), 2),
            "{bob}"
        );
    }
    // `cy`'s one call counts; the peeks do not.
    let mut expected = counted.clone();
    for (outcome, count) in &mut expected {
        *count += u64::from(outcome == "allowed");
    }
    assert_eq!(service.requests_counted(), expected, "before: {counted:?}");

    assert_eq!(service.reset("ann"), serde_json::json!({ "reset": 1 }));
    let (status, answer) = service.decide("ann");
    assert_eq!(status, 200, "ann is admitted again: {answer}");
    assert_eq!(remaining(&answer["statuses"][0]), 2, "as new: {answer}");
    let bob = service.peek("bob");
    assert_eq!(remaining(&bob["statuses"][0]), 2, "bob untouched: {bob}");
    assert_eq!(service.reset("nobody"), serde_json::json!({ "reset": 0 }));
}

#[test]
fn in_memory_peek_shows_a_limited_client_and_reset_frees_it() {
    peek_shows_a_limited_client_and_reset_frees_it(&Service::start(&ADMIN));
}

#[test]
fn on_redis_peek_shows_a_limited_client_and_reset_frees_it() {
    let redis = redis_server::RedisServer::start();
    let url = redis.url();
    let service = Service::start(&[&ADMIN[..], &["--redis", &url]].concat());
    peek_shows_a_limited_client_and_reset_frees_it(&service);
}

#[test]
fn on_a_redis_cluster_peek_shows_a_limited_client_and_reset_frees_it() {
    let cluster = redis_server::RedisCluster::start(3);
    let nodes = cluster.urls().join(",");
    let service = Service::start(&[&ADMIN[..], &["--redis-cluster", &nodes]].concat());
    peek_shows_a_limited_client_and_reset_frees_it(&service);
}

#[test]
fn admin_routes_are_only_on_the_admin_listener() {
    let without = Service::start(&[]);
    assert_eq!(without.served.admin, None, "no admin listener");
    let with = Service::start(&ADMIN);
    for service in [&without, &with] {
        for route in ["/v1/reset", "/v1/peek"] {
            let request = format!("POST {route} HTTP/1.1");
            let (status, body) = http_call(&service.served.http, &request, &call("ann"));
            assert_eq!(status, 404, "{route} on the public port: {body}");
        }
    }
    // And the admin listener serves nothing else.
    let (status, _) = http_call(with.admin(), "POST /json HTTP/1.1", &call("ann"));
    assert_eq!(status, 404);
    let (status, _) = http_call(with.admin(), "GET /v1/peek HTTP/1.1", "");
    assert_eq!(status, 405, "peek is a POST");
}

#[test]
fn admin_calls_are_refused_as_json_refuses_them() {
    let service = Service::start(&ADMIN);
    let refused = |route: &str, body: &str| {
        let request = format!("POST {route} HTTP/1.1");
        let admin = http_call(service.admin(), &request, body);
        let json = http_call(&service.served.http, "POST /json HTTP/1.1", body);
        assert_eq!(admin, json, "{route} {body}");
        admin
    };
    for route in ["/v1/peek", "/v1/reset"] {
        let (status, reason) = refused(route, "{not json");
        assert_eq!(status, 400);
        assert!(
            reason.starts_with("not a RateLimitRequest in JSON: "),
            "{reason}"
        );
        // Another domain: nothing to see or reset (`/json` answers it `OK`, nothing
        // limited, as envoyproxy/ratelimit does).
        let other = r#"{"domain":"other","descriptors":[{"entries":[{"key":"user"}]}]}"#;
        let request = format!("POST {route} HTTP/1.1");
        let (status, reason) = http_call(service.admin(), &request, other);
        assert_eq!(status, 404);
        assert!(reason.starts_with("unknown domain `other`"), "{reason}");
        let (status, reason) = refused(route, r#"{"domain":"edge"}"#);
        assert_eq!(
            (status, reason.as_str()),
            (400, "rate limit descriptor list must not be empty\n")
        );
    }
}

#[test]
fn a_store_that_cannot_answer_is_503_with_its_error() {
    let mut redis = redis_server::RedisServer::start();
    let url = redis.url();
    let service = Service::start(&[&ADMIN[..], &["--redis", &url]].concat());
    assert_eq!(service.reset("ann"), serde_json::json!({ "reset": 0 }));
    redis.kill();
    for (route, reason) in [
        ("/v1/peek", "the store could not answer: "),
        (
            "/v1/reset",
            "the store could not reset every key (some may be): ",
        ),
    ] {
        let request = format!("POST {route} HTTP/1.1");
        let (status, body) = http_call(service.admin(), &request, &call("ann"));
        assert_eq!(status, 503, "{route}: {body}");
        assert!(body.starts_with(reason), "{route}: {body}");
    }
}

#[test]
fn admin_calls_are_503_with_the_reason_until_the_service_is_ready() {
    // Nothing listens there: the service waits for Redis, and is never ready.
    let url = format!("redis://127.0.0.1:{}", redis_server::free_port());
    let service = Service::start_listening(&[&ADMIN[..], &["--redis", &url]].concat());
    for route in ["/v1/peek", "/v1/reset"] {
        let request = format!("POST {route} HTTP/1.1");
        let (status, reason) = http_call(service.admin(), &request, &call("ann"));
        assert_eq!(status, 503, "{route}: {reason}");
        assert!(reason.starts_with("starting: "), "{route}: {reason}");
    }
}

#[test]
fn a_busy_admin_address_is_an_error_at_start() {
    let rules = temp_file(RULES, ".yaml");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let busy = busy.local_addr().expect("its address").to_string();
    let ports = ["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"];
    let args = [
        &["serve", "--rules", path(&rules)][..],
        &ports,
        &["--admin", &busy],
    ]
    .concat();
    let (code, _, stderr) = tollgate(&args);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {busy} (admin)")),
        "{stderr}"
    );
}
