//! The demo server (`examples/server.rs`, a process) answers what a request's query asks:
//! a status, response headers, a delay. `cargo test` builds it; `cargo test --test demo`
//! does not: build it first (`cargo build --example server`).

#![cfg(all(feature = "axum", feature = "reload"))]

mod common;

use common::demo::DemoServer;
use common::server;
use http::StatusCode;
use std::time::{Duration, Instant};

const RULES: &str = r#"
domain: demo
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 100 }
"#;

#[tokio::test]
async fn the_demo_answers_the_status_headers_and_delay_its_query_asks() {
    let demo = DemoServer::start(RULES);
    let asked = server::get(
        demo.addr,
        "/login?status=401&header=x-tokens-used:300&header=x-other:yes",
        &[],
    )
    .await;
    assert_eq!(asked.status, StatusCode::UNAUTHORIZED);
    assert_eq!(asked.header("x-tokens-used"), Some("300"));
    assert_eq!(asked.header("x-other"), Some("yes"));
    assert_eq!(
        asked.number("x-ratelimit-limit"),
        100,
        "limited as any request"
    );

    let plain = server::get(demo.addr, "/anything", &[]).await;
    assert_eq!(plain.status, StatusCode::OK);

    for query in ["status=42", "status=ok", "header=no-colon", "header=a@b:1"] {
        let refused = server::get(demo.addr, &format!("/?{query}"), &[]).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{query}");
        assert!(refused.body.contains(query), "{query}: {}", refused.body);
    }

    let started = Instant::now();
    let delayed = server::get(demo.addr, "/?delay_ms=200&status=503", &[]).await;
    assert_eq!(delayed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(started.elapsed() >= Duration::from_millis(200));
}
