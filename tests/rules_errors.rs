//! Rules files with mistakes: every mistake reported at once, in the order of the file, each
//! with its line, column and path; YAML that does not fit the format; rules that do not fit
//! together.

use tollgate::rules::Rules;

#[path = "common/rules.rs"]
mod rules_common;

use rules_common::*;

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
        ("descriptors[3]", line_of(text, "# shares nothing"), None),
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
