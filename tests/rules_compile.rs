//! What valid rules compile to: the README and DESIGN.md examples, defaults, periods,
//! units, `unlimited`, a zero rate and every algorithm with its options.

use std::net::IpAddr;
use std::time::Duration;

use tollgate::algorithm::{Algorithm, Quota};
use tollgate::rules::{OnStoreError, Rate, Unit};

#[path = "common/rules.rs"]
mod rules_common;

use rules_common::*;

#[tokio::test]
async fn seed_example_admits_five_logins_per_minute() {
    let rules = compile(SEED);
    assert_eq!(rules.domain(), "auth");
    let [limit] = rules.limits() else {
        panic!("expected one limit, got {:#?}", rules.limits());
    };
    assert_eq!(limit.descriptor(), "auth_type=login");
    assert_eq!(limit.name(), None);
    assert_eq!(limit.label(), "auth_type=login");
    let quota = limit.quota().expect("the login limit has a quota");
    assert_eq!(quota.requests_per_period(), 5);
    assert_eq!(quota.period(), MINUTE);
    assert_eq!(quota.burst(), 5, "the burst defaults to the limit");
    assert_eq!(
        limit.rate(),
        Rate::Limited {
            quota,
            algorithm: Algorithm::FixedWindow
        },
        "fixed_window is the default algorithm"
    );
    assert!(!limit.is_shadow());
    assert_eq!(limit.on_store_error(), OnStoreError::Allow);
    assert!(limit.replaces().is_empty());

    let label = limit.label().to_owned();
    let (limiter, clock) = limiter(rules);
    let login = [("auth_type", "login")];
    let mut verdicts = Vec::new();
    for _ in 0..8 {
        verdicts.push(limiter.check(&login, 1).await);
    }
    let allowed: Vec<bool> = verdicts.iter().map(|v| v.is_allowed()).collect();
    assert_eq!(
        allowed,
        [true, true, true, true, true, false, false, false],
        "exactly the first 5 of 8 logins are admitted"
    );
    let denial = verdicts.last().expect("eight verdicts");
    assert_eq!(denial.limit(), Some(label.as_str()));
    let decision = denial.decision().expect("a denial reports its decision");
    assert_eq!(decision.capacity, 5);
    assert_eq!(decision.remaining, 0);
    assert_eq!(
        decision.retry_after, MINUTE,
        "the manual clock starts on a window boundary, so the window has a minute left"
    );

    let signup = limiter.check(&[("auth_type", "signup")], 1).await;
    assert!(signup.is_allowed(), "no entry matches another value");
    assert!(signup.decision().is_none());

    clock.advance(MINUTE);
    assert_eq!(
        admitted(&limiter, &login, 8).await,
        5,
        "a new window admits 5 again"
    );
}

#[tokio::test]
async fn design_example_compiles_to_five_limits() {
    let rules = compile(DESIGN);
    assert_eq!(rules.domain(), "demo");

    let limited = |limit, period, burst, algorithm| Rate::Limited {
        quota: Quota::new(limit, period).unwrap().with_burst(burst),
        algorithm,
    };
    let expected = [
        (
            "remote_address",
            limited(20, SECOND, 40, Algorithm::TokenBucket),
        ),
        (
            "endpoint=login/remote_address",
            limited(5, MINUTE, 5, Algorithm::FixedWindow),
        ),
        (
            "endpoint=posts/user_id",
            limited(1, SECOND, 1, Algorithm::TokenBucket),
        ),
        (
            "endpoint=friends/user_id",
            limited(150, DAY, 150, Algorithm::FixedWindow),
        ),
        ("api_key=internal-*", Rate::Unlimited),
    ];
    let actual: Vec<(&str, Rate)> = rules
        .limits()
        .iter()
        .map(|limit| (limit.descriptor(), limit.rate()))
        .collect();
    assert_eq!(actual, expected);
    for limit in rules.limits() {
        assert_eq!(limit.name(), None);
        assert_eq!(limit.label(), limit.descriptor());
        assert!(!limit.is_shadow());
        assert_eq!(limit.on_store_error(), OnStoreError::Allow);
        assert!(limit.replaces().is_empty());
    }
    assert_eq!(rules.limits()[4].quota(), None, "unlimited has no quota");
    assert!(!rules.response().ietf_headers && !rules.response().reset_header);

    // client_ip: forwarding headers count only from the trusted proxies; IPv6 by /64.
    let resolver = rules.client_ip();
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "x-forwarded-for",
        http::HeaderValue::from_static("203.0.113.9"),
    );
    let ip = |text: &str| text.parse::<IpAddr>().expect("an IP address");
    for proxy in ["127.0.0.1", "10.200.0.7"] {
        assert_eq!(
            resolver.resolve(ip(proxy), &headers).ip(),
            ip("203.0.113.9"),
            "{proxy} is trusted"
        );
    }
    assert_eq!(
        resolver.resolve(ip("192.0.2.1"), &headers).ip(),
        ip("192.0.2.1"),
        "192.0.2.1 is not trusted"
    );
    let v6 = resolver.resolve(ip("2001:db8::1:2:3:4"), &http::HeaderMap::new());
    assert_eq!(v6.prefix_len(), 64);
    assert_eq!(v6.ip(), ip("2001:db8::"));

    // The wildcard exempts internal keys from every limit; others get the burst of 40.
    let (limiter, _clock) = limiter(rules);
    let internal = [
        ("remote_address", "198.51.100.1"),
        ("api_key", "internal-ci"),
    ];
    let external = [("remote_address", "198.51.100.2"), ("api_key", "external")];
    assert_eq!(admitted(&limiter, &internal, 50).await, 50);
    assert_eq!(admitted(&limiter, &external, 50).await, 40);
}

#[test]
fn defaults_apply_to_limits_that_name_no_algorithm() {
    let rules = compile(
        r#"
domain: defaults
defaults: { algorithm: sliding_window_counter, on_store_error: deny }
response: { ietf_headers: true, reset_header: true }
descriptors:
  - key: method
    rate_limit: { unit: second, requests_per_unit: 3 }
  - key: path
    shadow_mode: true
    rate_limit: { name: by-path, unit: second, requests_per_unit: 3, algorithm: token_bucket }
"#,
    );
    let [by_method, by_path] = rules.limits() else {
        panic!("expected two limits, got {:#?}", rules.limits());
    };
    assert_eq!(by_method.algorithm(), Some(Algorithm::SlidingWindowCounter));
    assert_eq!(by_path.algorithm(), Some(Algorithm::TokenBucket));
    assert_eq!(by_method.on_store_error(), OnStoreError::Deny);
    assert_eq!(by_path.on_store_error(), OnStoreError::Deny);
    assert!(!by_method.is_shadow());
    assert!(by_path.is_shadow());
    assert_eq!(by_path.name(), Some("by-path"));
    assert_eq!(by_path.label(), "by-path");
    assert!(rules.response().ietf_headers && rules.response().reset_header);
}

#[test]
fn custom_periods_compile_to_their_duration() {
    let cases = [
        ("period: 30s", Duration::from_secs(30)),
        ("unit: second, unit_multiplier: 30", Duration::from_secs(30)),
        ("period: 500ms", Duration::from_millis(500)),
        ("period: 5m", Duration::from_secs(300)),
        ("period: 2h", Duration::from_secs(7_200)),
        ("period: 1d", DAY),
        ("unit: minute, unit_multiplier: 5", Duration::from_secs(300)),
        ("period: 36500d", Duration::from_secs(36_500 * 86_400)),
    ];
    for (fields, period) in cases {
        let rules = compile(&one_limit(&format!("{fields}, requests_per_unit: 7")));
        let quota = only_quota(&rules);
        assert_eq!(quota.period(), period, "`{fields}`");
        assert_eq!(quota.requests_per_period(), 7, "`{fields}`");
    }
}

#[test]
fn units_have_envoy_lengths() {
    let units = [
        ("second", Unit::Second, 1),
        ("minute", Unit::Minute, 60),
        ("hour", Unit::Hour, 3_600),
        ("day", Unit::Day, 86_400),
        ("week", Unit::Week, 604_800),
        ("month", Unit::Month, 2_592_000),
        ("year", Unit::Year, 31_536_000),
    ];
    for (name, unit, seconds) in units {
        assert_eq!(unit.seconds(), seconds, "{name}");
        let rules = compile(&one_limit(&format!("unit: {name}, requests_per_unit: 1")));
        assert_eq!(
            only_quota(&rules).period(),
            Duration::from_secs(seconds),
            "{name}"
        );
    }
}

#[tokio::test]
async fn unlimited_alone_exempts_matching_requests() {
    let rules = compile(
        r#"
domain: exempt
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: method
    value: OPTIONS
    rate_limit: { unlimited: true }
"#,
    );
    assert_eq!(rules.limits()[1].rate(), Rate::Unlimited);
    assert_eq!(rules.limits()[1].quota(), None);

    let (limiter, _clock) = limiter(rules);
    let preflight = [("remote_address", "198.51.100.1"), ("method", "OPTIONS")];
    let get = [("remote_address", "198.51.100.2"), ("method", "GET")];
    assert_eq!(admitted(&limiter, &preflight, 5).await, 5);
    assert_eq!(admitted(&limiter, &get, 5).await, 1);
}

#[tokio::test]
async fn zero_requests_per_unit_compiles_and_denies_everything() {
    let rules = compile(&one_limit("unit: minute, requests_per_unit: 0"));
    assert_eq!(only_quota(&rules).requests_per_period(), 0);
    let (limiter, _clock) = limiter(rules);
    assert_eq!(admitted(&limiter, &[("method", "GET")], 3).await, 0);

    let errors = reject(&one_limit(
        "unit: minute, requests_per_unit: 0, algorithm: token_bucket, burst: 0",
    ));
    assert_eq!(
        only_error(&errors).path(),
        "descriptors[0].rate_limit.burst"
    );
}

#[test]
fn every_algorithm_and_its_options_compile() {
    let limits = one_limit_per_path(&[
        "unit: second, requests_per_unit: 5, algorithm: token_bucket, burst: 10, cost: 2",
        "unit: second, requests_per_unit: 5, algorithm: leaky_bucket, queue: 10, max_delay: 2s",
        "unit: second, requests_per_unit: 5, algorithm: fixed_window",
        "unit: minute, requests_per_unit: 5, algorithm: sliding_window_log, cost: weight",
        "unit: minute, requests_per_unit: 5, algorithm: sliding_window_counter",
        "unit: minute, requests_per_unit: 5, algorithm: gcra, burst: 2",
        "unit: second, requests_per_unit: 5, algorithm: leaky_bucket, queue: 3, mode: police",
    ]);
    let rules = compile(&format!(
        "sources: {{ weight: {{ header: x-weight }} }}\n{limits}"
    ));
    let algorithms: Vec<Algorithm> = rules
        .limits()
        .iter()
        .filter_map(|l| l.algorithm())
        .collect();
    assert_eq!(algorithms[..6], Algorithm::ALL);
    let quota = |i: usize| rules.limits()[i].quota().expect("limited");
    assert_eq!(quota(0).burst(), 10);
    assert_eq!(quota(1).queue(), 10);
    assert_eq!(quota(1).max_delay(), Some(Duration::from_secs(2)));
    assert!(quota(1).is_shaping());
    assert_eq!(quota(5).burst(), 2);
    assert!(!quota(6).is_shaping());
}
