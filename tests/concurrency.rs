//! Concurrency limits over real TCP: an axum server whose handlers hold their requests
//! until a test lets them go, and hyper clients that wait, give up, or read half a body.

mod common;

use axum::body::Body;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use common::server::{self, serve};
use http::StatusCode;
use http_body::Frame;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tollgate::rules::Rules;
use tollgate::{Limiter, RateLimitLayer};

/// The handlers' shared state: how many requests entered `/hold`, and the gate they wait
/// at (one permit lets one request go).
#[derive(Clone)]
struct Gate {
    entered: Arc<AtomicUsize>,
    /// Requests that left `/hold`: let go, or dropped while they waited.
    left: Arc<AtomicUsize>,
    open: Arc<Semaphore>,
}

/// Counts a request out of `/hold` however it leaves.
struct Leaving(Arc<AtomicUsize>);

impl Drop for Leaving {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Gate {
    /// A gate closed to all.
    fn closed() -> Self {
        Gate {
            entered: Arc::default(),
            left: Arc::default(),
            open: Arc::new(Semaphore::new(0)),
        }
    }

    /// Waits (polling, against a generous deadline) until `count` requests have entered.
    async fn until_entered(&self, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.entered.load(Ordering::SeqCst) < count {
            assert!(
                Instant::now() < deadline,
                "{count} requests entered the handler"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Lets `count` held requests go.
    fn release(&self, count: usize) {
        self.open.add_permits(count);
    }
}

/// `/hold` waits at the gate, `/` answers at once, `/panic` panics, `/stream` sends one
/// chunk and never ends its body.
fn app(gate: Gate) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route(
            "/hold",
            get(|State(gate): State<Gate>| async move {
                gate.entered.fetch_add(1, Ordering::SeqCst);
                let _leaving = Leaving(Arc::clone(&gate.left));
                gate.open.acquire().await.expect("open").forget();
                "released"
            }),
        )
        .route(
            "/panic",
            get(|| async {
                panic!("a handler that fails");
                #[allow(unreachable_code)]
                ""
            }),
        )
        .route(
            "/stream",
            get(|| async { Body::new(Endless(Some(Bytes::from_static(b"first chunk")))) }),
        )
        .with_state(gate)
}

/// A body of one chunk that never ends.
struct Endless(Option<Bytes>);

impl http_body::Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.0.take() {
            Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            None => Poll::Pending,
        }
    }
}

/// Serves [`app`] behind `yaml`, in memory.
async fn serve_rules(yaml: &str) -> (SocketAddr, Gate, Limiter) {
    let limiter = Limiter::new(Rules::from_yaml(yaml).expect("valid rules"));
    let gate = Gate::closed();
    let router = app(gate.clone()).layer(RateLimitLayer::new(limiter.clone()));
    (serve(router).await, gate, limiter)
}

const TWO_AT_ONCE: &str = r#"
domain: test
descriptors:
  - key: remote_address
    concurrency: { max_in_flight: 2 }
"#;

/// Sends `GET path` from `client` (its `x-client` header) on a connection of its own: the
/// response's head, its body unread, or the error the connection ended in.
async fn raw_get(
    addr: SocketAddr,
    path: &str,
    client: &str,
) -> Result<http::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
    let connection = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let request = http::Request::get(format!("http://{addr}{path}"))
        .header("x-client", client)
        .body(Empty::new())
        .expect("request");
    connection.request(request).await
}

/// Polls `GET path` until it answers `expected`, against a generous deadline.
async fn until_status(addr: SocketAddr, path: &str, expected: StatusCode) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = server::get(addr, path, &[]).await.status;
        if status == expected {
            return;
        }
        assert!(Instant::now() < deadline, "{path} answered {status}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_client_runs_its_maximum_at_once_and_the_next_request_is_refused() {
    let (addr, gate, _) = serve_rules(TWO_AT_ONCE).await;
    let held: Vec<_> = (0..2)
        .map(|_| tokio::spawn(async move { server::get(addr, "/hold", &[]).await }))
        .collect();
    gate.until_entered(2).await;
    let refused = server::get(addr, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.number("retry-after"), 1);
    assert_eq!(refused.number("x-ratelimit-limit"), 2);
    assert_eq!(refused.number("x-ratelimit-remaining"), 0);
    let problem: serde_json::Value = serde_json::from_str(&refused.body).expect("JSON");
    assert_eq!(problem["limit"], "remote_address (concurrency)");
    assert_eq!(problem["max_in_flight"], 2);
    assert!(
        refused.header("ratelimit-policy").is_none(),
        "no window to announce"
    );

    gate.release(1);
    let first = held.into_iter().next().expect("a held request");
    assert_eq!(first.await.expect("joined").body, "released");
    let admitted = server::get(addr, "/", &[]).await;
    assert_eq!(admitted.status, StatusCode::OK, "the freed slot is taken");
    assert_eq!(admitted.number("x-ratelimit-limit"), 2);
    assert_eq!(
        admitted.number("x-ratelimit-remaining"),
        0,
        "one held, this one"
    );
    gate.release(1);
}

#[tokio::test]
async fn a_request_refused_for_its_slot_charges_no_rate_limit() {
    let (addr, gate, _) = serve_rules(
        r#"
domain: test
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 3 }
    concurrency: { max_in_flight: 1 }
"#,
    )
    .await;
    let held = tokio::spawn(async move { server::get(addr, "/hold", &[]).await });
    gate.until_entered(1).await;
    for _ in 0..5 {
        let refused = server::get(addr, "/", &[]).await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            refused.number("x-ratelimit-limit"),
            1,
            "the concurrency limit"
        );
    }
    gate.release(1);
    assert_eq!(held.await.expect("joined").status, StatusCode::OK);
    // The held request was charged; the five refused ones were not.
    for remaining in [1, 0] {
        let reply = server::get(addr, "/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.number("x-ratelimit-remaining"), remaining);
    }
    let over = server::get(addr, "/", &[]).await;
    assert_eq!(over.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(over.number("x-ratelimit-limit"), 3, "the rate limit");
}

#[tokio::test]
async fn a_request_refused_by_a_rate_limit_gives_its_slot_back() {
    let (addr, _, _) = serve_rules(
        r#"
domain: test
sources: { user: { header: x-user } }
descriptors:
  - key: remote_address
    concurrency: { max_in_flight: 1 }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1 }
"#,
    )
    .await;
    let as_user = |user: &'static str| async move {
        server::get(addr, "/", &[("x-user", user)]).await.status
    };
    assert_eq!(as_user("ann").await, StatusCode::OK);
    assert_eq!(as_user("ann").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        as_user("bob").await,
        StatusCode::OK,
        "the refused request held no slot"
    );
}

#[tokio::test]
async fn a_client_that_goes_away_frees_its_slot() {
    let (addr, gate, _) = serve_rules(&TWO_AT_ONCE.replace("2", "1")).await;
    let impatient = tokio::spawn(async move { server::get(addr, "/hold", &[]).await });
    gate.until_entered(1).await;
    assert_eq!(
        server::get(addr, "/", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    impatient.abort();
    until_status(addr, "/", StatusCode::OK).await;
}

#[tokio::test]
async fn a_handler_that_panics_frees_its_slot() {
    let (addr, _, _) = serve_rules(&TWO_AT_ONCE.replace("2", "1")).await;
    for _ in 0..3 {
        let answered = raw_get(addr, "/panic", "c").await;
        assert!(answered.is_err(), "the connection closes on the panic");
    }
    until_status(addr, "/", StatusCode::OK).await;
}

#[tokio::test]
async fn a_body_dropped_half_read_frees_its_slot_and_one_read_whole_on_its_end() {
    let (addr, _, _) = serve_rules(&TWO_AT_ONCE.replace("2", "1")).await;
    let response = raw_get(addr, "/stream", "c").await.expect("headers");
    let mut body = response.into_body();
    let first = body.frame().await.expect("a frame").expect("data");
    assert_eq!(first.into_data().expect("data"), "first chunk");
    // The body never ends: its slot is held while the client reads.
    assert_eq!(
        server::get(addr, "/", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    drop(body);
    until_status(addr, "/", StatusCode::OK).await;
    // A body read to its end gave its slot back at the end: the next one is admitted.
    assert_eq!(server::get(addr, "/", &[]).await.status, StatusCode::OK);
}

/// Thousands of requests, some held and let go, some abandoned midway, some panicking, some
/// with bodies dropped half read: after them, each client has every slot free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_requests_that_end_every_way_every_slot_is_free() {
    let (addr, gate, _) = serve_rules(
        r#"
domain: test
sources: { client: { header: x-client } }
descriptors:
  - key: client
    concurrency: { max_in_flight: 3 }
"#,
    )
    .await;
    const CLIENTS: usize = 8;
    const ROUNDS: usize = 250;
    // Held requests are let go one by one meanwhile.
    let releasing = {
        let gate = gate.clone();
        tokio::spawn(async move {
            loop {
                gate.release(1);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    let mut tasks = tokio::task::JoinSet::new();
    for round in 0..ROUNDS {
        for client in 0..CLIENTS {
            let name: &'static str = Box::leak(format!("c{client}").into_boxed_str());
            // A fixed mix by round and client: nothing random to reproduce.
            let way = (round * 7 + client * 3) % 5;
            tasks.spawn(async move {
                let headers = [("x-client", name)];
                match way {
                    0 => drop(server::get(addr, "/", &headers).await),
                    1 => {
                        let held =
                            tokio::spawn(async move { server::get(addr, "/hold", &headers).await });
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        held.abort();
                        let _ = held.await;
                    }
                    2 => assert!(
                        raw_get(addr, "/panic", name).await.is_err(),
                        "the handler panicked"
                    ),
                    3 => {
                        if let Ok(response) = raw_get(addr, "/stream", name).await {
                            let mut body = response.into_body();
                            let _ = body.frame().await;
                        }
                    }
                    _ => drop(server::get(addr, "/hold", &headers).await),
                }
            });
        }
        // Bounded: a few dozen connections at a time.
        while tasks.len() > 64 {
            tasks.join_next().await;
        }
    }
    while tasks.join_next().await.is_some() {}
    releasing.abort();
    // Every request that entered `/hold` has left it, let go or dropped with its connection.
    gate.release(10_000);
    let deadline = Instant::now() + Duration::from_secs(10);
    while gate.left.load(Ordering::SeqCst) < gate.entered.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "held requests left");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    gate.open.forget_permits(usize::MAX);
    for client in 0..CLIENTS {
        let name: &'static str = Box::leak(format!("c{client}").into_boxed_str());
        let before = gate.entered.load(Ordering::SeqCst);
        let held: Vec<_> = (0..3)
            .map(|_| {
                tokio::spawn(async move { server::get(addr, "/hold", &[("x-client", name)]).await })
            })
            .collect();
        gate.until_entered(before + 3).await;
        let fourth = server::get(addr, "/", &[("x-client", name)]).await;
        assert_eq!(
            fourth.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{name}: three slots free, then full"
        );
        gate.release(3);
        for held in held {
            assert_eq!(held.await.expect("joined").status, StatusCode::OK, "{name}");
        }
    }
}

#[tokio::test]
async fn a_full_server_sheds_the_least_important_first() {
    let (addr, gate, _) = serve_rules(
        r#"
domain: test
sources: { priority: { header: x-priority } }
load_shedding:
  max_in_flight: 4          # critical may fill 4, default 3, sheddable 2
  priority: { key: priority, order: [critical, default, sheddable] }
"#,
    )
    .await;
    let hold = |priority: &'static str| {
        tokio::spawn(async move { server::get(addr, "/hold", &[("x-priority", priority)]).await })
    };
    let status = |priority: &'static str| async move {
        server::get(addr, "/", &[("x-priority", priority)]).await
    };
    let mut held = vec![hold("sheddable"), hold("sheddable")];
    gate.until_entered(2).await;
    let shed = status("sheddable").await;
    assert_eq!(shed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.number("retry-after"), 1);
    let problem: serde_json::Value = serde_json::from_str(&shed.body).expect("JSON");
    assert_eq!(problem["status"], 503);
    assert_eq!(problem["limit"], "load_shedding");
    // Requests without a priority, or an unknown one, are the least important.
    assert_eq!(
        status("unknown").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );

    held.push(hold("default"));
    gate.until_entered(3).await;
    assert_eq!(
        status("default").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    held.push(hold("critical"));
    gate.until_entered(4).await;
    assert_eq!(
        status("critical").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );

    gate.release(4);
    for held in held {
        assert_eq!(held.await.expect("joined").status, StatusCode::OK);
    }
    assert_eq!(status("sheddable").await.status, StatusCode::OK);
}

/// A backend of 4 workers that each take 20 ms, behind an adaptive limit, under 64 clients
/// that send back to back: the limit finds the backend's capacity, so the admitted requests
/// wait a little rather than behind every client, the backend stays busy, and the rest are
/// shed. Real time, with generous bounds: the deterministic simulation in
/// `concurrency::adaptive` holds the tight ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adaptive_limit_protects_a_backend_of_fixed_capacity() {
    const WORK: Duration = Duration::from_millis(20);
    let workers = Arc::new(Semaphore::new(4));
    let limiter = Limiter::new(
        Rules::from_yaml(
            "domain: test\nload_shedding: { max_in_flight: adaptive, min: 1, max: 500 }\n",
        )
        .expect("valid rules"),
    );
    let router = Router::new()
        .route(
            "/",
            get(move || {
                let workers = Arc::clone(&workers);
                async move {
                    let _worker = workers.acquire().await.expect("open");
                    tokio::time::sleep(WORK).await;
                    "done"
                }
            }),
        )
        .layer(RateLimitLayer::new(limiter));
    let addr = serve(router).await;
    let run = Duration::from_secs(4);
    let start = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..64 {
        clients.spawn(async move {
            let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
            let uri: http::Uri = format!("http://{addr}/").parse().expect("uri");
            // (admitted in the second half, with its latency) or shed.
            let mut outcomes = Vec::new();
            while start.elapsed() < run {
                let sent = Instant::now();
                let response = client.get(uri.clone()).await.expect("a response");
                let status = response.status();
                response.into_body().collect().await.expect("a body");
                let late = start.elapsed() > run / 2;
                match status {
                    StatusCode::OK if late => outcomes.push(Some(sent.elapsed())),
                    StatusCode::OK => {}
                    StatusCode::SERVICE_UNAVAILABLE => {
                        if late {
                            outcomes.push(None);
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    other => panic!("{other}"),
                }
            }
            outcomes
        });
    }
    let outcomes: Vec<Option<Duration>> = clients.join_all().await.into_iter().flatten().collect();
    let mut latencies: Vec<Duration> = outcomes.iter().flatten().copied().collect();
    latencies.sort();
    let served_per_second = latencies.len() as f64 / (run.as_secs_f64() / 2.0);
    let median = latencies[latencies.len() / 2];
    let shed = outcomes.iter().filter(|outcome| outcome.is_none()).count();
    // Capacity: 4 workers of 20 ms, 200 a second. Without a limit, each of the 64 requests
    // in flight waits for 15 others' work: 320 ms.
    assert!(
        median <= WORK * 6,
        "admitted requests wait a small multiple of the work: median {median:?}"
    );
    assert!(
        served_per_second >= 0.6 * 200.0,
        "most of the capacity is served: {served_per_second:.0} a second"
    );
    assert!(shed > 0, "the rest is shed");
}

/// The adaptive limit learns only from requests that ran: requests refused at once (here by
/// a rate limit, in microseconds) would otherwise pass for the backend's latency without a
/// queue, make every real request look queued, and shrink the limit until real traffic is
/// shed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adaptive_limit_learns_nothing_from_refused_requests() {
    let limiter = Limiter::new(
        Rules::from_yaml(
            r#"
domain: test
sources: { user: { header: x-user } }
load_shedding: { max_in_flight: adaptive, min: 1, max: 500 }
descriptors:
  - key: user
    value: refused
    rate_limit: { unit: second, requests_per_unit: 0 }
"#,
        )
        .expect("valid rules"),
    );
    let router = Router::new()
        .route(
            "/",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                "done"
            }),
        )
        .layer(RateLimitLayer::new(limiter));
    let addr = serve(router).await;
    let mut shed = 0;
    for _ in 0..40 {
        let refused = server::get(addr, "/", &[("x-user", "refused")]).await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        let real: Vec<_> = (0..12)
            .map(|_| tokio::spawn(async move { server::get(addr, "/", &[]).await.status }))
            .collect();
        for request in real {
            let status = request.await.expect("joined");
            shed += usize::from(status == StatusCode::SERVICE_UNAVAILABLE);
        }
    }
    assert_eq!(
        shed, 0,
        "12 requests of 10 ms at once fit a backend without a queue"
    );
}
