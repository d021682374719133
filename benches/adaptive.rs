//! The adaptive limit against a backend of fixed capacity, over HTTP on loopback: a handler
//! that takes one of 4 workers for 20 ms (200 requests a second at most), called by 64
//! clients that each send a request as soon as their last one ends (5 ms after a `503`).
//! Run with no limit, then behind `load_shedding: { max_in_flight: adaptive }`: the
//! admitted requests' latency (median, p90, p99), the requests served and shed a second,
//! over the last half of each run.
//!
//! ```text
//! cargo bench --bench adaptive        # SECONDS=10 by default
//! ```

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tollgate::rules::Rules;
use tollgate::{Limiter, RateLimitLayer};

const WORKERS: usize = 4;
const WORK: Duration = Duration::from_millis(20);
const CLIENTS: usize = 64;

/// Serves the backend behind `rules`, or behind nothing.
async fn serve(rules: Option<&str>) -> SocketAddr {
    let workers = Arc::new(Semaphore::new(WORKERS));
    let mut router = Router::new().route(
        "/",
        get(move || {
            let workers = Arc::clone(&workers);
            async move {
                let _worker = workers.acquire().await.expect("open");
                tokio::time::sleep(WORK).await;
                "done"
            }
        }),
    );
    if let Some(yaml) = rules {
        let rules = Rules::from_yaml(yaml).expect("valid rules");
        router = router.layer(RateLimitLayer::new(Limiter::new(rules)));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("an address");
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await });
    addr
}

/// Runs the clients against `addr` for `run`; prints the second half's figures as a row.
async fn measure(name: &str, addr: SocketAddr, run: Duration) {
    let start = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        clients.spawn(async move {
            let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
            let uri: http::Uri = format!("http://{addr}/").parse().expect("uri");
            let (mut latencies, mut shed) = (Vec::new(), 0u64);
            while start.elapsed() < run {
                let sent = Instant::now();
                let response = client.get(uri.clone()).await.expect("a response");
                let status = response.status();
                response.into_body().collect().await.expect("a body");
                let counted = start.elapsed() > run / 2;
                if status == StatusCode::OK {
                    if counted {
                        latencies.push(sent.elapsed());
                    }
                } else {
                    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
                    shed += u64::from(counted);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            (latencies, shed)
        });
    }
    let (mut latencies, mut shed) = (Vec::new(), 0);
    for (mine, shed_here) in clients.join_all().await {
        latencies.extend(mine);
        shed += shed_here;
    }
    latencies.sort();
    let seconds = run.as_secs_f64() / 2.0;
    let at = |share: f64| {
        latencies[((latencies.len() as f64 * share) as usize).min(latencies.len() - 1)]
    };
    println!(
        "| {name} | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} | {:.0} |",
        at(0.5).as_secs_f64() * 1e3,
        at(0.9).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        latencies.len() as f64 / seconds,
        shed as f64 / seconds,
    );
}

fn main() {
    let seconds = std::env::var("SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let run = Duration::from_secs(seconds);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        println!(
            "{CLIENTS} clients, {WORKERS} workers of {} ms ({} a second at most), {seconds} s a run, the last half counted\n",
            WORK.as_millis(),
            WORKERS as u128 * 1000 / WORK.as_millis()
        );
        println!("| server | p50 | p90 | p99 | served/s | shed/s |");
        println!("|---|---:|---:|---:|---:|---:|");
        measure("no limit", serve(None).await, run).await;
        let adaptive = "domain: bench\nload_shedding: { max_in_flight: adaptive, min: 1, max: 500 }\n";
        measure("`max_in_flight: adaptive`", serve(Some(adaptive)).await, run).await;
    });
}
