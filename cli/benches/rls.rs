//! `ShouldRateLimit` calls per second and their latency at concurrency 1, 8 and 64: through
//! `tollgate serve` (a real process, a real gRPC client over loopback, in plaintext and over
//! TLS), and the same decisions in process (`Limiter::check_descriptors`), with the memory
//! store and with Redis (a `redis-server` the bench starts).
//!
//! ```text
//! cargo bench -p tollgate-cli --bench rls            # SECONDS=3 by default, per row
//! ```
//!
//! Each call has one descriptor, `remote_address` of one of 256 addresses in turn, under a
//! limit of a billion a second: nothing is refused, every call is decided. Client and
//! server share the machine's cores.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../src/serve/proto.rs"]
#[allow(dead_code)]
mod proto;
#[path = "../../tests/common/redis_server.rs"]
#[allow(dead_code)]
mod redis_server;

use common::Served;
use proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use proto::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use proto::envoy::service::ratelimit::v3::RateLimitRequest;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tollgate::envoy::Descriptor;
use tollgate::rules::{KeySources, Rules};
use tollgate::store::{MemoryStore, RedisStore, Store};
use tollgate::Limiter;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

const RULES: &str = r"
domain: bench
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 1000000000, algorithm: gcra, burst: 1000000000 }
";

const CONCURRENCY: [usize; 3] = [1, 8, 64];

/// The address of the `i`th call.
fn address(i: usize) -> String {
    format!("10.0.0.{}", i % 256)
}

/// What one row measured: calls a second, p50 and p99 in microseconds.
struct Row {
    calls_per_second: f64,
    p50: u64,
    p99: u64,
}

/// Runs `concurrency` workers calling `call(i)` for `seconds`, and measures them.
async fn measure<F, Fut>(concurrency: usize, seconds: Duration, call: F) -> Row
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for worker in 0..concurrency {
        let call = call.clone();
        workers.spawn(async move {
            let mut latencies = Vec::new();
            let mut i = worker;
            while started.elapsed() < seconds {
                let sent = Instant::now();
                call(i).await;
                latencies.push(u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX));
                i += concurrency;
            }
            latencies
        });
    }
    let mut latencies = Vec::new();
    while let Some(done) = workers.join_next().await {
        latencies.extend(done.expect("a worker"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let at = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
    Row {
        calls_per_second: latencies.len() as f64 / elapsed,
        p50: at(50),
        p99: at(99),
    }
}

/// A channel to `tollgate serve`'s gRPC address `grpc`, in plaintext.
async fn plaintext(grpc: &str) -> Channel {
    Endpoint::from_shared(format!("http://{grpc}"))
        .expect("an endpoint")
        .connect()
        .await
        .expect("connected")
}

/// A certificate for `localhost` and its key, signed by a CA made for the bench: the
/// files in `directory`, and the CA's PEM.
fn certificates(directory: &std::path::Path) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("a key")).expect("a CA");
    let key = KeyPair::generate().expect("a key");
    let params = CertificateParams::new(vec!["localhost".to_owned()]).expect("parameters");
    let cert = params.signed_by(&key, &ca).expect("signed");
    let (cert_file, key_file) = (directory.join("server.pem"), directory.join("server.key"));
    std::fs::write(&cert_file, cert.pem()).expect("written");
    std::fs::write(&key_file, key.serialize_pem()).expect("written");
    let path = |p: std::path::PathBuf| p.to_str().expect("a UTF-8 path").to_owned();
    (path(cert_file), path(key_file), ca.pem())
}

/// A channel to `tollgate serve`'s gRPC address `grpc` over TLS, trusting `ca`.
async fn over_tls(grpc: &str, ca: &str) -> Channel {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    Endpoint::from_shared(format!("https://{grpc}"))
        .expect("an endpoint")
        .tls_config(tls)
        .expect("a TLS configuration")
        .connect()
        .await
        .expect("connected")
}

async fn through_the_service(channel: Channel, concurrency: usize, seconds: Duration) -> Row {
    let client = RateLimitServiceClient::new(channel);
    measure(concurrency, seconds, move |i| {
        let mut client = client.clone();
        async move {
            let request = RateLimitRequest {
                domain: "bench".to_owned(),
                descriptors: vec![RateLimitDescriptor {
                    entries: vec![Entry {
                        key: "remote_address".to_owned(),
                        value: address(i),
                    }],
                    ..RateLimitDescriptor::default()
                }],
                hits_addend: 1,
            };
            client.should_rate_limit(request).await.expect("an answer");
        }
    })
    .await
}

async fn in_process<St: Store>(limiter: Limiter<St>, concurrency: usize, seconds: Duration) -> Row {
    measure(concurrency, seconds, move |i| {
        let limiter = limiter.clone();
        async move {
            let value = address(i);
            let entries = [("remote_address", value.as_str())];
            let call = [Descriptor {
                entries: &entries,
                cost: 1,
                limit: None,
            }];
            limiter.check_descriptors(&call).await;
        }
    })
    .await
}

fn print(label: &str, concurrency: usize, row: &Row) {
    println!(
        "| {label} | {concurrency} | {:.0} | {} | {} |",
        row.calls_per_second, row.p50, row.p99
    );
}

#[tokio::main]
async fn main() {
    let seconds = Duration::from_secs(
        std::env::var("SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3),
    );
    let file = common::temp_file(RULES, ".yaml");
    let rules = || Rules::from_yaml_with(RULES, KeySources::Given).expect("valid rules");
    let redis = redis_server::RedisServer::start();

    println!("| decided | concurrency | calls/s | p50 µs | p99 µs |");
    println!("|---|---:|---:|---:|---:|");
    let memory = Limiter::with_store(rules(), MemoryStore::new());
    for concurrency in CONCURRENCY {
        print(
            "in process, memory",
            concurrency,
            &in_process(memory.clone(), concurrency, seconds).await,
        );
    }
    let service = Served::start(file.path(), &[]);
    for concurrency in CONCURRENCY {
        print(
            "tollgate serve, memory",
            concurrency,
            &through_the_service(plaintext(&service.grpc).await, concurrency, seconds).await,
        );
    }
    drop(service);
    let directory = tempfile::tempdir().expect("a temporary directory");
    let (cert, key, ca) = certificates(directory.path());
    let service = Served::start(file.path(), &["--tls-cert", &cert, "--tls-key", &key]);
    for concurrency in CONCURRENCY {
        let channel = over_tls(&service.grpc, &ca).await;
        print(
            "tollgate serve over TLS, memory",
            concurrency,
            &through_the_service(channel, concurrency, seconds).await,
        );
    }
    drop(service);
    let store = RedisStore::builder(redis.url())
        .connect()
        .await
        .expect("Redis");
    let shared = Limiter::with_store(rules(), store);
    for concurrency in CONCURRENCY {
        print(
            "in process, Redis",
            concurrency,
            &in_process(shared.clone(), concurrency, seconds).await,
        );
    }
    let service = Served::start(file.path(), &["--redis", &redis.url()]);
    for concurrency in CONCURRENCY {
        print(
            "tollgate serve, Redis",
            concurrency,
            &through_the_service(plaintext(&service.grpc).await, concurrency, seconds).await,
        );
    }
}
