//! A tonic gRPC server behind tollgate: the `helloworld.Greeter` service and the standard
//! `grpc.health.v1.Health` service, rate-limited by the rules in a YAML file.
//!
//! ```text
//! cargo run --example grpc_server --features tonic
//! TOLLGATE_RULES=my-rules.yaml TOLLGATE_LISTEN=0.0.0.0:50051 cargo run --example grpc_server --features tonic
//! ```
//!
//! The limits come from `TOLLGATE_RULES` (default `rules.example.yaml`); a bad rules file
//! stops the server with the compiler's messages. Rules see a gRPC call as a `POST` to
//! `/package.Service/Method`, so the `path` key limits single methods, and `remote_address`
//! works because tonic records the peer (`TcpConnectInfo`).
//!
//! Over the limit, a call fails with `RESOURCE_EXHAUSTED`, and the metadata carries
//! `grpc-retry-pushback-ms` and `retry-after`. The same binary is also a small client:
//!
//! ```text
//! cargo run --example grpc_server --features tonic -- hello 50
//! ```
//!
//! calls `SayHello` 50 times on `TOLLGATE_LISTEN` and prints each outcome.

#[path = "common/greeter.rs"]
mod greeter;
#[path = "common/hello.rs"]
mod hello;

use greeter::greeter_client::GreeterClient;
use greeter::greeter_server::GreeterServer;
use greeter::HelloRequest;
use hello::Hello;
use std::process::ExitCode;
use tollgate::RateLimitLayer;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

#[tokio::main]
async fn main() -> ExitCode {
    let listen = std::env::var("TOLLGATE_LISTEN").unwrap_or_else(|_| "127.0.0.1:50051".to_owned());
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("hello") {
        let calls = args.next().and_then(|n| n.parse().ok()).unwrap_or(1);
        return client(&listen, calls).await;
    }
    let rules_path =
        std::env::var("TOLLGATE_RULES").unwrap_or_else(|_| "rules.example.yaml".to_owned());

    let layer = match RateLimitLayer::from_file(&rules_path) {
        Ok(layer) => layer,
        Err(errors) => {
            eprint!("{errors}");
            return ExitCode::FAILURE;
        }
    };
    let limits = layer.limiter().rules().limits().len();

    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<GreeterServer<Hello>>().await;

    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("cannot listen on {listen}: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("tollgate gRPC demo on {listen} with {limits} limits from {rules_path}");
    println!("try:");
    println!(
        "  cargo run --example grpc_server --features tonic -- hello 50   # SayHello 50 times"
    );
    println!("  grpcurl -plaintext -proto helloworld.proto -d '{{\"name\":\"you\"}}' {listen} helloworld.Greeter/SayHello");
    println!("    (helloworld.proto: see the header of examples/common/greeter.rs)");

    // `TcpIncoming` gives each request a `TcpConnectInfo`, which `remote_address` reads.
    let served = Server::builder()
        .layer(layer)
        .add_service(health_service)
        .add_service(GreeterServer::new(Hello))
        .serve_with_incoming(TcpIncoming::from(listener))
        .await;
    if let Err(error) = served {
        eprintln!("server error: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Calls `SayHello` `calls` times and prints each outcome with its rate-limit metadata.
async fn client(listen: &str, calls: u32) -> ExitCode {
    let mut client = match GreeterClient::connect(format!("http://{listen}")).await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("cannot connect to {listen}: {error}");
            return ExitCode::FAILURE;
        }
    };
    for i in 1..=calls {
        let request = HelloRequest {
            name: format!("call {i}"),
        };
        match client.say_hello(request).await {
            Ok(response) => {
                let remaining = metadata(response.metadata(), "x-ratelimit-remaining");
                let reply = &response.get_ref().message;
                println!("{i}: {reply} (remaining {remaining})");
            }
            Err(status) => {
                let pushback = metadata(status.metadata(), "grpc-retry-pushback-ms");
                println!(
                    "{i}: {:?}: {} (pushback {pushback} ms)",
                    status.code(),
                    status.message()
                );
            }
        }
    }
    ExitCode::SUCCESS
}

fn metadata<'m>(metadata: &'m tonic::metadata::MetadataMap, key: &str) -> &'m str {
    metadata
        .get(key)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-")
}
