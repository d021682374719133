//! Shadow rollout over real TCP: with every limit in shadow mode (the rules file's top-level
//! `shadow_mode`, or `Limiter::set_shadow_mode` at run time) nothing is denied, and requests
//! that would have been are marked for the application.

mod common;

use axum::routing::get;
use axum::{Extension, Router};
use common::server::{self, serve};
use http::StatusCode;
use tollgate::clock::ManualClock;
use tollgate::layer::ShadowDenied;
use tollgate::rules::Rules;
use tollgate::store::MemoryStore;
use tollgate::{Limiter, RateLimitLayer};

type TestLimiter = Limiter<MemoryStore<ManualClock>>;

fn limiter(yaml: &str) -> TestLimiter {
    let rules = Rules::from_yaml(yaml).expect("valid rules");
    Limiter::with_store(rules, MemoryStore::with_clock(ManualClock::new()))
}

/// Answers `would deny` for requests marked [`ShadowDenied`], else `ok`.
fn app(limiter: TestLimiter) -> Router {
    let handler = |shadow: Option<Extension<ShadowDenied>>| async move {
        if shadow.is_some() {
            "would deny"
        } else {
            "ok"
        }
    };
    Router::new()
        .route("/", get(handler))
        .layer(RateLimitLayer::new(limiter))
}

const RULES: &str = r#"
domain: rollout
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: method
    value: GET
    rate_limit: { unit: second, requests_per_unit: 0, name: closed }
"#;

async fn replies(addr: std::net::SocketAddr, count: usize) -> Vec<(StatusCode, String)> {
    let mut replies = Vec::new();
    for _ in 0..count {
        let reply = server::get(addr, "/", &[]).await;
        assert!(
            reply.headers.get("x-ratelimit-limit").is_none(),
            "limits in shadow mode send no rate-limit headers"
        );
        replies.push((reply.status, reply.body));
    }
    replies
}

#[tokio::test]
async fn top_level_shadow_mode_in_the_rules_file_denies_nothing() {
    let limiter = limiter(&format!("shadow_mode: true\n{RULES}"));
    let addr = serve(app(limiter)).await;
    let would_deny = (StatusCode::OK, "would deny".to_owned());
    assert_eq!(replies(addr, 4).await, vec![would_deny; 4]);
}

#[tokio::test]
async fn shadow_mode_switched_at_run_time_applies_to_the_next_request() {
    let limiter = limiter(RULES);
    let addr = serve(app(limiter.clone())).await;
    assert_eq!(
        server::get(addr, "/", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    limiter.set_shadow_mode(true);
    let would_deny = (StatusCode::OK, "would deny".to_owned());
    assert_eq!(replies(addr, 3).await, vec![would_deny; 3]);
    limiter.set_shadow_mode(false);
    assert_eq!(
        server::get(addr, "/", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}
