//! What the rules tests share: compiling and rejecting rules, finding errors and their
//! positions, the examples of the README and DESIGN.md, and a limiter on a manual clock.

#![allow(dead_code)]

use std::io::Write;
use std::time::Duration;

use tollgate::algorithm::Quota;
use tollgate::clock::ManualClock;
use tollgate::rules::{OnStoreError, Rate, RuleError, RuleErrors, Rules};
use tollgate::store::MemoryStore;
use tollgate::Limiter;

use tempfile::NamedTempFile;

pub const SECOND: Duration = Duration::from_secs(1);
pub const MINUTE: Duration = Duration::from_secs(60);
pub const DAY: Duration = Duration::from_secs(86_400);

/// The rules-file size limit documented on `Rules::from_yaml` (4 MiB).
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// The descriptor nesting limit of the compiler.
pub const MAX_DEPTH: usize = 16;

pub type TestLimiter = Limiter<MemoryStore<ManualClock>>;

#[track_caller]
pub fn compile(yaml: &str) -> Rules {
    Rules::from_yaml(yaml)
        .unwrap_or_else(|errors| panic!("the rules should compile, but:\n{errors}"))
}

#[track_caller]
pub fn reject(yaml: &str) -> RuleErrors {
    match Rules::from_yaml(yaml) {
        Ok(rules) => panic!(
            "the rules should be rejected, but they compiled to {:#?}",
            rules.limits()
        ),
        Err(errors) => errors,
    }
}

/// The errors of rules whose one limit, per `remote_address`, is `rate_limit` (a YAML flow
/// mapping's inside); panics when they compile.
#[track_caller]
pub fn rate_limit_errors(rate_limit: &str) -> String {
    reject(&format!(
        "domain: d\ndescriptors:\n  - key: remote_address\n    rate_limit: {{ {rate_limit} }}\n"
    ))
    .to_string()
}

/// A limiter on a manual clock, and the clock.
pub fn limiter(rules: Rules) -> (TestLimiter, ManualClock) {
    let clock = ManualClock::new();
    let limiter = Limiter::with_store(rules, MemoryStore::with_clock(clock.clone()));
    (limiter, clock)
}

/// How many of `attempts` requests with `values` the limiter admits (the clock standing still).
pub async fn admitted(limiter: &TestLimiter, values: &[(&str, &str)], attempts: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..attempts {
        if limiter.check(values, 1).await.is_allowed() {
            admitted += 1;
        }
    }
    admitted
}

pub fn to_u64(n: usize) -> u64 {
    u64::try_from(n).expect("usize fits in u64")
}

/// A 1-based line and column.
pub type Position = (u64, u64);

/// The 1-based line and column (in characters) of the only occurrence of `needle` in `text`.
#[track_caller]
pub fn position_of(text: &str, needle: &str) -> Position {
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
pub fn position_within(text: &str, needle: &str, part: &str) -> Position {
    let (line, column) = position_of(text, needle);
    let skip = needle
        .find(part)
        .unwrap_or_else(|| panic!("`{part}` is not in `{needle}`"));
    (line, column + to_u64(needle[..skip].chars().count()))
}

/// The 1-based line of the only occurrence of `needle` in `text`.
#[track_caller]
pub fn line_of(text: &str, needle: &str) -> u64 {
    position_of(text, needle).0
}

/// The only error whose path is `path`.
#[track_caller]
pub fn error_at<'e>(errors: &'e RuleErrors, path: &str) -> &'e RuleError {
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
pub fn only_error(errors: &RuleErrors) -> &RuleError {
    match errors.errors() {
        [error] => error,
        _ => panic!("expected exactly one error, got:\n{errors}"),
    }
}

/// `error` is on `line`, has a column, and its Display leads with `line:column: `.
#[track_caller]
pub fn assert_on_line(error: &RuleError, line: u64) {
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
pub fn assert_at(error: &RuleError, position: Position) {
    assert_eq!(
        (error.line(), error.column()),
        (Some(position.0), Some(position.1)),
        "wrong position for `{error}`"
    );
    assert_on_line(error, position.0);
}

/// `error` has a path but no location (rules built in Rust).
#[track_caller]
pub fn assert_unlocated(error: &RuleError) {
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
pub fn one_limit(fields: &str) -> String {
    format!("domain: one\ndescriptors:\n  - key: method\n    rate_limit: {{ {fields} }}\n")
}

/// The quota of the only limit of `rules`.
#[track_caller]
pub fn only_quota(rules: &Rules) -> Quota {
    match rules.limits() {
        [limit] => limit.quota().expect("the limit has a quota"),
        limits => panic!("expected one limit, got {limits:#?}"),
    }
}

/// `levels` descriptors nested in one another, each with a limit; each entry's line carries
/// the comment `# level N`.
pub fn nested_descriptors(levels: usize) -> String {
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
pub fn file_with(contents: &[u8]) -> NamedTempFile {
    let mut file = NamedTempFile::new().expect("a temporary rules file");
    file.write_all(contents)
        .expect("write a temporary rules file");
    file
}

/// The paths of all `errors`, in order.
pub fn paths(errors: &RuleErrors) -> Vec<&str> {
    errors.errors().iter().map(RuleError::path).collect()
}

/// Rules with one `path` entry per item of `limits` (the entry `descriptors[i]` for item
/// `i`), whose rate_limit flow mapping holds the item's fields.
pub fn one_limit_per_path(limits: &[&str]) -> String {
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
pub struct LimitSummary {
    pub descriptor: String,
    pub name: Option<String>,
    pub rate: Rate,
    pub shadow: bool,
    pub on_store_error: OnStoreError,
    pub replaces: Vec<String>,
}

pub fn summary(rules: &Rules) -> Vec<LimitSummary> {
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

pub const SEED: &str = r#"
domain: auth
sources:
  auth_type:
    - { value: login, method: POST, path: /auth/login }
descriptors:
  - key: auth_type
    value: login
    rate_limit: { unit: minute, requests_per_unit: 5 }
"#;

pub const DESIGN: &str = r#"
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
pub const MANY_MISTAKES: &str = r#"
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
  - key: user_id # shares nothing
    value: plain
    share_threshold: true
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
