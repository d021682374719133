//! What the client layer adds to one request when nothing is limited, in process, without a
//! network: a server that answers `200` at once, behind nothing and behind
//! `RateLimitClientLayer`.
//!
//! | id | client |
//! |---|---|
//! | `bare` | the server called directly: the cost of building the request and the response |
//! | `layer` | behind `RateLimitClientLayer::new()`; the answer carries no rate-limit header |
//! | `layer-headers` | the same, the answer carrying what tollgate's server sends with `response.headers: both` (`X-Ratelimit-Limit`, `X-Ratelimit-Remaining`, `RateLimit-Policy`, `RateLimit`), quota to spare |
//! | `paced-headers` | `layer-headers` with `.pace()`: the quota read from every answer and every request booked against it |
//!
//! Each iteration builds a `GET` request, calls the service, polls the response future once
//! with a no-op waker (the server answers at once, so one poll finishes it) and drops the
//! response. Figures are ns per request; subtract `bare` for what the layer costs.
//!
//! ```text
//! cargo bench --features client --bench client
//! ```

use bytes::Bytes;
use criterion::Criterion;
use http::{HeaderValue, Request, Response};
use http_body_util::Empty;
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tollgate::client::RateLimitClientLayer;
use tower::{Layer, Service};

/// A server that answers `200` at once, with the rate-limit headers of `headers: both` when
/// `with_headers`.
#[derive(Clone)]
struct Server {
    with_headers: bool,
}

impl Service<Request<Empty<Bytes>>> for Server {
    type Response = Response<()>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<()>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Empty<Bytes>>) -> Self::Future {
        let mut response = Response::new(());
        if self.with_headers {
            let headers = response.headers_mut();
            let set = [
                ("x-ratelimit-limit", "1000000000"),
                ("x-ratelimit-remaining", "999999999"),
                ("ratelimit-policy", r#""per-client";q=1000000000;w=1"#),
                ("ratelimit", r#""per-client";r=999999999;t=1"#),
            ];
            for (name, value) in set {
                headers.insert(name, HeaderValue::from_static(value));
            }
        }
        std::future::ready(Ok(response))
    }
}

/// One request through `service`, to its end.
fn one_request<S>(service: &mut S)
where
    S: Service<Request<Empty<Bytes>>, Response = Response<()>>,
    S::Error: std::fmt::Debug,
{
    let request = Request::get("http://api.example.com/items")
        .body(Empty::new())
        .expect("a valid request");
    let mut context = Context::from_waker(Waker::noop());
    assert!(service.poll_ready(&mut context).is_ready());
    let future = pin!(service.call(black_box(request)));
    match future.poll(&mut context) {
        Poll::Ready(Ok(response)) => drop(black_box(response)),
        Poll::Ready(Err(error)) => panic!("request failed: {error:?}"),
        Poll::Pending => panic!("the server answers at once"),
    }
}

fn bench<S>(criterion: &mut Criterion, id: &str, mut service: S)
where
    S: Service<Request<Empty<Bytes>>, Response = Response<()>>,
    S::Error: std::fmt::Debug,
{
    criterion.bench_function(id, |b| b.iter(|| one_request(&mut service)));
}

fn main() {
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let plain = Server {
        with_headers: false,
    };
    let with_headers = Server { with_headers: true };
    bench(&mut criterion, "bare", plain.clone());
    bench(
        &mut criterion,
        "layer",
        RateLimitClientLayer::new().layer(plain),
    );
    let layer = RateLimitClientLayer::new();
    bench(
        &mut criterion,
        "layer-headers",
        layer.layer(with_headers.clone()),
    );
    let paced = RateLimitClientLayer::new().pace();
    bench(&mut criterion, "paced-headers", paced.layer(with_headers));
    criterion.final_summary();
}
