//! `Algorithm::settle`: what an admitted request turned out to cost, charged after the fact
//! (past the limit if need be, then paid back) or given back; every algorithm, on a manual
//! clock's numbers.

mod common;
#[path = "common/rules.rs"]
mod rules_common;

use rules_common::rate_limit_errors;

use std::time::Duration;
use tollgate::algorithm::{Algorithm, Quota, State};
use tollgate::clock::Nanos;

/// 1,000 a minute, all at once where the algorithm has a burst or a queue.
fn quota(algorithm: Algorithm) -> Quota {
    per_minute(algorithm, 1_000)
}

/// `limit` a minute, all at once where the algorithm has a burst or a queue.
fn per_minute(algorithm: Algorithm, limit: u64) -> Quota {
    let quota = Quota::new(limit, Duration::from_secs(60)).expect("a quota");
    match algorithm {
        Algorithm::LeakyBucket => quota.with_queue(limit - 1).with_policing(),
        _ => quota,
    }
}

fn at(nanos: u64) -> Nanos {
    Nanos::new(nanos)
}

#[test]
fn a_charge_past_the_limit_is_kept_until_paid_back_and_retried_exactly() {
    for algorithm in Algorithm::ALL {
        let quota = quota(algorithm);
        let mut state: State = algorithm.fresh(at(0), &quota);
        // The guide's example: each answer reserves 1 and turns out to use 300 tokens.
        for answer in 0..4 {
            let admitted = algorithm.acquire(&mut state, at(0), &quota, 1);
            assert!(admitted.allowed, "{algorithm}: answer {answer}");
            algorithm.settle(&mut state, at(0), &quota, 299);
        }
        let fifth = algorithm.acquire(&mut state, at(0), &quota, 1);
        assert!(!fifth.allowed, "{algorithm}: 1,200 used of 1,000");
        assert_eq!(fifth.remaining, 0, "{algorithm}");
        let retry = u64::try_from(fifth.retry_after.as_nanos()).expect("short");
        assert!(retry > 0, "{algorithm}");
        let mut early = state.clone();
        assert!(
            !algorithm
                .acquire(&mut early, at(retry - 1), &quota, 1)
                .allowed,
            "{algorithm}: a nanosecond early"
        );
        assert!(
            algorithm.acquire(&mut state, at(retry), &quota, 1).allowed,
            "{algorithm}: at retry_after exactly ({retry} ns)"
        );
    }
}

#[test]
fn what_a_response_did_not_use_is_given_back() {
    for algorithm in Algorithm::ALL {
        let quota = quota(algorithm);
        let mut state = algorithm.fresh(at(0), &quota);
        // Four requests reserve 300 each and use 100.
        for _ in 0..4 {
            assert!(
                algorithm.acquire(&mut state, at(0), &quota, 300).allowed,
                "{algorithm}"
            );
            algorithm.settle(&mut state, at(0), &quota, -200);
        }
        let room = algorithm.peek(&state, at(0), &quota, 0).remaining;
        assert_eq!(room, 600, "{algorithm}: 400 used");
        // Giving back more than was charged leaves a fresh key, never a fuller one.
        algorithm.settle(&mut state, at(0), &quota, -5_000);
        let fresh = algorithm.peek(&algorithm.fresh(at(0), &quota), at(0), &quota, 0);
        assert_eq!(
            algorithm.peek(&state, at(0), &quota, 0).remaining,
            fresh.remaining,
            "{algorithm}"
        );
    }
}

#[test]
fn a_window_s_charge_is_given_back_only_in_its_own_window() {
    let quota = quota(Algorithm::FixedWindow);
    let minute = 60_000_000_000;
    let mut state = Algorithm::FixedWindow.fresh(at(0), &quota);
    assert!(
        Algorithm::FixedWindow
            .acquire(&mut state, at(0), &quota, 500)
            .allowed
    );
    // The response ended in the next window: that window owes nothing back.
    Algorithm::FixedWindow.settle(&mut state, at(minute), &quota, -500);
    let next = Algorithm::FixedWindow.peek(&state, at(minute), &quota, 0);
    assert_eq!(next.remaining, 1_000);
    // A charge made late lands in the window of its settlement.
    Algorithm::FixedWindow.settle(&mut state, at(minute), &quota, 700);
    assert_eq!(
        Algorithm::FixedWindow
            .peek(&state, at(minute), &quota, 0)
            .remaining,
        300
    );
}

mod stores {
    use super::*;
    use tollgate::clock::ManualClock;
    use tollgate::store::{LimitCheck, MemoryStore, Store};

    fn check<'a>(
        key: &'a [u8],
        algorithm: Algorithm,
        quota: &'a Quota,
        cost: u64,
    ) -> LimitCheck<'a> {
        LimitCheck {
            domain: "settle",
            key,
            tag: key,
            algorithm,
            quota,
            cost,
            shadow: false,
            check_only: false,
            sync_every: None,
            limit: "tokens",
            approximate: None,
            carried_from: &[],
        }
    }

    async fn decide<St: Store>(
        store: &St,
        check: &LimitCheck<'_>,
    ) -> tollgate::algorithm::Decision {
        let decisions = crate::common::stores::decide(store, std::slice::from_ref(check)).await;
        decisions.expect("decided")[0]
    }

    /// The guide's example through the store `make` builds, for every algorithm (each in
    /// the form the store keeps it: packed, a timestamp, whole): four answers of 300
    /// tokens, the fifth refused until it has been paid back, then admitted exactly.
    pub(crate) async fn settles<St: Store>(make: impl AsyncFn(ManualClock) -> St) {
        for algorithm in Algorithm::ALL {
            // A token bucket of a whole interval is kept as a timestamp; 7 a minute is not.
            for quota in [quota(algorithm), per_minute(algorithm, 7)] {
                let clock = ManualClock::new();
                let store = make(clock.clone()).await;
                // A key of its own: a store shared by the runs keeps each apart.
                let key = format!("{algorithm} {}", quota.requests_per_period()).into_bytes();
                let check = |cost| check(&key, algorithm, &quota, cost);
                let per_answer = quota.requests_per_period() * 3 / 10;
                for answer in 0..4 {
                    let admitted = decide(&store, &check(1)).await;
                    assert!(admitted.allowed, "{algorithm} {quota:?}: answer {answer}");
                    let extra = i64::try_from(per_answer).expect("small") - 1;
                    store.settle(&check(1), extra).await.expect("settled");
                }
                let fifth = decide(&store, &check(1)).await;
                assert!(!fifth.allowed, "{algorithm} {quota:?}: over the limit");
                clock.advance(fifth.retry_after - Duration::from_nanos(1));
                let early = decide(&store, &check(1)).await;
                assert!(!early.allowed, "{algorithm} {quota:?}: a nanosecond early");
                clock.advance(Duration::from_nanos(1));
                let paid = decide(&store, &check(1)).await;
                assert!(paid.allowed, "{algorithm} {quota:?}: paid back");
            }
        }
    }

    /// Through the store `make` builds: four requests reserve 300 and use 100; the 600 they
    /// gave back are admitted, and nothing more.
    pub(crate) async fn gives_back<St: Store>(make: impl AsyncFn(ManualClock) -> St) {
        for algorithm in Algorithm::ALL {
            let quota = quota(algorithm);
            let store = make(ManualClock::new()).await;
            let key = format!("{algorithm} back").into_bytes();
            let check = |cost| check(&key, algorithm, &quota, cost);
            for _ in 0..4 {
                assert!(decide(&store, &check(300)).await.allowed, "{algorithm}");
                store.settle(&check(300), -200).await.expect("settled");
            }
            assert!(
                decide(&store, &check(600)).await.allowed,
                "{algorithm}: 600 given back"
            );
            assert!(
                !decide(&store, &check(1)).await.allowed,
                "{algorithm}: and no more"
            );
        }
    }

    #[tokio::test]
    async fn the_memory_store_settles_every_algorithm() {
        settles(async |clock| MemoryStore::with_clock(clock)).await;
        gives_back(async |clock| MemoryStore::with_clock(clock)).await;
    }
}

#[cfg(feature = "redis")]
mod redis {
    use super::stores::{gives_back, settles};
    use std::time::Duration;
    use tollgate::store::RedisStore;

    use crate::common::redis_server;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_settles_every_algorithm() {
        let server = redis_server::RedisServer::start();
        settles(async |clock| {
            server.cli(&["FLUSHALL"]);
            server.store_with_clock(clock).await
        })
        .await;
    }

    /// Two servers on one Redis settle one user's tokens together: two answers of 300 on
    /// each, and the fifth, on either, refused.
    #[cfg(feature = "axum")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_servers_on_one_redis_settle_together() {
        use crate::common::server;
        use crate::over_http::{served, TOKENS};
        use axum::http::StatusCode;
        let server = redis_server::RedisServer::start();
        let store = || server.store();
        let servers = [
            served(TOKENS, store().await).await,
            served(TOKENS, store().await).await,
        ];
        let ann = [("x-user", "ann")];
        for answer in 0..4 {
            let reply = server::get(servers[answer % 2], "/answer?tokens=300", &ann).await;
            assert_eq!(reply.status, StatusCode::OK, "answer {answer}");
        }
        until_left(TOKENS, store().await, 0).await;
        for addr in servers {
            let fifth = server::get(addr, "/answer?tokens=300", &ann).await;
            assert_eq!(fifth.status, StatusCode::TOO_MANY_REQUESTS);
        }
    }

    /// Local-first limits settle in each server's own counts, sent with them at the next
    /// sync: two answers of 300 tokens on each server, and once both have synced, the one
    /// that synced last refuses the fifth (the other, on its last totals, admits at most
    /// one more, refused from its next sync on).
    #[cfg(feature = "axum")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn local_first_servers_settle_into_the_fleets_totals() {
        use crate::common::server;
        use crate::over_http::{served, TOKENS};
        use axum::http::StatusCode;
        // A day: no window ends while the test runs on Redis's clock.
        let rules = TOKENS
            .replace("unit: minute", "unit: day")
            .replace("settle:", "sync_every: 100ms, settle:");
        let server = redis_server::RedisServer::start();
        let stores = [server.store().await, server.store().await];
        let addrs = [
            served(&rules, stores[0].clone()).await,
            served(&rules, stores[1].clone()).await,
        ];
        let ann = [("x-user", "ann")];
        for answer in 0..4 {
            let reply = server::get(addrs[answer / 2], "/answer?tokens=300", &ann).await;
            assert_eq!(reply.status, StatusCode::OK, "answer {answer}");
        }
        for store in &stores {
            store.sync_now().await.expect("Redis answers");
        }
        let fifth = server::get(addrs[1], "/answer?tokens=300", &ann).await;
        assert_eq!(
            fifth.status,
            StatusCode::TOO_MANY_REQUESTS,
            "1,200 of 1,000"
        );
        assert_eq!(fifth.number("x-ratelimit-remaining"), 0);
        let on_its_last_totals = server::get(addrs[0], "/answer?tokens=300", &ann).await;
        stores[0].sync_now().await.expect("Redis answers");
        let after_its_sync = server::get(addrs[0], "/answer?tokens=300", &ann).await;
        assert_eq!(after_its_sync.status, StatusCode::TOO_MANY_REQUESTS);
        let _ = on_its_last_totals;
    }

    /// Settlement under concurrency stays exact: 400 answers of 10 tokens at once, over two
    /// servers on one Redis (their calls batched), leave exactly 4,000 counted.
    #[cfg(feature = "axum")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_settlements_add_up_exactly() {
        use crate::common::server;
        use crate::over_http::served;
        use axum::http::StatusCode;
        let rules = "domain: llm\nsources: { user: { header: x-user } }\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 100000, settle: { response_header: x-tokens-used } }\n";
        let server = redis_server::RedisServer::start();
        // A timeout a busy machine keeps: a request admitted by `on_store_error` was not
        // charged its reservation, and its settlement would leave the count short.
        let store = || async {
            RedisStore::builder(server.url())
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .expect("connects")
        };
        let servers = [
            served(rules, store().await).await,
            served(rules, store().await).await,
        ];
        let mut answers = tokio::task::JoinSet::new();
        for answer in 0..400 {
            let addr = servers[answer % 2];
            answers.spawn(async move {
                server::get(addr, "/answer?tokens=10", &[("x-user", "ann")])
                    .await
                    .status
            });
        }
        while let Some(status) = answers.join_next().await {
            assert_eq!(status.expect("joined"), StatusCode::OK);
        }
        until_left(rules, store().await, 100_000 - 4_000).await;
    }

    /// Polls what `rules` leave user ann in `store` until `left`, against a generous
    /// deadline: a settlement is sent with the response's head and lands a round trip
    /// later. Never fewer: a settlement counted twice fails at once.
    #[cfg(feature = "axum")]
    async fn until_left(rules: &str, store: RedisStore, left: u64) {
        let rules = tollgate::rules::Rules::from_yaml(rules).expect("valid rules");
        let watcher = tollgate::Limiter::with_store(rules, store);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let peeked = watcher.peek(&[("user", "ann")]).await.expect("peeked");
            let remaining = peeked[0].decision().remaining;
            if remaining == left {
                return;
            }
            assert!(
                remaining > left && std::time::Instant::now() < deadline,
                "{remaining} left, not {left}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_gives_back_what_was_not_used() {
        let server = redis_server::RedisServer::start();
        gives_back(async |clock| server.store_with_clock(clock).await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_settles_every_algorithm_as_0_1_kept_them() {
        let server = redis_server::RedisServer::start();
        settles(async |clock| {
            server.cli(&["FLUSHALL"]);
            RedisStore::builder(server.url())
                .clock(clock)
                .legacy_layout(true)
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .expect("connects")
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_cluster_settles_every_algorithm() {
        let cluster = redis_server::RedisCluster::start(3);
        settles(async |clock| cluster.store_with_clock(clock).await).await;
    }
}

#[cfg(feature = "axum")]
mod over_http {
    use crate::common::server::{self, serve};
    use axum::extract::Query;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use axum::routing::get;
    use axum::Router;
    use std::collections::HashMap;
    use std::net::SocketAddr;
    use std::time::Duration;
    use tollgate::clock::ManualClock;
    use tollgate::response::SettledCost;
    use tollgate::rules::Rules;
    use tollgate::store::{MemoryStore, Store};
    use tollgate::{Limiter, RateLimitLayer};

    /// `/answer?tokens=N` answers with `x-tokens-used: N`, or, `&as=extension`, a
    /// `SettledCost` of N, or, `&as=nothing`, neither; `/login?ok=1` logs in, otherwise
    /// fails with 401.
    fn app() -> Router {
        Router::new()
            .route(
                "/answer",
                get(|Query(query): Query<HashMap<String, String>>| async move {
                    let tokens: u64 = query
                        .get("tokens")
                        .and_then(|t| t.parse().ok())
                        .unwrap_or(0);
                    let mut response = "an answer".into_response();
                    match query.get("as").map(String::as_str) {
                        Some("extension") => {
                            response.extensions_mut().insert(SettledCost(tokens));
                        }
                        Some("nothing") => {}
                        _ => {
                            response
                                .headers_mut()
                                .insert("x-tokens-used", tokens.into());
                        }
                    }
                    response
                }),
            )
            .route(
                "/login",
                get(|Query(query): Query<HashMap<String, String>>| async move {
                    if query.contains_key("ok") {
                        StatusCode::OK
                    } else {
                        StatusCode::UNAUTHORIZED
                    }
                }),
            )
    }

    pub(crate) async fn served<St: Store>(yaml: &str, store: St) -> SocketAddr {
        let limiter = Limiter::with_store(Rules::from_yaml(yaml).expect("valid rules"), store);
        serve(app().layer(RateLimitLayer::new(limiter))).await
    }

    pub(crate) const TOKENS: &str = r#"
domain: llm
sources: { user: { header: x-user } }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000, settle: { response_header: x-tokens-used } }
"#;

    /// The guide's example: 1,000 tokens a minute per user, answers of 300 tokens: four
    /// admitted, the fifth refused until the window allows.
    pub(crate) async fn tokens_a_minute(addr: SocketAddr, path: &str) {
        let ann = [("x-user", "ann")];
        for answer in 0..4 {
            let reply = server::get(addr, path, &ann).await;
            assert_eq!(reply.status, StatusCode::OK, "answer {answer}");
        }
        let fifth = server::get(addr, path, &ann).await;
        assert_eq!(fifth.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(fifth.number("x-ratelimit-remaining"), 0);
        assert!(fifth.number("retry-after") > 0);
        let bob = server::get(addr, path, &[("x-user", "bob")]).await;
        assert_eq!(bob.status, StatusCode::OK, "each user's own tokens");
    }

    #[tokio::test]
    async fn answers_settle_their_tokens_from_a_header_or_the_handler() {
        let clock = ManualClock::new();
        let addr = served(TOKENS, MemoryStore::with_clock(clock.clone())).await;
        tokens_a_minute(addr, "/answer?tokens=300").await;
        clock.advance(Duration::from_secs(60));
        let later = server::get(addr, "/answer?tokens=300", &[("x-user", "ann")]).await;
        assert_eq!(later.status, StatusCode::OK, "the next window");

        let clock = ManualClock::new();
        let addr = served(TOKENS, MemoryStore::with_clock(clock)).await;
        tokens_a_minute(addr, "/answer?tokens=300&as=extension").await;

        // An answer that says nothing keeps its reservation of 1.
        let addr = served(TOKENS, MemoryStore::with_clock(ManualClock::new())).await;
        let cy = [("x-user", "cy")];
        for _ in 0..1000 {
            let reply = server::get(addr, "/answer?as=nothing", &cy).await;
            assert_eq!(reply.status, StatusCode::OK);
        }
        let over = server::get(addr, "/answer?as=nothing", &cy).await;
        assert_eq!(over.status, StatusCode::TOO_MANY_REQUESTS);
    }

    #[tokio::test]
    async fn only_failed_logins_count() {
        let rules = r#"
domain: auth
sources: { user: { header: x-user } }
descriptors:
  - key: user
    descriptors:
      - key: remote_address
        rate_limit: { period: 15m, requests_per_unit: 5, count_when: { status: [401, 403] } }
"#;
        let addr = served(rules, MemoryStore::with_clock(ManualClock::new())).await;
        let ann = [("x-user", "ann")];
        for _ in 0..20 {
            assert_eq!(
                server::get(addr, "/login?ok=1", &ann).await.status,
                StatusCode::OK
            );
        }
        for failure in 0..5 {
            let reply = server::get(addr, "/login", &ann).await;
            assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "failure {failure}");
        }
        let refused = server::get(addr, "/login?ok=1", &ann).await;
        assert_eq!(
            refused.status,
            StatusCode::TOO_MANY_REQUESTS,
            "five failures: shut"
        );
        assert_eq!(
            server::get(addr, "/login?ok=1", &[("x-user", "bob")])
                .await
                .status,
            StatusCode::OK
        );
    }
}

#[test]
fn mistaken_settlements_are_refused() {
    use tollgate::rules::{KeySources, Rules, Settlement};
    let per_minute = "unit: minute, requests_per_unit: 9";
    let cases = [
        (
            format!(
                "{per_minute}, settle: {{ response_header: x-t }}, count_when: {{ status: [401] }}"
            ),
            "not both",
        ),
        (
            format!("{per_minute}, settle: {{ response_header: \"a b\" }}"),
            "`a b` is not a header name",
        ),
        (
            format!("{per_minute}, count_when: {{ status: [] }}"),
            "list the statuses",
        ),
        (
            format!("{per_minute}, settle: {{}}"),
            "response_header, response_trailer or (tollgate serve) stream_done, one of them",
        ),
        (
            format!("{per_minute}, settle: {{ response_header: a, response_trailer: b }}"),
            "one of them",
        ),
        (
            format!("{per_minute}, count_when: {{ status: [99] }}"),
            "99 is not a status",
        ),
        (
            format!("{per_minute}, count_when: {{ status: [6xx] }}"),
            "`6xx` is not a status class",
        ),
        (
            format!(
                "{per_minute}, settle: {{ response_header: x-t }}, approximate: {{ memory: 1MiB }}"
            ),
            "cannot give a charge back",
        ),
        (
            format!("{per_minute}, count_when: {{ grpc_status: [UNAUTHENTICATD] }}"),
            "`UNAUTHENTICATD` is not a gRPC status",
        ),
        (
            format!("{per_minute}, count_when: {{ grpc_status: [17] }}"),
            "`17` is not a gRPC status",
        ),
        (
            format!("{per_minute}, count_when: {{ code: [401] }}"),
            "unknown field `code`",
        ),
        (
            "unlimited: true, settle: { response_header: x-t }".to_owned(),
            "charges nothing to settle",
        ),
        (
            format!("{per_minute}, settle: {{ stream_done: true }}"),
            "stream_done is for tollgate serve",
        ),
    ];
    for (rate_limit, expected) in cases {
        let errors = rate_limit_errors(&rate_limit);
        assert!(errors.contains(expected), "{rate_limit}: {errors}");
    }
    // A rate limit service sees no response: its clients charge by a second call.
    let service = |settle: &str| {
        let yaml = format!("domain: d\ndescriptors:\n  - key: user\n    rate_limit: {{ {per_minute}, {settle} }}\n");
        Rules::from_yaml_with(&yaml, KeySources::Given)
    };
    let stream_done = service("settle: { stream_done: true }").expect("for a service");
    let settlement = stream_done.limits()[0].settlement().expect("settles");
    assert_eq!(settlement, &Settlement::StreamDone);
    assert_eq!(
        settlement.to_string(),
        "charged whole when the stream is done"
    );
    for settle in [
        "settle: { response_header: x-t }",
        "count_when: { status: [401] }",
    ] {
        let errors = service(settle).expect_err("not for a service").to_string();
        assert!(errors.contains("stream_done: true"), "{settle}: {errors}");
    }
    let errors = service("settle: { stream_done: true, response_header: x-t }")
        .expect_err("one of them")
        .to_string();
    assert!(errors.contains("one of them"), "{errors}");
}

/// A streamed answer settles from its trailers, when its body ends.
#[cfg(feature = "axum")]
mod trailers {
    use bytes::Bytes;
    use http::{HeaderMap, Request, Response, StatusCode};
    use http_body::Frame;
    use http_body_util::BodyExt;
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tollgate::clock::ManualClock;
    use tollgate::rules::Rules;
    use tollgate::store::MemoryStore;
    use tollgate::{Limiter, RateLimitLayer};
    use tower::{service_fn, Layer, ServiceExt};

    /// A body of one chunk, then trailers saying `x-tokens-used: 300`.
    struct Streamed(u8);

    impl http_body::Body for Streamed {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            self.0 += 1;
            Poll::Ready(match self.0 {
                1 => Some(Ok(Frame::data(Bytes::from_static(b"an answer")))),
                2 => {
                    let mut trailers = HeaderMap::new();
                    trailers.insert("x-tokens-used", 300.into());
                    Some(Ok(Frame::trailers(trailers)))
                }
                _ => None,
            })
        }
    }

    #[tokio::test]
    async fn a_stream_settles_from_its_trailers_and_one_cancelled_keeps_its_reservation() {
        let rules = Rules::from_yaml(
            "domain: llm\nsources: { user: { header: x-user } }\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 1000, settle: { response_trailer: x-tokens-used } }\n",
        )
        .expect("valid rules");
        let limiter = Limiter::with_store(rules, MemoryStore::with_clock(ManualClock::new()));
        let service = RateLimitLayer::new(limiter).layer(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Streamed(0)))
        }));
        let request = |user: &str| {
            Request::get("/")
                .header("x-user", user)
                .body(())
                .expect("request")
        };
        for answer in 0..4 {
            let response = service
                .clone()
                .oneshot(request("ann"))
                .await
                .expect("served");
            assert_eq!(response.status(), StatusCode::OK, "answer {answer}");
            let body = response.into_body().collect().await.expect("read");
            assert!(body.trailers().is_some());
        }
        let fifth = service
            .clone()
            .oneshot(request("ann"))
            .await
            .expect("served");
        assert_eq!(fifth.status(), StatusCode::TOO_MANY_REQUESTS);

        // Bob's streams are dropped before their trailers: each keeps its reservation of 1.
        for _ in 0..1000 {
            let response = service
                .clone()
                .oneshot(request("bob"))
                .await
                .expect("served");
            assert_eq!(response.status(), StatusCode::OK);
            let mut body = response.into_body();
            let _first = body.frame().await;
        }
        let over = service
            .clone()
            .oneshot(request("bob"))
            .await
            .expect("served");
        assert_eq!(
            over.status(),
            StatusCode::TOO_MANY_REQUESTS,
            "1,000 reservations kept"
        );
    }
}
