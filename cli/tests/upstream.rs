//! envoyproxy/ratelimit's own tests, ported: its configuration files (vendored under
//! `upstream/`, at commit f2fb157, with its licence) loaded and refused as upstream's
//! `test/config/config_test.go` loads and refuses them, each lookup answered as there. What
//! each case asserts upstream is in `upstream/CATALOGUE.md`, section 1.

use std::path::PathBuf;
use std::time::Duration;
use tollgate::envoy::Descriptor;
use tollgate::rules::{KeySources, Rate, Rules};
use tollgate::Limiter;

/// The vendored upstream file at `path` (upstream's own path).
fn upstream(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/upstream")
        .join(path)
}

/// Upstream's config file `name` (in `test/config/`), compiled for a rate limit service.
fn load(name: &str) -> Result<Rules, String> {
    Rules::from_file_with(upstream(&format!("test/config/{name}")), KeySources::Given)
        .map_err(|errors| errors.to_string())
}

/// A descriptor's entries, as a test writes them.
type Entries<'a> = &'a [(&'a str, &'a str)];

/// What a lookup finds, as upstream's `GetLimit` reports it.
#[derive(Debug, PartialEq)]
enum Found {
    /// No limit (`nil`).
    Nothing,
    /// An `unlimited` entry.
    Unlimited,
    /// A limit: requests per unit, the unit, and its name ("" when it has none).
    Limit(u64, Duration, String),
}

const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3_600);
const DAY: Duration = Duration::from_secs(86_400);

/// A limit of `requests` per `unit` without a name.
fn limit(requests: u64, unit: Duration) -> Found {
    Found::Limit(requests, unit, String::new())
}

/// What `entries` reach in `rules`, looked up without charging anything.
async fn lookup(rules: &Rules, entries: &[(&str, &str)]) -> Found {
    let limiter = Limiter::new(rules.clone());
    let call = [Descriptor {
        entries,
        cost: 1,
        limit: None,
    }];
    let peeked = limiter.peek_descriptors(&call).await.expect("in memory");
    if peeked.is_unlimited(0) {
        return Found::Unlimited;
    }
    let Some(decision) = &peeked.descriptors()[0] else {
        return Found::Nothing;
    };
    let limit = peeked.limit_of(decision).expect("a limit of the rules");
    let Rate::Limited { quota, .. } = limit.rate() else {
        panic!("a limited entry: {limit:?}");
    };
    let name = limit.name().unwrap_or_default().to_owned();
    Found::Limit(quota.requests_per_period(), quota.period(), name)
}

/// TestBasicConfig: basic_config.yaml loads, and each lookup finds what upstream finds.
#[tokio::test]
async fn basic_config() {
    let rules = load("basic_config.yaml").expect("upstream loads it");
    assert_eq!(rules.domain(), "test-domain");
    let cases: [(Entries, Found); 14] = [
        (&[], Found::Nothing),
        (&[("key1", "something")], Found::Nothing),
        (&[("key1", "value1")], Found::Nothing),
        (
            &[("key2", "value2"), ("subkey", "subvalue")],
            Found::Nothing,
        ),
        (
            &[("key5", "value5"), ("subkey5", "subvalue")],
            Found::Nothing,
        ),
        (
            &[("key1", "value1"), ("subkey1", "something")],
            limit(5, SECOND),
        ),
        (
            &[("key1", "value1"), ("subkey1", "subvalue1")],
            limit(10, SECOND),
        ),
        (&[("key2", "something")], limit(20, MINUTE)),
        (&[("key2", "value2")], limit(30, MINUTE)),
        // An entry without a limit exempts its value from the key's.
        (&[("key2", "value3")], Found::Nothing),
        (&[("key3", "foo")], limit(1, HOUR)),
        (
            &[("key4", "foo")],
            Found::Limit(1, DAY, "key4_rate_limit".to_owned()),
        ),
        (&[("key6", "foo")], Found::Unlimited),
        (&[("key7", "unspecified_value")], limit(70, MINUTE)),
    ];
    for (entries, found) in cases {
        assert_eq!(lookup(&rules, entries).await, found, "{entries:?}");
    }
}

/// TestShadowModeConfig: the shadow-mode entries are limits that only report.
#[tokio::test]
async fn shadow_mode_config() {
    let rules = load("shadowmode_config.yaml").expect("upstream loads it");
    let limiter = Limiter::new(rules.clone());
    let cases: [(Entries, u64, Duration, bool); 4] = [
        (
            &[("key1", "value1"), ("subkey1", "something")],
            5,
            SECOND,
            false,
        ),
        (
            &[("key1", "value1"), ("subkey1", "subvalue1")],
            10,
            SECOND,
            true,
        ),
        (&[("key2", "something")], 20, MINUTE, true),
        (&[("key2", "value2")], 30, MINUTE, false),
    ];
    for (entries, requests, unit, shadow) in cases {
        assert_eq!(lookup(&rules, entries).await, limit(requests, unit));
        let call = [Descriptor {
            entries,
            cost: 1,
            limit: None,
        }];
        let peeked = limiter.peek_descriptors(&call).await.expect("in memory");
        let decision = peeked.descriptors()[0].as_ref().expect("a limit");
        assert_eq!(decision.is_shadow(), shadow, "{entries:?}");
    }
}

/// The files upstream loads, and a domain without descriptors among them.
#[test]
fn the_files_upstream_loads_load() {
    for name in [
        "basic_config.yaml",
        "shadowmode_config.yaml",
        "merge_domain_key1.yaml",
        "merge_domain_key2.yaml",
        // `descriptors:` written empty: a domain that limits nothing.
        "duplicate_domain.yaml",
    ] {
        load(name).unwrap_or_else(|errors| panic!("{name}: {errors}"));
    }
    let integration = "test/integration/runtime/current/ratelimit/config";
    for path in [
        format!("{integration}/basic.yaml"),
        format!("{integration}/another.yaml"),
        "examples/ratelimit/config/config.yaml".to_owned(),
    ] {
        Rules::from_file_with(upstream(&path), KeySources::Given)
            .unwrap_or_else(|errors| panic!("{path}: {errors}"));
    }
}

/// The files upstream refuses are refused, each for upstream's reason, in tollgate's words
/// (upstream's message in the comment), naming the file and the place.
#[test]
fn the_files_upstream_refuses_are_refused_for_its_reason() {
    let cases = [
        // "config file cannot have empty domain"
        ("empty_domain.yaml", "the file names no domain"),
        // "descriptor has empty key"
        ("empty_key.yaml", "missing field `key`"),
        // "duplicate descriptor composite key 'test-domain.key1_value1'"
        ("duplicate_key.yaml", "duplicate entry for key `key1`"),
        // "invalid rate limit unit 'foo'"
        ("bad_limit_unit.yaml", "unknown variant `foo`"),
        // "replaces should not contain name of same descriptor"
        ("replaces_self.yaml", "a limit cannot replace itself"),
        // "should not have an empty replaces entry"
        ("replaces_empty.yaml", "a `replaces` entry names no limit"),
        // "error loading config file: yaml: line 2: found unexpected end of stream"
        ("bad_yaml.yaml", "unclosed quote"),
        // "config error, unknown key 'ratelimit'"
        ("misspelled_key.yaml", "unknown field `ratelimit`"),
        // "config error, unknown key 'requestsperunit'"
        ("misspelled_key2.yaml", "unknown field `requestsperunit`"),
        // "config error, key is not of type string: 0.25"
        ("non_string_key.yaml", "unknown field `0.25`"),
        // "config error, yaml file contains list of type other than map: a"
        ("non_map_list.yaml", "expected mapping"),
        // "should not specify rate limit unit when unlimited"
        (
            "unlimited_with_unit.yaml",
            "`unlimited: true` takes no other setting",
        ),
    ];
    for (name, reason) in cases {
        let errors = load(name).expect_err(name);
        assert!(errors.contains(reason), "{name}: {errors}");
        assert!(errors.contains(name), "{name} is named: {errors}");
        assert!(
            !errors.contains("Option<") && !errors.contains("deserialize"),
            "{name}: the user's words, not Rust's: {errors}"
        );
    }
}

/// TestWildcardConfig: a `*` anywhere in a value matches any run of characters; an entry
/// without one matches only its value.
#[tokio::test]
async fn wildcard_config() {
    let rules = load("wildcard.yaml").expect("upstream loads it");
    let twenty = || limit(20, MINUTE);
    let cases: [(Entries, Found); 14] = [
        (&[("noVal", "foo1")], twenty()),
        (&[("wild", "foo1")], twenty()),
        (&[("wild", "foo2")], twenty()),
        (&[("nestedWild", "val1"), ("wild", "goo2")], twenty()),
        (&[("wild", "bar")], Found::Nothing),
        (&[("noWild", "foo1")], Found::Nothing),
        (&[("midWild", "barab")], twenty()),
        (&[("midWild", "bar123b")], twenty()),
        (&[("midWild", "barb")], twenty()),
        (&[("midWild", "bara")], Found::Nothing),
        (&[("midWild", "xbarb")], Found::Nothing),
        (&[("multiWild", "foo123bar456baz")], limit(10, MINUTE)),
        (&[("multiWild", "foobarbaz")], limit(10, MINUTE)),
        (&[("multiWild", "foo123baz")], Found::Nothing),
    ];
    for (entries, found) in cases {
        assert_eq!(lookup(&rules, entries).await, found, "{entries:?}");
    }
    // Each value a wildcard matches is counted on its own.
    let limiter = Limiter::new(rules);
    for _ in 0..10 {
        assert!(admits(&limiter, &[("multiWild", "foo1bar1baz")]).await);
    }
    assert!(!admits(&limiter, &[("multiWild", "foo1bar1baz")]).await);
    assert!(admits(&limiter, &[("multiWild", "foo2bar2baz")]).await);
}

/// Whether `limiter` admits (and charges) one call of `entries`.
async fn admits(limiter: &Limiter, entries: Entries<'_>) -> bool {
    let call = [Descriptor {
        entries,
        cost: 1,
        limit: None,
    }];
    limiter
        .check_descriptors(&call)
        .await
        .verdict()
        .is_allowed()
}

/// TestShareThreshold, and the integration test's share-threshold case: the values a
/// `share_threshold` wildcard matches share one count (the exact entry `file=test1` keeps
/// its own), the values of a wildcard without it each have theirs.
#[tokio::test]
async fn share_threshold() {
    let rules = load("share_threshold.yaml").expect("upstream loads it");
    let cases: [(Entries, Found); 6] = [
        (&[("files", "files/a.pdf")], limit(100, MINUTE)),
        (
            &[("nested", "parent"), ("files", "nested/file1.txt")],
            limit(200, MINUTE),
        ),
        (
            &[("files", "top/file1.txt"), ("files", "nested/file1.txt")],
            limit(300, MINUTE),
        ),
        (&[("file", "test1")], limit(50, MINUTE)),
        (&[("file", "test23")], limit(100, MINUTE)),
        (&[("midpath", "/api/v2")], Found::Nothing),
    ];
    for (entries, found) in cases {
        assert_eq!(lookup(&rules, entries).await, found, "{entries:?}");
    }
    let integration = "test/integration/runtime/current/ratelimit/config/share_threshold.yaml";
    let rules =
        Rules::from_file_with(upstream(integration), KeySources::Given).expect("upstream loads it");
    let limiter = Limiter::new(rules);
    for _ in 0..10 {
        assert!(admits(&limiter, &[("files", "files/a.pdf")]).await);
    }
    assert!(
        !admits(&limiter, &[("files", "files/b.csv")]).await,
        "files/b.csv shares files/a.pdf's count"
    );
    for i in 0..10 {
        let own = format!("files_no_share/{i}");
        assert!(admits(&limiter, &[("files_no_share", &own)]).await);
    }
}

/// A `share_threshold` without a wildcard to share is refused, as upstream refuses it.
#[test]
fn share_threshold_needs_a_wildcard() {
    let yaml = "domain: d\ndescriptors:\n  - key: files\n    value: plain\n    share_threshold: true\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n";
    let errors = Rules::from_yaml_with(yaml, KeySources::Given)
        .expect_err("nothing to share")
        .to_string();
    assert!(
        errors.contains("share_threshold counts the values a wildcard matches"),
        "{errors}"
    );
}
