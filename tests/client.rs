//! The client layer against tollgate's own server layer, over real TCP: an axum server on a
//! loopback port behind `RateLimitLayer`, a hyper client behind `RateLimitClientLayer`.
//!
//! Server and client share one manual clock, so no test sleeps, except the ones that check
//! that a held request really waits.
#![cfg(feature = "client")]

mod common;
#[cfg(feature = "tonic")]
#[path = "../examples/common/greeter.rs"]
mod greeter;
#[cfg(feature = "tonic")]
#[path = "../examples/common/hello.rs"]
mod hello;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tollgate::client::{ClientError, RateLimitClient, RateLimitClientLayer, Retry};
use tollgate::clock::{Clock, ManualClock, SystemClock};
use tollgate::rules::Rules;
use tollgate::store::MemoryStore;
use tollgate::{Limiter, RateLimitLayer};
use tower::{Layer, Service, ServiceExt};

/// One request a second per client, as the server counts it.
const ONE_PER_SECOND: &str = r"
domain: client
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 1 }
";

type HttpClient = Client<HttpConnector, Empty<Bytes>>;
type Answer =
    Result<Response<hyper::body::Incoming>, ClientError<hyper_util::client::legacy::Error>>;

/// A server behind the rules in `yaml` whose handler counts the requests that reach it.
struct CountingServer {
    addr: SocketAddr,
    served: Arc<AtomicUsize>,
}

impl CountingServer {
    async fn start<C: Clock + Clone>(yaml: &str, clock: C) -> CountingServer {
        let rules = Rules::from_yaml(yaml).expect("valid rules");
        let layer = RateLimitLayer::new(Limiter::with_store(rules, MemoryStore::with_clock(clock)));
        let served = Arc::new(AtomicUsize::new(0));
        let counter = served.clone();
        let handler = move || async move {
            counter.fetch_add(1, Ordering::SeqCst);
            "ok"
        };
        let app = Router::new()
            .route("/", get(handler.clone()).post(handler))
            .layer(layer);
        let addr = common::server::serve(app).await;
        CountingServer { addr, served }
    }

    /// Requests the server admitted (refused ones never reach the handler).
    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

fn client(layer: RateLimitClientLayer) -> RateLimitClient<HttpClient> {
    layer.layer(Client::builder(TokioExecutor::new()).build_http())
}

async fn get_from(client: &mut RateLimitClient<HttpClient>, addr: SocketAddr) -> Answer {
    send(client, http::Method::GET, addr).await
}

async fn send(
    client: &mut RateLimitClient<HttpClient>,
    method: http::Method,
    addr: SocketAddr,
) -> Answer {
    let request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}/"))
        .body(Empty::new())
        .expect("request");
    client.ready().await.expect("ready").call(request).await
}

fn status(answer: &Answer) -> StatusCode {
    match answer {
        Ok(response) => response.status(),
        Err(error) => panic!("expected a response, got {error}"),
    }
}

fn held_for(answer: &Answer) -> Duration {
    match answer {
        Err(ClientError::Held(held)) => held.wait(),
        Ok(response) => panic!("expected a hold, got {}", response.status()),
        Err(error) => panic!("expected a hold, got {error}"),
    }
}

#[tokio::test]
async fn after_a_429_nothing_is_sent_until_the_retry_after_has_passed() {
    let clock = ManualClock::new();
    let server = CountingServer::start(ONE_PER_SECOND, clock.clone()).await;
    let mut client = client(RateLimitClientLayer::with_clock(clock.clone()));

    assert_eq!(
        status(&get_from(&mut client, server.addr).await),
        StatusCode::OK
    );
    let refused = get_from(&mut client, server.addr).await;
    assert_eq!(status(&refused), StatusCode::TOO_MANY_REQUESTS);
    let retry_after = refused.unwrap().headers()["retry-after"].clone();
    assert_eq!(retry_after, "1");

    for _ in 0..5 {
        let held = held_for(&get_from(&mut client, server.addr).await);
        assert_eq!(held, Duration::from_secs(1));
    }
    clock.advance(Duration::from_millis(999));
    let held = held_for(&get_from(&mut client, server.addr).await);
    assert_eq!(held, Duration::from_millis(1));
    assert_eq!(server.served(), 1, "held requests never reach the server");

    clock.advance(Duration::from_millis(1));
    assert_eq!(
        status(&get_from(&mut client, server.addr).await),
        StatusCode::OK
    );
    assert_eq!(server.served(), 2);
}

#[tokio::test]
async fn other_origins_are_not_held() {
    let clock = ManualClock::new();
    let limited = CountingServer::start(ONE_PER_SECOND, clock.clone()).await;
    let other = CountingServer::start(ONE_PER_SECOND, clock.clone()).await;
    let mut client = client(RateLimitClientLayer::with_clock(clock.clone()));

    get_from(&mut client, limited.addr).await.expect("admitted");
    let refused = get_from(&mut client, limited.addr).await;
    assert_eq!(status(&refused), StatusCode::TOO_MANY_REQUESTS);
    held_for(&get_from(&mut client, limited.addr).await);

    assert_eq!(
        status(&get_from(&mut client, other.addr).await),
        StatusCode::OK
    );
    assert_eq!(other.served(), 1);
}

#[tokio::test]
async fn clones_of_one_layer_share_their_holds() {
    let clock = ManualClock::new();
    let server = CountingServer::start(ONE_PER_SECOND, clock.clone()).await;
    let layer = RateLimitClientLayer::with_clock(clock.clone());
    let (mut first, mut second) = (client(layer.clone()), client(layer));

    get_from(&mut first, server.addr).await.expect("admitted");
    let refused = get_from(&mut first, server.addr).await;
    assert_eq!(status(&refused), StatusCode::TOO_MANY_REQUESTS);
    held_for(&get_from(&mut second, server.addr).await);
    assert_eq!(server.served(), 1);
}

#[tokio::test]
async fn an_exhausted_ietf_ratelimit_holds_before_any_429() {
    let yaml = format!("{ONE_PER_SECOND}response: {{ headers: ietf }}\n");
    let clock = ManualClock::new();
    let server = CountingServer::start(&yaml, clock.clone()).await;
    let mut client = client(RateLimitClientLayer::with_clock(clock.clone()));

    let admitted = get_from(&mut client, server.addr).await;
    assert_eq!(status(&admitted), StatusCode::OK);
    let state = admitted.unwrap().headers()["ratelimit"].clone();
    assert!(state.to_str().unwrap().contains(";r=0;t=1"), "{state:?}");

    // The server said no quota is left: the client does not even try.
    assert_eq!(
        held_for(&get_from(&mut client, server.addr).await),
        Duration::from_secs(1)
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        status(&get_from(&mut client, server.addr).await),
        StatusCode::OK
    );
    assert_eq!(server.served(), 2);
}

#[tokio::test]
async fn a_hold_longer_than_wait_up_to_fails_at_once() {
    let clock = ManualClock::new();
    let server = CountingServer::start(ONE_PER_SECOND, clock.clone()).await;
    let layer =
        RateLimitClientLayer::with_clock(clock.clone()).wait_up_to(Duration::from_millis(100));
    let mut client = client(layer);

    get_from(&mut client, server.addr).await.expect("admitted");
    get_from(&mut client, server.addr).await.expect("refused");
    let started = Instant::now();
    assert_eq!(
        held_for(&get_from(&mut client, server.addr).await),
        Duration::from_secs(1)
    );
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "failed at once"
    );
}

/// The demo's per-client limit, 20 a second with bursts of 40, announced in the IETF fields
/// (`"per-client";q=40;w=2`).
const TWENTY_A_SECOND_BURSTS_OF_FORTY: &str = r"
domain: client
response: { headers: ietf }
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 40, name: per-client }
";

/// What a client asking 200 a second for `seconds` (one request every 5 ms of the shared
/// manual clock) got: (admitted, refused, held back).
async fn ask_ten_times_the_rate(
    layer: RateLimitClientLayer,
    clock: &ManualClock,
    addr: SocketAddr,
    seconds: u64,
) -> (usize, usize, usize) {
    let mut client = client(layer);
    let (mut admitted, mut refused, mut held) = (0, 0, 0);
    for _ in 0..seconds * 200 {
        match get_from(&mut client, addr).await {
            Ok(response) if response.status() == StatusCode::OK => admitted += 1,
            Ok(response) if response.status() == StatusCode::TOO_MANY_REQUESTS => refused += 1,
            Err(ClientError::Held(_)) => held += 1,
            Ok(response) => panic!("unexpected {}", response.status()),
            Err(error) => panic!("unexpected {error}"),
        }
        clock.advance(Duration::from_millis(5));
    }
    (admitted, refused, held)
}

#[tokio::test]
async fn a_paced_client_asking_ten_times_its_quota_is_never_refused() {
    let clock = ManualClock::new();
    let server = CountingServer::start(TWENTY_A_SECOND_BURSTS_OF_FORTY, clock.clone()).await;
    let first = get_from(&mut client(RateLimitClientLayer::new()), server.addr).await;
    let first = first.expect("an answer");
    assert_eq!(
        first.headers()["ratelimit-policy"],
        r#""per-client";q=40;w=2"#
    );
    clock.advance(Duration::from_secs(2));

    let layer = RateLimitClientLayer::with_clock(clock.clone()).pace();
    let (admitted, refused, held) = ask_ten_times_the_rate(layer, &clock, server.addr, 10).await;
    // The bucket's 40 and 20 a second for 10 s: 240 at most (one second's 20 comes back
    // 5 ms after the last request).
    assert_eq!(refused, 0, "paced: nothing refused");
    assert!(admitted >= 239, "admitted {admitted} of at most 240");
    assert_eq!(admitted + held, 2000);
}

/// The same limit announced in `X-Ratelimit-*` only, as the demo server does by default.
const TWENTY_A_SECOND_X_RATELIMIT: &str = r"
domain: client
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 40, name: per-client }
";

#[tokio::test]
async fn without_pacing_an_ietf_client_is_held_until_the_bucket_is_full() {
    // The IETF `r=0;t=2` that ends a burst holds the client until the bucket is full: 44
    // every 2.2 s (the bucket's 40 and the 4 that come back as they are sent), and never a
    // refusal, but less than the limit allows (240).
    let clock = ManualClock::new();
    let server = CountingServer::start(TWENTY_A_SECOND_BURSTS_OF_FORTY, clock.clone()).await;
    let layer = RateLimitClientLayer::with_clock(clock.clone());
    let (admitted, refused, _) = ask_ten_times_the_rate(layer, &clock, server.addr, 10).await;
    assert_eq!((admitted, refused), (220, 0));
}

#[tokio::test]
async fn with_x_ratelimit_only_a_client_is_refused_about_once_a_second() {
    // Each refusal holds the client for the `Retry-After` of a whole second, after which it
    // sends the second's 20 at once and is refused again.
    let clock = ManualClock::new();
    let server = CountingServer::start(TWENTY_A_SECOND_X_RATELIMIT, clock.clone()).await;
    let layer = RateLimitClientLayer::with_clock(clock.clone());
    let (admitted, refused, _) = ask_ten_times_the_rate(layer, &clock, server.addr, 10).await;
    assert!((9..=11).contains(&refused), "refused {refused}");
    assert!(admitted >= 220, "admitted {admitted}");
}

#[tokio::test]
async fn without_the_layer_the_same_client_is_refused_most_of_the_time() {
    let clock = ManualClock::new();
    let server = CountingServer::start(TWENTY_A_SECOND_BURSTS_OF_FORTY, clock.clone()).await;
    let mut bare = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut refused = 0;
    for _ in 0..2000 {
        let request = Request::get(format!("http://{}/", server.addr))
            .body(Empty::new())
            .expect("request");
        let response = bare.ready().await.unwrap().call(request).await.unwrap();
        refused += usize::from(response.status() == StatusCode::TOO_MANY_REQUESTS);
        clock.advance(Duration::from_millis(5));
    }
    // 239 of the 240 the limit allows: the last second's 20th comes back 5 ms too late.
    assert_eq!(refused, 2000 - 239);
}

#[tokio::test]
async fn a_paced_client_meets_a_fixed_window_once() {
    let clock = ManualClock::new();
    let yaml = r"
domain: client
response: { headers: ietf }
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 20, algorithm: fixed_window }
";
    let server = CountingServer::start(yaml, clock.clone()).await;
    let layer = RateLimitClientLayer::with_clock(clock.clone()).pace();
    let (admitted, refused, _) = ask_ten_times_the_rate(layer, &clock, server.addr, 10).await;
    // The first window's 20 at once, one more too early, then 20 a window evenly spread.
    assert_eq!(refused, 1);
    assert!(admitted >= 190, "admitted {admitted} of at most 200");
}

#[tokio::test]
async fn a_paced_request_whose_turn_is_near_waits_for_it() {
    let server = CountingServer::start(TWENTY_A_SECOND_BURSTS_OF_FORTY, SystemClock).await;
    let layer = RateLimitClientLayer::new()
        .pace()
        .wait_up_to(Duration::from_secs(1));
    let mut client = client(layer);
    let started = Instant::now();
    // The bucket's 40, then 10 more at 20 a second, each waiting for its turn.
    for _ in 0..50 {
        let answer = get_from(&mut client, server.addr).await;
        assert_eq!(status(&answer), StatusCode::OK);
    }
    assert_eq!(server.served(), 50);
    // Ten turns 50 ms apart; the first comes as soon as the 40 are spent.
    assert!(started.elapsed() >= Duration::from_millis(450));
}

// Real time on both sides: the held request must really wait for the server's second.
#[tokio::test]
async fn with_wait_up_to_a_held_request_waits_and_then_succeeds() {
    let server = CountingServer::start(ONE_PER_SECOND, SystemClock).await;
    let layer = RateLimitClientLayer::new().wait_up_to(Duration::from_secs(3));
    let mut client = client(layer);

    assert_eq!(
        status(&get_from(&mut client, server.addr).await),
        StatusCode::OK
    );
    // Find the refusal: the first request may have been the last one of a second.
    let mut refused = false;
    for _ in 0..3 {
        let answer = get_from(&mut client, server.addr).await;
        if status(&answer) == StatusCode::TOO_MANY_REQUESTS {
            refused = true;
            break;
        }
    }
    assert!(
        refused,
        "one request a second: a quick second request is refused"
    );
    let served_before = server.served();

    let started = Instant::now();
    let answer = get_from(&mut client, server.addr).await;
    assert_eq!(status(&answer), StatusCode::OK, "waited, then admitted");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "it waited: {:?}",
        started.elapsed()
    );
    assert_eq!(server.served(), served_before + 1);
}

// Real time on both sides: the retry must really wait for the server's second.
#[tokio::test]
async fn a_refused_get_is_retried_after_the_retry_after_and_succeeds() {
    let server = CountingServer::start(ONE_PER_SECOND, SystemClock).await;
    let mut client = client(RateLimitClientLayer::new().retry(Retry::new().retries(1)));

    assert_eq!(
        status(&get_from(&mut client, server.addr).await),
        StatusCode::OK
    );
    // The first request may have been the last one of a second: the next one may be admitted
    // without a refusal, so send until one had to be retried (it took a second or so).
    let mut retried = false;
    for sent in 2..=4 {
        let started = Instant::now();
        let answer = get_from(&mut client, server.addr).await;
        assert_eq!(status(&answer), StatusCode::OK, "retried, then admitted");
        assert_eq!(server.served(), sent, "every GET admitted once");
        if started.elapsed() >= Duration::from_millis(200) {
            retried = true;
            break;
        }
    }
    assert!(
        retried,
        "one request a second: a quick second GET is refused"
    );
}

#[tokio::test]
async fn a_refused_post_is_not_retried() {
    let clock = ManualClock::new();
    let server = CountingServer::start(ONE_PER_SECOND, clock.clone()).await;
    let layer = RateLimitClientLayer::with_clock(clock.clone()).retry(Retry::new());
    let mut client = client(layer);

    let started = Instant::now();
    assert_eq!(
        status(&send(&mut client, http::Method::POST, server.addr).await),
        StatusCode::OK
    );
    let refused = send(&mut client, http::Method::POST, server.addr).await;
    assert_eq!(status(&refused), StatusCode::TOO_MANY_REQUESTS);
    assert!(started.elapsed() < Duration::from_millis(500), "no wait");
    assert_eq!(server.served(), 1);
}

/// A server that answers every request with `status` and `headers`, and counts them.
async fn answering(
    status: StatusCode,
    headers: &'static [(&'static str, &'static str)],
) -> CountingServer {
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    let handler = move || async move {
        counter.fetch_add(1, Ordering::SeqCst);
        let mut response = Response::builder().status(status);
        for (name, value) in headers {
            response = response.header(*name, *value);
        }
        response.body(axum::body::Body::empty()).expect("response")
    };
    let addr = common::server::serve(Router::new().route("/", get(handler))).await;
    CountingServer { addr, served }
}

const AN_HOUR: Duration = Duration::from_secs(3_600);

#[tokio::test]
async fn an_absurd_wait_holds_for_max_hold_only() {
    let refused = StatusCode::TOO_MANY_REQUESTS;
    let servers = [
        answering(refused, &[("retry-after", "99999999999")]).await,
        answering(refused, &[("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT")]).await,
        answering(
            refused,
            &[("x-ratelimit-retry-after", "99999999999999999999")],
        )
        .await,
        answering(
            StatusCode::OK,
            &[("ratelimit", r#""api";r=0;t=999999999999999"#)],
        )
        .await,
        answering(
            StatusCode::OK,
            &[
                ("grpc-status", "8"),
                ("grpc-retry-pushback-ms", "99999999999999999999"),
            ],
        )
        .await,
    ];
    for server in &servers {
        let clock = ManualClock::new();
        let mut client = client(RateLimitClientLayer::with_clock(clock.clone()));
        get_from(&mut client, server.addr).await.expect("an answer");
        assert_eq!(held_for(&get_from(&mut client, server.addr).await), AN_HOUR);
        clock.advance(AN_HOUR);
        get_from(&mut client, server.addr)
            .await
            .expect("sent again");
        assert_eq!(server.served(), 2, "held for an hour, then sent");
    }

    let clock = ManualClock::new();
    let layer = RateLimitClientLayer::with_clock(clock.clone()).max_hold(Duration::from_secs(10));
    let mut client = client(layer);
    let server = &servers[0];
    get_from(&mut client, server.addr).await.expect("an answer");
    assert_eq!(
        held_for(&get_from(&mut client, server.addr).await),
        Duration::from_secs(10)
    );
}

#[tokio::test]
async fn clear_holds_sends_the_requests_of_a_held_origin_at_once() {
    let server = answering(StatusCode::TOO_MANY_REQUESTS, &[("retry-after", "86400")]).await;
    let layer = RateLimitClientLayer::with_clock(ManualClock::new());
    let mut client = client(layer.clone());
    let mut sent = 0;
    for clear in 0..3 {
        get_from(&mut client, server.addr).await.expect("refused");
        sent += 1;
        let held = get_from(&mut client, server.addr).await;
        assert_eq!(held_for(&held), AN_HOUR);
        match clear {
            0 => layer.clear_holds(),
            1 => client.clear_holds(),
            _ => client.clear_holds_of(held.unwrap_err().as_held().expect("held").origin()),
        }
        assert_eq!(server.served(), sent, "held requests are not sent");
    }
    get_from(&mut client, server.addr)
        .await
        .expect("sent at once");
    assert_eq!(server.served(), sent + 1);
}

#[tokio::test]
async fn clear_holds_forgets_the_paced_quotas() {
    // One request a day, spent: the copy holds the next one back.
    let server = answering(
        StatusCode::OK,
        &[
            ("ratelimit-policy", r#""day";q=1;w=86400"#),
            ("ratelimit", r#""day";r=0;t=86400"#),
        ],
    )
    .await;
    let layer = RateLimitClientLayer::with_clock(ManualClock::new()).pace();
    let mut client = client(layer.clone());
    get_from(&mut client, server.addr).await.expect("admitted");
    assert_eq!(held_for(&get_from(&mut client, server.addr).await), AN_HOUR);
    layer.clear_holds();
    get_from(&mut client, server.addr)
        .await
        .expect("sent at once");
    assert_eq!(server.served(), 2);
}

/// gRPC: tollgate's trailers-only `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms` holds a
/// tonic client.
#[cfg(feature = "tonic")]
mod grpc {
    use super::*;
    use crate::{greeter, hello};
    use greeter::greeter_client::GreeterClient;
    use greeter::greeter_server::GreeterServer;
    use greeter::HelloRequest;
    use tonic::transport::server::TcpIncoming;
    use tonic::transport::{Endpoint, Server};
    use tonic::Code;

    #[tokio::test]
    async fn resource_exhausted_with_pushback_holds_a_tonic_client() {
        let clock = ManualClock::new();
        let rules = Rules::from_yaml(ONE_PER_SECOND).expect("valid rules");
        let limiter = Limiter::with_store(rules, MemoryStore::with_clock(clock.clone()));
        let arrived = Arc::new(AtomicUsize::new(0));
        let counter = arrived.clone();
        // Counts every request that reaches the server, refused or not.
        let count = tower::ServiceBuilder::new().map_request(move |request| {
            counter.fetch_add(1, Ordering::SeqCst);
            request
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local address");
        let server = Server::builder()
            .layer(count.into_inner())
            .layer(RateLimitLayer::new(limiter))
            .add_service(GreeterServer::new(hello::Hello))
            .serve_with_incoming(TcpIncoming::from(listener));
        tokio::spawn(server);

        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        let layer = RateLimitClientLayer::with_clock(clock.clone());
        let mut greeter = GreeterClient::new(layer.layer(channel));
        let hello = || HelloRequest {
            name: "client".to_owned(),
        };

        greeter.say_hello(hello()).await.expect("admitted");
        let refused = greeter.say_hello(hello()).await.expect_err("refused");
        assert_eq!(refused.code(), Code::ResourceExhausted);
        assert_eq!(arrived.load(Ordering::SeqCst), 2);

        // Held: tonic reports the layer's error, and nothing reaches the server.
        let held = greeter.say_hello(hello()).await.expect_err("held");
        assert!(held.message().contains("request not sent"), "{held:?}");
        assert_eq!(arrived.load(Ordering::SeqCst), 2);

        clock.advance(Duration::from_secs(1));
        greeter.say_hello(hello()).await.expect("admitted again");
        assert_eq!(arrived.load(Ordering::SeqCst), 3);
    }
}
