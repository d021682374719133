//! A small demo API behind tollgate.
//!
//! ```text
//! cargo run --example server
//! TOLLGATE_RULES=my-rules.yaml TOLLGATE_LISTEN=0.0.0.0:8080 cargo run --example server
//! ```
//!
//! Every path and method answers 200 (so any rule can be tried with curl); the limits come
//! from `TOLLGATE_RULES` (default `rules.example.yaml`). A bad rules file stops the server
//! with the compiler's messages.

use axum::http::{Method, Uri};
use axum::Router;
use std::net::SocketAddr;
use std::process::ExitCode;
use tollgate::RateLimitLayer;

#[tokio::main]
async fn main() -> ExitCode {
    let rules_path =
        std::env::var("TOLLGATE_RULES").unwrap_or_else(|_| "rules.example.yaml".to_owned());
    let listen = std::env::var("TOLLGATE_LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());

    let layer = match RateLimitLayer::from_file(&rules_path) {
        Ok(layer) => layer,
        Err(errors) => {
            eprint!("{errors}");
            return ExitCode::FAILURE;
        }
    };
    let limits = layer.limiter().rules().limits().len();

    let app = Router::new().fallback(echo).layer(layer);
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("cannot listen on {listen}: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("tollgate demo on http://{listen} with {limits} limits from {rules_path}");
    println!("try:");
    println!("  curl -i http://{listen}/                      # X-Ratelimit-Limit / -Remaining");
    println!("  for i in $(seq 6); do curl -s -o /dev/null -w '%{{http_code}}\\n' -X POST http://{listen}/auth/login; done");
    println!("  curl -i -X DELETE http://{listen}/anything    # always 429 (requests_per_unit: 0)");
    println!("  for i in $(seq 12); do curl -s -o /dev/null -w '%{{http_code}} %{{time_total}}s\\n' http://{listen}/reports & done; wait   # queued, 5 a second");
    println!("  curl -i -H 'x-api-key: internal-ci' http://{listen}/   # never limited");

    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    if let Err(error) = axum::serve(listener, service).await {
        eprintln!("server error: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Answers every request with what was asked.
async fn echo(method: Method, uri: Uri) -> String {
    format!("{method} {uri}: ok\n")
}
