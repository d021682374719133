//! What the layer adds to one request, in process, without a network: the same axum handler
//! response behind nothing, behind tollgate's `RateLimitLayer` and behind tower_governor's
//! `GovernorLayer`, each keyed by the peer address.
//!
//! Each iteration builds a `GET /` request with a `ConnectInfo<SocketAddr>` extension (as
//! `into_make_service_with_connect_info` gives it), calls the service, polls the response
//! future once with a no-op waker (the inner service answers at once, so one poll finishes
//! it), reads the response body to its end, as hyper does, and drops the response. The inner
//! service answers `200` with a static body, as `examples/bench_server.rs` does. Layers:
//!
//! | id | layer |
//! |---|---|
//! | `bare` | none: the cost of building the request and the response |
//! | `tollgate` | one per-IP `token_bucket` of 1,000,000,000 per second: nothing is limited |
//! | `tollgate-limited` | the same at 1 per hour: every request but each address's first gets 429 |
//! | `tollgate-limited-apart` | the same on a manual clock, each address first admitted a second after the one before: every 429 announces its own wait, so no answer repeats |
//! | `governor` | tower_governor keyed by peer IP, one cell per nanosecond, burst `u32::MAX` |
//! | `governor-headers` | `governor` with tower_governor's `use_headers`: the same two headers as tollgate on every admitted response |
//! | `governor-limited` | tower_governor, one cell per hour, burst 1 |
//! | `ready-bare`, `tollgate-concurrency`, `tower-concurrency` | `poll_ready` before every call (which tower's `ConcurrencyLimit` needs: it takes its permit there), then: nothing; a per-IP `concurrency: { max_in_flight: 1000 }`, its slot given back at the end of the body; tower's `ConcurrencyLimitLayer::new(1000)`, one global limit, its permit given back when the response future ends |
//! | `grpc-bare`, `grpc-tollgate-limited` | `bare` and `tollgate-limited` called with gRPC requests (`content-type: application/grpc`): every request but each address's first gets a Trailers-Only `RESOURCE_EXHAUSTED` |
//! | `router-bare`, `router-tollgate`, `router-tollgate-limited`, `router-governor`, `router-governor-headers`, `router-governor-limited` | the same handler as an axum `Router`'s route, the layer added with `Router::layer`, as users add it, and the `Router` prepared as a server prepares it (`Router::with_state`, which `into_make_service_with_connect_info` calls): axum clones the layered service for each request, boxes its future, and boxes a response body that is not its own |
//!
//! The client address is one of 256 (`10.0.0.0/24`), in turn, so the limiters keep a small
//! hot set of keys. Figures are ns per request; subtract `bare` (`router-bare` for the
//! `router-` services, `grpc-bare` for the `grpc-` ones) for what the layer costs.
//!
//! ```text
//! cargo bench --bench layer
//! ```

#[path = "common/layers.rs"]
mod layers;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use criterion::Criterion;
use http::{Request, Response};
use http_body::Body as HttpBody;
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tollgate::clock::ManualClock;
use tollgate::RateLimitLayer;
use tower::{Layer, Service, ServiceExt};

/// The handler behind every layer: a static body, as the HTTP bench's server answers.
#[derive(Clone)]
struct Hello;

impl Service<Request<Body>> for Hello {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        // What axum makes of a handler's `&'static str`: the body and its content type.
        let mut response = Response::new(Body::from("hello, world\n"));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        std::future::ready(Ok(response))
    }
}

/// The `i`th request: `GET /` from one of 256 client addresses.
fn request(i: u32) -> Request<Body> {
    let peer = SocketAddr::from((Ipv4Addr::from(0x0a00_0000 | (i & 0xff)), 40_000));
    let mut request = Request::new(Body::empty());
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

/// Calls `service` once, reads the response body and drops the response; the inner service
/// answers at once.
fn one_request<S, B>(service: &mut S, i: u32)
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
    B: HttpBody,
{
    let mut context = Context::from_waker(Waker::noop());
    let future = pin!(service.call(request(i)));
    match future.poll(&mut context) {
        Poll::Ready(response) => {
            let response = response.expect("the services never fail");
            black_box(response.status());
            read_to_end(response.into_body(), &mut context);
        }
        Poll::Pending => panic!("every service here answers at once"),
    }
}

/// Reads `body` to its end, as hyper does when it writes a response.
fn read_to_end<B: HttpBody>(body: B, context: &mut Context<'_>) {
    let mut body = pin!(body);
    black_box(body.size_hint());
    loop {
        match body.as_mut().poll_frame(context) {
            Poll::Ready(Some(frame)) => {
                black_box(frame.is_ok());
            }
            Poll::Ready(None) => return,
            Poll::Pending => panic!("every body here is ready at once"),
        }
    }
}

/// What is done with each of the services measured.
trait Visit {
    fn visit<S, B>(&mut self, id: &str, service: S)
    where
        S: Service<Request<Body>, Response = Response<B>>,
        S::Error: std::fmt::Debug,
        B: HttpBody;
}

/// Times each service with criterion.
struct Time<'c>(&'c mut Criterion);

impl Visit for Time<'_> {
    fn visit<S, B>(&mut self, id: &str, mut service: S)
    where
        S: Service<Request<Body>, Response = Response<B>>,
        S::Error: std::fmt::Debug,
        B: HttpBody,
    {
        let mut i = 0u32;
        self.0.bench_function(id, |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                one_request(&mut service, i);
            })
        });
    }
}

/// Makes `requests` requests to the service named `id`, for an instruction counter to
/// watch (`scripts/bench-instructions.sh`), after [`WARM_UP`] requests it need not watch.
struct Count {
    id: String,
    requests: u32,
    /// Written over between requests (`LAYER_EVICT`): what the kernel's network stack does
    /// to a server's caches between two requests.
    evict: Vec<u8>,
}

impl Visit for Count {
    fn visit<S, B>(&mut self, id: &str, mut service: S)
    where
        S: Service<Request<Body>, Response = Response<B>>,
        S::Error: std::fmt::Debug,
        B: HttpBody,
    {
        if id == self.id {
            for i in 0..WARM_UP {
                one_request(&mut service, i);
            }
            for i in 0..self.requests {
                evict(&mut self.evict);
                counted_request(&mut service, i);
            }
        }
    }
}

/// Requests made before those counted: one from each client address, so that the limiters
/// know every key and each address has had its one admitted request, and the clocks have
/// started (quanta calibrates its clock on first use, for a time that varies from run to
/// run).
const WARM_UP: u32 = 256;

/// [`one_request`], under a name of its own for the counters to watch
/// (`valgrind --tool=callgrind --toggle-collect='layer::counted_request*'`).
#[inline(never)]
fn counted_request<S, B>(service: &mut S, i: u32)
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
    B: HttpBody,
{
    one_request(service, i);
}

/// Writes one byte of every cache line of `buffer`, so that a cache no larger than it keeps
/// none of the data the last request touched.
fn evict(buffer: &mut [u8]) {
    for line in buffer.chunks_mut(64) {
        line[0] = line[0].wrapping_add(1);
    }
    black_box(buffer);
}

/// Waits until `service` is ready (all of these are ready at once). The services here stay
/// ready, so the benches call them again and again after this one readiness check, which
/// tower does not promise in general.
fn ready<S: Service<Request<Body>>>(mut service: S) -> S {
    let mut context = Context::from_waker(Waker::noop());
    match pin!(service.ready()).poll(&mut context) {
        Poll::Ready(Ok(_)) => {}
        _ => panic!("every service here is ready at once"),
    }
    service
}

/// tollgate as in `tollgate-limited`, on a manual clock that stands still while it is
/// measured: each of the 256 addresses was first admitted a second after the one before, so
/// each is denied with its own wait, and a thread's last few answers never fit the next
/// request (the worst case of the answers tollgate keeps for repeated 429s).
fn tollgate_limited_apart(
) -> impl Service<Request<Body>, Response = Response<impl HttpBody>, Error = Infallible> {
    let clock = ManualClock::new();
    let limiter = tollgate::Limiter::with_store(
        layers::tollgate_rules(true),
        tollgate::store::MemoryStore::with_clock(clock.clone()),
    );
    let mut service = ready(RateLimitLayer::new(limiter).layer(Hello));
    for i in 0..256 {
        one_request(&mut service, i);
        clock.advance(Duration::from_secs(1));
    }
    service
}

/// Every service measured, by id.
fn each_service(visitor: &mut impl Visit) {
    visitor.visit("bare", ready(Hello));
    visitor.visit("tollgate", ready(layers::tollgate(false).layer(Hello)));
    visitor.visit(
        "tollgate-limited",
        ready(layers::tollgate(true).layer(Hello)),
    );
    visitor.visit("tollgate-limited-apart", tollgate_limited_apart());
    visitor.visit("governor", ready(layers::governor(false).layer(Hello)));
    visitor.visit(
        "governor-headers",
        ready(layers::governor_with_headers().layer(Hello)),
    );
    visitor.visit(
        "governor-limited",
        ready(layers::governor(true).layer(Hello)),
    );
    visitor.visit("router-bare", ready(served(router())));
    for (id, limited) in [
        ("router-tollgate", false),
        ("router-tollgate-limited", true),
    ] {
        visitor.visit(id, ready(served(router().layer(layers::tollgate(limited)))));
    }
    for (id, limited) in [
        ("router-governor", false),
        ("router-governor-limited", true),
    ] {
        visitor.visit(id, ready(served(router().layer(layers::governor(limited)))));
    }
    visitor.visit(
        "router-governor-headers",
        ready(served(router().layer(layers::governor_with_headers()))),
    );
    visitor.visit("ready-bare", ReadyEachCall(Hello));
    visitor.visit(
        "tollgate-concurrency",
        ReadyEachCall(layers::tollgate_concurrency().layer(Hello)),
    );
    visitor.visit(
        "tower-concurrency",
        ReadyEachCall(tower::limit::ConcurrencyLimitLayer::new(1_000).layer(Hello)),
    );
    visitor.visit("grpc-bare", ready(grpc(Hello)));
    visitor.visit(
        "grpc-tollgate-limited",
        ready(grpc(layers::tollgate(true).layer(Hello))),
    );
}

/// `S`, made ready before every call, as a server does: tower's `ConcurrencyLimit` takes its
/// permit in `poll_ready`, and panics on a call without one.
struct ReadyEachCall<S>(S);

impl<S: Service<Request<Body>>> Service<Request<Body>> for ReadyEachCall<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> S::Future {
        let mut context = Context::from_waker(Waker::noop());
        match self.0.poll_ready(&mut context) {
            Poll::Ready(Ok(())) => {}
            _ => panic!("every service here is ready at once"),
        }
        self.0.call(request)
    }
}

/// `service` called with gRPC requests (`content-type: application/grpc`), which tollgate
/// answers with a Trailers-Only `RESOURCE_EXHAUSTED` instead of a 429.
fn grpc<S: Service<Request<Body>>>(
    service: S,
) -> impl Service<Request<Body>, Response = S::Response, Error = S::Error> {
    service.map_request(|mut request: Request<Body>| {
        request.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/grpc"),
        );
        request
    })
}

/// The route of `examples/bench_server.rs`, in an axum `Router`, which is how users add a
/// layer: axum then turns the layer's responses into its own, and a body of another type
/// than axum's is boxed on the way.
fn router() -> Router {
    Router::new().route("/", get(|| async { "hello, world\n" }))
}

/// `router` as a server runs it: `into_make_service_with_connect_info` and `axum::serve`
/// call `Router::with_state` first, which turns every route (with its layers) into a
/// `Route` once. Called as it is, a `Router` does that again for every request: for a
/// layered route, that is building the layer's service each time.
fn served(router: Router) -> Router {
    router.with_state(())
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .without_plots()
}

/// With `LAYER_COUNT=<id>` (and optionally `LAYER_REQUESTS=<n>`, default 100,000), makes
/// that many requests to one service after [`WARM_UP`] more and exits, for
/// `scripts/bench-instructions.sh` and `scripts/bench-footprint.sh`; with
/// `LAYER_EVICT=<bytes>` as well, writes over that many bytes before each counted request.
/// Otherwise times every service with criterion.
fn main() {
    if let Ok(id) = std::env::var("LAYER_COUNT") {
        let requests = env_number("LAYER_REQUESTS").unwrap_or(100_000);
        let evict = vec![0; env_number("LAYER_EVICT").unwrap_or(0)];
        each_service(&mut Count {
            id,
            requests,
            evict,
        });
        return;
    }
    let mut criterion = config().configure_from_args();
    each_service(&mut Time(&mut criterion));
    criterion.final_summary();
}

/// The number in the environment variable `name`, if it holds one.
fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|n| n.parse().ok())
}
