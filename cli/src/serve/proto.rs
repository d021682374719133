//! Envoy's rate limit service, `envoy.service.ratelimit.v3`: prost messages, a tonic server
//! and a tonic client, generated from `proto/envoy/service/ratelimit/v3/rls.proto`.
//!
//! `build.rs` generates the code at build time, with no `protoc`: `protox` compiles the
//! vendored protos (`proto/`, see its README for their sources) and `tonic-prost-build` writes
//! the Rust code to `OUT_DIR`. Only the types that the service reaches are generated: the
//! request and response, `RateLimitDescriptor`, `RateLimitUnit` and `HeaderValue`. The
//! well-known types are `prost-types`; the `validate` and `udpa` annotations are options, which
//! the generated code does not read.
//!
//! The modules follow the proto packages:
//!
//! - `envoy::service::ratelimit::v3`: `RateLimitRequest`, `RateLimitResponse` (its nested
//!   types in `rate_limit_response`: `Code`, `DescriptorStatus`, `RateLimit`, `Quota`), the
//!   server (`rate_limit_service_server::{RateLimitService, RateLimitServiceServer}`) and the
//!   client (`rate_limit_service_client::RateLimitServiceClient`, generic over its transport:
//!   give it a `tonic::transport::Channel`).
//! - `envoy::extensions::common::ratelimit::v3`: `RateLimitDescriptor` and, in
//!   `rate_limit_descriptor`, its `Entry` and `RateLimitOverride`.
//! - `envoy::r#type::v3::RateLimitUnit` and `envoy::config::core::v3::HeaderValue`.
//!
//! The file has no path into the rest of the crate, so integration tests can include it with
//! `#[path = "../src/serve/proto.rs"] mod proto;`.

// The protos' comments are reStructuredText, which clippy reads as badly indented Markdown.
#![allow(clippy::doc_overindented_list_items, clippy::doc_lazy_continuation)]

include!(concat!(env!("OUT_DIR"), "/proto.rs"));

#[cfg(test)]
mod tests {
    use super::envoy::config::core::v3::HeaderValue;
    use super::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
    use super::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
    use super::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
    use super::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
    use super::envoy::service::ratelimit::v3::rate_limit_service_server::{
        RateLimitService, RateLimitServiceServer,
    };
    use super::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
    use tonic::transport::server::TcpIncoming;
    use tonic::transport::{Endpoint, Server};
    use tonic::{Request, Response, Status};

    /// Allows everything: one OK status per descriptor, and the domain echoed in a header so
    /// that the test sees the request arrived whole.
    struct AllowAll;

    #[tonic::async_trait]
    impl RateLimitService for AllowAll {
        async fn should_rate_limit(
            &self,
            request: Request<RateLimitRequest>,
        ) -> Result<Response<RateLimitResponse>, Status> {
            let request = request.into_inner();
            let status = DescriptorStatus {
                code: Code::Ok.into(),
                limit_remaining: request.hits_addend,
                ..DescriptorStatus::default()
            };
            Ok(Response::new(RateLimitResponse {
                overall_code: Code::Ok.into(),
                statuses: vec![status; request.descriptors.len()],
                response_headers_to_add: vec![HeaderValue {
                    key: "x-domain".to_owned(),
                    value: request.domain,
                    ..HeaderValue::default()
                }],
                ..RateLimitResponse::default()
            }))
        }
    }

    fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
        RateLimitDescriptor {
            entries: entries
                .iter()
                .map(|&(key, value)| Entry {
                    key: key.to_owned(),
                    value: value.to_owned(),
                })
                .collect(),
            ..RateLimitDescriptor::default()
        }
    }

    #[tokio::test]
    async fn the_generated_client_gets_the_generated_servers_answer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let server = Server::builder()
            .add_service(RateLimitServiceServer::new(AllowAll))
            .serve_with_incoming(TcpIncoming::from(listener));
        tokio::spawn(async move { server.await.expect("the server runs") });

        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .expect("valid endpoint")
            .connect()
            .await
            .expect("connect to the test server");
        let response = RateLimitServiceClient::new(channel)
            .should_rate_limit(RateLimitRequest {
                domain: "edge".to_owned(),
                descriptors: vec![
                    descriptor(&[("remote_address", "203.0.113.9")]),
                    descriptor(&[("endpoint", "login"), ("user_id", "42")]),
                ],
                hits_addend: 3,
            })
            .await
            .expect("ShouldRateLimit answers")
            .into_inner();

        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(response.statuses.len(), 2, "{response:?}");
        for status in &response.statuses {
            assert_eq!(status.code(), Code::Ok);
            assert_eq!(status.limit_remaining, 3, "hits_addend arrived");
        }
        assert_eq!(response.response_headers_to_add[0].key, "x-domain");
        assert_eq!(response.response_headers_to_add[0].value, "edge");
    }
}
