//! The `tollgate` command, run as a user runs it: `check` and `explain` on real files.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

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
    rate_limit: { unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 40, name: per-client }
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

/// Writes `text` to a file of its own in the temporary directory.
fn rules_file(text: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "tollgate-cli-{}-{}.yaml",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let path = std::env::temp_dir().join(name);
    std::fs::write(&path, text).expect("a writable temporary directory");
    path
}

fn tollgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(args)
        .output()
        .expect("the tollgate binary runs")
}

/// Runs `tollgate explain` on [`RULES`] with `args` describing the request.
fn explain(args: &[&str]) -> (Option<i32>, String, String) {
    let file = rules_file(RULES);
    let file = file.to_str().expect("a UTF-8 temporary path");
    let output = tollgate(&[&["explain", file], args].concat());
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn check_lists_every_limit_in_an_aligned_table() {
    let file = rules_file(RULES);
    let output = tollgate(&["check", file.to_str().expect("a UTF-8 path")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
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

#[test]
fn check_reports_every_error_with_its_line_and_column() {
    let file = rules_file(
        "domain: shop\ndescriptors:\n  - key: nope\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n  - key: remote_address\n    rate_limit: { unit: second }\n",
    );
    let output = tollgate(&["check", file.to_str().expect("a UTF-8 path")]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).is_empty());
    let errors = stderr(&output);
    let shown = file.display().to_string();
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
    let file = rules_file(
        "domain: shop\nshadow_mode: true\ndescriptors:\n  - key: path\n    rate_limit: { unit: second, requests_per_unit: 1 }\n",
    );
    let file = file.to_str().expect("a UTF-8 path");
    for output in [tollgate(&["check", file]), tollgate(&["explain", file])] {
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert!(
            stdout(&output).contains("shadow_mode: true: every limit only counts and reports"),
            "{}",
            stdout(&output)
        );
    }
}

#[test]
fn check_marks_every_limit_shadow_under_a_shadow_mode_file() {
    let file = rules_file(
        "domain: shop\nshadow_mode: true\ndescriptors:\n  - key: path\n    rate_limit: { unit: second, requests_per_unit: 1 }\n  - key: method\n    shadow_mode: true\n    rate_limit: { unit: second, requests_per_unit: 2 }\n",
    );
    let output = tollgate(&["check", file.to_str().expect("a UTF-8 path")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
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
    let output = tollgate(&["check", "/nonexistent/rules.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("cannot read the rules file"));
}

#[test]
fn usage_errors_exit_with_2() {
    assert_eq!(tollgate(&[]).status.code(), Some(2));
    assert_eq!(tollgate(&["check"]).status.code(), Some(2));
    assert_eq!(tollgate(&["frobnicate"]).status.code(), Some(2));
    let (code, _, errors) = explain(&["--header", "no separator"]);
    assert_eq!(code, Some(2), "{errors}");
    let (code, _, errors) = explain(&["--method", "BAD METHOD"]);
    assert_eq!(code, Some(2), "{errors}");
}

#[test]
fn explain_lists_the_limits_a_request_meets_with_their_state_keys() {
    let (code, text, errors) = explain(&[
        "--method",
        "POST",
        "--path",
        "/auth/login",
        "--ip",
        "203.0.113.9",
    ]);
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
    let rules = rules_file(
        "domain: shop\ndescriptors:\n  - key: path\n    value: /search\n    rate_limit: { unit: second, requests_per_unit: 1 }\n",
    );
    let output = tollgate(&[
        "explain",
        rules.to_str().expect("a UTF-8 path"),
        "--path",
        "/home",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("result:  no limit applies"), "{text}");
    assert!(text.contains("client:  unknown (no --ip)"), "{text}");
    assert!(!text.contains("LIMIT"), "{text}");
}

#[test]
fn explain_says_when_a_request_is_exempt() {
    let (code, text, errors) = explain(&[
        "--path",
        "/auth/login",
        "--method",
        "POST",
        "--ip",
        "203.0.113.9",
        "--header",
        "x-api-key: internal-batch",
    ]);
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
    let file = rules_file("domain: shop\ndescriptors:\n  - key: nope\n");
    let output = tollgate(&[
        "explain",
        file.to_str().expect("a UTF-8 path"),
        "--ip",
        "192.0.2.1",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains(":3:"), "{}", stderr(&output));
}
