//! Rules built in Rust: the same rules as a file, every option, and mistakes reported with
//! their path (there are no lines without a file).

use std::time::Duration;

use tollgate::algorithm::{Algorithm, Quota};
use tollgate::rules::{
    DescriptorSpec, HeaderSet, LimitSpec, OnStoreError, Rate, Rules, SourceSpec, Unit,
};

#[path = "common/rules.rs"]
mod rules_common;

use rules_common::*;

#[test]
fn builder_compiles_the_design_example() {
    let built = Rules::builder("demo")
        .source("user_id", SourceSpec::header("x-user-id"))
        .source("api_key", SourceSpec::header("x-api-key"))
        .source(
            "endpoint",
            SourceSpec::classifier([
                ("login", Some("POST"), Some("/auth/login")),
                ("posts", Some("POST"), Some("/posts")),
                ("friends", Some("POST"), Some("/users/*/friends")),
            ]),
        )
        .trusted_proxy("127.0.0.1/32")
        .trusted_proxy("10.0.0.0/8")
        .ipv6_prefix(64)
        .default_algorithm(Algorithm::SlidingWindowCounter)
        .on_store_error(OnStoreError::Allow)
        .descriptor(
            DescriptorSpec::key("remote_address").rate_limit(
                LimitSpec::per(20, Unit::Second)
                    .algorithm(Algorithm::TokenBucket)
                    .burst(40),
            ),
        )
        .descriptor(
            DescriptorSpec::key("endpoint").value("login").nested(
                DescriptorSpec::key("remote_address")
                    .rate_limit(LimitSpec::per(5, Unit::Minute).algorithm(Algorithm::FixedWindow)),
            ),
        )
        .descriptor(
            DescriptorSpec::key("endpoint").value("posts").nested(
                DescriptorSpec::key("user_id")
                    .rate_limit(LimitSpec::per(1, Unit::Second).algorithm(Algorithm::TokenBucket)),
            ),
        )
        .descriptor(
            DescriptorSpec::key("endpoint").value("friends").nested(
                DescriptorSpec::key("user_id")
                    .rate_limit(LimitSpec::per(150, Unit::Day).algorithm(Algorithm::FixedWindow)),
            ),
        )
        .descriptor(
            DescriptorSpec::key("api_key")
                .value("internal-*")
                .rate_limit(LimitSpec::unlimited()),
        )
        .build()
        .unwrap_or_else(|errors| panic!("the built rules should compile, but:\n{errors}"));
    assert_eq!(built.domain(), "demo");
    assert_eq!(summary(&built), summary(&compile(DESIGN)));
}

#[tokio::test]
async fn builder_supports_every_option() {
    let rules = Rules::builder("everything")
        .source("tenant", SourceSpec::query("tenant"))
        .source("user", SourceSpec::identity())
        .source("plan", SourceSpec::header("X-Plan"))
        .default_algorithm(Algorithm::TokenBucket)
        .on_store_error(OnStoreError::Deny)
        .headers(HeaderSet::Both)
        .reset_header(true)
        .descriptor(
            DescriptorSpec::key("remote_address")
                .rate_limit(LimitSpec::per(2, Unit::Minute).name("general")),
        )
        .descriptor(
            DescriptorSpec::key("plan").value("pro").rate_limit(
                LimitSpec::per(10, Unit::Minute)
                    .name("pro")
                    .replaces("general"),
            ),
        )
        .descriptor(
            DescriptorSpec::key("tenant").nested(
                DescriptorSpec::key("user")
                    .shadow_mode(true)
                    .rate_limit(LimitSpec::every(3, Duration::from_millis(1_500))),
            ),
        )
        .descriptor(
            DescriptorSpec::key("method").rate_limit(
                LimitSpec::per(100, Unit::Hour)
                    .unit_multiplier(2)
                    .algorithm(Algorithm::FixedWindow),
            ),
        )
        .build()
        .unwrap_or_else(|errors| panic!("the built rules should compile, but:\n{errors}"));

    let [general, pro, per_user, per_method] = rules.limits() else {
        panic!("expected four limits, got {:#?}", rules.limits());
    };
    assert_eq!(general.label(), "general");
    assert_eq!(pro.replaces(), ["general"]);
    assert_eq!(per_user.descriptor(), "tenant/user");
    assert!(per_user.is_shadow());
    assert_eq!(
        per_user.rate(),
        Rate::Limited {
            quota: Quota::new(3, Duration::from_millis(1_500)).unwrap(),
            algorithm: Algorithm::TokenBucket
        }
    );
    assert_eq!(
        per_method.rate(),
        Rate::Limited {
            quota: Quota::new(100, Duration::from_secs(7_200)).unwrap(),
            algorithm: Algorithm::FixedWindow
        }
    );
    assert!(rules
        .limits()
        .iter()
        .all(|limit| limit.on_store_error() == OnStoreError::Deny));
    assert!(rules.response().ietf_headers && rules.response().reset_header);

    // `replaces`: on a pro request, "pro" applies instead of "general".
    let (limiter, _clock) = limiter(rules);
    let plain = [("remote_address", "198.51.100.1")];
    let pro_request = [("remote_address", "198.51.100.2"), ("plan", "pro")];
    assert_eq!(admitted(&limiter, &plain, 5).await, 2);
    assert_eq!(admitted(&limiter, &pro_request, 12).await, 10);
}

#[test]
fn builder_mistakes_are_reported_with_a_path_and_no_line() {
    use DescriptorSpec as D;
    use LimitSpec as L;

    let errors = Rules::builder(" ")
        .source("method", SourceSpec::header("x-method"))
        .source("bad", SourceSpec::header("not a header"))
        .source("blank", SourceSpec::query(""))
        .source("nothing", SourceSpec::classifier([]))
        .source(
            "verb",
            SourceSpec::classifier([("x", Some("NOT A METHOD"), Some("no-slash"))]),
        )
        .trusted_proxy("not-an-address")
        .ipv6_prefix(0)
        .descriptor(D::key("nobody_declared_this"))
        .descriptor(D::key("method").rate_limit(L::per(5, Unit::Minute).burst(10)))
        .descriptor(D::key("path").rate_limit(L::per(5, Unit::Minute).unit_multiplier(0)))
        .descriptor(D::key("host").rate_limit(L::every(1, Duration::ZERO)))
        // A wildcard in the middle of a value is fine, as in envoyproxy/ratelimit.
        .descriptor(D::key("route").value("a*b"))
        .descriptor(D::key("host").value("x"))
        .descriptor(D::key("host").value("x"))
        .descriptor(
            D::key("remote_address")
                .nested(D::key("path").rate_limit(L::per(1, Unit::Hour).name("twice")))
                .nested(
                    D::key("host")
                        .rate_limit(L::per(1, Unit::Hour).name("twice").replaces("ghost")),
                ),
        )
        .descriptor(
            D::key("method")
                .value("GET")
                .rate_limit(L::unlimited().burst(3)),
        )
        .build()
        .expect_err("every entry has a mistake");

    let mut expected = vec![
        "domain",
        "sources.method",
        "sources.bad.header",
        "sources.blank.query",
        "sources.nothing",
        "sources.verb[0].method",
        "sources.verb[0].path",
        "client_ip.trusted_proxies[0]",
        "client_ip.ipv6_prefix",
        "descriptors[0].key",
        "descriptors[1].rate_limit.burst",
        "descriptors[2].rate_limit.unit_multiplier",
        "descriptors[3].rate_limit.period",
        "descriptors[6]",
        "descriptors[7].descriptors[1].rate_limit.name",
        "descriptors[7].descriptors[1].rate_limit.replaces[0]",
        "descriptors[8].rate_limit",
    ];
    let mut actual = paths(&errors);
    expected.sort_unstable();
    actual.sort_unstable();
    assert_eq!(actual, expected, "{errors}");
    for error in errors.errors() {
        assert_unlocated(error);
    }
    let shown = errors.to_string();
    assert!(
        shown.starts_with(&format!(
            "{} error(s) in the rate-limit rules:\n",
            expected.len()
        )),
        "{shown}"
    );
    assert!(
        shown.contains("  descriptors[0].key: unknown key `nobody_declared_this`"),
        "{shown}"
    );
}
