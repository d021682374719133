//! `tollgate simulate`, run as a user runs it, on real files: each trace format, bad and
//! out-of-order lines, every algorithm, the comparison, the diff, and repeatable output.

mod common;

use common::{path, temp_file, tollgate};
use serde_json::Value;
use std::process::Command;

/// Five requests a second per client (fixed window), and a per-user limit from a header.
const FIVE_A_SECOND: &str = r"
domain: sim
sources:
  user: { header: x-user-id }
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 5, name: per-client }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2, name: per-user }
";

/// The same, with ten a second per client.
const TEN_A_SECOND: &str = r"
domain: sim
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 10, name: per-client }
";

/// `tollgate simulate RULES --trace TRACE --json ARGS...`, parsed; panics unless it succeeds.
fn simulate_json(rules: &str, trace: &str, suffix: &str, args: &[&str]) -> Value {
    let (rules, trace) = (temp_file(rules, ".yaml"), temp_file(trace, suffix));
    let base = ["simulate", path(&rules), "--trace", path(&trace), "--json"];
    let (code, out, err) = tollgate(&[&base[..], args].concat());
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str(&out).expect("JSON")
}

/// The figures of limit `label` in the run of `rules` (a path ending as given, or "as
/// written" for the first).
fn limit<'v>(report: &'v Value, label: &str, nth: usize) -> &'v Value {
    report["limits"]
        .as_array()
        .expect("limits")
        .iter()
        .filter(|limit| limit["limit"] == label)
        .nth(nth)
        .unwrap_or_else(|| panic!("no {label} #{nth} in {report:#}"))
}

/// Counts of one limit: (seen, admitted, denied, delayed).
fn counts(limit: &Value) -> (u64, u64, u64, u64) {
    let n = |field: &str| limit[field].as_u64().expect(field);
    (n("seen"), n("admitted"), n("denied"), n("delayed"))
}

/// Ten requests from 203.0.113.9 within its first second, then one two seconds later, as JSON
/// lines; the third from user 42.
fn json_trace() -> String {
    let mut lines = String::new();
    for i in 0..10 {
        let user = if i == 2 {
            r#", "headers": {"x-user-id": "42"}"#
        } else {
            ""
        };
        lines.push_str(&format!(
            r#"{{"ts": "2026-11-27T10:00:00.{:03}Z", "method": "GET", "path": "/a", "ip": "203.0.113.9"{user}}}"#,
            i * 50
        ));
        lines.push('\n');
    }
    lines.push_str(r#"{"ts": 1795773602.5, "path": "/b", "ip": "203.0.113.9"}"#);
    lines.push('\n');
    lines
}

#[test]
fn json_lines_replay_through_every_limit() {
    let report = simulate_json(FIVE_A_SECOND, &json_trace(), ".jsonl", &[]);
    assert_eq!(report["requests"], 11);
    assert_eq!(report["unlimited"], 0);
    assert_eq!(counts(limit(&report, "per-client", 0)), (11, 6, 5, 0));
    assert_eq!(counts(limit(&report, "per-user", 0)), (1, 1, 0, 0));
    let client = limit(&report, "per-client", 0);
    assert_eq!(client["keys"], 1);
    assert_eq!(client["top_denied"][0]["key"], "remote_address=203.0.113.9");
    assert_eq!(client["top_denied"][0]["denied"], 5);
}

#[test]
fn combined_logs_replay_with_their_client_and_time() {
    let mut log = String::new();
    for i in 0..8 {
        let ip = if i < 6 { "198.51.100.7" } else { "2001:db8::1" };
        log.push_str(&format!(
            "{ip} - - [27/Nov/2026:11:00:00 +0100] \"GET /p?{i} HTTP/1.1\" 200 12 \"-\" \"curl/8\"\n"
        ));
    }
    let report = simulate_json(FIVE_A_SECOND, &log, ".log", &[]);
    assert_eq!(report["first"], "2026-11-27T10:00:00.000Z");
    assert_eq!(counts(limit(&report, "per-client", 0)), (8, 7, 1, 0));
    assert_eq!(limit(&report, "per-client", 0)["keys"], 2);
}

#[test]
fn csv_columns_beyond_the_fields_are_headers() {
    let csv = "ts,method,path,ip,x-user-id\n\
               1795773600,GET,/,203.0.113.1,7\n\
               1795773601,GET,/,203.0.113.2,7\n\
               1795773602,GET,/,203.0.113.3,7\n\
               1795773603,GET,/,203.0.113.4,\n";
    let report = simulate_json(FIVE_A_SECOND, csv, ".csv", &[]);
    assert_eq!(counts(limit(&report, "per-user", 0)), (3, 2, 1, 0));
    assert_eq!(counts(limit(&report, "per-client", 0)), (4, 3, 0, 0));
}

#[test]
fn unreadable_lines_are_reported_and_skipped_or_stop_a_strict_run() {
    let trace = "{\"ts\": 1795773600, \"ip\": \"203.0.113.9\"}\n\
                 not json at all\n\
                 {\"ts\": 1795773600, \"ip\": \"nowhere\"}\n\
                 {\"ts\": 1795773601, \"ip\": \"203.0.113.9\"}\n";
    let (rules, trace) = (
        temp_file(FIVE_A_SECOND, ".yaml"),
        temp_file(trace, ".jsonl"),
    );
    let args = [
        "simulate",
        path(&rules),
        "--trace",
        path(&trace),
        "--format",
        "jsonl",
    ];
    let (code, out, err) = tollgate(&args);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("line 2: "), "{err}");
    assert!(err.contains("line 3: "), "{err}");
    assert!(out.starts_with("2 request(s)"), "{out}");
    assert!(out.contains("2 unreadable line(s) skipped"), "{out}");

    let (code, out, err) = tollgate(&[&args[..], &["--strict"]].concat());
    assert_eq!(code, Some(1));
    assert!(err.contains("line 2: "), "{err}");
    assert!(out.is_empty(), "{out}");
}

#[test]
fn lines_out_of_time_order_stop_the_run_with_their_number() {
    let trace = "{\"ts\": 1795773605, \"ip\": \"203.0.113.9\"}\n\
                 {\"ts\": 1795773605, \"ip\": \"203.0.113.9\"}\n\
                 {\"ts\": 1795773604, \"ip\": \"203.0.113.9\"}\n";
    let (rules, trace) = (
        temp_file(FIVE_A_SECOND, ".yaml"),
        temp_file(trace, ".jsonl"),
    );
    let (code, _, err) = tollgate(&["simulate", path(&rules), "--trace", path(&trace)]);
    assert_eq!(code, Some(1));
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("out of time order"), "{err}");
}

/// Twenty requests from one client at one instant.
fn twenty_at_once() -> String {
    "{\"ts\": 1795773600, \"ip\": \"203.0.113.9\"}\n".repeat(20)
}

#[test]
fn every_algorithm_admits_its_capacity_of_a_burst() {
    let rules = r"
domain: sim
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 5, name: per-client }
";
    let report = simulate_json(
        rules,
        &twenty_at_once(),
        ".jsonl",
        &["--compare-algorithms"],
    );
    // As written (fixed window), then token bucket, leaky bucket, fixed window, sliding
    // window log, sliding window counter and GCRA, each with 5 a second.
    let expected = [
        ("fixed_window", (20, 5, 15, 0)),
        ("token_bucket", (20, 5, 15, 0)),
        ("leaky_bucket", (20, 5, 15, 4)),
        ("fixed_window", (20, 5, 15, 0)),
        ("sliding_window_log", (20, 5, 15, 0)),
        ("sliding_window_counter", (20, 5, 15, 0)),
        ("gcra", (20, 5, 15, 0)),
    ];
    for (nth, (algorithm, figures)) in expected.into_iter().enumerate() {
        let limit = limit(&report, "per-client", nth);
        assert_eq!(limit["algorithm"], algorithm, "{limit:#}");
        assert_eq!(counts(limit), figures, "{algorithm}");
    }
    // The leaky bucket releases its queue one request every 200 ms.
    let leaky = limit(&report, "per-client", 2);
    assert_eq!(leaky["delay_p50_ms"], 400.0);
    assert_eq!(leaky["delay_p99_ms"], 800.0);
}

#[test]
fn against_other_rules_counts_the_requests_that_change_verdict() {
    let other = temp_file(TEN_A_SECOND, ".yaml");
    let report = simulate_json(
        FIVE_A_SECOND,
        &twenty_at_once(),
        ".jsonl",
        &["--against", path(&other)],
    );
    let against = &report["against"];
    assert_eq!(against["changed"], 5);
    assert_eq!(against["limits"][0]["limit"], "per-client");
    assert_eq!(against["limits"][0]["changes"]["denied → admitted"], 5);
    assert_eq!(against["limits"][0]["examples"][0]["request"], 6);
}

#[test]
fn the_same_input_gives_the_same_output_byte_for_byte() {
    let (rules, trace) = (
        temp_file(FIVE_A_SECOND, ".yaml"),
        temp_file(&json_trace(), ".jsonl"),
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    let run = |plot: &str| {
        let plot = dir.path().join(plot);
        let plot = plot.to_str().expect("UTF-8");
        let args = [
            "simulate",
            path(&rules),
            "--trace",
            path(&trace),
            "--compare-algorithms",
            "--plot",
            plot,
        ];
        let (code, out, err) = tollgate(&args);
        assert_eq!(code, Some(0), "{err}");
        (out, std::fs::read(plot).expect("the plot is written"))
    };
    let (first, first_plot) = run("one.svg");
    let (second, second_plot) = run("two.svg");
    assert_eq!(first, second);
    assert_eq!(first_plot, second_plot);
    assert!(first_plot.starts_with(b"<svg") || first_plot.starts_with(b"<?xml"));
    let (_, png) = run("three.png");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    let (_, html) = run("four.html");
    assert!(String::from_utf8_lossy(&html).contains("<svg"));
}

#[test]
fn the_text_report_has_a_table_and_the_most_denied_keys() {
    let (rules, trace) = (
        temp_file(FIVE_A_SECOND, ".yaml"),
        temp_file(&json_trace(), ".jsonl"),
    );
    let (code, out, err) = tollgate(&[
        "simulate",
        path(&rules),
        "--trace",
        path(&trace),
        "--verbose",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with(
            "11 request(s) from 2026-11-27T10:00:00.000Z to 2026-11-27T10:00:02.500Z (2.500 s)\n"
        ),
        "{out}"
    );
    let row = out
        .lines()
        .find(|line| line.starts_with("per-client "))
        .expect("a row for per-client");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "per-client",
            "fixed_window",
            "5",
            "per",
            "1s",
            "11",
            "6",
            "5",
            "0",
            "-",
            "-",
            "1"
        ],
        "{row}"
    );
    assert!(out.contains("remote_address=203.0.113.9"), "{out}");
    assert!(
        out.contains("#6 2026-11-27T10:00:00.250Z GET /a from 203.0.113.9: denied (per-client)"),
        "{out}"
    );
}

#[test]
fn synthetic_traffic_repeats_with_its_seed() {
    let rules = temp_file(FIVE_A_SECOND, ".yaml");
    let run = |seed: &str| {
        let args = [
            "simulate",
            path(&rules),
            "--synthetic",
            "zipf",
            "--rate",
            "50",
            "--seconds",
            "10",
            "--clients",
            "20",
            "--seed",
            seed,
            "--json",
        ];
        let (code, out, err) = tollgate(&args);
        assert_eq!(code, Some(0), "{err}");
        out
    };
    assert_eq!(run("7"), run("7"));
    let limits = |out: String| serde_json::from_str::<Value>(&out).expect("JSON")["limits"].clone();
    assert_ne!(
        limits(run("7")),
        limits(run("8")),
        "another seed, other traffic"
    );
    let report: Value = serde_json::from_str(&run("7")).expect("JSON");
    let requests = report["requests"].as_u64().expect("a count");
    assert!(
        (400..=600).contains(&requests),
        "about 500 requests, got {requests}"
    );
}

#[test]
fn a_missing_trace_and_pattern_is_a_usage_error() {
    let rules = temp_file(FIVE_A_SECOND, ".yaml");
    let (code, _, err) = tollgate(&["simulate", path(&rules)]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = tollgate(&["simulate", path(&rules), "--synthetic", "sawtooth"]);
    assert_eq!(code, Some(2), "{err}");
    let steady = ["simulate", path(&rules), "--synthetic", "steady"];
    for wrong in [
        &["--rate", "0"][..],
        &["--path", "api/items"],
        &["--plot", "out.gif"],
    ] {
        let (code, out, err) = tollgate(&[&steady[..], wrong].concat());
        assert_eq!(code, Some(2), "{wrong:?}: {err}");
        assert!(out.is_empty(), "nothing replayed: {out}");
    }
}

#[test]
fn each_limit_counts_what_it_decided_itself() {
    // A burst of 20 through an enforced limit of 5 and two shadow-mode ones, of 2 and 8.
    let rules = r"
domain: sim
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 5, name: five }
  - key: method
    shadow_mode: true
    rate_limit: { unit: second, requests_per_unit: 2, name: two }
  - key: path
    shadow_mode: true
    rate_limit: { unit: second, requests_per_unit: 8, name: eight }
";
    let report = simulate_json(rules, &twenty_at_once(), ".jsonl", &[]);
    assert_eq!(counts(limit(&report, "five", 0)), (20, 5, 15, 0));
    // `two` would refuse from the 3rd on; `eight` never would: the 5 admitted are all it
    // counted (all or nothing: the refused ones charge no limit).
    assert_eq!(counts(limit(&report, "two", 0)), (20, 2, 18, 0));
    assert_eq!(counts(limit(&report, "eight", 0)), (20, 5, 0, 0));

    // Two enforced limits: once the lower refuses, the higher is charged nothing more, and
    // so never refuses.
    let rules = r"
domain: sim
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 5, name: five }
  - key: method
    rate_limit: { unit: second, requests_per_unit: 3, name: three }
";
    let report = simulate_json(rules, &twenty_at_once(), ".jsonl", &[]);
    assert_eq!(counts(limit(&report, "three", 0)), (20, 3, 17, 0));
    assert_eq!(counts(limit(&report, "five", 0)), (20, 3, 0, 0));

    // Two shaping leaky buckets: each counts the delays of its own queue.
    let rules = r"
domain: sim
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 5, algorithm: leaky_bucket, queue: 10, name: slow }
  - key: method
    rate_limit: { unit: second, requests_per_unit: 100, algorithm: leaky_bucket, queue: 10, name: fast }
";
    let report = simulate_json(
        rules,
        &"{\"ts\": 1795773600, \"ip\": \"203.0.113.9\"}\n".repeat(4),
        ".jsonl",
        &[],
    );
    assert_eq!(counts(limit(&report, "slow", 0)), (4, 4, 0, 3));
    assert_eq!(limit(&report, "slow", 0)["delay_p99_ms"], 600.0);
    assert_eq!(limit(&report, "fast", 0)["delay_p99_ms"], 30.0);
}

/// The guide's worked example (`tollgate::guide::simulate`) shows what the command prints
/// and draws today. `UPDATE_GUIDE=1 cargo test -p tollgate-cli --test simulate` rewrites it.
#[test]
fn the_guide_s_worked_example_is_what_simulate_shows() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let traces = root.join("examples/traces");
    let guide = root.join("src/guide");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let plot = dir.path().join("bursty.svg");
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .current_dir(&traces)
            .args(args)
            .output()
            .expect("the tollgate binary runs");
        assert!(output.status.success(), "{output:?}");
        output.stdout
    };
    let common = ["simulate", "per-client.yaml", "--trace", "bursty.jsonl"];
    let compare = run(&[&common[..], &["--compare-algorithms"]].concat());
    let plot_arg = plot.to_str().expect("a UTF-8 path");
    let against = run(&[
        &common[..],
        &["--against", "per-client-burst.yaml", "--plot", plot_arg],
    ]
    .concat());
    let drawn = std::fs::read(&plot).expect("the plot is written");
    let shown = [
        ("simulate-compare.txt", compare),
        ("simulate-against.txt", against),
        ("simulate-bursty.svg", drawn),
    ];
    for (name, now) in shown {
        let path = guide.join(name);
        if std::env::var_os("UPDATE_GUIDE").is_some() {
            std::fs::write(&path, &now).expect("the guide is written");
        }
        let written = std::fs::read(&path).expect("the guide's file");
        assert!(
            written == now,
            "src/guide/{name} is not what tollgate simulate shows now: run UPDATE_GUIDE=1 cargo test -p tollgate-cli --test simulate"
        );
    }
}

/// Two requests at once per client, each holding its slot as long as the trace says it ran.
const TWO_AT_ONCE: &str = r"
domain: sim
descriptors:
  - key: remote_address
    concurrency: { max_in_flight: 2, name: running }
";

/// Requests of 2 s at 0, 0.1 and 0.2 s (the third finds both slots held), one at 2.1 s (the
/// first has ended), and one without a duration (it holds nothing).
#[test]
fn concurrency_limits_replay_the_durations_of_every_format() {
    let json = r#"{"ts": 1795773600.0, "ip": "203.0.113.9", "duration_ms": 2000}
{"ts": 1795773600.1, "ip": "203.0.113.9", "duration_ms": "2000"}
{"ts": 1795773600.2, "ip": "203.0.113.9", "duration_ms": 2000}
{"ts": 1795773602.1, "ip": "203.0.113.9", "duration_ms": 0.5}
{"ts": 1795773602.1, "ip": "203.0.113.9"}
"#;
    let csv = "ts,ip,duration_ms\n\
               1795773600.0,203.0.113.9,2000\n\
               1795773600.1,203.0.113.9,2000\n\
               1795773600.2,203.0.113.9,2000\n\
               1795773602.1,203.0.113.9,0.5\n\
               1795773602.1,203.0.113.9,\n";
    let line = |second: &str, time: &str| {
        format!(
            "203.0.113.9 - - [27/Nov/2026:10:00:{second} +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"curl/8\" {time}\n"
        )
    };
    let log = [
        line("00", "2.000"),
        line("00", "2.000"),
        line("00", "2.000"),
        line("03", "0.001"),
        line("03", "-"),
    ]
    .concat();
    for (trace, suffix) in [(json, ".jsonl"), (csv, ".csv"), (log.as_str(), ".log")] {
        let report = simulate_json(TWO_AT_ONCE, trace, suffix, &[]);
        assert_eq!(
            counts(limit(&report, "running", 0)),
            (5, 4, 1, 0),
            "{suffix}: {report:#}"
        );
    }
    // Without durations, no request is running when the next arrives.
    let instant = json.replace(", \"duration_ms\": 2000", "");
    let report = simulate_json(TWO_AT_ONCE, &instant, ".jsonl", &[]);
    assert_eq!(counts(limit(&report, "running", 0)), (5, 5, 0, 0));
}

#[test]
fn a_block_and_a_calendar_month_replay_on_the_trace_s_time() {
    // Three a second and a block of 5 s: the burst's fourth starts it, and the request
    // 2.5 s later is still blocked though its second is new.
    let blocked = simulate_json(
        "domain: sim\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: second, requests_per_unit: 3, block_for: 5s }\n",
        &json_trace(),
        ".jsonl",
        &[],
    );
    assert_eq!(counts(limit(&blocked, "remote_address", 0)), (11, 3, 8, 0));
    // Ten a calendar day in Tokyo: 10:00 UTC is 19:00 there, all on one day.
    let daily = simulate_json(
        "domain: sim\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: day, requests_per_unit: 10, calendar: true, time_zone: Asia/Tokyo }\n",
        &json_trace(),
        ".jsonl",
        &[],
    );
    assert_eq!(counts(limit(&daily, "remote_address", 0)), (11, 10, 1, 0));
}

#[test]
fn outcomes_and_settled_costs_replay_from_the_trace_s_responses() {
    const FAILURES: &str = "domain: sim\ndescriptors:\n  - key: remote_address\n    rate_limit: { period: 15m, requests_per_unit: 2, count_when: { status: [401] } }\n";
    // A success, two failures, then three attempts refused: the limit is used up.
    let statuses = [200, 401, 401, 200, 401, 200];
    let mut jsonl = String::new();
    let mut csv = String::from("ts,ip,status\n");
    let mut combined = String::new();
    for (i, status) in statuses.iter().enumerate() {
        jsonl.push_str(&format!(
            "{{\"ts\": 1795773600.{i}, \"ip\": \"203.0.113.9\", \"status\": {status}}}\n"
        ));
        csv.push_str(&format!("1795773600.{i},203.0.113.9,{status}\n"));
        combined.push_str(&format!(
            "203.0.113.9 - - [27/Nov/2026:10:00:0{i} +0000] \"GET / HTTP/1.1\" {status} 12\n"
        ));
    }
    for (trace, suffix) in [(&jsonl, ".jsonl"), (&csv, ".csv"), (&combined, ".log")] {
        let report = simulate_json(FAILURES, trace, suffix, &[]);
        assert_eq!(
            counts(limit(&report, "remote_address", 0)),
            (6, 3, 3, 0),
            "{suffix}"
        );
    }
    // 1,000 tokens an hour, answers of 300 (a response header): four admitted, then none.
    const TOKENS: &str = "domain: sim\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: hour, requests_per_unit: 1000, settle: { response_header: x-tokens-used } }\n";
    let mut answers = String::from("ts,ip,response:x-tokens-used\n");
    for i in 0..6 {
        answers.push_str(&format!("1795773600.{i},203.0.113.9,300\n"));
    }
    let report = simulate_json(TOKENS, &answers, ".csv", &[]);
    assert_eq!(counts(limit(&report, "remote_address", 0)), (6, 4, 2, 0));
}
