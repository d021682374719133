//! The `tollgate` command, run as a user runs it: `check` and `explain` on real files.

mod common;

use common::{path, tollgate};

const RULES: &str = r#"
domain: shop
sources:
  user_id: { header: x-user-id }
  api_key: { header: x-api-key }
  endpoint:
    - { value: login, method: POST, path: /auth/login }
client_ip:
  trusted_proxies: [10.0.0.0/8]
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 40, name: per-client, sync_every: 100ms }
  - key: endpoint
    value: login
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 5, algorithm: sliding_window_log, name: login }
  - key: route
    value: /users/{id}
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 10, on_store_error: deny }
  - key: api_key
    value: "internal-*"
    rate_limit: { unlimited: true }
"#;

/// Runs `tollgate <command>` on a file holding `rules`, followed by `args`.
fn tollgate_on(command: &str, rules: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let file = common::temp_file(rules, ".yaml");
    tollgate(&[&[command, path(&file)], args].concat())
}

/// Runs `tollgate explain` on [`RULES`] with `args` describing the request.
fn explain(args: &[&str]) -> (Option<i32>, String, String) {
    tollgate_on("explain", RULES, args)
}

/// A login request from a client that no proxy forwards.
const LOGIN: [&str; 6] = [
    "--method",
    "POST",
    "--path",
    "/auth/login",
    "--ip",
    "203.0.113.9",
];

#[test]
fn check_lists_every_limit_in_an_aligned_table() {
    let (code, text, errors) = tollgate_on("check", RULES, &[]);
    assert_eq!(code, Some(0), "{errors}");
    assert!(text.contains("valid, domain `shop`, 4 limit(s)"), "{text}");
    let lines: Vec<&str> = text.lines().skip(2).collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[0].starts_with("NAME        DESCRIPTOR"), "{text}");
    assert!(
        lines[1].starts_with("per-client  remote_address "),
        "{text}"
    );
    assert!(lines[1].contains("token_bucket"), "{text}");
    assert!(lines[1].contains("20 per 1s, burst 40"), "{text}");
    assert!(
        lines[1].contains("  100ms  "),
        "the interval of a local-first limit: {text}"
    );
    assert!(lines[2].contains("endpoint=login/remote_address"), "{text}");
    assert!(lines[2].contains("5 per 1m"), "{text}");
    let shadow: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(
        shadow,
        [
            "-",
            "route=/users/{id}",
            "fixed_window",
            "10",
            "per",
            "1m",
            "yes",
            "deny",
            "-",
            "-",
            "-"
        ]
    );
    assert!(lines[4].contains("unlimited"), "{text}");
    // Aligned: every row's second column starts where the header's does.
    let column = lines[0].find("DESCRIPTOR").expect("a DESCRIPTOR column");
    for line in &lines[1..] {
        assert_eq!(&line[column - 2..column], "  ", "{line}");
        assert_ne!(&line[column..=column], " ", "{line}");
    }
}

const CONCURRENCY: &str = r#"
domain: shop
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 20 }
    concurrency: { max_in_flight: 5 }
"#;

#[test]
fn check_and_explain_show_concurrency_limits_which_serve_refuses() {
    let (code, text, errors) = tollgate_on("check", CONCURRENCY, &[]);
    assert_eq!(code, Some(0), "{errors}");
    let row = text
        .lines()
        .find(|line| line.contains("concurrency"))
        .unwrap_or_else(|| panic!("a concurrency row: {text}"));
    assert!(row.contains("5 in flight"), "{row}");
    let (code, text, errors) = tollgate_on("explain", CONCURRENCY, &["--ip", "203.0.113.9"]);
    assert_eq!(code, Some(0), "{errors}");
    assert!(
        text.contains(
            "remote_address (concurrency)  remote_address=203.0.113.9  concurrency   5 in flight, lease 30s"
        ),
        "{text}"
    );
    let (code, _, errors) = tollgate_on("check", CONCURRENCY, &["--service"]);
    assert_ne!(code, Some(0));
    assert!(
        errors
            .contains("descriptors[0].concurrency: a rate limit service never sees a request end"),
        "{errors}"
    );
}

#[test]
fn check_reports_every_error_with_its_line_and_column() {
    let file = common::temp_file(
        "domain: shop\ndescriptors:\n  - key: nope\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n  - key: remote_address\n    rate_limit: { unit: second }\n",
        ".yaml",
    );
    let (code, text, errors) = tollgate(&["check", path(&file)]);
    assert_eq!(code, Some(1));
    assert!(text.is_empty());
    let shown = file.path().display().to_string();
    assert!(
        errors.contains("error(s) in the rate-limit rules"),
        "{errors}"
    );
    assert!(errors.contains(&format!("{shown}:3:")), "{errors}");
    assert!(errors.contains("unknown key `nope`"), "{errors}");
    assert!(errors.contains(&format!("{shown}:6:")), "{errors}");
    assert!(errors.contains("requests_per_unit: missing"), "{errors}");
}

#[test]
fn check_and_explain_say_when_nothing_is_enforced() {
    let rules = "domain: shop\nshadow_mode: true\ndescriptors:\n  - key: path\n    rate_limit: { unit: second, requests_per_unit: 1 }\n";
    for command in ["check", "explain"] {
        let (code, text, errors) = tollgate_on(command, rules, &[]);
        assert_eq!(code, Some(0), "{errors}");
        assert!(
            text.contains("shadow_mode: true: every limit only counts and reports"),
            "{text}"
        );
    }
}

#[test]
fn check_marks_every_limit_shadow_under_a_shadow_mode_file() {
    let (code, text, errors) = tollgate_on(
        "check",
        "domain: shop\nshadow_mode: true\ndescriptors:\n  - key: path\n    rate_limit: { unit: second, requests_per_unit: 1 }\n  - key: method\n    shadow_mode: true\n    rate_limit: { unit: second, requests_per_unit: 2 }\n",
        &[],
    );
    assert_eq!(code, Some(0), "{errors}");
    let column = text
        .lines()
        .find_map(|line| line.find("SHADOW"))
        .unwrap_or_else(|| panic!("no SHADOW column in {text}"));
    let shadow: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.starts_with("NAME"))
        .skip(1)
        .map(|line| line[column..].split("  ").next().unwrap_or_default())
        .collect();
    assert_eq!(shadow, ["yes (file)", "yes"], "{text}");
}

#[test]
fn check_reports_a_file_that_cannot_be_read() {
    let (code, _, errors) = tollgate(&["check", "/nonexistent/rules.yaml"]);
    assert_eq!(code, Some(1));
    assert!(errors.contains("cannot read the rules file"));
}

#[test]
fn usage_errors_exit_with_2() {
    assert_eq!(tollgate(&[]).0, Some(2));
    assert_eq!(tollgate(&["check"]).0, Some(2));
    assert_eq!(tollgate(&["frobnicate"]).0, Some(2));
    let (code, _, errors) = explain(&["--header", "no separator"]);
    assert_eq!(code, Some(2), "{errors}");
    let (code, _, errors) = explain(&["--method", "BAD METHOD"]);
    assert_eq!(code, Some(2), "{errors}");
}

#[test]
fn explain_lists_the_limits_a_request_meets_with_their_state_keys() {
    let (code, text, errors) = explain(&LOGIN);
    assert_eq!(code, Some(0), "{errors}");
    assert!(text.contains("request: POST /auth/login"), "{text}");
    assert!(text.contains("client:  203.0.113.9\n"), "{text}");
    assert!(text.contains("2 limits apply"), "{text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|line| !line.starts_with("LIMIT"))
        .skip(1)
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec![
                "per-client",
                "remote_address=203.0.113.9",
                "token_bucket",
                "20",
                "per",
                "1s,",
                "burst",
                "40"
            ],
            vec![
                "login",
                "endpoint=login/remote_address=203.0.113.9",
                "sliding_window_log",
                "5",
                "per",
                "1m"
            ],
        ]
    );
}

#[test]
fn explain_says_when_no_limit_applies() {
    let (code, text, errors) = tollgate_on(
        "explain",
        "domain: shop\ndescriptors:\n  - key: path\n    value: /search\n    rate_limit: { unit: second, requests_per_unit: 1 }\n",
        &["--path", "/home"],
    );
    assert_eq!(code, Some(0), "{errors}");
    assert!(text.contains("result:  no limit applies"), "{text}");
    assert!(text.contains("client:  unknown (no --ip)"), "{text}");
    assert!(!text.contains("LIMIT"), "{text}");
}

#[test]
fn explain_says_when_a_request_is_exempt() {
    let (code, text, errors) =
        explain(&[&LOGIN[..], &["--header", "x-api-key: internal-batch"]].concat());
    assert_eq!(code, Some(0), "{errors}");
    assert!(text.contains("exempt (unlimited)"), "{text}");
    assert!(text.contains("api_key=internal-batch"), "{text}");
    assert!(text.contains("`api_key=internal-*`"), "{text}");
    assert!(!text.contains("LIMIT"), "{text}");
}

#[test]
fn explain_reads_the_forwarded_client_behind_a_trusted_proxy() {
    let forwarded = ["--header", "x-forwarded-for=198.51.100.7"];
    let (code, text, errors) = explain(&[&["--ip", "10.0.0.1"], &forwarded[..]].concat());
    assert_eq!(code, Some(0), "{errors}");
    assert!(
        text.contains("client:  198.51.100.7 (forwarded by the trusted proxy 10.0.0.1)"),
        "{text}"
    );
    assert!(text.contains("remote_address=198.51.100.7"), "{text}");

    // From an untrusted peer, the header is the client's own claim: ignored.
    let (code, text, errors) = explain(&[&["--ip", "203.0.113.9"], &forwarded[..]].concat());
    assert_eq!(code, Some(0), "{errors}");
    assert!(text.contains("remote_address=203.0.113.9"), "{text}");
    assert!(!text.contains("198.51.100.7"), "{text}");
}

#[test]
fn explain_matches_the_route_and_marks_shadow_limits() {
    let (code, text, errors) = explain(&[
        "--path",
        "/users/42",
        "--route",
        "/users/{id}",
        "--ip",
        "203.0.113.9",
    ]);
    assert_eq!(code, Some(0), "{errors}");
    let row = text
        .lines()
        .find(|line| line.contains("route=/users/{id}"))
        .unwrap_or_else(|| panic!("no route limit in {text}"));
    assert!(row.contains("shadow: counted, never denies"), "{row}");

    let (code, _, errors) = explain(&[
        "--path",
        "/posts",
        "--route",
        "/users/{id}",
        "--ip",
        "203.0.113.9",
    ]);
    assert_eq!(code, Some(2));
    assert!(errors.contains("does not match --route"), "{errors}");
    let (code, _, errors) = explain(&["--route", "users/:id", "--ip", "203.0.113.9"]);
    assert_eq!(code, Some(2));
    assert!(errors.contains("--route users/:id"), "{errors}");
}

#[test]
fn explain_asks_for_the_client_address_when_the_rules_need_it() {
    let (code, _, errors) = explain(&["--path", "/"]);
    assert_eq!(code, Some(2));
    assert!(errors.contains("--ip"), "{errors}");
}

#[test]
fn explain_reports_invalid_rules_like_check() {
    let (code, _, errors) = tollgate_on(
        "explain",
        "domain: shop\ndescriptors:\n  - key: nope\n",
        &["--ip", "192.0.2.1"],
    );
    assert_eq!(code, Some(1));
    assert!(errors.contains(":3:"), "{errors}");
}

#[test]
fn check_shows_an_approximate_limits_memory_and_error_bound() {
    let rules = r#"
domain: flood
descriptors:
  - key: remote_address
    rate_limit: { name: per-client, unit: minute, requests_per_unit: 100, approximate: { memory: 4MiB } }
"#;
    let (code, text, errors) = tollgate_on("check", rules, &[]);
    assert_eq!(code, Some(0), "{errors}");
    // 1,000,000 requests × 4 cells ÷ (65,536 lines × 14 cells) × e.
    assert!(text.contains("  4MiB, +11.9  "), "{text}");
    assert!(text.contains("at 1,000,000 keys"), "{text}");
}

#[test]
fn check_service_takes_an_envoy_ratelimit_file_as_is_and_says_how_it_is_read() {
    let envoy = r#"
domain: edge
descriptors:
  - key: generic_key
    value: login
    detailed_metric: true
    descriptors:
      - key: remote_address
        rate_limit: { unit: MINUTE, requests_per_unit: 5 }
"#;
    // For the layer it is wrong, and the error says how to check it for the service.
    let (code, _, errors) = tollgate_on("check", envoy, &[]);
    assert_eq!(code, Some(1));
    assert!(errors.contains("unknown key `generic_key`"), "{errors}");
    assert!(errors.contains("tollgate check --service"), "{errors}");
    let (code, text, errors) = tollgate_on("check", envoy, &["--service"]);
    assert_eq!(code, Some(0), "{errors}");
    assert!(text.contains("valid, domain `edge`, 1 limit(s)"), "{text}");
    assert!(text.contains("fixed_window"), "{text}");
    assert!(
        text.contains("The layer cannot read `generic_key`"),
        "{text}"
    );
    assert!(
        text.contains("charges none of the others (all or nothing)"),
        "{text}"
    );
}

#[test]
fn check_and_explain_show_a_block() {
    const BLOCKED: &str = r#"
domain: shop
sources: { user: { header: x-user-id } }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3, block_for: 15m }
"#;
    let (code, text, errors) = tollgate_on("check", BLOCKED, &[]);
    assert_eq!(code, Some(0), "{errors}");
    assert!(text.contains("3 per 1m, block 15m"), "{text}");
    let (code, text, errors) = tollgate_on("explain", BLOCKED, &["--header", "x-user-id:ann"]);
    assert_eq!(code, Some(0), "{errors}");
    assert!(text.contains("3 per 1m, block 15m"), "{text}");
    let (code, _, errors) = tollgate_on("check", BLOCKED, &["--service"]);
    assert_ne!(code, Some(0));
    assert!(errors.contains("block_for works in the layer"), "{errors}");
}

#[test]
fn check_shows_a_calendar_quota() {
    const PLAN: &str = r#"
domain: api
sources: { customer: { header: x-customer-id } }
descriptors:
  - key: customer
    rate_limit: { unit: month, requests_per_unit: 10000, calendar: true, time_zone: Europe/Paris }
"#;
    let (code, text, errors) = tollgate_on("check", PLAN, &[]);
    assert_eq!(code, Some(0), "{errors}");
    assert!(
        text.contains("10000 per calendar month in Europe/Paris"),
        "{text}"
    );
}

#[test]
fn check_shows_settlements() {
    const SETTLED: &str = r#"
domain: llm
sources: { user: { header: x-user-id } }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000, settle: { response_header: x-tokens-used } }
  - key: remote_address
    rate_limit: { period: 15m, requests_per_unit: 5, count_when: { status: [401, 5xx] } }
"#;
    let (code, text, errors) = tollgate_on("check", SETTLED, &[]);
    assert_eq!(code, Some(0), "{errors}");
    assert!(
        text.contains("1000 per 1m, settles from x-tokens-used"),
        "{text}"
    );
    assert!(text.contains("5 per 15m, counts 401, 5xx"), "{text}");
}
