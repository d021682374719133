//! `tollgate serve`, run as a user runs it: the binary on free ports, called by a real gRPC
//! client generated from the same protos.
#![cfg(feature = "server")]

#[path = "common/calls.rs"]
mod calls;
mod common;
#[path = "../src/serve/proto.rs"]
mod proto;
#[path = "../../tests/common/redis_server.rs"]
#[allow(dead_code)]
mod redis_server;

use calls::{ask, descriptor};
use common::{http_call, path, temp_file, tollgate, Served};
use proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use proto::envoy::r#type::v3::RateLimitUnit;
use proto::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use proto::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use std::io::Write;
use std::time::{Duration, Instant};
use tempfile::NamedTempFile;
use tonic::transport::{Channel, Endpoint};
use tonic::Code as GrpcCode;

/// The seed example, an envoyproxy/ratelimit configuration as it is written for Envoy: 5
/// logins a minute per client address, a key-only limit per user, an unlimited internal
/// caller, a shadow-mode limit, and nested descriptors. GCRA rather than Envoy's fixed
/// windows, so that no test straddles the turn of a minute.
const RULES: &str = r"
domain: edge
defaults: { algorithm: gcra }
descriptors:
  - key: generic_key
    value: login
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 5, name: login }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3, name: per-user }
  - key: api_key
    value: internal
    rate_limit: { unlimited: true }
  - key: canary
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1, name: canary }
";

/// A `tollgate serve` process on its own rules file, killed when dropped.
struct Service {
    served: Served,
    _rules: NamedTempFile,
}

impl Service {
    /// Starts `tollgate serve` on `rules` with `extra` arguments, and waits until it listens.
    fn start(rules: &str, extra: &[&str]) -> Service {
        Service::start_on(common::temp_file(rules, ".yaml"), extra)
    }

    fn start_on(rules: NamedTempFile, extra: &[&str]) -> Service {
        let served = Served::start(rules.path(), extra);
        Service {
            served,
            _rules: rules,
        }
    }

    /// Starts `tollgate serve` on `rules` with `extra` arguments, and waits only until it
    /// listens: it may not be ready yet.
    fn start_listening(rules: &str, extra: &[&str]) -> Service {
        let rules = common::temp_file(rules, ".yaml");
        let served = Served::start_listening(rules.path(), extra);
        Service {
            served,
            _rules: rules,
        }
    }

    async fn client(&self) -> RateLimitServiceClient<Channel> {
        let channel = Endpoint::from_shared(format!("http://{}", self.served.grpc))
            .expect("an endpoint")
            .connect()
            .await
            .expect("connected");
        RateLimitServiceClient::new(channel)
    }
}

fn call(descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: "edge".to_owned(),
        descriptors,
        hits_addend: 0,
    }
}

/// How long a test waits for the service to reach a state it polls for.
const POLL_DEADLINE: Duration = Duration::from_secs(20);

/// Tries `attempt` every 50 ms until it succeeds, at most [`POLL_DEADLINE`]: what it gave.
/// A failed attempt says why, for the test's failure.
async fn poll<T>(mut attempt: impl AsyncFnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + POLL_DEADLINE;
    loop {
        match attempt().await {
            Ok(done) => return done,
            Err(not_yet) => assert!(
                Instant::now() < deadline,
                "after {POLL_DEADLINE:?}: {not_yet}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn login(ip: &str) -> RateLimitDescriptor {
    descriptor(&[("generic_key", "login"), ("remote_address", ip)])
}

#[tokio::test]
async fn five_logins_a_minute_per_address() {
    let service = Service::start(RULES, &[]);
    let mut client = service.client().await;
    for remaining in (0..5).rev() {
        let answer = ask(&mut client, call(vec![login("203.0.113.9")])).await;
        assert_eq!(answer.overall_code(), Code::Ok);
        let status = &answer.statuses[0];
        assert_eq!(status.code(), Code::Ok);
        assert_eq!(status.limit_remaining, remaining);
        let limit = status.current_limit.as_ref().expect("the limit");
        assert_eq!((limit.requests_per_unit, limit.unit()), (5, Unit::Minute));
        assert_eq!(limit.name, "login");
    }
    let refused = ask(&mut client, call(vec![login("203.0.113.9")])).await;
    assert_eq!(refused.overall_code(), Code::OverLimit);
    assert_eq!(refused.statuses[0].code(), Code::OverLimit);
    let reset = refused.statuses[0].duration_until_reset.expect("a reset");
    assert!((1..=60).contains(&reset.seconds), "{reset:?}");
    let headers: Vec<&str> = refused
        .response_headers_to_add
        .iter()
        .map(|header| header.key.as_str())
        .collect();
    assert!(headers.contains(&"retry-after"), "{headers:?}");
    // Another address has its own five.
    let other = ask(&mut client, call(vec![login("203.0.113.10")])).await;
    assert_eq!(other.overall_code(), Code::Ok);
}

#[tokio::test]
async fn only_the_entry_the_last_one_reaches_applies() {
    let service = Service::start(RULES, &[]);
    let mut client = service.client().await;
    // `generic_key: login` alone reaches an entry with no limit of its own.
    let answer = ask(
        &mut client,
        call(vec![descriptor(&[("generic_key", "login")])]),
    )
    .await;
    assert_eq!(answer.overall_code(), Code::Ok);
    assert_eq!(answer.statuses[0].current_limit, None);
    // A descriptor no rule matches is OK with no limit.
    let unknown = ask(&mut client, call(vec![descriptor(&[("tenant", "acme")])])).await;
    assert_eq!(unknown.statuses[0].code(), Code::Ok);
    assert_eq!(unknown.statuses[0].current_limit, None);
}

#[tokio::test]
async fn the_descriptors_of_one_call_are_all_or_nothing() {
    all_or_nothing(&Service::start(RULES, &[])).await;
    let redis = redis_server::RedisServer::start();
    all_or_nothing(&Service::start(RULES, &["--redis", &redis.url()])).await;
}

/// On `service`: a call over one limit charges none of the others, and each of their
/// statuses says what remains of it, as it stands (also when the refusal is answered from
/// the over-limit cache, without asking Redis again about the full key).
async fn all_or_nothing(service: &Service) {
    let mut client = service.client().await;
    let user = || descriptor(&[("user", "42")]);
    // Three calls spend user 42's three; each also logs in from its own address.
    for ip in ["198.51.100.1", "198.51.100.2", "198.51.100.3"] {
        let answer = ask(&mut client, call(vec![login(ip), user()])).await;
        assert_eq!(answer.overall_code(), Code::Ok);
    }
    // The fourth is over the user's limit: its login is not charged either.
    for _ in 0..2 {
        let refused = ask(&mut client, call(vec![login("198.51.100.4"), user()])).await;
        assert_eq!(refused.overall_code(), Code::OverLimit);
        assert_eq!(refused.statuses[0].code(), Code::Ok, "the login had room");
        assert_eq!(refused.statuses[0].limit_remaining, 5, "as it stands");
        assert!(refused.statuses[0].duration_until_reset.is_some());
        assert_eq!(refused.statuses[1].code(), Code::OverLimit);
        assert_eq!(refused.statuses[1].limit_remaining, 0);
    }
    let alone = ask(&mut client, call(vec![login("198.51.100.4")])).await;
    assert_eq!(
        alone.statuses[0].limit_remaining, 4,
        "the refused calls charged nothing"
    );
}

#[tokio::test]
async fn hits_addend_is_the_weight_of_a_call() {
    let service = Service::start(RULES, &[]);
    let mut client = service.client().await;
    let mut request = call(vec![login("203.0.113.20")]);
    request.hits_addend = 3;
    let answer = ask(&mut client, request.clone()).await;
    assert_eq!(answer.statuses[0].limit_remaining, 2);
    let refused = ask(&mut client, request).await;
    assert_eq!(refused.overall_code(), Code::OverLimit);
    // A descriptor's own `hits_addend` wins over the call's.
    let mut light = login("203.0.113.20");
    light.hits_addend = Some(2.into());
    let answer = ask(&mut client, call(vec![light])).await;
    assert_eq!(answer.overall_code(), Code::Ok);
    assert_eq!(answer.statuses[0].limit_remaining, 0);
    // A descriptor's `hits_addend: 0` checks without charging, as envoyproxy/ratelimit
    // does: a full limit is still `OK` (over only once its count is past it).
    let check = |ip: &str| {
        let mut descriptor = login(ip);
        descriptor.hits_addend = Some(0.into());
        call(vec![descriptor])
    };
    let full = ask(&mut client, check("203.0.113.20")).await;
    assert_eq!(full.overall_code(), Code::Ok);
    assert_eq!(full.statuses[0].limit_remaining, 0);
    for _ in 0..2 {
        let fresh = ask(&mut client, check("203.0.113.21")).await;
        assert_eq!(fresh.overall_code(), Code::Ok);
        assert_eq!(fresh.statuses[0].limit_remaining, 5, "nothing charged");
    }
}

/// Envoy's `apply_on_stream_done`: a check before each request (`hits_addend: 0`), then
/// the tokens it used charged once its stream is done. The guide's example: 1,000 tokens a
/// minute per user, answers of 300 tokens: the fourth's charge goes past the limit and is
/// kept (answered `OVER_LIMIT`, as envoyproxy/ratelimit answers it, though Envoy ignores
/// it), and the fifth request's check is refused.
#[tokio::test]
async fn a_check_then_a_charge_once_the_stream_is_done() {
    let rules = r"
domain: edge
defaults: { algorithm: gcra }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000, settle: { stream_done: true } }
";
    let service = Service::start(rules, &[]);
    let mut client = service.client().await;
    let user = |hits: u64| {
        let mut descriptor = descriptor(&[("user", "ann")]);
        descriptor.hits_addend = Some(hits.into());
        call(vec![descriptor])
    };
    for answer in 0..4 {
        let check = ask(&mut client, user(0)).await;
        assert_eq!(check.overall_code(), Code::Ok, "request {answer} checked");
        let charge = ask(&mut client, user(300)).await;
        let expected = if answer < 3 {
            Code::Ok
        } else {
            Code::OverLimit
        };
        assert_eq!(charge.overall_code(), expected, "answer {answer} charged");
    }
    let fifth = ask(&mut client, user(0)).await;
    assert_eq!(fifth.overall_code(), Code::OverLimit, "1,200 of 1,000 used");
    assert_eq!(fifth.statuses[0].limit_remaining, 0);
    let other = ask(&mut client, call(vec![descriptor(&[("user", "bob")])])).await;
    assert_eq!(other.overall_code(), Code::Ok, "each user's own tokens");
}

/// A descriptor of `entries` with its own limit, `requests_per_unit` per `unit`.
fn with_own_limit(
    entries: &[(&str, &str)],
    requests_per_unit: u32,
    unit: RateLimitUnit,
) -> RateLimitDescriptor {
    RateLimitDescriptor {
        limit: Some(RateLimitOverride {
            requests_per_unit,
            unit: unit.into(),
        }),
        ..descriptor(entries)
    }
}

#[tokio::test]
async fn a_descriptor_with_its_own_limit_is_limited_by_it() {
    let service = Service::start(RULES, &[]);
    let mut client = service.client().await;
    // No entry of the rules for tenants; `api_key: internal` is unlimited there.
    for entries in [[("tenant", "acme")], [("api_key", "internal")]] {
        let own = || call(vec![with_own_limit(&entries, 2, RateLimitUnit::Hour)]);
        for _ in 0..2 {
            assert_eq!(ask(&mut client, own()).await.overall_code(), Code::Ok);
        }
        let over = ask(&mut client, own()).await;
        assert_eq!(over.overall_code(), Code::OverLimit, "{entries:?}");
        let limit = over.statuses[0].current_limit.as_ref().expect("a limit");
        assert_eq!((limit.requests_per_unit, limit.unit()), (2, Unit::Hour));
    }
}

#[tokio::test]
async fn own_limits_in_redis_are_checked_and_raised_at_once() {
    let rules = "domain: edge\ndefaults: { algorithm: sliding_window_log }\ndescriptors: []\n";
    let redis = redis_server::RedisServer::start();
    let service = Service::start(rules, &["--redis", &redis.url()]);
    let mut client = service.client().await;
    let acme = [("tenant", "acme")];
    let own = |requests: u32| call(vec![with_own_limit(&acme, requests, RateLimitUnit::Hour)]);
    for _ in 0..2 {
        assert_eq!(ask(&mut client, own(2)).await.overall_code(), Code::Ok);
    }
    assert_eq!(
        ask(&mut client, own(2)).await.overall_code(),
        Code::OverLimit
    );
    // A larger quota is decided by Redis, not answered from the refusal remembered.
    assert_eq!(ask(&mut client, own(100)).await.overall_code(), Code::Ok);
    // A log Redis cannot keep is refused, rather than failing the call's other limits.
    let refused = client
        .should_rate_limit(own(5_000))
        .await
        .expect_err("too large a log for Redis");
    assert_eq!(refused.code(), GrpcCode::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("cannot be kept"), "{refused:?}");
}

#[tokio::test]
async fn unlimited_and_shadow_mode_never_refuse() {
    let service = Service::start(RULES, &[]);
    let mut client = service.client().await;
    for _ in 0..10 {
        let internal = ask(
            &mut client,
            call(vec![descriptor(&[("api_key", "internal")])]),
        )
        .await;
        assert_eq!(internal.overall_code(), Code::Ok);
        // As envoyproxy/ratelimit answers an unlimited descriptor: all that can be said
        // remains, and no limit, no reset.
        let status = &internal.statuses[0];
        assert_eq!(status.current_limit, None);
        assert_eq!(status.limit_remaining, u32::MAX);
        assert_eq!(status.duration_until_reset, None);
    }
    // The shadow-mode limit (1 a minute) counts: its second call has nothing left, and is
    // still OK.
    for remaining in [0, 0, 0] {
        let canary = ask(&mut client, call(vec![descriptor(&[("canary", "on")])])).await;
        assert_eq!(canary.overall_code(), Code::Ok, "shadow mode only reports");
        let status = &canary.statuses[0];
        assert_eq!(status.code(), Code::Ok);
        assert_eq!(
            status
                .current_limit
                .as_ref()
                .map(|limit| limit.name.as_str()),
            Some("canary")
        );
        assert_eq!(status.limit_remaining, remaining);
    }
}

#[tokio::test]
async fn wildcards_replaces_and_repeated_descriptors() {
    let rules = r"
domain: edge
defaults: { algorithm: gcra }
descriptors:
  - key: path
    value: /api/*
    rate_limit: { unit: minute, requests_per_unit: 2, name: api }
  - key: path
    value: /api/search
    rate_limit: { unit: minute, requests_per_unit: 1, name: search }
  - key: user
    value: vip
    rate_limit: { unit: minute, requests_per_unit: 100, name: vip, replaces: [{ name: per-user }] }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, name: per-user }
";
    let service = Service::start(rules, &[]);
    let mut client = service.client().await;
    let name = |answer: &RateLimitResponse, i: usize| {
        answer.statuses[i]
            .current_limit
            .as_ref()
            .map(|limit| limit.name.clone())
    };
    // An exact value wins over a prefix; a prefix matches the rest.
    let search = ask(
        &mut client,
        call(vec![descriptor(&[("path", "/api/search")])]),
    )
    .await;
    assert_eq!(name(&search, 0).as_deref(), Some("search"));
    let items = ask(
        &mut client,
        call(vec![descriptor(&[("path", "/api/items")])]),
    )
    .await;
    assert_eq!(name(&items, 0).as_deref(), Some("api"));
    // More entries than the rules have levels: no limit.
    let deeper = ask(
        &mut client,
        call(vec![descriptor(&[("path", "/api/items"), ("user", "x")])]),
    )
    .await;
    assert_eq!(name(&deeper, 0), None);
    // `vip` replaces `per-user` when both come in one call.
    let both = call(vec![
        descriptor(&[("user", "vip")]),
        descriptor(&[("user", "ann")]),
    ]);
    for _ in 0..3 {
        let answer = ask(&mut client, both.clone()).await;
        assert_eq!(answer.overall_code(), Code::Ok);
        assert_eq!(name(&answer, 1), None, "replaced");
    }
    // The same descriptor twice in one call weighs twice, and stays all or nothing: the
    // `api` limit (2) takes one such call, and refuses the next without charging it.
    let twice = call(vec![
        descriptor(&[("path", "/api/other")]),
        descriptor(&[("path", "/api/other")]),
    ]);
    assert_eq!(
        ask(&mut client, twice.clone()).await.overall_code(),
        Code::Ok
    );
    let refused = ask(&mut client, twice).await;
    assert_eq!(refused.overall_code(), Code::OverLimit);
    assert_eq!(refused.statuses[0].code(), refused.statuses[1].code());
}

#[tokio::test]
async fn an_envoy_file_as_it_is_counts_in_fixed_windows() {
    // No `defaults`, no `algorithm`: fixed windows, as envoyproxy/ratelimit counts. A day's
    // window, so that the test does not straddle two.
    let envoy = r"
domain: edge
descriptors:
  - key: generic_key
    value: login
    detailed_metric: true
    descriptors:
      - key: remote_address
        rate_limit: { unit: DAY, requests_per_unit: 2 }
";
    let service = Service::start(envoy, &[]);
    let mut client = service.client().await;
    let codes: Vec<Code> = {
        let mut codes = Vec::new();
        for _ in 0..3 {
            codes.push(
                ask(&mut client, call(vec![login("203.0.113.50")]))
                    .await
                    .overall_code(),
            );
        }
        codes
    };
    assert_eq!(codes, [Code::Ok, Code::Ok, Code::OverLimit]);
    let answer = ask(&mut client, call(vec![login("203.0.113.51")])).await;
    let limit = answer.statuses[0].current_limit.as_ref().expect("a limit");
    assert_eq!((limit.requests_per_unit, limit.unit()), (2, Unit::Day));
}

#[tokio::test]
async fn the_http_endpoints_answer_by_hand() {
    let service = Service::start(RULES, &[]);
    let http = &service.served.http;
    let (status, body) = http_call(http, "GET /healthcheck HTTP/1.1", "");
    assert_eq!((status, body.trim()), (200, "OK"));
    let login = r#"{"domain":"edge","descriptors":[{"entries":[{"key":"generic_key","value":"login"},{"key":"remote_address","value":"198.51.100.99"}]}],"hitsAddend":5}"#;
    let (status, body) = http_call(http, "POST /json HTTP/1.1", login);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""overallCode":"OK""#), "{body}");
    let (status, body) = http_call(http, "POST /json HTTP/1.1", login);
    assert_eq!(status, 429, "{body}");
    assert!(body.contains(r#""overallCode":"OVER_LIMIT""#), "{body}");
    let (status, _) = http_call(http, "POST /json HTTP/1.1", "{not json");
    assert_eq!(status, 400);
    let (status, body) = http_call(http, "GET /metrics HTTP/1.1", "");
    assert_eq!(status, 200);
    assert!(body.contains("tollgate_"), "{body}");
}

#[tokio::test]
async fn malformed_calls_get_a_clear_status() {
    let service = Service::start(RULES, &[]);
    let mut client = service.client().await;
    let mut cases = vec![
        (
            RateLimitRequest {
                domain: String::new(),
                ..call(vec![login("a")])
            },
            GrpcCode::InvalidArgument,
            "domain",
        ),
        (
            call(Vec::new()),
            GrpcCode::InvalidArgument,
            "rate limit descriptor list must not be empty",
        ),
    ];
    let huge = "x".repeat(1_000_000);
    cases.push((
        call(vec![descriptor(&[("user", &huge)])]),
        GrpcCode::InvalidArgument,
        "longer than",
    ));
    cases.push((
        call(vec![descriptor(&[("user", "1")]); 1000]),
        GrpcCode::InvalidArgument,
        "at most",
    ));
    cases.push((
        call(vec![with_own_limit(
            &[("tenant", "acme")],
            5,
            RateLimitUnit::Unknown,
        )]),
        GrpcCode::InvalidArgument,
        "limit override has no unit",
    ));
    for (request, code, message) in cases {
        let status = client
            .should_rate_limit(request)
            .await
            .expect_err("refused");
        assert_eq!(status.code(), code, "{status:?}");
        assert!(status.message().contains(message), "{status:?}");
    }
    // And the service still answers.
    let answer = ask(&mut client, call(vec![login("203.0.113.30")])).await;
    assert_eq!(answer.overall_code(), Code::Ok);
    // As envoyproxy/ratelimit: another domain, or a descriptor without entries, limits
    // nothing.
    let elsewhere = RateLimitRequest {
        domain: "elsewhere".to_owned(),
        ..call(vec![login("a"), descriptor(&[])])
    };
    for request in [elsewhere, call(vec![descriptor(&[])])] {
        let answer = ask(&mut client, request.clone()).await;
        assert_eq!(answer.overall_code(), Code::Ok, "{request:?}");
        for status in &answer.statuses {
            assert_eq!(status.code(), Code::Ok);
            assert_eq!(status.current_limit, None);
            assert_eq!(status.limit_remaining, 0);
            assert_eq!(status.duration_until_reset, None);
        }
        assert_eq!(answer.statuses.len(), request.descriptors.len());
    }
}

#[tokio::test]
async fn a_saved_change_to_the_rules_takes_effect() {
    let mut file = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("a temporary file");
    file.write_all(RULES.as_bytes()).expect("written");
    let path = file.path().to_owned();
    let service = Service::start_on(file, &[]);
    let mut client = service.client().await;
    let limit_of = |answer: &RateLimitResponse| {
        answer.statuses[0]
            .current_limit
            .as_ref()
            .map(|l| l.requests_per_unit)
    };
    let answer = ask(&mut client, call(vec![descriptor(&[("user", "7")])])).await;
    assert_eq!(limit_of(&answer), Some(3));
    std::fs::write(
        &path,
        RULES.replace("requests_per_unit: 3", "requests_per_unit: 30"),
    )
    .expect("rewritten");
    poll(async || {
        let answer = ask(&mut client, call(vec![descriptor(&[("user", "8")])])).await;
        match limit_of(&answer) {
            Some(30) => Ok(()),
            limit => Err(format!("the limit is still {limit:?}")),
        }
    })
    .await;
}

#[tokio::test]
async fn two_instances_share_their_limits_through_redis() {
    let redis = redis_server::RedisServer::start();
    let url = redis.url();
    let first = Service::start(RULES, &["--redis", &url]);
    let second = Service::start(RULES, &["--redis", &url]);
    let (mut one, mut two) = (first.client().await, second.client().await);
    let mut admitted = 0;
    for i in 0..10 {
        let client = if i % 2 == 0 { &mut one } else { &mut two };
        let answer = ask(client, call(vec![login("192.0.2.77")])).await;
        admitted += usize::from(answer.overall_code() == Code::Ok);
    }
    assert_eq!(admitted, 5, "five logins a minute, across both instances");
}

#[tokio::test]
async fn when_redis_fails_each_limit_s_policy_decides() {
    let rules = r"
domain: edge
defaults: { algorithm: gcra }
descriptors:
  - key: open
    rate_limit: { unit: minute, requests_per_unit: 100, on_store_error: allow }
  - key: closed
    rate_limit: { unit: minute, requests_per_unit: 100, on_store_error: deny }
  - key: local
    rate_limit: { unit: minute, requests_per_unit: 2, on_store_error: local }
";
    let mut redis = redis_server::RedisServer::start();
    let service = Service::start(rules, &["--redis", &redis.url()]);
    let mut client = service.client().await;
    let one = |key: &str| call(vec![descriptor(&[(key, "x")])]);
    assert_eq!(
        ask(&mut client, one("closed")).await.overall_code(),
        Code::Ok
    );
    redis.kill();
    // Every call is still answered: `allow` admits, `deny` refuses, `local` counts in the
    // service's own memory.
    assert_eq!(ask(&mut client, one("open")).await.overall_code(), Code::Ok);
    let closed = ask(&mut client, one("closed")).await;
    assert_eq!(closed.overall_code(), Code::OverLimit);
    assert_eq!(
        closed.statuses[0].code(),
        Code::OverLimit,
        "the status says which"
    );
    let local: Vec<Code> = {
        let mut codes = Vec::new();
        for _ in 0..3 {
            codes.push(ask(&mut client, one("local")).await.overall_code());
        }
        codes
    };
    assert_eq!(local, [Code::Ok, Code::Ok, Code::OverLimit]);
    let counted = ask(&mut client, one("local")).await;
    let limit = counted.statuses[0].current_limit.as_ref();
    assert_eq!(
        limit.map(|l| l.requests_per_unit),
        Some(2),
        "decided in memory"
    );
}

#[tokio::test]
async fn local_first_limits_stay_within_their_bound_across_two_instances() {
    // 10 a minute, decided in each instance's memory, agreed through Redis every 100 ms.
    let rules = r"
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 10, algorithm: gcra, sync_every: 100ms }
";
    let redis = redis_server::RedisServer::start();
    let first = Service::start(rules, &["--redis", &redis.url()]);
    let second = Service::start(rules, &["--redis", &redis.url()]);
    let (mut one, mut two) = (first.client().await, second.client().await);
    let user = || call(vec![descriptor(&[("user", "ann")])]);
    // The first instance spends the minute's 10; after a sync, the second knows.
    for _ in 0..10 {
        assert_eq!(ask(&mut one, user()).await.overall_code(), Code::Ok);
    }
    poll(async || match ask(&mut two, user()).await.overall_code() {
        Code::OverLimit => Ok(()),
        _ => Err("the second instance never learned the total".to_owned()),
    })
    .await;
}

#[tokio::test]
async fn a_redis_cluster_holds_a_call_all_or_nothing_across_slots() {
    let cluster = redis_server::RedisCluster::start(3);
    let nodes = cluster.urls().join(",");
    let service = Service::start(RULES, &["--redis-cluster", &nodes]);
    let mut client = service.client().await;
    // Users spread over the slots; each call also logs one address in.
    let users: Vec<String> = (0..6).map(|i| format!("user-{i}")).collect();
    for user in &users {
        for _ in 0..3 {
            let answer = ask(
                &mut client,
                call(vec![login("203.0.113.60"), descriptor(&[("user", user)])]),
            )
            .await;
            if answer.overall_code() == Code::OverLimit {
                break;
            }
        }
    }
    // The login (5) was charged only by admitted calls: 5 of them, whatever the users.
    let left = ask(&mut client, call(vec![login("203.0.113.60")])).await;
    assert_eq!(
        left.overall_code(),
        Code::OverLimit,
        "five logins were admitted"
    );
    let fresh = ask(&mut client, call(vec![descriptor(&[("user", "user-5")])])).await;
    // Its call now is its first charged one: 2 of its 3 are left.
    assert_eq!(
        fresh.statuses[0].limit_remaining, 2,
        "user-5 was refused with the login, uncharged"
    );
}

/// How long a service with no call in flight may take to exit after SIGTERM: well within
/// its grace period for calls in flight (10 s), and long enough for a busy machine.
const EXIT_DEADLINE: Duration = Duration::from_secs(5);

/// A login in proto3 JSON, for `POST /json`.
const LOGIN_JSON: &str = r#"{"domain":"edge","descriptors":[{"entries":[{"key":"generic_key","value":"login"},{"key":"remote_address","value":"198.51.100.98"}]}]}"#;

/// Asks `GET /healthcheck` on `http` until `wanted` holds for its status and body (see
/// [`poll`]): that status and body.
async fn poll_health(http: &str, wanted: impl Fn(u16, &str) -> bool) -> (u16, String) {
    poll(async || {
        let (status, body) = http_call(http, "GET /healthcheck HTTP/1.1", "");
        if wanted(status, &body) {
            Ok((status, body))
        } else {
            Err(format!("still {status} {body:?}"))
        }
    })
    .await
}

#[tokio::test]
async fn until_redis_answers_the_service_says_why_it_is_not_ready() {
    let port = redis_server::free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let service = Service::start_listening(RULES, &["--redis", &url]);
    let http = &service.served.http;
    // The rules load in a moment; then it waits for Redis, which is not there.
    let (status, reason) = poll_health(http, |_, body| body.contains("Redis")).await;
    assert_eq!(status, 503, "{reason}");
    assert!(
        reason.starts_with("starting: ") && reason.contains(&url),
        "{reason}"
    );
    let mut client = service.client().await;
    let refused = client
        .should_rate_limit(call(vec![login("203.0.113.70")]))
        .await
        .expect_err("not ready");
    assert_eq!(refused.code(), GrpcCode::Unavailable, "{refused:?}");
    assert!(refused.message().contains("Redis"), "{refused:?}");
    let (status, body) = http_call(http, "POST /json HTTP/1.1", LOGIN_JSON);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("Redis"), "{body}");
    let (status, _) = http_call(http, "GET /metrics HTTP/1.1", "");
    assert_eq!(
        status, 200,
        "metrics are served before the service is ready"
    );
    // Once Redis is up, the service connects by itself and decides.
    let _redis = redis_server::RedisServer::start_with(port, &[]);
    poll_health(http, |status, _| status == 200).await;
    let answer = ask(&mut client, call(vec![login("203.0.113.70")])).await;
    assert_eq!(answer.overall_code(), Code::Ok);
    let (status, body) = http_call(http, "POST /json HTTP/1.1", LOGIN_JSON);
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn sigterm_while_waiting_for_redis_stops_at_once_with_status_0() {
    let url = format!("redis://127.0.0.1:{}", redis_server::free_port());
    let mut service = Service::start_listening(RULES, &["--redis", &url]);
    let status = service.served.terminate(EXIT_DEADLINE);
    assert_eq!(status.code(), Some(0), "{status}");
}

// Several threads: the client's connection answers the service's goodbye (HTTP/2 GOAWAY)
// while the test waits, blocking, for the process to exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_0_and_syncs_local_first_counts_to_redis() {
    // 20 a minute, decided in memory and synced every minute: only the sync at the stop
    // can tell the next instance what the first admitted.
    let rules = r"
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 20, algorithm: gcra, sync_every: 60s }
";
    let redis = redis_server::RedisServer::start();
    let user = || call(vec![descriptor(&[("user", "ann")])]);
    let mut first = Service::start(rules, &["--redis", &redis.url()]);
    let mut client = first.client().await;
    for _ in 0..20 {
        assert_eq!(ask(&mut client, user()).await.overall_code(), Code::Ok);
    }
    // Its client's connection stays open: the service closes it once its calls are done.
    let status = first.served.terminate(EXIT_DEADLINE);
    assert_eq!(status.code(), Some(0), "{status}");
    // The next instance starts from the fleet's totals at its first sync (its first call
    // is decided alone): it admits a few at most, not another 20.
    let second = Service::start(rules, &["--redis", &redis.url()]);
    let mut client = second.client().await;
    let deadline = Instant::now() + POLL_DEADLINE;
    let mut admitted = 0;
    while ask(&mut client, user()).await.overall_code() == Code::Ok {
        admitted += 1;
        assert!(
            Instant::now() < deadline,
            "the second instance never learned the total"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        admitted <= 5,
        "{admitted} admitted after the first instance's 20"
    );
}

#[test]
fn bad_addresses_are_errors_before_anything_else() {
    let rules = temp_file(RULES, ".yaml");
    let serve = |http: &str, extra: &[&str]| {
        let ports = ["--grpc", "127.0.0.1:0", "--http", http];
        let args = [&["serve", "--rules", path(&rules)][..], &ports, extra].concat();
        tollgate(&args)
    };
    let (code, _, stderr) = serve("127.0.0.1:0", &["--redis", "localhost:6379"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("invalid Redis URL `localhost:6379`"),
        "{stderr}"
    );
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let busy = busy.local_addr().expect("its address").to_string();
    let (code, _, stderr) = serve(&busy, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cannot listen on"), "{stderr}");
}
