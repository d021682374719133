//! Metrics over real TCP: an axum server on a loopback port, a hyper client, and the
//! Prometheus exporter rendering what tollgate counted.
//!
//! The recorder is process-wide: it is installed once for this test binary, and each test
//! uses a domain of its own so that their series do not mix.
#![cfg(feature = "metrics")]

mod common;

use axum::routing::get;
use axum::Router;
use common::server::{self, serve};
use http::StatusCode;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use tollgate::clock::{ManualClock, Nanos};
use tollgate::rules::Rules;
use tollgate::store::{Acquisition, Decisions, LimitCheck, MemoryStore, Store, StoreError};
use tollgate::{Limiter, RateLimitLayer};

fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        PrometheusBuilder::new()
            .install_recorder()
            .expect("no other recorder in this test binary")
    })
}

/// The value of the sample `series` (name and labels, as rendered) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.parse().expect("a number"))
}

fn app<St: Store>(limiter: Limiter<St>) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter))
}

const BURST: &str = r#"
domain: metrics_burst
sources: { user: { header: x-user } }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 3, name: per_client }
  - key: user
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
"#;

#[tokio::test]
async fn a_burst_is_counted_per_limit_and_outcome() {
    let metrics = prometheus();
    let rules = Rules::from_yaml(BURST).expect("valid rules");
    let limiter = Limiter::with_store(rules, MemoryStore::with_clock(ManualClock::new()));
    let addr = serve(app(limiter.clone())).await;
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(server::get(addr, "/", &[("x-user", "alice")]).await.status);
    }
    let (ok, limited) = (StatusCode::OK, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(statuses, [ok, ok, ok, limited, limited]);
    limiter.record_tracked_keys();

    let text = metrics.render();
    let requests = |limit: &str, outcome: &str| {
        let series = format!(
            r#"tollgate_requests_total{{domain="metrics_burst",limit="{limit}",outcome="{outcome}"}}"#
        );
        sample(&text, &series)
    };
    assert_eq!(requests("per_client", "allowed"), Some(3.0), "{text}");
    assert_eq!(requests("per_client", "denied"), Some(2.0), "{text}");
    assert_eq!(requests("per_client", "shadow_denied"), Some(0.0), "{text}");
    assert_eq!(requests("per_client", "delayed"), Some(0.0), "{text}");
    // The shadow limit had room for the first request only, and never denied.
    assert_eq!(requests("user", "allowed"), Some(1.0), "{text}");
    assert_eq!(requests("user", "shadow_denied"), Some(4.0), "{text}");
    assert_eq!(requests("user", "denied"), Some(0.0), "{text}");
    let decisions = r#"tollgate_decision_seconds_count{domain="metrics_burst"}"#;
    assert_eq!(sample(&text, decisions), Some(5.0), "{text}");
    let keys = r#"tollgate_tracked_keys{domain="metrics_burst"}"#;
    assert_eq!(sample(&text, keys), Some(2.0), "{text}");
    for request_value in ["alice", "127.0.0.1"] {
        assert!(
            !text.contains(request_value),
            "request values are never labels: {text}"
        );
    }
}

/// A store that is always down.
struct DownStore;

impl Store for DownStore {
    type Pending = std::future::Ready<Result<Decisions, StoreError>>;

    fn acquire(&self, _: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
        Acquisition::Ready(Err(StoreError::new("down", "connection refused")))
    }

    fn cancel(&self, _: &LimitCheck<'_>, _: Nanos) {}
}

#[tokio::test]
async fn store_errors_are_counted_per_limit_and_decided_by_policy() {
    let metrics = prometheus();
    let rules = Rules::from_yaml(
        r#"
domain: metrics_down
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1, on_store_error: allow }
  - key: path
    value: /
    rate_limit: { unit: minute, requests_per_unit: 1, name: root, on_store_error: local }
"#,
    )
    .expect("valid rules");
    let addr = serve(app(Limiter::with_store(rules, DownStore))).await;
    let statuses = [
        server::get(addr, "/", &[]).await.status,
        server::get(addr, "/", &[]).await.status,
    ];
    assert_eq!(statuses, [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]);

    let text = metrics.render();
    let errors = |limit: &str| {
        let series =
            format!(r#"tollgate_store_errors_total{{domain="metrics_down",limit="{limit}"}}"#);
        sample(&text, &series)
    };
    assert_eq!(errors("remote_address"), Some(2.0), "{text}");
    assert_eq!(errors("root"), Some(2.0), "{text}");
    // The local fallback decided the `local` limit: those decisions are counted.
    let root = |outcome: &str| {
        let series = format!(
            r#"tollgate_requests_total{{domain="metrics_down",limit="root",outcome="{outcome}"}}"#
        );
        sample(&text, &series)
    };
    assert_eq!(root("allowed"), Some(1.0), "{text}");
    assert_eq!(root("denied"), Some(1.0), "{text}");
}
