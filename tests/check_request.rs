//! `Limiter::check_request_each` decides as `RateLimitLayer` does: the same requests at the
//! same instants, through the layer on one manual clock and through `check_request_each` on
//! another, get the same verdicts and the same delays, for every algorithm, and the limits'
//! own decisions agree with the verdict. (`tollgate simulate` replays traces through it.)

use axum::body::Body;
use http::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tollgate::algorithm::Algorithm;
use tollgate::clock::ManualClock;
use tollgate::rules::Rules;
use tollgate::source::PeerAddr;
use tollgate::store::MemoryStore;
use tollgate::{Limiter, RateLimitLayer};
use tower::{service_fn, Layer, ServiceExt};

/// A per-client limit of the algorithm under test, a per-user limit from a header on top
/// (two limits on one request: all or nothing), and clients behind a trusted proxy.
fn rules(algorithm: Algorithm) -> Rules {
    let extra = match algorithm {
        Algorithm::TokenBucket | Algorithm::Gcra => ", burst: 4",
        Algorithm::LeakyBucket => ", queue: 3",
        _ => "",
    };
    Rules::from_yaml(&format!(
        r"
domain: check
sources:
  user: {{ header: x-user }}
client_ip:
  trusted_proxies: [10.0.0.0/8]
descriptors:
  - key: remote_address
    rate_limit: {{ unit: second, requests_per_unit: 3, algorithm: {}{extra}, name: per-client }}
  - key: user
    rate_limit: {{ unit: second, requests_per_unit: 5, algorithm: fixed_window, name: per-user }}
",
        algorithm.name()
    ))
    .expect("valid rules")
}

/// The `i`th request: from one of five clients (some behind the proxy), some with a user.
fn request(i: u64) -> Request<Body> {
    let mut builder = Request::get(format!("/items/{}", i % 7));
    if i.is_multiple_of(3) {
        builder = builder.header("x-user", format!("user-{}", i % 2));
    }
    let peer: SocketAddr = if i % 5 < 2 {
        builder = builder.header("x-forwarded-for", format!("203.0.113.{}", i % 5));
        "10.0.0.1:4000".parse().unwrap()
    } else {
        format!("198.51.100.{}:4000", i % 5).parse().unwrap()
    };
    let mut request = builder.body(Body::empty()).unwrap();
    request.extensions_mut().insert(PeerAddr(peer));
    request
}

/// `delay` rounded up to a whole millisecond: tokio's timer, which the layer sleeps on,
/// counts in milliseconds.
fn whole_millis_up(delay: Duration) -> Duration {
    Duration::from_millis(u64::try_from(delay.as_nanos().div_ceil(1_000_000)).unwrap())
}

/// What happened to a request: its status, and how long the layer held it.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    admitted: bool,
    delay: Duration,
}

#[tokio::test(start_paused = true)]
async fn check_request_decides_as_the_layer_does_for_every_algorithm() {
    for algorithm in Algorithm::ALL {
        let layer_clock = ManualClock::new();
        let check_clock = ManualClock::new();
        let layer = RateLimitLayer::new(Limiter::with_store(
            rules(algorithm),
            MemoryStore::with_clock(layer_clock.clone()),
        ));
        let service = layer.layer(service_fn(|_: Request<Body>| async {
            Ok::<_, Infallible>(Response::new(Body::empty()))
        }));
        let limiter = Limiter::with_store(
            rules(algorithm),
            MemoryStore::with_clock(check_clock.clone()),
        );

        // 2,000 requests over about 20 s, 0 to 19 ms apart (a linear congruential walk).
        let (mut at, mut walk) = (ManualClock::START, 12_345_u64);
        let (mut admitted, mut denied, mut delayed) = (0, 0, 0);
        for i in 0..2000 {
            walk = walk.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            at = at.plus((walk >> 33) % 20 * 1_000_000);
            layer_clock.set(at);
            check_clock.set(at);

            let started = tokio::time::Instant::now();
            let response = service.clone().oneshot(request(i)).await.unwrap();
            let by_layer = Answer {
                admitted: response.status() == StatusCode::OK,
                delay: started.elapsed(),
            };
            // The simulator's way in: the verdict, and each limit's own decision.
            let (verdict, each) = limiter.check_request_each(&request(i)).await.unwrap();
            let refused = each
                .iter()
                .any(|limit| !limit.is_shadow() && !limit.decision().allowed);
            assert_eq!(
                refused,
                !verdict.is_allowed(),
                "{} request {i}",
                algorithm.name()
            );
            let by_check = Answer {
                admitted: verdict.is_allowed(),
                delay: whole_millis_up(verdict.delay()),
            };
            assert_eq!(by_check, by_layer, "{} request {i}", algorithm.name());
            match (by_check.admitted, by_check.delay.is_zero()) {
                (true, true) => admitted += 1,
                (true, false) => delayed += 1,
                (false, _) => denied += 1,
            }
        }
        // Every kind of verdict was met, so the comparison compared something.
        let name = algorithm.name();
        assert!(
            admitted + delayed > 100,
            "{name}: {admitted} + {delayed} admitted"
        );
        assert!(denied > 100, "{name}: {denied} denied");
        if algorithm == Algorithm::LeakyBucket {
            assert!(delayed > 100, "{name}: {delayed} delayed");
        }
    }
}
