//! The middleware over real TCP: an axum server on a loopback port, a hyper client.
//!
//! Time is a manual clock shared with the store, so no test sleeps.

mod common;

use axum::extract::Request;
use axum::http::Response;
use axum::middleware::{self, Next};
use axum::routing::get;
use axum::{Extension, Router};
use common::server::{self, serve, serve_without_connect_info, Reply};
use common::stores::{DownStore, LaterStore};
use http::{HeaderMap, Method, StatusCode};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tollgate::clock::ManualClock;
use tollgate::layer::{NoRateLimitHeaders, Rejected, ShadowDenied};
use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, SourceSpec, Unit};
use tollgate::source::Identity;
use tollgate::store::MemoryStore;
use tollgate::{Limiter, RateLimitLayer};

type TestLayer = RateLimitLayer<MemoryStore<ManualClock>>;

fn layer(yaml: &str) -> (TestLayer, ManualClock) {
    let clock = ManualClock::new();
    let rules = Rules::from_yaml(yaml).expect("valid rules");
    let store = MemoryStore::with_clock(clock.clone());
    (
        RateLimitLayer::new(Limiter::with_store(rules, store)),
        clock,
    )
}

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }).post(|| async { "posted" }))
        .route(
            "/auth/login",
            get(|| async { "login" }).post(|| async { "logged in" }),
        )
        .route("/users/{id}", get(|| async { "user" }))
}

/// Serves [`app`] behind the rules in `yaml` (on a memory store), with connect info.
async fn serve_app(yaml: &str) -> SocketAddr {
    serve_app_with_clock(yaml).await.0
}

/// [`serve_app`], with the manual clock of the store.
async fn serve_app_with_clock(yaml: &str) -> (SocketAddr, ManualClock) {
    let (layer, clock) = layer(yaml);
    (serve(app().layer(layer)).await, clock)
}

/// Sends `GET /` with the header `name: value` (any bytes, not only UTF-8).
async fn get_with(addr: SocketAddr, name: &str, value: impl AsRef<[u8]>) -> Reply {
    server::send(addr, Method::GET, "/", &[(name, value.as_ref())]).await
}

/// The status of `GET /` from a client that the proxy names in `X-Forwarded-For`.
async fn forwarded_for(addr: SocketAddr, client: impl AsRef<[u8]>) -> StatusCode {
    get_with(addr, "x-forwarded-for", client).await.status
}

const PER_CLIENT: &str = r#"
domain: test
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 5 }
"#;

#[tokio::test]
async fn exactly_the_limit_is_admitted_with_counting_headers() {
    let addr = serve_app(PER_CLIENT).await;
    for expected_remaining in (0..5).rev() {
        let reply = server::get(addr, "/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, "ok");
        assert_eq!(reply.number("x-ratelimit-limit"), 5);
        assert_eq!(reply.number("x-ratelimit-remaining"), expected_remaining);
        assert!(reply.header("retry-after").is_none());
    }
    for _ in 0..3 {
        assert_eq!(
            server::get(addr, "/", &[]).await.status,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
}

#[tokio::test]
async fn denial_is_problem_json_with_retry_headers() {
    let addr = serve_app(PER_CLIENT).await;
    for _ in 0..5 {
        server::get(addr, "/", &[]).await;
    }
    let reply = server::get(addr, "/", &[]).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        reply.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(reply.number("x-ratelimit-limit"), 5);
    assert_eq!(reply.number("x-ratelimit-remaining"), 0);
    // The manual clock starts on a minute boundary: the window ends in exactly 60 s.
    assert_eq!(reply.number("retry-after"), 60);
    assert_eq!(reply.number("x-ratelimit-retry-after"), 60);
    let problem: serde_json::Value = serde_json::from_str(&reply.body).expect("JSON body");
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["title"], "Too Many Requests");
    assert_eq!(problem["retry_after"], 60);
    assert_eq!(problem["limit"], "remote_address");
}

#[tokio::test]
async fn a_retry_after_the_advertised_seconds_succeeds_and_not_before() {
    let (addr, clock) = serve_app_with_clock(
        r#"
domain: test
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 2, algorithm: token_bucket }
"#,
    )
    .await;
    clock.advance(Duration::from_millis(300));
    server::get(addr, "/", &[]).await;
    server::get(addr, "/", &[]).await;
    let denied = server::get(addr, "/", &[]).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    // One token takes 500 ms: rounded up to a whole second, never 0.
    let retry_after = denied.number("retry-after");
    assert_eq!(retry_after, 1);
    clock.advance(Duration::from_millis(499));
    assert_eq!(
        server::get(addr, "/", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        server::get(addr, "/", &[]).await.number("retry-after"),
        1,
        "never 0 while denied"
    );
    clock.advance(Duration::from_secs(retry_after) - Duration::from_millis(499));
    assert_eq!(server::get(addr, "/", &[]).await.status, StatusCode::OK);
}

#[tokio::test]
async fn forwarded_for_from_an_untrusted_peer_is_ignored() {
    let addr = serve_app(PER_CLIENT).await;
    let mut statuses = Vec::new();
    for i in 0..8 {
        let spoofed = format!("203.0.113.{i}");
        let reply = server::get(
            addr,
            "/",
            &[
                ("x-forwarded-for", &spoofed),
                ("forwarded", "for=198.51.100.1"),
            ],
        )
        .await;
        statuses.push(reply.status);
    }
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::OK).count(), 5);
}

const BEHIND_PROXY: &str = r#"
domain: test
client_ip:
  trusted_proxies: [127.0.0.1/32]
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 2 }
"#;

#[tokio::test]
async fn forwarded_for_from_a_trusted_proxy_is_honoured() {
    let addr = serve_app(BEHIND_PROXY).await;
    assert_eq!(forwarded_for(addr, "203.0.113.1").await, StatusCode::OK);
    assert_eq!(forwarded_for(addr, "203.0.113.1").await, StatusCode::OK);
    assert_eq!(
        forwarded_for(addr, "203.0.113.1").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        forwarded_for(addr, "203.0.113.2").await,
        StatusCode::OK,
        "another client has its own limit"
    );
}

#[tokio::test]
async fn only_the_header_the_proxy_writes_is_believed() {
    let yaml = BEHIND_PROXY.replace("trusted_proxies:", "header: forwarded\n  trusted_proxies:");
    let addr = serve_app(&yaml).await;
    let forwarded =
        |value: &'static [u8]| async move { get_with(addr, "forwarded", value).await.status };
    // RFC 7239, walking from the right past trusted hops.
    assert_eq!(
        forwarded(b"for=203.0.113.1, for=127.0.0.1").await,
        StatusCode::OK
    );
    assert_eq!(forwarded(b"for=203.0.113.1").await, StatusCode::OK);
    assert_eq!(
        forwarded(b"for=203.0.113.1").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // A client's own X-Forwarded-For passes through such a proxy untouched: it is ignored.
    let spoofed = [
        ("forwarded", b"for=203.0.113.1".as_slice()),
        ("x-forwarded-for", b"198.51.100.9".as_slice()),
    ];
    assert_eq!(
        server::send(addr, Method::GET, "/", &spoofed).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn ipv6_clients_in_one_slash_64_share_a_limit() {
    let addr = serve_app(BEHIND_PROXY).await;
    assert_eq!(forwarded_for(addr, "2001:db8:1:2::1").await, StatusCode::OK);
    assert_eq!(
        forwarded_for(addr, "2001:db8:1:2:ffff:ffff:ffff:ffff").await,
        StatusCode::OK
    );
    assert_eq!(
        forwarded_for(addr, "[2001:db8:1:2::abcd]:443").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        forwarded_for(addr, "2001:db8:1:3::1").await,
        StatusCode::OK,
        "the next /64 is another client"
    );
}

#[tokio::test]
async fn hostile_forwarding_headers_neither_panic_nor_choose_the_key() {
    let addr = serve_app(BEHIND_PROXY).await;
    let long = "1.2.3.4,".repeat(8_000);
    let hostile: [&[u8]; 4] = [
        b"\xff\xfe not utf-8",
        b"unknown",
        b"999.1.1.1, , ,",
        long.as_bytes(),
    ];
    let mut statuses = Vec::new();
    for value in hostile {
        statuses.push(forwarded_for(addr, value).await);
    }
    // Every hostile header falls back to the trusted peer itself: one client, limit 2.
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
}

/// Denials are answered from answers kept per thread (the test's server runs on the test's
/// one thread): each must still carry its own limit, label and wait, in headers and body,
/// and the optional headers of its own request. The users and home limits differ only in
/// their names.
#[tokio::test]
async fn repeated_denials_each_carry_their_own_limit_and_wait() {
    let (addr, clock) = serve_app_with_clock(
        r#"
domain: test
response: { reset_header: true }
sources:
  endpoint:
    - { value: login, path: /auth/login }
    - { value: users, path: "/users/*" }
    - { value: home, path: / }
descriptors:
  - key: endpoint
    value: login
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 1, name: login }
  - key: endpoint
    value: users
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 2, name: users }
  - key: endpoint
    value: home
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 2, name: home }
"#,
    )
    .await;
    let limits = [
        ("/auth/login", "login", 1),
        ("/users/7", "users", 2),
        ("/", "home", 2),
    ];
    for (path, _, size) in limits {
        for _ in 0..size {
            assert_eq!(server::get(addr, path, &[]).await.status, StatusCode::OK);
        }
    }
    // Fixed windows from the manual clock's start, a minute boundary.
    let mut elapsed = 0;
    for now in [0, 1, 59] {
        clock.advance(Duration::from_secs(now - elapsed));
        elapsed = now;
        let wait = 60 - elapsed;
        for _ in 0..3 {
            for (path, label, size) in limits {
                let reply = server::get(addr, path, &[]).await;
                assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "{path}");
                let names: Vec<&str> = reply.headers.keys().map(|name| name.as_str()).collect();
                for name in [
                    "content-type",
                    "x-ratelimit-limit",
                    "x-ratelimit-remaining",
                    "x-ratelimit-retry-after",
                    "retry-after",
                    "x-ratelimit-reset",
                ] {
                    let sent = reply.headers.get_all(name).iter().count();
                    assert_eq!(sent, 1, "{path}: {name} in {names:?}");
                }
                assert_eq!(reply.number("x-ratelimit-limit"), size, "{path}");
                assert_eq!(reply.number("x-ratelimit-remaining"), 0, "{path}");
                assert_eq!(reply.number("retry-after"), wait, "{path}");
                assert_eq!(reply.number("x-ratelimit-retry-after"), wait, "{path}");
                assert_eq!(reply.number("x-ratelimit-reset"), wait, "{path}");
                let problem: serde_json::Value =
                    serde_json::from_str(&reply.body).expect("JSON body");
                assert_eq!(problem["limit"], label, "{path}");
                assert_eq!(problem["retry_after"], wait, "{path}");
            }
        }
    }
}

#[tokio::test]
async fn a_request_denied_by_one_limit_consumes_none_of_the_others() {
    let addr = serve_app(
        r#"
domain: test
sources:
  endpoint:
    - { value: login, method: POST, path: /auth/login }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: endpoint
    value: login
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 1, name: login }
"#,
    )
    .await;
    assert_eq!(
        server::request(addr, Method::POST, "/auth/login", &[])
            .await
            .status,
        StatusCode::OK
    );
    for _ in 0..5 {
        let denied = server::request(addr, Method::POST, "/auth/login", &[]).await;
        assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(denied.body.contains("login"));
    }
    let plain = server::get(addr, "/", &[]).await;
    assert_eq!(plain.status, StatusCode::OK);
    assert_eq!(
        plain.number("x-ratelimit-remaining"),
        1,
        "only the admitted login was counted"
    );
}

#[tokio::test]
async fn a_server_without_connect_info_fails_loudly() {
    let (layer, _) = layer(PER_CLIENT);
    let addr = serve_without_connect_info(app().layer(layer)).await;
    let reply = server::get(addr, "/", &[]).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        reply.body.contains("into_make_service_with_connect_info"),
        "the fix is in the message: {}",
        reply.body
    );
}

#[tokio::test]
async fn route_templates_limit_all_paths_of_a_route_together() {
    let (layer, _) = layer(
        r#"
domain: test
descriptors:
  - key: route
    value: "/users/{id}"
    rate_limit: { unit: minute, requests_per_unit: 2 }
"#,
    );
    let addr = serve(app().route_layer(layer)).await;
    assert_eq!(
        server::get(addr, "/users/1", &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        server::get(addr, "/users/2", &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        server::get(addr, "/users/3", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    let other = server::get(addr, "/", &[]).await;
    assert_eq!(other.status, StatusCode::OK);
    assert!(
        other.header("x-ratelimit-limit").is_none(),
        "no limit applies, so no headers"
    );
}

#[tokio::test]
async fn identity_from_an_auth_layer_limits_each_user() {
    async fn authenticate(mut request: Request, next: Next) -> axum::response::Response {
        if let Some(user) = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
        {
            let user = user.trim_start_matches("Bearer ").to_owned();
            request.extensions_mut().insert(Identity::new(user));
        }
        next.run(request).await
    }
    let (layer, _) = layer(
        r#"
domain: test
sources:
  user_id: identity
descriptors:
  - key: user_id
    rate_limit: { unit: minute, requests_per_unit: 1 }
"#,
    );
    // Layers run outside-in: authentication first, then the limit.
    let addr = serve(app().layer(layer).layer(middleware::from_fn(authenticate))).await;
    let as_user =
        |user: &'static str| async move { get_with(addr, "authorization", user).await.status };
    assert_eq!(as_user("Bearer alice").await, StatusCode::OK);
    assert_eq!(as_user("Bearer alice").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(as_user("Bearer bob").await, StatusCode::OK);
    assert_eq!(
        server::get(addr, "/", &[]).await.status,
        StatusCode::OK,
        "anonymous requests do not match"
    );
}

/// The tenant of the caller, stored in the request extensions by [`find_tenant`].
#[derive(Clone)]
struct TenantId(String);

impl AsRef<str> for TenantId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// An authentication middleware: the `x-api-key` header names the caller's tenant.
async fn find_tenant(mut request: Request, next: Next) -> axum::response::Response {
    let tenant = request
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(|key| TenantId(key.to_owned()));
    if let Some(tenant) = tenant {
        request.extensions_mut().insert(tenant);
    }
    next.run(request).await
}

/// The statuses of `GET /` as each of `tenants` in turn (`None`: without an API key).
async fn statuses_as(addr: SocketAddr, tenants: &[Option<&str>]) -> Vec<u16> {
    let mut statuses = Vec::new();
    for tenant in tenants {
        let headers: &[(&str, &str)] = match tenant {
            Some(tenant) => &[("x-api-key", tenant)],
            None => &[],
        };
        statuses.push(server::get(addr, "/", headers).await.status.as_u16());
    }
    statuses
}

const PER_TENANT: &str = r#"
domain: test
sources:
  tenant: { extension: tenant }
descriptors:
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 1 }
"#;

#[tokio::test]
async fn a_typed_extension_from_an_auth_layer_limits_each_tenant() {
    let from_yaml = Rules::from_yaml(PER_TENANT)
        .and_then(|rules| rules.with_extension::<TenantId>("tenant"))
        .expect("valid rules");
    let in_rust = Rules::builder("test")
        .source("tenant", SourceSpec::extension::<TenantId>())
        .descriptor(DescriptorSpec::key("tenant").rate_limit(LimitSpec::per(1, Unit::Minute)))
        .build()
        .expect("valid rules");
    for rules in [from_yaml, in_rust] {
        let layer = RateLimitLayer::from_rules(rules);
        // Layers run outside-in: the tenant is found first, then limited.
        let addr = serve(app().layer(layer).layer(middleware::from_fn(find_tenant))).await;
        let tenants = [Some("acme"), Some("acme"), Some("globex"), None, None];
        // A request without the extension has no value for the key: no limit applies.
        assert_eq!(statuses_as(addr, &tenants).await, [200, 429, 200, 200, 200]);
    }
}

#[tokio::test]
async fn an_extension_without_a_bound_type_has_no_value_until_new_rules_keep_the_binding() {
    let unbound = Limiter::new(Rules::from_yaml(PER_TENANT).expect("valid rules"));
    let addr = serve(
        app()
            .layer(RateLimitLayer::new(unbound))
            .layer(middleware::from_fn(find_tenant)),
    )
    .await;
    assert_eq!(statuses_as(addr, &[Some("acme"); 3]).await, [200; 3]);

    let rules = Rules::from_yaml(PER_TENANT)
        .and_then(|rules| rules.with_extension::<TenantId>("tenant"))
        .expect("valid rules");
    let limiter = Limiter::new(rules);
    let addr = serve(
        app()
            .layer(RateLimitLayer::new(limiter.clone()))
            .layer(middleware::from_fn(find_tenant)),
    )
    .await;
    assert_eq!(statuses_as(addr, &[Some("acme"); 2]).await, [200, 429]);
    // As a reload does: new rules from the file, bound to nothing, keep the binding.
    let two_per_minute = PER_TENANT.replace("requests_per_unit: 1", "requests_per_unit: 2");
    limiter.set_rules(Rules::from_yaml(&two_per_minute).expect("valid rules"));
    let tenants = [Some("globex"), Some("globex"), Some("globex")];
    assert_eq!(statuses_as(addr, &tenants).await, [200, 200, 429]);
}

#[tokio::test]
async fn header_query_method_and_host_sources() {
    let addr = serve_app(
        r#"
domain: test
sources:
  api_key: { header: x-api-key }
  tenant: { query: tenant }
descriptors:
  - key: api_key
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: tenant
    value: acme
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: method
    value: POST
    descriptors:
      - key: host
        rate_limit: { unit: minute, requests_per_unit: 1 }
"#,
    )
    .await;
    let keyed = |key: &'static str| async move { get_with(addr, "x-api-key", key).await.status };
    assert_eq!(keyed("k1").await, StatusCode::OK);
    assert_eq!(keyed("k1").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(keyed("k2").await, StatusCode::OK);
    assert_eq!(
        server::get(addr, "/?tenant=acme", &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        server::get(addr, "/?x=1&tenant=ac%6De", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "percent-decoded"
    );
    assert_eq!(
        server::get(addr, "/?tenant=other", &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        server::request(addr, Method::POST, "/", &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        server::request(addr, Method::POST, "/", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        server::request(addr, Method::POST, "/", &[("host", "other.example")])
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn shadow_mode_forwards_and_marks_the_request() {
    let (layer, _) = layer(
        r#"
domain: test
descriptors:
  - key: remote_address
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
"#,
    );
    let router = Router::new().route(
        "/",
        get(|shadow: Option<Extension<ShadowDenied>>| async move {
            if shadow.is_some() {
                "shadow-denied"
            } else {
                "ok"
            }
        }),
    );
    let addr = serve(router.layer(layer)).await;
    assert_eq!(server::get(addr, "/", &[]).await.body, "ok");
    let second = server::get(addr, "/", &[]).await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.body, "shadow-denied");
}

#[tokio::test]
async fn ietf_and_reset_headers_when_configured() {
    let addr = serve_app(
        r#"
domain: test
response: { ietf_headers: true, reset_header: true }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 2, name: per-client }
"#,
    )
    .await;
    let first = server::get(addr, "/", &[]).await;
    assert_eq!(
        first.header("ratelimit-policy"),
        Some(r#""per-client";q=2;w=60"#)
    );
    assert_eq!(first.header("ratelimit"), Some(r#""per-client";r=1;t=60"#));
    assert_eq!(first.number("x-ratelimit-reset"), 60);
}

/// The rate-limit headers (`x-*`, `ratelimit*`, `retry-after`) of a reply, sorted.
fn rate_limit_header_names(reply: &Reply) -> Vec<String> {
    let mut names: Vec<String> = reply
        .headers
        .keys()
        .map(|name| name.to_string())
        .filter(|name| {
            name.starts_with("x-") || name.starts_with("ratelimit") || name == "retry-after"
        })
        .collect();
    names.sort_unstable();
    names
}

/// The rate-limit headers of an admitted and of a denied reply under `response`, one request
/// admitted per client.
async fn admitted_and_denied_headers(response: &str) -> (Vec<String>, Vec<String>) {
    let addr = serve_app(&format!(
        "domain: test\nresponse: {response}\ndescriptors:\n  - key: remote_address\n    \
         rate_limit: {{ unit: minute, requests_per_unit: 1 }}\n"
    ))
    .await;
    let admitted = server::get(addr, "/", &[]).await;
    let denied = server::get(addr, "/", &[]).await;
    assert_eq!(admitted.status, StatusCode::OK);
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.number("retry-after"), 60, "{response}");
    (
        rate_limit_header_names(&admitted),
        rate_limit_header_names(&denied),
    )
}

#[tokio::test]
async fn each_header_set_is_sent_and_denials_always_carry_retry_after() {
    let x_ratelimit = (
        vec!["x-ratelimit-limit", "x-ratelimit-remaining"],
        vec![
            "retry-after",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-retry-after",
        ],
    );
    let ietf = (
        vec!["ratelimit", "ratelimit-policy"],
        vec!["ratelimit", "ratelimit-policy", "retry-after"],
    );
    let both = (
        vec![
            "ratelimit",
            "ratelimit-policy",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
        ],
        vec![
            "ratelimit",
            "ratelimit-policy",
            "retry-after",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-retry-after",
        ],
    );
    let none = (vec![], vec!["retry-after"]);
    for (response, (admitted, denied)) in [
        ("{}", &x_ratelimit),
        ("{ headers: x_ratelimit }", &x_ratelimit),
        ("{ headers: ietf }", &ietf),
        ("{ headers: both }", &both),
        ("{ ietf_headers: true }", &both),
        ("{ headers: none }", &none),
    ] {
        let (got_admitted, got_denied) = admitted_and_denied_headers(response).await;
        assert_eq!(got_admitted, *admitted, "admitted under {response}");
        assert_eq!(got_denied, *denied, "denied under {response}");
    }
}

#[tokio::test]
async fn renamed_headers_are_sent_under_their_new_names() {
    let (admitted, denied) = admitted_and_denied_headers(
        "{ reset_header: true, names: { limit: X-Rate-Limit-Limit, remaining: \
         x-rate-limit-remaining, retry_after: x-rate-limit-retry-after, reset: x-rate-limit-reset } }",
    )
    .await;
    assert_eq!(
        admitted,
        [
            "x-rate-limit-limit",
            "x-rate-limit-remaining",
            "x-rate-limit-reset"
        ]
    );
    assert_eq!(
        denied,
        [
            "retry-after",
            "x-rate-limit-limit",
            "x-rate-limit-remaining",
            "x-rate-limit-reset",
            "x-rate-limit-retry-after"
        ]
    );
}

#[tokio::test]
async fn a_grpc_denial_carries_its_pushback_whatever_the_header_set() {
    for response in ["{ headers: none }", "{ headers: ietf }"] {
        let addr = serve_app(&format!(
            "domain: test\nresponse: {response}\ndescriptors:\n  - key: remote_address\n    \
             rate_limit: {{ unit: minute, requests_per_unit: 1 }}\n"
        ))
        .await;
        let grpc = [("content-type", "application/grpc")];
        server::get(addr, "/", &grpc).await;
        let denied = server::get(addr, "/", &grpc).await;
        assert_eq!(denied.status, StatusCode::OK, "Trailers-Only");
        assert_eq!(denied.header("grpc-status"), Some("8"));
        assert!(
            denied.number("grpc-retry-pushback-ms") > 59_000,
            "{response}"
        );
        assert_eq!(denied.number("retry-after"), 60);
        assert_eq!(denied.header("x-ratelimit-limit"), None);
    }
}

/// A rejection hook's answer: `503`, a text body naming the path, why and by which limit,
/// and a `Retry-After` of its own.
fn slow_down(rejected: &Rejected<'_>) -> Response<String> {
    let body = format!(
        "{} denied ({:?}) by {}",
        rejected.uri().path(),
        rejected.verdict().denial(),
        rejected.limit().label()
    );
    Response::builder()
        .status(StatusCode::SERVICE_UNAVAILABLE)
        .header("content-type", "text/plain")
        .header("retry-after", "600")
        .body(body)
        .expect("a valid response")
}

#[tokio::test]
async fn a_rejection_hook_answers_denials_and_tollgate_adds_the_headers_it_lacks() {
    let (layer, _) = layer(PER_CLIENT);
    let addr = serve(app().layer(layer.on_rejection(slow_down))).await;
    for expected_remaining in (0..5).rev() {
        let admitted = server::get(addr, "/", &[]).await;
        assert_eq!(
            (admitted.status, admitted.body.as_str()),
            (StatusCode::OK, "ok")
        );
        assert_eq!(admitted.number("x-ratelimit-remaining"), expected_remaining);
    }
    let denied = server::get(addr, "/", &[]).await;
    assert_eq!(denied.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(denied.body, "/ denied (Some(OverLimit)) by remote_address");
    assert_eq!(denied.header("content-type"), Some("text/plain"));
    assert_eq!(
        denied.number("retry-after"),
        600,
        "the hook's own header stays"
    );
    assert_eq!(denied.number("x-ratelimit-limit"), 5);
    assert_eq!(denied.number("x-ratelimit-remaining"), 0);
    assert_eq!(denied.number("x-ratelimit-retry-after"), 60);
}

#[tokio::test]
async fn a_hooked_layer_is_never_served_the_default_answer_kept_for_its_limit() {
    let (default_layer, _) = layer(PER_CLIENT);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    // The same limiter, so the same limit: the answers kept on this thread (the test's and
    // both servers') for the default layer's denials are kept for this limit.
    let hooked = default_layer.clone().on_rejection(move |rejected| {
        counted.fetch_add(1, Ordering::Relaxed);
        slow_down(rejected)
    });
    let default_addr = serve(app().layer(default_layer)).await;
    let hooked_addr = serve(app().layer(hooked)).await;
    for _ in 0..5 {
        server::get(default_addr, "/", &[]).await;
    }
    for _ in 0..3 {
        let denied = server::get(default_addr, "/", &[]).await;
        assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
        let hooked = server::get(hooked_addr, "/", &[]).await;
        assert_eq!(hooked.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(hooked.body.starts_with("/ denied"), "{}", hooked.body);
    }
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

#[tokio::test]
async fn a_rejection_hook_may_send_no_rate_limit_headers_after_a_store_that_answers_later() {
    let rules = Rules::from_yaml(PER_CLIENT).expect("valid rules");
    let store = LaterStore(MemoryStore::with_clock(ManualClock::new()));
    let layer = RateLimitLayer::new(Limiter::with_store(rules, store)).on_rejection(|_| {
        let mut forbidden = Response::new("blocked");
        *forbidden.status_mut() = StatusCode::FORBIDDEN;
        forbidden.extensions_mut().insert(NoRateLimitHeaders);
        forbidden
    });
    let addr = serve(app().layer(layer)).await;
    for _ in 0..5 {
        let admitted = server::get(addr, "/", &[]).await;
        assert_eq!(admitted.status, StatusCode::OK);
        assert!(admitted.header("x-ratelimit-remaining").is_some());
    }
    let denied = server::get(addr, "/", &[]).await;
    assert_eq!(
        (denied.status, denied.body.as_str()),
        (StatusCode::FORBIDDEN, "blocked")
    );
    let names = rate_limit_header_names(&denied);
    assert!(names.is_empty(), "no rate-limit headers: {names:?}");
    assert_eq!(denied.header("retry-after"), None);
}

#[test]
fn the_service_is_clone_send_sync_and_fits_service_builder() {
    fn assert_clone_send_sync<T: Clone + Send + Sync + 'static>(_: &T) {}
    let (layer, _) = layer(PER_CLIENT);
    let service = tower::ServiceBuilder::new()
        .layer(layer.clone())
        .service(app());
    assert_clone_send_sync(&layer);
    assert_clone_send_sync(&service);
}

#[tokio::test]
async fn a_store_that_answers_later_is_awaited_before_serving() {
    let rules = Rules::from_yaml(PER_CLIENT).expect("valid rules");
    let store = LaterStore(MemoryStore::with_clock(ManualClock::new()));
    let addr = serve(app().layer(RateLimitLayer::new(Limiter::with_store(rules, store)))).await;
    let mut remaining = Vec::new();
    for _ in 0..5 {
        let reply = server::get(addr, "/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        remaining.push(reply.number("x-ratelimit-remaining"));
    }
    assert_eq!(remaining, [4, 3, 2, 1, 0]);
    let denied = server::get(addr, "/", &[]).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.number("retry-after"), 60);
}

#[tokio::test]
async fn store_failures_follow_the_on_store_error_policy() {
    let policy = |policy: &str| {
        let yaml = format!("domain: t\ndefaults: {{ on_store_error: {policy} }}\ndescriptors:\n  - key: method\n    rate_limit: {{ unit: minute, requests_per_unit: 2 }}\n");
        let rules = Rules::from_yaml(&yaml).expect("valid rules");
        RateLimitLayer::new(Limiter::with_store(rules, DownStore))
    };
    let open = serve(app().layer(policy("allow"))).await;
    let reply = server::get(open, "/", &[]).await;
    assert_eq!(reply.status, StatusCode::OK, "fail open");
    assert!(reply.header("x-ratelimit-remaining").is_none());
    let closed = serve(app().layer(policy("deny"))).await;
    let reply = server::get(closed, "/", &[]).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "fail closed");
    assert_eq!(reply.number("retry-after"), 1);
    let local = serve(app().layer(policy("local"))).await;
    let statuses = [
        server::get(local, "/", &[]).await,
        server::get(local, "/", &[]).await,
        server::get(local, "/", &[]).await,
    ];
    assert_eq!(
        statuses.iter().map(|r| r.status).collect::<Vec<_>>(),
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ],
        "decided in memory"
    );
    assert_eq!(statuses[0].number("x-ratelimit-remaining"), 1);
}

#[tokio::test]
async fn each_limit_may_have_its_own_failure_policy() {
    let yaml = "domain: t\ndescriptors:\n  - key: method\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n  - key: path\n    value: /auth/login\n    rate_limit: { unit: minute, requests_per_unit: 5, on_store_error: deny }\n";
    let rules = Rules::from_yaml(yaml).expect("valid rules");
    let addr = serve(app().layer(RateLimitLayer::new(Limiter::with_store(rules, DownStore)))).await;
    assert_eq!(
        server::get(addr, "/", &[]).await.status,
        StatusCode::OK,
        "the default fails open"
    );
    assert_eq!(
        server::get(addr, "/auth/login", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "the login limit fails closed"
    );
}

/// A server whose handler records the order and time in which queued requests reach it.
async fn recording_server(
    yaml: &str,
) -> (
    SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<(String, std::time::Instant)>>>,
) {
    let arrivals = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = arrivals.clone();
    let router = Router::new().route(
        "/slow",
        get(move |headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                let seq = headers
                    .get("x-seq")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("?")
                    .to_owned();
                seen.lock()
                    .expect("not poisoned")
                    .push((seq, std::time::Instant::now()));
                "served"
            }
        }),
    );
    let rules = Rules::from_yaml(yaml).expect("valid rules");
    (
        serve(router.layer(RateLimitLayer::from_rules(rules))).await,
        arrivals,
    )
}

const SHAPED: &str = r#"
domain: test
descriptors:
  - key: path
    value: /slow
    rate_limit: { unit: second, requests_per_unit: 10, algorithm: leaky_bucket, queue: 3 }
"#;

#[tokio::test]
async fn a_leaky_bucket_releases_queued_requests_in_order_at_the_outflow_rate() {
    let (addr, arrivals) = recording_server(SHAPED).await;
    let mut replies = Vec::new();
    for seq in 0..6 {
        let seq_header = seq.to_string();
        replies.push(tokio::spawn(async move {
            let reply = server::get(addr, "/slow", &[("x-seq", &seq_header)]).await;
            (reply.status, std::time::Instant::now())
        }));
        // Arrive in a known order, well within one 100 ms interval.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut outcomes = Vec::new();
    for reply in replies {
        outcomes.push(
            tokio::time::timeout(Duration::from_secs(10), reply)
                .await
                .expect("answered in time")
                .expect("task"),
        );
    }
    let statuses: Vec<StatusCode> = outcomes.iter().map(|(status, _)| *status).collect();
    assert_eq!(
        statuses[..4],
        [StatusCode::OK; 4],
        "one served at once and three queued"
    );
    assert_eq!(
        statuses[4..],
        [StatusCode::TOO_MANY_REQUESTS; 2],
        "the queue was full"
    );
    assert!(
        outcomes[4].1 < outcomes[1].1,
        "overflow is refused at once, not after waiting"
    );

    let arrivals = arrivals.lock().expect("not poisoned").clone();
    let order: Vec<&str> = arrivals.iter().map(|(seq, _)| seq.as_str()).collect();
    assert_eq!(order, ["0", "1", "2", "3"], "released in arrival order");
    let first = arrivals[0].1;
    for (i, (_, at)) in arrivals.iter().enumerate() {
        // One every 100 ms (a timer never fires early; allow a little for the first request).
        let earliest =
            Duration::from_millis(100 * i as u64).saturating_sub(Duration::from_millis(5));
        assert!(
            at.duration_since(first) >= earliest,
            "request {i} released after {:?}",
            at.duration_since(first)
        );
    }
}

#[tokio::test]
async fn a_client_that_goes_away_frees_its_place_in_the_queue() {
    // 2 per second: one slot every 500 ms, so the test has time to spare on a busy machine.
    let yaml = SHAPED
        .replace("queue: 3", "queue: 1")
        .replace("requests_per_unit: 10", "requests_per_unit: 2");
    let (addr, arrivals) = recording_server(&yaml).await;
    let start = std::time::Instant::now();
    assert_eq!(
        server::get(addr, "/slow", &[("x-seq", "served")])
            .await
            .status,
        StatusCode::OK
    );
    // Queued for about 500 ms; the queue (one place) is now full until the first slot passes.
    let impatient =
        tokio::spawn(async move { server::get(addr, "/slow", &[("x-seq", "impatient")]).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    impatient.abort();
    // Without the freed place every request before the 500 ms mark would find the queue full.
    let mut status = StatusCode::TOO_MANY_REQUESTS;
    while status != StatusCode::OK && start.elapsed() < Duration::from_millis(400) {
        tokio::time::sleep(Duration::from_millis(2)).await;
        status = server::get(addr, "/slow", &[("x-seq", "next")])
            .await
            .status;
    }
    assert_eq!(
        status,
        StatusCode::OK,
        "the next request takes the freed place"
    );
    // Past the time the abandoned request would have been released: it never was.
    tokio::time::sleep(Duration::from_millis(1_500).saturating_sub(start.elapsed())).await;
    let order: Vec<String> = arrivals
        .lock()
        .expect("not poisoned")
        .iter()
        .map(|(seq, _)| seq.clone())
        .collect();
    assert_eq!(
        order,
        ["served", "next"],
        "the abandoned request never reached the handler"
    );
}

#[tokio::test]
async fn weighted_requests_cost_what_their_source_says() {
    let addr = serve_app(
        r#"
domain: test
sources: { weight: { header: x-weight } }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 5, algorithm: sliding_window_log, cost: weight }
"#,
    )
    .await;
    let weighing = |weight: &'static [u8]| async move { get_with(addr, "x-weight", weight).await };
    assert_eq!(weighing(b"3").await.number("x-ratelimit-remaining"), 2);
    assert_eq!(
        weighing(b"3").await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "3 more do not fit in 2"
    );
    assert_eq!(
        weighing(b"not a number")
            .await
            .number("x-ratelimit-remaining"),
        1,
        "counts as 1"
    );
    assert_eq!(
        server::get(addr, "/", &[])
            .await
            .number("x-ratelimit-remaining"),
        0,
        "no weight counts as 1"
    );
}
