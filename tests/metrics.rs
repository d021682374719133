//! Metrics over real TCP: an axum server on a loopback port, a hyper client, and the
//! Prometheus exporter rendering what tollgate counted.
//!
//! The recorder is process-wide: it is installed once for this test binary, by each test
//! before it builds its limiter (handles are registered when rules are put in force), and
//! each test uses a domain of its own so that their series do not mix.
#![cfg(feature = "metrics")]

mod common;

use axum::routing::get;
use axum::{Extension, Router};
use common::server::{self, serve};
use common::stores::{DownStore, LaterStore};
use http::StatusCode;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use tollgate::clock::ManualClock;
use tollgate::layer::ShadowDenied;
use tollgate::rules::Rules;
use tollgate::store::{MemoryStore, Store};
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

/// Answers `would deny` for requests marked [`ShadowDenied`], else `ok`; serves the
/// Prometheus text at `/metrics`, outside the limits, as the demo server does.
fn app<St: Store>(limiter: Limiter<St>) -> Router {
    let handler = |shadow: Option<Extension<ShadowDenied>>| async move {
        if shadow.is_some() {
            "would deny"
        } else {
            "ok"
        }
    };
    let metrics = Router::new().route("/metrics", get(|| async { prometheus().render() }));
    Router::new()
        .route("/", get(handler))
        .layer(RateLimitLayer::new(limiter))
        .merge(metrics)
}

/// The count of `tollgate_requests_total` for `domain`, `limit` and `outcome` in `text`.
fn requests(text: &str, domain: &str, limit: &str, outcome: &str) -> Option<f64> {
    let series = format!(
        r#"tollgate_requests_total{{domain="{domain}",limit="{limit}",outcome="{outcome}"}}"#
    );
    sample(text, &series)
}

/// The count of `tollgate_store_errors_total` for `domain` and `limit` in `text`.
fn store_errors(text: &str, domain: &str, limit: &str) -> Option<f64> {
    let series = format!(r#"tollgate_store_errors_total{{domain="{domain}",limit="{limit}"}}"#);
    sample(text, &series)
}

/// How many decisions `tollgate_decision_seconds` timed for `domain` in `text`.
fn decisions(text: &str, domain: &str) -> Option<f64> {
    let series = format!(r#"tollgate_decision_seconds_count{{domain="{domain}"}}"#);
    sample(text, &series)
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
    prometheus();
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

    let scrape = server::get(addr, "/metrics", &[]).await;
    assert_eq!(scrape.status, StatusCode::OK);
    let text = scrape.body;
    let requests = |limit: &str, outcome: &str| requests(&text, "metrics_burst", limit, outcome);
    assert_eq!(requests("per_client", "allowed"), Some(3.0), "{text}");
    assert_eq!(requests("per_client", "denied"), Some(2.0), "{text}");
    assert_eq!(requests("per_client", "shadow_denied"), Some(0.0), "{text}");
    assert_eq!(requests("per_client", "delayed"), Some(0.0), "{text}");
    // The shadow limit had room for the first request only, and never denied.
    assert_eq!(requests("user", "allowed"), Some(1.0), "{text}");
    assert_eq!(requests("user", "shadow_denied"), Some(4.0), "{text}");
    assert_eq!(requests("user", "denied"), Some(0.0), "{text}");
    assert_eq!(decisions(&text, "metrics_burst"), Some(5.0), "{text}");
    let keys = r#"tollgate_tracked_keys{domain="metrics_burst"}"#;
    assert_eq!(sample(&text, keys), Some(2.0), "{text}");
    for request_value in ["alice", "127.0.0.1"] {
        assert!(
            !text.contains(request_value),
            "request values are never labels: {text}"
        );
    }
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
    let errors = |limit: &str| store_errors(&text, "metrics_down", limit);
    assert_eq!(errors("remote_address"), Some(2.0), "{text}");
    assert_eq!(errors("root"), Some(2.0), "{text}");
    // The `allow` policy admitted both; the local fallback decided the `local` limit.
    let requests = |limit: &str, outcome: &str| requests(&text, "metrics_down", limit, outcome);
    assert_eq!(requests("remote_address", "allowed"), Some(2.0), "{text}");
    assert_eq!(requests("root", "allowed"), Some(1.0), "{text}");
    assert_eq!(requests("root", "denied"), Some(1.0), "{text}");
}

#[tokio::test]
async fn store_errors_under_deny_count_as_denials_or_in_shadow_mode_as_shadow_denials() {
    let metrics = prometheus();
    let rules = Rules::from_yaml(
        r#"
domain: metrics_closed
defaults: { on_store_error: deny }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 100 }
"#,
    )
    .expect("valid rules");
    let limiter = Limiter::with_store(rules, DownStore);
    let addr = serve(app(limiter.clone())).await;
    let reply = server::get(addr, "/", &[]).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    limiter.set_shadow_mode(true);
    let reply = server::get(addr, "/", &[]).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "would deny")
    );

    let text = metrics.render();
    let requests = |outcome: &str| requests(&text, "metrics_closed", "remote_address", outcome);
    assert_eq!(requests("denied"), Some(1.0), "{text}");
    assert_eq!(requests("shadow_denied"), Some(1.0), "{text}");
    assert_eq!(requests("allowed"), Some(0.0), "{text}");
    let errors = store_errors(&text, "metrics_closed", "remote_address");
    assert_eq!(errors, Some(2.0), "{text}");
}

#[tokio::test]
async fn a_local_limit_refused_with_a_failing_closed_one_still_counts_one_outcome() {
    let metrics = prometheus();
    let rules = Rules::from_yaml(
        r#"
domain: metrics_closed_and_local
sources: { user: { header: x-user } }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 100, on_store_error: deny }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 100, on_store_error: local }
"#,
    )
    .expect("valid rules");
    let addr = serve(app(Limiter::with_store(rules, DownStore))).await;
    let reply = server::get(addr, "/", &[("x-user", "alice")]).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);

    let text = metrics.render();
    let domain = "metrics_closed_and_local";
    let requests = |limit: &str, outcome: &str| requests(&text, domain, limit, outcome);
    assert_eq!(requests("remote_address", "denied"), Some(1.0), "{text}");
    // Refused by the other limit before the fallback store decided it: admitted, uncharged.
    assert_eq!(requests("user", "allowed"), Some(1.0), "{text}");
    assert_eq!(requests("user", "denied"), Some(0.0), "{text}");
}

#[tokio::test]
async fn shadow_mode_on_a_store_that_answers_later_counts_what_would_be_denied_and_queued() {
    let metrics = prometheus();
    let rules = Rules::from_yaml(
        r#"
domain: metrics_later
shadow_mode: true
sources: { tenant: { header: x-tenant } }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 2, name: per_client }
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 1, algorithm: leaky_bucket, queue: 2, name: shaped }
"#,
    )
    .expect("valid rules");
    let store = LaterStore(MemoryStore::with_clock(ManualClock::new()));
    let addr = serve(app(Limiter::with_store(rules, store))).await;
    let mut replies = Vec::new();
    for _ in 0..5 {
        let reply = server::get(addr, "/", &[("x-tenant", "acme")]).await;
        replies.push((reply.status, reply.body));
    }
    let (ok, would_deny) = (StatusCode::OK, "would deny");
    let expected = ["ok", "ok", would_deny, would_deny, would_deny];
    assert_eq!(
        replies,
        expected.map(|body| (ok, body.to_owned())),
        "nothing denied, nothing queued"
    );

    let text = metrics.render();
    let requests = |limit: &str, outcome: &str| requests(&text, "metrics_later", limit, outcome);
    assert_eq!(requests("per_client", "allowed"), Some(2.0), "{text}");
    assert_eq!(requests("per_client", "shadow_denied"), Some(3.0), "{text}");
    // The bucket takes one at once and queues two: the rest would overflow it.
    assert_eq!(requests("shaped", "allowed"), Some(1.0), "{text}");
    assert_eq!(requests("shaped", "shadow_delayed"), Some(2.0), "{text}");
    assert_eq!(requests("shaped", "shadow_denied"), Some(2.0), "{text}");
    assert_eq!(requests("shaped", "delayed"), Some(0.0), "{text}");
    assert_eq!(decisions(&text, "metrics_later"), Some(5.0), "{text}");
}

/// Two servers that each admitted 80 of a fleet limit of 100 before they first synced: the
/// second to sync reports the fleet 60 over.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overshoot_of_a_local_first_limit_is_a_gauge() {
    use std::time::Duration;
    use tollgate::algorithm::{Algorithm, Quota};
    use tollgate::clock::Nanos;
    use tollgate::store::{Acquisition, LimitCheck, RedisStore};

    let metrics = prometheus();
    let redis = common::redis_server::RedisServer::start();
    let clock = ManualClock::starting_at(Nanos::new(1_000_000_000_000));
    let connect = || async {
        RedisStore::builder(redis.url())
            .clock(clock.clone())
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connects")
    };
    let servers = [connect().await, connect().await];
    let quota = Quota::new(100, Duration::from_secs(10)).unwrap();
    let check = LimitCheck {
        // As long as the window: no background sync comes between the two servers' requests
        // and the `sync_now`s, however slow the machine.
        sync_every: Some(Duration::from_secs(10)),
        limit: "fleet",
        ..LimitCheck::new("metrics_sync", b"client", Algorithm::FixedWindow, &quota)
    };
    // Each server admits its 80 alone and syncs before the next starts: the second sync
    // finds the first's count. (With both syncing at once, the first to apply could be the
    // last to report, and the gauge would end on its 0.)
    for store in &servers {
        for _ in 0..80 {
            let Acquisition::Ready(Ok(decisions)) = store.acquire(&[check]) else {
                panic!("decided at once");
            };
            assert!(decisions[0].allowed, "alone, before its first sync");
        }
        store.sync_now().await.expect("Redis answers");
    }
    let text = metrics.render();
    let overshoot = sample(
        &text,
        r#"tollgate_sync_overshoot{domain="metrics_sync",limit="fleet"}"#,
    );
    assert_eq!(overshoot, Some(60.0), "{text}");
}

/// An approximate limit reports its sketch's memory, the load of its last window and the
/// error bound at that load.
#[test]
fn an_approximate_limit_reports_its_sketch() {
    use std::time::Duration;
    use tollgate::algorithm::{Algorithm, Quota};
    use tollgate::clock::Nanos;
    use tollgate::store::{Approximate, LimitCheck};

    let metrics = prometheus();
    let clock = ManualClock::starting_at(Nanos::new(3_600_000_000_000));
    let store = MemoryStore::with_clock(clock.clone());
    let quota = Quota::new(100, Duration::from_secs(1)).unwrap();
    let approximate = Approximate::new(64 << 10);
    let ask = |client: u32| {
        let key = client.to_be_bytes();
        let check = LimitCheck {
            domain: "metrics_sketch",
            key: &key,
            tag: &key,
            algorithm: Algorithm::FixedWindow,
            quota: &quota,
            cost: 1,
            shadow: false,
            check_only: false,
            sync_every: None,
            limit: "per-client",
            approximate: Some(approximate),
            carried_from: &[],
        };
        let _ = store.acquire(&[check]);
    };
    for client in 0..1_000 {
        ask(client);
    }
    clock.advance(Duration::from_secs(1));
    ask(0);
    let text = metrics.render();
    let gauge = |name: &str| {
        sample(
            &text,
            &format!(r#"{name}{{domain="metrics_sketch",limit="per-client"}}"#),
        )
    };
    assert_eq!(gauge("tollgate_sketch_bytes"), Some(65_536.0), "{text}");
    assert_eq!(gauge("tollgate_sketch_requests"), Some(1_000.0), "{text}");
    let bound = approximate.error_bound(Algorithm::FixedWindow, 1_000);
    assert_eq!(gauge("tollgate_sketch_error_bound"), Some(bound), "{text}");
    // 1,000 requests × 4 cells over 14,336 cells: 1 − e^-0.279.
    let fill = gauge("tollgate_sketch_fill").expect("the fill");
    assert!((fill - 0.2435).abs() < 0.001, "{fill}");
}

/// `tollgate_in_flight` counts the slots held: up while requests run, back to 0 once they
/// end, whether they finish or their clients go away.
#[tokio::test]
async fn in_flight_slots_are_counted_and_return_to_zero() {
    prometheus();
    let rules = Rules::from_yaml(
        r#"
domain: metrics_in_flight
descriptors:
  - key: remote_address
    concurrency: { max_in_flight: 4, name: running }
"#,
    )
    .expect("valid rules");
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let held = std::sync::Arc::clone(&gate);
    let router = Router::new()
        .route(
            "/hold",
            get(move || async move {
                held.acquire().await.expect("open").forget();
                "released"
            }),
        )
        .layer(RateLimitLayer::new(Limiter::new(rules)));
    let addr = serve(router).await;
    let in_flight = || {
        let series = r#"tollgate_in_flight{domain="metrics_in_flight",limit="running"}"#;
        sample(&prometheus().render(), series)
    };
    let until = |expected: f64| async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while in_flight() != Some(expected) {
            assert!(
                std::time::Instant::now() < deadline,
                "in flight: {:?}, expected {expected}",
                in_flight()
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    let finishing = tokio::spawn(async move { server::get(addr, "/hold", &[]).await });
    let leaving = tokio::spawn(async move { server::get(addr, "/hold", &[]).await });
    until(2.0).await;
    leaving.abort();
    until(1.0).await;
    gate.add_permits(1);
    assert_eq!(finishing.await.expect("joined").status, StatusCode::OK);
    until(0.0).await;
}

/// `tollgate_adaptive_limit` shows the limit load shedding's adaptive limit admits: here its
/// starting 20, held within the bounds of 3 to 7.
#[tokio::test]
async fn the_adaptive_limit_is_shown() {
    prometheus();
    let rules = Rules::from_yaml(
        "domain: metrics_adaptive\nload_shedding: { max_in_flight: adaptive, min: 3, max: 7 }\n",
    )
    .expect("valid rules");
    let addr = serve(app(Limiter::new(rules))).await;
    assert_eq!(server::get(addr, "/", &[]).await.status, StatusCode::OK);
    let series = r#"tollgate_adaptive_limit{domain="metrics_adaptive"}"#;
    assert_eq!(sample(&prometheus().render(), series), Some(7.0));
}
