//! gRPC integration tests: a real tonic server on 127.0.0.1 behind `RateLimitLayer`, called
//! by real tonic clients (the generated `GreeterClient` and tonic-health's `HealthClient`).
//! Time is a `ManualClock`, so no test sleeps.
#![cfg(feature = "tonic")]

#[path = "../examples/common/greeter.rs"]
mod greeter;
#[path = "../examples/common/hello.rs"]
mod hello;

use greeter::greeter_client::GreeterClient;
use greeter::greeter_server::{Greeter, GreeterServer};
use greeter::{HelloReply, HelloRequest};
use hello::Hello;
use std::time::Duration;
use tollgate::clock::ManualClock;
use tollgate::layer::OnRejection;
use tollgate::rules::Rules;
use tollgate::store::MemoryStore;
use tollgate::{Limiter, RateLimitLayer};
use tonic::metadata::MetadataMap;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

type TestLayer = RateLimitLayer<MemoryStore<ManualClock>>;

/// A running server and a channel to it. The server task ends with the test's runtime.
struct TestServer {
    channel: Channel,
    clock: ManualClock,
}

impl TestServer {
    /// Serves the greeter and the health service on 127.0.0.1:0 behind the rules in `yaml`.
    async fn start(yaml: &str) -> TestServer {
        TestServer::start_with(yaml, Hello).await
    }

    /// Serves `greeter` and the health service on 127.0.0.1:0 behind the rules in `yaml`.
    async fn start_with(yaml: &str, greeter: impl Greeter) -> TestServer {
        TestServer::start_behind(yaml, greeter, |layer| layer).await
    }

    /// Serves `greeter` and the health service on 127.0.0.1:0 behind the rules in `yaml`,
    /// in the layer that `configure` makes of the plain one.
    async fn start_behind<R: OnRejection>(
        yaml: &str,
        greeter: impl Greeter,
        configure: impl FnOnce(TestLayer) -> RateLimitLayer<MemoryStore<ManualClock>, R>,
    ) -> TestServer {
        let clock = ManualClock::new();
        let rules = Rules::from_yaml(yaml).expect("valid rules");
        let limiter = Limiter::with_store(rules, MemoryStore::with_clock(clock.clone()));
        let layer = configure(RateLimitLayer::new(limiter));

        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<GreeterServer<Hello>>().await;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        // `TcpIncoming` records a `TcpConnectInfo` in every request: the peer address that
        // `remote_address` reads.
        let server = Server::builder()
            .layer(layer)
            .add_service(health_service)
            .add_service(GreeterServer::new(greeter))
            .serve_with_incoming(TcpIncoming::from(listener));
        tokio::spawn(async move { server.await.expect("the server runs") });

        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .expect("valid endpoint")
            .connect()
            .await
            .expect("connect to the test server");
        TestServer { channel, clock }
    }

    fn greeter(&self) -> GreeterClient<Channel> {
        GreeterClient::new(self.channel.clone())
    }

    fn health(&self) -> HealthClient<Channel> {
        HealthClient::new(self.channel.clone())
    }
}

async fn say_hello(
    client: &mut GreeterClient<Channel>,
    name: &str,
) -> Result<Response<HelloReply>, Status> {
    client
        .say_hello(HelloRequest {
            name: name.to_owned(),
        })
        .await
}

/// The metadata value `key` as a number; panics when it is missing or not a number.
fn number(metadata: &MetadataMap, key: &str) -> u64 {
    let value = metadata
        .get(key)
        .unwrap_or_else(|| panic!("metadata {key} is missing: {metadata:?}"));
    value
        .to_str()
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("metadata {key} is not a number: {value:?}"))
}

/// Checks a denial: RESOURCE_EXHAUSTED (not UNAVAILABLE, which clients retry at once), a
/// message about the rate limit, and the pushback and rate-limit metadata. Returns the
/// `retry-after` seconds.
fn assert_rate_limited(status: &Status, limit: u64) -> u64 {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("rate limit"),
        "the message names the rate limit: {:?}",
        status.message()
    );
    let metadata = status.metadata();
    let pushback_ms = number(metadata, "grpc-retry-pushback-ms");
    assert!(pushback_ms > 0, "grpc-retry-pushback-ms is positive");
    assert_eq!(number(metadata, "x-ratelimit-limit"), limit);
    assert_eq!(number(metadata, "x-ratelimit-remaining"), 0);
    let retry_after = number(metadata, "retry-after");
    assert!(retry_after >= 1, "retry-after is at least one second");
    assert_eq!(number(metadata, "x-ratelimit-retry-after"), retry_after);
    assert!(
        retry_after * 1000 >= pushback_ms,
        "retry-after ({retry_after}s) is the pushback ({pushback_ms}ms) rounded up"
    );
    retry_after
}

const PER_CLIENT: &str = r#"
domain: grpc
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 3 }
"#;

// These rules key on `remote_address`, which needs the socket peer: a server that did not
// record it would fail every call with INTERNAL. That all N calls are admitted shows tonic's
// `TcpConnectInfo` reaches the layer.
#[tokio::test]
async fn exactly_the_limit_is_admitted_and_the_rest_are_resource_exhausted() {
    let server = TestServer::start(PER_CLIENT).await;
    let mut greeter = server.greeter();
    let (limit, extra) = (3, 4);

    let mut admitted = 0;
    let mut denied = Vec::new();
    for i in 0..limit + extra {
        match say_hello(&mut greeter, &format!("caller {i}")).await {
            Ok(response) => {
                assert_eq!(response.get_ref().message, format!("Hello, caller {i}!"));
                admitted += 1;
            }
            Err(status) => denied.push(status),
        }
    }

    assert_eq!(admitted, limit);
    assert_eq!(denied.len() as u64, extra);
    for status in &denied {
        assert_rate_limited(status, limit);
    }
}

#[tokio::test]
async fn a_rejection_hook_answers_denied_calls_with_its_own_status() {
    let server = TestServer::start_behind(PER_CLIENT, Hello, |layer| {
        layer.on_rejection(|rejected| {
            assert!(rejected.is_grpc(), "a gRPC call");
            let message = format!("over quota: {}", rejected.limit().label());
            tonic::Status::permission_denied(message).into_http::<bytes::Bytes>()
        })
    })
    .await;
    let mut greeter = server.greeter();
    for remaining in (0..3).rev() {
        let admitted = say_hello(&mut greeter, "ann").await.expect("admitted");
        assert_eq!(admitted.get_ref().message, "Hello, ann!");
        assert_eq!(
            number(admitted.metadata(), "x-ratelimit-remaining"),
            remaining
        );
    }
    let denied = say_hello(&mut greeter, "ann").await.expect_err("denied");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert_eq!(denied.message(), "over quota: remote_address");
    // tollgate's headers are added to the hook's answer.
    let metadata = denied.metadata();
    assert_eq!(number(metadata, "retry-after"), 60);
    let pushback_ms = number(metadata, "grpc-retry-pushback-ms");
    assert!((1..=60_000).contains(&pushback_ms), "{pushback_ms}");
    assert_eq!(number(metadata, "x-ratelimit-limit"), 3);
}

#[tokio::test]
async fn a_call_succeeds_again_after_waiting_retry_after() {
    for algorithm in ["fixed_window", "sliding_window_counter", "token_bucket"] {
        let server = TestServer::start(&format!(
            r#"
domain: grpc
descriptors:
  - key: remote_address
    rate_limit: {{ unit: minute, requests_per_unit: 2, algorithm: {algorithm} }}
"#
        ))
        .await;
        let mut greeter = server.greeter();
        for _ in 0..2 {
            say_hello(&mut greeter, "early")
                .await
                .expect("within the limit");
        }
        let status = say_hello(&mut greeter, "too soon")
            .await
            .expect_err("over the limit");
        let retry_after = assert_rate_limited(&status, 2);

        server.clock.advance(Duration::from_secs(retry_after));
        let reply = say_hello(&mut greeter, "patient")
            .await
            .unwrap_or_else(|status| {
                panic!("{algorithm}: denied after waiting {retry_after}s: {status:?}")
            });
        assert_eq!(reply.into_inner().message, "Hello, patient!");
    }
}

#[tokio::test]
async fn a_method_path_limit_spares_other_services() {
    let server = TestServer::start(
        r#"
domain: grpc
descriptors:
  - key: path
    value: /helloworld.Greeter/SayHello
    rate_limit: { unit: minute, requests_per_unit: 2 }
"#,
    )
    .await;
    let mut greeter = server.greeter();
    let mut health = server.health();

    for _ in 0..2 {
        say_hello(&mut greeter, "a")
            .await
            .expect("within the limit");
    }
    let status = say_hello(&mut greeter, "b")
        .await
        .expect_err("SayHello is limited");
    assert_rate_limited(&status, 2);

    for service in ["", "helloworld.Greeter"].into_iter().cycle().take(10) {
        let response = health
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .expect("the health check is not limited");
        assert_eq!(response.get_ref().status(), ServingStatus::Serving);
        assert!(
            response.metadata().get("x-ratelimit-limit").is_none(),
            "no limit applies to the health check"
        );
    }

    // The health checks consumed nothing of the greeter's limit, which is still exhausted.
    let status = say_hello(&mut greeter, "c")
        .await
        .expect_err("still limited");
    assert_rate_limited(&status, 2);
}

#[tokio::test]
async fn admitted_calls_carry_the_limit_and_a_decreasing_remaining() {
    let server = TestServer::start(
        r#"
domain: grpc
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 5 }
"#,
    )
    .await;
    let mut greeter = server.greeter();

    let mut remaining = Vec::new();
    for _ in 0..5 {
        let response = say_hello(&mut greeter, "counted")
            .await
            .expect("within the limit");
        assert_eq!(number(response.metadata(), "x-ratelimit-limit"), 5);
        assert!(
            response.metadata().get("retry-after").is_none(),
            "admitted calls have no retry-after"
        );
        remaining.push(number(response.metadata(), "x-ratelimit-remaining"));
    }
    assert_eq!(remaining, [4, 3, 2, 1, 0]);
}

/// A gRPC stream holds its slot of a concurrency limit while it runs: a health `Watch`
/// stream open, the next call is refused; the stream cancelled (HTTP/2 `RST_STREAM`), the
/// slot is free again.
#[tokio::test]
async fn a_stream_holds_its_slot_until_it_is_cancelled() {
    let server = TestServer::start(
        r#"
domain: grpc
descriptors:
  - key: remote_address
    concurrency: { max_in_flight: 1 }
"#,
    )
    .await;
    let mut health = server.health();
    let mut watch = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("the stream opens")
        .into_inner();
    let first = watch.message().await.expect("a status").expect("a message");
    assert_eq!(first.status(), ServingStatus::Serving);

    let mut greeter = server.greeter();
    let status = say_hello(&mut greeter, "ann").await.expect_err("no slot");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("too many requests in flight"),
        "{status:?}"
    );
    assert_eq!(number(status.metadata(), "grpc-retry-pushback-ms"), 1000);
    assert_eq!(number(status.metadata(), "x-ratelimit-limit"), 1);

    drop(watch);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match say_hello(&mut greeter, "ann").await {
            Ok(_) => break,
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(std::time::Instant::now() < deadline, "the slot came back");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

/// A server that sheds load answers `UNAVAILABLE` once full, with pushback.
#[tokio::test]
async fn a_full_server_answers_unavailable() {
    let server = TestServer::start("domain: grpc\nload_shedding: { max_in_flight: 1 }\n").await;
    let mut watch = server
        .health()
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("the stream opens")
        .into_inner();
    watch.message().await.expect("a status").expect("a message");
    let status = say_hello(&mut server.greeter(), "ann")
        .await
        .expect_err("the server is full");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains("load shedding"), "{status:?}");
    assert_eq!(number(status.metadata(), "grpc-retry-pushback-ms"), 1000);
}

/// A greeter that logs in: it greets `ann`, and answers anyone else `UNAUTHENTICATED`.
struct Login;

#[tonic::async_trait]
impl Greeter for Login {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        match request.into_inner().name.as_str() {
            "ann" => Ok(Response::new(HelloReply {
                message: "Welcome, ann".to_owned(),
            })),
            _ => Err(Status::unauthenticated("wrong password")),
        }
    }
}

/// `count_when` on gRPC codes: failed logins count (their status in the response's head,
/// gRPC's Trailers-Only form), successful ones do not (their `grpc-status: 0` comes in
/// the trailers, and gives the reservation back); once three have failed, every call is
/// refused.
#[tokio::test]
async fn only_calls_that_end_with_a_counted_grpc_status_count() {
    let rules = r#"
domain: grpc
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 3, count_when: { grpc_status: [UNAUTHENTICATED, 7] } }
"#;
    let server = TestServer::start_with(rules, Login).await;
    let mut client = server.greeter();
    for login in 0..10 {
        let welcome = say_hello(&mut client, "ann").await;
        assert!(welcome.is_ok(), "login {login}: {welcome:?}");
    }
    for attempt in 0..3 {
        let status = say_hello(&mut client, "mallory")
            .await
            .expect_err("a wrong password");
        assert_eq!(status.code(), Code::Unauthenticated, "attempt {attempt}");
    }
    // The memory store settles as the response ends, before the client has it.
    let status = say_hello(&mut client, "ann").await.expect_err("refused");
    assert_rate_limited(&status, 3);
}
