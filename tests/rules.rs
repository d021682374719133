//! The rules file and the rules builder: what compiles, to what, and how every kind of
//! mistake is reported (all at once, each with its line, column and path).

use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

use tollgate::algorithm::{Algorithm, Quota};
use tollgate::clock::ManualClock;
use tollgate::rules::{
    DescriptorSpec, LimitSpec, OnStoreError, Rate, RuleError, RuleErrors, Rules, SourceSpec, Unit,
};
use tollgate::store::MemoryStore;
use tollgate::Limiter;

use tempfile::NamedTempFile;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);
const DAY: Duration = Duration::from_secs(86_400);

/// The rules-file size limit documented on `Rules::from_yaml` (4 MiB).
const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// The descriptor nesting limit of the compiler.
const MAX_DEPTH: usize = 16;

type TestLimiter = Limiter<MemoryStore<ManualClock>>;

#[track_caller]
fn compile(yaml: &str) -> Rules {
    Rules::from_yaml(yaml)
        .unwrap_or_else(|errors| panic!("the rules should compile, but:\n{errors}"))
}

#[track_caller]
fn reject(yaml: &str) -> RuleErrors {
    match Rules::from_yaml(yaml) {
        Ok(rules) => panic!(
            "the rules should be rejected, but they compiled to {:#?}",
            rules.limits()
        ),
        Err(errors) => errors,
    }
}

/// A limiter on a manual clock, and the clock.
fn limiter(rules: Rules) -> (TestLimiter, ManualClock) {
    let clock = ManualClock::new();
    let limiter = Limiter::with_store(rules, MemoryStore::with_clock(clock.clone()));
    (limiter, clock)
}

/// How many of `attempts` requests with `values` the limiter admits (the clock standing still).
async fn admitted(limiter: &TestLimiter, values: &[(&str, &str)], attempts: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..attempts {
        if limiter.check(values, 1).await.is_allowed() {
            admitted += 1;
        }
    }
    admitted
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).expect("usize fits in u64")
}

/// A 1-based line and column.
type Position = (u64, u64);

/// The 1-based line and column (in characters) of the only occurrence of `needle` in `text`.
#[track_caller]
fn position_of(text: &str, needle: &str) -> Position {
    let mut found = text.match_indices(needle).map(|(offset, _)| offset);
    let offset = found
        .next()
        .unwrap_or_else(|| panic!("`{needle}` is not in the text"));
    assert!(
        found.next().is_none(),
        "`{needle}` occurs more than once in the text"
    );
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    (to_u64(line), to_u64(column))
}

/// The position of `part` inside the only occurrence of `needle` (which must contain it).
#[track_caller]
fn position_within(text: &str, needle: &str, part: &str) -> Position {
    let (line, column) = position_of(text, needle);
    let skip = needle
        .find(part)
        .unwrap_or_else(|| panic!("`{part}` is not in `{needle}`"));
    (line, column + to_u64(needle[..skip].chars().count()))
}

/// The 1-based line of the only occurrence of `needle` in `text`.
#[track_caller]
fn line_of(text: &str, needle: &str) -> u64 {
    position_of(text, needle).0
}

/// The only error whose path is `path`.
#[track_caller]
fn error_at<'e>(errors: &'e RuleErrors, path: &str) -> &'e RuleError {
    let mut matching = errors.errors().iter().filter(|error| error.path() == path);
    let error = matching
        .next()
        .unwrap_or_else(|| panic!("no error at `{path}` in:\n{errors}"));
    assert!(
        matching.next().is_none(),
        "more than one error at `{path}` in:\n{errors}"
    );
    error
}

/// The error, when there is exactly one.
#[track_caller]
fn only_error(errors: &RuleErrors) -> &RuleError {
    match errors.errors() {
        [error] => error,
        _ => panic!("expected exactly one error, got:\n{errors}"),
    }
}

/// `error` is on `line`, has a column, and its Display leads with `line:column: `.
#[track_caller]
fn assert_on_line(error: &RuleError, line: u64) {
    assert_eq!(error.line(), Some(line), "wrong line for `{error}`");
    let column = error
        .column()
        .unwrap_or_else(|| panic!("no column for `{error}`"));
    assert!(column >= 1, "columns count from 1: `{error}`");
    let shown = error.to_string();
    assert!(
        shown.starts_with(&format!("{line}:{column}: ")),
        "the Display of an error should lead with line:column, got `{shown}`"
    );
}

/// `error` is at exactly `position` (line and column).
#[track_caller]
fn assert_at(error: &RuleError, position: Position) {
    assert_eq!(
        (error.line(), error.column()),
        (Some(position.0), Some(position.1)),
        "wrong position for `{error}`"
    );
    assert_on_line(error, position.0);
}

/// `error` has a path but no location (rules built in Rust).
#[track_caller]
fn assert_unlocated(error: &RuleError) {
    assert_eq!(
        (error.line(), error.column()),
        (None, None),
        "`{error}` should have no location"
    );
    assert!(!error.path().is_empty(), "`{error}` should have a path");
    assert!(
        error.to_string().starts_with(error.path()),
        "without a location, the Display should lead with the path: `{error}`"
    );
}

/// Rules with a single `method` entry whose rate_limit flow mapping holds `fields`.
fn one_limit(fields: &str) -> String {
    format!("domain: one\ndescriptors:\n  - key: method\n    rate_limit: {{ {fields} }}\n")
}

/// The quota of the only limit of `rules`.
#[track_caller]
fn only_quota(rules: &Rules) -> Quota {
    match rules.limits() {
        [limit] => limit.quota().expect("the limit has a quota"),
        limits => panic!("expected one limit, got {limits:#?}"),
    }
}

/// `levels` descriptors nested in one another, each with a limit; each entry's line carries
/// the comment `# level N`.
fn nested_descriptors(levels: usize) -> String {
    let mut yaml = String::from("domain: deep\ndescriptors:\n");
    for level in 1..=levels {
        let indent = "    ".repeat(level - 1);
        yaml.push_str(&format!("{indent}  - key: method # level {level}\n"));
        yaml.push_str(&format!(
            "{indent}    rate_limit: {{ unit: second, requests_per_unit: {level} }}\n"
        ));
        if level < levels {
            yaml.push_str(&format!("{indent}    descriptors:\n"));
        }
    }
    yaml
}

/// A temporary file holding `contents`, removed when dropped.
fn file_with(contents: &[u8]) -> NamedTempFile {
    let mut file = NamedTempFile::new().expect("a temporary rules file");
    file.write_all(contents)
        .expect("write a temporary rules file");
    file
}

/// The paths of all `errors`, in order.
fn paths(errors: &RuleErrors) -> Vec<&str> {
    errors.errors().iter().map(RuleError::path).collect()
}

/// Rules with one `path` entry per item of `limits` (the entry `descriptors[i]` for item
/// `i`), whose rate_limit flow mapping holds the item's fields.
fn one_limit_per_path(limits: &[&str]) -> String {
    let mut yaml = String::from("domain: t\ndescriptors:\n");
    for (index, fields) in limits.iter().enumerate() {
        yaml.push_str(&format!(
            "  - key: path\n    value: /{index}\n    rate_limit: {{ {fields} }}\n"
        ));
    }
    yaml
}

/// What a limit is, for comparing two rule sets.
#[derive(Debug, PartialEq)]
struct LimitSummary {
    descriptor: String,
    name: Option<String>,
    rate: Rate,
    shadow: bool,
    on_store_error: OnStoreError,
    replaces: Vec<String>,
}

fn summary(rules: &Rules) -> Vec<LimitSummary> {
    rules
        .limits()
        .iter()
        .map(|limit| LimitSummary {
            descriptor: limit.descriptor().to_owned(),
            name: limit.name().map(str::to_owned),
            rate: limit.rate(),
            shadow: limit.is_shadow(),
            on_store_error: limit.on_store_error(),
            replaces: limit.replaces().to_vec(),
        })
        .collect()
}

const SEED: &str = r#"
domain: auth
sources:
  auth_type:
    - { value: login, method: POST, path: /auth/login }
descriptors:
  - key: auth_type
    value: login
    rate_limit: { unit: minute, requests_per_unit: 5 }
"#;

const DESIGN: &str = r#"
domain: demo
sources:
  user_id: { header: x-user-id }
  api_key: { header: x-api-key }
  endpoint:
    - { value: login,   method: POST, path: /auth/login }
    - { value: posts,   method: POST, path: /posts }
    - { value: friends, method: POST, path: "/users/*/friends" }
client_ip:
  trusted_proxies: [127.0.0.1/32, 10.0.0.0/8]
  ipv6_prefix: 64
defaults:
  algorithm: sliding_window_counter
  on_store_error: allow
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 40 }
  - key: endpoint
    value: login
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 5, algorithm: fixed_window }
  - key: endpoint
    value: posts
    descriptors:
      - key: user_id
        rate_limit: { unit: second, requests_per_unit: 1, algorithm: token_bucket }
  - key: endpoint
    value: friends
    descriptors:
      - key: user_id
        rate_limit: { unit: day, requests_per_unit: 150, algorithm: fixed_window }
  - key: api_key
    value: "internal-*"
    rate_limit: { unlimited: true }
"#;

/// Ten independent mistakes; each line with one is found by a needle in the tests.
const MANY_MISTAKES: &str = r#"
domain: many-mistakes
sources:
  user_id: { header: x-user-id }
client_ip:
  trusted_proxies: [10.0.0.0/8, not-an-address]
  ipv6_prefix: 200
descriptors:
  - key: nobody_declared_this
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: user_id
    rate_limit: { unit: minute, period: 30s, requests_per_unit: 1 }
  - key: remote_address
    descriptors:
      - key: user_id
        rate_limit: { unit: minute, requests_per_unit: 5, burst: 10 }
      - key: method
        value: POST
        rate_limit: { unit: minute, algorithm: token_bucket }
  - key: user_id
    value: "a*b"
  - key: method
    value: GET
  - key: method # the same entry again
    value: GET
  - key: host
    rate_limit: { name: shared, unit: hour, requests_per_unit: 1 }
  - key: path
    rate_limit: { name: shared, unit: hour, requests_per_unit: 2 }
  - key: route
    rate_limit: { name: route, unit: hour, requests_per_unit: 1, replaces: [{ name: ghost }] }
"#;

// ---------------------------------------------------------------------------------------------
// Rules that compile
// ---------------------------------------------------------------------------------------------

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
    assert_eq!(quota.limit(), 5);
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
    assert_eq!(denial.limit_index(), Some(0));
    let decision = denial.decision().expect("a denial reports its decision");
    assert_eq!(decision.limit, 5);
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

// ---------------------------------------------------------------------------------------------
// Every mistake, at once, located
// ---------------------------------------------------------------------------------------------

#[test]
fn every_mistake_is_reported_at_once_with_line_column_and_path() {
    let text = MANY_MISTAKES;
    let errors = reject(text);
    // Shown with `--nocapture`: the format of a multi-error report.
    println!("{errors}");

    // (path, line of the mistake, exact position when the error points at the value itself)
    let exactly = |needle: &str| Some(position_of(text, needle));
    let within = |needle: &str, part: &str| Some(position_within(text, needle, part));
    let expected: [(&str, u64, Option<Position>); 10] = [
        (
            "client_ip.trusted_proxies[1]",
            line_of(text, "not-an-address"),
            exactly("not-an-address"),
        ),
        (
            "client_ip.ipv6_prefix",
            line_of(text, "ipv6_prefix: 200"),
            within("ipv6_prefix: 200", "200"),
        ),
        (
            "descriptors[0].key",
            line_of(text, "nobody_declared_this"),
            exactly("nobody_declared_this"),
        ),
        (
            "descriptors[1].rate_limit.period",
            line_of(text, "period: 30s"),
            within("period: 30s", "30s"),
        ),
        (
            "descriptors[2].descriptors[0].rate_limit.burst",
            line_of(text, "burst: 10"),
            within("burst: 10", "10"),
        ),
        (
            "descriptors[2].descriptors[1].rate_limit.requests_per_unit",
            line_of(text, "{ unit: minute, algorithm: token_bucket }"),
            None,
        ),
        (
            "descriptors[3].value",
            line_of(text, "\"a*b\""),
            exactly("\"a*b\""),
        ),
        (
            "descriptors[5]",
            line_of(text, "# the same entry again"),
            None,
        ),
        (
            "descriptors[7].rate_limit.name",
            line_of(text, "requests_per_unit: 2 }"),
            None,
        ),
        (
            "descriptors[8].rate_limit.replaces[0]",
            line_of(text, "ghost"),
            None,
        ),
    ];

    assert_eq!(
        errors.errors().len(),
        expected.len(),
        "one error per mistake, no more, no less:\n{errors}"
    );
    let shown = errors.to_string();
    assert!(
        shown.starts_with(&format!(
            "{} error(s) in the rate-limit rules:\n",
            expected.len()
        )),
        "{shown}"
    );
    for (path, line, position) in expected {
        let error = error_at(&errors, path);
        assert_on_line(error, line);
        if let Some(position) = position {
            assert_at(error, position);
        }
        let column = error.column().expect("located");
        assert!(
            shown.contains(&format!("  {line}:{column}: {path}: ")),
            "the report should list `{line}:{column}: {path}: `:\n{shown}"
        );
        assert!(!error.message().is_empty());
    }

    let message = |path| error_at(&errors, path).message().to_owned();
    assert!(message("descriptors[0].key").contains("nobody_declared_this"));
    assert!(message("descriptors[2].descriptors[0].rate_limit.burst").contains("token_bucket"));
    assert!(message("descriptors[7].rate_limit.name").contains("shared"));
    assert!(message("descriptors[8].rate_limit.replaces[0]").contains("ghost"));
}

#[test]
fn errors_are_listed_in_the_order_of_the_file() {
    // `RuleErrors::errors` promises "the errors, in the order of the file".
    let text = r#"
domain: order
descriptors:
  - key: path
    rate_limit: { name: twice, unit: hour, requests_per_unit: 1 }
  - key: host
    rate_limit: { name: twice, unit: hour, requests_per_unit: 2 }
  - key: nobody_declared_this
client_ip:
  ipv6_prefix: 0
sources:
  zeta: { header: "bad header" }
  alpha: { header: "also bad" }
"#;
    let errors = reject(text);
    assert_eq!(errors.errors().len(), 5, "{errors}");
    let lines: Vec<u64> = errors
        .errors()
        .iter()
        .map(|error| error.line().expect("every error here is located"))
        .collect();
    let mut sorted = lines.clone();
    sorted.sort_unstable();
    assert_eq!(
        lines, sorted,
        "errors should be listed in the order of the file:\n{errors}"
    );
}

#[test]
fn a_broken_limit_causes_no_spurious_replaces_error() {
    let text = r#"
domain: cascade
descriptors:
  - key: path
    rate_limit: { name: base, unit: hour }
  - key: host
    rate_limit: { name: special, unit: hour, requests_per_unit: 1, replaces: [{ name: base }] }
"#;
    let errors = reject(text);
    let error = only_error(&errors);
    assert_eq!(error.path(), "descriptors[0].rate_limit.requests_per_unit");
    assert_on_line(error, line_of(text, "{ name: base, unit: hour }"));
}

#[test]
fn errors_in_block_style_point_at_the_offending_line() {
    let text = r#"
domain: block
descriptors:
  - key: path
    rate_limit:
      unit: minute
      unit_multiplier: 0
      requests_per_unit: 1
  - key: host
    rate_limit:
      unit: minute
      requests_per_unit: 1
      name: ""
  - key: method
    rate_limit:
      unit: hour
      requests_per_unit: 1
      replaces:
        - name: ghost
  - key: route
    rate_limit:
      unit: hour
      requests_per_unit: 1
      burst: 5
  - key: remote_address
    rate_limit:
      unit: hour
      period: 5m
      requests_per_unit: 1
"#;
    let errors = reject(text);
    let expected = [
        (
            "descriptors[0].rate_limit.unit_multiplier",
            line_of(text, "unit_multiplier: 0"),
        ),
        (
            "descriptors[1].rate_limit.name",
            line_of(text, "name: \"\""),
        ),
        (
            "descriptors[2].rate_limit.replaces[0]",
            line_of(text, "ghost"),
        ),
        ("descriptors[3].rate_limit.burst", line_of(text, "burst: 5")),
        (
            "descriptors[4].rate_limit.period",
            line_of(text, "period: 5m"),
        ),
    ];
    assert_eq!(errors.errors().len(), expected.len(), "{errors}");
    let misplaced: Vec<String> = expected
        .iter()
        .filter_map(|&(path, line)| {
            let error = error_at(&errors, path);
            (error.line() != Some(line))
                .then(|| format!("{path}: expected line {line}, got `{error}`"))
        })
        .collect();
    assert!(
        misplaced.is_empty(),
        "errors point at the wrong line:\n{}",
        misplaced.join("\n")
    );
}

#[test]
fn errors_through_an_alias_keep_a_whole_message() {
    let text = "domain: &name fortnight\ndescriptors:\n  - key: method\n    rate_limit: { unit: *name, requests_per_unit: 1 }\n";
    let errors = reject(text);
    let error = only_error(&errors);
    assert_at(error, position_of(text, "*name"));
    let message = error.message();
    assert!(message.contains("fortnight"), "{error}");
    assert!(
        message.matches('(').count() == message.matches(')').count() && !message.ends_with("(used"),
        "the message is cut short: `{message}`"
    );
}

#[test]
fn errors_from_a_file_name_the_file() {
    let file = file_with(MANY_MISTAKES.as_bytes());
    let errors = Rules::from_file(file.path()).expect_err("the file has mistakes");
    let shown = errors.to_string();
    let name = file.path().display().to_string();
    assert!(
        shown.starts_with(&format!("{name}: 10 error(s) in the rate-limit rules:\n")),
        "{shown}"
    );
    let error = error_at(&errors, "descriptors[0].key");
    let (line, column) = position_of(MANY_MISTAKES, "nobody_declared_this");
    assert_at(error, (line, column));
    assert!(
        shown.contains(&format!("  {name}:{line}:{column}: descriptors[0].key: ")),
        "{shown}"
    );

    let good = file_with(SEED.as_bytes());
    let rules = Rules::from_file(good.path()).expect("the seed example loads from a file");
    assert_eq!(rules.limits().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// YAML that does not fit the format
// ---------------------------------------------------------------------------------------------

#[test]
fn unknown_keys_are_rejected_with_their_location() {
    let cases = [
        ("top level", "domain: d\nrate_limits: []\n", "rate_limits"),
        (
            "descriptor",
            "domain: d\ndescriptors:\n  - key: method\n    ratelimit: { unit: minute, requests_per_unit: 1 }\n",
            "ratelimit",
        ),
        (
            "rate_limit",
            &one_limit("unit: minute, requests_per_minute: 1"),
            "requests_per_minute",
        ),
        (
            "client_ip",
            "domain: d\nclient_ip: { trusted_proxy: 10.0.0.0/8 }\n",
            "trusted_proxy",
        ),
        (
            "defaults",
            "domain: d\ndefaults: { algo: token_bucket }\n",
            "algo",
        ),
        (
            "source",
            "domain: d\nsources:\n  session: { cookie: sid }\n",
            "cookie",
        ),
        (
            "classifier entry",
            "domain: d\nsources:\n  op:\n    - { value: login, verb: POST }\n",
            "verb",
        ),
    ];
    for (place, yaml, key) in cases {
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_at(error, position_of(yaml, key));
        assert!(
            error.message().contains(key),
            "{place}: the message should name `{key}`: {error}"
        );
    }
}

#[test]
fn wrong_types_are_rejected_with_their_location() {
    let cases = [
        (
            one_limit("unit: minute, requests_per_unit: \"many\""),
            "\"many\"",
        ),
        (one_limit("unit: minute, requests_per_unit: -1"), "-1"),
        (one_limit("unit: minute, requests_per_unit: 1.5"), "1.5"),
        (
            one_limit("unit: fortnight, requests_per_unit: 1"),
            "fortnight",
        ),
        (
            one_limit("unit: minute, requests_per_unit: 1, algorithm: magic"),
            "magic",
        ),
        (
            one_limit("unit: minute, requests_per_unit: 1, burst: lots"),
            "lots",
        ),
        (
            "domain: d\ndescriptors:\n  - key: method\n    shadow_mode: maybe\n".to_owned(),
            "maybe",
        ),
        (
            "domain: d\nclient_ip: { ipv6_prefix: 300 }\n".to_owned(),
            "300",
        ),
        (
            "domain: d\ndefaults: { on_store_error: explode }\n".to_owned(),
            "explode",
        ),
    ];
    for (yaml, value) in &cases {
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_at(error, position_of(yaml, value));
    }

    let unit = reject(&one_limit("unit: fortnight, requests_per_unit: 1"));
    assert!(only_error(&unit).message().contains("minute"), "{unit}");
    let algorithm = reject(&one_limit(
        "unit: minute, requests_per_unit: 1, algorithm: magic",
    ));
    assert!(
        only_error(&algorithm).message().contains("token_bucket"),
        "{algorithm}"
    );

    // Structure of the wrong kind is located too.
    for yaml in [
        "domain: [a, b]\n",
        "domain: d\ndescriptors: 5\n",
        "domain: d\ndescriptors: [{ key: [method] }]\n",
        "- just\n- a\n- list\n",
        "just a string\n",
    ] {
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert!(
            error.line().is_some() && error.column().is_some(),
            "`{yaml}` gives a located error, got `{error}`"
        );
    }
}

#[test]
fn zero_periods_are_rejected() {
    let cases = [
        (
            one_limit("period: 0s, requests_per_unit: 1"),
            "descriptors[0].rate_limit.period",
        ),
        (
            one_limit("period: 0ms, requests_per_unit: 1"),
            "descriptors[0].rate_limit.period",
        ),
        (
            one_limit("unit: second, unit_multiplier: 0, requests_per_unit: 1"),
            "descriptors[0].rate_limit.unit_multiplier",
        ),
    ];
    for (yaml, path) in &cases {
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_eq!(error.path(), *path, "{errors}");
        assert_on_line(error, line_of(yaml, "rate_limit"));
    }
}

#[test]
fn invalid_periods_are_rejected() {
    for fields in [
        "period: 30, requests_per_unit: 1",
        "period: 30 fortnights, requests_per_unit: 1",
        "period: -5s, requests_per_unit: 1",
        "period: 1.5s, requests_per_unit: 1",
        "period: 99999999999999999999d, requests_per_unit: 1",
        "period: 36501d, requests_per_unit: 1",
        "period: 30s, unit_multiplier: 2, requests_per_unit: 1",
        "unit: year, unit_multiplier: 101, requests_per_unit: 1",
        "unit: year, unit_multiplier: 18446744073709551615, requests_per_unit: 1",
        "requests_per_unit: 1",
    ] {
        let yaml = one_limit(fields);
        let errors = reject(&yaml);
        let error = only_error(&errors);
        assert!(
            error.path().starts_with("descriptors[0].rate_limit"),
            "`{fields}`: {error}"
        );
        assert_on_line(error, line_of(&yaml, "rate_limit"));
    }
}

#[test]
fn duplicate_mapping_keys_are_rejected() {
    let cases = [
        ("domain: d\ndomain: e\n", "domain: e"),
        (
            "domain: d\ndescriptors:\n  - key: method\n    key: path\n",
            "key: path",
        ),
        (
            "domain: d\ndescriptors:\n  - key: method\n    rate_limit: { unit: minute, requests_per_unit: 1, requests_per_unit: 2 }\n",
            "requests_per_unit: 2",
        ),
        (
            "domain: d\nsources:\n  user: { header: x-a }\n  user: { header: x-b }\n",
            "user: { header: x-b }",
        ),
    ];
    for (yaml, second) in cases {
        let errors = reject(yaml);
        let error = only_error(&errors);
        assert_at(error, position_of(yaml, second));
        assert!(error.message().contains("duplicate"), "{error}");
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile input
// ---------------------------------------------------------------------------------------------

#[test]
fn oversized_rules_are_refused_before_parsing() {
    let padding = |bytes: usize| format!("# {}\n", "x".repeat(bytes));
    let base = one_limit("unit: minute, requests_per_unit: 1");

    let huge = format!("{base}{}", padding(MAX_FILE_BYTES));
    assert!(huge.len() > MAX_FILE_BYTES);
    let errors = reject(&huge);
    let error = only_error(&errors);
    assert_eq!(error.line(), None);
    assert!(
        error.message().contains(&huge.len().to_string())
            && error.message().contains(&MAX_FILE_BYTES.to_string()),
        "the message should give the size and the limit: {error}"
    );

    // Right at the limit, the same rules are still accepted.
    let at_limit = format!("{base}{}", padding(MAX_FILE_BYTES - base.len() - 3));
    assert_eq!(at_limit.len(), MAX_FILE_BYTES);
    assert_eq!(compile(&at_limit).limits().len(), 1);

    let file = file_with(huge.as_bytes());
    let errors = Rules::from_file(file.path()).expect_err("a huge file is refused");
    assert!(
        errors
            .to_string()
            .contains(&file.path().display().to_string()),
        "{errors}"
    );
}

#[test]
fn descriptors_nested_beyond_sixteen_levels_are_refused() {
    let fine = compile(&nested_descriptors(MAX_DEPTH));
    assert_eq!(fine.limits().len(), MAX_DEPTH);
    assert_eq!(
        fine.limits()[MAX_DEPTH - 1].descriptor(),
        vec!["method"; MAX_DEPTH].join("/")
    );

    let text = nested_descriptors(20);
    let errors = reject(&text);
    let error = only_error(&errors);
    let path = format!("descriptors[0]{}", ".descriptors[0]".repeat(MAX_DEPTH));
    assert_eq!(error.path(), path);
    assert_on_line(
        error,
        line_of(&text, &format!("# level {}\n", MAX_DEPTH + 1)),
    );
    assert!(error.message().contains("16"), "{error}");
}

#[test]
fn descriptors_nested_beyond_the_yaml_budget_are_refused() {
    let errors = reject(&nested_descriptors(100));
    let error = only_error(&errors);
    assert!(error.line().is_some(), "{error}");
    assert!(
        error.message().to_lowercase().contains("depth"),
        "the message should say the nesting is too deep: {error}"
    );
}

#[test]
fn alias_bombs_are_refused() {
    // Nine levels of ten aliases each: 10^9 copies of the first entry once expanded.
    let mut typed = String::from("domain: bomb\nsources:\n");
    for i in 0..10 {
        typed.push_str(&format!("  k{i}: {{ header: x-k{i} }}\n"));
    }
    typed.push_str(
        "descriptors:\n  - &l0 { key: k0, rate_limit: { unit: second, requests_per_unit: 1 } }\n",
    );
    for i in 1..10 {
        let aliases = vec![format!("*l{}", i - 1); 10].join(", ");
        typed.push_str(&format!(
            "  - &l{i} {{ key: k{i}, descriptors: [{aliases}] }}\n"
        ));
    }

    // One large string, aliased as often as the alias budget allows: ~100 MiB once expanded.
    let mut wide = format!(
        "domain: bomb\nsources:\n  s:\n    - {{ value: &big \"{}\" }}\n",
        "lol".repeat(350_000)
    );
    wide.push_str(&"    - { value: *big }\n".repeat(99));

    for bomb in [typed, wide] {
        let errors = reject(&bomb);
        let error = only_error(&errors);
        assert!(error.line().is_some(), "{error}");
        assert!(error.message().contains("budget"), "{error}");
    }
}

#[test]
fn deeply_nested_flow_collections_are_refused() {
    let depth = 100_000;
    let balanced = format!(
        "domain: d\ndescriptors: {}{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let unclosed = format!("domain: d\ndescriptors: {}\n", "[".repeat(depth));
    let mappings = format!(
        "domain: d\ndescriptors: {}{}\n",
        "{a: ".repeat(depth),
        "}".repeat(depth)
    );
    for yaml in [balanced, unclosed, mappings] {
        let errors = reject(&yaml);
        let error = only_error(&errors);
        assert_eq!(error.line(), Some(2), "{error}");
    }
}

#[test]
fn rules_file_that_is_not_utf8_is_refused() {
    let mut bytes = b"domain: \xff\xfe\n".to_vec();
    bytes.extend_from_slice(one_limit("unit: minute, requests_per_unit: 1").as_bytes());
    let file = file_with(&bytes);
    let errors = Rules::from_file(file.path()).expect_err("the file is not UTF-8");
    let shown = errors.to_string();
    assert!(
        shown.contains(&file.path().display().to_string()),
        "{shown}"
    );
    assert!(shown.contains("UTF-8"), "{shown}");
}

#[test]
fn empty_rules_file_is_refused() {
    for contents in ["", "\n\n", "# only a comment\n", "---\n"] {
        let file = file_with(contents.as_bytes());
        let errors = Rules::from_file(file.path()).expect_err("an empty file has no domain");
        assert!(!errors.errors().is_empty());
        assert!(
            errors
                .to_string()
                .contains(&file.path().display().to_string()),
            "{errors}"
        );
    }
}

#[test]
fn missing_rules_file_is_refused_naming_the_path() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("rules.yaml");
    assert!(!missing.exists());
    let errors = Rules::from_file(&missing).expect_err("the file does not exist");
    let error = only_error(&errors);
    assert_eq!(error.line(), None);
    assert!(error.message().contains("cannot read"), "{error}");
    let shown = errors.to_string();
    assert!(
        shown.contains(&missing.display().to_string()),
        "the report should name the file: {shown}"
    );
}

// ---------------------------------------------------------------------------------------------
// Periods
// ---------------------------------------------------------------------------------------------

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
        assert_eq!(quota.limit(), 7, "`{fields}`");
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

// ---------------------------------------------------------------------------------------------
// The builder
// ---------------------------------------------------------------------------------------------

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
                LimitSpec::per(Unit::Second, 20)
                    .algorithm(Algorithm::TokenBucket)
                    .burst(40),
            ),
        )
        .descriptor(
            DescriptorSpec::key("endpoint").value("login").nested(
                DescriptorSpec::key("remote_address")
                    .rate_limit(LimitSpec::per(Unit::Minute, 5).algorithm(Algorithm::FixedWindow)),
            ),
        )
        .descriptor(
            DescriptorSpec::key("endpoint").value("posts").nested(
                DescriptorSpec::key("user_id")
                    .rate_limit(LimitSpec::per(Unit::Second, 1).algorithm(Algorithm::TokenBucket)),
            ),
        )
        .descriptor(
            DescriptorSpec::key("endpoint").value("friends").nested(
                DescriptorSpec::key("user_id")
                    .rate_limit(LimitSpec::per(Unit::Day, 150).algorithm(Algorithm::FixedWindow)),
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
        .ietf_headers(true)
        .reset_header(true)
        .descriptor(
            DescriptorSpec::key("remote_address")
                .rate_limit(LimitSpec::per(Unit::Minute, 2).name("general")),
        )
        .descriptor(
            DescriptorSpec::key("plan").value("pro").rate_limit(
                LimitSpec::per(Unit::Minute, 10)
                    .name("pro")
                    .replaces("general"),
            ),
        )
        .descriptor(
            DescriptorSpec::key("tenant").nested(
                DescriptorSpec::key("user")
                    .shadow_mode(true)
                    .rate_limit(LimitSpec::every(Duration::from_millis(1_500), 3)),
            ),
        )
        .descriptor(
            DescriptorSpec::key("method").rate_limit(
                LimitSpec::per(Unit::Hour, 100)
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
        .descriptor(D::key("method").rate_limit(L::per(Unit::Minute, 5).burst(10)))
        .descriptor(D::key("path").rate_limit(L::per(Unit::Minute, 5).unit_multiplier(0)))
        .descriptor(D::key("host").rate_limit(L::every(Duration::ZERO, 1)))
        .descriptor(D::key("route").value("a*b"))
        .descriptor(D::key("host").value("x"))
        .descriptor(D::key("host").value("x"))
        .descriptor(
            D::key("remote_address")
                .nested(D::key("path").rate_limit(L::per(Unit::Hour, 1).name("twice")))
                .nested(
                    D::key("host")
                        .rate_limit(L::per(Unit::Hour, 1).name("twice").replaces("ghost")),
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
        "descriptors[4].value",
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

// ---------------------------------------------------------------------------------------------
// unlimited and zero
// ---------------------------------------------------------------------------------------------

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

#[test]
fn unlimited_with_a_quota_is_an_error() {
    for fields in [
        "unlimited: true, requests_per_unit: 5",
        "unlimited: true, unit: minute",
        "unlimited: true, period: 30s",
        "unlimited: true, unit_multiplier: 2",
        "unlimited: true, algorithm: token_bucket",
        "unlimited: true, burst: 3",
    ] {
        let yaml = one_limit(fields);
        let errors = reject(&yaml);
        let error = only_error(&errors);
        assert_eq!(error.path(), "descriptors[0].rate_limit", "`{fields}`");
        assert_on_line(error, line_of(&yaml, "unlimited"));
        assert!(error.message().contains("unlimited"), "{error}");
    }
}

#[tokio::test]
async fn zero_requests_per_unit_compiles_and_denies_everything() {
    let rules = compile(&one_limit("unit: minute, requests_per_unit: 0"));
    assert_eq!(only_quota(&rules).limit(), 0);
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

// ---------------------------------------------------------------------------------------------
// Sources
// ---------------------------------------------------------------------------------------------

#[test]
fn sources_cannot_redeclare_built_in_keys() {
    for builtin in ["remote_address", "method", "path", "route", "host"] {
        let yaml = format!("domain: d\nsources:\n  {builtin}: {{ header: x-custom }}\n");
        let errors = reject(&yaml);
        let error = only_error(&errors);
        assert_eq!(error.path(), format!("sources.{builtin}"));
        assert_on_line(error, line_of(&yaml, "x-custom"));
        assert!(error.message().contains("built-in"), "{error}");
    }
}

#[test]
fn invalid_header_names_are_rejected_once() {
    let text = r#"
domain: headers
sources:
  user: { header: "x user id" }
  nobody: { header: "" }
  fine: { header: X-Mixed-Case }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: fine
    rate_limit: { unit: minute, requests_per_unit: 1 }
"#;
    let errors = reject(text);
    assert_eq!(
        errors.errors().len(),
        2,
        "a descriptor on a broken source adds no error:\n{errors}"
    );
    let user = error_at(&errors, "sources.user.header");
    assert_on_line(user, line_of(text, "x user id"));
    assert!(user.message().contains("x user id"), "{user}");
    assert_on_line(
        error_at(&errors, "sources.nobody.header"),
        line_of(text, "nobody:"),
    );

    let fine = compile(
        &text
            .replace("\"x user id\"", "x-user-id")
            .replace("\"\"", "x-nobody"),
    );
    assert_eq!(fine.limits().len(), 2);
}

#[cfg(unix)]
#[test]
fn an_endless_rules_file_is_refused_without_reading_it_all() {
    let errors = Rules::from_file("/dev/zero").expect_err("an endless file is not rules");
    assert!(errors.to_string().contains("the limit is"), "{errors}");
}

#[test]
fn a_zero_rate_takes_no_burst() {
    // A burst would admit requests that the zero rate forbids.
    let errors = reject(&one_limit(
        "unit: second, requests_per_unit: 0, algorithm: token_bucket, burst: 3",
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

#[test]
fn options_that_do_not_fit_the_algorithm_are_rejected() {
    // Every entry has a mistake.
    let errors = reject(&one_limit_per_path(&[
        "unit: second, requests_per_unit: 5, algorithm: fixed_window, queue: 3",
        "unit: second, requests_per_unit: 5, algorithm: leaky_bucket, burst: 3",
        "unit: second, requests_per_unit: 5, algorithm: leaky_bucket, mode: police, max_delay: 1s",
        "unit: second, requests_per_unit: 5, algorithm: leaky_bucket, max_delay: soon",
        "unit: second, requests_per_unit: 5, cost: 0",
        "unit: second, requests_per_unit: 5, cost: nowhere",
    ]));
    assert_eq!(
        paths(&errors),
        [
            "descriptors[0].rate_limit.queue",
            "descriptors[1].rate_limit.burst",
            "descriptors[2].rate_limit.max_delay",
            "descriptors[3].rate_limit.max_delay",
            "descriptors[4].rate_limit.cost",
            "descriptors[5].rate_limit.cost",
        ],
        "{errors}"
    );
    let unknown_mode = reject(&one_limit(
        "unit: second, requests_per_unit: 5, algorithm: leaky_bucket, mode: sideways",
    ));
    assert!(
        unknown_mode.to_string().contains("sideways"),
        "{unknown_mode}"
    );
}

#[test]
fn bookings_beyond_a_hundred_years_are_refused() {
    // Both book too far ahead.
    let errors = reject(&one_limit_per_path(&[
        "unit: year, requests_per_unit: 1, algorithm: gcra, burst: 200",
        "unit: day, requests_per_unit: 1, algorithm: leaky_bucket, queue: 100000",
    ]));
    assert_eq!(
        paths(&errors),
        [
            "descriptors[0].rate_limit.burst",
            "descriptors[1].rate_limit.queue"
        ],
        "{errors}"
    );
}
