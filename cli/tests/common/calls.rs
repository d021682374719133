//! What the tests of `tollgate serve` that call it over gRPC share: a descriptor, a client,
//! a call answered. Include it next to the protos: `#[path = "../src/serve/proto.rs"] mod
//! proto;` then `#[path = "common/calls.rs"] mod calls;`.
#![allow(dead_code)] // Each test file uses its own part.

use crate::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use crate::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use crate::proto::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use crate::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::transport::{Channel, Endpoint};

/// A descriptor of `entries`, `(key, value)` in order.
pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(key, value)| Entry {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    }
}

/// A client of the gRPC address `grpc`, in plaintext.
pub async fn client(grpc: &str) -> RateLimitServiceClient<Channel> {
    let channel = Endpoint::from_shared(format!("http://{grpc}"))
        .expect("an endpoint")
        .connect()
        .await
        .expect("connected");
    RateLimitServiceClient::new(channel)
}

/// The answer to `request`.
pub async fn ask(
    client: &mut RateLimitServiceClient<Channel>,
    request: RateLimitRequest,
) -> RateLimitResponse {
    client
        .should_rate_limit(request)
        .await
        .expect("an answer")
        .into_inner()
}
